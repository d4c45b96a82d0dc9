//! The execution ledger's engine side: running the jobs of confirmed items whose
//! tool's effect lies outside the database ([`Effect::External`](crate::Effect)).
//!
//! An executor ([`Engine::run_due_jobs`]) works in three short transactions per job,
//! none of which takes the writer lock, and holds none while the tool runs:
//!
//! 1. claim: the job becomes `running` with a lease and one more attempt; the policy
//!    is checked again (a denial fails the job, audited) and the action is audited;
//!    commit.
//! 2. call the host's [`ExternalHandler`](crate::ExternalHandler) with the operation id
//!    as idempotency key.
//! 3. outcome: applied with its result (and the applied operation), or the error (due
//!    again after a backoff, or failed; [`ExternalError::InDoubt`], a call that went
//!    out and got no answer, is in doubt unless the tool is idempotent), with the
//!    result audit record; commit.
//!
//! A crash between 1 and 3 leaves a `running` job whose lease runs out: the next
//! executor marks it in doubt and asks the host to reconcile it. Nothing that may have
//! happened runs again silently.
//!
//! A job that fails for good or goes in doubt needs a person, so the transaction that
//! moves it there also queues the `item.failed` or `item.inDoubt` webhook
//! ([`webhooks::enqueue_job_event`]).

use crate::confirmation::Verdicts;
use crate::executor::{AuditedExecutor, CatchUnwind, ExecutionOutcome, ExecutionRequest};
use crate::host::{Effect, ExternalCall, ExternalError, Reconciliation};
use crate::{ConfirmError, ConflictKind, Engine};
use assent_changeset::reply;
use assent_domain::{Verdict, stored_result};
use assent_store::jobs::{self, Job, JobEvent, JobStatus};
use assent_store::{Connection, StoreAuditSink, agents, host_tools, operations, webhooks};
use assent_tools::{AgentPolicy, AuditKind, AuditRecord, AuditSink};
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// How an executor runs jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobSettings {
    /// How long a claim holds: a call still running after it is given up (in doubt),
    /// and a job whose executor died is found in doubt this long after its claim.
    pub lease: Duration,
    /// Attempts for retryable errors before the job fails (and again after a person
    /// retries it).
    pub attempt_limit: u32,
    /// The wait after the first retryable error; it doubles per attempt.
    pub backoff: Duration,
    /// The longest wait between attempts.
    pub max_backoff: Duration,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self {
            lease: Duration::seconds(60),
            attempt_limit: 5,
            backoff: Duration::seconds(2),
            max_backoff: Duration::minutes(5),
        }
    }
}

impl JobSettings {
    fn backoff_after(&self, attempt: u32) -> Duration {
        let factor = 1_i32 << attempt.saturating_sub(1).min(16);
        (self.backoff * factor).min(self.max_backoff)
    }
}

/// What one [`Engine::run_due_jobs`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobRun {
    /// Jobs claimed (each one attempt).
    pub claimed: usize,
    /// Jobs that took effect (by a call or a reconciliation).
    pub applied: usize,
    /// Jobs due again later after a retryable error.
    pub retried: usize,
    /// Jobs failed for good (permanent error, retries used up, policy denial).
    pub failed: usize,
    /// Jobs found in doubt (a lease ran out, or a call outlived its lease).
    pub in_doubt: usize,
    /// In-doubt jobs made due again (the host said it did not happen, or the tool is
    /// idempotent).
    pub rerun: usize,
    /// Jobs retracted because their target changed since the proposal.
    pub stale: usize,
}

impl std::ops::AddAssign for JobRun {
    fn add_assign(&mut self, other: Self) {
        self.claimed += other.claimed;
        self.applied += other.applied;
        self.retried += other.retried;
        self.failed += other.failed;
        self.in_doubt += other.in_doubt;
        self.rerun += other.rerun;
        self.stale += other.stale;
    }
}

/// How a person settles a job in doubt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// It happened: record it as applied.
    Happened,
    /// It did not (or running it again is fine): run it again.
    Rerun,
}

/// The text recorded when a person settles a job as having happened.
pub const HAPPENED_BY_PERSON: &str = "a person recorded that it happened";

/// Audits job `job`'s result (or error) `detail`, bounded by [`stored_result`].
async fn write_result(
    conn: &mut Connection,
    job: &Job,
    success: bool,
    detail: &str,
    now: OffsetDateTime,
) {
    let record = AuditRecord {
        success: Some(success),
        detail: Some(stored_result(detail).into_owned()),
        ..job.audit_record(AuditKind::Result, now)
    };
    if let Err(error) = StoreAuditSink.record(conn, &record).await {
        tracing::warn!(job = %job.id, %error, "audit write failed; the outcome stands");
    }
}

