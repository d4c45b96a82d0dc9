//! Opening the database: the backend chosen from the URL, connection settings,
//! durability, migrations, and the write transaction.

use crate::connection::{Connection, Pool};
use crate::error::is_lock_timeout;
use crate::writer::{GroupCommits, Joining, WriteTx, Writer};
use crate::{StoreError, chain};
use assent_domain::Target;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::{Migration, MigrationType, Migrator};
use std::sync::LazyLock;

/// Every engine migration ever shipped, as the files are (the upgrade test replays the
/// old ones; [`Backend::migrator`] is what a store runs).
pub static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/sqlite");
/// The PostgreSQL twin of [`SQLITE_MIGRATIONS`].
pub static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../../migrations/postgres");

/// Migration 0002 created the journal's tables when the journal was the only host. It
/// stays in the directory (released databases recorded it) but the engine no longer
/// runs it: the journal host creates its tables as its own migration.
const JOURNAL_TABLES_VERSION: i64 = 2;

fn engine_migrator(all: &Migrator) -> Migrator {
    let mut migrator = Migrator::with_migrations(
        all.iter()
            .filter(|m| m.version != JOURNAL_TABLES_VERSION)
            .cloned()
            .collect(),
    );
    // Databases that ran 0002 must still open; a database from a *newer* release is
    // refused by `refuse_newer_schema` instead.
    migrator.set_ignore_missing(true);
    migrator.dangerous_set_table_name(MIGRATIONS_TABLE);
    migrator
}

static SQLITE_MIGRATOR: LazyLock<Migrator> = LazyLock::new(|| engine_migrator(&SQLITE_MIGRATIONS));
static POSTGRES_MIGRATOR: LazyLock<Migrator> =
    LazyLock::new(|| engine_migrator(&POSTGRES_MIGRATIONS));

/// One of a host's own migrations (its tables), applied after the engine's, once per
/// database, in version order, and recorded per host (`_assent_<host>_migrations`);
/// like the engine's, a shipped migration is never edited (its checksum is checked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostMigration {
    /// Increasing from 1 within the host.
    pub version: i64,
    /// What it does, e.g. `tasks`.
    pub description: &'static str,
    /// The SQL on SQLite.
    pub sqlite: &'static str,
    /// The SQL on PostgreSQL.
    pub postgres: &'static str,
}

/// Which database a store runs on, chosen once from the URL scheme. The SQL is shared;
/// the few places where the dialects differ ask this.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:` URLs: one file (or memory), one writer at a time.
    Sqlite,
    /// `postgres:` / `postgresql:` URLs: a server shared by several processes.
    Postgres,
}

impl Backend {
    /// The backend a URL names, by its scheme.
    pub fn from_url(url: &str) -> Option<Self> {
        let scheme = url.split_once(':').map(|(scheme, _)| scheme)?;
        match scheme {
            "sqlite" => Some(Self::Sqlite),
            "postgres" | "postgresql" => Some(Self::Postgres),
            _ => None,
        }
    }

    /// The backend behind an open connection (or a transaction, through deref).
    pub fn of(conn: &Connection) -> Self {
        conn.backend()
    }

    /// What a claim query appends so that concurrent claimers on a shared server skip
    /// each other's rows instead of claiming them twice. SQLite needs nothing: the
    /// claim runs under its single write lock.
    pub fn skip_locked(self) -> &'static str {
        match self {
            Self::Sqlite => "",
            Self::Postgres => " FOR UPDATE SKIP LOCKED",
        }
    }

    /// Every engine migration ever shipped on this backend, 0002 included (the ones
    /// [`Store`] moves out of `_sqlx_migrations`).
    pub fn all_migrations(self) -> &'static Migrator {
        match self {
            Self::Sqlite => &SQLITE_MIGRATIONS,
            Self::Postgres => &POSTGRES_MIGRATIONS,
        }
    }

    /// The cargo feature that builds this backend.
    pub fn feature(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }

    /// The engine's migrations this store runs (every shipped one but 0002).
    pub fn migrator(self) -> &'static Migrator {
        match self {
            Self::Sqlite => &SQLITE_MIGRATOR,
            Self::Postgres => &POSTGRES_MIGRATOR,
        }
    }
}

/// An arbitrary constant naming Assent's writer lock among PostgreSQL advisory locks.
const WRITER_LOCK_KEY: i64 = 0x4153_5345_4e54; // "ASSENT"
/// The first half of the two-key advisory locks of single targets (a space apart from
/// the one-key writer lock); the second half is the hash of the target.
const TARGET_LOCK_CLASS: i32 = 0x4153_5354; // "ASST"

/// How to open a store. Built with [`StoreOptions::new`] (or `default()` for
/// [`Store::from_pool`]), then its fields set one by one.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StoreOptions {
    /// `sqlite://path/to/file.db` (created when missing), `sqlite::memory:`, or
    /// `postgres://user@host:port/database` (the database must exist).
    pub url: String,
    /// This device's id in vector clocks. Empty (the default): the id stored in the
    /// database, generated (a uuid) on its first open. A given id is stored on the
    /// first open and otherwise used as is (tests and benchmarks name their devices).
    pub device_id: String,
    /// How long a writer waits for the lock before failing.
    pub busy_timeout: Duration,
    /// Pool size.
    pub max_connections: u32,
    /// What a commit survives; [`Durability::Full`] unless a caller knowingly trades
    /// it for speed (the benchmarks measure both).
    pub durability: Durability,
    /// How long opening a PostgreSQL store keeps trying to reach its server before
    /// failing with [`StoreError::Unreachable`]: a server that is down is reported in
    /// seconds, with its cause, not as a pool timing out after 30 s of silence. (The
    /// pool's own acquire timeout stays sqlx's: once open, waiting for a connection
    /// means waiting for other writers, not for the network.)
    pub connect_timeout: Duration,
    /// SQLite file: run this process's write transactions on one writer connection and
    /// commit those that queue together in one `COMMIT` (one WAL sync), each still
    /// answered only once durable. On by default; off, each transaction commits on its
    /// own pool connection. No effect on PostgreSQL or an in-memory database.
    pub group_commit: bool,
    /// PostgreSQL: the schema the engine's tables live in (created when missing), so
    /// they stay out of the service's own. The URL's `schema=` parameter, when it has
    /// one, comes first; with neither, the connection's default (`public` on a stock
    /// server, where databases from before this option keep their tables). Ignored on
    /// SQLite.
    pub schema: Option<String>,
}

