//! A real webhook receiver on loopback for the tests: `webhook_receiver.py`, which
//! verifies every delivery with the `standardwebhooks` package from PyPI (the
//! specification's own library, not Assent's code). The package is installed once into
//! a virtual environment under `target/webhook-venv`; when that is impossible the
//! tests say so and skip, except under `CI=true`, where it is a failure.

use crate::pypi::{self, Package};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// The Python to run the receiver with, or `None` (with a note) when the package
/// cannot be installed outside CI. Under `CI=true` that is a failure.
pub fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let venv = target_dir().join("webhook-venv");
    let package = Package {
        requirement: "standardwebhooks",
        probe: "import standardwebhooks",
        venv: &venv,
    };
    pypi::required(
        &PYTHON,
        || pypi::install(&package),
        "the webhook receiver tests",
    )
}

/// A running receiver; killed when dropped.
pub struct Receiver {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    client: control::Client,
}

/// The few HTTP calls the tests make to the receiver's control endpoints, over a
/// plain `TcpStream` (the receiver is on loopback and answers small bodies).
mod control {
    use std::io::{Read, Write};
    use std::net::TcpStream;

    #[derive(Debug, Clone, Copy)]
    pub struct Client {
        pub port: u16,
    }

    impl Client {
        pub fn call(self, method: &str, path: &str, body: &str) -> String {
            let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("receiver up");
            let request = format!(
                "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            stream.write_all(request.as_bytes()).expect("request sent");
            let mut answer = String::new();
            stream.read_to_string(&mut answer).expect("answer read");
            answer
                .split_once("\r\n\r\n")
                .map(|(_, body)| body.to_owned())
                .unwrap_or_default()
        }
    }
}

impl Receiver {
    /// Starts a receiver on a free port (`0`) or on `port`.
    pub fn start(python: &std::path::Path, port: u16) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("webhook_receiver.py");
        let mut child = Command::new(python)
            .arg(script)
            .arg(port.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("receiver starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("receiver prints its port");
        let port: u16 = line.trim().parse().expect("a port");
        Self {
            child,
            port,
            client: control::Client { port },
        }
    }

    /// The URL of endpoint `name`.
    pub fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/hook/{name}", self.port)
    }

    /// Tells endpoint `name` its secret, and to answer the next `failures` deliveries
    /// with 500 and then hang `hang` of them for `hang_seconds`.
    pub fn configure(&self, name: &str, secret: &str, failures: u32, hang: u32, hang_seconds: u32) {
        let body = json!({"secret": secret, "failures": failures, "hang": hang, "hangSeconds": hang_seconds});
        self.client
            .call("POST", &format!("/control/{name}"), &body.to_string());
    }

    /// Every delivery received so far, in arrival order.
    pub fn received(&self) -> Vec<Value> {
        serde_json::from_str(&self.client.call("GET", "/received", "")).expect("JSON list")
    }

    /// The deliveries to endpoint `name`.
    pub fn received_by(&self, name: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r["endpoint"] == name)
            .collect()
    }

    /// Waits up to `limit` for `predicate` over everything received; returns it.
    pub async fn wait_for(
        &self,
        limit: Duration,
        predicate: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let start = std::time::Instant::now();
        loop {
            let received = self.received();
            if predicate(&received) || start.elapsed() > limit {
                return received;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
