//! The command line as clap types: global flags, subcommands and the parsers of the
//! values clap checks itself (times, durations).
//!
//! Values whose failure the contract maps to exit code 1 (change-set ids, edited
//! arguments, due dates) are taken as text here and parsed by the commands.

use crate::duration::parse_duration;
use assent_changeset::Dialect;
use assent_domain::{LEGACY_TARGET_KIND, Target};
use clap::{Args, Parser, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// Assent: a person confirms what an LLM agent wants to change.
#[derive(Debug, Parser)]
#[command(
    name = "assent",
    version,
    propagate_version = true,
    after_help = "Exit codes: 0 ok, 1 error, 2 usage, 3 conflict (already decided, changed concurrently),\n4 stale target (it changed since the proposal; the item was refreshed for a new review).\nTry `assent demo` for the whole story."
)]
pub struct Cli {
    /// The database (created and migrated when missing); default: the URL in
    /// ASSENT_DATABASE_URL, else assent.db in the user's data directory
    /// (~/.local/share/assent on Linux), or ./assent.db where one already exists.
    // Not clap's `env`: `demo` refuses a --db it would ignore, which it can only tell
    // from the environment's when the flag alone fills this field.
    #[arg(long, global = true, value_name = "URL")]
    pub db: Option<String>,

    /// Fix the clock (RFC 3339), for scripts and tests; default: the current time.
    #[arg(long, global = true, value_name = "RFC3339", value_parser = parse_now)]
    pub now: Option<OffsetDateTime>,

    /// Machine output: JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// The whole story on a fresh temporary database, told as text (refuses --db and
    /// --json).
    Demo(DemoArgs),
    /// Serve the review page and the JSON API over the database of --db.
    Serve(ServeArgs),
    /// Gate MCP servers: serve MCP (on stdin/stdout, or over Streamable HTTP with --http)
    /// in front of `-- CMD ARGS` or of every server of `--config FILE`, whose calls wait
    /// for a person unless the agent's rules (or, with --trust hints, the server's
    /// read-only hints) let them run at once.
    Mcp(crate::mcp_commands::McpArgs),
    /// Answer one event of a coding agent's hook (Claude Code, Codex, Cursor, Copilot,
    /// VS Code, Gemini CLI), read on stdin, through the agent's rules and, when they
    /// ask, a person.
    Hook(crate::hook_commands::HookArgs),
    /// Find every door of Assent installed here (agents' hooks, MCP client
    /// configurations running `assent mcp`) and say whether a failure of Assent blocks
    /// each one's calls or lets them through; exit 1 when one lets them through.
    Doctor(crate::doctor_commands::DoctorArgs),
    /// The commands that work on the database of --db.
    #[command(flatten)]
    Db(DbCommand),
}

/// `assent serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on; loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:7700", value_name = "IP:PORT")]
    pub addr: SocketAddr,
    /// The API's bearer token (at least 16 characters); default: the one stored
    /// beside the database, generated and printed on first start.
    #[arg(
        long,
        env = "ASSENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
    /// How long a sub-agent's question (a delegated wake's call) waits for a person
    /// before it is denied, in seconds (1 to 86400).
    #[arg(long, value_name = "SECS", default_value_t = assent_confirm::DEFAULT_WAIT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub delegation_timeout: u64,
    /// The webhook sender that runs beside the server (`--public-url`,
    /// `--expiry-warning`, `--expiry-ttl`, as `assent webhooks deliver` takes them).
    #[command(flatten)]
    pub delivery: crate::webhook_commands::DeliverArgs,
    /// Also serve the MCP gateway at `/mcp`, in front of every server of this client
    /// configuration file (as `assent mcp --config FILE --http`); needs --mcp-agent.
    #[arg(long, value_name = "FILE", requires = "mcp_agent")]
    pub mcp_config: Option<std::path::PathBuf>,
    /// The agent of `/mcp`: only its agent tokens may call it, and its policy gates the
    /// calls.
    #[arg(long, value_name = "AGENT", requires = "mcp_config")]
    pub mcp_agent: Option<String>,
    /// A host name `/mcp` answers besides loopback (repeatable).
    #[arg(
        long = "mcp-allowed-host",
        value_name = "HOST",
        requires = "mcp_config"
    )]
    pub mcp_allowed_hosts: Vec<String>,
    /// Raise a desktop notification for each change set queued while the server runs
    /// (`notify-send` or `osascript`, where there is one).
    #[arg(long)]
    pub notify: bool,
    /// Receive Slack's button clicks over Socket Mode (no public URL needed), with the
    /// app-level token of --slack-app-token.
    #[arg(long, requires = "slack_app_token")]
    pub slack_socket: bool,
    /// The Slack app's app-level token (`xapp-…`, with `connections:write`).
    #[arg(
        long,
        env = "ASSENT_SLACK_APP_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub slack_app_token: Option<String>,
    /// Post each queued set to the connected Telegram bot's chats and long-poll its
    /// taps (`getUpdates`: no public URL needed; assent telegram connect first).
    #[arg(long)]
    pub telegram: bool,
    /// The Bot API's base URL instead of the connection's (a self-hosted Bot API
    /// server, or a test's fake).
    #[arg(long, env = "ASSENT_TELEGRAM_API_URL", value_name = "URL")]
    pub telegram_api_url: Option<String>,
}

