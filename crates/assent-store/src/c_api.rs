//! The store's statements through SQLite's C API, on the calling task, over the
//! handle of one of sqlx's own SQLite connections: the workspace's only `unsafe`.
//!
//! Why: sqlx runs every SQLite statement on a worker thread of its own, and each
//! statement is a round trip between the engine's task and that thread (46 % of a
//! confirmation's samples were the kernel switching between the two, issue 55).
//! `SqliteConnection::lock_handle` makes the worker stand aside once; everything run
//! inside [`with_c_api`] then goes straight to SQLite through `rusqlite` (the same
//! `libsqlite3-sys` sqlx links, so one SQLite library) with statements prepared once
//! per connection.
//!
//! Invariants (each tested below):
//! - **No statement outlives the lock.** The work gets `&CApi` for the call only; a
//!   rusqlite statement borrows it, so none can escape the closure, and a cached one is
//!   reset when it goes back to the cache.
//! - **The handle is never closed and never shared.** `rusqlite::Connection::from_handle`
//!   makes a connection that does not own (and never closes) sqlx's handle. It is used
//!   only while sqlx's lock on that handle is held. The cached statements must be
//!   finalized before sqlx closes the handle (its `sqlite3_close` panics on unfinalized
//!   statements): the cache is owned by a no-op rollback hook registered on the
//!   connection, and sqlx drops its hooks before it closes the handle. The registry
//!   below holds only a weak reference, so a closed connection's cache is gone, and a
//!   new connection that happens to get the same address starts a cache of its own.
//! - **The lock is released on every path, panics included.** The guards are locals
//!   dropped in order (the cache before sqlx's lock) on return and on unwind; a
//!   poisoned cache mutex is taken over (rusqlite resets a statement when it is dropped,
//!   so a panic leaves none running).
//!
//! The cost of the hook: a service that lends the store its own pool and sets a rollback
//! hook on a connection replaces the store's (the store's statements are then finalized
//! at once and prepared again on next use, replacing the service's hook in turn).

#![allow(unsafe_code)]

use crate::StoreError;
use crate::error::SqliteResult;
use sqlx::SqliteConnection;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};

/// One connection's statements, prepared once and kept while the connection lives.
type Cache = Arc<Mutex<rusqlite::Connection>>;

/// The cache of every live connection, by the address of its `sqlite3` handle.
static CACHES: LazyLock<Mutex<HashMap<usize, Weak<Mutex<rusqlite::Connection>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The C API of one locked connection, lent to the work of one [`with_c_api`].
pub(crate) struct CApi<'lock> {
    conn: &'lock rusqlite::Connection,
}

impl CApi<'_> {
    /// The statement for `sql`, prepared on this connection's first use of it and taken
    /// from the cache after. Each use is one statement in the store's tracing (target
    /// `assent_store::c_api`), as sqlx reports its own (`sqlx::query`).
    pub(crate) fn statement(
        &self,
        sql: &str,
    ) -> Result<rusqlite::CachedStatement<'_>, rusqlite::Error> {
        tracing::debug!(target: "assent_store::c_api", summary = summary(sql), "statement");
        self.conn.prepare_cached(sql)
    }

    /// The cached statement for `sql` with `params` bound to its `$1`, `$2`… in that
    /// order, as sqlx binds them: by the number in the parameter's name, not by where
    /// the name first appears (SQLite numbers `$N` parameters in order of appearance, and
    /// a statement may name `$2` before `$1`, or `$1` twice).
    pub(crate) fn bound(
        &self,
        sql: &str,
        params: &[impl rusqlite::ToSql],
    ) -> Result<rusqlite::CachedStatement<'_>, StoreError> {
        let mut statement = self.statement(sql).or_store()?;
        if statement.parameter_count() != params.len() {
            return Err(StoreError::Sqlite {
                code: 25, // SQLITE_RANGE
                message: format!(
                    "{} parameters bound to a statement with {} ({})",
                    params.len(),
                    statement.parameter_count(),
                    summary(sql)
                ),
            });
        }
        for (number, param) in (1..).zip(params) {
            let index = statement
                .parameter_index(&format!("${number}"))
                .or_store()?
                .ok_or_else(|| StoreError::Sqlite {
                    code: 25,
                    message: format!("no parameter ${number} in {}", summary(sql)),
                })?;
            statement.raw_bind_parameter(index, param).or_store()?;
        }
        Ok(statement)
    }

    /// Runs `sql`, which returns no rows, through its cached statement.
    pub(crate) fn execute(
        &self,
        sql: &'static str,
        params: impl rusqlite::Params,
    ) -> Result<usize, StoreError> {
        self.statement(sql).or_store()?.execute(params).or_store()
    }
}