/// Makes job `job`, in doubt, due again: it is safe (or, for an idempotent tool,
/// harmless) to run it once more. False when it is no longer in doubt.
async fn due_again(
    conn: &mut Connection,
    job: &Job,
    now: OffsetDateTime,
) -> Result<bool, ConfirmError> {
    Ok(
        jobs::transition(conn, job.id, JobEvent::DueAgain, None, 0, now)
            .await?
            .is_some(),
    )
}

/// Records job `job`'s effect as applied with `result` (the call's, a reconciliation's
/// or a person's), with its applied operation and result audit record. All three keep
/// `result` as [`stored_result`] bounds it (jobs and audit records are synced): whoever
/// reads the result back from the job (a gateway whose call another process ran)
/// gets that bounded copy, not the whole text.
async fn record_applied(
    conn: &mut Connection,
    job: &Job,
    result: &str,
    now: OffsetDateTime,
) -> Result<bool, ConfirmError> {
    let result = stored_result(result);
    if !jobs::record_applied(conn, job.id, job.attempts, &result, now).await? {
        return Ok(false);
    }
    operations::record_applied(
        conn,
        &job.operation_id,
        &job.tool_name,
        &job.target,
        &result,
        now,
    )
    .await?;
    write_result(conn, job, true, &result, now).await;
    Ok(true)
}

/// Records that attempt `job.attempts` of `job` ended with no outcome (`why`): in doubt,
/// with its `item.inDoubt` webhook.
async fn record_doubt(
    conn: &mut Connection,
    job: &Job,
    why: &str,
    now: OffsetDateTime,
    run: &mut JobRun,
) -> Result<bool, ConfirmError> {
    tracing::warn!("{why}");
    let landed = jobs::record_in_doubt(conn, job.id, job.attempts, why, now).await?;
    if landed {
        webhooks::enqueue_job_event(conn, job, JobStatus::InDoubt, why, now).await?;
    }
    run.in_doubt += usize::from(landed);
    Ok(landed)
}

/// What a job's run is refused with when its approval no longer matches.
pub const APPROVAL_CHANGED: &str = "what was approved no longer matches what would run (its arguments, the target's fields or the tool's definition changed since it was approved); nothing ran";

/// Why job `job`'s approval no longer binds what would run now (its item's
/// `fingerprint` as stored, the tool's definition as its host recorded it), or `None`:
/// the digest the person's confirmation stored is recomputed
/// ([`assent_domain::approval_digest`]). A job without one (from before migration
/// 0015, or a copy from another device) is not checked.
async fn approval_mismatch(
    conn: &mut Connection,
    job: &Job,
    fingerprint: Option<&serde_json::Value>,
) -> Result<Option<&'static str>, ConfirmError> {
    let Some(approved) = &job.approval_digest else {
        return Ok(None);
    };
    let definition = host_tools::get(conn, &job.host, &job.tool_name)
        .await?
        .map(|tool| tool.hash);
    let now = assent_domain::approval_digest(
        &job.tool_name,
        &job.args,
        fingerprint,
        definition.as_deref(),
    );
    Ok((now != *approved).then_some(APPROVAL_CHANGED))
}

/// Fails claimed job `job` in its claim's transaction `tx` because its approval no
/// longer matches (`why`): audited as a refusal, `item.failed` queued; a person
/// decides again (retract it, or propose anew).
async fn refuse_unapproved(
    mut tx: assent_store::WriteTx,
    job: &Job,
    why: &str,
    now: OffsetDateTime,
    run: &mut JobRun,
) -> Result<(), ConfirmError> {
    tracing::warn!(job = %job.id, "{why}");
    let record = AuditRecord {
        success: Some(false),
        detail: Some(why.to_owned()),
        // No rule refused it: the person's approval no longer binds what would run.
        decided_by: Some(serde_json::json!({ "approval": why })),
        ..job.audit_record(AuditKind::PolicyDenied, now)
    };
    if let Err(error) = StoreAuditSink.record(tx.connection(), &record).await {
        tracing::warn!(job = %job.id, %error, "audit write failed; the refusal stands");
    }
    jobs::record_error(tx.connection(), job.id, job.attempts, why, None, now).await?;
    webhooks::enqueue_job_event(tx.connection(), job, JobStatus::Failed, why, now).await?;
    tx.commit().await?;
    run.failed += 1;
    Ok(())
}

