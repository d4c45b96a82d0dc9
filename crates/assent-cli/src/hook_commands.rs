//! `assent hook AGENT_KIND --agent NAME`: answers one event of a coding agent's hook
//! (read on stdin) in that agent's dialect on stdout. A malformed event exits 2 with
//! one line on stderr (every one of these agents blocks the call then); any other
//! failure is answered as a denial, so a call is never let through by an error.
//!
//! `assent hook install|uninstall AGENT_KIND --agent NAME [--scope project|local|user]
//! [--print]`: our entries in the agent's settings file, merged into what is there
//! (`assent_hook::install`), the file as it was kept beside it.

use crate::CliError;
use crate::context::Output;
use assent_hook::{AgentKind, Answer, HookOptions, OnTimeout, Phase};
use clap::{Args, ValueEnum};
use serde_json::Value;
use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

/// `assent hook AGENT_KIND --agent NAME [--wait SECS] [--on-timeout ask|deny]
/// [--category C]`, or `assent hook install|uninstall ...`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct HookArgs {
    /// Write or remove the hook entries in an agent's settings file.
    #[command(subcommand)]
    pub action: Option<HookAction>,
    /// The coding agent whose hook calls: claude-code, codex, cursor, copilot, vscode
    /// or gemini.
    #[arg(value_name = "AGENT_KIND", value_parser = parse_kind, required = true)]
    pub kind: Option<AgentKind>,
    /// The Assent agent whose rules (categories, allow|ask|deny, quorums, holds) decide.
    #[arg(long, value_name = "NAME", required = true)]
    pub agent: Option<String>,
    #[command(flatten)]
    pub answer: AnswerArgs,
}

/// How a hook answers: what `install` writes into the command it installs too.
#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The workspace's category, checked against the agent's allowlist.
    #[arg(long, default_value = assent_hook::DEFAULT_CATEGORY, value_name = "CATEGORY")]
    pub category: String,
    /// How long a call that needs a person waits for one, in seconds; default: a few
    /// seconds under the agent's own hook timeout.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=86_400))]
    pub wait: Option<u64>,
    /// When nobody decided in time: `ask` withdraws the item and lets the agent's own
    /// prompt ask (a denial for Codex and Gemini CLI, which cannot ask); `deny` denies
    /// naming the change set, and the same call retried once a person confirmed it is
    /// allowed once.
    #[arg(long, value_enum, default_value_t = OnTimeoutArg::Ask, value_name = "MODE")]
    pub on_timeout: OnTimeoutArg,
}

/// `assent hook install|uninstall`.
#[derive(Debug, clap::Subcommand)]
pub enum HookAction {
    /// Write `assent hook AGENT_KIND --agent NAME` into the agent's settings file (JSON
    /// merged, everything else kept, the file as it was kept beside it as
    /// `FILE.assent-backup`; a second install changes nothing), fail-closed where the
    /// agent allows (`onFailure: "block"`, `failClosed: true`), with `--db` the
    /// database resolved now (never one in the project) and each agent's timeout
    /// above the hook's whole run for `--wait`.
    Install(InstallArgs),
    /// Remove only Assent's entries from the agent's settings file.
    Uninstall(InstallArgs),
}

/// `assent hook install|uninstall AGENT_KIND --agent NAME [--scope project|local|user]
/// [--project DIR] [--print]`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The coding agent: claude-code, codex, cursor, copilot, vscode or gemini.
    #[arg(value_name = "AGENT_KIND", value_parser = parse_kind)]
    pub kind: AgentKind,
    /// The Assent agent whose rules decide.
    #[arg(long, value_name = "NAME")]
    pub agent: String,
    /// The project's settings (in --project, committed with it), this person's own in the
    /// project (`local`: `.claude/settings.local.json`, kept out of the repository), or the
    /// user's (in the home folder).
    #[arg(long, value_enum, default_value_t = Scope::Project, value_name = "SCOPE")]
    pub scope: Scope,
    /// The project folder; default: the current one.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Print the settings as they would be written instead of writing them.
    #[arg(long)]
    pub print: bool,
    /// Claude Code only: an `http` hook posting to `assent serve` at URL (its base,
    /// e.g. `http://127.0.0.1:7700`) instead of a command, blocking the call when the
    /// server cannot answer (`"onFailure": "block"`).
    #[arg(long, value_name = "URL")]
    pub http: Option<String>,
    /// With --http: the environment variable holding the agent token Claude Code sends.
    #[arg(
        long,
        value_name = "VAR",
        default_value = "ASSENT_AGENT_TOKEN",
        requires = "http"
    )]
    pub token_env: String,
    /// Install only: also set a documented starter set of rules for the agent
    /// (`read-only`: its read-only and internal tools, and `git status|diff|log:*`,
    /// `ls:*` on its shell), each through the same rule change as `assent agent
    /// allow`, and print them; with --print, print them and set nothing.
    #[arg(long, value_name = "PRESET", value_parser = parse_preset, conflicts_with = "http")]
    pub preset: Option<assent_hook::preset::Preset>,
    #[command(flatten)]
    pub answer: AnswerArgs,
}

