//! The one error type of the store.

use uuid::Uuid;

/// A storage operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database URL could not be used.
    #[error("cannot open database {url}: {source}")]
    Open {
        /// The URL given.
        url: String,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// A PostgreSQL server could not be reached within the connect timeout. `server` is
    /// `host:port` only: the URL may hold a password.
    #[error(
        "could not connect to PostgreSQL at {server} within {}: {source}",
        seconds(*within)
    )]
    Unreachable {
        /// `host:port`.
        server: String,
        /// How long it was tried.
        within: std::time::Duration,
        /// The last failure.
        #[source]
        source: sqlx::Error,
    },
    /// Applying migrations failed.
    #[error("cannot migrate database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The database was migrated by a newer release of Assent.
    #[error(
        "the database has schema version {found}, newer than this release knows ({known}): use a newer assent"
    )]
    NewerSchema {
        /// The newest migration the database ran.
        found: i64,
        /// The newest this release has.
        known: i64,
    },
    /// A quorum or hold for an argument pattern: settings are looked up by tool name,
    /// so it would be kept and never apply.
    #[error(
        "a quorum or hold is set for a tool name or * pattern, not for an argument pattern ({0}): settings are kept per tool"
    )]
    ArgumentPatternSetting(String),
    /// A PostgreSQL schema name that is not a plain lowercase identifier.
    #[error(
        "schema {0:?} must be lowercase ASCII letters, digits and underscores (at most 63, not starting with a digit)"
    )]
    InvalidSchema(String),
    /// A host's name cannot name its migration table.
    #[error("host name {0:?} must be ASCII letters, digits and underscores")]
    InvalidHostName(String),
    /// A stored value could not be decoded (corrupt or written by a newer version).
    #[error("corrupt row in {table}: {reason}")]
    Corrupt {
        /// The table.
        table: &'static str,
        /// What could not be decoded.
        reason: String,
    },
    /// A token cannot be made as asked.
    #[error("{0}")]
    InvalidToken(String),
    /// No change set has this id.
    #[error("no change set {0}")]
    ChangeSetNotFound(Uuid),
    /// Text that is neither a change set's id nor 8 or more of its first hex digits.
    #[error("invalid change set id {text:?}: {reason}")]
    InvalidChangeSetId {
        /// The text given.
        text: String,
        /// Why it names no set.
        reason: String,
    },
    /// No change set's id starts with this prefix.
    #[error("no change set has an id starting with {0}")]
    NoChangeSetWithPrefix(String),
    /// More than one change set's id starts with this prefix.
    #[error("{matches} change sets have ids starting with {prefix}: give more of the id")]
    AmbiguousChangeSetId {
        /// The prefix, as matched.
        prefix: String,
        /// How many sets it matches.
        matches: i64,
    },
    /// A sync batch cannot be merged; nothing was written.
    #[error(transparent)]
    Sync(#[from] assent_sync::SyncError),
    /// A host failed to export or write one of its synced entities.
    #[error("host entity sync failed: {0}")]
    HostEntity(String),
    /// No write could start within the busy timeout: other writers of this process held
    /// the database all that time.
    #[error("no write could start within {}: other writers held the database", seconds(*.0))]
    WriterBusy(std::time::Duration),
    /// The commit shared by a group of writes failed: none of them was written.
    #[error("the commit shared with other writes failed, nothing of this write was kept: {0}")]
    GroupCommitFailed(String),
    /// A savepoint was dropped without release or rollback (an early return), so its
    /// transaction, holding its half-done writes, was not committed.
    #[error(
        "a savepoint was left without release or rollback, so its transaction was rolled back instead of committed"
    )]
    SavepointNotEnded,
    /// Any other database error.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A statement the store runs through SQLite's C API failed (the engine's own
    /// statements on SQLite; see the guide's performance chapter).
    #[error("SQLite error {code}: {message}")]
    Sqlite {
        /// SQLite's extended result code (`5` is `SQLITE_BUSY`).
        code: i32,
        /// SQLite's message.
        message: String,
    },
}

impl StoreError {
    /// Whether the write waited for the writer lock (or, on PostgreSQL, any lock) for
    /// the whole busy timeout: worth trying again later, nothing was written.
    pub fn is_busy(&self) -> bool {
        match self {
            Self::WriterBusy(_) => true,
            // A statement inside a transaction that waited out PostgreSQL's
            // `lock_timeout` (the busy timeout) on a row another writer holds.
            Self::Database(error) => is_lock_timeout(error),
            // The primary code of SQLITE_BUSY and its extended codes.
            Self::Sqlite { code, .. } => code & 0xff == 5,
            _ => false,
        }
    }

    pub(crate) fn corrupt(table: &'static str, reason: impl std::fmt::Display) -> Self {
        Self::Corrupt {
            table,
            reason: reason.to_string(),
        }
    }
}

/// A timeout as people write it: `10 s`, `1.5 s`.
fn seconds(span: std::time::Duration) -> String {
    if span.subsec_millis() == 0 {
        format!("{} s", span.as_secs())
    } else {
        format!("{:.1} s", span.as_secs_f64())
    }
}

/// Whether a PostgreSQL statement gave up waiting for a lock (`lock_timeout`,
/// SQLSTATE 55P03).
/// A rusqlite error as the store's (no `From`: rusqlite stays out of the public API).
#[cfg(feature = "sqlite")]
pub(crate) trait SqliteResult<T> {
    fn or_store(self) -> Result<T, StoreError>;
}

#[cfg(feature = "sqlite")]
impl<T> SqliteResult<T> for Result<T, rusqlite::Error> {
    fn or_store(self) -> Result<T, StoreError> {
        self.map_err(|error| {
            let code = match &error {
                rusqlite::Error::SqliteFailure(failure, _) => failure.extended_code,
                _ => 1,
            };
            StoreError::Sqlite {
                code,
                message: error.to_string(),
            }
        })
    }
}

pub(crate) fn is_lock_timeout(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(db) if db.code().as_deref() == Some("55P03"))
}
