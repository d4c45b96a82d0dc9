//! `cargo xtask api`: each published library crate's public API, checked against the
//! snapshot under `api/` and against the last release, so that a break is a decision
//! written in CHANGELOG.md, not an accident.
//!
//! The listing is the `public-api` crate's (one line per public item, with its
//! signature), read from rustdoc's JSON. rustdoc writes JSON only when unstable options
//! are allowed, so rustdoc alone runs with `RUSTC_BOOTSTRAP=1`, through a wrapper named
//! in `RUSTDOC`: rustc, and so the build of every dependency, sees the same environment
//! as `cargo test`, and nothing is rebuilt for it. The pinned toolchain writes format
//! 57, the version `public-api` 0.52.1 reads; a toolchain bump that changes the format
//! fails here with rustdoc's and `public-api`'s versions named.
//!
//! Three checks:
//! - `api/current/<crate>.txt` is this tree's API: a change to the public API shows in
//!   the diff of the commit that made it (`cargo xtask api --bless` rewrites them).
//! - Every crate whose API lost or changed an item since the last release
//!   (`api/<release>/<crate>.txt`, written once from that release's commit with
//!   `--baseline`) is named in a **Breaking** entry of CHANGELOG's `Unreleased` section.
//!   A changed signature is a removed line plus an added one, so it counts.
//! - No listed crate is missing from a snapshot directory, and no snapshot is left over.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

/// The release the API is compared with: its version, and the commit it was cut from
/// (0.1.0 predates tags).
pub const LAST_RELEASE: (&str, &str) = ("0.1.0", "ced3f05");

/// The rustdoc JSON format that `public-api` =0.52.1 (rustdoc-types 0.57) reads, and
/// that the pinned toolchain writes.
const RUSTDOC_JSON_FORMAT: u32 = 57;

/// What `cargo xtask api` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Compare with the snapshots and the release; change nothing.
    Check,
    /// Rewrite `api/current/` from this tree.
    Bless,
    /// Write `api/<release>/` from the tree at `root` (a checkout of the release).
    Baseline { root: PathBuf },
}

/// Runs `cargo xtask api` in `mode` for the workspace at `workspace`.
pub fn run(workspace: &Path, mode: &Mode) -> anyhow::Result<()> {
    match mode {
        Mode::Check => {
            let listings = list_all(workspace, DocWarnings::Deny)?;
            check_current(workspace, &listings)?;
            check_release(workspace, &listings)?;
            eprintln!(
                "==> api: {} crates match api/current/ and every break since {} is in CHANGELOG.md",
                listings.len(),
                LAST_RELEASE.0
            );
            Ok(())
        }
        Mode::Bless => {
            let listings = list_all(workspace, DocWarnings::Deny)?;
            write_snapshots(&workspace.join("api").join("current"), &listings)
        }
        Mode::Baseline { root } => {
            let listings = list_all(root, DocWarnings::Allow)?;
            write_snapshots(&workspace.join("api").join(LAST_RELEASE.0), &listings)
        }
    }
}

/// One crate's public API: its package name and its listing, one item per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub package: String,
    pub text: String,
}

/// The published library crates under `root/crates`: those with a `src/lib.rs` whose
/// manifest does not say `publish = false`, by package (directory) name.
pub fn library_crates(root: &Path) -> anyhow::Result<Vec<String>> {
    let crates_dir = root.join("crates");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&crates_dir)
        .with_context(|| format!("could not list {}", crates_dir.display()))?
    {
        let dir = entry?.path();
        if !dir.join("src").join("lib.rs").exists() {
            continue;
        }
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml"))
            .with_context(|| format!("could not read {}/Cargo.toml", dir.display()))?;
        if manifest
            .lines()
            .any(|line| line.replace(' ', "") == "publish=false")
        {
            continue;
        }
        if let Some(name) = dir.file_name().and_then(|n| n.to_str()) {
            names.push(name.to_owned());
        }
    }
    names.sort();
    Ok(names)
}

