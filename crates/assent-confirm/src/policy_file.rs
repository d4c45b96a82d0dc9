//! The policy file's shell (`assent policy export|plan|apply`, `GET /api/policy`,
//! `POST /api/policy/plan|apply`): the settings in force read as a
//! [`PolicyFile`], a file's plan with each rule's backtest
//! over the history (the one [`assent_tools::backtest`] `assent agent backtest` runs),
//! and a file applied as one transaction through the one rule change every door uses
//! ([`crate::agents`]'s `change_rule_on`), entered on the consent chain with the file's
//! SHA-256 and who applied it. The format and the plan are pure, in
//! [`assent_tools::PolicyFile`] and [`assent_tools::plan_policy`].

use crate::agents::{RuleChange, change_rule_on, names_a_sent_tool};
use crate::{Admin, ConfirmError, ConflictKind, Engine};
use assent_store::{
    Connection, agents as stored, host_tools, mcp_sessions, policy_file as chain_note, rejections,
};
use assent_tools::{
    AgentEntry, AgentPolicy, Backtest, POLICY_FILE_VERSION, PolicyChange, PolicyFile, PolicyPlan,
    RuleEntry, RuleSource, ShadowEntry, ToolsError,
};
use std::collections::BTreeSet;
use time::OffsetDateTime;

pub use assent_store::policy_file::sha256_hex;

/// A file's plan as `assent policy plan` shows it: each change, and for each rule set
/// its backtest over the agent's history.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PlannedPolicy {
    /// The file's SHA-256 (lowercase hex).
    pub sha256: String,
    /// What applying it would change, in order.
    pub plan: PolicyPlan,
    /// For each change, in the same order: the backtest of the rule it sets over the
    /// agent's decided calls since the plan's `since` (`None` for other changes).
    pub backtests: Vec<Option<Backtest>>,
}

/// A file that cannot be read, as the engine refuses it.
fn invalid(error: ToolsError) -> ConfirmError {
    match error {
        ToolsError::InvalidPolicyFile {
            line,
            column,
            message,
        } => ConfirmError::InvalidPolicyFile {
            line,
            column,
            message,
        },
        other => ConfirmError::InvalidPolicyFile {
            line: 0,
            column: 0,
            message: other.to_string(),
        },
    }
}

/// Agent `id`'s settings in force as the file writes them, read on `conn`; `None`
/// for an unknown agent. Every rule is kept, an expired one too (with its expiry), so
/// that applying an export changes nothing.
async fn entry_of(conn: &mut Connection, id: &str) -> Result<Option<AgentEntry>, ConfirmError> {
    let Some(agent) = stored::get(conn, id).await? else {
        return Ok(None);
    };
    let memory = rejections::memory(conn, id).await?.unwrap_or_default();
    Ok(Some(AgentEntry {
        id: agent.id.clone(),
        categories: agent
            .policy
            .allowed_categories()
            .map(str::to_owned)
            .collect(),
        remember_rejections: memory.window,
        idempotent: host_tools::idempotent_tools(conn, id).await?,
        run_after_disconnect: mcp_sessions::run_after_disconnect_tools(conn, id).await?,
        quorums: stored::quorums(conn, id).await?.into_iter().collect(),
        holds: stored::holds(conn, id).await?.into_iter().collect(),
        rules: agent
            .policy
            .rules()
            .iter()
            .map(|rule| RuleEntry {
                rule: rule.clone(),
                any_name: false,
            })
            .collect(),
        shadow_rules: stored::shadow_rules(conn, id)
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(|shadow| ShadowEntry { rule: shadow.rule })
            .collect(),
    }))
}

/// The settings in force of the agents `file` names, read on `conn`.
async fn current_of(
    conn: &mut Connection,
    file: &PolicyFile,
) -> Result<Vec<AgentEntry>, ConfirmError> {
    let mut current = Vec::new();
    for agent in &file.agents {
        if let Some(entry) = entry_of(conn, &agent.id).await? {
            current.push(entry);
        }
    }
    Ok(current)
}

