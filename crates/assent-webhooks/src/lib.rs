//! Assent's webhook sender: it takes due deliveries from the database's queue
//! (`assent_store::webhooks`), posts them signed the Standard Webhooks way (or as a
//! Slack incoming-webhook body), and records each outcome, retrying with exponential
//! backoff and jitter until the attempts run out and the delivery is dead-lettered.
//!
//! The Slack app (`slack_app`): Block Kit messages with Approve and Reject, posted once
//! per queued set and rewritten whenever anything is decided, and the check of Slack's
//! request signatures for the interactions route (`assent serve`).
//!
//! The events themselves are written by the store in the transactions that cause them;
//! this crate only sends. Nothing here holds a database transaction or lock while a
//! receiver is being waited on, so a slow receiver delays nobody's decision, and every
//! delivery is its own task with its own timeout, so it delays no other delivery.
//!
//! A delivery's signature, the Standard Webhooks way:
//!
//! ```
//! use assent_webhooks::{generate_secret, sign};
//!
//! let secret = generate_secret();
//! let body = br#"{"type": "change_set.created"}"#;
//! let signature = sign(&secret, "msg_1", 1_767_225_600, body).ok_or("a valid secret")?;
//! assert!(signature.starts_with("v1,"));
//! assert_ne!(sign(&secret, "msg_1", 1_767_225_600, b"{}"), Some(signature));
//! # Ok::<(), &str>(())
//! ```

mod error;
pub mod phone;
mod retry;
mod sender;
mod signing;
mod slack;
mod slack_app;
mod target;

pub use error::WebhookError;
pub use phone::PhonePoster;
pub use retry::{DEFAULT_MAX_ATTEMPTS, FIRST_RETRY, MAX_BACKOFF, backoff};
pub use sender::{
    DEFAULT_RETENTION, DEFAULT_TIMEOUT, DeliveryReport, Sender, SenderConfig, TestResult,
    review_link, safe_text,
};
pub use signing::{SECRET_PREFIX, generate_secret, sign};
pub use slack::slack_body;
pub use slack_app::{
    APPROVE, DEFAULT_SLACK_API_URL, MAX_ACTIONS, MAX_BLOCKS, MAX_SECTION_CHARS, OPEN, REJECT,
    REJECT_VIEW, SLACK_CALL_TIMEOUT, SLACK_MAX_SKEW_SECONDS, SetState, SlackApi, SlackPoster,
    button_value, parse_button_value, payload_digest, reject_view, set_message, slack_signature,
    verify_slack_signature,
};
pub use target::{Format, validate_events, validate_url};
