//! The README's "Gate your own tools" section is this example: its Rust block is
//! `src/main.rs` byte for byte, its `[dependencies]` are this crate's (bar the path) and
//! within what the issue allows, and its printed output is what the binary prints.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const HEADING: &str = "## Gate your own tools";

/// What a stranger's crate may depend on besides `assent`.
const ALLOWED: [&str; 5] = ["assent", "tokio", "serde", "serde_json", "anyhow"];

fn read(relative: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The fenced blocks (info string, body) of the README section `heading`, which ends at
/// the next `## ` heading outside a fence.
fn section_blocks(readme: &str, heading: &str) -> Vec<(String, String)> {
    let mut lines = readme.lines().skip_while(|line| *line != heading);
    assert_eq!(
        lines.next(),
        Some(heading),
        "README has no line {heading:?}"
    );
    let mut blocks = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in lines {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.to_owned(), String::new())),
            (Some(_), Some("")) => blocks.extend(open.take()),
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) if line.starts_with("## ") => break,
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a fence in {heading:?} is never closed");
    blocks
}

fn block<'a>(blocks: &'a [(String, String)], info: &str) -> &'a str {
    let mut found = blocks.iter().filter(|(i, _)| i == info);
    let (_, body) = found
        .next()
        .unwrap_or_else(|| panic!("no ```{info} block under {HEADING:?}"));
    assert!(
        found.next().is_none(),
        "more than one ```{info} block under {HEADING:?}"
    );
    body
}

/// The `name = spec` lines of the `[dependencies]` table of a manifest.
fn dependencies(manifest: &str) -> BTreeMap<String, String> {
    manifest
        .lines()
        .skip_while(|line| line.trim() != "[dependencies]")
        .skip(1)
        .take_while(|line| !line.trim_start().starts_with('['))
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with('#'))
        .map(|line| {
            let (name, spec) = line
                .split_once('=')
                .unwrap_or_else(|| panic!("not a dependency line: {line:?}"));
            (name.trim().to_owned(), spec.trim().to_owned())
        })
        .collect()
}

/// `spec` without its `path = "…"` entry.
fn without_path(spec: &str) -> String {
    let start = spec.find("path = \"").expect("assent is a path dependency");
    let end = start + 8 + spec[start + 8..].find('"').expect("the path is closed") + 1;
    format!("{}{}", &spec[..start], &spec[end..])
}

#[test]
fn the_readme_shows_main_rs_byte_for_byte() {
    let blocks = section_blocks(&read("../../README.md"), HEADING);
    let main = read("src/main.rs");
    assert!(
        block(&blocks, "rust") == main,
        "the ```rust block under {HEADING:?} in README.md differs from \
         examples/invoicing/src/main.rs; copy the file into the README"
    );
}

#[test]
fn the_readme_dependencies_are_this_crates_and_few() {
    let blocks = section_blocks(&read("../../README.md"), HEADING);
    let shown = dependencies(block(&blocks, "toml"));
    let own = dependencies(&read("Cargo.toml"));
    for name in shown.keys() {
        assert!(ALLOWED.contains(&name.as_str()), "README asks for {name:?}");
    }
    let assent = shown.get("assent").expect("README depends on assent");
    assert!(assent.contains("default-features = false"), "{assent}");
    let normalize = |deps: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        deps.iter()
            .map(|(name, spec)| match name.as_str() {
                "assent" => (name.clone(), without_path(spec)),
                _ => (name.clone(), spec.clone()),
            })
            .collect()
    };
    assert_eq!(normalize(&shown), normalize(&own), "README vs Cargo.toml");
}

#[test]
fn the_example_runs_the_whole_story_and_prints_what_the_readme_says() {
    let output = Command::new(env!("CARGO_BIN_EXE_assent-example-invoicing"))
        .output()
        .expect("the example starts");
    let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{}\n{stdout}\n{stderr}",
        output.status
    );
    for expected in [
        "agent reads: Proposal queued for user review.\n",
        "after confirm (customer, amount, refunded): (\"ACME\", 12000, 2500)\n",
        "audit: Action None\n",
        "audit: Result Some(\"Refunded 2500 cents on INV-1.\")\n",
        "## Recent User Decisions\n",
        "- ✓ refund_invoice: Refund 2500 cents — confirmed\n",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    let blocks = section_blocks(&read("../../README.md"), HEADING);
    assert_eq!(
        block(&blocks, "text"),
        stdout,
        "README's output vs the binary's"
    );
}

#[test]
fn sections_end_at_the_next_heading_outside_fences() {
    let readme = "# A\n## Gate\ntext\n```rust\nfn main() {}\n```\n```text\n## not a heading\n```\n## Next\n```toml\nx = 1\n```\n";
    let blocks = section_blocks(readme, "## Gate");
    assert_eq!(
        blocks,
        [
            ("rust".to_owned(), "fn main() {}\n".to_owned()),
            ("text".to_owned(), "## not a heading\n".to_owned()),
        ]
    );
    assert_eq!(
        without_path(r#"{ path = "../x", default-features = false }"#),
        "{ , default-features = false }"
    );
}
