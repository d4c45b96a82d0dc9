//! OpenTelemetry (issue 57): with `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) set, the binary's `tracing` spans go to that
//! OTLP receiver over HTTP with protobuf, batched on the exporter's own thread and
//! flushed before the process exits ([`Export::finish`]), so a short command loses
//! none. Without it nothing is built: no exporter, no thread, no cost. The attribute
//! set (the GenAI conventions' `gen_ai.*` where they exist, Assent's approval under
//! `assent.*`) is documented in docs/guide/operations.md ("OpenTelemetry").

use assent_mcp::trace_context::{self, TraceContext};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::collections::HashMap;
use time::OffsetDateTime;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{LevelFilter, Targets};

/// The spans being exported, when they are.
#[derive(Debug, Default)]
pub struct Export(Option<SdkTracerProvider>);

/// Whether an OTLP endpoint is configured (empty counts as none).
fn endpoint_set() -> bool {
    [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|value| !value.trim().is_empty()))
}

/// The layer exporting spans, and its provider to flush at exit; `None` without an
/// endpoint. An exporter that cannot be built is said on stderr and nothing is
/// exported: telemetry never stops a command (a hook still answers).
pub fn start<S>() -> (Option<impl tracing_subscriber::Layer<S>>, Export)
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    if !endpoint_set() {
        return (None, Export(None));
    }
    // reqwest 0.13 here has no TLS crypto provider of its own: ring, as the default
    // (an error only says one was installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("assent: OpenTelemetry export is off: {error}");
            return (None, Export(None));
        }
    };
    let mut resource = opentelemetry_sdk::Resource::builder();
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("assent");
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    let tracer = provider.tracer("assent");
    trace_context::install(trace_context::Hooks { adopt, current });
    // Assent's own spans and the gateway's; never the exporter's HTTP client (its
    // spans would be exported in turn) nor every statement.
    let targets = Targets::new()
        .with_default(LevelFilter::INFO)
        .with_target("sqlx", LevelFilter::OFF)
        .with_target("sqlx_core", LevelFilter::OFF)
        .with_target("hyper", LevelFilter::OFF)
        .with_target("hyper_util", LevelFilter::OFF)
        .with_target("reqwest", LevelFilter::OFF)
        .with_target("h2", LevelFilter::OFF)
        .with_target("tower", LevelFilter::OFF)
        .with_target("opentelemetry", LevelFilter::OFF)
        .with_target("opentelemetry_sdk", LevelFilter::OFF)
        .with_target("opentelemetry_otlp", LevelFilter::OFF)
        .with_target("rmcp", LevelFilter::WARN)
        // What an upstream server prints on its stderr may hold its secrets: it is
        // logged (redacted) on stderr, never exported.
        .with_target("assent_mcp::upstream_stderr", LevelFilter::OFF);
    let layer = tracing_subscriber::Layer::with_filter(
        tracing_opentelemetry::layer().with_tracer(tracer),
        targets,
    );
    (Some(layer), Export(Some(provider)))
}

impl Export {
    /// Sends what is still batched and stops the exporter (at the end of `main`).
    pub fn finish(self) {
        if let Some(provider) = self.0 {
            if let Err(error) = provider.force_flush() {
                eprintln!("assent: OpenTelemetry spans were not all sent: {error}");
            }
            let _ = provider.shutdown();
        }
    }
}

/// Parents `span` on the context a client sent in `_meta`.
fn adopt(span: &tracing::Span, received: &TraceContext) {
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), received.traceparent.clone());
    if let Some(state) = &received.tracestate {
        carrier.insert("tracestate".to_owned(), state.clone());
    }
    let parent = TraceContextPropagator::new().extract(&carrier);
    let _ = span.set_parent(parent);
}

/// The current span's context, to forward upstream.
fn current() -> Option<TraceContext> {
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&tracing::Span::current().context(), &mut carrier);
    Some(TraceContext {
        traceparent: carrier.remove("traceparent")?,
        tracestate: carrier.remove("tracestate").filter(|s| !s.is_empty()),
    })
}

