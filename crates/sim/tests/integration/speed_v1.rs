//! `speed-v1`, the `speed` design measured on a real 16-core machine
//! (`calibration/linux-6.18-16core.md`, §2) and on 2 cores (`linux-6.18-2core.md`): what the
//! simulator predicts for it, against what the machines gave.
//!
//! Measured (spmd through `compare`, 10 ms phases; wall time of `speed` over Linux's):
//! 16 cores: 17 threads yield 0.788 (a gain), 32 threads yield **2.844** (28 % of the fair
//! share, 904 moves/s), 17 / 24 / 32 threads block 1.020 / 1.017 / 1.024 (small losses);
//! 2 cores, 3 threads: a gain of 1.23 (yield) and 1.14 (block).
//!
//! The default model gets the 2-core gains and the 17-thread yield gain, and not the N = 32
//! loss: it shows no move at all there, and pinning's rate. With `schedstat` kept as the kernel keeps it and
//! a 1000 Hz tick it gets the direction of the N = 32 loss, not its size (1.4× of 2.8×),
//! but the 2-core gains then nearly vanish; so that reporting is not the default (see the
//! simulator's README, "Calibration at 16 cores").

mod policy;

use threadbalance_policy::{PolicyKind, Settings};
use threadbalance_sim::suite::two_core;
use threadbalance_sim::{Comparison, RunOptions, machine, run_built, run_policy, workload};

/// `none` against `speed-v1` (built here: it is not in the registry), as `compare_with`
/// would give them.
fn run(m: &str, w: &str, threads: usize, opts: &RunOptions) -> Comparison {
    // "local" is the 2-core machine of the 2-core calibration.
    let m = if m == "local" {
        two_core().unwrap()
    } else {
        machine(m, None).unwrap()
    };
    let w = workload(w, Some(threads), None).unwrap();
    let settings = Settings::new(threadbalance_model::Level::Core);
    let none = run_policy(&m, &w, "none", &settings, opts).unwrap();
    let v1 = policy::SpeedV1::new(&settings.resolved(PolicyKind::Speed, &m.topo), &m.topo);
    let v1 = run_built(&m, &w, "speed-v1", Box::new(v1.unwrap()), opts).unwrap();
    Comparison {
        machine: m.name.clone(),
        topology: m.topo.describe(),
        workload: w.name.clone(),
        threads: w.threads(),
        seed: opts.seed,
        baseline: none.clone(),
        results: vec![none, v1],
    }
}

/// Linux's wall time over `speed-v1`'s: above 1 when `speed-v1` is faster.
fn gain(c: &Comparison) -> f64 {
    assert!(c.results.iter().all(|r| r.finished), "{}", c.to_table());
    c.results[0].runtime_s / c.results[1].runtime_s
}

#[test]
fn speed_v1_two_cores_keeps_the_measured_gain() {
    // 3 threads on 2 cores, 10 ms phases. Measured gain 1.23 (yield), 1.14 (block); the
    // model: about 1.20 and 1.06. Both must be gains, yield's within 0.1 of the machine's.
    let o = RunOptions::new(1);
    let y = gain(&run(
        "local",
        "ep-barrier:phase_ms=10,wait=yield,work_ms=1500",
        3,
        &o,
    ));
    let b = gain(&run(
        "local",
        "ep-barrier:phase_ms=10,wait=block,work_ms=1500",
        3,
        &o,
    ));
    assert!((1.13..=1.33).contains(&y), "yield gain {y:.3}");
    assert!(b > 1.01, "block gain {b:.3}");
}

#[test]
fn speed_v1_sixteen_cores_gains_at_one_thread_too_many_with_yield() {
    // 17 threads on 16 cores, yield barriers: measured 0.788 of Linux's wall time (+27 %).
    let c = run(
        "package:1 core:16 pu:1",
        "ep-barrier:phase_ms=10,wait=yield,work_ms=1000",
        17,
        &RunOptions::new(1),
    );
    assert!(gain(&c) > 1.0, "{}", c.to_table());
}

#[test]
fn speed_v1_sixteen_cores_default_model_misses_the_two_per_core_loss() {
    // 32 threads, yield barriers: measured 2.844× slower than Linux. The default model
    // reports exact run times, so speed-v1 sees two equally fast threads on every core,
    // never pulls and keeps pinning's rate, which beats the Linux model (its group-load
    // balancing stacks three threads on a core now and then): the wrong direction, the
    // miss the README reports, kept visible here.
    let c = run(
        "package:1 core:16 pu:1",
        "ep-barrier:phase_ms=10,wait=yield,work_ms=1000",
        32,
        &RunOptions::new(1),
    );
    assert_eq!(c.results[1].migrations, 0, "{}", c.to_table());
    assert!(gain(&c) >= 1.0, "{}", c.to_table());
}

#[test]
fn speed_v1_sixteen_cores_kernel_schedstat_loses_two_per_core_with_yield() {
    // The same case with schedstat as the kernel keeps it (run time to the last tick, a
    // queued thread's wait only once it runs) and HZ = 1000. speed-v1 samples every 2 ms
    // (yield barriers switch threads more than 2000 times a second); a slice is
    // 0.75 ms × (1 + log2 8) = 3 ms on 16 CPUs, so a thread queued behind its core's other
    // thread often shows neither run time nor wait over a window: it counts as not wanting
    // a CPU, its core looks as if it held one thread, and that core pulls from a core that
    // holds two, making a core of three. Measured: 2.844× slower (wall), 904 moves/s. The
    // model: about 1.4× slower at about 190 moves/s: the direction, not the size.
    let mut o = RunOptions::new(1);
    o.linux.schedstat_at_ticks = true;
    o.linux.hz = 1000;
    let c = run(
        "package:1 core:16 pu:1",
        "ep-barrier:phase_ms=10,wait=yield,work_ms=1000",
        32,
        &o,
    );
    let g = gain(&c);
    assert!(g < 0.8, "speed-v1 / Linux speed {g:.3}\n{}", c.to_table());
    let moves_per_s = c.results[1].migrations as f64 / c.results[1].runtime_s;
    assert!(
        moves_per_s > 50.0,
        "{moves_per_s:.0} moves/s\n{}",
        c.to_table()
    );
}