/// Why a held job's confirmation did not become a decision when its window ended.
enum HoldEnd {
    /// The target changed since the proposal: the item stays pending, refreshed.
    Stale(crate::host::Stale),
    /// The item can no longer be confirmed (decided on another device meanwhile, its
    /// set expired): why.
    Undecidable(String),
}

enum Claim {
    Nothing,
    /// Claimed and settled at once (refused by policy, unknown tool).
    Settled,
    Ready(Box<Job>),
}

impl Engine {
    /// Uses `settings` for the jobs this engine runs.
    pub fn with_job_settings(mut self, settings: JobSettings) -> Self {
        self.jobs = settings;
        self
    }

    /// The settings of this engine's executor.
    pub fn job_settings(&self) -> JobSettings {
        self.jobs
    }

    /// Runs what is due for this engine's host: in-doubt jobs are reconciled, then due
    /// jobs are claimed and run one by one (see the module documentation). Returns the
    /// counts. Any process with the host's handlers may call it, as often as it likes;
    /// an idle call is one read.
    #[tracing::instrument(skip(self), fields(host = self.host.name()))]
    pub async fn run_due_jobs(&self, now: OffsetDateTime) -> Result<JobRun, ConfirmError> {
        let host = self.host.name();
        let mut run = JobRun::default();
        {
            let mut conn = self.store.read_connection().await?;
            if !jobs::any_due(&mut conn, host, now).await? {
                return Ok(run);
            }
        }
        let mut tx = self.store.begin_claim().await?;
        let expired = jobs::expire_leases(tx.connection(), host, now).await?;
        for job in &expired {
            let why = job.last_error.as_deref().unwrap_or_default();
            webhooks::enqueue_job_event(tx.connection(), job, JobStatus::InDoubt, why, now).await?;
        }
        tx.commit().await?;
        for job in &expired {
            tracing::warn!(job = %job.id, tool = %job.tool_name, attempt = job.attempts, "lease ran out with no outcome: in doubt");
        }
        run.in_doubt += expired.len();
        let in_doubt = {
            let mut conn = self.store.read_connection().await?;
            jobs::in_doubt_due(&mut conn, host, now).await?
        };
        for job in in_doubt {
            self.reconcile(job, now, &mut run).await?;
        }
        loop {
            match self.claim(now, &mut run, None).await? {
                Claim::Nothing => break,
                Claim::Settled => {}
                Claim::Ready(job) => self.execute_job(*job, now, &mut run).await?,
            }
        }
        Ok(run)
    }

