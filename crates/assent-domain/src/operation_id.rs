//! Deterministic operation ids (ADR 0004): the same run, tool, arguments and targets
//! always give the same id, so an operation retried after a crash is recognised.

use crate::canonical_json;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fmt;

/// SHA-256 (lowercase hex) of the run key, tool name, canonical JSON of the args and
/// the sorted target ids.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct OperationId(String);

impl OperationId {
    /// Derives the id. Each field is length-prefixed so that no two different inputs
    /// can produce the same byte stream (`("ab","c")` vs `("a","bc")`).
    pub fn derive<S: AsRef<str>>(
        run_key: &str,
        tool_name: &str,
        args: &Value,
        target_ids: &[S],
    ) -> Self {
        let mut targets: Vec<&str> = target_ids.iter().map(AsRef::as_ref).collect();
        targets.sort_unstable();
        let mut hasher = Sha256::new();
        let mut field = |bytes: &[u8]| {
            hasher.update((bytes.len() as u64).to_be_bytes());
            hasher.update(bytes);
        };
        field(run_key.as_bytes());
        field(tool_name.as_bytes());
        field(canonical_json(args).as_bytes());
        field(&(targets.len() as u64).to_be_bytes());
        for target in targets {
            field(target.as_bytes());
        }
        Self(crate::lower_hex(&hasher.finalize()))
    }

    /// The id of confirming item `item_index` of change set `change_set_id`: unique to
    /// that proposal, so that two proposals that happen to agree in run key, tool,
    /// arguments and target (a status set, changed back, and set again) are two
    /// operations, while a confirmation retried after a crash is still the same one.
    pub fn for_proposal(
        run_key: &str,
        tool_name: &str,
        args: &Value,
        target_id: &str,
        change_set_id: uuid::Uuid,
        item_index: usize,
    ) -> Self {
        // The proposal joins the run key (length-prefixed as a whole), so no proposal
        // id can equal the id of an immediate call, which has no proposal.
        let run = format!("{run_key}\u{0}proposal:{change_set_id}#{item_index}");
        Self::derive(&run, tool_name, args, &[target_id])
    }

    /// The id of the `occurrence`-th call (from 0) of the same tool with the same
    /// arguments in one run of immediate calls: the first keeps [`OperationId::derive`]'s
    /// id, so a retried run is still recognised; a repeat (`P1`, `P2`, `P1`) is an
    /// operation of its own, never a second effect under the first one's id (which an
    /// idempotent tool would drop, and which `audit verify` reports as one operation
    /// taking effect twice).
    pub fn for_call(
        run_key: &str,
        tool_name: &str,
        args: &Value,
        target_id: &str,
        occurrence: usize,
    ) -> Self {
        if occurrence == 0 {
            return Self::derive(run_key, tool_name, args, &[target_id]);
        }
        let run = format!("{run_key}\u{0}repeat:{occurrence}");
        Self::derive(&run, tool_name, args, &[target_id])
    }

    /// Wraps an id read back from storage.
    pub fn from_stored(hex: String) -> Self {
        Self(hex)
    }

    /// The hex string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, json};

    #[test]
    fn a_proposal_id_is_unique_to_its_set_and_item() {
        let args = json!({"status": "BLOCKED"});
        let set = uuid::Uuid::from_u128(1);
        let first = OperationId::for_proposal("run", "set_task_status", &args, "t1", set, 0);
        assert_eq!(
            first,
            OperationId::for_proposal("run", "set_task_status", &args, "t1", set, 0),
            "a retry of the same confirmation is the same operation"
        );
        assert_ne!(
            first,
            OperationId::for_proposal("run", "set_task_status", &args, "t1", set, 1)
        );
        assert_ne!(
            first,
            OperationId::for_proposal(
                "run",
                "set_task_status",
                &args,
                "t1",
                uuid::Uuid::from_u128(2),
                0
            )
        );
        assert_ne!(
            first,
            OperationId::derive("run", "set_task_status", &args, &["t1"])
        );
    }

    #[test]
    fn known_shape_and_sensitivity() {
        let base = OperationId::derive("run", "set_task_title", &json!({"title": "a"}), &["t1"]);
        assert_eq!(base.as_str().len(), 64);
        assert!(
            base.as_str()
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_eq!(
            base,
            OperationId::derive("run", "set_task_title", &json!({"title": "a"}), &["t1"])
        );
        assert_ne!(
            base,
            OperationId::derive("run2", "set_task_title", &json!({"title": "a"}), &["t1"])
        );
        assert_ne!(
            base,
            OperationId::derive("run", "set_task_status", &json!({"title": "a"}), &["t1"])
        );
        assert_ne!(
            base,
            OperationId::derive("run", "set_task_title", &json!({"title": "b"}), &["t1"])
        );
        assert_ne!(
            base,
            OperationId::derive("run", "set_task_title", &json!({"title": "a"}), &["t2"])
        );
        assert_ne!(
            OperationId::derive("ab", "c", &json!({}), &[] as &[&str]),
            OperationId::derive("a", "bc", &json!({}), &[] as &[&str])
        );
    }

    #[test]
    fn target_order_does_not_matter() {
        let a = OperationId::derive("r", "t", &json!({}), &["x", "y"]);
        let b = OperationId::derive("r", "t", &json!({}), &["y", "x"]);
        assert_eq!(a, b);
    }

    fn shuffled_object(pairs: &[(String, i64)], rotate: usize) -> Value {
        let mut entries = pairs.to_vec();
        if !entries.is_empty() {
            let k = rotate % entries.len();
            entries.rotate_left(k);
            entries.reverse();
        }
        let mut map = Map::new();
        for (k, v) in entries {
            map.insert(k, json!({"nested": v, "b": [v, {"z": 1, "a": 2}]}));
        }
        Value::Object(map)
    }

    proptest! {
        #[test]
        fn key_order_never_changes_the_id(
            pairs in prop::collection::btree_map("[a-z]{1,6}", any::<i64>(), 0..8),
            rotate in 0usize..8,
        ) {
            let pairs: Vec<(String, i64)> = pairs.into_iter().collect();
            let mut map = Map::new();
            for (k, v) in &pairs {
                map.insert(k.clone(), json!({"b": [v, {"a": 2, "z": 1}], "nested": v}));
            }
            let sorted = Value::Object(map);
            let shuffled = shuffled_object(&pairs, rotate);
            prop_assert_eq!(
                OperationId::derive("run", "tool", &sorted, &["t"]),
                OperationId::derive("run", "tool", &shuffled, &["t"])
            );
        }

        #[test]
        fn different_args_give_different_ids(a in any::<i64>(), b in any::<i64>()) {
            prop_assume!(a != b);
            prop_assert_ne!(
                OperationId::derive("run", "tool", &json!({"v": a}), &["t"]),
                OperationId::derive("run", "tool", &json!({"v": b}), &["t"])
            );
        }
    }

    #[test]
    fn a_repeated_call_in_one_run_is_an_operation_of_its_own() {
        let args = serde_json::json!({"priority": "P1"});
        let first = OperationId::for_call("run", "set", &args, "t", 0);
        assert_eq!(first, OperationId::derive("run", "set", &args, &["t"]));
        let again = OperationId::for_call("run", "set", &args, "t", 1);
        assert_ne!(first, again);
        assert_eq!(again, OperationId::for_call("run", "set", &args, "t", 1));
        assert_ne!(again, OperationId::for_call("run", "set", &args, "t", 2));
    }
}
