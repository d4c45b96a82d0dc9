//! W3C trace context through MCP `_meta` (`traceparent`, `tracestate`, SEP-414): the
//! gateway reads it from a client's `tools/call`, parents its own span of the call on
//! it and forwards it to the upstream in the upstream call's `_meta`. This crate has no
//! OpenTelemetry dependency: the binary that exports spans installs [`Hooks`] (the
//! `assent` CLI does when `OTEL_EXPORTER_OTLP_ENDPOINT` is set); without them the
//! context a client sent is forwarded unchanged.

use rmcp::model::MetaObject;
use std::future::Future;
use std::sync::OnceLock;

/// A trace context as it travels in `_meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext {
    /// `version-traceid-parentid-flags`, as W3C's `traceparent` header.
    pub traceparent: String,
    /// Vendor entries, as W3C's `tracestate` header.
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// The context `meta` carries, when its `traceparent` is well formed (version 00
    /// or later, 32 and 16 lowercase hex digits, neither all zero, 2 of flags): a
    /// malformed one is dropped, never forwarded.
    pub fn from_meta(meta: &MetaObject) -> Option<Self> {
        let traceparent = meta.get_traceparent()?;
        well_formed(traceparent).then(|| Self {
            traceparent: traceparent.to_owned(),
            tracestate: meta
                .get_tracestate()
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.len() <= 512 && s.is_ascii())
                .map(str::to_owned),
        })
    }

    /// Writes this context into `meta`.
    pub fn write_meta(&self, meta: &mut MetaObject) {
        meta.set_traceparent(self.traceparent.clone());
        if let Some(state) = &self.tracestate {
            meta.set_tracestate(state.clone());
        }
    }
}

/// Whether `text` is a `traceparent` W3C's rules accept.
fn well_formed(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    let hex = |s: &str, len: usize| {
        s.len() == len
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    let [version, trace, parent, flags, ..] = parts[..] else {
        return false;
    };
    hex(version, 2)
        && version != "ff"
        && (version != "00" || parts.len() == 4)
        && hex(trace, 32)
        && trace.bytes().any(|b| b != b'0')
        && hex(parent, 16)
        && parent.bytes().any(|b| b != b'0')
        && hex(flags, 2)
}

/// What the exporting binary does with a context: parent a span on it, and give the
/// context of the current span to forward.
#[derive(Debug, Clone, Copy)]
pub struct Hooks {
    /// Makes the span the child of the context a client sent.
    pub adopt: fn(&tracing::Span, &TraceContext),
    /// The current span's context, to forward upstream (`None`: forward the client's).
    pub current: fn() -> Option<TraceContext>,
}

static HOOKS: OnceLock<Hooks> = OnceLock::new();

/// Installs the exporting binary's hooks (once; a second call is ignored).
pub fn install(hooks: Hooks) {
    let _ = HOOKS.set(hooks);
}

tokio::task_local! {
    static RECEIVED: Option<TraceContext>;
}

/// Runs `call` (a client's call, under `span`) with `received`, the context the
/// client sent: the span is parented on it, and the upstream call made inside
/// forwards it ([`to_forward`]).
pub(crate) async fn scope<F: Future>(
    received: Option<TraceContext>,
    span: &tracing::Span,
    call: F,
) -> F::Output {
    if let (Some(context), Some(hooks)) = (&received, HOOKS.get()) {
        (hooks.adopt)(span, context);
    }
    RECEIVED.scope(received, call).await
}

/// The context to send upstream from inside a client's call: the current span's
/// when spans are exported (the upstream's spans are then children of the gateway's),
/// else the one the client sent, unchanged; `None` when the client sent none.
pub(crate) fn to_forward() -> Option<TraceContext> {
    let received = RECEIVED.try_with(Clone::clone).ok().flatten()?;
    Some(
        HOOKS
            .get()
            .and_then(|hooks| (hooks.current)())
            .map(|mut ours| {
                if ours.tracestate.is_none() {
                    ours.tracestate = received.tracestate.clone();
                }
                ours
            })
            .unwrap_or(received),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(parent: &str, state: Option<&str>) -> MetaObject {
        let mut meta = MetaObject::new();
        meta.set_traceparent(parent);
        if let Some(state) = state {
            meta.set_tracestate(state);
        }
        meta
    }

    #[test]
    fn only_a_well_formed_traceparent_is_read() {
        let good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        assert_eq!(
            TraceContext::from_meta(&meta(good, Some("rojo=00f067aa0ba902b7"))),
            Some(TraceContext {
                traceparent: good.to_owned(),
                tracestate: Some("rojo=00f067aa0ba902b7".to_owned()),
            })
        );
        for bad in [
            "",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",
            "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-extra",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\n",
        ] {
            assert_eq!(TraceContext::from_meta(&meta(bad, None)), None, "{bad:?}");
        }
        assert_eq!(TraceContext::from_meta(&MetaObject::new()), None);
    }

    #[tokio::test]
    async fn the_received_context_is_forwarded_inside_the_call_only() {
        let received = TraceContext {
            traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".into(),
            tracestate: None,
        };
        assert_eq!(to_forward(), None);
        let span = tracing::Span::none();
        let inside = scope(Some(received.clone()), &span, async { to_forward() }).await;
        assert_eq!(inside, Some(received));
        let mut written = MetaObject::new();
        inside.expect("a context").write_meta(&mut written);
        assert!(written.get_traceparent().is_some());
    }
}
