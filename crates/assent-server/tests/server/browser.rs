//! The review page in headless Chromium, driven through chromedriver (WebDriver):
//! log in, see the pending items, confirm one, reject one with a reason, see both
//! resolved and the task changed, and an agent's markup shown as text, never run; a
//! sub-agent's request in the "Sub-agents are asking" panel, allowed once from there;
//! long arguments of an item and of a request shown by both ends, then opened whole;
//! values shown by their type (an object as `key: value` lines, never JSON) and a set's
//! status in people's words ("1 of 2 decided").
//!
//! Chromium and chromedriver come from Debian (`cargo xtask ci` installs them when
//! missing). Without them the test says so and passes, except under `CI=true`, where
//! it fails: CI must never skip the browser.

use crate::support::{TOKEN, TestServer};
use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const XSS_TITLE: &str = "<img src=x onerror=alert(1)>";

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the browser is installed; under `CI=true` its absence is a failure.
fn browser_available() -> bool {
    let present = Path::new(CHROMEDRIVER).exists() && Path::new(CHROMIUM).exists();
    if !present {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "CI=true but {CHROMEDRIVER} or {CHROMIUM} is missing: install Debian's chromium and chromium-driver"
        );
        // A test talking to the person running it: the skip must not be silent.
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "skipping the browser test: {CHROMEDRIVER} or {CHROMIUM} is missing (apt-get install chromium chromium-driver)"
            );
        }
    }
    present
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

async fn start_driver() -> (Driver, Client) {
    let port = free_port();
    let child = Command::new(CHROMEDRIVER)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let profile = tempfile::tempdir().expect("profile directory");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _profile: profile,
    };
    let args = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1000,1100",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .chain([format!(
        "--user-data-dir={}",
        driver._profile.path().display()
    )])
    .collect::<Vec<_>>();
    let mut capabilities = Map::new();
    capabilities.insert(
        "goog:chromeOptions".to_owned(),
        json!({"binary": CHROMIUM, "args": args}),
    );
    let mut last_error = String::new();
    // chromedriver needs a moment to listen; this waits for readiness, it measures nothing.
    for _ in 0..100 {
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        match ClientBuilder::new(connector)
            .capabilities(capabilities.clone())
            .connect(&driver.url)
            .await
        {
            Ok(client) => return (driver, client),
            Err(error) => last_error = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("chromedriver did not start a session: {last_error}");
}

/// The first element matching `css`, waiting for it to appear.
async fn find(client: &Client, css: &str) -> Element {
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("no element {css}: {e}"))
}

