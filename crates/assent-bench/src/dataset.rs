//! The large data set: change sets and decisions in the real schema (the migrations,
//! applied by `Store::open`), generated in batched transactions with a progress bar and
//! cached under `target/bench/data/`, keyed by the migrations' text, the generator's
//! version and the scale, so a changed schema or generator rebuilds it.
//!
//! The history grows in stages (10 %, 50 %, 100 %); a copy of the database is kept at
//! every stage, so the queries can be measured as the history grows.
//!
//! Shape: every change set has 10 items and 10 decisions; 100 sets per task, from 20
//! agents in turn; every 50th set is still open (5 items confirmed, 5 deferred), the
//! others are resolved (every 7th decision a rejection with a reason).

use anyhow::Context;
use assent_store::{Durability, Store, StoreOptions, timefmt};
use indicatif::{ProgressBar, ProgressStyle};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;
use time::macros::datetime;
use uuid::Uuid;

/// Bump when the generated data changes shape.
const GENERATOR_VERSION: u32 = 1;
/// Items, and decisions, per change set.
pub const ITEMS_PER_SET: usize = 10;
const SETS_PER_TASK: usize = 100;
pub const AGENTS: usize = 20;
const OPEN_EVERY: usize = 50;
/// Sets per write transaction.
const SETS_PER_BATCH: usize = 500;
/// Rows per multi-row `INSERT` (13 columns × 50 stays far below SQLite's bind limit).
const ROWS_PER_INSERT: usize = 50;
/// The history stages, in percent of the full data set.
pub const STAGES: [usize; 3] = [10, 50, 100];
const START: OffsetDateTime = datetime!(2025-01-01 00:00 UTC);

/// The data set's size.
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Scale {
    pub change_sets: usize,
    pub decisions: usize,
}

impl Scale {
    pub const fn new(change_sets: usize) -> Self {
        Self {
            change_sets,
            decisions: change_sets * ITEMS_PER_SET,
        }
    }

    /// The first `percent` of the data set.
    pub fn stage(self, percent: usize) -> Self {
        Self::new(self.change_sets * percent / 100)
    }

    pub fn tasks(self) -> usize {
        self.change_sets.div_ceil(SETS_PER_TASK)
    }
}

pub fn agent_id(n: usize) -> String {
    format!("agent-{n:02}")
}

pub fn task_id(n: usize) -> String {
    format!("task-{n:06}")
}

/// The databases of every stage, generated now or found in the cache.
#[derive(Debug)]
pub struct Dataset {
    pub stages: Vec<(usize, PathBuf)>,
    pub generated: bool,
}

/// The cached data set of `scale` under `dir`, generated when missing or stale.
pub async fn ensure(dir: &Path, scale: Scale, migrations: &Path) -> anyhow::Result<Dataset> {
    let key = cache_key(scale, migrations)?;
    let dir = dir.join(format!("{}-sets-{key:016x}", scale.change_sets));
    let stages: Vec<(usize, PathBuf)> = STAGES
        .iter()
        .map(|&p| (p, dir.join(format!("stage-{p}.db"))))
        .collect();
    let complete = dir.join("complete");
    if complete.exists() {
        return Ok(Dataset {
            stages,
            generated: false,
        });
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    generate(&dir, scale, &stages).await?;
    std::fs::write(&complete, format!("generator {GENERATOR_VERSION}\n"))?;
    Ok(Dataset {
        stages,
        generated: true,
    })
}

/// A hash of everything the data depends on; the cache is valid only for it.
fn cache_key(scale: Scale, migrations: &Path) -> anyhow::Result<u64> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(migrations)
        .with_context(|| format!("reading {}", migrations.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "sql"))
        .collect();
    files.sort();
    let mut hasher = DefaultHasher::new();
    GENERATOR_VERSION.hash(&mut hasher);
    scale.change_sets.hash(&mut hasher);
    for file in files {
        std::fs::read(&file)
            .with_context(|| format!("reading {}", file.display()))?
            .hash(&mut hasher);
    }
    Ok(hasher.finish())
}

async fn generate(dir: &Path, scale: Scale, stages: &[(usize, PathBuf)]) -> anyhow::Result<()> {
    let work = dir.join("generating.db");
    let store = Store::open_with({
        let mut options = StoreOptions::new(format!("sqlite://{}", work.display()));
        // A lost generation is regenerated: no need to sync every batch.
        options.durability = Durability::Normal;
        options.max_connections = 1;
        options
    })
    .await?;
    let progress = ProgressBar::new(scale.change_sets as u64).with_style(
        ProgressStyle::with_template(
            "generating {pos}/{len} change sets ({per_sec}, {eta} left) {wide_bar}",
        )
        .context("progress template")?,
    );
    let mut done = 0;
    for &(percent, ref path) in stages {
        let until = scale.stage(percent).change_sets;
        while done < until {
            let end = (done + SETS_PER_BATCH).min(until);
            insert_batch(&store, done..end).await?;
            progress.set_position(end as u64);
            done = end;
        }
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(store.read_connection().await?.connection())
            .await?;
        std::fs::copy(&work, path).with_context(|| format!("copying to {}", path.display()))?;
    }
    progress.finish_and_clear();
    store.close().await;
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", work.display()));
        if file.exists() {
            std::fs::remove_file(&file)?;
        }
    }
    Ok(())
}

fn set_id(n: usize) -> String {
    Uuid::from_u128(n as u128).to_string()
}

