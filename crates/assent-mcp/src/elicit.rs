//! `assent mcp … --ask-in-client`: a queued call asks the MCP client's own user, in
//! form mode (MCP elicitation): the tool, its arguments whole, and Approve / Reject
//! with a reason. Only where the client declared `elicitation` with forms; any other
//! client gets today's behaviour (queued for a person in Assent).
//!
//! An answer from the client is not a named person: a client may answer its own
//! elicitations (an automated client, or the agent's host itself). So it is recorded as
//! the client's (`mcp-client:NAME`, NAME from `clientInfo.name`, untrusted: sanitized),
//! counts as one reviewer at most, and is never asked for where the rules need more than
//! one person (a quorum): the call is then queued as today, and the model told why.
//! A form the user dismisses (cancel), or a client that fails to answer in time, leaves
//! the call queued; a declined form is a rejection.

use assent_confirm::records::MCP_CLIENT_PREFIX;
use assent_confirm::{ConfirmError, Engine};
use assent_domain::{ChangeSet, OffsetDateTime, one_line};
use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema,
};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::Value;
use std::time::Duration;

/// How a queued call fared with the client's user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Asked {
    /// The client's user decided (approved or rejected): the decision is recorded.
    Decided,
    /// Not asked, or no answer: the call stays queued as today; the note (when there is
    /// one) tells the model why it was not asked.
    Queued(Option<String>),
}

/// How long the client's user has to answer the form when `--wait` says nothing.
pub(crate) const DEFAULT_ASK_WAIT: Duration = Duration::from_secs(120);

/// The longest client name kept in `mcp-client:NAME`.
const MAX_CLIENT_NAME_CHARS: usize = 64;

/// The reviewer an answer of client `name` is recorded as: `mcp-client:` and the name
/// with only ASCII letters, digits, `.`, `_` and `-` kept (anything else `_`), at most
/// 64 characters; `unnamed` when nothing is left. The name is the client's own claim,
/// so it can never read as a person's (`--as NAME`) or another door's (`slack:`).
pub(crate) fn client_reviewer(name: &str) -> String {
    let kept: String = name
        .chars()
        .take(MAX_CLIENT_NAME_CHARS)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let kept = kept.trim_matches('_');
    format!(
        "{MCP_CLIENT_PREFIX}{}",
        if kept.is_empty() { "unnamed" } else { kept }
    )
}

/// The form's text: the agent, the tool and its arguments, whole (what the person
/// approves is what will run), every line of it through the one marking of misleading
/// characters ([`assent_domain::one_line`]): JSON writes a newline or a tab inside a
/// string as an escape, but a bidi control or a zero-width space as it is, and a
/// client shows the form's text as it is.
fn message(set: &ChangeSet) -> String {
    let item = &set.items[0];
    form_text(&set.agent_id, &item.tool_name, &item.args)
}

fn form_text(agent: &str, tool: &str, args: &Value) -> String {
    let args = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    let args: Vec<_> = args.lines().map(one_line).collect();
    format!(
        "Agent {} wants to run {} with these arguments:\n{}\n\nApprove it, or reject it (a reason tells the agent why).",
        one_line(agent),
        one_line(tool),
        args.join("\n")
    )
}

/// The form: `decision` (approve | reject), and an optional `reason`.
fn form() -> Result<ElicitationSchema, &'static str> {
    let decision = EnumSchema::builder(vec!["approve".to_owned(), "reject".to_owned()])
        .enum_titles(vec!["Approve".to_owned(), "Reject".to_owned()])
        .map_err(|_| "two titles for two values")?
        .title("Decision")
        .build();
    ElicitationSchema::builder()
        .required_enum_schema("decision", decision)
        .optional_string_with("reason", |s| {
            s.title("Reason").description("Why (for a rejection)")
        })
        .build()
}

/// Asks the client's user about the queued call of `set` (its one item), and records
/// the answer through `engine`'s confirmation service as `mcp-client:NAME`.
pub(crate) async fn ask_in_client(
    engine: &Engine,
    context: &RequestContext<RoleServer>,
    set: &ChangeSet,
    wait: Duration,
) -> Result<Asked, ConfirmError> {
    let peer = &context.peer;
    if !peer
        .supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
    {
        return Ok(Asked::Queued(None));
    }
    let item = &set.items[0];
    if let Some(needed) = item.approvals_needed.filter(|needed| *needed > 1) {
        return Ok(Asked::Queued(Some(format!(
            "Not asked in the client: {} needs {needed} people's approval, and an answer in the client counts as one at most; people review it in Assent.",
            item.tool_name
        ))));
    }
    let schema = match form() {
        Ok(schema) => schema,
        Err(why) => {
            tracing::warn!(
                why,
                "the elicitation form could not be built: queued as today"
            );
            return Ok(Asked::Queued(None));
        }
    };
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: message(set),
        requested_schema: schema,
    };
    let reviewer = client_reviewer(
        &peer
            .peer_info()
            .map(|info| info.client_info.name.clone())
            .unwrap_or_default(),
    );
    let answer = match peer
        .create_elicitation_with_timeout(params, Some(wait))
        .await
    {
        Ok(answer) => answer,
        Err(error) => {
            tracing::info!(%error, "the client did not answer the form: queued as today");
            return Ok(Asked::Queued(None));
        }
    };
    let confirmations = engine.confirmations().by(reviewer.clone());
    let now = OffsetDateTime::now_utc();
    let decided = match decision(&answer) {
        Decision::Approve => confirmations
            .confirm_item(assent_confirm::ItemRef::new(set.id, 0), now)
            .await
            .map(|_| ()),
        Decision::Reject(reason) => confirmations
            .reject_item(assent_confirm::ItemRef::new(set.id, 0), Some(reason), now)
            .await
            .map(|_| ()),
        Decision::None => return Ok(Asked::Queued(None)),
    };
    match decided {
        Ok(()) => {
            tracing::info!(%reviewer, change_set = %set.id, "answered in the client");
            Ok(Asked::Decided)
        }
        // Decided elsewhere meanwhile: that decision stands.
        Err(ConfirmError::Conflict { .. }) => Ok(Asked::Decided),
        Err(error) => Err(error),
    }
}

