//! The bearer token of the API: given (`--token`, `ASSENT_TOKEN`), or generated on
//! first start and kept beside the database in a file only its owner can read.

use crate::ServerError;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Shortest token accepted from the command line or the environment.
pub const MIN_TOKEN_CHARS: usize = 16;

/// Where the server's token came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenOrigin {
    /// `--token` or `ASSENT_TOKEN`.
    Given,
    /// Read from the token file written on an earlier start.
    Stored(PathBuf),
    /// Generated now and written to this file; print it once.
    Generated(PathBuf),
    /// Generated now for an in-memory database; it lives as long as the process.
    Ephemeral,
}

/// The token and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerToken {
    /// The secret.
    pub token: String,
    /// Where it came from.
    pub origin: TokenOrigin,
}

/// The token file of the SQLite database at `db_url` (`sqlite://dir/assent.db` →
/// `dir/assent.db.token`), or `None` for an in-memory database.
pub fn token_path(db_url: &str) -> Option<PathBuf> {
    let path = db_url
        .strip_prefix("sqlite://")
        .or_else(|| db_url.strip_prefix("sqlite:"))
        .unwrap_or(db_url);
    let path = path.split('?').next().unwrap_or_default();
    if path.is_empty() || path == ":memory:" || db_url.contains("mode=memory") {
        return None;
    }
    let mut file = PathBuf::from(path).into_os_string();
    file.push(".token");
    Some(PathBuf::from(file))
}

/// A fresh token: 256 bits from the operating system's random source, as hex.
pub fn generate_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Checks a token given on the command line or in the environment.
pub fn check_token(token: &str) -> Result<(), ServerError> {
    let chars = token.chars().count();
    if chars < MIN_TOKEN_CHARS {
        return Err(ServerError::Token(format!(
            "the token must be at least {MIN_TOKEN_CHARS} characters long (got {chars})"
        )));
    }
    if !token.chars().all(|c| c.is_ascii_graphic()) {
        return Err(ServerError::Token(
            "the token must be printable ASCII without spaces".to_owned(),
        ));
    }
    Ok(())
}

/// The token to serve with: `given` when set, else the one stored beside the database
/// at `db_url`, else a new one (written there with mode 0600 when the database is a
/// file).
pub fn resolve_token(given: Option<&str>, db_url: &str) -> Result<ServerToken, ServerError> {
    if let Some(token) = given {
        check_token(token)?;
        return Ok(ServerToken {
            token: token.to_owned(),
            origin: TokenOrigin::Given,
        });
    }
    let Some(path) = token_path(db_url) else {
        return Ok(ServerToken {
            token: generate_token(),
            origin: TokenOrigin::Ephemeral,
        });
    };
    match read_stored(&path)? {
        Some(token) => Ok(ServerToken {
            token,
            origin: TokenOrigin::Stored(path),
        }),
        None => {
            let token = generate_token();
            write_new(&path, &token)?;
            Ok(ServerToken {
                token,
                origin: TokenOrigin::Generated(path),
            })
        }
    }
}

fn io_error(context: String) -> impl FnOnce(std::io::Error) -> ServerError {
    move |source| ServerError::Io { context, source }
}

/// The stored token, or `None` when there is no file yet. A file others can read, or
/// one holding no usable token, is refused rather than trusted or overwritten.
fn read_stored(path: &Path) -> Result<Option<String>, ServerError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(io_error(format!(
                "cannot read token file {}",
                path.display()
            ))(error));
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path)
            .map_err(io_error(format!(
                "cannot inspect token file {}",
                path.display()
            )))?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(ServerError::Token(format!(
                "token file {} is readable by others (mode {:o}); run `chmod 600` on it",
                path.display(),
                mode & 0o777
            )));
        }
    }
    let token = text.trim();
    check_token(token).map_err(|e| {
        ServerError::Token(format!("token file {} is unusable: {e}", path.display()))
    })?;
    Ok(Some(token.to_owned()))
}

/// Writes `token` to a new file at `path`, readable by its owner only.
fn write_new(path: &Path, token: &str) -> Result<(), ServerError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let context = || format!("cannot write token file {}", path.display());
    let mut file = options.open(path).map_err(io_error(context()))?;
    writeln!(file, "{token}")
        .and_then(|()| file.sync_all())
        .map_err(io_error(context()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_file_sits_beside_the_database() {
        assert_eq!(
            token_path("sqlite://data/assent.db?mode=rwc"),
            Some(PathBuf::from("data/assent.db.token"))
        );
        assert_eq!(
            token_path("sqlite:/abs/a.db"),
            Some(PathBuf::from("/abs/a.db.token"))
        );
        assert_eq!(token_path("sqlite::memory:"), None);
        assert_eq!(token_path("sqlite://file.db?mode=memory"), None);
    }

    #[test]
    fn a_token_is_generated_once_then_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let first = resolve_token(None, &url).expect("first start");
        let TokenOrigin::Generated(path) = &first.origin else {
            panic!("expected a generated token, got {:?}", first.origin);
        };
        assert_eq!(first.token.len(), 64);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).expect("file").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let second = resolve_token(None, &url).expect("second start");
        assert_eq!(second.token, first.token);
        assert_eq!(second.origin, TokenOrigin::Stored(path.clone()));
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let path = token_path(&url).expect("file database");
        std::fs::write(&path, "0123456789abcdef0123\n").expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let error = resolve_token(None, &url).expect_err("loose permissions");
        assert!(error.to_string().contains("readable by others"), "{error}");
    }

    #[test]
    fn short_or_spaced_tokens_are_refused() {
        assert!(resolve_token(Some("short"), "sqlite::memory:").is_err());
        assert!(resolve_token(Some("has a space in it, long"), "sqlite::memory:").is_err());
        let given = resolve_token(Some("0123456789abcdef"), "sqlite::memory:").expect("ok");
        assert_eq!(given.origin, TokenOrigin::Given);
        let ephemeral = resolve_token(None, "sqlite::memory:").expect("ok");
        assert_eq!(ephemeral.origin, TokenOrigin::Ephemeral);
    }
}
