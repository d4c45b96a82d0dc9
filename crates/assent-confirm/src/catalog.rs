//! A host's tools as the engine writes them to the database when it opens: what a
//! process without the host's code needs to show an item's tool and check an edit.

use crate::{ConfirmError, Effect};
use assent_store::StoreError;
use assent_store::host_tools::HostTool;
use assent_tools::{TargetFrom, ToolMode, ToolSpec};
use serde_json::{Value, json};

/// The definition of `spec` as stored in `host_tools`: `name`, `description`,
/// `inputSchema`, `mode` (`immediate`, `deferred`, `local`, `review`), `effect`
/// (`transactional`, `external`, `externalIdempotent`) and, for a batch tool, the
/// tool each element becomes (`batchOf`). Categories belong to targets, not tools, and
/// are resolved when a call runs, so none is stored.
pub(crate) fn definition(spec: &ToolSpec, effect: Effect) -> Value {
    let mode = match spec.mode {
        ToolMode::Immediate => "immediate",
        ToolMode::Deferred => "deferred",
        ToolMode::Local => "local",
        ToolMode::Review => "review",
    };
    let effect = match effect {
        Effect::Transactional => "transactional",
        Effect::External { idempotent: false } => "external",
        Effect::External { idempotent: true } => "externalIdempotent",
    };
    let mut definition = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": spec.args_schema,
        "mode": mode,
        "effect": effect,
    });
    if let Some(batch) = &spec.batch {
        definition["batchOf"] = json!(batch.singular_tool);
    }
    // Any process that edits the tool's items refuses an edit that moves a call to
    // another target: it needs to know where the target is.
    if let Some(from) = &spec.target_from {
        definition["targetFrom"] = json!({"kind": from.kind, "pointer": from.pointer});
    }
    definition
}

/// Where a recorded definition's tool takes its target from in its arguments
/// (`targetFrom`), when it does.
pub(crate) fn target_from(definition: &Value) -> Option<TargetFrom> {
    let from = definition.get("targetFrom")?;
    Some(TargetFrom {
        kind: from["kind"].as_str()?.to_owned(),
        pointer: from["pointer"].as_str()?.to_owned(),
    })
}

/// The tool an engine recorded as `recorded` (`definition` read back), for a process
/// without the host's code (`assent tools` on a service's database): its name,
/// description, input schema and mode. A batch tool is listed as a plain one: its
/// elements are the host's to explode when a call arrives.
pub fn recorded_spec(recorded: &HostTool) -> Result<ToolSpec, ConfirmError> {
    let definition = &recorded.definition;
    let corrupt = |what: &str| {
        ConfirmError::Store(StoreError::Corrupt {
            table: "host_tools",
            reason: format!(
                "tool {:?} of host {:?}: {what}",
                recorded.tool_name, recorded.host
            ),
        })
    };
    let mode = match definition["mode"].as_str() {
        Some("immediate") => ToolMode::Immediate,
        Some("deferred") => ToolMode::Deferred,
        Some("local") => ToolMode::Local,
        Some("review") => ToolMode::Review,
        Some(other) => return Err(corrupt(&format!("unknown mode {other:?}"))),
        None => return Err(corrupt("no mode: not an engine's own definition")),
    };
    let description = definition["description"].as_str().unwrap_or_default();
    let mut spec = ToolSpec::new(
        recorded.tool_name.clone(),
        description,
        mode,
        recorded.input_schema.clone(),
    );
    spec.target_from = target_from(definition);
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_names_what_a_process_without_the_host_needs() {
        let schema = json!({"type": "object"});
        let spec = ToolSpec::new("refund", "Refund an invoice.", ToolMode::Deferred, schema);
        let definition = definition(&spec, Effect::External { idempotent: true });
        assert_eq!(
            definition,
            json!({"name": "refund", "description": "Refund an invoice.",
                   "inputSchema": {"type": "object"}, "mode": "deferred",
                   "effect": "externalIdempotent"})
        );
    }
}
