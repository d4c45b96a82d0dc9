//! `POST /api/slack/interactions`: Slack's buttons and the reason modal. Outside the
//! bearer-token check (Slack cannot send one): the request is authenticated by its
//! signature instead, checked on the raw body before anything of it is parsed
//! (`assent_webhooks::verify_slack_signature`: constant time, timestamps more than
//! 300 s off refused), and a payload accepted once is refused when sent again.
//!
//! The answer is 200 at once (Slack gives up after 3 s); the decision is made
//! afterwards, through the engine's confirmation service as every other door makes it,
//! as the mapped person (`slack:U0123 (alice)`) and bound to the revision the message
//! showed. A Slack user who is not mapped changes nothing and is told so. The message
//! itself is rewritten by the poster, which sees the decision in the change feed as it
//! sees one made on the page or the command line.

use crate::{AppState, ServerError};
use assent_confirm::Engine;
use assent_confirm::admin::SlackSettings;
use assent_domain::{OffsetDateTime, one_line};
use assent_webhooks::{APPROVE, REJECT, REJECT_VIEW, SlackApi, parse_button_value};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// The action id `assent_webhooks::set_message` gives "Approve for this session" (a
/// coding agent's hook call); `a_hook_sessions_call_gets_a_session_button` checks that
/// both agree.
const APPROVE_SESSION: &str = "approve_session";
use uuid::Uuid;

/// What a person asked for, read from a verified payload.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Interaction {
    /// Approve was clicked.
    Approve(Click),
    /// "Approve for this session" was clicked (a coding agent's hook call): approve,
    /// and grant the rest of its session the same command or file, whatever the
    /// agent's description says.
    ApproveForSession(Click),
    /// Reject was clicked: the reason modal opens.
    Reject(Click, String),
    /// The reason modal was submitted.
    Reason(Click, Option<String>),
    /// Anything else (Open, a modal closed): nothing to do.
    Ignored,
}

/// Who clicked, on which item at which revision, and where to answer them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Click {
    user: String,
    set: Uuid,
    index: usize,
    revision: u32,
    channel: Option<String>,
}

/// `POST /api/slack/interactions`.
pub(crate) async fn interactions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let now = OffsetDateTime::now_utc();
    match accept(&state, &headers, &body, now).await {
        Ok((settings, api, interaction)) => {
            if interaction != Interaction::Ignored {
                tokio::spawn(act(state.engine.clone(), api, settings, interaction));
            }
            StatusCode::OK.into_response()
        }
        Err(error) => {
            tracing::info!(%error, "Slack interaction refused");
            error.into_response()
        }
    }
}

/// Verifies the request and reads what it asks; nothing is decided yet.
async fn accept(
    state: &AppState,
    headers: &HeaderMap,
    body: &[u8],
    now: OffsetDateTime,
) -> Result<(SlackSettings, SlackApi, Interaction), ServerError> {
    let Some((settings, secrets)) = state.engine.admin().slack_secrets().await? else {
        return Err(ServerError::NotFound(
            "Slack is not connected here (assent slack connect)".to_owned(),
        ));
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let signature = header("x-slack-signature");
    assent_webhooks::verify_slack_signature(
        &secrets.signing_secret,
        header("x-slack-request-timestamp"),
        signature,
        body,
        now,
    )
    .map_err(|e| ServerError::Forbidden(e.to_string()))?;
    let digest = assent_webhooks::payload_digest(signature.unwrap_or_default());
    let forget = now - time::Duration::seconds(2 * assent_webhooks::SLACK_MAX_SKEW_SECONDS);
    if !state
        .engine
        .admin()
        .accept_slack_payload(&digest, now, forget)
        .await?
    {
        return Err(ServerError::Conflict(
            "this signed Slack request was accepted before: a replay changes nothing".to_owned(),
        ));
    }
    let interaction = parse(body)?;
    let api = SlackApi::connected(&settings, &secrets)
        .map_err(|e| ServerError::Internal(e.to_string()))?;
    Ok((settings, api, interaction))
}

/// The interaction a form body's `payload` describes.
fn parse(body: &[u8]) -> Result<Interaction, ServerError> {
    let bad = |why: &str| ServerError::BadRequest(format!("not a Slack interaction: {why}"));
    let payload = form_urlencoded::parse(body)
        .find(|(key, _)| key == "payload")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(|| bad("no payload field"))?;
    let payload: Value = serde_json::from_str(&payload).map_err(|_| bad("payload is not JSON"))?;
    interaction_of(&payload)
}

/// The interaction a payload describes (from the form body of the HTTP route, or from
/// a Socket Mode envelope).
pub(crate) fn interaction_of(payload: &Value) -> Result<Interaction, ServerError> {
    let bad = |why: &str| ServerError::BadRequest(format!("not a Slack interaction: {why}"));
    let user = payload["user"]["id"]
        .as_str()
        .filter(|id| is_slack_id(id))
        .ok_or_else(|| bad("no user id"))?
        .to_owned();
    let click = |value: &str, channel: Option<&str>| {
        let (set, index, revision) =
            parse_button_value(value).ok_or_else(|| bad("an item no message of ours names"))?;
        Ok::<_, ServerError>(Click {
            user: user.clone(),
            set,
            index,
            revision,
            channel: channel.filter(|c| is_slack_id(c)).map(str::to_owned),
        })
    };
    match payload["type"].as_str() {
        Some("block_actions") => {
            let action = &payload["actions"][0];
            let channel = payload["channel"]["id"].as_str();
            let value = action["value"].as_str().unwrap_or_default();
            match action["action_id"].as_str() {
                Some(APPROVE) => Ok(Interaction::Approve(click(value, channel)?)),
                Some(APPROVE_SESSION) => Ok(Interaction::ApproveForSession(click(value, channel)?)),
                Some(REJECT) => {
                    let trigger = payload["trigger_id"]
                        .as_str()
                        .filter(|t| !t.is_empty() && t.len() <= 256)
                        .ok_or_else(|| bad("no trigger_id to open the reason modal with"))?;
                    Ok(Interaction::Reject(
                        click(value, channel)?,
                        trigger.to_owned(),
                    ))
                }
                _ => Ok(Interaction::Ignored),
            }
        }
        Some("view_submission") if payload["view"]["callback_id"] == REJECT_VIEW => {
            let metadata = payload["view"]["private_metadata"]
                .as_str()
                .unwrap_or_default();
            let (value, channel) = metadata.split_once(' ').unwrap_or((metadata, ""));
            let reason = payload["view"]["state"]["values"]["reason"]["reason"]["value"]
                .as_str()
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned);
            Ok(Interaction::Reason(click(value, Some(channel))?, reason))
        }
        _ => Ok(Interaction::Ignored),
    }
}

