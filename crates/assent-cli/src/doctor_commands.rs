//! `assent doctor [--fix] [--canary] [--project DIR]`: every door of Assent installed on
//! this machine for this project (the six agents' hook settings, project, local and
//! user; the MCP client configurations that run `assent mcp`), and per door whether a
//! failure of Assent blocks the call or lets it through, the hook's timeout against its
//! wait, whether the program it names runs, the mode, owner and place of each
//! database they name, and the exposure of each `assent serve` recorded beside those
//! databases (`serve_record`: its address, `--public-url` scheme and token file). Exit
//! 0 when every door blocks on failure, 1 when one lets a call through (or a database
//! or token is open to other users, or a server listens beyond loopback in the clear).
//!
//! `--fix` mends what it safely can (the agent's fail-closed setting, a timeout below
//! the wait, `async`, database and token file modes), writes each settings file whole
//! and atomically with everything else in it kept, and says each change. `--canary`
//! fires one harmless call through each door with Assent's binary missing
//! (`doctor_canary`) and says whether it was blocked.

use crate::CliError;
use crate::context::Output;
use assent_hook::AgentKind;
use assent_hook::doctor::{self, Door, Program, Severity};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `assent doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Repair what can be repaired safely (each agent's fail-closed setting, a timeout
    /// below the hook's wait, file modes), keeping every other setting, and say each
    /// change.
    #[arg(long)]
    pub fix: bool,
    /// Fire one harmless call through each hook with Assent's binary made missing, with
    /// the real agent where it is installed (Claude Code, Gemini CLI; against a scripted
    /// model served by the doctor on loopback, no credentials), else by feeding the hook
    /// the agent's event; say whether the call was blocked.
    #[arg(long)]
    pub canary: bool,
    /// The project folder whose settings are read; default: the current one.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
}

/// Where a settings file lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// In the project, committed with it.
    Project,
    /// In the project, this person's own.
    Local,
    /// In the home folder.
    User,
}

/// One finding, as reported.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct FindingOut {
    severity: &'static str,
    text: String,
    fixable: bool,
}

/// One hook of ours, as reported.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct HookOut {
    kind: &'static str,
    file: String,
    scope: Scope,
    event: String,
    at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    url: Option<String>,
    /// `blocks` or `lets the call through`, for a failure of Assent.
    on_failure: &'static str,
    timeout_secs: u64,
    needed_secs: u64,
    findings: Vec<FindingOut>,
    rests_on: &'static str,
}

/// One `assent mcp` entry of an MCP client's configuration.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct GatewayOut {
    file: String,
    scope: Scope,
    server: String,
    command: String,
    on_failure: &'static str,
    findings: Vec<FindingOut>,
    /// The command line as the client runs it, for the canary (secrets and all: never
    /// shown).
    #[serde(skip)]
    words: Vec<String>,
}

/// One database a door names.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct DatabaseOut {
    url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token_file: Option<String>,
    findings: Vec<FindingOut>,
}

/// One start of `assent serve` recorded beside a database, and what is unsafe about
/// its exposure.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ServeOut {
    /// The database it serves (redacted).
    database: String,
    /// The record it was read from.
    record: String,
    addr: String,
    /// Whether it listens on loopback only.
    loopback: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    public_url: Option<String>,
    /// The token file, with its mode (checked with the database's files).
    #[serde(skip_serializing_if = "Option::is_none")]
    token_file: Option<String>,
    /// Where its token came from: `given`, `stored`, `generated`, `ephemeral`.
    token: String,
    mcp_gateway: bool,
    pid: u32,
    /// Whether its process still runs (absent where that cannot be told).
    #[serde(skip_serializing_if = "Option::is_none")]
    running: Option<bool>,
    started_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    stopped_at: Option<String>,
    findings: Vec<FindingOut>,
}

/// An agent's version, as its own `--version` says.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct AgentOut {
    kind: &'static str,
    program: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
}

/// The whole report (`--json`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    safe: bool,
    project: String,
    agents: Vec<AgentOut>,
    hooks: Vec<HookOut>,
    gateways: Vec<GatewayOut>,
    databases: Vec<DatabaseOut>,
    serve: String,
    /// Each `assent serve` recorded beside a database above, with its exposure.
    serves: Vec<ServeOut>,
    /// About the settings files themselves (who may change them).
    settings_files: Vec<FindingOut>,
    changes: Vec<String>,
    canaries: Vec<crate::doctor_canary::Canary>,
    notes: Vec<String>,
}

/// A settings file found, read.
struct Found {
    kind: AgentKind,
    scope: Scope,
    path: PathBuf,
    settings: Value,
}

/// Runs `assent doctor`.
pub async fn run(db: Option<String>, json: bool, args: DoctorArgs) -> Result<Output, CliError> {
    let here = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    let project = match args.project {
        Some(dir) if dir.is_dir() => here.join(dir),
        Some(dir) => {
            return Err(CliError::Usage(format!(
                "--project {}: no such folder",
                dir.display()
            )));
        }
        None => here.clone(),
    };
    let home = etcetera::home_dir().ok();
    let mut notes = Vec::new();
    let mut changes = Vec::new();
    let mut found = Vec::new();
    for (kind, scope, path) in settings_files(&project, home.as_deref()) {
        let Some(mut settings) = read_json(&path, &mut notes) else {
            continue;
        };
        if args.fix {
            let (mended, said) = doctor::repair(kind, settings.clone());
            if !said.is_empty() {
                write_atomically(&path, &mended)?;
                changes.extend(said.into_iter().map(|c| format!("{}: {c}", path.display())));
                settings = mended;
            }
        }
        found.push(Found {
            kind,
            scope,
            path,
            settings,
        });
    }
    let this = std::env::current_exe()
        .ok()
        .and_then(|p| p.canonicalize().ok());
    let program = |name: &str| program_state(name, this.as_deref());
    let mut hooks = Vec::new();
    let mut databases: Vec<String> = db
        .clone()
        .or_else(|| std::env::var("ASSENT_DATABASE_URL").ok())
        .filter(|url| !url.trim().is_empty())
        .into_iter()
        .collect();
    // Nothing named: the default database, where `assent serve` and the hooks go by
    // default, when it exists.
    if databases.is_empty()
        && let Some(file) = crate::database::default_file().filter(|f| f.is_file())
    {
        databases.push(format!("sqlite://{}", file.display()));
    }
    let mut doors_of: Vec<(usize, Vec<Door>)> = Vec::new();
    let mut file_findings = Vec::new();
    for (i, file) in found.iter().enumerate() {
        for at in doctor::unrecognised(&file.settings) {
            notes.push(format!(
                "{} {at}: a command that mentions assent's hook but is not one the doctor can read (a wrapper?): not checked",
                file.path.display()
            ));
        }
        for finding in doctor::disabled(file.kind, &file.settings) {
            let mut out = finding_out(&finding);
            out.text = format!("{}: {}", file.path.display(), out.text);
            file_findings.push(out);
        }
        let doors = doctor::inspect(file.kind, &file.settings, &program);
        if !doors.is_empty()
            && let Some(finding) = settings_mode(&file.path, args.fix, &mut changes)
        {
            file_findings.push(finding);
        }
        for door in &doors {
            if let Some(url) = door.command.as_deref().and_then(doctor::command_db) {
                databases.push(url);
            }
            let open = door
                .findings
                .iter()
                .any(|f| f.severity == Severity::FailOpen);
            hooks.push(HookOut {
                kind: file.kind.as_str(),
                file: file.path.display().to_string(),
                scope: file.scope,
                event: door.event.clone(),
                at: door.at.clone(),
                command: door.command.clone(),
                url: door.url.clone(),
                on_failure: if !is_gate(&door.event) {
                    "records only (after the tool ran)"
                } else if open {
                    "lets the call through"
                } else {
                    "blocks"
                },
                timeout_secs: door.timeout.as_secs(),
                needed_secs: door.needed.as_secs(),
                findings: door.findings.iter().map(finding_out).collect(),
                rests_on: doctor::contract(file.kind).rests_on,
            });
        }
        if !doors.is_empty() {
            doors_of.push((i, doors));
        }
    }
    // Copilot CLI skips every hook of the repository when its settings say so.
    if doors_of
        .iter()
        .any(|(i, _)| found[*i].kind == AgentKind::Copilot)
    {
        for name in [
            ".github/copilot/settings.json",
            ".github/copilot/settings.local.json",
        ] {
            let path = project.join(name);
            if !path.is_file() {
                continue;
            }
            if let Some(settings) = read_json(&path, &mut notes)
                && settings.get("disableAllHooks").and_then(Value::as_bool) == Some(true)
            {
                file_findings.push(FindingOut {
                    severity: "fail-open",
                    text: format!(
                        "{}: \"disableAllHooks\": true: Copilot CLI runs none of this repository's hooks, Assent's included",
                        path.display()
                    ),
                    fixable: false,
                });
            }
        }
    }
    let gateways = gateways(
        &project,
        home.as_deref(),
        &program,
        &mut databases,
        &mut notes,
    );
    databases.sort();
    databases.dedup();
    let serves: Vec<ServeOut> = databases
        .iter()
        .flat_map(|url| serves_of(url, &here, &mut notes))
        .collect();
    let databases: Vec<DatabaseOut> = databases
        .iter()
        .map(|url| database(url, &project, &here, args.fix, &mut changes))
        .collect();
    let mut kinds: Vec<AgentKind> = found
        .iter()
        .filter(|f| doors_of.iter().any(|(i, _)| found[*i].kind == f.kind))
        .map(|f| f.kind)
        .collect();
    kinds.dedup();
    let mut agents = Vec::new();
    for kind in kinds {
        let program = agent_program(kind);
        agents.push(AgentOut {
            kind: kind.as_str(),
            program,
            version: version(program).await,
        });
    }
    let mut canaries = Vec::new();
    if args.canary {
        for (i, doors) in &doors_of {
            let file = &found[*i];
            if !doors
                .iter()
                .any(|d| d.command.is_some() && is_gate(&d.event))
            {
                continue;
            }
            canaries.push(
                crate::doctor_canary::fire(
                    file.kind,
                    file.scope == Scope::User,
                    file.scope == Scope::Local,
                    &file.path,
                    &file.settings,
                    doors,
                )
                .await,
            );
        }
    }
    if args.canary {
        for gateway in &gateways {
            canaries.push(crate::doctor_canary::gateway(&gateway.file, &gateway.words).await);
        }
    }
    let open_hooks = hooks
        .iter()
        .flat_map(|h| &h.findings)
        .chain(&file_findings)
        .chain(gateways.iter().flat_map(|g| &g.findings))
        .chain(databases.iter().flat_map(|d| &d.findings))
        .chain(serves.iter().flat_map(|s| &s.findings))
        .filter(|f| f.severity == "fail-open")
        .count();
    let let_through = canaries.iter().filter(|c| c.let_through()).count();
    let report = Report {
        safe: open_hooks == 0 && let_through == 0,
        project: project.display().to_string(),
        agents,
        hooks,
        gateways,
        databases,
        serve: "`assent serve` records its address, --public-url and token file beside its database (DB.serve.json) at each start: each recorded serve is judged below; run it on 127.0.0.1 (its default) or behind HTTPS with an https --public-url".to_owned(),
        serves,
        settings_files: file_findings,
        changes,
        canaries,
        notes,
    };
    let mut output = if json {
        Output::json(&report)?
    } else {
        Output::text(render(&report))
    };
    if !report.safe {
        output.failure = Some(CliError::failed(format!(
            "{open_hooks} fail-open finding(s), {let_through} canary call(s) let through: see above"
        )));
    }
    Ok(output)
}

/// Whether a hook of `event` runs before the tool, where its failure decides.
fn is_gate(event: &str) -> bool {
    matches!(
        event,
        "PreToolUse"
            | "preToolUse"
            | "BeforeTool"
            | "PermissionRequest"
            | "beforeShellExecution"
            | "beforeMCPExecution"
    )
}

fn finding_out(finding: &doctor::Finding) -> FindingOut {
    FindingOut {
        severity: match finding.severity {
            Severity::FailOpen => "fail-open",
            Severity::Warning | _ => "warning",
        },
        text: finding.text.clone(),
        fixable: finding.fixable,
    }
}

/// Every settings file `assent hook install` writes (or could have), for each kind and
/// scope, that exists: the project's, this person's in the project, the user's.
fn settings_files(project: &Path, home: Option<&Path>) -> Vec<(AgentKind, Scope, PathBuf)> {
    let mut files = Vec::new();
    for kind in AgentKind::ALL {
        let shared = assent_hook::install::settings_file(kind);
        files.push((kind, Scope::Project, project.join(shared)));
        if let Some(local) = assent_hook::install::local_settings_file(kind) {
            files.push((kind, Scope::Local, project.join(local)));
        }
        if let Some(home) = home
            && home != project
        {
            files.push((kind, Scope::User, home.join(shared)));
        }
    }
    files.retain(|(_, _, path)| path.is_file());
    files
}

/// The JSON in `path`, or `None` with a note when it cannot be read or is not JSON.
fn read_json(path: &Path, notes: &mut Vec<String>) -> Option<Value> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => {
            notes.push(format!("cannot read {}: {e}", path.display()));
            return None;
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice(&bytes) {
        Ok(value) => Some(value),
        Err(e) => {
            notes.push(format!("{} is not JSON ({e}): not read", path.display()));
            None
        }
    }
}

/// Writes `value` over `path`: the old file kept beside it as `FILE.assent-backup`, the
/// new one written beside it with the old one's permissions and renamed over it, so the
/// agent never reads half a file.
fn write_atomically(path: &Path, value: &Value) -> Result<(), CliError> {
    // A settings file linked from elsewhere (a dotfiles repository) is written where it
    // lives, and the link kept.
    let path = &path
        .canonicalize()
        .map_err(|e| CliError::failed(format!("cannot read {}: {e}", path.display())))?;
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
    let with = |suffix: &str| {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    let failed =
        |e: std::io::Error| CliError::failed(format!("cannot write {}: {e}", path.display()));
    let permissions = std::fs::metadata(path).map_err(failed)?.permissions();
    std::fs::copy(path, with(".assent-backup")).map_err(failed)?;
    let temporary = with(".assent-new");
    std::fs::write(&temporary, format!("{text}\n")).map_err(failed)?;
    std::fs::set_permissions(&temporary, permissions).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// Whether `name` (a path, or a name looked up on `PATH`) runs, and whether it is
/// `this` binary.
fn program_state(name: &str, this: Option<&Path>) -> Program {
    let Some(path) = crate::doctor_canary::resolve_program(name) else {
        return Program::Missing;
    };
    let real = path.canonicalize().ok();
    Program::Runs {
        this: real.is_some() && real.as_deref() == this,
    }
}

/// The program that runs each kind of agent, for its version.
fn agent_program(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::ClaudeCode => "claude",
        AgentKind::Codex => "codex",
        AgentKind::Cursor => "cursor-agent",
        AgentKind::Copilot => "copilot",
        AgentKind::Vscode => "code",
        AgentKind::Gemini => "gemini",
    }
}

/// `program --version`'s first line, when it is on `PATH` and answers within 10 s.
async fn version(program: &str) -> Option<String> {
    let path = crate::doctor_canary::resolve_program(program)?;
    let out = crate::doctor_canary::run_bounded(
        tokio::process::Command::new(path).arg("--version"),
        None,
        Duration::from_secs(10),
    )
    .await?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .map(str::to_owned)
}

/// The MCP client configurations that may name `assent mcp`: `(file, scope, the
/// pointer to their server map)`.
fn mcp_files(project: &Path, home: Option<&Path>) -> Vec<(PathBuf, Scope, &'static str)> {
    let mut files = vec![
        (project.join(".mcp.json"), Scope::Project, "/mcpServers"),
        (
            project.join(".cursor/mcp.json"),
            Scope::Project,
            "/mcpServers",
        ),
        (project.join(".vscode/mcp.json"), Scope::Project, "/servers"),
        (
            project.join(".gemini/settings.json"),
            Scope::Project,
            "/mcpServers",
        ),
    ];
    if let Some(home) = home
        && home != project
    {
        files.extend([
            (home.join(".claude.json"), Scope::User, "/mcpServers"),
            (home.join(".cursor/mcp.json"), Scope::User, "/mcpServers"),
            (
                home.join(".gemini/settings.json"),
                Scope::User,
                "/mcpServers",
            ),
        ]);
    }
    files.retain(|(path, _, _)| path.is_file());
    files
}

/// Every server entry of an MCP client's configuration that runs `assent … mcp`.
fn gateways(
    project: &Path,
    home: Option<&Path>,
    program: &dyn Fn(&str) -> Program,
    databases: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Vec<GatewayOut> {
    let mut out = Vec::new();
    for (path, scope, pointer) in mcp_files(project, home) {
        let Some(config) = read_json(&path, notes) else {
            continue;
        };
        let mut maps = vec![config.pointer(pointer).cloned()];
        // Claude Code keeps each project's servers in ~/.claude.json too.
        if let Some(projects) = config.get("projects").and_then(Value::as_object) {
            maps.extend(projects.values().map(|p| p.get("mcpServers").cloned()));
        }
        for map in maps.into_iter().flatten() {
            let Some(map) = map.as_object() else {
                continue;
            };
            for (name, entry) in map {
                let Some(command) = entry.get("command").and_then(Value::as_str) else {
                    continue;
                };
                let args: Vec<String> = entry
                    .get("args")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_owned)
                            .collect()
                    })
                    .unwrap_or_default();
                let words: Vec<String> = std::iter::once(command.to_owned())
                    .chain(args.iter().cloned())
                    .collect();
                let runs_assent = command.ends_with("assent") && args.iter().any(|a| a == "mcp");
                if !runs_assent {
                    continue;
                }
                if let Some(i) = words.iter().position(|w| w == "--db")
                    && let Some(url) = words.get(i + 1)
                {
                    databases.push(url.clone());
                }
                let mut findings = Vec::new();
                // The same upstream also listed beside the gateway: a way around it.
                let upstreams = upstreams_of(&words);
                for (other, described) in map.iter().filter_map(|(n, e)| Some((n, describe(e)?))) {
                    if other != name && upstreams.contains(&described) {
                        findings.push(FindingOut {
                            severity: "fail-open",
                            text: format!(
                                "server {other:?} of the same file runs {described} without the gateway: the agent can call it directly (remove that entry)"
                            ),
                            fixable: false,
                        });
                    }
                }
                if program(command) == Program::Missing {
                    findings.push(FindingOut {
                        severity: "warning",
                        text: format!(
                            "{command} does not exist or cannot run: the client has none of this server's tools"
                        ),
                        fixable: false,
                    });
                }
                out.push(GatewayOut {
                    file: path.display().to_string(),
                    scope,
                    server: name.clone(),
                    command: assent_mcp::redact::redact(&words.join(" ")),
                    on_failure: "blocks",
                    findings,
                    words,
                });
            }
        }
    }
    if home.is_some_and(|h| h.join(".codex/config.toml").is_file()) {
        notes.push(
            "~/.codex/config.toml is TOML: its [mcp_servers] are not read by this doctor"
                .to_owned(),
        );
    }
    out
}

