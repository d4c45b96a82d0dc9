//! Opening the database: connection options, durability settings, migrations.

use crate::StoreError;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// `sqlite://path/to/file.db` (created when missing) or `sqlite::memory:`.
    pub url: String,
    /// This device's id in vector clocks. Empty (the default): the id stored in the
    /// database, generated (a uuid) on its first open. A given id is stored on the
    /// first open and otherwise used as is (tests and benchmarks name their devices).
    pub host_id: String,
    /// How long a writer waits for the lock before failing.
    pub busy_timeout: Duration,
    /// Pool size.
    pub max_connections: u32,
    /// What a commit survives; [`Durability::Full`] unless a caller knowingly trades
    /// it for speed (the benchmarks measure both).
    pub durability: Durability,
}

/// What a committed transaction survives (SQLite's `synchronous` setting, in WAL mode).
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

    fn synchronous(self) -> SqliteSynchronous {
        match self {
            Self::Full => SqliteSynchronous::Full,
            Self::Normal => SqliteSynchronous::Normal,
        }
    }
}

impl StoreOptions {
    /// Defaults for `url`: the database's own host id, 10 s busy timeout, 8 connections,
    /// [`Durability::Full`].
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            host_id: String::new(),
            busy_timeout: Duration::from_secs(10),
            max_connections: 8,
            durability: Durability::Full,
        }
    }
}

/// The database of one Assent installation.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    host_id: String,
}

impl Store {
    /// Opens (creating and migrating when needed) the database at `url`.
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        Self::open_with(StoreOptions::new(url)).await
    }

    /// Opens with explicit options.
    #[tracing::instrument(skip_all, fields(url = %options.url))]
    pub async fn open_with(options: StoreOptions) -> Result<Self, StoreError> {
        let open_error = |source| StoreError::Open {
            url: options.url.clone(),
            source,
        };
        let connect = SqliteConnectOptions::from_str(&options.url)
            .map_err(open_error)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(options.durability.synchronous())
            .foreign_keys(true)
            .busy_timeout(options.busy_timeout);
        // Each connection to an in-memory database is a database of its own: one
        // connection, or the migrations and the data would land in different ones.
        let in_memory = options.url.contains(":memory:") || options.url.contains("mode=memory");
        let max_connections = if in_memory {
            1
        } else {
            options.max_connections.max(1)
        };
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .connect_with(connect)
            .await
            .map_err(open_error)?;
        MIGRATOR.run(&pool).await?;
        let host_id = device_host_id(&pool, options.host_id).await?;
        tracing::debug!(%host_id, "store open and migrated");
        Ok(Self { pool, host_id })
    }

    /// The connection pool, for reads.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// This device's id in vector clocks.
    pub fn host_id(&self) -> &str {
        &self.host_id
    }

    /// A write transaction holding SQLite's write lock from its first statement
    /// (`BEGIN IMMEDIATE`): whatever it reads stays true until it commits.
    pub async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The host id to use: `given`, or (when blank) the one stored in the database,
/// storing one on the first open. Two processes racing on a new database agree,
/// because only the first insert lands; later opens only read.
async fn device_host_id(pool: &SqlitePool, given: String) -> Result<String, StoreError> {
    let read =
        || sqlx::query_scalar::<_, String>("SELECT host_id FROM sync_device WHERE singleton = 1");
    let stored = match read().fetch_optional(pool).await? {
        Some(stored) => stored,
        None => {
            let candidate = if given.trim().is_empty() {
                uuid::Uuid::new_v4().to_string()
            } else {
                given.clone()
            };
            sqlx::query("INSERT INTO sync_device (singleton, host_id) VALUES (1, ?1) ON CONFLICT DO NOTHING")
                .bind(&candidate)
                .execute(pool)
                .await?;
            read().fetch_one(pool).await?
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
                .fetch_one(&mut *tx)
                .await
                .expect("query");
        assert_eq!(tables, 1);
    }

    #[tokio::test]
    async fn a_database_keeps_its_generated_host_id_across_opens() {
        let dir = tempfile::tempdir().expect("dir");
        let url = format!("sqlite://{}/a.db", dir.path().display());
        let first = Store::open(&url).await.expect("opens");
        let id = first.host_id().to_owned();
        first.close().await;
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id}");
        let again = Store::open(&url).await.expect("reopens");
        assert_eq!(again.host_id(), id);
        let other = Store::open(&format!("sqlite://{}/b.db", dir.path().display()))
            .await
            .expect("opens");
        assert_ne!(other.host_id(), id, "every database is a device of its own");
    }

    #[tokio::test]
    async fn a_bad_url_is_a_clear_error() {
        let err = Store::open("postgres://nowhere/db").await.unwrap_err();
        assert!(
            err.to_string()
                .starts_with("cannot open database postgres://nowhere/db"),
            "{err}"
        );
    }
}