/// The span of a person's confirmation of one item through the CLI, named as the
/// GenAI conventions name a tool's execution (`execute_tool TOOL`), its approval
/// attributes recorded by [`record_confirmation`].
pub fn confirmation_span(
    set: uuid::Uuid,
    index: usize,
    proposed: Option<&assent_domain::ChangeSet>,
) -> tracing::Span {
    let tool = proposed
        .and_then(|set| set.items.get(index))
        .map(|item| item.tool_name.as_str());
    // The span's name is fixed when it starts: the tool is read before.
    tracing::info_span!(
        "execute_tool",
        otel.name = %tool.map_or_else(|| "execute_tool".to_owned(), |tool| format!("execute_tool {tool}")),
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = %format!("{set}:{index}"),
        gen_ai.tool.type = "function",
        assent.change_set.id = %set,
        assent.item.index = i64::try_from(index).unwrap_or(i64::MAX),
        assent.decision = tracing::field::Empty,
        assent.rule = tracing::field::Empty,
        assent.approver.kind = tracing::field::Empty,
        assent.approvals.needed = tracing::field::Empty,
        assent.wait.seconds = tracing::field::Empty,
        assent.outcome = tracing::field::Empty,
        error.type = tracing::field::Empty,
    )
}

/// What a confirmation decided, on its span: the tool, the verdict, who (by kind,
/// never by name), how long the item waited for a person, and how it ran.
pub fn record_confirmation(
    span: &tracing::Span,
    set: Option<&assent_domain::ChangeSet>,
    index: usize,
    decision: &assent_domain::ChangeDecision,
    outcome: &str,
    now: OffsetDateTime,
) {
    if span.is_disabled() {
        return;
    }
    span.record("gen_ai.tool.name", decision.tool_name.as_str());
    span.record("assent.decision", decision.verdict.as_str());
    // A confirmation by a person is what an `ask` rule (or a quorum) asked for.
    span.record("assent.rule", "ask");
    span.record(
        "assent.approver.kind",
        approver_kind(decision.decided_by.as_deref()),
    );
    if let Some(set) = set {
        let waited = (now - set.created_at).as_seconds_f64().max(0.0);
        span.record("assent.wait.seconds", waited);
        if let Some(item) = set.items.get(index) {
            span.record(
                "assent.approvals.needed",
                i64::from(item.approvals_needed()),
            );
        }
    }
    span.record("assent.outcome", outcome);
}

/// How the confirmed call ran, as `assent.outcome` names it.
pub fn execution_kind(execution: &assent_confirm::ExecutionOutcome) -> &'static str {
    use assent_confirm::ExecutionOutcome as E;
    match execution {
        E::Applied { .. } => "applied",
        E::AlreadyTrue { .. } => "alreadyTrue",
        E::AlreadyApplied { .. } => "alreadyApplied",
        E::Denied { .. } => "denied",
        E::Failed { .. } => "failed",
        E::Queued { .. } => "queued",
        E::Scheduled { .. } => "scheduled",
        E::AwaitingApprovals { .. } => "awaitingApprovals",
        _ => "other",
    }
}

/// The kind of error a confirmation ended with, as `error.type` names it: the
/// error's variant, never its text (which may quote arguments).
pub fn error_kind(error: &assent_confirm::ConfirmError) -> String {
    let shown = format!("{error:?}");
    shown
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The door a decision came through, never the person's name: `slack`, `token` (a
/// reviewer's page or API token), `client` (an answer in the agent's own client),
/// `cli` (a name given to `--as`, or the operator), and the door's prefix otherwise.
pub fn approver_kind(decided_by: Option<&str>) -> &'static str {
    let Some(by) = decided_by else {
        return "unknown";
    };
    if assent_domain::answered_in_client(by) {
        return "client";
    }
    match by.split_once(':').map(|(door, _)| door) {
        Some("slack") => "slack",
        Some("token") => "token",
        Some("telegram") => "telegram",
        Some("email") => "email",
        Some("ntfy") => "ntfy",
        Some(_) => "other",
        None => "cli",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_approver_is_named_by_its_door_only() {
        assert_eq!(approver_kind(Some("alice")), "cli");
        assert_eq!(approver_kind(Some("slack:U9 (alice)")), "slack");
        assert_eq!(approver_kind(Some("token:3fa9c1d2e4b5 (bob)")), "token");
        assert_eq!(approver_kind(Some("mcp-client:claude-code")), "client");
        assert_eq!(approver_kind(None), "unknown");
    }
}
