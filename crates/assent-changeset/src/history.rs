//! Decision history for the agent's next prompt (plan, section 8).

use assent_domain::{ChangeDecision, Verdict, canonical_json};

/// The heading of the section.
pub const HISTORY_HEADING: &str = "## Recent User Decisions";
/// At most this many decisions are shown.
pub const MAX_HISTORY_ENTRIES: usize = 20;
/// The section stays within this many tokens (estimated at four characters each).
pub const MAX_HISTORY_TOKENS: usize = 500;

const INTRO: &str = "The following shows how the user responded to your recent suggestions.\nLearn from rejections — avoid repeating rejected patterns.";

/// A deliberately conservative token estimate: about four characters per token,
/// rounded up, counting characters rather than bytes.
#[cfg(test)]
fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Newlines in model- or user-written text must not start new prompt lines.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn line(decision: &ChangeDecision, run: Option<&str>) -> String {
    let line = verdict_line(decision);
    match run {
        Some(run) => format!("{line} ({})", one_line(run)),
        None => line,
    }
}

fn verdict_line(decision: &ChangeDecision) -> String {
    let subject = one_line(&format!(
        "{}: {}",
        decision.tool_name, decision.human_summary
    ));
    match (decision.verdict, &decision.edited_args) {
        (Verdict::Confirmed, Some(edited)) => {
            format!(
                "- ✎ {subject} — confirmed with edits: {}",
                canonical_json(edited)
            )
        }
        (Verdict::Confirmed, None) => format!("- ✓ {subject} — confirmed"),
        (Verdict::Rejected, _) => match decision.reason.as_deref().map(one_line) {
            Some(reason) if !reason.is_empty() => {
                format!("- ✗ {subject} — rejected (reason: \"{reason}\")")
            }
            _ => format!("- ✗ {subject} — rejected"),
        },
        (Verdict::Deferred, _) => format!("- ⏸ {subject} — deferred"),
        (Verdict::Retracted, _) => format!("- ↺ {subject} — retracted"),
    }
}

/// The longest line one decision may take: a long reason or summary is cut with `…`
/// here, so that it can neither crowd the older decisions out of the section nor,
/// alone, outgrow it.
pub const MAX_HISTORY_LINE_CHARS: usize = 400;

/// Shortest room worth a cut line; with less left, the section ends.
const MIN_CUT_LINE_CHARS: usize = 24;

/// `text` cut to at most `max` characters, the last of them `…` when cut.
fn cut(text: String, max: usize) -> String {
    if text.chars().count() <= max {
        return text;
    }
    text.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
}

/// Renders `decisions` (newest first, as the store returns them) as the prompt section:
/// at most [`MAX_HISTORY_ENTRIES`] lines and [`MAX_HISTORY_TOKENS`] tokens. Newer
/// decisions are kept first: each line is cut to [`MAX_HISTORY_LINE_CHARS`], and the
/// line that no longer fits whole is cut to the room left, ending the section. `None`
/// only when there is nothing to show.
pub fn render_history(decisions: &[ChangeDecision]) -> Option<String> {
    render_history_with_runs(decisions, |_| None)
}

