//! One outcome of a set, four doors: the same sets, driven through every outcome, read
//! by the server's API (`GET /api/change-sets/{id}/outcome`), the CLI's view (`assent
//! show --json` renders `SetView` with the set's decisions and jobs), the MCP gateway
//! (its waited answer and `assent_status`, the functions it answers with) and the rig
//! hook (`AssentHook::answer` resuming the call); what they say must agree.

use assent_confirm::ItemRef;
use assent_confirm::{CallState, Engine, JobSettings};
use assent_domain::{Target, Uuid};
use assent_rig::AssentHook;
use assent_server::Server;
use assent_server::shapes::SetView;
use assent_store::{Store, agents, change_sets, decisions, jobs};
use assent_tests::TestApp;
use assent_tests::external::{self, CATEGORY, HttpHost, Receiver, TOOL};
use assent_tools::AgentPolicy;
use axum::body::Body;
use axum::http::Request;
use rmcp_text::texts;
use serde_json::{Value, json};
use std::time::Duration;
use time::OffsetDateTime;
use tower::ServiceExt;

/// The admin token of the server door.
const TOKEN: &str = "four-doors-admin";

/// The run every call of the test belongs to.
const RUN: &str = "four-doors";

/// What becomes of one call.
#[derive(Debug, Clone, Copy)]
enum Drive {
    Nothing,
    Confirm,
    Edit,
    Reject,
    Withdraw,
    Fail,
    Doubt,
    DoubtIdempotent,
}

/// What every door must say about a call driven by `Drive`.
struct Expected {
    state: CallState,
    /// The waited answer, `None` while the call is open.
    waited: Option<String>,
}

fn expected(drive: Drive) -> Expected {
    use assent_changeset::reply;
    let (state, waited) = match drive {
        Drive::Nothing => (CallState::Pending, None),
        Drive::Confirm | Drive::Edit => {
            (CallState::Applied, Some("receiver said posted".to_owned()))
        }
        Drive::Reject => (
            CallState::Rejected,
            Some(reply::waited_rejected(Some("not now"))),
        ),
        Drive::Withdraw => (
            CallState::Withdrawn,
            Some(reply::waited_rejected(Some("the client stopped waiting"))),
        ),
        Drive::Fail => (
            CallState::Failed,
            Some(reply::waited_failed(Some("503 from the endpoint"))),
        ),
        Drive::Doubt => (
            CallState::InDoubt,
            Some(reply::waited_in_doubt(Some("no answer within the lease"))),
        ),
        // An idempotent tool's call in doubt runs again: not settled, for everyone.
        Drive::DoubtIdempotent => (CallState::Running, None),
    };
    Expected { state, waited }
}

#[tokio::test]
async fn the_server_the_cli_the_gateway_and_rig_say_the_same_of_every_outcome() {
    let app = TestApp::spawn().await;
    let receiver = Receiver::start(false, Duration::ZERO);
    let engine = external::engine(
        app.store.clone(),
        HttpHost::new(&receiver.url, false, false),
        JobSettings::default(),
    )
    .await;
    allow(&app.store).await;
    let hook =
        AssentHook::new(engine.clone(), "poster", Target::new("endpoint", "e1")).run_key(RUN);
    let router = Server::new(engine.clone(), TOKEN).router();
    let drives = [
        Drive::Nothing,
        Drive::Confirm,
        Drive::Edit,
        Drive::Reject,
        Drive::Withdraw,
        Drive::Fail,
        Drive::Doubt,
        Drive::DoubtIdempotent,
    ];
    for (n, drive) in drives.into_iter().enumerate() {
        let call = format!("call-{n}");
        let here = format!("{drive:?}");
        // Each call its own text: an identical one waiting would be skipped as a duplicate.
        let args = json!({"text": format!("hello {n}")}).to_string();
        // Proposed through rig's door: the call is queued in a set of its own.
        let queued = hook.answer(RUN, &call, TOOL, &args).await.unwrap();
        assert_eq!(queued.text, assent_changeset::reply::QUEUED, "{here}");
        let set = hook.change_set_id(&call).expect("a named run");
        drive_to(&engine, &app.store, set, drive).await;
        let want = expected(drive);

        // The engine.
        let outcome = engine.confirmations().outcome(set).await.unwrap();
        let item = &outcome.items[0];
        assert_eq!(item.state, want.state, "{here}: {item:?}");
        assert_eq!(outcome.settled, want.state.is_settled(), "{here}");
        assert_eq!(item.waited_reply(), want.waited, "{here}");

        // The server's API.
        let served = get(&router, &format!("/api/change-sets/{set}/outcome")).await;
        assert_eq!(
            served["items"][0]["state"],
            want.state.as_str(),
            "{here}: {served}"
        );
        assert_eq!(served["settled"], want.state.is_settled(), "{here}");
        assert_eq!(served, serde_json::to_value(&outcome).unwrap(), "{here}");

        // The CLI's view (`assent show SET --json`).
        let shown = cli_view(&app.store, set).await;
        let shown_item = &shown["items"][0];
        assert_eq!(
            shown_item["status"], served["items"][0]["status"],
            "{here}: {shown}"
        );
        assert_eq!(
            shown_item["execution"]["status"].as_str(),
            served["items"][0]["run"]["status"].as_str(),
            "{here}: {shown}"
        );
        if let Some(reason) = served["items"][0]["decision"]["reason"].as_str() {
            assert_eq!(shown_item["reason"], reason, "{here}: {shown}");
        }

        // The gateway: its waited answer (`--wait`, tasks) and `assent_status`.
        let waited = assent_mcp::waited_answer(item, None);
        let status = assent_mcp::status_answer(&outcome);
        let fields = status.structured_content.clone().unwrap_or_default();
        let status_text = texts(&status).join("\n");
        // Rig, resuming the call.
        let told = hook.answer(RUN, &call, TOOL, &args).await.unwrap();
        match &want.waited {
            None => {
                assert!(waited.is_none(), "{here}: {waited:?}");
                assert_eq!(told.text, assent_changeset::reply::QUEUED, "{here}");
                assert!(!told.is_error, "{here}");
            }
            Some(text) => {
                let waited = waited.expect("settled: an answer");
                let said = texts(&waited);
                assert_eq!(said.last(), Some(text), "{here}: {said:?}");
                assert_eq!(told.text, *text, "{here}: rig");
                let is_error = want.state.is_error();
                assert_eq!(waited.is_error, Some(is_error), "{here}");
                assert_eq!(told.is_error, is_error, "{here}");
                if matches!(drive, Drive::Edit) {
                    assert!(
                        said[0].starts_with("A person changed the arguments"),
                        "{said:?}"
                    );
                }
                if is_error && !matches!(drive, Drive::Withdraw) {
                    assert!(
                        status_text.starts_with(text.as_str()),
                        "{here}: {status_text}"
                    );
                }
            }
        }
        let status_word = match want.state {
            CallState::Pending => "pending",
            CallState::Rejected => "rejected",
            CallState::Withdrawn => "withdrawn",
            _ => "confirmed",
        };
        assert_eq!(fields["status"], status_word, "{here}: {fields}");
        assert_eq!(
            fields.get("run").and_then(Value::as_str),
            served["items"][0]["run"]["status"].as_str(),
            "{here}"
        );
    }
}

