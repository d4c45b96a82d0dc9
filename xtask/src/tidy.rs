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
//!   `src/main.rs`;
//! - no two files of a crate name each other (`crate::a` in `b.rs`, `crate::b` in
//!   `a.rs`): what both need moves to a module both can depend on. Paths are read from
//!   code lines (comments and doc links are not imports); `super::` is not followed,
//!   since inside a file's `mod tests` it names the file itself.
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
    &["-p", "assent-hook", "--features", "http"],
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

/// ARCHITECTURE.md is the map, read whole before a change: the long narratives belong
/// in design.md, security.md and the guide (issue 42 set the bound).
const ARCHITECTURE_MAX_LINES: usize = 450;

#[test]
fn the_architecture_map_stays_short_and_names_every_crate() {
    let root = project_root();
    let map = read(&root.join("docs/ARCHITECTURE.md"));
    let lines = map.lines().count();
    assert!(
        lines < ARCHITECTURE_MAX_LINES,
        "docs/ARCHITECTURE.md has {lines} lines (bound {ARCHITECTURE_MAX_LINES}): move narrative to docs/design.md"
    );
    let missing: Vec<String> = crate_dirs(&root)
        .into_iter()
        .map(|dir| relative(&root, &dir))
        .filter(|dir| dir.starts_with("crates/") && !map.contains(&format!("### `{dir}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/ARCHITECTURE.md's code map has no section for:\n{}",
        bullets(&missing)
    );
}

#[test]
fn no_two_files_of_a_crate_import_each_other() {
    let root = project_root();
    let mut src_dirs: Vec<PathBuf> = crate_dirs(&root).iter().map(|d| d.join("src")).collect();
    src_dirs.push(root.join("xtask/src"));
    let mut offenders = Vec::new();
    for src in src_dirs {
        let mut files = Vec::new();
        collect_rs_files(&src, &mut files);
        let modules: Vec<(Vec<String>, PathBuf)> = files
            .into_iter()
            .filter_map(|file| Some((module_path(&src, &file)?, file)))
            .collect();
        let known: Vec<&[String]> = modules.iter().map(|(m, _)| m.as_slice()).collect();
        let mut edges: Vec<(usize, usize)> = Vec::new();
        for (from, (module, file)) in modules.iter().enumerate() {
            for path in crate_paths(&read(file)) {
                let Some(to) = resolve_module(&known, &path) else {
                    continue;
                };
                let other = known[to];
                // A file and its own submodules are one unit: the parent declares the child.
                if to != from && !other.starts_with(module) && !module.starts_with(other) {
                    edges.push((from, to));
                }
            }
        }
        edges.sort_unstable();
        edges.dedup();
        for &(a, b) in &edges {
            if a < b && edges.binary_search(&(b, a)).is_ok() {
                offenders.push(format!(
                    "{} <-> {}",
                    relative(&root, &modules[a].1),
                    relative(&root, &modules[b].1)
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "these files of one crate import each other; move what both need to a module both \
         can depend on:\n{}",
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
#[test]
fn crate_paths_from_code() {
    fn check(text: &str, expect: &[&str]) {
        let found: Vec<String> = crate_paths(text).iter().map(|p| p.join("::")).collect();
        assert_eq!(found, expect, "{text:?}");
    }
    check("use crate::a::B;\n", &["a::B"]);
    check(
        "use crate::{a, b::{C, d::E}, self};\n",
        &["a", "b::C", "b::d::E", "self"],
    );
    check(
        "let x = crate::measure::per_second(1);\n",
        &["measure::per_second"],
    );
    check(
        "//! Lives in [`crate::peer_sync`].\n/// See crate::a.\n",
        &[],
    );
    check(
        "pub(crate) fn f() {}\nuse my_crate::x;\n$crate::y!();\n",
        &[],
    );
    check("use crate::a; // and crate::b\n", &["a"]);
    check(
        "use crate::w::{\n    A, B,\n    c::D,\n};\n",
        &["w::A", "w::B", "w::c::D"],
    );
}

#[test]
fn module_paths_of_files() {
    let src = Path::new("/c/src");
    let check = |file: &str, expect: Option<&str>| {
        let found = module_path(src, &src.join(file)).map(|m| m.join("::"));
        assert_eq!(found.as_deref(), expect, "{file}");
    };
    check("lib.rs", None);
    check("main.rs", None);
    check("bin/tool.rs", None);
    check("cli.rs", Some("cli"));
    check("a/mod.rs", Some("a"));
    check("a/b.rs", Some("a::b"));
}

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

/// The module a file under `src` is, as path segments: `None` for a crate root
/// (`lib.rs`, `main.rs`) and for `src/bin/`, whose files are crate roots of their own.
fn module_path(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut segments: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if segments.first().is_some_and(|s| s == "bin") {
        return None;
    }
    if segments.last().is_some_and(|s| s == "mod") {
        segments.pop();
    }
    match segments.as_slice() {
        [] => None,
        [only] if only == "lib" || only == "main" => None,
        _ => Some(segments),
    }
}

/// The index in `known` of the longest module that begins `path` (`a::b::Item` is in
/// `a::b` when there is such a file, else in `a`).
fn resolve_module(known: &[&[String]], path: &[String]) -> Option<usize> {
    known
        .iter()
        .enumerate()
        .filter(|(_, module)| path.starts_with(module))
        .max_by_key(|(_, module)| module.len())
        .map(|(index, _)| index)
}

/// Every path after `crate::` in the code of `text`, with `use` groups expanded
/// (`crate::{a, b::C}` gives `a` and `b::C`). Comment lines and the comment at the end
/// of a line are skipped: a doc link is not an import.
fn crate_paths(text: &str) -> Vec<Vec<String>> {
    // Whole text rather than line by line: a `use` group often spans lines.
    let code: String = text
        .lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "crate::".len()..];
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            let mut chars = after.chars().peekable();
            use_tree(&mut chars, &mut Vec::new(), &mut paths);
        }
        rest = after;
    }
    paths
}

/// Reads one `use` tree (`a::b`, `a::{b, c::d}`, `{a, b}`, `a::*`) from `chars`,
/// adding each full path under `prefix` to `out`.
fn use_tree(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let depth = prefix.len();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next_if_eq(&'{').is_some() {
            loop {
                use_tree(chars, prefix, out);
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                if chars.next_if_eq(&',').is_none() {
                    break;
                }
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                if chars.peek() == Some(&'}') {
                    break;
                }
            }
            chars.next_if_eq(&'}');
            prefix.truncate(depth);
            return;
        }
        let mut ident = String::new();
        while let Some(c) = chars.next_if(|c| c.is_alphanumeric() || *c == '_') {
            ident.push(c);
        }
        if ident.is_empty() {
            break;
        }
        prefix.push(ident);
        let mut probe = chars.clone();
        if probe.next() == Some(':') && probe.next() == Some(':') {
            chars.next();
            chars.next();
        } else {
            break;
        }
    }
    if prefix.len() > depth {
        out.push(prefix.clone());
    }
    prefix.truncate(depth);
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
