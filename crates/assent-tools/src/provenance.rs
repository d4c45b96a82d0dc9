//! Where a rule came from (issue 57): how it was set, by whom and when, so that every
//! decision can name the rule that made it and its origin (`assent why`, an audit
//! record's `allowedBy`, a hook's or gateway's denial). Pure: the shell passes the
//! person and the time in.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// How a rule was set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
#[non_exhaustive]
pub enum RuleSource {
    /// A command or an API call setting one rule (`assent agent allow|ask|deny|audit`,
    /// `PUT /api/agents/{id}/rules/…`).
    Command,
    /// A policy file applied whole (`assent policy apply`), named by its hash.
    PolicyFile {
        /// The file's SHA-256, hex.
        sha256: String,
    },
    /// A grant suggestion applied (`assent grants suggest --apply`).
    Suggestion,
    /// A person's "yes, for this session" on a coding agent's call.
    SessionGrant,
}

impl RuleSource {
    /// The stable name: `command`, `policyFile`, `suggestion` or `sessionGrant`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Command => "command",
            Self::PolicyFile { .. } => "policyFile",
            Self::Suggestion => "suggestion",
            Self::SessionGrant => "sessionGrant",
        }
    }

    /// The source as its words for a person: `a command`, `policy file ab12cd34`.
    pub fn describe(&self) -> String {
        match self {
            Self::Command => "a command".to_owned(),
            Self::PolicyFile { sha256 } => {
                format!("policy file {}", sha256.get(..8).unwrap_or(sha256))
            }
            Self::Suggestion => "a grant suggestion".to_owned(),
            Self::SessionGrant => "a session grant".to_owned(),
        }
    }
}

/// Where a rule came from: its source, the person who set it and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleProvenance {
    /// How it was set.
    pub source: RuleSource,
    /// Who set it: the person a decision would name (`--as`, the OS user, the API
    /// token's person); `None` when unknown.
    pub set_by: Option<String>,
    /// When it was set.
    pub set_at: OffsetDateTime,
}

impl RuleProvenance {
    /// A provenance of `source`, set by `set_by` at `set_at`.
    pub fn new(source: RuleSource, set_by: Option<String>, set_at: OffsetDateTime) -> Self {
        Self {
            source,
            set_by,
            set_at,
        }
    }

    /// The fields a stored rule carries (`source`, `sha256` for a policy file,
    /// `setBy`, `setAt`), to merge into its JSON object.
    pub fn to_json(&self) -> Value {
        let mut shown = json!({
            "source": self.source.as_str(),
            "setAt": self.set_at.format(&Rfc3339).unwrap_or_default(),
        });
        if let RuleSource::PolicyFile { sha256 } = &self.source {
            shown["sha256"] = json!(sha256);
        }
        if let Some(by) = &self.set_by {
            shown["setBy"] = json!(by);
        }
        shown
    }

    /// The provenance kept in a stored rule's JSON ([`RuleProvenance::to_json`]), or
    /// `None` for a rule stored before provenance was recorded (no `source`). An
    /// unknown source or a bad time is an error naming it.
    pub fn from_json(rule: &Value) -> Result<Option<Self>, String> {
        let Some(source) = rule.get("source").and_then(Value::as_str) else {
            return Ok(None);
        };
        let source = match source {
            "command" => RuleSource::Command,
            "suggestion" => RuleSource::Suggestion,
            "sessionGrant" => RuleSource::SessionGrant,
            "policyFile" => RuleSource::PolicyFile {
                sha256: rule["sha256"].as_str().unwrap_or_default().to_owned(),
            },
            other => return Err(format!("unknown rule source {other:?}")),
        };
        let at = rule["setAt"].as_str().unwrap_or_default();
        let set_at = OffsetDateTime::parse(at, &Rfc3339)
            .map_err(|e| format!("a rule's setAt {at:?}: {e}"))?;
        let set_by = rule["setBy"].as_str().map(str::to_owned);
        Ok(Some(Self {
            source,
            set_by,
            set_at,
        }))
    }

    /// One short line: `policy file ab12cd34, set by alice 2026-12-01`.
    pub fn summary(&self) -> String {
        let day = self.set_at.date();
        match &self.set_by {
            Some(by) => format!("{}, set by {by} {day}", self.source.describe()),
            None => format!("{}, set {day}", self.source.describe()),
        }
    }
}

/// What `assent why` says of a rule stored before provenance was recorded.
pub const NO_PROVENANCE: &str = "set before provenance was recorded";

/// Where a rule came from, as a rule's JSON shows it: its provenance's fields, or
/// `{"source": null, "note": NO_PROVENANCE}` for an older rule.
pub fn provenance_json(provenance: Option<&RuleProvenance>) -> Value {
    provenance.map_or_else(
        || json!({"source": null, "note": NO_PROVENANCE}),
        RuleProvenance::to_json,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn a_provenance_reads_back_what_it_wrote() {
        for source in [
            RuleSource::Command,
            RuleSource::Suggestion,
            RuleSource::SessionGrant,
            RuleSource::PolicyFile {
                sha256: "ab12cd34ef".into(),
            },
        ] {
            let p = RuleProvenance::new(
                source,
                Some("alice".into()),
                datetime!(2026-12-01 10:00 UTC),
            );
            assert_eq!(RuleProvenance::from_json(&p.to_json()), Ok(Some(p)));
        }
        let anonymous =
            RuleProvenance::new(RuleSource::Command, None, datetime!(2026-12-01 10:00 UTC));
        assert_eq!(
            RuleProvenance::from_json(&anonymous.to_json()),
            Ok(Some(anonymous))
        );
    }

    #[test]
    fn an_old_rule_has_none_and_a_bad_one_is_an_error() {
        assert_eq!(
            RuleProvenance::from_json(&json!({"pattern": "x", "action": "allow"})),
            Ok(None)
        );
        assert!(
            RuleProvenance::from_json(&json!({"source": "magic", "setAt": "2026-12-01T00:00:00Z"}))
                .is_err()
        );
        assert!(
            RuleProvenance::from_json(&json!({"source": "command", "setAt": "yesterday"})).is_err()
        );
    }

    #[test]
    fn the_summary_is_one_short_line() {
        let p = RuleProvenance::new(
            RuleSource::PolicyFile {
                sha256: "ab12cd34ef56".into(),
            },
            Some("alice".into()),
            datetime!(2026-12-01 10:00 UTC),
        );
        assert_eq!(p.summary(), "policy file ab12cd34, set by alice 2026-12-01");
        assert_eq!(
            provenance_json(None),
            json!({"source": null, "note": "set before provenance was recorded"})
        );
    }
}
