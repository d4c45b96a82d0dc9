//! `assent doctor --canary`: one harmless call (`touch` of a marker file in a
//! throwaway folder) through each installed hook with Assent's binary made missing,
//! and whether the marker was made.
//!
//! With the real agent on `PATH` (Claude Code, Gemini CLI) the settings file is
//! copied into a throwaway project (or home, for the user's file), the agent is run
//! headless against a scripted model served here on loopback (no credentials, no
//! network) that asks for the one call, first with Assent's entries removed (the
//! control: the marker must appear, or the canary proves nothing), then with their
//! program missing: a marker made then is a call let through. Other agents are not
//! driven: each hook of ours is run with its program missing and the agent's event
//! on stdin, and its exit and output are read by that agent's rules for failed hooks
//! (`assent_hook::doctor::contract`), which the report says.

use assent_hook::AgentKind;
use assent_hook::doctor::{self, Door};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one run of an agent may take.
const AGENT_LIMIT: Duration = Duration::from_secs(180);

/// What a canary found for one settings file.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Canary {
    kind: &'static str,
    file: String,
    /// `real claude …`, `real gemini …`, or `hook run with the event on stdin`.
    how: String,
    /// `blocked`, `LET THROUGH`, or `inconclusive`.
    outcome: &'static str,
    detail: String,
}

impl Canary {
    /// Whether the call was let through.
    pub fn let_through(&self) -> bool {
        self.outcome == LET_THROUGH
    }
}

impl std::fmt::Display for Canary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {} ({}): {}",
            self.kind, self.file, self.outcome, self.how, self.detail
        )
    }
}

const BLOCKED: &str = "blocked";
const LET_THROUGH: &str = "LET THROUGH";
const INCONCLUSIVE: &str = "inconclusive";

/// Fires the canary through the hooks of one settings file (`user`: the home folder's).
pub async fn fire(
    kind: AgentKind,
    user: bool,
    local: bool,
    path: &Path,
    settings: &Value,
    doors: &[Door],
) -> Canary {
    let mut canary = Canary {
        kind: kind.as_str(),
        file: path.display().to_string(),
        how: String::new(),
        outcome: INCONCLUSIVE,
        detail: String::new(),
    };
    let agent = match kind {
        AgentKind::ClaudeCode => resolve_program("claude"),
        AgentKind::Gemini => resolve_program("gemini"),
        _ => None,
    };
    let result = match agent {
        Some(program) => real(kind, &program, user, local, settings, &mut canary).await,
        None => by_stdin(kind, doors, &mut canary).await,
    };
    if let Err(why) = result {
        canary.outcome = INCONCLUSIVE;
        canary.detail = why;
    }
    canary
}

