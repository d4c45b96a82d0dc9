//! The host API's connection: one of the store's native sqlx connections (SQLite or
//! PostgreSQL, from the store's pool or the service's own), usable as an sqlx executor
//! for the `Any` database and handing out the native connection.
//!
//! Why a type of our own rather than `crate::Connection`: an `Connection` hides
//! its driver for good, so a host could not bind a native type (a PostgreSQL `UUID`
//! column) or use `query!`, and the store could not take a service's native pool. Each
//! native connection implements sqlx's public `AnyConnectionBackend` (that is how
//! `Connection` itself runs statements), so delegating to it keeps every host's
//! `sqlx::query(…).bind(…).execute(&mut *conn)` working unchanged.

use crate::Backend;
use futures_util::stream::BoxStream;
use sqlx::any::{Any, AnyQueryResult, AnyRow, AnyStatement, AnyTypeInfo};
use sqlx::migrate::Migrator;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use sqlx::pool::PoolConnection;
use sqlx::{Describe, Either, Execute, Executor, SqlStr};
use sqlx_core::any::AnyConnectionBackend;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A connection to the store's database: what the store's functions, a host's handlers,
/// resolvers and state readers, and [`Host::on_decided`]-style hooks receive (from
/// [`crate::WriteTx::connection`] inside the engine's transaction, or
/// [`crate::Store::read_connection`] for reads).
///
/// It is an sqlx executor for the `Any` database, so the usual
/// `sqlx::query("…").bind(…).execute(&mut *conn)` runs on it; for native types and the
/// `query!` macros take the native connection with [`Connection::as_postgres`] or
/// [`Connection::as_sqlite`]. Never send `BEGIN`, `COMMIT`, `ROLLBACK`, `SAVEPOINT` or
/// `RELEASE` through it: the transaction belongs to the engine (see
/// [`crate::WriteTx::connection`]).
///
/// [`Host::on_decided`]: https://docs.rs/assent-confirm
///
/// Binding a native PostgreSQL type in a handler:
///
/// ```no_run
/// # async fn handler(conn: &mut assent_store::Connection, id: uuid::Uuid) -> Result<(), sqlx::Error> {
/// if let Some(pg) = conn.as_postgres() {
///     sqlx::query("UPDATE orders SET refunded = true WHERE id = $1")
///         .bind(id)
///         .execute(&mut *pg)
///         .await?;
/// }
/// # Ok(()) }
/// ```
pub struct Connection {
    native: Native,
}

/// The driver behind a [`Connection`].
pub(crate) enum Native {
    #[cfg(feature = "sqlite")]
    Sqlite(PoolConnection<sqlx::Sqlite>),
    #[cfg(feature = "postgres")]
    Postgres(PoolConnection<sqlx::Postgres>),
    /// Built with neither backend: no connection can exist (the store refuses to
    /// open), but the crates above still compile, each choosing no backend itself.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    #[allow(dead_code)]
    Nothing(std::convert::Infallible),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connection({:?})", self.backend())
    }
}

impl Connection {
    pub(crate) fn new(native: Native) -> Self {
        Self { native }
    }

    /// The database this connection is to.
    pub fn backend(&self) -> Backend {
        match &self.native {
            #[cfg(feature = "sqlite")]
            Native::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Native::Postgres(_) => Backend::Postgres,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Native::Nothing(never) => match *never {},
        }
    }

