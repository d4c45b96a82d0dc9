//! The operator's settings, changed and read in one place for every door: the API's
//! tokens and their roles, webhook subscriptions and their deliveries, the Slack app
//! and the Slack users who may decide, and device sync (batches exported and merged,
//! the peers and conflicts it left, the sync outbox). The CLI (`assent tokens`,
//! `assent webhooks`, `assent slack`, `assent sync`, `assent conflicts`, `assent
//! outbox`), the API (`/api/tokens`, `/api/webhooks`, `/api/slack/interactions`,
//! `/api/sync`) and the MCP gateway's HTTP door call these [`Engine`](crate::Engine)
//! methods, never the store's tables, so each has one effect whichever door it came
//! through, and each write is one transaction.
//!
//! Two checks at a trust boundary are here unchanged, as the store makes them: a
//! bearer token is looked up by the hash of its secret
//! ([`Engine::authenticate_token`](crate::Engine::authenticate_token)), and a signed
//! Slack payload is accepted once
//! ([`Engine::accept_slack_payload`](crate::Engine::accept_slack_payload)). A batch
//! from another device is untrusted input: the store's import checks it, and a refused
//! one is recorded in the imports' log by the engine, for every door alike.
//!
//! The plain types the doors need come with it, re-exported from the store.

mod slack;
mod sync;
mod tokens;
mod webhooks;

pub use assent_store::outbox::OutboxMessage;
pub use assent_store::slack::{SlackSecrets, SlackSettings, SlackUser};
pub use assent_store::sync::{ClaimedExport, ConflictRecord, ImportReport, Peer};
pub use assent_store::tokens::{ApiToken, IssuedToken, Role};
/// The event types a webhook subscription can ask for.
pub use assent_store::webhooks::event as webhook_event;
pub use assent_store::webhooks::{Delivery, NewEvent, NewSubscription, Subscription};
pub use slack::SlackStatus;
pub use tokens::authenticate_token;
