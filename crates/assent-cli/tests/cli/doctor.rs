//! `assent doctor`: the settings `assent hook install` writes are found safe for every
//! kind and scope (exit 0); hand-written fail-open variants of each kind are found
//! (exit 1) and `--fix` mends them keeping everything else in the files; database and
//! token file modes; `assent serve`'s exposure as it records it (loopback, every
//! interface, an http `--public-url`); `--canary` with the real Claude Code and Gemini
//! CLI (against the doctor's own scripted model) and, for an agent not installed, by
//! the event on stdin; and the verdict on Codex checked against the real Codex CLI.

use super::{Cli, code};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// `assent --db DB doctor --json --project PROJECT ARGS` with `HOME` = `home` and
/// `PATH` = `path` (none of the agents' programs unless given).
fn doctor(cli: &Cli, project: &Path, home: &Path, path: &str, args: &[&str]) -> (Output, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &cli.db(), "--json", "doctor", "--project"])
        .arg(project)
        .args(args)
        .env("HOME", home)
        .env("PATH", path)
        .env_remove("ASSENT_DATABASE_URL")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .expect("assent doctor runs");
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "JSON on stdout ({e}): {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, report)
}

/// A `PATH` with the system's tools and no coding agent.
const BARE_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

fn install(cli: &Cli, project: &Path, home: &Path, kind: &str, scope: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args([
            "--db",
            &cli.db(),
            "hook",
            "install",
            kind,
            "--agent",
            "a",
            "--scope",
            scope,
            "--project",
        ])
        .arg(project)
        .env("HOME", home)
        .output()
        .expect("assent hook install runs");
    assert_eq!(
        code(&out),
        0,
        "{kind}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn read(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("the settings")).expect("JSON")
}

fn write(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("the folder");
    std::fs::write(path, serde_json::to_string_pretty(value).expect("JSON")).expect("written");
}

/// The fail-open findings of the report, as `kind: text`.
fn fail_open(report: &Value) -> Vec<String> {
    let mut found = Vec::new();
    for hook in report["hooks"].as_array().expect("hooks") {
        for finding in hook["findings"].as_array().expect("findings") {
            if finding["severity"] == "fail-open" {
                found.push(format!(
                    "{}: {}",
                    hook["kind"].as_str().unwrap_or(""),
                    finding["text"]
                ));
            }
        }
    }
    for db in report["databases"].as_array().expect("databases") {
        for finding in db["findings"].as_array().expect("findings") {
            if finding["severity"] == "fail-open" {
                found.push(format!("database: {}", finding["text"]));
            }
        }
    }
    for serve in report["serves"].as_array().expect("serves") {
        for finding in serve["findings"].as_array().expect("findings") {
            if finding["severity"] == "fail-open" {
                found.push(format!("serve: {}", finding["text"]));
            }
        }
    }
    for finding in report["settingsFiles"].as_array().expect("settings files") {
        if finding["severity"] == "fail-open" {
            found.push(format!("settings file: {}", finding["text"]));
        }
    }
    found
}

fn kinds_of(report: &Value) -> Vec<String> {
    let mut kinds: Vec<String> = report["hooks"]
        .as_array()
        .expect("hooks")
        .iter()
        .map(|h| {
            format!(
                "{} {}",
                h["kind"].as_str().unwrap_or(""),
                h["scope"].as_str().unwrap_or("")
            )
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The database file of `cli`, created, private.
fn private_database(cli: &Cli) {
    let out = cli.run(&["agent", "list"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let file = cli.db().trim_start_matches("sqlite://").to_owned();
    set_mode(Path::new(&file), 0o600);
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

#[test]
fn what_hook_install_writes_is_safe_for_every_kind_and_scope() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    for kind in [
        "claude-code",
        "codex",
        "cursor",
        "copilot",
        "vscode",
        "gemini",
    ] {
        install(&cli, project.path(), home.path(), kind, "project");
    }
    install(&cli, project.path(), home.path(), "claude-code", "local");
    install(&cli, project.path(), home.path(), "gemini", "user");
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["safe"], true);
    assert_eq!(fail_open(&report), Vec::<String>::new());
    assert_eq!(
        kinds_of(&report),
        [
            "claude-code local",
            "claude-code project",
            "codex project",
            "copilot project",
            "cursor project",
            "gemini project",
            "gemini user",
            "vscode project",
        ]
    );
    for hook in report["hooks"].as_array().expect("hooks") {
        if ["PreToolUse", "preToolUse", "BeforeTool"]
            .contains(&hook["event"].as_str().unwrap_or(""))
        {
            assert_eq!(hook["onFailure"], "blocks", "{hook:#}");
            assert!(
                hook["timeoutSecs"].as_u64() >= hook["neededSecs"].as_u64(),
                "{hook:#}"
            );
        }
    }
    assert_eq!(report["databases"][0]["mode"], "600", "{report:#}");
    // The text says the same, per door.
    let text = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &cli.db(), "doctor", "--project"])
        .arg(project.path())
        .env("HOME", home.path())
        .env("PATH", BARE_PATH)
        .output()
        .expect("runs");
    assert_eq!(code(&text), 0);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("All doors block when Assent fails."),
        "{text}"
    );
    assert!(text.contains("on failure blocks"), "{text}");
}

#[test]
fn hand_written_fail_open_hooks_are_found_and_fix_mends_them_keeping_the_rest() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    let exe = env!("CARGO_BIN_EXE_assent");
    let db = cli.db();
    let ours = |kind: &str| format!("{exe} --db {db} hook {kind} --agent a");
    let theirs = json!({"type": "command", "command": "./lint.sh"});
    let files = [
        // Claude Code without onFailure: its default, "continue", runs the call.
        (
            project.path().join(".claude/settings.json"),
            json!({"model": "opus", "permissions": {"allow": ["Read"]}, "hooks": {
                "PreToolUse": [
                    {"matcher": "Write", "hooks": [theirs.clone()]},
                    {"matcher": "*", "hooks": [{"type": "command", "command": ours("claude-code")}]},
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
            }}),
        ),
        // This person's own file, saying "continue" outright.
        (
            project.path().join(".claude/settings.local.json"),
            json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": ours("claude-code"), "timeout": 600, "onFailure": "continue"}]}]}}),
        ),
        // VS Code, async: the agent never waits for the answer.
        (
            project.path().join(".github/hooks/assent-vscode.json"),
            json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": ours("vscode"), "timeout": 35, "onFailure": "block", "async": true}]}]}}),
        ),
        // Codex with a timeout under the hook's wait: killed, the call runs.
        (
            project.path().join(".codex/hooks.json"),
            json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
                {"type": "command", "command": ours("codex"), "timeout": 5}]}]}}),
        ),
        // Cursor without failClosed.
        (
            project.path().join(".cursor/hooks.json"),
            json!({"version": 1, "hooks": {"preToolUse": [{"command": ours("cursor"), "timeout": 35},
                {"command": "./audit.sh"}]}}),
        ),
        // Copilot with a timeout under the wait.
        (
            project.path().join(".github/hooks/assent-copilot.json"),
            json!({"version": 1, "hooks": {"preToolUse": [{"type": "command", "bash": ours("copilot"), "timeoutSec": 3}]}}),
        ),
        // Gemini CLI (the user's file) without a timeout: its default 60 s is under
        // the 65 s its default wait needs, and a timed-out hook lets the tool run.
        (
            home.path().join(".gemini/settings.json"),
            json!({"security": {"auth": {"selectedType": "gemini-api-key"}}, "hooks": {"BeforeTool": [
                {"matcher": "*", "hooks": [{"type": "command", "command": ours("gemini")}]}]}}),
        ),
    ];
    for (path, value) in &files {
        write(path, value);
    }
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert_eq!(report["safe"], false);
    let open = fail_open(&report);
    for kind in [
        "claude-code",
        "vscode",
        "codex",
        "cursor",
        "copilot",
        "gemini",
    ] {
        assert!(
            open.iter().any(|f| f.starts_with(&format!("{kind}:"))),
            "{kind} in {open:#?}"
        );
    }
    assert_eq!(
        open.iter()
            .filter(|f| f.starts_with("claude-code:"))
            .count(),
        2,
        "project and local: {open:#?}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("fail-open"));

    let (fixed, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&fixed), 0, "{report:#}");
    assert!(
        report["changes"].as_array().expect("changes").len() >= 7,
        "{report:#}"
    );
    let (again, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&again), 0, "{report:#}");
    assert!(report["changes"].as_array().expect("changes").is_empty());

    // Everything else in the files is as it was; each old file is kept beside it.
    let claude = read(&files[0].0);
    assert_eq!(claude["model"], "opus");
    assert_eq!(claude["permissions"], files[0].1["permissions"]);
    assert_eq!(claude["hooks"]["Stop"], files[0].1["hooks"]["Stop"]);
    assert_eq!(
        claude["hooks"]["PreToolUse"][0],
        files[0].1["hooks"]["PreToolUse"][0]
    );
    assert_eq!(
        claude["hooks"]["PreToolUse"][1]["hooks"][0]["onFailure"],
        "block"
    );
    assert_eq!(
        read(&files[1].0)["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"],
        "block"
    );
    assert_eq!(
        read(&files[2].0)["hooks"]["PreToolUse"][0]["hooks"][0].get("async"),
        None
    );
    assert_eq!(
        read(&files[3].0)["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"],
        600
    );
    let cursor = read(&files[4].0);
    assert_eq!(cursor["hooks"]["preToolUse"][0]["failClosed"], true);
    assert_eq!(
        cursor["hooks"]["preToolUse"][1],
        json!({"command": "./audit.sh"})
    );
    assert_eq!(
        read(&files[5].0)["hooks"]["preToolUse"][0]["timeoutSec"],
        35
    );
    let gemini = read(&files[6].0);
    assert_eq!(gemini["security"], files[6].1["security"]);
    assert_eq!(
        gemini["hooks"]["BeforeTool"][0]["hooks"][0]["timeout"],
        65_000
    );
    let mut backup = files[0].0.clone().into_os_string();
    backup.push(".assent-backup");
    assert_eq!(read(Path::new(&backup)), files[0].1);
}

