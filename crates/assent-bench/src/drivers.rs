//! What the SQLite driver costs per statement: the evidence for choosing between
//! sqlx's `Any` driver (what the store uses today), sqlx's native SQLite driver and a
//! second SQLite library (rusqlite) for the store's hot paths.
//!
//! One SQLite file, created and migrated by a `Store` and opened by every side with
//! the store's pragmas (WAL, `synchronous = NORMAL`, foreign keys, 10 s busy timeout),
//! and two statements, each through five drivers side by side:
//!
//! - **point read**: `SELECT … WHERE id = ?` on the primary key of a small table;
//! - **insert**: one `INSERT` inside a `BEGIN IMMEDIATE` transaction of many, at
//!   `synchronous = NORMAL`, so what is timed is CPU, not the disk.
//!
//! The drivers: the store's own `AnyPool` (one acquire per statement, its
//! `after_release` hook), one held `AnyConnection` (the `Any` conversions without the
//! pool), sqlx's native `SqlitePool` (`SqliteConnectOptions`, statement cache), one held
//! `SqliteConnection`, and rusqlite with a cached prepared statement on the calling
//! thread. Every sqlx connection runs its statements on its own worker thread; rusqlite
//! runs them on the caller's.
//!
//! Each statement is timed on its own (p50, p99); the rate per second is the
//! statements over the whole timed loop (for inserts, with their `BEGIN` and `COMMIT`).
//! The drivers take turns round by round so that all of them see the same load.

use crate::measure::{micros, percentile};
use anyhow::{Context, ensure};
use assent_store::{Durability, ReadConnection, Store, StoreOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Connection, SqliteConnection, SqlitePool};
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// How much each side does.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Counts {
    /// Rows of the table read by primary key.
    pub rows: usize,
    /// Rounds; in each, every driver takes its turn.
    pub rounds: usize,
    /// Point reads per driver and round.
    pub reads: usize,
    /// Insert transactions per driver and round.
    pub transactions: usize,
    pub inserts_per_transaction: usize,
}

impl Counts {
    pub const FULL: Self = Self {
        rows: 10_000,
        rounds: 5,
        reads: 2_000,
        transactions: 2,
        inserts_per_transaction: 1_000,
    };
    pub const QUICK: Self = Self {
        rows: 1_000,
        rounds: 1,
        reads: 100,
        transactions: 1,
        inserts_per_transaction: 100,
    };
}

/// The five ways to run a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Driver {
    AnyPool,
    AnyConnection,
    SqlitePool,
    SqliteConnection,
    Rusqlite,
}

impl Driver {
    const ALL: [Self; 5] = [
        Self::AnyPool,
        Self::AnyConnection,
        Self::SqlitePool,
        Self::SqliteConnection,
        Self::Rusqlite,
    ];

    /// The name in results.json.
    fn key(self) -> &'static str {
        match self {
            Self::AnyPool => "anyPool",
            Self::AnyConnection => "anyConnection",
            Self::SqlitePool => "sqlitePool",
            Self::SqliteConnection => "sqliteConnection",
            Self::Rusqlite => "rusqlite",
        }
    }
}

/// A driver's name in the table, from its name in results.json.
pub fn label(key: &str) -> &'static str {
    match key {
        "anyPool" => "sqlx AnyPool (the store today)",
        "anyConnection" => "sqlx AnyConnection, held",
        "sqlitePool" => "sqlx SqlitePool (native)",
        "sqliteConnection" => "sqlx SqliteConnection, held",
        "rusqlite" => "rusqlite, cached statement",
        _ => "?",
    }
}

/// One statement through one driver.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriverLatency {
    pub driver: &'static str,
    pub statements: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub per_second: f64,
}

impl DriverLatency {
    fn of(driver: Driver, samples: &[Duration], total: Duration) -> Self {
        Self {
            driver: driver.key(),
            statements: samples.len(),
            p50_us: micros(percentile(samples, 50.0)),
            p99_us: micros(percentile(samples, 99.0)),
            per_second: samples.len() as f64 / total.as_secs_f64().max(f64::MIN_POSITIVE),
        }
    }
}

/// The report's `drivers` section.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DriversResult {
    pub counts: Counts,
    /// Read back from the native connection: the pragmas every side runs with.
    pub journal_mode: String,
    pub synchronous: String,
    pub point_read: Vec<DriverLatency>,
    pub insert_in_transaction: Vec<DriverLatency>,
}

impl DriversResult {
    /// The figures of `driver` in `rows`.
    pub fn of<'a>(rows: &'a [DriverLatency], driver: &str) -> Option<&'a DriverLatency> {
        rows.iter().find(|r| r.driver == driver)
    }
}

