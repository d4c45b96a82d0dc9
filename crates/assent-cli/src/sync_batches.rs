//! What both ways of syncing (batch files in `sync_commands`, a peer over HTTP in
//! `peer_sync`) say about a batch: its summary as `--json` prints it. Kept apart so
//! that neither way imports the other.

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
