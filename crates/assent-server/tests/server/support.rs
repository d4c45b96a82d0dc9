//! A real server per test: a fresh SQLite file, a random loopback port, a known token,
//! and a client that talks to it.

use assent_confirm::{BusConfig, ConfirmationBus};
use assent_journal_host::journal_engine;
use assent_server::{DEFAULT_BUS_ROOT, Server, ServerError};
use assent_store::Store;
use assent_store::tokens::Role;
use reqwest::{Method, RequestBuilder, Response};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// The token every test server accepts.
pub const TOKEN: &str = "test-token-0123456789abcdef";

/// A running server and what it runs on.
pub struct TestServer {
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// A client without default headers.
    pub client: reqwest::Client,
    /// The database the server writes, for checks behind its back.
    pub store: Store,
    /// Its URL, for a second opener (another process).
    pub url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    /// Starts a server with the default request-size limit.
    pub async fn start() -> Self {
        Self::start_with(|server| server).await
    }

    /// Starts a server configured by `configure`.
    pub async fn start_with(configure: impl FnOnce(Server) -> Server) -> Self {
        Self::start_composed(async |store| configure(journal_server(&store).await)).await
    }

    /// Starts the server `compose` builds over a fresh database: any host's engine.
    pub async fn start_composed(compose: impl AsyncFnOnce(Store) -> Server) -> Self {
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("review.db").display());
        let store = Store::open(&url).await.expect("open the database");
        let server = compose(store.clone()).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a random port");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(listener, async {
            let _ = stopped.await;
        }));
        Self {
            base,
            client: reqwest::Client::new(),
            store,
            stop: Some(stop),
            task: Some(task),
            url: url.clone(),
            _dir: dir,
        }
    }

    /// Starts a server that is the parent session of sub-agents: it owns a confirmation
    /// bus with the default wait timeout.
    pub async fn start_delegating() -> Self {
        let bus = ConfirmationBus::new(DEFAULT_BUS_ROOT, BusConfig::default()).expect("a bus");
        Self::start_with(|server| server.with_bus(bus)).await
    }

    /// The event stream, read up to its `ready` event; keep `buffer` for
    /// [`next_event`].
    pub async fn events(&self, buffer: &mut String) -> Response {
        let mut stream = self
            .request(Method::GET, "/api/events")
            .send()
            .await
            .expect("subscribe");
        next_event(&mut stream, buffer, "ready").await;
        stream
    }

    /// Posts a sub-agent's wake (`subAgent`) of `triage` on `task` with `calls` in its
    /// own task, since it waits until its questions are answered; yields status and
    /// body.
    pub fn spawn_delegated_wake(
        &self,
        sub_agent: &str,
        task: &str,
        calls: Value,
    ) -> JoinHandle<(u16, Value)> {
        let request = self.request(Method::POST, "/api/wakes").json(&json!({
            "agentId": "triage", "taskId": task, "toolCalls": calls, "subAgent": sub_agent,
        }));
        tokio::spawn(async move { read(request.send().await.expect("send")).await })
    }

    /// A request to `path` with the bearer token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
    }

    /// A token of `role` (for `agent`, a token of agent `agent`) made through the admin
    /// API; returns its secret.
    pub async fn token(&self, role: &str, agent: Option<&str>) -> String {
        let (status, body) = self
            .post("/api/tokens", json!({"role": role, "agentId": agent}))
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["role"], role);
        body["secret"].as_str().expect("secret").to_owned()
    }

    /// A reviewer token issued to `person` (who decides through it, and counts once
    /// toward a quorum whatever door they use): its secret.
    pub async fn reviewer_token(&self, person: &str) -> String {
        let (status, body) = self
            .post("/api/tokens", json!({"role": "reviewer", "person": person}))
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["person"], person);
        body["secret"].as_str().expect("secret").to_owned()
    }

    /// `METHOD path` with the token `secret` and a JSON `body`: status and JSON body.
    pub async fn send_as(
        &self,
        secret: &str,
        method: Method,
        path: &str,
        body: &Value,
    ) -> (u16, Value) {
        read(
            self.client
                .request(method, format!("{}{path}", self.base))
                .bearer_auth(secret)
                .json(body)
                .send()
                .await
                .expect("send"),
        )
        .await
    }

    /// `GET path` with the token: status and JSON body.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        read(self.request(Method::GET, path).send().await.expect("send")).await
    }

    /// `POST path` with the token and a JSON `body`: status and JSON body.
    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        read(
            self.request(Method::POST, path)
                .json(&body)
                .send()
                .await
                .expect("send"),
        )
        .await
    }

    /// An agent `triage` that may change tasks in `work`, and a task in `work` with
    /// `title`; returns the task's id.
    pub async fn agent_and_task(&self, title: &str) -> String {
        let (status, _) = self
            .post(
                "/api/agents",
                json!({"id": "triage", "categories": ["work"]}),
            )
            .await;
        assert!(status == 201 || status == 200, "agent: {status}");
        let (status, task) = self
            .post(
                "/api/tasks",
                json!({"title": title, "category": "work", "labels": ["backend"]}),
            )
            .await;
        assert_eq!(status, 201, "task: {task}");
        task["id"].as_str().expect("task id").to_owned()
    }

    /// A wake of `triage` on `task` proposing priority P0 and a checklist item (OpenAI
    /// format); returns the change set's id.
    pub async fn propose(&self, task: &str) -> String {
        let calls = json!([
            {"id": "call_1", "type": "function", "function": {"name": "update_task_priority", "arguments": "{\"priority\":\"P0\"}"}},
            {"id": "call_2", "type": "function", "function": {"name": "add_checklist_item", "arguments": "{\"title\":\"Write a regression test\"}"}}
        ]);
        let (status, body) = self
            .post(
                "/api/wakes",
                json!({"agentId": "triage", "taskId": task, "toolCalls": calls}),
            )
            .await;
        assert_eq!(status, 200, "wake: {body}");
        body["changeSetId"]
            .as_str()
            .expect("a change set")
            .to_owned()
    }

    /// Stops the server gracefully and waits until it has stopped.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().expect("running");
        let result = task.await.expect("the server task does not panic");
        self.store.close().await;
        result
    }
}

/// Status and JSON body (`Value::Null` when the body is not JSON).
pub async fn read(response: Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Reads SSE blocks from `response` until one names `event`; returns its data.
pub async fn next_event(
    response: &mut reqwest::Response,
    buffer: &mut String,
    event: &str,
) -> Value {
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let name = block
                .lines()
                .find_map(|l| l.strip_prefix("event: ").or(l.strip_prefix("event:")));
            if name.map(str::trim) == Some(event) {
                let data: String = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                return serde_json::from_str(&data).expect("JSON data");
            }
        }
        let chunk = response
            .chunk()
            .await
            .expect("read the stream")
            .expect("the stream stays open");
        buffer.push_str(std::str::from_utf8(&chunk).expect("utf-8"));
    }
}

/// The server `assent serve` composes: the journal's engine and its `/api/tasks` routes.
pub async fn journal_server(store: &Store) -> Server {
    let engine = journal_engine(store.clone()).await.expect("journal engine");
    Server::new(engine, TOKEN).with_routes(Role::Reviewer, assent_journal_host::http::routes())
}
