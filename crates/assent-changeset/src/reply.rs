//! The exact texts the agent reads back. Other services match on them: change one only
//! with a note in the changelog.

/// A deferred call was queued.
pub const QUEUED: &str = "Proposal queued for user review.";

/// A batch call: how many of its elements were queued.
pub fn batch_queued(queued: usize) -> String {
    if queued == 0 {
        "Nothing queued for user review.".to_owned()
    } else {
        format!("Proposal queued for user review ({queued} item(s) queued).")
    }
}

/// A batch call: elements that did not match the singular tool's schema.
pub fn malformed_skipped(count: usize) -> String {
    format!("{count} malformed item(s) skipped.")
}

/// A batch call: elements that would change nothing, each with its detail.
pub fn redundant_skipped(details: &[String]) -> String {
    format!(
        "Skipped {} redundant update(s): {}.",
        details.len(),
        details.join("; ")
    )
}

/// A single call that would change nothing, e.g. `Skipped: priority is already P1.`
pub fn skipped(detail: &str) -> String {
    format!("Skipped: {detail}.")
}

/// Proposals naming checklist items that do not exist.
pub fn invented_ids(ids: &[String]) -> String {
    let quoted: Vec<String> = ids.iter().map(|id| format!("\"{id}\"")).collect();
    format!(
        "Rejected {} update(s) for checklist item id(s) that do not exist: {}. Do not propose these again.",
        ids.len(),
        quoted.join(", ")
    )
}

/// A proposal identical to one already waiting for the user.
pub const DUPLICATE: &str = "Skipped: an identical proposal is already waiting for user review.";

/// Batch elements identical to proposals already waiting.
pub fn duplicates_skipped(count: usize) -> String {
    format!("{count} item(s) already waiting for user review skipped.")
}

/// A proposal the user rejected recently, quoting the reason.
pub fn recently_rejected(reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!(
            "Skipped: the user rejected this exact proposal recently (reason: \"{}\"). Do not propose it again.",
            reason.trim()
        ),
        _ => "Skipped: the user rejected this exact proposal recently. Do not propose it again."
            .to_owned(),
    }
}

/// Proposals refused because the change set is full.
pub fn cap_reached(cap: usize, refused: usize) -> String {
    format!(
        "Not queued: this wake's change set already holds {cap} proposal(s), the limit; {refused} proposal(s) refused and not executed. Wait for the user to review the queued ones."
    )
}

/// The call named no registered tool.
pub fn unknown_tool(name: &str) -> String {
    format!("Error: unknown tool \"{name}\". Nothing was queued.")
}

/// The call's arguments could not be used.
pub fn invalid_args(tool: &str, problem: &str) -> String {
    format!("Error: invalid arguments for {tool}: {problem}. Nothing was queued.")
}

/// The policy refused the call.
pub fn denied(reason: &str) -> String {
    format!("Denied by policy: {reason}. Nothing was queued or executed.")
}

/// Batch elements identical to proposals the user rejected recently.
pub fn rejected_skipped(reasons: &[Option<String>]) -> String {
    let quoted: Vec<String> = reasons
        .iter()
        .flatten()
        .filter(|r| !r.trim().is_empty())
        .map(|r| format!("\"{}\"", r.trim()))
        .collect();
    if quoted.is_empty() {
        format!(
            "{} item(s) the user recently rejected skipped. Do not propose them again.",
            reasons.len()
        )
    } else {
        format!(
            "{} item(s) the user recently rejected skipped (reasons: {}). Do not propose them again.",
            reasons.len(),
            quoted.join(", ")
        )
    }
}

/// A delegated call the parent's session confirmed; the tool's own message follows.
pub fn delegated_applied(message: &str) -> String {
    format!("Confirmed by the parent session. {message}")
}

/// A delegated call a standing grant of the parent's session confirmed without asking;
/// the tool's own message follows.
pub fn granted_applied(message: &str) -> String {
    format!("Confirmed by a standing grant of the parent session. {message}")
}