    fn external_call<'a>(job: &'a Job) -> ExternalCall<'a> {
        ExternalCall {
            operation_id: &job.operation_id,
            tool_name: &job.tool_name,
            args: &job.args,
            target: &job.target,
            agent_id: &job.agent_id,
            attempt: job.attempts,
        }
    }

    #[tracing::instrument(skip_all, fields(job = %job.id, tool = %job.tool_name, operation_id = %job.operation_id))]
    async fn reconcile(
        &self,
        job: Job,
        now: OffsetDateTime,
        run: &mut JobRun,
    ) -> Result<(), ConfirmError> {
        let answer = match self.host.external(&job.tool_name) {
            Some(handler) => handler.reconcile(Self::external_call(&job)).await,
            None => Reconciliation::Unknown,
        };
        let mut tx = self.store.begin_claim().await?;
        match answer {
            Reconciliation::Happened(result) => {
                tracing::info!("reconciled: it happened");
                if record_applied(tx.connection(), &job, &result, now).await? {
                    run.applied += 1;
                }
            }
            Reconciliation::DidNotHappen => {
                tracing::info!("reconciled: it did not happen; due again");
                if due_again(tx.connection(), &job, now).await? {
                    run.rerun += 1;
                }
            }
            Reconciliation::Unknown if job.idempotent => {
                tracing::info!("idempotent tool: due again");
                if due_again(tx.connection(), &job, now).await? {
                    run.rerun += 1;
                }
            }
            Reconciliation::Unknown => {
                tracing::info!("the host cannot tell: stays in doubt for a person");
                jobs::postpone(tx.connection(), job.id, now + self.jobs.lease).await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Runs job `id` of this engine's host when it is due, and nothing else: what a
    /// caller that owns one confirmed item calls (a coding agent's hook handing out the
    /// permission it waited for). Claimed at most once whoever calls: `applied` is 1
    /// only for the call that ran it.
    #[tracing::instrument(skip(self), fields(host = self.host.name()))]
    pub async fn run_job(&self, id: Uuid, now: OffsetDateTime) -> Result<JobRun, ConfirmError> {
        let mut run = JobRun::default();
        if let Claim::Ready(job) = self.claim(now, &mut run, Some(id)).await? {
            self.execute_job(*job, now, &mut run).await?;
        }
        Ok(run)
    }

    /// Claims the next due job (or job `only`), checks the policy and audits the
    /// action, in one short transaction.
    #[tracing::instrument(skip_all)]
    async fn claim(
        &self,
        now: OffsetDateTime,
        run: &mut JobRun,
        only: Option<Uuid>,
    ) -> Result<Claim, ConfirmError> {
        let mut tx = self.store.begin_claim().await?;
        let (host, lease) = (self.host.name(), self.jobs.lease);
        let claimed = match only {
            None => jobs::claim_next(tx.connection(), host, now, lease).await?,
            Some(id) => jobs::claim_due(tx.connection(), host, id, now, lease).await?,
        };
        let Some(job) = claimed else {
            tx.commit().await?;
            return Ok(Claim::Nothing);
        };
        run.claimed += 1;
        tracing::debug!(job = %job.id, tool = %job.tool_name, attempt = job.attempts, "job claimed");
        // The first claim of a held job: its window has ended, uncancelled.
        if job.held && job.attempts == 1 {
            assent_store::Store::lock_target(tx.connection(), &job.target).await?;
            match self.end_hold(tx.connection(), &job, now).await? {
                None => {}
                Some(HoldEnd::Stale(stale)) => {
                    self.retract_stale(tx, &job, stale, now, run).await?;
                    return Ok(Claim::Settled);
                }
                Some(HoldEnd::Undecidable(why)) => {
                    tracing::warn!(job = %job.id, %why, "held confirmation cannot be decided: retracted");
                    jobs::transition(tx.connection(), job.id, JobEvent::EndedInHold, None, 0, now)
                        .await?;
                    jobs::record_note(tx.connection(), job.id, &why).await?;
                    write_result(tx.connection(), &job, false, &why, now).await;
                    tx.commit().await?;
                    return Ok(Claim::Settled);
                }
            }
        }
        let Some(spec) = self.registry.get(&job.tool_name) else {
            let error = format!("unknown tool {:?}", job.tool_name);
            jobs::record_error(tx.connection(), job.id, job.attempts, &error, None, now).await?;
            webhooks::enqueue_job_event(tx.connection(), &job, JobStatus::Failed, &error, now)
                .await?;
            write_result(tx.connection(), &job, false, &error, now).await;
            tx.commit().await?;
            run.failed += 1;
            return Ok(Claim::Settled);
        };
        if self.host.effect(&job.tool_name) == Effect::Transactional {
            self.apply_claimed(tx, &job, spec, now, run).await?;
            return Ok(Claim::Settled);
        }
        let policy = agents::policy_at(tx.connection(), &job.agent_id, now)
            .await?
            .unwrap_or_else(AgentPolicy::default);
        let request = ExecutionRequest {
            policy: &policy,
            spec,
            handler: None,
            invocation: job.invocation(now),
            confirmed_by_person: true,
            already_true: None,
            now,
            allowed_by: None,
        };
        let executor = AuditedExecutor::new(self.host.resolver(), &StoreAuditSink);
        if let Some((reason, decided_by)) = executor.policy_denial(tx.connection(), &request).await
        {
            tracing::info!(%reason, "policy denied the job");
            let record = AuditRecord {
                detail: Some(reason.clone()),
                success: Some(false),
                decided_by: Some(decided_by),
                ..AuditedExecutor::record(&request, AuditKind::PolicyDenied)
            };
            executor.write_audit(tx.connection(), record).await;
            let error = reply::denied_at_run(&reason);
            jobs::record_error(tx.connection(), job.id, job.attempts, &error, None, now).await?;
            webhooks::enqueue_job_event(tx.connection(), &job, JobStatus::Failed, &error, now)
                .await?;
            tx.commit().await?;
            run.failed += 1;
            return Ok(Claim::Settled);
        }
        if job.approval_digest.is_some() {
            let set =
                assent_store::change_sets::require(tx.connection(), job.change_set_id).await?;
            let fingerprint = set
                .items
                .get(job.item_index)
                .and_then(|item| item.fingerprint.as_ref());
            if let Some(why) = approval_mismatch(tx.connection(), &job, fingerprint).await? {
                refuse_unapproved(tx, &job, why, now, run).await?;
                return Ok(Claim::Settled);
            }
        }
        executor
            .write_audit(
                tx.connection(),
                AuditedExecutor::record(&request, AuditKind::Action),
            )
            .await;
        tx.commit().await?;
        Ok(Claim::Ready(Box::new(job)))
    }

    /// Runs claimed job `job` of a transactional tool (an item of this host confirmed
    /// in another process) in its claim's transaction `tx`, under its target's lock:
    /// the re-check against the target's state, the policy, the handler (in a
    /// savepoint), the applied operation, the audit records and the job's `applied`
    /// commit together, or none of them does. A crash or an error before the commit
    /// leaves the job approved for the next run: exactly once with no idempotency
    /// key. A denial or a failing handler fails the job (its writes rolled back, the
    /// failure audited, `item.failed` queued); a person may retry it.
    #[tracing::instrument(skip_all, fields(job = %job.id, tool = %job.tool_name, operation_id = %job.operation_id, attempt = job.attempts))]
    async fn apply_claimed(
        &self,
        mut tx: assent_store::WriteTx,
        job: &Job,
        spec: &assent_tools::ToolSpec,
        now: OffsetDateTime,
        run: &mut JobRun,
    ) -> Result<(), ConfirmError> {
        assent_store::Store::lock_target(tx.connection(), &job.target).await?;
        let policy = agents::policy_at(tx.connection(), &job.agent_id, now)
            .await?
            .unwrap_or_else(AgentPolicy::default);
        let set = assent_store::change_sets::require(tx.connection(), job.change_set_id).await?;
        let Some(item) = set.items.get(job.item_index) else {
            return Err(ConfirmError::ItemNotFound {
                change_set_id: set.id,
                index: job.item_index,
                len: set.items.len(),
            });
        };
        let recheck = self.recheck_job(tx.connection(), job, item).await;
        if let Some(stale) = recheck.stale {
            return self.retract_stale(tx, job, stale, now, run).await;
        }
        if let Some(why) =
            approval_mismatch(tx.connection(), job, item.fingerprint.as_ref()).await?
        {
            return refuse_unapproved(tx, job, why, now, run).await;
        }
        let already_true = recheck.already_true;
        let executor = AuditedExecutor::new(self.host.resolver(), &StoreAuditSink);
        let execution = executor
            .execute(
                &mut tx,
                ExecutionRequest {
                    policy: &policy,
                    spec,
                    handler: self.host.handler(&job.tool_name),
                    invocation: job.invocation(now),
                    confirmed_by_person: true,
                    already_true,
                    now,
                    allowed_by: None,
                },
            )
            .await?;
        let error = match execution {
            ExecutionOutcome::Applied { message, .. }
            | ExecutionOutcome::AlreadyApplied { message } => {
                jobs::record_applied(
                    tx.connection(),
                    job.id,
                    job.attempts,
                    &stored_result(&message),
                    now,
                )
                .await?;
                None
            }
            ExecutionOutcome::AlreadyTrue { detail } => {
                let message = reply::confirmed_unchanged(&detail);
                jobs::record_applied(tx.connection(), job.id, job.attempts, &message, now).await?;
                None
            }
            ExecutionOutcome::Denied { reason } => Some(reply::denied_at_run(&reason)),
            ExecutionOutcome::Failed { error } => Some(stored_result(&error).into_owned()),
            ExecutionOutcome::Queued { .. }
            | ExecutionOutcome::Scheduled { .. }
            | ExecutionOutcome::AwaitingApprovals { .. } => {
                Some("a transactional tool cannot be queued again".to_owned())
            }
        };
        match &error {
            None => run.applied += 1,
            Some(error) => {
                tracing::warn!(%error, "job failed");
                jobs::record_error(tx.connection(), job.id, job.attempts, error, None, now).await?;
                webhooks::enqueue_job_event(tx.connection(), job, JobStatus::Failed, error, now)
                    .await?;
                run.failed += 1;
            }
        }
        tx.commit().await?;
        if error.is_none() {
            tracing::debug!("job applied in its claim's transaction");
        }
        Ok(())
    }

    /// Job `job`'s call checked against its target as it is now, beside its item's
    /// proposal and fingerprint (`item`).
    async fn recheck_job(
        &self,
        conn: &mut Connection,
        job: &Job,
        item: &assent_domain::ChangeItem,
    ) -> crate::host::Recheck {
        crate::host::recheck(
            self.host.as_ref(),
            conn,
            &job.target,
            &job.tool_name,
            &job.args,
            &item.args,
            item.fingerprint.as_ref(),
        )
        .await
    }

    /// Turns held job `job`'s confirmation into a decision, in its first claim's
    /// transaction `conn` under its target's lock, now that its window has ended: the
    /// item must still be pending and its target as proposed. `Some`: why not (nothing
    /// written).
    async fn end_hold(
        &self,
        conn: &mut Connection,
        job: &Job,
        now: OffsetDateTime,
    ) -> Result<Option<HoldEnd>, ConfirmError> {
        let mut set = assent_store::change_sets::require(conn, job.change_set_id).await?;
        if let Err(why) = set.check_verdict(job.item_index, Verdict::Confirmed) {
            return Ok(Some(HoldEnd::Undecidable(format!(
                "not run at the end of its hold window: {why}"
            ))));
        }
        let item = &set.items[job.item_index];
        let recheck = self.recheck_job(conn, job, item).await;
        if let Some(stale) = recheck.stale {
            return Ok(Some(HoldEnd::Stale(stale)));
        }
        let verdicts = Verdicts {
            verdict: Verdict::Confirmed,
            reason: None,
            edited_args: (job.args != item.args).then(|| job.args.clone()),
            approval_digest: job.approval_digest.clone(),
            shadows: None,
            served_by: Some(job.host.clone()),
        };
        // The decision names who confirmed, as one made at once would: the person whose
        // confirmation was held (under a quorum, the one who met it; the job keeps all).
        let confirmations = match job.approved_by.last() {
            Some(by) => self.confirmations().by(by.clone()),
            None => self.confirmations(),
        };
        confirmations
            .record(conn, &mut set, &[job.item_index], verdicts, now)
            .await?;
        tracing::info!(job = %job.id, "hold window ended: the confirmation is decided");
        Ok(None)
    }

    /// Cancels held job `id` within its hold window ([`ExecutionOutcome::Scheduled`]):
    /// nothing runs, and its item ends rejected with [`jobs::CANCELLED_IN_HOLD`] as
    /// the reason, which the agent reads. A conflict once the window has ended (the
    /// job was claimed: it runs or ran) or the job was settled; of a cancel and the
    /// claim at the window's end exactly one wins.
    #[tracing::instrument(skip(self))]
    pub async fn cancel_job(&self, id: Uuid, now: OffsetDateTime) -> Result<Job, ConfirmError> {
        // The job's row first, then its target's lock: the order of the claim at the
        // window's end, so that the two never wait on each other in a circle.
        let mut tx = self.store.begin_claim().await?;
        let job = self
            .require_settleable_job(tx.connection(), id, false)
            .await?;
        if !jobs::cancel_held(tx.connection(), id, now).await? {
            return Err(ConfirmError::conflict(
                ConflictKind::HoldEnded,
                format!(
                    "job {id} is {}: only a confirmation still in its hold window can be cancelled",
                    job.status_name()
                ),
            ));
        }
        assent_store::Store::lock_target(tx.connection(), &job.target).await?;
        let confirmations = self.confirmations();
        let change_set_id = job.change_set_id;
        let mut set = assent_store::change_sets::require(tx.connection(), change_set_id).await?;
        set.check_verdict(job.item_index, Verdict::Rejected)?;
        let reason = Some(jobs::CANCELLED_IN_HOLD.to_owned());
        let verdicts = Verdicts {
            served_by: Some(job.host.clone()),
            ..Verdicts::plain(Verdict::Rejected, reason)
        };
        confirmations
            .record(tx.connection(), &mut set, &[job.item_index], verdicts, now)
            .await?;
        webhooks::enqueue_hold_event(tx.connection(), &job, true, now).await?;
        write_result(tx.connection(), &job, false, jobs::CANCELLED_IN_HOLD, now).await;
        let job = self.require_job(tx.connection(), id).await?;
        tx.commit().await?;
        tracing::info!("held confirmation cancelled within its window");
        Ok(job)
    }

    /// Retracts claimed job `job` in its claim's transaction `tx`: its target changed
    /// since the proposal (`stale`), so nothing runs. The item shows the target as it
    /// is now, the result audit record and `item.stale` say why, and a person decides
    /// again (a new proposal, or `assent undo` of whatever changed it).
    async fn retract_stale(
        &self,
        mut tx: assent_store::WriteTx,
        job: &Job,
        stale: crate::host::Stale,
        now: OffsetDateTime,
        run: &mut JobRun,
    ) -> Result<(), ConfirmError> {
        tracing::warn!(detail = %stale.detail, "target changed since proposed: the job is retracted");
        assent_store::change_sets::mark_stale(
            tx.connection(),
            job.change_set_id,
            job.item_index,
            &stale.detail,
            stale.before.as_ref(),
            stale.fingerprint.as_ref(),
        )
        .await?;
        jobs::transition(tx.connection(), job.id, JobEvent::EndedInHold, None, 0, now).await?;
        jobs::record_note(tx.connection(), job.id, &stale.detail).await?;
        write_result(tx.connection(), job, false, &stale.detail, now).await;
        webhooks::enqueue_stale_event(tx.connection(), job, &stale.detail, now).await?;
        tx.commit().await?;
        run.stale += 1;
        Ok(())
    }

    /// Calls the tool with no transaction open, then records the outcome.
    #[tracing::instrument(skip_all, fields(job = %job.id, tool = %job.tool_name, operation_id = %job.operation_id, attempt = job.attempts))]
    async fn execute_job(
        &self,
        job: Job,
        now: OffsetDateTime,
        run: &mut JobRun,
    ) -> Result<(), ConfirmError> {
        let lease = std::time::Duration::try_from(self.jobs.lease).unwrap_or_default();
        let outcome = match self.host.external(&job.tool_name) {
            None => Some(Err(ExternalError::Permanent(format!(
                "host {} has no external handler for {}",
                self.host.name(),
                job.tool_name
            )))),
            Some(handler) => {
                let call = CatchUnwind(handler.call(Self::external_call(&job)));
                match tokio::time::timeout(lease, call).await {
                    Ok(Ok(result)) => Some(result),
                    Ok(Err(panic)) => Some(Err(ExternalError::Permanent(panic))),
                    Err(_) => None,
                }
            }
        };
        self.record_outcome(&job, outcome, now, run).await
    }

    #[tracing::instrument(skip_all, fields(job = %job.id))]
    async fn record_outcome(
        &self,
        job: &Job,
        outcome: Option<Result<String, ExternalError>>,
        now: OffsetDateTime,
        run: &mut JobRun,
    ) -> Result<(), ConfirmError> {
        if let Some(Err(ExternalError::Stale {
            detail,
            before,
            fingerprint,
        })) = outcome
        {
            let tx = self.store.begin_claim().await?;
            let stale = crate::host::Stale {
                detail,
                before,
                fingerprint,
            };
            return self.retract_stale(tx, job, stale, now, run).await;
        }
        let mut tx = self.store.begin_claim().await?;
        let landed = match outcome {
            None => {
                let why = format!(
                    "the call did not finish within the lease ({} s): the effect may have happened",
                    self.jobs.lease.whole_seconds()
                );
                record_doubt(tx.connection(), job, &why, now, run).await?
            }
            Some(Err(ExternalError::InDoubt(why))) if !job.idempotent => {
                let why = assent_domain::stored_result(&why);
                record_doubt(tx.connection(), job, &why, now, run).await?
            }
            Some(Ok(result)) => {
                let landed = record_applied(tx.connection(), job, &result, now).await?;
                tracing::debug!(landed, "job applied");
                run.applied += usize::from(landed);
                landed
            }
            Some(Err(error)) => {
                // An idempotent tool's call left in doubt is simply retried.
                let retry_at = match &error {
                    ExternalError::Retryable(_) | ExternalError::InDoubt(_)
                        if job.attempts < job.attempt_limit =>
                    {
                        Some(now + self.jobs.backoff_after(job.attempts))
                    }
                    _ => None,
                };
                // A host's error may be as large as a result: stored bounded too.
                let text = assent_domain::stored_result(&error.to_string()).into_owned();
                tracing::warn!(error = %text, retry = retry_at.is_some(), "job call failed");
                let landed =
                    jobs::record_error(tx.connection(), job.id, job.attempts, &text, retry_at, now)
                        .await?;
                if landed {
                    write_result(tx.connection(), job, false, &text, now).await;
                    if retry_at.is_some() {
                        run.retried += 1;
                    } else {
                        webhooks::enqueue_job_event(
                            tx.connection(),
                            job,
                            JobStatus::Failed,
                            &text,
                            now,
                        )
                        .await?;
                        run.failed += 1;
                    }
                }
                landed
            }
        };
        if !landed {
            tracing::warn!(
                "the attempt no longer owns the job (settled meanwhile); outcome dropped"
            );
        }
        tx.commit().await?;
        Ok(())
    }

    async fn require_job(&self, conn: &mut Connection, id: Uuid) -> Result<Job, ConfirmError> {
        jobs::load(conn, id)
            .await?
            .ok_or(ConfirmError::JobNotFound(id))
    }

    /// Job `id`, which a person may settle here: this device's own (a copy synced from
    /// another device is settled where its executor runs), and, when `to_run`, of an
    /// item still confirmed (a sync merge may have put an earlier rejection in force).
    async fn require_settleable_job(
        &self,
        conn: &mut Connection,
        id: Uuid,
        to_run: bool,
    ) -> Result<Job, ConfirmError> {
        let job = self.require_job(conn, id).await?;
        if let Some(owner) = &job.owner_device {
            return Err(ConfirmError::conflict(
                ConflictKind::RunByOtherDevice,
                format!("job {id} is run by device {owner:?}; settle it there"),
            ));
        }
        if to_run && !jobs::item_confirmed(conn, &job).await? {
            return Err(ConfirmError::conflict(
                ConflictKind::NoLongerConfirmed,
                format!(
                    "job {id}'s item is no longer confirmed (an earlier decision won a sync conflict); it cannot run again"
                ),
            ));
        }
        Ok(job)
    }

    /// Settles job `id`, which must be in doubt: a person says it happened (recorded as
    /// applied) or that it should run again. A conflict when it is not in doubt.
    #[tracing::instrument(skip(self))]
    pub async fn resolve_job(
        &self,
        id: Uuid,
        resolution: Resolution,
        now: OffsetDateTime,
    ) -> Result<Job, ConfirmError> {
        let mut tx = self.store.begin_claim().await?;
        let job = self
            .require_settleable_job(tx.connection(), id, resolution == Resolution::Rerun)
            .await?;
        let settled = job.status == JobStatus::InDoubt
            && match resolution {
                Resolution::Happened => {
                    record_applied(tx.connection(), &job, HAPPENED_BY_PERSON, now).await?
                }
                Resolution::Rerun => {
                    jobs::transition(tx.connection(), id, JobEvent::DueAgain, None, 0, now)
                        .await?
                        .is_some()
                }
            };
        if !settled {
            return Err(ConfirmError::conflict(
                ConflictKind::NotInDoubt,
                format!("job {id} is {}, not in doubt", job.status.label()),
            ));
        }
        let job = self.require_job(tx.connection(), id).await?;
        tx.commit().await?;
        tracing::info!(?resolution, "job in doubt settled by a person");
        Ok(job)
    }

    /// Runs failed job `id` again, with a fresh retry budget. A conflict when it has
    /// not failed.
    #[tracing::instrument(skip(self))]
    pub async fn retry_job(&self, id: Uuid, now: OffsetDateTime) -> Result<Job, ConfirmError> {
        self.leave_failed(id, JobEvent::Retry, self.jobs.attempt_limit, now)
            .await
    }

    /// Withdraws failed job `id`: it never runs. A conflict when it has not failed.
    #[tracing::instrument(skip(self))]
    pub async fn retract_job(&self, id: Uuid, now: OffsetDateTime) -> Result<Job, ConfirmError> {
        self.leave_failed(id, JobEvent::GiveUp, 0, now).await
    }

    async fn leave_failed(
        &self,
        id: Uuid,
        event: JobEvent,
        extra_attempts: u32,
        now: OffsetDateTime,
    ) -> Result<Job, ConfirmError> {
        let mut tx = self.store.begin_claim().await?;
        let job = self
            .require_settleable_job(tx.connection(), id, event == JobEvent::Retry)
            .await?;
        let moved = jobs::transition(tx.connection(), id, event, None, extra_attempts, now).await?;
        if moved.is_none() {
            return Err(ConfirmError::conflict(
                ConflictKind::NotFailed,
                format!("job {id} is {}, not failed", job.status.label()),
            ));
        }
        let job = self.require_job(tx.connection(), id).await?;
        tx.commit().await?;
        tracing::info!(status = %job.status, "failed job settled by a person");
        Ok(job)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let settings = JobSettings {
            backoff: Duration::seconds(2),
            max_backoff: Duration::seconds(10),
            ..JobSettings::default()
        };
        assert_eq!(settings.backoff_after(1), Duration::seconds(2));
        assert_eq!(settings.backoff_after(2), Duration::seconds(4));
        assert_eq!(settings.backoff_after(3), Duration::seconds(8));
        assert_eq!(settings.backoff_after(4), Duration::seconds(10));
        assert_eq!(settings.backoff_after(40), Duration::seconds(10));
    }
}