/// What the form's answer says.
#[derive(Debug, PartialEq, Eq)]
enum Decision {
    Approve,
    Reject(String),
    /// Dismissed, or not an answer of the form: nothing decided.
    None,
}

fn decision(answer: &ElicitResult) -> Decision {
    let field = |key: &str| {
        answer
            .content
            .as_ref()
            .and_then(|content| content.get(key))
            .and_then(Value::as_str)
            .map(str::trim)
    };
    match answer.action {
        ElicitationAction::Accept => match field("decision") {
            Some("approve") => Decision::Approve,
            Some("reject") => Decision::Reject(
                field("reason")
                    .filter(|reason| !reason.is_empty())
                    .unwrap_or("rejected in the client")
                    .to_owned(),
            ),
            _ => Decision::None,
        },
        ElicitationAction::Decline => Decision::Reject("declined in the client".to_owned()),
        // Dismissed, or an action this release does not know: nothing decided.
        _ => Decision::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_client_name_is_kept_only_as_safe_characters() {
        assert_eq!(client_reviewer("claude-ai"), "mcp-client:claude-ai");
        assert_eq!(client_reviewer("Cursor 1.2"), "mcp-client:Cursor_1.2");
        assert_eq!(client_reviewer("alice\u{202e}"), "mcp-client:alice");
        assert_eq!(client_reviewer(""), "mcp-client:unnamed");
        assert_eq!(client_reviewer("::"), "mcp-client:unnamed");
        assert_eq!(
            client_reviewer(&"x".repeat(200)).len(),
            "mcp-client:".len() + 64
        );
    }

    #[test]
    fn the_forms_answer_decides_or_leaves_the_call_queued() {
        let answer = |action, content: Option<Value>| {
            let mut result = ElicitResult::new(action);
            result.content = content;
            decision(&result)
        };
        use ElicitationAction::{Accept, Cancel, Decline};
        assert_eq!(
            answer(Accept, Some(json!({"decision": "approve"}))),
            Decision::Approve
        );
        assert_eq!(
            answer(
                Accept,
                Some(json!({"decision": "reject", "reason": " no "}))
            ),
            Decision::Reject("no".into())
        );
        assert_eq!(
            answer(Accept, Some(json!({"decision": "reject"}))),
            Decision::Reject("rejected in the client".into())
        );
        assert_eq!(
            answer(Accept, Some(json!({"decision": "yes"}))),
            Decision::None
        );
        assert_eq!(answer(Accept, None), Decision::None);
        assert_eq!(
            answer(Decline, None),
            Decision::Reject("declined in the client".into())
        );
        assert_eq!(answer(Cancel, None), Decision::None);
        assert!(form().is_ok());
    }

    /// Issue 52, point 10: the form shows no bidi control or invisible character raw,
    /// in the arguments, the agent's name or the tool's: each is a visible escape.
    #[test]
    fn the_form_marks_misleading_characters() {
        let args = json!({
            "path": "/home/u/invoice_\u{202e}fdp.exe",
            "content": "ok\u{200b}\u{2066}hidden\u{2069}\u{feff}\u{e0041}\nnext\tline\u{2028}",
        });
        let text = form_text("bot\u{202e}", "write\u{200d}_file", &args);
        let raw: Vec<char> = text
            .chars()
            .filter(|c| *c != '\n' && assent_domain::misleads(*c))
            .collect();
        assert!(raw.is_empty(), "raw: {raw:?} in {text}");
        for escape in [
            "\\u{202e}",
            "\\u{200b}",
            "\\u{2066}",
            "\\u{feff}",
            "\\u{e0041}",
            "\\u{2028}",
            "\\u{200d}",
        ] {
            assert!(text.contains(escape), "{escape} in {text}");
        }
        // The layout stays: one argument a line, JSON's own escapes as they are.
        assert!(
            text.contains("\n  \"path\": \"/home/u/invoice_\\u{202e}fdp.exe\""),
            "{text}"
        );
        assert!(text.contains("\\nnext\\tline"), "{text}");
        assert!(
            text.starts_with("Agent bot\\u{202e} wants to run write\\u{200d}_file with"),
            "{text}"
        );
    }
}
