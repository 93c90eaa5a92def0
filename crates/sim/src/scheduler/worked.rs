//! Worked examples of the Linux model's kernel arithmetic on 2–4 CPU kernels (and one
//! 16-CPU LLC for `SIS_UTIL`): `wake_affine`, `wake_wide`, the idle-sibling search and
//! load balancing. Each case builds a tiny kernel by hand (which thread runs or waits
//! where, its load, when it last ran) and calls one decision; the comments give the
//! kernel's arithmetic that leads to the expected answer.

use super::balance::Kind;
use super::{Entry, GroupStats};
use crate::machine::machine;
use crate::run::RunOptions;
use crate::state::{Act, CpuIdx, Sim, St, ThreadIdx};
use crate::workload::{Workload, spinners};
use threadbalance_model::Nanos;

/// A kernel on machine `spec` with `n` threads, none placed yet, at time `now_ms`.
/// Every thread has a PELT load of 1 (always runnable) as of now, and last ran at 0.
fn kernel(spec: &str, n: usize, now_ms: u64) -> Sim {
    let m = machine(spec, None).unwrap();
    let w = Workload {
        name: "worked".into(),
        description: String::new(),
        apps: vec![spinners(n, 10_000_000_000)],
    };
    let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
    sim.world.now = Nanos::from_millis(now_ms);
    for th in &mut sim.world.th {
        th.load_at = sim.world.now;
    }
    sim
}

/// CPU index `i` (the cases below write plain numbers).
fn cpu(i: usize) -> CpuIdx {
    CpuIdx::from(i)
}

/// Thread index `i`.
fn th(i: usize) -> ThreadIdx {
    ThreadIdx::from(i)
}

/// Thread `t` runs on CPU `c`, or waits in its queue when another thread runs there.
fn put(sim: &mut Sim, t: usize, c: usize) {
    sim.world.th[t].cpu = CpuIdx::from(c);
    if sim.kernel.cpus[c].cur.is_none() {
        sim.kernel.cpus[c].cur = Some(ThreadIdx::from(t));
        sim.world.th[t].st = St::Running;
    } else {
        sim.kernel.cpus[c].rq.push(ThreadIdx::from(t));
        sim.world.th[t].st = St::Runnable;
    }
}

/// Thread `t` sleeps, last ran on CPU `c`, with PELT load `load`.
fn sleeps(sim: &mut Sim, t: usize, c: usize, load: f64) {
    sim.world.th[t].cpu = CpuIdx::from(c);
    sim.world.th[t].st = St::Blocked;
    sim.world.th[t].load_avg = load;
}

/// Places threads 0, 1, … by the CPU counts `per_cpu` (the first of each CPU runs).
fn fill(sim: &mut Sim, per_cpu: &[usize]) -> usize {
    let mut t = 0;
    for (c, &k) in per_cpu.iter().enumerate() {
        for _ in 0..k {
            put(sim, t, c);
            t += 1;
        }
    }
    t
}

// ---- wake_affine ---------------------------------------------------------------------

/// (name, machine, runnable threads per CPU, sleeper's load, waker CPU, prev CPU, moves
/// towards the waker).
type WakeCase<'a> = (&'a str, &'a str, &'a [usize], f64, usize, usize, bool);