/// An MCP client's server entry as one line: its command and arguments, or its URL
/// (redacted).
fn describe(entry: &Value) -> Option<String> {
    if let Some(command) = entry.get("command").and_then(Value::as_str) {
        let args = entry.get("args").and_then(Value::as_array);
        let words: Vec<&str> = std::iter::once(command)
            .chain(args.into_iter().flatten().filter_map(Value::as_str))
            .collect();
        return Some(words.join(" "));
    }
    entry
        .get("url")
        .and_then(Value::as_str)
        .map(assent_mcp::redact::redact)
}

/// The upstreams an `assent … mcp` command line serves, each as [`describe`] shows
/// an entry: the servers of its `--config FILE`, or its `-- CMD ARGS` / `--command`.
fn upstreams_of(words: &[String]) -> Vec<String> {
    if let Some(i) = words.iter().position(|w| w == "--config")
        && let Some(file) = words.get(i + 1)
        && let Ok(text) = std::fs::read_to_string(file)
        && let Ok(config) = assent_mcp::config::parse(&text)
    {
        return config.servers.iter().map(|s| s.source.describe()).collect();
    }
    if let Some(i) = words.iter().position(|w| w == "--") {
        return vec![words[i + 1..].join(" ")];
    }
    if let Some(i) = words.iter().position(|w| w == "--command")
        && let Some(program) = words.get(i + 1)
    {
        let args = words
            .windows(2)
            .filter(|pair| pair[0] == "--arg")
            .map(|pair| pair[1].as_str());
        return vec![
            std::iter::once(program.as_str())
                .chain(args)
                .collect::<Vec<_>>()
                .join(" "),
        ];
    }
    Vec::new()
}

