//! Micro-benchmark of wake planning, the pure core (divan): the fixture's wake of 50
//! tool calls parsed, routed, validated, exploded and checked for redundancy, and its
//! change set built. `cargo bench -p assent-bench --bench wake_planning`; the report
//! (`cargo xtask bench`) measures the same fixture.

use assent_bench::{PlanningFixture, WAKE_CALLS};

fn main() {
    divan::main();
}

/// One wake; throughput counted in tool calls.
#[divan::bench]
fn plan_a_wake_of_50_calls(bencher: divan::Bencher) {
    let fixture = PlanningFixture::new();
    bencher
        .counter(divan::counter::ItemsCount::new(WAKE_CALLS))
        .bench(|| fixture.plan());
}
