//! The hook host's view of a workspace: what an `Edit` or `Write` would change in a
//! file, shown to the person as a diff ("before"), and guarded as the item's
//! fingerprint, so a confirmation of a file that changed since is refused as stale.
//! Only readable UTF-8 files inside the workspace, up to [`MAX_FILE_BYTES`], are read:
//! a path that leads outside it through a symlink (`NOTES.md -> ~/.ssh/id_rsa`) is never
//! read, so no file outside the workspace reaches an item, `show` or Slack.
//!
//! It is also where path rules learn what the machine says of a path
//! ([`assent_tools::PathFacts`]): where it leads with symlinks followed, and what `~/`
//! stands for (the home folder of the user the hook runs as, the agents' own `~`).

use assent_confirm::{Host, LoadedState, SimpleHost};
use assent_domain::Target;
use assent_store::{Connection, HostMigration};
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

    fn handler(&self, tool_name: &str) -> Option<&dyn ToolHandler<Connection>> {
        self.0.handler(tool_name)
    }

    fn resolver(&self) -> &dyn CategoryResolver<Connection> {
        self.0.resolver()
    }

    fn snapshot<'a>(
        &'a self,
        _conn: &'a mut Connection,
        target: &'a Target,
    ) -> BoxFuture<'a, Result<LoadedState, String>> {
        let workspace = Workspace::new(PathBuf::from(&target.id));
        Box::pin(async move { Ok(Some(Box::new(workspace) as Box<dyn TargetState>)) })
    }
}

/// What a process that confirms hook calls reads of their workspaces on this machine
/// ([`assent_confirm::ForeignTargets`]): the workspace of a hook host's item, when its
/// folder exists here, so a confirmation asks the rules with where the call's paths
/// lead and finds a file that changed since the proposal before anything is recorded.
#[derive(Debug, Clone, Copy, Default)]
pub struct Workspaces;

impl assent_confirm::ForeignTargets for Workspaces {
    fn state(&self, host: &str, target: &Target) -> Option<Box<dyn TargetState>> {
        let root = Path::new(&target.id);
        // Another machine's workspace (a server confirming for a laptop) is not read:
        // its files are not these, and the hook checks again when it takes the answer.
        if !host.starts_with("hook_")
            || target.kind != crate::TARGET_KIND
            || !root.is_absolute()
            || !root.is_dir()
        {
            return None;
        }
        Some(Box::new(Workspace::new(root.to_path_buf())))
    }
}

/// A workspace folder.
#[derive(Debug)]
pub(crate) struct Workspace {
    root: PathBuf,
    /// The home folder `~/` stands for in a path rule, as a string.
    home: Option<String>,
}

impl assent_tools::PathFacts for Workspace {
    fn home(&self) -> Option<&str> {
        self.home.as_deref()
    }

    fn resolve(&self, path: &str) -> Result<String, String> {
        let resolved = self.resolved(path)?;
        resolved
            .to_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("{} is not UTF-8", resolved.display()))
    }
}

impl SummaryContext for Workspace {
    fn title_of(&self, _entity_id: &str) -> Option<String> {
        None
    }
}

impl TargetState for Workspace {
    fn paths(&self) -> Option<&dyn assent_tools::PathFacts> {
        Some(self)
    }

