//! What a waiting model reads once the person decided: the same words the MCP
//! gateway's `--wait` answers with (`Rejected by the user: REASON`, …), so prompts and
//! services that match on them work for both doors.
//!
//! FIXME: these texts are worded here and in `assent-mcp`'s gateway, not in
//! `assent_changeset::reply` where reply texts belong; moving them there is a change
//! to that crate (see NOTES-FOR-LEAD.md).

use crate::Answer;
use assent_confirm::{ItemOutcome, SetOutcome};
use assent_domain::ChangeItemStatus;
use assent_store::jobs::JobStatus;

/// A confirmed item whose handler's text is not known (confirmed as already true).
const CONFIRMED: &str = "Confirmed and applied.";

/// What the model reads about a settled set, one line per item; `None` while the set
/// is not settled.
pub(crate) fn of_outcome(outcome: &SetOutcome) -> Option<Answer> {
    if !outcome.settled {
        return None;
    }
    let answers: Vec<Answer> = outcome.items.iter().map(of_item).collect();
    let is_error = !answers.is_empty() && answers.iter().all(|answer| answer.is_error);
    let text = answers
        .into_iter()
        .map(|answer| answer.text)
        .collect::<Vec<_>>()
        .join("\n");
    Some(Answer { text, is_error })
}

fn of_item(item: &ItemOutcome) -> Answer {
    match item.status {
        ChangeItemStatus::Confirmed => match &item.run {
            Some(run) => match run.status {
                JobStatus::Failed | JobStatus::Retracted => error(format!(
                    "Approved, but the call failed: {}",
                    run.last_error.as_deref().unwrap_or("no error recorded")
                )),
                JobStatus::InDoubt => error(format!(
                    "Approved, but whether the call took effect is unknown (in doubt) \
                     until a person settles it: {}",
                    run.last_error.as_deref().unwrap_or("no error recorded")
                )),
                JobStatus::Applied | JobStatus::Approved | JobStatus::Running => {
                    success(item.result.clone().unwrap_or_else(|| CONFIRMED.to_owned()))
                }
            },
            None => success(item.result.clone().unwrap_or_else(|| CONFIRMED.to_owned())),
        },
        ChangeItemStatus::Rejected | ChangeItemStatus::Retracted => {
            let reason = item
                .decision
                .as_ref()
                .and_then(|decision| decision.reason.as_deref())
                .filter(|reason| !reason.trim().is_empty())
                .unwrap_or("no reason given");
            error(format!("Rejected by the user: {reason}"))
        }
        ChangeItemStatus::Pending | ChangeItemStatus::Deferred => {
            success(assent_changeset::reply::QUEUED.to_owned())
        }
    }
}

fn success(text: String) -> Answer {
    Answer {
        text,
        is_error: false,
    }
}

fn error(text: String) -> Answer {
    Answer {
        text,
        is_error: true,
    }
}
