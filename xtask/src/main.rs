//! Project automation for Assent, run as `cargo xtask <task>` (an alias in
//! `.cargo/config.toml`).
//!
//! Plain Rust with `anyhow` and `public-api` (small, serde-only) so that it builds fast
//! and needs nothing installed.
//! Tasks:
//!
//! - `ci`: the gate CI runs (`.ci/run`): `cargo fmt --check`, `cargo clippy -D warnings`,
//!   `cargo doc --no-deps` with `RUSTDOCFLAGS="-D warnings"` (broken or private doc links
//!   fail; the libraries' run is `api`'s, below), `cargo test`, then `bench --quick`, stopping at the first failing step. Before the
//!   tests it installs Debian's `chromium` and `chromium-driver` when
//!   `/usr/bin/chromedriver` is missing (the review page's browser tests need them), and
//!   unless `ASSENT_TEST_POSTGRES_URL` names a server, the tests run with a throwaway
//!   PostgreSQL started by `.ci/postgres.sh` (installed from Debian's packages when
//!   missing) for the cross-backend conformance suite. Then `dependent`, with a
//!   PostgreSQL server the same way.
//! - `dependent`: `tests/dependent`, a service outside the workspace (its own
//!   `Cargo.toml` and empty `[workspace]`, the facade by path), built and run as a
//!   dependent builds it: the workspace's `Cargo.lock` is copied in first (the same
//!   versions), and it builds in the workspace's target directory (the dependencies
//!   already built are reused). It runs its scenarios (the facade's front page among
//!   them) on SQLite, and on PostgreSQL when `ASSENT_TEST_POSTGRES_URL` is set.
//! - `api`: each library crate's public API against `api/current/` and the last
//!   release (see `api.rs`): an API change shows in its commit, a break since the
//!   release is written in CHANGELOG.md.
//! - `bench`: the benchmark report, the `assent-bench` binary in the release profile:
//!   the engine against the bare driver writing the same rows, queries at scale,
//!   memory; a table on stdout and `target/bench/results.json`. Performance claims live
//!   there, never in timed tests. `bench --quick` is a small run in the dev profile
//!   (it reuses the test build's dependencies) that CI runs as a smoke test: it asserts
//!   nothing about speed. The divan micro-benchmark of wake planning runs on its own:
//!   `cargo bench -p assent-bench --bench wake_planning`.
//!
//! Project rules (every file opens with `//!`, the pure crates never see `sqlx` or
//! `tokio`, ...) are not a task: they are the ordinary `#[test]`s in `tidy.rs`, so
//! `cargo test` is the only gate.

// xtask is a binary talking to a person at a terminal: printing is its job, so the
// workspace lints against `println!`/`eprintln!` do not apply here.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod api;
#[cfg(test)]
mod tidy;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  ci       cargo fmt --check, cargo clippy -D warnings, cargo doc (-D warnings), api,
           cargo test, dependent, bench --quick
           (stops at the first failure; installs chromium and chromium-driver for the
           browser tests when missing; tests run with a throwaway PostgreSQL unless
           ASSENT_TEST_POSTGRES_URL is set)
  api      each library crate's public API (rustdoc JSON, the public-api crate) against
           api/current/ and against the last release (api/0.1.0/): every break since
           the release is named in a **Breaking** entry of CHANGELOG.md's Unreleased
  dependent  build and run tests/dependent, a service outside the workspace, against
           the facade by path (SQLite; PostgreSQL too when ASSENT_TEST_POSTGRES_URL is set)
           --bless: rewrite api/current/ from this tree
           --baseline DIR: write api/0.1.0/ from a checkout of the release at DIR
  bench    the benchmark report (release build): table on stdout, target/bench/results.json
           --quick: a small smoke run in the dev profile, asserting nothing about speed
";

/// The steps of `cargo xtask ci`, run in this order.
const CI_STEPS: &[&[&str]] = &[
    &["fmt", "--all", "--", "--check"],
    &[
        "clippy",
        "--workspace",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ],
    // Run with `RUSTDOCFLAGS="-D warnings"` (see `ci`): the binaries' documentation
    // builds without a broken, ambiguous or private link.
    &["doc", "--no-deps", "--workspace", "--bins"],
    // Not a cargo command: `cargo xtask api`, run in this process (see `api.rs`). Its
    // rustdoc run is the libraries' `cargo doc`, with `-D warnings` too.
    &["api"],
    &["test", "--workspace"],
    // `cargo xtask dependent`, with a PostgreSQL server as for the tests.
    &["xtask", "dependent"],
];

