//! `assent telegram` and `assent serve --telegram`, end to end: a coding agent's hook
//! call waits, the set is posted to a local fake of Telegram's Bot API (an axum server
//! that long-polls `getUpdates` with offsets and checks each request's shape), a mapped
//! person's tap answers the hook within a second, and the consent chain holds. Bad
//! input to `connect` and `users` is refused (exit 2) and changes nothing.

use super::{Cli, assert_fails, code};
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BOT_TOKEN: &str = "123456:end-To_end";

#[derive(Default)]
struct Fake {
    calls: Vec<(String, Value)>,
    broken: Vec<String>,
    updates: Vec<Value>,
}

type Shared = Arc<(Mutex<Fake>, tokio::sync::Notify)>;

async fn answer(
    axum::extract::State(shared): axum::extract::State<Shared>,
    axum::extract::Path((bot, method)): axum::extract::Path<(String, String)>,
    axum::Json(body): axum::Json<Value>,
) -> axum::Json<Value> {
    let (lock, notify) = &*shared;
    if bot != format!("bot{BOT_TOKEN}") {
        lock.lock()
            .expect("lock")
            .broken
            .push(format!("{method}: not the token"));
    }
    if method == "getUpdates" {
        let offset = body["offset"].as_i64().unwrap_or(-1);
        let timeout = body["timeout"].as_u64().unwrap_or(0);
        for _ in 0..2 {
            let notified = notify.notified();
            {
                let mut fake = lock.lock().expect("lock");
                if offset < 0 || timeout == 0 {
                    fake.broken
                        .push(format!("getUpdates without offset or timeout: {body}"));
                }
                fake.updates
                    .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
                if !fake.updates.is_empty() {
                    return axum::Json(json!({"ok": true, "result": fake.updates.clone()}));
                }
            }
            let _ = tokio::time::timeout(Duration::from_secs(timeout.min(50)), notified).await;
        }
        return axum::Json(json!({"ok": true, "result": []}));
    }
    let mut fake = lock.lock().expect("lock");
    if method == "sendMessage" || method == "editMessageText" {
        let text = body["text"].as_str().unwrap_or_default();
        if text.is_empty() || text.chars().count() > 4_096 {
            fake.broken
                .push(format!("{method}: text empty or over 4,096"));
        }
        for button in body["reply_markup"]["inline_keyboard"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|row| row.as_array().cloned().unwrap_or_default())
        {
            if button["callback_data"]
                .as_str()
                .is_some_and(|d| d.len() > 64)
            {
                fake.broken
                    .push(format!("callback_data over 64 bytes: {button}"));
            }
        }
    }
    fake.calls.push((method, body));
    let n = fake.calls.len();
    axum::Json(json!({"ok": true, "result": {"message_id": n}}))
}

/// The fake on a random loopback port, served by a runtime of its own.
fn fake_telegram() -> (String, Shared) {
    let shared = Shared::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    let state = shared.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let app = axum::Router::new()
                .route("/{bot}/{method}", axum::routing::post(answer))
                .with_state(state);
            axum::serve(listener, app).await.expect("serves");
        });
    });
    (base, shared)
}

fn calls(shared: &Shared, method: &str) -> Vec<Value> {
    let fake = shared.0.lock().expect("lock");
    assert!(fake.broken.is_empty(), "{:?}", fake.broken);
    fake.calls
        .iter()
        .filter(|(m, _)| m == method)
        .map(|(_, b)| b.clone())
        .collect()
}

