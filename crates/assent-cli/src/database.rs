//! The database a command works on: where it is (`--db`, `ASSENT_DATABASE_URL`, else
//! `assent.db` in the user's data directory), and opening it with a connect timeout
//! people can set (`ASSENT_CONNECT_TIMEOUT`) and a word on stderr while a PostgreSQL
//! server keeps them waiting, so an unreachable server is neither silent nor slow to
//! report.

use crate::CliError;
use crate::duration::parse_duration;
use assent_store::{DEFAULT_CONNECT_TIMEOUT, Store, StoreOptions};
use etcetera::app_strategy::{AppStrategy, AppStrategyArgs, choose_app_strategy};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The database's file name, in the data directory (and, before, the current one).
const FILE_NAME: &str = "assent.db";

/// The URL of the database to open: `flag` (`--db`), else `ASSENT_DATABASE_URL`, else
/// `assent.db` in the user's data directory (created with its folder on first use).
///
/// Releases before this one kept the default database in the current directory: when
/// `./assent.db` exists and nothing names a database, it is still used, with a note
/// on stderr, so nobody's decisions seem to vanish.
pub fn locate(flag: Option<String>) -> Result<String, CliError> {
    let env = std::env::var("ASSENT_DATABASE_URL").ok();
    let legacy = Path::new(FILE_NAME).is_file();
    let choice = choose(flag, env, legacy, data_dir)?;
    if let Some(note) = &choice.note {
        eprintln!("{note}");
    }
    created(choice)
}

/// The file of the default database (`assent.db` in the user's data directory), where
/// it would be: nothing is created.
pub fn default_file() -> Option<PathBuf> {
    data_dir().ok().map(|dir| dir.join(FILE_NAME))
}

/// The database of a hook or a gateway (`assent hook`, `assent hook install`, `assent
/// mcp`): like [`locate`], but never the legacy `./assent.db`. A coding agent works in
/// the current folder, and a repository (or any command the agent may run) can ship
/// an `assent.db` there whose rules would replace the person's: one found there while
/// nothing names a database is refused, naming it (issue 52).
pub fn locate_for_agents(flag: Option<String>) -> Result<String, CliError> {
    let env = std::env::var("ASSENT_DATABASE_URL").ok();
    let named = flag.or(env).filter(|url| !url.trim().is_empty());
    if named.is_none() && Path::new(FILE_NAME).is_file() {
        let here = std::env::current_dir()
            .map(|dir| dir.join(FILE_NAME).display().to_string())
            .unwrap_or_else(|_| format!("./{FILE_NAME}"));
        return Err(CliError::failed(format!(
            "{here} is in the current folder, where an agent works: a hook or gateway never \
             takes its database from there; name the person's database with --db or \
             ASSENT_DATABASE_URL (`assent hook install` writes it)"
        )));
    }
    let choice = choose(named, None, false, data_dir)?;
    created(choice)
}

/// `url` with a relative SQLite path made absolute against the current folder: what an
/// install writes, so the hook opens the same file whatever folder the agent runs it
/// in. Any other URL is returned as it is.
pub fn absolute(url: &str) -> Result<String, CliError> {
    let Some(file) = StoreOptions::new(url).sqlite_file() else {
        return Ok(url.to_owned());
    };
    if file.is_absolute() {
        return Ok(url.to_owned());
    }
    let here = std::env::current_dir()
        .map_err(|e| CliError::failed(format!("cannot read the current folder: {e}")))?;
    let query = url.split_once('?').map(|(_, q)| format!("?{q}"));
    Ok(format!(
        "sqlite://{}{}",
        here.join(file).display(),
        query.unwrap_or_default()
    ))
}

/// The SQLite file of `url` when it lies inside `folder` (an agent's workspace), as
/// the path found; `None` for a file elsewhere, an in-memory database or a server. A
/// relative path counts from `current` (the process's folder); links are resolved on
/// both sides as far as the paths exist, so a link in or out of the folder does not
/// hide where the file is.
pub fn inside(url: &str, folder: &Path, current: &Path) -> Option<PathBuf> {
    let file = StoreOptions::new(url).sqlite_file()?;
    let file = current.join(file);
    resolved(&file)
        .starts_with(resolved(folder))
        .then_some(file)
}