/// [`render_history`], with what became of each confirmed call whose effect lies
/// outside the database: `run_of` names it (e.g. `run: applied`, `run: failed: …`), and
/// it follows the decision on its line. Decisions it says nothing about read as
/// [`render_history`] renders them.
pub fn render_history_with_runs(
    decisions: &[ChangeDecision],
    run_of: impl Fn(&ChangeDecision) -> Option<String>,
) -> Option<String> {
    // The estimate rounds characters up to tokens, so staying within this many
    // characters keeps the whole section within the token budget.
    let budget = MAX_HISTORY_TOKENS * 4;
    let mut text = format!("{HISTORY_HEADING}\n\n{INTRO}\n");
    let mut shown = 0;
    for decision in decisions.iter().take(MAX_HISTORY_ENTRIES) {
        let next = cut(
            line(decision, run_of(decision).as_deref()),
            MAX_HISTORY_LINE_CHARS,
        );
        // One character for the newline before the line.
        let room = budget.saturating_sub(text.chars().count() + 1);
        let fits = next.chars().count() <= room;
        if !fits && room < MIN_CUT_LINE_CHARS {
            break;
        }
        text.push('\n');
        text.push_str(&cut(next, room));
        shown += 1;
        if !fits {
            break;
        }
    }
    (shown > 0).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_domain::{OffsetDateTime, Uuid, VectorClock};
    use proptest::prelude::*;
    use serde_json::json;

    fn decision(
        verdict: Verdict,
        summary: &str,
        reason: Option<&str>,
        edited: Option<serde_json::Value>,
    ) -> ChangeDecision {
        ChangeDecision {
            id: Uuid::nil(),
            change_set_id: Uuid::nil(),
            item_index: 0,
            agent_id: "a".into(),
            target_kind: "task".into(),
            target_id: "t".into(),
            tool_name: "update_task_priority".into(),
            verdict,
            reason: reason.map(str::to_owned),
            edited_args: edited,
            human_summary: summary.into(),
            args: json!({"priority": "P2"}),
            created_at: OffsetDateTime::UNIX_EPOCH,
            vector_clock: VectorClock::default(),
        }
    }

    #[test]
    fn omitted_when_empty() {
        assert_eq!(render_history(&[]), None);
    }

    #[test]
    fn one_line_per_verdict_newest_first() {
        let text = render_history(&[
            decision(Verdict::Confirmed, "Set priority to P2", None, None),
            decision(
                Verdict::Rejected,
                "Set priority to P0",
                Some("I know better"),
                None,
            ),
            decision(Verdict::Deferred, "Set priority to P3", None, None),
            decision(Verdict::Retracted, "Set priority to P1", None, None),
            decision(
                Verdict::Confirmed,
                "Set priority to P2",
                None,
                Some(json!({"priority": "P1"})),
            ),
            decision(Verdict::Rejected, "Set priority to P3", Some("  "), None),
        ])
        .expect("some");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "## Recent User Decisions");
        let body: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("- "))
            .collect();
        assert_eq!(
            body,
            [
                "- ✓ update_task_priority: Set priority to P2 — confirmed",
                "- ✗ update_task_priority: Set priority to P0 — rejected (reason: \"I know better\")",
                "- ⏸ update_task_priority: Set priority to P3 — deferred",
                "- ↺ update_task_priority: Set priority to P1 — retracted",
                "- ✎ update_task_priority: Set priority to P2 — confirmed with edits: {\"priority\":\"P1\"}",
                "- ✗ update_task_priority: Set priority to P3 — rejected",
            ]
        );
    }

    #[test]
    fn at_most_twenty_entries() {
        let many: Vec<_> = (0..30)
            .map(|i| decision(Verdict::Confirmed, &format!("#{i}"), None, None))
            .collect();
        let text = render_history(&many).expect("some");
        assert_eq!(text.lines().filter(|l| l.starts_with("- ")).count(), 20);
        assert!(text.contains("#0") && text.contains("#19") && !text.contains("#20"));
    }

    #[test]
    fn a_long_reason_is_cut_and_the_older_decisions_stay() {
        let long = "x".repeat(1_800);
        let text = render_history(&[
            decision(Verdict::Rejected, "Set priority to P0", Some(&long), None),
            decision(Verdict::Confirmed, "Set priority to P2", None, None),
            decision(Verdict::Rejected, "Set priority to P1", Some("no"), None),
        ])
        .expect("the section stays");
        let body: Vec<&str> = text.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(body.len(), 3, "{text}");
        assert!(
            body[0].starts_with(
                "- ✗ update_task_priority: Set priority to P0 — rejected (reason: \"xxx"
            )
        );
        assert!(body[0].ends_with('…'));
        assert_eq!(body[0].chars().count(), MAX_HISTORY_LINE_CHARS);
        assert_eq!(
            body[2],
            "- ✗ update_task_priority: Set priority to P1 — rejected (reason: \"no\")"
        );
        assert!(estimate_tokens(&text) <= MAX_HISTORY_TOKENS);
    }

    #[test]
    fn the_line_that_no_longer_fits_is_cut_to_the_room_left() {
        let long = "y".repeat(390);
        let many: Vec<_> = (0..10)
            .map(|_| decision(Verdict::Rejected, "Set priority to P0", Some(&long), None))
            .collect();
        let text = render_history(&many).expect("some");
        assert_eq!(
            estimate_tokens(&text),
            MAX_HISTORY_TOKENS,
            "filled exactly: {text}"
        );
        assert!(text.ends_with('…'));
    }

    proptest! {
        #[test]
        fn never_exceeds_the_token_budget(summaries in prop::collection::vec(".{0,400}", 1..30)) {
            let decisions: Vec<_> = summaries.iter().map(|s| decision(Verdict::Rejected, s, Some(s), None)).collect();
            let text = render_history(&decisions).expect("at least one line fits");
            prop_assert!(estimate_tokens(&text) <= MAX_HISTORY_TOKENS, "{} tokens", estimate_tokens(&text));
            prop_assert!(text.lines().filter(|l| l.starts_with("- ")).count() <= MAX_HISTORY_ENTRIES);
        }
    }

    #[test]
    fn a_run_follows_its_decision_and_other_lines_read_as_before() {
        let mut confirmed = decision(Verdict::Confirmed, "Refund 25 EUR", None, None);
        confirmed.id = Uuid::from_u128(1);
        let rejected = decision(Verdict::Rejected, "Refund 90 EUR", Some("no"), None);
        let both = [confirmed.clone(), rejected.clone()];
        let plain = render_history(&both).expect("a section");
        let with_runs = render_history_with_runs(&both, |d| {
            (d.id == confirmed.id).then(|| "run: failed: the\nbank said no".to_owned())
        })
        .expect("a section");
        assert_eq!(
            with_runs,
            plain.replacen(
                "— confirmed",
                "— confirmed (run: failed: the bank said no)",
                1
            )
        );
    }
}
