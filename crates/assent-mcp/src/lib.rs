//! The MCP gateway: `assent mcp` puts a person in front of any MCP server's tools.
//!
//! The gateway is an MCP server for the client (on stdin/stdout) and an MCP client of
//! the upstream server it starts as a child ([`Upstream`]). It lists the upstream's
//! tools and queues every call as an item of a change set on target kind `mcp`, id the
//! server's name, where `assent pending` and the review page show it like any other
//! item; a tool runs at once (audited, under the agent's policy) only when the agent's
//! rules allow it or, under [`Trust::Hints`], when the upstream marks it read-only and
//! not destructive. A deferred tool is listed without its `outputSchema` ([`listed`]),
//! so that every answer of its calls is valid for a client that checks results.
//!
//! - [`Upstream`]: the child server, its tools, and calls of them.
//! - [`UpstreamCaller`]: the upstream call shaped as the execution ledger's external
//!   handler (operation id as idempotency key, in the request's `_meta` as
//!   [`OPERATION_ID_META`]; retryable, permanent or in-doubt errors, each call bounded
//!   by [`Deadlines`]).
//! - [`McpHost`]: the engine's [`assent_confirm::Host`] for target kind `mcp`: every
//!   tool's effect is external, so a confirmed call runs through the execution ledger
//!   ([`LedgerUpstream`]); an immediate read-only call runs inline ([`InlineUpstream`]).
//! - [`Gateway`]: the MCP server the client talks to for one upstream; [`Gateways`]:
//!   every server of a configuration file ([`config`]) behind one endpoint, tools
//!   named `SERVER__tool`; [`run`] and [`run_config`] wire it all together, served on
//!   stdio or over Streamable HTTP ([`Downstream`]).
//! - `elicit`: `--ask-in-client`, a queued call asked of the client's user over MCP
//!   elicitation (form mode), recorded as `mcp-client:NAME`, never for a quorum.
//!
//! A client's configuration file read into the servers the gateway fronts:
//!
//! ```
//! let config = assent_mcp::config::parse(
//!     r#"{"mcpServers": {"files": {"command": "npx",
//!         "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"]}}}"#,
//! )?;
//! let files = &config.servers[0];
//! assert_eq!(files.name, "files");
//! assert_eq!(files.source.describe(), "npx -y @modelcontextprotocol/server-filesystem /tmp");
//! # Ok::<(), assent_mcp::config::ConfigError>(())
//! ```

mod catalog;
pub mod config;
mod edits;
mod elicit;
mod error;
mod gateway;
mod host;
mod preview;
mod reach;
pub mod redact;
mod serve;
mod status;
pub mod trace_context;
mod upstream;

pub use catalog::{
    DEFERRED_NOTE, TARGET_KIND, Trust, idempotent, listed, recorded_registry, registry, route,
};
pub use config::FilePreview;
pub use error::McpError;
pub use gateway::{
    CANCELLED_BY_AGENT, CHANGE_SET_META, Gateway, GatewayOptions, QUEUED, REVIEW_URL_META,
    STOPPED_WAITING, TASK_FAILED_CODE, parse_task_id, task_id,
};
pub use host::{
    FileGuard, FileReads, HEARTBEAT_EVERY, InlineUpstream, LedgerUpstream, McpHost, SESSION_STALE,
    SessionGuard, adopt_legacy, after_disconnect, check_host_free, gateway_host, host_name,
};
pub use preview::{Preview, Previews, preview_of, unified_diff};
pub use serve::{
    ANNOUNCE, Downstream, Gateways, HttpDownstream, MCP_PATH, Supervision, mount_config, run,
    run_config, run_one,
};
pub use status::{EDITED_META, STATUS_TOOL, status_answer, waited_answer};
pub use upstream::{
    Deadlines, OPERATION_ID_META, Upstream, UpstreamCaller, UpstreamError, http_transport,
    result_text,
};
