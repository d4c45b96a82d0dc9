//! `/api/webhooks` against a real server and a real receiver (verifying with the
//! `standardwebhooks` package): add (the only answer with the secret; bad URLs and
//! events refused), list without secrets, test, a sub-agent's question delivered as
//! `confirmation.requested`, deliveries, redelivery and removal; a Slack URL answered
//! masked.

use crate::support::{TestServer, next_event};
use assent_tests::receiver::{Receiver, python};
use assent_webhooks::{Sender, SenderConfig};
use reqwest::Method;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn webhooks_over_the_api_and_a_sub_agents_question_delivered() {
    let Some(python) = python() else { return };
    let receiver = Receiver::start(&python, 0);
    let server = TestServer::start_delegating().await;

    for (body, why) in [
        (
            json!({"url": "http://example.com/hook"}),
            "plain http beyond loopback",
        ),
        (
            json!({"url": receiver.url("x"), "events": ["item.exploded"]}),
            "an unknown event",
        ),
        (
            json!({"url": receiver.url("x"), "format": "teams"}),
            "an unknown format",
        ),
        (json!({"url": "not a url"}), "not a URL"),
        (
            json!({"url": receiver.url("x"), "extra": 1}),
            "an unknown field",
        ),
    ] {
        let (status, problem) = server.post("/api/webhooks", body).await;
        assert_eq!(status, 400, "{why}: {problem}");
    }
    let (status, _) = server.get("/api/webhooks").await;
    assert_eq!(status, 200);
    assert_eq!(server.get("/api/webhooks").await.1, json!([]));

    let (status, added) = server
        .post(
            "/api/webhooks",
            json!({"url": receiver.url("api"), "events": ["confirmation.requested"]}),
        )
        .await;
    assert_eq!(status, 201, "{added}");
    let secret = added["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    assert_eq!(added["events"], json!(["confirmation.requested"]));
    assert_eq!(added["format"], "standard");
    let id = added["id"].as_str().unwrap().to_owned();
    receiver.configure("api", &secret, 0, 0, 0);
    let (_, listed) = server.get("/api/webhooks").await;
    assert_eq!(listed[0]["id"], id.as_str());
    assert!(!listed.to_string().contains("whsec_"), "{listed}");

    let (status, tested) = server
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!((status, &tested["ok"]), (200, &json!(true)), "{tested}");
    let received = receiver.received_by("api");
    assert_eq!(received[0]["body"]["type"], "webhook.test");
    assert_eq!(received[0]["verified"], true);

    // A sub-agent asks; the question becomes an event, delivered signed.
    let task = server.agent_and_task("Asked over a webhook").await;
    let mut buffer = String::new();
    let mut stream = server.events(&mut buffer).await;
    let calls = json!([{"id": "call_1", "type": "function", "function": {
        "name": "update_task_priority", "arguments": "{\"priority\":\"P0\"}"}}]);
    let wake = server.spawn_delegated_wake("researcher", &task, calls);
    let asked = next_event(&mut stream, &mut buffer, "confirmationRequested").await;
    let sender = Sender::new(server.store.clone(), SenderConfig::default()).unwrap();
    // The forwarder writes the event in a task of its own: deliver until it is there.
    let start = std::time::Instant::now();
    let question = loop {
        sender.deliver_due().await.unwrap();
        let received = receiver.received_by("api");
        if let Some(q) = received
            .iter()
            .find(|r| r["body"]["type"] == "confirmation.requested")
        {
            break q.clone();
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{received:#?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(question["verified"], true);
    let data = &question["body"]["data"];
    assert_eq!(data["correlationId"], asked["request"]["correlationId"]);
    assert_eq!(data["agentPath"], "review/researcher");
    assert_eq!(data["agentId"], "triage");
    assert_eq!(data["toolName"], "update_task_priority");
    assert_eq!(data["target"]["taskId"], task.as_str());
    let correlation = data["correlationId"].as_str().unwrap();
    let (status, _) = server
        .post(
            &format!("/api/confirmations/{correlation}"),
            json!({"outcome": {"kind": "proceedOnce"}}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(wake.await.unwrap().0, 200);

    let (status, rows) = server.get("/api/webhooks/deliveries").await;
    assert_eq!(status, 200);
    assert_eq!(rows[0]["status"], "delivered", "{rows}");
    assert_eq!(rows[0]["eventType"], "confirmation.requested");
    let (_, dead) = server.get("/api/webhooks/deliveries?failed=true").await;
    assert_eq!(dead, json!([]));
    let delivery = rows[0]["id"].as_i64().unwrap();
    let (status, again) = server
        .post(
            &format!("/api/webhooks/deliveries/{delivery}/redeliver"),
            json!({}),
        )
        .await;
    assert_eq!((status, &again["status"]), (200, &json!("pending")));
    let (status, _) = server
        .post("/api/webhooks/deliveries/999999/redeliver", json!({}))
        .await;
    assert_eq!(status, 404);

    let remove = |path: String| server.request(Method::DELETE, &path).send();
    assert_eq!(
        remove(format!("/api/webhooks/{id}"))
            .await
            .unwrap()
            .status(),
        204
    );
    assert_eq!(
        remove(format!("/api/webhooks/{id}"))
            .await
            .unwrap()
            .status(),
        404
    );
    assert_eq!(
        remove("/api/webhooks/not-a-uuid".into())
            .await
            .unwrap()
            .status(),
        400
    );
    let (status, _) = server
        .post(&format!("/api/webhooks/{id}/test"), json!({}))
        .await;
    assert_eq!(status, 404);
    let anonymous = server
        .client
        .get(format!("{}/api/webhooks", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    server.stop().await.unwrap();
}

#[tokio::test]
async fn a_slack_url_is_answered_masked_and_posted_to_whole() {
    let server = TestServer::start().await;
    let url = "https://hooks.slack.com/services/T000/B000/s3cretTOKENwxyz";
    let masked = "https://hooks.slack.com/…/wxyz";
    let (status, added) = server
        .post(
            "/api/webhooks",
            json!({"url": url, "format": "slack", "events": ["item.failed", "item.inDoubt"]}),
        )
        .await;
    assert_eq!(status, 201, "{added}");
    assert_eq!(added["url"], masked);
    assert!(
        added["secret"]
            .as_str()
            .is_some_and(|s| s.starts_with("whsec_"))
    );
    let (status, listed) = server.get("/api/webhooks").await;
    assert_eq!(status, 200);
    assert_eq!(listed[0]["url"], masked, "the field keeps its name");
    for shown in [added.to_string(), listed.to_string()] {
        assert!(!shown.contains("s3cret"), "{shown}");
    }
    // The whole URL stays stored: it is what the sender posts to.
    let id: assent_domain::Uuid = listed[0]["id"].as_str().unwrap().parse().unwrap();
    let mut conn = server.store.read_connection().await.unwrap();
    let whole = assent_store::webhooks::receiver_url(&mut conn, id)
        .await
        .unwrap();
    assert_eq!(whole.as_deref(), Some(url));
    drop(conn);
    server.stop().await.unwrap();
}
