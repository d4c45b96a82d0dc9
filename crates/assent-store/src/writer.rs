//! Group commit on a SQLite file: the write transactions of this process queue for one
//! shared transaction (a *batch*, on a connection taken from the pool for as long as it
//! is open), each as a savepoint inside it, and the batch commits once for all of them.
//!
//! Why: at `synchronous = FULL` each `COMMIT` syncs the WAL; writers that queue on the
//! lock anyway can share that sync. What stays true:
//! - a write is answered only after the `COMMIT` that made it durable: a member's
//!   [`WriteTx::commit`] releases its savepoint and then waits for the batch's result,
//!   so nothing outside (the change feed, webhooks, jobs, another connection's read)
//!   learns of a write before it is on disk;
//! - a member that fails rolls back to its own savepoint: the others are unaffected;
//! - a failed `COMMIT` fails every member of the batch, and none of them was written
//!   (a crash loses whole writes or nothing);
//! - one member at a time holds the connection (a mutex), so members see each other's
//!   writes in the order they ran, as consecutive transactions would.
//!
//! When a member is done and nobody is waiting for the connection, it commits the batch
//! itself; otherwise it hands the open batch to the next writer, up to
//! [`MAX_MEMBERS`] members or [`MAX_AGE`]. A lone writer therefore commits at once, with
//! the statements of a plain transaction (`BEGIN IMMEDIATE` … `COMMIT`, no savepoint);
//! concurrent writers share commits.
//!
//! The batch's connection goes back to the pool when the batch ends. A connection
//! kept for all batches saved the pool's acquire per write (a confirmation measured
//! 0.45 of raw SQLite instead of 0.38), but a long transaction on it, a confirm-all of
//! 25 items, ran 3–4 times slower on this 2-core VM (450 items/s instead of 1,200–1,900;
//! pinned to one core, both were fast: each statement is a hop to the connection's
//! worker thread, and that thread kept being woken on the other core).

use crate::connection::{Connection, Pool};
use crate::error::StoreError;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

/// The most writes one commit carries.
pub(crate) const MAX_MEMBERS: usize = 64;
/// How long a batch may stay open while writers keep arriving: bounds the wait of its
/// first member.
pub(crate) const MAX_AGE: Duration = Duration::from_millis(20);

/// A write transaction from [`crate::Store::begin_write`] and its siblings: the
/// statements run on [`WriteTx::connection`], nested work in a [`WriteTx::savepoint`],
/// then [`WriteTx::commit`] or [`WriteTx::rollback`]. Dropped without either, it rolls
/// back.
///
/// It does not dereference to its connection: `&mut tx` passed where a connection is
/// expected read like the transaction itself, and a caller could send `COMMIT` on a
/// group-commit member's shared connection. The accessor names the step instead.
pub struct WriteTx {
    kind: Option<Kind>,
    /// Savepoints open on it now: the next one is named after its depth.
    depth: u32,
    /// A savepoint was dropped without [`Savepoint::release`] or
    /// [`Savepoint::rollback`] (an early `?`): its writes, half done, are still in the
    /// transaction, so the transaction no longer commits.
    abandoned: bool,
}

enum Kind {
    /// A transaction of its own, begun on a pool connection: PostgreSQL, an
    /// in-memory SQLite database, or group commit switched off.
    Own(Connection),
    /// A member of the writer connection's batch, holding the connection.
    Member(OwnedMutexGuard<Slot>, Arc<Writer>),
}

impl std::fmt::Debug for WriteTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.kind {
            Some(Kind::Own(_)) => "WriteTx(own transaction)",
            Some(Kind::Member(..)) => "WriteTx(member of a group commit)",
            None => "WriteTx(ended)",
        })
    }
}

impl WriteTx {
    /// A transaction of its own on `conn`, already begun.
    pub(crate) fn own(conn: Connection) -> Self {
        Self::new(Kind::Own(conn))
    }

    fn new(kind: Kind) -> Self {
        Self {
            kind: Some(kind),
            depth: 0,
            abandoned: false,
        }
    }

    /// The transaction's connection: the host API's one sqlx type. Run your own
    /// statements on it, inside the engine's transaction; never send `BEGIN`, `COMMIT`,
    /// `ROLLBACK`, `SAVEPOINT` or `RELEASE` through it (on a group-commit member they
    /// would end other writers' work): end with [`WriteTx::commit`] or
    /// [`WriteTx::rollback`], nest with [`WriteTx::savepoint`].
    ///
    /// # Panics
    ///
    /// Never for a transaction in hand: it ends only by `commit` or `rollback`, which
    /// take it by value.
    pub fn connection(&mut self) -> &mut Connection {
        match self.kind.as_mut().expect(ENDED) {
            Kind::Own(conn) => conn,
            Kind::Member(slot, _) => slot.conn.as_mut().expect(OPEN),
        }
    }