fn parse_preset(text: &str) -> Result<assent_hook::preset::Preset, String> {
    text.parse()
}

/// The values of `--scope`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scope {
    /// The project's settings file.
    Project,
    /// The project's settings of this person only, kept out of the repository
    /// (`.claude/settings.local.json`; Claude Code alone has such a file).
    Local,
    /// The user's settings file, in the home folder.
    User,
}

/// The values of `--on-timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnTimeoutArg {
    /// The agent's own prompt takes over.
    Ask,
    /// Denied; retry after the person decides.
    Deny,
}

fn parse_kind(text: &str) -> Result<AgentKind, String> {
    text.parse()
        .map_err(|e: assent_hook::HookError| e.to_string())
}

/// Runs `assent hook`: an install, an uninstall, or the answer to the event on stdin.
pub async fn run(db: Option<String>, args: HookArgs) -> Result<Output, CliError> {
    // The hook's whole run is counted from here (before the database is opened), so
    // it answers within the agent's timeout whatever the database does.
    let started = tokio::time::Instant::now();
    match args.action {
        Some(HookAction::Install(install)) => return install_with_preset(db, install).await,
        Some(HookAction::Uninstall(install)) if install.preset.is_some() => {
            return Err(CliError::Usage(
                "--preset goes with `assent hook install`; `assent agent unset` removes a rule"
                    .to_owned(),
            ));
        }
        Some(HookAction::Uninstall(install)) => return change_settings(db, install, false),
        None => {}
    }
    let (Some(kind), Some(agent)) = (args.kind, args.agent) else {
        return Err(CliError::Usage(
            "assent hook needs AGENT_KIND and --agent NAME".to_owned(),
        ));
    };
    answer_stdin(db, kind, agent, args.answer, started).await
}

/// Answers the event on stdin: a malformed one exits 2; every failure after it was
/// read (no database, one in the workspace, a busy one) is a denial in the agent's
/// dialect, never an exit the agent might let through.
async fn answer_stdin(
    db: Option<String>,
    kind: AgentKind,
    agent: String,
    args: AnswerArgs,
    started: tokio::time::Instant,
) -> Result<Output, CliError> {
    let mut body = Vec::new();
    std::io::stdin()
        .take(assent_hook::MAX_EVENT_BYTES as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| CliError::Usage(format!("cannot read the hook event on stdin: {e}")))?;
    let event = assent_hook::parse(kind, &body).map_err(|e| CliError::Usage(e.to_string()))?;
    let options = HookOptions {
        kind,
        agent,
        category: args.category,
        wait: args
            .wait
            .map_or_else(|| assent_hook::default_wait(kind), Duration::from_secs),
        on_timeout: match args.on_timeout {
            OnTimeoutArg::Ask => OnTimeout::Ask,
            OnTimeoutArg::Deny => OnTimeout::Deny,
        },
        started,
    };
    let answer = match answer(db, &options, &event).await {
        Ok(answer) => answer,
        Err(error) => {
            tracing::error!(error = %error.one_line(), "the hook could not decide: denied");
            Answer::Deny {
                reason: format!(
                    "Assent could not decide, so the call is refused and did not run (no rule or person refused it): {}",
                    error.one_line()
                ),
            }
        }
    };
    let reply = assent_hook::render(kind, &event, &answer);
    Ok(Output::text(reply.stdout))
}

/// The answer to `event`, from the person's database: never one found in the
/// workspace (the event's `cwd`), where the agent or its repository could have put
/// rules of their own.
async fn answer(
    db: Option<String>,
    options: &HookOptions,
    event: &assent_hook::HookEvent,
) -> Result<Answer, CliError> {
    let db = crate::database::locate_for_agents(db)?;
    let here = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    if let Some(file) = crate::database::inside(&db, std::path::Path::new(&event.cwd), &here) {
        return Ok(Answer::Deny {
            reason: format!(
                "Assent's database {} is inside the workspace {}, where the agent could change its own rules, so Assent refused the call and it did not run (no rule or person refused it): tell the user to give the hook a database outside the workspace (`--db` in the hook's command)",
                file.display(),
                event.cwd
            ),
        });
    }
    let opened = tokio::time::timeout_at(options.run_ends(), crate::database::open_store(&db));
    let Ok(store) = opened.await else {
        return Ok(options.out_of_time());
    };
    let store = store?;
    match event.phase {
        Phase::After => assent_hook::record_ran(&store, options, event)
            .await
            .map(|()| Answer::Recorded)
            .map_err(|e| CliError::Failed(e.into())),
        Phase::Before | Phase::PermissionRequest => assent_hook::decide(&store, options, event)
            .await
            .map_err(|e| CliError::Failed(e.into())),
    }
}

