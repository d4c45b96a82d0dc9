//! How a tool's result text is stored: bounded, and never silently.
//!
//! A tool's result is kept in the audit trail, in the applied operations and in an
//! execution job, and the audit trail and jobs travel in sync batches. One huge read
//! (a 10 MiB file) stored whole, twice, makes every later batch too large for the
//! other device. So the stored copy is cut to [`MAX_STORED_RESULT_BYTES`]; a cut copy
//! ends with a marker giving the whole text's size and SHA-256, so that what was cut
//! is known and can be checked against the text the agent was given. What the agent
//! or client receives is never cut: this applies to stored copies only.

use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// The most bytes of UTF-8 a stored result text takes, its marker included.
pub const MAX_STORED_RESULT_BYTES: usize = 64 * 1024;

/// The SHA-256 of `text`, in lowercase hex.
fn sha256_hex(text: &str) -> String {
    crate::lower_hex(&Sha256::digest(text.as_bytes()))
}

/// What ends a cut text: the whole text's size in bytes and its SHA-256.
fn cut_marker(text: &str) -> String {
    format!(
        "…[result cut: {} bytes in all, sha256 {}]",
        text.len(),
        sha256_hex(text)
    )
}

/// `text` as it is stored: itself when it has at most [`MAX_STORED_RESULT_BYTES`]
/// bytes; otherwise its head, cut on a character boundary, followed by
/// `…[result cut: N bytes in all, sha256 HEX]` (N and HEX of the whole text), in at most
/// [`MAX_STORED_RESULT_BYTES`] bytes. So storing a stored text again changes nothing.
///
/// ```
/// # use assent_domain::{MAX_STORED_RESULT_BYTES, stored_result};
/// assert_eq!(stored_result("42 rows"), "42 rows");
/// let huge = "é".repeat(MAX_STORED_RESULT_BYTES);
/// let stored = stored_result(&huge);
/// assert!(stored.len() <= MAX_STORED_RESULT_BYTES);
/// assert!(stored.contains("…[result cut: 131072 bytes in all, sha256 "));
/// assert_eq!(stored_result(&stored), stored);
/// ```
pub fn stored_result(text: &str) -> Cow<'_, str> {
    cut_to(text, MAX_STORED_RESULT_BYTES)
}

/// [`stored_result`] with a cap of `max_bytes` (at least the marker's length, or the
/// marker alone is longer).
fn cut_to(text: &str, max_bytes: usize) -> Cow<'_, str> {
    if text.len() <= max_bytes {
        return Cow::Borrowed(text);
    }
    let marker = cut_marker(text);
    let head = text.floor_char_boundary(max_bytes.saturating_sub(marker.len()));
    let mut stored = String::with_capacity(head + marker.len());
    stored.push_str(&text[..head]);
    stored.push_str(&marker);
    Cow::Owned(stored)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The size and hash a cut text's marker reports.
    fn reported(stored: &str) -> Option<(usize, &str)> {
        let rest = stored.rsplit_once("…[result cut: ")?.1;
        let (size, rest) = rest.split_once(" bytes in all, sha256 ")?;
        Some((size.parse().ok()?, rest.strip_suffix(']')?))
    }

    #[test]
    fn a_text_at_the_cap_is_stored_whole_and_one_byte_more_is_cut() {
        let at_cap = "x".repeat(MAX_STORED_RESULT_BYTES);
        assert!(matches!(stored_result(&at_cap), Cow::Borrowed(_)));
        let over = format!("{at_cap}y");
        let stored = stored_result(&over);
        assert!(stored.len() <= MAX_STORED_RESULT_BYTES);
        let whole = sha256_hex(&over);
        assert_eq!(
            reported(&stored),
            Some((MAX_STORED_RESULT_BYTES + 1, whole.as_str()))
        );
        assert!(stored.starts_with("xxx"));
    }

    #[test]
    fn the_marker_reports_the_whole_texts_sha256() {
        // SHA-256 of "abc", from FIPS 180-2.
        let stored = cut_to("abc", 2);
        assert_eq!(
            stored,
            "…[result cut: 3 bytes in all, sha256 \
             ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad]"
        );
    }

    proptest! {
        #[test]
        fn a_cut_text_fits_keeps_its_head_and_names_the_whole(
            text in "\\PC{0,400}",
            max in 130usize..600,
        ) {
            let stored = cut_to(&text, max);
            prop_assert!(stored.len() <= max);
            if text.len() <= max {
                prop_assert_eq!(stored.as_ref(), text.as_str());
            } else {
                let marker = cut_marker(&text);
                let head = stored.strip_suffix(marker.as_str());
                prop_assert!(head.is_some(), "ends with the marker: {}", stored);
                let head = head.unwrap_or_default();
                // A prefix of the text, so cut on one of its character boundaries.
                prop_assert!(text.starts_with(head));
                let whole = sha256_hex(&text);
                prop_assert_eq!(reported(&stored), Some((text.len(), whole.as_str())));
                // As much of the head as fits is kept (less at most one character).
                prop_assert!(head.len() + marker.len() + 4 > max);
            }
            prop_assert_eq!(cut_to(&stored, max), stored.clone(), "storing again changes nothing");
        }
    }
}
