//! Assent's benchmarks: what the engine costs, measured against the physical limit of
//! the machine it runs on.
//!
//! The library holds what both the report binary (`cargo xtask bench`, which prints the
//! table and writes `target/bench/results.json`) and the divan micro-benchmark
//! (`cargo bench -p assent-bench --bench wake_planning`) measure: [`PlanningFixture`],
//! one realistic wake for the pure planner. The end-to-end figures (persistence,
//! confirmation against the bare driver, queries at scale, memory) live in the binary.
//!
//! ```
//! use assent_bench::{PlanningFixture, WAKE_CALLS};
//!
//! let wake = PlanningFixture::new().plan_counted()?;
//! assert_eq!(wake.calls, WAKE_CALLS);
//! # Ok::<(), assent_changeset::ChangesetError>(())
//! ```

mod planning;

pub use planning::{PlannedWake, PlanningFixture, WAKE_CALLS};
