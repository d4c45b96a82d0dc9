//! Why a call was decided so (issue 57): `assent why SET IDX`, `assent why --audit ID`
//! and `GET /api/change-sets/{id}/items/{i}/why` read the same [`Why`]. The rule that
//! decided (its pattern, action, expiry and where it came from), the rules it
//! outranked and why, the quorum and hold in force, a session grant that let it run,
//! the shadow rules' verdicts, and, when no rule covered the call, that the tool's mode
//! decided. [`explain`] is pure; [`Engine::why_item`] and [`Engine::why_audit`] read
//! what it needs.
//!
//! The rules are the agent's as they stand, less those expired at the call's time and
//! those set after it (their `setAt`): a rule replaced since is no longer known here,
//! and an audit record says what let its call run as it was then (`recorded`).

use crate::{ConfirmError, Engine};
use assent_store::agents as stored;
use assent_store::audit::AuditRow;
use assent_tools::{
    AgentPolicy, AuditKind, CallContext, RuleAction, ToolMode, ToolRule, ToolSpec, provenance_json,
};
use serde::Serialize;
use serde_json::{Value, json};
use time::OffsetDateTime;
use uuid::Uuid;

/// Everything `why` says of one call. Its JSON fields (camelCase) are documented in
/// the policy chapter of the guide ("Why a call was decided so").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Why {
    /// The agent.
    pub agent_id: String,
    /// The tool called.
    pub tool_name: String,
    /// The call's arguments.
    pub args: Value,
    /// When the call was made: the rules read are those in force then.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// What the rules and the tool's mode say of the call: `allow`, `audit`, `ask` or
    /// `deny`.
    pub decision: &'static str,
    /// What decided: `{"rule": {pattern, action, decided, expiresAt?, part?, source,
    /// sha256?, setBy?, setAt? | note}}`, `{"rules": [...]}` for a chained command
    /// allowed part by part, or `{"mode": MODE, "note"}` when no rule covered it. For
    /// an audit record that says what decided (its `decidedBy`: a refusal, a call that
    /// waited), what it says, as it was then (also `{"category" | "arguments" |
    /// "approval" | "reply": REASON}`).
    pub decided_by: Value,
    /// The other rules that covered the call and lost: `{pattern, action, counted,
    /// why}`, in the order set.
    pub outranked: Vec<Value>,
    /// How many distinct people must confirm it (1 without a quorum).
    pub approvals_needed: u32,
    /// The hold window a confirmation waits out, in seconds, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hold_seconds: Option<u32>,
    /// The session grant that let it run unasked (`{id, sessionId, pattern, createdAt,
    /// revokedAt}`), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_grant: Option<Value>,
    /// The shadow rules covering the call and what each would have done: `{pattern,
    /// action, wouldHave, since}`.
    pub shadow: Vec<Value>,
    /// The shadow verdicts recorded beside the decisions about this item (`{rule,
    /// agreed}`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shadow_verdicts: Vec<Value>,
    /// For an audit record: its kind, detail and what it recorded let it run or refused
    /// it or made it wait (`allowedBy`, `refusedBy`, `decidedBy`), as written when it
    /// happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded: Option<Value>,
}

/// What [`explain`] reads of the agent's settings for one call.
#[derive(Debug, Clone, Copy)]
pub struct Settings<'a> {
    /// The agent's rules (every one: [`explain`] leaves out those not in force at the
    /// call's time).
    pub policy: &'a AgentPolicy,
    /// The tool as registered or recorded, when known (its mode decides when no rule
    /// does).
    pub spec: Option<&'a ToolSpec>,
    /// The quorum in force for it.
    pub approvals_needed: u32,
    /// The hold window in force for it, in seconds.
    pub hold_seconds: Option<u32>,
    /// The agent's shadow rules and when each was set.
    pub shadow_rules: &'a [(ToolRule, OffsetDateTime)],
}

/// One rule as `why` shows it: its pattern, action, expiry and where it came from
/// (`note: "set before provenance was recorded"` for an older rule).
pub fn rule_json(rule: &ToolRule) -> Value {
    let mut shown = json!({"pattern": rule.pattern(), "action": rule.action().as_str()});
    if let Some(at) = rule.expires_at() {
        shown["expiresAt"] = json!(assent_domain::format_time(at));
    }
    if let (Some(shown), Value::Object(fields)) =
        (shown.as_object_mut(), provenance_json(rule.provenance()))
    {
        shown.extend(fields);
    }
    shown
}

