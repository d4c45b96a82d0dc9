//! Timestamps as fixed-width UTC text, so that text order is time order in SQL.

use crate::StoreError;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `2026-03-01T12:00:00.000000Z`: re-exported from `assent-domain`, where the doors
/// find it too.
pub use assent_domain::format_time as format;

/// Parses what [`format()`] wrote (any RFC 3339 text is accepted).
pub fn parse(table: &'static str, text: &str) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|e| StoreError::corrupt(table, format!("bad time {text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn fixed_width_and_round_trip() {
        let t = datetime!(2026-03-01 12:00:00.5 +02:00);
        let s = format(t);
        assert_eq!(s, "2026-03-01T10:00:00.500000Z");
        assert_eq!(parse("t", &s).expect("parses"), t);
        assert!(format(datetime!(2026-03-01 9:59 UTC)) < format(datetime!(2026-03-01 10:00 UTC)));
    }
}