    /// Opens a savepoint: work in it that fails can be undone alone, the rest of the
    /// transaction kept. End it with [`Savepoint::release`] (keep its writes) or
    /// [`Savepoint::rollback`] (undo them); savepoints nest (each is named after its
    /// depth, so an inner one never shadows an outer one).
    ///
    /// A savepoint dropped without either (an early `?` return) fails closed: its
    /// half-done writes are still in the transaction, so [`WriteTx::commit`] rolls the
    /// whole transaction back and returns [`StoreError::SavepointNotEnded`], and no
    /// further savepoint opens on it.
    pub async fn savepoint(&mut self) -> Result<Savepoint<'_>, StoreError> {
        if self.abandoned {
            return Err(StoreError::SavepointNotEnded);
        }
        let depth = self.depth + 1;
        savepoint_sql(self.connection(), Step::Open, depth).await?;
        self.depth = depth;
        Ok(Savepoint {
            tx: self,
            depth,
            ended: false,
        })
    }

    /// Makes the writes durable. For a member of a batch, returns once the batch's
    /// `COMMIT` did: an error then means nothing of this transaction was written.
    /// A transaction with a savepoint left unended rolls back instead (see
    /// [`WriteTx::savepoint`]).
    pub async fn commit(mut self) -> Result<(), StoreError> {
        if self.abandoned {
            self.end(false).await?;
            return Err(StoreError::SavepointNotEnded);
        }
        self.end(true).await
    }

    /// Runs `finish` (the last writes) and commits: `finish` gets `Some("COMMIT")` when
    /// it may run the commit itself, under the same lock of the connection as its own
    /// statements (a SQLite file's batch with this transaction as its only member and
    /// no writer waiting to join it), else `None` and the commit follows as in
    /// [`WriteTx::commit`]. What [`WriteTx::commit_with`] is built on.
    pub(crate) async fn commit_after(mut self, finish: Finish) -> Result<(), StoreError> {
        if self.abandoned {
            self.end(false).await?;
            return Err(StoreError::SavepointNotEnded);
        }
        match self.kind.take() {
            Some(Kind::Member(slot, writer)) => writer.commit_member_after(slot, finish).await,
            kind => {
                self.kind = kind;
                finish(self.connection(), None).await?;
                self.end(true).await
            }
        }
    }

    /// Discards the writes.
    pub async fn rollback(mut self) -> Result<(), StoreError> {
        self.end(false).await
    }

    async fn end(&mut self, keep: bool) -> Result<(), StoreError> {
        match (self.kind.take(), keep) {
            (Some(Kind::Own(mut conn)), true) => Ok(conn.commit().await?),
            (Some(Kind::Own(mut conn)), false) => Ok(conn.rollback().await?),
            (Some(Kind::Member(slot, writer)), true) => writer.commit_member(slot).await,
            (Some(Kind::Member(slot, writer)), false) => writer.rollback_member(slot).await,
            (None, _) => Ok(()),
        }
    }

    /// Whether this transaction shares its commit with others (a SQLite file with
    /// group commit on).
    pub fn is_grouped(&self) -> bool {
        matches!(self.kind, Some(Kind::Member(..)))
    }
}

const ENDED: &str = "a write transaction is not used after it ended";

/// The last writes of a transaction, given its connection and the `COMMIT` to run after
/// them when they may run it themselves (see [`WriteTx::commit_after`]).
pub(crate) type Finish = Box<
    dyn for<'c> FnOnce(
            &'c mut Connection,
            Option<&'static str>,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<(), StoreError>> + Send + 'c>,
        > + Send,
>;

/// A savepoint open on a [`WriteTx`], from [`WriteTx::savepoint`]: the transaction
/// (it dereferences to it: [`WriteTx::connection`] for statements,
/// [`WriteTx::savepoint`] to nest) until [`Savepoint::release`] or
/// [`Savepoint::rollback`]. It cannot commit or roll back the transaction (those take
/// the transaction by value). Dropped without either, it leaves the transaction
/// unable to commit.
#[must_use = "a savepoint ends with release or rollback; dropped, its transaction cannot commit"]
pub struct Savepoint<'t> {
    tx: &'t mut WriteTx,
    depth: u32,
    ended: bool,
}

impl std::fmt::Debug for Savepoint<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Savepoint")
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

