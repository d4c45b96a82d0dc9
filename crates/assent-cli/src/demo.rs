//! `assent demo`: the whole story on a fresh temporary database, told for a person —
//! an agent and a task, a wake with immediate, deferred, batch, redundant and local
//! calls, the change set, a confirmation, an edit, a rejection, the audit trail, the
//! outbox, and the history the agent's next wake sees.
//!
//! The clock is fixed (`--now` moves it), so the story reads the same every time
//! except for the generated ids.

use crate::context::engine;
use crate::{CliError, render};
use assent_changeset::{ToolArguments, ToolCall, parse_tool_calls};
use assent_confirm::history::{AuditFilter, VerifyOptions};
use assent_confirm::{ConfirmError, Engine, WakeOutcome, WakeRequest};
use assent_domain::{ChangeSet, OffsetDateTime, Uuid};
use assent_journal::tool;
use assent_journal_host::{NewTask, create_task, load_task, task_target};
use assent_store::Store;
use serde_json::{Value, json};
use time::Duration;
use time::macros::datetime;

/// When the story starts unless `--now` says otherwise.
pub(crate) const DEMO_START: OffsetDateTime = datetime!(2026-03-02 09:00 UTC);
const AGENT: &str = "planner";
const WIDTH: usize = 78;

/// The text being told, section by section.
#[derive(Default)]
pub(crate) struct Story {
    pub(crate) text: String,
    sections: usize,
}

impl Story {
    pub(crate) fn heading(&mut self, title: &str) {
        self.sections += 1;
        let label = format!("── {}. {title} ", self.sections);
        let rule = "─".repeat(WIDTH.saturating_sub(label.chars().count()));
        self.text.push_str(&format!("\n{label}{rule}\n\n"));
    }

    pub(crate) fn say(&mut self, line: impl AsRef<str>) {
        self.text.push_str(line.as_ref());
        self.text.push('\n');
    }

    pub(crate) fn block(&mut self, text: impl AsRef<str>) {
        self.say(render::indent(text.as_ref().trim_end(), "  "));
    }

    pub(crate) fn gap(&mut self) {
        self.text.push('\n');
    }
}

/// One OpenAI-style tool call.
pub(crate) fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})
}

fn calls_listing(calls: &[ToolCall]) -> String {
    let width = calls.iter().map(|c| c.name.len()).max().unwrap_or_default();
    calls
        .iter()
        .map(|c| {
            let args = match &c.arguments {
                ToolArguments::Text(text) => text.clone(),
                ToolArguments::Value(v) => v.to_string(),
                other => format!("{other:?}"),
            };
            format!("{}  {:<width$}  {args}", c.id, c.name)
        })
        .collect::<Vec<_>>()
        .join("\n")
}

async fn wake(
    engine: &Engine,
    task_id: &str,
    run_key: &str,
    document: &Value,
    now: OffsetDateTime,
) -> Result<(WakeRequest, WakeOutcome), CliError> {
    let calls = parse_tool_calls(document).map_err(|e| CliError::failed(e.to_string()))?;
    let mut request = WakeRequest::new(AGENT, task_target(task_id), run_key, calls);
    request.thread_id = format!("thread-{run_key}");
    let outcome = engine.wakes().wake(request.clone(), now).await?;
    Ok((request, outcome))
}

/// The index of the first item of `set` proposing `tool_name`.
fn index_of(set: &ChangeSet, tool_name: &str) -> Result<usize, CliError> {
    set.items
        .iter()
        .position(|i| i.tool_name == tool_name)
        .ok_or_else(|| CliError::failed(format!("the demo expected a {tool_name} proposal")))
}

/// Runs the story; returns it as text.
pub async fn run(start: Option<OffsetDateTime>) -> Result<String, CliError> {
    on_fresh_store(async |store| tell(store, start.unwrap_or(DEMO_START)).await).await
}

/// Tells a story on a fresh database in a temporary directory, closed afterwards.
pub(crate) async fn on_fresh_store(
    tell: impl AsyncFnOnce(&Store) -> Result<String, CliError>,
) -> Result<String, CliError> {
    let dir = tempfile::tempdir()
        .map_err(|e| CliError::failed(format!("cannot create a temporary directory: {e}")))?;
    let url = format!("sqlite://{}", dir.path().join("demo.db").display());
    let store = Store::open(&url).await?;
    // Composing the journal's engine creates its tables before the story adds tasks.
    engine(store.clone()).await?;
    let story = tell(&store).await;
    store.close().await;
    story
}

