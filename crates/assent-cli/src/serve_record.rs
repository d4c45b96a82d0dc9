//! What `assent serve` leaves beside its database for `assent doctor`: the address it
//! listens on, its `--public-url`, where its token came from, its process, and when it
//! started and stopped. One file, `DB.serve.json` beside a SQLite database's file (as
//! the token file is), mode 0600, one entry per address; written whole and renamed
//! into place. A database that is not a file (PostgreSQL, in memory) gets none.
//!
//! [`judge`] is the doctor's reading of one entry, pure: the exposure in, what is
//! unsafe about it out.

use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

/// One start of `assent serve`, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Exposure {
    /// The address it listens on, as bound (`127.0.0.1:7700`, `0.0.0.0:7700`).
    pub addr: String,
    /// `--public-url`, the base of the links it sends to phones and chats.
    #[serde(default)]
    pub public_url: Option<String>,
    /// The token file it read or wrote; none for `--token` and in-memory databases.
    #[serde(default)]
    pub token_file: Option<String>,
    /// Where its token came from: `given`, `stored`, `generated` or `ephemeral`.
    pub token: String,
    /// Whether it also serves the MCP gateway at `/mcp`.
    #[serde(default)]
    pub mcp_gateway: bool,
    /// Its process.
    pub pid: u32,
    /// When it started listening (RFC 3339).
    pub started_at: String,
    /// When it stopped, after a clean stop (RFC 3339).
    #[serde(default)]
    pub stopped_at: Option<String>,
    /// The version of `assent` that served.
    pub version: String,
}

/// The file's whole content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Recorded {
    serves: Vec<Exposure>,
}

/// The record beside the SQLite database at `db` (`dir/assent.db` →
/// `dir/assent.db.serve.json`), or `None` for a database that is not a file.
pub fn path(db: &str) -> Option<PathBuf> {
    let file = assent_store::StoreOptions::new(db).sqlite_file()?;
    record_beside(&file)
}

/// The record beside the database file `file`.
pub fn record_beside(file: &Path) -> Option<PathBuf> {
    let name = file.file_name()?;
    if name == ":memory:" {
        return None;
    }
    let mut name = name.to_owned();
    name.push(".serve.json");
    Some(file.with_file_name(name))
}

/// The entries recorded at `path`: none when there is no file; an error naming the
/// file when it cannot be read or is not a record.
pub fn read(path: &Path) -> Result<Vec<Exposure>, String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    serde_json::from_slice::<Recorded>(&bytes)
        .map(|r| r.serves)
        .map_err(|e| format!("{} is not a record of `assent serve` ({e})", path.display()))
}

/// Records `exposure` at `path`, replacing an earlier entry for the same address.
pub fn record(path: &Path, exposure: Exposure) -> Result<(), String> {
    // An unreadable old record is replaced: it is a note for the doctor, not state.
    let mut serves = read(path).unwrap_or_default();
    serves.retain(|s| s.addr != exposure.addr);
    serves.push(exposure);
    write(path, &Recorded { serves })
}

/// Marks the entry of `addr` and `pid` at `path` stopped at `at`.
pub fn stopped(path: &Path, addr: &str, pid: u32, at: String) -> Result<(), String> {
    let mut serves = read(path)?;
    let Some(entry) = serves.iter_mut().find(|s| s.addr == addr && s.pid == pid) else {
        return Ok(());
    };
    entry.stopped_at = Some(at);
    write(path, &Recorded { serves })
}

fn write(path: &Path, recorded: &Recorded) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("cannot write {}: {e}", path.display());
    let text = serde_json::to_string_pretty(recorded).map_err(|e| e.to_string())?;
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    {
        use std::io::Write;
        let mut file = options.open(&temporary).map_err(failed)?;
        file.write_all(format!("{text}\n").as_bytes())
            .map_err(failed)?;
    }
    std::fs::rename(&temporary, path).map_err(failed)
}

/// Whether the process `pid` still runs: `None` where this cannot be told (no
/// `/proc`).
pub fn running(pid: u32) -> Option<bool> {
    if !Path::new("/proc/self").exists() {
        return None;
    }
    Some(Path::new(&format!("/proc/{pid}")).exists())
}

