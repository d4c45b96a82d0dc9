//! The upstream's tools as the engine's catalog: by default every tool is deferred to a
//! person; under `--trust hints` a tool the upstream calls read-only (and not also
//! destructive) runs at once; the agent's rules override both.

use crate::McpError;
use assent_confirm::agents::HostTool;
use assent_tools::{AgentPolicy, RuleAction, ToolMode, ToolRegistry, ToolSpec};
use rmcp::model::Tool;
use serde_json::Value;
use std::collections::BTreeSet;

/// The target kind of every gated MCP call; the target id is the server's name.
pub const TARGET_KIND: &str = "mcp";

/// Whose word decides what a tool may do without a person: the operator's alone
/// (`none`, the default), or also the upstream's annotations (`hints`). Annotations are
/// hints from the server, not guarantees; under `none` they are passed on to the client
/// and never obeyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trust {
    /// Every tool is deferred and none is retried from its hints; only the agent's
    /// rules let a tool run at once.
    #[default]
    None,
    /// `readOnlyHint: true` runs a tool at once unless `destructiveHint: true`
    /// contradicts it (then it is deferred); `idempotentHint: true` makes an approved
    /// call that a crash left in doubt simply run again.
    Hints,
}

impl Trust {
    /// The name `--trust` takes and the catalog records: `none` or `hints`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Hints => "hints",
        }
    }
}

/// Routing from the annotations, when `trust` lets them count.
fn mode(tool: &Tool, trust: Trust) -> ToolMode {
    let hints = tool.annotations.as_ref();
    let read_only = hints.and_then(|a| a.read_only_hint) == Some(true);
    let destructive = hints.and_then(|a| a.destructive_hint) == Some(true);
    if trust == Trust::Hints && read_only && !destructive {
        ToolMode::Immediate
    } else {
        ToolMode::Deferred
    }
}

/// Whether a call of `tool` may simply run again (a crash left it in doubt; no record
/// of it need be committed before it runs): its `idempotentHint`, or a `readOnlyHint`
/// without `destructiveHint` (a read repeated changes nothing), when `trust` lets
/// hints count.
pub fn idempotent(tool: &Tool, trust: Trust) -> bool {
    let Some(hints) = tool.annotations.as_ref().filter(|_| trust == Trust::Hints) else {
        return false;
    };
    hints.idempotent_hint == Some(true)
        || (hints.read_only_hint == Some(true) && hints.destructive_hint != Some(true))
}

/// The routing of `tool` for the agent of `policy`: its rules first, then the mode.
pub fn route(policy: &AgentPolicy, spec: &ToolSpec) -> RuleAction {
    policy.route(spec)
}

/// The catalog of `tools`: each with its description and input schema, deferred or
/// (under `--trust hints`, by its annotations) immediate, summarised as
/// `title(key: value, ...)`. A tool in `review` (its definition changed since a person
/// accepted it) is asked about whatever the agent's rules allow ([`ToolMode::Review`]).
pub fn registry(
    tools: &[Tool],
    trust: Trust,
    review: &BTreeSet<String>,
) -> Result<ToolRegistry, McpError> {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        register(
            &mut registry,
            tool,
            trust,
            review.contains(tool.name.as_ref()),
        )?;
    }
    Ok(registry)
}

/// The catalog of a server's gateway (`server_prefix`: `SERVER__`), whose client calls
/// the upstream's tools by `prefix` and their name (`SERVER__` behind a `--config` gateway, empty for a
/// single server): [`registry`] of the tools so named (`review` names them so too).
/// Each tool is also registered under the other mode's name (the upstream's bare name
/// behind `--config`, `SERVER__tool` for a single server) unless a tool already has
/// that name: the two modes share the agent's host for the server, so a job of an item
/// recorded under the other name (by an earlier release, or before the operator
/// switched between `--server` and `--config`) still finds its tool when it runs. No
/// client call reaches the other name: the gateway takes only the names it lists.
pub(crate) fn gateway_registry(
    tools: &[Tool],
    server_prefix: &str,
    prefix: &str,
    trust: Trust,
    review: &BTreeSet<String>,
) -> Result<ToolRegistry, McpError> {
    let mut registry = ToolRegistry::new();
    let other_prefix = if prefix.is_empty() {
        server_prefix.to_owned()
    } else {
        String::new()
    };
    for (own, other) in [(prefix, false), (other_prefix.as_str(), true)] {
        for tool in tools {
            let mut named = tool.clone();
            named.name = format!("{own}{}", tool.name).into();
            if other && registry.get(&named.name).is_some() {
                continue;
            }
            let in_review = review.contains(&format!("{prefix}{}", tool.name));
            register(&mut registry, &named, trust, in_review)?;
        }
    }
    Ok(registry)
}