impl Engine {
    /// Every agent's settings in force as a policy file, by id; with `agent`, that one
    /// agent's only (an unknown agent is [`ConfirmError::UnknownAgent`]).
    pub async fn policy_export(&self, agent: Option<&str>) -> Result<PolicyFile, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        let ids: Vec<String> = match agent.map(str::trim) {
            Some(id) => vec![id.to_owned()],
            None => stored::list(&mut conn)
                .await?
                .into_iter()
                .map(|a| a.id)
                .collect(),
        };
        let mut agents = Vec::with_capacity(ids.len());
        for id in &ids {
            match entry_of(&mut conn, id).await? {
                Some(entry) => agents.push(entry),
                None => return Err(ConfirmError::UnknownAgent(id.clone())),
            }
        }
        Ok(PolicyFile {
            version: POLICY_FILE_VERSION,
            agents,
        })
    }

    /// What applying the policy file `text` would change (with `prune`, the rules and
    /// settings it does not name removed too), each rule set backtested over its
    /// agent's calls decided since `since`, as `assent agent backtest` replays them. A
    /// file that cannot be read is [`ConfirmError::InvalidPolicyFile`].
    pub async fn policy_plan(
        &self,
        text: &str,
        prune: bool,
        since: OffsetDateTime,
    ) -> Result<PlannedPolicy, ConfirmError> {
        let file = PolicyFile::parse(text).map_err(invalid)?;
        let current = {
            let mut conn = self.store.read_connection().await?;
            current_of(&mut conn, &file).await?
        };
        let plan = assent_tools::plan_policy(&current, &file, prune);
        let agents: BTreeSet<&str> = plan
            .changes
            .iter()
            .filter(|c| matches!(c, PolicyChange::SetRule { .. }))
            .map(PolicyChange::agent)
            .collect();
        let mut calls = std::collections::BTreeMap::new();
        for agent in agents {
            // What the agent ran as far back as a condition of a rule set looks, read
            // once: each conditional rule is judged per call on it, as `agent
            // backtest` judges it.
            let window = plan
                .changes
                .iter()
                .filter_map(|change| match change {
                    PolicyChange::SetRule { agent: of, to, .. } if of == agent => {
                        to.condition().map(assent_tools::Condition::window)
                    }
                    _ => None,
                })
                .max();
            let runs = match window {
                Some(window) => self.agent_runs(agent, since - window).await?,
                None => Vec::new(),
            };
            calls.insert(agent, (self.past_calls(Some(agent), since).await?, runs));
        }
        let backtests = plan
            .changes
            .iter()
            .map(|change| match change {
                PolicyChange::SetRule { agent, to, .. } => calls
                    .get(agent.as_str())
                    .map(|(calls, runs)| assent_tools::backtest_given(calls, runs, agent, to)),
                _ => None,
            })
            .collect();
        Ok(PlannedPolicy {
            sha256: sha256_hex(text),
            plan: plan.clone(),
            backtests,
        })
    }
}

impl Admin<'_> {
    /// Applies the policy file `text` (with `prune`, removing what it does not name)
    /// in one transaction: the plan is made again on the transaction's own read of
    /// the settings in force, each change is written by the store function its
    /// command writes with (rules through the one rule change), and each agent changed
    /// gets its rules entry on the consent chain naming `by` and the file's SHA-256. A
    /// file that cannot be read is [`ConfirmError::InvalidPolicyFile`]; a rule naming
    /// no tool the agent's coding agent sends [`ConfirmError::InvalidRule`] (unless the
    /// rule says `any_name = true`); then nothing is written. With `shown`, the plan a
    /// person was shown and said yes to: when the settings changed since, so that the
    /// file would now make other changes, that is a
    /// [`ConflictKind::ChangedConcurrently`] conflict and nothing is written (a yes
    /// binds what was shown). Returns what changed, empty when the file says what is in
    /// force.
    #[tracing::instrument(skip(self, text, shown))]
    pub async fn apply_policy(
        &self,
        text: &str,
        prune: bool,
        shown: Option<&PolicyPlan>,
        by: &str,
        now: OffsetDateTime,
    ) -> Result<PolicyPlan, ConfirmError> {
        let file = PolicyFile::parse(text).map_err(invalid)?;
        let sha256 = sha256_hex(text);
        let mut tx = self.engine.store.begin_write().await?;
        let conn = tx.connection();
        let current = current_of(conn, &file).await?;
        let plan = assent_tools::plan_policy(&current, &file, prune);
        if let Some(shown) = shown
            && *shown != plan
        {
            return Err(ConfirmError::conflict(
                ConflictKind::ChangedConcurrently,
                "the agents' settings changed since the plan was shown: nothing applied; plan again",
            ));
        }
        let mut changed = BTreeSet::new();
        for change in &plan.changes {
            apply_change(conn, change, by, &sha256, now).await?;
            changed.insert(change.agent().to_owned());
        }
        for agent in &changed {
            chain_note::record_applied(conn, agent, by, &sha256, now).await?;
        }
        tx.commit().await?;
        tracing::info!(changes = plan.changes.len(), %sha256, "policy file applied");
        Ok(plan)
    }
}