/// `assent demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Tell the sub-agent story instead: calls confirmed by the parent's session over
    /// the confirmation bus.
    #[arg(long)]
    pub delegated: bool,
}

/// The subcommands that open the database of `--db`.
#[derive(Debug, Subcommand)]
pub enum DbCommand {
    /// Agents and their policies.
    #[command(subcommand)]
    Agent(AgentCommand),
    /// Every agent's settings as one TOML file to review in a pull request: `export`
    /// it, `plan` a changed file (what would change, each rule backtested), `apply` it
    /// in one transaction.
    #[command(subcommand)]
    Policy(crate::policy_commands::PolicyCommand),
    /// Tasks of the journal.
    #[command(subcommand)]
    Task(TaskCommand),
    /// Run one agent wake: its tool calls run now, are queued for review, or refused.
    Wake(WakeArgs),
    /// List the change sets waiting for review (long values cut, both ends kept).
    Pending(PendingArgs),
    /// Show a change set, or one of its items, with every argument whole.
    Show(ShowArgs),
    /// Why a call was decided so: the rule that decided (where it came from, who set
    /// it and when), the rules it outranked, the quorum and hold, a session grant, the
    /// shadow verdict, or that the tool's mode decided. `why SET IDX` for a queued
    /// item, `why --audit OPERATION_ID` for a call in the audit trail.
    Why(crate::why_commands::WhyArgs),
    /// Answer waiting calls in this terminal, one key each, as they are queued
    /// (needs a terminal; scripts use `pending` and `confirm`).
    Review(ReviewArgs),
    /// Confirm (and apply) one item, or every pending item with --all.
    Confirm(ConfirmArgs),
    /// Reject one item.
    Reject(RejectArgs),
    /// Confirm one item with edited arguments.
    Edit(EditArgs),
    /// Put one item off; it stays open.
    Defer(ItemArgs),
    /// Propose the reversal of an applied item as a new change set for review (exit 3
    /// when it is not applied, 1 when its tool declares no compensation).
    Undo(ItemArgs),
    /// Reject every open item of a change set.
    Dismiss(DismissArgs),
    /// Expire open change sets older than a time to live.
    Expire(ExpireArgs),
    /// The decision history the agent's next wake sees.
    History(HistoryArgs),
    /// The audit trail: what the executor did.
    Audit(AuditArgs),
    /// The sync outbox: what waits to be delivered to other devices.
    Outbox(OutboxArgs),
    /// Standing "always" grants given to sub-agents: list them, or `revoke ID`.
    Grants(GrantsArgs),
    /// Sync with another device: with its `assent serve` (--peer), or through batch
    /// files.
    Sync(crate::sync_commands::SyncArgs),
    /// Decisions that lost to an earlier one on another device.
    Conflicts,
    /// API tokens of `assent serve` and their roles: list them, `add`, or `revoke ID`.
    Tokens(crate::tokens_commands::TokensArgs),
    /// Webhook subscriptions (add, remove, test), their deliveries and dead letters;
    /// lists the subscriptions without a subcommand.
    Webhooks(crate::webhook_commands::WebhooksArgs),
    /// The Slack app whose buttons approve and reject (connect, status, users).
    Slack(crate::slack_commands::SlackArgs),
    /// The Telegram bot whose buttons approve and reject (connect, status, users).
    Telegram(crate::telegram_commands::TelegramArgs),
    /// Answer from the phone: ntfy topics and email addresses each queued item is sent
    /// to, with one-time Approve and Reject links (`assent serve --public-url`).
    Notify(crate::notify_commands::NotifyArgs),
    /// The tools an agent may call, as JSON ready for an SDK's `tools` parameter.
    Tools(ToolsArgs),
    /// Calls a person rejected that are remembered (an identical call is refused without
    /// asking anyone): list them, or `forget ID|--all` to be asked again.
    Rejections(crate::rejection_commands::RejectionsArgs),
    /// The execution ledger: jobs of confirmed items with external effects; settle one
    /// in doubt (`resolve ID --happened|--rerun`), `retry` or `retract` a failed one.
    Jobs(crate::jobs_commands::JobsArgs),
    /// What each coding agent's session did (the hook events' `session_id`): its calls,
    /// how many were asked, edited, refused or failed.
    Sessions(crate::session_commands::SessionsArgs),
    /// One coding agent's session: `show ID` lists every call with how it ended (ran
    /// unasked by which rule, asked and who answered how fast, edited and what
    /// changed, refused by which rule or person, ran under a session grant, failed).
    #[command(subcommand)]
    Session(crate::session_commands::SessionCommand),
}

