//! Changing an agent's rules: one engine operation for every door (the CLI's `agent
//! allow|ask|deny`, `PUT /api/agents/{id}/rules/{tool}`, a grant suggestion applied),
//! so a rule change has the same effect whichever door it came through, and each is
//! one transaction (a crash never leaves half a rule: an ask without its quorum, a rule
//! beside the shadow rule it promoted).

use crate::{ConfirmError, Engine};
use assent_store::{agents, host_tools};
use assent_tools::{RuleAction, ToolRule};
use time::OffsetDateTime;

/// One change of an agent's rule for a tool name or `*` pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleChange {
    /// The tool name or pattern, as the agent's client names its tools.
    pub tool: String,
    /// What the rule says.
    pub action: RuleAction,
    /// When the rule stops applying; `None` for good.
    pub until: Option<OffsetDateTime>,
    /// With [`RuleAction::Ask`]: how many distinct people confirm each call (1 removes
    /// a quorum); `None` leaves the quorum as it is.
    pub approvals: Option<u32>,
    /// Who sets it (a token's id over the API, `--as` or the OS user on the CLI), for
    /// the consent chain's record of the change; `None` when unknown.
    pub by: Option<String>,
}

impl RuleChange {
    /// The rule `action` for `tool`, for good, leaving any quorum as it is.
    pub fn new(tool: impl Into<String>, action: RuleAction) -> Self {
        Self {
            tool: tool.into(),
            action,
            until: None,
            approvals: None,
            by: None,
        }
    }

    /// The rule it sets, or why it cannot be set.
    fn rule(&self) -> Result<ToolRule, ConfirmError> {
        let tool = self.tool.trim();
        let rule = ToolRule::new(tool, self.action)
            .map_err(|e| ConfirmError::InvalidRule(e.to_string()))?;
        match self.approvals {
            Some(_) if tool.contains('(') => {
                return Err(ConfirmError::InvalidRule(format!(
                    "a quorum is set for a tool name or * pattern, not for an argument pattern ({tool}): quorums are kept per tool"
                )));
            }
            Some(_) if self.action != RuleAction::Ask => {
                return Err(ConfirmError::InvalidRule(format!(
                    "approvals go with the action ask, not {} (how many people confirm each call of {tool})",
                    self.action.as_str()
                )));
            }
            Some(0) => {
                return Err(ConfirmError::InvalidRule(format!(
                    "approvals for {tool} must be at least 1"
                )));
            }
            _ => {}
        }
        Ok(match self.until {
            Some(until) => rule.until(until),
            None => rule,
        })
    }
}

impl Engine {
    /// Sets agent `agent`'s rule as `change` says, in one transaction: the rule
    /// (replacing the one it had for exactly that pattern), the quorum when given, the
    /// shadow rule for that pattern removed (a rule set for real promotes it), and, for
    /// `allow`, the tool's current definition accepted. Returns whether anything
    /// changed. An unknown agent is [`ConfirmError::UnknownAgent`]; a blank pattern or
    /// approvals without `ask` [`ConfirmError::InvalidRule`], and nothing is written.
    #[tracing::instrument(skip(self, change), fields(agent = %agent, tool = %change.tool, action = change.action.as_str()))]
    pub async fn change_rule(
        &self,
        agent: &str,
        change: &RuleChange,
        now: OffsetDateTime,
    ) -> Result<bool, ConfirmError> {
        let agent = agent.trim();
        let rule = change.rule()?;
        let tool = rule.pattern().to_owned();
        let mut tx = self.store.begin_write().await?;
        let Some(mut changed) = agents::set_rule(tx.connection(), agent, rule, now).await? else {
            return Err(ConfirmError::UnknownAgent(agent.to_owned()));
        };
        changed |= agents::remove_shadow_rule(tx.connection(), agent, &tool, now).await?;
        if let Some(needed) = change.approvals {
            changed |= agents::set_approvals_needed(tx.connection(), agent, &tool, needed, now)
                .await?
                .unwrap_or(false);
        }
        if change.action == RuleAction::Allow {
            // Allowing a tool again accepts its current definition: one that changed
            // after it was first seen is asked about until a person does.
            changed |= host_tools::accept(tx.connection(), agent, &tool).await? > 0;
        }
        if changed && let Some(by) = change.by.as_deref() {
            agents::record_changed_by(tx.connection(), agent, by, now).await?;
        }
        tx.commit().await?;
        tracing::info!(changed, "rule set");
        Ok(changed)
    }
}