/// Whether a doc warning fails the listing: yes for this tree, no for a release's,
/// which is history and may predate the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DocWarnings {
    Deny,
    Allow,
}

fn list_all(root: &Path, warnings: DocWarnings) -> anyhow::Result<Vec<Listing>> {
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    rustdoc_json(root, &target_dir, warnings)?;
    library_crates(root)?
        .into_iter()
        .map(|package| {
            let json = target_dir
                .join("doc")
                .join(format!("{}.json", package.replace('-', "_")));
            // Blanket impls (`impl<T> X for T`) are left out: they follow from the
            // dependencies' traits in scope, which move with feature unification, not
            // with this crate's API. Auto traits (`Send`, `Sync`) stay: losing one breaks.
            let api = public_api::Builder::from_rustdoc_json(&json)
                .omit_blanket_impls(true)
                .build()
                .with_context(|| {
                    format!(
                        "public-api could not read {} (it reads rustdoc's JSON format \
                         {RUSTDOC_JSON_FORMAT}; a toolchain that writes another needs the \
                         public-api release for it)",
                        json.display(),
                    )
                })?;
            Ok(Listing {
                package,
                text: format!("{api}"),
            })
        })
        .collect()
}

/// rustdoc's JSON of every workspace library, in one `cargo doc` so that features unify
/// as in `cargo test --workspace` (one `cargo rustdoc -p` per crate would resolve them
/// per crate and rebuild dependencies for each). `-D warnings`: a broken, ambiguous or
/// private doc link fails here as it does in `cargo doc`'s HTML.
fn rustdoc_json(root: &Path, target_dir: &Path, warnings: DocWarnings) -> anyhow::Result<()> {
    let wrapper = rustdoc_wrapper(target_dir)?;
    let mut flags = std::env::var("RUSTDOCFLAGS").unwrap_or_default();
    if warnings == DocWarnings::Deny {
        flags.push_str(" -D warnings");
    }
    flags.push_str(" -Z unstable-options --output-format json");
    eprintln!("==> api: cargo doc --no-deps --workspace --lib --all-features (rustdoc JSON)");
    let status = Command::new(crate::cargo())
        .args([
            "doc",
            "--quiet",
            "--no-deps",
            "--workspace",
            "--lib",
            "--all-features",
        ])
        .env("RUSTDOC", wrapper)
        .env("RUSTDOCFLAGS", flags.trim())
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(root)
        .status()
        .context("could not start cargo doc")?;
    if !status.success() {
        bail!("`cargo doc` with rustdoc's JSON output exited with {status}");
    }
    Ok(())
}

/// A script that runs rustdoc with unstable options allowed (see the module doc).
fn rustdoc_wrapper(target_dir: &Path) -> anyhow::Result<PathBuf> {
    let dir = target_dir.join("xtask-api");
    std::fs::create_dir_all(&dir).with_context(|| format!("could not create {}", dir.display()))?;
    let path = dir.join("rustdoc-json");
    let rustdoc = std::env::var("RUSTDOC").unwrap_or_else(|_| "rustdoc".to_owned());
    std::fs::write(
        &path,
        format!("#!/bin/sh\nRUSTC_BOOTSTRAP=1 exec '{rustdoc}' \"$@\"\n"),
    )
    .with_context(|| format!("could not write {}", path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(path)
}

fn write_snapshots(dir: &Path, listings: &[Listing]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("could not create {}", dir.display()))?;
    for listing in listings {
        let path = dir.join(format!("{}.txt", listing.package));
        std::fs::write(&path, &listing.text)
            .with_context(|| format!("could not write {}", path.display()))?;
    }
    let listed: BTreeSet<String> = listings
        .iter()
        .map(|l| format!("{}.txt", l.package))
        .collect();
    for stale in snapshot_files(dir)?.difference(&listed) {
        std::fs::remove_file(dir.join(stale))?;
    }
    eprintln!(
        "==> api: wrote {} listings to {}",
        listings.len(),
        dir.display()
    );
    Ok(())
}

fn snapshot_files(dir: &Path) -> anyhow::Result<BTreeSet<String>> {
    let mut files = BTreeSet::new();
    for entry in
        std::fs::read_dir(dir).with_context(|| format!("could not list {}", dir.display()))?
    {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if name.ends_with(".txt") {
            files.insert(name);
        }
    }
    Ok(files)
}

fn read_snapshot(dir: &Path, package: &str) -> anyhow::Result<Option<String>> {
    let path = dir.join(format!("{package}.txt"));
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("could not read {}", path.display())),
    }
}

