//! Diffs of file writes. A tool that writes a file (by its declared input schema: a
//! `path` and a `content` or `edits`; or as the server's `assent` block says, `"tools":
//! {"TOOL": {"preview": {"read": "read_text_file", "path": "path"}}}`) has the file read
//! through the upstream's own read tool when a call of it is queued: the item's `before`
//! is then a unified diff of what the call would change (bounded, head and tail kept),
//! and its fingerprint the file's path and SHA-256, so a file that changed since is
//! caught before the write runs. An `edits` write is applied as the npm filesystem
//! server applies it ([`crate::edits`]).
//!
//! What is read is the upstream's word about a file the agent names: untrusted text. It
//! is only ever shown as data (every surface marks misleading characters), bounded in
//! time and size, and a read that fails or is too large just leaves the item without a
//! diff. The read names exactly the path the write names, through the same server, so
//! the server's own checks (allowed directories, symlinks resolved) hold for both; and
//! before it, the gateway resolves the path itself ([`crate::reach`]): a file outside
//! the folders of the server's command is not read at all. Where no diff is shown for
//! a reason (a path leading out of those folders, an edit whose outcome cannot be
//! told), the item's `before` says so in one line.

use crate::config::{FilePreview, default_path_key};
use crate::edits::Edited;
use crate::upstream::Upstream;
use assent_domain::canonical_json;
use rmcp::model::{ContentBlock, Tool};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// The largest file whose change is shown.
pub const MAX_READ_BYTES: usize = 256 * 1024;

/// How long a read may take before the call is queued without a diff.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// How many lines of a diff are kept: the first and the last half of them.
pub const MAX_DIFF_LINES: usize = 400;

/// The read tools looked for, in order, when no read tool is configured.
const READ_TOOLS: [&str; 2] = ["read_text_file", "read_file"];

/// The preview of `tool` (the upstream's own name) among the upstream's `tools`: the
/// configured one, else one found by its schema (`path` with `content` or `edits`)
/// when the upstream lists a read tool taking a `path`. `None`: not a file write.
pub fn preview_of(
    tool: &Tool,
    tools: &[Tool],
    configured: &BTreeMap<String, FilePreview>,
) -> Option<FilePreview> {
    if let Some(preview) = configured.get(tool.name.as_ref()) {
        return Some(preview.clone());
    }
    let properties = tool.input_schema.get("properties")?.as_object()?;
    let writes = properties.contains_key("path")
        && (properties.contains_key("content") || properties.contains_key("edits"));
    if !writes {
        return None;
    }
    let read = READ_TOOLS.iter().find(|name| {
        tools.iter().any(|t| {
            t.name == **name
                && t.input_schema
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.contains_key("path"))
        })
    })?;
    Some(FilePreview {
        read: (*read).to_owned(),
        path: default_path_key(),
    })
}

/// The read tool's arguments for `path`: `{path}`, and `head` (lines) when the read tool
/// declares it, so a file of more lines than [`MAX_READ_BYTES`] could hold is not sent
/// whole (what comes back is still measured); not for a `whole` reading, which an
/// `edits` write needs (the npm server's `head` drops the file's last newline, and
/// where an edit applies depends on every character).
pub fn read_args(
    preview: &FilePreview,
    read_tool: Option<&Tool>,
    path: &str,
    whole: bool,
) -> Value {
    let mut args = json!({ preview.path.clone(): path });
    let takes_head = !whole
        && read_tool
            .and_then(|t| t.input_schema.get("properties"))
            .and_then(Value::as_object)
            .is_some_and(|p| p.contains_key("head"));
    if takes_head {
        args["head"] = json!(MAX_READ_BYTES);
    }
    args
}

/// What the write `args` would leave in a file that holds `now`: its `content`, or its
/// `edits` (`[{oldText, newText}]`) applied as the npm filesystem server applies them
/// ([`crate::edits`]); why that cannot be told otherwise.
pub(crate) fn written(args: &Value, now: &str) -> Result<Edited, String> {
    if let Some(content) = args.get("content").and_then(Value::as_str) {
        return Ok(Edited {
            text: content.to_owned(),
            crlf: false,
        });
    }
    if args.get("dryRun") == Some(&Value::Bool(true)) {
        return Err("the call asks for a dry run (`dryRun`): the server writes nothing".to_owned());
    }
    let edits = args
        .get("edits")
        .and_then(Value::as_array)
        .ok_or("the write has neither a `content` nor a list of `edits`")?;
    let mut pairs = Vec::with_capacity(edits.len());
    for (n, edit) in edits.iter().enumerate() {
        let text = |key: &str| edit.get(key).and_then(Value::as_str);
        match (text("oldText"), text("newText")) {
            (Some(old), Some(new)) => pairs.push((old, new)),
            _ => return Err(format!("edit {} has no oldText and newText", n + 1)),
        }
    }
    crate::edits::edited(now, &pairs)
}

