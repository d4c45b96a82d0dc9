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

/// The call of `tool`, which acts on the `kind` its arguments name at JSON pointer
/// `pointer`, names none there.
pub fn no_target_in_args(tool: &str, kind: &str, pointer: &str) -> String {
    format!(
        "Error: {tool} acts on the {kind} its arguments name at {pointer}, and they name none (a non-empty string or a number is needed there). Nothing was queued."
    )
}

/// The call names a target (`kind` `id`, from its arguments) the service does not have.
pub fn no_such_target(kind: &str, id: &str) -> String {
    format!("Error: there is no {kind} \"{id}\". Nothing was queued.")
}

/// The call's arguments could not be used.
pub fn invalid_args(tool: &str, problem: &str) -> String {
    format!("Error: invalid arguments for {tool}: {problem}. Nothing was queued.")
}

/// The policy refused the call.
pub fn denied(reason: &str) -> String {
    format!("Denied by policy: {reason}. Nothing was queued or executed.")
}

/// Why a call of `tool` may not run: the agent's rules deny it. One wording on every
/// path (the agent reads it, inside [`denied`]; reviewers see it in the audit trail).
pub fn denied_by_policy(tool: &str) -> String {
    format!("Tool {tool} is denied by policy")
}

/// What the policy's refusal says, in the wording of [`denied_by_policy`] when a rule
/// denied the tool.
pub fn denial(denial: &assent_tools::Denial) -> String {
    match denial {
        assent_tools::Denial::Rule { tool } => denied_by_policy(tool),
        // `Tool Bash is denied by policy: denied by rule deny Bash(rm -rf *) (part 2 of
        // 3: rm -rf build)`: the rule, and the part of a chained command it found.
        assent_tools::Denial::NamedRule { tool, ruling } => {
            format!("{}: {ruling}", denied_by_policy(tool))
        }
        assent_tools::Denial::Category(reason) => reason.clone(),
        // A reason this release has no words for yet: shown as it is, never dropped.
        other => format!("{other:?}"),
    }
}

/// Where the rule that refused a call came from, quoted to the agent after the whole
/// refusal (issue 57), so every word before it stays as scripts know it: ` Decided by
/// rule deny Bash(rm *) (policy file ab12cd34, set by alice 2026-12-01).`; `None` for
/// a rule set before provenance was recorded, or no rule.
pub fn rule_origin(ruling: Option<&assent_tools::Ruling>) -> Option<String> {
    let ruling = ruling?;
    let provenance = ruling.provenance.as_ref()?;
    Some(format!(
        " Decided by rule {} {} ({}).",
        ruling.action.as_str(),
        ruling.pattern,
        provenance.summary()
    ))
}

/// [`denied`] of a policy refusal, with where its rule came from ([`rule_origin`])
/// after it.
pub fn denied_by_rule(
    denial: &assent_tools::Denial,
    ruling: Option<&assent_tools::Ruling>,
) -> String {
    let mut said = denied(&self::denial(denial));
    if let Some(origin) = rule_origin(ruling) {
        said.push_str(&origin);
    }
    said
}

/// A confirmed call the policy refused when it was about to run: the error recorded on
/// its job (the agent reads it after [`waited_failed`]'s opening).
pub fn denied_at_run(reason: &str) -> String {
    format!("denied by policy: {reason}")
}

/// A call run now whose handler failed.
pub fn run_failed(tool: &str, error: &str) -> String {
    format!("Error: {tool} failed: {error}. Nothing was changed.")
}

/// A call handled in the wake's own transaction (a local tool) that failed: rolled back
/// to its savepoint.
pub fn local_failed(tool: &str, error: &str) -> String {
    format!("Error: {tool} failed: {error}.")
}

/// A batch call every element of which was malformed.
pub const NOTHING_TO_EXECUTE: &str = "Nothing to execute: every element was malformed.";

/// A call run now by an external host: its job.
pub fn queued_as_job(job_id: &dyn std::fmt::Display) -> String {
    format!("Queued as job {job_id}.")
}

/// A call that needs more approvals before it runs.
pub fn awaiting_approvals(approvals: usize, needed: u32) -> String {
    format!("Waiting for approvals: {approvals} of {needed}.")
}

/// A confirmed call that changed nothing because what it asks is already true.
pub fn confirmed_unchanged(detail: &str) -> String {
    format!("Confirmed without a change: {detail}.")
}

/// A waiting caller's call whose change set is gone (deleted by a person).
pub const GONE: &str = "The proposal no longer exists.";

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
/// What stands for a reason nobody gave.
pub const NO_REASON: &str = "no reason given";

/// `assent_status` of a call nobody decided yet, in set `set`.
pub fn status_pending(tool: &str, set: &dyn std::fmt::Display) -> String {
    format!(
        "Pending: a person has not decided call {tool} (change set {set}) yet. Ask again later."
    )
}

/// `assent_status` of a confirmed call that ran, with its result; `note` is
/// [`EDITED_NOTE`] or empty.
pub fn status_applied(result: &str, note: &str) -> String {
    format!("Confirmed by a person and run.{note} Result:\n{result}")
}

/// `assent_status` of a confirmed call whose run has not finished; `note` as for
/// [`status_applied`].
pub fn status_running(note: &str) -> String {
    format!("Confirmed by a person; the call has not finished running yet.{note} Ask again later.")
}

/// `assent_status` of a call withdrawn before a person decided it.
pub fn status_withdrawn(reason: Option<&str>) -> String {
    format!("Withdrawn, not run: {}", reason.unwrap_or(NO_REASON))
}

/// Appended to an `assent_status` answer when a person edited the call.
pub const EDITED_NOTE: &str = " A person changed the arguments before it ran.";

/// The line that tells a waiting model a person changed its arguments before the call
/// ran, each change (`KEY: OLD → NEW`, `KEY added: NEW`, `KEY removed (was OLD)`)
/// already worded by [`edited_key`].
pub fn edited(changes: &[String]) -> String {
    format!(
        "A person changed the arguments before it ran: {}",
        changes.join("; ")
    )
}

/// One change of [`edited`]: `old`/`new` shown as compact JSON, `None` when the key
/// was absent on that side.
pub fn edited_key(key: &str, old: Option<&str>, new: Option<&str>) -> String {
    match (old, new) {
        (Some(old), Some(new)) => format!("{key}: {old} → {new}"),
        (None, Some(new)) => format!("{key} added: {new}"),
        (Some(old), None) => format!("{key} removed (was {old})"),
        (None, None) => key.to_owned(),
    }
}

/// A call a person rejected, answered to a caller that waited for the decision (the
/// MCP gateway's `--wait`, the rig hook's `wait`); `no reason given` without one.
pub fn waited_rejected(reason: Option<&str>) -> String {
    let reason = reason
        .map(str::trim)
        .filter(|reason| !reason.is_empty())
        .unwrap_or(NO_REASON);
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