/// `path` with its longest existing prefix resolved (links, `..`) and the rest kept.
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut prefix = path.to_path_buf();
    loop {
        if let Ok(real) = prefix.canonicalize() {
            return rest.iter().rev().fold(real, |all, part| all.join(part));
        }
        match (prefix.file_name().map(ToOwned::to_owned), prefix.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                prefix = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The URL of `choice`, once the folder it needs exists.
fn created(choice: Choice) -> Result<String, CliError> {
    if let Some(dir) = &choice.create {
        create_private_dir(dir).map_err(|e| {
            CliError::failed(format!(
                "cannot create the data directory {}: {e}",
                dir.display()
            ))
        })?;
    }
    Ok(choice.url)
}

/// Creates `dir` (and any missing parent) for its owner alone (0700 on Unix, whatever
/// the umask): the default database in it holds webhook signing secrets and every
/// argument and result (issue 37). A folder that exists is left as it is.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// The line for stderr when the SQLite database file at `path` exists and every local
/// user may read it (its mode lets others read, as a umask of 022 left files of
/// releases before this one); `None` otherwise. The file is not changed: who else
/// needs it is the owner's call.
fn readable_by_others(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode();
        (mode & 0o004 != 0).then(|| {
            format!(
                "warning: {} is readable by every local user (mode {:o}) and holds webhook secrets and every argument and result; make it private with `chmod 600 {}`",
                path.display(),
                mode & 0o777,
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// What [`locate`] decided.
#[derive(Debug, PartialEq)]
struct Choice {
    url: String,
    /// A line for stderr.
    note: Option<String>,
    /// A folder to create before opening.
    create: Option<PathBuf>,
}

/// [`locate`]'s decision, without its I/O: `legacy` is whether `./assent.db` exists,
/// `data_dir` the user's data directory for Assent (asked only when needed).
fn choose(
    flag: Option<String>,
    env: Option<String>,
    legacy: bool,
    data_dir: impl FnOnce() -> Result<PathBuf, CliError>,
) -> Result<Choice, CliError> {
    let named = flag.or(env).filter(|url| !url.trim().is_empty());
    if let Some(url) = named {
        return Ok(Choice {
            url,
            note: None,
            create: None,
        });
    }
    let dir = data_dir()?;
    let default = dir.join(FILE_NAME);
    if legacy {
        return Ok(Choice {
            url: format!("sqlite://{FILE_NAME}"),
            note: Some(format!(
                "note: using ./{FILE_NAME} in the current directory; the default is now {} \
                 (move the file there, or name one with --db or ASSENT_DATABASE_URL)",
                default.display()
            )),
            create: None,
        });
    }
    Ok(Choice {
        url: format!("sqlite://{}", default.display()),
        note: None,
        create: Some(dir),
    })
}

/// Assent's folder in the platform's data directory: `$XDG_DATA_HOME/assent`, else
/// `~/.local/share/assent` on Linux.
fn data_dir() -> Result<PathBuf, CliError> {
    let strategy = choose_app_strategy(AppStrategyArgs {
        top_level_domain: "org".into(),
        author: "assent".into(),
        app_name: "assent".into(),
    })
    .map_err(|e| {
        CliError::failed(format!(
            "no default database: {e}; name one with --db or ASSENT_DATABASE_URL"
        ))
    })?;
    Ok(strategy.data_dir())
}

/// How long opening waits in silence before saying what it waits for: most opens
/// take milliseconds, and a line on every command would be noise.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// Opens (creating and migrating when missing) the database at `url`.
pub async fn open_store(url: &str) -> Result<Store, CliError> {
    let mut options = StoreOptions::new(url);
    options.connect_timeout = connect_timeout(std::env::var("ASSENT_CONNECT_TIMEOUT").ok())?;
    // PostgreSQL: the schema of the engine's tables, unless the URL names one
    // (`?schema=…`); a wrong name is refused by the store before anything is made.
    options.schema = std::env::var("ASSENT_PG_SCHEMA")
        .ok()
        .filter(|schema| !schema.trim().is_empty());
    let Some(server) = options.postgres_server() else {
        // Warned about once it opened: a file that is no database holds nothing of ours.
        let file = options.sqlite_file();
        let store = Store::open_with(options).await?;
        if let Some(warning) = file.as_deref().and_then(readable_by_others) {
            eprintln!("{warning}");
        }
        return Ok(store);
    };
    let opening = Store::open_with(options);
    tokio::pin!(opening);
    let store = tokio::select! {
        store = &mut opening => store?,
        () = tokio::time::sleep(NOTICE_AFTER) => {
            eprintln!("connecting to PostgreSQL at {server}…");
            opening.await?
        }
    };
    Ok(store)
}

/// The connect timeout `ASSENT_CONNECT_TIMEOUT` sets: seconds (`10`) or a duration
/// (`10s`, `1m`); unset or blank, the store's default.
fn connect_timeout(setting: Option<String>) -> Result<Duration, CliError> {
    let Some(text) = setting.filter(|t| !t.trim().is_empty()) else {
        return Ok(DEFAULT_CONNECT_TIMEOUT);
    };
    let text = text.trim();
    let seconds = match text.parse::<u64>() {
        Ok(seconds) => Some(seconds),
        Err(_) => parse_duration(text)
            .ok()
            .and_then(|span| u64::try_from(span.whole_seconds()).ok()),
    };
    match seconds {
        Some(seconds) if seconds > 0 => Ok(Duration::from_secs(seconds)),
        _ => Err(CliError::Usage(format!(
            "ASSENT_CONNECT_TIMEOUT={text:?}: expected seconds, such as 10 or 10s"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_database_named_wins_then_the_current_directorys_then_the_data_directory() {
        let dir = || Ok(PathBuf::from("/home/u/.local/share/assent"));
        let no_dir = || -> Result<PathBuf, CliError> { panic!("the data directory is not asked") };
        let url = |choice: Result<Choice, CliError>| choice.ok().map(|c| c.url);
        let flag = Some("sqlite://f.db".to_owned());
        let env = Some("sqlite://e.db".to_owned());
        assert_eq!(
            url(choose(flag.clone(), env.clone(), true, no_dir)).as_deref(),
            Some("sqlite://f.db")
        );
        assert_eq!(
            url(choose(None, env, true, no_dir)).as_deref(),
            Some("sqlite://e.db")
        );
        let fresh = choose(None, Some(" ".into()), false, dir).expect("a choice");
        assert_eq!(
            fresh,
            Choice {
                url: "sqlite:///home/u/.local/share/assent/assent.db".into(),
                note: None,
                create: Some(PathBuf::from("/home/u/.local/share/assent")),
            }
        );
        let legacy = choose(None, None, true, dir).expect("a choice");
        assert_eq!(legacy.url, "sqlite://assent.db");
        assert_eq!(legacy.create, None);
        let note = legacy.note.expect("a note");
        assert!(
            note.starts_with("note: using ./assent.db in the current directory; the default is now /home/u/.local/share/assent/assent.db"),
            "{note}"
        );
    }

    #[test]
    fn a_database_inside_a_workspace_is_found_through_relative_paths_and_links() {
        let root = tempfile::tempdir().expect("dir");
        let work = root.path().join("work");
        let elsewhere = root.path().join("elsewhere");
        std::fs::create_dir_all(work.join("sub")).expect("dirs");
        std::fs::create_dir_all(&elsewhere).expect("dirs");
        let url = |path: &Path| format!("sqlite://{}", path.display());
        assert!(inside(&url(&work.join("assent.db")), &work, &elsewhere).is_some());
        assert!(inside(&url(&work.join("sub/new/x.db")), &work, &elsewhere).is_some());
        assert!(
            inside("sqlite://assent.db", &work, &work).is_some(),
            "relative"
        );
        assert!(inside("sqlite://assent.db", &work, &elsewhere).is_none());
        assert!(inside(&url(&elsewhere.join("assent.db")), &work, &work).is_none());
        assert!(inside("postgres://u@h/db", &work, &work).is_none());
        assert!(inside("sqlite::memory:", &work, &work).is_none());
        #[cfg(unix)]
        {
            // A link out of the workspace to where the file really is, and one in.
            std::os::unix::fs::symlink(&work, elsewhere.join("to-work")).expect("link");
            let through = elsewhere.join("to-work/assent.db");
            assert!(inside(&url(&through), &work, &elsewhere).is_some());
            assert!(
                inside(
                    &url(&work.join("assent.db")),
                    &elsewhere.join("to-work"),
                    &work
                )
                .is_some()
            );
        }
    }

    #[test]
    fn connect_timeouts() {
        let read = |s: Option<&str>| connect_timeout(s.map(str::to_owned)).ok();
        assert_eq!(read(None), Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(read(Some(" ")), Some(DEFAULT_CONNECT_TIMEOUT));
        assert_eq!(read(Some("3")), Some(Duration::from_secs(3)));
        assert_eq!(read(Some("10s")), Some(Duration::from_secs(10)));
        assert_eq!(read(Some("1m")), Some(Duration::from_secs(60)));
        for bad in ["0", "0s", "soon", "-1", "1.5"] {
            assert_eq!(read(Some(bad)), None, "{bad:?}");
        }
    }
}