/// The line a diff ends with when the write also turns the file's `\r\n` line endings
/// into `\n` (its lines show no line endings).
pub const CRLF_NOTE: &str = "\\ and every CRLF line ending of the file becomes LF\n";

/// A unified diff of `before` and `after` for `path`: one hunk of the lines that
/// differ (the lines both share at the start and the end are left out, counted by the
/// hunk's line numbers), at most `MAX_DIFF_LINES` of them, the first and the last
/// half kept around a line saying how many were left out.
pub fn unified_diff(path: &str, before: &str, after: &str) -> String {
    let assent_domain::ChangedLines {
        head,
        removed,
        added,
    } = assent_domain::changed_lines(before, after);
    let mut lines: Vec<String> = Vec::with_capacity(removed.len() + added.len());
    lines.extend(removed.iter().map(|line| format!("-{line}")));
    lines.extend(added.iter().map(|line| format!("+{line}")));
    if lines.is_empty() {
        return format!("--- {path}\n+++ {path}\n(no change)\n");
    }
    let start = |len: usize| if len == 0 { head } else { head + 1 };
    let mut out = format!(
        "--- {path}\n+++ {path}\n@@ -{},{} +{},{} @@\n",
        start(removed.len()),
        removed.len(),
        start(added.len()),
        added.len()
    );
    if lines.len() > MAX_DIFF_LINES {
        let half = MAX_DIFF_LINES / 2;
        let left_out = lines.len() - 2 * half;
        let tail_lines = lines.split_off(lines.len() - half);
        lines.truncate(half);
        lines.push(format!("… {left_out} diff lines left out …"));
        lines.extend(tail_lines);
    }
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// What a write of `path` is guarded by: the path and the SHA-256 of the content read.
pub fn fingerprint(path: &str, content: &str) -> Value {
    json!({
        "path": path,
        "sha256": assent_domain::lower_hex(&Sha256::digest(content.as_bytes())),
    })
}

/// Why a file was not read for a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// Not asked for: the reason, said in the item ([`crate::reach`]).
    Withheld(String),
    /// Asked for, and not told (an error, no text, too large, too late: a debug line
    /// says which).
    Failed,
}

/// The content of file `path` as the upstream's read tool gives it now (`whole`: all of
/// it, see [`read_args`]), within [`READ_DEADLINE`] and [`MAX_READ_BYTES`]; never read
/// when the path leads outside the folders of the server's command.
pub async fn read_now(
    upstream: &Upstream,
    preview: &FilePreview,
    path: &str,
    whole: bool,
) -> Result<String, Unread> {
    if let Some(why) = crate::reach::withheld(upstream.source(), path) {
        tracing::info!(path, %why, "the file is not read for a diff");
        return Err(Unread::Withheld(why));
    }
    let tools = upstream.tools();
    let read_tool = tools.iter().find(|t| t.name == preview.read.as_str());
    let args = read_args(preview, read_tool, path, whole);
    let result = match tokio::time::timeout(READ_DEADLINE, upstream.call(&preview.read, &args))
        .await
    {
        Ok(Ok(result)) => result,
        Ok(Err(error)) => {
            tracing::debug!(%error, path, read = %preview.read, "the file was not read for a diff");
            return Err(Unread::Failed);
        }
        Err(_) => {
            tracing::debug!(path, read = %preview.read, "the file was not read for a diff within {READ_DEADLINE:?}");
            return Err(Unread::Failed);
        }
    };
    let text = match result.content.as_slice() {
        [ContentBlock::Text(text)] if result.is_error != Some(true) => &text.text,
        _ => {
            tracing::debug!(path, read = %preview.read, "the read answered no text: no diff");
            return Err(Unread::Failed);
        }
    };
    if text.len() > MAX_READ_BYTES {
        tracing::debug!(path, bytes = text.len(), "the file is too large for a diff");
        return Err(Unread::Failed);
    }
    Ok(text.clone())
}

