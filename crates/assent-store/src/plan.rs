//! A write plan: the decision rows, consent-chain entries and outbox messages of one
//! decision or of confirm-all's decisions (and the audit records they name), gathered
//! while they are taken and written at their end with one statement per table: the
//! decisions in one multi-row insert, the audit rows in another, the chain's head read
//! once and its entries in one insert, the outbox messages in one upsert.
//!
//! Why: written as they arose, a confirmation entered three chain entries (a read of
//! the head and an insert each) and enqueued five outbox messages one statement at a
//! time; each statement through sqlx costs a hop to the connection's worker thread
//! (docs/guide/performance.md). Gathered, the same rows cost four statements.
//!
//! What stays true: a plan is applied in the transaction that gathered it, before its
//! `COMMIT`, so a rollback leaves neither the decision nor its entries and messages;
//! entries keep the order they were planned in (an audit record's entry stands where
//! its record was planned, its row id filled in once the row is written); a plan
//! dropped unapplied writes nothing (a confirm-all item that fails drops its plan with
//! its savepoint). Nothing may read a planned row before the plan is applied: only
//! decisions, the chain, the outbox and audit rows are planned, nothing in a decision
//! reads them, and a decision a delegation record names is written at once.
//!
//! Since issue 55 a plan also holds the decision's other writes as statements of their
//! own (`WritePlan::statement`): the set's and its items' statuses, the applied
//! operation, a met quorum's approval. So a confirmation enters the store twice: once
//! to read (the set, its items, who serves them, the agent's rules, the applied
//! operation) and once to apply its plan and commit, with only its host (the state the
//! re-check reads, the handler, `on_decided`) between them. The plan is written in one
//! order: decisions, audit rows, the other statements, outbox messages, and the
//! consent chain **last**: on PostgreSQL the chain's lock is taken at the very end of
//! the transaction, after every row lock the decision takes, so a decision and a
//! job's claim (which takes its row, then the chain) cannot wait on each other in
//! opposite orders.
//!
//! On SQLite the chain's head comes with the decision's read (the same statement as
//! the set, under the write lock `BEGIN IMMEDIATE` took: `WritePlan::after_head`), so
//! the plan does not read it again: its insert appends only while that head is still
//! the head (`chain::insert_after_checked`), and a transaction that appended since
//! (a write of its own between its read and its apply that enters the chain at once)
//! inserts nothing there and reads the head and appends after it, as before. A group
//! commit's members hold the connection one at a time, each from its read to its
//! apply, so another member's entries come before a read or after an apply. Never a
//! fork or a gap: a stale head inserts nothing.

#[cfg(feature = "sqlite")]
use crate::error::SqliteResult;
use crate::outbox::{self, entity};
use crate::row::Statement;
use crate::{Connection, WriteTx};
use crate::{StoreError, audit, chain, timefmt};
use assent_domain::ChangeDecision;
use assent_tools::{AuditRecord, AuditSink, BoxFuture};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Mutex;
use time::OffsetDateTime;

/// Rows to write at the end of a decision; see the module's documentation.
#[derive(Debug, Default)]
pub struct WritePlan {
    decisions: Vec<PlannedDecision>,
    audits: Vec<AuditRecord>,
    /// Other writes of the decision, in the order planned, after the decisions and
    /// audit rows and before the outbox and the chain.
    statements: Vec<Statement>,
    /// Applied operations (their six values), written in one statement after the
    /// other statements.
    applied: Vec<Vec<crate::row::Value>>,
    entries: Vec<Planned>,
    messages: Vec<PlannedMessage>,
    /// The chain head the decision's read found in this transaction
    /// ([`WritePlan::after_head`]).
    head: Option<chain::Head>,
}

/// A chain entry, or the entry of the plan's audit record at that position (its
/// subject and content name the row id, known once the row is written).
#[derive(Debug)]
enum Planned {
    Entry(chain::Entry),
    Audit(usize),
}

#[derive(Debug)]
struct PlannedMessage {
    entity_type: &'static str,
    entity_id: MessageId,
    payload: String,
}

#[derive(Debug)]
enum MessageId {
    Known(String),
    Audit(usize),
}

