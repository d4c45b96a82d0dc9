//! OpenTelemetry export (issue 57): with `OTEL_EXPORTER_OTLP_ENDPOINT` set, a
//! confirmation through the CLI arrives at a real OTLP/HTTP receiver (a small one on
//! the `opentelemetry-proto` package from PyPI, `tests/otlp_receiver.py`, installed
//! on first use into `target/otlp-venv`) as an `execute_tool` span with the GenAI and
//! `assent.*` attributes, the engine's span of the confirmation under it; without the
//! variable nothing is sent.

use super::{CALLS, Cli, code};
use assent_tests::pypi::{self, Package};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// A Python with `opentelemetry-proto`, or `None` (with a note) outside CI when it
/// cannot be installed.
fn proto_python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_assent"));
    let venv = exe
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join("otlp-venv"));
    let install = || {
        let venv = venv.ok_or("no target directory")?;
        pypi::install(&Package {
            requirement: "opentelemetry-proto>=1.20",
            probe: "import opentelemetry.proto.collector.trace.v1.trace_service_pb2",
            venv: &venv,
        })
    };
    pypi::required(&PYTHON, install, "the OpenTelemetry export test")
}

/// The receiver, killed when dropped.
struct Receiver(Child);

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the receiver writing spans to `out`; it and its port.
fn receiver(python: &Path, out: &Path) -> (Receiver, u16) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otlp_receiver.py");
    let mut child = Command::new(python)
        .arg(script)
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .expect("the receiver starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the receiver prints its port");
    let port = line.trim().parse().expect("a port");
    (Receiver(child), port)
}

/// The spans the receiver has written.
fn spans(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON span"))
        .collect()
}

#[test]
fn a_confirmation_arrives_at_an_otlp_receiver_as_an_execute_tool_span() {
    let Some(python) = proto_python() else {
        return;
    };
    let cli = Cli::new();
    let out = cli.dir.path().join("spans.jsonl");
    let (_receiver, port) = receiver(&python, &out);
    let endpoint = format!("http://127.0.0.1:{port}");

    let task = cli.agent_and_task();
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], CALLS);
    let set = wake["changeSetId"].as_str().expect("queued").to_owned();
    assert!(spans(&out).is_empty(), "sent without an endpoint");

    let confirmed = cli.run_in_env(
        &["confirm", &set, "0", "--as", "alice"],
        "",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())],
    );
    assert_eq!(
        code(&confirmed),
        0,
        "{}",
        String::from_utf8_lossy(&confirmed.stderr)
    );
    // The command flushed before it exited: the spans are there already.
    let spans = spans(&out);
    let tool = spans
        .iter()
        .find(|s| s["name"] == "execute_tool update_task_priority")
        .unwrap_or_else(|| panic!("no execute_tool span among {spans:#?}"));
    let attributes = &tool["attributes"];
    assert_eq!(tool["service"], "assent");
    assert_eq!(tool["contentType"], "application/x-protobuf");
    for (key, expected) in [
        ("gen_ai.operation.name", "execute_tool"),
        ("gen_ai.tool.name", "update_task_priority"),
        ("gen_ai.tool.call.id", format!("{set}:0").as_str()),
        ("assent.change_set.id", set.as_str()),
        ("assent.decision", "confirmed"),
        ("assent.rule", "ask"),
        ("assent.approver.kind", "cli"),
        ("assent.outcome", "applied"),
    ] {
        assert_eq!(attributes[key], expected, "{key} in {attributes:#}");
    }
    assert_eq!(attributes["assent.item.index"], 0, "{attributes:#}");
    assert_eq!(attributes["assent.approvals.needed"], 1, "{attributes:#}");
    assert!(
        attributes["assent.wait.seconds"]
            .as_f64()
            .is_some_and(|s| s >= 0.0),
        "{attributes:#}"
    );
    assert!(
        !attributes.to_string().contains("alice"),
        "the approver is named by door only: {attributes:#}"
    );
    // The engine's own span of the confirmation is its child, in the same trace.
    assert!(
        spans.iter().any(|s| s["parentSpanId"] == tool["spanId"]
            && s["traceId"] == tool["traceId"]
            && s["name"] == "confirm_item"),
        "{spans:#?}"
    );

    // Without the variable, another confirmation sends nothing.
    let before = spans.len();
    let again = r#"[{"id":"call_3","type":"function","function":{"name":"update_task_priority","arguments":"{\"priority\":\"P3\"}"}}]"#;
    let wake = cli.json(&["wake", "--agent", "a", "--task", &task], again);
    let set = wake["changeSetId"].as_str().expect("queued");
    let other = cli.run(&["confirm", set, "0", "--as", "alice"]);
    assert_eq!(
        code(&other),
        0,
        "{}",
        String::from_utf8_lossy(&other.stderr)
    );
    assert_eq!(super::otel::spans(&out).len(), before);
}
