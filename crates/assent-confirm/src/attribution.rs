//! On whose question a decision is made: a delegated confirmation links each decision
//! to the sub-agent's question, in the decision's own transaction. The confirmation
//! service writes the link and the scheduler makes the attribution; this module is
//! what both share, so neither depends on the other for it.

use crate::ConfirmError;
use assent_domain::ChangeDecision;
use assent_store::Connection;
use assent_store::delegation::{self, Delegation};
use time::OffsetDateTime;
use uuid::Uuid;

/// On whose question a decision is made (a delegated confirmation).
#[derive(Debug, Clone)]
pub(crate) struct Attribution {
    pub(crate) agent_path: String,
    pub(crate) correlation_id: String,
    pub(crate) outcome: &'static str,
    pub(crate) grant_id: Option<Uuid>,
}

/// Links `decision` to the delegated question it answers (called inside the decision's
/// transaction by the confirmation service).
pub(crate) async fn record_attributed(
    conn: &mut Connection,
    attribution: &Attribution,
    decision: &ChangeDecision,
    now: OffsetDateTime,
) -> Result<(), ConfirmError> {
    let record = attribution.record(
        decision.change_set_id,
        decision.item_index,
        &decision.tool_name,
        now,
    );
    let record = Delegation {
        reason: decision.reason.clone(),
        decision_id: Some(decision.id),
        ..record
    };
    delegation::record(conn, &record, now).await?;
    Ok(())
}

impl Attribution {
    /// The delegation record of this question about item `index`, with no reason and
    /// no decision yet.
    pub(crate) fn record(
        &self,
        change_set_id: Uuid,
        index: usize,
        tool_name: &str,
        now: OffsetDateTime,
    ) -> Delegation {
        Delegation {
            correlation_id: self.correlation_id.clone(),
            agent_path: self.agent_path.clone(),
            change_set_id,
            item_index: index,
            tool_name: tool_name.to_owned(),
            outcome: self.outcome.to_owned(),
            reason: None,
            decision_id: None,
            grant_id: self.grant_id,
            created_at: now,
        }
    }
}
