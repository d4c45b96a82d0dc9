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
fn estimate_tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// Newlines in model- or user-written text must not start new prompt lines.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn line(decision: &ChangeDecision) -> String {
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

/// Renders `decisions` (newest first, as the store returns them) as the prompt section:
/// at most [`MAX_HISTORY_ENTRIES`] lines and [`MAX_HISTORY_TOKENS`] tokens; older lines
/// are dropped first. `None` when there is nothing to show.
pub fn render_history(decisions: &[ChangeDecision]) -> Option<String> {
    let mut text = format!("{HISTORY_HEADING}\n\n{INTRO}\n");
    let mut shown = 0;
    for decision in decisions.iter().take(MAX_HISTORY_ENTRIES) {
        let mut next = line(decision);
        // A single pathological line (a huge summary) is shortened rather than
        // allowed to blow the budget or hide every other decision.
        let room = (MAX_HISTORY_TOKENS * 4).saturating_sub(text.chars().count() + 1);
        if shown == 0 && next.chars().count() > room {
            next = next
                .chars()
                .take(room.saturating_sub(1))
                .collect::<String>()
                + "…";
        }
        if estimate_tokens(&text) + estimate_tokens(&next) + 1 > MAX_HISTORY_TOKENS {
            break;
        }
        text.push('\n');
        text.push_str(&next);
        shown += 1;
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
            task_id: "t".into(),
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

    proptest! {
        #[test]
        fn never_exceeds_the_token_budget(summaries in prop::collection::vec(".{0,400}", 1..30)) {
            let decisions: Vec<_> = summaries.iter().map(|s| decision(Verdict::Rejected, s, Some(s), None)).collect();
            let text = render_history(&decisions).expect("at least one line fits");
            prop_assert!(estimate_tokens(&text) <= MAX_HISTORY_TOKENS, "{} tokens", estimate_tokens(&text));
            prop_assert!(text.lines().filter(|l| l.starts_with("- ")).count() <= MAX_HISTORY_ENTRIES);
        }
    }
}
