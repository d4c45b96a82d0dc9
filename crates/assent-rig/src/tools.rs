//! A rig [`Tool`] as a tool of an Assent host, so its body runs through the engine's
//! audited executor (exactly once, with an audit record before and after) instead of
//! beside it, without a `Host` written by hand.
//!
//! A rig tool is arbitrary code (an HTTP call, a payment, a write to another store), so
//! it is registered as an external tool ([`Effect::External`](assent_confirm::Effect)):
//! it never runs inside the engine's transaction. Called at once (an immediate tool) it
//! runs after the wake's commit; confirmed by a person (anywhere) it becomes a job of
//! the execution ledger that the host's worker runs with the item's operation id as
//! idempotency key, which the tool reads from its [`ToolContext`] as an
//! [`AssentOperation`].

use assent_confirm::{ExternalCall, ExternalError, ExternalHandler, HostError, SimpleHost};
use assent_domain::OperationId;
use assent_tools::{BoxFuture, ToolMode, ToolSpec};
use rig_core::tool::context::ContextValue;
use rig_core::tool::{IntoToolOutput, Tool, ToolContext};
use serde_json::Value;
use std::sync::Arc;

/// The catalog entry of a rig tool: its name, description and parameter schema as rig
/// advertises them to the model, with the mode Assent treats its calls in.
pub fn tool_spec<T: Tool>(tool: &T, mode: ToolMode) -> ToolSpec {
    ToolSpec::new(T::NAME, tool.description(), mode, tool.parameters())
}

/// What a rig tool run by Assent finds in its [`ToolContext`]: the call's operation id
/// (the same for every attempt of one proposal: the idempotency key to hand to the
/// remote side, or to dedupe on) and the attempt number (1 for the first).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AssentOperation {
    /// The deterministic operation id of the call.
    pub operation_id: String,
    /// 1 for the first attempt.
    pub attempt: u32,
}

impl ContextValue for AssentOperation {
    const KEY: &'static str = "assent.operation";
}

/// Registers rig tools on a [`SimpleHost`].
pub trait RigToolHost: Sized {
    /// Runs `tool` for the host's calls of [`Tool::NAME`]: at once when the agent's
    /// policy makes it immediate, as a job of the execution ledger once a person
    /// confirmed it. `idempotent`: running it twice with one operation id has the
    /// effect of running it once (a job whose run is in doubt is then simply retried
    /// instead of waiting for a person). Its catalog entry is [`tool_spec`].
    fn rig_tool<T: Tool + 'static>(self, tool: T, idempotent: bool) -> Self;
}

impl RigToolHost for SimpleHost {
    fn rig_tool<T: Tool + 'static>(self, tool: T, idempotent: bool) -> Self {
        let tool = Arc::new(tool);
        let now = Arc::clone(&tool);
        // An immediate call: run after the wake's commit, on a pooled connection the
        // tool does not use (the engine calls `handler` for it; see `WakeService`).
        self.handle(T::NAME, move |_conn, call| {
            let tool = Arc::clone(&now);
            Box::pin(async move {
                run(tool.as_ref(), &call.operation_id, 1, &call.args)
                    .await
                    .map_err(|failure| HostError::from(failure.message))
            })
        })
        .external(T::NAME, idempotent, Ledger(tool))
    }
}

/// A rig tool as the ledger's handler of its confirmed calls.
struct Ledger<T>(Arc<T>);

impl<T: Tool + 'static> ExternalHandler for Ledger<T> {
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        Box::pin(async move {
            run(self.0.as_ref(), call.operation_id, call.attempt, call.args)
                .await
                .map_err(|failure| {
                    if failure.retryable {
                        ExternalError::Retryable(failure.message)
                    } else {
                        ExternalError::Permanent(failure.message)
                    }
                })
        })
    }
}

/// Why a run of a rig tool failed, as the ledger needs to know it.
struct Failure {
    message: String,
    retryable: bool,
}

impl Failure {
    fn permanent(message: String) -> Self {
        Self {
            message,
            retryable: false,
        }
    }
}

/// One run of `tool` with `args`: its output rendered as the text the model, the person
/// and the audit trail read.
async fn run<T: Tool>(
    tool: &T,
    operation: &OperationId,
    attempt: u32,
    args: &Value,
) -> Result<String, Failure> {
    let args: T::Args = serde_json::from_value(args.clone())
        .map_err(|error| Failure::permanent(format!("invalid arguments: {error}")))?;
    let mut context = ToolContext::new();
    context
        .insert(AssentOperation {
            operation_id: operation.to_string(),
            attempt,
        })
        .map_err(|error| Failure::permanent(error.to_string()))?;
    match tool.call(&mut context, args).await {
        Ok(output) => output
            .into_tool_output()
            .map(|output| output.render())
            .map_err(|error| Failure::permanent(error.message().to_owned())),
        Err(error) => {
            let error = tool.map_error(error);
            Err(Failure {
                message: error.message().to_owned(),
                retryable: error.retryable() == Some(true),
            })
        }
    }
}