#[test]
fn wake_affine_cases_follow_the_kernel_rules() {
    // Within one LLC (`package:1 core:4`) the count rule: towards the waker unless prev is
    // idle or the waker's CPU runs more threads: this_nr × 100 < prev_nr × (100 + 17 / 2)
    // = prev_nr × 108.
    // Across LLCs (`package:2 core:2`, LLCs {0,1} and {2,3}, domain imbalance_pct 117)
    // wake_affine_weight: (this_load + task_load) × 100 < prev_load × 108.
    let cases: &[WakeCase] = &[
        // prev idle (wake_affine_idle): the thread stays near its cache.
        (
            "idle_prev_keeps_prev",
            "package:1 core:4 pu:1",
            &[1, 0],
            1.0,
            0,
            1,
            false,
        ),
        // 1 × 100 < 1 × 108: equal counts, the waker's CPU wins.
        (
            "equal_counts_pull",
            "package:1 core:4 pu:1",
            &[1, 1],
            1.0,
            0,
            1,
            true,
        ),
        // 2 × 100 = 200 ≥ 1 × 108: a loaded waker keeps prev.
        (
            "loaded_waker_keeps_prev",
            "package:1 core:4 pu:1",
            &[2, 1],
            1.0,
            0,
            1,
            false,
        ),
        // 1 × 100 < 2 × 108 = 216: a loaded prev loses the thread.
        (
            "loaded_prev_pulls",
            "package:1 core:4 pu:1",
            &[1, 2],
            1.0,
            0,
            1,
            true,
        ),
        // Across LLCs, prev idle: stays.
        (
            "cross_idle_prev_keeps_prev",
            "package:2 core:2 pu:1",
            &[1, 0, 0],
            0.0,
            0,
            2,
            false,
        ),
        // (1 + 1) × 100 = 200 ≥ 1 × 108: a busy sleeper does not cross for a tie.
        (
            "cross_busy_sleeper_keeps_prev",
            "package:2 core:2 pu:1",
            &[1, 0, 1],
            1.0,
            0,
            2,
            false,
        ),
        // (1 + 0.05) × 100 = 105 < 108: a light sleeper crosses to the waker's LLC.
        (
            "cross_light_sleeper_pulls",
            "package:2 core:2 pu:1",
            &[1, 0, 1],
            0.05,
            0,
            2,
            true,
        ),
        // (1 + 0.1) × 100 = 110 ≥ 108: the half imbalance_pct margin keeps it.
        (
            "cross_margin_keeps_prev",
            "package:2 core:2 pu:1",
            &[1, 0, 1],
            0.1,
            0,
            2,
            false,
        ),
        // (1 + 1) × 100 = 200 < 2 × 108 = 216: prev runs two, even a busy sleeper crosses.
        (
            "cross_loaded_prev_pulls",
            "package:2 core:2 pu:1",
            &[1, 0, 2],
            1.0,
            0,
            2,
            true,
        ),
    ];
    for &(name, spec, per_cpu, load, waker, prev, want) in cases {
        let mut sim = kernel(spec, 8, 0);
        let t = fill(&mut sim, per_cpu);
        sleeps(&mut sim, t, prev, load);
        let lv = sim
            .kernel
            .levels
            .iter()
            .position(|l| l.dom_of[waker] == l.dom_of[prev])
            .unwrap();
        let got = sim
            .kernel
            .wake_affine(&sim.world, th(t), cpu(waker), cpu(prev), lv);
        assert_eq!(got, want, "wake_affine_{name}");
    }
}

#[test]
fn wake_wide_flipping_waker_keeps_prev() {
    // `package:2 core:2`: the waker runs on CPU 0 (CPU 1 idle); the sleeper (load 0.05)
    // last ran on CPU 2, and CPUs 2 and 3 are busy. wake_affine alone would pull it to the
    // waker's LLC ((1 + 0.05) × 100 = 105 < 108) and the idle scan would find CPU 1.
    // wake_wide: with the LLC size 2 as factor, a waker with 5 flips (4 + this new wakee)
    // and a wakee with 2 satisfy slave 2 ≥ 2 and master 5 ≥ 2 × 2: no affine wake-up;
    // the target stays prev, its LLC has no idle CPU, so prev it is.
    for (flips, want) in [(0, 1), (4, 2)] {
        let mut sim = kernel("package:2 core:2 pu:1", 4, 0);
        put(&mut sim, 0, 0); // the waker
        put(&mut sim, 1, 2);
        put(&mut sim, 2, 3);
        sleeps(&mut sim, 3, 2, 0.05);
        sim.world.th[0].wakee_flips = flips;
        sim.world.th[3].wakee_flips = if flips > 0 { 2 } else { 0 };
        assert_eq!(
            sim.kernel
                .select_wake_cpu(&mut sim.world, th(3), Some(cpu(0))),
            cpu(want),
            "flips {flips}"
        );
    }
}

