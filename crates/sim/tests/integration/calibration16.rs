//! The Linux model (`none`) against `calibration/linux-6.18-16core.md`: barrier programs
//! and always-runnable threads on one package of 16 cores.
//!
//! Each row is simulated as `workload spmd` counts work (CPU time), held to ±10 points of
//! spmd's % of the fair share where it was measured (10 ms phases), and as the C barrier
//! program counts it (fixed iterations, at the all-core clock fitted on the N = 16 rows,
//! `suite::c_clock`), held to ±10 points of the C program's mean. Each figure is the mean
//! of seeds 1–3 (until issue 38, seed 1 alone); `--suite papers` prints every row with its
//! reason. N = 17 with blocking
//! barriers at 100 ms was missed (the model 47 % against 61.5 %) until the queues'
//! `min_vruntime` followed the running thread: a thread woken onto a CPU whose thread had
//! run alone for a phase was placed a phase behind it and ran alone in its turn, so the
//! doubled-up core's two threads ran one after the other instead of taking turns, and the
//! CPUs that went idle at the phase's end found nothing to pull (63.3 % now).
//!
//! The always-runnable spinners' unequal shares were missed (min/max 0.66 over seeds 1–3
//! against 0.56 ± 0.1) until the balancing passes of one tick read the queues as the tick
//! found them (0.61 now); see `calibration_sixteen_cores_spinners_get_unequal_shares`.

use threadbalance_model::Nanos;
use threadbalance_policy::Settings;
use threadbalance_sim::suite::{SIXTEEN_CORE_ROWS, SixteenRow, sixteen_core};
use threadbalance_sim::{RunOptions, Wait, Workload, run_policy, workload::spinners};

/// The seeds every row is simulated with; what is held to the measurements is their mean.
const SEEDS: [u64; 3] = [1, 2, 3];

/// % of the fair share of `w` run under the Linux model, the mean over [`SEEDS`], with
/// the model's options set by `set` (one of its switches on or off, or none changed).
fn pct_with(r: &SixteenRow, w: &Workload, set: impl Fn(&mut RunOptions)) -> f64 {
    let m = sixteen_core().unwrap();
    let mut sum = 0.0;
    for seed in SEEDS {
        let mut o = RunOptions::new(seed);
        set(&mut o);
        let res = run_policy(&m, w, "none", &Settings::new(m.topo.default_level()), &o).unwrap();
        assert!(res.finished, "seed {seed}");
        sum += r.fair_share_pct(res.runtime_s);
    }
    sum / SEEDS.len() as f64
}

/// % of the fair share of `w` under the Linux model as it is, the mean over [`SEEDS`].
fn pct_of(r: &SixteenRow, w: &Workload) -> f64 {
    pct_with(r, w, |_| {})
}

/// The row as spmd counts work.
fn simulated(r: &SixteenRow) -> f64 {
    pct_of(r, &r.workload())
}

/// The row as spmd counts work, with the Linux model's options set by `set`.
fn simulated_with(r: &SixteenRow, set: impl Fn(&mut RunOptions)) -> f64 {
    pct_with(r, &r.workload(), set)
}

fn row(n: usize, s: u64, wait: Wait) -> SixteenRow {
    *SIXTEEN_CORE_ROWS
        .iter()
        .find(|r| r.threads == n && r.phase_ms == s && r.wait == wait)
        .unwrap()
}

fn check(rows: &[(usize, u64, Wait)]) {
    let mut table =
        String::from("N  S ms  barrier  measured (C, spmd)  simulated (C-like, spmd-like)\n");
    let mut ok = true;
    for &(n, s, w) in rows {
        let r = row(n, s, w);
        let (pct, c_pct) = (simulated(&r), pct_of(&r, &r.c_workload()));
        ok &= r.reproduced_by(pct, c_pct);
        table += &format!(
            "{n} {s:>4}  {w:?}  {:?}  {c_pct:.1}, {pct:.1}\n",
            r.targets()
        );
    }
    println!("{table}");
    assert!(ok, "a row is outside ±10 points\n{table}");
}

