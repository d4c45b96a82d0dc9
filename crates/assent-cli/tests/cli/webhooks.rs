//! `assent webhooks`: the contract of add (`--json` keys, the secret shown once), list,
//! remove, test, deliveries, redeliver and deliver; refused URLs, events and formats
//! change nothing; a Slack URL is never shown whole. Delivery to a real receiver is
//! covered by the integration tests.

use super::{CALLS, Cli, assert_fails, code};
use serde_json::Value;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn webhooks_are_added_listed_without_secrets_delivered_and_removed() {
    let cli = Cli::new();
    let empty = cli.run(&["webhooks"]);
    assert_eq!(code(&empty), 0);
    assert!(stdout(&empty).contains("No webhooks"));

    assert_fails(
        &cli.run(&["webhooks", "add", "http://example.com/hook"]),
        1,
        "--allow-http",
    );
    assert_fails(
        &cli.run(&["webhooks", "add", "ftp://127.0.0.1/x"]),
        1,
        "invalid webhook URL",
    );
    assert_fails(
        &cli.run(&[
            "webhooks",
            "add",
            "https://example.com/h",
            "--events",
            "item.exploded",
        ]),
        1,
        "unknown webhook event",
    );
    assert_fails(
        &cli.run(&[
            "webhooks",
            "add",
            "https://example.com/h",
            "--format",
            "teams",
        ]),
        1,
        "unknown webhook format",
    );
    assert_eq!(cli.json(&["webhooks"], ""), serde_json::json!([]));

    // Port 9 (discard) on loopback: nothing listens, so every attempt fails.
    let added = cli.json(
        &[
            "webhooks",
            "add",
            "http://127.0.0.1:9/hook",
            "--events",
            "changeSet.created,changeSet.resolved",
        ],
        "",
    );
    let keys: Vec<&str> = added
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys, ["events", "format", "id", "secret", "url"]);
    let secret = added["secret"].as_str().expect("secret");
    assert!(secret.starts_with("whsec_"));
    assert_eq!(
        added["events"],
        serde_json::json!(["changeSet.created", "changeSet.resolved"])
    );
    let id = added["id"].as_str().expect("id").to_owned();
    let text = cli.run(&[
        "webhooks",
        "add",
        "http://example.com/h",
        "--allow-http",
        "--format",
        "slack",
        "--agent",
        "a",
    ]);
    assert_eq!(code(&text), 0);
    assert!(stdout(&text).contains("shown only this once"));

    let listed = cli.json(&["webhooks"], "");
    assert_eq!(listed.as_array().map(Vec::len), Some(2));
    // Both were made at the fixed --now: find the Slack one rather than rely on order.
    let slack = listed
        .as_array()
        .and_then(|all| all.iter().find(|s| s["format"] == "slack"))
        .expect("the slack subscription");
    assert_eq!(slack["agentId"], "a");
    let table = stdout(&cli.run(&["webhooks"]));
    for shown in [listed.to_string(), table] {
        assert!(
            !shown.contains("whsec_") && !shown.contains(secret),
            "{shown}"
        );
    }
    let other = slack["id"].as_str().expect("id").to_owned();
    assert_eq!(code(&cli.run(&["webhooks", "remove", &other])), 0);
    assert_fails(
        &cli.run(&["webhooks", "remove", &other]),
        1,
        "no webhook subscription",
    );
    assert_fails(
        &cli.run(&["webhooks", "remove", "nope"]),
        1,
        "invalid webhook subscription id",
    );

    let task = cli.agent_and_task();
    assert_eq!(
        code(&cli.run_with(&["wake", "--agent", "a", "--task", &task], CALLS)),
        0
    );
    let queued = cli.json(&["webhooks", "deliveries"], "");
    assert_eq!(queued.as_array().map(Vec::len), Some(1), "{queued}");
    assert_eq!(queued[0]["eventType"], "changeSet.created");
    assert_eq!(queued[0]["status"], "pending");
    let report = cli.json(&["webhooks", "deliver"], "");
    assert_eq!(report["retrying"], 1, "{report}");
    let failed = cli.json(&["webhooks", "deliveries"], "");
    assert_eq!(failed[0]["attempts"], 1);
    assert_eq!(failed[0]["lastError"], "cannot connect");
    assert_eq!(
        cli.json(&["webhooks", "deliveries", "--failed"], ""),
        serde_json::json!([])
    );
    let delivery = failed[0]["id"].as_i64().expect("id").to_string();
    assert_eq!(
        cli.json(&["webhooks", "redeliver", &delivery], "")["status"],
        "pending"
    );
    assert_fails(
        &cli.run(&["webhooks", "redeliver", "999999"]),
        1,
        "no webhook delivery",
    );

    let tested = cli.run(&["--json", "webhooks", "test", &id]);
    assert_eq!(code(&tested), 1);
    let body: Value = serde_json::from_slice(&tested.stdout).expect("JSON");
    assert_eq!(body["ok"], false);
    assert_eq!(code(&cli.run(&["webhooks", "remove", &id])), 0);
    assert_eq!(
        cli.json(&["webhooks", "deliveries"], ""),
        serde_json::json!([])
    );
}