impl Savepoint<'_> {
    /// Keeps the savepoint's writes in the transaction.
    pub async fn release(mut self) -> Result<(), StoreError> {
        savepoint_sql(self.tx.connection(), Step::Release, self.depth).await?;
        self.ended = true;
        Ok(())
    }

    /// Undoes the savepoint's writes (and those of savepoints nested in it); the
    /// transaction's other writes stay.
    pub async fn rollback(mut self) -> Result<(), StoreError> {
        let conn = self.tx.connection();
        savepoint_sql(conn, Step::RollBack, self.depth).await?;
        savepoint_sql(conn, Step::Release, self.depth).await?;
        self.ended = true;
        Ok(())
    }
}

impl Deref for Savepoint<'_> {
    type Target = WriteTx;

    fn deref(&self) -> &WriteTx {
        self.tx
    }
}

impl DerefMut for Savepoint<'_> {
    fn deref_mut(&mut self) -> &mut WriteTx {
        self.tx
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        // Ended or not, the next savepoint takes this one's name.
        self.tx.depth = self.depth - 1;
        if !self.ended {
            // Statements cannot run here (no async drop); refusing the commit is what
            // keeps the half-done writes out.
            tracing::warn!(
                depth = self.depth,
                "a savepoint was dropped without release or rollback: its transaction will not commit"
            );
            self.tx.abandoned = true;
        }
    }
}

/// A step of a savepoint's life.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Step {
    Open,
    Release,
    RollBack,
}

/// Runs `step` of the savepoint at `depth`: every `SAVEPOINT` statement of the store
/// is run here. Depth 0 names the audit sink's own savepoint (it gets a connection,
/// not a transaction: [`crate::StoreAuditSink`]).
pub(crate) async fn savepoint_sql(
    conn: &mut Connection,
    step: Step,
    depth: u32,
) -> Result<(), sqlx::Error> {
    let verb = match step {
        Step::Open => "SAVEPOINT",
        Step::Release => "RELEASE",
        Step::RollBack => "ROLLBACK TO",
    };
    let sql = if depth == 0 {
        format!("{verb} assent_audit")
    } else {
        format!("{verb} assent_sp{depth}")
    };
    sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(conn)
        .await
        .map(drop)
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        // An owned transaction queues its rollback (run before the connection serves
        // again, as sqlx's own transactions do). A member's savepoint needs
        // statements: they run in a task that holds the connection until they did, so
        // no other writer sees the abandoned writes.
        if let Some(Kind::Own(conn)) = self.kind.as_mut() {
            conn.start_rollback();
        }
        if let Some(Kind::Member(mut slot, writer)) = self.kind.take() {
            slot.abandoned = true;
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(async move {
                        if let Err(error) = writer.rollback_member(slot).await {
                            tracing::warn!(%error, "rolling back an abandoned write failed");
                        }
                    });
                }
                // No runtime to run it on: the next writer rolls it back first.
                Err(_) => drop(slot),
            }
        }
    }
}

/// A batch's outcome, shared by its members: `None` while it is open.
type Outcome = Option<Result<(), Arc<str>>>;

/// The open shared transaction.
struct Batch {
    members: usize,
    opened: Instant,
    outcome: watch::Sender<Outcome>,
}

/// What the mutex guards: the batch and its connection.
pub(crate) struct Slot {
    /// The batch's connection, taken from the pool when a batch opens and given back
    /// when it ends.
    conn: Option<Connection>,
    batch: Option<Batch>,
    /// The member holding the connection was dropped before it ended: its savepoint
    /// is still open and must be rolled back before anyone else writes.
    abandoned: bool,
    /// Whether the member holding the connection opened a savepoint. The first member
    /// of a batch needs none (the batch holds nothing else yet, so its rollback is the
    /// batch's): a lone writer runs `BEGIN` and `COMMIT` only, as without grouping.
    savepoint: bool,
}

const OPEN: &str = "a member holds an open writer connection";

/// The writer connection of one SQLite file, shared by every clone of its store.
pub(crate) struct Writer {
    pool: Pool,
    slot: Arc<Mutex<Slot>>,
    /// Writers waiting for the connection: while there are some, a finished member
    /// leaves the batch open for them.
    waiting: AtomicUsize,
    /// How long a writer waits for the connection (the store's busy timeout).
    busy_timeout: Duration,
    /// Whether the file is in WAL mode, where a `COMMIT` never waits for a lock (so
    /// it may run through the C API, on the caller's thread).
    wal: bool,
    /// Batches committed (each one WAL sync at `FULL`) and writes they carried.
    commits: AtomicU64,
    committed_writes: AtomicU64,
}

/// Commits done by a store's writer: [`crate::Store::group_commits`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCommits {
    /// `COMMIT`s run (each one sync of the WAL at `synchronous = FULL`).
    pub commits: u64,
    /// Write transactions those commits made durable.
    pub writes: u64,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// Runs one of the writer's own statements that never waits for a lock (`SAVEPOINT`,
