//! What the two baselines of `writes` share: the sqlx one (in `writes`) and the
//! rusqlite one (`raw`) run the same SQL on the same prepared items, so their figures
//! differ by the driver alone. Kept apart so that `raw` needs nothing from `writes`
//! while `writes` drives `raw`.

use std::sync::Arc;

/// The agent both baselines write for, as Assent's side does.
pub(crate) const AGENT: &str = "agent-1";

/// An item's summary as Assent words it, so both sides write the same bytes.
pub(crate) fn summary(title: &str) -> String {
    format!("Add checklist item \"{title}\"")
}

pub(crate) const ENQUEUE: &str =
    "INSERT INTO outbox (entity_type, entity_id, payload, status, attempts, created_at, updated_at)
     VALUES ($1, $2, $3, 'pending', 0, $4, $4)
     ON CONFLICT (entity_type, entity_id) WHERE status = 'pending'
     DO UPDATE SET payload = excluded.payload, updated_at = excluded.updated_at";

pub(crate) const INSERT_SET: &str =
    "INSERT INTO change_sets (id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, vector_clock)
     VALUES ($1, $2, 'task', $3, $4, $4, 'pending', $5, '{}')";
pub(crate) const INSERT_ITEM: &str =
    "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status)
     VALUES ($1, $2, 'add_checklist_item', $3, $4, 'pending')";
pub(crate) const INSERT_CHECKLIST_ITEM: &str = "INSERT INTO checklist_items (id, task_id, position, title, is_checked) VALUES ($1, $2, $3, $4, 0)";
pub(crate) const TOUCH_TASK: &str =
    "UPDATE tasks SET vector_clock = $1, updated_at = $2 WHERE id = $3";
pub(crate) const INSERT_AUDIT: &str =
    "INSERT INTO audit_records (operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args,
                                success, created_at)
     VALUES ($1, $2, 'add_checklist_item', $3, 'task', $4, $5, $6, $7, $8) RETURNING id";
pub(crate) const INSERT_APPLIED: &str =
    "INSERT INTO applied_operations (operation_id, tool_name, target_kind, target_id, message, applied_at)
     VALUES ($1, 'add_checklist_item', 'task', $2, 'Checklist item added.', $3)";
pub(crate) const INSERT_DECISION: &str =
    "INSERT INTO decisions (id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict,
                            human_summary, args, created_at, vector_clock)
     VALUES ($1, $2, $3, $4, 'task', $5, 'add_checklist_item', 'confirmed', $6, $7, $8, $9)";
pub(crate) const CONFIRM_ITEM: &str =
    "UPDATE change_items SET status = 'confirmed' WHERE change_set_id = $1 AND item_index = $2";
pub(crate) const SET_STATUS: &str =
    "UPDATE change_sets SET status = $1, vector_clock = $2 WHERE id = $3";

/// One queued item of the baseline and what its confirmation writes, prepared
/// before the clock starts: ids, and outbox payloads as large as Assent's.
pub(crate) struct BaselineItem {
    pub task: String,
    pub set: String,
    pub index: usize,
    pub title: String,
    pub run_key: String,
    pub checklist_item: String,
    pub operation: String,
    pub decision: String,
    /// `{"title": …}`, the item's arguments.
    pub args: String,
    pub summary: String,
    /// The task's and the set's clock after this confirmation.
    pub clock: String,
    /// The set's status after this confirmation.
    pub set_status: &'static str,
    /// The task with its checklist so far, as the journal replicates it.
    pub task_payload: String,
    pub audit_payloads: [String; 2],
    pub decision_payload: String,
    pub item_payload: String,
    pub set_payload: Arc<str>,
}