/// The real agent, once without Assent's hooks and once with their program missing.
async fn real(
    kind: AgentKind,
    program: &Path,
    user: bool,
    local: bool,
    settings: &Value,
    canary: &mut Canary,
) -> Result<(), String> {
    let version = run_bounded(
        tokio::process::Command::new(program).arg("--version"),
        None,
        Duration::from_secs(10),
    )
    .await
    .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    .unwrap_or_default();
    canary.how = format!("real {} {version}", program.display());
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a throwaway folder: {e}"))?;
    let project = dir.path().join("project");
    let home = dir.path().join("home");
    for folder in [&project, &home] {
        std::fs::create_dir_all(folder)
            .map_err(|e| format!("cannot make {}: {e}", folder.display()))?;
    }
    let marker = project.join(format!("assent-canary-{}", uuid::Uuid::new_v4().simple()));
    let command = format!("touch '{}'", marker.display());
    let model = Model::serve(command).await?;
    let relative = match (kind, local) {
        (_, true) => assent_hook::install::local_settings_file(kind).unwrap_or_default(),
        _ => assent_hook::install::settings_file(kind),
    };
    let place = if user { &home } else { &project }.join(relative);
    let missing = dir.path().join("missing").join("assent");
    let control = assent_hook::install::without_ours(settings.clone())
        .map_err(|e| format!("the settings: {}", e.0))?;
    let broken = doctor::with_program(settings.clone(), &missing.to_string_lossy());
    for (run, settings) in [("control", control), ("canary", broken)] {
        let _ = std::fs::remove_file(&marker);
        let settings = if kind == AgentKind::Gemini && user {
            with_gemini_auth(settings)
        } else {
            settings
        };
        write(&place, &settings)?;
        if kind == AgentKind::Gemini && !user {
            write(
                &home.join(".gemini/settings.json"),
                &with_gemini_auth(json!({})),
            )?;
        }
        let mut agent = tokio::process::Command::new(program);
        // Nothing of the person's environment but PATH: a provider setting there
        // (Bedrock, Vertex, a token) would send the canary to a real model.
        agent
            .current_dir(&project)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", &home);
        match kind {
            AgentKind::Gemini => agent
                .args(["-p", "Run the command.", "--approval-mode", "yolo"])
                .args(["-m", "gemini-2.5-pro", "--output-format", "json"])
                .env("GEMINI_API_KEY", "assent-canary")
                .env("GOOGLE_GEMINI_BASE_URL", &model.url)
                .env("GEMINI_CLI_TRUST_WORKSPACE", "true"),
            _ => agent
                .args(["-p", "Run the command.", "--output-format", "json"])
                .args(["--allowedTools", "Bash"])
                .env("ANTHROPIC_BASE_URL", &model.url)
                .env("ANTHROPIC_API_KEY", "assent-canary")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1"),
        };
        let out = run_bounded(&mut agent, None, AGENT_LIMIT)
            .await
            .ok_or_else(|| {
                format!(
                    "the {run} run did not end within {} s",
                    AGENT_LIMIT.as_secs()
                )
            })?;
        let made = marker.exists();
        if run == "control" && !made {
            return Err(format!(
                "without Assent's hooks the agent did not run the call either (exit {:?}: {}), so nothing is proved",
                out.status.code(),
                last_line(&out.stderr)
            ));
        }
        if run == "canary" {
            (canary.outcome, canary.detail) = if made {
                (
                    LET_THROUGH,
                    format!(
                        "with Assent's binary missing ({}) the agent ran `touch` anyway",
                        missing.display()
                    ),
                )
            } else {
                (
                    BLOCKED,
                    format!(
                        "with Assent's binary missing ({}) the agent did not run the call (it did without the hook)",
                        missing.display()
                    ),
                )
            };
        }
    }
    Ok(())
}

/// A stub MCP server in POSIX shell: one tool, `touch`, whose call makes `marker`.
fn stub_upstream(marker: &Path) -> String {
    let marker = marker.display().to_string().replace('\'', "'\\''");
    format!(
        r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":[ ]*\([0-9]*\).*/\1/p')
  case "$line" in
    *'"initialize"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":"2025-06-18","capabilities":{{"tools":{{}}}},"serverInfo":{{"name":"canary","version":"1"}}}}}}\n' "$id";;
    *'"tools/list"'*) printf '{{"jsonrpc":"2.0","id":%s,"result":{{"tools":[{{"name":"touch","description":"Assent's doctor: a canary","inputSchema":{{"type":"object"}}}}]}}}}\n' "$id";;
    *'"tools/call"'*) touch '{marker}'; printf '{{"jsonrpc":"2.0","id":%s,"result":{{"content":[{{"type":"text","text":"touched"}}]}}}}\n' "$id";;
  esac
done"#
    )
}