impl Default for StoreOptions {
    /// [`StoreOptions::new`] with no URL: for [`Store::from_pool`], which reads none.
    fn default() -> Self {
        Self::new("")
    }
}

/// [`StoreOptions::connect_timeout`] unless a caller sets it.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What a committed transaction survives (SQLite's `synchronous` setting, in WAL mode;
/// PostgreSQL keeps its server's own settings).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous = FULL`: the WAL is synced on every commit, so a committed decision
    /// survives a power loss. What Assent ships with.
    #[default]
    Full,
    /// `synchronous = NORMAL`: the WAL is synced only at checkpoints; a commit survives
    /// the application crashing, but the last ones may be lost with the power.
    Normal,
}

impl Durability {
    /// SQLite's name of the setting.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "FULL",
            Self::Normal => "NORMAL",
        }
    }
}

impl StoreOptions {
    /// Defaults for `url`: the database's own host id, 10 s busy timeout, 8 connections,
    /// [`Durability::Full`], [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            device_id: String::new(),
            busy_timeout: Duration::from_secs(10),
            max_connections: 8,
            durability: Durability::Full,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            group_commit: true,
            schema: None,
        }
    }

    /// The PostgreSQL schema to use (the URL's `schema=`, else
    /// [`StoreOptions::schema`]), checked to be a plain identifier; `None` for the connection's
    /// default.
    pub fn postgres_schema(&self) -> Result<Option<String>, StoreError> {
        let from_url = || {
            let query = self.url.split_once('?')?.1;
            query
                .split('&')
                .find_map(|pair| pair.strip_prefix("schema="))
                .map(str::to_owned)
        };
        let Some(schema) = from_url().or_else(|| self.schema.clone()) else {
            return Ok(None);
        };
        let plain = schema.len() <= 63
            && schema.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
            && schema
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
        if !plain {
            return Err(StoreError::InvalidSchema(schema));
        }
        Ok(Some(schema))
    }

    /// The `host:port` of a PostgreSQL URL (port 5432 when it names none), without the
    /// user or the password, for messages about reaching the server; `None` for SQLite.
    pub fn postgres_server(&self) -> Option<String> {
        postgres_server(&self.url)
    }

    /// The file of a SQLite URL, `None` for PostgreSQL or an in-memory database.
    pub fn sqlite_file(&self) -> Option<std::path::PathBuf> {
        (Backend::from_url(&self.url) == Some(Backend::Sqlite))
            .then(|| sqlite_file(&self.url))
            .flatten()
    }
}

/// See [`StoreOptions::postgres_server`].
fn postgres_server(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))?;
    let rest = rest.split('?').next().unwrap_or_default();
    // The last `@` ends the user info, whatever a careless password holds before it.
    let after_user = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let authority = after_user.split('/').next().unwrap_or_default();
    let authority = if authority.is_empty() {
        "localhost"
    } else {
        authority
    };
    let port_given = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    Some(if port_given {
        authority.to_owned()
    } else {
        format!("{authority}:5432")
    })
}

/// `url` with its password, if any, replaced by `***`, for messages and logs.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let query_at = rest.find('?').unwrap_or(rest.len());
    let Some(at) = rest[..query_at].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

/// A pooled connection for reads, from [`Store::read_connection`]: it dereferences to
/// the [`Connection`] the store's read functions take, and goes back to the pool
/// when dropped. Not for writes (see [`Store::read_connection`]).
#[derive(Debug)]
pub struct ReadConnection(Connection);

impl Drop for ReadConnection {
    fn drop(&mut self) {
        // Only a service pool's reads open one (see `Store::read_connection`).
        if self.0.is_in_transaction() {
            self.0.start_rollback();
        }
    }
}

impl ReadConnection {
    /// The connection, for a read.
    pub fn connection(&mut self) -> &mut Connection {
        &mut self.0
    }
}

impl std::ops::Deref for ReadConnection {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.0
    }
}

impl std::ops::DerefMut for ReadConnection {
    fn deref_mut(&mut self) -> &mut Connection {
        &mut self.0
    }
}

/// A service's own native pool, for [`Store::from_pool`]: `sqlx::SqlitePool` or
/// `sqlx::PgPool` (each with its backend's feature).
#[derive(Debug)]
pub struct ServicePool(pub(crate) Pool);

#[cfg(feature = "sqlite")]
impl From<sqlx::SqlitePool> for ServicePool {
    fn from(pool: sqlx::SqlitePool) -> Self {
        Self(Pool::Sqlite(pool))
    }
}

#[cfg(feature = "postgres")]
impl From<sqlx::PgPool> for ServicePool {
    fn from(pool: sqlx::PgPool) -> Self {
        Self(Pool::Postgres(pool, None))
    }
}

/// The database of one Assent installation.
#[derive(Debug, Clone)]
pub struct Store {
    pool: Pool,
    backend: Backend,
    device_id: String,
    /// How long a writer waits for a lock before [`StoreError::WriterBusy`].
    busy_timeout: Duration,
    /// The group-commit writer of a SQLite file.
    pub(crate) writer: Option<Arc<Writer>>,
}