impl WritePlan {
    /// Whether the plan writes nothing.
    pub fn is_empty(&self) -> bool {
        self.decisions.is_empty()
            && self.audits.is_empty()
            && self.statements.is_empty()
            && self.applied.is_empty()
            && self.entries.is_empty()
            && self.messages.is_empty()
    }

    /// Appends the plan's chain entries after `head` (the chain's head as its
    /// decision read it in the same transaction, `change_sets::DecisionRead::chain_head`)
    /// without reading the head again: on SQLite the insert checks that `head` is
    /// still the head (`chain::insert_after_checked`) and, when the transaction
    /// appended since, the plan reads it and inserts after that (two statements more,
    /// as before). One statement fewer per decision.
    pub fn after_head(&mut self, head: Option<chain::Head>) {
        self.head = head;
    }

    /// Plans an audit record written on this device: its row, its chain entry and its
    /// outbox message.
    pub fn audit(&mut self, record: AuditRecord) -> Result<(), StoreError> {
        let payload = outbox::payload_text(&record)?;
        let position = self.audits.len();
        self.audits.push(record);
        self.entries.push(Planned::Audit(position));
        self.messages.push(PlannedMessage {
            entity_type: entity::AUDIT_RECORD,
            entity_id: MessageId::Audit(position),
            payload,
        });
        Ok(())
    }

    /// Plans a decision's row ([`crate::decisions::plan_decided`] plans its entry and
    /// message).
    pub(crate) fn decision(&mut self, row: PlannedDecision) {
        self.decisions.push(row);
    }

    /// Plans a statement that writes (and returns no row): run after the plan's
    /// decisions and audit rows, before its outbox messages and chain entries.
    pub(crate) fn statement(&mut self, statement: Statement) {
        self.statements.push(statement);
    }

    /// Plans that `operation_id` was applied (`operations::plan_applied`): its six
    /// values, in the order of [`applied_inserts`]' columns.
    pub(crate) fn applied_operation(
        &mut self,
        operation_id: &assent_domain::OperationId,
        tool_name: &str,
        target: &assent_domain::Target,
        message: &str,
        now: OffsetDateTime,
    ) {
        use crate::row::Value;
        self.applied.push(vec![
            Value::from(operation_id.as_str()),
            Value::from(tool_name),
            Value::from(target.kind.as_str()),
            Value::from(target.id.as_str()),
            Value::from(message),
            Value::from(timefmt::format(now)),
        ]);
    }

    /// Plans a chain entry.
    pub(crate) fn entry(&mut self, entry: chain::Entry) {
        self.entries.push(Planned::Entry(entry));
    }

    /// Plans an outbox message for `entity_type`/`entity_id`.
    pub(crate) fn message(
        &mut self,
        entity_type: &'static str,
        entity_id: String,
        payload: &(impl Serialize + ?Sized),
    ) -> Result<(), StoreError> {
        self.message_text(entity_type, entity_id, outbox::payload_text(payload)?);
        Ok(())
    }

    /// [`Self::message`] of a payload already serialized.
    pub(crate) fn message_text(
        &mut self,
        entity_type: &'static str,
        entity_id: String,
        payload: String,
    ) {
        self.messages.push(PlannedMessage {
            entity_type,
            entity_id: MessageId::Known(entity_id),
            payload,
        });
    }

    /// Appends `other` after this plan's rows (a confirm-all item's plan once the item
    /// stood).
    pub fn extend(&mut self, other: WritePlan) {
        let offset = self.audits.len();
        self.head = self.head.take().or(other.head);
        self.decisions.extend(other.decisions);
        self.audits.extend(other.audits);
        self.statements.extend(other.statements);
        self.applied.extend(other.applied);
        self.entries
            .extend(other.entries.into_iter().map(|planned| match planned {
                Planned::Audit(position) => Planned::Audit(position + offset),
                entry => entry,
            }));
        self.messages
            .extend(other.messages.into_iter().map(|mut message| {
                if let MessageId::Audit(position) = message.entity_id {
                    message.entity_id = MessageId::Audit(position + offset);
                }
                message
            }));
    }