/// `assent tools --agent A [--format NAME]`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The agent whose policy decides which tools are listed: the journal's, for an
    /// agent of `assent mcp` its upstream's as the gateway last listed them, or on a
    /// service's database the tools its engine recorded.
    #[arg(long)]
    pub agent: String,
    /// openai, responses or anthropic (their `tools` array), gemini (one `Tool`) or
    /// mcp (a `tools/list` result).
    #[arg(long, value_name = "NAME", default_value = "openai", value_parser = parse_dialect)]
    pub format: Dialect,
}

/// `KIND:ID`, e.g. `invoice:42`: any host's target (the id may hold colons, the
/// kind may not).
fn parse_target(text: &str) -> Result<Target, String> {
    match text.split_once(':') {
        Some((kind, id)) if !kind.trim().is_empty() && !id.trim().is_empty() => {
            Ok(Target::new(kind.trim(), id.trim()))
        }
        _ => Err(format!("{text:?} is not KIND:ID (e.g. task:42)")),
    }
}

/// The target of `--task ID` (a journal task) or `--target KIND:ID`, if either.
fn target_of(task: Option<&String>, target: Option<&Target>) -> Option<Target> {
    target
        .cloned()
        .or_else(|| task.map(|id| Target::new(LEGACY_TARGET_KIND, id.trim())))
}

fn parse_dialect(text: &str) -> Result<Dialect, String> {
    text.parse()
        .map_err(|e: assent_changeset::ChangesetError| e.to_string())
}

/// `assent grants [--agent PATH] [--tool NAME] [--all]` and `assent grants revoke ID`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct GrantsArgs {
    /// Revoke a grant instead of listing.
    #[command(subcommand)]
    pub command: Option<GrantsCommand>,
    /// Only grants of this agent path (e.g. `lead/researcher`).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<String>,
    /// Only grants for this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// Revoked grants too.
    #[arg(long)]
    pub all: bool,
}

/// `assent grants ...`.
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// Revoke a grant: the agent is asked again from its next call on.
    Revoke(GrantRevokeArgs),
    /// Suggest `allow` rules from the decision history (tools confirmed unchanged at
    /// least --min times, never edited, rejected or undone), or apply one (--apply ID).
    Suggest(GrantsSuggestArgs),
}

/// `assent grants suggest [--agent A] [--since 30d] [--min N] [--apply ID [--for 30d]]`.
#[derive(Debug, Args)]
pub struct GrantsSuggestArgs {
    /// Only this agent's tools.
    #[arg(long)]
    pub agent: Option<String>,
    /// The window of history read: decisions made this long ago or since.
    #[arg(long, value_parser = parse_span, default_value = "30d")]
    pub since: Duration,
    /// Unchanged confirmations a tool needs at least.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub min: u32,
    /// Create the rule of this suggestion (its id, as listed).
    #[arg(long, value_name = "ID")]
    pub apply: Option<String>,
    /// How long a suggested rule lasts once applied.
    #[arg(long = "for", value_name = "SPAN", value_parser = parse_span, default_value = "30d")]
    pub for_span: Duration,
}

/// `assent grants revoke`.
#[derive(Debug, Args)]
pub struct GrantRevokeArgs {
    /// The grant's id (see `assent grants`).
    pub id: String,
}

