//! The MCP gateway's cost: an immediate call (`read_note` of the in-tree fixture server,
//! run at once under `--trust hints`) made through the gateway against the same call
//! made directly to the same kind of upstream, alternating call by call in one run.
//!
//! Both sides speak to a fixture child over stdio with rmcp's client. The gateway side
//! adds what `assent mcp` adds: the gateway (`assent_mcp::Gateway`, in this process,
//! reached over an in-memory duplex stream instead of a second pipe), its wake (a write
//! transaction at `synchronous = FULL`: policy, the action audit record), the upstream
//! call with no lock held, and the result's own short transaction. The client's pipe to
//! an `assent mcp` process is not counted (a few µs per message); HTTP is not measured.

use crate::measure::{micros, percentile};
use anyhow::{Context, bail};
use assent_mcp::{Deadlines, Gateway, GatewayOptions, Trust, Upstream};
use assent_store::{Store, agents};
use assent_tools::AgentPolicy;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::TokioChildProcess;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the comparison found: per-call latencies of each side and what the gateway adds.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayResult {
    /// The transport measured.
    pub over: &'static str,
    /// Timed calls per side.
    pub calls: usize,
    pub direct_p50_us: f64,
    pub direct_p99_us: f64,
    pub gateway_p50_us: f64,
    pub gateway_p99_us: f64,
    /// Gateway p50 − direct p50: what one call through the gateway costs more.
    pub added_p50_us: f64,
    pub added_p99_us: f64,
    /// The gateway's database durability (the shipped one).
    pub synchronous: &'static str,
}

/// The fixture server built beside this binary (`cargo xtask bench` builds it), if any.
pub fn fixture_beside_me() -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    let fixture = me.with_file_name("assent-mcp-fixture");
    fixture.exists().then_some(fixture)
}

async fn client_of(fixture: &Path) -> anyhow::Result<RunningService<RoleClient, ()>> {
    let mut child = tokio::process::Command::new(fixture);
    child.kill_on_drop(true);
    let transport = TokioChildProcess::new(child).context("starting the fixture server")?;
    Ok(().serve(transport).await?)
}

async fn read_once(
    client: &RunningService<RoleClient, ()>,
    tool: &str,
    note: &Path,
) -> anyhow::Result<Duration> {
    let args = json!({"path": note});
    let params = CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().cloned().unwrap_or_default());
    let start = Instant::now();
    let result = client.call_tool(params).await?;
    let took = start.elapsed();
    if result.is_error == Some(true) {
        bail!("{tool} failed: {result:?}");
    }
    Ok(took)
}

/// Measures `calls` immediate calls each way (after `warmup` each), alternating.
pub async fn measure(fixture: &Path, calls: usize, warmup: usize) -> anyhow::Result<GatewayResult> {
    let dir = tempfile::tempdir()?;
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "a note the agent reads\n")?;
    let url = format!("sqlite://{}", dir.path().join("gateway.db").display());
    let store = Store::open(&url).await?;
    let mut conn = store.pool().acquire().await?;
    let now = time::OffsetDateTime::now_utc();
    agents::upsert(&mut conn, "bench", &AgentPolicy::new(["mcp"]), now).await?;
    drop(conn);

    let direct = client_of(fixture).await?;
    let fixture_command = fixture.display().to_string();
    let upstream = Upstream::start(&fixture_command, &[], Deadlines::default()).await?;
    let options = GatewayOptions {
        server: "bench".to_owned(),
        agent: "bench".to_owned(),
        category: "mcp".to_owned(),
        wait: None,
        trust: Trust::Hints,
        deadlines: Deadlines::default(),
        public_url: None,
        ask_in_client: false,
        previews: Default::default(),
    };
    let gateway = Gateway::open(store.clone(), Arc::new(upstream), options).await?;
    let (to_gateway, to_client) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(async move {
        if let Ok(running) = gateway.serve(to_gateway).await {
            let _ = running.waiting().await;
        }
    });
    let through = ().serve(to_client).await?;

    let mut direct_samples = Vec::with_capacity(calls);
    let mut gateway_samples = Vec::with_capacity(calls);
    for round in 0..warmup + calls {
        let d = read_once(&direct, "read_note", &note).await?;
        let g = read_once(&through, "read_note", &note).await?;
        if round >= warmup {
            direct_samples.push(d);
            gateway_samples.push(g);
        }
    }
    through.cancel().await.ok();
    direct.cancel().await.ok();
    serving.abort();
    store.close().await;
    let p = |samples: &[Duration], q: f64| micros(percentile(samples, q));
    let (dp50, dp99) = (p(&direct_samples, 50.0), p(&direct_samples, 99.0));
    let (gp50, gp99) = (p(&gateway_samples, 50.0), p(&gateway_samples, 99.0));
    if dp50 <= 0.0 || gp50 <= 0.0 {
        bail!("the gateway comparison measured nothing: {dp50} µs vs {gp50} µs");
    }
    Ok(GatewayResult {
        over: "stdio",
        calls,
        direct_p50_us: dp50,
        direct_p99_us: dp99,
        gateway_p50_us: gp50,
        gateway_p99_us: gp99,
        added_p50_us: gp50 - dp50,
        added_p99_us: gp99 - dp99,
        synchronous: "FULL",
    })
}
