//! Approvals that stay true over the API (issue 28): a confirmation of an item whose
//! target changed since the proposal is 409 with the one-line detail and a refreshed
//! item; `POST …/items/{index}/undo` proposes an applied change's reversal (201), 409
//! for an item that is not applied. A quorum (issue 29): two reviewer tokens, each
//! counted once, the last two racing.

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
    assert!(
        problem.get("conflictKind").is_none(),
        "stale, not a conflict: {problem}"
    );
    let (_, set) = server.get(&format!("/api/change-sets/{first}")).await;
    assert_eq!(set["items"][0]["stale"], true, "{set}");
    assert_eq!(set["items"][0]["before"], "P3");

    let undo = format!("/api/change-sets/{first}/items/0/undo");
    let (status, problem) = server.post(&undo, json!({})).await;
    assert_eq!(status, 409, "not applied yet: {problem}");
    assert_eq!(problem["conflictKind"], "notApplied", "{problem}");
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

/// Sets agent `triage`'s rule for `update_task_priority` to `ask` with `approvals`.
async fn require_approvals(server: &TestServer, secret: &str, approvals: u32) -> u16 {
    let path = "/api/agents/triage/rules/update_task_priority";
    let body = json!({"action": "ask", "approvals": approvals});
    server
        .send_as(secret, reqwest::Method::PUT, path, &body)
        .await
        .0
}

#[tokio::test]
async fn a_quorum_of_two_reviewers_applies_once_and_counts_each_reviewer_once() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Quorum").await;
    let (alice, bob) = (
        server.reviewer_token("alice").await,
        server.reviewer_token("bob").await,
    );
    assert_eq!(
        require_approvals(&server, &alice, 2).await,
        403,
        "admin only"
    );
    assert_eq!(
        require_approvals(&server, crate::support::TOKEN, 2).await,
        200
    );
    let set = propose_priority(&server, &task, "P0").await;
    let confirm = format!("/api/change-sets/{set}/items/0/confirm");
    let post = reqwest::Method::POST;

    let (status, first) = server
        .send_as(&alice, post.clone(), &confirm, &json!({}))
        .await;
    assert_eq!(status, 200, "{first}");
    assert!(
        first["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 of 2 approvals")),
        "{first}"
    );
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    let item = &shown["items"][0];
    assert_eq!(item["status"], "pending");
    assert_eq!(item["approvalsNeeded"], 2);
    assert_eq!(
        item["approvals"].as_array().map(Vec::len),
        Some(1),
        "{item}"
    );
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_ne!(task_now["priority"], "P0", "nothing ran at one approval");

    let (status, again) = server
        .send_as(&alice, post.clone(), &confirm, &json!({}))
        .await;
    assert_eq!(status, 409, "the same reviewer twice: {again}");
    assert_eq!(again["conflictKind"], "samePersonTwice", "{again}");

    let (status, second) = server
        .send_as(&bob, post.clone(), &confirm, &json!({}))
        .await;
    assert_eq!(status, 200, "{second}");
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(task_now["priority"], "P0");
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["items"][0]["status"], "confirmed");
    assert_eq!(
        shown["items"][0]["approvals"].as_array().map(Vec::len),
        Some(2)
    );
}

#[tokio::test]
async fn of_the_last_two_approvals_racing_one_applies_and_the_other_is_409() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Race").await;
    assert_eq!(
        require_approvals(&server, crate::support::TOKEN, 2).await,
        200
    );
    let reviewers = [
        server.reviewer_token("alice").await,
        server.reviewer_token("bob").await,
        server.reviewer_token("carol").await,
    ];
    for _ in 0..3 {
        let set = propose_priority(&server, &task, "P0").await;
        let confirm = format!("/api/change-sets/{set}/items/0/confirm");
        let post = reqwest::Method::POST;
        let (status, _) = server
            .send_as(&reviewers[0], post.clone(), &confirm, &json!({}))
            .await;
        assert_eq!(status, 200);
        let empty = json!({});
        let (b, c) = tokio::join!(
            server.send_as(&reviewers[1], post.clone(), &confirm, &empty),
            server.send_as(&reviewers[2], post.clone(), &confirm, &empty)
        );
        let mut statuses = [b.0, c.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{b:?} {c:?}");
        let (_, decisions) = server.get("/api/decisions?agentId=triage&limit=100").await;
        let finals = decisions.as_array().map_or(0, |all| {
            all.iter()
                .filter(|d| d["changeSetId"] == set.as_str())
                .count()
        });
        assert_eq!(finals, 1, "one decision: {decisions}");
        // Back to another priority for the next round.
        let reset = propose_priority(&server, &task, "P3").await;
        for reviewer in &reviewers[..2] {
            let path = format!("/api/change-sets/{reset}/items/0/confirm");
            server
                .send_as(reviewer, post.clone(), &path, &json!({}))
                .await;
        }
    }
}

#[tokio::test]
async fn an_edit_under_a_quorum_is_shown_and_a_confirmation_of_an_older_revision_is_409() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Revision").await;
    // A quorum set on a pattern over the API binds the tool it covers.
    let (status, agent) = server
        .send_as(
            crate::support::TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/rules/update_task_*",
            &json!({"action": "ask", "approvals": 2}),
        )
        .await;
    assert_eq!(status, 200, "{agent}");
    let (alice, bob) = (
        server.reviewer_token("alice").await,
        server.reviewer_token("bob").await,
    );
    let set = propose_priority(&server, &task, "P0").await;
    let item = format!("/api/change-sets/{set}/items/0");
    let post = reqwest::Method::POST;
    let (status, edited) = server
        .send_as(
            &alice,
            post.clone(),
            &format!("{item}/edit"),
            &json!({"args": {"priority": "P3"}, "revision": 0}),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert!(
        edited["message"]
            .as_str()
            .is_some_and(|m| m.contains("1 of 2 approvals")),
        "a pattern's quorum: {edited}"
    );
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    let shown = &shown["items"][0];
    assert_eq!(shown["args"], json!({"priority": "P3"}), "{shown}");
    assert_eq!(shown["proposedArgs"], json!({"priority": "P0"}));
    assert_eq!(shown["revision"], 1);
    assert!(shown["editedBy"].is_string(), "{shown}");

    let confirm = format!("{item}/confirm");
    let (status, stale) = server
        .send_as(&bob, post.clone(), &confirm, &json!({"revision": 0}))
        .await;
    assert_eq!(status, 409, "{stale}");
    assert_eq!(stale["conflictKind"], "revisionMoved", "{stale}");
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_ne!(task_now["priority"], "P3", "nothing counted");
    let (status, bad) = server
        .send_as(&bob, post.clone(), &confirm, &json!({"revision": "one"}))
        .await;
    assert_eq!(status, 400, "{bad}");
    let (status, applied) = server
        .send_as(&bob, post, &confirm, &json!({"revision": 1}))
        .await;
    assert_eq!(status, 200, "{applied}");
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(task_now["priority"], "P3", "the edited revision ran");
}
