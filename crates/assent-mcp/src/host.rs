//! The engine's host for MCP calls: target kind `mcp`, one target per server.
//!
//! Every tool's effect lies outside the database, so [`McpHost`] declares it
//! `Effect::External` (idempotent when the operator said so, `assent agent idempotent`,
//! or under `--trust hints` when the tool's `idempotentHint` says so): a confirmation,
//! from whatever process, records the decision and an execution job, and the gateway's
//! executor (`Gateway::tick`, `engine.run_due_jobs`) runs the upstream call through
//! [`UpstreamCaller`] with the item's operation id as the idempotency key — exactly
//! once, or visibly in doubt. A tool that runs at once (an allow rule, or a trusted
//! read-only hint) is called by [`InlineUpstream`] after the wake's commit, so no
//! database lock is held while the upstream works.

use crate::McpError;
use crate::catalog::TARGET_KIND;
use crate::config::FilePreview;
use crate::preview::{Preview, Previews, Unread, preview_of, read_now, whole_for};
use crate::upstream::UpstreamCaller;
use crate::upstream::UpstreamError;
use assent_confirm::client_sessions::{self, CallSession};
use assent_confirm::records;
use assent_confirm::{Effect, ExternalCall, ExternalError, ExternalHandler, Host, Reconciliation};
use assent_domain::{OffsetDateTime, Target, Uuid, VectorClock};
use assent_store::Connection;
use assent_tools::{
    BoxFuture, CategoryResolver, TargetState, ToolHandler, ToolInvocation, ToolOutcome, ToolsError,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use time::Duration;

/// The host of agent `agent`'s gateway for server `server`: `mcpa_`, the agent's id,
/// `_x_`, the server's name, each written as [`host_name`] writes a name after its
/// prefix (ASCII letters and digits as they are, `_` doubled, any other character
/// `_`, its code point in lowercase hex, `_`). Two gateways share a host only when
/// they serve the same agent and the same server: agents that call their servers by
/// one name never claim each other's jobs (`_x_` is never part of a written name,
/// whose `_` is followed by `_` or a hex digit, so the split is unambiguous).
pub fn gateway_host(agent: &str, server: &str) -> String {
    format!("mcpa_{}_x_{}", escaped(agent), escaped(server))
}

/// `name` with `_` doubled and every character other than ASCII letters and digits
/// written as `_`, its code point in hex, `_`.
fn escaped(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '_' => out.push_str("__"),
            c if c.is_ascii_alphanumeric() => out.push(c),
            c => out.push_str(&format!("_{:x}_", u32::from(c))),
        }
    }
    out
}

/// The host the previous release named after server `server` alone, whatever the
/// agent (see [`gateway_host`] for today's): `mcp_` and the name when it is made of
/// ASCII letters, digits and `_`; otherwise `mcpx_` and the name written as
/// [`gateway_host`] writes it (`my-files` → `mcpx_my_2d_files`). A gateway takes
/// over its own agent's items and jobs of that host ([`adopt_legacy`]).
pub fn host_name(server: &str) -> String {
    let plain = server
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if plain {
        return format!("mcp_{server}");
    }
    format!("mcpx_{}", escaped(server))
}

/// Moves what the previous release's host of `server` ([`host_name`]) holds for agent
/// `agent` on the server's target to the gateway's own host ([`gateway_host`]): its
/// items and jobs (so a call queued or confirmed before the upgrade runs, once, on
/// this agent's gateway and no other) and, with their pins, its catalog (tool names
/// prefixed with `tool_prefix`, `SERVER__` behind a `--config` gateway). One write
/// transaction when there is something to move; `catalog` copies the catalog even
/// when no item or job is left (at the gateway's start).
pub async fn adopt_legacy(
    store: &assent_store::Store,
    agent: &str,
    server: &str,
    tool_prefix: &str,
    catalog: bool,
) -> Result<(), McpError> {
    let legacy = host_name(server);
    let target = Target::new(TARGET_KIND, server.to_owned());
    let ours = gateway_host(agent, server);
    let moved =
        client_sessions::rehost(store, &legacy, &ours, agent, &target, tool_prefix, catalog)
            .await?;
    if moved.items + moved.jobs > 0 {
        tracing::info!(from = %legacy, to = %ours, items = moved.items, jobs = moved.jobs, "took over this agent's calls from the previous release's host");
    }
    Ok(())
}