/// The first words of a statement, as sqlx summarises its own.
fn summary(sql: &str) -> String {
    sql.split_whitespace().take(4).collect::<Vec<_>>().join(" ")
}

/// Runs `work` through SQLite's C API on `conn`'s own handle, on the calling task,
/// holding sqlx's lock on the connection for the whole call (one hop to sqlx's worker
/// thread to take it, none per statement).
///
/// `work` must not begin or end a transaction the store's writer does not know of, must
/// be short (sqlx's worker, and so every other use of the connection, waits), and must
/// run nothing that may wait for SQLite's lock (`BEGIN IMMEDIATE`, a `COMMIT` outside
/// WAL mode): SQLite's busy handler sleeps the calling thread, here the async
/// runtime's, which the writer holding the lock may need to finish (issue 55: sixteen
/// stores on one file waited out their busy timeout that way).
pub(crate) async fn with_c_api<R>(
    conn: &mut SqliteConnection,
    work: impl FnOnce(&CApi<'_>) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    // Drop order is the reverse of declaration: `statements` (the cache's mutex guard),
    // then `cache` (our strong reference), then `locked` (sqlx's lock). The cache must
    // never be left to be dropped by us after sqlx may close the handle.
    let mut locked = conn.lock_handle().await?;
    // One round trip to sqlx's worker: what the statements test counts as a trip.
    tracing::debug!(target: "assent_store::c_api::lock", "locked");
    let cache = cache_of(&mut locked)?;
    let statements = cache.lock().unwrap_or_else(PoisonError::into_inner);
    let result = work(&CApi { conn: &statements });
    drop(statements);
    drop(cache);
    drop(locked);
    result
}

/// The statement cache of the locked connection, made (and tied to the connection's
/// life by a rollback hook) on first use.
fn cache_of(locked: &mut sqlx::sqlite::LockedSqliteHandle<'_>) -> Result<Cache, StoreError> {
    let handle = locked.as_raw_handle();
    let address = handle.as_ptr() as usize;
    let mut caches = CACHES.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(cache) = caches.get(&address).and_then(Weak::upgrade) {
        return Ok(cache);
    }
    // SAFETY: `handle` is sqlx's live handle, and sqlx's lock on it is held for as long
    // as the returned connection is used (the cache is only reached through
    // `with_c_api`, which holds the lock). `from_handle` does not take ownership: the
    // connection never closes the handle. Its cached statements are finalized when the
    // hook below is dropped, which sqlx does before it closes the handle.
    let raw = unsafe { rusqlite::Connection::from_handle(handle.as_ptr()) }.or_store()?;
    raw.set_prepared_statement_cache_capacity(64);
    let cache: Cache = Arc::new(Mutex::new(raw));
    let owner = Arc::clone(&cache);
    locked.set_rollback_hook(move || {
        // Owns the cache for the connection's life; a rollback itself needs nothing.
        let _ = &owner;
    });
    caches.retain(|_, weak| weak.strong_count() > 0);
    caches.insert(address, Arc::downgrade(&cache));
    Ok(cache)
}

