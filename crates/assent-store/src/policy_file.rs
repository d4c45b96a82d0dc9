//! What the store keeps of a policy file applied (`assent policy apply`, issue 57): each
//! agent it changed gets its rules entry on the consent chain again, naming who applied
//! the file and the file's SHA-256, so the chain says which reviewed file put a rule in
//! force. The changes themselves are written by the agents' own store functions, in the
//! caller's one transaction.

use crate::{Connection, StoreError, chain};
use serde_json::json;
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

/// The key of a rules entry's content naming the policy file that made the change:
/// `{"sha256": HEX}`.
pub const CHAIN_KEY: &str = "policyFile";

/// The SHA-256 of a policy file's bytes, as lowercase hex: what the chain records and
/// `assent policy apply` prints.
pub fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Enters on the consent chain that `by` applied the policy file of hash `sha256`,
/// which changed agent `agent_id`'s settings: its rules entry as it now stands, with
/// `by` and `policyFile: {sha256}`. Nothing for an unknown agent.
pub async fn record_applied(
    conn: &mut Connection,
    agent_id: &str,
    by: &str,
    sha256: &str,
    now: OffsetDateTime,
) -> Result<(), StoreError> {
    chain::append_rules_noting(
        conn,
        agent_id,
        Some(by),
        Some((CHAIN_KEY, json!({ "sha256": sha256 }))),
        now,
    )
    .await
}
