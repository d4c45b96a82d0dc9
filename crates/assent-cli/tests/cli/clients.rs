//! The Python and TypeScript packages (`clients/python`, `clients/typescript`) against a
//! real `assent serve` of this build on a fresh SQLite database, each with its own test
//! runner: every `clients/python/tests/test_*.py` file under pytest, and `npm test` in
//! `clients/typescript`. A new test file of either package runs here with nothing to
//! register.
//!
//! What the tests of both get, through the environment: `ASSENT_URL` (the server),
//! `ASSENT_ADMIN_TOKEN` (the server's token: each test makes an agent of category
//! `client` and an agent token of its own), `ASSENT_BIN` (this build's `assent`, to
//! decide from another process: `assent confirm`, `edit`, `reject`) and `ASSENT_DB`
//! (the database's URL, for `assent --db`).
//!
//! The test dependencies are installed by the tests themselves: `clients/python[test]`
//! (its pinned `test` extra, the frameworks included) into `target/clients-venv`, again
//! whenever an installed version differs from a pin, and `npm ci` in
//! `clients/typescript` when its `node_modules` is missing. When that is impossible the
//! tests say so and skip, except under `CI=true`, where it is a failure.

use assent_tests::pypi::{self, Package};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The token the server is started with.
const ADMIN_TOKEN: &str = "clients-admin-token-0123456789";

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `target/`.
fn target() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_assent"))
        .parent()
        .and_then(Path::parent)
        .expect("the target directory")
        .to_path_buf()
}

/// `assent serve` on a fresh database, stopped when dropped.
struct Served {
    child: Child,
    url: String,
    db: String,
    _dir: tempfile::TempDir,
}

impl Served {
    fn start() -> Self {
        use std::io::BufRead;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = format!("sqlite://{}", dir.path().join("clients.db").display());
        let mut child = Command::new(env!("CARGO_BIN_EXE_assent"))
            .args([
                "--db",
                &db,
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--token",
                ADMIN_TOKEN,
            ])
            .env_remove("ASSENT_TOKEN")
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("assent serve starts");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut banner = String::new();
        stdout.read_line(&mut banner).expect("the banner");
        let start = banner.find("http://").expect("an address");
        let url = banner[start..]
            .split_whitespace()
            .next()
            .expect("a URL")
            .trim_end_matches('/')
            .to_owned();
        // The rest of what it prints is read away, so it never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        Self {
            child,
            url,
            db,
            _dir: dir,
        }
    }

    /// `assent --db DB ARGS…`: its stdout.
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(env!("CARGO_BIN_EXE_assent"))
            .args(["--db", &self.db])
            .args(args)
            .env_remove("RUST_LOG")
            .output()
            .expect("assent runs");
        assert!(
            out.status.success(),
            "assent {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `command` (a test runner), its output shown on failure.
fn passes(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{shown}");
    #[allow(clippy::print_stderr, reason = "what ran, in the test's output")]
    {
        eprintln!("{what}:\n{shown}");
    }
}

/// The Python with `clients/python[test]` installed (into `target/clients-venv`), or
/// `None` with a note when it cannot be had outside CI.
fn python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let package = root().join("clients/python");
    let install = || {
        let requirement = format!("{}[test]", package.display());
        // Every pin of the `test` extra installed at its version (a pin changed or
        // added since the venv was made installs again).
        let probe = format!(
            "import tomllib, importlib.metadata as m, sys\n\
             extra = tomllib.load(open({:?}, 'rb'))['project']['optional-dependencies']['test']\n\
             for pin in extra:\n\
             \x20   name, _, version = pin.partition('==')\n\
             \x20   if m.version(name.strip()) != version.strip(): sys.exit(1)\n\
             import httpx",
            package.join("pyproject.toml").display().to_string()
        );
        pypi::install(&Package {
            requirement: &requirement,
            probe: &probe,
            venv: &target().join("clients-venv"),
        })
    };
    pypi::required(&PYTHON, install, "the Python client's tests")
}

#[test]
fn the_python_package_passes_its_tests_against_assent_serve() {
    let Some(python) = python() else { return };
    let served = Served::start();
    let package = root().join("clients/python");
    passes(
        Command::new(python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"])
            .current_dir(&package)
            // The source as it is, not the copy pip installed.
            .env("PYTHONPATH", &package)
            .env("ASSENT_URL", &served.url)
            .env("ASSENT_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("ASSENT_BIN", env!("CARGO_BIN_EXE_assent"))
            .env("ASSENT_DB", &served.db)
            .env_remove("RUST_LOG"),
        "pytest clients/python/tests",
    );
    // Nothing any test reported broke the consent chain.
    let proof = served.cli(&["audit", "verify"]);
    assert!(proof.starts_with("verified:"), "{proof}");
}

/// `npm ci` in `dir` unless its `node_modules` is there; whether npm could.
fn npm_ci(dir: &Path) -> bool {
    if dir.join("node_modules").is_dir() {
        return true;
    }
    let done = Command::new("npm")
        .args(["ci", "--silent", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status();
    match done {
        Ok(status) if status.success() => true,
        other => {
            let why = format!("npm ci in {} failed: {other:?}", dir.display());
            assert!(std::env::var("CI").as_deref() != Ok("true"), "{why}");
            #[allow(clippy::print_stderr, reason = "a skipped test must say so")]
            {
                eprintln!("the TypeScript client's tests skipped: {why}");
            }
            false
        }
    }
}

#[test]
fn the_typescript_package_passes_its_tests_against_assent_serve() {
    let dir = root().join("clients/typescript");
    if !dir.join("package.json").is_file() || !npm_ci(&dir) {
        return;
    }
    let served = Served::start();
    passes(
        Command::new("npm")
            .args(["test", "--silent"])
            .current_dir(&dir)
            .env("ASSENT_URL", &served.url)
            .env("ASSENT_ADMIN_TOKEN", ADMIN_TOKEN)
            .env("ASSENT_BIN", env!("CARGO_BIN_EXE_assent"))
            .env("ASSENT_DB", &served.db)
            .env_remove("RUST_LOG"),
        "npm test in clients/typescript",
    );
    // Nothing any test reported broke the consent chain.
    let proof = served.cli(&["audit", "verify"]);
    assert!(proof.starts_with("verified:"), "{proof}");
}
