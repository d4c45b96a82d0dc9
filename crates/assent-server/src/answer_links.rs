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
use assent_confirm::{ConfirmError, Engine, ItemRef};
use assent_domain::{OffsetDateTime, format_time, one_line};
use assent_store::phone::{self, AnswerLink, LinkAction};
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
    render(match check(&state.engine, &token, now).await {
        Ok((link, lines)) => Answer {
            status: StatusCode::OK,
            title: match link.action {
                LinkAction::Approve => "Approve this call?".to_owned(),
                LinkAction::Reject => "Reject this call?".to_owned(),
            },
            lines,
            form: Some(link.action),
        },
        Err(refused) => refused,
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
    let answer = match check(&state.engine, &token, now).await {
        Ok((link, _)) => decide(&state.engine, &token, &link, reason, now).await,
        Err(refused) => refused,
    };
    tracing::info!(status = %answer.status, title = %answer.title, "answer link");
    render(answer)
}

/// The link `token` names, when it may still decide, with what its page shows; else
/// why not.
async fn check(
    engine: &Engine,
    token: &str,
    now: OffsetDateTime,
) -> Result<(AnswerLink, Vec<String>), Answer> {
    let failed = |error: String| {
        tracing::warn!(%error, "answer link");
        Answer::refused(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Nothing was decided: the server could not read the link",
        )
    };
    let unknown = || {
        Answer::refused(
            StatusCode::NOT_FOUND,
            "This link answers nothing: it is unknown or its channel was removed",
        )
    };
    // A token is 64 hex digits: anything else is not looked up at all.
    if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(unknown());
    }
    let mut conn = engine
        .store()
        .read_connection()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let Some(link) = phone::link(&mut conn, &phone::token_hash(token))
        .await
        .map_err(|e| failed(e.to_string()))?
    else {
        return Err(unknown());
    };
    if let Some(used) = link.used_at {
        return Err(Answer::refused(
            StatusCode::CONFLICT,
            format!(
                "This link was used at {}: it works once, nothing more was decided",
                format_time(used)
            ),
        ));
    }
    if now >= link.expires_at {
        return Err(too_late(&link));
    }
    let Some(set) = assent_store::change_sets::load(&mut conn, link.change_set_id)
        .await
        .map_err(|e| failed(e.to_string()))?
    else {
        return Err(unknown());
    };
    let Some(item) = set.items.get(link.item_index) else {
        return Err(unknown());
    };
    if !item.status.is_open() {
        let decided = assent_store::decisions::for_change_set(&mut conn, set.id)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let by = decided
            .iter()
            .rev()
            .find(|d| d.item_index == link.item_index)
            .map(|d| {
                format!(
                    " ({} by {} at {})",
                    d.verdict,
                    one_line(d.decided_by.as_deref().unwrap_or("someone")),
                    format_time(d.created_at)
                )
            })
            .unwrap_or_default();
        return Err(Answer::refused(
            StatusCode::CONFLICT,
            format!("Already decided elsewhere{by}: this link changed nothing"),
        ));
    }
    if item.revision != link.revision {
        return Err(Answer::refused(
            StatusCode::CONFLICT,
            format!(
                "The call changed since this link was sent (revision {} then, {} now): nothing was decided, look at it on the page",
                link.revision, item.revision
            ),
        ));
    }
    let lines = vec![
        format!("Agent: {}", one_line(&set.agent_id)),
        format!("Tool: {}", one_line(&item.tool_name)),
        one_line(&item.human_summary).into_owned(),
        assent_domain::canonical_json(&item.args),
        format!(
            "Answering as {}. The agent waits until {}; after that this link answers nothing.",
            one_line(&link.person),
            format_time(link.expires_at)
        ),
    ];
    Ok((link, lines))
}

fn too_late(link: &AnswerLink) -> Answer {
    Answer::refused(
        StatusCode::GONE,
        format!(
            "too late: the agent stopped waiting at {}; nothing was decided",
            format_time(link.expires_at)
        ),
    )
}

/// Decides `link` in one write transaction with the mark that uses it up.
async fn decide(
    engine: &Engine,
    token: &str,
    link: &AnswerLink,
    reason: Option<String>,
    now: OffsetDateTime,
) -> Answer {
    match decide_in(engine, token, link, reason, now).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::warn!(%error, "answer link: the decision could not be written");
            Answer::refused(
                StatusCode::INTERNAL_SERVER_ERROR,
                "Nothing was decided: the server failed, try the page",
            )
        }
    }
}

/// The decision and the link's use, committed together; rolled back together when the
/// engine refuses (a moved revision, a decision made meanwhile), so a refused tap
/// leaves the link as it was.
async fn decide_in(
    engine: &Engine,
    token: &str,
    link: &AnswerLink,
    reason: Option<String>,
    now: OffsetDateTime,
) -> Result<Answer, ConfirmError> {
    let store = engine.store();
    let mut conn = store.read_connection().await?;
    let Some(channel) = phone::channel(&mut conn, &link.channel_id).await? else {
        return Ok(Answer::refused(
            StatusCode::NOT_FOUND,
            "This link answers nothing: it is unknown or its channel was removed",
        ));
    };
    drop(conn);
    let by = assent_domain::phone_reviewer(channel.kind.as_str(), &channel.id, &link.person);
    let service = engine
        .confirmations()
        .by(by.clone())
        .shown_revision(link.revision);
    let item = ItemRef::new(link.change_set_id, link.item_index);
    let mut tx = store.begin_write().await?;
    if !phone::use_link(tx.connection(), &phone::token_hash(token), now).await? {
        tx.rollback().await?;
        // Used or expired between the check and the lock.
        return Ok(if now >= link.expires_at {
            too_late(link)
        } else {
            Answer::refused(
                StatusCode::CONFLICT,
                "This link was used just now: it works once, nothing more was decided",
            )
        });
    }
    let said = match link.action {
        LinkAction::Approve => service
            .confirm_item_in(&mut tx, item, now)
            .await
            .map(|outcome| format!("Approved as {by}: {}", one_line(&outcome.message()))),
        LinkAction::Reject => service
            .reject_item_in(&mut tx, item, reason, now)
            .await
            .map(|decision| format!("{} as {by}", decision.verdict)),
    };
    match said {
        Ok(said) => {
            tx.commit().await?;
            Ok(Answer {
                status: StatusCode::OK,
                title: said,
                lines: Vec::new(),
                form: None,
            })
        }
        Err(error) => {
            tx.rollback().await?;
            let title = format!("Nothing was decided: {}", one_line(&error.to_string()));
            Ok(Answer {
                status: crate::ServerError::Confirm(error).status(),
                title,
                lines: Vec::new(),
                form: None,
            })
        }
    }
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
