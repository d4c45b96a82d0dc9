//! Standard Webhooks signatures: `v1,` and the base64 HMAC-SHA256 of
//! `{webhook-id}.{webhook-timestamp}.{body}`, keyed with the base64-decoded part of the
//! `whsec_` secret.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use uuid::Uuid;

/// What every secret starts with.
pub const SECRET_PREFIX: &str = "whsec_";

/// A new secret: `whsec_` and 32 random bytes in base64 (two v4 UUIDs, 244 random
/// bits, from the operating system's generator).
pub fn generate_secret() -> String {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(Uuid::new_v4().as_bytes());
    format!("{SECRET_PREFIX}{}", STANDARD.encode(key))
}

/// The `webhook-signature` header value for `body` sent as message `id` at `timestamp`
/// (Unix seconds), or `None` when `secret` is not `whsec_` and base64.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD
        .decode(secret.strip_prefix(SECRET_PREFIX).unwrap_or(secret))
        .ok()?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).ok()?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    Some(format!(
        "v1,{}",
        STANDARD.encode(mac.finalize().into_bytes())
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signs_the_specifications_example() {
        // The example of the Standard Webhooks specification (and its libraries' tests).
        let signature = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(
            signature.as_deref(),
            Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        );
    }

    #[test]
    fn generated_secrets_are_distinct_and_usable() {
        let (a, b) = (generate_secret(), generate_secret());
        assert_ne!(a, b);
        assert!(a.starts_with(SECRET_PREFIX));
        assert!(sign(&a, "msg_1", 1, b"{}").is_some());
        assert_eq!(sign("whsec_not base64!", "msg_1", 1, b"{}"), None);
    }
}
