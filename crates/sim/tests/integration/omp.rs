//! `speed` on the OpenMP stencil (`omp-stencil`: sweeps of 0.13 ms, a libgomp barrier after
//! each; and sweeps of 10 and 100 ms, the matrix's phases, as `bench` runs the program
//! with more passes a sweep, in the last test) on 16 cores (`package:1 core:16 pu:1`), as
//! issue 10 asks of an OpenMP program:
//! never more than 2 % behind Linux (`none`) at N = 16, and at least Linux's rate at
//! N = 17 and 24; and, since `speed` holds barrier waiters of phases finer than any round
//! evenly (`speed/fine.rs`), at least 97 % of pinning's (`pbind`) rate at N = 24 and 32.
//! Short work (300 ms a thread, about 2300 sweeps) so a debug build runs it; one run of
//! 1000 ms outlasts the guard's first stint and bounds what its probe costs.

use threadbalance_policy::Settings;
use threadbalance_sim::{Comparison, RunOptions, compare_with, machine, workload};

fn run(threads: usize, seed: u64) -> Comparison {
    run_with(threads, seed, &["none", "speed"])
}

fn run_with(threads: usize, seed: u64, policies: &[&str]) -> Comparison {
    run_long(threads, seed, policies, 300)
}

fn run_long(threads: usize, seed: u64, policies: &[&str], work_ms: u64) -> Comparison {
    run_spec(
        &format!("omp-stencil:work_ms={work_ms}"),
        threads,
        seed,
        policies,
    )
}

fn run_spec(spec: &str, threads: usize, seed: u64, policies: &[&str]) -> Comparison {
    run_spec_with(spec, threads, seed, policies, |_| {})
}

/// As [`run_spec`], the run options set by `set`.
fn run_spec_with(
    spec: &str,
    threads: usize,
    seed: u64,
    policies: &[&str],
    set: impl Fn(&mut RunOptions),
) -> Comparison {
    let m = machine("package:1 core:16 pu:1", None).unwrap();
    let w = workload(spec, Some(threads), None).unwrap();
    let p: Vec<String> = policies.iter().map(|p| p.to_string()).collect();
    let mut o = RunOptions::new(seed);
    set(&mut o);
    compare_with(
        &m,
        &w,
        &p,
        &Settings::new(threadbalance_model::Level::Core),
        &o,
    )
    .unwrap()
}

/// The tool costs the machine nothing (issue 38): for the tests of the policy's logic.
fn tool_free(o: &mut RunOptions) {
    o.tool_cpu = None;
}

#[test]
fn omp_stencil_sixteen_cores_speed_within_two_percent_of_linux_at_one_thread_per_core() {
    // 16 threads: libgomp spins its full count (7.8 ms ≫ a 0.13 ms sweep), so nobody
    // sleeps and there is nothing to rotate.
    for seed in 1..=3 {
        let c = run(16, seed);
        let (none, speed) = (&c.results[0], &c.results[1]);
        assert!(none.finished && speed.finished);
        assert!(
            speed.runtime_s <= 1.02 * none.runtime_s,
            "seed {seed}:\n{}",
            c.to_table()
        );
    }
}

#[test]
fn omp_stencil_sixteen_cores_speed_at_least_linux_with_more_threads_than_cores() {
    // 17 and 24 threads: libgomp throttles its spin to 100 pauses (2.6 µs) and the
    // waiters sleep at every barrier.
    for n in [17, 24] {
        for seed in 1..=3 {
            let c = run(n, seed);
            let (none, speed) = (&c.results[0], &c.results[1]);
            assert!(none.finished && speed.finished);
            assert!(
                speed.runtime_s <= none.runtime_s,
                "N = {n}, seed {seed}:\n{}",
                c.to_table()
            );
        }
    }
}

#[test]
fn omp_stencil_sixteen_cores_speed_within_three_percent_of_pinning_with_more_threads_than_cores() {
    // 24 and 32 threads: the phase the signals give (~0.4 ms) is shorter than any round
    // (1 ms), so the waiters are held as peers, evenly (⌊N/16⌋ or ⌈N/16⌉ a core) and
    // still, as pinning holds them; lent to Linux they ran at 0.68–0.72 of pinning's rate.
    // The rate is work over run time, so "at least 97 % of pinning's rate" is
    // speed's run time ≤ pbind's / 0.97.
    for n in [24, 32] {
        for seed in 1..=3 {
            let c = run_with(n, seed, &["speed", "pbind"]);
            let (speed, pbind) = (&c.results[0], &c.results[1]);
            assert!(speed.finished && pbind.finished);
            assert!(
                0.97 * speed.runtime_s <= pbind.runtime_s,
                "N = {n}, seed {seed}:\n{}",
                c.to_table()
            );
        }
    }
}

