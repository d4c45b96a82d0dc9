//! Policy as a file (issue 57, point 1): `assent policy export` writes every setting of
//! every agent, `plan` shows what a changed file would do with each rule's backtest
//! (the one `assent agent backtest` prints) and exits 0, 2 or 10, `apply` writes the
//! whole file in one transaction (one invalid rule: nothing written), entered on the
//! consent chain with the file's SHA-256 and who applied it; `--prune`, `--yes`, the y/N
//! question on a terminal, and the round trip `export | apply` changing nothing on
//! every backend. The published JSON Schema validates an exported file (Python's
//! `jsonschema` from PyPI, TOML read by `tomllib`).

use super::{Cli, assert_fails, code};
use assent_tests::pypi::{self, Package};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Runs a command that must exit 0; its stdout.
fn ok(cli: &Cli, args: &[&str]) -> String {
    let out = cli.run(args);
    assert_eq!(
        code(&out),
        0,
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Agent `a` with one of every setting the file covers, and agent `b` with categories
/// only.
fn every_setting(cli: &Cli) {
    ok(
        cli,
        &["agent", "create", "--id", "a", "--categories", "work,home"],
    );
    ok(
        cli,
        &["agent", "allow", "a", "send_invoice", "--for", "30d"],
    );
    ok(cli, &["agent", "ask", "a", "refund", "--approvals", "2"]);
    ok(cli, &["agent", "deny", "a", "drop_*"]);
    ok(cli, &["agent", "allow", "a", "Bash(git status:*)"]);
    ok(cli, &["agent", "allow", "a", "Read", "--shadow"]);
    ok(cli, &["agent", "hold", "a", "refund", "300"]);
    ok(cli, &["agent", "idempotent", "a", "send_invoice"]);
    ok(cli, &["agent", "run-after-disconnect", "a", "mcp__*"]);
    ok(cli, &["agent", "set", "a", "--remember-rejections", "12h"]);
    // Rules over the session's history, one of each kind (a shadow one too).
    ok(
        cli,
        &[
            "agent",
            "ask",
            "a",
            "pay",
            "--total",
            "/cents",
            "--over",
            "50000",
            "--per",
            "1d",
            "--approvals",
            "2",
        ],
    );
    ok(
        cli,
        &[
            "agent",
            "allow",
            "a",
            "Bash(git push:*)",
            "--only-after",
            "Bash(cargo test:*)",
            "--within",
            "15m",
            "--succeeded",
        ],
    );
    ok(
        cli,
        &[
            "agent",
            "ask",
            "a",
            "send_mail",
            "--after",
            "5/1h",
            "--shadow",
        ],
    );
    ok(cli, &["agent", "create", "--id", "b", "--categories", "x"]);
}

/// Writes `text` to `name` in the test's folder; its path.
fn file(cli: &Cli, name: &str, text: &str) -> String {
    let path = cli.dir.path().join(name);
    std::fs::write(&path, text).expect("writes the file");
    path.display().to_string()
}

fn sha256(path: &str) -> String {
    let out = Command::new("sha256sum")
        .arg(path)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .expect("a hash")
        .to_owned()
}

/// The consent chain's rules entries of agent `agent` that name a policy file.
async fn policy_entries(cli: &Cli, agent: &str) -> Vec<Value> {
    let store = assent_store::Store::open(&cli.db()).await.expect("store");
    let mut conn = store.read_connection().await.expect("a connection");
    assent_store::chain::entries(&mut conn)
        .await
        .expect("entries")
        .into_iter()
        .filter(|e| e.kind == "rules" && e.subject == agent)
        .map(|e| serde_json::from_str::<Value>(&e.content).expect("JSON"))
        .filter(|c| c.get("policyFile").is_some())
        .collect()
}

async fn round_trip(backend: &assent_tests::TestBackend) {
    let cli = Cli::on(backend).await;
    every_setting(&cli);
    let exported = ok(&cli, &["policy", "export"]);
    for wanted in [
        "id = \"a\"",
        "categories = [\"home\", \"work\"]",
        "remember_rejections = \"12h\"",
        "idempotent = [\"send_invoice\"]",
        "run_after_disconnect = [\"mcp__*\"]",
        "[agents.quorums]\nrefund = 2",
        "[agents.holds]\nrefund = 300",
        "tool = \"Bash(git status:*)\"\naction = \"allow\"",
        "tool = \"drop_*\"\naction = \"deny\"",
        "tool = \"send_invoice\"\naction = \"allow\"\nexpires = \"2026-04-01T09:00:00Z\"",
        "[[agents.shadow_rules]]\ntool = \"Read\"\naction = \"allow\"",
        "kind = \"total\"",
        "kind = \"onlyAfter\"",
        "kind = \"after\"",
        "id = \"b\"",
    ] {
        assert!(exported.contains(wanted), "{wanted:?} in\n{exported}");
    }
    let path = file(&cli, "exported.toml", &exported);
    // The plan of an export changes nothing: exit 0.
    let plan = cli.run(&["--json", "policy", "plan", &path]);
    assert_eq!(code(&plan), 0, "{}", String::from_utf8_lossy(&plan.stderr));
    let plan: Value = serde_json::from_slice(&plan.stdout).expect("JSON");
    assert_eq!(plan["pending"], 0);
    assert_eq!(plan["sha256"], sha256(&path));
    // export | apply changes nothing, and enters nothing on the chain.
    let applied = cli.json(&["policy", "apply", "-", "--yes"], &exported);
    assert_eq!(applied["applied"], 0, "{applied}");
    assert_eq!(ok(&cli, &["policy", "export"]), exported);
    assert!(policy_entries(&cli, "a").await.is_empty());

    // A reviewed change: applied as written, and exported again as written.
    let changed = exported
        .replace("refund = 2", "refund = 3")
        .replace(
            "tool = \"drop_*\"\naction = \"deny\"",
            "tool = \"drop_*\"\naction = \"ask\"",
        )
        .replace(
            "remember_rejections = \"12h\"",
            "remember_rejections = \"0\"",
        );
    let path = file(&cli, "changed.toml", &changed);
    let out = cli.run(&["policy", "plan", &path]);
    assert_eq!(code(&out), 10, "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("~ agent a: rule deny drop_* -> ask drop_*"),
        "{text}"
    );
    assert!(
        text.contains("~ agent a: quorum of refund 2 -> 3 people"),
        "{text}"
    );
    assert!(text.contains("remember rejections 12h -> 0"), "{text}");
    let applied = cli.json(&["policy", "apply", &path, "--yes", "--as", "carol"], "");
    assert_eq!(applied["applied"], 3, "{applied}");
    assert_eq!(applied["by"], "carol");
    assert_eq!(ok(&cli, &["policy", "export"]), changed);
    assert_eq!(code(&cli.run(&["policy", "plan", &path])), 0);
    // On the chain: who applied which file, and the proof still holds.
    let entries = policy_entries(&cli, "a").await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert_eq!(entries[0]["by"], "carol");
    assert_eq!(entries[0]["policyFile"], json!({"sha256": sha256(&path)}));
    assert!(policy_entries(&cli, "b").await.is_empty());
    // The rule the file changed remembers it (what `assent why` names); the ones it
    // left as they were keep their first origin.
    let store = assent_store::Store::open(&cli.db()).await.expect("store");
    let mut conn = store.read_connection().await.expect("a connection");
    let agent = assent_store::agents::get(&mut conn, "a")
        .await
        .expect("read")
        .expect("agent a");
    let origin = |pattern: &str| {
        agent
            .policy
            .rules()
            .iter()
            .find(|r| r.pattern() == pattern)
            .and_then(|r| r.provenance())
            .map(assent_tools::RuleProvenance::to_json)
            .expect("an origin")
    };
    let changed_rule = origin("drop_*");
    assert_eq!(changed_rule["source"], "policyFile", "{changed_rule}");
    assert_eq!(changed_rule["sha256"], sha256(&path), "{changed_rule}");
    assert_eq!(changed_rule["setBy"], "carol", "{changed_rule}");
    assert_eq!(origin("Bash(git status:*)")["source"], "command");
    ok(&cli, &["audit", "verify"]);
}

#[tokio::test]
async fn export_then_apply_changes_nothing_and_a_reviewed_change_is_applied_as_written_on_every_backend()
 {
    for backend in assent_tests::backends() {
        round_trip(&backend).await;
    }
}

#[test]
fn each_rule_of_a_plan_carries_the_backtest_agent_backtest_prints() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    // Three calls asked: one confirmed, one rejected, one edited.
    for (priority, answer) in [("P0", "confirm"), ("P1", "reject"), ("P3", "edit")] {
        let calls = format!(
            r#"[{{"id":"c","type":"function","function":{{"name":"update_task_priority","arguments":"{{\"priority\":\"{priority}\"}}"}}}}]"#
        );
        let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &calls);
        let set = wake["changeSetId"].as_str().expect("queued").to_owned();
        match answer {
            "edit" => {
                cli.json(&["edit", &set, "0", "--args", r#"{"priority":"P2"}"#], "");
            }
            _ => {
                cli.json(&[answer, &set, "0"], "");
            }
        }
    }
    let exported = ok(&cli, &["policy", "export"]);
    let with_allow =
        format!("{exported}\n[[agents.rules]]\ntool = \"update_task_*\"\naction = \"allow\"\n");
    let path = file(&cli, "allow.toml", &with_allow);
    let out = cli.run(&["--json", "policy", "plan", &path]);
    assert_eq!(code(&out), 10, "{}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(plan["pending"], 1, "{plan}");
    let change = &plan["changes"][0];
    assert_eq!(change["change"], "setRule");
    assert_eq!(
        change["to"],
        json!({"tool": "update_task_*", "action": "allow"})
    );
    let mut backtest = cli.json(&["agent", "backtest", "a", "update_task_*", "allow"], "");
    assert_eq!(backtest["since"], plan["since"]);
    backtest.as_object_mut().expect("an object").remove("since");
    assert_eq!(change["backtest"], backtest);
    assert_eq!(backtest["wouldRunUnasked"], 3, "{backtest}");
    assert_eq!(
        backtest["letThrough"].as_array().map(Vec::len),
        Some(2),
        "{backtest}"
    );
    let text = String::from_utf8_lossy(&cli.run(&["policy", "plan", &path]).stdout).into_owned();
    assert!(
        text.contains("3 would have run unasked (1 rejected, 1 edited, 0 undone among them)"),
        "{text}"
    );
}

/// A rule with a condition over the history (issue 57): the plan's backtest judges the
/// condition per past call on what the agent ran before it, and equals `agent
/// backtest` given the same rule by its flags.
#[test]
fn a_conditional_rules_backtest_in_a_plan_is_agent_backtest_with_its_flags() {
    let mut cli = Cli::new();
    let task = cli.agent_and_task();
    let wake = |cli: &Cli, tool: &str, args: &str| {
        let calls = format!(
            r#"[{{"id":"c","type":"function","function":{{"name":"{tool}","arguments":"{args}"}}}}]"#
        );
        let wake = cli.json(&["wake", "--agent", "a", "--task", &task], &calls);
        wake["changeSetId"].as_str().expect("queued").to_owned()
    };
    let priority = |p: &str| format!(r#"{{\"priority\":\"{p}\"}}"#);
    // Each step a minute after the one before (the commands' clock is fixed).
    let mut minute = 0;
    let mut step = |cli: &mut Cli, tool: &str, args: &str, answer: &str| {
        minute += 1;
        cli.now = format!("2026-03-02T09:{minute:02}:00Z");
        let set = wake(cli, tool, args);
        cli.json(&[answer, &set, "0"], "");
    };
    // Confirmed before any title ran: the condition did not hold.
    step(&mut cli, "update_task_priority", &priority("P0"), "confirm");
    step(
        &mut cli,
        "set_task_title",
        r#"{\"title\":\"Renamed\"}"#,
        "confirm",
    );
    // After the title: one rejected, one confirmed.
    step(&mut cli, "update_task_priority", &priority("P1"), "reject");
    step(&mut cli, "update_task_priority", &priority("P3"), "confirm");

    let exported = ok(&cli, &["policy", "export"]);
    let with_rule = format!(
        "{exported}\n[[agents.rules]]\ntool = \"update_task_priority\"\naction = \"allow\"\n\
         condition = {{ when = {{ kind = \"onlyAfter\", pattern = \"set_task_title\", withinSeconds = 900 }} }}\n"
    );
    let path = file(&cli, "conditional.toml", &with_rule);
    let out = cli.run(&["--json", "policy", "plan", &path]);
    assert_eq!(code(&out), 10, "{}", String::from_utf8_lossy(&out.stderr));
    let plan: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let change = &plan["changes"][0];
    assert_eq!(change["change"], "setRule", "{plan}");
    let mut backtest = cli.json(
        &[
            "agent",
            "backtest",
            "a",
            "update_task_priority",
            "allow",
            "--only-after",
            "set_task_title",
            "--within",
            "15m",
        ],
        "",
    );
    assert_eq!(backtest["since"], plan["since"]);
    backtest.as_object_mut().expect("an object").remove("since");
    assert_eq!(change["backtest"], backtest);
    // The two decided after the title, not the one before it.
    assert_eq!(backtest["calls"], 2, "{backtest}");
    assert_eq!(backtest["wouldRunUnasked"], 2, "{backtest}");
    assert_eq!(
        backtest["letThrough"].as_array().map(Vec::len),
        Some(1),
        "{backtest}"
    );
    // Without the condition, all three.
    let plain = cli.json(
        &["agent", "backtest", "a", "update_task_priority", "allow"],
        "",
    );
    assert_eq!(plain["calls"], 3, "{plain}");
    // The flags are read as `agent allow` reads them: a bad one is a usage error.
    for bad in [
        &[
            "agent",
            "backtest",
            "a",
            "update_task_priority",
            "allow",
            "--after",
            "5/1x",
        ][..],
        &[
            "agent",
            "backtest",
            "a",
            "update_task_priority",
            "allow",
            "--within",
            "15m",
        ],
        &[
            "agent",
            "backtest",
            "a",
            "update_task_priority",
            "deny",
            "--after",
            "1/1h",
        ],
    ] {
        assert_eq!(code(&cli.run(bad)), 2, "{bad:?}");
    }
}

#[test]
fn a_file_with_one_invalid_rule_applies_nothing_and_says_where() {
    let cli = Cli::new();
    every_setting(&cli);
    let exported = ok(&cli, &["policy", "export"]);
    // Many good changes and one bad action on its own line.
    let bad = format!(
        "{}\n[[agents.rules]]\ntool = \"update_task_*\"\naction = \"maybe\"\n",
        exported.replace("refund = 2", "refund = 4").replace(
            "id = \"b\"\ncategories = [\"x\"]",
            "id = \"b\"\ncategories = [\"y\"]"
        )
    );
    let line = bad.lines().count();
    let path = file(&cli, "bad.toml", &bad);
    for args in [
        vec!["policy", "plan", path.as_str()],
        vec!["policy", "apply", path.as_str(), "--yes"],
    ] {
        let out = cli.run(&args);
        assert_fails(
            &out,
            2,
            &format!("invalid policy file at line {line}, column 10"),
        );
        assert_fails(&out, 2, "unknown rule action \"maybe\"");
    }
    assert_eq!(ok(&cli, &["policy", "export"]), exported);

    // An unknown key is named, with its line.
    let unknown = exported.replace("action = \"deny\"", "action = \"deny\"\napprovals = 2");
    let line = unknown
        .lines()
        .position(|l| l.starts_with("approvals"))
        .expect("the line")
        + 1;
    let path = file(&cli, "unknown.toml", &unknown);
    let out = cli.run(&["policy", "apply", &path, "--yes"]);
    assert_fails(&out, 2, &format!("line {line}, column 1"));
    assert_fails(&out, 2, "unknown field `approvals`");
    // A hold on an argument pattern, a quorum of one, a time that is not RFC 3339.
    for (from, to, said) in [
        ("refund = 300", "\"Bash(rm *)\" = 300", "argument pattern"),
        ("refund = 2", "refund = 1", "at least 2"),
        ("2026-04-01T09:00:00Z", "next week", "RFC 3339"),
    ] {
        let path = file(&cli, "bad.toml", &exported.replace(from, to));
        assert_fails(&cli.run(&["policy", "apply", &path, "--yes"]), 2, said);
    }
    assert_eq!(ok(&cli, &["policy", "export"]), exported);
    // A file that is not there.
    assert_fails(
        &cli.run(&["policy", "plan", "/nonexistent/policy.toml"]),
        2,
        "cannot read the policy file",
    );
}

#[test]
fn prune_removes_what_the_file_does_not_name_and_without_it_it_stays() {
    let cli = Cli::new();
    every_setting(&cli);
    let minimal = "version = 1\n\n[[agents]]\nid = \"a\"\ncategories = [\"home\", \"work\"]\n\n[[agents.rules]]\ntool = \"drop_*\"\naction = \"deny\"\n";
    let path = file(&cli, "minimal.toml", minimal);
    let before = ok(&cli, &["policy", "export"]);
    assert_eq!(code(&cli.run(&["policy", "plan", &path])), 0);
    let applied = cli.json(&["policy", "apply", &path, "--yes"], "");
    assert_eq!(applied["applied"], 0);
    assert_eq!(ok(&cli, &["policy", "export"]), before);

    let out = cli.run(&["policy", "plan", &path, "--prune"]);
    assert_eq!(code(&out), 10);
    let applied = cli.json(&["policy", "apply", &path, "--yes", "--prune"], "");
    let lines: Vec<&str> = applied["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|c| c["change"].as_str().expect("a kind"))
        .collect();
    assert_eq!(
        lines,
        [
            "removeRule",
            "removeRule",
            "removeRule",
            "removeRule",
            "removeRule",
            "removeShadowRule",
            "removeShadowRule",
            "quorum",
            "hold",
            "idempotent",
            "runAfterDisconnect"
        ],
        "{applied}"
    );
    // What stays: the rejection window (a file that leaves it out leaves it as it
    // is), and agent b, which the file does not name.
    let after = ok(&cli, &["policy", "export", "--agent", "a"]);
    assert_eq!(
        after,
        "version = 1\n\n[[agents]]\nid = \"a\"\ncategories = [\"home\", \"work\"]\nremember_rejections = \"12h\"\n\n[[agents.rules]]\ntool = \"drop_*\"\naction = \"deny\"\n"
    );
    assert!(ok(&cli, &["policy", "export"]).contains("id = \"b\""));
    assert_eq!(code(&cli.run(&["policy", "plan", &path, "--prune"])), 0);
    ok(&cli, &["audit", "verify"]);
}

#[test]
fn apply_asks_on_a_terminal_and_refuses_without_one_unless_told_yes() {
    let cli = Cli::new();
    every_setting(&cli);
    let exported = ok(&cli, &["policy", "export"]);
    let changed = exported.replace("refund = 300", "refund = 60");
    let path = file(&cli, "changed.toml", &changed);
    // No terminal, no --yes: refused, nothing written.
    assert_fails(&cli.run(&["policy", "apply", &path]), 2, "pass --yes");
    assert_fails(
        &cli.run_with(&["policy", "apply", "-"], &changed),
        2,
        "pass --yes",
    );
    assert_eq!(ok(&cli, &["policy", "export"]), exported);

    // On a terminal: the plan, then y/N; "n" writes nothing, "y" applies.
    let ask = |answer: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_assent"));
        command
            .args([
                "--db",
                &cli.db(),
                "--now",
                &cli.now,
                "policy",
                "apply",
                &path,
            ])
            .args(["--as", "dana"])
            .env_remove("RUST_LOG");
        let mut session =
            rexpect::session::spawn_command(command, Some(15_000)).expect("assent starts");
        session
            .exp_string("~ agent a: hold of refund 300 s -> 60 s")
            .expect("the plan");
        session
            .exp_string("Apply these 1 change(s) as dana? [y/N]")
            .expect("the question");
        session.send_line(answer).expect("answers");
        session.exp_eof().expect("ends")
    };
    let said = ask("n");
    assert!(said.contains("Nothing applied"), "{said}");
    assert_eq!(ok(&cli, &["policy", "export"]), exported);
    let said = ask("y");
    assert!(said.contains("Applied policy file sha256"), "{said}");
    assert_eq!(ok(&cli, &["policy", "export"]), changed);
}

#[test]
fn export_of_one_agent_and_of_an_unknown_one() {
    let cli = Cli::new();
    every_setting(&cli);
    let b = ok(&cli, &["policy", "export", "--agent", "b"]);
    assert_eq!(
        b,
        "version = 1\n\n[[agents]]\nid = \"b\"\ncategories = [\"x\"]\n"
    );
    assert_fails(
        &cli.run(&["policy", "export", "--agent", "ghost"]),
        1,
        "unknown agent \"ghost\"",
    );
    let json = cli.json(&["policy", "export", "--agent", "b"], "");
    assert_eq!(
        json,
        json!({"version": 1, "agents": [{"id": "b", "categories": ["x"]}]})
    );
}

/// A Python with `jsonschema`, or `None` (with a note) outside CI when it cannot be
/// installed.
fn schema_python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_assent"));
    let venv = exe
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("policy-schema-venv"));
    let install = || {
        let venv = venv.ok_or("no target directory")?;
        pypi::install(&Package {
            requirement: "jsonschema>=4.18",
            probe: "import jsonschema, tomllib",
            venv: &venv,
        })
    };
    pypi::required(&PYTHON, install, "the policy file's schema test")
}

/// What `jsonschema` says of the TOML file `path` against the published schema: `ok`,
/// or the first error.
fn validate(python: &Path, path: &str) -> String {
    let schema = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/policy-file.schema.json");
    let program = r#"
import json, sys, tomllib, jsonschema
schema = json.load(open(sys.argv[1]))
with open(sys.argv[2], "rb") as f:
    document = tomllib.load(f)
validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
errors = sorted(validator.iter_errors(document), key=lambda e: list(e.path))
print(errors[0].message if errors else "ok")
"#;
    let out = Command::new(python)
        .args(["-c", program])
        .arg(&schema)
        .arg(path)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn the_published_schema_validates_an_exported_file_and_refuses_an_unknown_key() {
    let Some(python) = schema_python() else {
        return;
    };
    let cli = Cli::new();
    every_setting(&cli);
    let exported = ok(&cli, &["policy", "export"]);
    let path = file(&cli, "exported.toml", &exported);
    assert_eq!(validate(&python, &path), "ok");
    let path = file(
        &cli,
        "unknown.toml",
        &exported.replace("action = \"deny\"", "action = \"deny\"\napprovals = 2"),
    );
    assert!(validate(&python, &path).contains("approvals"));
    let path = file(
        &cli,
        "bad.toml",
        &exported.replace("action = \"deny\"", "action = \"maybe\""),
    );
    assert!(validate(&python, &path).contains("maybe"));
}