/// Brings set `set`'s call to `drive`'s outcome. A failure or a doubt is written into
/// the job as the ledger would leave it, so the test does not wait for a lease.
async fn drive_to(engine: &Engine, store: &Store, set: Uuid, drive: Drive) {
    let now = OffsetDateTime::now_utc();
    let confirmations = engine.confirmations();
    match drive {
        Drive::Nothing => {}
        Drive::Confirm => {
            confirmations
                .confirm_item(ItemRef::new(set, 0), now)
                .await
                .unwrap();
            assert_eq!(engine.run_due_jobs(now).await.unwrap().applied, 1);
        }
        Drive::Edit => {
            confirmations
                .edit_and_confirm(ItemRef::new(set, 0), json!({"text": "edited"}), now)
                .await
                .unwrap();
            assert_eq!(engine.run_due_jobs(now).await.unwrap().applied, 1);
        }
        Drive::Reject => {
            confirmations
                .reject_item(ItemRef::new(set, 0), Some("not now".into()), now)
                .await
                .unwrap();
        }
        Drive::Withdraw => {
            confirmations
                .withdraw_item(ItemRef::new(set, 0), "the client stopped waiting", now)
                .await
                .unwrap();
        }
        Drive::Fail | Drive::Doubt | Drive::DoubtIdempotent => {
            confirmations
                .confirm_item(ItemRef::new(set, 0), now)
                .await
                .unwrap();
            let (status, error, idempotent) = match drive {
                Drive::Fail => ("failed", "503 from the endpoint", 0),
                Drive::Doubt => ("inDoubt", "no answer within the lease", 0),
                _ => ("inDoubt", "no answer within the lease", 1),
            };
            let mut conn = store.read_connection().await.unwrap();
            sqlx::query(
                "UPDATE execution_jobs SET status = $1, last_error = $2, idempotent = $3
                 WHERE change_set_id = $4",
            )
            .bind(status)
            .bind(error)
            .bind(idempotent)
            .bind(set.to_string())
            .execute(&mut *conn)
            .await
            .unwrap();
        }
    }
}

/// `GET path` on the server's router with the admin token: the JSON body of a 200.
async fn get(router: &axum::Router, path: &str) -> Value {
    let request = Request::builder()
        .uri(path)
        .header("authorization", format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200, "{path}");
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&body).unwrap()
}

/// What `assent show SET --json` prints of set `set` (its reasons and jobs).
async fn cli_view(store: &Store, set: Uuid) -> Value {
    let mut conn = store.read_connection().await.unwrap();
    let stored = change_sets::require(&mut conn, set).await.unwrap();
    let decided = decisions::for_change_set(&mut conn, set).await.unwrap();
    let ran = jobs::for_change_set(&mut conn, set).await.unwrap();
    let view = SetView::of(&stored).with_reasons(&decided).with_jobs(&ran);
    serde_json::to_value(&view).unwrap()
}

async fn allow(store: &Store) {
    let mut conn = store.read_connection().await.unwrap();
    agents::upsert(
        &mut conn,
        "poster",
        &AgentPolicy::new([CATEGORY]),
        OffsetDateTime::now_utc(),
    )
    .await
    .unwrap();
}

/// The text blocks of an MCP tool result.
mod rmcp_text {
    pub fn texts(result: &rmcp::model::CallToolResult) -> Vec<String> {
        result
            .content
            .iter()
            .filter_map(|block| block.as_text().map(|text| text.text.clone()))
            .collect()
    }
}
