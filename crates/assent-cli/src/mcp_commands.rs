//! `assent mcp`: the MCP gateway, on stdin/stdout or over Streamable HTTP, in front of
//! one upstream MCP server or of every server of a client's configuration file.
//! Nothing else may write to stdout while it serves on stdio: it is the protocol's
//! channel.

use crate::CliError;
use assent_mcp::{Deadlines, Downstream, GatewayOptions, HttpDownstream, McpError, Trust};
use clap::{Args, ValueEnum};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// `assent mcp (--server NAME -- CMD [ARGS...] | --config FILE) --agent A
/// [--category C] [--wait SECS] [--trust hints|none] [--call-timeout SECS]
/// [--start-timeout SECS] [--http ADDR [--allowed-host HOST]...]`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The upstream server's name: the target id (`mcp`, NAME) of its queued calls.
    #[arg(
        long,
        value_name = "NAME",
        required_unless_present = "config",
        conflicts_with = "config"
    )]
    pub server: Option<String>,
    /// Gate every server of a client's MCP configuration file (`{"mcpServers": {NAME:
    /// {"command", "args", "env"} | {"url", "headers"}}}`, as Claude Desktop, Cursor
    /// and VS Code keep it) behind one endpoint, their tools named `NAME__tool`; an
    /// entry's `"assent": {"trust": "hints", "category": C}` sets its trust and
    /// category. A server that cannot be started is logged and skipped.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Serve MCP over Streamable HTTP at `http://ADDR/mcp` instead of stdin/stdout;
    /// every request needs an agent token of --agent (`Authorization: Bearer`).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<SocketAddr>,
    /// A host name (or `host:port`) requests over --http may name in `Host`; repeat
    /// for more. Without it only loopback names are accepted (`localhost`,
    /// `127.0.0.1`, `::1`), against DNS rebinding.
    #[arg(long = "allowed-host", value_name = "HOST", requires = "http")]
    pub allowed_hosts: Vec<String>,
    /// The review server's address as people reach it (e.g. `https://assent.example`):
    /// a queued call's answer carries its review page's link in `_meta`
    /// (`assent/reviewUrl`), beside its change set id (`assent/changeSetId`).
    #[arg(long, value_name = "URL")]
    pub public_url: Option<String>,
    /// Ask the client's own user about a queued call (MCP elicitation, form mode: the
    /// tool, its arguments, Approve / Reject with a reason) where the client declared
    /// `elicitation`. The answer is recorded as `mcp-client:NAME`, never a named
    /// person's: a tool that needs more than one person is queued as without it.
    #[arg(long)]
    pub ask_in_client: bool,
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
    /// With --config, each server's trust is its entry's (`"assent": {"trust": "hints"}`).
    #[arg(long, value_enum, default_value_t = TrustArg::None, value_name = "TRUST",
          conflicts_with = "config")]
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
    #[arg(last = true, num_args = 1.., value_name = "CMD",
          required_unless_present_any = ["config", "upstream_command"],
          conflicts_with_all = ["config", "upstream_command"])]
    pub command: Vec<String>,
    /// The upstream MCP server's command, instead of `-- CMD ARGS` (for a launcher that
    /// cannot pass `--` through, such as the MCP Inspector); its arguments with --arg.
    #[arg(long = "command", value_name = "CMD", conflicts_with = "config")]
    pub upstream_command: Option<String>,
    /// One argument of --command's program; repeat for more, in order.
    #[arg(
        long = "arg",
        value_name = "ARG",
        allow_hyphen_values = true,
        requires = "upstream_command"
    )]
    pub upstream_args: Vec<String>,
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

/// The client configuration file at `path`, given as `flag` (`--config`, `assent serve
/// --mcp-config`); unreadable or malformed is a usage error naming both.
pub fn read_config(
    flag: &str,
    path: &std::path::Path,
) -> Result<assent_mcp::config::ServersConfig, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CliError::Usage(format!("cannot read {flag} {}: {e}", path.display())))?;
    assent_mcp::config::parse(&text)
        .map_err(|e| CliError::Usage(format!("{flag} {}: {e}", path.display())))
}

