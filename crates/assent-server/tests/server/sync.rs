//! Device sync over HTTP: `POST /api/sync` merges another device's batch and answers
//! with this device's own, a replay changes nothing, a bad batch is refused and changes
//! nothing, the route has its own body limit; `GET /api/sync/host`, `/api/sync/peers`
//! and `/api/conflicts`; a device without an item's agent says so and decides nothing.

use crate::support::{TestServer, read};
use assent_journal_host::TaskEntities;
use assent_store::Store;
use assent_sync::{SyncBatch, SyncState};
use reqwest::Method;
use serde_json::{Value, json};

/// Device A's whole state as a batch, as `assent sync --peer` sends it.
async fn export(store: &Store) -> SyncBatch {
    let mut tx = store.begin_write().await.expect("write");
    let batch = assent_store::sync::export(
        tx.connection(),
        store.device_id(),
        &TaskEntities,
        uuid::Uuid::new_v4(),
        time::OffsetDateTime::now_utc(),
    )
    .await
    .expect("export");
    tx.commit().await.expect("commit");
    batch
}

async fn state(store: &Store) -> SyncState {
    let mut conn = store.read_connection().await.expect("connection");
    assent_store::sync::local_state(&mut conn, store.device_id(), &TaskEntities)
        .await
        .expect("state")
}

/// `POST /api/sync` with `batch` as JSON.
async fn post_batch(server: &TestServer, batch: &Value) -> (u16, Value) {
    server.post("/api/sync", batch.clone()).await
}

/// Device A (a server of its own, for its proposals) with a change set.
async fn device_with_a_proposal() -> (TestServer, String) {
    let a = TestServer::start().await;
    let task = a.agent_and_task("Fix the login bug").await;
    let set = a.propose(&task).await;
    (a, set)
}