/// A settings file other local users may change (and so remove the hook from): a
/// fail-open finding, or with `fix` (a file of this user's) their write permission
/// removed.
fn settings_mode(path: &Path, fix: bool, changes: &mut Vec<String>) -> Option<FindingOut> {
    let (mode, owner) = mode_and_owner(path)?;
    // Root may change any file anyway: only another ordinary user is news.
    let mine = owner == current_uid() || owner == 0;
    if mine && mode & 0o022 == 0 {
        return None;
    }
    if fix && mine && set_mode(path, mode & !0o022) {
        changes.push(format!(
            "{}: mode {mode:o} -> {:o}",
            path.display(),
            mode & !0o022
        ));
        return None;
    }
    Some(FindingOut {
        severity: "fail-open",
        text: if mine {
            format!(
                "{} has mode {mode:o}: other local users may change it and remove the hook",
                path.display()
            )
        } else {
            format!(
                "{} belongs to another user (uid {owner}), who may change it and remove the hook",
                path.display()
            )
        },
        fixable: mine,
    })
}

/// What is found about the database at `url`: for a SQLite file, its mode and owner,
/// whether it lies inside the project, and its token file's mode; with `fix`, group
/// and other permissions removed from files of this user's.
fn database(
    url: &str,
    project: &Path,
    here: &Path,
    fix: bool,
    changes: &mut Vec<String>,
) -> DatabaseOut {
    let shown = assent_mcp::redact::redact(url);
    let mut out = DatabaseOut {
        url: shown,
        mode: None,
        owner: None,
        token_file: None,
        findings: Vec::new(),
    };
    let Some(file) = assent_store::StoreOptions::new(url).sqlite_file() else {
        return out;
    };
    let file = here.join(file);
    if let Some(inside) = crate::database::inside(url, project, here) {
        out.findings.push(FindingOut {
            severity: "fail-open",
            text: format!(
                "{} is inside the project, where the agent or its repository could put rules of their own (the hook refuses it and blocks every call)",
                inside.display()
            ),
            fixable: false,
        });
    }
    let token = assent_server::token::token_path(url).map(|t| here.join(t));
    for (path, is_token) in [(Some(file.clone()), false), (token, true)] {
        let Some(path) = path else { continue };
        let Some((mode, owner)) = mode_and_owner(&path) else {
            if !is_token {
                out.findings.push(FindingOut {
                    severity: "warning",
                    text: format!("{} does not exist yet", path.display()),
                    fixable: false,
                });
            }
            continue;
        };
        if is_token {
            out.token_file = Some(format!("{} (mode {mode:o})", path.display()));
        } else {
            out.mode = Some(format!("{mode:o}"));
            out.owner = Some(owner);
        }
        let mine = owner == current_uid() || owner == 0;
        if !mine {
            out.findings.push(FindingOut {
                severity: "fail-open",
                text: format!(
                    "{} belongs to another user (uid {owner}), who can change its rules",
                    path.display()
                ),
                fixable: false,
            });
        }
        if mode & 0o077 == 0 {
            continue;
        }
        // Anyone who can read the token can act as a reviewer and approve.
        let severity = if mode & 0o022 != 0 || is_token {
            "fail-open"
        } else {
            "warning"
        };
        if fix && mine && set_mode(&path, 0o600) {
            changes.push(format!("{}: mode {mode:o} -> 600", path.display()));
            if !is_token {
                out.mode = Some("600".to_owned());
            }
            for suffix in ["-wal", "-shm"] {
                let mut side = path.as_os_str().to_owned();
                side.push(suffix);
                let side = PathBuf::from(side);
                if side.exists() && set_mode(&side, 0o600) {
                    changes.push(format!("{}: mode -> 600", side.display()));
                }
            }
            continue;
        }
        out.findings.push(FindingOut {
            severity,
            text: format!(
                "{} has mode {mode:o}: other local users may {} (`chmod 600`)",
                path.display(),
                match (mode & 0o022 != 0, is_token) {
                    (true, _) => "change it",
                    (false, true) => "read it and act as a reviewer of the API",
                    (false, false) => "read it",
                }
            ),
            fixable: mine,
        });
    }
    out
}

