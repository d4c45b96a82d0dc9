//! The LangGraph anchor: LangGraph's human-in-the-loop decisions per second (a node
//! that calls `interrupt(...)`, resumed with `Command(resume=...)`, checkpointed by
//! `SqliteSaver` in a file), run by `langgraph/interrupt_resume.py` beside this crate.
//!
//! The benchmark's own setup installs it: a virtual environment under the output
//! directory (`langgraph-venv`, reused while its pinned requirements match), `pip
//! install` of the pinned versions from PyPI, then the script with the environment's
//! Python; its one JSON line is the result. Anything that fails on the way (no
//! `python3`, no `venv` module, no network to PyPI) is a skip with its reason, never a
//! failed benchmark.

use anyhow::{Context, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What `pip` installs: versions verified to run the script.
const REQUIREMENTS: &[&str] = &["langgraph==1.2.24", "langgraph-checkpoint-sqlite==3.1.2"];

/// Written into the environment once the requirements are installed.
const MARKER: &str = "assent-bench-requirements.txt";

const PIP_TIMEOUT: Duration = Duration::from_secs(600);
const RUN_TIMEOUT: Duration = Duration::from_secs(600);

/// The script's figures (its JSON line).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LangGraphResult {
    /// Resumes timed (each one thread's decision).
    pub decisions: usize,
    pub decisions_per_second: f64,
    pub resume_p50_us: f64,
    pub resume_p99_us: f64,
    /// Threads run from their start to the interrupt, per second (the proposal side).
    pub interrupts_per_second: f64,
    pub checkpoints_written: u64,
    /// LangGraph's durability mode (`async`, its default).
    pub durability: String,
    /// Read with PRAGMA on the checkpointer's connection.
    pub journal_mode: String,
    pub synchronous: String,
    pub sqlite_version: String,
    pub langgraph_version: String,
    pub checkpoint_sqlite_version: String,
    pub python: String,
    /// Assent's confirmations per second at `synchronous = FULL` in the same run, and
    /// that ÷ `decisions_per_second`; `None` when the confirmations did not run.
    #[serde(default)]
    pub assent_confirmations_per_second: Option<f64>,
    #[serde(default)]
    pub ratio_assent_to_langgraph: Option<f64>,
}

/// Installs (or reuses) the environment under `out` and runs `decisions` resumes
/// (after `decisions / 20` untimed). `Err` is a reason to skip.
pub fn measure(out: &Path, decisions: usize) -> anyhow::Result<LangGraphResult> {
    let venv = out.join("langgraph-venv");
    let python = venv_python(&venv);
    let wanted = REQUIREMENTS.join("\n") + "\n";
    let installed = std::fs::read_to_string(venv.join(MARKER)).ok();
    if !python.exists() || installed.as_deref() != Some(wanted.as_str()) {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
        let _ = std::fs::remove_dir_all(&venv);
        eprintln!("  creating {} ...", venv.display());
        run(
            Command::new("python3").arg("-m").arg("venv").arg(&venv),
            PIP_TIMEOUT,
        )
        .context("python3 -m venv")?;
        eprintln!("  pip install {} ...", REQUIREMENTS.join(" "));
        run(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(REQUIREMENTS),
            PIP_TIMEOUT,
        )
        .context("pip install")?;
        std::fs::write(venv.join(MARKER), &wanted)?;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("langgraph/interrupt_resume.py");
    // `-I`: the environment's packages only (no PYTHONPATH, no user site, not the
    // script's directory).
    let output = run(
        Command::new(&python)
            .arg("-I")
            .arg(&script)
            .arg("--decisions")
            .arg(decisions.to_string())
            .arg("--warmup")
            .arg((decisions / 20).max(1).to_string()),
        RUN_TIMEOUT,
    )
    .context("interrupt_resume.py")?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .context("interrupt_resume.py printed no JSON line")?;
    serde_json::from_str(line).with_context(|| format!("reading `{line}`"))
}

fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}

/// Runs `command` to its end (killing it after `timeout`); `Err` with the end of its
/// stderr unless it succeeded.
fn run(command: &mut Command, timeout: Duration) -> anyhow::Result<Output> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("could not start it")?;
    // Drain both pipes on threads so a chatty child never blocks on a full pipe.
    let drain = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let stdout = drain(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = drain(child.stderr.take().map(|p| Box::new(p) as _));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            bail!("timed out after {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("exited with {}: {}", output.status, tail.join(" / "));
    }
    Ok(output)
}
