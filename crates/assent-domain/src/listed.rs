//! Text as listings, JSON answers and logs show it: a time as fixed-width UTC text
//! (text order is time order), a receiver's URL without what authenticates to it.

use std::borrow::Cow;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

/// `at` as fixed-width UTC text, `2026-03-01T12:00:00.000000Z`: how the store keeps
/// times (so text order is time order in SQL) and how JSON answers show them.
pub fn format_time(at: OffsetDateTime) -> String {
    let utc = at.to_offset(UtcOffset::UTC);
    utc.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    ))
    .unwrap_or_else(|_| utc.unix_timestamp().to_string())
}

/// Characters of a secret URL left at its end, so a person can tell two apart.
const SHOWN_TAIL_CHARS: usize = 4;

/// The host of `url` (between `://` and the path), if it names one.
fn url_host(url: &str) -> Option<&str> {
    let (_, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let host = &rest[..end];
    let host = host.rsplit_once(':').map_or(host, |(name, _port)| name);
    (!host.is_empty()).then_some(host)
}

/// Whether `url` is itself a credential: Slack's incoming webhooks (and anything else
/// on slack.com) post into a channel for whoever holds the URL, signature or not.
pub fn is_secret_url(url: &str, format: &str) -> bool {
    format == "slack"
        || url_host(url).is_some_and(|host| {
            let host = host.to_ascii_lowercase();
            host == "slack.com" || host.ends_with(".slack.com")
        })
}

/// `url` masked: its scheme and host, then `…/` and its last four characters
/// (`https://hooks.slack.com/…/Xy9Z`), enough to tell subscriptions apart and too
/// little to post with. A URL with a short path keeps none of it.
pub fn masked_url(url: &str) -> String {
    let origin = url.split_once("://").map(|(scheme, rest)| {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        (format!("{scheme}://{}", &rest[..end]), &rest[end..])
    });
    let (origin, path) = origin.unwrap_or_else(|| (String::new(), url));
    let path_chars = path.chars().count();
    if path_chars <= 2 * SHOWN_TAIL_CHARS {
        return format!("{origin}/…");
    }
    let tail: String = path.chars().skip(path_chars - SHOWN_TAIL_CHARS).collect();
    format!("{origin}/…/{tail}")
}

/// `url` as listings, JSON answers and logs may show it: masked ([`masked_url`]) when
/// it is a secret ([`is_secret_url`]), else with its credentials redacted
/// ([`redacted_url`]).
pub fn shown_url<'a>(url: &'a str, format: &str) -> Cow<'a, str> {
    let redacted = redacted_url(url);
    if is_secret_url(&redacted, format) {
        Cow::Owned(masked_url(&redacted))
    } else {
        redacted
    }
}

/// `url` without the credentials a receiver's URL may carry (issue 37): the user info
/// (`user:pass@`) becomes `…@` and each query value `…`, its name kept
/// (`?token=…&v=…`), so a listing tells receivers apart without giving away what
/// authenticates to them. A fragment goes the same way as a query.
pub fn redacted_url(url: &str) -> Cow<'_, str> {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (Some(scheme), rest),
        None => (None, url),
    };
    let authority_end = if scheme.is_some() {
        rest.find(['/', '?', '#']).unwrap_or(rest.len())
    } else {
        0
    };
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => Cow::Owned(format!("…@{host}")),
        None => Cow::Borrowed(authority),
    };
    let query_start = tail.find(['?', '#']).unwrap_or(tail.len());
    let (path, query) = tail.split_at(query_start);
    let mut hidden = String::with_capacity(query.len());
    let mut rest = query;
    while let Some(mark) = rest.chars().next() {
        // `?` or `#` opens a part; `&` and `;` separate its pairs.
        hidden.push(mark);
        rest = &rest[mark.len_utf8()..];
        let end = rest.find(['&', ';', '#']).unwrap_or(rest.len());
        let (pair, after) = rest.split_at(end);
        match pair.split_once('=') {
            Some((name, _)) => {
                hidden.push_str(name);
                hidden.push_str("=…");
            }
            None if pair.is_empty() => {}
            None => hidden.push('…'),
        }
        rest = after;
    }
    if matches!(authority, Cow::Borrowed(_)) && hidden == query {
        return Cow::Borrowed(url);
    }
    let scheme = scheme.map_or_else(String::new, |s| format!("{s}://"));
    Cow::Owned(format!("{scheme}{authority}{path}{hidden}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn times_are_fixed_width_utc() {
        let t = datetime!(2026-03-01 12:00:00.5 +02:00);
        assert_eq!(format_time(t), "2026-03-01T10:00:00.500000Z");
        assert!(
            format_time(datetime!(2026-03-01 9:59 UTC))
                < format_time(datetime!(2026-03-01 10:00 UTC))
        );
    }

    #[test]
    fn slack_urls_are_shown_masked_and_others_whole() {
        let slack = "https://hooks.slack.com/services/T000/B000/abcdefghWXYZ";
        for (url, format, shown) in [
            (slack, "slack", "https://hooks.slack.com/…/WXYZ"),
            (slack, "standard", "https://hooks.slack.com/…/WXYZ"),
            (
                "https://proxy.example/slack/relay/0123456789",
                "slack",
                "https://proxy.example/…/6789",
            ),
            (
                "https://HOOKS.Slack.com:443/x",
                "standard",
                "https://HOOKS.Slack.com:443/…",
            ),
            (
                "https://receiver.example/hook",
                "standard",
                "https://receiver.example/hook",
            ),
            (
                "https://notslack.com/hook",
                "standard",
                "https://notslack.com/hook",
            ),
            ("not a url at all", "slack", "/…/ all"),
            ("", "slack", "/…"),
            // Credentials in a receiver's URL are redacted, names kept (issue 37).
            (
                "https://receiver.example/hook?token=s3cret&v=2",
                "standard",
                "https://receiver.example/hook?token=…&v=…",
            ),
            (
                "https://ann:pa55@receiver.example/hook?s3cret",
                "standard",
                "https://…@receiver.example/hook?…",
            ),
            (
                "https://u:pa55@hooks.slack.com/services/T000/B000/abcdefghWXYZ",
                "standard",
                "https://…@hooks.slack.com/…/WXYZ",
            ),
            (
                "https://hooks.example/a?api_key=s3cret;x#frag=s3cret",
                "standard",
                "https://hooks.example/a?api_key=…;…#frag=…",
            ),
            (
                "https://receiver.example/hook?",
                "standard",
                "https://receiver.example/hook?",
            ),
        ] {
            assert_eq!(shown_url(url, format), shown, "{url} ({format})");
        }
        assert!(!masked_url(slack).contains("B000"));
        // Bad input never panics, whatever its characters.
        for odd in [
            "https://",
            "://",
            "https://h/ééééééééééé",
            "x://\u{202e}/…/…",
        ] {
            let _ = masked_url(odd);
            let _ = is_secret_url(odd, "standard");
            assert!(!redacted_url(&format!("{odd}?k=s3cret")).contains("s3cret"));
        }
    }
}
