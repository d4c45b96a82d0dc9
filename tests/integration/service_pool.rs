//! A service owns its database (issue 54): the store over the service's own native
//! pool, the engine's tables in a schema of their own, and every lock wait on
//! PostgreSQL bounded by the busy timeout.

use assent_store::{Backend, Store, StoreError, StoreOptions, agents};
use assent_tests::{TestBackend, backends};
use assent_tools::AgentPolicy;
use std::time::Duration;
use time::OffsetDateTime;

/// The server URL of the PostgreSQL backend, when the run has one.
fn postgres() -> Option<TestBackend> {
    backends()
        .into_iter()
        .find(|b| matches!(b, TestBackend::Postgres(_)))
}

/// A write and a read through the store, proving it works over whatever pool it has.
async fn write_and_read(store: &Store, agent: &str) {
    let now = OffsetDateTime::now_utc();
    let mut tx = store.begin_write().await.expect("a write transaction");
    agents::upsert(tx.connection(), agent, &AgentPolicy::new(["notes"]), now)
        .await
        .expect("a write");
    tx.commit().await.expect("commit");
    let mut conn = store.read_connection().await.expect("a read connection");
    let policy = agents::policy_at(&mut conn, agent, now)
        .await
        .expect("a read")
        .expect("the agent written");
    assert_eq!(policy.allowed_categories().collect::<Vec<_>>(), ["notes"]);
}

#[tokio::test]
async fn a_store_over_the_services_sqlite_pool_writes_and_reads() {
    let (url, _dir) = TestBackend::Sqlite.fresh_database().await;
    let pool = sqlx::SqlitePool::connect(&format!("{url}?mode=rwc"))
        .await
        .expect("the service's pool");
    let store = Store::from_pool(pool.clone(), StoreOptions::default())
        .await
        .expect("a store over the service's pool");
    assert_eq!(store.backend(), Backend::Sqlite);
    write_and_read(&store, "scribe").await;
    // The service's own statements on the same pool see the engine's tables.
    let agents: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM agents")
        .fetch_one(&pool)
        .await
        .expect("the service reads the engine's table");
    assert_eq!(agents, 1);
}

#[tokio::test]
async fn a_store_over_the_services_postgres_pool_keeps_its_tables_in_its_schema() {
    let Some(backend) = postgres() else { return };
    let (url, _dir) = backend.fresh_database().await;
    let pool = sqlx::PgPool::connect(&url)
        .await
        .expect("the service's pool");
    let mut options = StoreOptions::default();
    options.schema = Some("assent".into());
    let store = Store::from_pool(pool.clone(), options)
        .await
        .expect("a store over the service's pool");
    write_and_read(&store, "scribe").await;
    let schema: String = sqlx::query_scalar(
        "SELECT schemaname::text FROM pg_tables WHERE tablename = 'change_sets'",
    )
    .fetch_one(&pool)
    .await
    .expect("where the engine's tables are");
    assert_eq!(schema, "assent");
    let in_public: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        in_public, 0,
        "nothing of the engine's in the service's schema"
    );
    // Every connection goes back to the service with its own search path.
    for _ in 0..3 {
        write_and_read(&store, "again").await;
        let current: String = sqlx::query_scalar("SELECT current_schema()::text")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(current, "public");
    }
    // Reopened over the same pool: migrated already, nothing to do.
    let mut options = StoreOptions::default();
    options.schema = Some("assent".into());
    Store::from_pool(pool.clone(), options)
        .await
        .expect("reopens");
}

#[tokio::test]
async fn a_store_opened_with_a_schema_in_its_url_keeps_its_tables_there() {
    let Some(backend) = postgres() else { return };
    let (url, _dir) = backend.fresh_database().await;
    let store = Store::open(&format!("{url}?schema=assent_here"))
        .await
        .expect("opens with a schema");
    write_and_read(&store, "scribe").await;
    let mut conn = store.read_connection().await.unwrap();
    let schema: String =
        sqlx::query_scalar("SELECT schemaname::text FROM pg_tables WHERE tablename = 'agents'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert_eq!(schema, "assent_here");
    drop(conn);
    store.close().await;

    let refused = Store::open(&format!("{url}?schema=Robert'); DROP")).await;
    assert!(
        matches!(&refused, Err(StoreError::InvalidSchema(name)) if name.starts_with("Robert")),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_writer_held_up_on_postgres_is_busy_within_the_busy_timeout_never_hung() {
    let Some(backend) = postgres() else { return };
    let (url, _dir) = backend.fresh_database().await;
    let mut options = StoreOptions::new(url);
    options.busy_timeout = Duration::from_millis(300);
    let store = Store::open_with(options).await.expect("opens");
    let held = store.begin_write().await.expect("the service's own write");
    let started = std::time::Instant::now();
    let second = tokio::time::timeout(Duration::from_secs(20), store.begin_write())
        .await
        .expect("bounded by the busy timeout, not hung");
    assert!(matches!(&second, Err(e) if e.is_busy()), "{second:?}");
    assert!(started.elapsed() < Duration::from_secs(10));
    let target = assent_domain::Target::new("note", "n1");
    let on_target = tokio::time::timeout(Duration::from_secs(20), store.begin_write_on(&target))
        .await
        .expect("bounded");
    assert!(matches!(&on_target, Err(e) if e.is_busy()), "{on_target:?}");
    held.rollback().await.unwrap();
    store
        .begin_write()
        .await
        .expect("free again")
        .rollback()
        .await
        .unwrap();
}