/// `assent agent ...`.
#[derive(Debug, Subcommand)]
pub enum AgentCommand {
    /// Create an agent, or replace the categories of an existing one.
    Create(AgentCreateArgs),
    /// Let the agent run TOOL without asking (its rule for TOOL, replaced).
    Allow(AgentRuleArgs),
    /// Make the agent's calls of TOOL wait for a person (its rule for TOOL, replaced).
    Ask(AgentRuleArgs),
    /// Refuse the agent's calls of TOOL (its rule for TOOL, replaced).
    Deny(AgentRuleArgs),
    /// Let the agent run TOOL without asking, as `allow` does, but record each call
    /// prominently: marked `audited` in the audit trail, listed by `assent audit
    /// digest` (its rule for TOOL, replaced).
    Audit(AgentRuleArgs),
    /// Remove the agent's rule for exactly PATTERN (as `agent show` lists it): its calls
    /// are then decided by the agent's other rules, or asked.
    Unset(AgentUnsetArgs),
    /// Say that the agent's calls of TOOL are idempotent: an approved call that a crash
    /// left in doubt simply runs again (--off takes it back).
    Idempotent(AgentIdempotentArgs),
    /// Let the agent's MCP calls of TOOL that a person confirms after their chat ended
    /// run in a later gateway session (by default they never run there; --off takes it
    /// back).
    RunAfterDisconnect(AgentIdempotentArgs),
    /// Hold the agent's confirmed calls of TOOL for SECS seconds before they run: until
    /// then a person may cancel them (`assent jobs cancel ID`, the page's Undo). 0
    /// removes the hold.
    Hold(AgentHoldArgs),
    /// Change an agent's setting: how long its rejected calls are remembered
    /// (--remember-rejections 7d|0).
    Set(crate::rejection_commands::AgentSetArgs),
    /// Show an agent: its categories and its rules by tool.
    Show(AgentShowArgs),
    /// List every agent: its categories and how many rules it has.
    List,
    /// Replay the agent's past decisions of TOOL as if RULE had been in force: how
    /// many calls would have run unasked, and every rejection and edit it would have
    /// let through.
    Backtest(AgentBacktestArgs),
    /// Each shadow rule of the agent (`--shadow`): its agreement with the decisions
    /// people made since it was set, and every disagreement.
    ShadowReport(AgentShadowReportArgs),
}

/// `assent agent unset AGENT PATTERN`.
#[derive(Debug, Args)]
pub struct AgentUnsetArgs {
    /// The agent's id.
    pub agent: String,
    /// The rule's tool name or pattern, exactly as `assent agent show` lists it.
    pub pattern: String,
}

/// `assent agent allow|ask|deny AGENT TOOL [--for SPAN]`.
#[derive(Debug, Args)]
pub struct AgentRuleArgs {
    /// The agent's id.
    pub agent: String,
    /// The tool's name, or a pattern where `*` matches any run of characters.
    #[arg(required_unless_present = "read_only_tools")]
    pub tool: Option<String>,
    /// With `allow` and no TOOL: allow the agent's MCP tools that their server marks
    /// read-only and not destructive, as recorded by its gateway, after showing them
    /// and asking y/N (a tool whose definition changes later is asked about again).
    #[arg(long, conflicts_with_all = ["tool", "shadow", "approvals", "for_span", "after", "only_after", "total"])]
    pub read_only_tools: bool,
    /// With --read-only-tools: allow them without asking (needed when stdin is not a
    /// terminal).
    #[arg(long, requires = "read_only_tools")]
    pub yes: bool,
    /// The rule expires after this long (e.g. `30d`, `12h`, `90m`); then the tool's
    /// mode decides again. Without it the rule stays until replaced.
    #[arg(long = "for", value_name = "SPAN", value_parser = parse_span)]
    pub for_span: Option<Duration>,
    /// Try the rule without effect: calls are routed as before (a person is still
    /// asked) and `assent agent shadow-report` compares it with their decisions. The
    /// same command without --shadow promotes it.
    #[arg(long, conflicts_with = "for_span")]
    pub shadow: bool,
    /// With `ask`: an item of TOOL is applied only after N confirmations by distinct
    /// people (1, the default, is one person). Each call replaces the number.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub approvals: Option<u32>,
    /// Keep a rule that names no tool the agent's coding agent sends (refused
    /// otherwise once a hook event recorded which coding agent it is: `Bash(rm *)` on
    /// a Gemini CLI agent would never match).
    #[arg(long)]
    pub any_name: bool,
    /// A condition over the history (`--after`, `--only-after`, `--total`).
    #[command(flatten)]
    pub condition: ConditionArgs,
}

