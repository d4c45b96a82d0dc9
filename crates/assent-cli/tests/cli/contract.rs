//! The `--json` contract: no command drops a field that scripts read. A scripted scene
//! runs every command with `--json` output (decisions of every kind, an external job, a
//! grant, tokens, a webhook and its deliveries, two devices with a conflict); the key
//! paths of each output must include every path `fixtures/json-fields.json` records
//! for it (the previous release's; new fields are welcome).
//!
//! A path names a field by its keys from the top, `[]` standing for any element of an
//! array: `[].items[].humanSummary`. The contents of data fields (`args`, a vector
//! clock keyed by host ids, …) are the agent's or the device's, not the contract, so
//! only their own name is recorded. `ASSENT_BLESS_JSON_FIELDS=1` adds this build's new
//! fields to the fixture (for a release); it never removes one.

use super::{CALLS, Cli, NOW, seed_grant};
use assent_confirm::{JobSettings, WakeRequest};
use assent_domain::{OffsetDateTime, Target};
use assent_store::{Store, agents};
use assent_tests::external::{self, CATEGORY, HttpHost, TOOL};
use assent_tests::tool_calls;
use assent_tools::AgentPolicy;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Fields whose contents are data (arguments, clocks keyed by host ids), not shape.
const OPAQUE: [&str; 5] = ["args", "argsPattern", "before", "editedArgs", "vectorClock"];

fn fixture_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/json-fields.json")
}

