//! The review page at `/`: a static HTML shell, a stylesheet and one hand-written
//! script, embedded in the binary. The page holds the token in the tab's memory
//! (sessionStorage) and draws everything from the API with DOM text nodes, so no agent
//! text is ever parsed as markup; a strict Content-Security-Policy forbids inline
//! script as a second line of defence.
//!
//! On a phone the same page shows one open item a screen with thumb-sized buttons
//! (the stylesheet's narrow layout), and it installs: a web app manifest, two icons and
//! a service worker (`/sw.js`, served from the root so that its scope is the page) that
//! keeps the shell only and never answers an API call from a stored copy.

use crate::AppState;
use axum::Router;
use axum::http::{HeaderName, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

const INDEX_HTML: &str = include_str!("../assets/index.html");
const APP_JS: &str = include_str!("../assets/app.js");
const APP_CSS: &str = include_str!("../assets/app.css");
const MANIFEST: &str = include_str!("../assets/manifest.webmanifest");
const SERVICE_WORKER: &str = include_str!("../assets/sw.js");
const ICON_192: &[u8] = include_bytes!("../assets/icon-192.png");
const ICON_512: &[u8] = include_bytes!("../assets/icon-512.png");

/// Only this origin's script, style, API, manifest and service worker; no inline
/// script, no frames, no forms posting elsewhere.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; manifest-src 'self'; worker-src 'self'; \
     form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The page's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }),
        )
        .route(
            "/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", APP_CSS) }),
        )
        .route(
            "/manifest.webmanifest",
            get(|| async { asset("application/manifest+json", MANIFEST) }),
        )
        .route(
            "/sw.js",
            get(|| async { asset("text/javascript; charset=utf-8", SERVICE_WORKER) }),
        )
        .route(
            "/assets/icon-192.png",
            get(|| async { asset("image/png", ICON_192) }),
        )
        .route(
            "/assets/icon-512.png",
            get(|| async { asset("image/png", ICON_512) }),
        )
}

fn asset(content_type: &'static str, body: impl Into<axum::body::Body>) -> Response {
    let headers: [(HeaderName, HeaderValue); 5] = [
        (header::CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        ),
        (
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ),
        (
            header::REFERRER_POLICY,
            HeaderValue::from_static("no-referrer"),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body.into()).into_response()
}

#[cfg(test)]
mod tests {
    use super::{APP_JS, MANIFEST, SERVICE_WORKER};
    use std::collections::BTreeSet;

    /// The code points of one `\u{X}` escape at the start of `text`, and what follows.
    fn escape(text: &str) -> (u32, &str) {
        let rest = text.strip_prefix("\\u{").expect("a \\u{…} escape");
        let (hex, rest) = rest.split_once('}').expect("a closing brace");
        (u32::from_str_radix(hex, 16).expect("hex"), rest)
    }

    /// The characters the page's `MISLEADING` class names (its `\u{X}` and `\u{X}-\u{Y}`).
    fn page_misleading() -> BTreeSet<u32> {
        let start = APP_JS
            .find("const MISLEADING = /[")
            .expect("the page's list")
            + "const MISLEADING = /[".len();
        let class = &APP_JS[start..];
        let class = &class[..class.find("]/gu;").expect("the end of the list")];
        let mut codes = BTreeSet::new();
        let mut rest = class;
        while !rest.is_empty() {
            let (first, after) = escape(rest);
            let (last, after) = match after.strip_prefix('-') {
                Some(range) => escape(range),
                None => (first, after),
            };
            codes.extend(first..=last);
            rest = after;
        }
        codes
    }

    #[test]
    fn the_page_marks_exactly_what_the_domain_calls_misleading() {
        let page = page_misleading();
        for code in 0..=u32::from(char::MAX) {
            let Some(c) = char::from_u32(code) else {
                continue;
            };
            // A newline and a tab are the page's layout (pre-wrapped values).
            let expected = c != '\n' && c != '\t' && assent_domain::misleads(c);
            assert_eq!(page.contains(&code), expected, "U+{code:04X}");
        }
    }

    #[test]
    fn every_item_row_shows_the_tool_name_beside_the_summary() {
        // A host's summary may start with a title of its choosing: the row names the
        // tool that will run, and so do the buttons' labels.
        assert!(APP_JS.contains(r#"el("code", { class: "tool-name" }, item.toolName)"#));
        assert!(APP_JS.contains(r#""Confirm: " + item.toolName + ": " + item.humanSummary"#));
    }

    /// The service worker keeps exactly the shell the page serves, and no API path.
    #[test]
    fn the_worker_keeps_the_shell_only() {
        let start = SERVICE_WORKER.find("const FILES = [").expect("the list") + 15;
        let list = &SERVICE_WORKER[start..];
        let list = &list[..list.find(']').expect("its end")];
        let files: Vec<&str> = list
            .split(',')
            .map(|f| f.trim().trim_matches('"'))
            .collect();
        assert_eq!(
            files,
            [
                "/",
                "/assets/app.js",
                "/assets/app.css",
                "/manifest.webmanifest",
                "/assets/icon-192.png",
                "/assets/icon-512.png"
            ]
        );
        let manifest: serde_json::Value = serde_json::from_str(MANIFEST).expect("JSON");
        for icon in manifest["icons"].as_array().expect("icons") {
            assert!(files.contains(&icon["src"].as_str().expect("src")));
        }
    }
}