const CREATE: &str = "CREATE TABLE bench_points (id INTEGER PRIMARY KEY, name TEXT NOT NULL, payload TEXT NOT NULL);
CREATE TABLE bench_inserts (id INTEGER PRIMARY KEY, driver TEXT NOT NULL, seq INTEGER NOT NULL, payload TEXT NOT NULL);";
const FILL: &str = "INSERT INTO bench_points (id, name, payload) VALUES (?1, ?2, ?3)";
const READ: &str = "SELECT id, name, payload FROM bench_points WHERE id = ?";
const INSERT: &str = "INSERT INTO bench_inserts (driver, seq, payload) VALUES (?, ?, ?)";
const BEGIN: &str = "BEGIN IMMEDIATE";

/// A row's payload: about the size of a change item's arguments.
fn payload(n: i64) -> String {
    format!(
        r#"{{"title":"checklist item {n}","note":"a line of text that makes the row about as long as a change item's arguments","tags":["bench","driver"]}}"#
    )
}

/// The five handles on one database.
struct Sides {
    /// The store, for the pool as it configures it: a read (or, here only, the bench's
    /// own inserts) takes one of its connections per transaction.
    store: Store,
    any_conn: ReadConnection,
    sqlite_pool: SqlitePool,
    sqlite_conn: SqliteConnection,
    raw: rusqlite::Connection,
    /// The next `seq` of an insert (one sequence for all).
    seq: i64,
}

impl Sides {
    async fn open(path: &Path, rows: usize) -> anyhow::Result<Self> {
        let url = format!("sqlite://{}", path.display());
        let store = Store::open_with({
            let mut options = StoreOptions::new(url.clone());
            options.durability = Durability::Normal;
            options
        })
        .await?;
        let raw = rusqlite::Connection::open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        raw.execute_batch(&format!(
            "PRAGMA busy_timeout = 10000; PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
            Durability::Normal.as_str()
        ))?;
        raw.set_prepared_statement_cache_capacity(32);
        raw.execute_batch(CREATE)?;
        raw.execute_batch(BEGIN)?;
        {
            let mut fill = raw.prepare(FILL)?;
            for id in 1..=rows as i64 {
                fill.execute(rusqlite::params![id, format!("point {id}"), payload(id)])?;
            }
        }
        raw.execute_batch("COMMIT")?;
        // sqlx's native driver, configured as `open_sqlite` configures the store's
        // connections (100 cached statements is sqlx's default, stated here).
        let options = SqliteConnectOptions::from_str(&url)?
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .statement_cache_capacity(100);
        let sqlite_pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options.clone())
            .await?;
        let sqlite_conn = options.connect().await?;
        let any_conn = store.read_connection().await?;
        Ok(Self {
            store,
            any_conn,
            sqlite_pool,
            sqlite_conn,
            raw,
            seq: 0,
        })
    }

    async fn read(&mut self, driver: Driver, id: i64) -> anyhow::Result<()> {
        let read = || sqlx::query_as::<_, (i64, String, String)>(READ).bind(id);
        let row = match driver {
            Driver::AnyPool => {
                read()
                    .fetch_one(self.store.read_connection().await?.connection())
                    .await?
            }
            Driver::AnyConnection => read().fetch_one(&mut *self.any_conn).await?,
            Driver::SqlitePool => {
                sqlx::query_as::<_, (i64, String, String)>(READ)
                    .bind(id)
                    .fetch_one(&self.sqlite_pool)
                    .await?
            }
            Driver::SqliteConnection => {
                sqlx::query_as::<_, (i64, String, String)>(READ)
                    .bind(id)
                    .fetch_one(&mut self.sqlite_conn)
                    .await?
            }
            Driver::Rusqlite => self
                .raw
                .prepare_cached(READ)?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?,
        };
        ensure!(row.0 == id, "{driver:?} read row {} for {id}", row.0);
        std::hint::black_box(row);
        Ok(())
    }

    /// One transaction of `count` inserts; each insert's time goes to `samples`.
    async fn insert(
        &mut self,
        driver: Driver,
        count: usize,
        samples: &mut Vec<Duration>,
    ) -> anyhow::Result<()> {
        let first = self.seq;
        self.seq += count as i64;
        let rows = (first..self.seq).map(|seq| (seq, payload(seq)));
        let key = driver.key();
        macro_rules! sqlx_inserts {
            ($tx:expr) => {{
                let mut tx = $tx;
                for (seq, payload) in rows {
                    let start = Instant::now();
                    sqlx::query(INSERT)
                        .bind(key)
                        .bind(seq)
                        .bind(payload)
                        .execute(&mut *tx)
                        .await?;
                    samples.push(start.elapsed());
                }
                tx.commit().await?;
            }};
        }
        // The store's connection type runs no transaction of its own outside the
        // store: the bench sends `BEGIN` and `COMMIT` itself, as statements.
        macro_rules! store_inserts {
            ($conn:expr) => {{
                let conn = $conn;
                sqlx::query(BEGIN).execute(&mut *conn).await?;
                for (seq, payload) in rows {
                    let start = Instant::now();
                    sqlx::query(INSERT)
                        .bind(key)
                        .bind(seq)
                        .bind(payload)
                        .execute(&mut *conn)
                        .await?;
                    samples.push(start.elapsed());
                }
                sqlx::query("COMMIT").execute(&mut *conn).await?;
            }};
        }
        match driver {
            Driver::AnyPool => {
                // The bench's table, outside the engine: no writer to queue on.
                let mut conn = self.store.read_connection().await?;
                store_inserts!(conn.connection())
            }
            Driver::AnyConnection => store_inserts!(self.any_conn.connection()),
            Driver::SqlitePool => sqlx_inserts!(self.sqlite_pool.begin_with(BEGIN).await?),
            Driver::SqliteConnection => {
                sqlx_inserts!(self.sqlite_conn.begin_with(BEGIN).await?)
            }
            Driver::Rusqlite => {
                self.raw.execute_batch(BEGIN)?;
                let mut insert = self.raw.prepare_cached(INSERT)?;
                for (seq, payload) in rows {
                    let start = Instant::now();
                    insert.execute(rusqlite::params![key, seq, payload])?;
                    samples.push(start.elapsed());
                }
                drop(insert);
                self.raw.execute_batch("COMMIT")?;
            }
        }
        Ok(())
    }
}