/// Why a call of `tool_name` with `args` on target `target_id` by `agent_id` at `at`
/// is decided as it is under `settings`: pure.
pub fn explain(
    agent_id: &str,
    tool_name: &str,
    args: &Value,
    target_id: &str,
    at: OffsetDateTime,
    settings: Settings<'_>,
) -> Why {
    // In force at the call's time, and set by then.
    let set_by_then = |rule: &&ToolRule| rule.provenance().is_none_or(|p| p.set_at <= at);
    let policy = settings
        .policy
        .rules()
        .iter()
        .filter(set_by_then)
        .cloned()
        .fold(
            AgentPolicy::new(settings.policy.allowed_categories()),
            AgentPolicy::with_rule,
        )
        .in_force(at);
    let call = Some(CallContext::new(args, target_id));
    let ruled = policy.ruled_call_audited(tool_name, call);
    let mode = settings.spec.map(|spec| spec.mode);
    let decision = match (ruled, mode) {
        // A tool under review is asked about whatever a rule allows; a deny still wins.
        (Some(action), Some(ToolMode::Review)) => action.max(RuleAction::Ask),
        (Some(action), _) => action,
        (None, Some(ToolMode::Immediate | ToolMode::Local)) => RuleAction::Allow,
        (None, _) => RuleAction::Ask,
    };
    let ruling = policy.ruling(tool_name, call);
    let deciding = ruling.as_ref().and_then(|ruling| {
        policy
            .rules()
            .iter()
            .find(|rule| rule.pattern() == ruling.pattern && rule.action() == ruling.action)
    });
    let decided_by = match (&ruling, deciding) {
        (Some(ruling), Some(rule)) => {
            let mut shown = rule_json(rule);
            shown["decided"] = json!(ruling.decided.as_str());
            if let Some(part) = &ruling.part {
                shown["part"] = json!({"index": part.index, "of": part.of, "text": part.text});
            }
            let mut by = json!({ "rule": shown });
            if mode == Some(ToolMode::Review) && ruling.decided.runs_unasked() {
                by["note"] = json!(
                    "the tool's definition changed since a person accepted it: asked whatever a rule allows"
                );
            }
            by
        }
        _ => match ruled {
            // A chained command allowed part by part: every rule named.
            Some(_) => {
                let rules: Vec<Value> = policy
                    .covering_parts(tool_name, call)
                    .into_iter()
                    .map(rule_json)
                    .collect();
                json!({ "rules": rules })
            }
            None => json!({
                "mode": mode.map_or("unknown", mode_name),
                "note": match mode {
                    Some(_) => "no rule covered the call: the tool's mode decided",
                    None => "no rule covered the call, and the tool is not known here: its door asks a person",
                },
            }),
        },
    };
    let outranked = policy
        .covering(tool_name, call)
        .into_iter()
        .filter(|(rule, _)| Some(*rule) != deciding)
        .map(|(rule, counted)| {
            let decided = ruled.unwrap_or(counted);
            let why = if counted < decided {
                format!(
                    "{} is stricter than {} (deny over ask over audit over allow)",
                    decided.as_str(),
                    counted.as_str()
                )
            } else {
                "an earlier rule with the same word decided (rules are read in the order set)"
                    .to_owned()
            };
            let mut shown = rule_json(rule);
            shown["counted"] = json!(counted.as_str());
            shown["why"] = json!(why);
            shown
        })
        .collect();
    let shadow = settings
        .shadow_rules
        .iter()
        .filter_map(|(rule, since)| {
            let alone = AgentPolicy::default().with_rule(rule.clone());
            let would = alone.ruled_call_audited(tool_name, call)?;
            Some(json!({
                "pattern": rule.pattern(),
                "action": rule.action().as_str(),
                "wouldHave": would.as_str(),
                "since": assent_domain::format_time(*since),
            }))
        })
        .collect();
    Why {
        agent_id: agent_id.to_owned(),
        tool_name: tool_name.to_owned(),
        args: args.clone(),
        at,
        decision: decision.as_str(),
        decided_by,
        outranked,
        approvals_needed: settings.approvals_needed.max(1),
        hold_seconds: settings.hold_seconds.filter(|s| *s > 0),
        session_grant: None,
        shadow,
        shadow_verdicts: Vec::new(),
        recorded: None,
    }
}