/// The gateway an MCP client runs (`words`, its command line), started as the client
/// would with its database made unopenable and its upstream replaced by a stub whose
/// one tool makes a marker; one `tools/call` sent: a marker made is a call let
/// through.
pub async fn gateway(file: &str, words: &[String]) -> Canary {
    let mut canary = Canary {
        kind: "mcp-gateway",
        file: file.to_owned(),
        how: "the client's command run with a stub upstream and its database unopenable".to_owned(),
        outcome: INCONCLUSIVE,
        detail: String::new(),
    };
    let Ok(dir) = tempfile::tempdir() else {
        canary.detail = "cannot make a throwaway folder".to_owned();
        return canary;
    };
    let marker = dir.path().join("assent-canary");
    let stub = stub_upstream(&marker);
    let unopenable = format!(
        "sqlite://{}?mode=ro",
        dir.path().join("missing").join("assent.db").display()
    );
    // The command line with its database and its upstream replaced.
    let mut argv: Vec<String> = Vec::new();
    let mut rest = words.iter();
    let mut tool = "touch";
    while let Some(word) = rest.next() {
        match word.as_str() {
            "--db" => {
                rest.next();
                argv.extend(["--db".to_owned(), unopenable.clone()]);
            }
            "--config" => {
                rest.next();
                let config = dir.path().join("mcp.json");
                let _ = write(
                    &config,
                    &json!({"mcpServers": {"canary": {"command": "sh", "args": ["-c", stub]}}}),
                );
                argv.extend(["--config".to_owned(), config.display().to_string()]);
                tool = "canary__touch";
            }
            "--" => break,
            "--command" => {
                // `--command PROGRAM --arg …` names the upstream: replaced whole.
                rest.next();
            }
            "--arg" => {
                rest.next();
            }
            _ => argv.push(word.clone()),
        }
    }
    if tool == "touch" {
        argv.extend([
            "--".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            stub.clone(),
        ]);
    }
    if !argv.iter().any(|w| w == "--db") {
        argv.splice(1..1, ["--db".to_owned(), unopenable.clone()]);
    }
    let Some((program, args)) = argv.split_first() else {
        canary.detail = "an empty command".to_owned();
        return canary;
    };
    let requests = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "assent-doctor", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": {}}}),
    ];
    let input: String = requests.iter().map(|r| format!("{r}\n")).collect();
    let ended = serve_gateway(program, args, input.as_bytes()).await;
    (canary.outcome, canary.detail) = if marker.exists() {
        (
            LET_THROUGH,
            format!("the stub upstream's tool ran ({ended})"),
        )
    } else {
        (
            BLOCKED,
            format!("the stub upstream's tool never ran ({ended})"),
        )
    };
    canary
}

/// Runs the gateway with `input` on stdin, kept open (as a client keeps it) until the
/// gateway exits or 10 s passed; how it ended, for the report.
async fn serve_gateway(program: &str, args: &[String], input: &[u8]) -> String {
    use std::process::Stdio;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let spawned = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return format!("it cannot start: {e}"),
    };
    let mut stdin = child.stdin.take();
    if let Some(pipe) = stdin.as_mut() {
        // A gateway that exits at once closes the pipe: not an error.
        let _ = pipe.write_all(input).await;
    }
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    drop(stdin);
    let mut stderr = Vec::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = tokio::time::timeout(Duration::from_secs(2), pipe.read_to_end(&mut stderr)).await;
    }
    match status {
        Ok(Ok(status)) => format!("exit {:?}: {}", status.code(), last_line(&stderr)),
        _ => "still serving after 10 s".to_owned(),
    }
}

/// Gemini CLI's user settings choosing API-key sign-in, the rest kept.
fn with_gemini_auth(mut settings: Value) -> Value {
    if let Some(root) = settings.as_object_mut() {
        let security = root.entry("security").or_insert_with(|| json!({}));
        if let Some(security) = security.as_object_mut() {
            security.insert("auth".to_owned(), json!({"selectedType": "gemini-api-key"}));
        }
    }
    settings
}

fn write(path: &Path, value: &Value) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
    }
    std::fs::write(path, value.to_string())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .chars()
        .take(300)
        .collect()
}