/// Refuses server name `server` when its host already serves another server in this
/// database (its jobs or pending items name another `mcp` target): an older release
/// mapped names like `my-files` and `my_files` to the same host.
pub async fn check_host_free(store: &assent_store::Store, server: &str) -> Result<(), McpError> {
    let host = host_name(server);
    let ours = Target::new(TARGET_KIND, server.to_owned());
    match records::other_target_of_host(store, &host, &ours).await? {
        Some(other) => Err(McpError::HostTaken {
            server: server.to_owned(),
            host,
            other: other.id,
        }),
        None => Ok(()),
    }
}

/// Runs an immediate call on the upstream: the engine calls it after the wake's commit,
/// outside any transaction (the connection it is given is not used).
#[derive(Debug)]
pub struct InlineUpstream(pub Arc<UpstreamCaller>);

impl ToolHandler<Connection> for InlineUpstream {
    fn execute<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        invocation: &'a ToolInvocation,
    ) -> BoxFuture<'a, Result<ToolOutcome, ToolsError>> {
        Box::pin(async move {
            let called = self
                .0
                .call(
                    &invocation.operation_id,
                    &invocation.tool_name,
                    &invocation.args,
                )
                .await;
            match called {
                Ok(message) => Ok(ToolOutcome::changed(message)),
                Err(error) => {
                    // The client reads the gateway's words once, not wrapped again in
                    // the engine's "TOOL failed:" (the engine's record keeps those).
                    self.0.keep_result(
                        &invocation.operation_id,
                        rmcp::model::CallToolResult::error(vec![rmcp::model::ContentBlock::text(
                            format!("Error: {}.", error.to_string().trim_end_matches('.')),
                        )]),
                    );
                    Err(ToolsError::handler_failed(
                        &invocation.tool_name,
                        error.to_string(),
                    ))
                }
            }
        })
    }
}

/// Runs an approved call on the upstream for the execution ledger, with the item's
/// operation id as the idempotency key and no database lock held; with a
/// [`SessionGuard`], only a call its chat still waits for, or may run without it.
#[derive(Debug)]
pub struct LedgerUpstream(
    pub Arc<UpstreamCaller>,
    pub Option<SessionGuard>,
    pub Option<FileGuard>,
);

/// How long a gateway session may go without saying it runs before it counts as
/// ended (its gateway died): a few of its heartbeats ([`HEARTBEAT_EVERY`]).
pub const SESSION_STALE: Duration = client_sessions::SESSION_STALE;

/// How often a running gateway says its session still runs.
pub const HEARTBEAT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Keeps a call whose chat ended from running in another session: the gateway's
/// session and the store where sessions are recorded (`assent_confirm::client_sessions`).
#[derive(Debug, Clone)]
pub struct SessionGuard {
    /// The database of the sessions.
    pub store: assent_store::Store,
    /// The session of this gateway.
    pub session: Uuid,
}

impl SessionGuard {
    /// Whether `call` may run now in this session (see [`after_disconnect`]).
    async fn check(&self, call: &ExternalCall<'_>) -> Result<(), ExternalError> {
        let provenance = client_sessions::call_provenance(
            &self.store,
            call.operation_id.as_str(),
            call.agent_id,
            call.tool_name,
        )
        .await
        .map_err(|e| ExternalError::Retryable(format!("its session could not be read: {e}")))?;
        after_disconnect(
            provenance.made_by.as_ref(),
            self.session,
            provenance.run_after_disconnect,
            call,
            OffsetDateTime::now_utc(),
        )
    }
}

