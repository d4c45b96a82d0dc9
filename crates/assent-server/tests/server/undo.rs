//! Approvals that stay true over the API (issue 28): a confirmation of an item whose
//! target changed since the proposal is 409 with the one-line detail and a refreshed
//! item; `POST …/items/{index}/undo` proposes an applied change's reversal (201), 409
//! for an item that is not applied.

use crate::support::TestServer;
use serde_json::json;

async fn propose_priority(server: &TestServer, task: &str, to: &str) -> String {
    let arguments = json!({"priority": to}).to_string();
    let calls = json!([{"id": "call_1", "type": "function",
        "function": {"name": "update_task_priority", "arguments": arguments}}]);
    let (status, body) = server
        .post(
            "/api/wakes",
            json!({"agentId": "triage", "taskId": task, "toolCalls": calls}),
        )
        .await;
    assert_eq!(status, 200, "wake: {body}");
    body["changeSetId"].as_str().expect("a set").to_owned()
}

#[tokio::test]
async fn a_stale_item_is_409_and_an_applied_one_is_undone_through_a_new_set() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Stale").await;
    let first = propose_priority(&server, &task, "P0").await;
    let second = propose_priority(&server, &task, "P3").await;
    let confirm = |set: &str| format!("/api/change-sets/{set}/items/0/confirm");
    let (status, _) = server.post(&confirm(&second), json!({})).await;
    assert_eq!(status, 200);

    let (status, problem) = server.post(&confirm(&first), json!({})).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(
        problem["detail"],
        "target changed since proposed: priority was none, now P3; review and confirm again"
    );
    let (_, set) = server.get(&format!("/api/change-sets/{first}")).await;
    assert_eq!(set["items"][0]["stale"], true, "{set}");
    assert_eq!(set["items"][0]["before"], "P3");

    let undo = format!("/api/change-sets/{first}/items/0/undo");
    let (status, problem) = server.post(&undo, json!({})).await;
    assert_eq!(status, 409, "not applied yet: {problem}");
    let (status, _) = server.post(&confirm(&first), json!({})).await;
    assert_eq!(status, 200, "the refreshed item applies");
    let (status, reversal) = server.post(&undo, json!({})).await;
    assert_eq!(status, 201, "{reversal}");
    assert_eq!(reversal["items"][0]["args"], json!({"priority": "P3"}));
    assert_eq!(reversal["undoes"]["changeSetId"], first.as_str());
    let id = reversal["id"].as_str().expect("an id");
    let (status, _) = server.post(&confirm(id), json!({})).await;
    assert_eq!(status, 200);
    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(shown["priority"], "P3", "{shown}");
}
