//! One function per command: open the store, call the engine, and hand back what to
//! print (JSON with `--json`, text from [`crate::render`] otherwise) or a [`CliError`]
//! that decides the exit code.

use crate::CliError;
use crate::cli::{
    AgentCommand, AgentCreateArgs, AuditArgs, Cli, Command, ConfirmArgs, DbCommand, DismissArgs,
    EditArgs, ExpireArgs, GrantsArgs, GrantsCommand, HistoryArgs, ItemArgs, OutboxArgs,
    PendingArgs, RejectArgs, TaskCommand, TaskCreateArgs, TaskShowArgs, ToolsArgs, WakeArgs,
};
use crate::{demo, demo_delegated, render, serve};
use assent_changeset::{Dialect, ParsedCalls, parse_calls, tool_definitions};
use assent_confirm::{ConfirmError, DEFAULT_EXPIRY_TTL, Engine, ItemResult, WakeRequest};
use assent_domain::OffsetDateTime;
use assent_journal_host::{NewTask, create_task, load_task};
use assent_server::set_agent_categories;
use assent_server::shapes::{SetView, confirm_all_json, confirmed_json, wake_json, wake_messages};
use assent_store::delegation::{self, Revocation};
use assent_store::{Store, StoreError, agents, audit, change_sets, outbox};
use serde::Serialize;
use serde_json::{Value, json};
use std::io::Read;
use std::path::Path;
use time::Date;
use uuid::Uuid;

/// The most tool-call input a wake reads (4 MiB).
pub const MAX_CALLS_BYTES: u64 = 4 * 1024 * 1024;

/// What a command prints on stdout, and whether it still failed.
#[derive(Debug)]
pub struct Output {
    /// The text for stdout (a trailing newline is added when missing).
    pub stdout: String,
    /// Set when the command did its work but must exit non-zero anyway (`confirm
    /// --all` with failed items).
    pub failure: Option<CliError>,
}

impl Output {
    pub(crate) fn text(stdout: String) -> Self {
        Self {
            stdout,
            failure: None,
        }
    }

    fn json(value: &impl Serialize) -> Result<Self, CliError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
        Ok(Self::text(text))
    }

    /// JSON with `--json`, otherwise the rendered text.
    pub(crate) fn either(
        json: bool,
        value: &impl Serialize,
        text: impl FnOnce() -> String,
    ) -> Result<Self, CliError> {
        if json {
            Self::json(value)
        } else {
            Ok(Self::text(text()))
        }
    }
}

/// An open database with the journal as host, the time of the command, and the
/// output mode.
pub struct Ctx {
    /// The engine over the database.
    pub engine: Engine,
    /// The clock of this command.
    pub now: OffsetDateTime,
    /// Whether to print JSON.
    pub json: bool,
}

impl Ctx {
    /// Opens (creating and migrating when missing) the database at `url`.
    pub async fn open(url: &str, now: OffsetDateTime, json: bool) -> Result<Self, CliError> {
        let store = Store::open(url).await?;
        Ok(Self {
            engine: engine(store).await?,
            now,
            json,
        })
    }

    pub(crate) fn store(&self) -> &Store {
        self.engine.store()
    }

    /// A pooled connection for reads and single statements.
    pub(crate) async fn connection(
        &self,
    ) -> Result<impl std::ops::DerefMut<Target = assent_store::AnyConnection>, CliError> {
        Ok(self
            .store()
            .pool()
            .acquire()
            .await
            .map_err(StoreError::from)?)
    }
}

/// The engine over `store`: the journal's catalog, the journal as host (its tables
/// migrated on first use). The CLI is where the journal is composed with the engine.
pub async fn engine(store: Store) -> Result<Engine, CliError> {
    Ok(assent_journal_host::journal_engine(store).await?)
}

