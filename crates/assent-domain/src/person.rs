//! Who a decision's `by` is, as a quorum counts people: one person across doors. A
//! door that knows its user under another name records both (`slack:U0123 (alice)`: the
//! door and its user, then the person they are mapped to), so the audit keeps the door
//! while a quorum, "the same person twice" and the proof count `alice` once, whether
//! she answered in Slack, on the command line (`--as alice`) or both.

/// How a Slack user mapped to the person `name` is recorded as a decision's `by`.
pub fn slack_reviewer(user_id: &str, name: &str) -> String {
    format!("slack:{user_id} ({name})")
}

/// The person behind `by`: the mapped name of a door's record
/// ([`slack_reviewer`]), else `by` itself. Only a well-formed record is read as one (an
/// id of letters and digits, a name in the parentheses that end it), so a name that
/// merely starts with `slack:` stays whole. Mapping only merges names, never splits
/// one: two records are one person when they map to the same name.
pub fn person(by: &str) -> &str {
    let Some(rest) = by.strip_prefix("slack:") else {
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
        ];
        for (by, expected) in cases {
            assert_eq!(person(&by), expected, "{by:?}");
        }
    }
}