/// `RELEASE`, `ROLLBACK`, and `COMMIT` in WAL mode): on SQLite through the C API,
/// prepared once per connection (issue 55).
async fn run(conn: &mut Connection, sql: &'static str) -> Result<(), StoreError> {
    #[cfg(feature = "sqlite")]
    if let Some(sqlite) = conn.as_sqlite() {
        return crate::c_api::with_c_api(sqlite, |c| c.execute(sql, []).map(drop)).await;
    }
    run_waiting(conn, sql).await
}

/// Runs a statement that may wait for SQLite's lock (`BEGIN IMMEDIATE`; `COMMIT` outside
/// WAL mode) through sqlx: SQLite's busy handler sleeps on the thread that runs the
/// statement, and through the C API that would be the async runtime's, which the
/// writer holding the lock may need to finish.
async fn run_waiting(conn: &mut Connection, sql: &'static str) -> Result<(), StoreError> {
    Ok(sqlx::query(sql).execute(conn).await.map(drop)?)
}

/// Whether a write may join a batch that is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joining {
    /// Joins it: the usual write, short.
    Batch,
    /// Starts a batch of its own (see [`Writer::begin`]).
    Alone,
}

/// Counts a writer waiting for the connection while it lives; a waiter given up on
/// (its future dropped) makes sure a batch left open for it still commits.
struct Waiting(Arc<Writer>, bool);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
        if !self.1 {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let writer = self.0.clone();
            runtime.spawn(async move {
                let slot = writer.slot.clone().lock_owned().await;
                writer.hand_over(slot).await;
            });
        }
    }
}

impl Writer {
    pub(crate) fn new(pool: Pool, busy_timeout: Duration, wal: bool) -> Arc<Self> {
        Arc::new(Self {
            pool,
            slot: Arc::new(Mutex::new(Slot {
                conn: None,
                batch: None,
                abandoned: false,
                savepoint: false,
            })),
            waiting: AtomicUsize::new(0),
            busy_timeout,
            wal,
            commits: AtomicU64::new(0),
            committed_writes: AtomicU64::new(0),
        })
    }

    pub(crate) fn commits(&self) -> GroupCommits {
        GroupCommits {
            commits: self.commits.load(Ordering::Acquire),
            writes: self.committed_writes.load(Ordering::Acquire),
        }
    }

    /// Joins (or opens) the batch: the connection, with this member's savepoint open.
    ///
    /// `Joining::Alone` first commits a batch left open for it: its writes start a batch
    /// of their own. For work that may hold the connection long (a job's claim, whose
    /// transactional handler runs inside it): writes that finished before it are not
    /// kept waiting for it to end.
    #[tracing::instrument(level = "debug", skip_all)]
    pub(crate) async fn begin(self: &Arc<Self>, joining: Joining) -> Result<WriteTx, StoreError> {
        self.waiting.fetch_add(1, Ordering::AcqRel);
        let mut waiting = Waiting(self.clone(), true);
        let acquired =
            tokio::time::timeout(self.busy_timeout, self.slot.clone().lock_owned()).await;
        // Holding the connection now, no batch waits for this writer; one that gave up
        // makes sure a batch left open for it commits.
        waiting.1 = acquired.is_err();
        drop(waiting);
        let Ok(mut slot) = acquired else {
            return Err(StoreError::WriterBusy(self.busy_timeout));
        };
        if joining == Joining::Alone && slot.batch.is_some() && !slot.abandoned {
            self.commit_batch(&mut slot).await;
        }
        match self.open_member(&mut slot).await {
            Ok(()) => Ok(WriteTx::new(Kind::Member(slot, self.clone()))),
            Err(error) => {
                self.hand_over(slot).await;
                Err(error)
            }
        }
    }

    async fn open_member(&self, slot: &mut Slot) -> Result<(), StoreError> {
        if slot.abandoned {
            Self::end_member(slot, false).await?;
        }
        slot.savepoint = slot.batch.is_some();
        if !slot.savepoint {
            let mut conn = self.pool.acquire().await?;
            // Another process holding the file past the busy timeout (SQLite's own
            // wait, set on the connection) is the same "busy" as a writer held up here.
            run_waiting(&mut conn, "BEGIN IMMEDIATE")
                .await
                .map_err(|error| match error {
                    error if error.is_busy() => StoreError::WriterBusy(self.busy_timeout),
                    error => error,
                })?;
            slot.conn = Some(conn);
            slot.batch = Some(Batch {
                members: 0,
                opened: Instant::now(),
                outcome: watch::channel(None).0,
            });
            return Ok(());
        }
        let conn = slot.conn.as_mut().expect(OPEN);
        if let Err(error) = run(conn, "SAVEPOINT assent_write").await {
            Self::fail_batch(slot, &error).await;
            return Err(error);
        }
        Ok(())
    }