fn wait_for(shared: &Shared, method: &str) -> Value {
    let started = Instant::now();
    loop {
        if let Some(first) = calls(shared, method).into_iter().next() {
            return first;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "never: {method}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_tap_in_telegram_answers_a_waiting_hook_within_a_second() {
    let cli = Cli::new().at_the_current_time();
    let (base, shared) = fake_telegram();
    let out = cli.run(&["agent", "create", "--id", "coder", "--categories", "code"]);
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let out = cli.run_in_env(
        &[
            "telegram",
            "connect",
            "--chat",
            "-100777",
            "--telegram-api-url",
            "http://127.0.0.1:9",
        ],
        "",
        &[("ASSENT_TELEGRAM_BOT_TOKEN", BOT_TOKEN)],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("end-To_end"));
    assert_eq!(
        code(&cli.run(&["telegram", "users", "add", "42", "--as", "alice"])),
        0
    );
    let status = cli.json(&["telegram", "status"], "");
    assert!(!status.to_string().contains("end-To_end"), "{status}");
    assert_eq!(status["users"], json!([{"userId": "42", "name": "alice"}]));

    // The fake is named on `serve` (the connection names a port nothing listens on).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let _served = Served(
        Command::new(env!("CARGO_BIN_EXE_assent"))
            .args([
                "--db",
                &cli.db(),
                "serve",
                "--addr",
                &format!("127.0.0.1:{port}"),
            ])
            .args(["--token", "test-token-0123456789abcdef", "--telegram"])
            .env("ASSENT_TELEGRAM_API_URL", &base)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("assent serve starts"),
    );
    let event = std::fs::read_to_string(format!(
        "{}/tests/fixtures/hooks/claude-code.PreToolUse.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the fixture");
    let hook = cli.hook("claude-code", "coder", &["--wait", "60"], &event);
    let posted = wait_for(&shared, "sendMessage");
    assert_eq!(posted["chat_id"], "-100777");
    assert!(
        posted["text"]
            .as_str()
            .is_some_and(|t| t.contains("rm -rf build/")),
        "{posted}"
    );
    let approve = posted["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .expect("Approve")
        .to_owned();

    let tapped = Instant::now();
    {
        let (lock, notify) = &*shared;
        lock.lock()
            .expect("lock")
            .updates
            .push(json!({"update_id": 7, "callback_query": {
            "id": "cq1", "chat_instance": "c", "data": approve,
            "from": {"id": 42, "is_bot": false, "first_name": "Alice"},
            "message": {"message_id": 1, "date": 0, "chat": {"id": -100777, "type": "group"}}}}));
        notify.notify_waiters();
    }
    let out = hook.wait_with_output().expect("the hook ends");
    let took = tapped.elapsed();
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        answer["hookSpecificOutput"]["permissionDecision"], "allow",
        "{answer}"
    );
    assert!(
        took < Duration::from_secs(1),
        "answered {took:?} after the tap"
    );
    let proof = cli.run(&["audit", "verify", "--strict"]);
    let said = String::from_utf8_lossy(&proof.stdout);
    assert!(
        code(&proof) == 0 && said.starts_with("verified: "),
        "{said}"
    );
    let pending = cli.json(&["pending"], "");
    assert_eq!(pending, json!([]), "{pending}");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let cli = Cli::new();
    for (args, said) in [
        (
            vec!["telegram", "connect", "--bot-token", "not a token"],
            "BotFather",
        ),
        (
            vec!["telegram", "connect", "--bot-token", "1:a/b"],
            "BotFather",
        ),
        (
            vec![
                "telegram",
                "connect",
                "--bot-token",
                "1:ab",
                "--chat",
                "@group",
            ],
            "invalid Telegram chat",
        ),
        (
            vec![
                "telegram",
                "connect",
                "--bot-token",
                "1:ab",
                "--telegram-api-url",
                "file:///etc",
            ],
            "http:// or https://",
        ),
        (
            vec!["telegram", "users", "add", "U1", "--as", "alice"],
            "invalid Telegram user",
        ),
        (
            vec!["telegram", "users", "add", "--as", "alice", "--", "-5"],
            "invalid Telegram user",
        ),
    ] {
        assert_fails(&cli.run(&args), 2, said);
    }
    assert_eq!(
        cli.json(&["telegram", "status"], ""),
        json!({"connected": null, "users": []})
    );
}