/// The starts of `assent serve` recorded beside the SQLite database at `url`, each
/// with what is unsafe about its exposure.
fn serves_of(url: &str, here: &Path, notes: &mut Vec<String>) -> Vec<ServeOut> {
    let Some(record) = crate::serve_record::path(url).map(|p| here.join(p)) else {
        return Vec::new();
    };
    let recorded = match crate::serve_record::read(&record) {
        Ok(recorded) => recorded,
        Err(e) => {
            notes.push(format!("{e}: serve's exposure not checked"));
            return Vec::new();
        }
    };
    recorded
        .into_iter()
        .map(|exposure| {
            let running = if exposure.stopped_at.is_some() {
                Some(false)
            } else {
                crate::serve_record::running(exposure.pid)
            };
            let findings = crate::serve_record::judge(&exposure, running != Some(false))
                .into_iter()
                .map(|(open, text)| FindingOut {
                    severity: if open { "fail-open" } else { "warning" },
                    text: format!("serve {text}"),
                    fixable: false,
                })
                .collect();
            let token_file = exposure.token_file.as_deref().map(|file| {
                let path = here.join(file);
                match mode_and_owner(&path) {
                    Some((mode, _)) => format!("{file} (mode {mode:o})"),
                    None => format!("{file} (gone: the next start writes a new one)"),
                }
            });
            ServeOut {
                database: assent_mcp::redact::redact(url),
                record: record.display().to_string(),
                loopback: exposure
                    .addr
                    .parse::<std::net::SocketAddr>()
                    .is_ok_and(|a| a.ip().is_loopback()),
                addr: exposure.addr,
                public_url: exposure.public_url,
                token_file,
                token: exposure.token,
                mcp_gateway: exposure.mcp_gateway,
                pid: exposure.pid,
                running,
                started_at: exposure.started_at,
                stopped_at: exposure.stopped_at,
                findings,
            }
        })
        .collect()
}

