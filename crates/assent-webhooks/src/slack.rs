//! The Slack incoming-webhook body of an event: a `text` fallback and `blocks` with the
//! items, their arguments and a link to the review page.
//!
//! Everything shown here was written by an agent (summaries, tool names, argument
//! values, agent ids), by another device, or by a remote tool (errors), and Slack shows
//! it inside the channel's own message. So every field is shown on one line
//! (`one_line`: a newline would let an agent print a line of its own, such as
//! "Refund 0 cents (confirmed)", and bidi controls reverse what is read), mrkdwn's
//! `&`, `<` and `>` are escaped (no links, no mentions), and a long value keeps its
//! head and its tail (`head_and_tail`: an appended key or a path's file name stays in
//! sight). What does not fit is never dropped silently: the message says what was cut
//! and names the command that shows the item whole.

use assent_domain::{head_and_tail, named_summary, one_line};
use serde_json::{Value, json};
use std::borrow::Cow;

/// Items shown, one section each (Slack takes at most 50 blocks in a message).
const MAX_ITEMS: usize = 20;
/// A summary or an error, at most, in characters before escaping.
const TEXT_CHARS: usize = 200;
/// A name (agent, tool, argument, status), at most.
const NAME_CHARS: usize = 80;
/// One argument's value, at most.
const VALUE_CHARS: usize = 240;
/// Slack refuses a section whose text is longer (counted here in bytes, which is never
/// less than Slack's characters).
const SECTION_CHARS: usize = 3000;
/// Kept free in an item's section for the line that says what was cut.
const NOTE_RESERVE: usize = 400;

