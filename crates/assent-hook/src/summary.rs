//! How a coding agent's call is summarised for a person: the command of a shell tool,
//! the file and the change of an edit, as the agents show them.

use assent_tools::SummaryContext;
use serde_json::Value;

/// `rm -rf build/` for a shell call (named `Bash: rm -rf build/` wherever items are
/// shown); `src/lib.rs: "old" → "new"` for an edit; `src/lib.rs (N lines)` for a
/// write; otherwise the input's keys and values. At most [`MAX_SUMMARY_CHARS`]
/// (its head and its tail): a call's input may be megabytes (a large `Write`), and the
/// item shows its whole input elsewhere.
pub fn summary(args: &Value, context: Option<&dyn SummaryContext>) -> String {
    assent_domain::head_and_tail(&full(args, context), MAX_SUMMARY_CHARS).into_owned()
}

/// The longest summary, in characters.
const MAX_SUMMARY_CHARS: usize = 2_000;

fn full(args: &Value, _context: Option<&dyn SummaryContext>) -> String {
    let text = |key: &str| args.get(key).and_then(Value::as_str);
    if let Some(command) = text("command").or_else(|| text("cmd")) {
        return command.to_owned();
    }
    if let Some(path) = text("file_path").or_else(|| text("path")) {
        if let (Some(old), Some(new)) = (text("old_string"), text("new_string")) {
            return format!("{path}: {old:?} → {new:?}");
        }
        if let Some(content) = text("content") {
            return format!("{path} (write {} lines)", content.lines().count());
        }
        return path.to_owned();
    }
    let titled = assent_tools::titled_summary("", args);
    titled
        .strip_prefix('(')
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or(&titled)
        .to_owned()
}