impl Store {
    /// Opens (creating and migrating when needed) the database at `url`.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(StoreOptions::new(url)).await
    }

    /// Opens with explicit options.
    #[tracing::instrument(skip_all, fields(url = %without_password(&options.url)))]
    pub async fn open_with(options: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            url: without_password(&options.url),
            source,
        };
        let backend = Backend::from_url(&options.url).ok_or_else(|| {
            open_error(sqlx::Error::Configuration(
                "the URL scheme must be sqlite:, postgres: or postgresql:".into(),
            ))
        })?;
        let mut writer = None;
        let pool = match backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite => Pool::Sqlite(
                open_sqlite(&options, &mut writer)
                    .await
                    .map_err(open_error)?,
            ),
            #[cfg(feature = "postgres")]
            Backend::Postgres => open_postgres(&options).await?,
            #[allow(unreachable_patterns)]
            other => {
                return Err(open_error(sqlx::Error::Configuration(
                    format!(
                        "this build of Assent has no {other:?} support (enable the `{}` feature)",
                        other.feature()
                    )
                    .into(),
                )));
            }
        };
        Self::over(pool, writer, options).await
    }

    /// A store over the service's own native pool (`sqlx::SqlitePool` or
    /// `sqlx::PgPool`): no second pool to the same database. The engine's tables are
    /// created and migrated in it as [`Store::open`] does. `options` gives the busy
    /// timeout, the device id, group commit and, on PostgreSQL, the schema
    /// ([`StoreOptions::schema`]); its `url`, pool size and connect timeout are the
    /// pool's business and not read. On SQLite the pool's own connect options stand
    /// (sqlx's defaults are WAL, `synchronous = FULL` and foreign keys on, which the
    /// engine needs).
    ///
    /// ```
    /// # async fn service() -> Result<(), Box<dyn std::error::Error>> {
    /// use assent_store::{Store, StoreOptions};
    /// let pool = sqlx::SqlitePool::connect("sqlite::memory:").await?;
    /// let store = Store::from_pool(pool.clone(), StoreOptions::default()).await?;
    /// # let _ = store; Ok(()) }
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(service()).unwrap();
    /// ```
    #[tracing::instrument(skip_all)]
    pub async fn from_pool(
        pool: impl Into<ServicePool>,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        let pool = match pool.into().0 {
            #[cfg(feature = "sqlite")]
            Pool::Sqlite(pool) => Pool::Sqlite(pool),
            #[cfg(feature = "postgres")]
            Pool::Postgres(pool, _) => {
                let schema = options.postgres_schema()?;
                if let Some(schema) = &schema {
                    let mut conn = pool.acquire().await?;
                    create_schema(&mut conn, schema).await?;
                }
                Pool::Postgres(pool, schema.map(Arc::from))
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Pool::Nothing(never) => match never {},
        };
        let mut writer = None;
        #[cfg(feature = "sqlite")]
        if let Pool::Sqlite(sqlite) = &pool {
            let file = sqlite.connect_options().get_filename().to_path_buf();
            if options.group_commit && file.is_file() {
                // The service chose the journal mode (sqlx's default is WAL).
                let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
                    .fetch_one(sqlite)
                    .await?;
                let wal = mode.eq_ignore_ascii_case("wal");
                writer = Some(Writer::new(pool.clone(), options.busy_timeout, wal));
            }
        }
        Self::over(pool, writer, options).await
    }

    /// Migrates the database behind `pool` and reads (or stores) the device id.
    async fn over(
        pool: Pool,
        writer: Option<Arc<Writer>>,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        let backend = pool.backend();
        // One connection for the setup, in the schema for as long as it lasts (a
        // service's pool gets its connection back with its own search path).
        let mut setup = pool.acquire().await?;
        if let Some(schema) = pool.search_path() {
            let set = format!("SET search_path TO \"{schema}\"");
            sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                .execute(&mut setup)
                .await?;
        }
        adopt_sqlx_migrations(&mut setup, backend).await?;
        refuse_newer_schema(&mut setup, backend).await?;
        if pool.search_path().is_some() {
            let reset = sqlx::raw_sql("RESET search_path").execute(&mut setup).await;
            if reset.is_err() {
                setup.close_on_drop();
            }
        }
        drop(setup);
        pool.run_migrator(backend.migrator()).await?;
        let mut setup = pool.acquire().await?;
        if let Some(schema) = pool.search_path() {
            setup.begin(None).await?;
            let set = schema_first_for_the_transaction(schema);
            sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                .execute(&mut setup)
                .await?;
        }
        let device_id = stored_device_id(&mut setup, options.device_id).await?;
        if setup.is_in_transaction() {
            setup.commit().await?;
        }
        drop(setup);
        tracing::debug!(%device_id, ?backend, "store open and migrated");
        let store = Self {
            pool,
            backend,
            device_id,
            busy_timeout: options.busy_timeout,
            writer,
        };
        store.begin_chain().await?;
        Ok(store)
    }

    /// Begins the consent chain of a database upgraded from a release before it, at
    /// the upgrade itself ([`crate::chain::begin_if_empty`]): one read when the chain
    /// has begun (every open after the first), a write only the first time.
    async fn begin_chain(&self) -> Result<(), StoreError> {
        let head = {
            let mut conn = self.read_connection().await?;
            chain::head(conn.connection()).await?
        };
        if head.entries > 0 {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        if chain::begin_if_empty(tx.connection()).await? {
            tx.commit().await?;
            tracing::info!("the consent chain begins at this upgrade");
        } else {
            tx.rollback().await?;
        }
        Ok(())
    }

    /// Applies the migrations of the host named `host` that this database has not run
    /// yet (a host's tables live beside the engine's). Idempotent; the engine calls it
    /// when it is built over this store.
    #[tracing::instrument(skip(self, migrations), fields(count = migrations.len()))]
    pub async fn migrate_host(
        &self,
        host: &str,
        migrations: &[HostMigration],
    ) -> Result<(), StoreError> {
        if host.is_empty() || !host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return Err(StoreError::InvalidHostName(host.to_owned()));
        }
        if migrations.is_empty() {
            return Ok(());
        }
        let mut migrator = Migrator::with_migrations(
            migrations
                .iter()
                .map(|m| {
                    let sql = match self.backend {
                        Backend::Sqlite => m.sqlite,
                        Backend::Postgres => m.postgres,
                    };
                    Migration::new(
                        m.version,
                        m.description.into(),
                        MigrationType::Simple,
                        sqlx::SqlStr::from_static(sql),
                        false,
                    )
                })
                .collect(),
        );
        migrator.dangerous_set_table_name(format!("_assent_{host}_migrations"));
        self.pool.run_migrator(&migrator).await?;
        Ok(())
    }

    /// A connection from the pool, outside any transaction, for reads only: each
    /// statement sees what was committed when it ran. Writes go through
    /// [`Store::begin_write`] and its siblings, which queue writers on the writer lock
    /// (group commit on a SQLite file); a write sent on this connection would skip
    /// both.
    pub async fn read_connection(&self) -> Result<ReadConnection, StoreError> {
        let mut conn = self.pool.acquire().await?;
        if let Some(schema) = self.pool.search_path() {
            // A service's pool: the schema for this connection's reads alone, in a
            // read-only transaction that rolls back (search path and all) when the
            // connection goes back to the service.
            conn.begin(Some("BEGIN READ ONLY")).await?;
            let set = schema_first_for_the_transaction(schema);
            sqlx::raw_sql(sqlx::AssertSqlSafe(set))
                .execute(&mut conn)
                .await?;
        }
        Ok(ReadConnection(conn))
    }

    /// The database this store runs on.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// This device's id in vector clocks and sync batches (the `host` of their wire
    /// format, which predates hosts as plug-ins).
    pub fn device_id(&self) -> &str {
        &self.device_id
    }

    /// The old name of [`Store::device_id`].
    #[deprecated(note = "a device is not a host: use `device_id`")]
    pub fn host_id(&self) -> &str {
        &self.device_id
    }

    /// A write transaction holding the database's writer lock from its first statement,
    /// so whatever it reads stays true until it commits and concurrent writers, from
    /// this process or another, queue instead of deciding the same item twice. SQLite:
    /// `BEGIN IMMEDIATE`. PostgreSQL: `BEGIN` plus a transaction-scoped advisory lock
    /// that every writer takes, the same one-writer-at-a-time rule.
    ///
    /// On a SQLite file with [`StoreOptions::group_commit`] (the default), the
    /// transaction is a savepoint on the process's writer connection and may share its
    /// `COMMIT` with writers that queued behind it; [`WriteTx::commit`] still returns
    /// only once that commit is durable, and a rollback undoes this transaction alone.
    pub async fn begin_write(&self) -> Result<WriteTx, StoreError> {
        self.begin_sqlite_or_locked(Joining::Batch).await
    }

    /// [`Store::begin_write`], joining an open batch or not.
    async fn begin_sqlite_or_locked(&self, joining: Joining) -> Result<WriteTx, StoreError> {
        match (self.backend, &self.writer) {
            (Backend::Sqlite, Some(writer)) => writer.begin(joining).await,
            (Backend::Sqlite, None) => self.begin_own(Some("BEGIN IMMEDIATE")).await,
            (Backend::Postgres, _) => {
                let mut tx = self.begin_own(None).await?;
                let locked = sqlx::query("SELECT pg_advisory_xact_lock($1)")
                    .bind(WRITER_LOCK_KEY)
                    .execute(tx.connection())
                    .await;
                self.busy_if_lock_timed_out(locked)?;
                Ok(tx)
            }
        }
    }

    /// A transaction of its own on a pool connection. On PostgreSQL every lock it
    /// waits for is bounded by the busy timeout (`SET LOCAL lock_timeout`: a writer
    /// held up by another, the service's own transaction included, ends in
    /// [`StoreError::WriterBusy`], never a hang), and a schema is put first on its
    /// search path for the transaction alone.
    async fn begin_own(&self, statement: Option<&'static str>) -> Result<WriteTx, StoreError> {
        let mut conn = self.pool.acquire().await?;
        self.busy_if_lock_timed_out(conn.begin(statement).await)?;
        let mut tx = WriteTx::own(conn);
        if self.backend == Backend::Postgres {
            let millis = self.busy_timeout.as_millis().max(1);
            let mut settings = format!("SET LOCAL lock_timeout = {millis};");
            if let Some(schema) = self.pool.search_path() {
                settings.push(' ');
                settings.push_str(&schema_first_for_the_transaction(schema));
            }
            // Both values are ours (a number, a checked identifier), never the caller's text.
            sqlx::raw_sql(sqlx::AssertSqlSafe(settings))
                .execute(tx.connection())
                .await?;
        }
        Ok(tx)
    }

    /// `result`, with PostgreSQL's "lock not available" (the busy timeout ran out)
    /// turned into [`StoreError::WriterBusy`].
    fn busy_if_lock_timed_out<T>(&self, result: Result<T, sqlx::Error>) -> Result<T, StoreError> {
        result.map_err(|error| {
            if is_lock_timeout(&error) {
                StoreError::WriterBusy(self.busy_timeout)
            } else {
                error.into()
            }
        })
    }

    /// The commits of this store's group-commit writer so far (`None` without one:
    /// PostgreSQL, an in-memory database, group commit off): how many writes shared
    /// how many WAL syncs.
    pub fn group_commits(&self) -> Option<GroupCommits> {
        self.writer.as_ref().map(|writer| writer.commits())
    }

    /// A write transaction that changes only `target` and what hangs off it (its change
    /// sets, their items and decisions, audit and outbox rows): decisions on a set, wakes.
    /// SQLite: the same `BEGIN IMMEDIATE` as [`Store::begin_write`] (one writer at a
    /// time is SQLite's own rule). PostgreSQL: the writer lock in shared mode, so that
    /// writers of different targets run side by side while a [`Store::begin_write`]
    /// (which holds it exclusively: sync imports, expiry, tokens, webhooks)
    /// still excludes them all, plus an exclusive lock on the target, so two writers of
    /// one target queue and whatever the second reads is what the first committed.
    pub async fn begin_write_on(&self, target: &Target) -> Result<WriteTx, StoreError> {
        match self.backend {
            Backend::Sqlite => self.begin_write().await,
            Backend::Postgres => {
                let mut tx = self.begin_own(None).await?;
                let locked = Self::lock_target(tx.connection(), target).await;
                locked.map_err(|error| match error {
                    StoreError::Database(sql) if is_lock_timeout(&sql) => {
                        StoreError::WriterBusy(self.busy_timeout)
                    }
                    other => other,
                })?;
                Ok(tx)
            }
        }
    }

    /// Takes, inside `conn`'s open transaction, the locks [`Store::begin_write_on`]
    /// takes for `target`: a claimed job whose handler writes the target in the
    /// claim's own transaction queues behind (and before) decisions on it. SQLite:
    /// nothing to do, its transaction already excludes every other writer.
    pub async fn lock_target(conn: &mut Connection, target: &Target) -> Result<(), StoreError> {
        if Backend::of(conn) == Backend::Postgres {
            sqlx::query(
                "SELECT pg_advisory_xact_lock_shared($1), pg_advisory_xact_lock($2, hashtext($3))",
            )
            .bind(WRITER_LOCK_KEY)
            .bind(TARGET_LOCK_CLASS)
            .bind(format!("{}\u{1f}{}", target.kind, target.id))
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// A transaction for claiming queued work (the outbox) without the writer lock:
    /// on PostgreSQL two claimers run side by side and `FOR UPDATE SKIP LOCKED` keeps
    /// them off each other's rows; SQLite has one writer anyway (`BEGIN IMMEDIATE`).
    ///
    /// With group commit, a claim does not join writes that finished before it: a
    /// transactional handler runs inside the claim, and their answers would wait for it.
    pub async fn begin_claim(&self) -> Result<WriteTx, StoreError> {
        match self.backend {
            Backend::Sqlite => self.begin_sqlite_or_locked(Joining::Alone).await,
            Backend::Postgres => self.begin_own(None).await,
        }
    }

    /// Closes the pool and the writer, waiting for connections to finish (a service's
    /// own pool, from [`Store::from_pool`], is closed too: close the store only when
    /// the service is done with both).
    pub async fn close(&self) {
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
        self.pool.close().await;
    }
}

/// Whether a connection coming back to the pool may serve again. A transaction dropped
/// without commit leaves a rollback queued; when that rollback fails (SQLite already
/// rolled back on its own after `SQLITE_FULL`, say), the driver still counts the
/// transaction as open and would refuse every later `BEGIN` on this connection. Such a
/// connection is closed instead, and the pool opens a fresh one.
async fn release_clean<C: sqlx::Connection>(conn: &mut C) -> Result<bool, sqlx::Error> {
    if !conn.is_in_transaction() {
        return Ok(true);
    }
    // The ping runs after the queued rollback, so the depth is settled afterwards.
    conn.ping().await?;
    if conn.is_in_transaction() {
        tracing::warn!("a connection's rollback failed; closing it");
        return Ok(false);
    }
    Ok(true)
}

/// The file behind a SQLite URL, or `None` for an in-memory database.
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" || url.contains("mode=memory") {
        return None;
    }
    Some(std::path::PathBuf::from(path))
}