/// A Slack id (`U0123`, `C0456`): letters and digits, at most 32.
fn is_slack_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 32 && id.chars().all(|c| c.is_ascii_alphanumeric())
}

/// Decides what `interaction` asks, as its mapped person, and tells them what came of
/// it (only them: an ephemeral message).
pub(crate) async fn act(
    engine: Engine,
    api: SlackApi,
    settings: SlackSettings,
    interaction: Interaction,
) {
    let (click, trigger) = match &interaction {
        Interaction::Approve(click)
        | Interaction::ApproveForSession(click)
        | Interaction::Reason(click, _) => (click, None),
        Interaction::Reject(click, trigger) => (click, Some(trigger)),
        Interaction::Ignored => return,
    };
    let span = tracing::info_span!("slack_decision", user = %click.user, set = %click.set, index = click.index);
    let _entered = span.enter();
    let channel = click.channel.clone().unwrap_or(settings.channel.clone());
    let said = match decide(&engine, &api, &settings, &interaction, click, trigger).await {
        Ok(None) => return,
        Ok(Some(said)) => said,
        Err(error) => format!("Not decided: {}", one_line(&error.to_string())),
    };
    if let Err(error) = api.post_ephemeral(&channel, &click.user, &said).await {
        tracing::warn!(%error, "cannot answer the Slack user");
    }
}