fn check_current(workspace: &Path, listings: &[Listing]) -> anyhow::Result<()> {
    let dir = workspace.join("api").join("current");
    let mut report = String::new();
    for listing in listings {
        match read_snapshot(&dir, &listing.package)? {
            None => writeln!(report, "{}: no snapshot in api/current/", listing.package)?,
            Some(snapshot) if snapshot != listing.text => {
                let (removed, added) = line_diff(&snapshot, &listing.text);
                writeln!(report, "{}: the public API changed", listing.package)?;
                for line in removed {
                    writeln!(report, "  - {line}")?;
                }
                for line in added {
                    writeln!(report, "  + {line}")?;
                }
            }
            Some(_) => {}
        }
    }
    let listed: BTreeSet<String> = listings
        .iter()
        .map(|l| format!("{}.txt", l.package))
        .collect();
    for stale in snapshot_files(&dir)?.difference(&listed) {
        writeln!(
            report,
            "api/current/{stale}: no such library crate any more"
        )?;
    }
    if !report.is_empty() {
        bail!(
            "the public API differs from api/current/:\n{report}\
             If the change is meant, run `cargo xtask api --bless`, commit api/current/, and \
             write any removed or changed item in CHANGELOG.md as **Breaking** with its migration."
        );
    }
    Ok(())
}

fn check_release(workspace: &Path, listings: &[Listing]) -> anyhow::Result<()> {
    let (release, _) = LAST_RELEASE;
    let dir = workspace.join("api").join(release);
    let changelog_path = workspace.join("CHANGELOG.md");
    let changelog = std::fs::read_to_string(&changelog_path)
        .with_context(|| format!("could not read {}", changelog_path.display()))?;
    let breaking = unreleased_breaking_entries(&changelog);
    if !dir.is_dir() {
        bail!(
            "{} is missing: write it with `cargo xtask api --baseline DIR`, DIR a checkout of \
             {release} (commit {})",
            dir.display(),
            LAST_RELEASE.1
        );
    }
    let mut missing = Vec::new();
    for listing in listings {
        // A crate new since the release cannot break anyone yet.
        let Some(released) = read_snapshot(&dir, &listing.package)? else {
            continue;
        };
        let (removed, _) = line_diff(&released, &listing.text);
        if removed.is_empty() {
            continue;
        }
        if !breaking
            .iter()
            .any(|entry| names_crate(entry, &listing.package))
        {
            missing.push(format!(
                "{} ({} items removed or changed since {release}, e.g. `{}`)",
                listing.package,
                removed.len(),
                removed[0]
            ));
        }
    }
    if !missing.is_empty() {
        bail!(
            "these crates broke their API since {release} and no **Breaking** entry of \
             CHANGELOG.md's Unreleased section names them:\n  {}",
            missing.join("\n  ")
        );
    }
    Ok(())
}

/// The bullets of the `## Unreleased` section that say **Breaking**, each with its
/// continuation lines.
pub fn unreleased_breaking_entries(changelog: &str) -> Vec<String> {
    let mut in_unreleased = false;
    let mut entries: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in changelog.lines() {
        if line.starts_with("## ") {
            in_unreleased = line.trim() == "## Unreleased";
            entries.extend(current.take());
            continue;
        }
        if !in_unreleased {
            continue;
        }
        if line.starts_with("- ") || line.starts_with('#') || line.trim().is_empty() {
            entries.extend(current.take());
            if line.starts_with("- ") {
                current = Some(line.to_owned());
            }
        } else if let Some(entry) = current.as_mut() {
            entry.push('\n');
            entry.push_str(line);
        }
    }
    entries.extend(current);
    entries.retain(|entry| entry.contains("Breaking"));
    entries
}

