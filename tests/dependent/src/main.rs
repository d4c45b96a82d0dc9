//! A service outside Assent's workspace: named scenarios, each run on a new SQLite file
//! and, when `ASSENT_TEST_POSTGRES_URL` names a server, on a new PostgreSQL database
//! there. `cargo run -- [NAME…]` runs the named scenarios (all without a name); the
//! first failure ends the run with exit status 1.
//!
//! A scenario is written only with what a dependent has: `assent::…` paths and its own
//! sqlx, tokio, serde_json and time. To add one, write `async fn name(url: &str)` (in a
//! module of its own when long) and list it in [`SCENARIOS`].

// A test runner reports to a person at a terminal: printing is its job.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::error::Error;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;

/// The facade's front page (`crates/assent/examples/service.rs`), the same file its
/// crate doc shows: compiled here as a dependent compiles it.
#[path = "../../../crates/assent/examples/service.rs"]
#[allow(
    dead_code,
    reason = "its `main` runs the example alone; scenarios call `service`"
)]
mod front_page;

type Outcome = Result<(), Box<dyn Error>>;
type Run = fn(String) -> Pin<Box<dyn Future<Output = Outcome>>>;

/// Every scenario: its name and what it runs on a database URL.
const SCENARIOS: &[(&str, Run)] = &[
    ("front_page", |url| {
        Box::pin(async move { front_page::service(&url).await })
    }),
    ("service_owns_its_database", |url| {
        Box::pin(async move { owned::service_owns_its_database(&url).await })
    }),
];

mod owned;

/// The server the PostgreSQL half runs on, as the workspace's tests name it.
pub(crate) const POSTGRES_URL_VAR: &str = "ASSENT_TEST_POSTGRES_URL";

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let asked: Vec<String> = std::env::args().skip(1).collect();
    if let Some(unknown) = asked
        .iter()
        .find(|name| !SCENARIOS.iter().any(|(known, _)| known == name))
    {
        eprintln!("unknown scenario `{unknown}`");
        return ExitCode::FAILURE;
    }
    let postgres = std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|url| !url.trim().is_empty());
    if postgres.is_none() {
        println!("PostgreSQL half skipped: {POSTGRES_URL_VAR} is not set");
    }
    for (name, run) in SCENARIOS {
        if !asked.is_empty() && !asked.iter().any(|asked| asked == name) {
            continue;
        }
        let sqlite = SqliteFile::new(name);
        if let Err(err) = run(sqlite.url()).await {
            eprintln!("scenario {name} failed on SQLite: {err}");
            return ExitCode::FAILURE;
        }
        println!("scenario {name}: SQLite ok");
        if let Some(server) = &postgres {
            let result = match fresh_postgres_database(server, name).await {
                Ok(url) => run(url).await,
                Err(err) => Err(err),
            };
            if let Err(err) = result {
                eprintln!("scenario {name} failed on PostgreSQL: {err}");
                return ExitCode::FAILURE;
            }
            println!("scenario {name}: PostgreSQL ok");
        }
    }
    ExitCode::SUCCESS
}

/// A new SQLite file in the temporary directory, deleted (with its WAL files) on drop.
struct SqliteFile(std::path::PathBuf);

impl SqliteFile {
    fn new(scenario: &str) -> Self {
        let name = format!("assent-dependent-{}-{scenario}.db", std::process::id());
        let file = Self(std::env::temp_dir().join(name));
        file.remove();
        file
    }

    fn url(&self) -> String {
        format!("sqlite://{}", self.0.display())
    }

    fn remove(&self) {
        for suffix in ["", "-wal", "-shm"] {
            // A file that is not there is what we want.
            let _ = std::fs::remove_file(format!("{}{suffix}", self.0.display()));
        }
    }
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Creates a database of its own for `scenario` on the server at `server_url` (with
/// sqlx's native PostgreSQL connection, as a service would) and returns its URL.
pub(crate) async fn fresh_postgres_database(
    server_url: &str,
    scenario: &str,
) -> Result<String, Box<dyn Error>> {
    use sqlx::Connection;
    let name = format!("assent_dependent_{}_{scenario}", std::process::id());
    let mut server = sqlx::PgConnection::connect(server_url).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}"
    )))
    .execute(&mut server)
    .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut server)
        .await?;
    server.close().await?;
    let (without_query, query) = server_url
        .split_once('?')
        .map_or((server_url, None), |(url, query)| (url, Some(query)));
    let base = without_query
        .rsplit_once('/')
        .filter(|(base, _)| base.contains("://"))
        .map_or(without_query, |(base, _)| base);
    Ok(match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    })
}
