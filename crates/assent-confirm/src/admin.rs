//! The operator's side of an engine, [`Admin`] (`engine.admin()`): the API's tokens
//! and their roles, webhook subscriptions and their deliveries, the Slack app and the
//! Slack users who may decide, device sync (batches exported and merged, the peers and
//! conflicts it left, the sync outbox), and, from the modules beside this one, the MCP
//! gateway's client sessions, standing grants, the audit trail and its proof, hold
//! windows, the services' recorded catalogs and the rejection memory's upkeep. The CLI
//! (`assent tokens`, `assent webhooks`, `assent slack`, `assent sync`, `assent
//! conflicts`, `assent outbox`, `assent audit`, `assent grants`), the API
//! (`/api/tokens`, `/api/webhooks`, `/api/slack/interactions`, `/api/sync`,
//! `/api/audit`) and the MCP gateway call these methods, never the store's tables, so
//! each has one effect whichever door it came through, and each write is one
//! transaction. A service that only gates its own tools needs none of them: they are
//! kept off [`Engine`]'s own page so that its page is the service's.
//!
//! Two checks at a trust boundary are here unchanged, as the store makes them: a
//! bearer token is looked up by the hash of its secret
//! ([`Admin::authenticate_token`]), and a signed Slack payload is accepted once
//! ([`Admin::accept_slack_payload`]). A batch
//! from another device is untrusted input: the store's import checks it, and a refused
//! one is recorded in the imports' log by the engine, for every door alike.
//!
//! The plain types the doors need come with it, re-exported from the store.

use crate::Engine;

mod slack;
mod sync;
mod telegram;
mod tokens;
mod webhooks;

pub use assent_store::outbox::OutboxMessage;
pub use assent_store::slack::{SlackSecrets, SlackSettings, SlackUser};
pub use assent_store::sync::{ClaimedExport, ConflictRecord, ImportReport, Peer};
pub use assent_store::telegram::{
    AskedReason, TelegramMessage, TelegramSecrets, TelegramSettings, TelegramUser,
};
pub use assent_store::tokens::{ApiToken, IssuedToken, Role};
/// The event types a webhook subscription can ask for.
pub use assent_store::webhooks::event as webhook_event;
pub use assent_store::webhooks::{Delivery, NewEvent, NewSubscription, Subscription};
pub use slack::SlackStatus;
pub use telegram::TelegramStatus;
pub use tokens::authenticate_token;

/// The operator's side of an [`Engine`], borrowed from it by [`Engine::admin`]: the
/// settings and exchanges of the doors (tokens, webhooks, Slack, device sync, MCP
/// client sessions, grants, holds, catalogs, rejection memory) and the audit trail's
/// reads and proof. Every method is one read or one write transaction, as on the
/// engine itself.
///
/// ```
/// use assent::confirm::admin::Role;
/// use assent::domain::OffsetDateTime;
/// use assent::{Engine, SimpleHost, Store};
/// use assent::tools::ToolRegistry;
/// use std::sync::Arc;
///
/// async fn operator() -> Result<(), Box<dyn std::error::Error>> {
///     let store = Store::open("sqlite::memory:").await?;
///     let host = Arc::new(SimpleHost::new("ops"));
///     let engine = Engine::open(store, Arc::new(ToolRegistry::new()), host).await?;
///     let now = OffsetDateTime::now_utc();
///     let issued = engine.admin().issue_token(Role::Reviewer, None, now).await?;
///     // The API's bearer check: the presented secret, looked up by its hash.
///     let found = engine.admin().authenticate_token(&issued.secret).await?;
///     assert_eq!(found.map(|token| token.id), Some(issued.token.id));
///     Ok(())
/// }
///
/// fn main() -> Result<(), Box<dyn std::error::Error>> {
///     let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
///     runtime.block_on(operator())
/// }
/// ```
///
/// They are not on the engine itself, whose page is the service's (the call above,
/// without `admin()`, does not compile):
///
/// ```compile_fail
/// # async fn demo(engine: assent::Engine) {
/// let _ = engine.issue_token(assent::confirm::admin::Role::Reviewer, None, assent::domain::OffsetDateTime::now_utc()).await;
/// # }
/// ```
#[derive(Clone, Copy)]
pub struct Admin<'a> {
    pub(crate) engine: &'a Engine,
}

impl Engine {
    /// The operator's side of this engine ([`Admin`]): tokens, webhooks, Slack, device
    /// sync, MCP client sessions, grants, holds, the audit trail and its proof.
    pub fn admin(&self) -> Admin<'_> {
        Admin { engine: self }
    }
}
