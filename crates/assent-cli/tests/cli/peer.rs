//! `assent sync --peer` between two devices: device A is the `assent` binary on its own
//! database, device B a real review server (`assent_server::Server`) on a random port
//! over its own SQLite file, run by this test process. Proposals, decisions and tasks
//! travel both ways in one command; a repeat changes nothing; a failure (wrong token,
//! unreachable peer, an answer that is not Assent's) changes nothing on either side;
//! decisions made while apart end as one application and one recorded conflict on both.

use super::{CALLS, Cli, assert_fails, code};
use assent_journal_host::TaskEntities;
use assent_journal_host::journal_engine;
use assent_server::{Server, ServerError};
use assent_store::Store;
use assent_store::tokens::Role;
use assent_sync::SyncState;
use serde_json::{Value, json};
use std::io::{Read, Write};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

const TOKEN: &str = "peer-token-0123456789abcdef";

/// Device B: a review server on a random loopback port, with its own runtime so that
/// it keeps serving while the test waits for the `assent` process of device A.
struct PeerDevice {
    runtime: tokio::runtime::Runtime,
    base: String,
    store: Store,
    client: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<Result<(), ServerError>>>,
    _dir: Option<tempfile::TempDir>,
}

impl PeerDevice {
    /// A server over a fresh database.
    fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}/b.db", dir.path().display());
        let mut device = Self::start_on(&url);
        device._dir = Some(dir);
        device
    }

    /// A server over the database at `url`.
    fn start_on(url: &str) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let (store, engine, listener) = runtime.block_on(async {
            let store = Store::open(url).await.expect("open the database");
            let engine = journal_engine(store.clone()).await.expect("journal engine");
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind a random port");
            (store, engine, listener)
        });
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let server = Server::new(engine, TOKEN)
            .with_routes(Role::Reviewer, assent_journal_host::http::routes());
        let (stop, stopped) = oneshot::channel::<()>();
        let server = runtime.spawn(server.run(listener, async {
            let _ = stopped.await;
        }));
        Self {
            runtime,
            base,
            store,
            client: reqwest::Client::new(),
            stop: Some(stop),
            server: Some(server),
            _dir: None,
        }
    }

    /// `method path` with the token and an optional JSON body: status and JSON body.
    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.runtime.block_on(async {
            let mut request = self
                .client
                .request(method, format!("{}{path}", self.base))
                .bearer_auth(TOKEN);
            if let Some(body) = body {
                request = request.json(&body);
            }
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            let text = response.text().await.expect("body");
            (status, serde_json::from_str(&text).unwrap_or(Value::Null))
        })
    }

    fn get(&self, path: &str) -> Value {
        let (status, body) = self.call(reqwest::Method::GET, path, None);
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let (status, body) = self.call(reqwest::Method::POST, path, Some(body));
        assert!(
            status == 200 || status == 201,
            "POST {path}: {status} {body}"
        );
        body
    }

    fn host_id(&self) -> String {
        self.store.device_id().to_owned()
    }

    /// Device B's synced state, canonical.
    fn state(&self) -> SyncState {
        self.runtime.block_on(synced_state(&self.store))
    }

    /// Device A's synced state, read from its database while no command runs.
    fn state_of(&self, cli: &Cli) -> SyncState {
        self.runtime.block_on(async {
            let store = Store::open(&cli.db()).await.expect("open A's database");
            let state = synced_state(&store).await;
            store.close().await;
            state
        })
    }

    fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let server = self.server.take().expect("running");
        let stopped = self
            .runtime
            .block_on(server)
            .expect("the server does not panic");
        stopped.expect("a clean stop");
        self.runtime.block_on(self.store.close());
    }
}

async fn synced_state(store: &Store) -> SyncState {
    let mut conn = store.read_connection().await.expect("a connection");
    assent_store::sync::local_state(&mut conn, store.device_id(), &TaskEntities)
        .await
        .expect("the synced state")
}

/// `assent --json sync --peer <peer> --token TOKEN` on device A, which must succeed.
fn sync(a: &Cli, peer: &PeerDevice) -> Value {
    a.json(&["sync", "--peer", &peer.base, "--token", TOKEN], "")
}

/// Device A with agent `a`, a task and a change set of two items (priority P0, language
/// en); device B with the same agent. Returns (task, set).
fn propose_on_a(a: &Cli, b: &PeerDevice) -> (String, String) {
    let task = a.agent_and_task();
    b.post("/api/agents", json!({"id": "a", "categories": ["work"]}));
    let set = a.json(&["wake", "--agent", "a", "--task", &task], CALLS)["changeSetId"]
        .as_str()
        .expect("a set")
        .to_owned();
    (task, set)
}

