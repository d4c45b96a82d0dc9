//! The MCP gateway: `assent mcp` puts a person in front of any MCP server's tools.
//!
//! The gateway is an MCP server for the client (on stdin/stdout) and an MCP client of
//! the upstream server it starts as a child ([`Upstream`]). It lists the upstream's
//! tools, runs read-only ones at once (audited, under the agent's policy) and queues
//! every other call as an item of a change set on target kind `mcp`, id the server's
//! name, where `assent pending` and the review page show it like any other item.
//!
//! - [`Upstream`]: the child server, its tools, and calls of them.
//! - [`UpstreamCaller`]: the upstream call shaped as the execution ledger's external
//!   handler (operation id as idempotency key, retryable or permanent errors).
//! - [`McpHost`]: the engine's [`assent_confirm::Host`] for target kind `mcp`: every
//!   tool's effect is external, so a confirmed call runs through the execution ledger
//!   ([`LedgerUpstream`]); an immediate read-only call runs inline ([`InlineUpstream`]).
//! - [`Gateway`]: the MCP server the client talks to; [`run`] wires it all together.

mod catalog;
mod error;
mod gateway;
mod host;
mod upstream;

pub use catalog::{TARGET_KIND, registry, route};
pub use error::McpError;
pub use gateway::{Gateway, GatewayOptions, QUEUED, run};
pub use host::{InlineUpstream, LedgerUpstream, McpHost, host_name};
pub use upstream::{Upstream, UpstreamCaller, UpstreamError, result_text};