/// The flags of a condition over the history, shared by `agent allow|ask|audit` and
/// `agent backtest` (one parser: `task_commands::condition_of`).
#[derive(Debug, Args, Default)]
pub struct ConditionArgs {
    /// A rate: the rule applies once N calls it covers ran in the SPAN before (`5/1h`);
    /// below that the next rule or the tool's mode decides. With `ask --approvals N`,
    /// the quorum applies from then on.
    #[arg(long, value_name = "N/SPAN", value_parser = parse_rate,
          conflicts_with_all = ["only_after", "total"])]
    pub after: Option<(u32, Duration)>,
    /// A sequence: the rule applies only when a call covered by PATTERN ran in the
    /// --within SPAN before (with --succeeded, and succeeded).
    #[arg(
        long,
        value_name = "PATTERN",
        requires = "within",
        conflicts_with = "total"
    )]
    pub only_after: Option<String>,
    /// With --only-after: how long before.
    #[arg(long, value_name = "SPAN", value_parser = parse_span, requires = "only_after")]
    pub within: Option<Duration>,
    /// With --only-after: the call before must have succeeded.
    #[arg(long, requires = "only_after")]
    pub succeeded: bool,
    /// A running total: the JSON pointer of a numeric argument (`/cents`); the rule
    /// applies once its sum over the calls the rule covers in the --per SPAN before,
    /// this call included, is over --over.
    #[arg(long, value_name = "POINTER", value_parser = parse_pointer, requires_all = ["over", "per"])]
    pub total: Option<String>,
    /// With --total: the bound.
    #[arg(
        long,
        value_name = "N",
        requires = "total",
        allow_negative_numbers = true
    )]
    pub over: Option<i64>,
    /// With --total: the window.
    #[arg(long, value_name = "SPAN", value_parser = parse_span, requires = "total")]
    pub per: Option<Duration>,
}

/// Parses a rate such as `5/1h` ([`assent_tools::parse_rate`]).
fn parse_rate(text: &str) -> Result<(u32, Duration), String> {
    assent_tools::parse_rate(text, parse_span)
}

/// Parses a JSON pointer into a call's arguments (`/cents`).
fn parse_pointer(text: &str) -> Result<String, String> {
    if text.starts_with('/') {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "expected a JSON pointer into the arguments such as /cents, got {text:?}"
        ))
    }
}

/// `assent agent shadow-report AGENT`.
#[derive(Debug, Args)]
pub struct AgentShadowReportArgs {
    /// The agent's id.
    pub agent: String,
}

/// `assent agent backtest AGENT TOOL allow|audit|ask|deny [--since 30d]`.
#[derive(Debug, Args)]
pub struct AgentBacktestArgs {
    /// The agent's id.
    pub agent: String,
    /// The tool's name, or a pattern where `*` matches any run of characters.
    pub tool: String,
    /// The rule to replay: allow, audit, ask or deny.
    #[arg(value_parser = parse_rule_action)]
    pub rule: assent_tools::RuleAction,
    /// The window of history replayed: decisions made this long ago or since.
    #[arg(long, value_parser = parse_span, default_value = "30d")]
    pub since: Duration,
    /// A condition over the history on the rule replayed (as `agent allow|ask` take
    /// it): each past call is replayed only where the condition held at its decision,
    /// judged on what the agent ran before it.
    #[command(flatten)]
    pub condition: ConditionArgs,
}

/// Parses a rule's action: `allow`, `audit`, `ask` or `deny`.
fn parse_rule_action(text: &str) -> Result<assent_tools::RuleAction, String> {
    text.trim().parse()
}

/// Parses a span of time longer than zero, as [`parse_duration`] reads it (`30d`,
/// `12h`, `90m`).
fn parse_span(text: &str) -> Result<Duration, String> {
    match parse_duration(text)? {
        span if span.is_positive() => Ok(span),
        _ => Err(format!("expected a span longer than zero, got {text:?}")),
    }
}

/// `assent agent idempotent|run-after-disconnect AGENT TOOL [--off]`.
#[derive(Debug, Args)]
pub struct AgentIdempotentArgs {
    /// The agent's id.
    pub agent: String,
    /// The tool's name.
    pub tool: String,
    /// Take the word back.
    #[arg(long)]
    pub off: bool,
}

/// `assent agent hold AGENT TOOL SECS`.
#[derive(Debug, Args)]
pub struct AgentHoldArgs {
    /// The agent's id.
    pub agent: String,
    /// The tool's name.
    pub tool: String,
    /// How long a confirmed call waits, in seconds (0 removes the hold).
    pub seconds: u32,
}

/// `assent agent show AGENT`.
#[derive(Debug, Args)]
pub struct AgentShowArgs {
    /// The agent's id.
    pub agent: String,
}

/// `assent agent create`.
#[derive(Debug, Args)]
pub struct AgentCreateArgs {
    /// The agent's id.
    #[arg(long)]
    pub id: String,
    /// The task categories it may change, comma-separated.
    #[arg(long, value_delimiter = ',', required = true, num_args = 1..)]
    pub categories: Vec<String>,
}

/// `assent task ...`.
#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Create a task (its id is a fresh uuid).
    Create(TaskCreateArgs),
    /// Show a task.
    Show(TaskShowArgs),
}