/// Whether a CHANGELOG entry names `package`: `assent-confirm`, `assent_confirm`, or
/// for the facade `assent`, a path `assent::…` or "the `assent` facade".
pub fn names_crate(entry: &str, package: &str) -> bool {
    if package == "assent" {
        return entry.contains("`assent::") || entry.contains("`assent` facade");
    }
    let snake = package.replace('-', "_");
    let mentions = |name: &str| {
        entry.match_indices(name).any(|(at, _)| {
            let next = entry[at + name.len()..].chars().next();
            // `assent-mcp` must not count as a mention of `assent-mcp-fixture`, nor
            // `assent_tools` of `assent_toolsmith`.
            !next.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-')
        })
    };
    mentions(package) || mentions(&snake)
}

/// The lines only in `old` and the lines only in `new`, each in its listing's order.
pub fn line_diff<'a>(old: &'a str, new: &'a str) -> (Vec<&'a str>, Vec<&'a str>) {
    let old_lines: BTreeSet<&str> = old.lines().collect();
    let new_lines: BTreeSet<&str> = new.lines().collect();
    let removed = old
        .lines()
        .filter(|line| !new_lines.contains(line))
        .collect();
    let added = new
        .lines()
        .filter(|line| !old_lines.contains(line))
        .collect();
    (removed, added)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHANGELOG: &str = "# Changelog\n\n## Unreleased\n\n### Something\n\
        - **Breaking:** `ConfirmError::Conflict` has fields (assent-confirm).\n\
        - New: `assent_store::plan` (not a break).\n\
        - **Breaking: `#[non_exhaustive]` enums**: `McpError`\n  (assent-mcp); `RigError`.\n\n\
        ## 0.1.0\n- **Breaking:** assent-tools changed.\n";

    #[test]
    fn breaking_entries_come_from_unreleased_only_with_their_continuations() {
        let entries = unreleased_breaking_entries(CHANGELOG);
        assert_eq!(entries.len(), 2, "{entries:?}");
        assert!(names_crate(&entries[0], "assent-confirm"));
        assert!(names_crate(&entries[1], "assent-mcp"));
        assert!(!entries.iter().any(|e| names_crate(e, "assent-tools")));
        assert!(!entries.iter().any(|e| names_crate(e, "assent-store")));
    }

    #[test]
    fn a_crate_is_named_whole_not_as_a_prefix() {
        assert!(names_crate(
            "changed in assent_tools::policy",
            "assent-tools"
        ));
        assert!(!names_crate("see assent-mcp-fixture", "assent-mcp"));
        assert!(!names_crate("assent_toolsmith", "assent-tools"));
        assert!(names_crate("the `assent` facade no longer", "assent"));
        assert!(names_crate("`assent::Engine` moved", "assent"));
        assert!(!names_crate("assent-confirm changed", "assent"));
    }

    #[test]
    fn a_changed_signature_is_a_removed_line_and_an_added_one() {
        let (removed, added) = line_diff(
            "pub fn a(x: u32)\npub fn b()\n",
            "pub fn a(x: u64)\npub fn b()\npub fn c()\n",
        );
        assert_eq!(removed, ["pub fn a(x: u32)"]);
        assert_eq!(added, ["pub fn a(x: u64)", "pub fn c()"]);
    }

    #[test]
    fn library_crates_are_the_published_ones_with_a_lib() {
        let root = crate::project_root();
        let crates = library_crates(&root).unwrap();
        assert!(crates.contains(&"assent-confirm".to_owned()), "{crates:?}");
        assert!(crates.contains(&"assent".to_owned()), "{crates:?}");
        assert!(
            !crates.contains(&"assent-bench".to_owned()),
            "publish = false"
        );
        assert!(!crates.contains(&"assent-cli".to_owned()), "no lib.rs");
    }
}
