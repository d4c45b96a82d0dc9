//! `assent_status`: the tool the gateway adds to every listing, so that a model that
//! was answered with a receipt (a queued call's change set id) can ask what became of
//! it. Pure: the answer is made from the engine's [`SetOutcome`] of the set, which the
//! gateway reads only for its own agent's sets.

use assent_changeset::reply;
use assent_confirm::{CallState, ItemOutcome, SetOutcome};
use assent_domain::Uuid;
use rmcp::model::{CallToolResult, ContentBlock, Tool, ToolAnnotations};
use serde_json::{Value, json};
use std::sync::Arc;

/// The name of the tool the gateway adds to the upstream's.
pub const STATUS_TOOL: &str = "assent_status";

/// The argument naming the change set.
const CHANGE_SET_ARG: &str = "changeSetId";

/// The tool's definition as listed: one required string, read-only and idempotent.
pub fn status_tool() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {
            CHANGE_SET_ARG: {
                "type": "string",
                "description": "The change set id from the reply of a queued call"
            }
        },
        "required": [CHANGE_SET_ARG],
        "additionalProperties": false
    });
    let Value::Object(schema) = schema else {
        unreachable!("the schema literal is an object")
    };
    Tool::new(
        STATUS_TOOL,
        "What became of a call Assent queued for a person's review: pending, confirmed \
         (with the result), rejected (with the person's reason) or withdrawn. Give the \
         changeSetId from the call's reply. Answers only this agent's calls.",
        Arc::new(schema),
    )
    .annotate(
        ToolAnnotations::new()
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

/// The change set an `assent_status` call names, or the error result saying what is
/// wrong with its arguments.
pub fn requested_set(args: &Value) -> Result<Uuid, CallToolResult> {
    let Some(id) = args.get(CHANGE_SET_ARG) else {
        return Err(refused(format!(
            "{STATUS_TOOL} needs {CHANGE_SET_ARG}, the change set id from a queued call's reply"
        )));
    };
    let Some(id) = id.as_str() else {
        return Err(refused(format!(
            "{CHANGE_SET_ARG} must be a string, not {id}"
        )));
    };
    id.trim().parse().map_err(|_| {
        refused(format!(
            "{CHANGE_SET_ARG} {id:?} is not a change set id (a UUID)"
        ))
    })
}

/// The answer for a change set that is not one of this agent's calls: the same whether
/// it does not exist or belongs to another agent.
pub fn unknown_set(id: Uuid) -> CallToolResult {
    refused(format!("No call of this agent has change set id {id}"))
}

/// What `outcome`'s call (item 0: a gateway's set holds one call) came to, as text for
/// the model and as `structuredContent`: `status` is `pending`, `confirmed`,
/// `rejected` or `withdrawn`, with the run's state and result once confirmed and the
/// reason once rejected or withdrawn.
pub fn status_answer(outcome: &SetOutcome) -> CallToolResult {
    let id = outcome.change_set_id;
    let Some(item) = outcome.items.first() else {
        return unknown_set(id);
    };
    let reason = item.decision.as_ref().and_then(|d| d.reason.clone());
    let mut fields = serde_json::Map::new();
    fields.insert(CHANGE_SET_ARG.to_owned(), json!(id.to_string()));
    fields.insert("tool".to_owned(), json!(item.tool_name));
    let error = item.run.as_ref().and_then(|run| run.last_error.as_deref());
    let edited = item.edited_args();
    if let Some(args) = edited {
        fields.insert("editedArguments".to_owned(), args.clone());
    }
    let edit_note = if edited.is_some() {
        reply::EDITED_NOTE
    } else {
        ""
    };
    if let Some(run) = &item.run {
        fields.insert("run".to_owned(), json!(run.status.as_str()));
    }
    // The engine's state of the call; only the words differ from a waited answer's.
    let (status, text) = match item.state {
        CallState::Pending => ("pending", reply::status_pending(&item.tool_name, &id)),
        CallState::Applied => {
            if let Some(result) = &item.result {
                fields.insert("result".to_owned(), json!(result));
            }
            let text = match &item.result {
                Some(result) => reply::status_applied(result, edit_note),
                None => format!("{}{edit_note}", reply::WAITED_APPLIED),
            };
            ("confirmed", text)
        }
        CallState::Running => ("confirmed", reply::status_running(edit_note)),
        CallState::Failed => (
            "confirmed",
            format!("{}{edit_note}", reply::waited_failed(error)),
        ),
        CallState::Rejected => ("rejected", reply::waited_rejected(reason.as_deref())),
        CallState::Withdrawn => ("withdrawn", reply::status_withdrawn(reason.as_deref())),
        // In doubt, or a state this gateway has no words for yet: never said to be
        // done.
        _ => (
            "confirmed",
            format!("{}{edit_note}", reply::waited_in_doubt(error)),
        ),
    };
    fields.insert("status".to_owned(), json!(status));
    if matches!(status, "rejected" | "withdrawn")
        && let Some(reason) = reason
    {
        fields.insert("reason".to_owned(), json!(reason));
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(Value::Object(fields));
    result
}

/// What a client that waited for `item`'s call reads once it is settled (`None` while
/// it is not): the engine's [`ItemOutcome::waited_reply`], as an error result when
/// the call did not (or may not have) taken effect. An applied call's answer is
/// `kept`, the upstream's whole result, when this process still holds it; a person's
/// edit is told first (`with_edit_notice`). The gateway's `--wait` and its tasks
/// answer with it.
pub fn waited_answer(item: &ItemOutcome, kept: Option<CallToolResult>) -> Option<CallToolResult> {
    let text = item.waited_reply()?;
    if item.state.is_error() {
        return Some(CallToolResult::error(vec![ContentBlock::text(text)]));
    }
    let result = kept.unwrap_or_else(|| CallToolResult::success(vec![ContentBlock::text(text)]));
    Some(match item.edited_args() {
        Some(ran) => with_edit_notice(result, &item.args, ran),
        None => result,
    })
}

/// The key of a result's `_meta` that holds the arguments a call ran with when a
/// person changed them before it ran.
pub const EDITED_META: &str = "assent/edited";

/// The longest a value is shown in [`edit_notice`] before it is cut (head and tail
/// kept).
const SHOWN_VALUE: usize = 80;

/// The line that tells the model a person changed its arguments before the call ran:
/// `A person changed the arguments before it ran: KEY: OLD → NEW; …` (a key added or
/// removed says so), every key in order; values as compact JSON, long ones cut in
/// the middle.
pub fn edit_notice(proposed: &Value, ran: &Value) -> String {
    let shown = |value: &Value| {
        let text = value.to_string();
        let chars: Vec<char> = text.chars().collect();
        if chars.len() <= SHOWN_VALUE {
            return text;
        }
        let half = SHOWN_VALUE / 2;
        let head: String = chars[..half].iter().collect();
        let tail: String = chars[chars.len() - half..].iter().collect();
        format!("{head}…{tail}")
    };
    let changes: Vec<String> = match (proposed, ran) {
        (Value::Object(before), Value::Object(after)) => {
            let keys: std::collections::BTreeSet<&String> =
                before.keys().chain(after.keys()).collect();
            keys.into_iter()
                .filter_map(|key| match (before.get(key), after.get(key)) {
                    (Some(old), Some(new)) if old == new => None,
                    (None, None) => None,
                    (old, new) => Some(reply::edited_key(
                        key,
                        old.map(&shown).as_deref(),
                        new.map(&shown).as_deref(),
                    )),
                })
                .collect()
        }
        _ => vec![format!("{} → {}", shown(proposed), shown(ran))],
    };
    reply::edited(&changes)
}

/// `result` with [`edit_notice`] as its first text block and the arguments that ran
/// in `_meta` under [`EDITED_META`].
pub fn with_edit_notice(
    mut result: CallToolResult,
    proposed: &Value,
    ran: &Value,
) -> CallToolResult {
    result
        .content
        .insert(0, ContentBlock::text(edit_notice(proposed, ran)));
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(EDITED_META.to_owned(), ran.clone());
    result.meta = Some(meta);
    result
}

fn refused(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_notice_names_every_changed_key_and_cuts_long_values() {
        let proposed = json!({"path": "/notes/a.md", "content": "draft", "mode": "w"});
        let ran = json!({"path": "/notes/b.md", "content": "draft", "append": true});
        assert_eq!(
            edit_notice(&proposed, &ran),
            "A person changed the arguments before it ran: append added: true; mode removed \
             (was \"w\"); path: \"/notes/a.md\" → \"/notes/b.md\""
        );
        let long = json!({"text": "x".repeat(500)});
        let notice = edit_notice(&json!({"text": "y"}), &long);
        assert!(notice.contains('…'), "{notice}");
        assert!(notice.len() < 200, "{notice}");
        let result = with_edit_notice(
            CallToolResult::success(vec![ContentBlock::text("done")]),
            &proposed,
            &ran,
        );
        assert_eq!(result.content.len(), 2);
        assert_eq!(result.meta.expect("_meta").0[EDITED_META], ran);
    }
}
