//! When to try a failed delivery again: exponential backoff with jitter, bounded.

use time::Duration;

/// The delay before the first retry, before jitter (at most 1.5 times this: within 5 s).
pub const FIRST_RETRY: Duration = Duration::seconds(2);
/// The longest delay between two attempts.
pub const MAX_BACKOFF: Duration = Duration::minutes(10);
/// Attempts before a delivery is dead-lettered: with the delays above, about an hour
/// and a quarter of trying.
pub const DEFAULT_MAX_ATTEMPTS: i64 = 15;

/// The delay after `failed` attempts (1 for the first failure), doubling from
/// [`FIRST_RETRY`] up to [`MAX_BACKOFF`], stretched by `jitter` in `[0, 1)` by up to
/// half, so that many deliveries failing together do not retry in lockstep.
pub fn backoff(failed: i64, jitter: f64) -> Duration {
    let doublings = u32::try_from(failed.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    let base = FIRST_RETRY
        .checked_mul(1_i32 << doublings)
        .unwrap_or(MAX_BACKOFF)
        .min(MAX_BACKOFF);
    (base * (1.0 + jitter.clamp(0.0, 1.0) / 2.0)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_two_seconds_to_ten_minutes_with_bounded_jitter() {
        assert_eq!(backoff(1, 0.0), Duration::seconds(2));
        assert!(backoff(1, 0.999) <= Duration::seconds(5));
        assert_eq!(backoff(2, 0.0), Duration::seconds(4));
        assert_eq!(backoff(3, 0.0), Duration::seconds(8));
        assert_eq!(backoff(10, 0.0), Duration::seconds(600));
        assert_eq!(backoff(1000, 0.9), MAX_BACKOFF);
        assert!(backoff(4, 0.5) > backoff(4, 0.0));
    }
}