/// `assent task create`.
#[derive(Debug, Args)]
pub struct TaskCreateArgs {
    /// Title.
    #[arg(long)]
    pub title: String,
    /// Category, checked against agents' policies.
    #[arg(long)]
    pub category: String,
    /// OPEN, IN PROGRESS, GROOMED, BLOCKED or ON HOLD (default OPEN).
    #[arg(long)]
    pub status: Option<String>,
    /// P0 to P3.
    #[arg(long)]
    pub priority: Option<String>,
    /// Estimate in minutes (1 to 1440).
    #[arg(long, value_name = "MIN")]
    pub estimate: Option<u32>,
    /// Due date.
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub due: Option<String>,
    /// A label (repeatable).
    #[arg(long = "label", value_name = "L")]
    pub labels: Vec<String>,
    /// A checklist item (repeatable, in order).
    #[arg(long = "checklist", value_name = "TITLE")]
    pub checklist: Vec<String>,
}

/// `assent task show`.
#[derive(Debug, Args)]
pub struct TaskShowArgs {
    /// The task's id.
    pub id: String,
}

/// `assent wake`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("about").required(true).args(["task", "target"])))]
pub struct WakeArgs {
    /// The agent.
    #[arg(long)]
    pub agent: String,
    /// The task the wake is about (a journal task; same as --target task:ID).
    #[arg(long)]
    pub task: Option<String>,
    /// The target the wake is about, as KIND:ID (any host's, e.g. invoice:42).
    #[arg(long, value_name = "KIND:ID", value_parser = parse_target)]
    pub target: Option<Target>,
    /// The tool calls, as an SDK wrote them (OpenAI Chat or Responses, Anthropic,
    /// Gemini, LangChain, Vercel AI SDK, MCP); `-` or absent: stdin.
    #[arg(long, value_name = "FILE")]
    pub calls: Option<PathBuf>,
    /// Read the calls in this dialect instead of the one their shape shows: openai,
    /// responses, anthropic, gemini, langchain, vercel or mcp.
    #[arg(long, value_name = "NAME", value_parser = parse_dialect)]
    pub format: Option<Dialect>,
    /// With --json, write `messages` (the replies as tool-result messages) in this
    /// dialect instead of the calls' own.
    #[arg(long, value_name = "NAME", value_parser = parse_dialect)]
    pub reply_format: Option<Dialect>,
    /// The run key (default: a fresh uuid).
    #[arg(long, value_name = "K")]
    pub run_key: Option<String>,
    /// The conversation thread (default: the run key).
    #[arg(long, value_name = "TH")]
    pub thread: Option<String>,
}

impl WakeArgs {
    /// The target named by `--task` or `--target`.
    pub fn about(&self) -> Option<Target> {
        target_of(self.task.as_ref(), self.target.as_ref())
    }
}

/// `assent pending`.
#[derive(Debug, Args)]
pub struct PendingArgs {
    /// Only sets about this task.
    #[arg(long, conflicts_with = "target")]
    pub task: Option<String>,
    /// Only sets about this target, as KIND:ID.
    #[arg(long, value_name = "KIND:ID", value_parser = parse_target)]
    pub target: Option<Target>,
    /// Only sets of this agent.
    #[arg(long)]
    pub agent: Option<String>,
}

impl PendingArgs {
    /// The target named by `--task` or `--target`.
    pub fn about(&self) -> Option<Target> {
        target_of(self.task.as_ref(), self.target.as_ref())
    }
}

/// `assent review`.
#[derive(Debug, Args)]
pub struct ReviewArgs {
    /// Only calls of this agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Who decides, as a quorum counts people: defaults to the OS user.
    #[arg(long = "as", value_name = "NAME")]
    pub reviewer: Option<String>,
    /// Raise no desktop notification when a call is queued.
    #[arg(long)]
    pub no_notify: bool,
    /// Review on a remote `assent serve` (`https://HOST:PORT`, or `http://` on loopback
    /// or over an SSH tunnel) instead of this database: its event stream and decision
    /// routes, with a reviewer token.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// The reviewer token of --server (decisions are recorded as its id); never printed.
    #[arg(
        long,
        env = "ASSENT_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN"
    )]
    pub token: Option<String>,
}

/// `assent show SET [IDX]`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The change set's id, or its first 8 or more hex digits.
    pub set: String,
    /// Only this item.
    pub index: Option<usize>,
}