/// Sets `range`, their items and decisions, in one transaction.
async fn insert_batch(store: &Store, range: std::ops::Range<usize>) -> anyhow::Result<()> {
    let mut tx = store.begin_write().await?;
    let set_rows: Vec<usize> = range.clone().collect();
    for chunk in set_rows.chunks(ROWS_PER_INSERT) {
        let sql = values_sql(
            "INSERT INTO change_sets (id, agent_id, target_kind, target_id, thread_id, run_key, status, created_at, resolved_at)",
            9,
            chunk.len(),
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for &n in chunk {
            let created = timefmt::format(START + time::Duration::minutes(n as i64));
            let open = n.is_multiple_of(OPEN_EVERY);
            query = query
                .bind(set_id(n))
                .bind(agent_id(n % AGENTS))
                .bind("task")
                .bind(task_id(n / SETS_PER_TASK))
                .bind(format!("thread-{n}"))
                .bind(format!("run-{n}"))
                .bind(if open {
                    "partiallyResolved"
                } else {
                    "resolved"
                })
                .bind(created.clone())
                .bind((!open).then_some(created));
        }
        query.execute(tx.connection()).await?;
    }
    let items: Vec<(usize, usize)> = range
        .flat_map(|n| (0..ITEMS_PER_SET).map(move |i| (n, i)))
        .collect();
    for chunk in items.chunks(ROWS_PER_INSERT) {
        let sql = values_sql(
            "INSERT INTO change_items (change_set_id, item_index, tool_name, args, human_summary, status)",
            6,
            chunk.len(),
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for &(n, i) in chunk {
            let row = Row::new(n, i);
            query = query
                .bind(set_id(n))
                .bind(i as i64)
                .bind("add_checklist_item")
                .bind(row.args())
                .bind(row.summary())
                .bind(row.item_status());
        }
        query.execute(tx.connection()).await?;
    }
    for chunk in items.chunks(ROWS_PER_INSERT) {
        let sql = values_sql(
            "INSERT INTO decisions (id, change_set_id, item_index, agent_id, target_kind, target_id, tool_name, verdict, reason,
                                    human_summary, args, created_at)",
            12,
            chunk.len(),
        );
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
        for &(n, i) in chunk {
            let row = Row::new(n, i);
            let created =
                START + time::Duration::minutes(n as i64) + time::Duration::seconds(i as i64 + 1);
            query = query
                .bind(Uuid::from_u128(((n as u128) << 8) | i as u128 | (1 << 100)).to_string())
                .bind(set_id(n))
                .bind(i as i64)
                .bind(agent_id(n % AGENTS))
                .bind("task")
                .bind(task_id(n / SETS_PER_TASK))
                .bind("add_checklist_item")
                .bind(row.verdict())
                .bind((row.verdict() == "rejected").then_some("Not needed for this release"))
                .bind(row.summary())
                .bind(row.args())
                .bind(timefmt::format(created));
        }
        query.execute(tx.connection()).await?;
    }
    tx.commit().await?;
    Ok(())
}

/// `INSERT … VALUES (?, …), (?, …), …` for `rows` rows of `columns` values.
fn values_sql(insert: &str, columns: usize, rows: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    format!("{insert} VALUES {}", vec![row; rows].join(", "))
}

/// Item `i` of set `n`: what it proposed and what became of it.
struct Row {
    n: usize,
    i: usize,
}

impl Row {
    fn new(n: usize, i: usize) -> Self {
        Self { n, i }
    }

    fn open(&self) -> bool {
        self.n.is_multiple_of(OPEN_EVERY)
    }

    fn args(&self) -> String {
        format!(r#"{{"title":"Step {} of set {}"}}"#, self.i, self.n)
    }

    fn summary(&self) -> String {
        format!("Add checklist item \"Step {} of set {}\"", self.i, self.n)
    }

    fn verdict(&self) -> &'static str {
        if self.open() && self.i >= ITEMS_PER_SET / 2 {
            "deferred"
        } else if (self.n * ITEMS_PER_SET + self.i).is_multiple_of(7) {
            "rejected"
        } else {
            "confirmed"
        }
    }

    fn item_status(&self) -> &'static str {
        self.verdict()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn migrations() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations/sqlite")
    }

    async fn count(path: &Path, table: &'static str) -> i64 {
        let store = Store::open(&format!("sqlite://{}", path.display()))
            .await
            .expect("stage opens");
        let count =
            sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                .fetch_one(
                    store
                        .read_connection()
                        .await
                        .expect("a read connection")
                        .connection(),
                )
                .await
                .expect("count");
        store.close().await;
        count
    }

    #[tokio::test]
    async fn every_stage_holds_its_share_and_a_second_run_reuses_the_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let scale = Scale::new(200);
        let first = ensure(dir.path(), scale, &migrations())
            .await
            .expect("generated");
        assert!(first.generated);
        for (percent, path) in &first.stages {
            let stage = scale.stage(*percent);
            assert_eq!(
                count(path, "change_sets").await,
                stage.change_sets as i64,
                "{percent} %"
            );
            assert_eq!(
                count(path, "decisions").await,
                stage.decisions as i64,
                "{percent} %"
            );
        }
        let second = ensure(dir.path(), scale, &migrations())
            .await
            .expect("cached");
        assert!(!second.generated);
        assert_eq!(second.stages, first.stages);
    }

    #[test]
    fn a_changed_migration_or_scale_is_another_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("0001_x.sql");
        std::fs::write(&file, "CREATE TABLE a (x);").expect("write");
        let key = cache_key(Scale::new(10), dir.path()).expect("key");
        assert_eq!(key, cache_key(Scale::new(10), dir.path()).expect("key"));
        assert_ne!(key, cache_key(Scale::new(20), dir.path()).expect("key"));
        std::fs::write(dir.path().join("0002_y.sql"), "CREATE INDEX i ON a (x);").expect("write");
        assert_ne!(key, cache_key(Scale::new(10), dir.path()).expect("key"));
    }
}
