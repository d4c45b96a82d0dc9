//! The policy file over the API (issue 57): `GET /api/policy` as TOML or JSON, `POST
//! /api/policy/plan` and `/apply` with the file as the body, for admin tokens only; an
//! invalid file is 400 with its line and column and writes nothing; applying names the
//! token's person and the file's hash on the consent chain.

use crate::support::{TestServer, read};
use reqwest::Method;
use serde_json::{Value, json};

/// `POST path` with `secret` and the TOML `text` as the body: status and JSON.
async fn send_file(server: &TestServer, secret: &str, path: &str, text: &str) -> (u16, Value) {
    read(
        server
            .client
            .post(format!("{}{path}", server.base))
            .bearer_auth(secret)
            .header("content-type", "application/toml")
            .body(text.to_owned())
            .send()
            .await
            .expect("send"),
    )
    .await
}

/// `GET /api/policy` as TOML.
async fn exported(server: &TestServer, secret: &str) -> String {
    let response = server
        .client
        .get(format!("{}/api/policy", server.base))
        .bearer_auth(secret)
        .send()
        .await
        .expect("send");
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .expect("text")
            .starts_with("text/plain")
    );
    response.text().await.expect("the file")
}

#[tokio::test]
async fn an_admin_exports_plans_and_applies_the_policy_file_and_nobody_else_does() {
    let server = TestServer::start().await;
    server.agent_and_task("Policy").await;
    let admin = {
        let (status, body) = server
            .post("/api/tokens", json!({"role": "admin", "person": "erin"}))
            .await;
        assert_eq!(status, 201, "{body}");
        body["secret"].as_str().expect("secret").to_owned()
    };
    let text = exported(&server, &admin).await;
    assert!(
        text.starts_with("version = 1\n\n[[agents]]\nid = \"triage\""),
        "{text}"
    );
    let (status, as_json) = read(
        server
            .request(Method::GET, "/api/policy")
            .header("accept", "application/json")
            .send()
            .await
            .expect("send"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(as_json["agents"][0]["id"], "triage");

    // The export plans to nothing; a changed file plans its change.
    let (status, plan) = send_file(&server, &admin, "/api/policy/plan", &text).await;
    assert_eq!((status, plan["pending"].clone()), (200, json!(0)), "{plan}");
    let changed =
        format!("{text}\n[[agents.rules]]\ntool = \"update_task_*\"\naction = \"deny\"\n");
    let (status, plan) = send_file(&server, &admin, "/api/policy/plan", &changed).await;
    assert_eq!(status, 200, "{plan}");
    assert_eq!(plan["pending"], 1);
    assert_eq!(plan["changes"][0]["change"], "setRule");
    assert_eq!(plan["changes"][0]["backtest"]["rule"], "deny");

    // Neither a reviewer nor an agent token may read or change it.
    let reviewer = server.token("reviewer", None).await;
    for (method, path) in [
        (Method::GET, "/api/policy"),
        (Method::POST, "/api/policy/plan"),
        (Method::POST, "/api/policy/apply"),
    ] {
        let status = server
            .client
            .request(method, format!("{}{path}", server.base))
            .bearer_auth(&reviewer)
            .body(changed.clone())
            .send()
            .await
            .expect("send")
            .status();
        assert_eq!(status, 403, "{path}");
    }

    // One invalid rule: 400 with its line and column, nothing written.
    let bad = format!("{changed}\n[[agents.rules]]\ntool = \"x\"\naction = \"maybe\"\n");
    let line = bad.lines().count();
    let (status, problem) = send_file(&server, &admin, "/api/policy/apply", &bad).await;
    assert_eq!(status, 400, "{problem}");
    let detail = problem["detail"].as_str().expect("detail");
    assert!(
        detail.contains(&format!("line {line}, column 10")),
        "{detail}"
    );
    assert_eq!(exported(&server, &admin).await, text);

    // Applied by erin's token: in force, and on the chain with the file's hash.
    let (status, applied) = send_file(&server, &admin, "/api/policy/apply", &changed).await;
    assert_eq!(status, 200, "{applied}");
    assert_eq!(applied["applied"], 1);
    let by = applied["by"].as_str().expect("by").to_owned();
    assert!(by.contains("erin"), "{by}");
    assert_eq!(exported(&server, &admin).await, changed);
    // The connection goes back to the pool before the server verifies the chain.
    let entries = {
        let mut conn = server.store.read_connection().await.expect("a connection");
        assent_store::chain::entries(&mut conn)
            .await
            .expect("entries")
    };
    let last = entries
        .iter()
        .rev()
        .find(|e| e.kind == "rules")
        .expect("a rules entry");
    let content: Value = serde_json::from_str(&last.content).expect("JSON");
    assert_eq!(content["by"], by);
    assert_eq!(content["policyFile"]["sha256"], applied["sha256"]);
    let (status, verified) = server.get("/api/audit/verify").await;
    assert_eq!(status, 200, "{verified}");
    server.stop().await.expect("clean stop");
}
