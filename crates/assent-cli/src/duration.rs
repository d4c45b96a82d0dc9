//! Durations as people type them on the command line (`7d`, `12h`, `30m`, `90s`,
//! `1d12h`): one parser for every flag and setting that takes a span of time, kept
//! apart from the clap types so that command modules use it without importing `cli`.

use time::Duration;

/// Parses a duration such as `7d`, `12h`, `30m`, `90s` or `1d12h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("expected a duration such as 7d, 12h, 30m or 90s, got {text:?}");
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let amount: i64 = digits.parse().map_err(|_| bad())?;
        // Bound every part so the arithmetic cannot overflow (about a hundred years).
        if amount > 100 * 366 * 86_400 {
            return Err(bad());
        }
        let part = match c {
            'd' => Duration::days(amount),
            'h' => Duration::hours(amount),
            'm' => Duration::minutes(amount),
            's' => Duration::seconds(amount),
            _ => return Err(bad()),
        };
        total = total.checked_add(part).ok_or_else(bad)?;
        digits.clear();
    }
    if !digits.is_empty() {
        return Err(bad());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = |t: &str| parse_duration(t).ok();
        assert_eq!(ok("7d"), Some(Duration::days(7)));
        assert_eq!(ok("12h"), Some(Duration::hours(12)));
        assert_eq!(ok("30m"), Some(Duration::minutes(30)));
        assert_eq!(ok("90s"), Some(Duration::seconds(90)));
        assert_eq!(ok("1d12h"), Some(Duration::hours(36)));
        for bad in ["", "7", "d", "7x", "-7d", "7 d", "99999999999999999999d"] {
            assert_eq!(ok(bad), None, "{bad:?}");
        }
    }
}