/// The catalog a gateway last recorded for its agent ([`HostTool`]s, each with its
/// host's trust and review state), as the engine's registry: what another process
/// (`assent tools`) lists for the agent without starting the upstream, each tool under
/// the name it was recorded by (the client's: `SERVER__tool` behind a `--config`
/// gateway). Tools of several gateways meet in one registry, so a name two of them
/// list is an error.
pub fn recorded_registry(recorded: &[HostTool]) -> Result<ToolRegistry, McpError> {
    let mut registry = ToolRegistry::new();
    for tool in recorded {
        let mut listed: Tool =
            serde_json::from_value(tool.definition.clone()).map_err(|e| McpError::Catalog {
                tool: tool.tool_name.clone(),
                reason: format!("its recorded definition is not an MCP tool: {e}"),
            })?;
        listed.name = tool.tool_name.clone().into();
        let trust = match tool.trust.as_deref() {
            Some(name) if name == Trust::Hints.as_str() => Trust::Hints,
            _ => Trust::None,
        };
        register(&mut registry, &listed, trust, tool.changed())?;
    }
    Ok(registry)
}

/// Adds `tool` to `registry`: deferred or (under `--trust hints`, by its annotations)
/// immediate, or [`ToolMode::Review`] when it is `in_review`.
fn register(
    registry: &mut ToolRegistry,
    tool: &Tool,
    trust: Trust,
    in_review: bool,
) -> Result<(), McpError> {
    let description = tool.description.as_deref().unwrap_or_default();
    let schema = Value::Object((*tool.input_schema).clone());
    let mode = if in_review {
        ToolMode::Review
    } else {
        mode(tool, trust)
    };
    // The title is the spec's data: every summary of a call (a wake's, an edit's, an
    // undo's, in any process) names the tool as the upstream titled it.
    let spec =
        ToolSpec::new(tool.name.to_string(), description, mode, schema).with_title(title(tool));
    registry.register(spec).map_err(|e| McpError::Catalog {
        tool: tool.name.to_string(),
        reason: e.to_string(),
    })
}

/// What a deferred tool's description says after the upstream's own text.
pub const DEFERRED_NOTE: &str = "(Through Assent: a call of this tool waits for a person's \
review; the answer says it is queued, with the change set id, and the tool's result, as \
text, arrives only after review.)";

/// `tool` as the client sees it when the agent's calls of it are `action`: a tool that
/// runs at once as the upstream listed it (its structured result is passed through); a
/// deferred one without its `outputSchema`, since no answer before the review can hold
/// the structured result it promises, and with [`DEFERRED_NOTE`] in its description.
pub fn listed(tool: &Tool, action: RuleAction) -> Tool {
    let mut tool = tool.clone();
    if action == RuleAction::Ask {
        tool.output_schema = None;
        tool.description = Some(match tool.description.as_deref() {
            Some(text) if !text.trim().is_empty() => {
                format!("{}\n\n{DEFERRED_NOTE}", text.trim_end()).into()
            }
            _ => DEFERRED_NOTE.into(),
        });
    }
    tool
}