#[test]
fn calibration_sixteen_cores_one_thread_too_many_gates_every_phase() {
    // N = M + 1: one core runs two threads and gates every phase. Linux: 45–62 % (C
    // program), 53–67 % (spmd); nothing rotates the doubled-up core fast enough. With
    // blocking barriers the two threads of that core take turns until the other CPUs go
    // idle at the phase's end, and one of them is pulled to an idle CPU then: 100 ms of
    // work in about 150 ms, 71 % in CPU time (C program 61.5 % at its clock).
    check(&[
        (17, 10, Wait::Yield),
        (17, 10, Wait::Block),
        (17, 100, Wait::Yield),
        (17, 100, Wait::Block),
    ]);
}

#[test]
fn calibration_sixteen_cores_the_c_program_at_its_all_core_clock() {
    // The rows the model reproduced only against spmd, or not at all, before the C
    // program's clock was modelled: fixed iterations at 0.86 of the clock they were sized
    // at, with every core busy (fitted on N = 16 at 10 ms; the others are the test).
    check(&[
        (16, 10, Wait::Block),
        (24, 10, Wait::Yield),
        (24, 10, Wait::Block),
        (32, 10, Wait::Block),
        (16, 100, Wait::Block),
        (32, 100, Wait::Yield),
        (32, 100, Wait::Block),
    ]);
}

#[test]
fn calibration_sixteen_cores_one_thread_per_core_loses_to_kernel_noise() {
    // N = M with yield barriers: no thread ever waits for a CPU, yet a phase ends only
    // when the slowest thread is done, and kernel threads (1 % of each CPU in 0.5 ms
    // bursts) delay some thread in most 10 ms phases. Linux: 85 % (C), 98.6 % (spmd).
    check(&[(16, 10, Wait::Yield), (16, 100, Wait::Yield)]);
    let pct = simulated(&row(16, 10, Wait::Yield));
    assert!(pct < 97.0, "no loss at N = 16: {pct:.1} %");
}

#[test]
#[ignore = "issue 38 item 6: on the mean of seeds 1-3 the C-like run reads 69.8 % against 81.0 ± 10 (spmd-like 83.5 against 78.2: within); seed 1 alone was within"]
fn calibration_sixteen_cores_two_per_core_with_yield_loses_to_group_load() {
    // N = 2M with yield barriers: two threads on every core, none ever idle. Under
    // autogroup each of the 32 threads weighs 1024 / 32 = 32 and a core 64, so a kernel
    // thread's 0.5 ms burst (+11) lifts its core past imbalance_pct (64 × 1.17 = 74.9);
    // each failed attempt halves what a queued thread weighs until it fits the imbalance
    // and is pulled (never a running one: both groups are busy, so no active balance),
    // which stacks three threads on a core until the core left with one pulls one back. Linux: 80–82 % (C), 78.2 % (spmd); an even
    // split would give 96 %.
    check(&[(32, 10, Wait::Yield)]);
    let pct = simulated(&row(32, 10, Wait::Yield));
    assert!(pct < 90.0, "no loss at N = 32: {pct:.1} %");
}

#[test]
fn calibration_sixteen_cores_spinners_get_unequal_shares() {
    // Measured: 24 spinners for 6 s received 3.0–5.3 CPU seconds each (fair 4.0,
    // min/max 0.56) with 1–5 migrations per thread: the balancer moves one thread at a
    // time from a doubled-up core to a single one, every 252–760 ms (busy interval of a
    // 16-CPU domain: 16 ms × busy_factor 16 less a jiffy, doubled while balanced, and a
    // failure or two before a queued thread's load fits the imbalance).
    //
    // Checked as `--suite papers` checks it: the mean of the least CPU time over seeds
    // 1–3 against the mean of the most, within 0.56 ± 0.1 (0.61). Until the balancing
    // passes of one tick read the queues as the tick found them (see "Passes at one
    // tick" in the model's `scheduler/balance.rs`) it was 0.66 and not asserted: passes
    // read one after another moved several threads a tick where the kernel's, reading
    // at once, find the same busiest queue and move one, and each thread took its turns
    // alone too evenly. Also asserted: the total, the range within 0.3 s of the
    // measured one, and the migrations per thread, on every seed.
    let m = sixteen_core().unwrap();
    let w = Workload {
        name: "spinners".into(),
        description: String::new(),
        apps: vec![spinners(24, 100_000_000_000)],
    };
    let (mut lo_sum, mut hi_sum) = (0.0, 0.0);
    for seed in 1..=3 {
        let mut o = RunOptions::new(seed);
        o.horizon = Nanos::from_secs(6);
        let r = run_policy(&m, &w, "none", &Settings::new(m.topo.default_level()), &o).unwrap();
        let total: f64 = r.thread_cpu_s.iter().sum();
        // 16 CPUs × 6 s, less the kernel threads' 1 %.
        assert!((94.0..96.01).contains(&total), "seed {seed}: {total}");
        let lo = r.thread_cpu_s.iter().copied().fold(f64::MAX, f64::min);
        let hi = r.thread_cpu_s.iter().copied().fold(0.0, f64::max);
        // Within 0.3 s of the measured range, 3.0–5.3 s.
        assert!(lo >= 2.7 && hi <= 5.6, "seed {seed}: {:?}", r.thread_cpu_s);
        let per_thread = r.migrations as f64 / 24.0;
        assert!(
            (1.0..=5.0).contains(&per_thread),
            "seed {seed}: {per_thread}"
        );
        lo_sum += lo;
        hi_sum += hi;
    }
    let ratio = lo_sum / hi_sum;
    assert!((ratio - 0.56).abs() <= 0.1, "min/max {ratio:.3}");
}