/// Whether a reading for write `args` must be of the whole file (an `edits` write).
pub fn whole_for(args: &Value) -> bool {
    args.get("edits").is_some()
}

/// The `before` and fingerprint of one queued call, from the file as it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The diff shown as the item's `before`, or a line saying why there is none.
    pub before: Value,
    /// The file's path and digest; `None` when the file was not read.
    pub fingerprint: Option<Value>,
}

impl Preview {
    /// The preview of write `args` of `path` over the file's content `now`: the diff,
    /// or (what the write leaves cannot be told) a line saying why there is none; the
    /// file's digest guards the write either way.
    pub fn of(path: &str, args: &Value, now: &str) -> Self {
        let before = match written(args, now) {
            Ok(after) => {
                let mut diff = unified_diff(path, now, &after.text);
                if after.crlf {
                    diff.push_str(CRLF_NOTE);
                }
                diff
            }
            Err(why) => no_diff(&why),
        };
        Self {
            before: Value::String(before),
            fingerprint: Some(fingerprint(path, now)),
        }
    }

    /// The preview of a write whose file was not read, for reason `why`: that line, and
    /// nothing to guard.
    pub fn withheld(why: &str) -> Self {
        Self {
            before: Value::String(no_diff(why)),
            fingerprint: None,
        }
    }
}

/// What an item's `before` says when it shows no diff.
fn no_diff(why: &str) -> String {
    format!("(no diff shown: {why})")
}

/// The previews read for calls about to be queued, shared by the gateway (which reads)
/// and its host's target state (which the wake asks for `before` and fingerprints),
/// keyed by tool and arguments: a read never crosses into another call.
#[derive(Debug, Default)]
pub struct Previews(Mutex<HashMap<String, Preview>>);

impl Previews {
    fn key(tool: &str, args: &Value) -> String {
        format!("{tool}\u{0}{}", canonical_json(args))
    }

    /// Keeps `preview` for the call `tool(args)` until [`Previews::forget`].
    pub fn keep(&self, tool: &str, args: &Value, preview: Preview) {
        if let Ok(mut kept) = self.0.lock() {
            kept.insert(Self::key(tool, args), preview);
        }
    }

    /// Drops the preview of `tool(args)` (its wake is over).
    pub fn forget(&self, tool: &str, args: &Value) {
        if let Ok(mut kept) = self.0.lock() {
            kept.remove(&Self::key(tool, args));
        }
    }

    /// The preview of `tool(args)`, if one was read.
    pub fn get(&self, tool: &str, args: &Value) -> Option<Preview> {
        self.0.lock().ok()?.get(&Self::key(tool, args)).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, properties: Value) -> Tool {
        let schema = json!({"type": "object", "properties": properties});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Tool::new(name.to_owned(), "", std::sync::Arc::new(schema))
    }

    #[test]
    fn a_write_is_found_by_its_schema_when_a_read_tool_is_listed() {
        let write = tool("write_file", json!({"path": {}, "content": {}}));
        let edit = tool("edit_file", json!({"path": {}, "edits": {}}));
        let read = tool("read_text_file", json!({"path": {}, "head": {}}));
        let tools = vec![write.clone(), edit.clone(), read.clone()];
        let none = BTreeMap::new();
        let found = preview_of(&write, &tools, &none).expect("a write");
        assert_eq!(found.read, "read_text_file");
        assert!(preview_of(&edit, &tools, &none).is_some());
        assert_eq!(preview_of(&read, &tools, &none), None, "a read is no write");
        assert_eq!(
            preview_of(&write, std::slice::from_ref(&write), &none),
            None,
            "no read tool, no preview"
        );
        let configured = BTreeMap::from([(
            "put".to_owned(),
            FilePreview {
                read: "get".into(),
                path: "file".into(),
            },
        )]);
        let put = tool("put", json!({"file": {}, "body": {}}));
        assert_eq!(
            preview_of(&put, &[], &configured).map(|p| p.path),
            Some("file".into())
        );
        assert_eq!(
            read_args(&found, Some(&read), "/a", false)["head"],
            json!(MAX_READ_BYTES)
        );
        assert_eq!(
            read_args(&found, Some(&read), "/a", true),
            json!({"path": "/a"}),
            "an edit reads the whole file"
        );
    }

