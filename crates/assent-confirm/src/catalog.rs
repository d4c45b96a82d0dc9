//! A host's tools as the engine writes them to the database when it opens: what a
//! process without the host's code needs to show an item's tool and check an edit.

use crate::Effect;
use assent_tools::{ToolMode, ToolSpec};
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
    definition
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
