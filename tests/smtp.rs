//! A real SMTP server on loopback for the email door's tests: `smtp_sink.py` over
//! `aiosmtpd` from PyPI (installed once into `target/smtp-venv`; when that is impossible
//! the tests say so and skip, except under `CI=true`, where it is a failure). Every
//! message it accepts is kept as sent, for the test to read.

use crate::pypi::{self, Package};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"),
        PathBuf::from,
    )
}

/// The Python to run the server with, or `None` (with a note) when `aiosmtpd` cannot
/// be installed outside CI.
pub fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let venv = target_dir().join("smtp-venv");
    let package = Package {
        requirement: "aiosmtpd>=1.4",
        probe: "import aiosmtpd.controller",
        venv: &venv,
    };
    pypi::required(&PYTHON, || pypi::install(&package), "the email tests")
}

/// A running SMTP server; stopped when dropped (its stdin closes).
pub struct SmtpSink {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    received: Arc<Mutex<Vec<Value>>>,
}

impl SmtpSink {
    /// Starts a server on a free port.
    pub fn start(python: &std::path::Path) -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("smtp_sink.py");
        let mut child = Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the SMTP server starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let port: u16 = lines
            .next()
            .expect("the SMTP server prints its port")
            .expect("a line")
            .trim()
            .parse()
            .expect("a port");
        let received = Arc::new(Mutex::new(Vec::new()));
        let keep = received.clone();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(message) = serde_json::from_str(&line) {
                    keep.lock().expect("lock").push(message);
                }
            }
        });
        Self {
            child,
            port,
            received,
        }
    }

    /// `smtp://127.0.0.1:PORT`: plain SMTP, to loopback only.
    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message received so far (`from`, `to`, `data`: the message as sent).
    pub fn received(&self) -> Vec<Value> {
        self.received.lock().expect("lock").clone()
    }

    /// Waits up to `limit` until `predicate` holds over what was received; returns it.
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
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
