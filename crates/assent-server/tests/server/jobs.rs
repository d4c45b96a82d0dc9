//! The execution ledger through the server: a confirmed item of an external tool runs
//! from the server's own executor within 2 s, its run shows on the item, and the job
//! routes settle what needs a person.

use crate::support::{TOKEN, read};
use assent_confirm::{JobSettings, WakeRequest};
use assent_domain::{OffsetDateTime, Target};
use assent_server::Server;
use assent_store::{Store, agents};
use assent_tests::external::{self, CATEGORY, HttpHost, Receiver, TOOL};
use assent_tests::tool_calls;
use assent_tools::AgentPolicy;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[tokio::test]
async fn a_confirmed_external_item_runs_within_two_seconds_and_shows_its_run() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(&format!("sqlite://{}/jobs.db", dir.path().display()))
        .await
        .expect("store");
    let receiver = Receiver::start(false, Duration::ZERO);
    let engine = external::engine(
        store.clone(),
        HttpHost::new(&receiver.url, false, false),
        JobSettings::default(),
    )
    .await;
    let now = OffsetDateTime::now_utc();
    let mut conn = store.read_connection().await.expect("conn");
    agents::upsert(&mut conn, "poster", &AgentPolicy::new([CATEGORY]), now)
        .await
        .expect("agent");
    drop(conn);
    let calls = tool_calls(&[(TOOL, json!({"text": "hi"}))]);
    let request = WakeRequest::new("poster", Target::new("endpoint", "e1"), "run-1", calls);
    let set = engine.wakes().wake(request, now).await.expect("wake");
    let set = set.change_set.expect("queued").id;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(Server::new(engine, TOKEN).run(listener, async {
        let _ = stopped.await;
    }));
    let client = reqwest::Client::new();
    let call = |method: Method, path: String, body: Value| {
        let request = client
            .request(method, format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .json(&body);
        async move { read(request.send().await.expect("send")).await }
    };

    let (status, confirmed) = call(
        Method::POST,
        format!("/api/change-sets/{set}/items/0/confirm"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{confirmed}");
    let started = Instant::now();
    let item = loop {
        let (_, view) = call(Method::GET, format!("/api/change-sets/{set}"), json!({})).await;
        let item = view["items"][0].clone();
        if item["execution"]["status"] == "applied" {
            break item;
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "not run within 2 s: {item}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        item["status"], "confirmed",
        "the item's own status is unchanged"
    );
    assert_eq!(item["execution"]["result"], "receiver said posted");
    assert_eq!(receiver.effects.lock().expect("lock").len(), 1);

    let (_, decided) = call(
        Method::GET,
        "/api/decisions?agentId=poster".to_owned(),
        json!({}),
    )
    .await;
    assert_eq!(decided[0]["verdict"], "confirmed", "{decided}");
    assert_eq!(decided[0]["execution"]["status"], "applied", "{decided}");

    let (status, jobs) = call(Method::GET, "/api/jobs".to_owned(), json!({})).await;
    assert_eq!(status, 200, "{jobs}");
    let job = &jobs[0];
    assert_eq!(assent_tests::sorted_keys(job), assent_tests::JOB_FIELDS);
    assert_eq!(
        (job["status"].as_str(), job["attempts"].as_u64()),
        (Some("applied"), Some(1))
    );
    let id = job["id"].as_str().expect("id");
    let (status, body) = call(
        Method::POST,
        format!("/api/jobs/{id}/resolve"),
        json!({"resolution": "rerun"}),
    )
    .await;
    assert_eq!(status, 409, "not in doubt: {body}");
    assert_eq!(body["conflictKind"], "notInDoubt", "{body}");
    let (status, body) = call(
        Method::POST,
        format!("/api/jobs/{id}/resolve"),
        json!({"resolution": "maybe"}),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = call(
        Method::POST,
        format!("/api/jobs/{}/retry", uuid::Uuid::nil()),
        json!({}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    let _ = stop.send(());
    served.await.expect("joined").expect("clean stop");
}
