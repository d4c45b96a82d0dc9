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
//!   `src/main.rs`; every `src/lib.rs` shows its use in a doctest, and no manifest
//!   turns doctests off;
//! - ARCHITECTURE.md's `Public API:` line of each library is what its `lib.rs` exports;
//! - SQL opens a savepoint only in the store's writer (`WriteTx::savepoint`), and only
//!   the store's own code calls its pool (`.pool()`);
//! - no files of a crate import each other in a cycle of any length (`crate::b` in
//!   `a.rs`, `crate::c` in `b.rs`, `crate::a` in `c.rs`): what they share moves to a
//!   module all of them can depend on. Paths are read from
//!   code lines (comments and doc links are not imports); `super::` is not followed,
//!   since inside a file's `mod tests` it names the file itself;
//! - the texts the agent reads back are worded in the reply module
//!   (`assent-changeset/src/reply.rs`) alone: no string literal outside it (and outside
//!   tests) holds one of its constants' texts or a fixed part of one of its formatted
//!   replies.
//! - the doors (server, CLI, MCP gateway, rig adapter, hook, webhooks) import only the
//!   `assent_store` modules on their list: agent settings (`agents`, `host_tools`) go
//!   through the engine, and each list only shrinks as more moves there.
//!
//! Manifests are read line by line (no TOML parser): enough for the manifests we write,
//! and the resolved-graph check (`cargo tree`) backs up the manifest one.

use std::collections::BTreeSet;
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

/// The one module allowed `unsafe` (issue 55): the store's statements through SQLite's
/// C API, whose invariants are written and tested there.
const UNSAFE_MODULE: &str = "crates/assent-store/src/c_api.rs";

