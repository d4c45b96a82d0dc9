//! Issue 53, point 4: a confirmation is never accepted for a call nothing will run. The
//! caller that withdraws its item when its wait ends (a coding agent's hook) and is gone
//! past that moment, or the MCP chat that made the call ended (and its tool is not
//! marked run-after-disconnect): the confirmation is refused (`sessionEnded`, saying
//! why) and the call withdrawn, in one transaction; on SQLite and PostgreSQL.

use assent_confirm::{ConfirmError, ConflictKind, Engine, ExecutionOutcome, ItemRef, JobSettings};
use assent_domain::ChangeItemStatus;
use assent_store::{Store, change_sets};
use assent_tests::backends;
use assent_tests::book::{self, AGENT, TOOL};
use std::time::Duration;
use time::OffsetDateTime;
use uuid::Uuid;

async fn status(store: &Store, set: Uuid) -> ChangeItemStatus {
    let mut conn = store.read_connection().await.unwrap();
    change_sets::require(&mut conn, set).await.unwrap().items[0].status
}

fn ended(result: Result<assent_confirm::ConfirmOutcome, ConfirmError>) -> String {
    match result {
        Err(error) if error.conflict_kind() == Some(ConflictKind::SessionEnded) => {
            error.to_string()
        }
        other => panic!("expected a refusal for an ended session, got {other:?}"),
    }
}

fn queued(result: Result<assent_confirm::ConfirmOutcome, ConfirmError>) {
    match result.map(|outcome| outcome.execution) {
        Ok(ExecutionOutcome::Queued { .. }) => {}
        other => panic!("expected a queued job, got {other:?}"),
    }
}

#[tokio::test]
async fn a_call_whose_session_ended_is_refused_at_confirmation_and_withdrawn() {
    for backend in backends() {
        let (url, _dir) = backend.fresh_database().await;
        let store = Store::open(&url).await.unwrap();
        let service = book::engine(
            store.clone(),
            book::host(Duration::ZERO, None),
            JobSettings::default(),
        )
        .await;
        let reviewer: Engine = book::elsewhere(store.clone()).await;
        let now = OffsetDateTime::now_utc();
        let confirmations = reviewer.confirmations().by("alice");
        let confirm = |set| confirmations.confirm_item(ItemRef::new(set, 0), now);

        // A hook that withdraws its item at the end of its wait, gone past it.
        let gone = book::propose(&service, "L1", "run-1", &[100]).await;
        reviewer
            .record_wait_ending(gone, now - time::Duration::minutes(1), true)
            .await
            .unwrap();
        let why = ended(confirm(gone).await);
        assert!(why.contains("the agent's hook stopped waiting"), "{why}");
        assert_eq!(status(&store, gone).await, ChangeItemStatus::Retracted);
        // One that leaves its item for a retry, or is still within its wait: accepted.
        let kept = book::propose(&service, "L2", "run-2", &[200]).await;
        reviewer
            .record_wait_ending(kept, now - time::Duration::minutes(1), false)
            .await
            .unwrap();
        queued(confirm(kept).await);
        let waiting = book::propose(&service, "L3", "run-3", &[300]).await;
        reviewer
            .record_wait_ending(waiting, now + time::Duration::minutes(1), true)
            .await
            .unwrap();
        queued(confirm(waiting).await);

        // A gateway chat that ended before the confirmation.
        let session = Uuid::new_v4();
        reviewer
            .admin()
            .open_client_session(session, AGENT, "files", now - time::Duration::minutes(2))
            .await
            .unwrap();
        let chat = book::propose(&service, "L4", "run-4", &[400]).await;
        reviewer
            .admin()
            .record_client_call(chat, session)
            .await
            .unwrap();
        reviewer
            .admin()
            .end_client_session(session, now - time::Duration::minutes(1))
            .await
            .unwrap();
        let why = ended(confirm(chat).await);
        assert!(
            why.contains(&format!("assent agent run-after-disconnect {AGENT} {TOOL}")),
            "{why}"
        );
        assert_eq!(status(&store, chat).await, ChangeItemStatus::Retracted);
        // Marked run-after-disconnect: such a call is accepted and runs later.
        reviewer
            .admin()
            .set_run_after_disconnect(AGENT, TOOL, true, now)
            .await
            .unwrap();
        let marked = book::propose(&service, "L5", "run-5", &[500]).await;
        reviewer
            .admin()
            .record_client_call(marked, session)
            .await
            .unwrap();
        queued(confirm(marked).await);
        store.close().await;
    }
}