/// Creates a missing database file readable and writable by its owner alone (0600 on
/// Unix, whatever the umask), before SQLite opens it: it holds webhook signing
/// secrets, the Slack URL and every argument and result (issue 37). SQLite gives the
/// `-wal` and `-shm` files it makes beside it the database file's mode. An existing
/// file is left as it is; when this fails (no folder, no right to write), SQLite's own
/// open reports why as before.
fn create_private(path: &std::path::Path) {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if let Err(error) = options.open(path) {
        tracing::debug!(%error, path = %path.display(), "database file not created ahead of SQLite");
    }
}

/// Refuses, at once and in one sentence, a file that SQLite would fail on slowly (a
/// pool retrying for its whole acquire timeout) or, worse, treat as a new database:
/// one that is not a SQLite database, or that this process may not write.
fn check_sqlite_file(path: &std::path::Path) -> Result<(), sqlx::Error> {
    use std::io::Read;
    const HEADER: &[u8; 16] = b"SQLite format 3\0";
    let refuse = |why: String| Err(sqlx::Error::Configuration(why.into()));
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return refuse(format!("{} cannot be read: {error}", path.display())),
    };
    let metadata = file.metadata().map_err(sqlx::Error::Io)?;
    if metadata.is_dir() {
        return refuse(format!(
            "{} is a directory, not a database file",
            path.display()
        ));
    }
    // An empty file is what SQLite itself makes of a new database.
    if metadata.len() > 0 {
        let mut header = [0_u8; 16];
        let read = file.read(&mut header).map_err(sqlx::Error::Io)?;
        if read < header.len() || &header != HEADER {
            return refuse(format!(
                "{} is not a SQLite database (it does not start with the SQLite header); nothing was changed",
                path.display()
            ));
        }
    }
    if let Err(error) = std::fs::OpenOptions::new().append(true).open(path) {
        return refuse(format!(
            "{} cannot be written ({error}); Assent needs write access to its database",
            path.display()
        ));
    }
    Ok(())
}