#[test]
fn unsafe_code_is_denied_everywhere_but_the_c_api_module() {
    let root = project_root();
    let manifest = read(&root.join("Cargo.toml"));
    assert!(
        manifest.contains("unsafe_code = \"deny\"")
            || manifest.contains("unsafe_code = \"forbid\""),
        "the workspace lints must deny unsafe_code"
    );
    // Built from pieces so that this file does not name itself.
    let allows = [
        concat!("allow", "(unsafe_code)"),
        concat!("expect", "(unsafe_code)"),
    ];
    let mut files = Vec::new();
    for dir in SOURCE_DIRS {
        collect_rs_files(&root.join(dir), &mut files);
    }
    let mut found: Vec<String> = Vec::new();
    for file in &files {
        let text = read(file);
        for needle in allows {
            for line in code_lines_with(&text, needle) {
                found.push(format!("{}:{line}", relative(&root, file)));
            }
        }
    }
    let expected = format!("{UNSAFE_MODULE}:");
    let elsewhere: Vec<String> = found
        .iter()
        .filter(|f| !f.starts_with(&expected))
        .cloned()
        .collect();
    assert!(
        elsewhere.is_empty(),
        "unsafe code is allowed only in {UNSAFE_MODULE}; also allowed at:\n{}",
        bullets(&elsewhere)
    );
    assert_eq!(
        found.len(),
        1,
        "{UNSAFE_MODULE} allows unsafe code once, at its top ({found:?})"
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
/// the CLI (and the facade's `journal` feature, off by default), never imported below it.
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
    &["-p", "assent"],
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

/// A SQLite-only service builds no PostgreSQL driver (issue 54): the facade with
/// `default-features = false, features = ["sqlite"]`, and the store without a backend
/// at all, resolve no `sqlx-postgres`; nor does a PostgreSQL-only one build SQLite.
#[test]
fn a_service_builds_only_the_backends_it_asks_for() {
    let is_postgres = |name: &str| name == "sqlx-postgres";
    let is_sqlite = |name: &str| name == "sqlx-sqlite" || name == "libsqlite3-sys";
    let mut offenders = Vec::new();
    offenders.extend(forbidden_in_tree(
        &[
            "-p",
            "assent",
            "--no-default-features",
            "--features",
            "sqlite",
        ],
        is_postgres,
    ));
    offenders.extend(forbidden_in_tree(
        &[
            "-p",
            "assent",
            "--no-default-features",
            "--features",
            "postgres",
        ],
        is_sqlite,
    ));
    offenders.extend(forbidden_in_tree(
        &["-p", "assent-confirm", "--no-default-features"],
        |name| name == "sqlx-postgres" || name == "sqlx-sqlite",
    ));
    assert!(
        offenders.is_empty(),
        "a backend was built that was not asked for:\n{}",
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

#[test]
fn every_library_root_shows_its_use_in_a_doctest() {
    let root = project_root();
    let mut offenders = Vec::new();
    for dir in crate_dirs(&root) {
        let manifest_path = dir.join("Cargo.toml");
        if read(&manifest_path).lines().any(|line| {
            let compact: String = line
                .split('#')
                .next()
                .unwrap_or_default()
                .split_whitespace()
                .collect();
            compact == "doctest=false"
        }) {
            offenders.push(format!(
                "{} turns doctests off (`doctest = false`)",
                relative(&root, &manifest_path)
            ));
        }
        let lib = dir.join("src/lib.rs");
        if lib.is_file() && !crate_doc_has_doctest(&read(&lib)) {
            offenders.push(format!(
                "{}'s `//!` documentation has no Rust code block (a doctest)",
                relative(&root, &lib)
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "every library's root shows its main entry in a few lines that `cargo test` \
         compiles (and runs, unless it needs a server or the network: `no_run`):\n{}",
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
fn no_import_cycle_between_the_modules_of_a_crate() {
    let root = project_root();
    let mut src_dirs: Vec<PathBuf> = crate_dirs(&root).iter().map(|d| d.join("src")).collect();
    src_dirs.push(root.join("xtask/src"));
    let mut offenders = Vec::new();
    for src in src_dirs {
        let mut files = Vec::new();
        collect_rs_files(&src, &mut files);
        files.sort();
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
        for component in import_cycles(modules.len(), &edges) {
            let cycle: Vec<String> = cycle_through(&component, &edges)
                .iter()
                .chain(component.first())
                .map(|&m| relative(&root, &modules[m].1))
                .collect();
            offenders.push(cycle.join(" -> "));
        }
    }
    assert!(
        offenders.is_empty(),
        "these files of one crate import each other in a cycle; move what they share to a \
         module all of them can depend on:\n{}",
        bullets(&offenders)
    );
}

/// The import cycles among `nodes` modules joined by `edges` (`(a, b)`: `a` names
/// `b`): every strongly connected component of more than one module, its modules
/// sorted, the components in order of their first module. Two modules are in one
/// component when each reaches the other; the crates' graphs are small, so reachability
/// from every module is cheap enough.
fn import_cycles(nodes: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut next = vec![Vec::new(); nodes];
    for &(from, to) in edges {
        next[from].push(to);
    }
    let reach: Vec<Vec<bool>> = (0..nodes)
        .map(|start| {
            let mut seen = vec![false; nodes];
            let mut stack = vec![start];
            while let Some(at) = stack.pop() {
                for &to in &next[at] {
                    if !seen[to] {
                        seen[to] = true;
                        stack.push(to);
                    }
                }
            }
            seen
        })
        .collect();
    let mut placed = vec![false; nodes];
    let mut cycles = Vec::new();
    for first in 0..nodes {
        if placed[first] || !reach[first][first] {
            continue;
        }
        let component: Vec<usize> = (first..nodes)
            .filter(|&other| reach[first][other] && reach[other][first])
            .collect();
        for &member in &component {
            placed[member] = true;
        }
        if component.len() > 1 {
            cycles.push(component);
        }
    }
    cycles
}

/// A shortest cycle inside `component` (a result of [`import_cycles`]) from its first
/// module back to it, without repeating the first: the path a message names.
fn cycle_through(component: &[usize], edges: &[(usize, usize)]) -> Vec<usize> {
    let Some(&start) = component.first() else {
        return Vec::new();
    };
    let inside = |m: &usize| component.contains(m);
    let mut came_from: Vec<(usize, usize)> = Vec::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(at) = queue.pop_front() {
        for &(from, to) in edges {
            if from != at || !inside(&to) {
                continue;
            }
            if to == start {
                let mut path = vec![at];
                while let Some(&(_, before)) = came_from.iter().find(|(m, _)| *m == path[0]) {
                    path.insert(0, before);
                }
                return path;
            }
            if !came_from.iter().any(|(m, _)| *m == to) {
                came_from.push((to, at));
                queue.push_back(to);
            }
        }
    }
    component.to_vec()
}

/// The line of a crate's section in ARCHITECTURE.md that lists what its `lib.rs`
/// exports.
const PUBLIC_API_LINE: &str = "Public API:";

#[test]
fn the_architecture_map_states_each_librarys_public_api() {
    let root = project_root();
    let map = read(&root.join("docs/ARCHITECTURE.md"));
    let mut offenders = Vec::new();
    for dir in crate_dirs(&root) {
        let lib = dir.join("src/lib.rs");
        if !lib.is_file() {
            continue;
        }
        let krate = relative(&root, &dir);
        let exported = public_names(&read(&lib));
        let Some(stated) = stated_public_api(&map, &krate) else {
            offenders.push(format!(
                "{krate}: its section has no `{PUBLIC_API_LINE}` line; it exports {}",
                ticked(&exported)
            ));
            continue;
        };
        let missing: BTreeSet<String> = exported.difference(&stated).cloned().collect();
        let extra: BTreeSet<String> = stated.difference(&exported).cloned().collect();
        if !missing.is_empty() {
            offenders.push(format!(
                "{krate}: src/lib.rs exports {}, which the map does not list",
                ticked(&missing)
            ));
        }
        if !extra.is_empty() {
            offenders.push(format!(
                "{krate}: the map lists {}, which src/lib.rs does not export",
                ticked(&extra)
            ));
        }
    }
    assert!(
        offenders.is_empty(),
        "docs/ARCHITECTURE.md's `{PUBLIC_API_LINE}` lines differ from the crates' `pub use` \
         and `pub` items in lib.rs; change both in one commit:\n{}",
        bullets(&offenders)
    );
}

/// The one file whose SQL opens savepoints: the store's writer names them (unique when
/// nested) and makes one dropped unended fail the commit (`WriteTx::savepoint`).
const SAVEPOINT_HOME: &str = "crates/assent-store/src/writer.rs";
/// Where the store's pool may be called: a write on a pooled connection would bypass
/// the writer, so everything else reads through `Store::read_connection`.
const POOL_HOME: &str = "crates/assent-store/src/";

#[test]
fn savepoints_and_the_pool_stay_in_the_store() {
    let root = project_root();
    let mut files = Vec::new();
    for dir in SOURCE_DIRS.iter().chain(&["examples"]) {
        collect_rs_files(&root.join(dir), &mut files);
    }
    files.sort();
    let mut offenders = Vec::new();
    for file in &files {
        let name = relative(&root, file);
        // This file names both, as the rules' subject.
        if name == "xtask/src/tidy.rs" {
            continue;
        }
        let text = read(file);
        let rules = [
            (
                "SAVEPOINT",
                name != SAVEPOINT_HOME,
                "a SAVEPOINT outside WriteTx::savepoint",
            ),
            (
                ".pool()",
                !name.starts_with(POOL_HOME),
                "the store's pool outside the store",
            ),
        ];
        for (needle, forbidden, what) in rules {
            if forbidden {
                for line in code_lines_with(&text, needle) {
                    offenders.push(format!("{name}:{line}: {what}"));
                }
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "savepoints are opened by `WriteTx::savepoint` only, and the store's pool is the \
         store's own (read through `Store::read_connection`, write through \
         `Store::begin_write`):\n{}",
        bullets(&offenders)
    );
}

/// The door crates: the CLI, the server, the MCP gateway, the coding agents' hooks and
/// rig. They reach the store through the engine (`assent_confirm`'s `Engine` methods
/// and its `agents`, `records`, `admin`, `history`, `grants` and `client_sessions`
/// modules), never a table module of `assent_store` (`use assent_store::{jobs, …}`, an
/// `assent_store::x::` path in code), so that a change or a read has one meaning
/// whichever door it came through (issue 43). They may name the store's root types
/// (`Store`, `StoreError`, `AnyConnection`, …).
const DOORS: &[&str] = &[
    "assent-cli",
    "assent-hook",
    "assent-mcp",
    "assent-rig",
    "assent-server",
];

/// Workers under the engine (the webhook and Slack sender, which the engine's worker
/// runs) and the store modules each still reads itself. This list only shrinks: a
/// worker may not start importing a module not on it, and a module it no longer
/// imports must be taken off.
const WORKER_STORE_MODULES: &[(&str, &[&str])] = &[(
    "assent-webhooks",
    &[
        "approvals",
        "change_feed",
        "change_sets",
        "decisions",
        "expiry_warnings",
        "jobs",
        // The phone doors' sender (issue 56): its channels, posts and links, and how
        // long each agent waits.
        "phone",
        "slack",
        "timefmt",
        "waits",
        "webhooks",
    ],
)];

/// Each `assent_store` module path (with the file it is in) in `crate_name`'s `src/`.
fn store_module_paths(
    root: &Path,
    crate_name: &str,
    store_modules: &BTreeSet<String>,
) -> Vec<(String, Vec<String>)> {
    let mut files = Vec::new();
    collect_rs_files(
        &root.join("crates").join(crate_name).join("src"),
        &mut files,
    );
    assert!(
        !files.is_empty(),
        "crates/{crate_name}/src has no .rs files"
    );
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        for path in paths_after(&read(file), "assent_store::") {
            if path.first().is_some_and(|m| store_modules.contains(m)) {
                found.push((relative(root, file), path));
            }
        }
    }
    found
}

#[test]
fn doors_import_no_store_module_and_workers_only_those_on_their_list() {
    let root = project_root();
    let store_modules = pub_mods(&read(&root.join("crates/assent-store/src/lib.rs")));
    assert!(
        store_modules.contains("jobs") && store_modules.contains("webhooks"),
        "assent-store's lib.rs declares no table modules this rule knows: update it"
    );
    let mut offenders = Vec::new();
    for door in DOORS {
        for (file, path) in store_module_paths(&root, door, &store_modules) {
            offenders.push(format!(
                "{file} imports assent_store::{}: a door goes through the engine",
                path.join("::")
            ));
        }
    }
    for (worker, allowed) in WORKER_STORE_MODULES {
        let mut used = BTreeSet::new();
        for (file, path) in store_module_paths(&root, worker, &store_modules) {
            let module = path[0].clone();
            if !allowed.contains(&module.as_str()) {
                offenders.push(format!(
                    "{file} imports assent_store::{}, which is not on {worker}'s list",
                    path.join("::")
                ));
            }
            used.insert(module);
        }
        for module in *allowed {
            if !used.contains(*module) {
                offenders.push(format!(
                    "{worker} no longer imports assent_store::{module}: take it off its list"
                ));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "store modules imported around the engine (xtask/src/tidy.rs, DOORS and \
         WORKER_STORE_MODULES); go through assent_confirm's `Engine` methods instead:\n{}",
        bullets(&offenders)
    );
}

/// The decision point of the engine (issue 42): files of a library crate that decide
/// over plain values, with the only `assent_store` paths each may name (plain types
/// and a pure formatter, never a function that reads or writes).
const PURE_DECISION_FILES: &[(&str, &[&str])] = &[(
    "crates/assent-confirm/src/decide.rs",
    &[
        "approvals::Approval",
        "approvals::Revision",
        "jobs::ExternalItem",
        "jobs::ServedItem",
        "timefmt::format",
    ],
)];

#[test]
fn the_decision_point_does_no_io() {
    let root = project_root();
    let mut offenders = Vec::new();
    for (file, allowed) in PURE_DECISION_FILES {
        let text = read(&root.join(file));
        let code = without_comments_and_literals(&text);
        for word in [
            "sqlx",
            "tokio",
            "async",
            "await",
            "AnyConnection",
            "now_utc",
            "new_v4",
        ] {
            let named = code.match_indices(word).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = code[at + word.len()..].chars().next();
                let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
                !ident(before) && !ident(after)
            });
            if named {
                offenders.push(format!("{file} names `{word}`"));
            }
        }
        for path in paths_after(&text, "assent_store::") {
            let path = path.join("::");
            if !allowed.contains(&path.as_str()) {
                offenders.push(format!("{file} names assent_store::{path}"));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "the decision point decides over what its transaction read, with no I/O, clock or \
         ids of its own (xtask/src/tidy.rs, PURE_DECISION_FILES):\n{}",
        bullets(&offenders)
    );
}

/// The modules `lib_rs` declares with `pub mod NAME;`.
fn pub_mods(lib_rs: &str) -> BTreeSet<String> {
    without_comments_and_literals(lib_rs)
        .lines()
        .filter_map(|line| {
            let name = line.trim().strip_prefix("pub mod ")?.strip_suffix(';')?;
            Some(name.trim().to_owned())
        })
        .collect()
}

// Checks of the line-based helpers themselves, so a rule cannot pass by parsing nothing.

#[test]
fn code_lines_naming_a_string() {
    let text = "//! SAVEPOINT in docs.\nrun(\"SAVEPOINT a\");\n    // SAVEPOINT in a comment\n\
                let x = 1; // SAVEPOINT after code\nstore.pool().acquire() // why\n";
    assert_eq!(code_lines_with(text, "SAVEPOINT"), [2]);
    assert_eq!(code_lines_with(text, ".pool()"), [5]);
    assert!(code_lines_with("", "SAVEPOINT").is_empty());
}

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
fn store_paths_from_code() {
    let text = "use assent_store::{Store, agents, host_tools::{self, HostTool}};\n\
                let x = assent_store::tokens::list(&mut conn);\n\
                //! [`assent_store::jobs`]\n\
                use my_assent_store::waits;\n";
    let found: Vec<String> = paths_after(text, "assent_store::")
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        found,
        [
            "Store",
            "agents",
            "host_tools::self",
            "host_tools::HostTool",
            "tokens::list"
        ]
    );
    assert_eq!(
        pub_mods("//! pub mod not;\nmod private;\npub mod agents;\npub mod jobs;\n"),
        BTreeSet::from(["agents".to_owned(), "jobs".to_owned()])
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

#[test]
fn import_cycles_of_any_length() {
    // 0 -> 1 -> 2 -> 0: no two of them name each other, yet each imports itself through
    // the other two. 3 only imports into the cycle; 4 and 5 name each other.
    let edges = [(0, 1), (1, 2), (2, 0), (3, 0), (4, 5), (5, 4), (5, 6)];
    let cycles = import_cycles(7, &edges);
    assert_eq!(cycles, [vec![0, 1, 2], vec![4, 5]]);
    assert_eq!(cycle_through(&cycles[0], &edges), [0, 1, 2]);
    assert_eq!(cycle_through(&cycles[1], &edges), [4, 5]);

    // A chord makes a shorter way back: 0 -> 1 -> 3 -> 0 rather than through 2.
    let edges = [(0, 1), (1, 2), (2, 3), (1, 3), (3, 0)];
    let cycles = import_cycles(4, &edges);
    assert_eq!(cycles, [vec![0, 1, 2, 3]]);
    assert_eq!(cycle_through(&cycles[0], &edges), [0, 1, 3]);

    // Many paths to one module, none back: no cycle.
    let acyclic = [(0, 1), (1, 2), (0, 2), (3, 0), (3, 2)];
    assert!(import_cycles(4, &acyclic).is_empty());
}

#[test]
fn public_names_of_a_crate_root() {
    let lib = r#"//! A crate.
mod private;
pub mod shapes;
pub(crate) mod internal;
pub use a::{B, c::{D, E as F}, g::{self, H}};
pub use sqlx;
pub use assent_tools as tools;
pub use time::OffsetDateTime;
#[cfg(feature = "x")]
pub use x::*;
pub const LIMIT: usize = 4; // pub fn not_this()
/// pub struct NotThisEither;
pub struct Server {
    pub field: u8,
}
impl Server {
    pub fn new() -> Self { let _ = "pub fn no { }"; Self { field: 0 } }
}
pub async fn run() {}
pub(crate) fn helper() {}
#[cfg(test)]
pub mod testing;
#[cfg(test)]
mod tests {
    pub fn inner() {}
}
"#;
    let names: Vec<String> = public_names(lib).into_iter().collect();
    assert_eq!(
        names,
        [
            "B",
            "D",
            "F",
            "H",
            "LIMIT",
            "OffsetDateTime",
            "Server",
            "g",
            "run",
            "shapes",
            "sqlx",
            "tools",
            "x::*",
        ]
    );
}

#[test]
fn stated_public_api_of_a_section() {
    let map = "### `crates/a`\n\nProse `NotAName`.\nPublic API: `c`, `B` (feature x).\n\n\
               ### `crates/b`\n\nNo list here.\n\n## Next\nPublic API: `Z`.\n";
    let stated = stated_public_api(map, "crates/a").map(|s| s.into_iter().collect::<Vec<_>>());
    assert_eq!(stated, Some(vec!["B".to_owned(), "c".to_owned()]));
    assert_eq!(stated_public_api(map, "crates/b"), None);
    assert_eq!(stated_public_api(map, "crates/none"), None);
}

#[test]
fn crate_doc_doctest_detection() {
    fn check(text: &str, expect: bool) {
        assert_eq!(crate_doc_has_doctest(text), expect, "input: {text:?}");
    }
    check(
        "//! Docs.\n//!\n//! ```\n//! let x = 1;\n//! ```\nmod a;\n",
        true,
    );
    check("//! ```no_run\n//! serve();\n//! ```\n", true);
    check("//! ```rust,no_run\n//! serve();\n//! ```\n", true);
    check("//! ```text\n//! a diagram\n//! ```\n", false);
    check("//! ```ignore\n//! f();\n//! ```\n", false);
    check(
        "//! ```text\n//! a\n//! ```\n//!\n//! ```\n//! f();\n//! ```\n",
        true,
    );
    check(
        "//! Docs.\nmod a;\n/// ```\n/// f();\n/// ```\nfn f() {}\n",
        false,
    );
    check(
        "//! Docs.\n//!\n#![doc = concat!(\"```\\n\", include_str!(\"../examples/a.rs\"), \"```\")]\nmod a;\n",
        true,
    );
    check(
        "//! Docs.\n#![doc = concat!(\"```text\\n\", include_str!(\"a.txt\"), \"```\")]\n",
        false,
    );
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
    paths_after(text, "crate::")
}

/// Every path after `prefix` (`crate::`, `assent_store::`) in the code of `text`, read
/// as [`crate_paths`] reads them.
fn paths_after(text: &str, prefix: &str) -> Vec<Vec<String>> {
    // Whole text rather than line by line: a `use` group often spans lines.
    let code: String = text
        .lines()
        .map(|line| line.split_once("//").map_or(line, |(code, _)| code))
        .collect::<Vec<_>>()
        .join("\n");
    let mut paths = Vec::new();
    let mut rest = code.as_str();
    while let Some(at) = rest.find(prefix) {
        let before = rest[..at].chars().next_back();
        let after = &rest[at + prefix.len()..];
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

/// The names the crate root `lib_rs` exports: each `pub use` (the last segment, the
/// `as` name, or `path::*` for a glob), each `pub mod`, and each `pub` item it defines
/// itself (`struct`, `enum`, `fn`, `const`, ...), outside any block and not under
/// `#[cfg(test)]`. `pub(crate)` and narrower are not exports.
fn public_names(lib_rs: &str) -> BTreeSet<String> {
    const ITEMS: &[&str] = &[
        "mod", "struct", "enum", "union", "fn", "const", "static", "trait", "type",
    ];
    let code = without_comments_and_literals(lib_rs);
    let mut names = BTreeSet::new();
    let mut depth = 0usize;
    let mut at = 0;
    while at < code.len() {
        let rest = &code[at..];
        let c = rest.chars().next().unwrap_or(' ');
        let starts_word = !code[..at]
            .chars()
            .next_back()
            .is_some_and(|b| b.is_alphanumeric() || b == '_');
        if depth == 0 && starts_word && rest.starts_with("pub") {
            let after = &rest[3..];
            let words: Vec<&str> = after.split_whitespace().take(8).collect();
            let public = after.starts_with(char::is_whitespace);
            let under_test = code[..at].trim_end().ends_with("#[cfg(test)]");
            if public && !under_test && words.first() == Some(&"use") {
                let end = rest.find(';').unwrap_or(rest.len());
                let tree = after.trim_start().strip_prefix("use").unwrap_or_default();
                names.extend(use_names(
                    &tree[..end.saturating_sub(rest.len() - tree.len())],
                ));
                at += end + 1;
                continue;
            }
            if public && !under_test {
                // Qualifiers such as `async`, `unsafe`, `const fn`, `extern "C"` come first.
                let item = words
                    .iter()
                    .position(|w| ITEMS.contains(w))
                    .filter(|&i| words[i] != "const" || words.get(i + 1) != Some(&"fn"))
                    .or_else(|| words.iter().position(|w| *w == "fn"));
                if let Some(name) = item.and_then(|i| words.get(i + 1)) {
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    names.insert(name);
                }
            }
        }
        match c {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        at += c.len_utf8();
    }
    names
}

/// The names a `use` tree (the text between `use` and `;`) brings in: `a::B` gives
/// `B`, `a::{B, c::D as E, f::{self}}` gives `B`, `E` and `f`, `a::*` gives `a::*`.
fn use_names(tree: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = tree.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut ident = String::from(c);
            while let Some(c) = chars.next_if(|c| c.is_alphanumeric() || *c == '_') {
                ident.push(c);
            }
            tokens.push(ident);
        } else if c == ':' {
            chars.next_if_eq(&':');
        } else if !c.is_whitespace() {
            tokens.push(c.to_string());
        }
    }
    let mut names = Vec::new();
    use_names_in(&tokens, &mut 0, "", &mut names);
    names
}

/// Reads one tree of [`use_names`]' tokens (`::` dropped) from `at`, under the path
/// whose last segment is `parent`.
fn use_names_in(tokens: &[String], at: &mut usize, parent: &str, out: &mut Vec<String>) {
    let mut last = parent.to_owned();
    while let Some(token) = tokens.get(*at) {
        *at += 1;
        match token.as_str() {
            "{" => {
                while tokens.get(*at).is_some_and(|t| t != "}") {
                    use_names_in(tokens, at, &last, out);
                    if tokens.get(*at).is_some_and(|t| t == ",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            "*" => {
                out.push(format!("{last}::*"));
                return;
            }
            "," | "}" => {
                *at -= 1;
                break;
            }
            "as" => {
                if let Some(alias) = tokens.get(*at) {
                    *at += 1;
                    out.push(alias.clone());
                }
                return;
            }
            "self" => {}
            ident => last = ident.to_owned(),
        }
    }
    out.push(last);
}

/// The names on the `Public API:` line (every word in backticks is one) of the section
/// `` ### `krate` `` of ARCHITECTURE.md, up to the next heading; `None` without such a
/// section or line.
fn stated_public_api(map: &str, krate: &str) -> Option<BTreeSet<String>> {
    let heading = format!("### `{krate}`");
    let (_, section) = map.split_once(&heading)?;
    let line = section
        .lines()
        .skip(1)
        .take_while(|line| !line.starts_with('#'))
        .find_map(|line| line.strip_prefix(PUBLIC_API_LINE))?;
    Some(
        line.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect(),
    )
}

/// `names` in backticks, joined by commas, for a message.
fn ticked(names: &BTreeSet<String>) -> String {
    let ticked: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    ticked.join(", ")
}

/// `text` with its comments, string literals and character literals blanked (each
/// character kept as a space, newlines kept), so that the braces and words left are
/// code: a `{` in a string or `pub fn` in a doc comment is not.
fn without_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    for piece in pieces(&chars) {
        let span = &chars[piece.start..piece.end];
        if piece.kind == PieceKind::Code {
            out.extend(span);
        } else {
            out.extend(span.iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
        }
    }
    out
}

/// What a [`Piece`] of Rust source is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PieceKind {
    Code,
    /// `// …` (to the line's end, not its newline) or `/* … */`, nested.
    Comment,
    /// `"…"`, quotes included; `body` is between them, escapes kept.
    Str,
    /// `r"…"`, `r#"…"#`; `body` is between the quotes.
    RawStr,
    /// `'x'`, `'\n'`, `'\u{7f}'` (not a lifetime such as `'a`).
    Char,
}

/// A run of `chars[start..end]` of one kind; `body` is a string's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Piece {
    kind: PieceKind,
    start: usize,
    end: usize,
    body: std::ops::Range<usize>,
}

/// Rust source cut into code, comments and literals, in order and covering every char:
/// the one lexer behind [`without_comments_and_literals`] and [`string_literals`].
fn pieces(chars: &[char]) -> Vec<Piece> {
    let mut out: Vec<Piece> = Vec::new();
    let mut code_start = 0;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        let found = if c == '/' && next == Some('/') {
            let end = chars[i..]
                .iter()
                .position(|&c| c == '\n')
                .map_or(chars.len(), |p| i + p);
            Some((PieceKind::Comment, end, i..i))
        } else if c == '/' && next == Some('*') {
            let (mut depth, mut end) = (0usize, i);
            while end < chars.len() {
                if chars[end] == '/' && chars.get(end + 1) == Some(&'*') {
                    depth += 1;
                    end += 2;
                } else if chars[end] == '*' && chars.get(end + 1) == Some(&'/') {
                    depth -= 1;
                    end += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    end += 1;
                }
            }
            Some((PieceKind::Comment, end.min(chars.len()), i..i))
        } else if c == 'r' && matches!(next, Some('#' | '"')) && !is_ident_end(chars, i) {
            // A raw string: as many `#` at the end as at the start.
            let hashes = chars[i + 1..].iter().take_while(|&&h| h == '#').count();
            (chars.get(i + 1 + hashes) == Some(&'"')).then(|| {
                let body = i + 2 + hashes;
                let mut close = body;
                while close < chars.len()
                    && !(chars[close] == '"'
                        && chars[close + 1..].iter().take_while(|&&h| h == '#').count() >= hashes)
                {
                    close += 1;
                }
                let end = (close + 1 + hashes).min(chars.len());
                (PieceKind::RawStr, end, body..close.min(chars.len()))
            })
        } else if c == '"' {
            let mut close = i + 1;
            while close < chars.len() && chars[close] != '"' {
                close += if chars[close] == '\\' { 2 } else { 1 };
            }
            let close = close.min(chars.len());
            Some((PieceKind::Str, (close + 1).min(chars.len()), i + 1..close))
        } else if c == '\'' && (next == Some('\\') || chars.get(i + 2) == Some(&'\'')) {
            let start = if next == Some('\\') { i + 3 } else { i + 2 };
            let end = chars[start.min(chars.len())..]
                .iter()
                .position(|&q| q == '\'')
                .map_or(chars.len(), |p| start + p + 1);
            Some((PieceKind::Char, end, i..i))
        } else {
            None
        };
        match found {
            Some((kind, end, body)) => {
                if code_start < i {
                    out.push(Piece {
                        kind: PieceKind::Code,
                        start: code_start,
                        end: i,
                        body: i..i,
                    });
                }
                out.push(Piece {
                    kind,
                    start: i,
                    end,
                    body,
                });
                i = end;
                code_start = end;
            }
            None => i += 1,
        }
    }
    if code_start < chars.len() {
        out.push(Piece {
            kind: PieceKind::Code,
            start: code_start,
            end: chars.len(),
            body: chars.len()..chars.len(),
        });
    }
    out
}

/// Whether `chars[i]` continues an identifier (the `r` of `bar"` is not a raw string).
fn is_ident_end(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Whether the leading `//!` block of a crate root holds a Rust code block that
/// rustdoc compiles: ```` ``` ````, ```` ```rust ```` or with `no_run`/`should_panic`,
/// not `ignore`, `text` or another language.
fn crate_doc_has_doctest(lib_rs: &str) -> bool {
    let is_rust = |info: &str| {
        info.split(',')
            .map(str::trim)
            .filter(|word| !word.is_empty())
            .all(|word| matches!(word, "rust" | "no_run" | "should_panic" | "edition2024"))
    };
    let mut fences = Vec::new();
    let header = lib_rs.lines().map(str::trim_start).take_while(|line| {
        line.starts_with("//!") || line.starts_with("#![doc") || line.is_empty()
    });
    for line in header {
        if let Some(info) = line
            .strip_prefix("//!")
            .and_then(|doc| doc.trim().strip_prefix("```"))
        {
            fences.push(info);
        } else if let Some((info, _)) = line
            .strip_prefix("#![doc = concat!(\"```")
            .and_then(|rest| rest.split_once("\\n"))
        {
            // `#![doc = concat!("```\n", include_str!("…"), "```")]`: a whole block
            // whose code is a file (the facade's front page, also built as an example).
            if is_rust(info) {
                return true;
            }
        }
    }
    // Fences alternate: an opening one carries the block's language, a closing one none.
    fences.into_iter().step_by(2).any(is_rust)
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

/// The 1-based numbers of the lines that hold `needle` outside a line comment (`//`,
/// `///`, `//!`): code and its strings, as a rule about SQL or calls means.
fn code_lines_with(text: &str, needle: &str) -> Vec<usize> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let code = line.split_once("//").map_or(*line, |(code, _)| code);
            code.contains(needle)
        })
        .map(|(index, _)| index + 1)
        .collect()
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

/// The reply module: every text the agent reads back is worded there.
const REPLY_MODULE: &str = "crates/assent-changeset/src/reply.rs";

/// The shortest fixed part of a reply that counts as its wording: shorter ones
/// (`"Error: "`, `"; "`) say too little to be a copy.
const MIN_REPLY_FRAGMENT: usize = 12;

#[test]
fn reply_texts_are_worded_only_in_the_reply_module() {
    let root = project_root();
    let fragments = reply_fragments(&read(&root.join(REPLY_MODULE)));
    assert!(
        fragments.len() > 20,
        "{REPLY_MODULE}: only {} reply texts found; is the parser still right?",
        fragments.len()
    );
    let mut files = Vec::new();
    collect_rs_files(&root.join("crates"), &mut files);
    files.sort();
    let mut offenders = Vec::new();
    for file in files {
        let rel = relative(&root, &file);
        // Tests quote the replies they expect: `tests/` and `benches/` directories, a
        // module's `tests.rs`, and every file's `#[cfg(test)]` module.
        let is_test = rel
            .split('/')
            .any(|part| matches!(part, "tests" | "benches" | "tests.rs"));
        if rel == REPLY_MODULE || is_test {
            continue;
        }
        let text = read(&file);
        for literal in string_literals(without_test_module(&text)) {
            for fragment in fragments.iter().filter(|f| literal.contains(f.as_str())) {
                offenders.push(format!("{rel}: \"{literal}\" words \"{fragment}\""));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "reply texts belong to {REPLY_MODULE}: use its constant or function instead of a \
         copy:\n{}",
        bullets(&offenders)
    );
}

/// The wording of the reply module's replies: each string literal of its code (not
/// its tests), cut at its `{…}` placeholders, the parts of at least
/// [`MIN_REPLY_FRAGMENT`] characters, trimmed.
fn reply_fragments(module: &str) -> Vec<String> {
    let mut fragments = BTreeSet::new();
    for literal in string_literals(without_test_module(module)) {
        let chars: Vec<char> = literal.chars().collect();
        let mut part = String::new();
        let mut i = 0;
        let mut keep = |part: &mut String| {
            let trimmed = part.trim();
            if trimmed.chars().count() >= MIN_REPLY_FRAGMENT {
                fragments.insert(trimmed.to_owned());
            }
            part.clear();
        };
        while i < chars.len() {
            match (chars[i], chars.get(i + 1)) {
                ('{', Some('{')) | ('}', Some('}')) => {
                    part.push(chars[i]);
                    part.push(chars[i]);
                    i += 2;
                }
                ('{', _) => {
                    keep(&mut part);
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                    i += 1;
                }
                (c, _) => {
                    part.push(c);
                    i += 1;
                }
            }
        }
        keep(&mut part);
    }
    fragments.into_iter().collect()
}

/// `text` up to its `#[cfg(test)]` module (by the house style, the file's last item).
fn without_test_module(text: &str) -> &str {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim() == "#[cfg(test)]" {
            return &text[..offset];
        }
        offset += line.len();
    }
    text
}

/// The string literals of the code in `text` (not its comments), as written between
/// their quotes, escapes kept, with a line continuation (`\` at a line's end and the
/// next line's indentation) removed.
fn string_literals(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    for piece in pieces(&chars) {
        match piece.kind {
            PieceKind::RawStr => out.push(chars[piece.body].iter().collect()),
            PieceKind::Str => {
                let body = &chars[piece.body];
                let mut literal = String::new();
                let mut i = 0;
                while i < body.len() {
                    if body[i] == '\\' && body.get(i + 1) == Some(&'\n') {
                        i += 2;
                        while i < body.len() && body[i].is_whitespace() {
                            i += 1;
                        }
                        continue;
                    }
                    let skip = if body[i] == '\\' { 2 } else { 1 };
                    literal.extend(body[i..(i + skip).min(body.len())].iter());
                    i += skip;
                }
                out.push(literal);
            }
            PieceKind::Code | PieceKind::Comment | PieceKind::Char => {}
        }
    }
    out
}

#[test]
fn reply_fragments_and_string_literals() {
    let module = r##"
/// "Not a literal: a comment."
pub const QUEUED: &str = "Proposal queued for user review.";
pub fn skipped(detail: &str) -> String {
    format!("Skipped {{all}}: {detail} was \"already\" \
             true here.")
}
#[cfg(test)]
mod tests { const X: &str = "only a test's own words"; }
"##;
    assert_eq!(
        reply_fragments(module),
        vec![
            "Proposal queued for user review.".to_owned(),
            "Skipped {{all}}:".to_owned(),
            r#"was \"already\" true here."#.to_owned(),
        ]
    );
    assert_eq!(
        string_literals(
            r##"let a = 'x'; let b = r#"raw "one""#; // "not"
let c = "two";"##
        ),
        vec![r#"raw "one""#.to_owned(), "two".to_owned()]
    );
}

/// What reads the wall clock or draws a random id: time and ids are inputs (as in
/// quinn-proto and str0m), passed down from where a request, a command or a worker's
/// tick starts, so that a decision is replayable and a test sets the time it means.
const CLOCK_AND_ID_READS: &[&str] = &[
    "OffsetDateTime::now_utc(",
    "SystemTime::now(",
    "Uuid::new_v4(",
    "Uuid::now_v7(",
];

/// The crates whose code starts requests, commands and ticks (the composition roots:
/// the CLI's commands, the server's handlers, the gateway, the hooks, rig, the bench):
/// they read the clock and mint ids at the edge and pass them down.
const CLOCK_AND_ID_ROOTS: &[&str] = &[
    "assent-bench",
    "assent-cli",
    "assent-hook",
    "assent-mcp",
    "assent-rig",
    "assent-server",
];

/// The library source files (outside their tests) that still read the clock or draw a
/// random id, each with why. The pure crates are on it never; a new file may not join
/// it, and a file that stops reading must be taken off: the list only shrinks.
const CLOCK_AND_ID_READERS: &[(&str, &str)] = &[
    (
        "crates/assent-confirm/src/inputs.rs",
        "the engine's default clock and id source, which a caller replaces",
    ),
    (
        "crates/assent-confirm/src/bus.rs",
        "ConfirmationRequest::new's correlation id, drawn where the caller builds it",
    ),
    (
        "crates/assent-journal-host/src/handlers.rs",
        "the reference host's checklist row ids",
    ),
    (
        "crates/assent-journal-host/src/tasks.rs",
        "the reference host's checklist row ids",
    ),
    (
        "crates/assent-store/src/store.rs",
        "a new database's device id, when the caller names none, and the connect retry's deadline",
    ),
    (
        "crates/assent-store/src/tokens.rs",
        "a token's id and secret",
    ),
    (
        "crates/assent-store/src/webhooks.rs",
        "a subscription's id and a message's id",
    ),
    (
        "crates/assent-webhooks/src/sender.rs",
        "the delivery loop's tick and a message's id",
    ),
    ("crates/assent-webhooks/src/signing.rs", "a signing secret"),
    (
        "crates/assent-webhooks/src/slack_app.rs",
        "the Slack app's loop tick",
    ),
    (
        "crates/assent-webhooks/src/phone.rs",
        "the phone sender's loop tick, an answer link's token and the backoff's jitter",
    ),
];

#[test]
fn clock_and_random_id_reads_stay_in_the_listed_files() {
    let root = project_root();
    let mut files = Vec::new();
    collect_rs_files(&root.join("crates"), &mut files);
    files.sort();
    let mut offenders = Vec::new();
    let mut readers = BTreeSet::new();
    for file in &files {
        let name = relative(&root, file);
        let is_test = name
            .split('/')
            .any(|part| matches!(part, "tests" | "benches" | "examples" | "tests.rs"));
        let in_root = CLOCK_AND_ID_ROOTS
            .iter()
            .any(|krate| name.starts_with(&format!("crates/{krate}/")));
        if is_test || in_root || !name.contains("/src/") {
            continue;
        }
        let code = without_comments_and_literals(without_test_module(&read(file)));
        if CLOCK_AND_ID_READS.iter().any(|read| code.contains(read)) {
            readers.insert(name.clone());
            if !CLOCK_AND_ID_READERS
                .iter()
                .any(|(listed, _)| *listed == name)
            {
                offenders.push(format!(
                    "{name} reads the clock or draws a random id: take the time or the id as an input"
                ));
            }
        }
    }
    for (listed, _why) in CLOCK_AND_ID_READERS {
        if !readers.contains(*listed) {
            offenders.push(format!(
                "{listed} no longer reads the clock or draws an id: take it off CLOCK_AND_ID_READERS"
            ));
        }
        if PURE_CRATES
            .iter()
            .any(|krate| listed.starts_with(&format!("crates/{krate}/")))
        {
            offenders.push(format!("{listed}: a pure crate never reads the clock"));
        }
    }
    assert!(
        offenders.is_empty(),
        "clock and random-id reads (xtask/src/tidy.rs, CLOCK_AND_ID_READERS):\n{}",
        bullets(&offenders)
    );
}