/// The command an install writes: this binary, `--db` (the database resolved now,
/// absolute, so the hook never looks for one in the agent's folder), `hook KIND
/// --agent NAME`, and the answer flags that differ from their defaults.
fn hook_command(
    db: &str,
    kind: AgentKind,
    agent: &str,
    answer: &AnswerArgs,
) -> Result<String, CliError> {
    let program = std::env::current_exe()
        .map_err(|e| CliError::failed(format!("cannot find this program's path: {e}")))?;
    let mut words = vec![shell_word(&program.to_string_lossy())];
    words.extend(["--db".to_owned(), shell_word(db)]);
    words.extend([
        "hook".to_owned(),
        kind.as_str().to_owned(),
        "--agent".to_owned(),
        shell_word(agent),
    ]);
    if answer.category != assent_hook::DEFAULT_CATEGORY {
        words.extend(["--category".to_owned(), shell_word(&answer.category)]);
    }
    if let Some(wait) = answer.wait {
        words.extend(["--wait".to_owned(), wait.to_string()]);
    }
    if answer.on_timeout == OnTimeoutArg::Deny {
        words.extend(["--on-timeout".to_owned(), "deny".to_owned()]);
    }
    Ok(words.join(" "))
}

/// The URL an `http` install writes: `BASE/api/hooks/KIND` with the agent and the
/// answer flags as query parameters.
fn hook_url(base: &str, kind: AgentKind, agent: &str, answer: &AnswerArgs) -> String {
    let mut query = vec![format!("agent={}", query_value(agent))];
    if answer.category != assent_hook::DEFAULT_CATEGORY {
        query.push(format!("category={}", query_value(&answer.category)));
    }
    if let Some(wait) = answer.wait {
        query.push(format!("wait={wait}"));
    }
    if answer.on_timeout == OnTimeoutArg::Deny {
        query.push("onTimeout=deny".to_owned());
    }
    format!(
        "{}/api/hooks/{kind}?{}",
        base.trim_end_matches('/'),
        query.join("&")
    )
}