    /// Writes the plan in `conn`'s transaction: at most one statement per table (per
    /// fifty decisions, per hundred audit rows), plus the chain's head read. On SQLite
    /// all of them run through the C API under one lock of the connection (issue 55).
    #[tracing::instrument(skip_all, fields(decisions = self.decisions.len(), audits = self.audits.len(), entries = self.entries.len(), messages = self.messages.len()))]
    pub async fn apply(self, conn: &mut Connection, now: OffsetDateTime) -> Result<(), StoreError> {
        #[cfg(feature = "sqlite")]
        if let Some(sqlite) = conn.as_sqlite() {
            let left =
                crate::c_api::with_c_api(sqlite, |c| self.apply_through_c_api(c, now)).await?;
            // Only the chain's very first append is left: it reads what the chain
            // begins with (every agent's rules), once per database.
            return match left {
                Some(plan) => plan.apply_through_sqlx(conn, now).await,
                None => Ok(()),
            };
        }
        self.apply_through_sqlx(conn, now).await
    }

    /// [`Self::apply`], then `then` (the writer's `COMMIT`) when given: on SQLite under
    /// the same lock of the connection as the plan's statements.
    async fn apply_then(
        self,
        conn: &mut Connection,
        now: OffsetDateTime,
        then: Option<&'static str>,
    ) -> Result<(), StoreError> {
        let Some(then) = then else {
            return self.apply(conn, now).await;
        };
        #[cfg(feature = "sqlite")]
        if let Some(sqlite) = conn.as_sqlite() {
            let left = crate::c_api::with_c_api(sqlite, |c| {
                let left = self.apply_through_c_api(c, now)?;
                if left.is_none() {
                    c.execute(then, [])?;
                }
                Ok(left)
            })
            .await?;
            if let Some(plan) = left {
                plan.apply_through_sqlx(conn, now).await?;
                sqlx::query(then).execute(conn).await?;
            }
            return Ok(());
        }
        self.apply_through_sqlx(conn, now).await?;
        sqlx::query(then).execute(conn).await?;
        Ok(())
    }

    /// The plan's statements other than its decisions, audit rows, outbox messages
    /// and chain entries, in the order they are written.
    #[cfg(feature = "sqlite")]
    fn other_writes(&self) -> impl Iterator<Item = Statement> + '_ {
        self.statements
            .iter()
            .cloned()
            .chain(applied_inserts(&self.applied))
    }

    async fn apply_through_sqlx(
        self,
        conn: &mut Connection,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        insert_decisions(conn, &self.decisions).await?;
        let ids = audit::insert_rows(conn, &self.audits).await?;
        for statement in &self.statements {
            statement.query().execute(&mut *conn).await?;
        }
        insert_applied(conn, &self.applied).await?;
        let messages = outbox_messages(self.messages, &ids);
        outbox::enqueue_many(conn, &messages, now).await?;
        // The chain last: on PostgreSQL its lock is the transaction's last.
        let entries = resolved_entries(self.entries, &self.audits, &ids);
        chain::append(conn, entries, now).await
    }

    /// The plan's statements through the C API: the same statements as through sqlx.
    /// `Some(self)`, with nothing written, when the chain has no entry yet (its
    /// beginning is written through sqlx).
    #[cfg(feature = "sqlite")]
    fn apply_through_c_api(
        mut self,
        c: &crate::c_api::CApi<'_>,
        now: OffsetDateTime,
    ) -> Result<Option<Self>, StoreError> {
        let read_head = |c: &crate::c_api::CApi<'_>| -> Result<chain::Head, StoreError> {
            let mut statement = c.bound(chain::HEAD, &[] as &[crate::row::Value])?;
            let mut rows = statement.raw_query();
            chain::decode_head(rows.next().or_store()?)
        };
        // The head the decision's read found, or a read of it now.
        let (head, known) = match self.head.take() {
            _ if self.entries.is_empty() => (None, false),
            Some(head) => (Some(head), true),
            None => (Some(read_head(c)?), false),
        };
        if head.as_ref().is_some_and(|head| head.entries == 0) {
            return Ok(Some(self));
        }
        for statement in decision_statements(&self.decisions) {
            statement.execute(c)?;
        }
        let rows: Vec<_> = self.audits.iter().map(|record| (record, None)).collect();
        let mut ids = Vec::with_capacity(rows.len());
        for (statement, count) in audit::row_statements(&rows) {
            ids.extend(audit::ids_in_order(statement.fetch_ints(c)?, count)?);
        }
        for statement in self.other_writes() {
            statement.execute(c)?;
        }
        for statement in outbox::upsert_statements(&outbox_messages(self.messages, &ids), now) {
            statement.execute(c)?;
        }
        if let Some(head) = head {
            let entries = resolved_entries(self.entries, &self.audits, &ids);
            if !known {
                chain::insert_after(head, entries, now)?.execute(c)?;
            } else {
                let count = entries.len();
                let checked = chain::insert_after_checked(head, entries.clone(), now)?;
                if checked.execute(c)? != count {
                    // The transaction appended since its read (an earlier write of
                    // its own): after the head as it is now.
                    let head = read_head(c)?;
                    chain::insert_after(head, entries, now)?.execute(c)?;
                }
            }
        }
        Ok(None)
    }
}

