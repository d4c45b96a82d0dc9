//! The tool side of Assent: what tools exist, which arguments they accept, and whether
//! an agent may use them.
//!
//! - [`ToolSpec`] / [`ToolRegistry`]: the catalog, JSON Schema validation of arguments
//!   (with the `jsonschema` crate), human summaries, and export as OpenAI or Anthropic
//!   tool definitions.
//! - [`AgentPolicy`]: fail-closed execution policy (ADR 0004): a category allowlist per
//!   agent plus `allow | ask | deny` rules by tool name pattern, each until an expiry
//!   or for good.
//! - [`suggest_grants`], [`backtest`]: what a person's past decisions say about a rule
//!   (issue 29), computed from a list of [`PastCall`]s the store loads.
//! - [`PolicyFile`], [`plan_policy`]: every agent's settings as one reviewable TOML
//!   file, and the changes that would make the settings in force say what it says.
//! - [`ToolHandler`], [`AuditSink`], [`CategoryResolver`]: the traits the audited
//!   executor (in the store) drives. They are generic over the host's context (for
//!   example a database transaction), so this crate stays free of I/O and of any async
//!   runtime.
//! - [`TargetState`], [`Redundancy`]: a target's state as its host loads it, and the
//!   host's verdict on whether a proposal would change it.
//!
//! What an agent allowed the category `billing` may do with a tool that waits for a person:
//!
//! ```
//! use assent_tools::{AgentPolicy, PolicyDecision, RuleAction, TargetCategory, ToolMode};
//! use assent_tools::{ToolRule, ToolSpec};
//! use serde_json::json;
//!
//! let schema = json!({"type": "object"});
//! let refund = ToolSpec::new("refund_invoice", "Refund an invoice.", ToolMode::Deferred, schema);
//! let policy = AgentPolicy::new(["billing"]);
//! let billing = TargetCategory::Known("billing".to_owned());
//! assert_eq!(policy.decide(&refund, &billing), PolicyDecision::Ask);
//! // Fail-closed: a target without a category is refused.
//! assert!(policy.decide(&refund, &TargetCategory::Missing).is_deny());
//! let policy = policy.with_rule(ToolRule::new("refund_*", RuleAction::Deny)?);
//! assert!(policy.decide(&refund, &billing).is_deny());
//! # Ok::<(), assent_tools::ToolsError>(())
//! ```

mod audit;
mod condition;
mod error;
mod executor;
mod history;
mod policy;
mod policy_file;
mod provenance;
mod registry;
mod shell;
mod state;

pub use audit::{AuditKind, AuditRecord};
pub use condition::{
    Condition, MAX_WINDOW_SECONDS, PastRun, When, applies_at, backtest_given,
    calls_under_condition, parse_rate, window_seconds,
};
pub use error::{ArgProblem, HandlerError, ToolsError};
pub use executor::{
    AuditSink, BoxFuture, CategoryResolver, ExecutionTarget, ToolHandler, ToolInvocation,
    ToolOutcome,
};
pub use history::{
    Backtest, CallAgainstRule, Disagreement, GrantEvidence, GrantSuggestion, InForce, LetThrough,
    PastCall, PastOutcome, ShadowReport, SuggestOptions, ToolDefinition, backtest, shadow_agrees,
    shadow_report, suggest_grants, suggestion_id,
};
pub use policy::{
    AgentPolicy, CallContext, Coverage, Denial, PartRef, PathFacts, PolicyDecision, Requirements,
    RuleAction, Ruling, TargetCategory, ToolRule, ToolSettingEntry, ToolSettingsTable,
    allow_rules_cover, call_covers, name_matches,
};
pub use policy_file::{
    AgentEntry, POLICY_FILE_VERSION, PolicyChange, PolicyFile, PolicyPlan, RuleEntry, ShadowEntry,
    plan as plan_policy,
};
pub use provenance::{NO_PROVENANCE, RuleProvenance, RuleSource, provenance_json};
pub use registry::{
    BatchSpec, CompensationFn, SummaryContext, SummaryFn, TargetFrom, ToolMode, ToolRegistry,
    ToolSpec, fallback_summary, titled_summary,
};
pub use shell::{ShellPart, split_command};
pub use state::{Redundancy, Stateless, TargetState};
