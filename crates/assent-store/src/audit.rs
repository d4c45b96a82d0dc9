//! The audit trail: what the executor did, in order.

use crate::Connection;
use crate::outbox::{self, entity};
use crate::row::Statement;
use crate::writer::{Step, savepoint_sql};
use crate::{Backend, StoreError, chain, timefmt};
use assent_domain::{OperationId, Target, VectorClock};
use assent_tools::{AuditRecord, AuditSink, BoxFuture};
use serde_json::Value;
use sqlx::Row;
use sqlx::any::AnyRow;

const TABLE: &str = "audit_records";

/// Appends a record and its outbox message; returns the record's row id.
pub async fn insert(conn: &mut Connection, record: &AuditRecord) -> Result<i64, StoreError> {
    let id = insert_row(conn, record, None).await?;
    enqueue(conn, id, record).await?;
    Ok(id)
}

/// The outbox message of record `id`.
async fn enqueue(conn: &mut Connection, id: i64, record: &AuditRecord) -> Result<(), StoreError> {
    outbox::enqueue(
        conn,
        entity::AUDIT_RECORD,
        &id.to_string(),
        record,
        record.created_at,
    )
    .await
}

/// The record's row, without an outbox message; `origin` is the writing device's host
/// id and its id there, `None` for a record written on this device.
pub(crate) async fn insert_row(
    conn: &mut Connection,
    record: &AuditRecord,
    origin: Option<(&str, i64)>,
) -> Result<i64, StoreError> {
    let id = write_rows(conn, &[(record, origin)]).await?[0];
    let entry = chain::Entry {
        kind: chain::EntryKind::Audit,
        subject: id.to_string(),
        content: chain_content(id, record, origin),
    };
    chain::append(conn, vec![entry], record.created_at).await?;
    Ok(id)
}

/// The rows of records written on this device, without chain entries or outbox
/// messages (a [`crate::plan::WritePlan`] writes those): one statement per hundred
/// records. Returns their row ids in the order of `records`.
pub(crate) async fn insert_rows(
    conn: &mut Connection,
    records: &[AuditRecord],
) -> Result<Vec<i64>, StoreError> {
    let rows: Vec<_> = records.iter().map(|record| (record, None)).collect();
    write_rows(conn, &rows).await
}

async fn write_rows(
    conn: &mut Connection,
    rows: &[(&AuditRecord, Option<(&str, i64)>)],
) -> Result<Vec<i64>, StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        let mut insert = crate::row::Unnest::new(ROWS_UNNEST, TABLE, Vec::new(), &ROW_TYPES);
        for (record, origin) in rows {
            insert.row(row_values(record, *origin))?;
        }
        if insert.is_empty() {
            return Ok(Vec::new());
        }
        let written = insert
            .query()
            .fetch_all(pg)
            .await?
            .iter()
            .map(|row| row.try_get::<i64, _>(0))
            .collect::<Result<Vec<_>, _>>()?;
        return ids_in_order(written, rows.len());
    }
    let mut ids = Vec::with_capacity(rows.len());
    for (statement, count) in row_statements(rows) {
        let written = statement
            .query()
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| row.try_get::<i64, _>(0))
            .collect::<Result<Vec<_>, _>>()?;
        ids.extend(ids_in_order(written, count)?);
    }
    Ok(ids)
}

/// [`write_rows`] on PostgreSQL: every row in one statement whose text is the same for
/// any count (`crate::row::Unnest`), inserted in the order of the records so the ids
/// the sequence gives follow them ([`ids_in_order`]).
#[cfg(feature = "postgres")]
const ROWS_UNNEST: &str = "INSERT INTO audit_records (operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args, success, detail,
                            vector_clock, created_at, origin_host, origin_id, allowed_by, refused_by, decided_by)
 SELECT operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args, success, detail,
        vector_clock, created_at, origin_host, origin_id, allowed_by, refused_by, decided_by
 FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
             $9::bigint[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bigint[], $15::text[],
             $16::text[], $17::text[])
      WITH ORDINALITY AS u(operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args, success,
                           detail, vector_clock, created_at, origin_host, origin_id, allowed_by, refused_by,
                           decided_by, n)
 ORDER BY n
 RETURNING id";

