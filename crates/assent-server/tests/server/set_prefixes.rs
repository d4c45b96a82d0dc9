//! A set is named in a path by its whole id or by the first 8 or more hex digits of it
//! (issue 25): a unique prefix works on every route of a set, a shorter one is a 400, one
//! no set has a 404, one several sets share a 400 saying how many. An agent's token
//! names its sets by their whole ids only.

use crate::support::{TestServer, read};
use assent_domain::{
    ChangeItem, ChangeSet, LEGACY_TARGET_KIND, NewChangeSet, OffsetDateTime, Target, Uuid,
};
use assent_store::change_sets;
use reqwest::Method;
use serde_json::json;

/// Two pending sets of `triage` on `task` whose ids share their first 20 hex digits.
async fn two_sets_sharing_a_prefix(server: &TestServer, task: &str) {
    let mut conn = server.store.read_connection().await.expect("a connection");
    for id in [
        "0000000a-0000-4000-8000-000000000001",
        "0000000a-0000-4000-8000-100000000002",
    ] {
        let set = ChangeSet::new(NewChangeSet {
            id: Uuid::parse_str(id).expect("a UUID"),
            agent_id: "triage".to_owned(),
            target: Target::new(LEGACY_TARGET_KIND, task),
            thread_id: "t".to_owned(),
            run_key: "r".to_owned(),
            items: vec![ChangeItem::new(
                "update_task_priority",
                json!({"priority": "P1"}),
                "Priority: P1",
            )],
            created_at: OffsetDateTime::UNIX_EPOCH,
        })
        .expect("a set");
        change_sets::insert(&mut conn, &set, OffsetDateTime::UNIX_EPOCH)
            .await
            .expect("inserted");
    }
}

#[tokio::test]
async fn a_set_is_decided_by_the_first_eight_digits_of_its_id() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Prefixes").await;
    let set = server.propose(&task).await;
    let short = &set[..8];

    let (status, shown) = server
        .get(&format!("/api/change-sets/{}", short.to_uppercase()))
        .await;
    assert_eq!((status, shown["id"].as_str()), (200, Some(set.as_str())));
    let (status, confirmed) = server
        .post(
            &format!("/api/change-sets/{short}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{confirmed}");
    assert_eq!(confirmed["decision"]["changeSetId"], set.as_str());
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{short}/items/0/confirm"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "already confirmed: {body}");

    let (status, body) = server
        .post(
            &format!("/api/change-sets/{}/items/1/confirm", &set[..7]),
            json!({}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("invalid change set id")),
        "{body}"
    );
    let other = if set.starts_with('f') { "e" } else { "f" };
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{other}{}/dismiss", &set[1..8]),
            json!({}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("no change set")),
        "{body}"
    );
    let (status, body) = server
        .post(
            &format!("/api/change-sets/{}/confirm-all", &set[..13]),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    // An agent's token: the whole id, never a prefix.
    let token = server.token("agent", Some("triage")).await;
    let as_agent = |path: String| {
        server
            .client
            .request(Method::GET, format!("{}{path}", server.base))
            .bearer_auth(&token)
            .send()
    };
    let (status, _) = read(
        as_agent(format!("/api/change-sets/{set}"))
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(status, 200);
    let (status, body) = read(
        as_agent(format!("/api/change-sets/{short}"))
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(status, 400, "{body}");
}

#[tokio::test]
async fn a_prefix_several_sets_share_is_a_bad_request_naming_how_many() {
    let server = TestServer::start().await;
    let task = server.agent_and_task("Ambiguous").await;
    two_sets_sharing_a_prefix(&server, &task).await;

    for (method, path) in [
        (Method::GET, "/api/change-sets/0000000a"),
        (Method::POST, "/api/change-sets/0000000a/items/0/confirm"),
        (
            Method::POST,
            "/api/change-sets/0000000A-0000-4000/items/0/reject",
        ),
        (Method::POST, "/api/change-sets/0000000a-0000/items/0/defer"),
        (Method::POST, "/api/change-sets/0000000a/confirm-all"),
        (
            Method::POST,
            "/api/change-sets/0000000a-0000-4000-8000-/dismiss",
        ),
    ] {
        let (status, body) = read(
            server
                .request(method, path)
                .json(&json!({}))
                .send()
                .await
                .expect("send"),
        )
        .await;
        assert_eq!(status, 400, "{path}: {body}");
        assert!(
            body["detail"]
                .as_str()
                .is_some_and(|d| d.starts_with("2 change sets have ids starting with 0000000a")),
            "{path}: {body}"
        );
    }
    let (status, shown) = server
        .get("/api/change-sets/0000000a-0000-4000-8000-1")
        .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["id"], "0000000a-0000-4000-8000-100000000002");
}