/// A delegated call the parent's session rejected, with its reason when given.
pub fn delegated_rejected(reason: Option<&str>) -> String {
    match reason {
        Some(reason) if !reason.trim().is_empty() => format!(
            "Rejected by the parent session (reason: \"{}\"). Do not propose it again.",
            reason.trim()
        ),
        _ => "Rejected by the parent session. Do not propose it again.".to_owned(),
    }
}

/// A delegated call that was not run: nobody answered, the wait was cancelled, or it
/// could not be confirmed or run; it stays queued for a person's review.
pub fn delegated_not_run(reason: &str) -> String {
    format!("Not run: {reason}. The proposal stays queued for user review.")
}
/// A call a person rejected, answered to a caller that waited for the decision (the
/// MCP gateway's `--wait`, the rig hook's `wait`); `no reason given` without one.
pub fn waited_rejected(reason: Option<&str>) -> String {
    let reason = reason
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .unwrap_or("no reason given");
    format!("Rejected by the user: {reason}")
}

/// An approved call whose run failed for good (or was withdrawn), to a waiting caller.
pub fn waited_failed(error: Option<&str>) -> String {
    format!(
        "Approved, but the call failed: {}",
        error.unwrap_or("no error recorded")
    )
}

/// An approved call whose run may or may not have happened, to a waiting caller.
pub fn waited_in_doubt(error: Option<&str>) -> String {
    format!(
        "Approved, but whether the call took effect is unknown (in doubt) until a person settles it: {}",
        error.unwrap_or("no error recorded")
    )
}

/// An approved call that took effect with no result text known (confirmed as already
/// true), to a waiting caller.
pub const WAITED_APPLIED: &str = "Confirmed and applied.";

/// The openings of the replies that refuse a call: nothing of it was queued or run
/// because it was wrong, denied or over a limit (unknown tool, invalid arguments,
/// policy, the cap, invented ids, a failed run, a parent's rejection).
const REFUSALS: &[&str] = &[
    "Error: ",
    "Denied by policy: ",
    "Not queued: ",
    "Rejected ",
    "Not run: ",
    "Nothing to execute: ",
];

/// Whether `text` (a whole reply, perhaps several lines for a batch) refuses its call,
/// judged by its first line: what SDK replies mark as an error (`is_error`,
/// `isError`, `status: "error"`). A reply that queued, skipped or ran something is
/// not a refusal even when later lines refuse some of a batch's elements.
pub fn is_refusal(text: &str) -> bool {
    REFUSALS.iter().any(|opening| text.starts_with(opening))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_caller_reads_the_decision_in_the_same_words_at_every_door() {
        assert_eq!(
            waited_rejected(Some(" not now ")),
            "Rejected by the user: not now"
        );
        assert_eq!(
            waited_rejected(Some("  ")),
            "Rejected by the user: no reason given"
        );
        assert_eq!(
            waited_rejected(None),
            "Rejected by the user: no reason given"
        );
        assert_eq!(
            waited_failed(Some("503")),
            "Approved, but the call failed: 503"
        );
        assert!(waited_in_doubt(None).ends_with("until a person settles it: no error recorded"));
        assert!(is_refusal(&waited_rejected(None)));
    }

    #[test]
    fn refusals_are_told_from_the_rest() {
        for refused in [
            unknown_tool("x"),
            invalid_args("t", "bad"),
            denied("no"),
            cap_reached(3, 1),
            invented_ids(&["c9".to_owned()]),
            delegated_rejected(Some("no")),
            delegated_not_run("nobody answered"),
            "Error: t failed: boom. Nothing was changed.".to_owned(),
        ] {
            assert!(is_refusal(&refused), "{refused}");
        }
        for fine in [
            QUEUED.to_owned(),
            batch_queued(2),
            batch_queued(0),
            skipped("priority is already P1"),
            DUPLICATE.to_owned(),
            recently_rejected(None),
            delegated_applied("Done."),
            granted_applied("Done."),
            format!("{}\n{}", batch_queued(1), cap_reached(1, 1)),
        ] {
            assert!(!is_refusal(&fine), "{fine}");
        }
    }
}
