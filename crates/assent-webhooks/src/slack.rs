//! The Slack incoming-webhook body of an event: a `text` fallback and `blocks` with the
//! items and a link to the review page.

use serde_json::{Value, json};

/// Slack's mrkdwn treats these as markup; an agent's summary must not become a link.
fn escape_mrkdwn(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn headline(event_type: &str, data: &Value) -> String {
    let agent = data["agentId"].as_str().unwrap_or("an agent");
    let items = data["items"].as_array().map_or(0, Vec::len);
    let noun = if items == 1 { "change" } else { "changes" };
    match event_type {
        "changeSet.created" => format!("Agent {agent} suggests {items} {noun}"),
        "changeSet.resolved" => format!("Every change agent {agent} suggested is decided"),
        "changeSet.expiring" => format!("{items} {noun} by agent {agent} expire soon"),
        "changeSet.expired" => format!("{items} {noun} by agent {agent} expired undecided"),
        "confirmation.requested" => {
            let path = data["agentPath"].as_str().unwrap_or(agent);
            format!(
                "Sub-agent {path} asks to run {}",
                data["toolName"].as_str().unwrap_or("a tool")
            )
        }
        other => format!("Assent: {other}"),
    }
}

/// The body for `payload` (`{type, timestamp, data}`), with `link` to the review page
/// when the server's public URL is known.
pub fn slack_body(payload: &Value, link: Option<&str>) -> Value {
    let event_type = payload["type"].as_str().unwrap_or("event");
    let data = &payload["data"];
    let title = escape_mrkdwn(&headline(event_type, data));
    let mut lines: Vec<String> = data["items"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .take(20)
                .map(|item| {
                    format!(
                        "• {} ({})",
                        escape_mrkdwn(item["summary"].as_str().unwrap_or("")),
                        escape_mrkdwn(item["status"].as_str().unwrap_or(""))
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if let Some(summary) = data["summary"].as_str() {
        lines.push(escape_mrkdwn(summary));
    }
    let mut blocks =
        vec![json!({"type": "section", "text": {"type": "mrkdwn", "text": format!("*{title}*")}})];
    if !lines.is_empty() {
        blocks
            .push(json!({"type": "section", "text": {"type": "mrkdwn", "text": lines.join("\n")}}));
    }
    if let Some(link) = link {
        blocks.push(json!({
            "type": "actions",
            "elements": [{"type": "button", "text": {"type": "plain_text", "text": "Review"}, "url": link}],
        }));
    }
    let text = match link {
        Some(link) => format!("{title}: <{link}|review>"),
        None => title,
    };
    json!({"text": text, "blocks": blocks})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_set_lists_its_items_escaped_with_a_review_button() {
        let payload = json!({"type": "changeSet.created", "data": {
            "agentId": "triage",
            "items": [{"summary": "Set priority <!channel> to P0", "status": "pending"}],
        }});
        let body = slack_body(&payload, Some("https://assent.example/#change-set-1"));
        assert_eq!(
            body["blocks"][0]["text"]["text"],
            "*Agent triage suggests 1 change*"
        );
        assert_eq!(
            body["blocks"][1]["text"]["text"],
            "• Set priority &lt;!channel&gt; to P0 (pending)"
        );
        assert_eq!(
            body["blocks"][2]["elements"][0]["url"],
            "https://assent.example/#change-set-1"
        );
        assert!(body["text"].as_str().is_some_and(|t| t.contains("review")));
        assert_eq!(
            slack_body(&payload, None)["blocks"]
                .as_array()
                .map(Vec::len),
            Some(2)
        );
    }
}
