//! What a waiting model reads once the person decided: the same words the MCP
//! gateway's `--wait` answers with (`Rejected by the user: REASON`, …), worded in
//! `assent_changeset::reply`, so prompts and services that match on them work for both
//! doors.

use crate::Answer;
use assent_confirm::{ItemOutcome, SetOutcome};
use assent_domain::ChangeItemStatus;
use assent_store::jobs::JobStatus;

use assent_changeset::reply;

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
                JobStatus::Failed | JobStatus::Retracted => {
                    error(reply::waited_failed(run.last_error.as_deref()))
                }
                JobStatus::Applied | JobStatus::Approved | JobStatus::Running => success(
                    item.result
                        .clone()
                        .unwrap_or_else(|| reply::WAITED_APPLIED.to_owned()),
                ),
                // In doubt, or a status this hook has no words for yet: never said to
                // be done.
                _ => error(reply::waited_in_doubt(run.last_error.as_deref())),
            },
            None => success(
                item.result
                    .clone()
                    .unwrap_or_else(|| reply::WAITED_APPLIED.to_owned()),
            ),
        },
        ChangeItemStatus::Rejected | ChangeItemStatus::Retracted => {
            let reason = item
                .decision
                .as_ref()
                .and_then(|decision| decision.reason.as_deref());
            error(reply::waited_rejected(reason))
        }
        ChangeItemStatus::Pending | ChangeItemStatus::Deferred => success(reply::QUEUED.to_owned()),
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
