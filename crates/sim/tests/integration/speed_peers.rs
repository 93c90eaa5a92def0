//! `speed`'s peer test on the 2-core machine: barrier programs stay managed, threads with
//! different duty cycles go back to Linux.
//!
//! A real run (`workload spmd --threads 3 --barrier block --phase-ms 10` on two cores) had
//! the peer test hand every thread to Linux: its main thread, asleep in `join`, was placed
//! with the workers until the sleeper rule released it, the counts were even (2 + 2)
//! meanwhile so nothing rotated, and the thread alone on a core blocked at the barriers
//! half the time while the doubled-up two never did. The workloads here have that main
//! thread (the built-in `ep-barrier` has none, which is why the simulator never showed it).

use std::path::Path;
use threadbalance_policy::Settings;
use threadbalance_sim::scenario::parse_scenario;
use threadbalance_sim::suite::two_core;
use threadbalance_sim::{Comparison, RunOptions, RunResult, Workload, compare_with};

/// Three workers meeting at a barrier after every phase of `phase_ms` (`work_ms` each in
/// all), and a main thread asleep for `main_ms`, as in `join`.
fn spmd_with_main(phase_ms: u64, work_ms: u64, wait: &str, main_ms: u64) -> String {
    let phases = work_ms / phase_ms;
    format!(
        r#"
name = "spmd-main"
[[app]]
name = "spmd"
footprint_kb = 16
[[app.group]]
name = "main"
threads = 1
iterations = 1
ops = [ {{ op = "sleep", ms = {main_ms} }} ]
[[app.group]]
name = "worker"
threads = 3
iterations = {phases}
ops = [ {{ op = "compute", ms = {phase_ms} }}, {{ op = "barrier", barrier = 0, wait = "{wait}" }} ]
"#
    )
}

/// `workload uneven`'s threads: duty cycles 1, 1, ½, ¼ over 10 ms periods, and a main
/// thread asleep in `join`.
fn uneven_with_main(periods: u64) -> String {
    format!(
        r#"
name = "uneven-main"
[[app]]
name = "uneven"
footprint_kb = 16
[[app.group]]
name = "main"
threads = 1
iterations = 1
ops = [ {{ op = "sleep", ms = {main} }} ]
[[app.group]]
name = "full"
threads = 2
iterations = {periods}
ops = [ {{ op = "compute", ms = 10 }} ]
[[app.group]]
name = "half"
threads = 1
iterations = {periods}
ops = [ {{ op = "compute", ms = 5 }}, {{ op = "sleep", ms = 5 }} ]
[[app.group]]
name = "quarter"
threads = 1
iterations = {periods}
ops = [ {{ op = "compute", us = 2500 }}, {{ op = "sleep", us = 7500 }} ]
"#,
        main = periods * 10 / 2
    )
}

fn run(toml: &str, seed: u64) -> Comparison {
    let w = parse_scenario(toml, Path::new("<test>.toml")).unwrap();
    none_and_speed(&w, &RunOptions::new(seed))
}

/// `none` and `speed` on the 2-core machine, both finished.
fn none_and_speed(w: &Workload, o: &RunOptions) -> Comparison {
    let m = two_core().unwrap();
    let p = vec!["none".to_string(), "speed".to_string()];
    let c = compare_with(
        &m,
        w,
        &p,
        &Settings::new(threadbalance_model::Level::Core),
        o,
    )
    .unwrap();
    assert!(c.results.iter().all(|r| r.finished), "{}", c.to_table());
    c
}

/// How often `speed` handed every thread to Linux because they are not peers.
fn peer_hand_backs(r: &RunResult) -> String {
    r.policy_summary
        .lines()
        .into_iter()
        .find(|(k, _)| k.starts_with("handed to Linux"))
        .map(|(_, v)| v)
        .unwrap()
}

#[test]
fn speed_peers_barrier_threads_with_a_sleeping_main_thread_stay_managed_at_ten_ms() {
    // 3 workers × 600 ms of work in 10 ms phases, blocking barriers: the fair share is
    // 3 × 600 ms over 2 cores = 900 ms of wall time. Linux gives about 85 % of it; the
    // rotation about 95 %. Before the peer test compared CPU shares, it handed the threads
    // to Linux at ≈ 200 ms and the run got about 86 %.
    for seed in 1..=3 {
        let c = run(&spmd_with_main(10, 600, "block", 500), seed);
        let (none, speed) = (&c.results[0], &c.results[1]);
        assert_eq!(peer_hand_backs(speed), "0 times", "{}", c.to_table());
        let share = 0.9 / speed.runtime_s;
        assert!(share >= 0.9, "seed {seed}: {share:.3}\n{}", c.to_table());
        assert!(
            speed.runtime_s <= 0.95 * none.runtime_s,
            "seed {seed}:\n{}",
            c.to_table()
        );
    }
}

