//! Statuses of sets and items, verdicts, and the one rule deriving a set's status.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use time::OffsetDateTime;

/// A name that is no value of a status or a verdict (parsing `Verdict` from `"ok"`):
/// reads `unknown Verdict "ok" (expected one of: confirmed, rejected, …)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {input:?} (expected one of: {})", expected.join(", "))]
#[non_exhaustive]
pub struct UnknownName {
    /// The type asked for (`Verdict`).
    pub kind: &'static str,
    /// The name given.
    pub input: String,
    /// Every name it has.
    pub expected: &'static [&'static str],
}

macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $wire:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[non_exhaustive]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $wire)] $variant),+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable wire name (as in JSON and in the database).
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    other => Err(UnknownName {
                        kind: stringify!($name),
                        input: other.to_owned(),
                        expected: &[$($wire),+],
                    }),
                }
            }
        }
    };
}

wire_enum! {
    /// Where a change set stands as a whole; derived from its items except `expired`.
    ChangeSetStatus {
        /// No item has been decided yet.
        Pending => "pending",
        /// Some, not all, items are decided.
        PartiallyResolved => "partiallyResolved",
        /// Every item is decided.
        Resolved => "resolved",
        /// Left undecided past its time to live; hidden from review.
        Expired => "expired",
    }
}

wire_enum! {
    /// Where one proposed change stands; `pending` by default.
    #[derive(Default)]
    ChangeItemStatus {
        /// Waiting for a person.
        #[default]
        Pending => "pending",
        /// Applied after a person confirmed it.
        Confirmed => "confirmed",
        /// Refused by a person.
        Rejected => "rejected",
        /// Put off by a person; still open.
        Deferred => "deferred",
        /// Withdrawn (by the agent or by a newer proposal) before anyone decided.
        Retracted => "retracted",
    }
}

wire_enum! {
    /// What a person (or the agent, for `retracted`) decided about an item.
    Verdict {
        /// Apply it.
        Confirmed => "confirmed",
        /// Do not apply it.
        Rejected => "rejected",
        /// Decide later.
        Deferred => "deferred",
        /// Withdrawn without applying.
        Retracted => "retracted",
    }
}

impl ChangeItemStatus {
    /// Decided for good: confirmed, rejected or retracted. Pending and deferred items
    /// are still open.
    pub const fn is_decided(self) -> bool {
        matches!(self, Self::Confirmed | Self::Rejected | Self::Retracted)
    }

    /// Open items still wait for a person: pending or deferred.
    pub const fn is_open(self) -> bool {
        !self.is_decided()
    }
}

impl ChangeSetStatus {
    /// Whether the set still belongs in the pending view (some item may be decided).
    pub const fn is_open(self) -> bool {
        matches!(self, Self::Pending | Self::PartiallyResolved)
    }
}

impl Verdict {
    /// The status an item takes on this verdict.
    pub const fn item_status(self) -> ChangeItemStatus {
        match self {
            Self::Confirmed => ChangeItemStatus::Confirmed,
            Self::Rejected => ChangeItemStatus::Rejected,
            Self::Deferred => ChangeItemStatus::Deferred,
            Self::Retracted => ChangeItemStatus::Retracted,
        }
    }
}

/// The status and resolution time a set should have, given its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedStatus {
    /// The derived status.
    pub status: ChangeSetStatus,
    /// When the set became resolved; `None` unless `status` is `Resolved`.
    pub resolved_at: Option<OffsetDateTime>,
}

/// Derives a set's status from its items: all decided → `resolved` (keeping an earlier
/// `resolved_at`, else `now`); some decided → `partiallyResolved`; none → `pending`.
/// `resolved_at` is cleared whenever an item is open again. An `expired` set stays
/// expired: expiry is a decision about the set, not about its items.
pub fn derive_set_status(
    current: ChangeSetStatus,
    items: impl IntoIterator<Item = ChangeItemStatus>,
    resolved_at: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> DerivedStatus {
    let (mut total, mut decided) = (0usize, 0usize);
    for status in items {
        total += 1;
        decided += usize::from(status.is_decided());
    }
    if current == ChangeSetStatus::Expired {
        return DerivedStatus {
            status: ChangeSetStatus::Expired,
            resolved_at: None,
        };
    }
    if total > 0 && decided == total {
        DerivedStatus {
            status: ChangeSetStatus::Resolved,
            resolved_at: Some(resolved_at.unwrap_or(now)),
        }
    } else if decided > 0 {
        DerivedStatus {
            status: ChangeSetStatus::PartiallyResolved,
            resolved_at: None,
        }
    } else {
        DerivedStatus {
            status: ChangeSetStatus::Pending,
            resolved_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    const NOW: OffsetDateTime = datetime!(2026-03-01 12:00 UTC);

    #[test]
    fn wire_names_round_trip_through_from_str() {
        for s in ChangeSetStatus::ALL {
            assert_eq!(s.as_str().parse::<ChangeSetStatus>(), Ok(*s));
        }
        for s in ChangeItemStatus::ALL {
            assert_eq!(s.as_str().parse::<ChangeItemStatus>(), Ok(*s));
        }
        for v in Verdict::ALL {
            assert_eq!(v.as_str().parse::<Verdict>(), Ok(*v));
        }
        assert!("Pending".parse::<ChangeSetStatus>().is_err());
        let unknown = "ok".parse::<Verdict>().expect_err("no such verdict");
        assert_eq!((unknown.kind, unknown.input.as_str()), ("Verdict", "ok"));
        assert_eq!(
            unknown.to_string(),
            "unknown Verdict \"ok\" (expected one of: confirmed, rejected, deferred, retracted)"
        );
    }

    #[test]
    fn derivation_rules() {
        use ChangeItemStatus as I;
        use ChangeSetStatus as S;
        let d = |items: &[I]| derive_set_status(S::Pending, items.iter().copied(), None, NOW);
        assert_eq!(d(&[I::Pending, I::Deferred]).status, S::Pending);
        assert_eq!(d(&[I::Confirmed, I::Deferred]).status, S::PartiallyResolved);
        let all = d(&[I::Confirmed, I::Rejected, I::Retracted]);
        assert_eq!(all.status, S::Resolved);
        assert_eq!(all.resolved_at, Some(NOW));
    }

    #[test]
    fn resolved_at_is_kept_then_cleared_when_an_item_reopens() {
        use ChangeItemStatus as I;
        let earlier = datetime!(2026-02-01 0:00 UTC);
        let kept = derive_set_status(
            ChangeSetStatus::Resolved,
            [I::Confirmed],
            Some(earlier),
            NOW,
        );
        assert_eq!(kept.resolved_at, Some(earlier));
        let reopened = derive_set_status(
            ChangeSetStatus::Resolved,
            [I::Confirmed, I::Pending],
            Some(earlier),
            NOW,
        );
        assert_eq!(reopened.status, ChangeSetStatus::PartiallyResolved);
        assert_eq!(reopened.resolved_at, None);
    }

    #[test]
    fn expired_stays_expired() {
        let d = derive_set_status(
            ChangeSetStatus::Expired,
            [ChangeItemStatus::Confirmed],
            None,
            NOW,
        );
        assert_eq!(d.status, ChangeSetStatus::Expired);
    }
}