/// A database migrated by a newer release has engine migrations this one does not
/// know; running on it would write rows in a shape that release does not expect.
async fn refuse_newer_schema(conn: &mut Connection, backend: Backend) -> Result<(), StoreError> {
    let newest_known = backend
        .migrator()
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    // A fresh database has no table yet: nothing to compare.
    let applied: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM _assent_migrations")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(None);
    match applied {
        Some(version) if version > newest_known => Err(StoreError::NewerSchema {
            found: version,
            known: newest_known,
        }),
        _ => Ok(()),
    }
}

/// The table the engine's migrations are recorded in: its own, so that a service's
/// `sqlx::migrate!` in the same database (sqlx's default `_sqlx_migrations`) and the
/// engine's do not see each other's versions.
pub const MIGRATIONS_TABLE: &str = "_assent_migrations";

/// Moves the engine's rows of a database from before [`MIGRATIONS_TABLE`] out of
/// sqlx's default `_sqlx_migrations` (matched by version and checksum, so a
/// service's own migrations there stay), dropping that table when nothing else is
/// left in it. One transaction under the writer lock; a no-op on every later open.
async fn adopt_sqlx_migrations(conn: &mut Connection, backend: Backend) -> Result<(), StoreError> {
    let exists = match backend {
        Backend::Sqlite => {
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"
        }
        Backend::Postgres => {
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = '_sqlx_migrations'"
        }
    };
    let old_table: i64 = sqlx::query_scalar(exists).fetch_one(&mut *conn).await?;
    if old_table == 0 {
        return Ok(());
    }
    conn.begin(match backend {
        Backend::Sqlite => Some("BEGIN IMMEDIATE"),
        Backend::Postgres => None,
    })
    .await?;
    let moved = async {
        if backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(WRITER_LOCK_KEY)
                .execute(&mut *conn)
                .await?;
        }
        conn.migrate()?
            .ensure_migrations_table(MIGRATIONS_TABLE)
            .await?;
        let rows: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations")
                .fetch_all(&mut *conn)
                .await?;
        let ours: Vec<i64> =
            rows.into_iter()
                .filter(|(version, checksum)| {
                    backend.all_migrations().iter().any(|m| {
                        m.version == *version && m.checksum.as_ref() == checksum.as_slice()
                    })
                })
                .map(|(version, _)| version)
                .collect();
        for version in &ours {
            sqlx::query(
                "INSERT INTO _assent_migrations
                 SELECT * FROM _sqlx_migrations WHERE version = $1
                   AND NOT EXISTS (SELECT 1 FROM _assent_migrations WHERE version = $1)",
            )
            .bind(version)
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM _sqlx_migrations WHERE version = $1")
                .bind(version)
                .execute(&mut *conn)
                .await?;
        }
        let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations")
            .fetch_one(&mut *conn)
            .await?;
        if left == 0 {
            sqlx::query("DROP TABLE _sqlx_migrations")
                .execute(&mut *conn)
                .await?;
        }
        tracing::info!(
            moved = ours.len(),
            kept = left,
            "engine migrations moved to {MIGRATIONS_TABLE}"
        );
        Ok::<_, StoreError>(())
    }
    .await;
    match moved {
        Ok(()) => Ok(conn.commit().await?),
        Err(error) => {
            let _ = conn.rollback().await;
            Err(error)
        }
    }
}

