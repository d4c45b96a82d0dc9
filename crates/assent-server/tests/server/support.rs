//! A real server per test: a fresh SQLite file, a random loopback port, a known token,
//! and a client that talks to it.

use assent_server::{Server, ServerError, journal_engine};
use assent_store::Store;
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
        let dir = tempfile::tempdir().expect("temporary directory");
        let url = format!("sqlite://{}", dir.path().join("review.db").display());
        let store = Store::open(&url).await.expect("open the database");
        let server = configure(Server::new(journal_engine(store.clone()), TOKEN));
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
            _dir: dir,
        }
    }

    /// A request to `path` with the bearer token.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
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