// ---- select_idle_sibling ---------------------------------------------------------------

#[test]
fn select_wake_cpu_idle_prev_keeps_prev() {
    // A timer wake-up (no waker) targets prev; prev is idle: it goes back there although
    // CPU 0 is busy and CPUs 2, 3 are idle too.
    let mut sim = kernel("package:1 core:4 pu:1", 2, 0);
    put(&mut sim, 0, 0);
    sleeps(&mut sim, 1, 1, 1.0);
    assert_eq!(
        sim.kernel.select_wake_cpu(&mut sim.world, th(1), None),
        cpu(1)
    );
    assert_eq!(
        sim.world.th[1].recent_cpu, None,
        "prev was idle: recent_used_cpu untouched"
    );
}

#[test]
fn select_wake_cpu_busy_prev_prefers_recent_used_cpu_over_the_scan() {
    // prev = CPU 1 busy; CPUs 2 and 3 idle. The scan from the target would find CPU 2
    // first (order 2, 3, 0), but the CPU used before prev (recent_used_cpu = 3) is idle
    // in the same LLC: it wins, and prev becomes the new recent_used_cpu.
    for (recent, want) in [(None, 2), (Some(CpuIdx(3)), 3)] {
        let mut sim = kernel("package:1 core:4 pu:1", 3, 0);
        put(&mut sim, 0, 0);
        put(&mut sim, 1, 1);
        sleeps(&mut sim, 2, 1, 1.0);
        sim.world.th[2].recent_cpu = recent;
        assert_eq!(
            sim.kernel.select_wake_cpu(&mut sim.world, th(2), None),
            cpu(want),
            "recent {recent:?}"
        );
        assert_eq!(sim.world.th[2].recent_cpu, Some(CpuIdx(1)));
    }
}

#[test]
fn idle_scan_depth_follows_sis_util() {
    // depth = ⌊llc_weight × max(0, 1 − (1.17 u)²)⌋ for the LLC's utilization u (each
    // CPU's load capped at 1). 1.17 u reaches 1 at u = 0.855: nothing is scanned above
    // 85 %.
    // (machine, load on each CPU, depth)
    let cases: &[(&str, &[f64], usize)] = &[
        // u = 0: the whole LLC.
        ("package:1 core:4 pu:1", &[0.0; 4], 4),
        // u = .25: 4 × (1 − .2925²) = 4 × .9144 = 3.66 → 3.
        ("package:1 core:4 pu:1", &[1.0, 0.0, 0.0, 0.0], 3),
        // u = .45: 4 × (1 − .5265²) = 4 × .7228 = 2.89 → 2.
        ("package:1 core:4 pu:1", &[1.0, 0.8, 0.0, 0.0], 2),
        // u = .5: 4 × (1 − .585²) = 4 × .6578 = 2.63 → 2.
        ("package:1 core:4 pu:1", &[1.0, 1.0, 0.0, 0.0], 2),
        // u = .75: 4 × (1 − .8775²) = 4 × .2300 = 0.92 → 0.
        ("package:1 core:4 pu:1", &[1.0, 1.0, 1.0, 0.0], 0),
        // 16 CPUs, 12 busy, u = .75: 16 × .2300 = 3.68 → 3.
        ("package:1 core:16 pu:1", &[1.0; 12], 3),
        // 13 busy, u = .8125: 16 × (1 − .9506²) = 16 × .0963 = 1.54 → 1.
        ("package:1 core:16 pu:1", &[1.0; 13], 1),
        // 14 busy, u = .875 > .855: 1.17 u = 1.024, nothing.
        ("package:1 core:16 pu:1", &[1.0; 14], 0),
    ];
    for &(spec, loads, want) in cases {
        let mut sim = kernel(spec, 16, 0);
        for (c, &l) in loads.iter().enumerate() {
            if l > 0.0 {
                put(&mut sim, c, c);
                sim.world.th[c].load_avg = l;
            }
        }
        assert_eq!(
            sim.kernel.idle_scan(&mut sim.world, cpu(0)),
            want,
            "{spec} loads {loads:?}"
        );
    }
}