/// What is unsafe about one serve's exposure: `(fail_open, text)` pairs. `live` says
/// whether it still serves; what only matters while it listens is a warning once it
/// has stopped (the next start with the same flags would be exposed again).
pub fn judge(exposure: &Exposure, live: bool) -> Vec<(bool, String)> {
    let mut found = Vec::new();
    let https = exposure
        .public_url
        .as_deref()
        .is_some_and(|url| scheme(url) == Some("https"));
    let beyond_loopback = match exposure.addr.parse::<SocketAddr>() {
        Ok(addr) => !addr.ip().is_loopback(),
        // An address that does not read back: judged as the worse case.
        Err(_) => true,
    };
    let when = if live {
        String::new()
    } else {
        " (when it ran; it is not running now)".to_owned()
    };
    if beyond_loopback {
        if https {
            found.push((
                false,
                format!(
                    "listens on {} beyond loopback over plain HTTP{when}: only the TLS proxy in front of it (--public-url is https) should reach that port",
                    exposure.addr
                ),
            ));
        } else {
            found.push((
                live,
                format!(
                    "listens on {} beyond loopback over plain HTTP with no https --public-url{when}: its token and every approval travel in the clear to anyone on the network (listen on 127.0.0.1 and put TLS in front)",
                    exposure.addr
                ),
            ));
        }
    }
    if let Some(url) = exposure.public_url.as_deref()
        && scheme(url) == Some("http")
        && !host(url).is_some_and(is_loopback_host)
    {
        found.push((
            live,
            format!(
                "--public-url {url} is http on a host other than loopback{when}: the approval links it sends, and the approvals made through them, travel in the clear"
            ),
        ));
    }
    found
}

/// The scheme of `url`, lowercased.
fn scheme(url: &str) -> Option<&'static str> {
    let (scheme, _) = url.split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Some("https"),
        "http" => Some("http"),
        _ => None,
    }
}

/// The host of `url` (user info, port and path removed; brackets kept off IPv6).
fn host(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = authority.strip_prefix('[') {
        return v6.split(']').next();
    }
    authority.split(':').next()
}

fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure(addr: &str, public_url: Option<&str>) -> Exposure {
        Exposure {
            addr: addr.to_owned(),
            public_url: public_url.map(str::to_owned),
            token_file: None,
            token: "stored".to_owned(),
            mcp_gateway: false,
            pid: 1,
            started_at: "2026-12-07T08:00:00Z".to_owned(),
            stopped_at: None,
            version: "0".to_owned(),
        }
    }

    fn open(found: &[(bool, String)]) -> usize {
        found.iter().filter(|(open, _)| *open).count()
    }

    #[test]
    fn loopback_is_safe_and_every_interface_without_https_is_not() {
        assert!(judge(&exposure("127.0.0.1:7700", None), true).is_empty());
        assert!(judge(&exposure("[::1]:7700", Some("http://localhost:7700")), true).is_empty());
        assert_eq!(open(&judge(&exposure("0.0.0.0:7700", None), true)), 1);
        // Every interface and links in the clear: two findings.
        assert_eq!(
            open(&judge(
                &exposure("0.0.0.0:7700", Some("http://assent.example.com")),
                true
            )),
            2
        );
        // Behind a TLS proxy: a warning only.
        let proxied = judge(
            &exposure("0.0.0.0:7700", Some("HTTPS://assent.example.com/")),
            true,
        );
        assert_eq!((proxied.len(), open(&proxied)), (1, 0));
        // Loopback behind a tunnel, links over http to another host: open.
        assert_eq!(
            open(&judge(
                &exposure("127.0.0.1:7700", Some("http://user@10.0.0.5:8080/x")),
                true
            )),
            1
        );
        // Not running: said, not counted.
        let stopped = judge(&exposure("0.0.0.0:7700", None), false);
        assert_eq!((stopped.len(), open(&stopped)), (1, 0));
        assert!(stopped[0].1.contains("not running"), "{stopped:?}");
    }

    #[test]
    fn hosts_read_back_from_urls() {
        assert_eq!(host("http://[::1]:7700/a"), Some("::1"));
        assert_eq!(host("https://u:p@h.example:1/"), Some("h.example"));
        assert_eq!(host("http://127.0.0.1"), Some("127.0.0.1"));
        assert_eq!(scheme("ftp://x"), None);
    }

    #[test]
    fn a_record_keeps_one_entry_per_address_and_marks_a_stop() {
        let dir = tempfile::tempdir().expect("a folder");
        let db = dir.path().join("assent.db");
        let path = path(&format!("sqlite://{}", db.display())).expect("beside the file");
        assert_eq!(path, dir.path().join("assent.db.serve.json"));
        assert_eq!(read(&path), Ok(Vec::new()));
        record(&path, exposure("127.0.0.1:7700", None)).expect("recorded");
        record(&path, exposure("0.0.0.0:7701", None)).expect("recorded");
        record(&path, exposure("127.0.0.1:7700", Some("https://a.example"))).expect("again");
        let serves = read(&path).expect("read");
        assert_eq!(serves.len(), 2);
        assert_eq!(
            serves[1].public_url.as_deref(),
            Some("https://a.example"),
            "{serves:?}"
        );
        stopped(&path, "0.0.0.0:7701", 1, "2026-12-07T09:00:00Z".to_owned()).expect("stopped");
        assert!(read(&path).expect("read")[0].stopped_at.is_some());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("the file")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "{").expect("written");
        assert!(read(&path).is_err_and(|e| e.contains("serve.json")));
        assert_eq!(self::path("sqlite::memory:"), None);
        assert_eq!(self::path("postgres://h/db"), None);
    }
}