/// Connects once to the server of a PostgreSQL `options.url`, retrying while the
/// failure may pass (the server not up yet, or refusing connections while it starts)
/// until `options.connect_timeout`. A pool would retry as well, but silently and then
/// report only that it timed out; this keeps the last cause. Other failures (a wrong
/// password, a missing database) are reported at once.
#[cfg(feature = "postgres")]
async fn reach_postgres(options: &StoreOptions) -> Result<(), StoreError> {
    use sqlx::Connection;
    let server = postgres_server(&options.url).unwrap_or_default();
    let within = options.connect_timeout;
    tracing::info!(%server, ?within, "connecting to PostgreSQL");
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(100);
    let unreachable = |source| StoreError::Unreachable {
        server: server.clone(),
        within,
        source,
    };
    loop {
        let url = url_without_schema(&options.url);
        match tokio::time::timeout_at(deadline, sqlx::PgConnection::connect(&url)).await {
            Ok(Ok(conn)) => {
                // Only a probe: the pool opens its own connections.
                let _ = conn.close().await;
                return Ok(());
            }
            Ok(Err(error)) if !may_pass(&error) => {
                return Err(StoreError::Open {
                    url: without_password(&options.url),
                    source: error,
                });
            }
            Ok(Err(error)) => {
                let now = tokio::time::Instant::now();
                if now + pause >= deadline {
                    return Err(unreachable(error));
                }
                tracing::debug!(%server, %error, "PostgreSQL not reachable yet");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(_elapsed) => {
                return Err(unreachable(sqlx::Error::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no answer",
                ))));
            }
        }
    }
}