#[test]
fn select_idle_sibling_scan_depth_limits_the_search() {
    // CPUs 0 (target, prev) and 1 busy, 2 idle. The scan looks at 1, 2, 3, 0 in turn: a
    // depth of 1 sees only CPU 1 and falls back to the target; a depth of 2 finds CPU 2.
    let mut sim = kernel("package:1 core:4 pu:1", 3, 0);
    put(&mut sim, 0, 0);
    put(&mut sim, 1, 1);
    sleeps(&mut sim, 2, 0, 1.0);
    assert_eq!(
        sim.kernel
            .select_idle_sibling(&sim.world, th(2), cpu(0), cpu(0), Some(1)),
        cpu(0)
    );
    assert_eq!(
        sim.kernel
            .select_idle_sibling(&sim.world, th(2), cpu(0), cpu(0), Some(2)),
        cpu(2)
    );
}

#[test]
fn select_idle_sibling_smt_prefers_a_whole_idle_core_over_a_busy_cores_sibling() {
    // Two cores of two SMT siblings: core 0 = CPUs 0 and 1, core 1 = CPUs 2 and 3. Thread
    // 0 runs on CPU 0 (the target). The search order from the target is 1, 2, 3, 0:
    // CPU 1 is idle but shares core 0 with the busy CPU 0, so the idle-core pass skips it
    // and takes CPU 2, whose whole core is idle; it is not limited by SIS_UTIL's depth.
    let mut sim = kernel("package:1 core:2 pu:2", 3, 0);
    assert_ne!(
        sim.world.hw.smt_factor, 1.0,
        "the machine must have SMT siblings"
    );
    assert_eq!(sim.world.hw.siblings[0], [CpuIdx(0), CpuIdx(1)]);
    assert_eq!(sim.world.hw.siblings[2], [CpuIdx(2), CpuIdx(3)]);
    put(&mut sim, 0, 0);
    sleeps(&mut sim, 2, 0, 1.0);
    assert_eq!(
        sim.kernel
            .select_idle_sibling(&sim.world, th(2), cpu(0), cpu(0), None),
        cpu(2)
    );
    assert_eq!(
        sim.kernel
            .select_idle_sibling(&sim.world, th(2), cpu(0), cpu(0), Some(1)),
        cpu(2)
    );
    // With CPU 3 busy too no core is wholly idle: the plain scan takes the first idle CPU
    // in order, CPU 1.
    put(&mut sim, 1, 3);
    assert_eq!(
        sim.kernel
            .select_idle_sibling(&sim.world, th(2), cpu(0), cpu(0), None),
        cpu(1)
    );
}

// ---- load balancing --------------------------------------------------------------------

#[test]
fn group_kind_classifies_spare_fully_busy_overloaded() {
    // (runnable threads, CPUs, kind): fewer threads than CPUs has spare capacity (0), as
    // many is fully busy (1), more is overloaded (2).
    for (nr, ncpu, want) in [
        (0, 2, 0),
        (1, 2, 0),
        (2, 2, 1),
        (3, 2, 2),
        (1, 1, 1),
        (2, 1, 2),
    ] {
        let s = GroupStats { nr, idle: 0, ncpu };
        assert_eq!(s.kind(), want, "{nr} threads on {ncpu} CPUs");
    }
}

/// Runs one balance of CPU 0 at level `lv` after `failed` failed attempts; returns the
/// threads then on each CPU and the new failure count.
fn balance(
    spec: &str,
    per_cpu: &[usize],
    failed: u32,
    last_ran_ms: u64,
    kind: Kind,
) -> (Vec<usize>, u32) {
    let mut sim = kernel(spec, 24, 10);
    let n = fill(&mut sim, per_cpu);
    for t in 0..n {
        sim.world.th[t].last_ran = Nanos::from_millis(last_ran_ms);
    }
    let lv = sim.kernel.levels.len() - 1;
    sim.kernel.cpus[0].failed[lv] = failed;
    sim.kernel
        .load_balance(&mut sim.world, &mut sim.user, cpu(0), lv, kind);
    let nr = sim.kernel.cpus.iter().map(|c| c.nr()).collect();
    (nr, sim.kernel.cpus[0].failed[lv])
}

