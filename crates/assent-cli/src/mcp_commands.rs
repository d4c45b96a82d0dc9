//! `assent mcp`: the MCP gateway on stdin/stdout in front of an upstream MCP server.
//! Nothing else may write to stdout while it serves: it is the protocol's channel.

use crate::CliError;
use assent_mcp::{Deadlines, GatewayOptions, McpError, Trust};
use assent_store::Store;
use clap::{Args, ValueEnum};
use std::time::Duration;

/// `assent mcp --server NAME --agent A [--category C] [--wait SECS] [--trust hints|none]
/// [--call-timeout SECS] [--start-timeout SECS] -- CMD [ARGS...]`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The upstream server's name: the target id (`mcp`, NAME) of its queued calls.
    #[arg(long, value_name = "NAME")]
    pub server: String,
    /// The agent whose policy (categories, allow|ask|deny rules) gates the calls.
    #[arg(long, value_name = "AGENT")]
    pub agent: String,
    /// The category of the server's target, checked against the agent's allowlist.
    #[arg(long, default_value = "mcp", value_name = "CATEGORY")]
    pub category: String,
    /// Hold a queued call up to SECS seconds (with progress notifications) and answer
    /// with the real result if a person confirms in time, the rejection if rejected.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub wait: Option<u64>,
    /// Whose word lets a tool run without a person: `none` (the default), only the
    /// agent's allow rules; `hints`, also the upstream's annotations (`readOnlyHint`
    /// runs a tool at once unless `destructiveHint` contradicts it, `idempotentHint`
    /// lets a call left in doubt run again).
    #[arg(long, value_enum, default_value_t = TrustArg::None, value_name = "TRUST")]
    pub trust: TrustArg,
    /// The longest wait for the upstream's answer to one call; an approved call that
    /// gets none in time is in doubt (unless its tool is idempotent), never run again
    /// silently.
    #[arg(long, default_value_t = 60, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub call_timeout: u64,
    /// The longest wait for the upstream to start (the MCP handshake and its tool
    /// list); then `assent mcp` exits 1.
    #[arg(long, default_value_t = 30, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..=3_600))]
    pub start_timeout: u64,
    /// The upstream MCP server's command and arguments, after `--`.
    #[arg(last = true, required = true, num_args = 1.., value_name = "CMD")]
    pub command: Vec<String>,
}

/// The values of `--trust`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TrustArg {
    /// Annotations are passed on to the client and never obeyed.
    None,
    /// Annotations route tools and make them retryable.
    Hints,
}

impl From<TrustArg> for Trust {
    fn from(value: TrustArg) -> Self {
        match value {
            TrustArg::None => Self::None,
            TrustArg::Hints => Self::Hints,
        }
    }
}

/// Serves until the client leaves; an upstream that fails to start (in time) or stops,
/// or a server name whose host another server uses, is an error (exit 1).
pub async fn run(db: &str, args: McpArgs) -> Result<(), CliError> {
    let Some((command, command_args)) = args.command.split_first() else {
        return Err(CliError::Usage(
            "the upstream command is missing after --".into(),
        ));
    };
    let store = Store::open(db).await?;
    let options = GatewayOptions {
        server: args.server,
        agent: args.agent,
        category: args.category,
        wait: args.wait.map(Duration::from_secs),
        trust: args.trust.into(),
        deadlines: Deadlines {
            start: Duration::from_secs(args.start_timeout),
            call: Duration::from_secs(args.call_timeout),
        },
    };
    let served = assent_mcp::run(store.clone(), options, command, command_args).await;
    store.close().await;
    served.map_err(|error| match error {
        McpError::EmptyServerName => CliError::Usage(error.to_string()),
        other => CliError::Failed(other.into()),
    })
}