/// Whether a failure to connect may pass by itself: the network (refused, unreachable,
/// a name not resolved yet) or a server still starting (SQLSTATE 57P03).
fn may_pass(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => db.code().as_deref() == Some("57P03"),
        _ => false,
    }
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(
    options: &StoreOptions,
    writer: &mut Option<Arc<Writer>>,
) -> Result<sqlx::SqlitePool, sqlx::Error> {
    use sqlx::Connection;
    // Each connection to an in-memory database is a database of its own: one
    // connection, or the migrations and the data would land in different ones.
    let in_memory = options.url.contains(":memory:") || options.url.contains("mode=memory");
    let max_connections = if in_memory {
        1
    } else {
        options.max_connections.max(1)
    };
    let url = if in_memory || options.url.contains("mode=") {
        options.url.clone()
    } else if options.url.contains('?') {
        format!("{}&mode=rwc", options.url)
    } else {
        format!("{}?mode=rwc", options.url)
    };
    // The busy timeout first: switching to WAL needs the lock another opener may hold.
    let pragmas = format!(
        "PRAGMA busy_timeout = {}; PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        options.busy_timeout.as_millis(),
        options.durability.as_str()
    );
    if let Some(path) = sqlite_file(&options.url) {
        check_sqlite_file(&path)?;
        if !options.url.contains("mode=") || options.url.contains("mode=rwc") {
            create_private(&path);
        }
        // One connection first: whatever else is wrong with the file fails here, once
        // and at once, not as a pool retrying until its acquire timeout.
        let mut probe = sqlx::SqliteConnection::connect(&url).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(pragmas.clone()))
            .execute(&mut probe)
            .await?;
        probe.close().await?;
    }
    // A reader takes a connection of its own for its reads (`pool().acquire()`, one per
    // history section, API request or wake) and each connection keeps its prepared
    // statements (sqlx caches every statement with arguments, 100 per connection), so
    // a hot read is prepared once per connection. What an acquire would add is a ping
    // of the connection's worker thread (sqlx's `test_before_acquire`): a round trip
    // that finds nothing on a local file, whose connections do not drop like a
    // network's; a connection whose worker did stop fails its next statement instead.
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(max_connections)
        .test_before_acquire(false)
        .after_release(|conn, _| Box::pin(release_clean(conn)))
        .after_connect(move |conn, _| {
            let pragmas = pragmas.clone();
            Box::pin(async move {
                sqlx::raw_sql(sqlx::AssertSqlSafe(pragmas))
                    .execute(conn)
                    .await?;
                Ok(())
            })
        })
        .connect(&url)
        .await?;
    if options.group_commit && sqlite_file(&options.url).is_some() {
        // Its connections set WAL mode (above).
        *writer = Some(Writer::new(
            Pool::Sqlite(pool.clone()),
            options.busy_timeout,
            true,
        ));
    }
    Ok(pool)
}

/// A pool on a PostgreSQL server, once it answers ([`reach_postgres`]): its
/// connections start with the schema first on their search path when one is given
/// (created first when missing).
#[cfg(feature = "postgres")]
async fn open_postgres(options: &StoreOptions) -> Result<Pool, StoreError> {
    use sqlx::{ConnectOptions, Connection};
    use std::str::FromStr;
    let open_error = |source| StoreError::Open {
        url: without_password(&options.url),
        source,
    };
    let schema = options.postgres_schema()?;
    reach_postgres(options).await?;
    let mut connect = sqlx::postgres::PgConnectOptions::from_str(&url_without_schema(&options.url))
        .map_err(open_error)?;
    if let Some(schema) = &schema {
        let mut probe = connect.connect().await.map_err(open_error)?;
        create_schema(&mut probe, schema).await?;
        let _ = probe.close().await;
        connect = connect.options([("search_path", schema.as_str())]);
    }
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(options.max_connections.max(1))
        .after_release(|conn, _| Box::pin(release_clean(conn)))
        .connect_with(connect)
        .await
        .map_err(open_error)?;
    Ok(Pool::Postgres(pool, None))
}

/// The statement that puts `schema` (checked by [`StoreOptions::postgres_schema`])
/// first on the search path until the transaction ends, before the service's own: a
/// host's handler in the engine's transaction still finds the service's tables.
fn schema_first_for_the_transaction(schema: &str) -> String {
    format!(
        "SELECT set_config('search_path', '\"{schema}\", ' || current_setting('search_path'), true);"
    )
}

/// `CREATE SCHEMA IF NOT EXISTS`, for a schema checked by
/// [`StoreOptions::postgres_schema`].
#[cfg(feature = "postgres")]
async fn create_schema(conn: &mut sqlx::PgConnection, schema: &str) -> Result<(), StoreError> {
    let create = format!("CREATE SCHEMA IF NOT EXISTS \"{schema}\"");
    sqlx::raw_sql(sqlx::AssertSqlSafe(create))
        .execute(conn)
        .await?;
    Ok(())
}