#[test]
fn load_balance_idle_cpu_pulls_by_task_count() {
    // 2 CPUs, CPU 0 idle (spare capacity), CPU 1 runs 3 (overloaded): the task-count rule
    // moves min(local idle CPUs 1, excess 3 − 1 = 2) = 1 thread at the first attempt.
    let (nr, failed) = balance("package:1 core:2 pu:1", &[0, 3], 0, 0, Kind::Idle);
    assert_eq!((nr, failed), (vec![1, 2], 0));
}

#[test]
fn load_balance_busy_cpus_halve_the_task_load_after_a_failure() {
    // 2 CPUs running 1 and 2: both busy, so load is balanced. Domain average 3 / 2 = 1.5;
    // imbalance min(2 − 1.5, 1.5 − 1) = 0.5 task = 512. A task weighs 1024 >> failed:
    // 1024 > 512 at the first attempt (nothing moves, failed 0 → 1); 512 ≤ 512 at the
    // second, and a thread that last ran 10 ms ago is not cache-hot: it moves.
    let spec = "package:1 core:2 pu:1";
    assert_eq!(balance(spec, &[1, 2], 0, 0, Kind::Busy), (vec![1, 2], 1));
    assert_eq!(balance(spec, &[1, 2], 1, 0, Kind::Busy), (vec![2, 1], 0));
}

#[test]
fn load_balance_imbalance_pct_threshold_110_smt_117_mc() {
    // Busiest group moves load only if busiest_nr × 100 > imbalance_pct × local_nr.
    // (machine, threads on CPU 0 and 1, moved). One failure already counted, threads cold,
    // so any imbalance of half a task or more moves one.
    let cases: &[(&str, [usize; 2], bool)] = &[
        // 117 (cores sharing an LLC): 7 × 100 = 700 ≤ 117 × 6 = 702: balanced.
        ("package:1 core:2 pu:1", [6, 7], false),
        // 6 × 100 = 600 > 117 × 5 = 585: moves.
        ("package:1 core:2 pu:1", [5, 6], true),
        // 110 (SMT siblings): 7 × 100 = 700 > 110 × 6 = 660: moves where 117 did not.
        ("package:1 core:1 pu:2", [6, 7], true),
        // 11 × 100 = 1100 ≤ 110 × 10 = 1100: balanced.
        ("package:1 core:1 pu:2", [10, 11], false),
    ];
    for &(spec, [l, b], moved) in cases {
        let (nr, _) = balance(spec, &[l, b], 1, 0, Kind::Busy);
        let want = if moved {
            vec![l + 1, b - 1]
        } else {
            vec![l, b]
        };
        assert_eq!(nr, want, "{spec} {l} vs {b}");
    }
}

#[test]
fn load_balance_cache_hot_thread_stays_until_cache_nice_tries_fail() {
    // 4 CPUs (imbalance_pct 117, cache_nice_tries 1), CPU 0 idle, CPU 1 runs 2. The queued
    // thread ran 0.1 ms ago (< migration cost 0.5 ms): cache-hot. It stays while failed ≤
    // cache_nice_tries (0, 1) and moves at failed = 2.
    let spec = "package:1 core:4 pu:1";
    for (failed, moved) in [(0, false), (1, false), (2, true)] {
        let mut sim = kernel(spec, 4, 10);
        put(&mut sim, 0, 1);
        put(&mut sim, 1, 1);
        sim.world.th[1].last_ran = Nanos(9_900_000);
        sim.kernel.cpus[0].failed[0] = failed;
        sim.kernel
            .load_balance(&mut sim.world, &mut sim.user, cpu(0), 0, Kind::Idle);
        assert_eq!(sim.kernel.cpus[0].nr() == 1, moved, "failed {failed}");
    }
}

