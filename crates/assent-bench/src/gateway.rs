//! The MCP gateway's cost: an immediate call (`read_note` of the in-tree fixture server,
//! run at once under `--trust hints`) made through the gateway against the same call
//! made directly to the same kind of upstream, alternating call by call in one run,
//! over each transport a client reaches `assent mcp` by.
//!
//! Over stdio ([`measure`]), both sides speak to a fixture child over stdio with rmcp's
//! client. The gateway side adds what `assent mcp` adds: the gateway
//! (`assent_mcp::Gateway`, in this process, reached over an in-memory duplex stream
//! instead of a second pipe), its wake (a write transaction at `synchronous = FULL`:
//! policy, the action audit record), the upstream call with no lock held, and the
//! result's own short transaction. The client's pipe to an `assent mcp` process is not
//! counted (a few µs per message).
//!
//! Over Streamable HTTP ([`measure_http`]), rmcp's Streamable HTTP client calls the
//! fixture served over HTTP (`--http`) directly, and `assent mcp --http` in front of a
//! fixture child over stdio: `assent_mcp::run_one` with `Downstream::Http`, in this
//! process but over loopback TCP, with everything `assent mcp --http` runs (`assent
//! serve`'s accept loop, the agent-token check of every request, the supervisor's
//! ticks).

use crate::measure::{micros, percentile};
use anyhow::{Context, bail};
use assent_mcp::{Deadlines, Gateway, GatewayOptions, Trust, Upstream};
use assent_store::tokens::{self, Role};
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

/// The issue's target for what the gateway adds to an allowed read-only call, at p50,
/// over either transport (issue 42).
pub const ADDED_P50_TARGET_US: f64 = 1_000.0;