    fn before(&self, _tool_name: &str, args: &Value) -> Option<Value> {
        let text = |key: &str| args.get(key).and_then(Value::as_str);
        let written = text("file_path").or_else(|| text("path"))?;
        let path = self.inside(written)?;
        // Where it leads, symlinks followed: read only what stays in the workspace.
        if !self.resolved(written).ok()?.starts_with(&self.root) {
            return None;
        }
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
    /// The workspace at `root`, `~/` standing for the home folder of the user this
    /// process runs as.
    pub(crate) fn new(root: PathBuf) -> Self {
        let home = etcetera::home_dir()
            .ok()
            .and_then(|home| home.to_str().map(str::to_owned));
        Self { root, home }
    }

    /// Where `path` (absolute, or relative to the workspace) leads: its longest existing
    /// prefix canonicalized (every symlink followed), then the rest as written; under
    /// the workspace's own name when it lies inside the workspace's real folder. A
    /// dangling symlink on the way (writing through it creates its target, wherever
    /// that is) or a folder that cannot be read is an error.
    fn resolved(&self, path: &str) -> Result<PathBuf, String> {
        let path = Path::new(path);
        let full = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        let mut existing = full.as_path();
        let mut rest = Vec::new();
        let real = loop {
            match std::fs::canonicalize(existing) {
                Ok(real) => break real,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    if std::fs::symlink_metadata(existing).is_ok() {
                        return Err(format!("{} is a symlink to nothing", existing.display()));
                    }
                    let (Some(parent), Some(name)) = (existing.parent(), existing.file_name())
                    else {
                        return Err(format!("no part of {} exists", full.display()));
                    };
                    rest.push(name);
                    existing = parent;
                }
                Err(e) => return Err(format!("{}: {e}", existing.display())),
            }
        };
        let mut resolved = real;
        for name in rest.into_iter().rev() {
            resolved.push(name);
        }
        let real_root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        Ok(match resolved.strip_prefix(&real_root) {
            Ok(inside) => self.root.join(inside),
            Err(_) => resolved,
        })
    }

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
        let workspace = Workspace::new(dir.path().to_path_buf());
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

    /// Issue 52: a `Write` through `NOTES.md -> ~/.ssh/id_rsa` showed the key in the
    /// item's "before"; a path leading outside the workspace is never read.
    #[test]
    fn a_symlink_out_of_the_workspace_is_never_read() {
        let outside = tempfile::tempdir().expect("dir");
        let key = outside.path().join("id_rsa");
        std::fs::write(&key, "PRIVATE KEY\n").expect("key");
        let dir = tempfile::tempdir().expect("dir");
        std::os::unix::fs::symlink(&key, dir.path().join("NOTES.md")).expect("link");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("keys")).expect("link");
        std::fs::write(dir.path().join("inner.txt"), "inner\n").expect("file");
        std::os::unix::fs::symlink(dir.path().join("inner.txt"), dir.path().join("alias"))
            .expect("link");
        std::os::unix::fs::symlink(outside.path().join("gone"), dir.path().join("dangling"))
            .expect("link");
        let workspace = Workspace::new(dir.path().to_path_buf());
        for path in ["NOTES.md", "keys/id_rsa", "dangling"] {
            let write = json!({"file_path": path, "content": "x\n"});
            assert_eq!(workspace.before("Write", &write), None, "{path}");
            let absolute = json!({"file_path": dir.path().join(path), "content": "x\n"});
            assert_eq!(workspace.before("Write", &absolute), None, "{path}");
        }
        let inside = json!({"file_path": "alias", "content": "x\n"});
        assert_eq!(
            workspace.before("Write", &inside),
            Some(json!("@@ line 1 @@\n-inner\n+x\n")),
            "a symlink inside the workspace is followed"
        );
    }

    /// Issue 52: where a path leads, for path rules.
    #[test]
    fn a_path_resolves_through_its_symlinks() {
        use assent_tools::PathFacts;
        let outside = tempfile::tempdir().expect("dir");
        let dir = tempfile::tempdir().expect("dir");
        std::fs::create_dir(dir.path().join("src")).expect("src");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("src/keys")).expect("link");
        let workspace = Workspace::new(dir.path().to_path_buf());
        let real_outside = std::fs::canonicalize(outside.path()).expect("real");
        assert_eq!(
            workspace.resolve("src/keys/id_rsa"),
            Ok(real_outside.join("id_rsa").display().to_string())
        );
        assert_eq!(
            workspace.resolve("src/new/file.rs"),
            Ok(dir.path().join("src/new/file.rs").display().to_string()),
            "a path inside stays under the workspace's own name"
        );
    }
}