#[tokio::test]
async fn a_batch_is_merged_and_answered_with_this_devices_state() {
    let (a, set) = device_with_a_proposal().await;
    let b = TestServer::start().await;
    let (status, host) = b.get("/api/sync/host").await;
    assert_eq!(status, 200);
    assert_eq!(host, json!({"hostId": b.store.device_id()}));
    let (_, conflicts) = b.get("/api/conflicts").await;
    assert_eq!(conflicts, json!([]));

    let batch = serde_json::to_value(export(&a.store).await).expect("JSON");
    let (status, answer) = post_batch(&b, &batch).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["report"]["batchId"], batch["batchId"]);
    assert_eq!(answer["report"]["replayed"], false);
    assert_eq!(answer["report"]["changeSetsInserted"], 1);
    assert_eq!(answer["report"]["entitiesWritten"], 1);
    assert_eq!(answer["batch"]["fromHost"], b.store.device_id());
    assert_eq!(
        answer["batch"]["changeSets"][0]["id"],
        set.as_str(),
        "the answer is B's state after the merge"
    );
    let answered: SyncBatch =
        serde_json::from_value(answer["batch"].clone()).expect("a batch A can merge");
    assert_eq!(answered.state, state(&b.store).await);
    let (status, shown) = b.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(status, 200, "{shown}");

    let after = state(&b.store).await;
    let (status, replay) = post_batch(&b, &batch).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["report"]["replayed"], true);
    assert_eq!(state(&b.store).await, after, "a replay changes nothing");
    let (_, peers) = b.get("/api/sync/peers").await;
    assert_eq!(peers[0]["hostId"], a.store.device_id());
    assert_eq!(peers[0]["batchesMerged"], 1, "replays are not counted");
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_bad_batch_is_refused_and_changes_nothing() {
    let (a, set) = device_with_a_proposal().await;
    let (status, _) = a
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let b = TestServer::start().await;
    let before = state(&b.store).await;
    let good = serde_json::to_value(export(&a.store).await).expect("JSON");

    let mut own_host = good.clone();
    own_host["fromHost"] = json!(b.store.device_id());
    let mut newer_format = good.clone();
    newer_format["formatVersion"] = json!(99);
    let mut bad_task = good.clone();
    bad_task["entities"][0]["state"]["title"] = json!(42);
    let mut dangling = good.clone();
    dangling["changeSets"] = json!([]);
    for (batch, expected, needle) in [
        (json!({}), 400, "invalid JSON body"),
        (own_host, 409, "this device's own host id"),
        (newer_format, 400, "format 99 is not supported"),
        (bad_task, 400, "invalid entity"),
        (dangling, 400, "refers to item"),
    ] {
        let (status, problem) = post_batch(&b, &batch).await;
        assert_eq!(status, expected, "{problem}");
        assert_eq!(problem["status"], expected);
        let detail = problem["detail"].as_str().expect("a detail");
        assert!(detail.contains(needle), "{detail:?} should say {needle:?}");
    }
    let unauthenticated = b
        .client
        .post(format!("{}/api/sync", b.base))
        .json(&good)
        .send()
        .await
        .expect("send");
    assert_eq!(unauthenticated.status().as_u16(), 401);
    for path in ["/api/sync/host", "/api/sync/peers", "/api/conflicts"] {
        let response = b
            .client
            .get(format!("{}{path}", b.base))
            .send()
            .await
            .expect("send");
        assert_eq!(response.status().as_u16(), 401, "{path}");
    }
    assert_eq!(state(&b.store).await, before, "nothing changed");
    let (_, peers) = b.get("/api/sync/peers").await;
    assert_eq!(peers, json!([]), "no batch was recorded as merged");
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

/// Issue 41, item 11: a device that lacks the item's agent says so (409), decides
/// nothing, and still takes a rejection, answered in confirm's shape.
#[tokio::test]
async fn a_device_without_the_items_agent_says_so_and_decides_nothing() {
    let (a, set) = device_with_a_proposal().await;
    let b = TestServer::start().await;
    let batch = serde_json::to_value(export(&a.store).await).expect("JSON");
    let (status, answer) = post_batch(&b, &batch).await;
    assert_eq!(status, 200, "{answer}");
    let before = state(&b.store).await;
    for (route, body) in [
        ("confirm", json!({})),
        ("edit", json!({"args": {"priority": "P1"}})),
    ] {
        let (status, problem) = b
            .post(&format!("/api/change-sets/{set}/items/0/{route}"), body)
            .await;
        assert_eq!(status, 409, "{route}: {problem}");
        assert_eq!(
            problem["detail"], "no agent \"triage\" on this database",
            "{route}"
        );
    }
    assert_eq!(state(&b.store).await, before, "nothing changed");

    let (status, rejected) = b
        .post(
            &format!("/api/change-sets/{set}/items/0/reject"),
            json!({"reason": "not on this device"}),
        )
        .await;
    assert_eq!(status, 200, "{rejected}");
    assert_eq!(rejected["reason"], "not on this device", "{rejected}");
    assert_eq!(rejected["decision"]["verdict"], "rejected", "{rejected}");
    assert_eq!(
        rejected["message"], "Rejected; it will not run (reason: \"not on this device\").",
        "{rejected}"
    );
    assent_tests::assert_proven(&b.store, "a device without the agent").await;
    a.stop().await.expect("clean stop");
    b.stop().await.expect("clean stop");
}

#[tokio::test]
async fn the_sync_route_has_its_own_body_limit() {
    let (a, _) = device_with_a_proposal().await;
    let batch = serde_json::to_value(export(&a.store).await).expect("JSON");
    let size = batch.to_string().len();
    let limit = size / 2;

    // Over the API's limit, yet within the sync route's: merged.
    let b = TestServer::start_with(|server| server.with_body_limit(limit)).await;
    let padding = "x".repeat(limit);
    let (status, _) = b
        .post(
            "/api/agents",
            json!({"id": padding, "categories": ["work"]}),
        )
        .await;
    assert_eq!(status, 413, "the API keeps its limit");
    let (status, answer) = post_batch(&b, &batch).await;
    assert_eq!(status, 200, "{answer}");

    // Over the sync route's own limit: 413, nothing merged.
    let c = TestServer::start_with(|server| server.with_sync_body_limit(limit)).await;
    let before = state(&c.store).await;
    let response = c
        .request(Method::POST, "/api/sync")
        .json(&batch)
        .send()
        .await
        .expect("send");
    let (status, problem) = read(response).await;
    assert_eq!(status, 413, "{problem}");
    assert_eq!(state(&c.store).await, before);
    for server in [a, b, c] {
        server.stop().await.expect("clean stop");
    }
}