/// `cargo xtask bench`: the report binary in the release profile (not `cargo bench
/// --workspace`, which would build every crate's libtest harness in the bench profile
/// for nothing).
const BENCH: &[&str] = &[
    "run",
    "--release",
    "--quiet",
    "-p",
    "assent-bench",
    "--bin",
    "assent-bench",
];

/// `cargo xtask bench --quick` builds the same binary in the dev profile with the whole
/// workspace selected: features are then unified exactly as for `cargo test
/// --workspace`, so CI reuses the dependencies its tests built (`cargo run -p
/// assent-bench` alone would resolve other features and rebuild sqlx & co.).
const BENCH_QUICK_BUILD: &[&str] = &[
    "build",
    "--quiet",
    "--workspace",
    "--bin",
    "assent-bench",
    "--bin",
    "assent-mcp-fixture",
];

/// The MCP fixture server the benchmark's gateway comparison calls, built beside the
/// release `assent-bench`.
const BENCH_FIXTURE: &[&str] = &[
    "build",
    "--release",
    "--quiet",
    "-p",
    "assent-mcp",
    "--bin",
    "assent-mcp-fixture",
];

/// Builds and runs the quick benchmark (see [`BENCH_QUICK_BUILD`]).
fn bench_quick() -> anyhow::Result<()> {
    run_cargo(BENCH_QUICK_BUILD)?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_root().join("target"));
    let binary = target_dir.join("debug").join("assent-bench");
    eprintln!("==> {} --quick", binary.display());
    let status = Command::new(&binary)
        .arg("--quick")
        .current_dir(project_root())
        .status()
        .with_context(|| format!("could not start {}", binary.display()))?;
    if !status.success() {
        bail!("`{} --quick` exited with {status}", binary.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["ci"] => ci(),
        ["bench"] => run_cargo(BENCH_FIXTURE).and_then(|()| run_cargo(BENCH)),
        ["bench", "--quick"] => bench_quick(),
        ["dependent"] => dependent(),
        ["api"] => api::run(&project_root(), &api::Mode::Check),
        ["api", "--bless"] => api::run(&project_root(), &api::Mode::Bless),
        ["api", "--baseline", root] => api::run(
            &project_root(),
            &api::Mode::Baseline {
                root: PathBuf::from(root),
            },
        ),
        ["-h" | "--help" | "help"] => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [] => {
            eprint!("error: no task given\n\n{USAGE}");
            return ExitCode::from(2);
        }
        other => {
            eprint!("error: unknown task `{}`\n\n{USAGE}", other.join(" "));
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn ci() -> anyhow::Result<()> {
    for (i, step) in CI_STEPS.iter().enumerate() {
        let result = match step.first() {
            Some(&"test") => {
                ensure_browser()?;
                run_tests_with_postgres(step)
            }
            Some(&"xtask") => run_tests_with_postgres(step),
            Some(&"doc") => run_cargo_with(step, &[("RUSTDOCFLAGS", "-D warnings")]),
            Some(&"api") => api::run(&project_root(), &api::Mode::Check),
            _ => run_cargo(step),
        };
        result
            .with_context(|| format!("ci stopped at step {} of {}", i + 1, CI_STEPS.len() + 1))?;
    }
    bench_quick().context("ci stopped at its last step, bench --quick")?;
    eprintln!("==> ci: all steps passed");
    Ok(())
}

/// Where `cargo xtask dependent` finds the service outside the workspace.
const DEPENDENT: &str = "tests/dependent";

/// Builds and runs `tests/dependent` (see the crate doc): the workspace's lock file
/// copied in, the workspace's target directory, the dev profile.
fn dependent() -> anyhow::Result<()> {
    let root = project_root();
    let dir = root.join(DEPENDENT);
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .with_context(|| format!("could not copy Cargo.lock into {}", dir.display()))?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    eprintln!(
        "==> CARGO_TARGET_DIR={} cargo run --quiet (in {DEPENDENT})",
        target_dir.display()
    );
    let status = Command::new(cargo())
        .args(["run", "--quiet"])
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(&dir)
        .status()
        .context("could not start cargo")?;
    if !status.success() {
        bail!("{DEPENDENT} exited with {status}");
    }
    Ok(())
}

/// Runs the test step with a PostgreSQL server for the cross-backend tests: the one in
/// `ASSENT_TEST_POSTGRES_URL` when set, else a throwaway one that `.ci/postgres.sh`
/// installs (Debian's package, when missing), starts on loopback and deletes when the
/// tests end. Outside CI, on a machine that can neither run nor install PostgreSQL, the
/// tests run without it and say that its half was skipped; under `CI=true` they fail.
fn run_tests_with_postgres(step: &[&str]) -> anyhow::Result<()> {
    if std::env::var_os("ASSENT_TEST_POSTGRES_URL").is_some() {
        return run_cargo(step);
    }
    let on_ci = std::env::var("CI").as_deref() == Ok("true");
    let installed = std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
        versions
            .flatten()
            .any(|v| v.path().join("bin/initdb").exists())
    });
    let installable = Command::new("apt-get").arg("--version").output().is_ok();
    if !on_ci && !installed && !installable {
        eprintln!(
            "==> warning: PostgreSQL is neither installed nor installable; its tests will be skipped"
        );
        return run_cargo(step);
    }
    eprintln!("==> source .ci/postgres.sh && cargo {}", step.join(" "));
    // The script's EXIT trap stops and deletes the server when this shell ends, whatever
    // the tests' outcome; `set -e` makes a server that fails to start fail the step.
    let status = Command::new("bash")
        .arg("-c")
        .arg("set -e; source .ci/postgres.sh; \"$@\"")
        .arg("xtask-ci")
        .arg(cargo())
        .args(step)
        .current_dir(project_root())
        .status()
        .context("could not start bash for the PostgreSQL test server")?;
    if !status.success() {
        bail!(
            "`cargo {}` (with PostgreSQL) exited with {status}",
            step.join(" ")
        );
    }
    Ok(())
}

/// Where the browser tests of `assent-server` expect chromedriver.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Installs Debian's `chromium` and `chromium-driver` when chromedriver is missing
/// (through sudo when not root). Where apt-get is unavailable this is an error under
/// `CI=true`; elsewhere the browser tests say they were skipped.
fn ensure_browser() -> anyhow::Result<()> {
    if Path::new(CHROMEDRIVER).exists() {
        return Ok(());
    }
    let on_ci = std::env::var("CI").as_deref() == Ok("true");
    if Command::new("apt-get").arg("--version").output().is_err() {
        if on_ci {
            bail!("{CHROMEDRIVER} is missing and apt-get is not available to install it");
        }
        eprintln!("==> warning: {CHROMEDRIVER} is missing; the browser tests will be skipped");
        return Ok(());
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0");
    let apt = |args: &[&str]| -> anyhow::Result<()> {
        let mut command = if is_root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        command.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        eprintln!(
            "==> {}apt-get {}",
            if is_root { "" } else { "sudo " },
            args.join(" ")
        );
        let status = command.status().context("could not start apt-get")?;
        if !status.success() {
            bail!("`apt-get {}` exited with {status}", args.join(" "));
        }
        Ok(())
    };
    apt(&["update"])?;
    apt(&["install", "-y", "chromium", "chromium-driver"])
        .context("installing the browser for the review page's tests")
}

/// Runs `cargo <args>` at the workspace root, echoing the command first.
fn run_cargo(args: &[&str]) -> anyhow::Result<()> {
    run_cargo_with(args, &[])
}

/// [`run_cargo`] with the environment variables `env` set for it.
fn run_cargo_with(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<()> {
    let shown: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v:?} ")).collect();
    eprintln!("==> {}cargo {}", shown.concat(), args.join(" "));
    let status = Command::new(cargo())
        .args(args)
        .envs(env.iter().copied())
        .current_dir(project_root())
        .status()
        .context("could not start cargo")?;
    if !status.success() {
        bail!("`cargo {}` exited with {status}", args.join(" "));
    }
    Ok(())
}

/// The cargo that started us (`$CARGO`), so the pinned toolchain is used throughout;
/// plain `cargo` from `PATH` otherwise.
fn cargo() -> OsString {
    std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into())
}

/// The workspace root: the parent of this crate's directory.
fn project_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}
