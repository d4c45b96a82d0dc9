//! How agent-written text is shown to the person who decides on it: never hidden, never
//! able to pass for something else.
//!
//! Every review surface (the CLI, the page, webhook and Slack bodies) shows arguments
//! and summaries an agent wrote. Two rules hold for all of them, so they live here once:
//!
//! - **Cutting keeps both ends.** A long value is shown as its head and its tail with
//!   the number of characters left out between them ([`head_and_tail`]): what an
//!   attacker appends (`…\nssh-ed25519 AAAA… attacker`) or where a path ends
//!   (`…/.ssh/authorized_keys`) stays in sight.
//! - **One field, one line, no tricks** ([`one_line`]): newlines would let agent text
//!   print a line that looks like the system's own ("Refund 0 cents (confirmed)"), and
//!   C0/C1 controls and Unicode bidi or invisible format characters reorder or hide
//!   what is shown. They are written as visible escapes.

use std::borrow::Cow;

/// What [`head_and_tail`] writes between the head and the tail it keeps.
fn cut_marker(cut_chars: usize) -> String {
    format!(" …[{cut_chars} chars cut]… ")
}

/// `text` itself when it has at most `max_chars` characters; otherwise its first and
/// last characters around a marker saying how many were left out, in at most
/// `max_chars` characters (the tail gets the larger half: it is where appended content
/// and file names are).
///
/// ```
/// # use assent_domain::head_and_tail;
/// let path = "/home/me/projects/a/very/long/path/that/ends/in/.ssh/authorized_keys";
/// let shown = head_and_tail(path, 60);
/// assert!(shown.starts_with("/home/me"));
/// assert!(shown.ends_with(".ssh/authorized_keys"));
/// assert!(shown.contains("chars cut"));
/// ```
pub fn head_and_tail(text: &str, max_chars: usize) -> Cow<'_, str> {
    let total = text.chars().count();
    if total <= max_chars {
        return Cow::Borrowed(text);
    }
    // The marker's length depends on the count it reports; size it for the worst case.
    let marker_chars = cut_marker(total).chars().count();
    let kept = max_chars.saturating_sub(marker_chars).max(2);
    let head = kept / 2;
    let tail = kept - head;
    let cut_chars = total - head - tail;
    let head_text: String = text.chars().take(head).collect();
    let tail_text: String = text.chars().skip(total - tail).collect();
    Cow::Owned(format!("{head_text}{}{tail_text}", cut_marker(cut_chars)))
}

/// Whether `c` could mislead a reader: C0 and C1 controls (escape sequences, carriage
/// returns, newlines), the Unicode line and paragraph separators, the bidirectional
/// controls and marks, and invisible format characters (the soft hyphen, zero-width
/// spaces and joiners, word joiners and invisible operators, the byte-order mark,
/// interlinear annotations, and the tag characters that spell hidden ASCII).
///
/// The one definition every review surface uses (issue 37): the CLI's terminal
/// output, webhook and Slack bodies, and the review page (whose script carries the same
/// list; a test of the server compares them). A surface that lays out several lines
/// treats only the newline and the tab as layout.
pub fn misleads(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2028}'..='\u{2029}'
                | '\u{2060}'..='\u{2069}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `text` as one line with nothing hidden: a newline becomes `⏎`, a tab a space, and
/// every other character that [`misleads`] a reader a visible `\u{…}` escape.
///
/// ```
/// # use assent_domain::one_line;
/// assert_eq!(one_line("Refund 5\nRefund 0 (confirmed)"), "Refund 5⏎Refund 0 (confirmed)");
/// assert_eq!(one_line("invoice_\u{202E}fdp.exe"), "invoice_\\u{202e}fdp.exe");
/// ```
pub fn one_line(text: &str) -> Cow<'_, str> {
    if !text.chars().any(misleads) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => shown.push('⏎'),
            '\r' => {}
            '\t' => shown.push(' '),
            c if misleads(c) => shown.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => shown.push(c),
        }
    }
    Cow::Owned(shown)
}