/// Runs the parsed command line.
pub async fn run(cli: Cli) -> Result<Output, CliError> {
    let command = match cli.command {
        Command::Demo(args) if args.delegated => {
            return demo_delegated::run(cli.now).await.map(Output::text);
        }
        Command::Demo(_) => return demo::run(cli.now).await.map(Output::text),
        Command::Serve(args) => return serve::run(&cli.db, args).await.map(Output::text),
        Command::Db(command) => command,
    };
    // Read the wake's input before touching the database: a bad document changes nothing.
    let calls = match &command {
        DbCommand::Wake(args) => Some(read_calls(args.calls.as_deref(), args.format)?),
        _ => None,
    };
    let now = cli.now.unwrap_or_else(OffsetDateTime::now_utc);
    let ctx = Ctx::open(&cli.db, now, cli.json).await?;
    let output = match command {
        DbCommand::Agent(AgentCommand::Create(args)) => agent_create(&ctx, args).await,
        DbCommand::Task(TaskCommand::Create(args)) => task_create(&ctx, args).await,
        DbCommand::Task(TaskCommand::Show(args)) => task_show(&ctx, args).await,
        DbCommand::Wake(args) => match calls {
            Some(parsed) => wake(&ctx, args, parsed).await,
            None => Err(CliError::failed("no tool calls read")),
        },
        DbCommand::Pending(args) => pending(&ctx, args).await,
        DbCommand::Confirm(args) => confirm(&ctx, args).await,
        DbCommand::Reject(args) => reject(&ctx, args).await,
        DbCommand::Edit(args) => edit(&ctx, args).await,
        DbCommand::Defer(args) => defer(&ctx, args).await,
        DbCommand::Dismiss(args) => dismiss(&ctx, args).await,
        DbCommand::Expire(args) => expire(&ctx, args).await,
        DbCommand::History(args) => history(&ctx, args).await,
        DbCommand::Audit(args) => audit_trail(&ctx, args).await,
        DbCommand::Outbox(args) => outbox_messages(&ctx, args).await,
        DbCommand::Grants(args) => grants(&ctx, args).await,
        DbCommand::Sync(args) => crate::sync_commands::sync(&ctx, args).await,
        DbCommand::Conflicts => crate::sync_commands::conflicts(&ctx).await,
        DbCommand::Tokens(args) => crate::tokens_commands::tokens(&ctx, args).await,
        DbCommand::Tools(args) => tools(&ctx, args).await,
        DbCommand::Webhooks(args) => crate::webhook_commands::webhooks(&ctx, args).await,
    };
    ctx.store().close().await;
    output
}

/// `assent agent create`.
pub async fn agent_create(ctx: &Ctx, args: AgentCreateArgs) -> Result<Output, CliError> {
    let agent = set_agent_categories(ctx.store(), &args.id, &args.categories, ctx.now).await?;
    let categories: Vec<&str> = agent.categories.iter().map(String::as_str).collect();
    Output::either(ctx.json, &agent, || {
        render::agent(&agent.id, &categories, agent.created)
    })
}

/// Parses `YYYY-MM-DD`.
fn parse_date(text: &str) -> Result<Date, CliError> {
    assent_journal::parse_due_date(text).map_err(|e| {
        CliError::failed(format!(
            "invalid due date {text:?}: expected YYYY-MM-DD ({e})"
        ))
    })
}

/// `assent task create`.
pub async fn task_create(ctx: &Ctx, args: TaskCreateArgs) -> Result<Output, CliError> {
    let new = NewTask {
        title: args.title,
        category: Some(args.category),
        status: args.status,
        priority: args.priority,
        estimate_minutes: args.estimate,
        due_date: args.due.as_deref().map(parse_date).transpose()?,
        labels: args.labels,
        checklist: args.checklist,
    };
    let id = Uuid::new_v4().to_string();
    let store = ctx.store();
    let mut tx = store.begin_write().await?;
    let task = create_task(&mut tx, &id, &new, store.host_id(), ctx.now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Output::either(ctx.json, &task, || render::task(&task))
}

/// `assent task show`.
pub async fn task_show(ctx: &Ctx, args: TaskShowArgs) -> Result<Output, CliError> {
    let mut conn = ctx.connection().await?;
    let task = load_task(&mut conn, args.id.trim())
        .await?
        .ok_or_else(|| CliError::failed(format!("no task {:?}", args.id)))?;
    Output::either(ctx.json, &task, || render::task(&task))
}

/// Reads and parses the tool calls of a wake from `path` (stdin for `None` or `-`),
/// at most [`MAX_CALLS_BYTES`], in `format` or the dialect their shape shows.
pub fn read_calls(path: Option<&Path>, format: Option<Dialect>) -> Result<ParsedCalls, CliError> {
    let (source, bytes) = match path.filter(|p| p.as_os_str() != "-") {
        Some(path) => {
            let source = path.display().to_string();
            let file = std::fs::File::open(path).map_err(|e| {
                CliError::failed(format!("cannot read tool calls from {source}: {e}"))
            })?;
            let bytes = read_limited(file, &source)?;
            (source, bytes)
        }
        None => {
            let stdin = std::io::stdin();
            if std::io::IsTerminal::is_terminal(&stdin) {
                return Err(CliError::failed(
                    "no tool calls: pipe them into stdin or pass --calls FILE",
                ));
            }
            let source = "stdin".to_owned();
            let bytes = read_limited(stdin.lock(), &source)?;
            (source, bytes)
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(CliError::failed(format!(
            "no tool calls: {source} is empty"
        )));
    }
    let document: Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError::failed(format!("tool calls in {source} are not valid JSON: {e}")))?;
    parse_calls(&document, format)
        .map_err(|e| CliError::failed(format!("tool calls in {source}: {e}")))
}

fn read_limited(reader: impl Read, source: &str) -> Result<Vec<u8>, CliError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_CALLS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError::failed(format!("cannot read tool calls from {source}: {e}")))?;
    if bytes.len() as u64 > MAX_CALLS_BYTES {
        return Err(CliError::failed(format!(
            "tool calls in {source} exceed the limit of {} MiB",
            MAX_CALLS_BYTES / (1024 * 1024)
        )));
    }
    Ok(bytes)
}

