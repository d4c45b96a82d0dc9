//! The rules over the session's history at the decision point (issue 57): what the
//! agent (for a coding agent's hook, its session) ran within the longest window its
//! rules' conditions look back, read in the decision's transaction after the lock that
//! orders two decisions of the agent ([`assent_store::run_history::lock_agent`]). The
//! judging itself is pure ([`assent_tools::AgentPolicy::given`]).

use crate::ConfirmError;
use assent_store::{Connection, run_history};
use assent_tools::{AgentPolicy, CallContext, PastRun};
use time::OffsetDateTime;

/// The runs the conditions of `policy` read for a wake of `agent` in thread `thread`
/// at `now`: none (and no lock) when no rule has a condition. A coding agent's session
/// (`hook-session:ID`) reads its own calls only (`hook:ID:…` run keys).
pub(crate) async fn runs_for(
    conn: &mut Connection,
    policy: &AgentPolicy,
    agent: &str,
    thread: &str,
    now: OffsetDateTime,
) -> Result<Vec<PastRun>, ConfirmError> {
    let Some(window) = policy.history_window() else {
        return Ok(Vec::new());
    };
    run_history::lock_agent(conn, agent).await?;
    let prefix = thread
        .strip_prefix(crate::session::SESSION_THREAD_PREFIX)
        .filter(|session| !session.is_empty())
        .map(|session| format!("hook:{session}:"));
    Ok(run_history::runs_since(conn, agent, prefix.as_deref(), now - window).await?)
}

/// `policy` for one call given `runs` ([`AgentPolicy::given`]), or as it is when no
/// rule has a condition.
pub(crate) fn policy_for(
    policy: &AgentPolicy,
    runs: &[PastRun],
    call: CallContext<'_>,
    now: OffsetDateTime,
) -> AgentPolicy {
    if policy.has_conditions() {
        policy.given(runs, Some(call), now)
    } else {
        policy.clone()
    }
}

/// The run of a call admitted now, for the conditions of the calls after it in the
/// same wake.
pub(crate) fn ran_now(tool_name: &str, call: CallContext<'_>, now: OffsetDateTime) -> PastRun {
    PastRun {
        tool_name: tool_name.to_owned(),
        args: call.args.clone(),
        target_id: call.target_id.to_owned(),
        at: now,
        succeeded: None,
        here: true,
    }
}

impl crate::Engine {
    /// What agent `agent` ran after `since` (every session), oldest first: the history a
    /// shadow report judges a conditional shadow rule on
    /// ([`assent_tools::calls_under_condition`]).
    pub async fn agent_runs(
        &self,
        agent: &str,
        since: OffsetDateTime,
    ) -> Result<Vec<PastRun>, ConfirmError> {
        let mut conn = self.store.read_connection().await?;
        Ok(run_history::runs_since(&mut conn, agent, None, since).await?)
    }
}