/// Each hook of ours run with its program missing and the agent's event on stdin, its
/// end read by the agent's rules for failed hooks.
async fn by_stdin(kind: AgentKind, doors: &[Door], canary: &mut Canary) -> Result<(), String> {
    canary.how = format!(
        "{kind} is not on PATH here: each hook run with the event on stdin, read by {kind}'s rules for failed hooks"
    );
    let dir = tempfile::tempdir().map_err(|e| format!("cannot make a throwaway folder: {e}"))?;
    let missing = dir.path().join("missing").join("assent");
    let event = event(kind, dir.path());
    let mut verdicts = Vec::new();
    let mut through = false;
    for door in doors.iter().filter(|d| {
        matches!(
            d.event.as_str(),
            "PreToolUse"
                | "preToolUse"
                | "BeforeTool"
                | "PermissionRequest"
                | "beforeShellExecution"
                | "beforeMCPExecution"
        )
    }) {
        let Some(command) = &door.command else {
            continue;
        };
        let hook = doctor::with_program(
            json!({"hooks": {"e": [{"command": command}]}}),
            &missing.to_string_lossy(),
        );
        let broken = hook["hooks"]["e"][0]["command"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let out = run_bounded(
            tokio::process::Command::new("sh")
                .args(["-c", &broken])
                .current_dir(dir.path()),
            Some(event.to_string().into_bytes()),
            door.timeout.min(Duration::from_secs(30)),
        )
        .await;
        let (blocked, why) = verdict(kind, door, out.as_ref());
        through |= !blocked;
        verdicts.push(format!("{}: {why}", door.at));
    }
    canary.outcome = if through { LET_THROUGH } else { BLOCKED };
    canary.detail = verdicts.join("; ");
    Ok(())
}

/// Whether `kind` blocks the call after a hook that ended as `out` (`None`: killed at
/// its timeout), and why.
fn verdict(kind: AgentKind, door: &Door, out: Option<&std::process::Output>) -> (bool, String) {
    let rules = doctor::contract(kind);
    let closed = !door
        .findings
        .iter()
        .any(|f| f.severity == doctor::Severity::FailOpen)
        && rules.fail_closed.is_some();
    let Some(out) = out else {
        return (
            closed,
            format!(
                "timed out; {}",
                if closed {
                    "blocked by its fail-closed setting"
                } else {
                    "a timed-out hook lets the call run"
                }
            ),
        );
    };
    let code = out.status.code();
    let text = String::from_utf8_lossy(&out.stdout);
    match code {
        Some(0) => {
            let denied = text.contains("\"deny\"") || text.contains("\"block\"");
            (
                denied,
                format!("exit 0, {}", if denied { "a denial" } else { "no denial" }),
            )
        }
        Some(2) => (true, "exit 2: blocks".to_owned()),
        other => {
            let said = !out.stderr.is_empty() || !text.trim().is_empty();
            let gemini_denies = rules.missing_program_blocks && other != Some(1) && said;
            let blocked = closed || gemini_denies || rules.crash_blocks;
            (
                blocked,
                format!(
                    "exit {}: {}",
                    other.map_or_else(|| "by signal".to_owned(), |c| c.to_string()),
                    if closed {
                        "blocked by its fail-closed setting"
                    } else if rules.crash_blocks {
                        "a hook that exits other than 0 denies the call"
                    } else if gemini_denies {
                        "text that is not JSON with this exit is a denial"
                    } else {
                        "a failed hook lets the call run"
                    }
                ),
            )
        }
    }
}

/// The agent's pre-tool event for a `touch` in `dir`.
fn event(kind: AgentKind, dir: &Path) -> Value {
    let cwd = dir.display().to_string();
    let command = format!("touch '{}/assent-canary'", cwd);
    match kind {
        AgentKind::Copilot => json!({"timestamp": 0, "cwd": cwd, "toolName": "bash",
            "toolArgs": serde_json::to_string(&json!({"command": command})).unwrap_or_default()}),
        AgentKind::Cursor => {
            json!({"hook_event_name": "preToolUse", "conversation_id": "assent-canary",
            "cwd": cwd, "tool_name": "Shell", "tool_input": {"command": command}})
        }
        AgentKind::Gemini => json!({"hook_event_name": "BeforeTool", "session_id": "assent-canary",
            "cwd": cwd, "tool_name": "run_shell_command", "tool_input": {"command": command}}),
        AgentKind::ClaudeCode | AgentKind::Vscode | AgentKind::Codex => json!({
            "hook_event_name": "PreToolUse", "session_id": "assent-canary", "cwd": cwd,
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "assent-canary"}),
    }
}

/// Runs `command` with `stdin` (else none), its output kept; `None` when it cannot
/// start or has not ended within `limit` (it is killed then).
pub async fn run_bounded(
    command: &mut tokio::process::Command,
    stdin: Option<Vec<u8>>,
    limit: Duration,
) -> Option<std::process::Output> {
    use std::process::Stdio;
    use tokio::io::AsyncWriteExt;
    command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().ok()?;
    if let (Some(bytes), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // A hook that exits without reading its event closes the pipe: not an error.
        let _ = pipe.write_all(&bytes).await;
    }
    tokio::time::timeout(limit, child.wait_with_output())
        .await
        .ok()?
        .ok()
}

/// The file `name` runs: itself when it holds a `/`, else the first executable of
/// that name on `PATH`.
pub fn resolve_program(name: &str) -> Option<PathBuf> {
    let executable = |path: &Path| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(path)
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        #[cfg(not(unix))]
        {
            path.is_file()
        }
    };
    if name.contains('/') {
        let path = PathBuf::from(name);
        return executable(&path).then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| executable(path))
}