#[cfg(unix)]
fn mode_and_owner(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.mode() & 0o777, meta.uid()))
}

#[cfg(not(unix))]
fn mode_and_owner(_: &Path) -> Option<(u32, u32)> {
    None
}

#[cfg(unix)]
fn current_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    // The owner of a file this process creates is its effective user.
    tempfile::tempfile()
        .and_then(|f| f.metadata())
        .map_or(u32::MAX, |m| m.uid())
}

#[cfg(not(unix))]
fn current_uid() -> u32 {
    0
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).is_ok()
}

#[cfg(not(unix))]
fn set_mode(_: &Path, _: u32) -> bool {
    false
}

/// The report as text.
fn render(report: &Report) -> String {
    let mut out = String::new();
    let line = |out: &mut String, text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    let findings = |out: &mut String, findings: &[FindingOut]| {
        for f in findings {
            let mark = if f.severity == "fail-open" {
                "FAIL-OPEN"
            } else {
                "warning"
            };
            let fix = if f.fixable && mark == "FAIL-OPEN" {
                " (--fix mends it)"
            } else {
                ""
            };
            out.push_str(&format!("      {mark}: {}{fix}\n", f.text));
        }
    };
    line(&mut out, format!("Project: {}", report.project));
    if !report.agents.is_empty() {
        line(&mut out, "Agents:".to_owned());
        for agent in &report.agents {
            line(
                &mut out,
                format!(
                    "  {}: {}",
                    agent.kind,
                    agent
                        .version
                        .clone()
                        .unwrap_or_else(|| format!("`{} --version` not found", agent.program))
                ),
            );
        }
    }
    line(&mut out, "Hooks:".to_owned());
    if report.hooks.is_empty() {
        line(&mut out, "  none of Assent's found".to_owned());
    }
    let mut file = "";
    for hook in &report.hooks {
        if hook.file != file {
            file = &hook.file;
            let scope = match hook.scope {
                Scope::Project => "project",
                Scope::Local => "local",
                Scope::User => "user",
            };
            line(&mut out, format!("  {} {} ({scope})", hook.kind, hook.file));
        }
        line(
            &mut out,
            format!(
                "    {} {}: on failure {}; timeout {} s (its wait needs {} s)",
                hook.event, hook.at, hook.on_failure, hook.timeout_secs, hook.needed_secs
            ),
        );
        findings(&mut out, &hook.findings);
    }
    if !report.gateways.is_empty() {
        line(&mut out, "MCP gateways:".to_owned());
        for gateway in &report.gateways {
            line(
                &mut out,
                format!(
                    "  {} server {:?}: {} (on failure the client has no tools: blocks)",
                    gateway.file, gateway.server, gateway.command
                ),
            );
            findings(&mut out, &gateway.findings);
        }
    }
    if !report.databases.is_empty() {
        line(&mut out, "Databases:".to_owned());
        for db in &report.databases {
            let mut about = Vec::new();
            if let Some(mode) = &db.mode {
                about.push(format!("mode {mode}"));
            }
            if let Some(owner) = db.owner {
                about.push(format!("owner uid {owner}"));
            }
            if let Some(token) = &db.token_file {
                about.push(format!("token file {token}"));
            }
            line(&mut out, format!("  {} {}", db.url, about.join(", ")));
            findings(&mut out, &db.findings);
        }
    }
    if !report.settings_files.is_empty() {
        line(&mut out, "Settings files:".to_owned());
        findings(&mut out, &report.settings_files);
    }
    if report.serves.is_empty() {
        line(&mut out, format!("Serve: {}", report.serve));
    } else {
        line(&mut out, "Serve:".to_owned());
        for serve in &report.serves {
            let state = match serve.running {
                Some(true) => "running",
                Some(false) => "stopped",
                None => "maybe running",
            };
            line(
                &mut out,
                format!(
                    "  {} on {} ({state}, pid {}, started {}){}{}",
                    serve.database,
                    serve.addr,
                    serve.pid,
                    serve.started_at,
                    serve
                        .public_url
                        .as_deref()
                        .map(|u| format!(", public URL {u}"))
                        .unwrap_or_default(),
                    serve
                        .token_file
                        .as_deref()
                        .map(|t| format!(", token file {t}"))
                        .unwrap_or_else(|| format!(", token {}", serve.token)),
                ),
            );
            findings(&mut out, &serve.findings);
        }
    }
    for change in &report.changes {
        line(&mut out, format!("Changed: {change}"));
    }
    for canary in &report.canaries {
        line(&mut out, format!("Canary: {canary}"));
    }
    for note in &report.notes {
        line(&mut out, format!("Note: {note}"));
    }
    line(
        &mut out,
        if report.safe {
            "All doors block when Assent fails.".to_owned()
        } else {
            "A door lets calls through when Assent fails (exit 1).".to_owned()
        },
    );
    out
}