/// Whether an approved call made in session `made_by` runs in session `mine` at
/// `now`: a call of no recorded session (a task, or queued before sessions were
/// recorded), of this session, of a tool marked run-after-disconnect (`run_after`), or
/// confirmed while its chat was still there runs; a call of another session that still
/// runs waits for that session's gateway (retried); a call confirmed after its chat
/// ended (or after its gateway was last seen, unseen for [`SESSION_STALE`] since) is
/// refused for good, saying how to let such calls run.
pub fn after_disconnect(
    made_by: Option<&CallSession>,
    mine: Uuid,
    run_after: bool,
    call: &ExternalCall<'_>,
    now: OffsetDateTime,
) -> Result<(), ExternalError> {
    let Some(session) = made_by else {
        return Ok(());
    };
    if session.id == mine || run_after {
        return Ok(());
    }
    let ended = session
        .ended_at
        .or_else(|| (now - session.seen_at >= SESSION_STALE).then_some(session.seen_at));
    let Some(ended) = ended else {
        return Err(ExternalError::Retryable(
            "the chat that made this call is served by another gateway process; it runs there"
                .to_owned(),
        ));
    };
    if session.confirmed_at <= ended {
        return Ok(());
    }
    Err(ExternalError::Permanent(format!(
        "not run: the chat that made this call ended before it could run, so nobody \
         would hear its result (to let such calls of {tool} run in a later session: \
         assent agent run-after-disconnect {agent} {tool})",
        tool = call.tool_name,
        agent = call.agent_id
    )))
}

impl ExternalHandler for LedgerUpstream {
    fn call<'a>(&'a self, call: ExternalCall<'a>) -> BoxFuture<'a, Result<String, ExternalError>> {
        Box::pin(async move {
            if let Some(guard) = &self.1 {
                guard.check(&call).await?;
            }
            if let Some(files) = &self.2 {
                files.check(&self.0, &call).await?;
            }
            self.0
                .call(call.operation_id, call.tool_name, call.args)
                .await
                .map_err(|error| match error {
                    UpstreamError::Retryable(text) => ExternalError::Retryable(text),
                    UpstreamError::Permanent(text) => ExternalError::Permanent(text),
                    UpstreamError::InDoubt(text) => ExternalError::InDoubt(text),
                })
        })
    }

    fn reconcile<'a>(&'a self, _call: ExternalCall<'a>) -> BoxFuture<'a, Reconciliation> {
        // MCP has no way to ask a server whether a call happened.
        Box::pin(async { Reconciliation::Unknown })
    }
}

/// What a gateway reads of files for the diffs of writes (the `preview` module): the
/// previews of the calls being queued now, and the read tools the server's `assent`
/// block names, by the upstream's name of each write tool.
#[derive(Debug, Default)]
pub struct FileReads {
    /// The previews read for calls about to be queued.
    pub previews: Previews,
    /// The configured previews (`"tools": {"TOOL": {"preview": …}}`).
    pub configured: BTreeMap<String, FilePreview>,
}

/// Keeps a write from running over a file that changed since the person saw its diff:
/// just before the upstream call, the file is read again and its digest compared with
/// the item's fingerprint.
#[derive(Debug, Clone)]
pub struct FileGuard {
    /// The database of the items.
    pub store: assent_store::Store,
    /// How each write tool's file is read.
    pub files: Arc<FileReads>,
}

