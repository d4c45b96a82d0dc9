//! Who a decision's `by` is, as a quorum counts people: one person across doors. A
//! door that knows its user under another name records both (`slack:U0123 (alice)`: the
//! door and its user, then the person they are mapped to; `token:3fa9c1d2e4b5 (alice)`:
//! a reviewer token issued to alice), so the audit keeps the door while a quorum, "the
//! same person twice" and the proof count `alice` once, whether she answered in Slack,
//! with her token (the page, the API, `review --server`), on the command line
//! (`--as alice`) or through all of them.
//!
//! What "one person" rests on is each door's mapping, and nothing more: the OS user or
//! `--as` on the command line, who a token was issued to (`assent tokens add --person`),
//! and which person a Slack user is mapped to (`assent slack map`). This module only
//! reads those mappings back, the same way for the engine and for the proof.

/// The doors whose `by` names a user of the door and then the person it is mapped to.
const DOORS: [&str; 5] = ["slack:", "token:", "telegram:", "ntfy:", "email:"];

/// How a Slack user mapped to the person `name` is recorded as a decision's `by`.
pub fn slack_reviewer(user_id: &str, name: &str) -> String {
    format!("slack:{user_id} ({name})")
}

/// How a Telegram user mapped to the person `name` is recorded as a decision's `by`
/// (`telegram:42 (alice)`): one person with her Slack user, her token and her name.
pub fn telegram_reviewer(user_id: &str, name: &str) -> String {
    format!("telegram:{user_id} ({name})")
}

/// How a one-time link of a phone channel decides (`ntfy:n1a2b3c4d (alice)`,
/// `email:n5e6f7a8b (alice)`): the door (`ntfy` or `email`), the channel's id, and the
/// person the channel was added for (`assent notify … add --as`).
pub fn phone_reviewer(door: &str, channel_id: &str, name: &str) -> String {
    format!("{door}:{channel_id} ({name})")
}

/// How a token decides: `token:ID (NAME)` for a token issued to the person `name`, the
/// token's bare `id` for one made before tokens named their person (it names nobody,
/// and is refused where a quorum counts people).
pub fn token_reviewer(id: &str, name: Option<&str>) -> String {
    match name.map(str::trim).filter(|n| !n.is_empty()) {
        Some(name) => format!("token:{id} ({name})"),
        None => id.to_owned(),
    }
}

/// Whether `by` records an answer given in an agent's own client rather than by a
/// person through a door of ours: the MCP gateway's `--ask-in-client` answers
/// (`mcp-client:NAME`) and a coding agent's own prompt (`claude-code-client`,
/// `gemini-client`, …: a lowercase name ending in `-client`). A client may answer
/// automatically, so such an answer is never a person's consent: it counts toward no
/// quorum, and the proof reports the effects it let run apart.
pub fn answered_in_client(by: &str) -> bool {
    by.starts_with(CLIENT_PREFIX)
        || by.strip_suffix("-client").is_some_and(|kind| {
            !kind.is_empty() && kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'-')
        })
}

/// How an MCP client's answer is recorded: this prefix and the client's name.
const CLIENT_PREFIX: &str = "mcp-client:";

/// The person behind `by`: the mapped name of a door's record ([`slack_reviewer`],
/// [`token_reviewer`]), else `by` itself. Only a well-formed record is read as one (a
/// door's prefix, an id of letters and digits, a name in the parentheses that end it),
/// so a name that merely starts with `slack:` stays whole. Mapping only merges names,
/// never splits one: two records are one person when they map to the same name.
pub fn person(by: &str) -> &str {
    let Some(rest) = DOORS.iter().find_map(|door| by.strip_prefix(door)) else {
        return by;
    };
    let Some((user_id, name)) = rest.split_once(" (") else {
        return by;
    };
    let Some(name) = name.strip_suffix(')') else {
        return by;
    };
    let name = name.trim();
    if user_id.is_empty() || !user_id.chars().all(|c| c.is_ascii_alphanumeric()) || name.is_empty()
    {
        return by;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 56: a tap on an ntfy button or an email link is its channel's person, one
    /// approver with the same person in Slack or on the command line.
    #[test]
    fn a_phone_channel_is_the_person_it_was_added_for() {
        assert_eq!(
            person(&phone_reviewer("ntfy", "n1a2b3c4d", "alice")),
            "alice"
        );
        assert_eq!(
            person(&phone_reviewer("email", "n5e6f7a8b", "alice")),
            "alice"
        );
        assert_eq!(person("ntfy:n 1 (alice)"), "ntfy:n 1 (alice)");
    }

    #[test]
    fn a_mapped_slack_user_is_the_person_they_are_mapped_to() {
        let cases = [
            (slack_reviewer("U0123", "alice"), "alice"),
            (slack_reviewer("U9", "Al (ops)"), "Al (ops)"),
            ("slack:U2 ( bob )".to_owned(), "bob"),
            ("alice".to_owned(), "alice"),
            ("slack:U1".to_owned(), "slack:U1"),
            ("slack:U 1 (alice)".to_owned(), "slack:U 1 (alice)"),
            ("slack:U1 (alice".to_owned(), "slack:U1 (alice"),
            ("slack:U1 ( )".to_owned(), "slack:U1 ( )"),
            ("slack: (alice)".to_owned(), "slack: (alice)"),
            ("tok_1234".to_owned(), "tok_1234"),
            (token_reviewer("3fa9c1d2e4b5", Some("alice")), "alice"),
            (token_reviewer("3fa9c1d2e4b5", Some(" ")), "3fa9c1d2e4b5"),
            (token_reviewer("3fa9c1d2e4b5", None), "3fa9c1d2e4b5"),
            ("token:3fa9 (bob)".to_owned(), "bob"),
            ("token:3f-a9 (bob)".to_owned(), "token:3f-a9 (bob)"),
            ("tokens:3fa9 (bob)".to_owned(), "tokens:3fa9 (bob)"),
            (telegram_reviewer("42", "alice"), "alice"),
            ("telegram:4 2 (alice)".to_owned(), "telegram:4 2 (alice)"),
        ];
        for (by, expected) in cases {
            assert_eq!(person(&by), expected, "{by:?}");
        }
    }

    #[test]
    fn answers_in_a_client_are_told_from_people() {
        for by in [
            "mcp-client:claude-code",
            "mcp-client:unnamed",
            "claude-code-client",
            "gemini-client",
        ] {
            assert!(answered_in_client(by), "{by}");
        }
        for by in [
            "alice",
            "client",
            "-client",
            "Alice-client",
            "slack:U1 (gemini-client)x",
            "token:1 (alice)",
        ] {
            assert!(!answered_in_client(by), "{by}");
        }
    }

    #[test]
    fn one_person_through_slack_a_token_and_the_command_line_is_one_name() {
        let doors = [
            slack_reviewer("U9", "alice"),
            token_reviewer("3fa9c1d2e4b5", Some("alice")),
            "alice".to_owned(),
        ];
        for by in &doors {
            assert_eq!(person(by), "alice", "{by}");
        }
        assert_ne!(person(&token_reviewer("3fa9", Some("bob"))), "alice");
    }
}