/// The types of [`ROWS_UNNEST`]'s columns: `success` and `origin_id` integers.
#[cfg(feature = "postgres")]
const ROW_TYPES: [crate::row::ArrayType; 17] = {
    use crate::row::ArrayType::{Int, Text};
    [
        Text, Text, Text, Text, Text, Text, Text, Text, Int, Text, Text, Text, Text, Int, Text,
        Text, Text,
    ]
};

/// An audit row's values in the order of [`ROWS_UNNEST`]'s columns.
#[cfg(feature = "postgres")]
fn row_values(record: &AuditRecord, origin: Option<(&str, i64)>) -> Vec<crate::row::Value> {
    use crate::row::Value as V;
    vec![
        V::from(record.operation_id.as_str()),
        V::from(&record.run_key),
        V::from(&record.tool_name),
        V::from(&record.agent_id),
        V::from(&record.target_kind),
        V::from(&record.target_id),
        V::from(record.kind.as_str()),
        V::from(record.args.to_string()),
        // 0/1 in an integer column on both backends, as `row_statements` binds it.
        V::from(record.success.map(i64::from)),
        V::from(record.detail.as_deref()),
        V::from(
            record
                .vector_clock
                .as_ref()
                .map(|c| serde_json::json!(c).to_string()),
        ),
        V::from(timefmt::format(record.created_at)),
        V::from(origin.map(|(host, _)| host)),
        V::from(origin.map(|(_, id)| id)),
        V::from(record.allowed_by.as_ref().map(Value::to_string)),
        V::from(record.refused_by.as_ref().map(Value::to_string)),
        V::from(record.decided_by.as_ref().map(Value::to_string)),
    ]
}

/// The inserts of audit rows, up to 100 in one statement (17 parameters each), each
/// returning the ids of its rows, with how many rows it inserts.
pub(crate) fn row_statements(
    rows: &[(&AuditRecord, Option<(&str, i64)>)],
) -> Vec<(Statement, usize)> {
    const COLUMNS: usize = 17;
    const PER_STATEMENT: usize = 100;
    rows.chunks(PER_STATEMENT)
        .map(|chunk| {
            let values = crate::values_placeholders(chunk.len(), COLUMNS);
            let sql = format!(
                "INSERT INTO audit_records (operation_id, run_key, tool_name, agent_id, target_kind, target_id, kind, args, success, detail,
                                            vector_clock, created_at, origin_host, origin_id, allowed_by, refused_by,
                                            decided_by)
                 VALUES {} RETURNING id",
                values
            );
            let statement = chunk.iter().fold(Statement::new(sql), |statement, (record, origin)| {
                statement
                    .bind(record.operation_id.as_str())
                    .bind(&record.run_key)
                    .bind(&record.tool_name)
                    .bind(&record.agent_id)
                    .bind(&record.target_kind)
                    .bind(&record.target_id)
                    .bind(record.kind.as_str())
                    .bind(record.args.to_string())
                    // 0/1 in an integer column on both backends (`Any` reads SQLite integers as such).
                    .bind(record.success.map(i64::from))
                    .bind(record.detail.as_deref())
                    .bind(
                        record
                            .vector_clock
                            .as_ref()
                            .map(|c| serde_json::json!(c).to_string()),
                    )
                    .bind(timefmt::format(record.created_at))
                    .bind(origin.map(|(host, _)| host))
                    .bind(origin.map(|(_, id)| id))
                    .bind(record.allowed_by.as_ref().map(Value::to_string))
                    .bind(record.refused_by.as_ref().map(Value::to_string))
                    .bind(record.decided_by.as_ref().map(Value::to_string))
            });
            (statement, chunk.len())
        })
        .collect()
}