/// What decided a refusal a door recorded itself, from the words the wake answered it
/// with, when the wake wrote no record of its own (the policy's refusals it records,
/// with the rule): `{"arguments": SAID}` when the call's arguments or tool could not be
/// used (`Error: …`), `{"reply": SAID}` for a refusal of the wake's own (an identical
/// call already waiting, the change set's cap).
pub fn refusal_decided_by(said: &str) -> Value {
    if said.starts_with("Error:") {
        json!({ "arguments": said })
    } else {
        json!({ "reply": said })
    }
}

/// One audited call as the digest lists it: `{id, operationId, at, agentId, toolName,
/// targetKind, targetId, args, rule | rules, success}`.
pub fn digest_entry(row: &AuditRow) -> Value {
    let record = &row.record;
    let by = record.allowed_by.clone().unwrap_or(Value::Null);
    let mut entry = json!({
        "id": row.id,
        "operationId": record.operation_id.as_str(),
        "at": assent_domain::format_time(record.created_at),
        "agentId": record.agent_id,
        "toolName": record.tool_name,
        "targetKind": record.target_kind,
        "targetId": record.target_id,
        "args": record.args,
        "kind": record.kind.as_str(),
    });
    for key in ["rule", "rules"] {
        if let Some(value) = by.get(key) {
            entry[key] = value.clone();
        }
    }
    entry
}

fn mode_name(mode: ToolMode) -> &'static str {
    match mode {
        ToolMode::Immediate => "immediate",
        ToolMode::Deferred => "deferred",
        ToolMode::Local => "local",
        ToolMode::Review => "review",
    }
}

impl Why {
    /// The explanation as text for a person.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} of agent {} at {}: {}\n",
            self.tool_name,
            self.agent_id,
            assent_domain::format_time(self.at),
            self.decision
        );
        let describe = |rule: &Value| {
            let origin = match rule["source"].as_str() {
                Some(source) => {
                    let mut origin = match source {
                        "policyFile" => format!(
                            "policy file {}",
                            rule["sha256"]
                                .as_str()
                                .unwrap_or_default()
                                .get(..8)
                                .unwrap_or_default()
                        ),
                        "suggestion" => "a grant suggestion".to_owned(),
                        "sessionGrant" => "a session grant".to_owned(),
                        _ => "a command".to_owned(),
                    };
                    if let Some(by) = rule["setBy"].as_str() {
                        origin.push_str(&format!(", set by {by}"));
                    }
                    if let Some(at) = rule["setAt"].as_str() {
                        origin.push_str(&format!(" at {at}"));
                    }
                    origin
                }
                None => assent_tools::NO_PROVENANCE.to_owned(),
            };
            let expiry = rule["expiresAt"]
                .as_str()
                .map_or_else(String::new, |at| format!(", until {at}"));
            format!(
                "{} {}{expiry} ({origin})",
                rule["action"].as_str().unwrap_or_default(),
                rule["pattern"].as_str().unwrap_or_default()
            )
        };
        if let Some(rule) = self.decided_by.get("rule") {
            out.push_str(&format!("  decided by rule {}\n", describe(rule)));
            if let Some(part) = rule.get("part") {
                out.push_str(&format!(
                    "    found in part {} of {}: {}\n",
                    part["index"],
                    part["of"],
                    part["text"].as_str().unwrap_or_default()
                ));
            }
        } else if let Some(rules) = self.decided_by.get("rules").and_then(Value::as_array) {
            out.push_str("  allowed part by part, by the rules:\n");
            for rule in rules {
                out.push_str(&format!("    {}\n", describe(rule)));
            }
        } else if let Some(why) = ["category", "arguments", "approval", "reply"]
            .iter()
            .find_map(|key| self.decided_by.get(*key).map(|why| (*key, why)))
        {
            let (key, why) = why;
            out.push_str(&format!(
                "  decided by the {key} check: {}\n",
                why.as_str().unwrap_or_default()
            ));
        } else {
            let note = self.decided_by["note"]
                .as_str()
                .unwrap_or("no rule covered the call: the tool's mode decided");
            out.push_str(&format!(
                "  {note} (mode {})\n",
                self.decided_by["mode"].as_str().unwrap_or_default()
            ));
        }
        if let Some(note) = self
            .decided_by
            .get("note")
            .filter(|_| self.decided_by.get("mode").is_none())
        {
            out.push_str(&format!("  {}\n", note.as_str().unwrap_or_default()));
        }
        for rule in &self.outranked {
            out.push_str(&format!(
                "  outranked: {} — {}\n",
                describe(rule),
                rule["why"].as_str().unwrap_or_default()
            ));
        }
        out.push_str(&format!("  approvals needed: {}\n", self.approvals_needed));
        if let Some(hold) = self.hold_seconds {
            out.push_str(&format!("  hold: {hold} s after a confirmation\n"));
        }
        if let Some(grant) = &self.session_grant {
            out.push_str(&format!(
                "  ran under session grant {} (session {})\n",
                grant["id"].as_str().unwrap_or_default(),
                grant["sessionId"].as_str().unwrap_or_default()
            ));
        }
        if self.shadow.is_empty() {
            out.push_str("  shadow: no shadow rule covers it\n");
        }
        for shadow in &self.shadow {
            out.push_str(&format!(
                "  shadow: {} {} would have {}\n",
                shadow["action"].as_str().unwrap_or_default(),
                shadow["pattern"].as_str().unwrap_or_default(),
                shadow["wouldHave"].as_str().unwrap_or_default()
            ));
        }
        for verdict in &self.shadow_verdicts {
            out.push_str(&format!("  shadow verdict recorded: {verdict}\n"));
        }
        if let Some(recorded) = &self.recorded {
            out.push_str(&format!(
                "  recorded ({}): {}\n",
                recorded["kind"].as_str().unwrap_or_default(),
                recorded
            ));
        }
        out.trim_end().to_owned()
    }
}

