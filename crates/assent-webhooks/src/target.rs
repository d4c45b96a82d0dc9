//! What a subscription may name: its URL (checked when it is added), its events and
//! its format.

use crate::WebhookError;
use assent_store::webhooks::{event, shown_url};
use reqwest::Url;
use std::net::IpAddr;

/// How deliveries are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The event as Standard Webhooks JSON `{type, timestamp, data}`, signed.
    Standard,
    /// A Slack incoming-webhook body (`text` and `blocks`), signed too.
    Slack,
}

impl Format {
    /// Its stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Standard => "standard",
            Self::Slack => "slack",
        }
    }

    /// Parses `standard` or `slack`.
    pub fn parse(text: &str) -> Result<Self, WebhookError> {
        match text {
            "standard" => Ok(Self::Standard),
            "slack" => Ok(Self::Slack),
            other => Err(WebhookError::UnknownFormat(other.to_owned())),
        }
    }
}

/// Checks a receiver URL: absolute `https://`, or `http://` to a loopback host unless
/// `allow_http`; a host, no credentials, no fragment. A refused Slack URL is named
/// masked in the error.
pub fn validate_url(text: &str, allow_http: bool) -> Result<Url, WebhookError> {
    let invalid = |reason: &str| WebhookError::InvalidUrl {
        url: shown_url(text, Format::Standard.as_str()).into_owned(),
        reason: reason.to_owned(),
    };
    let url = Url::parse(text.trim()).map_err(|e| invalid(&e.to_string()))?;
    let Some(host) = url.host_str() else {
        return Err(invalid("it names no host"));
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials do not belong in the URL"));
    }
    if url.fragment().is_some() {
        return Err(invalid("a fragment is never sent; remove it"));
    }
    match url.scheme() {
        "https" => Ok(url),
        "http" if allow_http || is_loopback(host) => Ok(url),
        "http" => Err(invalid(
            "plain http:// only to loopback (127.0.0.1, ::1, localhost); use https:// or --allow-http",
        )),
        _ => Err(invalid(
            "only https:// (or http:// to loopback) is delivered to",
        )),
    }
}

pub(crate) fn is_loopback(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Checks event types; an empty list means every event.
pub fn validate_events(events: &[String]) -> Result<Vec<String>, WebhookError> {
    let mut checked: Vec<String> = Vec::with_capacity(events.len());
    for name in events.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        if !event::ALL.contains(&name) {
            return Err(WebhookError::UnknownEvent(name.to_owned()));
        }
        if !checked.iter().any(|c| c == name) {
            checked.push(name.to_owned());
        }
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_anywhere_http_only_to_loopback() {
        assert!(validate_url("https://hooks.slack.com/services/T/B/x", false).is_ok());
        assert!(validate_url("http://127.0.0.1:9000/hook", false).is_ok());
        assert!(validate_url("http://[::1]:9000/hook", false).is_ok());
        assert!(validate_url("http://localhost/hook", false).is_ok());
        assert!(validate_url("http://example.com/hook", false).is_err());
        assert!(validate_url("http://example.com/hook", true).is_ok());
        for bad in [
            "ftp://example.com/x",
            "not a url",
            "https://user:pw@example.com/",
            "https://example.com/#x",
            "file:///etc/passwd",
        ] {
            assert!(validate_url(bad, true).is_err(), "{bad} accepted");
        }
        let refused = validate_url("http://hooks.slack.com/services/T/B/s3cretWXYZ", false)
            .map(|url| url.to_string())
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("http://hooks.slack.com/…/WXYZ") && !refused.contains("s3cret"),
            "{refused}"
        );
    }

    #[test]
    fn events_are_known_types_without_repeats() {
        let events = [
            "changeSet.created".to_owned(),
            " changeSet.created".to_owned(),
        ];
        assert_eq!(
            validate_events(&events).ok(),
            Some(vec!["changeSet.created".to_owned()])
        );
        assert!(validate_events(&["item.exploded".to_owned()]).is_err());
        let failures = ["item.failed".to_owned(), "item.inDoubt".to_owned()];
        assert_eq!(validate_events(&failures).ok(), Some(failures.to_vec()));
        let unknown = validate_events(&["x".to_owned()]).unwrap_err().to_string();
        assert!(unknown.contains("item.failed, item.inDoubt"), "{unknown}");
        assert_eq!(validate_events(&[]).ok(), Some(vec![]));
    }
}