/// `assent wake`.
///
/// With `--json`, `messages` holds the replies as the tool-result messages of the
/// calls' dialect (or `--reply-format`'s), beside the unchanged `responses`.
pub async fn wake(ctx: &Ctx, args: WakeArgs, parsed: ParsedCalls) -> Result<Output, CliError> {
    let target = args.about().ok_or_else(|| {
        CliError::Usage("name the target: --task ID or --target KIND:ID".to_owned())
    })?;
    let run_key = args.run_key.unwrap_or_else(|| Uuid::new_v4().to_string());
    let mut request = WakeRequest::new(args.agent, target, run_key, parsed.calls.clone());
    if let Some(thread) = args.thread {
        request.thread_id = thread;
    }
    let outcome = ctx.engine.wakes().wake(request.clone(), ctx.now).await?;
    let mut body = wake_json(&outcome);
    if ctx.json {
        let format = args.reply_format.unwrap_or(parsed.dialect);
        body["messages"] = wake_messages(&parsed, format, &outcome).map_err(|e| {
            CliError::failed(format!("the wake's replies do not answer its calls: {e}"))
        })?;
    }
    Output::either(ctx.json, &body, || render::wake(&request, &outcome))
}

/// `assent tools`: always JSON, since it is meant to be passed to an SDK as it is.
pub async fn tools(ctx: &Ctx, args: ToolsArgs) -> Result<Output, CliError> {
    let mut conn = ctx.connection().await?;
    let policy = agents::policy(&mut conn, args.agent.trim())
        .await?
        .ok_or_else(|| CliError::failed(format!("no agent {:?}", args.agent)))?;
    let definitions = tool_definitions(ctx.engine.registry(), &policy, args.format)
        .map_err(|e| CliError::failed(e.to_string()))?;
    Output::json(&definitions)
}

/// `assent pending`.
pub async fn pending(ctx: &Ctx, args: PendingArgs) -> Result<Output, CliError> {
    let filter = change_sets::PendingFilter {
        target: args.about(),
        agent_id: args.agent,
        limit: None,
    };
    let mut conn = ctx.connection().await?;
    let sets = change_sets::pending(&mut conn, &filter).await?;
    let listed: Vec<SetView<'_>> = sets.iter().map(SetView::of).collect();
    Output::either(ctx.json, &listed, || render::pending(&sets))
}

/// A change-set id from the command line.
fn set_id(text: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(text.trim())
        .map_err(|e| CliError::failed(format!("invalid change set id {text:?}: {e}")))
}

/// `assent confirm`.
pub async fn confirm(ctx: &Ctx, args: ConfirmArgs) -> Result<Output, CliError> {
    let set = set_id(&args.set)?;
    let service = ctx.engine.confirmations();
    match args.index {
        Some(index) if !args.all => {
            let outcome = service.confirm_item(set, index, ctx.now).await?;
            Output::either(ctx.json, &confirmed_json(&outcome), || {
                render::confirmed(index, &outcome)
            })
        }
        _ => {
            let result = service.confirm_all(set, ctx.now).await?;
            let failed = result
                .items
                .iter()
                .filter(|(_, _, r)| matches!(r, ItemResult::Failed(_)))
                .count();
            let mut output = Output::either(ctx.json, &confirm_all_json(&result), || {
                render::confirm_all(&result)
            })?;
            if failed > 0 {
                output.failure = Some(CliError::failed(format!(
                    "{failed} of {} item(s) could not be confirmed",
                    result.items.len()
                )));
            }
            Ok(output)
        }
    }
}

/// `assent reject`.
pub async fn reject(ctx: &Ctx, args: RejectArgs) -> Result<Output, CliError> {
    let set = set_id(&args.item.set)?;
    let decision = ctx
        .engine
        .confirmations()
        .reject_item(set, args.item.index, args.reason, ctx.now)
        .await?;
    Output::either(ctx.json, &decision, || render::decision(&decision))
}

