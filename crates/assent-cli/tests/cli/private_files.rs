//! What Assent creates on disk is its user's alone (issue 37): on a fresh home under
//! umask 022, the default database's folder is 0700 and the database (with its `-wal`
//! and `-shm`) 0600, through the real binary; an existing database every local user may
//! read gets a one-line warning on stderr and is left as it is.

#![cfg(unix)]

use super::{NOW, code};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// `assent args…` under umask 022 with `home` as HOME and `home/data` as
/// XDG_DATA_HOME, in `home` (no `./assent.db` there), naming no database.
fn assent_at_home(home: &Path, args: &[&str]) -> Output {
    Command::new("sh")
        .args(["-c", "umask 022 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_assent"))
        .args(["--now", NOW])
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("ASSENT_DATABASE_URL")
        .env_remove("RUST_LOG")
        .output()
        .expect("assent runs")
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn a_fresh_default_database_and_its_folder_are_private_and_a_readable_one_is_warned_about() {
    let home = tempfile::tempdir().expect("a home");
    let out = assent_at_home(
        home.path(),
        &["agent", "create", "--id", "a", "--categories", "work"],
    );
    assert_eq!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let folder = home.path().join("data").join("assent");
    let db = folder.join("assent.db");
    assert_eq!(mode(&folder), 0o700, "the folder");
    assert_eq!(mode(&db), 0o600, "the database");
    // SQLite's companions take the database file's mode, when they outlive the run.
    for companion in ["assent.db-wal", "assent.db-shm"] {
        let path = folder.join(companion);
        if path.exists() {
            assert_eq!(mode(&path), 0o600, "{companion}");
        }
    }
    let listed = assent_at_home(home.path(), &["agent", "list"]);
    assert_eq!(code(&listed), 0);
    assert!(
        listed.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );

    // A database a release before this one left readable by everyone: one line of
    // warning, the command still runs, and the file is not changed behind its owner.
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let warned = assent_at_home(home.path(), &["agent", "list"]);
    assert_eq!(code(&warned), 0);
    let stderr = String::from_utf8_lossy(&warned.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("warning: ") && stderr.contains("readable by every local user"),
        "{stderr}"
    );
    assert!(stderr.contains("chmod 600"), "{stderr}");
    assert_eq!(mode(&db), 0o644);
}
