//! `speed` on machines with more than one node or LLC: threads spread over nodes in
//! proportion to their cores (each node rotates its own), and swaps stay behind an LLC
//! where they can, so a working set larger than the private caches is not refetched from
//! memory on every turn.

use std::path::Path;
use threadbalance_policy::Settings;
use threadbalance_sim::scenario::parse_scenario;
use threadbalance_sim::{Comparison, Workload, compare, machine, workload};

fn run(spec: &str, w: &Workload) -> Comparison {
    let m = machine(spec, None).unwrap();
    let p = vec!["none".to_string(), "speed".to_string()];
    compare(
        &m,
        w,
        &p,
        1,
        &Settings::new(threadbalance_model::Level::Core),
    )
    .unwrap()
}

#[test]
fn speed_llc_two_nodes_rotate_both_at_one_and_a_half_threads_per_core() {
    // 24 threads on two 8-core nodes, 10 ms yield phases. Placed in core order, node 0
    // held 16 (two a core) and node 1 eight: even counts in each node, nothing rotated,
    // and `speed` ran at Linux's pace (2.065 s against 2.069 with 1000 ms of work). Spread
    // 12 + 12, each node rotates and the run takes about 0.8 of Linux's time.
    let w = workload(
        "ep-barrier:phase_ms=10,wait=yield,work_ms=400",
        Some(24),
        None,
    )
    .unwrap();
    let c = run("package:2 numa:1 core:8 pu:1", &w);
    let (none, speed) = (&c.results[0], &c.results[1]);
    assert!(none.finished && speed.finished);
    assert!(speed.runtime_s < 0.9 * none.runtime_s, "{}", c.to_table());
}

/// Threads of 10 ms phases, half memory-bound, each with a `footprint_kb` working set.
fn footprint(threads: usize, footprint_kb: u32) -> Workload {
    let text = format!(
        r#"name = "footprint"
[[app]]
name = "ep"
footprint_kb = {footprint_kb}
[[app.group]]
name = "worker"
threads = {threads}
iterations = 40
ops = [ {{ op = "compute", ms = 10, mem = 0.5 }}, {{ op = "barrier", barrier = 0, wait = "yield" }} ]
"#
    );
    parse_scenario(&text, Path::new("footprint.toml")).unwrap()
}

#[test]
fn speed_llc_a_large_working_set_does_not_make_the_rotation_lose_to_linux() {
    // One package of two 8-core LLCs (16 MiB each), 24 threads with 16 MiB working sets.
    // A move across LLCs refetches the private L2 and the thread's share of the LLC it
    // left (about 2.3 MiB: 0.4 ms); within an LLC only the L2. With half the swaps across
    // LLCs, `speed` took 1.43× Linux's time (1000 ms of work); spread 12 + 12, every
    // heavy thread has a partner behind its own LLC. Small working sets gain as before.
    for fp in [256, 16_384] {
        let c = run("package:1 l3:2 core:8 pu:1", &footprint(24, fp));
        let (none, speed) = (&c.results[0], &c.results[1]);
        assert!(none.finished && speed.finished);
        assert!(
            speed.runtime_s <= none.runtime_s,
            "{fp} KiB:\n{}",
            c.to_table()
        );
    }
}
