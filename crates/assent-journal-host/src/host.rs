//! [`JournalHost`]: the journal as a [`Host`] of the engine — its targets (kind
//! [`TASK_KIND`]), handlers, the category resolver, snapshots with the journal's
//! redundancy rules, the local tools (the agent's report and observations), its synced
//! tasks and its tables.

use crate::handlers::{HANDLED_TOOLS, JournalToolHandler};
use crate::sync::TaskEntities;
use crate::tasks::{load_task, task_vector_clock};
use assent_confirm::{ConfirmError, Engine, Host, LoadedState, LocalCall};
use assent_domain::{Target, VectorClock};
use assent_journal::tool;
use assent_store::Connection;
use assent_store::sync::HostEntities;
use assent_store::{HostMigration, Store, timefmt};
use assent_tools::{BoxFuture, CategoryResolver, TargetState, ToolHandler};
use serde_json::Value;
use std::sync::Arc;

/// The kind of the journal's targets: a wake, a change set and a decision about a task
/// name it with its id.
pub const TASK_KIND: &str = "task";

/// The target naming the task `task_id`.
pub fn task_target(task_id: impl Into<String>) -> Target {
    Target::new(TASK_KIND, task_id)
}

/// The engine over `store` with the journal as its host (its tables migrated first):
/// what the CLI, the review server's tests and the examples compose.
pub async fn journal_engine(store: Store) -> Result<Engine, ConfirmError> {
    let host = JournalHost::new(store.device_id());
    Engine::open(store, Arc::new(assent_journal::catalog()), Arc::new(host)).await
}

/// The reference task journal as a host of the engine.
#[derive(Debug, Clone)]
pub struct JournalHost {
    host_id: String,
    handlers: Vec<JournalToolHandler>,
    resolver: TaskResolver,
}

impl JournalHost {
    /// A host ticking vector clocks as `host_id` (use the store's
    /// [`assent_store::Store::host_id`]).
    pub fn new(host_id: impl Into<String>) -> Self {
        let host_id = host_id.into();
        let handlers = HANDLED_TOOLS
            .iter()
            .map(|&tool| JournalToolHandler {
                tool,
                host_id: host_id.clone(),
            })
            .collect();
        Self {
            host_id,
            handlers,
            resolver: TaskResolver,
        }
    }

    /// This device's id in vector clocks.
    pub fn device_id(&self) -> &str {
        &self.host_id
    }
}

impl Host for JournalHost {
    fn name(&self) -> &str {
        "journal"
    }

    fn migrations(&self) -> &[HostMigration] {
        crate::MIGRATIONS
    }

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        self.handlers
            .iter()
            .find(|h| h.tool == tool_name)
            .map(|h| h as &dyn ToolHandler<Connection>)
    }

    fn handled_tools(&self) -> Option<Vec<String>> {
        Some(self.handlers.iter().map(|h| h.tool.to_owned()).collect())
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        &self.resolver
    }

    fn snapshot<'a>(
        &'a self,
        conn: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        Box::pin(async move {
            if target.kind != TASK_KIND {
                return Ok(None);
            }
            let task = load_task(conn, &target.id)
                .await
                .map_err(|e| e.to_string())?;
            Ok(task.map(|task| Box::new(task) as Box<dyn TargetState>))
        })
    }

    fn entities(&self) -> Option<&dyn HostEntities> {
        Some(&TaskEntities)
    }

    fn handle_local<'a>(
        &'a self,
        conn: &'a mut Connection,
        call: LocalCall<'a>,
    ) -> BoxFuture<'a, Result<String, String>> {
        Box::pin(async move {
            match call.tool_name {
                tool::UPDATE_REPORT => update_report(conn, call).await,
                tool::RECORD_OBSERVATIONS => record_observations(conn, call).await,
                other => Err(format!("unknown local tool {other:?}")),
            }
        })
    }
}