impl WriteTx {
    /// Writes `plan` (a decision's rows, audit records, chain entries and outbox
    /// messages) and commits, as `plan.apply(tx.connection(), now)` and
    /// [`WriteTx::commit`] would. On a SQLite file whose writer commits this
    /// transaction's batch at once (no other writer in it or waiting to join it), the
    /// plan's statements and the `COMMIT` run under one lock of the connection, with no
    /// round trip to sqlx's worker between them (issue 55).
    pub async fn commit_with(self, plan: WritePlan, now: OffsetDateTime) -> Result<(), StoreError> {
        self.commit_after(Box::new(move |conn, then| {
            Box::pin(plan.apply_then(conn, now, then))
        }))
        .await
    }
}

/// The plan's chain entries, an audit record's entry naming the id its row was given.
fn resolved_entries(
    entries: Vec<Planned>,
    audits: &[AuditRecord],
    ids: &[i64],
) -> Vec<chain::Entry> {
    entries
        .into_iter()
        .map(|planned| match planned {
            Planned::Entry(entry) => entry,
            Planned::Audit(position) => chain::Entry {
                kind: chain::EntryKind::Audit,
                subject: ids[position].to_string(),
                content: audit::chain_content(ids[position], &audits[position], None),
            },
        })
        .collect()
}

/// A decision's row as [`crate::decisions::plan_decided`] planned it.
#[derive(Debug)]
pub(crate) struct PlannedDecision {
    pub(crate) decision: ChangeDecision,
    pub(crate) approval_digest: Option<String>,
    pub(crate) decided_by: Option<String>,
    pub(crate) shadow: Option<String>,
}

/// Writes planned decisions, up to 50 in one statement (18 parameters each); on
/// PostgreSQL all of them in one statement of one text ([`DECISIONS_UNNEST`]).
async fn insert_decisions(
    conn: &mut Connection,
    rows: &[PlannedDecision],
) -> Result<(), StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        let mut insert =
            crate::row::Unnest::new(DECISIONS_UNNEST, "decisions", Vec::new(), &DECISION_TYPES);
        for row in rows {
            insert.row(decision_values(row))?;
        }
        if !insert.is_empty() {
            insert.query().execute(pg).await?;
        }
        return Ok(());
    }
    for statement in decision_statements(rows) {
        statement.query().execute(&mut *conn).await?;
    }
    Ok(())
}

/// [`insert_decisions`] on PostgreSQL: every planned decision in one statement whose
/// text is the same for any count (`crate::row::Unnest`), in the plan's order (the
/// table's `rowid` orders ties on insertion, so `WITH ORDINALITY` keeps it).
#[cfg(feature = "postgres")]
const DECISIONS_UNNEST: &str = concat!(
    "INSERT INTO decisions (",
    decision_row_columns!(),
    ") SELECT ",
    decision_row_columns!(),
    " FROM UNNEST($1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
                  $8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[],
                  $15::text[], $16::text[], $17::text[], $18::text[])
      WITH ORDINALITY AS u(",
    decision_row_columns!(),
    ", n) ORDER BY n"
);

/// The types of [`DECISIONS_UNNEST`]'s columns: `item_index` an integer, the rest text.
#[cfg(feature = "postgres")]
const DECISION_TYPES: [crate::row::ArrayType; 18] = {
    use crate::row::ArrayType::{Int, Text};
    [
        Text, Text, Int, Text, Text, Text, Text, Text, Text, Text, Text, Text, Text, Text, Text,
        Text, Text, Text,
    ]
};