/// A scripted model on loopback: asked with a shell tool offered, it calls it once with
/// the canary's command; told the outcome, it answers "Done.". It speaks the Anthropic
/// Messages API (Claude Code) and the Gemini API (Gemini CLI), streamed or not.
struct Model {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Model {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Model {
    async fn serve(command: String) -> Result<Self, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("cannot listen on loopback for the scripted model: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("the scripted model's address: {e}"))?
            .port();
        let router = axum::Router::new().fallback(move |uri: Uri, body: Bytes| {
            let command = command.clone();
            async move { answer(&uri, &body, &command) }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            url: format!("http://127.0.0.1:{port}"),
            task,
        })
    }
}

/// The scripted model's answer to one request.
fn answer(uri: &Uri, body: &[u8], command: &str) -> Response {
    let body: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let path = uri.path();
    if path.ends_with("/count_tokens") {
        return json_response(&json!({"input_tokens": 10}));
    }
    if path.ends_with("/v1/messages") {
        return anthropic(&body, command);
    }
    if path.contains(":countTokens") {
        return json_response(&json!({"totalTokens": 10}));
    }
    if path.contains(":streamGenerateContent") || path.contains(":generateContent") {
        return gemini(&body, command, path.contains(":stream"));
    }
    json_response(&json!({"data": [], "models": []}))
}

fn json_response(value: &Value) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(value.to_string()))
        .unwrap_or_default()
}

fn sse(events: &[(&str, Value)]) -> Response {
    let text: String = events
        .iter()
        .map(|(name, data)| {
            let name = if name.is_empty() {
                String::new()
            } else {
                format!("event: {name}\n")
            };
            format!("{name}data: {data}\n\n")
        })
        .collect();
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "text/event-stream")
        .body(Body::from(text))
        .unwrap_or_default()
}

fn anthropic(body: &Value, command: &str) -> Response {
    let told = body["messages"].as_array().is_some_and(|messages| {
        messages.iter().any(|m| {
            m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
        })
    });
    let offers_bash = body["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|t| t["name"] == "Bash"));
    let start = json!({"type": "message_start", "message": {"id": "msg_canary", "type": "message",
        "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}});
    let (block, delta, stop) = if offers_bash && !told {
        let input = json!({"command": command, "description": "Assent's doctor: a canary call"});
        (
            json!({"type": "tool_use", "id": "toolu_canary", "name": "Bash", "input": {}}),
            json!({"type": "input_json_delta", "partial_json": input.to_string()}),
            "tool_use",
        )
    } else {
        (
            json!({"type": "text", "text": ""}),
            json!({"type": "text_delta", "text": "Done."}),
            "end_turn",
        )
    };
    if body["stream"] != json!(true) {
        return json_response(
            &json!({"id": "msg_canary", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Done."}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 1, "output_tokens": 1}}),
        );
    }
    sse(&[
        ("message_start", start),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ])
}

fn gemini(body: &Value, command: &str, stream: bool) -> Response {
    let told = body["contents"].as_array().is_some_and(|contents| {
        contents.iter().any(|c| {
            c["parts"]
                .as_array()
                .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some()))
        })
    });
    let offers_shell = body["tools"].as_array().is_some_and(|tools| {
        tools.iter().any(|t| {
            t["functionDeclarations"]
                .as_array()
                .is_some_and(|d| d.iter().any(|f| f["name"] == "run_shell_command"))
        })
    });
    let part = if offers_shell && !told {
        json!({"functionCall": {"name": "run_shell_command",
            "args": {"command": command, "description": "Assent's doctor: a canary call"}}})
    } else {
        json!({"text": "Done."})
    };
    let answer = json!({"candidates": [{"content": {"role": "model", "parts": [part]},
        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}});
    if stream {
        sse(&[("", answer)])
    } else {
        json_response(&answer)
    }
}