/// `assent edit`.
pub async fn edit(ctx: &Ctx, args: EditArgs) -> Result<Output, CliError> {
    let set = set_id(&args.item.set)?;
    let new_args: Value = serde_json::from_str(&args.args)
        .map_err(|e| CliError::failed(format!("--args is not valid JSON: {e}")))?;
    if !new_args.is_object() {
        return Err(CliError::failed("--args must be a JSON object"));
    }
    let outcome = ctx
        .engine
        .confirmations()
        .edit_and_confirm(set, args.item.index, new_args, ctx.now)
        .await?;
    Output::either(ctx.json, &confirmed_json(&outcome), || {
        render::confirmed(args.item.index, &outcome)
    })
}

/// `assent defer`.
pub async fn defer(ctx: &Ctx, args: ItemArgs) -> Result<Output, CliError> {
    let set = set_id(&args.set)?;
    let decision = ctx
        .engine
        .confirmations()
        .defer_item(set, args.index, ctx.now)
        .await?;
    Output::either(ctx.json, &decision, || render::decision(&decision))
}

/// `assent dismiss`.
pub async fn dismiss(ctx: &Ctx, args: DismissArgs) -> Result<Output, CliError> {
    let set = set_id(&args.set)?;
    let decisions = ctx
        .engine
        .confirmations()
        .dismiss(set, args.reason, ctx.now)
        .await?;
    Output::either(ctx.json, &decisions, || render::decisions(&decisions))
}

/// `assent expire`.
pub async fn expire(ctx: &Ctx, args: ExpireArgs) -> Result<Output, CliError> {
    let ttl = args.ttl.unwrap_or(DEFAULT_EXPIRY_TTL);
    let expired = ctx.engine.confirmations().expire(ctx.now, ttl).await?;
    Output::either(ctx.json, &json!({"expired": expired}), || {
        render::expired(&expired, ttl)
    })
}

/// `assent history`.
pub async fn history(ctx: &Ctx, args: HistoryArgs) -> Result<Output, CliError> {
    let section = ctx
        .engine
        .confirmations()
        .history(&args.agent, args.about().as_ref(), args.limit)
        .await?;
    Output::either(ctx.json, &json!({"history": section}), || {
        render::history(section.as_deref(), &args.agent)
    })
}

/// `assent audit`.
pub async fn audit_trail(ctx: &Ctx, args: AuditArgs) -> Result<Output, CliError> {
    let filter = match (args.about(), args.run) {
        (Some(target), _) => audit::AuditFilter::Target(target),
        (None, Some(run)) => audit::AuditFilter::Run(run),
        (None, None) => audit::AuditFilter::All,
    };
    let mut conn = ctx.connection().await?;
    let records = audit::list(&mut conn, &filter, args.limit).await?;
    Output::either(ctx.json, &records, || render::audit(&records))
}

/// `assent outbox`.
pub async fn outbox_messages(ctx: &Ctx, args: OutboxArgs) -> Result<Output, CliError> {
    let mut conn = ctx.connection().await?;
    let messages = outbox::undelivered(&mut conn, args.limit).await?;
    Output::either(ctx.json, &messages, || render::outbox(&messages))
}

/// `assent grants` and `assent grants revoke ID`.
pub async fn grants(ctx: &Ctx, args: GrantsArgs) -> Result<Output, CliError> {
    if let Some(GrantsCommand::Revoke(revoke)) = args.command {
        let id = Uuid::parse_str(revoke.id.trim())
            .map_err(|e| CliError::failed(format!("invalid grant id {:?}: {e}", revoke.id)))?;
        let mut tx = ctx.store().begin_write().await?;
        let revocation = delegation::revoke_grant(&mut tx, id, ctx.now).await?;
        tx.commit().await.map_err(StoreError::from)?;
        return match revocation {
            Revocation::Revoked(grant) => {
                Output::either(ctx.json, &grant, || render::grant_revoked(&grant))
            }
            Revocation::AlreadyRevoked(grant) => Err(CliError::Conflict(format!(
                "grant {id} was already revoked at {}",
                render::time(grant.revoked_at.unwrap_or(ctx.now))
            ))),
            Revocation::NotFound => Err(CliError::from(ConfirmError::GrantNotFound(id))),
        };
    }
    let filter = delegation::GrantFilter {
        agent_path: args.agent,
        tool_name: args.tool,
        include_revoked: args.all,
    };
    let mut conn = ctx.connection().await?;
    let grants = delegation::list_grants(&mut conn, &filter).await?;
    Output::either(ctx.json, &grants, || render::grants(&grants))
}
