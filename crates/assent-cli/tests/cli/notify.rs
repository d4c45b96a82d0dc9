//! `assent notify`: phone channels are added with the person their links answer as,
//! listed without their secrets and removed; bad input (a plain `http://` or `smtp://`
//! off loopback, a topic URL naming no topic, an address that is none, `--as` missing or
//! empty) is refused (exit 2) and changes nothing.

use super::{Cli, assert_fails, code};

#[test]
fn channels_are_added_listed_without_secrets_and_removed() {
    let cli = Cli::new();
    assert_eq!(
        cli.json(&["notify", "ntfy", "list"], ""),
        serde_json::json!([])
    );
    for (args, says) in [
        (
            vec![
                "notify",
                "ntfy",
                "add",
                "http://ntfy.example.com/alerts",
                "--as",
                "alice",
            ],
            "plain http:// only to loopback",
        ),
        (
            vec!["notify", "ntfy", "add", "https://ntfy.sh/", "--as", "alice"],
            "ends in its topic",
        ),
        (
            vec![
                "notify",
                "ntfy",
                "add",
                "https://ntfy.sh/alerts",
                "--as",
                " ",
            ],
            "--as needs a name",
        ),
        (
            vec![
                "notify",
                "email",
                "add",
                "not-an-address",
                "--as",
                "alice",
                "--smtp",
                "smtp://127.0.0.1:25",
            ],
            "invalid email address",
        ),
        (
            vec![
                "notify",
                "email",
                "add",
                "alice@example.com",
                "--as",
                "alice",
                "--smtp",
                "smtp://mail.example.com",
            ],
            "plain smtp:// only to loopback",
        ),
        (
            vec![
                "notify",
                "email",
                "add",
                "alice@example.com",
                "--as",
                "alice",
                "--smtp",
                "http://mail.example.com",
            ],
            "expected smtps:// or smtp://",
        ),
    ] {
        assert_fails(&cli.run(&args), 2, says);
    }
    assert_eq!(
        cli.json(&["notify", "ntfy", "list"], ""),
        serde_json::json!([])
    );
    assert_eq!(
        cli.json(&["notify", "email", "list"], ""),
        serde_json::json!([])
    );

    let added = cli.json(
        &[
            "notify",
            "ntfy",
            "add",
            "https://ntfy.sh/alerts-7f3k",
            "--token",
            "tk_secret_token",
            "--as",
            "alice",
        ],
        "",
    );
    assert_eq!(added["kind"], "ntfy");
    assert_eq!(added["as"], "alice");
    let ntfy = added["id"].as_str().expect("an id").to_owned();
    let mail = cli.json(
        &[
            "notify",
            "email",
            "add",
            "alice@example.com",
            "--as",
            "alice",
            "--smtp",
            "smtps://alice:mail-password@smtp.example.com:465",
        ],
        "",
    );
    assert_eq!(mail["address"], "alice@example.com");
    let starttls = cli.run(&[
        "notify",
        "email",
        "add",
        "bob@example.com",
        "--as",
        "bob",
        "--smtp",
        "smtp://smtp.example.com:587?tls=required",
    ]);
    assert_eq!(
        code(&starttls),
        0,
        "{}",
        String::from_utf8_lossy(&starttls.stderr)
    );

    let listed = cli.json(&["notify", "ntfy", "list"], "");
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
    assert_eq!(listed[0]["address"], "https://ntfy.sh/alerts-7f3k");
    for shown in [
        listed.to_string(),
        cli.json(&["notify", "email", "list"], "").to_string(),
        String::from_utf8_lossy(&cli.run(&["notify", "email", "list"]).stdout).into_owned(),
        String::from_utf8_lossy(&cli.run(&["notify", "ntfy", "list"]).stdout).into_owned(),
    ] {
        assert!(
            !shown.contains("tk_secret") && !shown.contains("mail-password"),
            "{shown}"
        );
    }
    assert_eq!(code(&cli.run(&["notify", "ntfy", "remove", &ntfy])), 0);
    assert_fails(
        &cli.run(&["notify", "ntfy", "remove", &ntfy]),
        1,
        "no channel",
    );
    assert_eq!(
        cli.json(&["notify", "ntfy", "list"], ""),
        serde_json::json!([])
    );
}
