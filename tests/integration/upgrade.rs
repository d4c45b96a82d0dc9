//! Upgrading a database written by the release before migration 0008 (engine tables
//! about a `task_id`, the journal's tables made by the engine's migration 0002): the
//! committed fixture `tests/fixtures/assent-0.1.0.db` opens on SQLite as it is, and on
//! PostgreSQL after the old migrations ran and every row of the fixture was copied in.
//! Every row of every table survives, the engine's rows now name a target of kind
//! `task` with the old task id, and the journal host's migration changes nothing. The
//! consent chain begins at the upgrade itself, so `audit verify` holds when it is the
//! first command run on the upgraded database.

use assent_store::{
    Backend, MIGRATIONS_TABLE, POSTGRES_MIGRATIONS, SQLITE_MIGRATIONS, Store, StoreError, agents,
    proof,
};
use assent_tests::{TestBackend, backends};
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Written by `tests/fixtures/make-assent-0.1.0-db.sh` with the CLI of commit ced3f05.
const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/assent-0.1.0.db");

/// The engine tables whose `task_id` migration 0008 renamed to `target_id`.
const TARGET_TABLES: &[&str] = &[
    "change_sets",
    "decisions",
    "audit_records",
    "applied_operations",
    "sync_conflicts",
];

/// The journal's tables: made by engine migration 0002 in the old release, by the
/// journal host's own migration since.
const JOURNAL_TABLES: &[&str] = &[
    "tasks",
    "task_labels",
    "checklist_items",
    "agent_reports",
    "agent_observations",
];

/// Tables the fixture must have rows in, or the test would prove nothing about them.
const NOT_EMPTY: &[&str] = &[
    "agents",
    "tasks",
    "task_labels",
    "checklist_items",
    "agent_reports",
    "agent_observations",
    "change_sets",
    "change_items",
    "decisions",
    "audit_records",
    "applied_operations",
    "outbox",
    "change_feed",
    "sync_conflicts",
    "sync_imports",
    "sync_applied_batches",
    "sync_peers",
    "sync_device",
    "api_tokens",
    "webhook_subscriptions",
    "webhook_events",
    "webhook_deliveries",
];

/// One table's columns and its rows, every value as text (`CAST(… AS TEXT)`, the same
/// spelling on both backends), sorted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Table {
    columns: Vec<String>,
    rows: Vec<Vec<Option<String>>>,
}

/// Every table but the migrators' own and SQLite's internal ones.
type Snapshot = BTreeMap<String, Table>;