/// The title a person reads for `tool`: its title, its annotations' title, its name.
pub(crate) fn title(tool: &Tool) -> String {
    tool.title
        .clone()
        .or_else(|| tool.annotations.as_ref().and_then(|a| a.title.clone()))
        .unwrap_or_else(|| tool.name.to_string())
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

    fn modes(tools: &[Tool], trust: Trust) -> Vec<ToolMode> {
        let registry = registry(tools, trust, &BTreeSet::new()).expect("a catalog");
        tools
            .iter()
            .map(|tool| registry.get(&tool.name).expect("registered").mode)
            .collect()
    }

    fn recorded(tool: &Tool, trust: Trust, changed: bool) -> HostTool {
        let definition = serde_json::to_value(tool).expect("a tool as JSON");
        let hash = assent_confirm::agents::definition_hash(&definition);
        HostTool {
            host: "mcp_notes".into(),
            tool_name: tool.name.to_string(),
            agent_id: Some("bot".into()),
            trust: Some(trust.as_str().into()),
            input_schema: definition["inputSchema"].clone(),
            definition,
            pinned_hash: if changed {
                "older".into()
            } else {
                hash.clone()
            },
            hash,
            first_seen_at: time::OffsetDateTime::UNIX_EPOCH,
            updated_at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[test]
    fn a_recorded_catalog_routes_as_its_gateway_did() {
        let read = tool("read_file", Some(true));
        let write = tool("write_file", None);
        let catalog = [
            recorded(&read, Trust::Hints, false),
            recorded(&write, Trust::Hints, false),
            recorded(&tool("edit_file", Some(true)), Trust::Hints, true),
            recorded(&tool("list_dir", Some(true)), Trust::None, false),
        ];
        let registry = recorded_registry(&catalog).expect("a catalog");
        let mode = |name: &str| registry.get(name).expect("registered").mode;
        assert_eq!(mode("read_file"), ToolMode::Immediate);
        assert_eq!(mode("write_file"), ToolMode::Deferred);
        assert_eq!(mode("edit_file"), ToolMode::Review);
        assert_eq!(mode("list_dir"), ToolMode::Deferred);
        assert_eq!(
            registry.get("read_file").expect("registered").args_schema,
            Value::Object((*read.input_schema).clone())
        );
        let twice = [catalog[0].clone(), catalog[0].clone()];
        assert!(recorded_registry(&twice).is_err(), "a name listed twice");
    }

    #[test]
    fn by_default_no_hint_runs_a_tool_at_once() {
        let tools = [
            tool("read_file", Some(true)),
            tool("write_file", Some(false)),
            tool("move_file", None),
        ];
        assert_eq!(modes(&tools, Trust::None), [ToolMode::Deferred; 3]);
    }

    #[test]
    fn trusted_hints_run_a_read_only_tool_at_once_unless_also_destructive() {
        let contradictory = tool("wipe", None)
            .with_annotations(ToolAnnotations::default().read_only(true).destructive(true));
        let tools = [
            tool("read_file", Some(true)),
            tool("write_file", Some(false)),
            tool("move_file", None),
            contradictory,
        ];
        assert_eq!(
            modes(&tools, Trust::Hints),
            [
                ToolMode::Immediate,
                ToolMode::Deferred,
                ToolMode::Deferred,
                ToolMode::Deferred
            ]
        );
    }

    #[test]
    fn an_idempotent_hint_counts_only_when_hints_are_trusted() {
        let retried =
            tool("put", None).with_annotations(ToolAnnotations::default().idempotent(true));
        assert!(!idempotent(&retried, Trust::None));
        assert!(idempotent(&retried, Trust::Hints));
        assert!(!idempotent(&tool("append", None), Trust::Hints));
    }

    #[test]
    fn a_trusted_read_only_hint_is_idempotent_unless_also_destructive() {
        let read = |destructive| {
            tool("read", None).with_annotations(
                ToolAnnotations::default()
                    .read_only(true)
                    .destructive(destructive),
            )
        };
        assert!(idempotent(&read(false), Trust::Hints));
        assert!(!idempotent(&read(false), Trust::None));
        // Contradicting hints are taken at their worst.
        assert!(!idempotent(&read(true), Trust::Hints));
    }

    #[test]
    fn a_deferred_tool_is_listed_without_its_output_schema() {
        let Value::Object(output) = json!({"type": "object", "required": ["content"],
            "properties": {"content": {"type": "string"}}})
        else {
            unreachable!("an object literal")
        };
        let mut original = tool("write_file", Some(false));
        original.output_schema = Some(Arc::new(output));
        let now = listed(&original, RuleAction::Allow);
        assert_eq!(now, original);
        let later = listed(&original, RuleAction::Ask);
        assert_eq!(later.output_schema, None);
        assert_eq!(later.input_schema, original.input_schema);
        assert_eq!(later.annotations, original.annotations);
        let description = later.description.as_deref().unwrap_or_default();
        assert!(description.starts_with("A tool.\n\n"), "{description}");
        assert!(description.ends_with(DEFERRED_NOTE), "{description}");
        let bare = Tool::new("x", "", original.input_schema.clone());
        assert_eq!(
            listed(&bare, RuleAction::Ask).description.as_deref(),
            Some(DEFERRED_NOTE)
        );
    }

    #[test]
    fn the_agents_rules_override_the_hint() {
        let trusted = registry(
            &[tool("read_file", Some(true))],
            Trust::Hints,
            &BTreeSet::new(),
        )
        .expect("a catalog");
        let spec = trusted.get("read_file").expect("registered");
        let ask = assent_tools::ToolRule::new("read_*", RuleAction::Ask).expect("rule");
        let deny = assent_tools::ToolRule::new("*", RuleAction::Deny).expect("rule");
        let policy = AgentPolicy::new(["mcp"]);
        assert_eq!(route(&policy, spec), RuleAction::Allow);
        assert_eq!(route(&policy.clone().with_rule(ask), spec), RuleAction::Ask);
        assert_eq!(route(&policy.with_rule(deny), spec), RuleAction::Deny);
        let untrusted = registry(
            &[tool("read_file", Some(true))],
            Trust::None,
            &BTreeSet::new(),
        )
        .expect("a catalog");
        let spec = untrusted.get("read_file").expect("registered");
        let allow = assent_tools::ToolRule::new("read_*", RuleAction::Allow).expect("rule");
        let policy = AgentPolicy::new(["mcp"]);
        assert_eq!(route(&policy, spec), RuleAction::Ask);
        assert_eq!(route(&policy.with_rule(allow), spec), RuleAction::Allow);
    }

    #[test]
    fn arguments_are_checked_against_the_input_schema() {
        let registry = registry(&[tool("write_file", None)], Trust::None, &BTreeSet::new())
            .expect("a catalog");
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

    #[test]
    fn a_summary_names_the_tool_by_its_title_and_shows_its_arguments() {
        let mut titled = tool("write_file", None);
        titled.title = Some("Write File".into());
        let registry = registry(
            &[titled, tool("read_file", None)],
            Trust::None,
            &BTreeSet::new(),
        )
        .expect("a catalog");
        let args = json!({"path": "/tmp/a", "content": "x".repeat(100)});
        let text = registry.summarize("write_file", &args, None);
        assert!(text.starts_with("Write File(content: \"xxx"), "{text}");
        assert!(text.ends_with("xx\", path: \"/tmp/a\")"), "{text}");
        assert_eq!(
            registry.summarize("read_file", &json!({"path": "/a"}), None),
            "read_file(path: \"/a\")"
        );
    }
}