/// Category and vector clock of a task, read from the `tasks` table.
#[derive(Debug, Clone, Copy)]
struct TaskResolver;

impl CategoryResolver<Connection> for TaskResolver {
    fn category_of<'a>(
        &'a self,
        ctx: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<String>, String>> {
        Box::pin(async move {
            if target.kind != TASK_KIND {
                return Ok(None);
            }
            let category: Option<Option<String>> =
                sqlx::query_scalar("SELECT category FROM tasks WHERE id = $1")
                    .bind(target.id.as_str())
                    .fetch_optional(ctx)
                    .await
                    .map_err(|e| e.to_string())?;
            Ok(category.flatten())
        })
    }

    fn vector_clock_of<'a>(
        &'a self,
        ctx: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<Option<VectorClock>, String>> {
        Box::pin(async move {
            if target.kind != TASK_KIND {
                return Ok(None);
            }
            task_vector_clock(ctx, &target.id)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// `update_report`: replaces the agent's report on the task.
async fn update_report(conn: &mut Connection, call: LocalCall<'_>) -> Result<String, String> {
    let markdown = match call.args.get("markdown") {
        Some(Value::String(markdown)) => markdown,
        Some(other) => {
            return Err(format!(
                "argument `markdown` must be a string (got {other})"
            ));
        }
        None => return Err("missing argument `markdown`".to_owned()),
    };
    sqlx::query(
        "INSERT INTO agent_reports (agent_id, task_id, markdown, updated_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT (agent_id, task_id) DO UPDATE SET markdown = excluded.markdown, updated_at = excluded.updated_at",
    )
    .bind(call.agent_id)
    .bind(call.target.id.as_str())
    .bind(markdown)
    .bind(timefmt::format(call.now))
    .execute(conn)
    .await
    .map_err(|e| e.to_string())?;
    Ok("Report updated.".to_owned())
}

/// `record_observations`: one row per (non-blank) observation.
async fn record_observations(conn: &mut Connection, call: LocalCall<'_>) -> Result<String, String> {
    let observations = match call.args.get("observations") {
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.trim()),
                other => Err(format!(
                    "argument `observations` must hold strings (got {other})"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(other) => {
            return Err(format!(
                "argument `observations` must be an array (got {other})"
            ));
        }
        None => return Err("missing argument `observations`".to_owned()),
    };
    let now = timefmt::format(call.now);
    let mut recorded = 0_usize;
    for observation in observations.into_iter().filter(|o| !o.is_empty()) {
        sqlx::query(
            "INSERT INTO agent_observations (agent_id, task_id, observation, created_at) VALUES ($1, $2, $3, $4)",
        )
        .bind(call.agent_id)
        .bind(call.target.id.as_str())
        .bind(observation)
        .bind(&now)
        .execute(&mut *conn)
        .await
        .map_err(|e| e.to_string())?;
        recorded += 1;
    }
    let noun = if recorded == 1 {
        "observation"
    } else {
        "observations"
    };
    Ok(format!("Recorded {recorded} {noun}."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{NOW, TestDb};
    use crate::{NewTask, create_task};
    use assent_domain::OperationId;
    use assent_journal::catalog;
    use assent_store::outbox;
    use assent_tools::{ExecutionTarget, ToolInvocation, ToolMode, ToolOutcome, ToolsError};
    use serde_json::json;
    use time::Duration;

    const HOST: &str = "h1";

    fn invocation(tool: &str, task_id: &str, args: Value, minutes_later: i64) -> ToolInvocation {
        ToolInvocation::new(
            tool.to_owned(),
            args.clone(),
            "run".to_owned(),
            OperationId::derive("run", tool, &args, &[task_id]),
            ExecutionTarget {
                agent_id: "agent".to_owned(),
                target: task_target(task_id),
            },
            NOW + Duration::minutes(minutes_later),
        )
    }

    async fn call(
        host: &JournalHost,
        conn: &mut Connection,
        tool: &str,
        task_id: &str,
        args: Value,
    ) -> Result<ToolOutcome, ToolsError> {
        let handler = host.handler(tool).expect("the tool has a handler");
        handler
            .execute(conn, &invocation(tool, task_id, args, 5))
            .await
    }

    async fn seed(conn: &mut Connection, id: &str) -> assent_journal::TaskSnapshot {
        let new = NewTask {
            title: "Fix login bug".to_owned(),
            category: Some("work".to_owned()),
            checklist: vec!["Reproduce".to_owned()],
            ..NewTask::default()
        };
        create_task(conn, id, &new, HOST, NOW)
            .await
            .expect("created")
    }

    fn failure(result: Result<ToolOutcome, ToolsError>) -> String {
        match result {
            Err(ToolsError::HandlerFailed { message, .. }) => message,
            other => panic!("expected HandlerFailed, got {other:?}"),
        }
    }

    #[test]
    fn a_handler_for_every_singular_tool_and_none_for_batches() {
        let host = JournalHost::new(HOST);
        for spec in catalog().iter() {
            let expected = spec.batch.is_none() && spec.mode != ToolMode::Local;
            assert_eq!(
                host.handler(&spec.name).is_some(),
                expected,
                "{}",
                spec.name
            );
        }
        assert!(host.handler("mystery_tool").is_none());
    }

    #[tokio::test]
    async fn every_handler_mutates_ticks_and_enqueues_once() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        let seeded = seed(tx.connection(), "t1").await;
        seed(tx.connection(), "t2").await;
        let item = seeded.checklist[0].id.clone();
        let steps: Vec<(&str, Value, &str)> = vec![
            (
                tool::SET_TASK_TITLE,
                json!({"title": " Fix the login bug "}),
                "Title set to \"Fix the login bug\".",
            ),
            (
                tool::UPDATE_TASK_ESTIMATE,
                json!({"minutes": 60}),
                "Estimate set to 60 minutes.",
            ),
            (
                tool::UPDATE_TASK_ESTIMATE,
                json!({"minutes": " 90"}),
                "Estimate set to 90 minutes.",
            ),
            (
                tool::UPDATE_TASK_DUE_DATE,
                json!({"dueDate": "2026-03-15"}),
                "Due date set to 2026-03-15.",
            ),
            (
                tool::UPDATE_TASK_PRIORITY,
                json!({"priority": " p1"}),
                "Priority set to P1.",
            ),
            (
                tool::SET_TASK_STATUS,
                json!({"status": "blocked", "reason": "waiting on API"}),
                "Status set to BLOCKED.",
            ),
            (
                tool::SET_TASK_STATUS,
                json!({"status": "in progress"}),
                "Status set to IN PROGRESS.",
            ),
            (
                tool::ASSIGN_TASK_LABEL,
                json!({"label": "bug"}),
                "Label \"bug\" assigned.",
            ),
            (
                tool::ADD_CHECKLIST_ITEM,
                json!({"title": "Write test"}),
                "Checklist item \"Write test\" added.",
            ),
            (
                tool::ADD_CHECKLIST_ITEM,
                json!({"title": "Write test"}),
                "Checklist item \"Write test\" added.",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": item, "isChecked": true}),
                "Checklist item \"Reproduce\" checked.",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": item, "isChecked": false}),
                "Checklist item \"Reproduce\" unchecked.",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": item, "title": "Reproduce it"}),
                "Checklist item \"Reproduce\" renamed to \"Reproduce it\".",
            ),
            (
                tool::SET_TASK_LANGUAGE,
                json!({"languageCode": "de"}),
                "Language set to de.",
            ),
        ];
        for (i, (tool, args, message)) in steps.into_iter().enumerate() {
            let outcome = call(&host, tx.connection(), tool, "t1", args)
                .await
                .expect(tool);
            assert_eq!(
                (outcome.message.as_str(), outcome.mutated),
                (message, true),
                "{tool}"
            );
            let clock = task_vector_clock(tx.connection(), "t1")
                .await
                .expect("clock")
                .expect("exists");
            assert_eq!(clock.get(HOST), i as u64 + 2, "{tool} ticks the clock once");
            let pending = outbox::undelivered(tx.connection(), 100)
                .await
                .expect("outbox");
            let t1: Vec<_> = pending.iter().filter(|m| m.entity_id == "t1").collect();
            assert_eq!(t1.len(), 1, "{tool}: one pending message for the task");
            assert_eq!(t1[0].entity_type, crate::TASK_ENTITY);
            assert_eq!(t1[0].payload["vectorClock"], json!(clock), "{tool}");
            assert_eq!(pending.len(), 2, "{tool}: t2's message is untouched");
        }

        let task = load_task(tx.connection(), "t1")
            .await
            .expect("loads")
            .expect("exists");
        assert_eq!(task.title, "Fix the login bug");
        assert_eq!(task.estimate_minutes, Some(90));
        assert_eq!(
            task.due_date.map(|d| d.to_string()).as_deref(),
            Some("2026-03-15")
        );
        assert_eq!(task.priority.as_deref(), Some("P1"));
        assert_eq!(task.status, "IN PROGRESS");
        assert_eq!(task.labels, ["bug"]);
        assert_eq!(task.language.as_deref(), Some("de"));
        let titles: Vec<(&str, bool)> = task
            .checklist
            .iter()
            .map(|i| (i.title.as_str(), i.is_checked))
            .collect();
        assert_eq!(
            titles,
            [
                ("Reproduce it", false),
                ("Write test", false),
                ("Write test", false)
            ]
        );
        let payload = &outbox::undelivered(tx.connection(), 100)
            .await
            .expect("outbox")[0]
            .payload;
        assert_eq!(payload["title"], "Fix the login bug");
        assert_eq!(payload["statusReason"], Value::Null);
        let updated_at: String = sqlx::query_scalar("SELECT updated_at FROM tasks WHERE id = 't1'")
            .fetch_one(tx.connection())
            .await
            .expect("updated_at");
        assert_eq!(updated_at, timefmt::format(NOW + Duration::minutes(5)));
        let untouched = load_task(tx.connection(), "t2")
            .await
            .expect("loads")
            .expect("exists");
        assert_eq!(untouched.title, "Fix login bug");
    }

    #[tokio::test]
    async fn status_reason_is_stored() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        seed(tx.connection(), "t1").await;
        call(
            &host,
            tx.connection(),
            tool::SET_TASK_STATUS,
            "t1",
            json!({"status": "ON HOLD", "reason": " vacation "}),
        )
        .await
        .expect("applied");
        let reason: Option<String> =
            sqlx::query_scalar("SELECT status_reason FROM tasks WHERE id = 't1'")
                .fetch_one(tx.connection())
                .await
                .expect("reason");
        assert_eq!(reason.as_deref(), Some("vacation"));
        let pending = outbox::undelivered(tx.connection(), 10)
            .await
            .expect("outbox");
        assert_eq!(pending[0].payload["statusReason"], "vacation");
        assert_eq!(pending[0].payload["status"], "ON HOLD");
    }

    #[tokio::test]
    async fn unchanged_values_are_not_written() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        let seeded = seed(tx.connection(), "t1").await;
        let item = seeded.checklist[0].id.clone();
        call(
            &host,
            tx.connection(),
            tool::ASSIGN_TASK_LABEL,
            "t1",
            json!({"label": "Bug"}),
        )
        .await
        .expect("assigned");
        let before = task_vector_clock(tx.connection(), "t1")
            .await
            .expect("clock");
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                tool::ASSIGN_TASK_LABEL,
                json!({"label": "bug"}),
                "Label \"Bug\" is already assigned.",
            ),
            (
                tool::SET_TASK_TITLE,
                json!({"title": "Fix login bug"}),
                "Title is already \"Fix login bug\".",
            ),
            (
                tool::SET_TASK_STATUS,
                json!({"status": "open"}),
                "Status is already OPEN.",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": item, "isChecked": false}),
                "Checklist item \"Reproduce\" is already unchecked.",
            ),
        ];
        for (tool, args, message) in cases {
            let outcome = call(&host, tx.connection(), tool, "t1", args)
                .await
                .expect(tool);
            assert_eq!(
                (outcome.message.as_str(), outcome.mutated),
                (message, false),
                "{tool}"
            );
        }
        assert_eq!(
            task_vector_clock(tx.connection(), "t1")
                .await
                .expect("clock"),
            before
        );
        let labels = load_task(tx.connection(), "t1")
            .await
            .expect("loads")
            .expect("exists")
            .labels;
        assert_eq!(labels, ["Bug"]);
    }

    #[tokio::test]
    async fn handlers_refuse_bad_calls() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        seed(tx.connection(), "t1").await;
        seed(tx.connection(), "other").await;
        let other_item = load_task(tx.connection(), "other")
            .await
            .expect("loads")
            .expect("exists")
            .checklist[0]
            .id
            .clone();

        let missing = failure(
            call(
                &host,
                tx.connection(),
                tool::UPDATE_CHECKLIST_ITEM,
                "t1",
                json!({"id": "nope", "isChecked": true}),
            )
            .await,
        );
        assert_eq!(missing, "checklist item nope does not exist on task t1");
        // An item of another task is not this task's item.
        let foreign = failure(
            call(
                &host,
                tx.connection(),
                tool::UPDATE_CHECKLIST_ITEM,
                "t1",
                json!({"id": other_item, "isChecked": true}),
            )
            .await,
        );
        assert_eq!(
            foreign,
            format!("checklist item {other_item} does not exist on task t1")
        );
        assert_eq!(
            failure(
                call(
                    &host,
                    tx.connection(),
                    tool::SET_TASK_TITLE,
                    "ghost",
                    json!({"title": "x"})
                )
                .await
            ),
            "task ghost does not exist"
        );
        let bad: Vec<(&str, Value, &str)> = vec![
            (tool::SET_TASK_TITLE, json!({}), "missing argument `title`"),
            (
                tool::SET_TASK_TITLE,
                json!({"title": "  "}),
                "argument `title` must not be blank",
            ),
            (
                tool::SET_TASK_TITLE,
                json!({"title": 7}),
                "argument `title` must be a string (got 7)",
            ),
            (
                tool::UPDATE_TASK_ESTIMATE,
                json!({"minutes": 0}),
                "argument `minutes` must be between 1 and 1440 minutes (got 0)",
            ),
            (
                tool::UPDATE_TASK_ESTIMATE,
                json!({"minutes": 1.5}),
                "argument `minutes` must be a whole number",
            ),
            (
                tool::UPDATE_TASK_ESTIMATE,
                json!({"minutes": -3}),
                "argument `minutes` must be a whole number",
            ),
            (
                tool::UPDATE_TASK_DUE_DATE,
                json!({"dueDate": "2026-02-30"}),
                "argument `dueDate` must be a date",
            ),
            (
                tool::UPDATE_TASK_PRIORITY,
                json!({"priority": "P4"}),
                "argument `priority` must be one of P0, P1, P2, P3",
            ),
            (
                tool::SET_TASK_STATUS,
                json!({"status": "DONE"}),
                "argument `status` must be one of",
            ),
            (
                tool::SET_TASK_STATUS,
                json!({"status": "OPEN", "reason": 1}),
                "argument `reason` must be a string",
            ),
            (
                tool::ASSIGN_TASK_LABEL,
                json!({"label": "x".repeat(101)}),
                "argument `label` must be at most 100 characters",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "nope"}),
                "nothing to update",
            ),
            (
                tool::UPDATE_CHECKLIST_ITEM,
                json!({"id": "nope", "isChecked": "yes"}),
                "argument `isChecked` must be true or false",
            ),
            (
                tool::SET_TASK_LANGUAGE,
                json!({"languageCode": "German"}),
                "argument `languageCode` must be an ISO 639 code",
            ),
        ];
        for (tool, args, expected) in bad {
            let message = failure(call(&host, tx.connection(), tool, "t1", args).await);
            assert!(message.starts_with(expected), "{tool}: {message}");
        }
        let handler = host.handler(tool::SET_TASK_TITLE).expect("handler");
        let wrong = handler
            .execute(
                tx.connection(),
                &invocation(tool::SET_TASK_STATUS, "t1", json!({"status": "OPEN"}), 0),
            )
            .await;
        assert_eq!(
            failure(wrong),
            "the handler of set_task_title was called for set_task_status"
        );
        let err = call(
            &host,
            tx.connection(),
            tool::SET_TASK_TITLE,
            "t1",
            json!({}),
        )
        .await
        .expect_err("fails");
        assert_eq!(
            err.to_string(),
            "set_task_title failed: missing argument `title`"
        );