/// The text of the first element matching `css`. The page re-renders a card when an
/// update arrives (from our own request and again from the event stream), so an element
/// found a moment ago can be replaced before it is read: find it again until the read
/// succeeds.
async fn text_of(client: &Client, css: &str) -> String {
    let mut last_error = String::new();
    for _ in 0..100 {
        match find(client, css).await.text().await {
            Ok(text) => return text,
            Err(error) => last_error = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not read the text of {css}: {last_error}");
}

/// The texts of every element matching `css`, read in one pass that is retried when a
/// re-render replaced an element mid-read (see [`text_of`]).
async fn texts_of(client: &Client, css: &str) -> Vec<String> {
    let mut last_error = String::new();
    'retry: for _ in 0..100 {
        let elements = client
            .find_all(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("query {css}: {e}"));
        let mut texts = Vec::with_capacity(elements.len());
        for element in elements {
            match element.text().await {
                Ok(text) => texts.push(text),
                Err(error) => {
                    last_error = error.to_string();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue 'retry;
                }
            }
        }
        return texts;
    }
    panic!("could not read the texts of {css}: {last_error}");
}

/// Clicks the first element matching `css`, finding it again if a re-render replaced it
/// between the find and the click.
async fn click(client: &Client, css: &str) {
    let mut last_error = String::new();
    for _ in 0..100 {
        match find(client, css).await.click().await {
            Ok(()) => return,
            Err(error) => last_error = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not click {css}: {last_error}");
}

/// Types `keys` into the first element matching `css`; when a re-render replaced the
/// field mid-way, the new one is cleared and typed into again.
async fn type_into(client: &Client, css: &str, keys: &str) {
    let mut last_error = String::new();
    for _ in 0..100 {
        let field = find(client, css).await;
        match field.clear().await {
            Ok(()) => match field.send_keys(keys).await {
                Ok(()) => return,
                Err(error) => last_error = error.to_string(),
            },
            Err(error) => last_error = error.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("could not type into {css}: {last_error}");
}

/// Opens the page at `base` and logs in with the server's token (Enter in the token
/// field; the first test clicks the button).
async fn log_in(client: &Client, base: &str) {
    log_in_as(client, base, TOKEN).await;
}

/// [`log_in`] with the token `secret`.
async fn log_in_as(client: &Client, base: &str, secret: &str) {
    client.goto(base).await.expect("open the page");
    find(client, "#token")
        .await
        .send_keys(&format!("{secret}\u{E007}"))
        .await
        .expect("log in with Enter");
}

/// Waits until `script` (a JS expression) is true in the page.
async fn wait_until(client: &Client, script: &str) {
    for _ in 0..200 {
        let value = client
            .execute(&format!("return Boolean({script});"), vec![])
            .await
            .expect("run script");
        if value == Value::Bool(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let html = client.source().await.unwrap_or_default();
    panic!("never true: {script}\npage:\n{html}");
}

fn screenshot_path(name: &str) -> PathBuf {
    // The workspace's target directory: <crate>/../../target/screenshots.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot directory");
    dir.join(name)
}

#[tokio::test]
async fn a_reviewer_confirms_and_rejects_in_the_browser() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let task = server.agent_and_task("Fix login bug").await;
    let set = server.propose(&task).await;
    let xss_task = server.agent_and_task(XSS_TITLE).await;
    let xss_set = server.propose(&xss_task).await;

    let (_driver, client) = start_driver().await;
    client.goto(&server.base).await.expect("open the page");
    let token_input = find(&client, "#token").await;
    token_input.send_keys(TOKEN).await.expect("type the token");
    find(&client, "#login button[type=submit]")
        .await
        .click()
        .await
        .expect("log in");

    let card = format!("[data-set-id=\"{set}\"]");
    find(&client, &format!("{card} li.item.pending .summary")).await;
    wait_until(&client, "document.body.dataset.live === 'true'").await;
    let login_form = client.find(Locator::Css("#login")).await.expect("form");
    assert!(
        !login_form.is_displayed().await.expect("visibility"),
        "the login form is gone after logging in"
    );
    // The header shows the server's proof of what ran (`assent audit verify`).
    wait_until(
        &client,
        "document.getElementById('proof').textContent === 'verified'",
    )
    .await;
    assert_eq!(
        text_of(&client, &format!("{card} .suggests")).await,
        "Agent triage suggests 2 changes"
    );
    assert_eq!(
        text_of(&client, &format!("{card} .set-status")).await,
        "waiting for you: 0 of 2 decided"
    );

    // The agent's markup is text wherever it appears: the card title and the list.
    let xss_card = format!("[data-set-id=\"{xss_set}\"]");
    assert_eq!(
        text_of(&client, &format!("{xss_card} .task-title")).await,
        XSS_TITLE
    );
    let images = client
        .find_all(Locator::Css("#sets img"))
        .await
        .expect("query");
    assert!(images.is_empty(), "the title became markup");
    assert!(
        client.get_alert_text().await.is_err(),
        "an alert dialog is open"
    );

    client
        .screenshot()
        .await
        .map(|png| std::fs::write(screenshot_path("review-pending.png"), png))
        .expect("screenshot")
        .expect("write screenshot");

    // ✓ on the priority item.
    click(
        &client,
        &format!("{card} li[data-index=\"0\"] button.confirm"),
    )
    .await;
    find(&client, &format!("{card} li[data-index=\"0\"].confirmed")).await;
    find(&client, &format!("{card} .set-status.partiallyResolved")).await;
    assert_eq!(
        text_of(&client, &format!("{card} .set-status")).await,
        "1 of 2 decided"
    );

    // ✗ on the checklist item, with a reason typed and submitted from the keyboard.
    click(
        &client,
        &format!("{card} li[data-index=\"1\"] button.reject"),
    )
    .await;
    type_into(
        &client,
        &format!("{card} li[data-index=\"1\"] input.reason"),
        "we track tests elsewhere\u{E007}",
    )
    .await;
    find(&client, &format!("{card} li[data-index=\"1\"].rejected")).await;
    assert_eq!(
        text_of(
            &client,
            &format!("{card} li[data-index=\"1\"] .reason-text")
        )
        .await,
        "Reason: we track tests elsewhere"
    );
    assert_eq!(
        texts_of(&client, &format!("{card} li.item .badge")).await,
        ["confirmed", "rejected"]
    );
    find(&client, &format!("{card} .set-status.resolved")).await;
    assert_eq!(
        text_of(&client, &format!("{card} .set-status")).await,
        "all decided"
    );
    wait_until(
        &client,
        &format!(
            "document.querySelector('{card} .task-state').textContent.includes('priority P0')"
        ),
    )
    .await;
    assert!(
        client.get_alert_text().await.is_err(),
        "an alert dialog is open"
    );

    // What the page did is what the server holds.
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["status"], "resolved");
    let (_, decisions) = server
        .get(&format!("/api/decisions?agentId=triage&taskId={task}"))
        .await;
    assert!(
        decisions
            .as_array()
            .expect("list")
            .iter()
            .any(|d| d["reason"] == "we track tests elsewhere")
    );

    client
        .set_window_size(1000, 1100)
        .await
        .expect("window size");
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review.png"), png).expect("write screenshot");

    // Phone width: nothing overflows sideways.
    client.set_window_size(390, 844).await.expect("phone size");
    wait_until(
        &client,
        "document.documentElement.scrollWidth <= window.innerWidth",
    )
    .await;
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-phone.png"), png).expect("write screenshot");

    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_change_made_elsewhere_appears_without_reload() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let task = server.agent_and_task("Live task").await;
    let (_driver, client) = start_driver().await;
    client.goto(&server.base).await.expect("open the page");
    let token_input = find(&client, "#token").await;
    token_input
        .send_keys("not-the-token-at-all\u{E007}")
        .await
        .expect("log in with a wrong token");
    wait_until(
        &client,
        "document.getElementById('login-error').textContent.includes('not accepted')",
    )
    .await;
    token_input.clear().await.expect("clear the field");
    token_input
        .send_keys(&format!("{TOKEN}\u{E007}"))
        .await
        .expect("log in with Enter");
    wait_until(&client, "document.body.dataset.live === 'true'").await;
    let cards = client
        .find_all(Locator::Css("#sets .card"))
        .await
        .expect("query");
    assert!(cards.is_empty());

    let set = server.propose(&task).await;
    let card = format!("[data-set-id=\"{set}\"]");
    find(&client, &format!("{card} li[data-index=\"0\"].pending")).await;
    server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            json!({}),
        )
        .await;
    find(&client, &format!("{card} li[data-index=\"0\"].confirmed")).await;

    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_sub_agents_request_is_shown_as_text_and_allowed_once_from_the_page() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start_delegating().await;
    let task = server.agent_and_task("Delegated in the browser").await;
    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    wait_until(&client, "document.body.dataset.live === 'true'").await;
    assert!(
        !find(&client, "#asking")
            .await
            .is_displayed()
            .await
            .expect("visibility"),
        "the panel is hidden while nobody asks"
    );

    let calls = json!([{"id": "call_1", "type": "function", "function": {
        "name": "add_checklist_item",
        "arguments": json!({"title": XSS_TITLE}).to_string(),
    }}]);
    let wake = server.spawn_delegated_wake("researcher", &task, calls);
    let request = "#requests li.request";
    assert_eq!(
        text_of(&client, &format!("{request} .agent-path")).await,
        "review/researcher"
    );
    assert_eq!(
        text_of(&client, &format!("{request} .tool")).await,
        "add_checklist_item"
    );
    assert!(
        text_of(&client, &format!("{request} .summary"))
            .await
            .contains(XSS_TITLE)
    );
    assert_eq!(
        text_of(&client, &format!("{request} .args")).await,
        format!("title: {XSS_TITLE}")
    );
    let images = client
        .find_all(Locator::Css("#asking img"))
        .await
        .expect("query");
    assert!(images.is_empty(), "the sub-agent's text became markup");
    assert!(
        client.get_alert_text().await.is_err(),
        "an alert dialog is open"
    );
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-delegated.png"), png).expect("write screenshot");

    click(&client, &format!("{request} button.allow-once")).await;
    let (status, body) = wake.await.expect("the wake task does not panic");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["calls"][0]["result"], "applied", "{body}");
    wait_until(
        &client,
        "document.querySelectorAll('#requests li.request').length === 0 && document.getElementById('asking').hidden",
    )
    .await;
    let (_, shown) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(shown["checklist"][0]["title"], XSS_TITLE, "{shown}");

    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn long_arguments_show_both_ends_and_open_whole() {
    use crate::review::{APPENDED_KEY, files_server, long_content, long_path, propose_write};
    if !browser_available() {
        return;
    }
    let server = files_server().await;
    let (path, content) = (long_path(), long_content());
    let set = propose_write(&server, &json!({"path": path, "content": content})).await;
    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    let item = format!("[data-set-id=\"{set}\"] li[data-index=\"0\"]");
    find(&client, &format!("{item} .change.arg")).await;

    // In the row: each argument on its own line, both ends of the long ones in sight.
    let lines = texts_of(&client, &format!("{item} .change.arg")).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("content: ssh-ed25519"), "{lines:?}");
    assert!(lines[0].ends_with(APPENDED_KEY), "{lines:?}");
    assert!(lines[1].starts_with("path: /home/u/"), "{lines:?}");
    assert!(lines[1].ends_with("/.ssh/authorized_keys"), "{lines:?}");
    assert!(lines.iter().all(|l| l.contains("chars cut")), "{lines:?}");
    let full = format!("{item} details.full");
    assert!(
        !find(&client, &format!("{full} pre"))
            .await
            .is_displayed()
            .await
            .expect("visibility"),
        "whole values wait behind a click"
    );

    // One click shows everything whole, and it stays open when the row is drawn again.
    click(&client, &format!("{full} summary")).await;
    let whole = json!([
        "Write File(path: /home/u/dddddddddddddddddddddddddddddddddddddddddddddddddddd…)",
        content,
        path
    ]);
    let check = format!(
        "JSON.stringify([...document.querySelectorAll('{item} details.full[open] pre')].map((p) => p.textContent)) === JSON.stringify({whole})"
    );
    wait_until(&client, &check).await;
    client.set_window_size(390, 844).await.expect("phone size");
    wait_until(
        &client,
        "document.documentElement.scrollWidth <= window.innerWidth",
    )
    .await;
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-long-arguments.png"), png).expect("write screenshot");
    let (status, body) = server
        .post(&format!("/api/change-sets/{set}/items/0/defer"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    find(&client, &format!("{item}.deferred")).await;
    wait_until(&client, &check).await;

    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn a_sub_agents_long_request_shows_both_ends_and_opens_whole() {
    use crate::review::APPENDED_KEY;
    if !browser_available() {
        return;
    }
    let server = TestServer::start_delegating().await;
    let task = server.agent_and_task("Delegated, long").await;
    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    wait_until(&client, "document.body.dataset.live === 'true'").await;

    let title = format!("Review {} {APPENDED_KEY}", "x".repeat(300));
    let calls = json!([{"id": "call_1", "type": "function", "function": {
        "name": "add_checklist_item",
        "arguments": json!({"title": title}).to_string(),
    }}]);
    let wake = server.spawn_delegated_wake("researcher", &task, calls);
    let request = "#requests li.request";
    let args = text_of(&client, &format!("{request} .args")).await;
    assert!(args.starts_with("title: Review xxx"), "{args}");
    assert!(args.ends_with(APPENDED_KEY), "{args}");
    assert!(args.contains("chars cut"), "{args}");
    click(&client, &format!("{request} details.full summary")).await;
    let check = format!(
        "[...document.querySelectorAll('{request} details.full[open] pre')].some((p) => p.textContent === {})",
        json!(title)
    );
    wait_until(&client, &check).await;

    click(&client, &format!("{request} button.allow-once")).await;
    let (status, body) = wake.await.expect("the wake task does not panic");
    assert_eq!(status, 200, "{body}");
    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn values_show_by_their_type_and_never_as_json() {
    use crate::review::{files_server, propose_write};
    if !browser_available() {
        return;
    }
    let server = files_server().await;
    let args = json!({
        "path": "/tmp/notes.txt",
        "content": "hello",
        "options": {"mode": 420, "backup": true, "owner": {"name": "u", "groups": ["staff", "wheel"]}},
    });
    let set = propose_write(&server, &args).await;
    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    let card = format!("[data-set-id=\"{set}\"]");
    let item = format!("{card} li[data-index=\"0\"]");
    find(&client, &format!("{item} .change.arg")).await;
    assert_eq!(
        text_of(&client, &format!("{card} .set-status")).await,
        "waiting for you: 0 of 1 decided"
    );
    assert_eq!(text_of(&client, &format!("{item} .badge")).await, "waiting");

    // Each argument on its line; the object as `key: value` lines, the nested object
    // indented under its key, a list of text as one line.
    let lines = texts_of(&client, &format!("{item} .change.arg")).await;
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "content: hello");
    assert_eq!(lines[2], "path: /tmp/notes.txt");
    let mut options: Vec<&str> = lines[1].lines().map(str::trim).collect();
    assert_eq!(options.first(), Some(&"options:"), "{lines:?}");
    options.sort_unstable();
    assert_eq!(
        options,
        [
            "backup: true",
            "groups: staff, wheel",
            "mode: 420",
            "name: u",
            "options:",
            "owner:"
        ],
        "{lines:?}"
    );
    find(&client, &format!("{item} .value-object .value-object")).await;
    let shown = text_of(&client, "#sets").await;
    assert!(
        !shown.contains('{') && !shown.contains('"'),
        "no JSON reaches the person: {shown}"
    );

    let (status, body) = server
        .post(&format!("/api/change-sets/{set}/items/0/defer"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    find(&client, &format!("{item}.deferred")).await;
    assert_eq!(text_of(&client, &format!("{item} .badge")).await, "put off");
    assert_eq!(
        text_of(&client, &format!("{card} .set-status")).await,
        "waiting for you: 0 of 1 decided, 1 put off"
    );
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-typed-values.png"), png).expect("write screenshot");

    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

#[tokio::test]
async fn an_applied_change_is_undone_from_the_page_through_a_new_set() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let task = server.agent_and_task("Undo me").await;
    // A priority to go back to: the proposal below replaces P2.
    let calls = serde_json::json!([{"id": "c", "type": "function", "function": {
        "name": "update_task_priority", "arguments": "{\"priority\":\"P2\"}"}}]);
    let (_, wake) = server
        .post(
            "/api/wakes",
            serde_json::json!({"agentId": "triage", "taskId": task, "toolCalls": calls}),
        )
        .await;
    let first = wake["changeSetId"].as_str().expect("a set");
    let (status, _) = server
        .post(
            &format!("/api/change-sets/{first}/items/0/confirm"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 200);
    let set = server.propose(&task).await;
    let (status, _) = server
        .post(
            &format!("/api/change-sets/{set}/items/0/confirm"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(status, 200);

    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    let card = format!("[data-set-id=\"{set}\"]");
    // The confirmed priority offers Undo; the pending checklist item does not.
    click(&client, &format!("{card} li[data-index=\"0\"] button.undo")).await;
    let reversal = "li.item.pending .summary";
    wait_until(
        &client,
        &format!(
            "[...document.querySelectorAll('#sets {reversal}')].some(e => e.textContent === 'Undo: Set priority to P2')"
        ),
    )
    .await;
    assert!(
        client
            .find_all(Locator::Css(&format!(
                "{card} li[data-index=\"1\"] button.undo"
            )))
            .await
            .expect("query")
            .is_empty(),
        "a pending item has no Undo"
    );
    let (_, sets) = server.get("/api/change-sets?agentId=triage").await;
    let undo = sets
        .as_array()
        .expect("a list")
        .iter()
        .find(|s| {
            s["undoes"]["changeSetId"] == set.as_str()
                || s["items"][0]["humanSummary"] == "Undo: Set priority to P2"
        })
        .expect("the reversal is a pending set");
    assert_eq!(undo["items"][0]["args"]["priority"], "P2");
    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

/// A held tool's confirmation offers "Undo (N s)" on the page while its window runs;
/// clicking it cancels the job and the item ends rejected (issue 28).
#[tokio::test]
async fn a_held_confirmation_is_taken_back_with_the_pages_undo_button() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let task = server.agent_and_task("Hold me").await;
    let (status, held) = server
        .send_as(
            TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/holds/update_task_priority",
            &serde_json::json!({"seconds": 300}),
        )
        .await;
    assert_eq!(status, 200, "{held}");
    let set = server.propose(&task).await;

    let (_driver, client) = start_driver().await;
    log_in(&client, &server.base).await;
    let item = format!("[data-set-id=\"{set}\"] li[data-index=\"0\"]");
    click(&client, &format!("{item} button.confirm")).await;
    wait_until(
        &client,
        &format!(
            "[...document.querySelectorAll('{item} button.cancel-hold')].some(b => /^Undo \\(\\d+ s\\)$/.test(b.textContent))"
        ),
    )
    .await;
    click(&client, &format!("{item} button.cancel-hold")).await;
    wait_until(
        &client,
        &format!("document.querySelector('{item}') && document.querySelector('{item}').classList.contains('rejected')"),
    )
    .await;
    let (_, shown) = server.get(&format!("/api/change-sets/{set}")).await;
    assert_eq!(shown["items"][0]["status"], "rejected");
    assert_eq!(
        shown["items"][0]["reason"],
        "Cancelled during the hold window"
    );
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_ne!(task_now["priority"], "P0", "nothing ran");
    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

/// Issue 37: an edit under a quorum is what the next approver sees on the page (the
/// edited arguments, who edited), and their ✓ confirms that revision.
#[tokio::test]
async fn the_next_approver_sees_an_edit_under_a_quorum_and_confirms_that_revision() {
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let task = server.agent_and_task("Two people").await;
    let (status, rule) = server
        .send_as(
            TOKEN,
            reqwest::Method::PUT,
            "/api/agents/triage/rules/update_task_priority",
            &json!({"action": "ask", "approvals": 2}),
        )
        .await;
    assert_eq!(status, 200, "{rule}");
    let set = server.propose(&task).await;
    let alice = server.reviewer_token("alice").await;
    let (status, edited) = server
        .send_as(
            &alice,
            reqwest::Method::POST,
            &format!("/api/change-sets/{set}/items/0/edit"),
            &json!({"args": {"priority": "P3"}, "revision": 0}),
        )
        .await;
    assert_eq!(status, 200, "{edited}");

    let (_driver, client) = start_driver().await;
    // The next approver: a person of their own (the server's token names nobody).
    let bob = server.reviewer_token("bob").await;
    log_in_as(&client, &server.base, &bob).await;
    let item = format!("[data-set-id=\"{set}\"] li[data-index=\"0\"]");
    find(&client, &format!("{item} .badge.edited")).await;
    assert!(
        text_of(&client, &format!("{item} .badge.edited"))
            .await
            .starts_with("edited by "),
        "who edited is shown"
    );
    let row = text_of(&client, &item).await;
    assert!(row.contains("P3"), "the page shows what runs: {row}");
    assert!(row.contains("1 of 2 approvals"), "{row}");
    click(&client, &format!("{item} button.confirm")).await;
    wait_until(
        &client,
        &format!("document.querySelector('{item}') && document.querySelector('{item}').classList.contains('confirmed')"),
    )
    .await;
    let (_, task_now) = server.get(&format!("/api/tasks/{task}")).await;
    assert_eq!(task_now["priority"], "P3", "the revision shown ran");
    client.close().await.expect("close the browser");
    server.stop().await.expect("clean stop");
}

/// Issue 56, point 4: the page on a phone (390×844 in Chromium): one open item a
/// screen, with the agent, the tool, every argument and the diff as a multi-line
/// unified diff (never one line joined with ⏎), thumb-sized Approve / Reject / Edit;
/// each item at its own anchor (`#item-<set>-<index>`, what a phone door's View opens);
/// installable (manifest, icons, a service worker), and offline the worker answers the
/// shell only: an API call fails rather than being answered from a stored copy.
#[tokio::test]
async fn the_page_on_a_phone_shows_one_item_a_screen_with_its_diff_and_installs() {
    use assent_domain::{ChangeItem, ChangeSet, NewChangeSet, OffsetDateTime, Target};
    if !browser_available() {
        return;
    }
    let server = TestServer::start().await;
    let diff = "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n fn main() {\n-    println!(\"old\");\n+    println!(\"new\");\n }";
    let mut edit = ChangeItem::new(
        "Edit",
        json!({"file_path": "/w/src/lib.rs", "old_string": "println!(\"old\");",
            "new_string": "println!(\"new\");"}),
        "Edit(file_path: /w/src/lib.rs)",
    );
    edit.before = Some(json!(diff));
    let bash = ChangeItem::new(
        "Bash",
        json!({"command": "cargo test", "description": "Run the tests"}),
        "Bash(command: cargo test)",
    );
    let set = ChangeSet::new(NewChangeSet {
        id: uuid::Uuid::new_v4(),
        agent_id: "coder".to_owned(),
        target: Target::new("workspace", "/w"),
        thread_id: "th".to_owned(),
        run_key: "r".to_owned(),
        items: vec![edit, bash],
        created_at: OffsetDateTime::now_utc(),
    })
    .expect("a set");
    let mut conn = server.store.read_connection().await.expect("conn");
    assent_store::change_sets::insert(&mut conn, &set, OffsetDateTime::now_utc())
        .await
        .expect("inserted");
    drop(conn);

    let (_driver, client) = start_driver().await;
    client.set_window_size(390, 844).await.expect("phone size");
    log_in(&client, &server.base).await;
    let first = format!("item-{}-0", set.id);
    find(&client, &format!("#{first} pre.diff")).await;
    let lines = texts_of(&client, &format!("#{first} pre.diff .diff-line")).await;
    assert_eq!(lines, diff.lines().map(str::trim_end).collect::<Vec<_>>());
    let row = text_of(&client, &format!("#{first}")).await;
    for shown in [
        "Agent coder",
        "Edit",
        "file_path: /w/src/lib.rs",
        "old_string: println!(\"old\");",
        "new_string: println!(\"new\");",
    ] {
        assert!(row.contains(shown), "{shown:?} in {row}");
    }
    assert!(!row.contains('⏎'), "a diff keeps its lines: {row}");
    // One item a screen, its buttons thumb-sized and named, nothing wider than the phone.
    wait_until(
        &client,
        &format!("document.getElementById('{first}').getBoundingClientRect().height >= window.innerHeight * 0.8"),
    )
    .await;
    wait_until(
        &client,
        &format!("[...document.querySelectorAll('#{first} .buttons button')].length === 3 && [...document.querySelectorAll('#{first} .buttons button')].every((b) => b.getBoundingClientRect().height >= 48 && b.getBoundingClientRect().width >= 48)"),
    )
    .await;
    let labels: Value = client
        .execute(
            &format!("return [...document.querySelectorAll('#{first} .buttons button')].map((b) => b.textContent + getComputedStyle(b, '::after').content.replace(/\"/g, '').replace(/^none$/, ''));"),
            vec![],
        )
        .await
        .expect("labels");
    assert_eq!(labels, json!(["✓ Approve", "✗ Reject", "Edit"]));
    wait_until(
        &client,
        "document.documentElement.scrollWidth <= window.innerWidth",
    )
    .await;
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-phone-item.png"), png).expect("write screenshot");

    // The second item's own anchor opens at it.
    let second = format!("item-{}-1", set.id);
    client
        .goto(&format!("{}/#{second}", server.base))
        .await
        .expect("open the item's link");
    client.refresh().await.expect("reload at the anchor");
    find(&client, &format!("#{second} .buttons")).await;
    wait_until(
        &client,
        &format!("Math.abs(document.getElementById('{second}').getBoundingClientRect().top) < window.innerHeight / 2 && window.scrollY > 0"),
    )
    .await;
    let png = client.screenshot().await.expect("screenshot");
    std::fs::write(screenshot_path("review-phone-anchor.png"), png).expect("write screenshot");

    // Installable: the manifest names the page and its icons; the worker takes over.
    let manifest: Value = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             fetch(document.querySelector('link[rel=manifest]').href).then((r) => r.json()).then(done, (e) => done(String(e)));",
            vec![],
        )
        .await
        .expect("the manifest");
    assert_eq!(manifest["display"], "standalone", "{manifest}");
    let sizes: Vec<&str> = manifest["icons"]
        .as_array()
        .expect("icons")
        .iter()
        .filter_map(|i| i["sizes"].as_str())
        .collect();
    assert_eq!(sizes, ["192x192", "512x512"]);
    for icon in ["/assets/icon-192.png", "/assets/icon-512.png"] {
        let response = server
            .client
            .get(format!("{}{icon}", server.base))
            .send()
            .await
            .expect("icon");
        assert_eq!(response.headers()["content-type"], "image/png");
        assert!(
            response
                .bytes()
                .await
                .expect("bytes")
                .starts_with(b"\x89PNG")
        );
    }
    wait_until(&client, "navigator.serviceWorker.controller !== null").await;

    // Offline: the shell comes from the worker's copy, an API call fails.
    let base = server.base.clone();
    server.stop().await.expect("clean stop");
    let offline: Value = client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             const token = sessionStorage.getItem('assent.token');
             Promise.all([
               fetch('/').then((r) => r.status, (e) => 'failed'),
               fetch('/api/change-sets', { headers: { authorization: 'Bearer ' + token } }).then((r) => r.status, (e) => 'failed'),
             ]).then(done);",
            vec![],
        )
        .await
        .expect("offline fetches");
    assert_eq!(offline, json!([200, "failed"]), "at {base}");
    client.close().await.expect("close the browser");
}
