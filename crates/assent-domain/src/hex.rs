//! Lowercase hex, the one way digests are written as text (operation ids, approval
//! digests, definition hashes, token hashes, the consent chain).

use std::fmt::Write;

/// `bytes` as lowercase hex, two digits a byte.
pub fn lower_hex(bytes: &[u8]) -> String {
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, byte| {
            let _ = write!(out, "{byte:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_lowercase_digits_a_byte() {
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xab, 0xff]), "000fabff");
        assert_eq!(lower_hex(&[]), "");
    }
}
