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

use crate::error::StoreError;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyConnection, AnyPool, Transaction};
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
/// connection to write on (`&mut *tx`), then [`WriteTx::commit`] or
/// [`WriteTx::rollback`]. Dropped without either, it rolls back.
pub struct WriteTx(Option<Kind>);

enum Kind {
    /// A transaction of its own: PostgreSQL, an in-memory SQLite database, or group
    /// commit switched off.
    Own(Transaction<'static, Any>),
    /// A member of the writer connection's batch, holding the connection.
    Member(OwnedMutexGuard<Slot>, Arc<Writer>),
}

impl std::fmt::Debug for WriteTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Some(Kind::Own(_)) => "WriteTx(own transaction)",
            Some(Kind::Member(..)) => "WriteTx(member of a group commit)",
            None => "WriteTx(ended)",
        })
    }
}

impl From<Transaction<'static, Any>> for WriteTx {
    fn from(tx: Transaction<'static, Any>) -> Self {
        Self(Some(Kind::Own(tx)))
    }
}

impl WriteTx {
    /// Makes the writes durable. For a member of a batch, returns once the batch's
    /// `COMMIT` did: an error then means nothing of this transaction was written.
    pub async fn commit(mut self) -> Result<(), StoreError> {
        match self.0.take() {
            Some(Kind::Own(tx)) => Ok(tx.commit().await?),
            Some(Kind::Member(slot, writer)) => writer.commit_member(slot).await,
            None => Ok(()),
        }
    }

    /// Discards the writes.
    pub async fn rollback(mut self) -> Result<(), StoreError> {
        match self.0.take() {
            Some(Kind::Own(tx)) => Ok(tx.rollback().await?),
            Some(Kind::Member(slot, writer)) => writer.rollback_member(slot).await,
            None => Ok(()),
        }
    }

    /// Whether this transaction shares its commit with others (a SQLite file with
    /// group commit on).
    pub fn is_grouped(&self) -> bool {
        matches!(self.0, Some(Kind::Member(..)))
    }
}

const ENDED: &str = "a write transaction is not used after it ended";

impl Deref for WriteTx {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        match self.0.as_ref().expect(ENDED) {
            Kind::Own(tx) => tx,
            Kind::Member(slot, _) => slot.conn.as_deref().expect(OPEN),
        }
    }
}

impl DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        match self.0.as_mut().expect(ENDED) {
            Kind::Own(tx) => tx,
            Kind::Member(slot, _) => slot.conn.as_deref_mut().expect(OPEN),
        }
    }
}

impl Drop for WriteTx {
    fn drop(&mut self) {
        // An owned transaction rolls back on its own (sqlx queues the rollback). A
        // member's savepoint needs statements: they run in a task that holds the
        // connection until they did, so no other writer sees the abandoned writes.
        if let Some(Kind::Member(mut slot, writer)) = self.0.take() {
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
    conn: Option<PoolConnection<Any>>,
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
    pool: AnyPool,
    slot: Arc<Mutex<Slot>>,
    /// Writers waiting for the connection: while there are some, a finished member
    /// leaves the batch open for them.
    waiting: AtomicUsize,
    /// How long a writer waits for the connection (the store's busy timeout).
    busy_timeout: Duration,
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

async fn run(conn: &mut AnyConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    sqlx::query(sql).execute(conn).await.map(drop)
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
    pub(crate) fn new(pool: AnyPool, busy_timeout: Duration) -> Arc<Self> {
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
            Ok(()) => Ok(WriteTx(Some(Kind::Member(slot, self.clone())))),
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
            run(&mut conn, "BEGIN IMMEDIATE").await?;
            slot.conn = Some(conn);
            slot.batch = Some(Batch {
                members: 0,
                opened: Instant::now(),
                outcome: watch::channel(None).0,
            });
            return Ok(());
        }
        let conn = slot.conn.as_deref_mut().expect(OPEN);
        if let Err(error) = run(conn, "SAVEPOINT assent_write").await {
            Self::fail_batch(slot, &error).await;
            return Err(error.into());
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
                    return Err(error.into());
                }
            }
            return Ok(());
        }
        let conn = slot.conn.as_deref_mut().expect(OPEN);
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
            return Err(error.into());
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
        let conn = slot.conn.as_deref_mut().expect(OPEN);
        match run(conn, "COMMIT").await {
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
    async fn fail_batch(slot: &mut Slot, error: &sqlx::Error) {
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
        .execute(&mut *tx)
        .await
        .expect("creates");
        tx.commit().await.expect("commits");
        (dir, store)
    }

    async fn insert(tx: &mut WriteTx, id: i64) {
        sqlx::query("INSERT INTO parent (id) VALUES ($1)")
            .bind(id)
            .execute(&mut **tx)
            .await
            .expect("inserts");
    }

    /// Rows of `parent` as another connection (the pool) sees them: committed ones only.
    async fn committed(store: &Store) -> Vec<i64> {
        sqlx::query_scalar("SELECT id FROM parent ORDER BY id")
            .fetch_all(store.pool())
            .await
            .expect("reads")
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
            .fetch_all(&mut *next)
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
                .execute(&mut *tx)
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
        let mut next = store.begin_write().await.expect("begins");
        insert(&mut next, 2).await;
        next.commit().await.expect("commits");
        assert_eq!(committed(&store).await, [2]);
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
}