async fn connect(url: &str) -> AnyPool {
    sqlx::any::install_default_drivers();
    AnyPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

/// The tables of the database, without SQLite's and the migrators' (`_sqlx_…`,
/// `_assent_…`), which are checked by version instead.
async fn tables(pool: &AnyPool, backend: Backend) -> BTreeSet<String> {
    let sql = match backend {
        Backend::Sqlite => "SELECT name FROM sqlite_master WHERE type = 'table'",
        Backend::Postgres => {
            "SELECT CAST(table_name AS TEXT) FROM information_schema.tables
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        }
    };
    let names: Vec<String> = sqlx::query_scalar(sql).fetch_all(pool).await.unwrap();
    names
        .into_iter()
        .filter(|name| !name.starts_with("sqlite_") && !name.starts_with('_'))
        .collect()
}

/// A table's columns in their order (SQLite's implicit `rowid` is none of them).
async fn columns(pool: &AnyPool, backend: Backend, table: &str) -> Vec<String> {
    let sql = match backend {
        Backend::Sqlite => "SELECT name FROM pragma_table_info($1) ORDER BY cid",
        Backend::Postgres => {
            "SELECT CAST(column_name AS TEXT) FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position"
        }
    };
    sqlx::query_scalar(sql)
        .bind(table)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// The rows of `table`, only `columns`, as text, sorted.
async fn dump(pool: &AnyPool, table: &str, columns: &[String]) -> Vec<Vec<Option<String>>> {
    let select = columns
        .iter()
        .map(|c| format!("CAST({c} AS TEXT)"))
        .collect::<Vec<_>>()
        .join(", ");
    let rows = sqlx::query(AssertSqlSafe(format!("SELECT {select} FROM {table}")))
        .fetch_all(pool)
        .await
        .unwrap_or_else(|e| panic!("cannot read {columns:?} of {table}: {e}"));
    let mut rows: Vec<Vec<Option<String>>> = rows
        .iter()
        .map(|row| {
            (0..columns.len())
                .map(|i| row.try_get::<Option<String>, _>(i).unwrap())
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

async fn snapshot(pool: &AnyPool, backend: Backend) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for table in tables(pool, backend).await {
        let columns = columns(pool, backend, &table).await;
        let rows = dump(pool, &table, &columns).await;
        snapshot.insert(table, Table { columns, rows });
    }
    snapshot
}

/// The same tables and columns as `like`, read from `pool`.
async fn snapshot_like(pool: &AnyPool, like: &Snapshot) -> Snapshot {
    let mut snapshot = Snapshot::new();
    for (table, Table { columns, .. }) in like {
        let rows = dump(pool, table, columns).await;
        snapshot.insert(
            table.clone(),
            Table {
                columns: columns.clone(),
                rows,
            },
        );
    }
    snapshot
}

async fn versions(pool: &AnyPool, table: &str) -> Vec<i64> {
    sqlx::query_scalar(AssertSqlSafe(format!(
        "SELECT version FROM {table} ORDER BY version"
    )))
    .fetch_all(pool)
    .await
    .unwrap_or_else(|e| panic!("cannot read {table}: {e}"))
}

/// The fixture, copied into `dir` (the committed file is never opened), and a snapshot
/// of it read with plain sqlx.
async fn fixture_copy(dir: &Path) -> (String, Snapshot) {
    let path = dir.join("assent-0.1.0.db");
    std::fs::copy(FIXTURE, &path).unwrap();
    let url = format!("sqlite://{}", path.display());
    let pool = connect(&format!("{url}?mode=rw")).await;
    let before = snapshot(&pool, Backend::Sqlite).await;
    assert_eq!(
        versions(&pool, "_sqlx_migrations").await,
        (1..=7).collect::<Vec<_>>(),
        "the fixture is a database of the release before migration 0008"
    );
    pool.close().await;
    for table in NOT_EMPTY {
        assert!(
            !before[*table].rows.is_empty(),
            "the fixture has no row in {table}"
        );
    }
    for table in TARGET_TABLES {
        assert!(before[*table].columns.iter().any(|c| c == "task_id"));
    }
    (url, before)
}

/// What the upgrade must leave: every table of `before` with every row as it was, the
/// renamed column under its new name, and both migrators' records.
async fn assert_upgraded(pool: &AnyPool, backend: Backend, before: &Snapshot) {
    let after_tables = tables(pool, backend).await;
    for (table, old) in before {
        assert!(after_tables.contains(table), "{table} is gone");
        let renamed: Vec<String> = old
            .columns
            .iter()
            .map(|c| {
                if c == "task_id" && TARGET_TABLES.contains(&table.as_str()) {
                    "target_id".to_owned()
                } else {
                    c.clone()
                }
            })
            .collect();
        assert_eq!(
            dump(pool, table, &renamed).await,
            old.rows,
            "the rows of {table} changed"
        );
    }
    for table in TARGET_TABLES {
        let now = columns(pool, backend, table).await;
        assert!(!now.iter().any(|c| c == "task_id"), "{table}: {now:?}");
        let tasks: i64 = sqlx::query_scalar(AssertSqlSafe(format!(
            "SELECT COUNT(*) FROM {table} WHERE target_kind = 'task'"
        )))
        .fetch_one(pool)
        .await
        .unwrap();
        assert_eq!(
            usize::try_from(tasks).unwrap(),
            before[*table].rows.len(),
            "every row of {table} is about a task"
        );
    }
    assert_eq!(versions(pool, MIGRATIONS_TABLE).await, engine_migrations());
    assert!(
        !has_table(pool, backend, "_sqlx_migrations").await,
        "the engine's rows moved out of sqlx's default table, which held nothing else"
    );
    assert_eq!(versions(pool, "_assent_journal_migrations").await, vec![1]);
}

async fn has_table(pool: &AnyPool, backend: Backend, name: &str) -> bool {
    let sql = match backend {
        Backend::Sqlite => "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = $1",
        Backend::Postgres => {
            "SELECT COUNT(*) FROM pg_tables WHERE schemaname = current_schema() AND tablename = $1"
        }
    };
    let count: i64 = sqlx::query_scalar(sql)
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap();
    count > 0
}

/// The newest engine migration shipped (0008 when this test was written): every one of
/// them runs on the upgraded database, 0002 included since the old release ran it.
fn newest_engine_migration() -> i64 {
    let newest = SQLITE_MIGRATIONS.iter().map(|m| m.version).max().unwrap();
    assert_eq!(
        POSTGRES_MIGRATIONS.iter().map(|m| m.version).max(),
        Some(newest)
    );
    assert!(newest >= 8);
    newest
}

/// The versions of every engine migration shipped, in order (numbers are handed out
/// ahead of merging, so a branch may lack one: compared with the files, not a range).
fn engine_migrations() -> Vec<i64> {
    let shipped: Vec<i64> = SQLITE_MIGRATIONS.iter().map(|m| m.version).collect();
    assert_eq!(shipped.last(), Some(&newest_engine_migration()));
    shipped
}

/// Opens the store (engine migrations) and runs the journal host's migrations.
async fn open_as_the_journal_would(url: &str) -> Store {
    let store = Store::open(url).await.expect("the old database opens");
    store
        .migrate_host("journal", assent_journal_host::MIGRATIONS)
        .await
        .expect("the journal's migration runs");
    store
}

/// The PostgreSQL twin of the fixture: the old migrations (1 to 7), then every row of
/// every table of the fixture, copied column by column.
async fn postgres_twin(fixture_url: &str, pg_url: &str) {
    let pg = connect(pg_url).await;
    let old = Migrator::with_migrations(
        POSTGRES_MIGRATIONS
            .iter()
            .filter(|m| m.version <= 7)
            .cloned()
            .collect(),
    );
    old.run(&pg).await.expect("the old migrations run");
    let sqlite = connect(&format!("{fixture_url}?mode=ro")).await;
    let order = foreign_key_order(&sqlite).await;
    let pg_tables = tables(&pg, Backend::Postgres).await;
    assert_eq!(
        pg_tables,
        order.iter().cloned().collect::<BTreeSet<_>>(),
        "the old migrations made the same tables on both backends"
    );
    for table in &order {
        copy_table(&sqlite, &pg, table).await;
    }
    sqlite.close().await;
    pg.close().await;
}

/// The fixture's tables, each after the tables its foreign keys name.
async fn foreign_key_order(sqlite: &AnyPool) -> Vec<String> {
    let mut left: Vec<String> = tables(sqlite, Backend::Sqlite).await.into_iter().collect();
    let mut order = Vec::new();
    while !left.is_empty() {
        let mut next = Vec::new();
        for table in &left {
            let parents: Vec<String> =
                sqlx::query_scalar(r#"SELECT "table" FROM pragma_foreign_key_list($1)"#)
                    .bind(table.as_str())
                    .fetch_all(sqlite)
                    .await
                    .unwrap();
            if parents.iter().all(|p| p == table || order.contains(p)) {
                next.push(table.clone());
            }
        }
        assert!(!next.is_empty(), "foreign keys in a cycle among {left:?}");
        left.retain(|t| !next.contains(t));
        order.extend(next);
    }
    order
}

/// Copies every row of `table`: the columns by name, each bound as its PostgreSQL type
/// wants; identity values kept (and their sequences moved past them); the change feed's
/// triggers off meanwhile, since the feed's own rows are copied too.
async fn copy_table(sqlite: &AnyPool, pg: &AnyPool, table: &str) {
    let pg_columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT CAST(column_name AS TEXT), CAST(data_type AS TEXT), CAST(is_identity AS TEXT)
         FROM information_schema.columns
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(pg)
    .await
    .unwrap();
    let sqlite_columns = columns(sqlite, Backend::Sqlite, table).await;
    for column in &sqlite_columns {
        assert!(
            pg_columns.iter().any(|(name, ..)| name == column),
            "{table}.{column} has no PostgreSQL twin"
        );
    }
    // SQLite's implicit rowid is a column of its own on PostgreSQL (decisions, delegations).
    let copied: Vec<&(String, String, String)> = pg_columns
        .iter()
        .filter(|(name, ..)| name == "rowid" || sqlite_columns.contains(name))
        .collect();
    let names = copied
        .iter()
        .map(|(name, ..)| name.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let placeholders = (1..=copied.len())
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let identities: Vec<&str> = pg_columns
        .iter()
        .filter(|(_, _, identity)| identity == "YES")
        .map(|(name, ..)| name.as_str())
        .collect();
    let overriding = if identities.is_empty() {
        ""
    } else {
        "OVERRIDING SYSTEM VALUE"
    };
    let insert = format!("INSERT INTO {table} ({names}) {overriding} VALUES ({placeholders})");
    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER TABLE {table} DISABLE TRIGGER USER"
    )))
    .execute(pg)
    .await
    .unwrap();
    let rows = sqlx::query(AssertSqlSafe(format!("SELECT {names} FROM {table}")))
        .fetch_all(sqlite)
        .await
        .unwrap();
    for row in &rows {
        let mut query = sqlx::query(AssertSqlSafe(insert.clone()));
        for (i, (name, data_type, _)) in copied.iter().enumerate() {
            query = match data_type.as_str() {
                "bigint" | "integer" | "smallint" => {
                    query.bind(row.try_get::<Option<i64>, _>(i).unwrap())
                }
                "text" => query.bind(row.try_get::<Option<String>, _>(i).unwrap()),
                other => panic!("{table}.{name}: no copy for PostgreSQL type {other}"),
            };
        }
        query
            .execute(pg)
            .await
            .unwrap_or_else(|e| panic!("cannot copy a row of {table}: {e}"));
    }
    sqlx::raw_sql(AssertSqlSafe(format!(
        "ALTER TABLE {table} ENABLE TRIGGER USER"
    )))
    .execute(pg)
    .await
    .unwrap();
    for column in identities {
        sqlx::raw_sql(AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), COALESCE(MAX({column}), 0) + 1, false) FROM {table}"
        )))
        .execute(pg)
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn a_database_of_the_release_before_targets_upgrades_and_keeps_every_row() {
    for backend in backends() {
        let dir = tempfile::tempdir().unwrap();
        let (fixture_url, before) = fixture_copy(dir.path()).await;
        let (url, kind, _pg_dir) = match &backend {
            TestBackend::Sqlite => (fixture_url, Backend::Sqlite, None),
            TestBackend::Postgres(_) => {
                let (pg_url, pg_dir) = backend.fresh_database().await;
                postgres_twin(&fixture_url, &pg_url).await;
                let pg = connect(&pg_url).await;
                assert_eq!(
                    snapshot_like(&pg, &before).await,
                    before,
                    "the copy on PostgreSQL is the fixture"
                );
                pg.close().await;
                (pg_url, Backend::Postgres, Some(pg_dir))
            }
        };

        let store = open_as_the_journal_would(&url).await;
        assert_upgraded(&connect(&url).await, kind, &before).await;
        let upgraded = snapshot(&connect(&url).await, kind).await;
        for table in TARGET_TABLES {
            assert!(upgraded[*table].columns.iter().any(|c| c == "target_kind"));
        }
        store.close().await;

        // Opening again migrates nothing and changes nothing.
        let store = open_as_the_journal_would(&url).await;
        assert_upgraded(&connect(&url).await, kind, &before).await;
        assert_eq!(
            snapshot(&connect(&url).await, kind).await,
            upgraded,
            "a second open changed the database ({backend:?})"
        );
        // The consent chain begins at the upgrade itself (issue 52): the proof holds
        // when it is the first thing run on the upgraded database, before any write,
        // claims nothing earlier, and holds over what is written after it.
        let mut conn = store.read_connection().await.unwrap();
        let first = proof::verify(&mut conn, &proof::VerifyOptions::default())
            .await
            .unwrap();
        assert!(
            first.verified(),
            "{backend:?}: audit verify run first on the upgraded database: {:?}",
            first.violations
        );
        assert_eq!(
            first.effects_checked, 0,
            "nothing before the upgrade is claimed"
        );
        assert!(
            first.entries > 0,
            "{backend:?}: the chain began at the upgrade"
        );
        let policy = assent_tools::AgentPolicy::new(["work"]);
        agents::upsert(
            &mut conn,
            "after-upgrade",
            &policy,
            time::OffsetDateTime::now_utc(),
        )
        .await
        .unwrap();
        let report = proof::verify(&mut conn, &proof::VerifyOptions::default())
            .await
            .unwrap();
        assert!(report.verified(), "{backend:?}: {:?}", report.violations);
        assert_eq!(
            report.effects_checked, 0,
            "nothing before the upgrade is claimed"
        );
        let begins: String = sqlx::query_scalar("SELECT content FROM consent_chain WHERE seq = 1")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        assert!(begins.contains("\"reason\":\"upgrade\""), "{begins}");
        drop(conn);
        store.close().await;
    }
}

#[tokio::test]
async fn a_new_database_gets_the_journal_tables_from_the_journal_host_only() {
    for backend in backends() {
        let (url, _dir) = backend.fresh_database().await;
        let store = Store::open(&url).await.unwrap();
        let kind = store.backend();
        let engine_only = tables(&connect(&url).await, kind).await;
        assert!(engine_only.contains("change_sets"), "{engine_only:?}");
        for table in JOURNAL_TABLES {
            assert!(
                !engine_only.contains(*table),
                "the engine made {table} ({backend:?})"
            );
        }

        let refused = store
            .migrate_host("bad-name", assent_journal_host::MIGRATIONS)
            .await;
        assert!(
            matches!(&refused, Err(StoreError::InvalidHostName(name)) if name == "bad-name"),
            "{refused:?}"
        );
        assert_eq!(tables(&connect(&url).await, kind).await, engine_only);

        store
            .migrate_host("journal", assent_journal_host::MIGRATIONS)
            .await
            .unwrap();
        let with_journal = tables(&connect(&url).await, kind).await;
        for table in JOURNAL_TABLES {
            assert!(with_journal.contains(*table), "no {table} ({backend:?})");
        }
        assert_eq!(
            versions(&connect(&url).await, "_assent_journal_migrations").await,
            vec![1]
        );
        assert!(
            !versions(&connect(&url).await, MIGRATIONS_TABLE)
                .await
                .contains(&2),
            "the engine ran the journal's old migration 0002"
        );
        store.close().await;
    }
}

#[tokio::test]
async fn a_database_of_a_newer_release_is_refused_and_left_alone() {
    let (url, _dir) = TestBackend::Sqlite.fresh_database().await;
    let store = Store::open(&url).await.unwrap();
    sqlx::query(
        "INSERT INTO _assent_migrations (version, description, success, checksum, execution_time)
         VALUES (9999, 'from the future', TRUE, X'00', 0)",
    )
    .execute(
        store
            .read_connection()
            .await
            .expect("a read connection")
            .connection(),
    )
    .await
    .unwrap();
    let before = snapshot(&connect(&url).await, Backend::Sqlite).await;
    store.close().await;

    let refused = Store::open(&url).await;
    assert!(
        matches!(
            &refused,
            Err(StoreError::NewerSchema {
                found: 9999,
                known
            }) if *known == newest_engine_migration()
        ),
        "{refused:?}"
    );
    let pool = connect(&format!("{url}?mode=rw")).await;
    assert_eq!(snapshot(&pool, Backend::Sqlite).await, before);
    assert_eq!(versions(&pool, MIGRATIONS_TABLE).await.last(), Some(&9999));
    pool.close().await;
}

/// A service's own `sqlx::migrate!` (sqlx's default `_sqlx_migrations`) and the
/// engine's migrations share one database without seeing each other's versions (issue
/// 54): the service migrates after the engine and before it, and a database where the
/// engine's rows were in sqlx's table beside the service's keeps the service's there.
#[tokio::test]
async fn a_services_own_migrations_and_the_engines_share_a_database() {
    use sqlx::migrate::{Migration, MigrationType};
    let service = |backend: Backend| {
        let sql = match backend {
            Backend::Sqlite => {
                "CREATE TABLE orders (id TEXT PRIMARY KEY, refunded INTEGER NOT NULL DEFAULT 0)"
            }
            Backend::Postgres => {
                "CREATE TABLE orders (id UUID PRIMARY KEY, refunded BOOLEAN NOT NULL DEFAULT FALSE)"
            }
        };
        Migrator::with_migrations(vec![Migration::new(
            1,
            "orders".into(),
            MigrationType::Simple,
            sqlx::SqlStr::from_static(sql),
            false,
        )])
    };
    for backend in backends() {
        let (url, _dir) = backend.fresh_database().await;
        let kind = Backend::from_url(&url).unwrap();
        // The engine first, then the service: the service's version 1 is not the engine's.
        let store = Store::open(&url).await.unwrap();
        let pool = connect(&url).await;
        service(kind)
            .run(&pool)
            .await
            .expect("the service migrates beside the engine");
        assert_eq!(versions(&pool, "_sqlx_migrations").await, vec![1]);
        assert_eq!(
            versions(&pool, MIGRATIONS_TABLE).await,
            engine_migrations_run()
        );
        store.close().await;
        // And again in either order: nothing to do, nothing refused.
        let store = Store::open(&url)
            .await
            .expect("the engine reopens beside the service");
        service(kind).run(&pool).await.expect("the service reruns");
        assert_eq!(versions(&pool, "_sqlx_migrations").await, vec![1]);
        store.close().await;

        // A database from before `_assent_migrations`, where a service had its rows in
        // sqlx's table too (a service that set `ignore_missing`): only the engine's move.
        let moved: Vec<i64> = versions(&pool, MIGRATIONS_TABLE).await;
        sqlx::query("ALTER TABLE _sqlx_migrations RENAME TO service_rows")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("ALTER TABLE _assent_migrations RENAME TO _sqlx_migrations")
            .execute(&pool)
            .await
            .unwrap();
        sqlx::query("INSERT INTO _sqlx_migrations SELECT version + 1000, description, installed_on, success, checksum, execution_time FROM service_rows")
            .execute(&pool)
            .await
            .unwrap();
        let store = Store::open(&url).await.expect("an old layout opens");
        assert_eq!(versions(&pool, MIGRATIONS_TABLE).await, moved);
        assert_eq!(versions(&pool, "_sqlx_migrations").await, vec![1001]);
        store.close().await;
        pool.close().await;
    }
}

/// The engine migrations a new database runs (every shipped one but 0002).
fn engine_migrations_run() -> Vec<i64> {
    engine_migrations()
        .into_iter()
        .filter(|v| *v != 2)
        .collect()
}