/// Every count of an import report is zero.
fn merged_nothing(report: &Value) -> bool {
    [
        "changeSetsInserted",
        "changeSetsUpdated",
        "decisionsInserted",
        "auditRecordsInserted",
        "entitiesWritten",
    ]
    .iter()
    .all(|count| report[count] == 0)
        && report["conflicts"].as_array().is_some_and(Vec::is_empty)
}

#[test]
fn two_devices_sync_both_ways_over_http_and_a_repeat_changes_nothing() {
    let (a, b) = (Cli::new().at_the_current_time(), PeerDevice::start());
    let (task, set) = propose_on_a(&a, &b);

    let first = sync(&a, &b);
    assert_eq!(first["peerHost"], b.host_id().as_str());
    assert_eq!(first["sent"]["changeSets"], 1);
    assert_eq!(first["peerImport"]["changeSetsInserted"], 1, "{first}");
    assert_eq!(first["peerImport"]["replayed"], false);
    assert_eq!(first["localImport"]["fromHost"], b.host_id().as_str());
    let on_b = b.get(&format!("/api/change-sets/{set}"));
    assert_eq!(on_b["items"][0]["status"], "pending", "{on_b}");
    assert_eq!(
        a.json(&["outbox"], "").as_array().map(Vec::len),
        Some(0),
        "the exchange drained A's outbox"
    );

    let confirmed = b.post(
        &format!("/api/change-sets/{set}/items/0/confirm"),
        json!({}),
    );
    assert_eq!(confirmed["decision"]["verdict"], "confirmed");
    let second = sync(&a, &b);
    let local = &second["localImport"];
    assert_eq!(local["decisionsInserted"], 1, "{second}");
    assert_eq!(local["changeSetsUpdated"], 1, "{second}");
    assert_eq!(local["entitiesWritten"], 1, "{second}");
    assert!(
        local["auditRecordsInserted"].as_u64() >= Some(2),
        "{second}"
    );
    assert_eq!(
        a.json(&["task", "show", &task], "")["priority"],
        "P0",
        "A sees B's change"
    );
    assert_eq!(
        a.json(&["pending", "--task", &task], ""),
        json!([]),
        "B's confirmation resolved the set on A"
    );
    let history =
        String::from_utf8_lossy(&a.run(&["history", "--agent", "a", "--task", &task]).stdout)
            .into_owned();
    assert!(history.contains("## Recent User Decisions"), "{history}");
    let (a_state, b_state) = (b.state_of(&a), b.state());
    assert_eq!(a_state, b_state, "both devices hold the same state");

    let third = sync(&a, &b);
    assert!(merged_nothing(&third["peerImport"]), "{third}");
    assert!(merged_nothing(&third["localImport"]), "{third}");
    assert_eq!(b.state_of(&a), a_state, "a repeat changes nothing on A");
    assert_eq!(b.state(), b_state, "a repeat changes nothing on B");

    // The token may come from the environment, and `sync` subcommands still work
    // with it set; the text output names both sides and never the token.
    let env = [("ASSENT_PEER_TOKEN", TOKEN)];
    let text = a.run_in_env(&["sync", "--peer", &b.base], "", &env);
    let stdout = String::from_utf8_lossy(&text.stdout).into_owned();
    assert_eq!(code(&text), 0, "{}", String::from_utf8_lossy(&text.stderr));
    assert!(
        stdout.starts_with(&format!("Synced with host {}", b.host_id())),
        "{stdout}"
    );
    assert!(stdout.contains("The peer: Merged batch"), "{stdout}");
    assert!(stdout.contains("This device: Merged batch"), "{stdout}");
    assert!(!stdout.contains(TOKEN));
    assert_eq!(code(&a.run_in_env(&["sync", "host"], "", &env)), 0);
    let peers = b.get("/api/sync/peers");
    assert_eq!(peers[0]["hostId"], first["sent"]["fromHost"], "{peers}");
    assert_eq!(peers[0]["batchesMerged"], 4, "{peers}");
    b.stop();
}