#[test]
fn load_balance_lone_thread_is_pushed_after_cache_nice_tries_plus_2() {
    // `package:2 core:2`, top level (groups = LLCs {0,1}, {2,3}, cache_nice_tries 1).
    // LLC {0,1} is idle, LLC {2,3} runs one thread on each CPU: spreading wants
    // (2 − 0) / 2 = 1 thread, but nothing is queued to detach, so every attempt fails.
    // Once failed + 1 > cache_nice_tries + 2 = 3, CPU 2's running thread is pushed to
    // CPU 0 (active balance), and failed becomes cache_nice_tries + 1 = 2.
    let spec = "package:2 core:2 pu:1";
    let sim = kernel(spec, 1, 0);
    let top = &sim.kernel.levels[1];
    assert_eq!(
        (top.numa, top.imbalance_pct, top.cache_nice_tries),
        (false, 117, 1)
    );
    for failed in 0..3 {
        let (nr, f) = balance(spec, &[0, 0, 1, 1], failed, 0, Kind::Idle);
        assert_eq!((nr, f), (vec![0, 0, 1, 1], failed + 1), "failed {failed}");
    }
    let (nr, f) = balance(spec, &[0, 0, 1, 1], 3, 0, Kind::Idle);
    assert_eq!((nr, f), (vec![1, 0, 0, 1], 2));
}

#[test]
fn load_balance_busy_cpus_never_push_a_running_thread() {
    // 4 CPUs each running 2 of a program's 8 threads (group load: 1024 / 8 = 128 a
    // thread, 256 a CPU); a 3 ms kernel-thread burst on CPU 1 left 1024 × (1 −
    // 2^(−3 / 32.768)) = 63 of load there: 319 > 117 % of CPU 0's 256. Both groups are
    // busy, so load is balanced (`migrate_load`): domain average ⌊1087 / 4⌋ = 271,
    // imbalance min(319 − 271, 271 − 256) = 15. A queued thread weighs 128 >> failed:
    // 16 > 15 at failed = 3, where `cache_nice_tries + 2` failures would call for active
    // balance if tasks were to move (`imbalanced_active_balance` asks `migrate_task`).
    // Nothing moves and the failure is counted; at failed = 4 the queued thread (8 ≤ 15)
    // is pulled, and CPU 1's running thread stays where it runs.
    let spec = "package:1 core:4 pu:1";
    for (failed, moved) in [(3, false), (4, true)] {
        let mut sim = kernel(spec, 8, 10);
        fill(&mut sim, &[2, 2, 2, 2]);
        sim.kernel.add_noise_load(&mut sim.world, cpu(1), 3_000_000);
        let running = sim.kernel.cpus[1].cur;
        sim.kernel.cpus[0].failed[0] = failed;
        sim.kernel
            .load_balance(&mut sim.world, &mut sim.user, cpu(0), 0, Kind::Busy);
        let nr: Vec<usize> = sim.kernel.cpus.iter().map(|c| c.nr()).collect();
        let want = if moved { [3, 1, 2, 2] } else { [2, 2, 2, 2] };
        assert_eq!(nr, want, "failed {failed}");
        assert_eq!(sim.kernel.cpus[1].cur, running, "failed {failed}");
        let after = if moved { 0 } else { failed + 1 };
        assert_eq!(sim.kernel.cpus[0].failed[0], after, "failed {failed}");
    }
}