/// The ids one insert of `count` rows returned, in the order of its rows.
pub(crate) fn ids_in_order(mut written: Vec<i64>, count: usize) -> Result<Vec<i64>, StoreError> {
    // `RETURNING` promises no order; ids are given in the order of the rows of one
    // `VALUES` list (SQLite's rowids, PostgreSQL's sequence), so ascending ids follow
    // the records.
    written.sort_unstable();
    if written.len() != count {
        return Err(StoreError::corrupt(
            TABLE,
            format!("{count} rows inserted, {} ids returned", written.len()),
        ));
    }
    Ok(written)
}

/// An audit record's content on the consent chain: every column but its vector clock.
pub fn chain_content(id: i64, record: &AuditRecord, origin: Option<(&str, i64)>) -> Value {
    let mut content = serde_json::json!({
        "id": id,
        "operationId": record.operation_id.as_str(),
        "runKey": record.run_key,
        "toolName": record.tool_name,
        "agentId": record.agent_id,
        "targetKind": record.target_kind,
        "targetId": record.target_id,
        "kind": record.kind.as_str(),
        "args": record.args,
        "success": record.success,
        "detail": record.detail,
        "createdAt": timefmt::format(record.created_at),
        "originHost": origin.map(|(host, _)| host),
        "originId": origin.map(|(_, id)| id),
        "allowedBy": record.allowed_by,
    });
    // Only where a refusal says what refused it (migration 0030): the entries written
    // before it have no such key, and their rows must still match them.
    if let Some(refused_by) = &record.refused_by {
        content["refusedBy"] = refused_by.clone();
    }
    // Likewise what decided a refusal or a wait (migration 0040).
    if let Some(decided_by) = &record.decided_by {
        content["decidedBy"] = decided_by.clone();
    }
    content
}

/// An audit row: its id, its record and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRow {
    /// The row id.
    pub id: i64,
    /// The record.
    pub record: AuditRecord,
    /// The writing device's host id and its id there; `None` for this device's own.
    pub origin: Option<(String, i64)>,
}

impl AuditRow {
    /// Its content on the consent chain.
    pub fn chain_content(&self) -> Value {
        let origin = self.origin.as_ref().map(|(host, id)| (host.as_str(), *id));
        chain_content(self.id, &self.record, origin)
    }
}

/// Every audit row, for [`crate::proof`].
pub(crate) async fn all_for_proof(conn: &mut Connection) -> Result<Vec<AuditRow>, StoreError> {
    let rows = sqlx::query("SELECT * FROM audit_records ORDER BY id")
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|row| {
            let host: Option<String> = row.try_get("origin_host")?;
            let origin_id: Option<i64> = row.try_get("origin_id")?;
            Ok(AuditRow {
                id: row.try_get("id")?,
                record: decode(row)?,
                origin: host.zip(origin_id),
            })
        })
        .collect()
}

pub(crate) fn decode(row: &AnyRow) -> Result<AuditRecord, StoreError> {
    let corrupt = |e: String| StoreError::corrupt(TABLE, e);
    let kind: String = row.try_get("kind")?;
    let args: String = row.try_get("args")?;
    let clock: Option<String> = row.try_get("vector_clock")?;
    let created_at: String = row.try_get("created_at")?;
    let allowed_by: Option<String> = row.try_get("allowed_by")?;
    let refused_by: Option<String> = row.try_get("refused_by")?;
    let decided_by: Option<String> = row.try_get("decided_by")?;
    Ok(AuditRecord {
        operation_id: OperationId::from_stored(row.try_get("operation_id")?),
        run_key: row.try_get("run_key")?,
        tool_name: row.try_get("tool_name")?,
        agent_id: row.try_get("agent_id")?,
        target_kind: row.try_get("target_kind")?,
        target_id: row.try_get("target_id")?,
        kind: kind.parse().map_err(corrupt)?,
        args: serde_json::from_str::<Value>(&args).map_err(|e| corrupt(e.to_string()))?,
        success: row
            .try_get::<Option<i64>, _>("success")?
            .map(|success| success != 0),
        detail: row.try_get("detail")?,
        vector_clock: clock
            .map(|c| serde_json::from_str::<VectorClock>(&c))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        created_at: timefmt::parse(TABLE, &created_at)?,
        allowed_by: allowed_by
            .map(|text| serde_json::from_str::<Value>(&text))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        refused_by: refused_by
            .map(|text| serde_json::from_str::<Value>(&text))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
        decided_by: decided_by
            .map(|text| serde_json::from_str::<Value>(&text))
            .transpose()
            .map_err(|e| corrupt(e.to_string()))?,
    })
}