/// A deterministic walk over the table's ids (a linear congruential generator).
struct Ids(u64);

impl Ids {
    fn next(&mut self, rows: usize) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % rows.max(1) as u64) as i64 + 1
    }
}

/// Both statements through every driver, on a fresh database in a temporary directory.
pub async fn measure(counts: Counts) -> anyhow::Result<DriversResult> {
    let dir = tempfile::tempdir().context("temporary directory")?;
    let mut sides = Sides::open(&dir.path().join("drivers.db"), counts.rows).await?;
    let (journal_mode, synchronous): (String, i64) = (
        sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut sides.sqlite_conn)
            .await?,
        sqlx::query_scalar("PRAGMA synchronous")
            .fetch_one(&mut sides.sqlite_conn)
            .await?,
    );
    let n = Driver::ALL.len();
    let mut reads: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut read_totals = vec![Duration::ZERO; n];
    let mut inserts: Vec<Vec<Duration>> = vec![Vec::new(); n];
    let mut insert_totals = vec![Duration::ZERO; n];
    // Untimed: every side's statements prepared, its pages cached.
    for driver in Driver::ALL {
        let mut ids = Ids(7);
        for _ in 0..counts.reads.div_ceil(10) {
            sides.read(driver, ids.next(counts.rows)).await?;
        }
        sides
            .insert(
                driver,
                counts.inserts_per_transaction / 10 + 1,
                &mut Vec::new(),
            )
            .await?;
    }
    for round in 0..counts.rounds {
        for (index, driver) in Driver::ALL.into_iter().enumerate() {
            // The same ids for every driver in a round.
            let mut ids = Ids(round as u64);
            let start = Instant::now();
            for _ in 0..counts.reads {
                let id = ids.next(counts.rows);
                let one = Instant::now();
                sides.read(driver, id).await?;
                reads[index].push(one.elapsed());
            }
            read_totals[index] += start.elapsed();
            let start = Instant::now();
            for _ in 0..counts.transactions {
                sides
                    .insert(driver, counts.inserts_per_transaction, &mut inserts[index])
                    .await?;
            }
            insert_totals[index] += start.elapsed();
        }
    }
    let expected = (counts.transactions * counts.inserts_per_transaction * counts.rounds
        + (counts.inserts_per_transaction / 10 + 1))
        * n;
    let written: i64 = sqlx::query_scalar("SELECT count(*) FROM bench_inserts")
        .fetch_one(&mut sides.sqlite_conn)
        .await?;
    ensure!(
        written as usize == expected,
        "the inserts wrote {written} rows, not {expected}"
    );
    let rows = |samples: &[Vec<Duration>], totals: &[Duration]| {
        Driver::ALL
            .into_iter()
            .enumerate()
            .map(|(i, d)| DriverLatency::of(d, &samples[i], totals[i]))
            .collect()
    };
    Ok(DriversResult {
        counts,
        journal_mode: journal_mode.to_uppercase(),
        synchronous: match synchronous {
            0 => "OFF".to_owned(),
            1 => "NORMAL".to_owned(),
            2 => "FULL".to_owned(),
            3 => "EXTRA".to_owned(),
            other => other.to_string(),
        },
        point_read: rows(&reads, &read_totals),
        insert_in_transaction: rows(&inserts, &insert_totals),
    })
}
