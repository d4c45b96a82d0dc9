//! `assent`: the command line of Assent — agents, tasks, wakes, review, the audit trail
//! and the outbox over one SQLite database.
//!
//! This file parses the command line, starts the runtime and logging, and maps the
//! outcome to an exit code: 0 ok, 1 error, 2 usage, 3 conflict (already decided,
//! changed concurrently). Errors go to stderr as one `error: ...` line.

// A command-line program talks to its user on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod context;
mod database;
mod decision_commands;
mod demo;
mod demo_delegated;
mod dispatch;
mod doctor_canary;
mod doctor_commands;
mod duration;
mod hook_commands;
mod jobs_commands;
mod mcp_commands;
mod notify_commands;
mod peer_sync;
mod policy_commands;
mod record_commands;
mod rejection_commands;
mod render;
mod review;
mod review_card;
mod review_server;
mod serve;
mod serve_record;
mod session_commands;
mod slack_commands;
mod sync_batches;
mod sync_commands;
mod task_commands;
mod telegram_commands;
mod telemetry;
mod terminal;
mod tokens_commands;
mod wake_commands;
mod webhook_commands;
mod why_commands;

use assent_confirm::ConfirmError;
use assent_journal_host::JournalError;
use assent_server::ServerError;
use assent_store::StoreError;
use clap::Parser;
use clap::error::ErrorKind;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

/// Why a command failed; decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The command line is wrong (exit 2).
    Usage(String),
    /// The item or set is not in a state that allows this (exit 3).
    Conflict(String),
    /// The target changed since the item was proposed; the item was refreshed for a
    /// new review (exit 4).
    Stale(String),
    /// Anything else (exit 1).
    Failed(anyhow::Error),
    /// The command did its work and found changes pending (`assent policy plan`: exit
    /// 10), saying how many.
    Pending(String),
}

impl CliError {
    /// A plain failure with `message`.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(anyhow::Error::msg(message.into()))
    }

    /// The process exit code.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Failed(_) => 1,
            Self::Usage(_) => 2,
            Self::Conflict(_) => 3,
            Self::Stale(_) => 4,
            Self::Pending(_) => 10,
        }
    }

    /// The message, on one line.
    pub fn one_line(&self) -> String {
        let text = match self {
            Self::Usage(message)
            | Self::Conflict(message)
            | Self::Stale(message)
            | Self::Pending(message) => message.clone(),
            Self::Failed(error) => chain(error),
        };
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    }
}

/// The error and its causes joined by `: `, skipping a cause whose text an outer
/// message already repeats (many library errors print their source themselves).
fn chain(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain() {
        let cause = cause.to_string();
        if text.contains(&cause) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&cause);
    }
    text
}

impl From<ConfirmError> for CliError {
    fn from(error: ConfirmError) -> Self {
        if let ConfirmError::TargetChanged { detail, .. } = &error {
            return Self::Stale(detail.clone());
        }
        if let ConfirmError::InvalidRule(_)
        | ConfirmError::InvalidSetting(_)
        | ConfirmError::InvalidPolicyFile { .. }
        | ConfirmError::InvalidGrant(_)
        | ConfirmError::EditMovesTarget { .. }
        | ConfirmError::InvalidCursor(_)
        | ConfirmError::RejectionNotFound(_) = &error
        {
            return Self::Usage(error.to_string());
        }
        if error.is_conflict() {
            Self::Conflict(error.to_string())
        } else {
            Self::Failed(error.into())
        }
    }
}

impl From<StoreError> for CliError {
    fn from(error: StoreError) -> Self {
        match error {
            // A set id the command line got wrong (too short, not hex, shared by
            // several sets) is a usage error on every command that takes one.
            StoreError::AmbiguousChangeSetId { .. } | StoreError::InvalidChangeSetId { .. } => {
                Self::Usage(error.to_string())
            }
            other => Self::Failed(other.into()),
        }
    }
}

impl From<JournalError> for CliError {
    fn from(error: JournalError) -> Self {
        Self::Failed(error.into())
    }
}

impl From<ServerError> for CliError {
    fn from(error: ServerError) -> Self {
        match error {
            ServerError::Confirm(error) => Self::from(error),
            other => Self::Failed(other.into()),
        }
    }
}

impl From<anyhow::Error> for CliError {
    fn from(error: anyhow::Error) -> Self {
        Self::Failed(error)
    }
}

