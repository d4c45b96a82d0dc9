//! What both ways of syncing (batch files in `sync_commands`, a peer over HTTP in
//! `peer_sync`) say about a batch: its summary as `--json` prints it, and the record
//! of a batch the store refused. Kept apart so that neither way imports the other.

use assent_store::StoreError;
use assent_store::sync;
use assent_sync::SyncBatch;
use serde_json::json;

/// What a batch holds, as `sync export --json` and `sync --peer --json` print it.
pub fn batch_summary(batch: &SyncBatch) -> serde_json::Value {
    json!({
        "batchId": batch.batch_id,
        "fromHost": batch.from_host,
        "changeSets": batch.state.change_sets.len(),
        "decisions": batch.state.decisions.len(),
        "auditRecords": batch.state.audit_records.len(),
        "entities": batch.state.entities.len(),
    })
}

/// Records the refusal of `batch` in the imports' log, after the import's transaction
/// rolled back; a failure to record it is logged, the refusal reported either way.
pub async fn refused(
    store: &assent_store::Store,
    batch: &SyncBatch,
    error: &StoreError,
    now: time::OffsetDateTime,
) {
    if let Err(record) = sync::record_refusal(store, batch, error, now).await {
        tracing::warn!(%record, "could not record the refused sync batch");
    }
}