/// `text` percent-encoded for a query value (unreserved characters kept).
fn query_value(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// `word` as one word of a POSIX shell command line.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-:=@+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// `assent hook install`, with the preset's rules when one is named: the rules first
/// (an unknown agent or a refused rule changes no settings file), each through the
/// same rule change as `assent agent allow`, then the hook; both are printed. With
/// --print, the settings and the rules as they would be, and nothing set.
async fn install_with_preset(db: Option<String>, args: InstallArgs) -> Result<Output, CliError> {
    let Some(preset) = args.preset else {
        return change_settings(db, args, true);
    };
    let rules = assent_hook::preset::rules(args.kind, preset);
    let line = |rule: &assent_hook::preset::PresetRule| {
        format!(
            "  {} {}  ({})",
            rule.action.as_str(),
            rule.pattern,
            rule.why
        )
    };
    if args.print {
        let mut shown = change_settings(db, args, true)?;
        let listed: Vec<String> = rules.iter().map(line).collect();
        shown.stdout = format!(
            "{}\nPreset {preset} would set (nothing was set):\n{}",
            shown.stdout.trim_end(),
            listed.join("\n")
        );
        return Ok(shown);
    }
    if args.agent.trim().is_empty() {
        return Err(CliError::Usage("--agent must not be blank".to_owned()));
    }
    let url = crate::database::absolute(&crate::database::locate_for_agents(db.clone())?)?;
    let store = crate::database::open_store(&url).await?;
    let engine = crate::context::engine(store).await?;
    let now = time::OffsetDateTime::now_utc();
    let mut listed = Vec::with_capacity(rules.len());
    for rule in &rules {
        let change = assent_confirm::RuleChange {
            by: Some(crate::context::reviewer(None)),
            ..assent_confirm::RuleChange::new(rule.pattern, rule.action)
        };
        let (_, changed) = assent_server::change_agent_rule(&engine, &args.agent, &change, now)
            .await
            .map_err(|error| match error {
                assent_server::ServerError::BadRequest(why) => CliError::Usage(why),
                other => CliError::from(other),
            })?;
        let note = if changed { "" } else { " (it already was)" };
        listed.push(format!("{}{note}", line(rule)));
    }
    let agent = args.agent.trim().to_owned();
    let mut installed = change_settings(db, args, true)?;
    installed.stdout = format!(
        "{}\nPreset {preset}: agent {agent} now has these rules (`assent agent unset {agent} PATTERN` removes one):\n{}",
        installed.stdout.trim_end(),
        listed.join("\n")
    );
    Ok(installed)
}

/// Installs (or uninstalls) the hook in the agent's settings file, or prints the
/// settings as they would be.
fn change_settings(
    db: Option<String>,
    args: InstallArgs,
    install: bool,
) -> Result<Output, CliError> {
    if args.agent.trim().is_empty() {
        return Err(CliError::Usage("--agent must not be blank".to_owned()));
    }
    if let Some(url) = &args.http
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(CliError::Usage(format!(
            "--http {url:?}: expected the server's URL, such as http://127.0.0.1:7700"
        )));
    }
    let file = match args.scope {
        Scope::Local => assent_hook::install::local_settings_file(args.kind).ok_or_else(|| {
            let kinds: Vec<&str> = AgentKind::ALL
                .into_iter()
                .filter(|kind| assent_hook::install::local_settings_file(*kind).is_some())
                .map(AgentKind::as_str)
                .collect();
            CliError::Usage(format!(
                "{} has no settings file of one person's own; --scope local is for {}",
                args.kind,
                kinds.join(", ")
            ))
        })?,
        Scope::Project | Scope::User => assent_hook::install::settings_file(args.kind),
    };
    let folder = match args.scope {
        Scope::User => etcetera::home_dir()
            .map_err(|e| CliError::failed(format!("cannot find the home folder: {e}")))?,
        Scope::Project | Scope::Local => match args.project {
            Some(dir) => dir,
            None => std::env::current_dir()
                .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?,
        },
    };
    let path = folder.join(file);
    let original = match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            return Err(CliError::failed(format!(
                "cannot read {}: {e}",
                path.display()
            )));
        }
    };
    let settings: Value = match &original {
        None => Value::Object(serde_json::Map::new()),
        Some(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => {
            Value::Object(serde_json::Map::new())
        }
        Some(bytes) => serde_json::from_slice(bytes).map_err(|e| {
            CliError::failed(format!(
                "{} is not JSON ({e}); nothing was changed",
                path.display()
            ))
        })?,
    };
    let changed = if install {
        let wait = args
            .answer
            .wait
            .map_or_else(|| assent_hook::default_wait(args.kind), Duration::from_secs);
        let hook = match &args.http {
            Some(base) => assent_hook::install::Hook::Http {
                url: hook_url(base, args.kind, &args.agent, &args.answer),
                token_var: args.token_env.clone(),
            },
            None => {
                let db = crate::database::absolute(&crate::database::locate_for_agents(db)?)?;
                assent_hook::install::Hook::Command(hook_command(
                    &db,
                    args.kind,
                    &args.agent,
                    &args.answer,
                )?)
            }
        };
        assent_hook::install::install(args.kind, settings.clone(), &hook, wait)
    } else {
        assent_hook::install::without_ours(settings.clone())
    }
    .map_err(|e| CliError::failed(format!("{}: {}; nothing was changed", path.display(), e.0)))?;
    let text = serde_json::to_string_pretty(&changed)
        .map_err(|e| CliError::failed(format!("cannot write JSON: {e}")))?;
    if args.print {
        return Ok(Output::text(text));
    }
    let verb = if install {
        "installed in"
    } else {
        "removed from"
    };
    if changed == settings && original.is_some() {
        return Ok(Output::text(format!(
            "{}: nothing to change ({} hook {verb} it already)",
            path.display(),
            args.kind
        )));
    }
    if !install && original.is_none() {
        return Ok(Output::text(format!(
            "{}: no such file; nothing to remove",
            path.display()
        )));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::failed(format!("cannot create {}: {e}", parent.display())))?;
    }
    let mut backup = None;
    if let Some(bytes) = &original {
        let mut name = path.as_os_str().to_owned();
        name.push(".assent-backup");
        let backup_path = PathBuf::from(name);
        std::fs::write(&backup_path, bytes).map_err(|e| {
            CliError::failed(format!("cannot write {}: {e}", backup_path.display()))
        })?;
        backup = Some(backup_path);
    }
    // Written beside it and renamed over it: the agent never reads half a file.
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".assent-new");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, format!("{text}\n"))
        .and_then(|()| std::fs::rename(&temporary, &path))
        .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))?;
    let kept = backup.map_or_else(String::new, |b| {
        format!("; the previous file is {}", b.display())
    });
    Ok(Output::text(format!(
        "{} hook of agent {} {verb} {}{kept}",
        args.kind,
        args.agent,
        path.display()
    )))
}
