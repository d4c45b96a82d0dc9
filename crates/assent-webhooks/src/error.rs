//! The one error type of the webhook sender.

/// Adding, testing or delivering a webhook failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookError {
    /// The receiver's URL cannot be used.
    #[error("invalid webhook URL {url:?}: {reason}")]
    InvalidUrl {
        /// The URL given, masked when it is a secret (a Slack URL): errors reach logs
        /// and API answers.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An event type no subscription can ask for.
    #[error(
        "unknown webhook event {0:?} (known: {known})",
        known = assent_store::webhooks::event::ALL.join(", ")
    )]
    UnknownEvent(String),
    /// A format other than `standard` or `slack`.
    #[error("unknown webhook format {0:?} (known: standard, slack)")]
    UnknownFormat(String),
    /// A stored secret is not `whsec_` and base64.
    #[error("webhook secret of subscription {0} is not a whsec_ base64 key")]
    BadSecret(String),
    /// No subscription has this id.
    #[error("no webhook subscription {0}")]
    NoSubscription(uuid::Uuid),
    /// The HTTP client could not be built.
    #[error("cannot build the webhook HTTP client: {0}")]
    Client(String),
    /// A request that claims to come from Slack was refused (signature, timestamp,
    /// replay), before anything of its body was read.
    #[error("refused Slack request: {0}")]
    SlackRequest(String),
    /// A call of Slack's Web API failed (the token is never part of the message).
    #[error("Slack's {method} failed: {error}")]
    SlackApi {
        /// The Web API method.
        method: String,
        /// Slack's error, or the transport's.
        error: String,
    },
    /// A phone channel (`assent notify`) cannot be used as given.
    #[error("{0}")]
    InvalidChannel(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] assent_store::StoreError),
}