/// A planned decision's values in the order of `decision_row_columns!`.
#[cfg(feature = "postgres")]
fn decision_values(row: &PlannedDecision) -> Vec<crate::row::Value> {
    use crate::row::Value as V;
    let decision = &row.decision;
    vec![
        V::from(decision.id.to_string()),
        V::from(decision.change_set_id.to_string()),
        V::from(decision.item_index as i64),
        V::from(decision.agent_id.as_str()),
        V::from(decision.target_kind.as_str()),
        V::from(decision.target_id.as_str()),
        V::from(decision.tool_name.as_str()),
        V::from(decision.verdict.as_str()),
        V::from(decision.reason.as_deref()),
        V::from(decision.edited_args.as_ref().map(Value::to_string)),
        V::from(decision.human_summary.as_str()),
        V::from(decision.args.to_string()),
        V::from(timefmt::format(decision.created_at)),
        V::from(json!(decision.vector_clock).to_string()),
        V::NullText,
        V::from(row.approval_digest.as_deref()),
        V::from(row.decided_by.as_deref()),
        V::from(row.shadow.as_deref()),
    ]
}

/// The inserts of planned decisions, up to 50 in one statement (18 parameters each).
fn decision_statements(rows: &[PlannedDecision]) -> Vec<Statement> {
    const COLUMNS: usize = 18;
    const PER_STATEMENT: usize = 50;
    rows.chunks(PER_STATEMENT)
        .map(|chunk| {
            let values = crate::values_placeholders(chunk.len(), COLUMNS);
            let sql = format!(
                concat!(
                    "INSERT INTO decisions (",
                    decision_row_columns!(),
                    ") VALUES {}"
                ),
                values
            );
            chunk.iter().fold(Statement::new(sql), |statement, row| {
                let decision = &row.decision;
                statement
                    .bind(decision.id.to_string())
                    .bind(decision.change_set_id.to_string())
                    .bind(decision.item_index as i64)
                    .bind(decision.agent_id.as_str())
                    .bind(decision.target_kind.as_str())
                    .bind(decision.target_id.as_str())
                    .bind(decision.tool_name.as_str())
                    .bind(decision.verdict.as_str())
                    .bind(decision.reason.as_deref())
                    .bind(decision.edited_args.as_ref().map(Value::to_string))
                    .bind(decision.human_summary.as_str())
                    .bind(decision.args.to_string())
                    .bind(timefmt::format(decision.created_at))
                    .bind(json!(decision.vector_clock).to_string())
                    .bind(None::<String>)
                    .bind(row.approval_digest.as_deref())
                    .bind(row.decided_by.as_deref())
                    .bind(row.shadow.as_deref())
            })
        })
        .collect()
}

/// The messages to enqueue, one per entity: a later message of the same entity
/// replaces the earlier one's payload in its place, as a second [`outbox::enqueue`]
/// of an unsent message would (and one upsert may not touch a row twice on
/// PostgreSQL).
fn outbox_messages(
    planned: Vec<PlannedMessage>,
    audit_ids: &[i64],
) -> Vec<outbox::Message<'static>> {
    let mut messages: Vec<outbox::Message<'static>> = Vec::with_capacity(planned.len());
    for message in planned {
        let entity_id = match message.entity_id {
            MessageId::Known(id) => id,
            MessageId::Audit(position) => audit_ids[position].to_string(),
        };
        let earlier = messages
            .iter_mut()
            .find(|(kind, id, _)| *kind == message.entity_type && *id == entity_id);
        match earlier {
            Some(earlier) => earlier.2 = message.payload,
            None => messages.push((message.entity_type, entity_id, message.payload)),
        }
    }
    messages
}

/// An audit sink that plans its records instead of writing them: the executor of a
/// confirmation writes through it, and the confirmation moves its records into its
/// [`WritePlan`] ([`Self::drain_into`]). Nothing is written yet (a record fails only
/// when it cannot be serialized). It
/// also takes the executor's applied operation ([`Self::applied`]), so that too is
/// written with the plan.
#[derive(Debug, Default)]
pub struct PlannedAudits(Mutex<WritePlan>);