#[test]
fn a_slack_url_is_a_secret_shown_masked_everywhere() {
    let cli = Cli::new();
    let url = "https://hooks.slack.com/services/T000/B000/s3cretTOKENwxyz";
    let masked = "https://hooks.slack.com/…/wxyz";
    let added = cli.json(
        &[
            "webhooks",
            "add",
            url,
            "--format",
            "slack",
            "--events",
            "changeSet.created,item.failed,item.inDoubt",
        ],
        "",
    );
    assert_eq!(added["url"], masked, "{added}");
    assert_eq!(
        added["events"],
        serde_json::json!(["changeSet.created", "item.failed", "item.inDoubt"])
    );
    let text = cli.run(&["webhooks", "add", url, "--format", "slack"]);
    assert_eq!(code(&text), 0);
    assert!(stdout(&text).contains(masked), "{}", stdout(&text));

    let listed = cli.json(&["webhooks"], "");
    assert_eq!(listed[0]["url"], masked, "the field keeps its name");
    let table = stdout(&cli.run(&["webhooks"]));
    assert!(table.contains(masked), "{table}");

    let task = cli.agent_and_task();
    assert_eq!(
        code(&cli.run_with(&["wake", "--agent", "a", "--task", &task], CALLS)),
        0
    );
    let deliveries = cli.json(&["webhooks", "deliveries"], "");
    assert_eq!(deliveries[0]["url"], masked, "{deliveries}");
    let deliveries_table = stdout(&cli.run(&["webhooks", "deliveries"]));
    for shown in [
        added.to_string(),
        stdout(&text),
        listed.to_string(),
        table,
        deliveries.to_string(),
        deliveries_table,
    ] {
        assert!(!shown.contains("s3cret"), "{shown}");
    }
}

/// Issue 37: a generic receiver's credentials (`?token=`, `user:pass@` is refused at
/// add) never appear in `webhooks add`, the listing or the deliveries, in text or JSON.
#[test]
fn a_receivers_query_token_is_redacted_in_every_listing() {
    let cli = Cli::new();
    let url = "https://receiver.example/hook?token=s3cr3tTOKEN&v=2";
    let added = cli.run(&["webhooks", "add", url]);
    assert_eq!(
        code(&added),
        0,
        "{}",
        String::from_utf8_lossy(&added.stderr)
    );
    let said = stdout(&added);
    assert!(
        said.contains("https://receiver.example/hook?token=…&v=…"),
        "{said}"
    );
    let added = cli.json(&["webhooks", "add", url], "");
    assert_eq!(added["url"], "https://receiver.example/hook?token=…&v=…");
    let listed = cli.run(&["webhooks"]);
    let json = cli.json(&["webhooks"], "");
    let task = cli.agent_and_task();
    cli.json(&["wake", "--agent", "a", "--task", &task], CALLS);
    let deliveries = cli.run(&["webhooks", "deliveries"]);
    let deliveries_json = cli.json(&["webhooks", "deliveries"], "");
    for shown in [
        stdout(&listed),
        json.to_string(),
        stdout(&deliveries),
        deliveries_json.to_string(),
    ] {
        assert!(shown.contains("token=…&v=…"), "{shown}");
        assert!(!shown.contains("s3cr3tTOKEN"), "{shown}");
    }
    assert!(
        deliveries_json.as_array().is_some_and(|d| !d.is_empty()),
        "the wake queued deliveries: {deliveries_json}"
    );
    // Refused as before, user info in the URL, and the refusal does not repeat it.
    let refused = cli.run(&["webhooks", "add", "https://ann:pa55@receiver.example/hook"]);
    assert_fails(&refused, 1, "invalid webhook URL");
    assert!(!String::from_utf8_lossy(&refused.stderr).contains("pa55"));
}