/// `assent confirm`.
#[derive(Debug, Args)]
pub struct ConfirmArgs {
    /// The change set's id, or its first 8 or more hex digits.
    pub set: String,
    /// The item's index.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub index: Option<usize>,
    /// Confirm every pending item, in order (deferred items are skipped).
    #[arg(long)]
    pub all: bool,
    /// Who approves, as a quorum (`agent ask … --approvals N`) counts people: defaults
    /// to the OS user. Local database access is trusted as a whole.
    #[arg(long = "as", value_name = "NAME")]
    pub reviewer: Option<String>,
    /// The item's revision you were shown (`pending` and `show` print it once an edit
    /// or a refresh moved it): refused, exit 3, when it moved since.
    #[arg(long, value_name = "N", conflicts_with = "all")]
    pub revision: Option<u32>,
    /// "Yes, for this session": a coding agent's hook call, confirmed, and the later
    /// calls of the same agent in the same session of that coding agent, of the same
    /// tool, with exactly these arguments (or those `--pattern` covers) run without
    /// asking; listed by `assent grants`, taken back with `assent grants revoke ID`.
    #[arg(long, conflicts_with = "all")]
    pub for_session: bool,
    /// With `--for-session`: the calls it covers, as a rule pattern of the item's tool
    /// (`Bash(git status*)`, `Edit(src/**)`) that covers this call.
    #[arg(long, value_name = "TOOL(ARG)", requires = "for_session")]
    pub pattern: Option<String>,
}

/// The identity a quorum counts for a decision made here: `--as NAME`, else the OS
/// user (`USER`, `USERNAME`), else `local`.
pub fn reviewer(named: Option<&str>) -> String {
    crate::context::reviewer(named)
}

/// One item of one set.
#[derive(Debug, Args)]
pub struct ItemArgs {
    /// The change set's id, or its first 8 or more hex digits.
    pub set: String,
    /// The item's index.
    pub index: usize,
}

/// `assent reject`.
#[derive(Debug, Args)]
pub struct RejectArgs {
    /// The item.
    #[command(flatten)]
    pub item: ItemArgs,
    /// Why; the agent sees it in its next wake.
    #[arg(long)]
    pub reason: Option<String>,
    /// Who rejects (recorded with the decision): defaults to the OS user.
    #[arg(long = "as", value_name = "NAME")]
    pub reviewer: Option<String>,
}

/// `assent edit`.
#[derive(Debug, Args)]
pub struct EditArgs {
    /// The item.
    #[command(flatten)]
    pub item: ItemArgs,
    /// The arguments to apply instead of the proposal (a JSON object).
    #[arg(long, value_name = "JSON")]
    pub args: String,
    /// Who edits (the edit is their approval under a quorum): defaults to the OS user.
    #[arg(long = "as", value_name = "NAME")]
    pub reviewer: Option<String>,
    /// The item's revision you were shown: refused, exit 3, when it moved since.
    #[arg(long, value_name = "N")]
    pub revision: Option<u32>,
}

/// `assent dismiss`.
#[derive(Debug, Args)]
pub struct DismissArgs {
    /// The change set's id, or its first 8 or more hex digits.
    pub set: String,
    /// Why; the agent sees it in its next wake.
    #[arg(long)]
    pub reason: Option<String>,
}

/// `assent expire`.
#[derive(Debug, Args)]
pub struct ExpireArgs {
    /// Time to live of an open set: e.g. `7d`, `12h`, `30m`, `90s` (default 7d).
    #[arg(long, value_parser = parse_duration)]
    pub ttl: Option<Duration>,
}

/// `assent history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The agent.
    #[arg(long)]
    pub agent: String,
    /// Only decisions about this task.
    #[arg(long, conflicts_with = "target")]
    pub task: Option<String>,
    /// Only decisions about this target, as KIND:ID.
    #[arg(long, value_name = "KIND:ID", value_parser = parse_target)]
    pub target: Option<Target>,
    /// At most this many decisions.
    #[arg(long, default_value_t = 20)]
    pub limit: u32,
}

impl HistoryArgs {
    /// The target named by `--task` or `--target`.
    pub fn about(&self) -> Option<Target> {
        target_of(self.task.as_ref(), self.target.as_ref())
    }
}

/// `assent audit`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// Prove what ran, or print the chain's head, instead of listing.
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only records about this task.
    #[arg(long, conflicts_with_all = ["run", "target"])]
    pub task: Option<String>,
    /// Only records about this target, as KIND:ID.
    #[arg(long, value_name = "KIND:ID", value_parser = parse_target, conflicts_with = "run")]
    pub target: Option<Target>,
    /// Only records of this wake run.
    #[arg(long)]
    pub run: Option<String>,
    /// At most this many (the newest).
    #[arg(long, default_value_t = 500)]
    pub limit: u32,
}