#[test]
fn a_failed_peer_sync_changes_nothing_on_either_side() {
    let (a, b) = (Cli::new().at_the_current_time(), PeerDevice::start());
    propose_on_a(&a, &b);
    let a_before = b.state_of(&a);
    let outbox_before = a.json(&["outbox"], "");
    assert_ne!(outbox_before.as_array().map(Vec::len), Some(0));
    let b_before = b.state();

    let wrong_token = "wrong-token-0123456789abcdef";
    let refused = a.run(&["sync", "--peer", &b.base, "--token", wrong_token]);
    assert_fails(&refused, 1, "refused the token (401)");
    assert!(!String::from_utf8_lossy(&refused.stderr).contains(wrong_token));

    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let unreachable = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    assert_fails(
        &a.run(&["sync", "--peer", &unreachable, "--token", TOKEN]),
        1,
        "cannot reach peer",
    );

    let not_assent = serve_one_html_page();
    assert_fails(
        &a.run(&["sync", "--peer", &not_assent, "--token", TOKEN]),
        1,
        "did not answer with Assent's sync JSON",
    );
    // https is spoken (this build has TLS): a plain HTTP server fails the handshake.
    let https = b.base.replacen("http://", "https://", 1);
    assert_fails(
        &a.run(&["sync", "--peer", &https, "--token", TOKEN]),
        1,
        "cannot reach peer",
    );
    assert_fails(
        &a.run(&["sync", "--peer", &b.base]),
        2,
        "needs the peer's token",
    );

    // A server on A's own database is A itself: refused before anything is locked.
    let itself = PeerDevice::start_on(&a.db());
    assert_fails(
        &a.run(&["sync", "--peer", &itself.base, "--token", TOKEN]),
        1,
        "is this device itself",
    );
    itself.stop();

    assert_eq!(b.state_of(&a), a_before, "A's state is unchanged");
    assert_eq!(
        a.json(&["outbox"], ""),
        outbox_before,
        "A's outbox is not drained"
    );
    assert_eq!(b.state(), b_before, "B's state is unchanged");
    assert_eq!(b.get("/api/sync/peers"), json!([]), "B merged nothing");
    b.stop();
}

/// A one-shot HTTP server answering any request with an HTML page; returns its URL.
fn serve_one_html_page() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let page = "<html><body>Not Assent</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    url
}

#[test]
fn decisions_made_apart_end_as_one_application_and_one_conflict_on_both() {
    let (a, b) = (Cli::new().at_the_current_time(), PeerDevice::start());
    let (task, set) = propose_on_a(&a, &b);
    sync(&a, &b);

    // Apart: A confirms item 0 (at its fixed clock, earlier), B confirms it with P3.
    assert_eq!(code(&a.run(&["confirm", &set, "0"])), 0);
    b.post(
        &format!("/api/change-sets/{set}/items/0/edit"),
        json!({"args": {"priority": "P3"}}),
    );
    let synced = sync(&a, &b);
    assert_eq!(
        synced["peerImport"]["conflicts"].as_array().map(Vec::len),
        Some(1),
        "{synced}"
    );
    assert_eq!(
        synced["localImport"]["conflicts"].as_array().map(Vec::len),
        Some(1),
        "{synced}"
    );
    let text =
        String::from_utf8_lossy(&a.run(&["sync", "--peer", &b.base, "--token", TOKEN]).stdout)
            .into_owned();
    assert!(
        !text.contains("See `assent conflicts`"),
        "nothing new: {text}"
    );

    let on_a = a.json(&["conflicts"], "");
    let on_b = b.get("/api/conflicts");
    for conflicts in [&on_a, &on_b] {
        let list = conflicts.as_array().expect("a list");
        assert_eq!(list.len(), 1, "{conflicts}");
        assert_eq!(list[0]["changeSetId"], set.as_str());
        assert_eq!(list[0]["itemIndex"], 0);
        assert_eq!(list[0]["winnerHost"], on_a[0]["winnerHost"]);
        assert_eq!(list[0]["loser"]["originHost"], b.host_id().as_str());
        assert_eq!(list[0]["loser"]["decision"]["verdict"], "confirmed");
    }
    assert_eq!(on_a[0]["loser"], on_b[0]["loser"], "the same decision lost");
    assert_eq!(a.json(&["task", "show", &task], "")["priority"], "P0");
    assert_eq!(
        b.get(&format!("/api/tasks/{task}"))["priority"],
        "P0",
        "B ends with the winner's change, not its own"
    );
    let decided = b.get(&format!("/api/change-sets/{set}"));
    assert_eq!(decided["items"][0]["status"], "confirmed", "{decided}");
    assert_eq!(
        b.state_of(&a),
        b.state(),
        "both devices hold the same state"
    );
    b.stop();
}
