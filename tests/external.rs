//! An example external host for the execution ledger's tests: its one tool,
//! `post_note`, POSTs to a small HTTP receiver on loopback (the test's own, here too)
//! with the operation id as `Idempotency-Key`. The receiver counts effects per key;
//! one that dedupes applies a key once and answers `GET /ops/KEY` (so the host can
//! reconcile), one that does not applies every request.

use assent_confirm::{
    Effect, Engine, ExternalCall, ExternalError, ExternalHandler, Host, JobSettings, Reconciliation,
};
use assent_domain::{Target, VectorClock};
use assent_store::{Connection, Store};
use assent_tools::{BoxFuture, CategoryResolver, ToolHandler, ToolMode, ToolRegistry, ToolSpec};
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The host's name: its jobs are claimed only by its executors.
pub const HOST: &str = "http";
/// The tool.
pub const TOOL: &str = "post_note";
/// The category of every endpoint.
pub const CATEGORY: &str = "web";

/// Effects per idempotency key, shared with the receiver's thread.
pub type Effects = Arc<Mutex<HashMap<String, usize>>>;

/// A receiver on loopback, serving until the test ends.
pub struct Receiver {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// How often each key took effect.
    pub effects: Effects,
}

impl Receiver {
    /// Starts one: `dedupe` applies each key once; every response waits `delay` after
    /// the effect (a window in which an executor may die having caused it).
    pub fn start(dedupe: bool, delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let effects = Effects::default();
        let shared = effects.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let effects = shared.clone();
                std::thread::spawn(move || serve(stream, &effects, dedupe, delay));
            }
        });
        Self { url, effects }
    }

    /// How often `key` took effect.
    pub fn count(&self, key: &str) -> usize {
        self.effects
            .lock()
            .expect("lock")
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

fn serve(stream: TcpStream, effects: &Effects, dedupe: bool, delay: Duration) {
    let mut reader = BufReader::new(stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut key = None;
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).is_err() || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            match name.trim().to_ascii_lowercase().as_str() {
                "idempotency-key" => key = Some(value.trim().to_owned()),
                "content-length" => length = value.trim().parse().unwrap_or(0),
                _ => {}
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let (status, text) = if let Some(op) = request_line
        .split_whitespace()
        .nth(1)
        .and_then(|path| path.strip_prefix("/ops/"))
        .filter(|_| request_line.starts_with("GET"))
    {
        match effects.lock().expect("lock").get(op) {
            Some(_) => ("200 OK", "posted".to_owned()),
            None => ("404 Not Found", "unknown".to_owned()),
        }
    } else if let Some(key) = key {
        {
            let mut effects = effects.lock().expect("lock");
            let count = effects.entry(key).or_default();
            if !dedupe || *count == 0 {
                *count += 1;
            }
        }
        std::thread::sleep(delay);
        ("200 OK", "posted".to_owned())
    } else {
        ("400 Bad Request", "no Idempotency-Key".to_owned())
    };
    let mut stream = reader.into_inner();
    let _ = write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
}

/// One HTTP/1.1 request to `url` + `path`; the status code and body.
async fn request(
    url: &str,
    method: &str,
    path: &str,
    key: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("cannot connect to {addr}: {e}"))?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nIdempotency-Key: {key}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(head.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .map_err(|e| e.to_string())?;
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad response {response:?}"))?;
    let text = response
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, text))
}

/// `post_note`'s handler.
pub struct PostNote {
    url: String,
    /// Whether it asks the receiver in a reconciliation (otherwise it cannot tell).
    reconciles: bool,
}

impl ExternalHandler for PostNote {
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        Box::pin(async move {
            let body = json!({"target": call.target.id, "args": call.args}).to_string();
            match request(
                &self.url,
                "POST",
                "/notes",
                call.operation_id.as_str(),
                &body,
            )
            .await
            {
                Ok((200, text)) => Ok(format!("receiver said {text}")),
                Ok((status, text)) if status >= 500 => {
                    Err(ExternalError::Retryable(format!("{status}: {text}")))
                }
                Ok((status, text)) => Err(ExternalError::Permanent(format!("{status}: {text}"))),
                Err(error) => Err(ExternalError::Retryable(error)),
            }
        })
    }

    fn reconcile<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Reconciliation> {
        Box::pin(async move {
            if !self.reconciles {
                return Reconciliation::Unknown;
            }
            let path = format!("/ops/{}", call.operation_id.as_str());
            match request(&self.url, "GET", &path, call.operation_id.as_str(), "").await {
                Ok((200, text)) => Reconciliation::Happened(format!("receiver said {text}")),
                Ok((404, _)) => Reconciliation::DidNotHappen,
                _ => Reconciliation::Unknown,
            }
        })
    }
}

/// Every endpoint is in [`CATEGORY`]; no clocks.
struct Web;

impl CategoryResolver<Connection> for Web {
    fn category_of<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async { Ok(Some(CATEGORY.to_owned())) })
    }

    fn vector_clock_of<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async { Ok(None) })
    }
}

/// The host: `post_note` is external, idempotent when the receiver dedupes (and then
/// it can also reconcile).
pub struct HttpHost {
    handler: PostNote,
    idempotent: bool,
}

impl HttpHost {
    /// A host posting to the receiver at `url`.
    pub fn new(url: &str, idempotent: bool, reconciles: bool) -> Self {
        Self {
            handler: PostNote {
                url: url.to_owned(),
                reconciles,
            },
            idempotent,
        }
    }
}

impl Host for HttpHost {
    fn name(&self) -> &str {
        HOST
    }

    fn handler(&self, _tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        None
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        &Web
    }

    fn effect(&self, tool_name: &str) -> Effect {
        if tool_name == TOOL {
            Effect::External {
                idempotent: self.idempotent,
            }
        } else {
            Effect::Transactional
        }
    }

    fn external(&self, tool_name: &str) -> Option<&dyn ExternalHandler> {
        (tool_name == TOOL).then_some(&self.handler as &dyn ExternalHandler)
    }
}

/// The catalog: `post_note` with a `text`, deferred to a person.
pub fn registry() -> ToolRegistry {
    let schema = json!({"type": "object", "required": ["text"],
        "properties": {"text": {"type": "string"}}});
    let mut tools = ToolRegistry::new();
    tools
        .register(
            ToolSpec::new(
                TOOL,
                "Post a note to the endpoint.",
                ToolMode::Deferred,
                schema,
            )
            .with_summary(|args, _| format!("Post {}", args["text"])),
        )
        .expect("registers");
    tools
}

/// An engine of the HTTP host on `store`.
pub async fn engine(store: Store, host: HttpHost, settings: JobSettings) -> Engine {
    Engine::open(store, Arc::new(registry()), Arc::new(host))
        .await
        .expect("engine")
        .with_job_settings(settings)
}
