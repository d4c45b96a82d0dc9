//! Which files a diff may read: only one whose path, resolved on this machine (`~/`
//! as the home folder, a relative path against the server's folders as the npm
//! filesystem server resolves it, `.` and `..` taken away, then every symlink of the
//! longest part that exists followed), lies inside the folders the upstream's command
//! names (the npm filesystem server's allowed directories are its arguments). A write
//! of `NOTES.md -> ~/.ssh/id_rsa` is then queued with no diff and a line saying why,
//! so the key never reaches the item's `before`, `assent show` or a Slack message.
//!
//! A file of more than one hard link is not read either: its other names may lie
//! anywhere, and no resolution of the path can tell.
//!
//! A server started with no folder in its command gives no diff (where its files may
//! lie is not known); a server reached by URL keeps its own word (its paths are not
//! this machine's, and its read tool's checks are the only ones there are).

use crate::config::UpstreamSource;
use std::path::{Component, Path, PathBuf};

/// Why the file `path` of the server started as `source` is not read for a diff, or
/// `None`: it may be.
pub(crate) fn withheld(source: &UpstreamSource, path: &str) -> Option<String> {
    let UpstreamSource::Command { args, .. } = source else {
        return None;
    };
    let home = std::env::home_dir();
    let cwd = std::env::current_dir().ok();
    let folders = folders(args, cwd.as_deref(), home.as_deref());
    outside(path, &folders, home.as_deref())
}

/// The folders among a server's command-line `args` (as given, or as the value of a
/// `--flag=VALUE`), relative ones against `cwd`, each with its symlinks resolved.
pub(crate) fn folders(args: &[String], cwd: Option<&Path>, home: Option<&Path>) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for arg in args {
        let value = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with('-') => value,
            _ => arg.as_str(),
        };
        let Some(path) = expanded(value, home) else {
            continue;
        };
        let path = match cwd {
            _ if path.is_absolute() => path,
            Some(cwd) => cwd.join(path),
            None => continue,
        };
        if let Ok(real) = path.canonicalize()
            && real.is_dir()
            && !found.contains(&real)
        {
            found.push(real);
        }
    }
    found
}

/// Why `path` is not read for a diff given the server's `folders`, or `None`: it
/// resolves inside one of them.
pub(crate) fn outside(path: &str, folders: &[PathBuf], home: Option<&Path>) -> Option<String> {
    let Some(first) = folders.first() else {
        return Some(
            "the server's command names no folder, so which files it reaches is not known"
                .to_owned(),
        );
    };
    if path.contains('\0') {
        return Some("the path holds a NUL character".to_owned());
    }
    let Some(given) = expanded(path, home) else {
        return Some("the path starts with `~` and no home folder is known".to_owned());
    };
    let absolute = if given.is_absolute() {
        lexical(&given)
    } else {
        // As the server does: against the first folder it stays inside, else the first.
        folders
            .iter()
            .map(|folder| lexical(&folder.join(&given)))
            .find(|candidate| within(candidate, folders))
            .unwrap_or_else(|| lexical(&first.join(&given)))
    };
    let real = match resolved(&absolute) {
        Ok(real) => real,
        Err(why) => return Some(why),
    };
    if within(&real, folders) {
        // A hard link is another name of the same file, which no path resolution
        // sees: `ln ~/.ssh/id_rsa NOTES.md` leaves a path inside and the key's content.
        return match std::fs::metadata(&real) {
            Ok(meta) if meta.is_file() && links(&meta) > 1 => Some(format!(
                "{} is one of {} names (hard links) of the same file, and the others may lie outside the server's folders",
                real.display(),
                links(&meta)
            )),
            _ => None,
        };
    }
    let names: Vec<String> = folders.iter().map(|f| f.display().to_string()).collect();
    Some(if real == absolute {
        format!(
            "{} is outside the server's folders ({})",
            real.display(),
            names.join(", ")
        )
    } else {
        format!(
            "{} leads to {}, outside the server's folders ({})",
            absolute.display(),
            real.display(),
            names.join(", ")
        )
    })
}

/// How many names (hard links) the file of `meta` has.
#[cfg(unix)]
fn links(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::nlink(meta)
}

/// How many names the file of `meta` has: not told on this system (its count is not
/// in stable Rust), so one.
#[cfg(not(unix))]
fn links(_meta: &std::fs::Metadata) -> u64 {
    1
}

/// `text` as a path, `~` and `~/…` as the home folder's (the server's `expandHome`);
/// `None` for those when no home folder is known.
fn expanded(text: &str, home: Option<&Path>) -> Option<PathBuf> {
    match text.strip_prefix('~') {
        Some("") => home.map(Path::to_path_buf),
        Some(rest) if rest.starts_with('/') => home.map(|h| h.join(&rest[1..])),
        _ => Some(PathBuf::from(text)),
    }
}

/// `path` with `.` left out and each `..` taking away the part before it, as Node's
/// `path.resolve` does before any symlink is followed.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Whether `path` is one of `folders` or lies beneath one (whole components).
fn within(path: &Path, folders: &[PathBuf]) -> bool {
    folders.iter().any(|folder| path.starts_with(folder))
}