impl FileGuard {
    /// `Ok` when `call` writes no previewed file, was queued without a reading, or its
    /// file is as it was read; [`ExternalError::Stale`] (nothing sent) otherwise, with
    /// the diff as the file is now. A file that cannot be read again counts as changed:
    /// the person is asked again rather than the write run unseen.
    async fn check(
        &self,
        caller: &UpstreamCaller,
        call: &ExternalCall<'_>,
    ) -> Result<(), ExternalError> {
        let upstream = caller.upstream();
        let tools = upstream.tools();
        let own = caller.upstream_name(call.tool_name);
        let Some(tool) = tools.iter().find(|t| t.name == own) else {
            return Ok(());
        };
        let Some(preview) = preview_of(tool, &tools, &self.files.configured) else {
            return Ok(());
        };
        let Some(path) = call
            .args
            .get(&preview.path)
            .and_then(serde_json::Value::as_str)
        else {
            return Ok(());
        };
        let then = records::item_fingerprint(&self.store, call.operation_id.as_str())
            .await
            .map_err(|e| {
                ExternalError::Retryable(format!(
                    "the item's reading of its file could not be read: {e}"
                ))
            })?;
        let Some(then) = then else {
            return Ok(());
        };
        let (now, before) = match read_now(upstream, &preview, path, whole_for(call.args)).await {
            Ok(content) => {
                let shown = Preview::of(path, call.args, &content);
                (shown.fingerprint, Some(shown.before))
            }
            // A path that now leads out of the server's folders is not read: changed,
            // and the item says why it shows no diff.
            Err(Unread::Withheld(why)) => (None, Some(Preview::withheld(&why).before)),
            Err(Unread::Failed) => (None, None),
        };
        if now.as_ref() == Some(&then) {
            return Ok(());
        }
        let detail =
            assent_domain::stale_detail(&then, now.as_ref().unwrap_or(&serde_json::Value::Null));
        tracing::info!(%detail, path, "the file changed since its diff was shown: not written");
        Err(ExternalError::Stale {
            detail,
            before,
            fingerprint: now,
        })
    }
}

/// The target state the wake reads `before` and fingerprints from: the previews the
/// gateway read for the calls being queued, and nothing about any other call.
#[derive(Debug)]
struct FileState(Arc<FileReads>);

impl assent_tools::SummaryContext for FileState {
    fn title_of(&self, _entity_id: &str) -> Option<String> {
        None
    }
}

impl TargetState for FileState {
    fn before(&self, tool_name: &str, args: &serde_json::Value) -> Option<serde_json::Value> {
        self.0.previews.get(tool_name, args).map(|p| p.before)
    }

    fn fingerprint(&self, tool_name: &str, args: &serde_json::Value) -> Option<serde_json::Value> {
        self.0
            .previews
            .get(tool_name, args)
            .and_then(|p| p.fingerprint)
    }

    fn observed(&self, tool_name: &str, args: &serde_json::Value) -> bool {
        self.0.previews.get(tool_name, args).is_some()
    }
}

/// The host of one gated MCP server: see the module documentation.
#[derive(Debug)]
pub struct McpHost {
    name: String,
    resolver: ServerCategory,
    inline: InlineUpstream,
    ledger: LedgerUpstream,
    idempotent: BTreeSet<String>,
    files: Arc<FileReads>,
}

impl McpHost {
    /// The host of agent `agent`'s server `server` ([`gateway_host`]), whose target
    /// (`mcp`, `server`) has `category`, and whose calls `caller` runs; the tools named in `idempotent` (their trusted
    /// `idempotentHint`, see `catalog::idempotent`) are simply run again when a crash
    /// leaves them in doubt.
    pub fn new(
        agent: &str,
        server: &str,
        category: &str,
        caller: Arc<UpstreamCaller>,
        idempotent: BTreeSet<String>,
    ) -> Self {
        Self {
            name: gateway_host(agent, server),
            resolver: ServerCategory {
                server: server.to_owned(),
                category: category.to_owned(),
            },
            inline: InlineUpstream(caller.clone()),
            ledger: LedgerUpstream(caller, None, None),
            idempotent,
            files: Arc::default(),
        }
    }

    /// The host whose writes of files show diffs from `files` (read by the gateway
    /// before their wake) and are checked against them before they run.
    pub fn with_files(mut self, store: assent_store::Store, files: Arc<FileReads>) -> Self {
        self.ledger.2 = Some(FileGuard {
            store,
            files: files.clone(),
        });
        self.files = files;
        self
    }

