//! `assent sync export|import|host|peers` and `assent conflicts`: device sync through
//! files, for devices that never see each other; `assent sync --peer` (over HTTP, with a
//! peer's `assent serve`) lives in [`crate::peer_sync`].

use crate::CliError;
use crate::context::{Ctx, Output};
use crate::render;
use crate::sync_batches::batch_summary;
use assent_confirm::admin::ConflictRecord;
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
    /// A peer's `assent serve` (`https://HOST:PORT`, or `http://` on loopback or over an
    /// SSH tunnel: plain HTTP carries the token unencrypted): send this device's batch,
    /// merge the peer's answer, both ways in one round trip.
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
            let host = ctx.store().device_id().to_owned();
            Output::either(ctx.json, &json!({ "hostId": host }), || host.clone())
        }
        SyncCommand::Peers => {
            let peers = ctx.engine.admin().sync_peers().await?;
            Output::either(ctx.json, &peers, || render::peers(&peers))
        }
    }
}

async fn export(ctx: &Ctx, file: &Path) -> Result<Output, CliError> {
    // The outbox counts as drained once the batch is written: the engine commits
    // only after this returns.
    let (batch, text) = ctx
        .engine
        .admin()
        .export_sync_batch(Uuid::new_v4(), ctx.now, |batch| {
            let text = serde_json::to_string_pretty(batch).map_err(|e| {
                CliError::failed(format!("cannot write the sync batch as JSON: {e}"))
            })?;
            if !is_stdio(file) {
                write_atomically(file, &text)?;
            }
            Ok::<_, CliError>(text)
        })
        .await?;
    if is_stdio(file) {
        // The batch is the output.
        return Ok(Output::text(text));
    }
    let mut summary = batch_summary(&batch);
    summary["file"] = json!(file.display().to_string());
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

/// A reader that fails once more than `left` bytes have been asked of it, so that an
/// endless input (`/dev/zero`, a pipe) is refused after the limit instead of read on.
struct Bounded<R> {
    inner: R,
    left: u64,
    limit: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            // One byte more means too much; nothing more means the end.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(std::io::Error::other(format!(
                    "it is larger than {} bytes",
                    self.limit
                ))),
            };
        }
        let room = usize::try_from(self.left)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let n = self.inner.read(&mut buf[..room])?;
        self.left -= n as u64;
        Ok(n)
    }
}

/// Parses a batch from `input` as it streams in, reading at most `limit` bytes: input
/// that is not a batch is refused at its first wrong byte, and the only memory held is
/// the batch being built.
fn parse_batch(input: impl Read, limit: u64, name: &str) -> Result<SyncBatch, CliError> {
    let reader = std::io::BufReader::new(Bounded {
        inner: input,
        left: limit,
        limit,
    });
    serde_json::from_reader(reader).map_err(|e| {
        if e.is_io() {
            CliError::failed(format!("cannot read sync batch {name}: {e}"))
        } else {
            CliError::failed(format!("sync batch {name} is not a valid batch: {e}"))
        }
    })
}

fn read_batch(file: &Path) -> Result<SyncBatch, CliError> {
    let name = file.display().to_string();
    if is_stdio(file) {
        return parse_batch(std::io::stdin().lock(), MAX_BATCH_BYTES, &name);
    }
    let input = std::fs::File::open(file)
        .map_err(|e| CliError::failed(format!("cannot read sync batch {name}: {e}")))?;
    parse_batch(input, MAX_BATCH_BYTES, &name)
}

async fn import(ctx: &Ctx, file: &Path) -> Result<Output, CliError> {
    // Parse before touching the database: a bad file changes nothing.
    let batch = read_batch(file)?;
    // A refused batch changes nothing and is recorded in the imports' log.
    let report = ctx
        .engine
        .admin()
        .import_sync_batch(&batch, ctx.now)
        .await?;
    Output::either(ctx.json, &report, || render::imported(&report))
}

/// Runs `assent conflicts`.
pub async fn conflicts(ctx: &Ctx) -> Result<Output, CliError> {
    let records: Vec<ConflictRecord> = ctx.engine.admin().sync_conflicts().await?;
    Output::either(ctx.json, &records, || render::conflicts(&records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// An endless input that counts the bytes read from it, like `/dev/zero`.
    struct Zeros(Arc<AtomicU64>);

    impl Read for Zeros {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            buf.fill(0);
            self.0.fetch_add(buf.len() as u64, Ordering::SeqCst);
            Ok(buf.len())
        }
    }

    /// An endless input that is not JSON is refused at its first byte, having read
    /// no more than one buffer of it.
    #[test]
    fn endless_garbage_is_refused_without_reading_it_all() {
        let read = Arc::new(AtomicU64::new(0));
        let error =
            parse_batch(Zeros(read.clone()), MAX_BATCH_BYTES, "/dev/zero").expect_err("refused");
        assert!(
            error.one_line().contains("is not a valid batch"),
            "{}",
            error.one_line()
        );
        assert!(read.load(Ordering::SeqCst) <= 64 * 1024, "{read:?}");
    }

    /// Endless blanks are valid JSON so far: refused once past the limit, with the
    /// limit named, and never held in memory.
    #[test]
    fn endless_blanks_are_refused_at_the_limit() {
        struct Blanks;
        impl Read for Blanks {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                buf.fill(b' ');
                Ok(buf.len())
            }
        }
        let error = parse_batch(Blanks, 1 << 20, "-").expect_err("refused");
        assert!(
            error.one_line().contains("is larger than"),
            "{}",
            error.one_line()
        );
    }

    /// A batch up to the limit reads; one byte more does not.
    #[test]
    fn the_limit_is_exact() {
        let text = r#"{"formatVersion":1,"batchId":"00000000-0000-0000-0000-000000000001","fromHost":"h","createdAt":"2026-03-01T12:00:00Z","changeSets":[],"decisions":[],"conflictLosers":[],"auditRecords":[],"entities":[]}"#;
        let limit = text.len() as u64;
        assert!(parse_batch(text.as_bytes(), limit, "f").is_ok());
        let longer = format!("{text} ");
        assert!(parse_batch(longer.as_bytes(), limit, "f").is_err());
    }
}
