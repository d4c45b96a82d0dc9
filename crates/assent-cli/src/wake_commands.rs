//! `assent wake` (a wake's tool calls, read in any SDK's dialect) and `assent tools`
//! (the tool definitions an agent may call).

use crate::CliError;
use crate::cli::{ToolsArgs, WakeArgs};
use crate::context::{Ctx, Output};
use crate::render;
use assent_changeset::{ChangesetError, Dialect, ParsedCalls, parse_calls_str, tool_definitions};
use assent_confirm::WakeRequest;
use assent_confirm::agents;
use assent_server::shapes::{WakeWithMessages, wake_json, wake_messages};
use assent_tools::ToolRegistry;
use std::io::Read;
use std::path::Path;
use uuid::Uuid;

/// The most tool-call input a wake reads (4 MiB).
pub const MAX_CALLS_BYTES: u64 = 4 * 1024 * 1024;

/// Reads and parses the tool calls of a wake from `path` (stdin for `None` or `-`),
/// at most [`MAX_CALLS_BYTES`], in `format` or the dialect their shape shows. They
/// are read from their text, so that an MCP request id is answered exactly as sent.
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
    let not_json = |detail: &dyn std::fmt::Display| {
        CliError::failed(format!(
            "tool calls in {source} are not valid JSON: {detail}"
        ))
    };
    let text = std::str::from_utf8(&bytes).map_err(|e| not_json(&e))?;
    parse_calls_str(text, format).map_err(|e| match e {
        ChangesetError::NotJson(detail) => not_json(&detail),
        other => CliError::failed(format!("tool calls in {source}: {other}")),
    })
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
/// calls' dialect (or `--reply-format`'s), beside the unchanged `responses`, each id
/// exactly as its call sent it.
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
    if !ctx.json {
        return Ok(Output::text(render::wake(&request, &outcome)));
    }
    let format = args.reply_format.unwrap_or(parsed.dialect);
    let messages = wake_messages(&parsed, format, &outcome).map_err(|e| {
        CliError::failed(format!("the wake's replies do not answer its calls: {e}"))
    })?;
    Output::json(&WakeWithMessages::new(wake_json(&outcome), messages))
}

/// `assent tools`: always JSON, since it is meant to be passed to an SDK as it is.
///
/// An agent that meets its tools through an MCP gateway (`assent mcp --agent`) is
/// shown the upstream's tools as the gateway last recorded them, not the journal's:
/// those are the tools its calls can reach. On a database where a service's own engine
/// recorded its catalog (its host is not the journal this command composes), any other
/// agent is shown that service's tools; otherwise the journal's. Either way the
/// agent's rules decide what is listed (a denied tool is left out); its categories
/// belong to targets and are checked when a call runs.
pub async fn tools(ctx: &Ctx, args: ToolsArgs) -> Result<Output, CliError> {
    let agent = args.agent.trim();
    let policy = ctx
        .engine
        .policy_in_force(agent, ctx.now)
        .await?
        .ok_or_else(|| CliError::failed(format!("no agent {:?}", args.agent)))?;
    let recorded = match ctx.engine.agent_settings(agent).await? {
        Some(settings) => settings.tools,
        None => Vec::new(),
    };
    // Every `assent` command records the journal's catalog as it opens the database,
    // so only another host's catalog says whose database this is.
    let journal = ctx.engine.host().name();
    let services: Vec<agents::HostTool> = ctx
        .engine
        .admin()
        .service_catalogs()
        .await?
        .into_iter()
        .filter(|tool| tool.host != journal)
        .collect();
    let definitions = if !recorded.is_empty() {
        let registry = assent_mcp::recorded_registry(&recorded)
            .map_err(|e| CliError::failed(e.to_string()))?;
        tool_definitions(&registry, &policy, args.format)
    } else if !services.is_empty() {
        tool_definitions(&services_registry(&services)?, &policy, args.format)
    } else {
        tool_definitions(ctx.engine.registry(), &policy, args.format)
    }
    .map_err(|e| CliError::failed(e.to_string()))?;
    Output::json(&definitions)
}

/// The tools the services' engines recorded, as one registry; a name two hosts list
/// cannot be told apart by a model, so it is refused, naming both.
fn services_registry(recorded: &[agents::HostTool]) -> Result<ToolRegistry, CliError> {
    let mut registry = ToolRegistry::new();
    for (index, tool) in recorded.iter().enumerate() {
        if let Some(first) = recorded[..index]
            .iter()
            .find(|other| other.tool_name == tool.tool_name)
        {
            return Err(CliError::failed(format!(
                "tool {:?} is recorded by two hosts of this database, {:?} and {:?}: \
                 a model could not tell which it calls",
                tool.tool_name, first.host, tool.host
            )));
        }
        let spec = assent_confirm::recorded_spec(tool)?;
        registry
            .register(spec)
            .map_err(|e| CliError::failed(format!("tool {:?}: {e}", tool.tool_name)))?;
    }
    Ok(registry)
}