#[test]
fn load_balance_passes_at_one_tick_read_the_queues_as_the_tick_found_them() {
    // 4 CPUs, 6 threads of one program: CPUs 0 and 1 run one each, CPUs 2 and 3 two
    // (group load 1024 / 6 = 170 a thread: 170, 170, 340, 340). CPUs 0 and 1 balance at
    // the same tick, each after one failure: domain average ⌊1020 / 4⌋ = 255, imbalance
    // min(340 − 255, 255 − 170) = 85, a queued thread 170 >> 1 = 85 fits. Both read the
    // same loads, so both pick the same busiest CPU (2 and 3 tie; the tick's draw picks
    // one); CPU 0 pulls its queued thread, CPU 1 finds one thread left there, moves
    // nothing and counts a failure. Read one after the other, CPU 1 would have seen CPU
    // 0's two threads and pulled from the other doubled CPU: two moves at one tick.
    let spec = "package:1 core:4 pu:1";
    let mut sim = kernel(spec, 6, 10);
    fill(&mut sim, &[1, 1, 2, 2]);
    sim.kernel.cpus[0].failed[0] = 1;
    sim.kernel.cpus[1].failed[0] = 1;
    assert!(
        sim.kernel
            .load_balance(&mut sim.world, &mut sim.user, cpu(0), 0, Kind::Busy)
    );
    assert!(
        !sim.kernel
            .load_balance(&mut sim.world, &mut sim.user, cpu(1), 0, Kind::Busy)
    );
    let nr: Vec<usize> = sim.kernel.cpus.iter().map(|c| c.nr()).collect();
    assert_eq!(nr.iter().filter(|&&n| n == 2).count(), 2, "{nr:?}");
    assert_eq!(&nr[..2], &[2, 1], "{nr:?}");
    assert_eq!(sim.kernel.cpus[1].failed[0], 2);
    // At the next tick CPU 1 reads the queues afresh and pulls from one of the two CPUs
    // now doubled.
    sim.world.now += Nanos::from_millis(4);
    assert!(
        sim.kernel
            .load_balance(&mut sim.world, &mut sim.user, cpu(1), 0, Kind::Busy)
    );
    let nr: Vec<usize> = sim.kernel.cpus.iter().map(|c| c.nr()).collect();
    assert_eq!(nr.iter().filter(|&&n| n == 2).count(), 2, "{nr:?}");
    assert_eq!(nr[1], 2, "{nr:?}");
}

#[test]
fn rebalance_of_a_busy_cpu_comes_a_jiffy_before_the_busy_interval() {
    // 4 CPUs: `min_interval` 4 ms, busy × 16 = 64 ms, less one jiffy (4 ms at HZ 250):
    // `get_sd_balance_interval` keeps busy periods off each other's multiples.
    let mut sim = kernel("package:1 core:4 pu:1", 4, 0);
    fill(&mut sim, &[1, 1, 1, 1]);
    sim.world.now = Nanos::from_millis(59);
    sim.kernel.rebalance(&mut sim.world, &mut sim.user, cpu(0));
    assert_eq!(sim.kernel.cpus[0].last_balance[0], Nanos::ZERO);
    sim.world.now = Nanos::from_millis(60);
    sim.kernel.rebalance(&mut sim.world, &mut sim.user, cpu(0));
    assert_eq!(sim.kernel.cpus[0].last_balance[0], Nanos::from_millis(60));
}

#[test]
fn kernel_helpers_place_threads_as_told() {
    // The builders above: the first thread of a CPU runs, the others queue.
    let mut sim = kernel("package:1 core:2 pu:1", 3, 0);
    fill(&mut sim, &[1, 2]);
    assert_eq!(sim.kernel.cpus[1].cur, Some(ThreadIdx(1)));
    assert_eq!(sim.kernel.cpus[1].rq, vec![ThreadIdx(2)]);
    assert_eq!(sim.world.th[2].st, St::Runnable);
    assert!(matches!(sim.world.th[0].act, Act::Idle));
}

// ---- min_vruntime --------------------------------------------------------------------

