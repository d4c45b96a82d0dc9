//! Tidy: the project's house rules, checked as ordinary `#[test]`s so that
//! `cargo test` is the only gate.
//!
//! - every `.rs` file under `crates/`, `xtask/` and `tests/` opens with a `//!` comment;
//! - the pure crates (`assent-domain`, `assent-tools`, `assent-journal`,
//!   `assent-changeset`, `assent-sync`) know nothing of `sqlx` or `tokio`, neither in
//!   their manifests nor in their resolved dependency graph;
//! - the engine's crates (changeset, sync, store, confirm, webhooks, server, the facade
//!   without its `journal` feature, the MCP gateway, the rig adapter, the example
//!   service) resolve no `assent-journal*`
//!   crate: the journal is one host, composed in by the CLI;
//! - every crate under `crates/` has `[lints] workspace = true` and a `src/lib.rs` or
//!   `src/main.rs`.
//!
//! Manifests are read line by line (no TOML parser): enough for the manifests we write,
//! and the resolved-graph check (`cargo tree`) backs up the manifest one.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{cargo, project_root};

/// Crates that must stay free of I/O runtimes and database drivers.
const PURE_CRATES: &[&str] = &[
    "assent-domain",
    "assent-tools",
    "assent-journal",
    "assent-changeset",
    "assent-sync",
];

/// Crates (and, by prefix, their families such as `sqlx-core`, `tokio-util`) the pure
/// crates must not depend on.
const FORBIDDEN_IN_PURE: &[&str] = &["sqlx", "tokio"];

/// The directories whose `.rs` files tidy checks, relative to the workspace root.
const SOURCE_DIRS: &[&str] = &["crates", "xtask", "tests"];

#[test]
fn every_rs_file_opens_with_a_doc_comment() {
    let root = project_root();
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        collect_rs_files(&root.join(dir), &mut files);
    }
    files.sort();
    assert!(
        files.iter().any(|f| f.ends_with("xtask/src/tidy.rs")),
        "tidy found no .rs files under {} (is the workspace root {} right?)",
        SOURCE_DIRS.join(", "),
        root.display()
    );

    let offenders: Vec<String> = files
        .iter()
        .filter(|f| !opens_with_doc_comment(&read(f)))
        .map(|f| relative(&root, f))
        .collect();
    assert!(
        offenders.is_empty(),
        "{} .rs file(s) do not open with a `//!` comment saying what the file is for:\n{}",
        offenders.len(),
        bullets(&offenders)
    );
}