        // Nothing above changed t1.
        assert_eq!(
            task_vector_clock(tx.connection(), "t1")
                .await
                .expect("clock")
                .expect("exists")
                .get(HOST),
            1
        );
    }

    #[tokio::test]
    async fn resolver_and_snapshot() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        let seeded = seed(tx.connection(), "t1").await;
        create_task(
            tx.connection(),
            "plain",
            &NewTask {
                title: "No category".into(),
                ..NewTask::default()
            },
            HOST,
            NOW,
        )
        .await
        .expect("created");
        let resolver = host.resolver();
        assert_eq!(
            resolver
                .category_of(tx.connection(), &task_target("t1"))
                .await,
            Ok(Some("work".to_owned()))
        );
        assert_eq!(
            resolver
                .category_of(tx.connection(), &task_target("plain"))
                .await,
            Ok(None)
        );
        assert_eq!(
            resolver
                .category_of(tx.connection(), &task_target("ghost"))
                .await,
            Ok(None)
        );
        let clock = resolver
            .vector_clock_of(tx.connection(), &task_target("t1"))
            .await
            .expect("clock")
            .expect("exists");
        assert_eq!(clock.get(HOST), 1);
        assert_eq!(
            resolver
                .vector_clock_of(tx.connection(), &task_target("ghost"))
                .await,
            Ok(None)
        );
        let state = host
            .snapshot(tx.connection(), &task_target("t1"))
            .await
            .expect("loads")
            .expect("exists");
        assert_eq!(format!("{state:?}"), format!("{seeded:?}"));
        assert!(
            host.snapshot(tx.connection(), &task_target("ghost"))
                .await
                .expect("loads")
                .is_none()
        );
        // A target of another kind is no task of the journal.
        let other = Target::new("invoice", "t1");
        assert!(
            host.snapshot(tx.connection(), &other)
                .await
                .expect("loads")
                .is_none()
        );
        assert_eq!(
            resolver.category_of(tx.connection(), &other).await,
            Ok(None)
        );
    }

    #[tokio::test]
    async fn a_rolled_back_change_leaves_nothing() {
        let db = TestDb::open().await;
        let host = JournalHost::new(HOST);
        let mut tx = db.store.begin_write().await.expect("tx");
        seed(tx.connection(), "t1").await;
        tx.commit().await.expect("committed");
        let mut conn = db.store.read_connection().await.expect("conn");
        let sent: Vec<i64> = outbox::undelivered(&mut conn, 10)
            .await
            .expect("outbox")
            .iter()
            .map(|m| m.id)
            .collect();
        drop(conn);

        let mut tx = db.store.begin_write().await.expect("tx");
        call(
            &host,
            tx.connection(),
            tool::SET_TASK_TITLE,
            "t1",
            json!({"title": "Renamed"}),
        )
        .await
        .expect("applied");
        tx.rollback().await.expect("rolled back");

        let mut tx = db.store.begin_write().await.expect("tx");
        let task = load_task(tx.connection(), "t1")
            .await
            .expect("loads")
            .expect("exists");
        assert_eq!(task.title, "Fix login bug");
        assert_eq!(
            task_vector_clock(tx.connection(), "t1")
                .await
                .expect("clock")
                .expect("exists")
                .get(HOST),
            1
        );
        let pending = outbox::undelivered(tx.connection(), 10)
            .await
            .expect("outbox");
        assert_eq!(pending.iter().map(|m| m.id).collect::<Vec<_>>(), sent);
        assert_eq!(pending[0].payload["title"], "Fix login bug");
    }

    #[tokio::test]
    async fn local_tools() {
        let db = TestDb::open().await;
        let mut tx = db.store.begin_write().await.expect("tx");
        let host = JournalHost::new(HOST);
        let t1 = task_target("t1");
        fn local<'a>(target: &'a Target, tool_name: &'a str, args: &'a Value) -> LocalCall<'a> {
            LocalCall {
                agent_id: "agent",
                target,
                tool_name,
                args,
                now: NOW,
            }
        }
        let first = json!({"markdown": "# Findings\nNone yet."});
        let second = json!({"markdown": "# Findings\nLogin fails on Safari."});
        for args in [&first, &second] {
            let reply = host
                .handle_local(tx.connection(), local(&t1, tool::UPDATE_REPORT, args))
                .await;
            assert_eq!(reply.as_deref(), Ok("Report updated."));
        }
        let reports: Vec<String> = sqlx::query_scalar(
            "SELECT markdown FROM agent_reports WHERE agent_id = 'agent' AND task_id = 't1'",
        )
        .fetch_all(tx.connection())
        .await
        .expect("reports");
        assert_eq!(reports, ["# Findings\nLogin fails on Safari."]);

        let observations =
            json!({"observations": ["User prefers short titles", "  ", "Deadline is firm"]});
        let reply = host
            .handle_local(
                tx.connection(),
                local(&t1, tool::RECORD_OBSERVATIONS, &observations),
            )
            .await;
        assert_eq!(reply.as_deref(), Ok("Recorded 2 observations."));
        let one = json!({"observations": ["Third"]});
        let reply = host
            .handle_local(tx.connection(), local(&t1, tool::RECORD_OBSERVATIONS, &one))
            .await;
        assert_eq!(reply.as_deref(), Ok("Recorded 1 observation."));
        let stored: Vec<String> =
            sqlx::query_scalar("SELECT observation FROM agent_observations ORDER BY id")
                .fetch_all(tx.connection())
                .await
                .expect("observations");
        assert_eq!(
            stored,
            ["User prefers short titles", "Deadline is firm", "Third"]
        );

        let bad = json!({"observations": [1]});
        let reply = host
            .handle_local(tx.connection(), local(&t1, tool::RECORD_OBSERVATIONS, &bad))
            .await;
        assert_eq!(
            reply,
            Err("argument `observations` must hold strings (got 1)".to_owned())
        );
        let reply = host
            .handle_local(tx.connection(), local(&t1, tool::UPDATE_REPORT, &json!({})))
            .await;
        assert_eq!(reply, Err("missing argument `markdown`".to_owned()));
        let reply = host
            .handle_local(
                tx.connection(),
                local(&t1, tool::SET_TASK_TITLE, &json!({"title": "x"})),
            )
            .await;
        assert_eq!(
            reply,
            Err("unknown local tool \"set_task_title\"".to_owned())
        );
        // Local tools are not replicated through the outbox.
        assert_eq!(outbox::count(tx.connection()).await.expect("count"), 0);
    }
}
