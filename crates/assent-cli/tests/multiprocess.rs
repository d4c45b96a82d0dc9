//! Several `assent` processes over one database: eight processes confirm the same 100
//! items at once, on every backend of the conformance suite, and each item is applied
//! exactly once.

use assent_tests::{TestBackend, backends};
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Output, Stdio};

const NOW: &str = "2026-03-02T09:00:00Z";
const PROCESSES: usize = 8;
const SETS: usize = 10;
const ITEMS_PER_SET: usize = 10;

fn assent(db: &str, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
        .args(["--db", db, "--now", NOW, "--json"])
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("assent starts");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("stdin written");
    child.wait_with_output().expect("assent runs")
}

fn json(db: &str, args: &[&str], stdin: &str) -> Value {
    let out = assent(db, args, stdin);
    assert!(
        out.status.success(),
        "assent {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// `SETS` tasks, each with a change set of `ITEMS_PER_SET` checklist additions.
fn seed(db: &str) -> Vec<(String, String)> {
    json(
        db,
        &["agent", "create", "--id", "a", "--categories", "work"],
        "",
    );
    (0..SETS)
        .map(|s| {
            let task = json(
                db,
                &["task", "create", "--title", &format!("T{s}"), "--category", "work"],
                "",
            )["id"]
                .as_str()
                .expect("task id")
                .to_owned();
            let calls: Vec<Value> = (0..ITEMS_PER_SET)
                .map(|i| {
                    serde_json::json!({"id": format!("call_{i}"), "type": "function",
                        "function": {"name": "add_checklist_item",
                                     "arguments": serde_json::json!({"title": format!("item {s}.{i}")}).to_string()}})
                })
                .collect();
            let wake = json(
                db,
                &["wake", "--agent", "a", "--task", &task],
                &Value::Array(calls).to_string(),
            );
            let set = wake["changeSetId"].as_str().expect("a set").to_owned();
            (task, set)
        })
        .collect()
}

/// One process per `confirm SET --all`, `PROCESSES` workers each going through every
/// set: returns how many items each confirmation reported confirmed.
fn race(db: &str, sets: &[(String, String)]) -> usize {
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..PROCESSES)
            .map(|_| {
                scope.spawn(|| {
                    let mut confirmed = 0;
                    for (_, set) in sets {
                        let out = assent(db, &["confirm", set, "--all"], "");
                        let report: Value =
                            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
                                panic!("{e}: {}", String::from_utf8_lossy(&out.stderr))
                            });
                        for item in report["items"].as_array().expect("items") {
                            match item["result"].as_str() {
                                Some("confirmed") => confirmed += 1,
                                Some("skipped") => {}
                                _ => assert_eq!(
                                    item["conflict"], true,
                                    "a losing confirmation is a conflict: {item}"
                                ),
                            }
                        }
                    }
                    confirmed
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("worker"))
            .sum()
    })
}

async fn eight_processes_on(backend: &TestBackend) {
    let (db, _dir) = backend.fresh_database().await;
    let sets = seed(&db);
    let confirmed = tokio::task::block_in_place(|| race(&db, &sets));
    assert_eq!(confirmed, SETS * ITEMS_PER_SET, "{backend:?}");
    for (s, (task, _)) in sets.iter().enumerate() {
        let shown = json(&db, &["task", "show", task], "");
        let mut titles: Vec<&str> = shown["checklist"]
            .as_array()
            .expect("checklist")
            .iter()
            .map(|item| item["title"].as_str().expect("title"))
            .collect();
        titles.sort_unstable();
        let mut expected: Vec<String> = (0..ITEMS_PER_SET)
            .map(|i| format!("item {s}.{i}"))
            .collect();
        expected.sort_unstable();
        assert_eq!(
            titles, expected,
            "every item applied exactly once ({backend:?})"
        );
    }
    let pending = json(&db, &["pending"], "");
    assert_eq!(pending, serde_json::json!([]), "nothing left open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_processes_confirming_the_same_hundred_items_apply_each_once() {
    for backend in backends() {
        eight_processes_on(&backend).await;
    }
}
