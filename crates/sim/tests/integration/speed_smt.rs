//! `speed` and `pbind` on a machine with hardware threads (8 cores × 2), at their default
//! levels (no level set: `speed` balances the logical CPUs, `pbind` pins one thread per
//! logical CPU). See: issue 38.
//!
//! The measure is the one the issue judges by: a thread's rate as a share of the fair
//! share counting logical CPUs (work × max(1, N/16) over the run time), against Linux's
//! with 16 threads, one a CPU, where every thread shares its core with a busy sibling.

use threadbalance_policy::Settings;
use threadbalance_sim::{Comparison, compare, machine, workload};

const SMT: &str = "package:1 core:8 pu:2";
const WORK_MS: f64 = 600.0;

fn run(threads: usize, policies: &[&str]) -> Comparison {
    let m = machine(SMT, None).unwrap();
    let w = workload(
        &format!("ep-barrier:phase_ms=30,wait=yield,work_ms={WORK_MS}"),
        Some(threads),
        None,
    )
    .unwrap();
    let p: Vec<String> = policies.iter().map(ToString::to_string).collect();
    compare(&m, &w, &p, 1, &Settings::default()).unwrap()
}

/// The fair-share rate of `policy`'s run in `c` with `threads` threads on 16 CPUs.
fn rate(c: &Comparison, policy: &str, threads: usize) -> f64 {
    let r = c.results.iter().find(|r| r.policy == policy).unwrap();
    assert!(r.finished, "{}", c.to_table());
    WORK_MS / 1000.0 * (threads as f64 / 16.0).max(1.0) / r.runtime_s
}

#[test]
fn speed_smt_uneven_threads_keep_linux_rate_at_one_thread_a_cpu() {
    // 24 threads (three a core, uneven on the 16 CPUs) and 17: at the core level speed
    // saw even counts (or one doubled core) and did nothing: 57.4 % and 59.8-71 % of the
    // fair share where Linux gives 16 threads 75.2 % (simulated, 2000 ms of work).
    let linux16 = rate(&run(16, &["none"]), "none", 16);
    for n in [17, 24] {
        let c = run(n, &["none", "speed"]);
        let speed = rate(&c, "speed", n);
        assert!(
            speed >= 0.9 * linux16,
            "{n} threads: speed {speed:.3} against Linux's {linux16:.3} at 16\n{}",
            c.to_table()
        );
    }
}

#[test]
fn speed_smt_pbind_one_thread_per_cpu_matches_linux() {
    // 16 threads on 16 logical CPUs: pinned one a CPU, as Linux spreads them. Pinned to
    // the first hardware thread of each core instead, they ran two a CPU with half of the
    // CPUs idle: 49 % of the fair share where Linux gives 75 %.
    let c = run(16, &["none", "pbind"]);
    let (linux, pbind) = (rate(&c, "none", 16), rate(&c, "pbind", 16));
    assert!(
        pbind >= 0.97 * linux,
        "pbind {pbind:.3} against Linux {linux:.3}\n{}",
        c.to_table()
    );
}

#[test]
fn speed_smt_two_sockets_blocking_phases_rotate_from_the_first_barrier() {
    // 72 threads on 2 × 12 × 2 with 80 ms blocking phases, the tool's cost charged. On SMT
    // siblings with blocking phases a swap needs a lead of `SMT_SWAP_MARGIN` of a phase's
    // work, asked from the first barrier on. At 0.3 (24 ms of credit here) the rotation
    // stood still for tens of ms there, the doubled threads stayed doubled, and the peer
    // test read their duty cycles apart and gave them to Linux: 0.937 and 0.991× Linux's
    // speed on seeds 4 and 1. At 0.1: 1.05–1.06× on seeds 1–4.
    let m = machine("package:2 core:12 pu:2", None).unwrap();
    let w = workload(
        "ep-barrier:phase_ms=80,wait=block,work_ms=400",
        Some(72),
        None,
    )
    .unwrap();
    let p = vec!["none".to_string(), "speed".to_string()];
    for seed in 1..=4 {
        let c = compare(&m, &w, &p, seed, &Settings::default()).unwrap();
        assert!(c.results.iter().all(|r| r.finished), "{}", c.to_table());
        let (linux, speed) = (c.results[0].runtime_s, c.results[1].runtime_s);
        assert!(
            speed <= linux,
            "seed {seed}: speed {speed:.3} s against Linux's {linux:.3} s\n{}",
            c.to_table()
        );
    }
}