async fn tell(store: &Store, start: OffsetDateTime) -> Result<String, CliError> {
    let engine = engine(store.clone()).await?;
    // The person deciding, named as `--as` names them: the proof at the end traces
    // every effect to a named person.
    let decisions = engine.confirmations().by("alice");
    let mut now = start;
    let mut s = Story::default();
    s.say("Assent demo: an LLM agent proposes changes to a task, and a person decides.");
    s.say(format!(
        "A fresh database in a temporary directory; the clock starts at {}.",
        render::time(now)
    ));

    s.heading("An agent and a task");
    engine
        .set_categories(AGENT, &["work".to_owned()], now)
        .await?;
    let mut tx = store.begin_write().await?;
    let new = NewTask {
        title: "Prepare the Q1 board report".to_owned(),
        category: Some("work".to_owned()),
        priority: Some("P2".to_owned()),
        estimate_minutes: Some(60),
        due_date: Some(time::macros::date!(2026 - 03 - 13)),
        labels: vec!["finance".to_owned()],
        checklist: vec![
            "Collect the numbers".to_owned(),
            "Draft the summary".to_owned(),
        ],
        ..NewTask::default()
    };
    let task_id = Uuid::new_v4().to_string();
    let task = create_task(tx.connection(), &task_id, &new, store.device_id(), now).await?;
    tx.commit().await?;
    s.say(render::agent(AGENT, &["work"], true));
    s.say("(its policy: it may only change tasks in the categories it was given)");
    s.gap();
    s.block(render::task(&task));

    s.heading("The agent wakes");
    now += Duration::minutes(1);
    let document = json!([
        call(
            "call_1",
            tool::SET_TASK_LANGUAGE,
            json!({"languageCode": "en"})
        ),
        call(
            "call_2",
            tool::UPDATE_TASK_PRIORITY,
            json!({"priority": "P1"})
        ),
        call("call_3", tool::UPDATE_TASK_ESTIMATE, json!({"minutes": 90})),
        call(
            "call_4",
            tool::SET_TASK_STATUS,
            json!({"status": "IN PROGRESS", "reason": "The numbers are in"})
        ),
        call(
            "call_5",
            tool::ADD_MULTIPLE_CHECKLIST_ITEMS,
            json!({"items": [{"title": "Book the review meeting"}, {"title": "Send the draft to finance"}]})
        ),
        call(
            "call_6",
            tool::ASSIGN_TASK_LABEL,
            json!({"label": "finance"})
        ),
        call(
            "call_7",
            tool::UPDATE_REPORT,
            json!({"markdown": "Draft is on track; estimate looks low."})
        ),
    ]);
    let (request, outcome) = wake(&engine, &task_id, "run-1", &document, now).await?;
    s.say(format!(
        "At {} the model answers with {} tool calls (OpenAI tool_calls):",
        render::time(now),
        request.calls.len()
    ));
    s.block(calls_listing(&request.calls));
    s.gap();
    s.say("The engine replies to each call, in order; this is what the model reads back:");
    s.say(render::replies(&request, &outcome).trim_end());
    s.gap();
    s.say("  set_task_language is immediate: it ran at once, under policy, with an audit record.");
    s.say("  update_report is the agent's own output: the host stored it.");
    s.say("  The batch became one item per checklist entry; the label is already there, so it");
    s.say("  was skipped with feedback instead of bothering a person.");

    s.heading("The change set waiting for review");
    let Some(set) = outcome.change_set else {
        return Err(CliError::failed("the demo wake queued nothing"));
    };
    s.block(render::change_set(&set));
    s.say("(`now:` is the value a confirmation would replace)");

    s.heading("A person decides");
    now += Duration::minutes(10);
    s.say(format!("At {}, alice:", render::time(now)));
    let priority = index_of(&set, tool::UPDATE_TASK_PRIORITY)?;
    let confirmed = decisions
        .confirm_item(assent_confirm::ItemRef::new(set.id, priority), now)
        .await?;
    s.say(format!("  assent confirm <set> {priority} --as alice"));
    s.block(format!("  {}", render::confirmed(priority, &confirmed)));
    let estimate = index_of(&set, tool::UPDATE_TASK_ESTIMATE)?;
    let edited = decisions
        .edit_and_confirm(
            assent_confirm::ItemRef::new(set.id, estimate),
            json!({"minutes": 120}),
            now,
        )
        .await?;
    s.say(format!(
        "  assent edit <set> {estimate} --args '{{\"minutes\":120}}'"
    ));
    s.block(format!("  {}", render::confirmed(estimate, &edited)));
    let status = index_of(&set, tool::SET_TASK_STATUS)?;
    let reason = "Not before finance has checked the numbers";
    let rejected = decisions
        .reject_item(
            assent_confirm::ItemRef::new(set.id, status),
            Some(reason.to_owned()),
            now,
        )
        .await?;
    s.say(format!(
        "  assent reject <set> {status} --reason \"{reason}\""
    ));
    s.block(format!("  {}", render::decision(&rejected)));
    s.gap();
    s.say("Confirming the priority a second time is refused; nothing runs twice:");
    s.say(format!("  assent confirm <set> {priority}"));
    match decisions
        .confirm_item(assent_confirm::ItemRef::new(set.id, priority), now)
        .await
    {
        Err(error) if error.is_conflict() => s.say(format!("    error: {error}   (exit code 3)")),
        Err(error) => return Err(error.into()),
        Ok(_) => {
            return Err(CliError::failed(
                "the demo's second confirmation was not refused",
            ));
        }
    }
    s.gap();
    let set_now = engine
        .change_set(set.id)
        .await?
        .ok_or(ConfirmError::ChangeSetNotFound(set.id))?;
    let mut conn = store.read_connection().await?;
    s.say("The set now (the two checklist items still wait):");
    s.block(render::change_set(&set_now));

    s.heading("The task after the decisions");
    let task = load_task(&mut conn, &task_id)
        .await?
        .ok_or_else(|| CliError::failed("the demo task vanished"))?;
    s.block(render::task(&task));

    s.heading("The audit trail");
    let records = engine
        .admin()
        .audit_trail(&AuditFilter::Target(task_target(task_id.clone())), 100)
        .await?;
    s.say("Every execution writes an action record before the handler runs and a result after:");
    s.gap();
    s.block(render::audit(&records));

    drop(conn);

    s.heading("The outbox");
    let messages = engine.admin().undelivered_outbox(100).await?;
    s.say("Every write left a message for other devices, committed in the same transaction");
    s.say("as the write itself (one unsent message per entity; a newer write replaces it):");
    s.gap();
    s.block(render::outbox(&messages));

    s.heading("What the agent's next wake sees");
    let history = decisions
        .history(AGENT, Some(&task_target(&task_id)), 20)
        .await?;
    s.say("This section goes into the agent's next prompt:");
    s.gap();
    s.block(render::history(history.as_deref(), AGENT));
    s.gap();
    now += Duration::hours(1);
    let document = json!([
        call(
            "call_8",
            tool::SET_TASK_STATUS,
            json!({"status": "IN PROGRESS", "reason": "The numbers are in"})
        ),
        call(
            "call_9",
            tool::UPDATE_TASK_PRIORITY,
            json!({"priority": "P1"})
        ),
    ]);
    let (request, outcome) = wake(&engine, &task_id, "run-2", &document, now).await?;
    s.say(format!(
        "At {} the agent tries the rejected change again, and the priority it already got:",
        render::time(now)
    ));
    s.say(render::replies(&request, &outcome).trim_end());
    s.gap();
    s.say(match outcome.change_set {
        Some(set) => format!("Queued {} new item(s) for review.", set.items.len()),
        None => "Nothing new to review.".to_owned(),
    });

    s.heading("Proving what ran");
    let report = engine
        .admin()
        .verify_proof(&VerifyOptions::default())
        .await?;
    s.say("Every decision, audit record and rule change above is on a tamper-evident chain;");
    s.say("`assent audit verify` checks it and that every effect had the consent it needed:");
    s.gap();
    s.block(render::proof(&report));
    Ok(s.text)
}