fn main() -> ExitCode {
    let cli = match cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return clap_exit(&error),
    };
    let export = init_tracing();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            export.finish();
            return fail(&CliError::failed(format!(
                "cannot start the runtime: {error}"
            )));
        }
    };
    let code = match runtime.block_on(dispatch::run(cli)) {
        Ok(output) => {
            write_stdout(&output.stdout);
            match output.failure {
                Some(error) => fail(&error),
                None => ExitCode::SUCCESS,
            }
        }
        Err(error) => fail(&error),
    };
    // Outside the runtime: the exporter's blocking client sends what is batched.
    drop(runtime);
    export.finish();
    code
}

/// Logs to stderr, filtered by `RUST_LOG` (default `warn`, and `info` for what an MCP
/// gateway's upstream prints on its stderr and the address `assent mcp --http`
/// listens on); with an OTLP endpoint set, spans to it too ([`telemetry`], its own
/// filter). Returns the export to finish before the process exits.
fn init_tracing() -> telemetry::Export {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,assent_mcp::upstream_stderr=info,assent_mcp::announce=info",
        )
    });
    let log = tracing_subscriber::Layer::with_filter(
        tracing_subscriber::fmt::layer()
            .with_writer(RedactedStderr::default)
            .with_ansi(std::io::stderr().is_terminal()),
        filter,
    );
    let (spans, export) = telemetry::start();
    // Only fails when a subscriber is already set, which nothing here does.
    let _ = tracing_subscriber::registry()
        .with(log)
        .with(spans)
        .try_init();
    export
}

/// One log line for stderr, written there when the subscriber is done with it, with
/// every URL's userinfo and query values redacted (`assent_mcp::redact`): libraries
/// quote the URLs they were given (rmcp's transport errors, reqwest's), and a
/// configuration's URL may hold a password or an API key.
#[derive(Default)]
struct RedactedStderr(Vec<u8>);

impl Write for RedactedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RedactedStderr {
    fn drop(&mut self) {
        let line = assent_mcp::redact::redact(&String::from_utf8_lossy(&self.0));
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// Prints `text` with a final newline; a closed pipe (`assent audit | head`) is not an
/// error worth a panic.
fn write_stdout(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let newline = if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    // Agent-written text (titles, summaries, arguments) reaches a person's terminal:
    // escape sequences and bidi controls are shown, never obeyed.
    let text = render::visible(text);
    let _ = write!(stdout, "{text}{newline}").and_then(|()| stdout.flush());
}

fn fail(error: &CliError) -> ExitCode {
    eprintln!("error: {}", render::visible(&error.one_line()));
    ExitCode::from(error.exit_code())
}

/// Help and version go to stdout with exit 0; a usage error becomes one line on
/// stderr with exit 2.
fn clap_exit(error: &clap::Error) -> ExitCode {
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = error.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = error.print();
            ExitCode::from(2)
        }
        _ => fail(&CliError::Usage(clap_one_line(&error.render().to_string()))),
    }
}

/// Clap's multi-line usage error as one line: the message, then the usage.
fn clap_one_line(rendered: &str) -> String {
    let mut message = Vec::new();
    let mut usage = None;
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("Usage:") {
            usage.get_or_insert_with(|| rest.trim().to_owned());
        } else if usage.is_none() && !line.starts_with("For more information") {
            message.push(line.strip_prefix("error:").unwrap_or(line).trim());
        }
    }
    let message = message.join(" ");
    match usage {
        Some(usage) => format!("{message} (usage: {usage})"),
        None => message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_errors_become_one_line() {
        let rendered = "error: the following required arguments were not provided:\n  --id <ID>\n\nUsage: assent agent create --id <ID> --categories <CATEGORIES>...\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_one_line(rendered),
            "the following required arguments were not provided: --id <ID> (usage: assent agent create --id <ID> --categories <CATEGORIES>...)"
        );
    }

    #[test]
    fn causes_are_joined_without_repetition() {
        let inner = anyhow::anyhow!("disk full");
        let error = CliError::Failed(
            inner
                .context("cannot open database x: disk full")
                .context("opening"),
        );
        assert_eq!(
            error.one_line(),
            "opening: cannot open database x: disk full"
        );
        assert_eq!(error.exit_code(), 1);
    }

    #[test]
    fn conflicts_exit_3() {
        let error = CliError::from(ConfirmError::conflict(
            assent_confirm::ConflictKind::AlreadyDecided,
            "already confirmed",
        ));
        assert_eq!(error.exit_code(), 3);
        assert_eq!(error.one_line(), "conflict: already confirmed");
    }
}