#[test]
fn speed_peers_barrier_threads_with_a_sleeping_main_thread_stay_managed_at_hundred_ms() {
    // 100 ms blocking phases: Linux rotates these itself (the real machine: 96 % of the
    // fair share) and the peer test used to hand the threads back to it after 200 ms of
    // pinning, which is where the measured 5 % loss came from. Managed all along,
    // `speed` must be at least Linux's rate.
    for seed in 1..=3 {
        let c = run(&spmd_with_main(100, 1000, "block", 800), seed);
        let (none, speed) = (&c.results[0], &c.results[1]);
        assert_eq!(peer_hand_backs(speed), "0 times", "{}", c.to_table());
        assert!(
            speed.runtime_s <= none.runtime_s,
            "seed {seed}:\n{}",
            c.to_table()
        );
    }
}

#[test]
fn speed_peers_threads_with_different_duty_cycles_still_go_back_to_linux() {
    // `uneven`: the quarter- and half-time threads sleep by their nature, and do less
    // work than the full-time ones wherever they run: duty cycles and CPU shares both
    // differ, so every thread goes to Linux (within the first ≈ 200 ms of the run).
    for seed in 1..=3 {
        let c = run(&uneven_with_main(80), seed);
        let speed = &c.results[1];
        assert!(
            peer_hand_backs(speed).starts_with("1 times"),
            "seed {seed}: {}\n{}",
            peer_hand_backs(speed),
            c.to_table()
        );
    }
}

#[test]
fn speed_peers_threads_whose_waits_the_kernel_reports_late_are_not_sleepers() {
    // `schedstat` as the kernel keeps it (`Linux::schedstat_at_ticks`): a running thread's
    // run time up to its CPU's last tick, a queued thread's run-queue wait only once it
    // runs again. Over the windows a thread waits behind its core's other thread it shows
    // neither run time nor wait and reads as blocked; then its wait arrives all at once
    // in a window too short to hold it. Until the policy took that late time off its
    // blocked averages and its credits (`ThreadRates::late`, `late_wait`), 3 threads on
    // 2 cores were released as "mostly sleeping" 2–12 times a run (seeds 1–3 of these
    // rows), with 10 ms phases `speed` was 0.956–0.966× Linux's time with yield barriers
    // and 0.998–1.014× with blocking ones. Now at most one thread is released a run, and
    // the times are 0.926–0.935× and 0.981–0.995×. (With the counters exact the rotation
    // gains more, 0.78× and 0.91×: late counters still blur its per-round speeds.)
    for (phase, wait) in [(10, "block"), (10, "yield"), (100, "block")] {
        for seed in 1..=3 {
            let w = threadbalance_sim::workload(
                &format!("ep-barrier:phase_ms={phase},wait={wait},work_ms=2000"),
                Some(3),
                None,
            )
            .unwrap();
            let mut o = RunOptions::new(seed);
            o.linux.schedstat_at_ticks = true;
            let c = none_and_speed(&w, &o);
            let (none, speed) = (&c.results[0], &c.results[1]);
            let released: u32 = speed
                .policy_summary
                .lines()
                .into_iter()
                .find(|(k, _)| k.starts_with("threads released to Linux"))
                .map(|(_, v)| v.parse().unwrap())
                .unwrap();
            let why = format!("{phase} ms {wait}, seed {seed}\n{}", c.to_table());
            assert!(released <= 1, "{released} released: {why}");
            assert_eq!(peer_hand_backs(speed), "0 times", "{why}");
            let ratio = speed.runtime_s / none.runtime_s;
            match (phase, wait) {
                (10, "block") => assert!(ratio < 1.0, "{ratio:.3}: {why}"),
                (10, "yield") => assert!(ratio <= 0.95, "{ratio:.3}: {why}"),
                _ => {}
            }
        }
    }
}
