//! What a waiting model reads once the person decided: the same words the MCP
//! gateway's `--wait` answers with (`Rejected by the user: REASON`, …), worded in
//! `assent_changeset::reply`, so prompts and services that match on them work for both
//! doors.

use crate::Answer;
use assent_confirm::{ItemOutcome, SetOutcome};

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

/// The engine's answer for a settled call ([`ItemOutcome::waited_reply`]), an error
/// when the call did not (or may not have) taken effect; a call still open reads as
/// queued.
fn of_item(item: &ItemOutcome) -> Answer {
    match item.waited_reply() {
        Some(text) if item.state.is_error() => error(text),
        Some(text) => success(text),
        None => success(reply::QUEUED.to_owned()),
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