/// `assent audit verify|head`.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Prove what ran: the consent chain is intact, every chained row matches its
    /// entry, and every effect had the consent its rules required when it ran. Exit
    /// 0 when all holds, 1 with every violation listed.
    Verify(AuditVerifyArgs),
    /// Print the consent chain's head (its last hash and entry count), to write
    /// down, publish or send, and give to `audit verify --head` later.
    Head,
    /// The calls an `audit` rule let run (`assent agent audit`), newest last: who,
    /// what, when and by which rule.
    Digest(crate::why_commands::AuditDigestArgs),
}

/// `assent audit verify`.
#[derive(Debug, Args)]
pub struct AuditVerifyArgs {
    /// Check effects from this time on only (RFC 3339); the chain is always checked
    /// whole.
    #[arg(long, value_name = "TIME", value_parser = parse_now)]
    pub since: Option<OffsetDateTime>,
    /// A head written down before (`assent audit head`): fail unless the chain still
    /// holds it.
    #[arg(long, value_name = "HASH")]
    pub head: Option<String>,
    /// Fail on every effect the proof cannot tie to a person on this device: effects
    /// imported from another device (their consent is on its chain), and effects
    /// confirmed by an answer in the agent's client (`--ask-in-client`).
    #[arg(long)]
    pub strict: bool,
    /// Verify the whole chain, not only the entries after the head the last clean
    /// verify stored: the only way to find an entry or row changed before that head.
    #[arg(long)]
    pub full: bool,
}

impl AuditArgs {
    /// The target named by `--task` or `--target`.
    pub fn about(&self) -> Option<Target> {
        target_of(self.task.as_ref(), self.target.as_ref())
    }
}

/// `assent outbox`.
#[derive(Debug, Args)]
pub struct OutboxArgs {
    /// At most this many (the oldest).
    #[arg(long, default_value_t = 500)]
    pub limit: u32,
}

/// Parses `--now`.
fn parse_now(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text.trim(), &Rfc3339)
        .map_err(|e| format!("expected an RFC 3339 time such as 2026-03-01T09:00:00Z ({e})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_before_or_after_the_subcommand() {
        let before = Cli::try_parse_from(["assent", "--json", "--db", "sqlite::memory:", "outbox"]);
        let after = Cli::try_parse_from(["assent", "outbox", "--json", "--db", "sqlite::memory:"]);
        for cli in [before, after] {
            let cli = cli.expect("parses");
            assert!(cli.json);
            assert_eq!(cli.db.as_deref(), Some("sqlite::memory:"));
        }
    }

    #[test]
    fn sync_takes_a_peer_or_a_subcommand_but_not_both() {
        let parses =
            |args: &[&str]| Cli::try_parse_from([&["assent", "sync"], args].concat()).is_ok();
        assert!(parses(&["--peer", "http://127.0.0.1:7700", "--token", "t"]));
        assert!(
            parses(&["--peer", "http://127.0.0.1:7700"]),
            "the token may come from the environment"
        );
        assert!(parses(&["export", "out.json"]));
        assert!(parses(&["host"]));
        assert!(!parses(&[
            "--peer",
            "http://127.0.0.1:7700",
            "export",
            "out.json"
        ]));
        assert!(!parses(&["--token", "t", "host"]));
        assert!(!parses(&[]), "`assent sync` alone shows its help");
    }

    #[test]
    fn the_help_of_sync_peer_offers_https() {
        let command = Cli::command();
        let sync = command.find_subcommand("sync").expect("sync");
        let peer = sync
            .get_arguments()
            .find(|a| a.get_id() == "peer")
            .expect("--peer");
        let help = peer.get_help().expect("help").to_string();
        assert!(help.contains("https://"), "{help}");
        assert!(!help.contains("Plain HTTP only"), "{help}");
    }

    #[test]
    fn show_takes_a_set_and_maybe_an_item() {
        assert!(Cli::try_parse_from(["assent", "show"]).is_err());
        assert!(Cli::try_parse_from(["assent", "show", "s"]).is_ok());
        assert!(Cli::try_parse_from(["assent", "show", "s", "1"]).is_ok());
        assert!(Cli::try_parse_from(["assent", "show", "s", "x"]).is_err());
    }

    #[test]
    fn confirm_needs_an_index_or_all() {
        assert!(Cli::try_parse_from(["assent", "confirm", "s"]).is_err());
        assert!(Cli::try_parse_from(["assent", "confirm", "s", "0", "--all"]).is_err());
        assert!(Cli::try_parse_from(["assent", "confirm", "s", "--all"]).is_ok());
        assert!(Cli::try_parse_from(["assent", "confirm", "s", "1"]).is_ok());
    }
}
