//! A Python with a package from PyPI, for tests that meet the other side's own code
//! (the webhook receiver's `standardwebhooks`, the MCP gateway's official `mcp`
//! client): installed once into a virtual environment under the target directory.
//! When that is impossible the tests say so and skip, except under `CI=true`, where it
//! is a failure.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// A package to have, how to tell it is there, and where its environment lives.
#[derive(Debug, Clone, Copy)]
pub struct Package<'a> {
    /// The pip requirement, e.g. `mcp>=2.3`.
    pub requirement: &'a str,
    /// A Python program that exits 0 exactly when the package is usable.
    pub probe: &'a str,
    /// The virtual environment's folder.
    pub venv: &'a Path,
}

/// Whether `python` passes the package's probe.
fn has(python: &Path, package: &Package<'_>) -> bool {
    Command::new(python)
        .args(["-c", package.probe])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// A Python that has `package`, installing it on first use: into its virtual
/// environment, or, where Python has no venv module (Debian without python3-venv),
/// into the user's site-packages.
pub fn install(package: &Package<'_>) -> Result<PathBuf, String> {
    let python = package.venv.join("bin/python");
    if has(&python, package) {
        return Ok(python);
    }
    let system = ["python3", "python"]
        .into_iter()
        .find(|p| Command::new(p).arg("--version").output().is_ok())
        .ok_or("no python3 on PATH")?;
    let pip = |python: &Path, user: bool| {
        let mut command = Command::new(python);
        command.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ]);
        if user {
            command.arg("--user");
        }
        run(command.arg(package.requirement))
    };
    let installed = match run(Command::new(system).arg("-m").arg("venv").arg(package.venv)) {
        Ok(()) => pip(&python, false).map(|()| python),
        Err(why) => pip(Path::new(system), true)
            .map(|()| PathBuf::from(system))
            .map_err(|e| format!("{why}; then {e}")),
    }?;
    if has(&installed, package) {
        Ok(installed)
    } else {
        Err(format!(
            "{} still does not have {}",
            installed.display(),
            package.requirement
        ))
    }
}

/// The Python of `installed` (kept in `cell`, so the install runs once per test
/// binary), or `None` with a note on stderr when it could not be had outside CI; under
/// `CI=true` that is a failure. `what` names the tests that need it.
#[allow(clippy::print_stderr, reason = "a skipped test must say so")]
pub fn required(
    cell: &'static OnceLock<Result<PathBuf, String>>,
    installed: impl FnOnce() -> Result<PathBuf, String>,
    what: &str,
) -> Option<PathBuf> {
    match cell.get_or_init(installed) {
        Ok(python) => Some(python.clone()),
        Err(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{what} need their PyPI package under CI=true: {why}")
        }
        Err(why) => {
            eprintln!("{what} skipped: {why}");
            None
        }
    }
}
