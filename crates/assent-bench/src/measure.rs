//! Timing and memory helpers: medians, percentiles, quartiles of ratios, and the
//! process's resident memory from `/proc/self/status`.

use std::time::Duration;

/// The `p`-th percentile (0–100) of `samples`, nearest rank.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let Some(last) = sorted.len().checked_sub(1) else {
        return Duration::ZERO;
    };
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.saturating_sub(1).min(last)]
}

/// The median of `samples`.
pub fn median(samples: &[Duration]) -> Duration {
    percentile(samples, 50.0)
}

/// The quartiles (25 %, 50 %, 75 %) of `values`.
pub fn quartiles(values: &[f64]) -> [f64; 3] {
    let mut sorted = values.to_vec();
    sorted.sort_unstable_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return [f64::NAN; 3];
    }
    [sorted[n / 4], sorted[n / 2], sorted[(3 * n) / 4]]
}

/// Operations per second at `per_op` each.
pub fn per_second(per_op: Duration) -> f64 {
    1.0 / per_op.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Microseconds, for the report.
pub fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// The process's resident memory: peak so far (`VmHWM`) and now (`VmRSS`), in KiB.
/// `None` where `/proc` does not exist (not Linux).
#[derive(Debug, Clone, Copy, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Memory {
    pub peak_kib: u64,
    pub current_kib: u64,
}

impl Memory {
    pub fn now() -> Option<Self> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        };
        Some(Self {
            peak_kib: field("VmHWM:")?,
            current_kib: field("VmRSS:")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&samples, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn quartiles_of_a_sorted_range() {
        assert_eq!(quartiles(&[4.0, 1.0, 3.0, 2.0]), [2.0, 3.0, 4.0]);
    }

    #[test]
    fn memory_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            let memory = Memory::now().expect("/proc/self/status has VmHWM and VmRSS");
            assert!(memory.peak_kib >= memory.current_kib && memory.current_kib > 0);
        }
    }
}