/// Slack's mrkdwn treats these as markup; an agent's summary must not become a link.
fn escape_mrkdwn(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `text` as a field of the message: one line, at most `max_chars` characters (head and
/// tail kept), mrkdwn escaped; and whether anything was cut.
fn field(text: &str, max_chars: usize) -> (String, bool) {
    let line = one_line(text);
    let shown = head_and_tail(&line, max_chars);
    let cut = matches!(shown, Cow::Owned(_));
    (escape_mrkdwn(&shown), cut)
}

/// A name for the headline: one line and short (escaped with the whole headline).
fn name(text: &str) -> String {
    head_and_tail(&one_line(text), NAME_CHARS).into_owned()
}

fn headline(event_type: &str, data: &Value) -> String {
    let agent = name(data["agentId"].as_str().unwrap_or("an agent"));
    let tool = name(data["toolName"].as_str().unwrap_or("a tool"));
    let items = data["items"].as_array().map_or(0, Vec::len);
    let noun = if items == 1 { "change" } else { "changes" };
    match event_type {
        "changeSet.created" => format!("Agent {agent} suggests {items} {noun}"),
        "changeSet.resolved" => format!("Every change agent {agent} suggested is decided"),
        "changeSet.expiring" => format!("{items} {noun} by agent {agent} expire soon"),
        "changeSet.expired" => format!("{items} {noun} by agent {agent} expired undecided"),
        "confirmation.requested" => {
            let path = data["agentPath"]
                .as_str()
                .map_or_else(|| agent.clone(), name);
            format!("Sub-agent {path} asks to run {tool}")
        }
        "item.failed" => format!("A confirmed change by agent {agent} failed: {tool}"),
        "item.inDoubt" => format!(
            "A confirmed change by agent {agent} is in doubt (it may have happened): {tool}"
        ),
        other => format!("Assent: {}", name(other)),
    }
}

/// The command that prints item `index` of set `set` with every argument whole.
fn show_command(set: &Value, index: &Value) -> String {
    let set = set
        .as_str()
        .map_or_else(|| "SET".to_owned(), |s| field(s, NAME_CHARS).0);
    let index = index
        .as_u64()
        .map_or_else(|| "IDX".to_owned(), |i| i.to_string());
    format!("`assent show {set} {index}`")
}

/// One argument as a line of its item.
fn argument_line(key: &str, value: &Value) -> (String, bool) {
    let (key, key_cut) = field(key, NAME_CHARS);
    let text = match value {
        Value::String(text) => Cow::Borrowed(text.as_str()),
        other => Cow::Owned(other.to_string()),
    };
    let (value, value_cut) = field(&text, VALUE_CHARS);
    (format!("    ◦ {key}: {value}"), key_cut || value_cut)
}

fn argument_lines(args: &Value) -> Vec<(String, bool)> {
    match args {
        Value::Null => Vec::new(),
        Value::Object(map) => map.iter().map(|(k, v)| argument_line(k, v)).collect(),
        other => vec![argument_line("args", other)],
    }
}

/// An item's section: its summary (and status), each argument on a line of its own,
/// and, when anything was cut to fit, a line saying what and how to see it whole.
fn item_text(item: &Value, show: &str) -> String {
    // The tool's name, always (issue 37): a host's summary may start with a title of
    // its choosing ("Read the README" on `delete_all_files`).
    let tool = item["toolName"].as_str().unwrap_or("");
    let summary = match item["summary"].as_str() {
        Some(summary) => named_summary(tool, summary),
        None => std::borrow::Cow::Borrowed(tool),
    };
    let (summary, mut cut) = field(&summary, TEXT_CHARS);
    let mut text = match item["status"].as_str() {
        Some(status) => format!("• {summary} ({})", field(status, NAME_CHARS).0),
        None => format!("• {summary}"),
    };
    let lines = argument_lines(&item["args"]);
    let mut shown = 0;
    for (line, line_cut) in &lines {
        if text.len() + 1 + line.len() > SECTION_CHARS - NOTE_RESERVE {
            break;
        }
        text.push('\n');
        text.push_str(line);
        cut |= line_cut;
        shown += 1;
    }
    let hidden = lines.len() - shown;
    let what = match (cut, hidden) {
        (false, 0) => return text,
        (true, 0) => "Long values are shortened above".to_owned(),
        (cut, hidden) => {
            let noun = if hidden == 1 { "argument" } else { "arguments" };
            let shortened = if cut {
                "Long values are shortened above and "
            } else {
                ""
            };
            format!("{shortened}{hidden} more {noun} are not shown")
        }
    };
    text.push_str(&format!("\n_{what}: {show} prints every argument whole._"));
    text
}

fn section(text: String) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": text}})
}

/// What a person does about a job that needs them (`item.failed`, `item.inDoubt`).
fn job_text(event_type: &str, data: &Value) -> Option<String> {
    let job = field(data["jobId"].as_str().unwrap_or("JOB"), NAME_CHARS).0;
    let next = match event_type {
        "item.failed" => format!(
            "`assent jobs retry {job}` runs it again; `assent jobs retract {job}` withdraws it."
        ),
        "item.inDoubt" => format!(
            "Check whether it happened, then `assent jobs resolve {job} --happened` or `--rerun`."
        ),
        _ => return None,
    };
    let error = field(data["lastError"].as_str().unwrap_or(""), TEXT_CHARS).0;
    Some(format!("Error: {error}\n{next}"))
}

/// The body for `payload` (`{type, timestamp, data}`), with `link` to the review page
/// when the server's public URL is known.
pub fn slack_body(payload: &Value, link: Option<&str>) -> Value {
    let event_type = payload["type"].as_str().unwrap_or("event");
    let data = &payload["data"];
    let title = escape_mrkdwn(&headline(event_type, data));
    let mut blocks = vec![section(format!("*{title}*"))];
    if let Some(items) = data["items"].as_array() {
        for (position, item) in items.iter().enumerate().take(MAX_ITEMS) {
            let index = match &item["index"] {
                Value::Null => json!(position),
                index => index.clone(),
            };
            let show = show_command(&data["changeSetId"], &index);
            blocks.push(section(item_text(item, &show)));
        }
        if items.len() > MAX_ITEMS {
            let more = items.len() - MAX_ITEMS;
            let show = show_command(&data["changeSetId"], &Value::Null);
            blocks.push(section(format!(
                "_…and {more} more changes not shown here: {show} prints each one whole._"
            )));
        }
    } else if !data["args"].is_null() {
        let show = show_command(&data["changeSetId"], &data["itemIndex"]);
        blocks.push(section(item_text(data, &show)));
    } else if let Some(summary) = data["summary"].as_str() {
        blocks.push(section(field(summary, TEXT_CHARS).0));
    }
    if let Some(text) = job_text(event_type, data) {
        blocks.push(section(text));
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

    /// Every text Slack will show: the fallback and each block's text.
    fn shown(body: &Value) -> Vec<String> {
        let mut texts = vec![body["text"].as_str().unwrap_or("").to_owned()];
        for block in body["blocks"].as_array().into_iter().flatten() {
            if let Some(text) = block["text"]["text"].as_str() {
                texts.push(text.to_owned());
            }
        }
        texts
    }

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

    #[test]
    fn the_tool_name_is_shown_beside_a_title_and_invisible_characters_are_escaped() {
        let payload = json!({"type": "changeSet.created", "data": {
            "changeSetId": "s1", "agentId": "triage",
            "items": [{"index": 0, "toolName": "delete_all_files",
                "summary": "Read\u{200B} the\u{FEFF} README\u{2060}(path: /)", "status": "pending"}],
        }});
        let body = slack_body(&payload, None);
        let item = body["blocks"][1]["text"]["text"].as_str().unwrap_or("");
        assert_eq!(
            item,
            "• delete_all_files: Read\\u{200b} the\\u{feff} README\\u{2060}(path: /) (pending)"
        );
    }

    #[test]
    fn agent_text_cannot_print_a_line_of_its_own_or_reverse_a_name() {
        let payload = json!({"type": "changeSet.created", "data": {
            "changeSetId": "s1",
            "agentId": "triage\nAgent admin suggests 0 changes",
            "items": [{
                "index": 0,
                "toolName": "refund\u{202E}",
                "summary": "Refund 5000 cents\nRefund 0 cents (confirmed)",
                "status": "pending",
                "args": {"file": "invoice_\u{202E}fdp.exe", "note": "a\r\nb\u{1b}[2K\u{2066}"},
            }],
        }});
        let body = slack_body(&payload, None);
        let item = body["blocks"][1]["text"]["text"].as_str().unwrap_or("");
        let first = item.lines().next().unwrap_or("");
        assert_eq!(
            first,
            "• refund\\u{202e}: Refund 5000 cents⏎Refund 0 cents (confirmed) (pending)"
        );
        assert!(item.contains("◦ file: invoice_\\u{202e}fdp.exe"), "{item}");
        assert_eq!(
            item.lines().count(),
            3,
            "the summary and one line per argument: {item}"
        );
        for text in shown(&body) {
            assert!(
                !text.contains('\u{202E}')
                    && !text.contains('\u{2066}')
                    && !text.contains('\u{1b}')
                    && !text.contains('\r'),
                "{text:?}"
            );
        }
        assert_eq!(
            body["blocks"][0]["text"]["text"],
            "*Agent triage⏎Agent admin suggests 0 changes suggests 1 change*"
        );
        assert!(!body["text"].as_str().unwrap_or("").contains('\n'));
    }

    #[test]
    fn long_arguments_keep_their_tails_and_say_how_to_see_them_whole() {
        let path = format!("/home/u/{}/.ssh/authorized_keys", "d".repeat(200));
        let content = format!("{}\nssh-ed25519 AAAA attacker@evil", "x".repeat(2000));
        let payload = json!({"type": "changeSet.created", "data": {
            "changeSetId": "0b5e",
            "agentId": "coder",
            "items": [{"index": 3, "toolName": "write_file", "status": "pending",
                "summary": "Write File(path: \"/home/u/dddd…",
                "args": {"path": path, "content": content}}],
        }});
        let body = slack_body(&payload, None);
        let item = body["blocks"][1]["text"]["text"].as_str().unwrap_or("");
        assert!(item.contains("/.ssh/authorized_keys"), "{item}");
        assert!(item.contains("ssh-ed25519 AAAA attacker@evil"), "{item}");
        assert!(item.contains("◦ path: /home/u/"), "{item}");
        assert!(item.contains(" chars cut]… "), "{item}");
        assert!(
            item.ends_with("_Long values are shortened above: `assent show 0b5e 3` prints every argument whole._"),
            "{item}"
        );
        assert!(item.len() <= SECTION_CHARS);

        // A short argument is shown whole, with nothing said about cutting.
        let whole = json!({"type": "changeSet.created", "data": {"items": [
            {"summary": "Write", "args": {"path": "/tmp/a", "mode": 420}}]}});
        let item = slack_body(&whole, None)["blocks"][1]["text"]["text"].clone();
        assert_eq!(item, "• Write\n    ◦ mode: 420\n    ◦ path: /tmp/a");
    }

    #[test]
    fn what_does_not_fit_is_counted_never_dropped_silently() {
        let args: serde_json::Map<String, Value> = (0..40)
            .map(|i| (format!("arg{i:02}"), json!("&".repeat(300))))
            .collect();
        let items: Vec<Value> = (0..25)
            .map(|i| json!({"index": i, "summary": "s", "args": args.clone()}))
            .collect();
        let payload = json!({"type": "changeSet.created",
            "data": {"changeSetId": "set", "agentId": "a", "items": items}});
        let body = slack_body(&payload, Some("https://assent.example/#change-set-set"));
        let blocks = body["blocks"].as_array().cloned().unwrap_or_default();
        assert!(blocks.len() <= 50, "{}", blocks.len());
        for text in shown(&body) {
            assert!(text.len() <= SECTION_CHARS, "{}", text.len());
        }
        let first = blocks[1]["text"]["text"].as_str().unwrap_or("");
        assert!(
            first.contains(
                "more arguments are not shown: `assent show set 0` prints every argument whole"
            ),
            "{first}"
        );
        let more = blocks[MAX_ITEMS + 1]["text"]["text"].as_str().unwrap_or("");
        assert!(more.contains("5 more changes not shown"), "{more}");
    }

    #[test]
    fn a_sub_agents_question_shows_its_call_whole_or_says_what_was_cut() {
        let payload = json!({"type": "confirmation.requested", "data": {
            "agentId": "triage", "agentPath": "triage/researcher\u{202E}",
            "toolName": "delete_file", "changeSetId": "s", "itemIndex": 1,
            "summary": "Delete a file", "args": {"path": "/etc/passwd"}}});
        let body = slack_body(&payload, None);
        assert_eq!(
            body["blocks"][0]["text"]["text"],
            "*Sub-agent triage/researcher\\u{202e} asks to run delete_file*"
        );
        assert_eq!(
            body["blocks"][1]["text"]["text"],
            "• delete_file: Delete a file\n    ◦ path: /etc/passwd"
        );
    }

    #[test]
    fn failed_and_doubtful_items_say_what_to_do() {
        for (event, words, next) in [
            ("item.failed", "failed: post_note", "assent jobs retry j1"),
            (
                "item.inDoubt",
                "is in doubt",
                "assent jobs resolve j1 --happened",
            ),
        ] {
            let payload = json!({"type": event, "data": {
                "agentId": "poster", "toolName": "post_note", "changeSetId": "s",
                "itemIndex": 0, "summary": "Post \"hi\"", "args": {"text": "hi"},
                "jobId": "j1", "status": "failed", "lastError": "400: no\nfake line"}});
            let body = slack_body(&payload, None);
            let texts = shown(&body).join("\n");
            assert!(texts.contains(words), "{texts}");
            assert!(texts.contains("◦ text: hi"), "{texts}");
            assert!(texts.contains("Error: 400: no⏎fake line"), "{texts}");
            assert!(texts.contains(next), "{texts}");
        }
    }

    #[test]
    fn bad_input_never_panics() {
        for payload in [
            json!(null),
            json!({"type": 5, "data": []}),
            json!({"type": "changeSet.created", "data": {"items": [null, 3, "x", {"args": [1, {"a": null}]}]}}),
            json!({"type": "item.failed", "data": {"args": "just text", "jobId": 7}}),
            json!({"type": "changeSet.created", "data": {"items": [{"args": {"": ""}, "index": -1}]}}),
        ] {
            let body = slack_body(&payload, Some("https://a.example/"));
            assert!(body["blocks"].is_array());
        }
    }
}
