//! `assent sync export|import|host` and `assent conflicts`: device sync through files,
//! for devices that never see each other (a peer over HTTP comes with `assent serve`).

use crate::CliError;
use crate::commands::{Ctx, Output};
use crate::render;
use assent_journal_host::TaskEntities;
use assent_store::sync::{self, ConflictRecord, ImportReport};
use assent_store::{AnyConnection, StoreError};
use assent_sync::SyncBatch;
use clap::{Args, Subcommand};
use serde_json::json;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use uuid::Uuid;

/// The largest batch file `import` reads (256 MiB).
const MAX_BATCH_BYTES: u64 = 256 * 1024 * 1024;

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

/// A pooled connection, for the read-only commands.
async fn read_connection(
    ctx: &Ctx,
) -> Result<impl std::ops::DerefMut<Target = AnyConnection>, CliError> {
    Ok(ctx
        .store()
        .pool()
        .acquire()
        .await
        .map_err(StoreError::from)?)
}

fn is_stdio(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Runs `assent sync ...`.
pub async fn sync(ctx: &Ctx, command: SyncCommand) -> Result<Output, CliError> {
    match command {
        SyncCommand::Export(args) => export(ctx, &args.file).await,
        SyncCommand::Import(args) => import(ctx, &args.file).await,
        SyncCommand::Host => {
            let host = ctx.store().host_id().to_owned();
            Output::either(ctx.json, &json!({ "hostId": host }), || host.clone())
        }
        SyncCommand::Peers => {
            let peers = sync::peers(&mut *read_connection(ctx).await?).await?;
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
    let summary = json!({
        "batchId": batch.batch_id,
        "fromHost": batch.from_host,
        "file": file.display().to_string(),
        "changeSets": batch.state.change_sets.len(),
        "decisions": batch.state.decisions.len(),
        "auditRecords": batch.state.audit_records.len(),
        "entities": batch.state.entities.len(),
    });
    Output::either(ctx.json, &summary, || render::exported(&batch, file))
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
    let records: Vec<ConflictRecord> = sync::conflicts(&mut *read_connection(ctx).await?).await?;
    Output::either(ctx.json, &records, || render::conflicts(&records))
}
