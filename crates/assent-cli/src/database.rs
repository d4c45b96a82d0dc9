//! Opening the database a command works on: with a connect timeout people can set
//! (`ASSENT_CONNECT_TIMEOUT`), and a word on stderr while a PostgreSQL server keeps
//! them waiting, so an unreachable server is neither silent nor slow to report.

use crate::CliError;
use crate::duration::parse_duration;
use assent_store::{DEFAULT_CONNECT_TIMEOUT, Store, StoreOptions};
use std::time::Duration;

/// How long opening waits in silence before saying what it waits for: most opens
/// take milliseconds, and a line on every command would be noise.
const NOTICE_AFTER: Duration = Duration::from_secs(1);

/// Opens (creating and migrating when missing) the database at `url`.
pub async fn open_store(url: &str) -> Result<Store, CliError> {
    let mut options = StoreOptions::new(url);
    options.connect_timeout = connect_timeout(std::env::var("ASSENT_CONNECT_TIMEOUT").ok())?;
    let Some(server) = options.postgres_server() else {
        return Ok(Store::open_with(options).await?);
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