/// An item as a review surface heads it: the summary its host wrote, behind the name
/// of the tool that will run (`delete_all_files: Read the README(path: …)`), unless
/// the summary already starts with that name (`write_file(path: …)`). A host writes
/// the summary, and an MCP server's summary starts with the tool's *title*, which the
/// server chooses: the name is what rules match and what runs, so a person always
/// sees it (issue 37).
///
/// ```
/// # use assent_domain::named_summary;
/// assert_eq!(named_summary("delete_all_files", "Read the README(path: x)"), "delete_all_files: Read the README(path: x)");
/// assert_eq!(named_summary("write_file", "write_file(path: x)"), "write_file(path: x)");
/// assert_eq!(named_summary("write", "write_file(path: x)"), "write: write_file(path: x)");
/// ```
pub fn named_summary<'a>(tool_name: &str, summary: &'a str) -> Cow<'a, str> {
    // No name to show (a body without one): the summary as it is.
    let named = tool_name.is_empty()
        || summary.strip_prefix(tool_name).is_some_and(|rest| {
            !rest
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '.')
        });
    match (named, summary.trim().is_empty()) {
        (true, _) => Cow::Borrowed(summary),
        (false, true) => Cow::Owned(tool_name.to_owned()),
        (false, false) => Cow::Owned(format!("{tool_name}: {summary}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn short_text_is_shown_whole() {
        assert_eq!(head_and_tail("abc", 3), "abc");
    }

    #[test]
    fn long_text_keeps_both_ends_and_says_what_was_cut() {
        let content = format!("{}ssh-ed25519 AAAAC3 attacker@evil", "x".repeat(500));
        let shown = head_and_tail(&content, 60);
        assert!(shown.ends_with("attacker@evil"), "{shown}");
        assert!(shown.starts_with("xxx"), "{shown}");
        let cut: usize = shown
            .split("…[")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert_eq!(
            cut + shown.chars().count() - cut_marker(cut).chars().count(),
            532
        );
    }

    #[test]
    fn carriage_returns_and_escapes_are_not_passed_through() {
        assert_eq!(one_line("a\r\nb\u{1b}[2K"), "a⏎b\\u{1b}[2K");
        assert_eq!(one_line("zero\u{200B}width"), "zero\\u{200b}width");
        assert_eq!(one_line("a\u{2028}b"), "a\\u{2028}b");
    }

    #[test]
    fn the_tool_name_heads_a_summary_that_does_not_start_with_it() {
        let read = "Read the README(path: /home/u)";
        assert_eq!(
            named_summary("delete_all_files", read),
            format!("delete_all_files: {read}")
        );
        assert_eq!(
            named_summary("delete_all_files", "delete_all_files(path: /)"),
            "delete_all_files(path: /)"
        );
        assert_eq!(
            named_summary("delete", "delete_all_files(path: /)"),
            "delete: delete_all_files(path: /)"
        );
        assert_eq!(named_summary("set_task_title", ""), "set_task_title");
        assert_eq!(named_summary("", "x"), "x");
    }

    #[test]
    fn invisible_format_characters_mislead() {
        for c in [
            '\u{200B}',
            '\u{200D}',
            '\u{FEFF}',
            '\u{2028}',
            '\u{2029}',
            '\u{2060}',
            '\u{2064}',
            '\u{2066}',
            '\u{2069}',
            '\u{00AD}',
            '\u{180E}',
            '\u{E0041}',
            '\u{202E}',
            '\u{1B}',
        ] {
            assert!(misleads(c), "{:x}", u32::from(c));
            assert!(
                !one_line(&format!("a{c}b")).contains(c),
                "{:x}",
                u32::from(c)
            );
        }
        for c in ['a', 'é', '—', '…', '⏎', '\u{00A0}', '\u{3000}', '😀'] {
            assert!(!misleads(c), "{:x}", u32::from(c));
        }
    }

    proptest! {
        #[test]
        fn cut_text_fits_and_keeps_its_ends(text in "\\PC{0,300}", max in 40usize..120) {
            let shown = head_and_tail(&text, max);
            prop_assert!(shown.chars().count() <= max);
            let first: String = text.chars().take(5).collect();
            let last: String = text.chars().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            prop_assert!(shown.starts_with(&first));
            prop_assert!(shown.ends_with(&last));
        }

        #[test]
        fn one_line_has_no_line_break_or_bidi_control(text in "\\PC{0,100}[\n\r\u{202E}\u{2066}]{1,3}\\PC{0,100}") {
            let shown = one_line(&text);
            prop_assert!(!shown.chars().any(misleads));
        }
    }
}