/// Whether `conn`'s statements may go through [`with_c_api`]: SQLite's threading mode
/// must let a connection be used from a thread other than the one that opened it
/// (sqlx refuses to run otherwise too).
#[cfg(test)]
fn threadsafe() -> bool {
    // SAFETY: a constant of the library, readable before and after initialisation.
    unsafe { rusqlite::ffi::sqlite3_threadsafe() != 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::{Connection as _, Row};

    async fn connection(dir: &tempfile::TempDir) -> SqliteConnection {
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("c.db").display());
        let mut conn = SqliteConnection::connect(&url).await.expect("opened");
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
            .execute(&mut conn)
            .await
            .expect("created");
        conn
    }

    #[test]
    fn sqlite_is_built_to_be_used_from_any_thread() {
        assert!(threadsafe());
    }

    #[tokio::test]
    async fn statements_run_on_the_connections_own_handle_and_sqlx_sees_them() {
        let dir = tempfile::tempdir().expect("dir");
        let mut conn = connection(&dir).await;
        with_c_api(&mut conn, |c| {
            c.execute("INSERT INTO t (id, name) VALUES (?1, ?2)", (1, "one"))
        })
        .await
        .expect("inserted");
        // Same handle: visible to sqlx at once, with no transaction of ours in between.
        let name: String = sqlx::query("SELECT name FROM t WHERE id = 1")
            .fetch_one(&mut conn)
            .await
            .expect("read")
            .get(0);
        assert_eq!(name, "one");
        conn.close().await.expect("closes cleanly");
    }

    #[tokio::test]
    async fn a_statement_is_prepared_once_per_connection() {
        let dir = tempfile::tempdir().expect("dir");
        let mut conn = connection(&dir).await;
        let sql = "INSERT INTO t (id, name) VALUES (?1, 'x')";
        for id in 0..3 {
            with_c_api(&mut conn, |c| c.execute(sql, [id]))
                .await
                .expect("ran");
        }
        let prepared = with_c_api(&mut conn, |c| {
            // The cache holds the statement: a second handle to it would be a new
            // preparation, which `prepare_cached` avoids while one is cached.
            Ok(c.conn.prepare_cached(sql).map(|_| ()).is_ok())
        })
        .await
        .expect("ran");
        assert!(prepared);
        // sqlx's own close finds no statement of ours left unfinalized (it panics if it
        // does): the cache went with the connection's rollback hook.
        conn.close().await.expect("closes cleanly");
    }

    #[tokio::test]
    async fn a_transaction_begun_by_sqlx_is_the_one_the_c_api_writes_in() {
        let dir = tempfile::tempdir().expect("dir");
        let mut conn = connection(&dir).await;
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut conn)
            .await
            .expect("began");
        with_c_api(&mut conn, |c| {
            c.execute("INSERT INTO t VALUES (1, 'in')", [])
        })
        .await
        .expect("inserted");
        sqlx::query("ROLLBACK")
            .execute(&mut conn)
            .await
            .expect("rolled back");
        let count: i64 = sqlx::query("SELECT count(*) FROM t")
            .fetch_one(&mut conn)
            .await
            .expect("counted")
            .get(0);
        assert_eq!(
            count, 0,
            "the insert was the transaction's and went with it"
        );
        conn.close().await.expect("closes cleanly");
    }

    #[tokio::test]
    async fn the_lock_is_released_and_the_connection_usable_after_a_panic() {
        let dir = tempfile::tempdir().expect("dir");
        let mut conn = connection(&dir).await;
        let panicked = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(
            with_c_api(&mut conn, |c| -> Result<(), StoreError> {
                let mut statement = c.statement("SELECT id FROM t").or_store()?;
                let _rows = statement.query([]).or_store()?;
                panic!("a bug in the work, with a statement running")
            }),
        ))
        .await;
        assert!(panicked.is_err());
        // sqlx's worker has its lock back: a statement through sqlx runs.
        sqlx::query("INSERT INTO t VALUES (2, 'after')")
            .execute(&mut conn)
            .await
            .expect("sqlx runs after the panic");
        // The cache (poisoned by the panic) is taken over, and its statement was reset.
        let names = with_c_api(&mut conn, |c| {
            c.statement("SELECT name FROM t")
                .or_store()?
                .query_map([], |row| row.get::<_, String>(0))
                .or_store()?
                .collect::<Result<Vec<_>, _>>()
                .or_store()
        })
        .await
        .expect("the C API runs after the panic");
        assert_eq!(names, ["after"]);
        conn.close().await.expect("closes cleanly");
    }

    #[tokio::test]
    async fn a_closed_connections_cache_is_gone_and_a_new_one_starts_its_own() {
        let dir = tempfile::tempdir().expect("dir");
        for round in 0..20 {
            let mut conn = connection_on(&dir, round).await;
            with_c_api(&mut conn, |c| {
                c.execute("INSERT INTO t (name) VALUES ('r')", [])
            })
            .await
            .expect("inserted");
            conn.close().await.expect("closes cleanly");
        }
        let live = CACHES
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .filter(|weak| weak.strong_count() > 0)
            .count();
        // Other tests run beside this one; none of the 20 closed here is still alive.
        assert!(live < 20, "{live} caches outlived their connections");
    }

    async fn connection_on(dir: &tempfile::TempDir, round: usize) -> SqliteConnection {
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("r.db").display());
        let mut conn = SqliteConnection::connect(&url).await.expect("opened");
        if round == 0 {
            sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
                .execute(&mut conn)
                .await
                .expect("created");
        }
        conn
    }
}