/// Writes one change on the caller's transaction, as its command writes it.
async fn apply_change(
    conn: &mut Connection,
    change: &PolicyChange,
    by: &str,
    sha256: &str,
    now: OffsetDateTime,
) -> Result<(), ConfirmError> {
    let unknown = |agent: &str| ConfirmError::UnknownAgent(agent.to_owned());
    match change {
        PolicyChange::CreateAgent { agent, categories } => {
            stored::upsert(conn, agent, &AgentPolicy::new(categories.clone()), now).await?;
        }
        PolicyChange::Categories { agent, to, .. } => {
            // Every rule kept, expired ones too: this sets categories only.
            let old = stored::get(conn, agent)
                .await?
                .ok_or_else(|| unknown(agent))?;
            let policy = old
                .policy
                .rules()
                .iter()
                .cloned()
                .fold(AgentPolicy::new(to.clone()), AgentPolicy::with_rule);
            stored::upsert(conn, agent, &policy, now).await?;
        }
        PolicyChange::SetRule {
            agent,
            to,
            any_name,
            ..
        } => {
            let change = RuleChange {
                until: to.expires_at(),
                by: Some(by.to_owned()),
                any_name: *any_name,
                // A rule over the history goes through the same checks as
                // `--after`/`--only-after`/`--total` (its quorum is the condition's).
                condition: to.condition().map(|c| c.when.clone()),
                approvals: to.condition().and_then(|c| c.approvals),
                // `assent why` names the file by its hash, as the chain entry does.
                source: RuleSource::PolicyFile {
                    sha256: sha256.to_owned(),
                },
                ..RuleChange::new(to.pattern(), to.action())
            };
            let rule = change.rule()?;
            if !change.any_name {
                names_a_sent_tool(conn, agent, rule.pattern()).await?;
            }
            change_rule_on(conn, agent, &change, rule, now).await?;
        }
        PolicyChange::RemoveRule { agent, rule } => {
            stored::remove_rule(conn, agent, rule.pattern(), now)
                .await?
                .ok_or_else(|| unknown(agent))?;
        }
        PolicyChange::SetShadowRule { agent, to, .. } => {
            stored::set_shadow_rule(conn, agent, to.clone(), now)
                .await?
                .ok_or_else(|| unknown(agent))?;
        }
        PolicyChange::RemoveShadowRule { agent, rule } => {
            stored::remove_shadow_rule(conn, agent, rule.pattern(), now).await?;
        }
        PolicyChange::Quorum {
            agent, tool, to, ..
        } => {
            stored::set_approvals_needed(conn, agent, tool, *to, now)
                .await?
                .ok_or_else(|| unknown(agent))?;
        }
        PolicyChange::Hold {
            agent, tool, to, ..
        } => {
            stored::set_hold(conn, agent, tool, *to, now)
                .await?
                .ok_or_else(|| unknown(agent))?;
        }
        PolicyChange::Idempotent { agent, tool, on } => {
            host_tools::set_idempotent(conn, agent, tool, *on, now).await?;
        }
        PolicyChange::RunAfterDisconnect { agent, tool, on } => {
            mcp_sessions::set_run_after_disconnect(conn, agent, tool, *on, now).await?;
        }
        PolicyChange::RememberRejections { agent, to, .. } => {
            let mut memory = rejections::memory(conn, agent)
                .await?
                .ok_or_else(|| unknown(agent))?;
            memory.window = Some(*to);
            rejections::set_memory(conn, agent, &memory, Some(by), now).await?;
        }
        // A change this build's plan does not make.
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SimpleHost;
    use assent_store::Store;
    use assent_tools::ToolRegistry;
    use std::sync::Arc;
    use time::macros::datetime;

    const T0: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);

    async fn engine() -> Engine {
        let store = Store::open("sqlite::memory:").await.expect("a store");
        Engine::open(
            store,
            Arc::new(ToolRegistry::new()),
            Arc::new(SimpleHost::new("ops")),
        )
        .await
        .expect("an engine")
    }

    const FILE: &str = "version = 1\n\n[[agents]]\nid = \"a\"\ncategories = [\"work\"]\n\n[agents.holds]\nEdit = 30\n\n[[agents.rules]]\ntool = \"Edit\"\naction = \"allow\"\n\n[[agents.rules]]\ntool = \"Bash(rm *)\"\naction = \"deny\"\n";

    #[tokio::test]
    async fn a_rule_refused_late_in_the_file_leaves_nothing_written_before_it() {
        let engine = engine().await;
        engine
            .set_categories("a", &["work".to_owned()], T0)
            .await
            .expect("created");
        {
            // A Gemini CLI agent: its shell is run_shell_command, so Bash(rm *) can
            // match nothing, and the rule is refused after Edit's was written.
            let mut tx = engine.store.begin_write().await.expect("tx");
            stored::record_kind(
                tx.connection(),
                "a",
                "gemini",
                &["run_shell_command", "Edit"],
                T0,
            )
            .await
            .expect("kind");
            tx.commit().await.expect("commit");
        }
        let before = engine.policy_export(None).await.expect("export");
        let refused = engine
            .admin()
            .apply_policy(FILE, false, None, "alice", T0)
            .await
            .expect_err("refused");
        assert!(
            matches!(&refused, ConfirmError::InvalidRule(why) if why.contains("Bash(rm *) names no tool")),
            "{refused}"
        );
        assert_eq!(engine.policy_export(None).await.expect("export"), before);
        // With any_name the same file applies whole.
        let kept = FILE.replace(
            "tool = \"Bash(rm *)\"\naction = \"deny\"",
            "tool = \"Bash(rm *)\"\naction = \"deny\"\nany_name = true",
        );
        let applied = engine
            .admin()
            .apply_policy(&kept, false, None, "alice", T0)
            .await
            .expect("applied");
        assert_eq!(applied.changes.len(), 3, "{applied:?}");
    }

    #[tokio::test]
    async fn a_yes_binds_the_plan_it_was_given_to() {
        let engine = engine().await;
        let shown = engine
            .policy_plan(FILE, false, T0)
            .await
            .expect("planned")
            .plan;
        // Meanwhile someone creates the agent with another category.
        engine
            .set_categories("a", &["ops".to_owned()], T0)
            .await
            .expect("created");
        let refused = engine
            .admin()
            .apply_policy(FILE, false, Some(&shown), "alice", T0)
            .await
            .expect_err("refused");
        assert_eq!(
            refused.conflict_kind(),
            Some(ConflictKind::ChangedConcurrently)
        );
        let export = engine.policy_export(Some("a")).await.expect("export");
        assert!(export.agents[0].rules.is_empty(), "{export:?}");
        let shown = engine
            .policy_plan(FILE, false, T0)
            .await
            .expect("planned")
            .plan;
        engine
            .admin()
            .apply_policy(FILE, false, Some(&shown), "alice", T0)
            .await
            .expect("applied");
        assert!(
            engine
                .policy_plan(FILE, false, T0)
                .await
                .expect("planned")
                .plan
                .is_empty()
        );
    }
}