#[test]
fn a_missing_binary_opens_codex_until_its_command_exits_2_and_copilot_blocks_it() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    // Codex has no fail-closed setting: `onFailure` is not one of its keys.
    let gone = "/nonexistent/bin/assent hook codex --agent a";
    let file = project.path().join(".codex/hooks.json");
    write(
        &file,
        &json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [
            {"type": "command", "command": gone, "timeout": 600, "onFailure": "block"}]}]}}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 1, "{report:#}");
    let open = fail_open(&report);
    assert!(
        open.iter().any(|f| f.contains("/nonexistent/bin/assent")),
        "{open:#?}"
    );
    assert!(open.iter().any(|f| f.contains("exit 2")), "{open:#?}");
    assert_eq!(report["hooks"][0]["onFailure"], "lets the call through");
    assert_eq!(
        report["canaries"][0]["outcome"], "LET THROUGH",
        "{report:#}"
    );
    // `--fix` ends the command with an exit 2 on failure, which Codex takes as a
    // block: every call is blocked now, and the canary shows it.
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert!(
        report["changes"].to_string().contains("exit 2"),
        "{report:#}"
    );
    let command = read(&file)["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .expect("a command")
        .to_owned();
    assert!(
        command.starts_with(gone) && command.contains("exit 2"),
        "{command}"
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["canaries"][0]["outcome"], "blocked", "{report:#}");
    assert!(
        report["hooks"][0]["findings"]
            .to_string()
            .contains("every call is blocked"),
        "{report:#}"
    );

    // Copilot CLI denies the call when a preToolUse hook exits other than 0.
    std::fs::remove_file(&file).expect("removed");
    write(
        &project.path().join(".github/hooks/assent-copilot.json"),
        &json!({"version": 1, "hooks": {"preToolUse": [{"type": "command",
            "bash": "/nonexistent/bin/assent hook copilot --agent a", "timeoutSec": 600}]}}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["hooks"][0]["onFailure"], "blocks", "{report:#}");
    assert_eq!(report["canaries"][0]["outcome"], "blocked", "{report:#}");
    // Turned off for the whole repository: open, and not the doctor's to undo.
    write(
        &project.path().join(".github/copilot/settings.json"),
        &json!({"disableAllHooks": true}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert!(
        fail_open(&report)
            .iter()
            .any(|f| f.contains("disableAllHooks")),
        "{report:#}"
    );
}

#[test]
fn the_real_codex_cli_runs_the_call_of_a_hook_that_cannot_start_unless_it_exits_2() {
    let Some(codex) = super::hooks::npm_cli("@openai/codex", "0.169.0", "codex", "codex-npm")
    else {
        return;
    };
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("codex home");
    install(&cli, project.path(), home.path(), "codex", "project");
    let file = project.path().join(".codex/hooks.json");
    let installed = read(&file);
    let command = installed["hooks"]["PreToolUse"][0]["hooks"][0]["command"]
        .as_str()
        .expect("a command")
        .to_owned();
    // Assent's binary gone, the rest of the command as installed.
    let (_, rest) = command.split_once(" hook ").expect("assent … hook codex");
    let broken = format!("/nonexistent/bin/assent hook {rest}");
    let unguarded = broken
        .split_once(" || ")
        .map_or(broken.as_str(), |(before, _)| before)
        .to_owned();
    assert_ne!(
        broken, unguarded,
        "install ends the command with its exit 2"
    );
    let dir = project.path().to_str().expect("a path");
    let marker = project.path().join("ran.txt");
    for (command, runs) in [(&unguarded, true), (&broken, false)] {
        let mut settings = installed.clone();
        settings["hooks"]["PreToolUse"][0]["hooks"][0]["command"] = json!(command);
        write(&file, &settings);
        let model = super::hooks::FakeApi::start("codex", &format!("touch {}", marker.display()));
        std::fs::write(
            home.path().join("config.toml"),
            format!(
                "model_provider = \"fake\"\nmodel = \"gpt-5\"\n\n[model_providers.fake]\nname = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\nenv_key = \"FAKE_OPENAI_KEY\"\n\n[projects.{dir:?}]\ntrust_level = \"trusted\"\n",
                model.port
            ),
        )
        .expect("codex config");
        let child = Command::new(&codex)
            .args([
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-hook-trust",
            ])
            .args(["-s", "danger-full-access", "-C", dir, "Run the command."])
            .current_dir(project.path())
            .env("CODEX_HOME", home.path())
            .env("HOME", home.path())
            .env("FAKE_OPENAI_KEY", "fake-key")
            .env_remove("ASSENT_DATABASE_URL")
            .env_remove("OPENAI_API_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("codex starts");
        let output = super::hooks::ran_to_the_end(child, super::hooks::REAL_RUN);
        let told = model.told();
        assert_eq!(marker.exists(), runs, "{command}: told {told:?}; {output}");
        let _ = std::fs::remove_file(&marker);
        // The doctor's verdict on the same file agrees.
        let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
        assert_eq!(code(&out), if runs { 1 } else { 0 }, "{report:#}");
    }
}

/// `assent serve` on `cli`'s database with `args`, once it has printed its banner
/// (its exposure is recorded before); killed when dropped.
struct Serving(std::process::Child);

impl Serving {
    fn start(cli: &Cli, home: &Path, args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
            .args(["--db", &cli.db(), "serve"])
            .args(args)
            .env("HOME", home)
            .env_remove("ASSENT_TOKEN")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("assent serve starts");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut banner = String::new();
        stdout.read_line(&mut banner).expect("the banner");
        assert!(banner.contains("review server on"), "{banner}");
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Self(child)
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The serves of `report` listening on loopback (`true`) or beyond it.
fn serves_on(report: &Value, loopback: bool) -> Vec<Value> {
    report["serves"]
        .as_array()
        .expect("serves")
        .iter()
        .filter(|s| s["loopback"] == loopback)
        .cloned()
        .collect()
}

#[test]
fn serve_records_its_exposure_and_the_doctor_judges_it() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    let mut loopback = Serving::start(&cli, home.path(), &["--addr", "127.0.0.1:0"]);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 0, "{report:#}");
    let serves = report["serves"].as_array().expect("serves");
    assert_eq!(serves.len(), 1, "{report:#}");
    let safe = &serves[0];
    assert_eq!(safe["loopback"], true, "{safe:#}");
    assert_eq!(safe["running"], true, "{safe:#}");
    assert_eq!(safe["pid"], loopback.0.id(), "{safe:#}");
    assert_eq!(safe["token"], "generated", "{safe:#}");
    assert_eq!(safe["findings"], json!([]), "{safe:#}");
    assert!(
        safe["tokenFile"]
            .as_str()
            .is_some_and(|t| t.ends_with(".token (mode 600)")),
        "{safe:#}"
    );

    // Every interface, links over plain http to another host: exit 1, both said.
    let exposed = Serving::start(
        &cli,
        home.path(),
        &[
            "--addr",
            "0.0.0.0:0",
            "--public-url",
            "http://assent.example.com:7700",
        ],
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert_eq!(report["safe"], false);
    let [open] = serves_on(&report, false)
        .try_into()
        .expect("one beyond loopback");
    assert_eq!(
        open["publicUrl"], "http://assent.example.com:7700",
        "{open:#}"
    );
    let said: Vec<String> = open["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["severity"] == "fail-open")
        .map(|f| f["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(said.len(), 2, "{said:#?}");
    assert!(
        said.iter().any(|t| t.contains("beyond loopback")),
        "{said:#?}"
    );
    assert!(
        said.iter()
            .any(|t| t.contains("--public-url http://assent.example.com:7700")),
        "{said:#?}"
    );
    let [still_safe] = serves_on(&report, true).try_into().expect("the first");
    assert_eq!(still_safe["findings"], json!([]));
    let text = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &cli.db(), "doctor", "--project"])
        .arg(project.path())
        .env("HOME", home.path())
        .env("PATH", BARE_PATH)
        .output()
        .expect("runs");
    assert_eq!(code(&text), 1);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("FAIL-OPEN: serve listens on 0.0.0.0:"),
        "{text}"
    );

    // Killed: no longer listening; said as it was, not counted.
    drop(exposed);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 0, "{report:#}");
    let [gone] = serves_on(&report, false)
        .try_into()
        .expect("still recorded");
    assert_eq!(gone["running"], false, "{gone:#}");
    assert!(
        gone["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .all(|f| f["severity"] == "warning"
                && f["text"].as_str().unwrap_or("").contains("not running")),
        "{gone:#}"
    );

    // A clean stop is recorded as one.
    let stopped = Command::new("kill")
        .args(["-TERM", &loopback.0.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(stopped.success());
    assert!(loopback.0.wait().expect("it ends").success());
    let (_, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    let [clean] = serves_on(&report, true).try_into().expect("recorded");
    assert!(clean["stoppedAt"].is_string(), "{clean:#}");
    assert_eq!(clean["running"], false, "{clean:#}");

    // Its token file readable by the group: anyone there could approve. `--fix`
    // makes it the owner's alone.
    let token = format!("{}.token", cli.db().trim_start_matches("sqlite://"));
    set_mode(Path::new(&token), 0o640);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert!(
        fail_open(&report)
            .iter()
            .any(|f| f.contains("act as a reviewer")),
        "{report:#}"
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 0, "{report:#}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token)
        .expect("the token file")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn database_modes_owners_and_places_are_checked_and_modes_fixed() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    install(&cli, project.path(), home.path(), "claude-code", "project");
    let file = cli.db().trim_start_matches("sqlite://").to_owned();
    // Writable by every local user: anyone could change the rules.
    set_mode(Path::new(&file), 0o666);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert!(
        fail_open(&report).iter().any(|f| f.contains("mode 666")),
        "{report:#}"
    );
    // Readable only: a warning (its secrets), exit 0.
    set_mode(Path::new(&file), 0o644);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["databases"][0]["findings"][0]["severity"], "warning");
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["databases"][0]["mode"], "600", "{report:#}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    // A database inside the project (a repository can ship one): found, exit 1.
    let shipped = project.path().join("assent.db");
    let shipped_url = format!("sqlite://{}", shipped.display());
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", &shipped_url, "agent", "list"])
        .output()
        .expect("runs");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    set_mode(&shipped, 0o600);
    write(
        &project.path().join(".claude/settings.local.json"),
        &json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
            "command": format!("{} --db {shipped_url} hook claude-code --agent a", env!("CARGO_BIN_EXE_assent")),
            "timeout": 600, "onFailure": "block"}]}]}}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert!(
        fail_open(&report)
            .iter()
            .any(|f| f.contains("inside the project")),
        "{report:#}"
    );
}

#[test]
fn the_canary_without_the_agent_feeds_the_hook_its_event() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    install(&cli, project.path(), home.path(), "cursor", "project");
    install(&cli, project.path(), home.path(), "claude-code", "project");
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 0, "{report:#}");
    let canaries = report["canaries"].as_array().expect("canaries");
    assert_eq!(canaries.len(), 2, "{report:#}");
    for canary in canaries {
        assert_eq!(canary["outcome"], "blocked", "{canary:#}");
        assert!(
            canary["how"].as_str().unwrap_or("").contains("on stdin"),
            "{canary:#}"
        );
    }
    // Cursor without failClosed: the same canary is let through.
    let path = project.path().join(".cursor/hooks.json");
    let mut settings = read(&path);
    settings["hooks"]["preToolUse"][0]
        .as_object_mut()
        .expect("an entry")
        .remove("failClosed");
    write(&path, &settings);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 1, "{report:#}");
    let cursor = report["canaries"]
        .as_array()
        .expect("canaries")
        .iter()
        .find(|c| c["kind"] == "cursor")
        .expect("cursor's canary");
    assert_eq!(cursor["outcome"], "LET THROUGH", "{cursor:#}");
}