/// A PostgreSQL URL without Assent's own `schema=` parameter (the driver does not
/// know it).
fn url_without_schema(url: &str) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| !pair.starts_with("schema="))
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// The host id to use: `given`, or (when blank) the one stored in the database,
/// storing one on the first open. Two processes racing on a new database agree,
/// because only the first insert lands; later opens only read.
async fn stored_device_id(conn: &mut Connection, given: String) -> Result<String, StoreError> {
    let read =
        || sqlx::query_scalar::<_, String>("SELECT host_id FROM sync_device WHERE singleton = 1");
    let stored = match read().fetch_optional(&mut *conn).await? {
        Some(stored) => stored,
        None => {
            let candidate = if given.trim().is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                given.clone()
            };
            sqlx::query("INSERT INTO sync_device (singleton, host_id) VALUES (1, $1) ON CONFLICT DO NOTHING")
                .bind(&candidate)
                .execute(&mut *conn)
                .await?;
            read().fetch_one(&mut *conn).await?
        }
    };
    Ok(if given.trim().is_empty() {
        stored
    } else {
        given
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn in_memory_store_is_one_migrated_database() {
        let store = Store::open("sqlite::memory:").await.expect("opens");
        let mut tx = store.begin_write().await.expect("write tx");
        let tables: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM sqlite_master WHERE name = 'change_sets'")
                .fetch_one(tx.connection())
                .await
                .expect("query");
        assert_eq!(tables, 1);
    }

    #[tokio::test]
    async fn a_database_keeps_its_generated_host_id_across_opens() {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}/a.db", dir.path().display());
        let first = Store::open(&url).await.expect("opens");
        let id = first.device_id().to_owned();
        first.close().await;
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        let again = Store::open(&url).await.expect("reopens");
        assert_eq!(again.device_id(), id);
        let other = Store::open(&format!("sqlite://{}/b.db", dir.path().display()))
            .await
            .expect("opens");
        assert_ne!(
            other.device_id(),
            id,
            "every database is a device of its own"
        );
    }

    #[tokio::test]
    async fn a_write_after_the_disk_was_full_succeeds() {
        let dir = tempfile::tempdir().expect("dir");
        let mut options = StoreOptions::new(format!("sqlite://{}/full.db", dir.path().display()));
        // One connection, so the write after the failure gets the very connection that
        // failed (unless it was rightly replaced).
        options.max_connections = 1;
        let store = Store::open_with(options).await.expect("opens");
        sqlx::query("CREATE TABLE filler (x BLOB)")
            .execute(
                store
                    .read_connection()
                    .await
                    .expect("a connection")
                    .connection(),
            )
            .await
            .expect("a table to fill");
        let mut tx = store.begin_write().await.expect("write tx");
        sqlx::raw_sql("PRAGMA max_page_count = 1;")
            .execute(tx.connection())
            .await
            .expect("limit the file to its current size");
        let mut full = None;
        for _ in 0..100 {
            if let Err(error) = sqlx::query("INSERT INTO filler VALUES (zeroblob(100000))")
                .execute(tx.connection())
                .await
            {
                full = Some(error);
                break;
            }
        }
        let full = full.expect("the disk fills up");
        assert!(full.to_string().contains("full"), "{full}");
        drop(tx);

        // The disk has room again; the next writer must not find the store stuck.
        let mut tx = store
            .begin_write()
            .await
            .expect("a write transaction again");
        sqlx::raw_sql("PRAGMA max_page_count = 1073741823; INSERT INTO filler VALUES (1);")
            .execute(tx.connection())
            .await
            .expect("write");
        tx.commit().await.expect("commit");
    }

    #[tokio::test]
    async fn a_file_that_is_not_a_database_is_refused_at_once_and_kept() {
        let dir = tempfile::tempdir().expect("dir");
        for (name, content) in [
            ("one-byte.db", b"x".to_vec()),
            (
                "text.db",
                b"this is a text file, not a database\n".repeat(100),
            ),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, &content).expect("write");
            let started = std::time::Instant::now();
            let err = Store::open(&format!("sqlite://{}", path.display()))
                .await
                .unwrap_err();
            assert!(started.elapsed() < Duration::from_secs(2), "fails at once");
            let text = err.to_string();
            assert!(text.contains("is not a SQLite database"), "{text}");
            assert!(!text.contains('\n'), "one line: {text}");
            assert_eq!(
                std::fs::read(&path).expect("read"),
                content,
                "left as it was"
            );
        }
    }

    #[tokio::test]
    async fn a_read_only_database_is_refused_at_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("ro.db");
        let url = format!("sqlite://{}", path.display());
        Store::open(&url).await.expect("made").close().await;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).expect("chmod");
        // Root may write anyway; only where the permission bites is there a refusal.
        if std::fs::OpenOptions::new().append(true).open(&path).is_ok() {
            return;
        }
        let started = std::time::Instant::now();
        let err = Store::open(&url).await.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2), "fails at once");
        assert!(err.to_string().contains("cannot be written"), "{err}");
    }

    #[test]
    fn the_backend_is_chosen_from_the_url_scheme() {
        assert_eq!(Backend::from_url("sqlite://a.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::from_url("sqlite::memory:"), Some(Backend::Sqlite));
        assert_eq!(
            Backend::from_url("postgres://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(
            Backend::from_url("postgresql://u@h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::from_url("mysql://u@h/db"), None);
        assert_eq!(Backend::from_url("assent.db"), None);
    }

    #[tokio::test]
    async fn an_unknown_scheme_is_a_clear_error() {
        let err = Store::open("mysql://u@h/db").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot open database mysql://u@h/db: error with configuration: the URL scheme must be sqlite:, postgres: or postgresql:"
        );
    }

    #[tokio::test]
    async fn a_bad_url_is_a_clear_error() {
        let mut options = StoreOptions::new("postgres://nowhere.invalid/db");
        options.connect_timeout = Duration::from_secs(1);
        let err = Store::open_with(options).await.unwrap_err();
        assert!(
            err.to_string().starts_with(
                "could not connect to PostgreSQL at nowhere.invalid:5432 within 1 s: "
            ),
            "{err}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_server_is_given_up_on_in_time_without_the_password() {
        let mut options = StoreOptions::new("postgres://u:hunter2@127.0.0.1:1/x");
        options.connect_timeout = Duration::from_secs(1);
        let started = std::time::Instant::now();
        let err = Store::open_with(options).await.unwrap_err().to_string();
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        assert!(
            err.starts_with("could not connect to PostgreSQL at 127.0.0.1:1 within 1 s: "),
            "{err}"
        );
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn a_postgres_url_names_its_server_and_hides_its_password() {
        let server = |url: &str| postgres_server(url);
        assert_eq!(
            server("postgres://u:p@db:6543/x").as_deref(),
            Some("db:6543")
        );
        assert_eq!(
            server("postgresql://db/x?sslmode=require").as_deref(),
            Some("db:5432")
        );
        assert_eq!(
            server("postgres://u:p/@h@[::1]/x").as_deref(),
            Some("[::1]:5432")
        );
        assert_eq!(server("postgres:///x").as_deref(), Some("localhost:5432"));
        assert_eq!(server("sqlite://a.db"), None);
        assert_eq!(
            without_password("postgres://u:secret@db:5432/x"),
            "postgres://u:***@db:5432/x"
        );
        assert_eq!(without_password("postgres://u@db/x"), "postgres://u@db/x");
        assert_eq!(without_password("sqlite://a.db"), "sqlite://a.db");
    }
}
