//! The tools an agent may call, as the definitions each SDK's `tools` parameter takes.

use crate::{ChangesetError, Dialect};
use assent_tools::{AgentPolicy, RuleAction, ToolMode, ToolRegistry, ToolSpec};
use serde_json::{Value, json};

/// The tools of `registry` that `policy` does not deny, as `format` wants them: for
/// `openai`, `responses` and `anthropic` the array their `tools` parameter takes; for
/// `gemini` one `Tool` (`functionDeclarations`); for `mcp` a `tools/list` result
/// (`{"tools": [...]}`) whose annotations say how Assent routes each tool for this
/// agent. LangChain's `bind_tools` takes the `openai` form; the Vercel AI SDK defines
/// tools in code, so neither has a format of its own.
pub fn tool_definitions(
    registry: &ToolRegistry,
    policy: &AgentPolicy,
    format: Dialect,
) -> Result<Value, ChangesetError> {
    let tools = registry.iter().filter_map(|spec| match policy.route(spec) {
        RuleAction::Deny => None,
        routed => Some((spec, routed)),
    });
    Ok(match format {
        Dialect::OpenAi => tools
            .map(|(t, _)| {
                json!({
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.args_schema},
                })
            })
            .collect(),
        // Responses treats function tools as strict unless told otherwise, and strict
        // mode refuses schemas with optional properties.
        Dialect::Responses => tools
            .map(|(t, _)| {
                json!({
                    "type": "function", "name": t.name, "description": t.description,
                    "parameters": t.args_schema, "strict": false,
                })
            })
            .collect(),
        Dialect::Anthropic => tools
            .map(|(t, _)| json!({"name": t.name, "description": t.description, "input_schema": t.args_schema}))
            .collect(),
        // `parametersJsonSchema` takes the schema as it is; `parameters` would take only
        // Gemini's OpenAPI subset (no `additionalProperties`, no `anyOf` everywhere).
        Dialect::Gemini => json!({"functionDeclarations": tools
            .map(|(t, _)| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.args_schema}))
            .collect::<Vec<_>>()}),
        Dialect::Mcp => json!({"tools": tools
            .map(|(t, routed)| json!({
                "name": t.name, "description": t.description, "inputSchema": t.args_schema,
                "annotations": mcp_annotations(t, routed),
            }))
            .collect::<Vec<_>>()}),
        Dialect::LangChain | Dialect::Vercel => {
            return Err(ChangesetError::NoDefinitionFormat(format.name()));
        }
    })
}

/// MCP's hints (hints, not guarantees: Assent's policy decides): a tool that runs at
/// once for this agent is read-only, one queued for a person is destructive, the
/// agent's own notes are neither.
fn mcp_annotations(tool: &ToolSpec, routed: RuleAction) -> Value {
    match (routed, tool.mode) {
        (_, ToolMode::Local) => json!({"readOnlyHint": false, "destructiveHint": false}),
        (RuleAction::Allow, _) => json!({"readOnlyHint": true}),
        _ => json!({"readOnlyHint": false, "destructiveHint": true}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_tools::{ToolRule, ToolSpec};

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        for (name, mode) in [
            ("read_notes", ToolMode::Immediate),
            ("rename", ToolMode::Deferred),
            ("report", ToolMode::Local),
            ("wipe", ToolMode::Deferred),
        ] {
            registry
                .register(ToolSpec::new(
                    name,
                    format!("{name} it"),
                    mode,
                    json!({"type": "object", "properties": {}}),
                ))
                .expect("registers");
        }
        registry
    }

    fn policy() -> AgentPolicy {
        AgentPolicy::new(["work"]).with_rule(ToolRule::new("wipe", RuleAction::Deny).expect("rule"))
    }

    fn names(list: &[Value], pointer: &str) -> Vec<String> {
        list.iter()
            .map(|t| {
                t.pointer(pointer)
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn each_format_lists_the_tools_the_agent_may_call() {
        let (registry, policy) = (registry(), policy());
        let expected = ["read_notes", "rename", "report"];
        let render = |format| tool_definitions(&registry, &policy, format).expect("renders");
        let openai = render(Dialect::OpenAi);
        let openai = openai.as_array().expect("an array");
        assert_eq!(names(openai, "/function/name"), expected, "wipe is denied");
        assert_eq!(openai[0]["type"], "function");
        assert_eq!(openai[0]["function"]["parameters"]["type"], "object");
        let responses = render(Dialect::Responses);
        let responses = responses.as_array().expect("an array");
        assert_eq!(names(responses, "/name"), expected);
        assert_eq!(responses[0]["strict"], false);
        let anthropic = render(Dialect::Anthropic);
        let anthropic = anthropic.as_array().expect("an array");
        assert_eq!(names(anthropic, "/name"), expected);
        assert_eq!(anthropic[1]["input_schema"]["type"], "object");
        let gemini = render(Dialect::Gemini);
        let declarations = gemini["functionDeclarations"].as_array().expect("a Tool");
        assert_eq!(names(declarations, "/name"), expected);
        assert!(declarations[0]["parametersJsonSchema"].is_object());
        let mcp = render(Dialect::Mcp);
        let tools = mcp["tools"].as_array().expect("a tools/list result");
        assert_eq!(names(tools, "/name"), expected);
        assert_eq!(tools[0]["annotations"], json!({"readOnlyHint": true}));
        assert_eq!(
            tools[1]["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": true})
        );
        assert_eq!(
            tools[2]["annotations"],
            json!({"readOnlyHint": false, "destructiveHint": false})
        );
        assert!(tools[1]["inputSchema"].is_object());
        for format in [Dialect::LangChain, Dialect::Vercel] {
            assert!(matches!(
                tool_definitions(&registry, &policy, format),
                Err(ChangesetError::NoDefinitionFormat(_))
            ));
        }
    }

    #[test]
    fn a_rule_that_asks_makes_an_immediate_tool_destructive_for_that_agent() {
        let policy = AgentPolicy::new(["work"])
            .with_rule(ToolRule::new("read_*", RuleAction::Ask).expect("rule"));
        let mcp = tool_definitions(&registry(), &policy, Dialect::Mcp).expect("renders");
        assert_eq!(mcp["tools"][0]["annotations"]["destructiveHint"], true);
    }
}