/// Refuses a database the gateway would take from the folder its client started it in
/// (a project's folder, which a repository or the agent can fill): a relative SQLite
/// path (the legacy `./assent.db` among them), or a file inside that folder. The
/// filesystem root, where some clients start their servers, is no workspace.
fn refuse_a_workspace_database(db: &str) -> Result<(), CliError> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    let relative = assent_store::StoreOptions::new(db)
        .sqlite_file()
        .is_some_and(|file| file.is_relative());
    let workspace = here.parent().is_some();
    let inside = workspace
        .then(|| crate::database::inside(db, &here, &here))
        .flatten();
    if relative || inside.is_some() {
        return Err(CliError::failed(format!(
            "the database {} is in the folder the gateway was started in ({}), where a repository or an agent could put rules of its own: name the person's database outside it with --db or ASSENT_DATABASE_URL",
            assent_mcp::redact::redact(db),
            here.display()
        )));
    }
    Ok(())
}

/// Serves until the client leaves (stdio) or ctrl-c (HTTP); an upstream that fails to
/// start (in time), or a server name whose host another server uses, is an error
/// (exit 1) — with --config only when no server at all could be started.
pub async fn run(db: &str, args: McpArgs) -> Result<(), CliError> {
    let downstream = match args.http {
        None => Downstream::Stdio,
        Some(addr) => Downstream::Http(HttpDownstream {
            addr,
            allowed_hosts: args.allowed_hosts.clone(),
            limits: assent_server::ServerLimits::default(),
        }),
    };
    let config = match &args.config {
        None => None,
        Some(path) => Some(read_config("--config", path)?),
    };
    if let Some(url) = &args.public_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(CliError::Usage(format!(
            "--public-url {url:?} is not an http:// or https:// URL"
        )));
    }
    // Refused before the database is opened: a bad name changes nothing.
    if let Some(server) = &args.server
        && let Some(problem) = assent_mcp::config::server_name_problem(server)
    {
        return Err(CliError::Usage(format!("--server: {problem}")));
    }
    refuse_a_workspace_database(db)?;
    let store = crate::database::open_store(db).await?;
    let options = GatewayOptions {
        server: args.server.unwrap_or_default(),
        agent: args.agent,
        category: args.category,
        wait: args.wait.map(Duration::from_secs),
        trust: args.trust.into(),
        deadlines: Deadlines {
            start: Duration::from_secs(args.start_timeout),
            call: Duration::from_secs(args.call_timeout),
        },
        public_url: args.public_url,
        ask_in_client: args.ask_in_client,
        previews: Default::default(),
    };
    let served = match config {
        Some(config) => assent_mcp::run_config(store.clone(), options, config, downstream).await,
        None => {
            let upstream = match &args.upstream_command {
                Some(command) => Some((command, args.upstream_args.as_slice())),
                None => args.command.split_first(),
            };
            match upstream {
                Some((command, command_args)) => {
                    assent_mcp::run_one(store.clone(), options, command, command_args, downstream)
                        .await
                }
                None => Err(McpError::Client(
                    "the upstream command is missing after -- (or as --command)".into(),
                )),
            }
        }
    };
    store.close().await;
    served.map_err(|error| match error {
        McpError::BadServerName(_) => CliError::Usage(error.to_string()),
        // The hint names the database: a client starts the gateway with a safe subset
        // of the environment, so the agent is created where the gateway looks.
        McpError::UnknownAgent(agent) => CliError::failed(format!(
            "no agent {agent:?} on this database (create it with `assent --db {} agent create \
             --id {agent} --categories mcp`)",
            assent_mcp::redact::redact(db)
        )),
        other => CliError::Failed(other.into()),
    })
}