    #[test]
    fn edits_apply_in_order_and_an_edit_that_finds_nothing_shows_no_diff() {
        let edits =
            json!({"edits": [{"oldText": "b", "newText": "B"}, {"oldText": "c", "newText": ""}]});
        let text = |args: &Value, now: &str| written(args, now).map(|w| w.text);
        assert_eq!(text(&edits, "a\nb\nc\n").as_deref(), Ok("a\nB\n\n"));
        let missing = json!({"edits": [{"oldText": "zzz", "newText": "B"}]});
        let why = text(&missing, "a\n").expect_err("nothing found");
        assert!(why.contains("edit 1's oldText is not in the file"), "{why}");
        assert_eq!(text(&json!({"content": "x"}), "old").as_deref(), Ok("x"));
        // Said in the item, the file's digest kept.
        let preview = Preview::of("/f", &missing, "a\n");
        assert_eq!(
            preview.before,
            json!(
                "(no diff shown: edit 1's oldText is not in the file (the server will refuse the call))"
            )
        );
        assert!(preview.fingerprint.is_some());
        let dry = json!({"edits": [{"oldText": "a", "newText": "b"}], "dryRun": true});
        assert!(text(&dry, "a\n").expect_err("no write").contains("dry run"));
    }

    #[test]
    fn a_diff_shows_the_changed_lines_with_their_numbers() {
        assert_eq!(
            unified_diff("/f", "a\nb\nc\n", "a\nB\nc\n"),
            "--- /f\n+++ /f\n@@ -2,1 +2,1 @@\n-b\n+B\n"
        );
        assert_eq!(
            unified_diff("/f", "", "x\n"),
            "--- /f\n+++ /f\n@@ -0,0 +1,1 @@\n+x\n"
        );
    }

    #[test]
    fn a_huge_diff_keeps_its_head_and_tail() {
        let after: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let diff = unified_diff("/f", "", &after);
        assert!(diff.contains("+line 0\n"), "the head");
        assert!(diff.contains("+line 999\n"), "the tail");
        assert!(diff.contains("… 600 diff lines left out …"), "{diff}");
        assert!(!diff.contains("+line 500\n"));
        assert!(diff.lines().count() < MAX_DIFF_LINES + 5);
    }

    #[test]
    fn a_preview_is_kept_for_its_call_only() {
        let previews = Previews::default();
        let args = json!({"path": "/f", "content": "new"});
        let preview = Preview::of("/f", &args, "old");
        previews.keep("write_file", &args, preview.clone());
        assert_eq!(previews.get("write_file", &args), Some(preview));
        assert_eq!(
            previews.get("write_file", &json!({"path": "/g", "content": "new"})),
            None
        );
        previews.forget("write_file", &args);
        assert_eq!(previews.get("write_file", &args), None);
    }

    /// Issue 52, point 19: the diff of an `edit_file` is what the npm server writes:
    /// a `$&` it may substitute shows no diff and says why; its line-ending and
    /// indentation rules are the diff's.
    #[test]
    fn an_edit_shows_what_the_npm_server_writes_or_says_why_not() {
        let dollar = json!({"path": "/f", "edits": [{"oldText": "beta", "newText": "[$&]"}]});
        let shown = Preview::of("/f", &dollar, "alpha\nbeta\n").before;
        let shown = shown.as_str().expect("a line");
        assert!(
            shown.starts_with("(no diff shown: a newText holds `$&`"),
            "{shown}"
        );
        assert!(!shown.contains("+[$&]"), "{shown}");
        let crlf = json!({"path": "/f", "edits": [{"oldText": "two", "newText": "2"}]});
        assert_eq!(
            Preview::of("/f", &crlf, "one\r\ntwo\r\n").before,
            json!(format!(
                "--- /f\n+++ /f\n@@ -2,1 +2,1 @@\n-two\n+2\n{CRLF_NOTE}"
            ))
        );
        let loose = json!({"path": "/f", "edits": [
            {"oldText": "def f():\n    return 1", "newText": "def f():\nreturn 2"}]});
        assert_eq!(
            Preview::of("/f", &loose, "def f():\n\treturn 1\n").before,
            json!("--- /f\n+++ /f\n@@ -2,1 +2,1 @@\n-\treturn 1\n+return 2\n")
        );
    }

    #[test]
    fn a_withheld_preview_says_why_and_guards_nothing() {
        let preview = Preview::withheld("/p/NOTES.md leads to /home/u/.ssh/id_rsa");
        assert_eq!(
            preview.before,
            json!("(no diff shown: /p/NOTES.md leads to /home/u/.ssh/id_rsa)")
        );
        assert_eq!(preview.fingerprint, None);
    }
}