impl Engine {
    /// [`Why`] item `index` of set `set` is decided as it is. An unknown set is
    /// [`ConfirmError::ChangeSetNotFound`], an index past its items
    /// [`ConfirmError::ItemNotFound`], as for `show`.
    pub async fn why_item(&self, set: Uuid, index: usize) -> Result<Why, ConfirmError> {
        let detail = self.set_detail(set).await?;
        let record = &detail.record;
        let Some(item) = record.set.items.get(index) else {
            return Err(ConfirmError::ItemNotFound {
                change_set_id: set,
                index,
                len: record.set.items.len(),
            });
        };
        let at = record.set.created_at;
        let mut why = self
            .why_call(
                &record.set.agent_id,
                &item.tool_name,
                &item.args,
                &record.set.target_id,
                at,
            )
            .await?;
        // The quorum it was proposed with travels with it.
        why.approvals_needed = why.approvals_needed.max(item.approvals_needed());
        why.shadow_verdicts = record
            .decisions
            .iter()
            .filter(|d| d.item_index == index)
            .flat_map(|d| {
                detail
                    .shadows
                    .iter()
                    .filter(move |(id, _)| *id == d.id)
                    .map(|(_, verdict)| verdict.clone())
            })
            .collect();
        Ok(why)
    }

    /// [`Why`] the call of audit records `operation_id` was decided as it was, with
    /// what the last of them recorded (`recorded`); `None` when no record has that
    /// operation id.
    pub async fn why_audit(&self, operation_id: &str) -> Result<Option<Why>, ConfirmError> {
        let rows = {
            let mut conn = self.store.read_connection().await?;
            assent_store::why::records_of_operation(&mut conn, operation_id.trim()).await?
        };
        // The record that says most: one naming what let it run, refused it or made it
        // wait, else the last.
        let Some(row) = rows
            .iter()
            .rev()
            .find(|r| {
                r.record.allowed_by.is_some()
                    || r.record.refused_by.is_some()
                    || r.record.decided_by.is_some()
            })
            .or_else(|| rows.last())
        else {
            return Ok(None);
        };
        let AuditRow { id, record, .. } = row;
        let mut why = self
            .why_call(
                &record.agent_id,
                &record.tool_name,
                &record.args,
                &record.target_id,
                record.created_at,
            )
            .await?;
        if let Some(grant) = record
            .allowed_by
            .as_ref()
            .and_then(|by| by.get("grant"))
            .and_then(Value::as_str)
        {
            why.session_grant = Some(self.grant_json(grant, record.allowed_by.as_ref()).await?);
        }
        // What the record says decided, as it was then: the rule may have been replaced
        // or removed since, and the record is what happened.
        if let Some(decided_by) = &record.decided_by {
            why.decided_by = decided_by.clone();
            if record.kind == AuditKind::PolicyDenied {
                why.decision = RuleAction::Deny.as_str();
            } else if let Some(decided) = decided_by["rule"]["decided"]
                .as_str()
                .and_then(|d| d.parse::<RuleAction>().ok())
            {
                why.decision = decided.as_str();
            }
        }
        let mut recorded = json!({
            "id": id,
            "operationId": record.operation_id.as_str(),
            "kind": record.kind.as_str(),
            "detail": record.detail,
            "allowedBy": record.allowed_by,
            "refusedBy": record.refused_by,
        });
        if let Some(decided_by) = &record.decided_by {
            recorded["decidedBy"] = decided_by.clone();
        }
        why.recorded = Some(recorded);
        Ok(Some(why))
    }

