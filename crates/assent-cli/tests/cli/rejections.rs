//! Remembered rejections said aloud (issue 53, point 6): a call a person rejected is
//! refused without asking when the agent makes exactly that call again, and that refusal
//! is on the record (`audit`, `history`, naming the rejection), listed by `assent
//! rejections`, forgotten by `assent rejections forget`, and the window is the agent's
//! own setting (`assent agent set --remember-rejections`), shown by `agent show`.

use super::{Cli, assert_fails, code, serve};
use serde_json::{Value, json};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A Claude Code `PreToolUse` event of a `Bash` call of `command` in `cwd`.
fn bash_event(cwd: &std::path::Path, session: &str, call: &str, command: &str) -> String {
    json!({
        "session_id": session, "transcript_path": "/tmp/t.jsonl",
        "cwd": cwd, "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": command, "description": "Clean the build"},
        "tool_use_id": call,
    })
    .to_string()
}

/// `assent hook claude-code --agent claude --wait 20` answering `event`.
fn hook(cli: &Cli, event: &str) -> Child {
    cli.hook("claude-code", "claude", &["--wait", "20"], event)
}

/// The hook's answer (exit 0, JSON on stdout).
fn answer(child: Child) -> Value {
    let out = child.wait_with_output().expect("the hook ends");
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The open set of agent `claude`, once its hook queued one.
fn queued(cli: &Cli) -> String {
    let started = Instant::now();
    loop {
        let pending = cli.json(&["pending"], "");
        if let Some(set) = pending.as_array().expect("sets").first() {
            return set["id"].as_str().expect("id").to_owned();
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "nothing queued"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn decision_of(answer: &Value) -> (&str, &str) {
    let output = &answer["hookSpecificOutput"];
    (
        output["permissionDecision"].as_str().unwrap_or_default(),
        output["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default(),
    )
}

/// `GET base+path` with the bearer `token`: the status and the JSON body.
fn get(base: &str, path: &str, token: &str) -> (u16, Value) {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .expect("sent");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response[9..12].parse().expect("a status");
    let (head, body) = response.split_once("\r\n\r\n").expect("a body");
    // A chunked body: its one chunk between the size line and the end.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let (_, rest) = body.split_once("\r\n").expect("a chunk");
        rest.rsplit_once("\r\n0\r\n")
            .map_or(rest, |(chunk, _)| chunk)
    } else {
        body
    };
    (status, serde_json::from_str(body.trim()).expect("JSON"))
}

const ADMIN: &str = "rejections-admin-token-0123456789";

fn ok(out: std::process::Output) -> std::process::Output {
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn a_call_refused_again_is_recorded_listed_and_can_be_forgotten() {
    let cli = Cli::new().at_the_current_time();
    let project = tempfile::tempdir().expect("project");
    ok(cli.run(&["agent", "create", "--id", "claude", "--categories", "code"]));
    let shown = cli.json(&["agent", "show", "claude"], "");
    assert_eq!(shown.get("rejectionMemory"), None, "the default: 7 days");
    let text =
        String::from_utf8_lossy(&ok(cli.run(&["agent", "show", "claude"])).stdout).into_owned();
    assert!(text.contains("rejections  remembered for 7d"), "{text}");

    // A person rejects the call.
    let asked = hook(
        &cli,
        &bash_event(project.path(), "s1", "t1", "rm -rf build"),
    );
    let set = queued(&cli);
    ok(cli.run(&[
        "reject",
        &set,
        "0",
        "--reason",
        "not in this repo",
        "--as",
        "alice",
    ]));
    assert_eq!(decision_of(&answer(asked)).0, "deny");

    // A later session makes exactly that call: refused at once, nothing queued...
    let again = answer(hook(
        &cli,
        &bash_event(project.path(), "s2", "t2", "rm -rf build"),
    ));
    let (decided, reason) = decision_of(&again);
    assert_eq!(decided, "deny", "{again}");
    assert!(
        reason.contains("rejected this exact proposal recently"),
        "{reason}"
    );
    // The model is told a person decided, and who (issue 53, point 2).
    assert!(
        reason.contains("It was rejected by alice in Assent on "),
        "{reason}"
    );
    assert_eq!(cli.json(&["pending"], ""), json!([]));

    // ...and on the record, naming the rejection.
    let remembered = cli.json(&["rejections"], "");
    let listed = remembered["rejections"].as_array().expect("a list");
    assert_eq!(listed.len(), 1, "{remembered}");
    let rejection = listed[0]["id"].as_str().expect("an id").to_owned();
    assert_eq!(listed[0]["rejectedBy"], "alice");
    assert_eq!(listed[0]["reason"], "not in this repo");
    assert_eq!(listed[0]["args"]["command"], "rm -rf build");
    let audit = cli.json(&["audit"], "");
    let refusals: Vec<&Value> = audit
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r.get("refusedBy").is_some())
        .collect();
    assert_eq!(refusals.len(), 1, "{audit}");
    assert_eq!(
        refusals[0]["refusedBy"],
        json!({"rejectedBefore": rejection})
    );
    assert_eq!(refusals[0]["kind"], "policyDenied");
    assert_eq!(refusals[0]["args"]["command"], "rm -rf build");
    let history = cli.json(&["history", "--agent", "claude"], "");
    assert_eq!(
        history["refusedAgain"][0]["refusedBy"]["rejectedBefore"],
        rejection.as_str()
    );
    let text = String::from_utf8_lossy(&ok(cli.run(&["history", "--agent", "claude"])).stdout)
        .into_owned();
    assert!(
        text.contains("refused again: rejected by alice on ")
            && text.contains(", 'not in this repo'"),
        "{text}"
    );
    let text = String::from_utf8_lossy(&ok(cli.run(&["rejections"])).stdout).into_owned();
    assert!(
        text.contains(&rejection) && text.contains("rm -rf build"),
        "{text}"
    );
    // The page reads the same over the API.
    {
        let served = serve(&cli, ADMIN);
        let (status, listed) = get(&served.base, "/api/rejections", ADMIN);
        assert_eq!(status, 200, "{listed}");
        assert_eq!(
            listed["remembered"][0]["id"],
            rejection.as_str(),
            "{listed}"
        );
        assert_eq!(listed["refusedAgain"][0]["rejectedBy"], "alice", "{listed}");
        assert_eq!(listed["refusedAgain"][0]["reason"], "not in this repo");
        assert_eq!(
            listed["refusedAgain"][0]["refusedBy"]["rejectedBefore"],
            rejection.as_str()
        );
    }
    let out = ok(cli.run(&["audit", "verify"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("verified: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Bad input changes nothing.
    assert_fails(
        &cli.run(&["rejections", "forget", "nonsense"]),
        2,
        "no remembered rejection",
    );
    assert_fails(
        &cli.run(&["rejections", "--agent", "nobody"]),
        1,
        "unknown agent",
    );
    assert_eq!(
        cli.json(&["rejections"], "")["rejections"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );

    // Forgotten (by an id prefix): the identical call is asked again.
    let forgotten = cli.json(
        &["rejections", "forget", &rejection[..8], "--as", "bob"],
        "",
    );
    assert_eq!(forgotten["forgotten"][0]["id"], rejection.as_str());
    assert_eq!(cli.json(&["rejections"], ""), json!({"rejections": []}));
    assert_fails(
        &cli.run(&["rejections", "forget", &rejection]),
        2,
        "no remembered rejection",
    );
    let asked = hook(
        &cli,
        &bash_event(project.path(), "s3", "t3", "rm -rf build"),
    );
    let set = queued(&cli);
    ok(cli.run(&["reject", &set, "0", "--as", "alice"]));
    assert_eq!(decision_of(&answer(asked)).0, "deny");

    // Not remembered at all (the agent's window 0): asked again at once.
    let set_out = cli.json(
        &["agent", "set", "claude", "--remember-rejections", "0"],
        "",
    );
    assert_eq!(set_out["changed"], true);
    assert_eq!(
        cli.json(&["agent", "show", "claude"], "")["rejectionMemory"]["windowSeconds"],
        0
    );
    assert_eq!(cli.json(&["rejections"], ""), json!({"rejections": []}));
    let asked = hook(
        &cli,
        &bash_event(project.path(), "s4", "t4", "rm -rf build"),
    );
    let set = queued(&cli);
    ok(cli.run(&["confirm", &set, "0", "--as", "alice"]));
    assert_eq!(decision_of(&answer(asked)).0, "allow");

    // Every change of the memory is on the consent chain, and the proof holds.
    let out = ok(cli.run(&["audit", "verify"]));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("verified: "),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_fails(
        &cli.run(&["agent", "set", "claude", "--remember-rejections", "soon"]),
        2,
        "expected a duration",
    );
    assert_fails(
        &cli.run(&["agent", "set", "nobody", "--remember-rejections", "1d"]),
        1,
        "unknown agent",
    );
}

/// Issue 53, point 5: an item a person confirmed with edited arguments is shown with
/// the arguments that ran, the agent's beside them and who edited, in `show` (text and
/// JSON) and `pending --json`, without a quorum.
#[test]
fn an_edited_item_shows_what_ran_with_the_agents_arguments_beside_them() {
    let cli = Cli::new();
    let task = cli.agent_and_task();
    let calls = r#"[{"id":"c1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}},
      {"id":"c2","type":"function","function":{"name":"set_task_title","arguments":"{\"title\":\"Renamed\"}"}}]"#;
    let woke = cli.json(&["wake", "--agent", "a", "--task", &task], calls);
    let set = woke["changeSetId"].as_str().expect("queued").to_owned();
    ok(cli.run(&[
        "edit",
        &set,
        "0",
        "--args",
        r#"{"priority":"P1"}"#,
        "--as",
        "alice",
    ]));

    let shown = cli.json(&["show", &set, "0"], "");
    assert_eq!(shown["args"], json!({"priority": "P1"}), "{shown}");
    assert_eq!(shown["proposedArgs"], json!({"priority": "P0"}), "{shown}");
    assert_eq!(shown["editedBy"], "alice");
    let whole = cli.json(&["show", &set], "");
    assert_eq!(whole["items"][0]["args"], json!({"priority": "P1"}));
    assert_eq!(whole["items"][1].get("editedBy"), None, "{whole}");
    // The set still waits (its second item): the list shows what ran too.
    let pending = cli.json(&["pending"], "");
    assert_eq!(pending[0]["items"][0]["args"], json!({"priority": "P1"}));
    assert_eq!(
        pending[0]["items"][0]["proposedArgs"],
        json!({"priority": "P0"})
    );

    let text = String::from_utf8_lossy(&ok(cli.run(&["show", &set, "0"])).stdout).into_owned();
    assert!(text.contains("edited   by alice"), "{text}");
    let proposed = text.find("proposed").expect("the agent's arguments");
    let args = text.find("    args ").expect("what ran");
    assert!(text[proposed..args].contains("P0"), "{text}");
    assert!(text[args..].contains("P1"), "{text}");
    let text = String::from_utf8_lossy(&ok(cli.run(&["pending"])).stdout).into_owned();
    assert!(text.contains("edited by alice"), "{text}");
    // The API's set, as the page reads it.
    {
        let served = serve(&cli, ADMIN);
        let (status, view) = get(&served.base, &format!("/api/change-sets/{set}"), ADMIN);
        assert_eq!(status, 200, "{view}");
        assert_eq!(
            view["items"][0]["args"],
            json!({"priority": "P1"}),
            "{view}"
        );
        assert_eq!(view["items"][0]["proposedArgs"], json!({"priority": "P0"}));
        assert_eq!(view["items"][0]["editedBy"], "alice");
    }

    // The audit trail: the records of the run carry what ran, who edited it and what
    // the agent proposed.
    let audit = cli.json(&["audit"], "");
    let ran: Vec<&Value> = audit
        .as_array()
        .expect("records")
        .iter()
        .filter(|r| r["toolName"] == "update_task_priority")
        .collect();
    assert_eq!(ran.len(), 2, "{audit}");
    for record in ran {
        assert_eq!(record["args"], json!({"priority": "P1"}), "{record}");
        assert_eq!(record["editedBy"], "alice", "{record}");
        assert_eq!(
            record["proposedArgs"],
            json!({"priority": "P0"}),
            "{record}"
        );
    }
}

/// `assent review` says each call refused again, once, with who rejected it, when and
/// why: those of the last day when it starts, then each as it happens.
#[test]
fn review_says_refused_again_with_who_rejected_it_and_why() {
    let cli = Cli::new().at_the_current_time();
    let task = cli.agent_and_task();
    let calls = r#"[{"id":"c1","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P0\"}"}}]"#;
    let woke = cli.json(&["wake", "--agent", "a", "--task", &task], calls);
    let set = woke["changeSetId"].as_str().expect("queued").to_owned();
    ok(cli.run(&["reject", &set, "0", "--reason", "not now", "--as", "alice"]));
    let again = cli.json(&["wake", "--agent", "a", "--task", &task], calls);
    assert_eq!(again["changeSetId"], Value::Null, "{again}");

    let mut command = Command::new(env!("CARGO_BIN_EXE_assent"));
    command
        .args(["--db", &cli.db(), "review", "--as", "bob", "--no-notify"])
        .env_remove("RUST_LOG");
    let mut review =
        rexpect::session::spawn_command(command, Some(15_000)).expect("the reviewer starts");
    review
        .exp_string("refused again: rejected by alice on ")
        .expect("the refusal before the session");
    review
        .exp_string(", 'not now' (update_task_priority {\"priority\":\"P0\"}, agent a,")
        .expect("why, and the call");
    // One refused while the reviewer runs: said as it happens.
    let again = cli.json(&["wake", "--agent", "a", "--task", &task], calls);
    assert_eq!(again["changeSetId"], Value::Null, "{again}");
    review
        .exp_string("refused again: rejected by alice on ")
        .expect("the refusal during the session");
    review.send("q").expect("q");
    review.flush().expect("flushed");
    review.exp_eof().expect("the reviewer ends");
}