    /// Releases (`keep`) or rolls back the member's savepoint. A failure means the
    /// shared transaction is gone (SQLite rolls it back itself on some I/O errors):
    /// the whole batch fails.
    async fn end_member(slot: &mut Slot, keep: bool) -> Result<(), StoreError> {
        slot.abandoned = false;
        if !slot.savepoint {
            if !keep {
                // The batch's only member: its rollback is the batch's.
                slot.batch = None;
                let mut conn = slot.conn.take().expect(OPEN);
                if let Err(error) = run(&mut conn, "ROLLBACK").await {
                    conn.close_on_drop();
                    return Err(error);
                }
            }
            return Ok(());
        }
        let conn = slot.conn.as_mut().expect(OPEN);
        let ended = if keep {
            run(conn, "RELEASE assent_write").await
        } else {
            match run(conn, "ROLLBACK TO assent_write").await {
                Ok(()) => run(conn, "RELEASE assent_write").await,
                Err(error) => Err(error),
            }
        };
        if let Err(error) = ended {
            Self::fail_batch(slot, &error).await;
            return Err(error);
        }
        Ok(())
    }

    async fn commit_member(
        self: Arc<Self>,
        mut slot: OwnedMutexGuard<Slot>,
    ) -> Result<(), StoreError> {
        Self::end_member(&mut slot, true).await?;
        let batch = slot.batch.as_mut().expect("a member runs inside a batch");
        batch.members += 1;
        let mut outcome = batch.outcome.subscribe();
        self.hand_over(slot).await;
        let members_outcome = outcome
            .wait_for(Option::is_some)
            .await
            .map(|outcome| outcome.clone())
            .ok()
            .flatten();
        match members_outcome {
            Some(Ok(())) => Ok(()),
            Some(Err(reason)) => Err(StoreError::GroupCommitFailed(reason.to_string())),
            // The batch was dropped unresolved: only when the process is going away.
            None => Err(StoreError::GroupCommitFailed(
                "the writer stopped before committing".to_owned(),
            )),
        }
    }

    /// [`WriteTx::commit_after`] for a member: when it is its batch's only member and
    /// nobody waits to join, its last writes and the batch's `COMMIT` run together.
    async fn commit_member_after(
        self: Arc<Self>,
        mut slot: OwnedMutexGuard<Slot>,
        finish: Finish,
    ) -> Result<(), StoreError> {
        // Outside WAL mode a `COMMIT` may wait for readers: never on the runtime's thread.
        let alone = self.wal
            && !slot.savepoint
            && !slot.abandoned
            && self.waiting.load(Ordering::Acquire) == 0;
        if !alone {
            let finished = finish(slot.conn.as_mut().expect(OPEN), None).await;
            if let Err(error) = finished {
                self.rollback_member(slot).await?;
                return Err(error);
            }
            return self.commit_member(slot).await;
        }
        let applied = finish(slot.conn.as_mut().expect(OPEN), Some("COMMIT")).await;
        match applied {
            Ok(()) => {
                let mut batch = slot.batch.take().expect("a member runs inside a batch");
                batch.members += 1;
                self.commits.fetch_add(1, Ordering::AcqRel);
                self.committed_writes
                    .fetch_add(batch.members as u64, Ordering::AcqRel);
                tracing::debug!(members = batch.members, "group committed with its plan");
                slot.conn = None;
                batch.outcome.send_replace(Some(Ok(())));
                Ok(())
            }
            Err(error) => {
                // The batch's only member: its failure is the batch's (rolled back, the
                // connection dropped when its state is unclear).
                Self::fail_batch(&mut slot, &error).await;
                Err(error)
            }
        }
    }

    async fn rollback_member(
        self: Arc<Self>,
        mut slot: OwnedMutexGuard<Slot>,
    ) -> Result<(), StoreError> {
        let ended = Self::end_member(&mut slot, false).await;
        self.hand_over(slot).await;
        ended
    }