/// `PATH` with the folders of `programs` first.
fn path_with(programs: &[&Path]) -> String {
    let mut dirs: Vec<String> = programs
        .iter()
        .map(|p| p.parent().expect("a folder").display().to_string())
        .collect();
    dirs.push(std::env::var("PATH").unwrap_or_else(|_| BARE_PATH.to_owned()));
    dirs.join(":")
}

#[test]
fn the_canary_drives_the_real_claude_code_and_gemini_cli() {
    let Some(claude) = super::hooks::npm_cli(
        "@anthropic-ai/claude-code",
        "2.1.328",
        "claude",
        "claude-npm",
    ) else {
        return;
    };
    let Some(gemini) =
        super::hooks::npm_cli("@google/gemini-cli", "0.61.0", "gemini", "gemini-npm")
    else {
        return;
    };
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    install(&cli, project.path(), home.path(), "claude-code", "project");
    install(&cli, project.path(), home.path(), "gemini", "project");
    let path = path_with(&[&claude, &gemini]);
    let (out, report) = doctor(&cli, project.path(), home.path(), &path, &["--canary"]);
    assert_eq!(
        code(&out),
        0,
        "{report:#} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let canaries = report["canaries"].as_array().expect("canaries");
    assert_eq!(canaries.len(), 2, "{report:#}");
    for canary in canaries {
        assert_eq!(canary["outcome"], "blocked", "{canary:#}");
        assert!(
            canary["how"].as_str().unwrap_or("").starts_with("real "),
            "{canary:#}"
        );
    }
    let versions: Vec<&str> = report["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["version"].as_str())
        .collect();
    assert!(
        versions.iter().any(|v| v.contains("2.1.328")),
        "{versions:?}"
    );
    assert!(
        versions.iter().any(|v| v.contains("0.61.0")),
        "{versions:?}"
    );

    // Claude Code without onFailure: the real agent runs the canary's call when
    // Assent's binary is missing, and the doctor says so.
    let file = project.path().join(".claude/settings.json");
    let mut settings = read(&file);
    for event in ["PreToolUse", "PostToolUse"] {
        settings["hooks"][event][0]["hooks"][0]
            .as_object_mut()
            .expect("our entry")
            .remove("onFailure");
    }
    write(&file, &settings);
    let (out, report) = doctor(&cli, project.path(), home.path(), &path, &["--canary"]);
    assert_eq!(code(&out), 1, "{report:#}");
    let claude = report["canaries"]
        .as_array()
        .expect("canaries")
        .iter()
        .find(|c| c["kind"] == "claude-code")
        .expect("Claude Code's canary");
    assert_eq!(claude["outcome"], "LET THROUGH", "{claude:#}");
}

#[test]
fn gateways_in_mcp_client_files_are_found_and_a_way_around_them_is_fail_open() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    let exe = env!("CARGO_BIN_EXE_assent");
    let gateway = json!({"command": exe, "args": ["--db", cli.db(), "mcp", "--server", "files",
        "--agent", "desktop", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]});
    write(
        &project.path().join(".mcp.json"),
        &json!({"mcpServers": {"assent": gateway.clone(), "search": {"command": "uvx", "args": ["mcp-server-fetch"]}}}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert_eq!(report["gateways"][0]["server"], "assent", "{report:#}");
    assert_eq!(report["gateways"][0]["onFailure"], "blocks");
    assert_eq!(
        report["databases"][0]["mode"], "600",
        "the gateway's database is checked"
    );
    // The canary: the gateway started as the client starts it, its database made
    // unopenable and its upstream a stub whose tool would make a marker.
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--canary"]);
    assert_eq!(code(&out), 0, "{report:#}");
    let canary = &report["canaries"][0];
    assert_eq!(canary["kind"], "mcp-gateway", "{report:#}");
    assert_eq!(canary["outcome"], "blocked", "{canary:#}");
    assert!(
        canary["detail"]
            .as_str()
            .unwrap_or("")
            .contains("exit Some(1)"),
        "{canary:#}"
    );

    // The same upstream listed beside the gateway: the agent can call it directly.
    write(
        &project.path().join(".mcp.json"),
        &json!({"mcpServers": {"assent": gateway, "files": {"command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/srv"]}}}),
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    let findings = report["gateways"][0]["findings"].to_string();
    assert!(findings.contains("without the gateway"), "{findings}");
}

#[test]
fn a_settings_file_others_may_change_is_fail_open_and_fixed() {
    let cli = Cli::new();
    private_database(&cli);
    let project = tempfile::tempdir().expect("project");
    let home = tempfile::tempdir().expect("home");
    install(&cli, project.path(), home.path(), "cursor", "project");
    let file = project.path().join(".cursor/hooks.json");
    set_mode(&file, 0o666);
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &[]);
    assert_eq!(code(&out), 1, "{report:#}");
    assert!(
        report["settingsFiles"][0]["text"]
            .as_str()
            .unwrap_or("")
            .contains("remove the hook"),
        "{report:#}"
    );
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 0, "{report:#}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&file)
        .expect("the file")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
}

#[test]
fn a_project_that_is_not_a_folder_is_a_usage_error_and_a_linked_file_stays_linked() {
    let cli = Cli::new();
    private_database(&cli);
    let home = tempfile::tempdir().expect("home");
    let out = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args([
            "--db",
            &cli.db(),
            "doctor",
            "--project",
            "/nonexistent/project",
        ])
        .env("HOME", home.path())
        .output()
        .expect("runs");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));

    // A settings file that is a link into a dotfiles folder: fixed where it lives.
    let project = tempfile::tempdir().expect("project");
    let dotfiles = tempfile::tempdir().expect("dotfiles");
    let real = dotfiles.path().join("claude-settings.json");
    write(
        &real,
        &json!({"hooks": {"PreToolUse": [{"matcher": "*", "hooks": [{"type": "command",
            "command": format!("{} --db {} hook claude-code --agent a", env!("CARGO_BIN_EXE_assent"), cli.db())}]}]}}),
    );
    std::fs::create_dir_all(project.path().join(".claude")).expect("folder");
    let link = project.path().join(".claude/settings.json");
    std::os::unix::fs::symlink(&real, &link).expect("a link");
    let (out, report) = doctor(&cli, project.path(), home.path(), BARE_PATH, &["--fix"]);
    assert_eq!(code(&out), 0, "{report:#}");
    assert!(
        std::fs::symlink_metadata(&link)
            .expect("the link")
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        read(&real)["hooks"]["PreToolUse"][0]["hooks"][0]["onFailure"],
        "block"
    );
}