#[test]
fn min_vruntime_follows_the_thread_running_alone() {
    // CPU 0 has run thread 0 alone for 100 ms, from vruntime 0 with the queue's
    // min_vruntime at 0. update_curr brings min_vruntime up to the running thread's
    // vruntime, 100 ms, so a thread woken there with lag 0 starts level with it and they
    // take turns. Left at 0, the woken thread would run 100 ms before thread 0 ran again.
    let mut sim = kernel("package:1 core:2 pu:1", 2, 100);
    put(&mut sim, 0, 0);
    sim.user.cpus[0].seg_start = Nanos::ZERO;
    assert_eq!(
        sim.kernel
            .min_vruntime_now(&mut sim.world, &mut sim.user, cpu(0)),
        Nanos::from_millis(100)
    );
    sim.world.th[1].st = St::Blocked;
    sim.world.th[1].lag = 0;
    sim.kernel
        .enqueue(&mut sim.world, &mut sim.user, th(1), cpu(0), Entry::Wakeup);
    assert_eq!(sim.world.th[1].vruntime, Nanos::from_millis(100));
}

#[test]
fn min_vruntime_is_the_least_of_running_and_queued_and_never_goes_back() {
    // At 50 ms thread 0 has run 50 ms on CPU 0 (vruntime 0 → 50) and thread 1 waits at
    // 20 ms: min(50, 20) = 20. Thread 1 placed lower later (10 ms) leaves it at 20, as
    // `update_min_vruntime` only moves forwards.
    let mut sim = kernel("package:1 core:2 pu:1", 2, 50);
    fill(&mut sim, &[2]);
    sim.user.cpus[0].seg_start = Nanos::ZERO;
    sim.world.th[1].vruntime = Nanos::from_millis(20);
    assert_eq!(
        sim.kernel
            .min_vruntime_now(&mut sim.world, &mut sim.user, cpu(0)),
        Nanos::from_millis(20)
    );
    sim.world.th[1].vruntime = Nanos::from_millis(10);
    assert_eq!(
        sim.kernel
            .min_vruntime_now(&mut sim.world, &mut sim.user, cpu(0)),
        Nanos::from_millis(20)
    );
}

// ---- arrivals by migration -----------------------------------------------------------

/// Two CPUs at 100 ms: thread 0 runs on CPU 0 from vruntime 0, picked `picked_ms` ago;
/// thread 1 runs on CPU 1 and thread 2 waits there 3 ms behind that queue's
/// `min_vruntime`. Then thread 2's affinity is set to CPU 0 alone: the thread that runs
/// on CPU 0 afterwards.
fn runs_after_a_move_onto_a_busy_cpu(picked_ms: u64) -> ThreadIdx {
    let mut sim = kernel("package:1 core:2 pu:1", 3, 100);
    fill(&mut sim, &[1, 2]);
    sim.user.cpus[0].seg_start = Nanos::ZERO;
    sim.world.th[0].picked_at = Nanos::from_millis(100 - picked_ms);
    sim.user.cpus[1].seg_start = Nanos::from_millis(99);
    sim.world.th[1].vruntime = Nanos::from_millis(50);
    sim.world.th[2].vruntime = Nanos::from_millis(45);
    sim.kernel.cpus[1].min_vruntime = Nanos::from_millis(48);
    sim.set_affinity(
        th(2),
        threadbalance_model::CpuSet::single(threadbalance_model::CpuId(0)),
    );
    assert_eq!(sim.world.th[2].cpu, cpu(0));
    sim.kernel.cpus[0].cur.unwrap()
}

#[test]
fn a_thread_moved_onto_a_busy_cpu_preempts_one_past_its_slice() {
    // `sched_setaffinity` moves a queued thread with `move_queued_task`, which calls
    // `wakeup_preempt` as a wake-up does. Thread 2 leaves CPU 1 with lag −3 ms (45 against
    // the queue's 48) and is placed on CPU 0 at 100 − 3 = 97 ms of vruntime, behind thread
    // 0 (100 ms). Thread 0 was picked 100 ms ago, past its 1.5 ms slice (0.75 ms ×
    // (1 + log₂ 2)): it gives way at once, and thread 2, the fairer, runs.
    assert_eq!(runs_after_a_move_onto_a_busy_cpu(100), th(2));
    // Just picked, thread 0 is within its slice (`RUN_TO_PARITY`) and runs on; thread 2
    // waits for the tick.
    assert_eq!(runs_after_a_move_onto_a_busy_cpu(0), th(0));
}