/// Every key path of `value` below `prefix`.
fn paths(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                out.insert(path.clone());
                if !OPAQUE.contains(&key.as_str()) {
                    paths(inner, &path, out);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// What each command of the scene printed: its key paths, by the command's name.
type Seen = BTreeMap<String, BTreeSet<String>>;

/// Runs `cli` with `--json args` and records the output's key paths under `name`.
fn record(seen: &mut Seen, cli: &Cli, name: &str, args: &[&str]) -> Value {
    record_with(seen, cli, name, args, "")
}

/// [`record`] with `stdin`.
fn record_with(seen: &mut Seen, cli: &Cli, name: &str, args: &[&str], stdin: &str) -> Value {
    let value = cli.json(args, stdin);
    let mut found = BTreeSet::new();
    paths(&value, "", &mut found);
    assert!(
        !found.is_empty(),
        "{name}: the scene must give it something to show: {value}"
    );
    seen.entry(name.to_owned()).or_default().extend(found);
    value
}

/// A wake's call setting the task's priority to `to`.
fn priority(to: &str) -> String {
    let arguments = json!({ "priority": to }).to_string();
    json!([{"id": "call_1", "type": "function",
        "function": {"name": "update_task_priority", "arguments": arguments}}])
    .to_string()
}

/// A string field of `value`.
fn text(value: &Value, field: &str) -> String {
    value[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {value}"))
        .to_owned()
}

/// A set of another host's external tool (two items), queued by an engine in this
/// process: the CLI, which composes only the journal, confirms it and lists its job.
async fn external_set(cli: &Cli) -> String {
    let now =
        OffsetDateTime::parse(NOW, &time::format_description::well_known::Rfc3339).expect("now");
    let store = Store::open(&cli.db()).await.expect("store");
    // Nothing listens on the discard port: the job is never run here, only listed.
    let host = HttpHost::new("http://127.0.0.1:9/", false, false);
    let engine = external::engine(store.clone(), host, JobSettings::default()).await;
    let mut conn = store.read_connection().await.expect("conn");
    agents::upsert(&mut conn, "poster", &AgentPolicy::new([CATEGORY]), now)
        .await
        .expect("agent");
    drop(conn);
    let calls = tool_calls(&[
        (TOOL, json!({"text": "hi"})),
        (TOOL, json!({"text": "bye"})),
    ]);
    let request = WakeRequest::new("poster", Target::new("endpoint", "e1"), "run-x", calls);
    let wake = engine.wakes().wake(request, now).await.expect("wake");
    store.close().await;
    wake.change_set.expect("queued").id.to_string()
}

/// The scene: every command with `--json`, each with something to show.
fn scene() -> Seen {
    let mut seen = BTreeMap::new();
    let seen_ = &mut seen;
    let cli = Cli::new();
    let hook = record(
        seen_,
        &cli,
        "webhooks add",
        &["webhooks", "add", "http://127.0.0.1:9/hook"],
    );
    record(
        seen_,
        &cli,
        "agent create",
        &["agent", "create", "--id", "a", "--categories", "work"],
    );
    let task = record(
        seen_,
        &cli,
        "task create",
        &[
            "task",
            "create",
            "--title",
            "T",
            "--category",
            "work",
            "--priority",
            "P2",
            "--estimate",
            "30",
            "--due",
            "2026-04-01",
            "--label",
            "backend",
            "--checklist",
            "Reproduce",
        ],
    );
    let task = text(&task, "id");
    record(seen_, &cli, "task show", &["task", "show", &task]);
    let wake = ["wake", "--agent", "a", "--task", task.as_str()];
    let first = record_with(seen_, &cli, "wake", &wake, CALLS);
    let first = text(&first, "changeSetId");
    let three = json!([
        {"id": "c1", "type": "function", "function": {"name": "add_checklist_item", "arguments": "{\"title\":\"Write a test\"}"}},
        {"id": "c2", "type": "function", "function": {"name": "set_task_title", "arguments": "{\"title\":\"Fix the login\"}"}},
        {"id": "c3", "type": "function", "function": {"name": "update_task_estimate", "arguments": "{\"minutes\":60}"}}
    ]);
    let second = cli.json(&wake, &three.to_string());
    let second = text(&second, "changeSetId");
    let external = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(external_set(&cli));
    record(seen_, &cli, "confirm SET IDX", &["confirm", &external, "0"]);

    record(seen_, &cli, "pending", &["pending"]);
    record(seen_, &cli, "show SET", &["show", &external]);
    record(seen_, &cli, "show SET IDX", &["show", &external, "0"]);
    record(seen_, &cli, "jobs", &["jobs"]);
    record(seen_, &cli, "confirm SET IDX", &["confirm", &first, "0"]);
    record(
        seen_,
        &cli,
        "reject",
        &["reject", &second, "0", "--reason", "not now"],
    );
    record(
        seen_,
        &cli,
        "edit",
        &["edit", &second, "1", "--args", r#"{"title":"Fix login"}"#],
    );
    record(seen_, &cli, "defer", &["defer", &second, "2"]);
    record(
        seen_,
        &cli,
        "dismiss",
        &["dismiss", &second, "--reason", "enough"],
    );
    // A journal task's set, decided: `taskId`, and the reasons of rejected items.
    record(seen_, &cli, "show SET", &["show", &second]);
    record(seen_, &cli, "show SET IDX", &["show", &second, "0"]);
    let third = cli.json(&wake, &three.to_string());
    record(
        seen_,
        &cli,
        "confirm SET --all",
        &["confirm", &text(&third, "changeSetId"), "--all"],
    );
    cli.json(&wake, &priority("P3"));
    let later = Cli {
        dir: tempfile::tempdir().expect("temp dir"),
        db: cli.db(),
        now: "2026-03-20T09:00:00Z".to_owned(),
    };
    record(seen_, &later, "expire", &["expire"]);
    record(
        seen_,
        &cli,
        "history",
        &["history", "--agent", "a", "--task", &task],
    );
    record(seen_, &cli, "audit", &["audit"]);
    record(seen_, &cli, "outbox", &["outbox"]);

    let grant = seed_grant(&cli, "a/researcher", "update_task_priority");
    record(seen_, &cli, "grants", &["grants"]);
    record(seen_, &cli, "grants revoke", &["grants", "revoke", &grant]);
    let token = record(
        seen_,
        &cli,
        "tokens add",
        &["tokens", "add", "--role", "reviewer"],
    );
    record(seen_, &cli, "tokens", &["tokens"]);
    record(
        seen_,
        &cli,
        "tokens revoke",
        &["tokens", "revoke", &text(&token, "id")],
    );
    record(seen_, &cli, "webhooks", &["webhooks"]);
    record(
        seen_,
        &cli,
        "webhooks deliveries",
        &["webhooks", "deliveries"],
    );
    record(
        seen_,
        &cli,
        "webhooks remove",
        &["webhooks", "remove", &text(&hook, "id")],
    );

    // Two devices decide the same item while apart, then exchange batch files.
    // The other device decides an hour later: its edit loses, deterministically.
    let mut other = Cli::new();
    other.now = "2026-03-02T10:00:00Z".to_owned();
    record(seen_, &other, "sync host", &["sync", "host"]);
    other.json(
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    let shared = cli.json(&wake, &priority("P1"));
    let shared = text(&shared, "changeSetId");
    let file = |device: &Cli, name: &str| {
        device
            .dir
            .path()
            .join(name)
            .to_str()
            .expect("utf-8 path")
            .to_owned()
    };
    let to_other = file(&cli, "a.json");
    record(seen_, &cli, "sync export", &["sync", "export", &to_other]);
    record(seen_, &other, "sync import", &["sync", "import", &to_other]);
    cli.json(&["confirm", &shared, "0"], "");
    other.json(
        &["edit", &shared, "0", "--args", r#"{"priority":"P3"}"#],
        "",
    );
    let (to_other, to_cli) = (file(&cli, "a2.json"), file(&other, "b.json"));
    cli.json(&["sync", "export", &to_other], "");
    other.json(&["sync", "import", &to_other], "");
    other.json(&["sync", "export", &to_cli], "");
    cli.json(&["sync", "import", &to_cli], "");
    record(seen_, &cli, "sync peers", &["sync", "peers"]);
    record(seen_, &cli, "conflicts", &["conflicts"]);
    seen
}

#[test]
fn every_json_command_keeps_the_fields_of_the_previous_release() {
    let seen = scene();
    let path = fixture_path();
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut fixture: Value = serde_json::from_str(&text).expect("the fixture is JSON");
    let commands = fixture["commands"].as_object().expect("commands").clone();

    let mut missing = Vec::new();
    for (name, fields) in &commands {
        let Some(found) = seen.get(name) else {
            missing.push(format!("{name}: the scene no longer runs it"));
            continue;
        };
        for field in fields.as_array().expect("a list of fields") {
            let field = field.as_str().expect("a field path");
            if !found.contains(field) {
                missing.push(format!("{name}: {field}"));
            }
        }
    }
    if std::env::var("ASSENT_BLESS_JSON_FIELDS").as_deref() == Ok("1") {
        let mut blessed = Map::new();
        for (name, found) in &seen {
            let mut all: BTreeSet<String> = found.clone();
            if let Some(kept) = commands.get(name).and_then(Value::as_array) {
                all.extend(kept.iter().filter_map(Value::as_str).map(str::to_owned));
            }
            blessed.insert(name.clone(), json!(all));
        }
        fixture["commands"] = Value::Object(blessed);
        let text = serde_json::to_string_pretty(&fixture).expect("JSON");
        std::fs::write(&path, text + "\n").expect("write the fixture");
    }
    assert!(
        missing.is_empty(),
        "--json output lost fields that the previous release had (scripts read them; add \
         them back, or say in CHANGELOG.md why they go and remove them from {}):\n  {}",
        path.display(),
        missing.join("\n  ")
    );
}