/// `assent agent run-after-disconnect AGENT TOOL [--off]`: the operator's word that the
/// agent's MCP calls of TOOL may run in a later gateway session when a person confirms
/// them after their chat ended. Unknown agent exit 1, blank tool exit 2.
pub async fn agent_run_after_disconnect(
    ctx: &crate::context::Ctx,
    agent: &str,
    tool: &str,
    on: bool,
) -> Result<crate::context::Output, CliError> {
    let (agent, tool) = (agent.trim(), tool.trim());
    // A name or pattern as a rule takes it (`*` for any run of characters): one that
    // could match nothing is refused (exit 2), not kept and ignored.
    let changed = match ctx
        .engine
        .admin()
        .set_run_after_disconnect(agent, tool, on, ctx.now)
        .await
    {
        Ok(changed) => changed,
        Err(assent_confirm::ConfirmError::InvalidSetting(why)) => {
            return Err(CliError::Usage(why));
        }
        Err(assent_confirm::ConfirmError::UnknownAgent(_)) => {
            return Err(CliError::failed(format!(
                "no agent {agent:?} on this database"
            )));
        }
        Err(other) => return Err(other.into()),
    };
    let shown = serde_json::json!({"agent": agent, "tool": tool, "runAfterDisconnect": on, "changed": changed});
    crate::context::Output::either(ctx.json, &shown, || {
        let said = if on {
            "runs when confirmed after its chat ended"
        } else {
            "runs only in the chat that made it"
        };
        let note = if changed {
            "from the gateway's next approved call on"
        } else {
            "it already did; nothing changed"
        };
        format!("Agent {agent}: {tool} {said} ({note})")
    })
}

/// Whether the server of a recorded MCP tool marks it read-only and not destructive
/// (its `annotations` as listed: hints, which a person may decide to trust).
fn read_only_by_its_server(definition: &serde_json::Value) -> bool {
    let hint = |name: &str| definition["annotations"][name].as_bool();
    hint("readOnlyHint") == Some(true) && hint("destructiveHint") != Some(true)
}

/// `assent agent allow AGENT --read-only-tools [--yes]`: the agent's MCP tools whose
/// server marks them read-only and not destructive (as the agent's gateways recorded
/// them) are shown, and on a terminal's `y` (or with `--yes`) each is allowed exactly
/// as `assent agent allow AGENT TOOL` does: its current definition accepted, so one
/// that changes later is asked about again. Unknown agent exit 1; no terminal and no
/// `--yes` exit 2; an answer other than `y` allows nothing.
pub async fn allow_read_only_tools(
    ctx: &crate::context::Ctx,
    agent: &str,
    yes: bool,
) -> Result<crate::context::Output, CliError> {
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    let agent = agent.trim();
    let Some(settings) = ctx.engine.agent_settings(agent).await? else {
        return Err(CliError::failed(format!(
            "no agent {agent:?} on this database"
        )));
    };
    let tools: Vec<assent_confirm::agents::HostTool> = settings
        .tools
        .into_iter()
        .filter(|tool| read_only_by_its_server(&tool.definition))
        .collect();
    if tools.is_empty() {
        return Ok(crate::context::Output::text(format!(
            "Agent {agent}: no MCP tool recorded for it is marked read-only (and not \
             destructive) by its server; start its gateway once (`assent mcp … --agent \
             {agent}`) so its servers' tools are recorded"
        )));
    }
    let mut stderr = std::io::stderr();
    let _ = writeln!(
        stderr,
        "Tools of agent {agent}'s MCP servers that the servers mark read-only and not destructive:"
    );
    for tool in &tools {
        let description = tool.definition["description"].as_str().unwrap_or_default();
        let first_line = assent_domain::one_line(description.lines().next().unwrap_or_default());
        let _ = writeln!(stderr, "  {}  {first_line}", tool.tool_name);
    }
    if !yes {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::Usage(
                "--read-only-tools asks y/N on a terminal: pass --yes to allow them without asking"
                    .to_owned(),
            ));
        }
        let _ = write!(
            stderr,
            "Allow these {} tools to run without a person, on their server's word? [y/N] ",
            tools.len()
        );
        let _ = stderr.flush();
        let mut answer = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut answer)
            .map_err(|e| CliError::failed(format!("cannot read the answer: {e}")))?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Ok(crate::context::Output::text(format!(
                "Agent {agent}: nothing allowed"
            )));
        }
    }
    let mut allowed = Vec::new();
    for tool in &tools {
        let change =
            assent_confirm::RuleChange::new(&tool.tool_name, assent_tools::RuleAction::Allow);
        assent_server::change_agent_rule(&ctx.engine, agent, &change, ctx.now)
            .await
            .map_err(CliError::from)?;
        allowed.push(tool.tool_name.clone());
    }
    let shown = serde_json::json!({"agent": agent, "allowed": allowed});
    crate::context::Output::either(ctx.json, &shown, || {
        format!(
            "Agent {agent}: allow {} (read-only by their server's word; one whose definition \
             changes is asked about again)",
            allowed.join(", ")
        )
    })
}
