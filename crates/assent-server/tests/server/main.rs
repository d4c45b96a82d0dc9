//! The review server's integration tests, in one binary: the JSON API against a real
//! server on a random port over a real SQLite file (`api`), sub-agents asking the
//! server's session over the confirmation bus (`delegated`), the review page in
//! headless Chromium through WebDriver (`browser`), device sync over HTTP (`sync`), long
//! arguments whole in every item view and `taskId` in the audit trail (`review`),
//! webhook subscriptions with a real receiver (`webhooks`), and the agent's long poll
//! for a set's outcome (`outcome`); a set named by the start of its id
//! (`set_prefixes`); Slack's buttons against a fake of Slack's Web API (`slack`).

mod agent_rules;
mod api;
mod browser;
mod client_calls;
mod delegated;
mod dialects;
mod grants;
mod hosts;
mod jobs;
mod limits;
mod outcome;
mod phone;
mod policy_file;
mod review;
mod roles;
mod set_prefixes;
mod slack;
mod support;
mod sync;
mod target_from;
mod telegram;
mod undo;
mod webhooks;