    /// The host whose approved calls run only in the session that made them, or
    /// after it when the operator said so ([`SessionGuard`]).
    pub fn with_session(mut self, guard: SessionGuard) -> Self {
        self.ledger.1 = Some(guard);
        self
    }

    /// The target every call of this server is about.
    pub fn target(&self) -> Target {
        Target::new(TARGET_KIND, self.resolver.server.clone())
    }
}

impl Host for McpHost {
    fn name(&self) -> &str {
        &self.name
    }

    /// The gateway records the upstream's catalog itself, pinned (`record_catalog`):
    /// an untrusted server's new definition must not be accepted by opening.
    fn records_catalog_on_open(&self) -> bool {
        false
    }

    fn snapshot<'a>(
        &'a self,
        _conn: &'a mut Connection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<assent_confirm::LoadedState, String>> {
        let state = FileState(self.files.clone());
        Box::pin(async move { Ok(Some(Box::new(state) as Box<dyn TargetState>)) })
    }

    fn handler(&self, _tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        Some(&self.inline)
    }

    fn effect(&self, tool_name: &str) -> Effect {
        Effect::External {
            idempotent: self.idempotent.contains(tool_name),
        }
    }

    fn external(&self, _tool_name: &str) -> Option<&dyn ExternalHandler> {
        Some(&self.ledger)
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        &self.resolver
    }
}

/// The category of the server's one target; any other target has none (denied).
#[derive(Debug)]
struct ServerCategory {
    server: String,
    category: String,
}