impl PlannedAudits {
    /// Moves the records (and applied operations) gathered so far into `plan`, in the
    /// order they came.
    pub fn drain_into(&self, plan: &mut WritePlan) -> Result<(), StoreError> {
        let gathered = std::mem::take(&mut *self.0.lock().unwrap_or_else(|p| p.into_inner()));
        plan.extend(gathered);
        Ok(())
    }

    /// Plans that `operation_id` was applied (as `operations::plan_applied` does).
    pub fn applied(
        &self,
        operation_id: &assent_domain::OperationId,
        tool_name: &str,
        target: &assent_domain::Target,
        message: &str,
        now: OffsetDateTime,
    ) {
        let mut plan = self.0.lock().unwrap_or_else(|p| p.into_inner());
        plan.applied_operation(operation_id, tool_name, target, message, now);
    }
}

impl<Ctx: ?Sized + Send> AuditSink<Ctx> for PlannedAudits {
    fn record<'a>(
        &'a self,
        _: &'a mut Ctx,
        record: &'a AuditRecord,
    ) -> BoxFuture<'a, Result<(), String>> {
        let planned = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .audit(record.clone())
            .map_err(|error| error.to_string());
        Box::pin(async { planned })
    }
}

/// Writes planned applied operations ([`applied_inserts`]); on PostgreSQL all of them
/// in one statement of one text ([`APPLIED_UNNEST`]).
async fn insert_applied(
    conn: &mut Connection,
    rows: &[Vec<crate::row::Value>],
) -> Result<(), StoreError> {
    #[cfg(feature = "postgres")]
    if let Some(pg) = conn.as_postgres() {
        let mut insert = crate::row::Unnest::new(
            APPLIED_UNNEST,
            "applied_operations",
            Vec::new(),
            &[crate::row::ArrayType::Text; 6],
        );
        for row in rows {
            insert.row(row.clone())?;
        }
        if !insert.is_empty() {
            insert.query().execute(pg).await?;
        }
        return Ok(());
    }
    for statement in applied_inserts(rows) {
        statement.query().execute(&mut *conn).await?;
    }
    Ok(())
}

/// [`applied_inserts`] on PostgreSQL, whatever the count (`crate::row::Unnest`).
#[cfg(feature = "postgres")]
const APPLIED_UNNEST: &str = "INSERT INTO applied_operations (operation_id, tool_name, target_kind, target_id, message, applied_at)
 SELECT * FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
 ON CONFLICT (operation_id) DO NOTHING";

/// How many applied operations one statement of [`applied_inserts`] writes.
const PER_STATEMENT: usize = 100;