/// The decision itself; what to tell the person (`None`: the modal opened).
async fn decide(
    engine: &Engine,
    api: &SlackApi,
    settings: &SlackSettings,
    interaction: &Interaction,
    click: &Click,
    trigger: Option<&String>,
) -> Result<Option<String>, ServerError> {
    let Some(name) = engine.admin().slack_user_name(&click.user).await? else {
        return Ok(Some(format!(
            "You are not a reviewer here: nothing was decided (an admin maps you with `assent slack users add {} --as NAME`).",
            click.user
        )));
    };
    let service = engine
        .confirmations()
        .by(assent_domain::slack_reviewer(&click.user, &name))
        .shown_revision(click.revision);
    let now = OffsetDateTime::now_utc();
    let label = format!("[{} {}]", &click.set.simple().to_string()[..8], click.index);
    Ok(Some(match interaction {
        Interaction::Approve(_) => {
            let outcome = service
                .confirm_item(assent_confirm::ItemRef::new(click.set, click.index), now)
                .await?;
            format!("{label} {}", one_line(&outcome.message()))
        }
        Interaction::ApproveForSession(_) => {
            let (outcome, grant) = service
                .confirm_for_session(
                    assent_confirm::ItemRef::new(click.set, click.index),
                    None,
                    now,
                )
                .await?;
            let binds = grant
                .args_pattern
                .as_ref()
                .map(assent_domain::canonical_json)
                .unwrap_or_default();
            format!(
                "{label} {} Allowed for the rest of session {} without asking: {} {} (grant {})",
                one_line(&outcome.message()),
                one_line(grant.session_id.as_deref().unwrap_or_default()),
                grant.tool_name,
                one_line(&binds),
                grant.id
            )
        }
        Interaction::Reject(..) => {
            let Some(trigger) = trigger else {
                return Ok(None);
            };
            let value = assent_webhooks::button_value(click.set, click.index, click.revision);
            let channel = click.channel.as_deref().unwrap_or(&settings.channel);
            api.open_view(trigger, &assent_webhooks::reject_view(&value, channel))
                .await
                .map_err(|e| ServerError::Internal(e.to_string()))?;
            return Ok(None);
        }
        Interaction::Reason(_, reason) => {
            let decision = service
                .reject_item(
                    assent_confirm::ItemRef::new(click.set, click.index),
                    reason.clone(),
                    now,
                )
                .await?;
            format!("{label} {}", decision.verdict)
        }
        Interaction::Ignored => return Ok(None),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(payload: &Value) -> Vec<u8> {
        form_urlencoded::Serializer::new(String::new())
            .append_pair("payload", &payload.to_string())
            .finish()
            .into_bytes()
    }

    #[test]
    fn payloads_are_read_strictly() {
        let set = Uuid::from_u128(3);
        let value = assent_webhooks::button_value(set, 1, 2);
        let approve = serde_json::json!({"type": "block_actions", "user": {"id": "U1"},
            "channel": {"id": "C1"}, "actions": [{"action_id": "approve", "value": value}]});
        let click = Click {
            user: "U1".into(),
            set,
            index: 1,
            revision: 2,
            channel: Some("C1".into()),
        };
        assert_eq!(
            parse(&form(&approve)).expect("parses"),
            Interaction::Approve(click.clone())
        );
        let reason = serde_json::json!({"type": "view_submission", "user": {"id": "U1"},
            "view": {"callback_id": REJECT_VIEW, "private_metadata": format!("{value} C1"),
                "state": {"values": {"reason": {"reason": {"value": " too risky "}}}}}});
        assert_eq!(
            parse(&form(&reason)).expect("parses"),
            Interaction::Reason(click, Some("too risky".into()))
        );
        let stranger = serde_json::json!({"type": "block_actions", "user": {"id": "U1 <x>"},
            "actions": [{"action_id": "approve", "value": value}]});
        assert!(parse(&form(&stranger)).is_err());
        assert!(parse(b"payload=%7Bnot").is_err());
        let open = serde_json::json!({"type": "block_actions", "user": {"id": "U1"},
            "actions": [{"action_id": "open"}]});
        assert_eq!(parse(&form(&open)).expect("parses"), Interaction::Ignored);
    }

    /// Issue 53, point 14: a coding agent's hook call (and only one) gets "Approve for
    /// this session", and its click is read as such.
    #[test]
    fn a_hook_sessions_call_gets_a_session_button() {
        let mut set = assent_domain::ChangeSet::new(assent_domain::NewChangeSet {
            id: Uuid::from_u128(4),
            agent_id: "coder".into(),
            target: assent_domain::Target::new("workspace", "/w"),
            thread_id: assent_confirm::session_thread("sess-A"),
            run_key: "hook:sess-A:c1".into(),
            items: vec![assent_domain::ChangeItem::new(
                "Bash",
                serde_json::json!({"command": "npm test", "description": "Run the tests"}),
                "npm test",
            )],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        let quorum = assent_confirm::records::Quorum::default();
        let state = assent_webhooks::SetState {
            decisions: &[],
            quorum: &quorum,
            jobs: &[],
            public_url: None,
        };
        let actions = |set: &assent_domain::ChangeSet| -> Vec<String> {
            assent_webhooks::set_message(set, &state)["blocks"]
                .as_array()
                .expect("blocks")
                .iter()
                .flat_map(|block| block["elements"].as_array().cloned().unwrap_or_default())
                .filter_map(|element| element["action_id"].as_str().map(str::to_owned))
                .collect()
        };
        assert!(assent_confirm::session_of(&set).is_some());
        assert_eq!(actions(&set), ["approve", "approve_session", "reject"]);
        set.thread_id = "th".into();
        assert!(assent_confirm::session_of(&set).is_none());
        assert_eq!(
            actions(&set),
            ["approve", "reject"],
            "no session, no button"
        );

        let value = assent_webhooks::button_value(set.id, 0, 0);
        let click = serde_json::json!({"type": "block_actions", "user": {"id": "U1"},
            "channel": {"id": "C1"}, "actions": [{"action_id": APPROVE_SESSION, "value": value}]});
        assert!(matches!(
            parse(&form(&click)).expect("parses"),
            Interaction::ApproveForSession(Click { index: 0, .. })
        ));
    }
}