    /// Lets the connection go: first commits the open batch when nobody is waiting to
    /// join it, or when it is full or old.
    async fn hand_over(&self, mut slot: OwnedMutexGuard<Slot>) {
        let Some(batch) = &slot.batch else { return };
        let due = self.waiting.load(Ordering::Acquire) == 0
            || batch.members >= MAX_MEMBERS
            || batch.opened.elapsed() >= MAX_AGE;
        if due && !slot.abandoned {
            self.commit_batch(&mut slot).await;
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn commit_batch(&self, slot: &mut Slot) {
        let Some(batch) = slot.batch.take() else {
            return;
        };
        let conn = slot.conn.as_mut().expect(OPEN);
        let committed = if self.wal {
            run(conn, "COMMIT").await
        } else {
            run_waiting(conn, "COMMIT").await
        };
        match committed {
            Ok(()) => {
                self.commits.fetch_add(1, Ordering::AcqRel);
                self.committed_writes
                    .fetch_add(batch.members as u64, Ordering::AcqRel);
                tracing::debug!(members = batch.members, "group committed");
                slot.conn = None;
                batch.outcome.send_replace(Some(Ok(())));
            }
            Err(error) => {
                slot.batch = Some(batch);
                Self::fail_batch(slot, &error).await;
            }
        }
    }

    /// Rolls the whole batch back and fails its members with `error`.
    async fn fail_batch(slot: &mut Slot, error: &StoreError) {
        let Some(batch) = slot.batch.take() else {
            return;
        };
        tracing::warn!(%error, members = batch.members, "a group of writes failed to commit");
        if let Some(mut conn) = slot.conn.take() {
            // SQLite may have rolled back already; then there is nothing to undo. A
            // connection whose state is unclear is not given back to the pool.
            if run(&mut conn, "ROLLBACK").await.is_err() {
                conn.close_on_drop();
            }
        }
        slot.abandoned = false;
        batch
            .outcome
            .send_replace(Some(Err(Arc::from(error.to_string()))));
    }

    /// Commits what is open, before the pool closes.
    pub(crate) async fn close(&self) {
        let mut slot = self.slot.clone().lock_owned().await;
        if slot.batch.is_some() {
            self.commit_batch(&mut slot).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("group.db").display());
        let store = Store::open(&url).await.expect("opens");
        let mut tx = store.begin_write().await.expect("begins");
        sqlx::raw_sql(
            "CREATE TABLE parent (id INTEGER PRIMARY KEY);
             CREATE TABLE child (id INTEGER PRIMARY KEY,
                 parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);",
        )
        .execute(tx.connection())
        .await
        .expect("creates");
        tx.commit().await.expect("commits");
        (dir, store)
    }

    async fn insert(tx: &mut WriteTx, id: i64) {
        sqlx::query("INSERT INTO parent (id) VALUES ($1)")
            .bind(id)
            .execute(tx.connection())
            .await
            .expect("inserts");
    }

    /// Rows of `parent` as another connection (the pool) sees them: committed ones only.
    async fn committed(store: &Store) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM parent ORDER BY id")
            .fetch_all(
                store
                    .read_connection()
                    .await
                    .expect("a connection")
                    .connection(),
            )
            .await
            .expect("reads")
    }

    /// A new write of row `id` commits, and is then the only row committed.
    async fn writes_on(store: &Store, id: i64) {
        let mut next = store.begin_write().await.expect("begins");
        insert(&mut next, id).await;
        next.commit().await.expect("commits");
        assert_eq!(committed(store).await, [id]);
    }

    /// Waits until `count` writers queue for the connection.
    async fn until_waiting(store: &Store, count: usize) {
        let writer = store.writer.as_ref().expect("a file store has a writer");
        while writer.waiting.load(Ordering::Acquire) < count {
            tokio::task::yield_now().await;
        }
    }

    /// A write of row `id` in a task of its own, which queues for the connection, then
    /// commits (`keep`) or rolls back.
    fn queued(
        store: &Store,
        id: i64,
        keep: bool,
    ) -> tokio::task::JoinHandle<Result<(), StoreError>> {
        let store = store.clone();
        tokio::spawn(async move {
            let mut tx = store.begin_write().await?;
            insert(&mut tx, id).await;
            if keep {
                tx.commit().await
            } else {
                tx.rollback().await
            }
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_that_queue_share_one_commit_and_are_answered_after_it() {
        let (_dir, store) = store().await;
        let before = store.group_commits().expect("counted");
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let second = queued(&store, 2, true);
        let third = queued(&store, 3, true);
        until_waiting(&store, 2).await;
        let first = tokio::spawn(first.commit());
        for write in [first, second, third] {
            write.await.expect("joins").expect("commits");
        }
        assert_eq!(committed(&store).await, [1, 2, 3]);
        let after = store.group_commits().expect("counted");
        assert_eq!(after.writes - before.writes, 3);
        assert_eq!(
            after.commits - before.commits,
            1,
            "three writes, one commit"
        );
    }

    /// A write of row `id` in a task of its own (a claim's when `claim`), which queues
    /// for the connection, then holds it until the test sends on `release`. Also
    /// returns what it sends once it holds the connection.
    fn held_write(
        store: &Store,
        id: i64,
        claim: bool,
    ) -> (
        tokio::task::JoinHandle<Result<(), StoreError>>,
        tokio::sync::oneshot::Receiver<()>,
        tokio::sync::oneshot::Sender<()>,
    ) {
        let store = store.clone();
        let (held, hold) = tokio::sync::oneshot::channel::<()>();
        let (released, release) = tokio::sync::oneshot::channel::<()>();
        let write = tokio::spawn(async move {
            let mut tx = if claim {
                store.begin_claim().await?
            } else {
                store.begin_write().await?
            };
            held.send(()).expect("test waits");
            release.await.expect("test releases");
            insert(&mut tx, id).await;
            tx.commit().await
        });
        (write, hold, released)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_is_not_visible_until_the_shared_commit() {
        let (_dir, store) = store().await;
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let (second, hold, released) = held_write(&store, 2, false);
        until_waiting(&store, 1).await;
        let first = tokio::spawn(first.commit());
        hold.await.expect("second holds the connection");
        // The first write ended its part, but its commit waits for the batch.
        assert!(committed(&store).await.is_empty());
        assert!(!first.is_finished());
        released.send(()).expect("second waits");
        first.await.expect("joins").expect("commits");
        second.await.expect("joins").expect("commits");
        assert_eq!(committed(&store).await, [1, 2]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_does_not_keep_writes_that_finished_before_it_waiting() {
        let (_dir, store) = store().await;
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let (claim, hold, released) = held_write(&store, 2, true);
        until_waiting(&store, 1).await;
        let first = tokio::spawn(first.commit());
        hold.await.expect("the claim holds the connection");
        // The claim committed the batch it was handed before it began its own.
        tokio::time::timeout(Duration::from_secs(10), first)
            .await
            .expect("answered while the claim still runs")
            .expect("joins")
            .expect("commits");
        assert_eq!(committed(&store).await, [1]);
        released.send(()).expect("the claim waits");
        claim.await.expect("joins").expect("commits");
        assert_eq!(committed(&store).await, [1, 2]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_rolled_back_or_dropped_takes_only_its_own_writes() {
        let (_dir, store) = store().await;
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let rolled_back = queued(&store, 2, false);
        until_waiting(&store, 1).await;
        let third = queued(&store, 3, true);
        until_waiting(&store, 2).await;
        let first = tokio::spawn(first.commit());
        first.await.expect("joins").expect("commits");
        rolled_back.await.expect("joins").expect("rolls back");
        third.await.expect("joins").expect("commits");
        assert_eq!(committed(&store).await, [1, 3]);

        let mut dropped = store.begin_write().await.expect("begins");
        insert(&mut dropped, 4).await;
        drop(dropped);
        let mut next = store
            .begin_write()
            .await
            .expect("begins after the dropped one");
        let seen: Vec<i64> = sqlx::query_scalar("SELECT id FROM parent ORDER BY id")
            .fetch_all(next.connection())
            .await
            .expect("reads");
        assert_eq!(seen, [1, 3], "the dropped write was rolled back first");
        insert(&mut next, 5).await;
        next.commit().await.expect("commits");
        assert_eq!(committed(&store).await, [1, 3, 5]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_commit_fails_every_member_and_keeps_none() {
        let (_dir, store) = store().await;
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let store2 = store.clone();
        let second = tokio::spawn(async move {
            let mut tx = store2.begin_write().await?;
            // A deferred foreign key is checked only by the batch's COMMIT.
            sqlx::query("INSERT INTO child (id, parent) VALUES (1, 99)")
                .execute(tx.connection())
                .await?;
            tx.commit().await
        });
        until_waiting(&store, 1).await;
        let first = first.commit().await;
        let second = second.await.expect("joins");
        for outcome in [first, second] {
            assert!(
                matches!(outcome, Err(StoreError::GroupCommitFailed(_))),
                "{outcome:?}"
            );
        }
        assert!(committed(&store).await.is_empty());
        // The writer goes on.
        writes_on(&store, 2).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_concurrent_writers_all_land() {
        let (_dir, store) = store().await;
        let writers: Vec<_> = (0..8_i64)
            .map(|writer| {
                let store = store.clone();
                tokio::spawn(async move {
                    for n in 0..25 {
                        let mut tx = store.begin_write().await.expect("begins");
                        insert(&mut tx, writer * 100 + n).await;
                        tx.commit().await.expect("commits");
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.await.expect("joins");
        }
        assert_eq!(committed(&store).await.len(), 200);
        let commits = store.group_commits().expect("counted");
        assert!(commits.commits <= commits.writes);
    }

    /// Rows of `parent` as `tx` sees them.
    async fn seen(tx: &mut WriteTx) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM parent ORDER BY id")
            .fetch_all(tx.connection())
            .await
            .expect("reads")
    }

    /// A store on a SQLite file (group commit, `grouped`) or in memory (a transaction
    /// of its own).
    async fn either(grouped: bool) -> (Option<tempfile::TempDir>, Store) {
        if grouped {
            let (dir, store) = store().await;
            return (Some(dir), store);
        }
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut tx = store.begin_write().await.expect("begins");
        sqlx::raw_sql("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
            .execute(tx.connection())
            .await
            .expect("creates");
        tx.commit().await.expect("commits");
        (None, store)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_savepoint_released_keeps_and_one_rolled_back_undoes_only_its_writes() {
        for grouped in [true, false] {
            let (_dir, store) = either(grouped).await;
            let mut tx = store.begin_write().await.expect("begins");
            assert_eq!(tx.is_grouped(), grouped);
            insert(&mut tx, 1).await;
            let mut kept = tx.savepoint().await.expect("opens");
            insert(&mut kept, 2).await;
            kept.release().await.expect("releases");
            let mut undone = tx.savepoint().await.expect("opens");
            insert(&mut undone, 3).await;
            undone.rollback().await.expect("rolls back");
            assert_eq!(seen(&mut tx).await, [1, 2]);
            tx.commit().await.expect("commits");
            let mut read = store.read_connection().await.expect("reads");
            let rows: Vec<i64> = sqlx::query_scalar("SELECT id FROM parent ORDER BY id")
                .fetch_all(read.connection())
                .await
                .expect("reads");
            assert_eq!(rows, [1, 2], "grouped: {grouped}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nested_savepoints_have_their_own_names_and_end_in_order() {
        for grouped in [true, false] {
            let (_dir, store) = either(grouped).await;
            let mut tx = store.begin_write().await.expect("begins");
            let mut outer = tx.savepoint().await.expect("opens");
            insert(&mut outer, 1).await;
            let mut inner = outer.savepoint().await.expect("nests");
            assert_eq!((inner.depth, inner.tx.depth), (2, 2));
            insert(&mut inner, 2).await;
            // Rolling back the inner one keeps the outer one's writes.
            inner.rollback().await.expect("rolls back");
            let mut again = outer.savepoint().await.expect("nests again");
            assert_eq!(again.depth, 2, "the name is free again");
            insert(&mut again, 3).await;
            again.release().await.expect("releases");
            assert_eq!(seen(&mut outer).await, [1, 3]);
            // Rolling back the outer one takes the released inner one's writes too.
            outer.rollback().await.expect("rolls back");
            assert_eq!(seen(&mut tx).await, Vec::<i64>::new());
            insert(&mut tx, 4).await;
            tx.commit().await.expect("commits");
            assert_eq!(committed(&store).await, [4], "grouped: {grouped}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_savepoint_dropped_without_an_end_keeps_its_transaction_from_committing() {
        for grouped in [true, false] {
            let (_dir, store) = either(grouped).await;
            let mut tx = store.begin_write().await.expect("begins");
            insert(&mut tx, 1).await;
            // An early `?` inside the savepoint's work.
            let half_done = async {
                let mut sp = tx.savepoint().await?;
                insert(&mut sp, 2).await;
                sqlx::query("INSERT INTO nowhere VALUES (1)")
                    .execute(sp.connection())
                    .await?;
                sp.release().await
            };
            assert!(half_done.await.is_err());
            assert!(matches!(
                tx.savepoint().await,
                Err(StoreError::SavepointNotEnded)
            ));
            let outcome = tx.commit().await;
            assert!(
                matches!(outcome, Err(StoreError::SavepointNotEnded)),
                "{outcome:?}"
            );
            assert!(committed(&store).await.is_empty(), "grouped: {grouped}");
            // The store writes on.
            writes_on(&store, 3).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_savepoint_in_a_member_that_joined_a_batch_ends_only_its_own_writes() {
        let (_dir, store) = store().await;
        let mut first = store.begin_write().await.expect("begins");
        insert(&mut first, 1).await;
        let store2 = store.clone();
        let second = tokio::spawn(async move {
            let mut tx = store2.begin_write().await?;
            assert!(tx.is_grouped());
            let mut kept = tx.savepoint().await?;
            insert(&mut kept, 2).await;
            kept.release().await?;
            let mut undone = tx.savepoint().await?;
            insert(&mut undone, 3).await;
            undone.rollback().await?;
            let seen = seen(&mut tx).await;
            tx.commit().await?;
            Ok::<_, StoreError>(seen)
        });
        until_waiting(&store, 1).await;
        let first = tokio::spawn(first.commit());
        first.await.expect("joins").expect("commits");
        let seen = second.await.expect("joins").expect("commits");
        assert_eq!(seen, [1, 2], "the member sees the batch's earlier writes");
        assert_eq!(committed(&store).await, [1, 2]);
    }
}
