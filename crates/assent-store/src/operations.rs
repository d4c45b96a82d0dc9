//! Applied operations, keyed by deterministic operation id: the memory that makes a
//! retried confirmation apply nothing twice.

use crate::Connection;
use crate::plan::WritePlan;
use crate::{StoreError, timefmt};
use assent_domain::{OperationId, Target};
use time::OffsetDateTime;

/// The message recorded when `operation_id` was applied, if it was. The engine stores
/// it bounded ([`assent_domain::stored_result`]: at most 64 KiB, a cut one ending with
/// the whole text's size and SHA-256), so a retried wake that finds its call already
/// applied answers with that stored copy, not with the whole text the first call
/// returned.
pub async fn applied(
    conn: &mut Connection,
    operation_id: &OperationId,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT message FROM applied_operations WHERE operation_id = $1")
            .bind(operation_id.as_str())
            .fetch_optional(conn)
            .await?,
    )
}

/// The insert [`record_applied`] runs.
const RECORD_APPLIED: &str = "INSERT INTO applied_operations (operation_id, tool_name, target_kind, target_id, message, applied_at)
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (operation_id) DO NOTHING";

/// [`record_applied`] in `plan`, written when the plan is applied with the plan's
/// other applied operations in one statement (issue 55): for a caller that read, in
/// the same transaction and under its lock, that `operation_id` was not applied yet
/// ([`applied`] or the decision's read), so nothing in between may write it but this
/// plan. A row found there anyway is left as it is.
pub fn plan_applied(
    plan: &mut WritePlan,
    operation_id: &OperationId,
    tool_name: &str,
    target: &Target,
    message: &str,
    now: OffsetDateTime,
) {
    plan.applied_operation(operation_id, tool_name, target, message, now);
}

/// Records that `operation_id` was applied. Returns false when it already was (the
/// caller must then not apply it).
pub async fn record_applied(
    conn: &mut Connection,
    operation_id: &OperationId,
    tool_name: &str,
    target: &Target,
    message: &str,
    now: OffsetDateTime,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(RECORD_APPLIED)
        .bind(operation_id.as_str())
        .bind(tool_name)
        .bind(target.kind.as_str())
        .bind(target.id.as_str())
        .bind(message)
        .bind(timefmt::format(now))
        .execute(conn)
        .await?
        .rows_affected();
    Ok(inserted == 1)
}
