//! `assent slack`: connecting the app takes its secrets from flags or the environment
//! and never shows them again; bad input is refused (exit 2) and changes nothing; the
//! users who may decide are mapped, listed and removed.

use super::{Cli, assert_fails, code};

#[test]
fn connect_keeps_its_secrets_and_maps_who_may_decide() {
    let cli = Cli::new();
    assert_eq!(
        cli.json(&["slack", "status"], ""),
        serde_json::json!({"connected": null, "users": []})
    );
    assert_fails(
        &cli.run_in_env(
            &["slack", "connect", "--channel", "C1"],
            "",
            &[
                ("ASSENT_SLACK_BOT_TOKEN", "not-a-bot-token"),
                ("ASSENT_SLACK_SIGNING_SECRET", "s3cret-signing"),
            ],
        ),
        2,
        "xoxb-",
    );
    assert_fails(
        &cli.run_in_env(
            &["slack", "connect", "--channel", "C1 <!channel>"],
            "",
            &[
                ("ASSENT_SLACK_BOT_TOKEN", "xoxb-secret-bot-token"),
                ("ASSENT_SLACK_SIGNING_SECRET", "s3cret-signing"),
            ],
        ),
        2,
        "invalid Slack channel",
    );
    assert_eq!(
        cli.json(&["slack", "status"], "")["connected"],
        serde_json::Value::Null
    );

    let out = cli.run_in_env(
        &[
            "slack",
            "connect",
            "--channel",
            "C1",
            "--slack-api-url",
            "http://127.0.0.1:9/api/",
        ],
        "",
        &[
            ("ASSENT_SLACK_BOT_TOKEN", "xoxb-secret-bot-token"),
            ("ASSENT_SLACK_SIGNING_SECRET", "s3cret-signing"),
        ],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        code(&cli.run(&["slack", "users", "add", "U0123", "--as", "alice"])),
        0
    );
    assert_fails(
        &cli.run(&["slack", "users", "add", "U 1", "--as", "bob"]),
        2,
        "invalid Slack user",
    );
    let status = cli.json(&["slack", "status"], "");
    assert_eq!(status["connected"]["channel"], "C1");
    assert_eq!(status["connected"]["apiUrl"], "http://127.0.0.1:9/api/");
    assert_eq!(
        status["users"],
        serde_json::json!([{"userId": "U0123", "name": "alice"}])
    );
    for shown in [
        status.to_string(),
        String::from_utf8_lossy(&cli.run(&["slack", "status"]).stdout).into_owned(),
    ] {
        assert!(
            !shown.contains("xoxb-secret") && !shown.contains("s3cret"),
            "{shown}"
        );
    }
    assert_eq!(code(&cli.run(&["slack", "users", "remove", "U0123"])), 0);
    assert_fails(
        &cli.run(&["slack", "users", "remove", "U0123"]),
        1,
        "no Slack user U0123",
    );
    assert_eq!(cli.json(&["slack", "disconnect"], "")["disconnected"], true);
}

#[test]
fn socket_mode_needs_an_app_level_token_before_anything_starts() {
    let cli = Cli::new();
    assert_fails(
        &cli.run(&[
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--slack-socket",
            "--slack-app-token",
            "xoxb-not-an-app-token",
        ]),
        2,
        "xapp-",
    );
}