impl GatewayResult {
    /// Whether what the gateway adds at p50 is within [`ADDED_P50_TARGET_US`].
    pub fn within_target(&self) -> bool {
        self.added_p50_us <= ADDED_P50_TARGET_US
    }
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

/// The gateway's database in `dir`, with agent `bench` allowed the `mcp` category, and
/// the note the calls read.
async fn setup(dir: &Path) -> anyhow::Result<(Store, PathBuf)> {
    let note = dir.join("note.txt");
    std::fs::write(&note, "a note the agent reads\n")?;
    let url = format!("sqlite://{}", dir.join("gateway.db").display());
    let store = Store::open(&url).await?;
    let mut tx = store.begin_write().await?;
    let now = time::OffsetDateTime::now_utc();
    agents::upsert(tx.connection(), "bench", &AgentPolicy::new(["mcp"]), now).await?;
    tx.commit().await?;
    Ok((store, note))
}

/// What `assent mcp --agent bench --server bench --trust hints` runs with.
fn options() -> GatewayOptions {
    GatewayOptions {
        server: "bench".to_owned(),
        agent: "bench".to_owned(),
        category: "mcp".to_owned(),
        wait: None,
        trust: Trust::Hints,
        deadlines: Deadlines::default(),
        public_url: None,
        ask_in_client: false,
        previews: Default::default(),
    }
}

/// `calls` timed rounds (after `warmup`), each a call of `direct` then of `through`.
async fn alternate(
    direct: &RunningService<RoleClient, ()>,
    through: &RunningService<RoleClient, ()>,
    note: &Path,
    calls: usize,
    warmup: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut direct_samples = Vec::with_capacity(calls);
    let mut gateway_samples = Vec::with_capacity(calls);
    for round in 0..warmup + calls {
        let d = read_once(direct, "read_note", note).await?;
        let g = read_once(through, "read_note", note).await?;
        if round >= warmup {
            direct_samples.push(d);
            gateway_samples.push(g);
        }
    }
    Ok((direct_samples, gateway_samples))
}

/// The figures of one transport.
fn result_of(
    over: &'static str,
    direct_samples: &[Duration],
    gateway_samples: &[Duration],
) -> anyhow::Result<GatewayResult> {
    let p = |samples: &[Duration], q: f64| micros(percentile(samples, q));
    let (dp50, dp99) = (p(direct_samples, 50.0), p(direct_samples, 99.0));
    let (gp50, gp99) = (p(gateway_samples, 50.0), p(gateway_samples, 99.0));
    if dp50 <= 0.0 || gp50 <= 0.0 {
        bail!("the gateway comparison over {over} measured nothing: {dp50} µs vs {gp50} µs");
    }
    Ok(GatewayResult {
        over,
        calls: direct_samples.len(),
        direct_p50_us: dp50,
        direct_p99_us: dp99,
        gateway_p50_us: gp50,
        gateway_p99_us: gp99,
        added_p50_us: gp50 - dp50,
        added_p99_us: gp99 - dp99,
        synchronous: "FULL",
    })
}

/// Measures `calls` immediate calls each way over stdio (after `warmup` each),
/// alternating.
pub async fn measure(fixture: &Path, calls: usize, warmup: usize) -> anyhow::Result<GatewayResult> {
    let dir = tempfile::tempdir()?;
    let (store, note) = setup(dir.path()).await?;

    let direct = client_of(fixture).await?;
    let fixture_command = fixture.display().to_string();
    let upstream = Upstream::start(&fixture_command, &[], Deadlines::default()).await?;
    let gateway = Gateway::open(store.clone(), Arc::new(upstream), options()).await?;
    let (to_gateway, to_client) = tokio::io::duplex(1 << 16);
    let serving = tokio::spawn(async move {
        if let Ok(running) = gateway.serve(to_gateway).await {
            let _ = running.waiting().await;
        }
    });
    let through = ().serve(to_client).await?;

    let (direct_samples, gateway_samples) =
        alternate(&direct, &through, &note, calls, warmup).await?;
    through.cancel().await.ok();
    direct.cancel().await.ok();
    serving.abort();
    store.close().await;
    result_of("stdio", &direct_samples, &gateway_samples)
}

/// The fixture served over Streamable HTTP on a free loopback port, and its URL.
async fn http_fixture(fixture: &Path) -> anyhow::Result<(tokio::process::Child, String)> {
    use tokio::io::AsyncBufReadExt as _;
    let mut child = tokio::process::Command::new(fixture)
        .args(["--http", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting the fixture server over HTTP")?;
    let stdout = child.stdout.take().context("the fixture's stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the fixture did not say where it listens")??
        .context("the fixture exited before listening")?;
    Ok((child, url))
}

/// rmcp's Streamable HTTP client of `url`, sending `headers`; retried for a few seconds
/// while the server starts listening.
async fn http_client(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> anyhow::Result<RunningService<RoleClient, ()>> {
    let mut attempts = 0;
    loop {
        let transport = assent_mcp::http_transport(url, headers).map_err(anyhow::Error::msg)?;
        match ().serve(transport).await {
            Ok(client) => return Ok(client),
            // The server may not listen yet.
            Err(_) if attempts < 100 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(error) => bail!("no MCP session with {url}: {error}"),
        }
    }
}

/// Measures `calls` immediate calls each way over Streamable HTTP (after `warmup` each),
/// alternating: the fixture over HTTP directly, and `assent mcp --http` in front of a
/// fixture child over stdio, each through rmcp's Streamable HTTP client.
pub async fn measure_http(
    fixture: &Path,
    calls: usize,
    warmup: usize,
) -> anyhow::Result<GatewayResult> {
    let dir = tempfile::tempdir()?;
    let (store, note) = setup(dir.path()).await?;
    let mut tx = store.begin_write().await?;
    let token = tokens::issue(
        tx.connection(),
        Role::Agent,
        Some("bench"),
        time::OffsetDateTime::now_utc(),
    )
    .await?;
    tx.commit().await?;

    let (_fixture_child, fixture_url) = http_fixture(fixture).await?;
    let direct = http_client(&fixture_url, &Default::default()).await?;

    // A free port, for `--http 127.0.0.1:PORT` as an operator would give it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let downstream = assent_mcp::Downstream::Http(assent_mcp::HttpDownstream {
        addr,
        allowed_hosts: Vec::new(),
        limits: assent_server::ServerLimits::default(),
    });
    let fixture_command = fixture.display().to_string();
    let gateway_store = store.clone();
    let serving = tokio::spawn(async move {
        assent_mcp::run_one(gateway_store, options(), &fixture_command, &[], downstream).await
    });
    let headers = [(
        "Authorization".to_owned(),
        format!("Bearer {}", token.secret),
    )]
    .into_iter()
    .collect();
    let through = http_client(&format!("http://{addr}{}", assent_mcp::MCP_PATH), &headers).await;
    let through = match through {
        Ok(through) => through,
        Err(error) if serving.is_finished() => {
            let ended = serving.await;
            bail!("`assent mcp --http` ended: {ended:?} ({error})");
        }
        Err(error) => return Err(error),
    };

    let (direct_samples, gateway_samples) =
        alternate(&direct, &through, &note, calls, warmup).await?;
    through.cancel().await.ok();
    direct.cancel().await.ok();
    serving.abort();
    // An aborted server's connections may still be on their way back to the pool.
    tokio::time::timeout(Duration::from_secs(5), store.close())
        .await
        .ok();
    result_of("streamableHttp", &direct_samples, &gateway_samples)
}
