//! The limit: SQLite through its C API (rusqlite, the same `libsqlite3-sys` as sqlx's
//! driver), with prepared statements kept in the connection's cache, the same pragmas
//! as a store (WAL, the durability measured, foreign keys) and the same rows and
//! payload bytes per transaction as the sqlx baseline of `writes` — whose SQL it
//! shares. No async runtime, no worker thread, no `Any` conversions: what is left is
//! SQLite and the disk.

use crate::baseline::{
    AGENT, BaselineItem, CONFIRM_ITEM, ENQUEUE, INSERT_APPLIED, INSERT_AUDIT,
    INSERT_CHECKLIST_ITEM, INSERT_DECISION, INSERT_ITEM, INSERT_SET, SET_STATUS, TOUCH_TASK,
    summary,
};
use anyhow::Context;
use assent_store::Durability;
use rusqlite::{Connection, params};
use std::path::Path;
use std::time::{Duration, Instant};

/// A connection to a database a `Store` created and migrated (so the schema is the
/// engine's own), opened the way a store opens its connections.
pub struct Raw(Connection);

impl Raw {
    pub fn open(path: &Path, durability: Durability) -> anyhow::Result<Self> {
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        conn.execute_batch(&format!(
            "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
            durability.as_str()
        ))?;
        conn.set_prepared_statement_cache_capacity(32);
        Ok(Self(conn))
    }

    fn enqueue(
        &self,
        entity_type: &str,
        entity_id: &str,
        payload: &str,
        now: &str,
    ) -> anyhow::Result<()> {
        self.0
            .prepare_cached(ENQUEUE)?
            .execute(params![entity_type, entity_id, payload, now])?;
        Ok(())
    }

    /// The rows of one change set with an `add_checklist_item` item per title and its
    /// outbox row, one transaction: what `writes::insert_set` writes.
    pub fn insert_set(
        &mut self,
        set: &str,
        run: &str,
        titles: &[String],
        payload: &str,
        now: &str,
    ) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.0.execute_batch("BEGIN IMMEDIATE")?;
        let written = self.set_writes(set, run, titles, payload, now);
        self.end(written)?;
        Ok(start.elapsed())
    }

    fn set_writes(
        &self,
        set: &str,
        run: &str,
        titles: &[String],
        payload: &str,
        now: &str,
    ) -> anyhow::Result<()> {
        self.0
            .prepare_cached(INSERT_SET)?
            .execute(params![set, AGENT, "task-1", run, now])?;
        let mut insert = self.0.prepare_cached(INSERT_ITEM)?;
        for (index, title) in titles.iter().enumerate() {
            insert.execute(params![
                set,
                index as i64,
                format!(r#"{{"title":"{title}"}}"#),
                summary(title)
            ])?;
        }
        self.enqueue("changeSet", set, payload, now)
    }

    /// Commits after `written`, or rolls back and returns its error.
    fn end(&self, written: anyhow::Result<()>) -> anyhow::Result<()> {
        match written {
            Ok(()) => Ok(self.0.execute_batch("COMMIT")?),
            Err(error) => {
                self.0.execute_batch("ROLLBACK")?;
                Err(error)
            }
        }
    }

    /// The writes of one confirmation inside the caller's transaction.
    fn confirm_writes(&self, item: &BaselineItem, now: &str) -> anyhow::Result<()> {
        let c = &self.0;
        let index = item.index as i64;
        let (task, set) = (item.task.as_str(), item.set.as_str());
        c.prepare_cached(INSERT_CHECKLIST_ITEM)?.execute(params![
            item.checklist_item,
            task,
            index,
            item.title
        ])?;
        c.prepare_cached(TOUCH_TASK)?
            .execute(params![item.clock, now, task])?;
        self.enqueue("task", task, &item.task_payload, now)?;
        for ((kind, success), payload) in [("action", None), ("result", Some(true))]
            .into_iter()
            .zip(&item.audit_payloads)
        {
            let id: i64 = c.prepare_cached(INSERT_AUDIT)?.query_row(
                params![
                    item.operation,
                    item.run_key,
                    AGENT,
                    task,
                    kind,
                    item.args,
                    success,
                    now
                ],
                |row| row.get(0),
            )?;
            self.enqueue("auditRecord", &id.to_string(), payload, now)?;
        }
        c.prepare_cached(INSERT_APPLIED)?
            .execute(params![item.operation, task, now])?;
        c.prepare_cached(INSERT_DECISION)?.execute(params![
            item.decision,
            set,
            index,
            AGENT,
            task,
            item.summary,
            item.args,
            now,
            item.clock
        ])?;
        self.enqueue(
            "changeDecision",
            &item.decision,
            &item.decision_payload,
            now,
        )?;
        c.prepare_cached(CONFIRM_ITEM)?
            .execute(params![set, index])?;
        self.enqueue(
            "changeItem",
            &format!("{set}:{index}"),
            &item.item_payload,
            now,
        )?;
        c.prepare_cached(SET_STATUS)?
            .execute(params![item.set_status, item.clock, set])?;
        self.enqueue("changeSet", set, &item.set_payload, now)
    }

    /// `items` confirmed in one transaction (one commit, one fsync): one item is a
    /// confirmation, a set's items a confirm-all.
    pub fn confirm(&mut self, items: &[&BaselineItem], now: &str) -> anyhow::Result<Duration> {
        let start = Instant::now();
        self.0.execute_batch("BEGIN IMMEDIATE")?;
        let written = items
            .iter()
            .try_for_each(|item| self.confirm_writes(item, now));
        self.end(written)?;
        Ok(start.elapsed())
    }
}
