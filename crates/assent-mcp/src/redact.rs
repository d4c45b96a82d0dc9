//! Secrets out of what the gateway writes: the URLs in a log line or an error message
//! lose their userinfo (`user:pass@`) and the values of their query and fragment
//! parameters (`?api_key=…`), which a configuration file's `url` often carries.
//!
//! Pure text in, text out, so every message can pass through it whatever its origin
//! (our own, rmcp's, reqwest's, which quote the URL they were given).

/// What replaces a secret.
pub const REDACTED: &str = "***";

/// `text` with every URL in it (`scheme://…`: `https`, `http`, or any other) redacted: its userinfo becomes
/// [`REDACTED`] (`https://***@host/`), and each query or fragment parameter keeps its
/// name and loses its value (`?api_key=***&v=***`; a parameter without `=` is
/// replaced whole). A URL ends at whitespace, a quote, `<`, `>`, `` ` ``, `)` or the
/// end of the text. The rest of the text is unchanged.
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = url_start(rest) {
        out.push_str(&rest[..start]);
        let url = &rest[start..];
        let end = url
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')'))
            .unwrap_or(url.len());
        out.push_str(&redact_url(&url[..end]));
        rest = &url[end..];
    }
    out.push_str(rest);
    out
}

/// Where the first URL of `text` starts: the scheme (ASCII letters, digits, `+`, `-`,
/// `.`, starting with a letter) before the first `://` that has one.
fn url_start(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find("://") {
        let colon = from + found;
        let scheme_start = text[..colon]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |i| i + 1);
        let scheme = &text[scheme_start..colon];
        if let Some(first) = scheme.find(|c: char| c.is_ascii_alphabetic()) {
            return Some(scheme_start + first);
        }
        from = colon + 3;
    }
    None
}

/// One URL (`scheme://authority[/path][?query][#fragment]`), redacted.
fn redact_url(url: &str) -> String {
    let Some((scheme, after)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let (authority, tail) = after.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("{REDACTED}@{host}"),
        None => authority.to_owned(),
    };
    let (before_fragment, fragment) = match tail.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (tail, None),
    };
    let (path, query) = match before_fragment.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (before_fragment, None),
    };
    let mut out = format!("{scheme}://{authority}{path}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(&redact_parameters(query));
    }
    if let Some(fragment) = fragment {
        out.push('#');
        out.push_str(&redact_parameters(fragment));
    }
    out
}

/// `a=1&b=2` as `a=***&b=***`; an empty parameter stays empty.
fn redact_parameters(parameters: &str) -> String {
    parameters
        .split('&')
        .map(|parameter| match parameter.split_once('=') {
            Some((name, _)) => format!("{name}={REDACTED}"),
            None if parameter.is_empty() => String::new(),
            None => REDACTED.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expect: &str) {
        assert_eq!(redact(input), expect, "input: {input:?}");
    }

    #[test]
    fn userinfo_and_parameter_values_are_redacted() {
        check(
            "https://user:pa55@example.com/mcp?api_key=s3cret&v=2",
            "https://***@example.com/mcp?api_key=***&v=***",
        );
        check("http://tok@host:8080", "http://***@host:8080");
        check("https://h/p?token", "https://h/p?***");
        check(
            "https://h/cb#access_token=abc&x",
            "https://h/cb#access_token=***&***",
        );
        check("HTTPS://u:p@H/?a=b", "HTTPS://***@H/?a=***");
        check("https://a@b@host/x", "https://***@host/x");
        check("ftp://u:p@host/f", "ftp://***@host/f");
        check(
            "its url \"ftp://u:p@h?k=v\" is not",
            "its url \"ftp://***@h?k=***\" is not",
        );
    }

    #[test]
    fn urls_inside_a_message_are_found_and_the_rest_is_kept() {
        check(
            "the upstream MCP server `https://u:p@x.example/mcp?api_key=k` failed to start: \
             error sending request for url (https://u:p@x.example/mcp?api_key=k)",
            "the upstream MCP server `https://***@x.example/mcp?api_key=***` failed to start: \
             error sending request for url (https://***@x.example/mcp?api_key=***)",
        );
        check(
            "a \"http://h/?k=v\" and 'https://i/?j=w' and <http://u@v>",
            "a \"http://h/?k=***\" and 'https://i/?j=***' and <http://***@v>",
        );
    }

    #[test]
    fn text_without_secrets_is_unchanged() {
        for text in [
            "",
            "no url here",
            "https://example.com/mcp",
            "npx -y server --flag=x",
            "http://127.0.0.1:3000/mcp and more",
            "http:// alone",
            "a :// b",
        ] {
            check(text, text);
        }
    }
}
