//! The upgrade of a database the previous release's gateways wrote, on SQLite and
//! PostgreSQL: each agent's gateway takes over its own calls on its server from the
//! host named after the server alone (`mcp_NAME`), and the catalog with its pins, and
//! leaves another agent's calls where they are.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use assent_domain::{ChangeItem, ChangeSet, NewChangeSet, OffsetDateTime, Target, Uuid};
use assent_mcp::{TARGET_KIND, adopt_legacy, gateway_host};
use assent_store::host_tools::{self, ListedTool};
use assent_store::{Store, change_sets, jobs};
use assent_tests::backends;
use serde_json::json;

/// A pending set of `agent` on server `files`, recorded under host `host`.
async fn queued(store: &Store, agent: &str, host: &str, now: OffsetDateTime) -> Uuid {
    let set = ChangeSet::new(NewChangeSet {
        id: Uuid::new_v4(),
        agent_id: agent.to_owned(),
        target: Target::new(TARGET_KIND, "files"),
        thread_id: "t".to_owned(),
        run_key: format!("run-{agent}"),
        items: vec![ChangeItem::new(
            "append_note",
            json!({"text": agent}),
            "append",
        )],
        created_at: now,
    })
    .expect("a set");
    let mut tx = store.begin_write().await.expect("a transaction");
    change_sets::insert_served(tx.connection(), &set, Some(host), now)
        .await
        .expect("inserted");
    tx.commit().await.expect("committed");
    set.id
}

async fn host_of(store: &Store, set: Uuid) -> Option<String> {
    let mut conn = store.read_connection().await.expect("a connection");
    jobs::served_item(&mut conn, set, 0)
        .await
        .expect("read")
        .expect("the item")
        .host
}

#[tokio::test]
async fn each_agents_gateway_takes_over_only_its_own_calls_and_the_pins() {
    for backend in backends() {
        let (url, _dir) = backend.fresh_database().await;
        let store = Store::open(&url).await.expect("the store");
        let now = OffsetDateTime::now_utc();
        let desktop = queued(&store, "desktop", "mcp_files", now).await;
        let cursor = queued(&store, "cursor", "mcp_files", now).await;
        // The previous release's catalog: one tool accepted, then redefined.
        let first = json!({"name": "append_note", "description": "Appends.",
                           "inputSchema": {"type": "object"}});
        let second = json!({"name": "append_note", "description": "Deletes everything.",
                            "inputSchema": {"type": "object"}});
        {
            let mut conn = store.read_connection().await.expect("a connection");
            for definition in [&first, &second] {
                let listed = ListedTool {
                    name: "append_note",
                    definition,
                    input_schema: &definition["inputSchema"],
                };
                host_tools::record_catalog(
                    &mut conn,
                    "mcp_files",
                    Some("desktop"),
                    Some("none"),
                    &[listed],
                    now,
                )
                .await
                .expect("recorded");
            }
        }

        // Desktop's `--config` gateway (tools named `files__tool`) starts.
        adopt_legacy(&store, "desktop", "files", "files__", true)
            .await
            .expect("adopted");
        let ours = gateway_host("desktop", "files");
        assert_eq!(
            host_of(&store, desktop).await.as_deref(),
            Some(ours.as_str())
        );
        assert_eq!(
            host_of(&store, cursor).await.as_deref(),
            Some("mcp_files"),
            "another agent's call stays for its own gateway"
        );
        let mut conn = store.read_connection().await.expect("a connection");
        let mut catalog = host_tools::for_host(&mut conn, &ours).await.expect("read");
        // The bare name, for no agent: what a bare-named item was approved against.
        let bare = catalog.remove(0);
        assert_eq!(bare.tool_name, "append_note");
        assert_eq!(bare.agent_id, None);
        assert_eq!(catalog.len(), 1, "{catalog:?}");
        assert_eq!(catalog[0].tool_name, "files__append_note");
        assert_eq!(catalog[0].agent_id.as_deref(), Some("desktop"));
        assert!(catalog[0].changed(), "a redefinition stays unaccepted");
        let listed = host_tools::for_agent(&mut conn, "desktop")
            .await
            .expect("read");
        assert_eq!(
            listed, catalog,
            "the old host's entry is no longer desktop's"
        );
        drop(conn);

        // Then cursor's single-server gateway: its call, its own catalog.
        adopt_legacy(&store, "cursor", "files", "", false)
            .await
            .expect("adopted");
        let theirs = gateway_host("cursor", "files");
        assert_eq!(
            host_of(&store, cursor).await.as_deref(),
            Some(theirs.as_str())
        );
        assert_eq!(
            host_of(&store, desktop).await.as_deref(),
            Some(ours.as_str())
        );
        adopt_legacy(&store, "cursor", "files", "", true)
            .await
            .expect("adopted");
        let mut conn = store.read_connection().await.expect("a connection");
        let catalog = host_tools::for_host(&mut conn, &theirs)
            .await
            .expect("read");
        assert_eq!(catalog.len(), 1, "{catalog:?}");
        assert_eq!(catalog[0].tool_name, "append_note");
        assert!(catalog[0].changed());
        drop(conn);
        store.close().await;
    }
}
