//! The guide's commands run as written: every ```` ```sh runnable ```` block of
//! `docs/guide/*.md`, in order, as one `bash -euo pipefail` script per chapter, against
//! the `assent` binary of this build on a fresh database in a fresh directory. Blocks
//! that need a server, the network or an MCP client are plain ```` ```sh ```` and are
//! not run.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The info string that marks a block to run.
const RUNNABLE: &str = "sh runnable";

/// Fewer runnable blocks than this across the guide means the extraction broke (or the
/// guide lost its examples): the test must not pass by running nothing.
const AT_LEAST: usize = 8;

/// The bodies of the `sh runnable` blocks of a Markdown text, in order.
fn runnable_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    // The open fence's info string and body so far.
    let mut open: Option<(String, String)> = None;
    for line in markdown.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((info.trim().to_owned(), String::new())),
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                if let Some((info, body)) = open.take()
                    && info == RUNNABLE
                {
                    blocks.push(body);
                }
            }
            (Some((_, body)), _) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    assert!(open.is_none(), "a fence is never closed");
    blocks
}

/// The guide's chapters, sorted by name.
fn chapters() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide");
    let mut chapters: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    chapters.sort();
    chapters
}

/// Runs `script` with bash in a fresh directory, `assent` first on the `PATH` and a
/// fresh database; panics with the script and its output unless it exits 0.
fn run_chapter(chapter: &Path, script: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = Path::new(env!("CARGO_BIN_EXE_assent"));
    let bin_dir = bin.parent().expect("the binary's directory");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(
        std::iter::once(bin_dir.to_path_buf()).chain(std::env::split_paths(&path)),
    )
    .expect("a PATH");
    let out = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(dir.path())
        .env("PATH", path)
        .env(
            "ASSENT_DATABASE_URL",
            format!("sqlite://{}/guide.db", dir.path().display()),
        )
        .env("HOME", dir.path())
        .env_remove("RUST_LOG")
        .env_remove("ASSENT_TOKEN")
        .env_remove("ASSENT_PEER_TOKEN")
        .output()
        .expect("bash runs");
    assert!(
        out.status.success(),
        "{}: the runnable blocks failed ({}).\n--- script ---\n{script}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        chapter.display(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
}

#[test]
fn every_runnable_block_of_the_guide_runs_as_written() {
    let mut found = 0;
    for chapter in chapters() {
        let text = std::fs::read_to_string(&chapter)
            .unwrap_or_else(|e| panic!("{}: {e}", chapter.display()));
        let blocks = runnable_blocks(&text);
        if blocks.is_empty() {
            continue;
        }
        found += blocks.len();
        run_chapter(&chapter, &blocks.concat());
    }
    assert!(
        found >= AT_LEAST,
        "only {found} runnable blocks in docs/guide (at least {AT_LEAST} expected)"
    );
}

#[test]
fn guide_blocks_are_found_by_their_info_string_only() {
    let text = "# A\n```sh runnable\nassent pending\n```\n```sh\nassent serve\n```\n\
                ```console\n$ assent x\n```\n```sh runnable\ncat <<'EOF'\n```not a fence end\nEOF\n```\n";
    assert_eq!(
        runnable_blocks(text),
        ["assent pending\n", "cat <<'EOF'\n```not a fence end\nEOF\n"]
    );
}