#[test]
fn pure_crates_do_not_declare_sqlx_or_tokio() {
    let root = project_root();
    let mut offenders = Vec::new();
    for krate in PURE_CRATES {
        let manifest_path = root.join("crates").join(krate).join("Cargo.toml");
        let manifest = read(&manifest_path);
        for name in dependency_names(&manifest) {
            if is_forbidden(&name) {
                offenders.push(format!(
                    "{} declares `{name}`",
                    relative(&root, &manifest_path)
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the pure crates ({}) must not depend on {}:\n{}",
        PURE_CRATES.join(", "),
        FORBIDDEN_IN_PURE.join(" or "),
        bullets(&offenders)
    );
}

#[test]
fn pure_crates_do_not_pull_in_sqlx_or_tokio() {
    let mut offenders = Vec::new();
    for krate in PURE_CRATES {
        offenders.extend(forbidden_in_tree(&["-p", krate], is_forbidden));
    }
    assert!(
        offenders.is_empty(),
        "the pure crates ({}) must not depend, even indirectly, on {}:\n{}",
        PURE_CRATES.join(", "),
        FORBIDDEN_IN_PURE.join(" or "),
        bullets(&offenders)
    );
}

/// The engine and its faces know no particular host: the journal is composed in by
/// the CLI (and the facade's default `journal` feature), never imported below it.
const HOST_FREE: &[&[&str]] = &[
    &["-p", "assent-domain"],
    &["-p", "assent-tools"],
    &["-p", "assent-changeset"],
    &["-p", "assent-sync"],
    &["-p", "assent-store"],
    &["-p", "assent-confirm"],
    &["-p", "assent-webhooks"],
    &["-p", "assent-server"],
    &["-p", "assent-mcp"],
    &["-p", "assent-rig"],
    &["-p", "assent", "--no-default-features"],
];

/// The crate family of the reference journal host.
fn is_journal(name: &str) -> bool {
    name.starts_with("assent-journal")
}

#[test]
fn the_engine_depends_on_no_host() {
    let mut offenders = Vec::new();
    for selection in HOST_FREE {
        offenders.extend(forbidden_in_tree(selection, is_journal));
    }
    // The example service proves a service can gate its tools without the journal.
    let example = project_root().join("examples/invoicing/Cargo.toml");
    if example.exists() {
        offenders.extend(forbidden_in_tree(
            &["-p", "assent-example-invoicing"],
            is_journal,
        ));
    }
    assert!(
        offenders.is_empty(),
        "the engine's crates must not depend, even indirectly, on the journal host:\n{}",
        bullets(&offenders)
    );
}

/// The packages `cargo tree <selection> -e normal` resolves whose name `forbidden`
/// matches, each as a line naming where it came from.
fn forbidden_in_tree(selection: &[&str], forbidden: fn(&str) -> bool) -> Vec<String> {
    let mut args = vec!["tree"];
    args.extend_from_slice(selection);
    args.extend_from_slice(&["-e", "normal", "--prefix", "none"]);
    let output = Command::new(cargo())
        .args(&args)
        .current_dir(project_root())
        .output()
        .unwrap_or_else(|err| panic!("could not start `cargo {}`: {err}", args.join(" ")));
    assert!(
        output.status.success(),
        "`cargo {}` failed ({}):\n{}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let mut found: Vec<&str> = tree
        .lines()
        .skip(1) // the selected package itself
        .map(|line| line.trim().trim_end_matches(" (*)"))
        .filter(|line| line.split_whitespace().next().is_some_and(forbidden))
        .collect();
    found.sort_unstable();
    found.dedup();
    let selected = selection.join(" ");
    found
        .into_iter()
        .map(|line| {
            let name = line.split_whitespace().next().unwrap_or(line);
            format!("{selected} pulls in {line} (see `cargo tree {selected} -e normal -i {name}`)")
        })
        .collect()
}

#[test]
fn every_crate_uses_the_workspace_lints() {
    let root = project_root();
    let mut offenders = Vec::new();
    for dir in crate_dirs(&root) {
        let manifest_path = dir.join("Cargo.toml");
        if !manifest_path.is_file() {
            offenders.push(format!("{} has no Cargo.toml", relative(&root, &dir)));
        } else if !has_workspace_lints(&read(&manifest_path)) {
            offenders.push(relative(&root, &manifest_path));
        }
    }
    assert!(
        offenders.is_empty(),
        "every crate's Cargo.toml must contain `[lints]` with `workspace = true`; these do not:\n{}",
        bullets(&offenders)
    );
}

#[test]
fn every_crate_has_a_documented_root() {
    let root = project_root();
    let mut offenders = Vec::new();
    for dir in crate_dirs(&root) {
        let roots: Vec<PathBuf> = ["src/lib.rs", "src/main.rs"]
            .iter()
            .map(|r| dir.join(r))
            .filter(|r| r.is_file())
            .collect();
        if roots.is_empty() {
            offenders.push(format!(
                "{} has neither src/lib.rs nor src/main.rs",
                relative(&root, &dir)
            ));
        }
        for path in roots {
            if !opens_with_doc_comment(&read(&path)) {
                offenders.push(format!(
                    "{} does not open with a `//!` comment saying what the crate owns",
                    relative(&root, &path)
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "every crate needs a crate root opening with `//!`:\n{}",
        bullets(&offenders)
    );
}

// Checks of the line-based helpers themselves, so a rule cannot pass by parsing nothing.

#[test]
fn doc_comment_detection() {
    fn check(text: &str, expect: bool) {
        assert_eq!(opens_with_doc_comment(text), expect, "input: {text:?}");
    }
    check("//! Docs.\nfn f() {}\n", true);
    check("\n\n//! After blank lines.\n", true);
    check("// A plain comment.\n//! Docs.\n", false);
    check("/// Outer docs.\nfn f() {}\n", false);
    check("#![allow(dead_code)]\n//! Docs.\n", false);
    check("use std::fs;\n", false);
    check("", false);
}

#[test]
fn dependency_names_from_a_manifest() {
    fn check(manifest: &str, expect: &[&str]) {
        assert_eq!(dependency_names(manifest), expect, "manifest:\n{manifest}");
    }
    check(
        r#"
[package]
name = "sqlx-free"

[dependencies]
serde.workspace = true
thiserror = "2"
"uuid" = { version = "1", features = [
    "v4",
] }
# tokio = "1"

[dev-dependencies]
sqlx = { workspace = true }

[build-dependencies.tokio]
version = "1"

[target.'cfg(unix)'.dependencies]
db = { package = "sqlx-core", version = "0.9" }

[features]
sqlx = []
"#,
        &[
            "serde",
            "thiserror",
            "uuid",
            "sqlx",
            "tokio",
            "db",
            "sqlx-core",
        ],
    );
}

#[test]
fn workspace_lints_detection() {
    fn check(manifest: &str, expect: bool) {
        assert_eq!(
            has_workspace_lints(manifest),
            expect,
            "manifest:\n{manifest}"
        );
    }
    check(
        "[package]\nname = \"a\"\n\n[lints]\nworkspace = true\n",
        true,
    );
    check("[lints]\nworkspace=true # shared\n", true);
    check("lints.workspace = true\n[package]\n", true);
    check("[package]\nname = \"a\"\n", false);
    check("[lints]\nworkspace = false\n", false);
    check("[lints.rust]\nworkspace = true\n", false);
    check("[package]\nworkspace = true\n", false);
}

/// Whether a pure crate may not depend on the crate `name`: `sqlx`, `tokio`, or one of
/// their family (`sqlx-core`, `tokio-util`, ...).
fn is_forbidden(name: &str) -> bool {
    FORBIDDEN_IN_PURE.iter().any(|f| name.starts_with(f))
}

/// Whether `text`, after any blank lines, starts with an inner doc comment.
fn opens_with_doc_comment(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .is_some_and(|line| line.starts_with("//!"))
}

/// What a manifest line belongs to.
enum Section {
    /// A dependency table such as `[dependencies]`: every key is a dependency.
    Dependencies,
    /// A single dependency's table such as `[dependencies.sqlx]`.
    OneDependency,
    /// Anything else.
    Other,
}

/// The names of the dependencies `manifest` declares in any dependency table (normal,
/// dev, build, target-specific), including the real names behind `package = "..."`.
fn dependency_names(manifest: &str) -> Vec<String> {
    const KINDS: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];
    let mut names = Vec::new();
    let mut section = Section::Other;
    for line in manifest.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(header) = table_header(line) {
            section = Section::Other;
            for kind in KINDS {
                if header == *kind || header.ends_with(&format!(".{kind}")) {
                    section = Section::Dependencies;
                } else if let Some(name) = header
                    .strip_prefix(&format!("{kind}."))
                    .or_else(|| header.split_once(&format!(".{kind}.")).map(|(_, n)| n))
                {
                    names.push(unquote(name).to_owned());
                    section = Section::OneDependency;
                }
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue; // a continuation line of a multi-line array
        };
        let key = unquote(key.trim().split('.').next().unwrap_or_default());
        match section {
            Section::Dependencies => {
                names.push(key.to_owned());
                if let Some(package) = inline_package(value) {
                    names.push(package);
                }
            }
            Section::OneDependency if key == "package" => {
                names.push(unquote(value.split('#').next().unwrap_or_default()).to_owned());
            }
            Section::OneDependency | Section::Other => {}
        }
    }
    names
}

/// The real package name in an inline table such as `{ package = "sqlx", ... }`.
fn inline_package(value: &str) -> Option<String> {
    let (_, rest) = value.split_once("package")?;
    let rest = rest.trim_start().strip_prefix('=')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let (name, _) = rest.split_once('"')?;
    Some(name.to_owned())
}

/// Whether `manifest` opts into the workspace lints (`[lints]` with `workspace = true`,
/// or a top-level `lints.workspace = true`).
fn has_workspace_lints(manifest: &str) -> bool {
    let mut section = String::new();
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or_default().trim();
        if let Some(header) = table_header(line) {
            section = header.to_owned();
            continue;
        }
        let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
        let opted_in = match section.as_str() {
            "lints" => compact == "workspace=true",
            "" => compact == "lints.workspace=true" || compact == "lints={workspace=true}",
            _ => false,
        };
        if opted_in {
            return true;
        }
    }
    false
}

/// The name inside a `[table]` header line, if `line` is one (array tables `[[...]]`
/// are not).
fn table_header(line: &str) -> Option<&str> {
    if line.starts_with("[[") {
        return None;
    }
    let inner = line.strip_prefix('[')?;
    let (inner, _) = inner.split_once(']')?;
    Some(inner.trim())
}

fn unquote(s: &str) -> &str {
    s.trim().trim_matches(|c| c == '"' || c == '\'')
}

/// The directories under `crates/`, sorted.
fn crate_dirs(root: &Path) -> Vec<PathBuf> {
    let crates = root.join("crates");
    let entries = fs::read_dir(&crates)
        .unwrap_or_else(|err| panic!("cannot list {}: {err}", crates.display()));
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    assert!(
        !dirs.is_empty(),
        "no crates found under {}",
        crates.display()
    );
    dirs
}

/// Adds every `.rs` file under `dir` to `out`, skipping `target/` directories. A missing
/// `dir` adds nothing.
fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            if entry.file_name() != "target" {
                collect_rs_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// `path` relative to the workspace root, with `/` separators, for messages.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

fn bullets(lines: &[String]) -> String {
    lines.iter().map(|l| format!("  - {l}\n")).collect()
}