#[test]
fn calibration_sixteen_cores_block_newidle_in_proportion_to_success_pulls_less() {
    // N = 1.5M with blocking barriers: a CPU whose thread arrives early goes idle and
    // pulls a queued thread from a doubled-up core (new-idle balancing), which lifts the
    // model above the static split (75 %). Since Linux 6.18.5 a domain is tried only as
    // often as such pulls succeed (NI_RANDOM), and the pulls at a phase's end, when
    // nothing is queued, fail. Linux: 65 % (C), 72.1 % (spmd); not reproduced yet, but
    // the proportional gate moves the model towards it by about 9 points (seed 1:
    // 88.7 → 79.7 %; 82.1 → 79.0 before the queues' `min_vruntime` followed the running
    // thread).
    let r = row(24, 10, Wait::Block);
    let run = |ni: bool| simulated_with(&r, |o| o.linux.newidle_random = ni);
    let (with, without) = (run(true), run(false));
    assert!(with < without - 2.0, "{with:.1} against {without:.1}");
    assert!(with > 70.0, "{with:.1}");
}

#[test]
fn calibration_sixteen_cores_block_delayed_dequeue_keeps_pairs_together() {
    // DELAY_DEQUEUE (Linux 6.12+, `Linux::delay_dequeue`, off): a thread that blocks at the
    // barrier after it had more than its core's average stays queued there, is woken in
    // place, and counts in its CPU's nr_running without being pullable. N = 2M with
    // blocking barriers: it makes the model kinder still (seed 1: 84.5 → 88.5 %, where
    // Linux gave 72–80 %), so it is not on by default; the 2-core 10 ms block row stays
    // within ±10 % with it (+4.4 → +3.5 %, measured before the queues' `min_vruntime`
    // followed the running thread).
    let r = row(32, 10, Wait::Block);
    let run = |dd: bool| simulated_with(&r, |o| o.linux.delay_dequeue = dd);
    let (with, without) = (run(true), run(false));
    assert!(with > without + 1.5, "{with:.1} against {without:.1}");
}

#[test]
fn calibration_sixteen_cores_block_stale_overload_flag_moves_no_row() {
    // The root domain's overload flag as the kernel keeps it (`Linux::sticky_overload`,
    // off): set when a queue reaches two threads, refreshed only by balancing passes, so
    // after a phase's doubled-up cores drain, CPUs going idle still roll NI_RANDOM's die
    // and fail. It moved N = 2M at 100 ms with blocking barriers by about a point towards
    // Linux (seed 1: 90.9 → 89.8 %) while a thread woken onto a CPU could be placed a
    // phase behind the thread running there (see the top of this file). With the queues'
    // `min_vruntime` following the running thread, the flag moves no 16-core block row by
    // as much as half a point (seed 1: 32 at 100 ms 92.7 → 92.6, 17 at 100 ms 69.8 →
    // 69.7, 32 at 10 ms 84.5 → 84.9), so there is no case left for turning it on.
    for (n, s) in [(17, 100), (32, 100), (32, 10)] {
        let r = row(n, s, Wait::Block);
        let run = |sticky: bool| simulated_with(&r, |o| o.linux.sticky_overload = sticky);
        let (with, without) = (run(true), run(false));
        assert!(
            (with - without).abs() < 0.5,
            "N = {n}, {s} ms: {with:.1} against {without:.1}"
        );
    }
}
