//! Vector clocks: which of two versions of an entity saw the other, across devices.

use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// How two clocks relate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockOrdering {
    /// Same history.
    Equal,
    /// `self` happened before `other` (other has seen everything self has).
    Before,
    /// `self` happened after `other`.
    After,
    /// Neither saw the other: a conflict to resolve.
    Concurrent,
}

/// Host id → counter. Missing hosts count as zero, so a zero entry is never stored and
/// two clocks with the same history are equal values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct VectorClock(BTreeMap<String, u64>);

impl VectorClock {
    /// The counter of `host` (zero when absent).
    pub fn get(&self, host: &str) -> u64 {
        self.0.get(host).copied().unwrap_or(0)
    }

    /// Records one more event on `host`. Saturates rather than wrapping.
    pub fn tick(&mut self, host: &str) -> u64 {
        let counter = self.0.entry(host.to_owned()).or_insert(0);
        *counter = counter.saturating_add(1);
        *counter
    }

    /// The least clock that has seen both histories (pointwise maximum).
    #[must_use]
    pub fn merge(&self, other: &Self) -> Self {
        let mut merged = self.0.clone();
        for (host, &count) in &other.0 {
            let entry = merged.entry(host.clone()).or_insert(0);
            *entry = (*entry).max(count);
        }
        merged.retain(|_, c| *c > 0);
        Self(merged)
    }

    /// How `self` relates to `other`.
    pub fn compare(&self, other: &Self) -> ClockOrdering {
        let (mut less, mut greater) = (false, false);
        for host in self.0.keys().chain(other.0.keys()) {
            match self.get(host).cmp(&other.get(host)) {
                Ordering::Less => less = true,
                Ordering::Greater => greater = true,
                Ordering::Equal => {}
            }
        }
        match (less, greater) {
            (false, false) => ClockOrdering::Equal,
            (true, false) => ClockOrdering::Before,
            (false, true) => ClockOrdering::After,
            (true, true) => ClockOrdering::Concurrent,
        }
    }

    /// The entries, by host id.
    pub fn entries(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(h, c)| (h.as_str(), *c))
    }
}

impl FromIterator<(String, u64)> for VectorClock {
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(iter: I) -> Self {
        Self(iter.into_iter().filter(|(_, c)| *c > 0).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clock() -> impl Strategy<Value = VectorClock> {
        prop::collection::btree_map("[abc]", 0u64..5, 0..4).prop_map(|m| m.into_iter().collect())
    }

    #[test]
    fn tick_and_compare() {
        let mut a = VectorClock::default();
        let b = a.clone();
        assert_eq!(a.compare(&b), ClockOrdering::Equal);
        a.tick("a");
        assert_eq!(a.compare(&b), ClockOrdering::After);
        assert_eq!(b.compare(&a), ClockOrdering::Before);
        let mut c = b.clone();
        c.tick("c");
        assert_eq!(a.compare(&c), ClockOrdering::Concurrent);
        let m = a.merge(&c);
        assert_eq!(m.compare(&a), ClockOrdering::After);
        assert_eq!(m.compare(&c), ClockOrdering::After);
    }

    #[test]
    fn serialises_as_a_plain_map() {
        let mut a = VectorClock::default();
        a.tick("host-1");
        a.tick("host-1");
        assert_eq!(serde_json::to_string(&a).expect("json"), r#"{"host-1":2}"#);
    }

    proptest! {
        #[test]
        fn merge_is_commutative(a in clock(), b in clock()) {
            prop_assert_eq!(a.merge(&b), b.merge(&a));
        }

        #[test]
        fn merge_is_associative(a in clock(), b in clock(), c in clock()) {
            prop_assert_eq!(a.merge(&b).merge(&c), a.merge(&b.merge(&c)));
        }

        #[test]
        fn merge_is_idempotent(a in clock(), b in clock()) {
            prop_assert_eq!(a.merge(&a), a.clone());
            let m = a.merge(&b);
            prop_assert_eq!(m.merge(&b), m.clone());
        }

        #[test]
        fn merge_dominates_both(a in clock(), b in clock()) {
            let m = a.merge(&b);
            prop_assert!(matches!(a.compare(&m), ClockOrdering::Before | ClockOrdering::Equal));
            prop_assert!(matches!(b.compare(&m), ClockOrdering::Before | ClockOrdering::Equal));
        }

        #[test]
        fn compare_is_antisymmetric(a in clock(), b in clock()) {
            let expected = match a.compare(&b) {
                ClockOrdering::Before => ClockOrdering::After,
                ClockOrdering::After => ClockOrdering::Before,
                other => other,
            };
            prop_assert_eq!(b.compare(&a), expected);
        }
    }
}