/// The inserts of planned applied operations (six values each, in
/// `operations::record_applied`'s order), up to [`PER_STATEMENT`] in one statement.
fn applied_inserts(rows: &[Vec<crate::row::Value>]) -> Vec<Statement> {
    rows.chunks(PER_STATEMENT)
        .map(|chunk| {
            let sql = format!(
                "INSERT INTO applied_operations (operation_id, tool_name, target_kind, target_id, message, applied_at)
                 VALUES {} ON CONFLICT (operation_id) DO NOTHING",
                crate::values_placeholders(chunk.len(), 6)
            );
            chunk
                .iter()
                .flatten()
                .fold(Statement::new(sql), |statement, value| {
                    statement.bind(value.clone())
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(kind: &'static str, id: &str, payload: &str) -> PlannedMessage {
        PlannedMessage {
            entity_type: kind,
            entity_id: MessageId::Known(id.to_owned()),
            payload: payload.to_owned(),
        }
    }

    fn entry(subject: &str) -> chain::Entry {
        chain::Entry {
            kind: chain::EntryKind::Approval,
            subject: subject.to_owned(),
            content: json!({"subject": subject}),
        }
    }

    /// A plan told the chain's head appends after it with one checked insert; told a
    /// head the transaction moved past since (an entry appended at once after the
    /// read), it inserts nothing there, reads the head and appends after that: the
    /// chain stays one unbroken line either way.
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn a_plan_appends_after_the_head_it_was_told_or_the_head_as_it_is_now() {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("plan.db").display());
        let store = crate::Store::open(&url).await.expect("opens");
        let now = OffsetDateTime::UNIX_EPOCH;
        // The chain's beginning is written by its first append.
        let mut tx = store.begin_write().await.expect("begins");
        chain::append(tx.connection(), vec![entry("first")], now)
            .await
            .expect("begins the chain");
        tx.commit().await.expect("commits");

        let mut tx = store.begin_write().await.expect("begins");
        let head = chain::head(tx.connection()).await.expect("head");
        let mut plan = WritePlan::default();
        plan.entry(entry("told the head"));
        plan.after_head(Some(head.clone()));
        plan.apply(tx.connection(), now).await.expect("applies");
        let after = chain::head(tx.connection()).await.expect("head");
        assert_eq!(after.entries, head.entries + 1);

        // Stale: the transaction appends after telling the plan.
        chain::append(tx.connection(), vec![entry("at once")], now)
            .await
            .expect("appends");
        let mut plan = WritePlan::default();
        plan.entry(entry("told a stale head"));
        plan.after_head(Some(after.clone()));
        plan.apply(tx.connection(), now).await.expect("applies");
        let entries = chain::entries(tx.connection()).await.expect("entries");
        tx.commit().await.expect("commits");

        let subjects: Vec<&str> = entries.iter().map(|e| e.subject.as_str()).collect();
        assert_eq!(
            subjects[subjects.len() - 3..],
            ["told the head", "at once", "told a stale head"]
        );
        let mut prev = chain::GENESIS.to_owned();
        for (seq, entry) in (1u64..).zip(&entries) {
            assert_eq!(entry.seq, seq, "no gap, no fork");
            assert_eq!(entry.prev, prev, "linked to the entry before");
            assert_eq!(entry.hash, entry.expected_hash());
            prev = entry.hash.clone();
        }
    }

    /// What [`written`] reads back: audit rows, applied messages, outbox, chain.
    type Written = (
        Vec<audit::AuditRow>,
        Vec<Option<String>>,
        Vec<outbox::OutboxMessage>,
        Vec<chain::ChainEntry>,
    );

    /// Two audit records (one with every optional column empty, one with each filled,
    /// text beyond ASCII included), two applied operations, outbox messages and a chain
    /// entry, written by one plan, read back as the store reads them.
    async fn written(store: &crate::Store) -> Written {
        use assent_domain::{OperationId, Target, VectorClock};
        use assent_tools::AuditKind;
        let now = OffsetDateTime::UNIX_EPOCH + time::Duration::microseconds(1_234_567);
        let bare = AuditRecord {
            operation_id: OperationId::from_stored("ab".repeat(16)),
            run_key: "run".into(),
            tool_name: "send".into(),
            agent_id: "agent".into(),
            target_kind: "note".into(),
            target_id: "n1".into(),
            kind: AuditKind::Action,
            args: json!({}),
            success: None,
            detail: None,
            vector_clock: None,
            created_at: now,
            allowed_by: None,
            refused_by: None,
            decided_by: None,
        };
        let mut clock = VectorClock::default();
        clock.tick("dev");
        let full = AuditRecord {
            kind: AuditKind::Result,
            args: json!({"title": "Café ☕ \"quoted\"\n", "n": [1, null, 2.5]}),
            success: Some(false),
            detail: Some("non ascii: ü 漢字, NUL-free".into()),
            vector_clock: Some(clock),
            allowed_by: Some(json!({"rule": "a"})),
            refused_by: Some(json!(["x"])),
            decided_by: Some(json!({"person": "ö"})),
            ..bare.clone()
        };
        let mut plan = WritePlan::default();
        plan.audit(bare).expect("plans");
        plan.audit(full).expect("plans");
        let target = Target::new("note", "n1");
        for (id, message) in [("cd", "sent ✓"), ("ef", "")] {
            plan.applied_operation(
                &OperationId::from_stored(id.repeat(16)),
                "send",
                &target,
                message,
                now,
            );
        }
        plan.message(entity::CHANGE_SET, "s".to_owned(), &json!({"a": "é"}))
            .expect("plans");
        plan.entry(chain::Entry {
            kind: chain::EntryKind::Grant,
            subject: "g ü".to_owned(),
            content: json!({"b": 1, "a": "ü"}),
        });
        let tx = store.begin_write().await.expect("begins");
        tx.commit_with(plan, now).await.expect("applies");
        let mut conn = store.read_connection().await.expect("connection");
        let audits = audit::all_for_proof(&mut conn).await.expect("audit rows");
        let mut applied = Vec::new();
        for id in ["cd", "ef"] {
            // Not `operations::applied`: this module imports nothing of that one.
            let read = "SELECT message FROM applied_operations WHERE operation_id = $1";
            let message: Option<String> = sqlx::query_scalar(read)
                .bind(id.repeat(16))
                .fetch_optional(&mut *conn)
                .await
                .expect("reads");
            applied.push(message);
        }
        let messages = outbox::undelivered(&mut conn, 10).await.expect("outbox");
        let entries = chain::entries(&mut conn).await.expect("chain");
        (audits, applied, messages, entries)
    }

    /// A database of its own on the PostgreSQL server `ASSENT_TEST_POSTGRES_URL`
    /// names, if it names one (the integration suite's variable).
    #[cfg(feature = "postgres")]
    async fn postgres_database() -> Option<String> {
        use sqlx::Connection as _;
        let server = std::env::var("ASSENT_TEST_POSTGRES_URL").ok()?;
        sqlx::any::install_default_drivers();
        let name = format!("assent_plan_{}", uuid::Uuid::new_v4().simple());
        let mut admin = sqlx::AnyConnection::connect(&server)
            .await
            .expect("connects");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("creates");
        let (without_query, query) = server
            .split_once('?')
            .map_or((server.as_str(), None), |(u, q)| (u, Some(q)));
        let base = without_query
            .rsplit_once('/')
            .filter(|(base, _)| base.contains("://"))
            .map_or(without_query, |(base, _)| base);
        Some(match query {
            Some(query) => format!("{base}/{name}?{query}"),
            None => format!("{base}/{name}"),
        })
    }

    async fn store_on(url: String) -> crate::Store {
        let mut options = crate::StoreOptions::new(url);
        options.device_id = "dev".to_owned();
        crate::Store::open_with(options).await.expect("opens")
    }

    /// A plan written with arrays on PostgreSQL (`crate::row::Unnest`) reads back as the
    /// same plan written through SQLite's C API: ids in the plan's order, NULLs, JSON
    /// and text beyond ASCII, times as the store formats them, the chain's hashes.
    #[tokio::test]
    async fn a_plan_reads_back_alike_on_sqlite_and_postgres() {
        let dir = tempfile::tempdir().expect("temp dir");
        let sqlite = store_on(format!("sqlite://{}", dir.path().join("plan.db").display())).await;
        let on_sqlite = written(&sqlite).await;
        #[cfg(feature = "postgres")]
        if let Some(url) = postgres_database().await {
            assert_eq!(written(&store_on(url).await).await, on_sqlite);
        }
    }

    #[cfg(feature = "postgres")]
    #[test]
    fn the_array_inserts_cast_each_column_to_its_type() {
        use crate::row::{ArrayType, assert_unnest_casts};
        assert_unnest_casts(DECISIONS_UNNEST, 0, &DECISION_TYPES);
        assert_unnest_casts(APPLIED_UNNEST, 0, &[ArrayType::Text; 6]);
    }

    #[test]
    fn a_later_message_of_one_entity_replaces_the_earlier_payload_in_its_place() {
        let planned = vec![
            message(entity::CHANGE_SET, "s", "first"),
            message(entity::DECISION, "d", "decision"),
            message(entity::CHANGE_SET, "s", "last"),
            PlannedMessage {
                entity_type: entity::AUDIT_RECORD,
                entity_id: MessageId::Audit(1),
                payload: "audit".to_owned(),
            },
        ];
        let messages = outbox_messages(planned, &[7, 8]);
        assert_eq!(
            messages,
            vec![
                (entity::CHANGE_SET, "s".to_owned(), "last".to_owned()),
                (entity::DECISION, "d".to_owned(), "decision".to_owned()),
                (entity::AUDIT_RECORD, "8".to_owned(), "audit".to_owned()),
            ]
        );
    }
}