    /// The calls an `audit` rule let run unasked (their record's `allowedBy.audited`)
    /// at `since` or later, of agent `agent` when given, oldest first, at most `limit`
    /// (the newest): what `assent audit digest` and `GET /api/audit/digest` list.
    pub async fn audited_calls(
        &self,
        since: OffsetDateTime,
        agent: Option<&str>,
        limit: u32,
    ) -> Result<Vec<AuditRow>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(assent_store::why::audited_since(&mut conn, since, agent, limit).await?)
    }

    async fn grant_json(
        &self,
        id: &str,
        allowed_by: Option<&Value>,
    ) -> Result<Value, ConfirmError> {
        let session = allowed_by.and_then(|by| by.get("session")).cloned();
        let found = match Uuid::parse_str(id) {
            Ok(uuid) => self
                .admin()
                .grants(&crate::grants::GrantFilter {
                    agent_path: None,
                    tool_name: None,
                    include_revoked: true,
                })
                .await?
                .into_iter()
                .find(|g| g.id == uuid),
            Err(_) => None,
        };
        Ok(match found {
            Some(g) => json!({
                "id": id,
                "sessionId": g.session_id,
                "tool": g.tool_name,
                "pattern": g.call_pattern,
                "createdAt": assent_domain::format_time(g.created_at),
                "revokedAt": g.revoked_at.map(assent_domain::format_time),
                "source": "sessionGrant",
            }),
            None => json!({"id": id, "sessionId": session, "source": "sessionGrant"}),
        })
    }

    async fn why_call(
        &self,
        agent: &str,
        tool: &str,
        args: &Value,
        target_id: &str,
        at: OffsetDateTime,
    ) -> Result<Why, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let policy = stored::get(&mut conn, agent)
            .await?
            .map(|agent| agent.policy)
            .unwrap_or_default();
        let settings = stored::tool_settings_for(&mut conn, agent, tool).await?;
        let recorded = match self.registry.get(tool) {
            Some(_) => None,
            None => assent_store::host_tools::for_agent(&mut conn, agent)
                .await?
                .into_iter()
                .find(|t| t.tool_name == tool)
                // A gateway's catalog records no mode of the engine's (its door routes
                // by the upstream's hints): the tool's mode is then not known here.
                .and_then(|t| crate::recorded_spec(&t).ok()),
        };
        drop(conn);
        let spec = self.registry.get(tool).or(recorded.as_ref());
        let shadow_rules: Vec<(ToolRule, OffsetDateTime)> = settings
            .shadow_rules
            .iter()
            .map(|s| (s.rule.clone(), s.since))
            .collect();
        let hold = settings
            .hold
            .map(|h| u32::try_from(h.whole_seconds()).unwrap_or(u32::MAX));
        Ok(explain(
            agent,
            tool,
            args,
            target_id,
            at,
            Settings {
                policy: &policy,
                spec,
                approvals_needed: settings.approvals_needed,
                hold_seconds: hold,
                shadow_rules: &shadow_rules,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use assent_tools::{RuleProvenance, RuleSource};
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-12-01 10:00 UTC);

    fn rule(pattern: &str, action: RuleAction, by: Option<&str>) -> ToolRule {
        let rule = ToolRule::new(pattern, action).expect("a rule");
        match by {
            Some(by) => rule.with_provenance(RuleProvenance::new(
                RuleSource::Command,
                Some(by.to_owned()),
                T0 - time::Duration::days(1),
            )),
            None => rule,
        }
    }

    fn why(policy: &AgentPolicy, tool: &str, args: Value, mode: ToolMode) -> Why {
        let spec = ToolSpec::new(tool, "t", mode, json!({"type": "object"}));
        explain(
            "a",
            tool,
            &args,
            "/w",
            T0,
            Settings {
                policy,
                spec: Some(&spec),
                approvals_needed: 1,
                hold_seconds: None,
                shadow_rules: &[],
            },
        )
    }

    /// `(rules, tool, args, mode, decision, deciding pattern or mode)`.
    type Case = (
        Vec<ToolRule>,
        &'static str,
        Value,
        ToolMode,
        &'static str,
        &'static str,
    );

    /// Every rule kind and the mode, each naming what decided.
    #[test]
    fn every_rule_kind_names_what_decided() {
        let cases: Vec<Case> = vec![
            (
                vec![rule("send", RuleAction::Allow, Some("alice"))],
                "send",
                json!({}),
                ToolMode::Deferred,
                "allow",
                "send",
            ),
            (
                vec![rule("send", RuleAction::Audit, Some("alice"))],
                "send",
                json!({}),
                ToolMode::Deferred,
                "audit",
                "send",
            ),
            (
                vec![rule("send", RuleAction::Ask, Some("alice"))],
                "send",
                json!({}),
                ToolMode::Immediate,
                "ask",
                "send",
            ),
            (
                vec![rule("send", RuleAction::Deny, None)],
                "send",
                json!({}),
                ToolMode::Immediate,
                "deny",
                "send",
            ),
            (
                vec![],
                "send",
                json!({}),
                ToolMode::Deferred,
                "ask",
                "deferred",
            ),
            (
                vec![],
                "ping",
                json!({}),
                ToolMode::Immediate,
                "allow",
                "immediate",
            ),
            (
                vec![
                    rule("Bash(rm *)", RuleAction::Deny, Some("bob")),
                    rule("Bash", RuleAction::Allow, None),
                ],
                "Bash",
                json!({"command": "rm -rf /"}),
                ToolMode::Deferred,
                "deny",
                "Bash(rm *)",
            ),
        ];
        for (rules, tool, args, mode, decision, by) in cases {
            let policy = rules
                .into_iter()
                .fold(AgentPolicy::default(), AgentPolicy::with_rule);
            let why = why(&policy, tool, args, mode);
            assert_eq!(why.decision, decision, "{why:?}");
            let named = why.decided_by["rule"]["pattern"]
                .as_str()
                .or(why.decided_by["mode"].as_str());
            assert_eq!(named, Some(by), "{why:?}");
        }
    }

    #[test]
    fn the_rules_outranked_say_why_and_an_old_rule_says_it_has_no_provenance() {
        let policy = AgentPolicy::default()
            .with_rule(rule("Bash", RuleAction::Allow, None))
            .with_rule(rule("Bash(rm *)", RuleAction::Deny, Some("bob")));
        let why = why(
            &policy,
            "Bash",
            json!({"command": "rm x"}),
            ToolMode::Deferred,
        );
        assert_eq!(why.decided_by["rule"]["setBy"], "bob");
        assert_eq!(why.decided_by["rule"]["source"], "command");
        assert_eq!(why.outranked.len(), 1, "{why:?}");
        assert_eq!(why.outranked[0]["pattern"], "Bash");
        assert_eq!(why.outranked[0]["note"], assent_tools::NO_PROVENANCE);
        assert!(
            why.outranked[0]["why"]
                .as_str()
                .unwrap_or_default()
                .contains("deny is stricter than allow")
        );
        assert!(
            why.text().contains("set before provenance was recorded"),
            "{}",
            why.text()
        );
        assert!(why.text().contains("set by bob"), "{}", why.text());
    }

    #[test]
    fn a_rule_set_after_the_call_did_not_decide_it() {
        let later = ToolRule::new("send", RuleAction::Deny)
            .expect("a rule")
            .with_provenance(RuleProvenance::new(
                RuleSource::Command,
                None,
                T0 + time::Duration::hours(1),
            ));
        let policy = AgentPolicy::default().with_rule(later);
        let why = why(&policy, "send", json!({}), ToolMode::Deferred);
        assert_eq!(why.decision, "ask");
        assert_eq!(why.decided_by["mode"], "deferred");
    }

    #[test]
    fn a_shadow_rule_says_what_it_would_have_done() {
        let spec = ToolSpec::new("send", "t", ToolMode::Deferred, json!({"type": "object"}));
        let shadows = [(rule("send", RuleAction::Allow, None), T0)];
        let why = explain(
            "a",
            "send",
            &json!({}),
            "/w",
            T0,
            Settings {
                policy: &AgentPolicy::default(),
                spec: Some(&spec),
                approvals_needed: 2,
                hold_seconds: Some(30),
                shadow_rules: &shadows,
            },
        );
        assert_eq!(why.shadow.len(), 1);
        assert_eq!(why.shadow[0]["wouldHave"], "allow");
        assert_eq!((why.approvals_needed, why.hold_seconds), (2, Some(30)));
        assert!(
            why.text().contains("shadow: allow send would have allow"),
            "{}",
            why.text()
        );
    }
}
