//! `/api/answer/{token}`: the one-time answer links of the phone doors (an ntfy
//! notification's Approve and Reject buttons, an email's links). Outside the bearer-token
//! check: the token is the credential. It is 64 random hex digits, kept only as its
//! SHA-256 (`assent_store::phone`), and names one item at one revision, one person (the
//! channel's `--as`), one action, and the moment the agent stops waiting.
//!
//! `GET` decides nothing: it shows the item and a button that posts to the same address
//! (an email's link opens it, so a mail scanner that follows links decides nothing).
//! `POST` decides, through the engine's confirmation service as every other door, as
//! the channel's person (`ntfy:n1a2b3c4d (alice)`), bound to the revision the message
//! showed; the link is marked used in the decision's own write transaction, so a
//! decision and its link's use stand or fall together. A used link, an expired one
//! ("too late: the agent stopped waiting at …"), a guessed one, one for an item decided
//! elsewhere or changed since, each change nothing and say why.

use crate::AppState;
use assent_confirm::ConfirmError;
use assent_confirm::phone::{LinkAction, LinkAnswer, LinkState};
use assent_domain::{OffsetDateTime, format_time, one_line};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The route's path.
pub(crate) const ROUTE: &str = "/api/answer/{token}";

/// Only a form posting to this same address; no script at all.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// What a link's page or answer says: its status, a title and the lines under it, and
/// the form to answer with when the link still may.
struct Answer {
    status: StatusCode,
    title: String,
    lines: Vec<String>,
    form: Option<LinkAction>,
}

impl Answer {
    fn refused(status: StatusCode, title: impl Into<String>) -> Self {
        Self {
            status,
            title: title.into(),
            lines: Vec::new(),
            form: None,
        }
    }
}

/// `GET /api/answer/{token}`: the item and the one button; nothing is decided.
pub(crate) async fn show(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    let now = OffsetDateTime::now_utc();
    render(match state.engine.phone().check_link(&token, now).await {
        Ok(LinkState::Open {
            link,
            agent_id,
            item,
        }) => Answer {
            status: StatusCode::OK,
            title: match link.action {
                LinkAction::Approve => "Approve this call?".to_owned(),
                LinkAction::Reject => "Reject this call?".to_owned(),
            },
            lines: vec![
                format!("Agent: {}", one_line(&agent_id)),
                format!("Tool: {}", one_line(&item.tool_name)),
                item.human_summary.clone(),
                serde_json::to_string_pretty(&item.args).unwrap_or_default(),
                format!(
                    "Answering as {}. The agent waits until {}; after that this link answers nothing.",
                    one_line(&link.person),
                    format_time(link.expires_at)
                ),
            ],
            form: Some(link.action),
        },
        Ok(refused) => refusal(&refused),
        Err(error) => failed(&error),
    })
}

/// `POST /api/answer/{token}`: decides what the link names (a form's `reason` goes
/// with a rejection).
pub(crate) async fn answer(
    State(state): State<AppState>,
    Path(token): Path<String>,
    body: Bytes,
) -> Response {
    let now = OffsetDateTime::now_utc();
    let reason = form_urlencoded::parse(&body)
        .find(|(key, _)| key == "reason")
        .map(|(_, value)| value.trim().to_owned())
        .filter(|reason| !reason.is_empty());
    let answer = match state.engine.phone().answer_link(&token, reason, now).await {
        Ok(LinkAnswer::Decided(said)) => Answer::refused(StatusCode::OK, said),
        Ok(LinkAnswer::Refused(refused)) => refusal(&refused),
        Err(error) => {
            let title = format!("Nothing was decided: {}", one_line(&error.to_string()));
            let status = crate::ServerError::Confirm(error).status();
            if status == StatusCode::INTERNAL_SERVER_ERROR {
                tracing::warn!(%title, "answer link");
            }
            Answer::refused(status, title)
        }
    };
    tracing::info!(status = %answer.status, "answer link");
    render(answer)
}

/// Why a link cannot decide, with its status: 404 unknown, 409 used, decided elsewhere
/// or changed since, 410 too late.
fn refusal(state: &LinkState) -> Answer {
    let status = match state {
        LinkState::Open { .. } => StatusCode::OK,
        LinkState::Unknown => StatusCode::NOT_FOUND,
        LinkState::Expired(_) => StatusCode::GONE,
        _ => StatusCode::CONFLICT,
    };
    Answer::refused(status, state.refusal().unwrap_or_default())
}

fn failed(error: &ConfirmError) -> Answer {
    tracing::warn!(%error, "answer link");
    Answer::refused(
        StatusCode::INTERNAL_SERVER_ERROR,
        "Nothing was decided: the server could not read the link",
    )
}

/// The page: no script, text escaped, one form posting back to this address.
fn render(answer: Answer) -> Response {
    let mut body = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>Assent</title><style>body{font:16px system-ui,sans-serif;margin:1rem;max-width:40rem}\
         pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:.5rem}\
         button{font-size:1.2rem;padding:.8rem 1.6rem;min-width:44px;min-height:44px}\
         textarea{width:100%}</style></head><body>",
    );
    body.push_str(&format!("<h1>{}</h1>", escape(&answer.title)));
    for line in &answer.lines {
        body.push_str(&format!("<pre>{}</pre>", escape(line)));
    }
    match answer.form {
        Some(LinkAction::Approve) => body.push_str(
            "<form method=\"post\"><button type=\"submit\" name=\"answer\" value=\"approve\">Approve</button></form>",
        ),
        Some(LinkAction::Reject) => body.push_str(
            "<form method=\"post\"><label>Why (optional, the agent is told)<br>\
             <textarea name=\"reason\" rows=\"3\" maxlength=\"2000\"></textarea></label><br>\
             <button type=\"submit\" name=\"answer\" value=\"reject\">Reject</button></form>",
        ),
        None => {}
    }
    body.push_str("</body></html>");
    let headers: [(HeaderName, HeaderValue); 5] = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        ),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        (
            HeaderName::from_static("x-robots-tag"),
            HeaderValue::from_static("noindex"),
        ),
    ];
    (answer.status, headers, body).into_response()
}

/// `text` as HTML text.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_text_is_never_markup() {
        assert_eq!(
            escape("<script>\"x\" & 'y'</script>"),
            "&lt;script&gt;&quot;x&quot; &amp; &#39;y&#39;&lt;/script&gt;"
        );
    }
}