    /// The native PostgreSQL connection (for native types such as `UUID`, and
    /// `query!`), or `None` on SQLite. Statements run on it are part of the same
    /// transaction.
    #[cfg(feature = "postgres")]
    pub fn as_postgres(&mut self) -> Option<&mut sqlx::PgConnection> {
        match &mut self.native {
            Native::Postgres(conn) => Some(&mut **conn),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    /// The native SQLite connection, or `None` on PostgreSQL. Statements run on it are
    /// part of the same transaction.
    #[cfg(feature = "sqlite")]
    pub fn as_sqlite(&mut self) -> Option<&mut sqlx::SqliteConnection> {
        match &mut self.native {
            Native::Sqlite(conn) => Some(&mut **conn),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    pub(crate) fn backend_mut(&mut self) -> &mut dyn AnyConnectionBackend {
        match &mut self.native {
            #[cfg(feature = "sqlite")]
            Native::Sqlite(conn) => &mut **conn,
            #[cfg(feature = "postgres")]
            Native::Postgres(conn) => &mut **conn,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Native::Nothing(never) => match *never {},
        }
    }

    fn backend_ref(&self) -> &dyn AnyConnectionBackend {
        match &self.native {
            #[cfg(feature = "sqlite")]
            Native::Sqlite(conn) => &**conn,
            #[cfg(feature = "postgres")]
            Native::Postgres(conn) => &**conn,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Native::Nothing(never) => match *never {},
        }
    }

    /// The driver's migrator on this connection.
    pub(crate) fn migrate(
        &mut self,
    ) -> Result<&mut (dyn sqlx::migrate::Migrate + Send + 'static), sqlx::Error> {
        self.backend_mut().as_migrate()
    }

    /// Whether a transaction is open on it (sqlx's own count, which a failed rollback
    /// leaves behind).
    pub(crate) fn is_in_transaction(&self) -> bool {
        self.backend_ref().is_in_transaction()
    }

    /// Begins a transaction with `statement` (`BEGIN` when `None`), counted by the
    /// driver as sqlx's own transactions are.
    pub(crate) async fn begin(
        &mut self,
        statement: Option<&'static str>,
    ) -> Result<(), sqlx::Error> {
        self.backend_mut()
            .begin(statement.map(SqlStr::from_static))
            .await
    }

    pub(crate) async fn commit(&mut self) -> Result<(), sqlx::Error> {
        self.backend_mut().commit().await
    }

    pub(crate) async fn rollback(&mut self) -> Result<(), sqlx::Error> {
        self.backend_mut().rollback().await
    }

    /// Queues the rollback of an open transaction (no async in `drop`): it runs before
    /// the connection's next statement, or when the pool takes it back.
    pub(crate) fn start_rollback(&mut self) {
        self.backend_mut().start_rollback();
    }

    /// Closes the connection instead of giving it back to the pool (its state is
    /// unclear after a failure).
    pub(crate) fn close_on_drop(&mut self) {
        match &mut self.native {
            #[cfg(feature = "sqlite")]
            Native::Sqlite(conn) => conn.close_on_drop(),
            #[cfg(feature = "postgres")]
            Native::Postgres(conn) => conn.close_on_drop(),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Native::Nothing(never) => match *never {},
        }
    }
}

/// The store's pool: a native sqlx pool, its own or the service's
/// ([`crate::Store::from_pool`]).
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    #[cfg(feature = "sqlite")]
    Sqlite(sqlx::SqlitePool),
    /// With the schema to put first on the search path of each transaction, for a
    /// service's pool ([`crate::Store::from_pool`]); a pool the store opened has it in its
    /// connections' startup options instead.
    #[cfg(feature = "postgres")]
    Postgres(sqlx::PgPool, Option<Arc<str>>),
    /// Built with neither backend (see `connection::Native::Nothing`).
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    #[allow(dead_code)]
    Nothing(std::convert::Infallible),
}

impl Pool {
    /// A connection, outside any transaction.
    pub(crate) async fn acquire(&self) -> Result<Connection, sqlx::Error> {
        Ok(Connection::new(match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => Native::Sqlite(pool.acquire().await?),
            #[cfg(feature = "postgres")]
            Self::Postgres(pool, _) => Native::Postgres(pool.acquire().await?),
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Self::Nothing(never) => match *never {},
        }))
    }

    /// The schema a transaction sets first on its search path (a service's pool).
    pub(crate) fn search_path(&self) -> Option<&str> {
        match self {
            #[cfg(feature = "postgres")]
            Self::Postgres(_, schema) => schema.as_deref(),
            #[allow(unreachable_patterns)]
            _ => None,
        }
    }

    pub(crate) fn backend(&self) -> Backend {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => Backend::Sqlite,
            #[cfg(feature = "postgres")]
            Self::Postgres(..) => Backend::Postgres,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Self::Nothing(never) => match *never {},
        }
    }

    pub(crate) async fn run_migrator(
        &self,
        migrator: &Migrator,
    ) -> Result<(), sqlx::migrate::MigrateError> {
        match self {
            // `run_direct` on a connection in hand: `Migrator::run`'s `Acquire` bound
            // makes every future awaiting it fail `Send` for all lifetimes.
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => {
                let mut conn = pool.acquire().await?;
                migrator.run_direct(None, &mut *conn, false).await
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(pool, None) => {
                let mut conn = pool.acquire().await?;
                migrator.run_direct(None, &mut *conn, false).await
            }
            // The service's own connection, its search path set for the migration and
            // put back after: the service's other work keeps its own.
            #[cfg(feature = "postgres")]
            Self::Postgres(pool, Some(schema)) => {
                let mut conn = pool.acquire().await?;
                let set = format!("SET search_path TO \"{schema}\"");
                sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                    .execute(&mut *conn)
                    .await?;
                let ran = migrator.run_direct(None, &mut *conn, false).await;
                let reset = sqlx::raw_sql("RESET search_path").execute(&mut *conn).await;
                if reset.is_err() {
                    conn.close_on_drop();
                }
                ran
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Self::Nothing(never) => match *never {},
        }
    }

    pub(crate) async fn close(&self) {
        match self {
            #[cfg(feature = "sqlite")]
            Self::Sqlite(pool) => pool.close().await,
            #[cfg(feature = "postgres")]
            Self::Postgres(pool, _) => pool.close().await,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Self::Nothing(never) => match *never {},
        }
    }
}

impl<'c> Executor<'c> for &'c mut Connection {
    type Database = Any;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        mut query: E,
    ) -> BoxStream<'e, Result<Either<AnyQueryResult, AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let arguments = match query.take_arguments().map_err(sqlx::Error::Encode) {
            Ok(arguments) => arguments,
            Err(error) => return Box::pin(futures_util::stream::once(async { Err(error) })),
        };
        let persistent = query.persistent();
        self.backend_mut()
            .fetch_many(query.sql(), persistent, arguments)
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        mut query: E,
    ) -> BoxFuture<'e, Result<Option<AnyRow>, sqlx::Error>>
    where
        'c: 'e,
        E: 'q + Execute<'q, Any>,
    {
        let arguments = match query.take_arguments().map_err(sqlx::Error::Encode) {
            Ok(arguments) => arguments,
            Err(error) => return Box::pin(async { Err(error) }),
        };
        let persistent = query.persistent();
        self.backend_mut()
            .fetch_optional(query.sql(), persistent, arguments)
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &[AnyTypeInfo],
    ) -> BoxFuture<'e, Result<AnyStatement, sqlx::Error>>
    where
        'c: 'e,
    {
        self.backend_mut().prepare_with(sql, parameters)
    }

    fn describe<'e>(self, sql: SqlStr) -> BoxFuture<'e, Result<Describe<Any>, sqlx::Error>>
    where
        'c: 'e,
    {
        self.backend_mut().describe(sql)
    }
}

#[cfg(test)]
mod tests {
    use crate::Store;
    use sqlx::Row;

    #[tokio::test]
    async fn a_host_statement_runs_on_the_store_connection_and_the_native_one() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut tx = store.begin_write().await.expect("tx");
        let conn = tx.connection();
        sqlx::query("CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT)")
            .execute(&mut *conn)
            .await
            .expect("through Any");
        let native = conn.as_sqlite().expect("a SQLite store");
        sqlx::query("INSERT INTO notes VALUES (?1, ?2)")
            .bind("n1")
            .bind("draft")
            .execute(&mut *native)
            .await
            .expect("through the native connection, same transaction");
        let row = sqlx::query("SELECT body FROM notes WHERE id = $1")
            .bind("n1")
            .fetch_one(&mut *tx.connection())
            .await
            .expect("read back");
        assert_eq!(row.get::<String, _>(0), "draft");
        assert!(tx.connection().as_postgres().is_none());
        tx.rollback().await.expect("rollback");
    }
}