/// The absolute `path` with the symlinks of its longest existing part followed (what
/// does not exist yet appended as it is). A part that exists but cannot be resolved
/// (a symlink to nowhere, a loop) is an error: where it leads is not known.
fn resolved(path: &Path) -> Result<PathBuf, String> {
    let mut existing = path.to_path_buf();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    while std::fs::symlink_metadata(&existing).is_err() {
        let Some(name) = existing.file_name() else {
            break;
        };
        missing.push(name.to_owned());
        if !existing.pop() {
            break;
        }
    }
    let mut real = existing.canonicalize().map_err(|e| {
        format!(
            "{} cannot be resolved ({e}), so where it leads is not known",
            existing.display()
        )
    })?;
    real.extend(missing.iter().rev());
    Ok(real)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        home: PathBuf,
    }

    /// A home folder with `.ssh/id_rsa`, and a project folder inside it whose
    /// `NOTES.md` is a symlink to the key, `keys` one to `.ssh`, `ok.md` one to a file
    /// of the project, and `gone.md` one to nothing.
    fn tree() -> Tree {
        let dir = tempfile::tempdir().expect("a folder");
        let home = dir.path().canonicalize().expect("real");
        std::fs::create_dir_all(home.join(".ssh")).expect(".ssh");
        std::fs::write(home.join(".ssh/id_rsa"), "PRIVATE KEY").expect("a key");
        let root = home.join("project");
        std::fs::create_dir_all(root.join("src")).expect("src");
        std::fs::write(root.join("src/main.rs"), "fn main() {}").expect("a file");
        let link = |target: &Path, name: &str| {
            std::os::unix::fs::symlink(target, root.join(name)).expect("a symlink")
        };
        link(&home.join(".ssh/id_rsa"), "NOTES.md");
        link(&home.join(".ssh"), "keys");
        link(&root.join("src/main.rs"), "ok.md");
        link(&home.join("nowhere"), "gone.md");
        Tree {
            _dir: dir,
            root,
            home,
        }
    }

    /// Issue 52, point 8: a path that leads out of the server's folders is not read.
    #[test]
    fn a_path_that_leads_out_of_the_servers_folders_is_not_read() {
        let t = tree();
        let folders = vec![t.root.clone()];
        let home = Some(t.home.as_path());
        let inside = |path: &str| outside(path, &folders, home);
        let root = t.root.display().to_string();
        for path in [
            format!("{root}/src/main.rs"),
            format!("{root}/ok.md"),
            format!("{root}/new/dir/file.txt"),
            format!("{root}/./src/../src/main.rs"),
            "src/main.rs".to_owned(),
            "brand-new.md".to_owned(),
            "~/project/src/main.rs".to_owned(),
        ] {
            assert_eq!(inside(&path), None, "{path}");
        }
        let key = format!("{}/.ssh/id_rsa", t.home.display());
        for path in [
            format!("{root}/NOTES.md"),
            "NOTES.md".to_owned(),
            format!("{root}/keys/id_rsa"),
            format!("{root}/keys/new_key"),
            format!("{root}/../.ssh/id_rsa"),
            "../.ssh/id_rsa".to_owned(),
            "~/.ssh/id_rsa".to_owned(),
            key.clone(),
            "/etc/passwd".to_owned(),
        ] {
            let why = inside(&path).unwrap_or_else(|| panic!("{path} was let through"));
            assert!(why.contains("outside the server's folders"), "{why}");
            assert!(!why.contains("PRIVATE KEY"), "{why}");
        }
        let why = inside(&format!("{root}/NOTES.md")).expect("withheld");
        assert!(why.contains(&format!("leads to {key}")), "{why}");
        let why = inside(&format!("{root}/gone.md")).expect("a dangling symlink");
        assert!(why.contains("cannot be resolved"), "{why}");
        assert!(inside("a\0b").is_some());
        std::fs::hard_link(t.home.join(".ssh/id_rsa"), t.root.join("linked.md")).expect("a link");
        let why = inside(&format!("{root}/linked.md")).expect("a hard link");
        assert!(why.contains("hard links"), "{why}");
        assert!(outside("~/x", &folders, None).is_some(), "no home");
        let why = outside(&format!("{root}/src/main.rs"), &[], home).expect("no folders");
        assert!(why.contains("names no folder"), "{why}");
    }

    #[test]
    fn the_folders_are_the_commands_existing_directories() {
        let t = tree();
        let args: Vec<String> = [
            "-y",
            "@modelcontextprotocol/server-filesystem",
            "project",
            "--root=~/.ssh",
            "/nonexistent/folder",
            "project/src/main.rs",
        ]
        .map(str::to_owned)
        .to_vec();
        let found = folders(&args, Some(&t.home), Some(&t.home));
        assert_eq!(found, [t.root.clone(), t.home.join(".ssh")]);
        // A folder named through a symlink counts as where it leads.
        assert_eq!(
            folders(&[format!("{}/keys", t.root.display())], None, None),
            [t.home.join(".ssh")]
        );
        // A server reached by URL keeps its own word.
        let remote = UpstreamSource::Http {
            url: "https://example.com/mcp".into(),
            headers: Default::default(),
        };
        assert_eq!(withheld(&remote, "/etc/passwd"), None);
    }
}
