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

/// The quorum the conditions of `policy` (in force now) set for a person's
/// confirmation of a call of `tool_name` (`call`, as it would run) that agent `agent`
/// queued in thread `thread`, judged now on what ran before ([`runs_for`], in the
/// confirmation's transaction, after the agent's lock): a rate or a running total that
/// came to hold since the proposal (or was set since) binds the confirmation as a
/// quorum set since does. `None`, with nothing read, when no rule sets a quorum under
/// a condition. Every confirmation (one item, confirm-all, a synced set, a hook's
/// call) asks here; `ran`: the calls run earlier in the same transaction (confirm-all),
/// whose audit records are not written yet, counted as the wake counts the calls of
/// one wake.
pub(crate) async fn quorum_now(
    conn: &mut Connection,
    policy: &AgentPolicy,
    set: &assent_domain::ChangeSet,
    tool_name: &str,
    call: CallContext<'_>,
    ran: &[PastRun],
    now: OffsetDateTime,
) -> Result<Option<u32>, ConfirmError> {
    let sets_a_quorum = policy
        .rules()
        .iter()
        .any(|rule| rule.condition().is_some_and(|c| c.approvals.is_some()));
    if !sets_a_quorum {
        return Ok(None);
    }
    let mut runs = runs_for(conn, policy, &set.agent_id, &set.thread_id, now).await?;
    runs.extend_from_slice(ran);
    Ok(policy
        .given(&runs, Some(call), now)
        .condition_approvals(tool_name, Some(call)))
}

/// What agent `agent` ran (every session) within the longest window the conditions of
/// its `shadows` look back from `now`: the history a confirmation's shadow verdict
/// judges a conditional shadow rule on, as its report does. None, with nothing read,
/// when no shadow rule has a condition.
pub(crate) async fn shadow_runs(
    conn: &mut Connection,
    shadows: &[assent_store::agents::ShadowRule],
    agent: &str,
    now: OffsetDateTime,
) -> Result<Vec<PastRun>, ConfirmError> {
    let window = shadows
        .iter()
        .filter_map(|shadow| shadow.rule.condition().map(assent_tools::Condition::window))
        .max();
    let Some(window) = window else {
        return Ok(Vec::new());
    };
    Ok(run_history::runs_since(conn, agent, None, now - window).await?)
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

    /// `rule` replayed over agent `agent`'s calls decided since `since`, a condition
    /// over the history judged per call on what the agent ran before it, as the wake
    /// would have judged it ([`assent_tools::backtest_given`]): what `assent agent
    /// backtest` prints, and `assent policy plan` shows for a rule it sets.
    pub async fn backtest(
        &self,
        agent: &str,
        rule: &assent_tools::ToolRule,
        since: OffsetDateTime,
    ) -> Result<assent_tools::Backtest, ConfirmError> {
        let calls = self.past_calls(Some(agent), since).await?;
        let runs = match rule.condition() {
            Some(condition) => self.agent_runs(agent, since - condition.window()).await?,
            None => Vec::new(),
        };
        Ok(assent_tools::backtest_given(&calls, &runs, agent, rule))
    }
}
