//! A misbehaving MCP server over stdio for the gateway's fault tests, one fault per
//! mode (its only argument):
//!
//! - `die`: lists `append_note` (as the fixture does) and, when it is called, appends
//!   the line to the file and exits without answering, as a server that crashes
//!   after its effect would;
//! - `hang`: the same, but stays silent instead of exiting (a call that never ends); a
//!   `notifications/cancelled` it receives is noted as a line of `PATH.cancelled`;
//! - `mute`: never answers anything, not even `initialize`; it exits when its input
//!   closes;
//! - `noisy`: as `mute`, after a line on its stderr.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelledNotificationParam, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;

/// What it does when `append_note` is called.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Appends, then exits without answering.
    Die,
    /// Appends, then never answers.
    Hang,
}

struct Faulty {
    fault: Fault,
    /// The file of the last call, where a cancellation of it is noted.
    last_path: std::sync::Mutex<Option<String>>,
}

impl ServerHandler for Faulty {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "required": ["path", "text"],
            "properties": {"path": {"type": "string", "minLength": 1},
                           "text": {"type": "string"}}});
        let Value::Object(schema) = schema else {
            return Err(ErrorData::internal_error("a schema is an object", None));
        };
        // Listed exactly as the fixture lists it (the same definition hash), so a job
        // approved here may run on the fixture that replaces it.
        Ok(ListToolsResult::with_all_items(vec![
            Tool::new(
                "append_note",
                "Append a line to a note file.",
                Arc::new(schema),
            )
            .with_annotations(ToolAnnotations::default().read_only(false)),
        ]))
    }

    async fn on_cancelled(
        &self,
        notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        let path = self.last_path.lock().ok().and_then(|last| last.clone());
        if let Some(path) = path {
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(format!("{path}.cancelled"))
                .and_then(|mut file| writeln!(file, "{}", notification.reason.unwrap_or_default()));
        }
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arg = |key: &str| {
            request
                .arguments
                .as_ref()
                .and_then(|args| args.get(key))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(arg("path"))
            .and_then(|mut file| writeln!(file, "{}", arg("text")));
        if let Ok(mut last) = self.last_path.lock() {
            *last = Some(arg("path"));
        }
        match self.fault {
            Fault::Die => std::process::exit(3),
            Fault::Hang => std::future::pending().await,
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let fault = match mode.as_str() {
        "die" => Fault::Die,
        "hang" => Fault::Hang,
        "noisy" => {
            // Says something on stderr, then never answers, like `mute`.
            writeln!(std::io::stderr(), "faulty server: listening for nobody")?;
            let mut input = tokio::io::stdin();
            tokio::io::copy(&mut input, &mut tokio::io::sink()).await?;
            return Ok(());
        }
        "mute" => {
            // Reads (so the client's writes never block) and never answers.
            let mut input = tokio::io::stdin();
            tokio::io::copy(&mut input, &mut tokio::io::sink()).await?;
            return Ok(());
        }
        other => return Err(format!("unknown mode {other:?}: die, hang, mute or noisy").into()),
    };
    let faulty = Faulty {
        fault,
        last_path: std::sync::Mutex::new(None),
    };
    let server = faulty.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
