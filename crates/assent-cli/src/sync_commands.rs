//! `assent sync export|import|host|peers` and `assent conflicts`: device sync through
//! files, for devices that never see each other; `assent sync --peer` (over HTTP, with a
//! peer's `assent serve`) lives in [`crate::peer_sync`].

use crate::CliError;
use crate::commands::{Ctx, Output};
use crate::render;
use assent_journal_host::TaskEntities;
use assent_store::StoreError;
use assent_store::sync::{self, ConflictRecord, ImportReport};
use assent_sync::SyncBatch;
use clap::{Args, Subcommand};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// The largest batch file `import` reads: as much as a peer's `POST /api/sync` takes.
const MAX_BATCH_BYTES: u64 = assent_server::DEFAULT_SYNC_BODY_LIMIT as u64;

/// `assent sync --peer URL [--token TOKEN]` or `assent sync <subcommand>`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, arg_required_else_help = true)]
pub struct SyncArgs {
    /// Sync through batch files instead, or show this device's sync identity.
    #[command(subcommand)]
    pub command: Option<SyncCommand>,
    /// A peer's `assent serve` (e.g. `http://127.0.0.1:7700`): send this device's batch,
    /// merge the peer's answer, both ways in one round trip. Plain HTTP only.
    #[arg(long, value_name = "URL")]
    pub peer: Option<String>,
    /// The peer's API token (the one its `assent serve` printed); never printed.
    #[arg(
        long,
        env = "ASSENT_PEER_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
}

/// `assent sync ...`.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Write everything this device syncs to FILE (`-` for stdout), for another
    /// device's `assent sync import`.
    Export(SyncFileArgs),
    /// Merge a batch written by another device's `assent sync export` (`-` for stdin).
    /// Importing the same batch again changes nothing.
    Import(SyncFileArgs),
    /// Print this device's host id (its name in vector clocks and conflicts).
    Host,
    /// The devices this one has merged batches from, with the last batch of each.
    Peers,
}

/// The batch file of `sync export` / `sync import`.
#[derive(Debug, Args)]
pub struct SyncFileArgs {
    /// The batch file; `-` for stdout (export) or stdin (import).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Runs `assent sync --peer ...` or `assent sync <subcommand>`.
pub async fn sync(ctx: &Ctx, args: SyncArgs) -> Result<Output, CliError> {
    let command = match (args.command, args.peer) {
        (Some(command), _) => command,
        (None, Some(peer)) => {
            let token = args.token.ok_or_else(|| {
                CliError::Usage(
                    "sync --peer needs the peer's token: --token TOKEN or ASSENT_PEER_TOKEN"
                        .to_owned(),
                )
            })?;
            return crate::peer_sync::run(ctx, &peer, &token).await;
        }
        (None, None) => {
            return Err(CliError::Usage(
                "sync needs --peer URL or a subcommand (export, import, host, peers)".to_owned(),
            ));
        }
    };
    match command {
        SyncCommand::Export(args) => export(ctx, &args.file).await,
        SyncCommand::Import(args) => import(ctx, &args.file).await,
        SyncCommand::Host => {
            let host = ctx.store().host_id().to_owned();
            Output::either(ctx.json, &json!({ "hostId": host }), || host.clone())
        }
        SyncCommand::Peers => {
            let peers = sync::peers(&mut *ctx.connection().await?).await?;
            Output::either(ctx.json, &peers, || render::peers(&peers))
        }
    }
}

async fn export(ctx: &Ctx, file: &Path) -> Result<Output, CliError> {
    let store = ctx.store();
    let mut tx = store.begin_write().await?;
    let batch = sync::export(
        &mut tx,
        store.host_id(),
        &TaskEntities,
        Uuid::new_v4(),
        ctx.now,
    )
    .await?;
    let text = serde_json::to_string_pretty(&batch)
        .map_err(|e| CliError::failed(format!("cannot write the sync batch as JSON: {e}")))?;
    if is_stdio(file) {
        // The batch is the output; the outbox counts as drained once it is written.
        tx.commit().await.map_err(StoreError::from)?;
        return Ok(Output::text(text));
    }
    write_atomically(file, &text)?;
    tx.commit().await.map_err(StoreError::from)?;
    let mut summary = batch_summary(&batch);
    summary["file"] = json!(file.display().to_string());
    Output::either(ctx.json, &summary, || render::exported(&batch, file))
}

/// What a batch holds, as `sync export --json` and `sync --peer --json` print it.
pub fn batch_summary(batch: &SyncBatch) -> serde_json::Value {
    json!({
        "batchId": batch.batch_id,
        "fromHost": batch.from_host,
        "changeSets": batch.state.change_sets.len(),
        "decisions": batch.state.decisions.len(),
        "auditRecords": batch.state.audit_records.len(),
        "entities": batch.state.entities.len(),
    })
}

/// Writes `text` to `path` through a temporary file in the same directory, so a crash
/// never leaves a half-written batch under the final name.
fn write_atomically(path: &Path, text: &str) -> Result<(), CliError> {
    let cannot = |e: &dyn std::fmt::Display| {
        CliError::failed(format!("cannot write sync batch {}: {e}", path.display()))
    };
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(|e| cannot(&e))?;
    temp.write_all(text.as_bytes()).map_err(|e| cannot(&e))?;
    temp.as_file().sync_all().map_err(|e| cannot(&e))?;
    temp.persist(path).map_err(|e| cannot(&e.error))?;
    Ok(())
}

fn read_batch(file: &Path) -> Result<SyncBatch, CliError> {
    let name = file.display();
    let mut text = String::new();
    let read = if is_stdio(file) {
        std::io::stdin()
            .take(MAX_BATCH_BYTES + 1)
            .read_to_string(&mut text)
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_BATCH_BYTES + 1).read_to_string(&mut text))
    };
    read.map_err(|e| CliError::failed(format!("cannot read sync batch {name}: {e}")))?;
    if text.len() as u64 > MAX_BATCH_BYTES {
        return Err(CliError::failed(format!(
            "sync batch {name} is larger than {MAX_BATCH_BYTES} bytes"
        )));
    }
    serde_json::from_str(&text)
        .map_err(|e| CliError::failed(format!("sync batch {name} is not a valid batch: {e}")))
}

async fn import(ctx: &Ctx, file: &Path) -> Result<Output, CliError> {
    // Parse before touching the database: a bad file changes nothing.
    let batch = read_batch(file)?;
    let store = ctx.store();
    let mut tx = store.begin_write().await?;
    let report: ImportReport =
        sync::import(&mut tx, store.host_id(), &TaskEntities, &batch, ctx.now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Output::either(ctx.json, &report, || render::imported(&report))
}

/// Runs `assent conflicts`.
pub async fn conflicts(ctx: &Ctx) -> Result<Output, CliError> {
    let records: Vec<ConflictRecord> = sync::conflicts(&mut *ctx.connection().await?).await?;
    Output::either(ctx.json, &records, || render::conflicts(&records))
}