/// Which records to list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditFilter {
    /// Everything, oldest first.
    All,
    /// The records about one target.
    Target(Target),
    /// The records of one wake run.
    Run(String),
}

/// Records matching `filter`, in the order they were written (at most `limit`, the
/// newest ones).
pub async fn list(
    conn: &mut Connection,
    filter: &AuditFilter,
    limit: u32,
) -> Result<Vec<AuditRecord>, StoreError> {
    let limit = i64::from(limit);
    // One static statement per filter, each searching its own index.
    let query = match filter {
        AuditFilter::All => sqlx::query(
            "SELECT * FROM (SELECT * FROM audit_records ORDER BY id DESC LIMIT $1) AS recent ORDER BY id",
        ),
        AuditFilter::Target(target) => sqlx::query(
            "SELECT * FROM (SELECT * FROM audit_records WHERE target_kind = $1 AND target_id = $2 ORDER BY id DESC LIMIT $3) AS recent ORDER BY id",
        )
        .bind(target.kind.as_str())
        .bind(target.id.as_str()),
        AuditFilter::Run(run) => sqlx::query(
            "SELECT * FROM (SELECT * FROM audit_records WHERE run_key = $1 ORDER BY id DESC LIMIT $2) AS recent ORDER BY id",
        )
        .bind(run.as_str()),
    };
    let rows = query.bind(limit).fetch_all(conn).await?;
    rows.iter().map(decode).collect()
}

/// The newest audit records (at most `limit`) whose run key starts with `prefix`, of
/// agent `agent` when given, oldest first. `prefix` is matched exactly here (SQL's
/// `LIKE` only narrows the read: it ignores ASCII case in SQLite), and must be one of
/// the fixed run-key prefixes, never a person's or an agent's input.
pub async fn with_run_key_prefix(
    conn: &mut Connection,
    prefix: &'static str,
    agent: Option<&str>,
    limit: u32,
) -> Result<Vec<AuditRecord>, StoreError> {
    let pattern = format!("{prefix}%");
    let limit = i64::from(limit);
    let rows =
        match agent {
            Some(agent) => sqlx::query(
                "SELECT * FROM (SELECT * FROM audit_records WHERE run_key LIKE $1 AND agent_id = $2
                 ORDER BY id DESC LIMIT $3) AS recent ORDER BY id",
            )
            .bind(pattern)
            .bind(agent)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?,
            None => {
                sqlx::query(
                    "SELECT * FROM (SELECT * FROM audit_records WHERE run_key LIKE $1
                 ORDER BY id DESC LIMIT $2) AS recent ORDER BY id",
                )
                .bind(pattern)
                .bind(limit)
                .fetch_all(&mut *conn)
                .await?
            }
        };
    let records = rows.iter().map(decode).collect::<Result<Vec<_>, _>>()?;
    Ok(records
        .into_iter()
        .filter(|record| record.run_key.starts_with(prefix))
        .collect())
}