#[test]
fn omp_stencil_sixteen_cores_evenly_pinned_alike_skips_the_probe_and_equals_pinning() {
    // 32 threads, 1000 ms of work: the run (about 2.4 s) outlasts the first managed stint
    // (1 s), whose rate (82 % of the fair share) is under the guard's 90 %. Two threads a
    // core and every thread at the same rate: even pinning, which no placement betters,
    // so the guard skips the probe. With the probe (the threads back to Linux, which runs
    // them at 0.72 of pinning's rate, for 125 ms) `speed` lost 1.1 % to `pbind` here
    // (seed 1); now it places them as `pbind` does and moves nothing after.
    // About the guard's logic (equal to pinning, to 0.1 %): the tool's own thread, which
    // `pbind` does not run after its one placement, is left out.
    let c = run_spec_with(
        "omp-stencil:work_ms=1000",
        32,
        1,
        &["speed", "pbind"],
        tool_free,
    );
    let (speed, pbind) = (&c.results[0], &c.results[1]);
    assert!(speed.finished && pbind.finished);
    let lines = speed.policy_summary.lines();
    let guard = &lines.iter().find(|(k, _)| k == "guard").unwrap().1;
    assert!(
        guard.contains(" 0 probes (1 skipped: threads evenly pinned and progressing alike)"),
        "{guard}"
    );
    assert!(
        speed.runtime_s <= 1.001 * pbind.runtime_s,
        "{}",
        c.to_table()
    );
}

#[test]
fn omp_stencil_sixteen_cores_sweeps_of_10_and_100_ms() {
    // The matrix's phases on the OpenMP program (`bench` runs sweeps of that many passes).
    // libgomp sleeps at every barrier once threads outnumber cores. At N = 16 `speed` is
    // level with Linux (nothing to rotate), and at N = 17 it reaches the 90 % of the fair
    // share at both sweeps (91.7–91.9 and 97.2–97.4 %, seeds 1–3), at N = 24 with 10 ms
    // sweeps too (92.1–92.2 %, 0.862–0.877× Linux's time). A limit, held where it stands:
    // with 100 ms sweeps at N = 24 up to 0.8 % behind Linux (1.000–1.008×), whose idle
    // cores pull one thread of each doubled-up core at every sweep's end (7,000 moves/s,
    // each refilling 512 KiB; see "A swap margin for long phases (tried, not kept)" in
    // `docs/speed-rules.md`). Before a swap was one move ("One move a swap" there) the
    // 10 ms row read 89.8–90.1 % and the 100 ms one 1.6–2.4 % behind Linux.
    for (sweep_us, work_ms) in [(10_000, 1000), (100_000, 2000)] {
        let spec = format!("omp-stencil:sweep_us={sweep_us},work_ms={work_ms}");
        for n in [16, 17, 24] {
            for seed in 1..=3 {
                // The README's free-tick rows; with the tool's own CPU charged (issue 38)
                // they miss (docs/cost.md, "The tool's own CPU on the simulated machine").
                let c = run_spec_with(&spec, n, seed, &["none", "speed"], tool_free);
                let (none, speed) = (&c.results[0], &c.results[1]);
                assert!(none.finished && speed.finished);
                let fair = work_ms as f64 / 1e3 * (n as f64 / 16.0).max(1.0);
                let pct = 100.0 * fair / speed.runtime_s;
                let ratio = speed.runtime_s / none.runtime_s;
                let what = format!(
                    "N = {n}, {spec}, seed {seed}: {pct:.1} %, {ratio:.4}×\n{}",
                    c.to_table()
                );
                match (n, sweep_us) {
                    (16, _) => assert!(ratio <= 1.001, "{what}"),
                    (17, _) => assert!(pct >= 90.0, "{what}"),
                    (24, 10_000) => assert!(pct >= 90.0 && ratio <= 0.885, "{what}"),
                    _ => assert!(ratio <= 1.01, "{what}"),
                }
            }
        }
    }
}