impl CategoryResolver<Connection> for ServerCategory {
    fn category_of<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        let ours = target.kind == TARGET_KIND && target.id == self.server;
        let category = ours.then(|| self.category.clone());
        Box::pin(async move { Ok(category) })
    }

    fn vector_clock_of<'a>(
        &'a self,
        _ctx: &'a mut Connection,
        _target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async { Ok(None) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approved_call_runs_only_in_its_own_chat_unless_marked() {
        let now = OffsetDateTime::UNIX_EPOCH + Duration::days(20_000);
        let mine = Uuid::new_v4();
        let operation =
            assent_domain::OperationId::derive("run", "write", &serde_json::json!({}), &["files"]);
        let args = serde_json::json!({});
        let target = Target::new(TARGET_KIND, "files");
        let call = ExternalCall {
            operation_id: &operation,
            tool_name: "write",
            args: &args,
            target: &target,
            agent_id: "desktop",
            attempt: 1,
        };
        let session = |id, seen: Duration, ended: bool| CallSession {
            id,
            seen_at: now - seen,
            ended_at: ended.then_some(now - seen),
            confirmed_at: now - seen + Duration::milliseconds(1),
        };
        let other = Uuid::new_v4();
        // No session recorded (a task, an older call), or this one: runs.
        assert_eq!(after_disconnect(None, mine, false, &call, now), Ok(()));
        let own = session(mine, Duration::seconds(1), false);
        assert_eq!(
            after_disconnect(Some(&own), mine, false, &call, now),
            Ok(())
        );
        // Another live session's call waits for its own gateway.
        let live = session(other, Duration::seconds(5), false);
        assert!(matches!(
            after_disconnect(Some(&live), mine, false, &call, now),
            Err(ExternalError::Retryable(_))
        ));
        // An ended chat, or a gateway unseen for long: refused for good, unless marked.
        for gone in [
            session(other, Duration::seconds(1), true),
            session(other, SESSION_STALE, false),
        ] {
            let refused = after_disconnect(Some(&gone), mine, false, &call, now);
            let Err(ExternalError::Permanent(why)) = refused else {
                panic!("{refused:?}")
            };
            assert!(
                why.contains("assent agent run-after-disconnect desktop write"),
                "{why}"
            );
            assert_eq!(
                after_disconnect(Some(&gone), mine, true, &call, now),
                Ok(())
            );
            // Confirmed while its chat was there: it runs wherever it is claimed.
            let confirmed_before = CallSession {
                confirmed_at: gone.seen_at - Duration::seconds(1),
                ..gone
            };
            assert_eq!(
                after_disconnect(Some(&confirmed_before), mine, false, &call, now),
                Ok(())
            );
        }
    }

    #[test]
    fn a_host_name_is_letters_digits_and_underscores() {
        assert_eq!(host_name("files"), "mcp_files");
        assert_eq!(host_name("my_files"), "mcp_my_files");
        assert_eq!(host_name("my-files.v2"), "mcpx_my_2d_files_2e_v2");
        assert_eq!(host_name("my_files.v2"), "mcpx_my__files_2e_v2");
        assert_eq!(host_name("n\u{f6}tes"), "mcpx_n_f6_tes");
        for name in ["files", "my-files.v2", "n\u{f6}tes", "a b"] {
            let host = host_name(name);
            assert!(
                host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{host}"
            );
        }
    }

    #[test]
    fn a_gateways_host_names_its_agent_and_its_server() {
        assert_eq!(gateway_host("desktop", "files"), "mcpa_desktop_x_files");
        assert_eq!(gateway_host("cursor", "files"), "mcpa_cursor_x_files");
        assert_eq!(gateway_host("a_x", "b"), "mcpa_a__x_x_b");
        assert_eq!(gateway_host("a", "x_b"), "mcpa_a_x_x__b");
        assert_eq!(gateway_host("my-bot", "n.s"), "mcpa_my_2d_bot_x_n_2e_s");
        let names = [
            "a", "a_x", "x_b", "a_x_b", "x", "_x_", "a-x", "my_files", "my-files", "b", "", "_",
            "x_", "_x",
        ];
        let mut hosts = std::collections::BTreeMap::new();
        for agent in names {
            for server in names {
                let host = gateway_host(agent, server);
                assert!(
                    host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                    "{host}"
                );
                assert!(host.starts_with("mcpa_"), "never a previous release's name");
                if let Some(other) = hosts.insert(host.clone(), (agent, server)) {
                    panic!("{:?} and {other:?} share host {host}", (agent, server));
                }
            }
        }
    }

    #[test]
    fn different_names_never_share_a_host() {
        let names = [
            "my-files",
            "my_files",
            "my.files",
            "my files",
            "myfiles",
            "my__files",
            "my_2d_files",
            "mcpx_my",
            "x_my",
            "my-2d-files",
            "_2d_",
            "-",
            "__",
            "_",
            "_5f_",
            "a_b",
            "a__b",
            "a-_b",
            "a_-b",
            "\u{e9}",
            "e\u{301}",
            "x_2d_",
        ];
        let mut hosts = std::collections::BTreeMap::new();
        for name in names {
            if let Some(other) = hosts.insert(host_name(name), name) {
                panic!("{name:?} and {other:?} share host {}", host_name(name));
            }
        }
    }

    /// What the wake reads of files answers only for the calls it was read for: any
    /// other call (a held one whose window ends) is not observed, so its fingerprint
    /// is never compared with an absent reading.
    #[test]
    fn the_file_state_observes_only_the_calls_read_for() {
        let files = Arc::new(FileReads::default());
        let state = FileState(files.clone());
        let args = serde_json::json!({"path": "/f", "content": "new"});
        assert!(!state.observed("write_file", &args));
        assert_eq!(state.fingerprint("write_file", &args), None);
        let preview = Preview::of("/f", &args, "old");
        files.previews.keep("write_file", &args, preview.clone());
        assert!(state.observed("write_file", &args));
        assert_eq!(state.before("write_file", &args), Some(preview.before));
        assert_eq!(state.fingerprint("write_file", &args), preview.fingerprint);
        let other = serde_json::json!({"path": "/g", "content": "new"});
        assert!(!state.observed("write_file", &other));
    }
}
