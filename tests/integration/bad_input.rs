//! Bad input gets a clear error (or a reply to the agent) and changes nothing.

use assent_changeset::{ToolArguments, ToolCall, parse_tool_calls};
use assent_confirm::ConfirmError;
use assent_confirm::ItemRef;
use assent_domain::Uuid;
use assent_tests::{NOW, TestApp};
use serde_json::json;

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall::new("c1", name, ToolArguments::Text(arguments.into()))
}

#[tokio::test]
async fn malformed_calls_documents_are_errors_before_anything_is_written() {
    for document in [
        json!({"nope": 1}),
        json!([{"type": "tool_use", "name": "x"}]),
        json!([1, 2]),
        json!("calls"),
    ] {
        let err = parse_tool_calls(&document).unwrap_err();
        assert!(!err.to_string().contains('\n'), "one line: {err}");
    }
}

#[tokio::test]
async fn bad_arguments_are_replies_and_leave_the_database_unchanged() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let before = app.fingerprint().await;
    let huge = format!("{{\"title\": \"{}\"}}", "x".repeat(1 << 20));
    let cases = [
        call("set_task_title", "{not json"),
        call("set_task_title", "[\"an\", \"array\"]"),
        call("update_task_estimate", "{\"minutes\": \"soon\"}"),
        call("update_task_priority", "{\"priority\": 1}"),
        call("no_such_tool", "{}"),
        call("set_task_title", &huge),
    ];
    for bad in cases {
        let name = bad.name.clone();
        let outcome = app.wake_calls(&task, vec![bad]).await.unwrap();
        assert_eq!(outcome.change_set, None, "{name}");
        let reply = &outcome.responses[0].content;
        assert!(reply.starts_with("Error: "), "{name}: {reply}");
        assert!(
            reply.len() < 400,
            "the reply stays short even for a 1 MiB argument: {} bytes",
            reply.len()
        );
        assert_eq!(
            app.fingerprint().await,
            before,
            "{name} changed the database"
        );
    }
}

#[tokio::test]
async fn unknown_sets_and_indexes_are_clear_errors() {
    let app = TestApp::spawn().await;
    let task = app.scene().await;
    let set = app
        .wake(&task, &[("set_task_title", json!({"title": "X"}))])
        .await
        .change_set
        .unwrap()
        .id;
    let before = app.fingerprint().await;
    let service = app.engine.confirmations();
    let missing = Uuid::new_v4();
    assert_eq!(
        service
            .confirm_item(ItemRef::new(missing, 0), NOW)
            .await
            .unwrap_err()
            .to_string(),
        format!("no change set {missing}")
    );
    let err = service
        .confirm_item(ItemRef::new(set, 3), NOW)
        .await
        .unwrap_err();
    assert!(matches!(err, ConfirmError::ItemNotFound { .. }));
    assert_eq!(
        err.to_string(),
        format!("change set {set} has no item 3 (it has 1 item(s))")
    );
    assert!(matches!(
        service
            .edit_and_confirm(ItemRef::new(set, 0), json!({"title": 7}), NOW)
            .await
            .unwrap_err(),
        ConfirmError::InvalidArgs { .. }
    ));
    assert!(matches!(
        service
            .edit_and_confirm(ItemRef::new(set, 0), json!("title"), NOW)
            .await
            .unwrap_err(),
        ConfirmError::InvalidArgs { .. }
    ));
    assert!(service.dismiss(missing, None, NOW).await.is_err());
    assert_eq!(app.fingerprint().await, before);
}

#[tokio::test]
async fn the_fingerprint_sees_every_row() {
    let app = TestApp::spawn().await;
    let empty = app.fingerprint().await;
    app.scene().await;
    let scene = app.fingerprint().await;
    assert_ne!(empty, scene);
    assert!(
        scene.contains("Fix login bug") && scene.contains("Walk dog"),
        "{scene}"
    );
}
