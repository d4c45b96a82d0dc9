//! What can go wrong starting or running the gateway.

/// The gateway's errors.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The upstream server did not start or did not complete the MCP handshake.
    #[error("the upstream MCP server `{command}` failed to start: {reason}")]
    UpstreamStart {
        /// The command line.
        command: String,
        /// Why.
        reason: String,
    },
    /// The upstream's tool list could not be read or turned into a catalog.
    #[error("the upstream's tool {tool:?} cannot be gated: {reason}")]
    Catalog {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// `--agent` names no agent of the database.
    #[error("no agent {0:?} (create it with `assent agent create --id {0} --categories mcp`)")]
    UnknownAgent(String),
    /// `--server` names a server whose host another server of the database already
    /// uses (an older release gave `my-files` and `my_files` one host).
    #[error(
        "the server name {server:?} maps to host {host}, which server {other:?} already uses in this database; choose another --server name"
    )]
    HostTaken {
        /// The name asked for.
        server: String,
        /// Its host.
        host: String,
        /// The server whose jobs or items that host holds.
        other: String,
    },
    /// The server's name is empty or would split two ways behind a `--config`
    /// gateway (see `config::server_name_problem`).
    #[error("{0}")]
    BadServerName(String),
    /// Listing the upstream's tools again (it said they changed) failed.
    #[error("listing the tools of `{command}` again failed: {reason}")]
    UpstreamRelist {
        /// The upstream's command line.
        command: String,
        /// Why.
        reason: String,
    },
    /// No server of the configuration file could be started.
    #[error(
        "no MCP server of the configuration could be started (each one's reason is logged above)"
    )]
    NoServer,
    /// The client side of the protocol failed.
    #[error("the MCP client connection failed: {0}")]
    Client(String),
    /// The engine failed.
    #[error(transparent)]
    Confirm(#[from] assent_confirm::ConfirmError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] assent_store::StoreError),
}