/// Writes audit records to the store's `audit_records` table without ever failing the
/// surrounding transaction: a record that cannot be written leaves nothing behind (not
/// its row without its outbox message) and the caller's writes go on. On PostgreSQL,
/// where a failed statement aborts the whole transaction, each record is written in
/// its own savepoint. SQLite undoes a failed statement by itself, so there the
/// savepoint's two extra statements per record are saved and a row whose outbox
/// message failed is deleted again.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreAuditSink;

/// [`StoreAuditSink`] on SQLite.
async fn insert_or_nothing(conn: &mut Connection, record: &AuditRecord) -> Result<(), StoreError> {
    let id = insert_row(conn, record, None).await?;
    if let Err(error) = enqueue(conn, id, record).await {
        sqlx::query("DELETE FROM audit_records WHERE id = $1")
            .bind(id)
            .execute(&mut *conn)
            .await?;
        return Err(error);
    }
    Ok(())
}

impl AuditSink<Connection> for StoreAuditSink {
    fn record<'a>(
        &'a self,
        ctx: &'a mut Connection,
        record: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            if Backend::of(ctx) == Backend::Sqlite {
                return insert_or_nothing(ctx, record)
                    .await
                    .map_err(|e| e.to_string());
            }
            // On PostgreSQL a failed insert aborts the transaction: the savepoint keeps
            // the caller's writes usable.
            savepoint_sql(ctx, Step::Open, 0)
                .await
                .map_err(|e| e.to_string())?;
            match insert(ctx, record).await {
                Ok(_) => {
                    savepoint_sql(ctx, Step::Release, 0)
                        .await
                        .map_err(|e| e.to_string())?;
                    Ok(())
                }
                Err(e) => {
                    let _ = savepoint_sql(ctx, Step::RollBack, 0).await;
                    let _ = savepoint_sql(ctx, Step::Release, 0).await;
                    Err(e.to_string())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use assent_tools::AuditKind;

    #[cfg(feature = "postgres")]
    #[test]
    fn the_array_insert_casts_each_column_to_its_type() {
        crate::row::assert_unnest_casts(ROWS_UNNEST, 0, &ROW_TYPES);
    }

    fn record() -> AuditRecord {
        AuditRecord {
            operation_id: OperationId::from_stored("ab".repeat(16)),
            run_key: "run".into(),
            tool_name: "set_task_status".into(),
            agent_id: "agent".into(),
            target_kind: "task".into(),
            target_id: "t1".into(),
            kind: AuditKind::Action,
            args: serde_json::json!({"status": "done"}),
            success: None,
            detail: None,
            vector_clock: None,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
            allowed_by: None,
            refused_by: None,
            decided_by: None,
        }
    }

    async fn count(conn: &mut Connection, table: &str) -> i64 {
        sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
            .fetch_one(conn)
            .await
            .expect("counts")
    }

    #[tokio::test]
    async fn a_record_that_cannot_be_written_leaves_nothing_and_the_transaction_goes_on() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("audit.db").display());
        let store = Store::open(&url).await.expect("opens");
        let mut tx = store.begin_write().await.expect("begins");
        StoreAuditSink
            .record(tx.connection(), &record())
            .await
            .expect("a record is written");
        // From now on the record's outbox message fails, after its row was inserted.
        sqlx::raw_sql(
            "CREATE TEMP TRIGGER refuse AFTER INSERT ON outbox WHEN NEW.entity_type = 'auditRecord'
             BEGIN SELECT RAISE(ABORT, 'outbox refused'); END;",
        )
        .execute(tx.connection())
        .await
        .expect("creates the trigger");
        let refused = StoreAuditSink.record(tx.connection(), &record()).await;
        assert!(refused.is_err_and(|e| e.contains("outbox refused")));
        assert_eq!(
            count(tx.connection(), "audit_records").await,
            1,
            "no row without its message"
        );
        assert_eq!(count(tx.connection(), "outbox").await, 1);
        tx.commit().await.expect("the transaction still commits");
    }
}
