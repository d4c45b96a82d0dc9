//! The hook host's view of a workspace: what an `Edit` or `Write` would change in a
//! file, shown to the person as a diff ("before"), and guarded as the item's
//! fingerprint, so a confirmation of a file that changed since is refused as stale.
//! Only readable UTF-8 files inside the workspace, up to [`MAX_FILE_BYTES`], are read.

use assent_confirm::{Host, LoadedState, SimpleHost};
use assent_domain::Target;
use assent_store::{AnyConnection, HostMigration};
use assent_tools::{BoxFuture, CategoryResolver, SummaryContext, TargetState, ToolHandler};
use serde_json::Value;
use std::path::{Component, Path, PathBuf};

/// The largest file whose change is shown.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;

/// A [`SimpleHost`] whose targets are workspaces on this machine.
pub(crate) struct WorkspaceHost(pub(crate) SimpleHost);

impl Host for WorkspaceHost {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn migrations(&self) -> &[HostMigration] {
        self.0.migrations()
    }

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<AnyConnection>> {
        self.0.handler(tool_name)
    }

    fn resolver(&self) -> &dyn CategoryResolver<AnyConnection> {
        self.0.resolver()
    }

    fn snapshot<'a>(
        &'a self,
        _conn: &'a mut AnyConnection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        let workspace = PathBuf::from(&target.id);
        Box::pin(async move {
            Ok(Some(
                Box::new(Workspace { root: workspace }) as Box<dyn TargetState>
            ))
        })
    }
}

/// A workspace folder.
#[derive(Debug)]
struct Workspace {
    root: PathBuf,
}

impl SummaryContext for Workspace {
    fn title_of(&self, _entity_id: &str) -> Option<String> {
        None
    }
}

impl TargetState for Workspace {
    fn before(&self, _tool_name: &str, args: &Value) -> Option<Value> {
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let path = text("file_path").or_else(|| text("path"))?;
        let path = self.inside(path)?;
        let now = match std::fs::metadata(&path) {
            Ok(meta) if meta.is_file() && meta.len() <= MAX_FILE_BYTES => {
                std::fs::read_to_string(&path).ok()?
            }
            Ok(_) => return None,
            // A new file: everything is added.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(_) => return None,
        };
        let after = if let Some(content) = text("content") {
            content.to_owned()
        } else {
            let (old, new) = (text("old_string")?, text("new_string")?);
            if old.is_empty() || !now.contains(old) {
                return None;
            }
            if args.get("replace_all").and_then(Value::as_bool) == Some(true) {
                now.replace(old, new)
            } else {
                now.replacen(old, new, 1)
            }
        };
        Some(Value::String(diff(&now, &after)))
    }
}

impl Workspace {
    /// `path` (absolute, or relative to the workspace) when it lies inside the
    /// workspace with no `.` or `..` in it.
    fn inside(&self, path: &str) -> Option<PathBuf> {
        let path = Path::new(path);
        let path = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let plain = path.components().all(|c| {
            matches!(
                c,
                Component::RootDir | Component::Normal(_) | Component::Prefix(_)
            )
        });
        (plain && self.root.is_absolute() && path.starts_with(&self.root)).then_some(path)
    }
}

/// A line diff of `before` and `after`: the lines they share at the start and the end
/// are left out (counted), the rest shown as `-` and `+` lines.
pub fn diff(before: &str, after: &str) -> String {
    let changed = assent_domain::changed_lines(before, after);
    let mut out = format!("@@ line {} @@\n", changed.head + 1);
    for line in &changed.removed {
        out.push_str(&format!("-{line}\n"));
    }
    for line in &changed.added {
        out.push_str(&format!("+{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_diff_shows_the_changed_lines_only() {
        assert_eq!(diff("a\nb\nc\n", "a\nB\nc\n"), "@@ line 2 @@\n-b\n+B\n");
        assert_eq!(diff("", "x\n"), "@@ line 1 @@\n+x\n");
        assert_eq!(diff("a\nb\n", "a\n"), "@@ line 2 @@\n-b\n");
    }

    #[test]
    fn an_edit_inside_the_workspace_shows_its_diff_and_nothing_outside_is_read() {
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("main.rs");
        std::fs::write(&file, "fn main() {\n    old();\n}\n").expect("file");
        let workspace = Workspace {
            root: dir.path().to_path_buf(),
        };
        let edit = json!({"file_path": file, "old_string": "old()", "new_string": "new()"});
        assert_eq!(
            workspace.before("Edit", &edit),
            Some(json!("@@ line 2 @@\n-    old();\n+    new();\n"))
        );
        let write = json!({"file_path": "main.rs", "content": "fn main() {}\n"});
        assert!(
            workspace.before("Write", &write).is_some(),
            "relative to the workspace"
        );
        for outside in ["/etc/passwd", "../x", "sub/../../etc/passwd"] {
            let read = json!({"file_path": outside, "content": "x"});
            assert_eq!(workspace.before("Write", &read), None, "{outside}");
        }
    }
}
