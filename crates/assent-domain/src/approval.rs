//! What a person approved, bound to the exact action: a digest the executor recomputes
//! before a later run and refuses on a mismatch (OWASP AISVS 9.2.3's "approval bound to
//! a digest of the action").

use crate::canonical_json;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// SHA-256 (hex) over the action: `tool_name`, the `args` that run (a person's edit
/// when there was one), the target's `fingerprint` the approval saw, and the hash of
/// the tool's `definition` then (`None` for each that was not known), in canonical JSON.
pub fn approval_digest(
    tool_name: &str,
    args: &Value,
    fingerprint: Option<&Value>,
    definition: Option<&str>,
) -> String {
    let action = json!({
        "tool": tool_name,
        "args": args,
        "fingerprint": fingerprint,
        "definition": definition,
    });
    crate::lower_hex(&Sha256::digest(canonical_json(&action).as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_of_the_action_changes_the_digest_and_key_order_does_not() {
        let args = json!({"a": 1, "b": 2});
        let fingerprint = json!({"priority": "P2"});
        let base = approval_digest("t", &args, Some(&fingerprint), Some("h1"));
        assert_eq!(
            base,
            approval_digest(
                "t",
                &json!({"b": 2, "a": 1}),
                Some(&fingerprint),
                Some("h1")
            )
        );
        assert_ne!(
            base,
            approval_digest("u", &args, Some(&fingerprint), Some("h1"))
        );
        assert_ne!(
            base,
            approval_digest("t", &json!({"a": 1}), Some(&fingerprint), Some("h1"))
        );
        assert_ne!(base, approval_digest("t", &args, None, Some("h1")));
        assert_ne!(
            base,
            approval_digest("t", &args, Some(&fingerprint), Some("h2"))
        );
        assert_eq!(base.len(), 64);
    }
}
