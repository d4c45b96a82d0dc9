//! The upstream's tools as the engine's catalog: read-only tools run at once, every
//! other tool is deferred to a person, and the agent's rules override both.

use crate::McpError;
use assent_tools::{
    AgentPolicy, RuleAction, SummaryContext, ToolMode, ToolRegistry, ToolSpec, fallback_summary,
};
use rmcp::model::Tool;
use serde_json::Value;

/// The target kind of every gated MCP call; the target id is the server's name.
pub const TARGET_KIND: &str = "mcp";

/// The longest argument value a summary shows before cutting it.
const SUMMARY_VALUE_CHARS: usize = 60;

tokio::task_local! {
    /// The title (or name) of the tool whose call is being planned. A summary is a
    /// plain `fn` of the arguments, and the gateway's tools are only known at run
    /// time, so the gateway scopes the name around each wake (one call per wake).
    pub(crate) static TOOL_TITLE: String;
}

/// Routing from the annotations alone: `readOnlyHint: true` runs at once.
fn mode(tool: &Tool) -> ToolMode {
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    if read_only {
        ToolMode::Immediate
    } else {
        ToolMode::Deferred
    }
}

/// The routing of `tool` for the agent of `policy`: its rules first, then the mode.
pub fn route(policy: &AgentPolicy, spec: &ToolSpec) -> RuleAction {
    policy.route(spec)
}

/// The catalog of `tools`: each with its description and input schema, routed by its
/// `readOnlyHint`, summarised as `title(key: value, ...)`.
pub fn registry(tools: &[Tool]) -> Result<ToolRegistry, McpError> {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        let description = tool.description.as_deref().unwrap_or_default();
        let schema = Value::Object((*tool.input_schema).clone());
        let spec = ToolSpec::new(tool.name.to_string(), description, mode(tool), schema)
            .with_summary(summary);
        registry.register(spec).map_err(|e| McpError::Catalog {
            tool: tool.name.to_string(),
            reason: e.to_string(),
        })?;
    }
    Ok(registry)
}

/// The title a person reads for `tool`: its title, its annotations' title, its name.
pub(crate) fn title(tool: &Tool) -> String {
    tool.title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
        .unwrap_or_else(|| tool.name.to_string())
}

/// `Write File(path: "/tmp/a", content: "hello")`: the tool's title and its
/// arguments, each on one line and a long one cut in the middle, so that where a path
/// ends and what was appended to a content stay in sight.
fn summary(args: &Value, _context: Option<&dyn SummaryContext>) -> String {
    let Ok(title) = TOOL_TITLE.try_with(Clone::clone) else {
        return fallback_summary("call", args);
    };
    let Value::Object(map) = args else {
        return format!("{title}()");
    };
    let parts: Vec<String> = map
        .iter()
        .map(|(key, value)| {
            let text = value.to_string();
            let shown = assent_domain::head_and_tail(&text, SUMMARY_VALUE_CHARS);
            format!(
                "{}: {}",
                assent_domain::one_line(key),
                assent_domain::one_line(&shown)
            )
        })
        .collect();
    format!("{title}({})", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ToolAnnotations;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(name: &str, read_only: Option<bool>) -> Tool {
        let schema = json!({"type": "object", "required": ["path"],
            "properties": {"path": {"type": "string"}}});
        let Value::Object(schema) = schema else {
            unreachable!("an object literal")
        };
        let mut tool = Tool::new(name.to_owned(), "A tool.", Arc::new(schema));
        if let Some(read_only) = read_only {
            tool = tool.with_annotations(ToolAnnotations::default().read_only(read_only));
        }
        tool
    }

    #[test]
    fn only_a_read_only_hint_runs_at_once() {
        let tools = [
            tool("read_file", Some(true)),
            tool("write_file", Some(false)),
            tool("move_file", None),
        ];
        let registry = registry(&tools).expect("a catalog");
        let modes: Vec<ToolMode> = ["read_file", "write_file", "move_file"]
            .iter()
            .map(|name| registry.get(name).expect("registered").mode)
            .collect();
        assert_eq!(
            modes,
            [ToolMode::Immediate, ToolMode::Deferred, ToolMode::Deferred]
        );
    }

    #[test]
    fn the_agents_rules_override_the_hint() {
        let registry = registry(&[tool("read_file", Some(true))]).expect("a catalog");
        let spec = registry.get("read_file").expect("registered");
        let ask = assent_tools::ToolRule::new("read_*", RuleAction::Ask).expect("rule");
        let deny = assent_tools::ToolRule::new("*", RuleAction::Deny).expect("rule");
        let policy = AgentPolicy::new(["mcp"]);
        assert_eq!(route(&policy, spec), RuleAction::Allow);
        assert_eq!(route(&policy.clone().with_rule(ask), spec), RuleAction::Ask);
        assert_eq!(route(&policy.with_rule(deny), spec), RuleAction::Deny);
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let registry = registry(&[tool("write_file", None)]).expect("a catalog");
        assert!(
            registry
                .validate_args("write_file", &json!({"path": "a"}))
                .is_ok()
        );
        let error = registry
            .validate_args("write_file", &json!({"path": 3}))
            .expect_err("a number is no path");
        assert!(error.to_string().contains("write_file"), "{error}");
    }

    #[tokio::test]
    async fn a_summary_names_the_tool_and_its_arguments() {
        let args = json!({"path": "/tmp/a", "content": "x".repeat(100)});
        let text = TOOL_TITLE
            .scope("Write File".to_owned(), async { summary(&args, None) })
            .await;
        let content =
            assent_domain::head_and_tail(&args["content"].to_string(), SUMMARY_VALUE_CHARS)
                .into_owned();
        assert_eq!(
            text,
            format!("Write File(content: {content}, path: \"/tmp/a\")")
        );
        assert!(content.ends_with("xx\""), "{content}");
        let appended = json!({"path": format!("/home/u/{}/.ssh/authorized_keys", "d".repeat(200)),
            "content": format!("{}\nssh-ed25519 AAAA attacker@evil", "k".repeat(300))});
        let text = TOOL_TITLE
            .scope("Write File".to_owned(), async { summary(&appended, None) })
            .await;
        assert!(text.contains("attacker@evil\""), "{text}");
        assert!(text.contains(".ssh/authorized_keys\""), "{text}");
        assert_eq!(summary(&args, None), "call(content, path)");
    }
}
