//! Worked examples of the speed policy: the rotation (N = M + 1 on 2 and 16 cores), no
//! moves with even counts (N = M, N = 2M), the back-off of moves that do not speed up,
//! NUMA blocking and the interval, here; the guard in [`guard`]; sleepers given back,
//! barrier peers and few busy threads lent to Linux in [`peers`].

mod guard;
mod peers;
use super::*;
use threadbalance_model::testutil::{key, topo};
use threadbalance_model::{CpuId, Move, PolicySummary, Reason, ThreadRates, ThreadState};

/// Rates of one thread over a window: (tid, speed, run-queue wait, voluntary, involuntary).
type Rate = (i32, f64, f64, u64, u64);

fn window(start_ms: f64, end_ms: f64, threads: &[Rate]) -> Window {
    let mut threads: Vec<ThreadRates> = threads
        .iter()
        .map(
            |&(tid, speed, latency, voluntary, involuntary)| ThreadRates {
                key: key(1, tid),
                util: speed,
                latency,
                stolen: 0.0,
                blocked: (1.0 - speed - latency).max(0.0),
                late: 0.0,
                late_wait: 0.0,
                lock: 0.0,
                lock_exact: false,
                speed,
                timeslices: 0,
                voluntary,
                involuntary,
                last_cpu: CpuId(0),
                state: ThreadState::Running,
                appeared: start_ms == end_ms,
                ipc: None,
                mpki: None,
                progress: None,
            },
        )
        .collect();
    threads.sort_by_key(|t| t.key);
    Window {
        start: Nanos((start_ms * 1e6) as u64),
        end: Nanos((end_ms * 1e6) as u64),
        threads,
        ..Window::default()
    }
}

fn settings(interval_ms: Option<u64>) -> Settings {
    let mut s = Settings::new(Level::Core);
    s.interval = interval_ms.map(Nanos::from_millis);
    s
}

fn settings_at(level: Level, interval_ms: Option<u64>) -> Settings {
    let mut s = Settings::new(level);
    s.interval = interval_ms.map(Nanos::from_millis);
    s
}

fn queue_of(m: &Move) -> usize {
    match m.to {
        Target::Domain { index, .. } => index,
        other => panic!("unexpected target {other:?}"),
    }
}

/// A tiny machine for always-runnable threads: each thread runs at 1 / (threads on its
/// queue), the fair share of a per-core scheduler, and waits the rest of the time.
struct Machine {
    queue: Vec<usize>,
    exec_ms: Vec<f64>,
    now_ms: f64,
    moves: Vec<Move>,
    /// Each thread's slice as the plans left it (`None`: its own).
    slice: Vec<Option<Nanos>>,
    /// Slice changes asked for.
    slice_changes: usize,
    /// Threads that block: asleep a tenth of the time, one voluntary switch every this
    /// many windows (`None`: always runnable, as at a yield barrier).
    block_every: Option<usize>,
    windows: usize,
}

impl Machine {
    fn new(n: usize) -> Machine {
        Machine {
            queue: vec![usize::MAX; n],
            exec_ms: vec![0.0; n],
            now_ms: 0.0,
            moves: Vec::new(),
            slice: vec![None; n],
            slice_changes: 0,
            block_every: None,
            windows: 0,
        }
    }

    fn apply(&mut self, plan: &Plan) {
        for m in &plan.moves {
            self.queue[(m.thread.tid.0 - 100) as usize] = queue_of(m);
            self.moves.push(*m);
        }
        for s in &plan.slices {
            self.slice[(s.thread.tid.0 - 100) as usize] = s.slice;
            self.slice_changes += 1;
        }
    }

    /// Runs `policy` for `ms` of simulated time, calling it when it asks.
    fn run(&mut self, policy: &mut Speed, topo: &Topology, ms: f64) {
        let n = self.queue.len();
        if self.now_ms == 0.0 {
            let first: Vec<Rate> = (0..n).map(|i| (100 + i as i32, 0.0, 0.0, 0, 0)).collect();
            let plan = policy.decide(topo, &window(0.0, 0.0, &first));
            self.apply(&plan);
            self.now_ms = plan.next_in.as_millis_f64();
        }
        let end = self.now_ms + ms;
        let mut last = 0.0_f64.max(self.now_ms - policy.interval().as_millis_f64());
        while self.now_ms < end {
            let dt = self.now_ms - last;
            self.windows += 1;
            let (awake, blocks) = match self.block_every {
                Some(k) => (0.9, u64::from(self.windows.is_multiple_of(k))),
                None => (1.0, 0),
            };
            let rates: Vec<Rate> = (0..n)
                .map(|i| {
                    let load = self.queue.iter().filter(|&&q| q == self.queue[i]).count();
                    let s = awake / load as f64;
                    self.exec_ms[i] += s * dt;
                    (100 + i as i32, s, awake - s, blocks, 0)
                })
                .collect();
            let plan = policy.decide(topo, &window(last, self.now_ms, &rates));
            self.apply(&plan);
            last = self.now_ms;
            self.now_ms += plan.next_in.as_millis_f64();
        }
    }
}

#[test]
fn speed_initial_placement_is_round_robin_and_late_threads_go_to_the_emptiest_core() {
    let t = topo(1, 1, 3, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    // Four threads at start: cores 0, 1, 2, 0.
    let first: Vec<Rate> = (0..4).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    let plan = p.decide(&t, &window(0.0, 0.0, &first));
    let qs: Vec<usize> = plan.moves.iter().map(queue_of).collect();
    assert_eq!(qs, vec![0, 1, 2, 0]);
    assert!(plan.moves.iter().all(|m| m.why == Reason::Initial));
    // A fifth thread appears 2 ms later (before the first round): cores 1 and 2 hold one
    // thread each; core 1.
    let mut later: Vec<Rate> = (0..4).map(|i| (100 + i, 1.0, 0.0, 0, 0)).collect();
    later.push((104, 0.5, 0.0, 0, 0));
    let plan = p.decide(&t, &window(0.0, 2.0, &later));
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(
        (plan.moves[0].thread, queue_of(&plan.moves[0])),
        (key(1, 104), 1)
    );
}

#[test]
fn speed_thread_that_mostly_sleeps_is_released_to_linux_and_placed_again_when_busy() {
    // Two cores; threads 101, 103 and 104 run all the time, thread 102 runs 20 % and
    // sleeps 80 %. Round-robin: 101 and 103 on core 0, 102 and 104 on core 1. 102's
    // smoothed blocked fraction climbs from 0 toward 0.8 with a 200 ms time constant:
    // past 0.4 (after ≈ 200 ms · ln 2 ≈ 140 ms) it is given back to Linux. (Three busy
    // threads stay: more than the cores, so they stay placed; see `few`.)
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let tids = [101, 102, 103, 104];
    let first: Vec<Rate> = tids.iter().map(|&i| (i, 0.0, 0.0, 0, 0)).collect();
    let plan = p.decide(&t, &window(0.0, 0.0, &first));
    assert_eq!(plan.moves.len(), 4, "all placed at first");
    let rates = |sleeper: f64| -> Vec<Rate> {
        tids.iter()
            .map(|&i| (i, if i == 102 { sleeper } else { 1.0 }, 0.0, 0, 0))
            .collect()
    };
    let mut released_at = None;
    for step in 1..=40 {
        let (a, b) = (f64::from(step - 1) * 10.0, f64::from(step) * 10.0);
        let plan = p.decide(&t, &window(a, b, &rates(0.2)));
        if let Some(m) = plan.moves.iter().find(|m| m.why == Reason::Release) {
            assert_eq!((m.thread, m.to), (key(1, 102), Target::Original));
            released_at = Some(b);
            break;
        }
    }
    let at = released_at.expect("the sleeper is released");
    assert!((100.0..=200.0).contains(&at), "released at {at} ms");
    // Released, it counts on no core: core 1 holds only 104.
    assert_eq!(
        p.queues.iter().map(|q| q.load).collect::<Vec<_>>(),
        vec![2, 1]
    );
    // It starts competing (runs 100 %): below 0.25 again it is placed on the emptiest core.
    let mut placed_again = false;
    for step in 0..60 {
        let (a, b) = (at + f64::from(step) * 10.0, at + f64::from(step + 1) * 10.0);
        let plan = p.decide(&t, &window(a, b, &rates(1.0)));
        if plan
            .moves
            .iter()
            .any(|m| m.thread == key(1, 102) && m.why == Reason::Initial)
        {
            placed_again = true;
            break;
        }
    }
    assert!(placed_again);
    assert_eq!(
        p.queues.iter().map(|q| q.load).collect::<Vec<_>>(),
        vec![2, 2]
    );
}

#[test]
fn speed_interval_follows_the_synchronization_signals() {
    let t = topo(1, 1, 2, 1);
    let cases: [(f64, u64, u64, u64); 7] = [
        // Yielding: 400 involuntary switches in 60 ms ≈ 6 700/s ≥ 2 000 → floor, 1 ms.
        (1.0, 0, 400, 1_000_000),
        // Blocking once per 60 ms phase: 1 in 60 ms ≈ 17 switches/s → 60 ms / 16 = 3.75 ms.
        (1.0, 1, 0, 3_750_000),
        // Blocking once and preempted once per 60 ms: the threads block (at least a third
        // of the switches voluntary), so the phase is the work between two blocks, 60 ms,
        // not the time between any two switches (30 ms): 3.75 ms.
        (1.0, 1, 1, 3_750_000),
        // Blocking 6 times per 60 ms (10 ms phases): 100/s → 10 / 16 = 0.625 ms, held at
        // the 1 ms floor.
        (1.0, 6, 0, 1_000_000),
        // Switching without blocking, 2 a 60 ms (a yield or a preemption each): the
        // switches are all there is to go by, 30 ms / 16 = 1.875 ms.
        (1.0, 0, 2, 1_875_000),
        // Blocking once per 57 ms of work, asleep 5 % at the barrier, and preempted 20
        // times by a thread sharing the core: they block (asleep at least 1 %), and the
        // preemptions are not phase boundaries: 57 ms / 16 = 3.56 ms, not the 1 ms floor
        // 21 switches in 60 ms would ask for.
        (0.95, 1, 20, 3_562_500),
        // Nothing: the paper's 100 ms.
        (1.0, 0, 0, 100_000_000),
    ];
    for (util, vol, invol, want_ns) in cases {
        let mut p = Speed::new(&settings(None), &t).unwrap();
        // Per 60 ms window and thread: vol and invol switches.
        let w = window(
            0.0,
            60.0,
            &[(100, util, 0.0, vol, invol), (101, util, 0.0, vol, invol)],
        );
        let got = p.observe_signals(&w);
        assert_eq!(p.counted, vol + invol > 0);
        assert!(
            (got.0 as f64 - want_ns as f64).abs() < 0.05 * want_ns as f64,
            "{got}"
        );
    }
}

#[test]
fn speed_work_phase_is_cpu_time_per_blocking_point_however_long_the_wait() {
    // Two threads block once per 10 ms of work. Alone on their cores (util 1.0 minus the
    // time asleep at the barrier: 0.8) a 60 ms window holds 4.8 phases of work each:
    // 80 switches/s, a 12.5 ms phase on the wall, and 0.8 / 80 = 10 ms of work. Doubled
    // up and waiting for a CPU half the time (util 0.4, latency 0.5), the same work takes
    // twice the wall time: 40 switches/s, a 25 ms phase on the wall, still 0.4 / 40 = 10 ms
    // of work. The sparse-rounds rule holds its gaps against the work, which does not
    // stretch with the waiting (see `sparse`).
    let t = topo(1, 1, 2, 1);
    for (util, latency, switches, wall_ms) in [(0.8, 0.0, 80, 12.5), (0.4, 0.5, 40, 25.0)] {
        let mut p = Speed::new(&settings(None), &t).unwrap();
        // Per thread and 1000 ms window: `switches` voluntary switches.
        let w = window(
            0.0,
            1000.0,
            &[
                (100, util, latency, switches, 0),
                (101, util, latency, switches, 0),
            ],
        );
        p.observe_signals(&w);
        let (wall, work) = (p.phase_ns.unwrap(), p.work_phase_ns.unwrap());
        assert!((wall - wall_ms * 1e6).abs() < 1e3, "{wall}");
        assert!((work - 10e6).abs() < 1e3, "{work}");
    }
    // Yielding threads give no phase of either kind (the rule leaves them alone).
    let mut p = Speed::new(&settings(None), &t).unwrap();
    p.observe_signals(&window(
        0.0,
        60.0,
        &[(100, 1.0, 0.0, 0, 400), (101, 1.0, 0.0, 0, 400)],
    ));
    assert_eq!((p.phase_ns, p.work_phase_ns), (None, None));
}

#[test]
fn speed_block_work_counts_every_busy_thread_when_windows_are_shorter_than_phases() {
    // Ten threads, each blocking once per 10 ms of work, their blocks spread over the
    // phase; the host samples every millisecond. In each 1 ms window one thread blocks
    // (0.9 ms run, then asleep) and the nine others run on without a switch. Counted over
    // the threads that switched, the work per block reads 0.9 / 1 ms of window: 0.9 ms.
    // Over every busy thread it reads (9 × 1.0 + 0.9) / 10 per thread-second over one
    // block per 10 thread-ms: 9.9 ms, the phase's work. The sparse-rounds rule holds its
    // gaps against this one (see "The work over every busy thread" in `sparse`).
    let t = topo(1, 1, 10, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    for k in 0..400u32 {
        let at = f64::from(k);
        let blocker = 100 + (k % 10) as i32;
        let rates: Vec<Rate> = (100..110)
            .map(|tid| {
                if tid == blocker {
                    (tid, 0.9, 0.0, 1, 0)
                } else {
                    (tid, 1.0, 0.0, 0, 0)
                }
            })
            .collect();
        p.observe_signals(&window(at, at + 1.0, &rates));
    }
    let (switched, busy) = (p.work_phase_ns.unwrap(), p.block_work_ns.unwrap());
    assert!((switched - 0.9e6).abs() < 1e3, "{switched}");
    assert!((busy - 9.9e6).abs() < 0.05e6, "{busy}");
    // Windows as long as the phases read the same either way: 10 ms windows in which
    // every thread blocks once after 9.9 ms of work.
    let mut p = Speed::new(&settings(None), &t).unwrap();
    for k in 0..40u32 {
        let at = 10.0 * f64::from(k);
        let rates: Vec<Rate> = (100..110).map(|tid| (tid, 0.99, 0.0, 1, 0)).collect();
        p.observe_signals(&window(at, at + 10.0, &rates));
    }
    let (switched, busy) = (p.work_phase_ns.unwrap(), p.block_work_ns.unwrap());
    assert!((switched - 9.9e6).abs() < 1e3, "{switched}");
    assert!((busy - 9.9e6).abs() < 1e3, "{busy}");
}

#[test]
fn speed_work_phase_of_threads_that_sleep_though_preemptions_outnumber_their_blocks() {
    // Two threads with 100 ms phases of work, doubled up: each runs 0.45 of the time,
    // waits 0.45 and sleeps 0.10 at the barrier, blocking 4.5 times a second and preempted
    // 400 times. The switches say "not blocking" (2 × 4.5 < 400), which gave no work
    // phase, so the sparse-rounds rule could not see 100 ms phases under rounds 150 ms
    // apart. Asleep a tenth of the time (at least `SLEEPING`), they block: the work
    // phase is 0.45 / 4.5 = 100 ms. The phase on the wall clock stays the switches' (the
    // fine-phase rule's), and none is given.
    let t = topo(1, 1, 2, 1);
    // Both threads running `run` of a second, waiting 0.45: (work phase, wall-clock phase).
    let phases = |run: f64| {
        let mut p = Speed::new(&settings(None), &t).unwrap();
        let w = window(
            0.0,
            1000.0,
            &[(100, run, 0.45, 4, 400), (101, run, 0.45, 5, 400)],
        );
        p.observe_signals(&w);
        (p.work_phase_ns, p.phase_ns)
    };
    let (work, phase) = phases(0.45);
    let work = work.unwrap();
    assert!((work - 100e6).abs() < 1e3, "{work}");
    assert_eq!(phase, None);
    // Never asleep (0.55 + 0.45): no work phase, as before.
    assert_eq!(phases(0.55).0, None);
}

#[test]
fn speed_signals_average_over_the_windows_seen_until_they_cover_tau() {
    // Two threads block once per 10 ms phase. The first window (10 ms) ends before any
    // phase did: 0 switches. The second sees one switch per thread: 1 / 10 ms = 100/s.
    // Averaged over the 20 ms seen (weight 10/20 on the new window): 0 + (100 − 0) · 0.5
    // = 50/s, phase 20 ms → 20 / 16 = 1.25 ms. (Averaged from zero with τ = 200 ms, the
    // weight would be 10/200: 5/s, a 200 ms phase, 12.5 ms rounds.) Third window, one
    // switch each again: weight 10/30 → 50 + (100 − 50) / 3 = 66.7/s (the mean of 0, 100,
    // 100), phase 15 ms → 0.94 ms, held at the 1 ms floor.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let rates = |sw: u64| [(100, 1.0, 0.0, sw, 0), (101, 1.0, 0.0, sw, 0)];
    p.observe_signals(&window(0.0, 10.0, &rates(0)));
    let got = p.observe_signals(&window(10.0, 20.0, &rates(1)));
    assert!((p.vol_rate - 50.0).abs() < 1e-9, "{}", p.vol_rate);
    assert!(got.0.abs_diff(1_250_000) < 10, "{got}");
    let got = p.observe_signals(&window(20.0, 30.0, &rates(1)));
    assert!((p.vol_rate - 200.0 / 3.0).abs() < 1e-9, "{}", p.vol_rate);
    assert_eq!(got, Nanos::from_millis(1));
    // Once the windows cover τ (200 ms), each new one weighs dt / τ: after 20 more
    // windows of 100/s (30 → 230 ms), one of 0 switches moves the rate by 10/200 of the
    // way to 0.
    for i in 3..23 {
        let at = f64::from(i) * 10.0;
        p.observe_signals(&window(at, at + 10.0, &rates(1)));
    }
    let before = p.vol_rate;
    p.observe_signals(&window(230.0, 240.0, &rates(0)));
    assert!((p.vol_rate - before * (1.0 - 0.05)).abs() < 1e-9);
}

#[test]
fn speed_interval_rises_by_half_at_most_per_round_while_rotating() {
    // Three always-runnable threads on two cores that have not synchronized yet (no
    // switches: their first phase has not ended). Every round asks for the paper's
    // 100 ms, "no synchronization seen". Followed at once, that would leave the doubled-up
    // pair where it is for 100 ms after the first round; instead the interval goes up
    // by half a round: 1 → 1.5 → 2.25 → 3.375 ms …, and down again at once.
    assert_eq!(
        follow(Nanos::from_millis(1), Nanos::from_millis(100)),
        Nanos(1_500_000)
    );
    assert_eq!(
        follow(Nanos(1_500_000), Nanos::from_millis(100)),
        Nanos(2_250_000)
    );
    assert_eq!(
        follow(Nanos::from_millis(40), Nanos::from_millis(1)),
        Nanos::from_millis(1)
    );
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let mut m = Machine::new(3);
    // Rounds at 1, 2.5, 4.75, 8.125, 13.19 ms: the fifth round sets 1.5⁵ = 7.59 ms.
    m.run(&mut p, &t, 13.0);
    assert_eq!(p.stats.rounds, 5, "{:?}", p.stats);
    assert_eq!(p.interval(), Nanos(7_593_750));
    assert!(p.stats.rotating_rounds >= 4);
}

#[test]
fn speed_interval_uses_timeslices_when_switches_are_not_counted() {
    // A host that does not read `status` reports no switches; 1 timeslice per 60 ms
    // (17/s, wake-ups plus preemptions) stands in: phase 60 ms → 60 / 16 = 3.75 ms.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let mut w = window(0.0, 60.0, &[(100, 1.0, 0.0, 0, 0), (101, 0.5, 0.5, 0, 0)]);
    for r in &mut w.threads {
        r.timeslices = 1;
    }
    let got = p.observe_signals(&w);
    assert!(got.0.abs_diff(3_750_000) < 10, "{got}");
    assert!(!p.counted);
}

#[test]
fn speed_rejects_bad_settings() {
    let t = topo(1, 1, 2, 1);
    let mut s = settings(None);
    s.speed.min_interval = Nanos::from_millis(200);
    assert!(Speed::new(&s, &t).is_err());
    assert!(Speed::new(&settings(Some(0)), &t).is_err());
    assert_eq!(
        crate::build("speed", &settings(None), &t).unwrap().name(),
        "speed"
    );
}

/// Asserts that every thread got the same share of the CPU time within `within` (a
/// fraction of the share).
fn assert_equal_shares(m: &Machine, within: f64) {
    let total: f64 = m.exec_ms.iter().sum();
    let share = 1.0 / m.exec_ms.len() as f64;
    for e in &m.exec_ms {
        assert!(
            (e / total - share).abs() < within * share,
            "{:?}",
            m.exec_ms
        );
    }
}

/// Moves other than first placements.
fn rotations(m: &Machine) -> Vec<&Move> {
    m.moves
        .iter()
        .filter(|m| m.why != Reason::Initial)
        .collect()
}

#[test]
fn speed_three_threads_on_two_cores_rotate_to_equal_progress() {
    // The paper's §4 case: N = 3, M = 2, T = 1; core 0 holds 2 threads (speed 0.5 each),
    // core 1 one (speed 1). Every 5 ms round, the heavy thread with the least credit swaps
    // with the light one when their credits differ by more than the margin
    // (1/1 − 1/2) · 5 ms · (−0.5) = −1.25 ms, i.e. unless the light thread is more than
    // 1.25 ms behind. So every thread spends a third of the time alone: progress
    // 1/3 · 1 + 2/3 · 0.5 = 2/3 of a core, the fair share.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 3000.0);
    let moved = rotations(&m);
    // A swap (two moves) in most of the 600 rounds.
    assert!(moved.len() > 500, "{} moves", moved.len());
    assert!(
        moved
            .iter()
            .all(|m| matches!(m.why, Reason::SpeedRotate { .. }))
    );
    // Counts never change: still 2 + 1.
    let mut loads: Vec<u32> = p.queues.iter().map(|q| q.load).collect();
    loads.sort_unstable();
    assert_eq!(loads, vec![1, 2]);
    let total: f64 = m.exec_ms.iter().sum();
    for e in &m.exec_ms {
        assert!((e / total - 1.0 / 3.0).abs() < 0.01, "{:?}", m.exec_ms);
    }
}

#[test]
fn speed_seventeen_threads_on_sixteen_cores_rotate_the_doubled_pair_every_round() {
    // N = M + 1 = 17: one heavy core (2 threads), 15 light. Lemma 1 would need
    // 2 · ⌈SQ/FQ⌉ = 2 pull steps, each followed by a two-interval block; the planner
    // instead replaces both doubled-up threads in the same round whenever the light
    // thread is not more than half an interval's loss behind. Over 2 s at B = 2 ms (1000
    // rounds) each thread gets 16/17 of a core within 1 %, and no round makes more than
    // 2 swaps (4 moves).
    let t = topo(1, 1, 16, 1);
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(17);
    m.run(&mut p, &t, 2000.0);
    assert_equal_shares(&m, 0.01);
    let rounds = p.stats.rotating_rounds as f64;
    let swaps = p.stats.swaps as f64;
    assert!(
        swaps <= 2.0 * rounds && swaps > rounds,
        "{swaps} swaps in {rounds} rounds"
    );
}

#[test]
fn speed_twenty_four_threads_on_sixteen_cores_swap_every_heavy_core_each_round() {
    // N = 1.5 M: eight heavy cores (2 threads each) and eight light ones (1 thread). The cap is max(16 / 4, 8) = 8 swaps a round: one per heavy core, so every
    // doubled-up core hands a thread over every round. (Capped at 4, half the heavy cores
    // waited a round: with 10 ms phases and 1 ms rounds that cost 24 threads on 16 cores
    // 2–3 points of the fair share in the simulator.) Over 1 s at B = 2 ms each thread
    // gets 16/24 = 2/3 of a core within 1 %, and the rounds average more than 4 swaps.
    let t = topo(1, 1, 16, 1);
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(24);
    m.run(&mut p, &t, 1000.0);
    assert_equal_shares(&m, 0.01);
    let rounds = p.stats.rotating_rounds as f64;
    let swaps = p.stats.swaps as f64;
    assert!(
        swaps <= 8.0 * rounds && swaps > 4.0 * rounds,
        "{swaps} swaps in {rounds} rounds"
    );
}

#[test]
fn speed_even_counts_move_nothing_one_thread_per_core_or_two() {
    // N = M (16 on 16) and N = 2M (4 on 2, 32 on 16): every core holds the same number of
    // threads, so even pinning is optimal: no move after the first placement, and the
    // interval backs off to the paper's 100 ms.
    for (cores, n) in [(16, 16), (2, 4), (16, 32)] {
        let t = topo(1, 1, cores, 1);
        let mut p = Speed::new(&settings(None), &t).unwrap();
        let mut m = Machine::new(n);
        m.run(&mut p, &t, 2000.0);
        assert!(
            rotations(&m).is_empty(),
            "{n} on {cores}: {:?}",
            rotations(&m)
        );
        assert_eq!(p.interval(), Nanos::from_millis(100), "{n} on {cores}");
        assert_eq!(p.stats.rotating_rounds, 0);
    }
}

#[test]
fn speed_holds_the_level_placement_where_a_rotation_would_gain_under_one_over_t_s() {
    // 31 always-runnable threads on 16 cores: 15 cores of two and one of one. Evening the
    // CPUs out would lift the slowest from 1/2 to 16/31 of a core (×1.03, under 1/T_s):
    // once the signals have watched the threads for their time constant (0.2 s) without
    // seeing one block, the level placement is held and nothing moves. At 28 threads
    // (×1.14) the rotation goes on.
    let t = topo(1, 1, 16, 1);
    assert!((rotate::count_gain(2, 16, 31) - 32.0 / 31.0).abs() < 1e-12);
    for (n, rotates) in [(31, false), (28, true)] {
        let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
        let mut m = Machine::new(n);
        m.run(&mut p, &t, 210.0);
        let (before, rounds) = (rotations(&m).len(), p.stats.rotating_rounds);
        assert!(before > 0 && rounds > 0, "{n}: {:?}", p.stats);
        m.run(&mut p, &t, 200.0);
        assert_eq!(
            p.stats.rotating_rounds > rounds,
            rotates,
            "{n}: {:?}",
            p.stats
        );
        assert_eq!(p.stats.held_level > 0, !rotates, "{n}: {:?}", p.stats);
        assert_eq!(rotations(&m).len() > before, rotates, "{n}");
    }
    // Threads that block at their barriers leave CPUs idle a rotation fills: at 31 it
    // goes on.
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(31);
    m.block_every = Some(5);
    m.run(&mut p, &t, 410.0);
    assert!(p.work_phase_ns.is_some(), "{:?}", p.stats);
    assert!(p.stats.rotating_rounds > 100, "{:?}", p.stats);
    assert_eq!(p.stats.held_level, 0);
}

#[test]
fn speed_levels_counts_when_a_core_holds_two_more_threads() {
    // 5 threads on 2 cores placed 4 + 1 by hand. Over the last 10 ms round the four on
    // core 0 ran 2.5 ms each and waited 7.5 (speed 2.5 / 10 = 0.25), the one on core 1 ran
    // throughout (1.0): 0.25 < 0.9 · 1.0, so core 0 is measurably slower and its
    // least-credited thread moves to core 1 (3 + 2).
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (0..5).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    let plan = p.decide(&t, &window(0.0, 0.0, &first));
    assert_eq!(plan.moves.len(), 5);
    for pl in p.placed.iter_mut() {
        pl.queue = 0;
        pl.exec = 2.5e6;
        pl.wait = 7.5e6;
    }
    p.placed[4].queue = 1;
    p.placed[4].exec = 10e6;
    p.placed[4].wait = 0.0;
    p.queues[0].load = 4;
    p.queues[1].load = 1;
    p.placed[2].credit = -1e6;
    let mut moves = Vec::new();
    p.round(Nanos::from_millis(10), &mut moves);
    assert_eq!(p.stats.levels, 1);
    assert_eq!((moves[0].thread, queue_of(&moves[0])), (key(1, 102), 1));
    assert_eq!(p.queues[0].load, 3);
    assert_eq!(p.queues[1].load, 2);
}

#[test]
fn speed_leaves_cores_alone_when_the_fuller_one_is_not_slower() {
    // 3 threads on 2 cores that sleep now and then (a pipeline's stages, say): each runs
    // 70 % of the time (blocked 30 %, under the 40 % that gives a thread back to Linux) and
    // never waits for a CPU. Core 0 holds two, but its speed is 1.4 / 1.4 = 1.0, as fast as
    // core 1's: nothing to rotate, no move.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let rates: Vec<Rate> = (0..3).map(|i| (100 + i, 0.7, 0.0, 0, 0)).collect();
    let mut now = 0.0;
    for _ in 0..100 {
        let plan = p.decide(&t, &window(now, now + 5.0, &rates));
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        now += 5.0;
    }
    assert_eq!(p.stats.rotating_rounds, 0);
}

/// Threads 100 and 102 on core 0, 101 on core 1 (round-robin), a round every 10 ms
/// window, the guard off. For a second they behave as barrier peers (each runs 0.6,
/// waits 0.2, blocked 0.2: equal work), switching 3 times a window, voluntarily when
/// `block` and involuntarily (yielding) otherwise. Then 102, ahead by 20 ms of credit,
/// waits through a whole window while 100, 20 ms behind, runs it. Returns the threads the
/// next round swaps.
/// Three threads on two cores after a window in which 100 and 101 ran and 102 waited
/// throughout, the credits set to 100 −20, 101 0, 102 +20 ms: the thread the round leaves
/// alone on a core, and how many moves the rotation took. `waits_late`: the held window
/// says its waits may be reported late (`Window::waits_late`, `schedstat`'s counters).
fn alone_after_a_held_window(block: bool, waits_late: bool) -> (i32, usize) {
    alone_after_a_held_window_every(block, waits_late, 1)
}

/// As [`alone_after_a_held_window`], the threads switching in one window of `every` (three
/// times in it when `every` is 1, once otherwise): with `every` = 5, once per 50 ms, so
/// 30 ms of work between two blocking points.
fn alone_after_a_held_window_every(block: bool, waits_late: bool, every: usize) -> (i32, usize) {
    let t = topo(1, 1, 2, 1);
    let mut s = settings(Some(10));
    s.speed.guard = false;
    let mut p = Speed::new(&s, &t).unwrap();
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let switches = if every == 1 { 3 } else { 1 };
    let (vol, invol) = if block { (switches, 0) } else { (0, switches) };
    let peers: Vec<Rate> = (0..3).map(|i| (100 + i, 0.6, 0.2, vol, invol)).collect();
    let quiet: Vec<Rate> = (0..3).map(|i| (100 + i, 0.6, 0.2, 0, 0)).collect();
    let mut now = 0.0;
    for round in 0..100 {
        let rates = if round % every == 0 { &peers } else { &quiet };
        let mut w = window(now, now + 10.0, rates);
        // Each waited a fifth of the window on a shared core, then ran: given a CPU.
        for t in &mut w.threads {
            t.timeslices = 1;
        }
        p.decide(&t, &w);
        now += 10.0;
    }
    for (tid, credit) in [(100, -20e6), (101, 0.0), (102, 20e6)] {
        let i = p.placed.iter().position(|q| q.key == key(1, tid)).unwrap();
        p.placed[i].credit = credit;
    }
    let held = [
        (100, 1.0, 0.0, vol, invol),
        (101, 1.0, 0.0, vol, invol),
        (102, 0.0, 1.0, vol, invol),
    ];
    let mut w = window(now, now + 10.0, &held);
    w.waits_late = waits_late;
    let plan = p.decide(&t, &w);
    let rotated = plan
        .moves
        .iter()
        .filter(|m| matches!(m.why, Reason::SpeedRotate { .. }))
        .count();
    let alone: Vec<i32> = p
        .placed
        .iter()
        .filter(|a| p.placed.iter().filter(|b| b.queue == a.queue).count() == 1)
        .map(|a| a.key.tid.0)
        .collect();
    assert_eq!(alone.len(), 1, "{alone:?}");
    (alone[0], rotated)
}

#[test]
fn speed_heavy_thread_held_back_now_swaps_first_when_threads_block() {
    // After the held window the credits read (decay e^(−10/20) = 0.61, then each thread's
    // time not held back less the mean, 2/3 of the window): 100 −12.1 + 3.3 = −8.8 ms,
    // 101 0 + 3.3 = 3.3 ms, 102 12.1 − 6.7 = 5.4 ms. By credit alone 100 (least) swaps with
    // 101 and 102 stays, waiting on its shared core. With blocking threads 102 waited
    // through the whole window: held back now, it goes first and swaps with 101 whatever
    // the credits say ("Held back now" in the module docs). The swap is one move: 102's
    // core-mate 100 joins 101, and 102 is left alone ("One move a swap").
    assert_eq!(alone_after_a_held_window(true, false), (102, 1));
    // Yielding threads: a thread that waits on a shared core may be spinning at the
    // barrier, done; the credits decide, as before: 100 is left alone, 102 joins 101.
    assert_eq!(alone_after_a_held_window(false, false), (100, 1));
}

#[test]
fn speed_heavy_thread_held_back_now_leaves_the_credits_to_decide_between_long_phases() {
    // The same round, the threads blocking once per 50 ms: 30 ms of work between two
    // blocking points, longer than the credits' memory (20 ms), which then tell this
    // phase's own story. 102 waited through the last window but is ahead by its credit
    // (5.4 ms against 100's −8.8): the credits decide, as with yielding threads, and 100,
    // the one behind, is left alone ("Held back now" in the module docs). With the rule
    // read from the wall-clock phase alone 102 was left alone, and where rounds are shorter
    // than a kernel tick a thread behind by its credit waited every third round.
    assert_eq!(alone_after_a_held_window_every(true, false, 5), (100, 1));
    // With 2 ms of work a phase (three blocks in every window) the rule holds, as before.
    assert_eq!(alone_after_a_held_window_every(true, false, 1), (102, 1));
}

#[test]
fn speed_swaps_stay_two_moves_where_waits_are_read_late() {
    // The same rounds when the window's waits may be reported late (`schedstat`: a queued
    // thread's wait shows only once it runs again). One move would send 102's or 100's
    // core-mate, a thread that has just waited behind it, onto 101's busy core to wait
    // again, its wait reported later still; a swap gives the thread that waited a core of
    // its own ("One move a swap" in the module docs). The same thread is left alone, by
    // two moves.
    assert_eq!(alone_after_a_held_window(true, true), (102, 2));
    assert_eq!(alone_after_a_held_window(false, true), (100, 2));
}

#[test]
fn speed_moves_that_do_not_speed_the_thread_up_back_off() {
    // 3 threads on 2 cores; thread 100 runs half the time and waits the other half
    // wherever it is (another program's thread shares whatever core it is on), the others
    // run throughout. Round at 10 ms: core 0 = {100, 102} ran 15 of 20 ms wanted (0.75 <
    // 0.9 · 1.0, slower); credits (time not held back, minus the mean): 100: 5 − 8.33 =
    // −3.33 ms, 101 and 102: +1.67 ms. Heavy 100 pairs with light 101: 1.67 − (−3.33) =
    // 5 ms > −2.5 ms (the margin (1 − 1/2) · 10 ms · −0.5): swap, by one move: 100's
    // core-mate 102 joins 101 on core 1, and 100 has core 0 to itself. At the next round
    // 100 still runs at 0.5: no speed-up, so the rotation's period doubles (20 ms).
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let rates = [
        (100, 0.5, 0.5, 0, 0),
        (101, 1.0, 0.0, 0, 0),
        (102, 1.0, 0.0, 0, 0),
    ];
    let plan = p.decide(&t, &window(0.0, 10.0, &rates));
    assert_eq!(plan.moves.len(), 1, "{:?}", plan.moves);
    assert!(
        plan.moves
            .iter()
            .any(|m| m.thread == key(1, 102) && queue_of(m) == 1)
    );
    assert_eq!(p.slow_down, 1);
    let plan = p.decide(&t, &window(10.0, 20.0, &rates));
    assert_eq!(p.stats.backoffs, 1);
    assert_eq!(p.slow_down, 2);
    assert_eq!(plan.next_in, Nanos::from_millis(20));
}

/// Three threads on two cores, fixed 10 ms rounds; 100 and 102 share core 0, 101 has
/// core 1. First round: 100 ran 4 and waited 6 ms, 102 ran 6 and waited 4, 101 ran 10. Core 0's
/// speed is 10 / 20 = 0.5 < 0.9 · 1.0; credits (time not held back, minus the mean 6.67
/// ms): 100 −2.67, 102 −0.67, 101 +3.33; the pair (100, 101) differs by 6 ms > 0: swap,
/// by one move: 102 joins 101 on core 1, and 100 has core 0 to itself. 100's speed on
/// core 0 was 4 / (4 + 6) = 0.4. Returns the policy after that round.
fn speed_after_leaving_thread_100_alone() -> (Topology, Speed) {
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let rates = [
        (100, 0.4, 0.6, 0, 0),
        (101, 1.0, 0.0, 0, 0),
        (102, 0.6, 0.4, 0, 0),
    ];
    let plan = p.decide(&t, &window(0.0, 10.0, &rates));
    assert_eq!(plan.moves.len(), 1, "{:?}", plan.moves);
    assert!(
        plan.moves
            .iter()
            .any(|m| m.thread == key(1, 102) && queue_of(m) == 1),
        "{:?}",
        plan.moves
    );
    (t, p)
}

#[test]
fn speed_moved_thread_that_then_sleeps_at_a_barrier_counts_as_sped_up() {
    // Alone now, 100 runs 4 ms and then blocks at the barrier for 6: its share of the
    // round stays 0.4 (not above 0.4 · 1.1 = 0.44: the old rule backed off), but its speed
    // while it wanted a CPU is 4 / (4 + 0) = 1.0 > 0.44: it sped up, no back-off.
    let (t, mut p) = speed_after_leaving_thread_100_alone();
    let rates = [
        (100, 0.4, 0.0, 0, 0),
        (101, 0.5, 0.5, 0, 0),
        (102, 0.5, 0.5, 0, 0),
    ];
    p.decide(&t, &window(10.0, 20.0, &rates));
    assert_eq!(p.stats.backoffs, 0);
    assert_eq!(p.slow_down, 1);
}

#[test]
fn speed_moved_thread_that_hardly_wanted_a_cpu_is_not_judged() {
    // Alone now, 100 runs 0.2 ms and sleeps the rest: it wanted a CPU 2 % of the round,
    // under the 5 % that says anything, so it is not judged (the old rule compared its
    // share 0.02 with 0.44 and backed off).
    let (t, mut p) = speed_after_leaving_thread_100_alone();
    let rates = [
        (100, 0.02, 0.0, 0, 0),
        (101, 0.5, 0.5, 0, 0),
        (102, 0.5, 0.5, 0, 0),
    ];
    p.decide(&t, &window(10.0, 20.0, &rates));
    assert_eq!(p.stats.backoffs, 0);
    assert_eq!(p.slow_down, 1);
}

#[test]
fn speed_moved_thread_that_speeds_up_keeps_the_rotation_at_every_interval() {
    // The §4 machine (a thread runs at 1 / threads on its core): every moved thread goes
    // from 0.5 to 1.0, so nothing backs off.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 500.0);
    assert_eq!(p.stats.backoffs, 0);
    assert_eq!(p.slow_down, 1);
}

#[test]
fn speed_never_crosses_numa_nodes_unless_allowed() {
    // Two nodes of one core each; 3 threads: node 0 holds 2, node 1 holds 1. Each node
    // rotates its own threads, and a node of one core has nothing to rotate.
    let t = topo(1, 2, 1, 1);
    let mut m = Machine::new(3);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    m.run(&mut p, &t, 500.0);
    assert!(rotations(&m).is_empty());
    let mut s = settings(Some(5));
    s.speed.allow_numa = true;
    let mut p = Speed::new(&s, &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 500.0);
    assert!(!rotations(&m).is_empty());
}

/// Per domain at `level`, the threads `m` holds there.
fn per_domain(m: &Machine, t: &Topology, level: Level) -> Vec<usize> {
    let cores = t.domains(Level::Core);
    let mut n = vec![0; t.domains(level).len()];
    for &q in &m.queue {
        let cpu = cores[q].cpus.iter().next().unwrap();
        n[t.domain_of(cpu, level).unwrap()] += 1;
    }
    n
}

#[test]
fn speed_spreads_threads_over_nodes_then_llcs_in_proportion_to_their_cores() {
    // Two nodes of two 4-core LLCs. Filled in core order, 24 threads put 16 on node 0
    // (two a core) and 8 on node 1 (one a core): even counts in each node, whose rotation
    // never crosses nodes, so nothing rotated. Spread, each node gets 12 and each LLC 6
    // (two heavy cores in each); 20 threads give 10 and 5.
    let t = Topology::synthetic("package:2 numa:1 l3:2 core:4 pu:1").unwrap();
    for (n, per_node, per_llc) in [(24, 12, 6), (20, 10, 5)] {
        let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
        let mut m = Machine::new(n);
        m.run(&mut p, &t, 0.0);
        assert_eq!(per_domain(&m, &t, Level::Node), vec![per_node; 2], "{n}");
        assert_eq!(per_domain(&m, &t, Level::Llc), vec![per_llc; 4], "{n}");
        assert!(p.queues.iter().all(|q| q.load >= 1 && q.load <= 2), "{n}");
    }
    // A thread that appears later goes to the emptiest core of the emptiest node: with
    // 23 threads node 1 holds 11, and the 24th goes there.
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(23);
    m.run(&mut p, &t, 0.0);
    assert_eq!(per_domain(&m, &t, Level::Node), vec![12, 11]);
    let late = p.emptiest();
    assert_eq!(p.queues[late].node, t.domains(Level::Node)[1].node);
}

/// The rotation's moves as (from, to) cores, replayed from the first placements.
fn swaps(m: &Machine) -> Vec<(usize, usize)> {
    let mut at = vec![usize::MAX; m.queue.len()];
    let mut out = Vec::new();
    for mv in &m.moves {
        let i = (mv.thread.tid.0 - 100) as usize;
        if mv.why != Reason::Initial {
            out.push((at[i], queue_of(mv)));
        }
        at[i] = queue_of(mv);
    }
    out
}

#[test]
fn speed_swaps_stay_within_an_llc_that_has_heavy_and_light_cores() {
    // One node of two 8-core LLCs. 24 threads spread 12 + 12: each LLC has four heavy
    // cores and four light ones, so every heavy thread finds a partner ahead of it behind
    // its own LLC and no move crosses LLCs, yet every thread still gets 2/3 of a core
    // within 1 % over 1 s at B = 2 ms, as with one LLC.
    let t = Topology::synthetic("package:1 l3:2 core:8 pu:1").unwrap();
    let llc = |q: usize| q / 8;
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(24);
    m.run(&mut p, &t, 1000.0);
    let moved = swaps(&m);
    assert!(moved.len() > 1000, "{} moves", moved.len());
    assert!(
        moved.iter().all(|&(a, b)| llc(a) == llc(b)),
        "a move crossed LLCs"
    );
    assert_equal_shares(&m, 0.01);
    // 17 threads: 9 + 8. The second LLC has no heavy core, so its threads get ahead of
    // everyone, and are reached only when none of the first LLC's light threads is among
    // the round's best, and, since these threads never block, only when one leads the
    // heavy thread by a round (see "Nodes and LLCs" in `docs/speed-rules.md`): 47 of 1,065
    // moves cross LLCs, for 782 swaps (without the round's lead, 553 of 1,500 for 1,000).
    // Every thread still gets its share of the 16 cores within 3 %: the lag of the first
    // LLC's threads stays bounded, a round at a time.
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(17);
    m.run(&mut p, &t, 1000.0);
    let moved = swaps(&m);
    let across = moved.iter().filter(|&&(a, b)| llc(a) != llc(b)).count();
    let pairs = usize::try_from(p.stats.swaps).unwrap();
    assert!(
        across > 0 && across * 10 < pairs,
        "{across} moves of {} crossed, for {pairs} swaps",
        moved.len()
    );
    assert_equal_shares(&m, 0.03);
}

#[test]
fn speed_levels_nodes_whose_counts_drift_apart_one_thread_a_round() {
    // Two nodes of 4 cores; 12 threads left 8 + 4 by hand (threads of node 1 exited, say):
    // node 0 runs two a core at half speed (5 ms run, 5 ms waiting in a 10 ms round),
    // node 1 one a core at full speed. Neither node has anything to rotate inside. Giving
    // node 1 a thread still leaves node 0 at least as full ((8 − 1) / 4 ≥ (4 + 1) / 4),
    // and its fullest core (0.5) is slower than 0.9 of node 1's emptiest (1.0): the
    // least-credited thread of core 0 moves to core 4.
    let t = Topology::synthetic("package:2 numa:1 core:4 pu:1").unwrap();
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (0..12).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let place = |p: &mut Speed, on: &[usize]| {
        for q in p.queues.iter_mut() {
            q.load = 0;
        }
        for (i, &q) in on.iter().enumerate() {
            let slow = p.queues.len() / 2 > q && on.iter().filter(|&&x| x == q).count() > 1;
            p.placed[i].queue = q;
            p.placed[i].exec = if slow { 5e6 } else { 10e6 };
            p.placed[i].wait = if slow { 5e6 } else { 0.0 };
            p.placed[i].round_exec = 0.0;
            p.placed[i].round_wait = 0.0;
            p.queues[q].load += 1;
        }
    };
    place(&mut p, &[0, 0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7]);
    p.placed[1].credit = -1e6;
    let mut moves = Vec::new();
    p.round(Nanos::from_millis(10), &mut moves);
    let level: Vec<&Move> = moves.iter().filter(|m| m.thread == key(1, 101)).collect();
    assert_eq!(level.len(), 1, "{moves:?}");
    assert_eq!(queue_of(level[0]), 4);
    assert_eq!((p.queues[0].load, p.queues[4].load), (1, 2));
    assert_eq!(p.stats.levels, 1);
    // 7 + 6 is as level as 13 threads on two 4-core nodes get: (7 − 1) / 4 < (6 + 1) / 4.
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (0..13).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    place(&mut p, &[0, 0, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6, 7]);
    let mut moves = Vec::new();
    p.round(Nanos::from_millis(10), &mut moves);
    assert_eq!(p.stats.levels, 0, "{moves:?}");
}

#[test]
fn speed_short_slices_while_rounds_come_every_one_and_a_half_to_three_and_a_half_ms() {
    // 3 threads on 2 cores, rounds every 2 ms (a host that holds them back would give
    // such gaps): every placed thread runs in 0.5 ms slices while the rotation runs.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 20.0);
    assert!(p.stats.rotating_rounds >= 5, "{:?}", p.stats);
    assert_eq!(m.slice, vec![Some(SHORT_SLICE); 3]);
    // Turned on once, not over and over.
    assert_eq!(m.slice_changes, 3);
    // A fourth thread evens the counts: nothing rotates, and each gets its own slice back.
    let mut m4 = Machine::new(4);
    let mut p4 = Speed::new(&settings(Some(2)), &t).unwrap();
    m4.run(&mut p4, &t, 20.0);
    assert_eq!(p4.stats.rotating_rounds, 0);
    assert_eq!(m4.slice, vec![None; 4]);
    assert_eq!(m4.slice_changes, 0);

    // Rounds every millisecond turn a doubled thread over before a slice matters, and
    // rounds every 5 ms are longer than the kernel's own slice: the slices are left alone.
    for ms in [1, 5] {
        let mut p = Speed::new(&settings(Some(ms)), &t).unwrap();
        let mut m = Machine::new(3);
        m.run(&mut p, &t, 40.0);
        assert!(p.stats.rotating_rounds >= 5, "{ms} ms: {:?}", p.stats);
        assert_eq!(m.slice_changes, 0, "{ms} ms");
    }

    // Turned off in the settings, never.
    let mut s = settings(Some(2));
    s.speed.short_slices = false;
    let mut p = Speed::new(&s, &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 20.0);
    assert!(p.stats.rotating_rounds >= 5);
    assert_eq!(m.slice_changes, 0);
}

#[test]
fn speed_short_slices_end_when_the_threads_are_lent_to_linux() {
    // Rotating in short slices, then the program is down to two busy threads on two
    // cores: they are lent to Linux (`few`), and lent threads run in their own slices.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 20.0);
    assert_eq!(m.slice, vec![Some(SHORT_SLICE); 3]);
    // Thread 102 goes to sleep for good: 0 % busy from now on.
    let mut now = m.now_ms;
    for _ in 0..1000 {
        let next = now + 2.0;
        let w = window(
            now,
            next,
            &[
                (100, 1.0, 0.0, 0, 0),
                (101, 1.0, 0.0, 0, 0),
                (102, 0.0, 0.0, 1, 0),
            ],
        );
        let plan = p.decide(&t, &w);
        // Releases move threads to their original masks, which `Machine` does not model:
        // only the slices are followed here.
        for s in &plan.slices {
            m.slice[(s.thread.tid.0 - 100) as usize] = s.slice;
        }
        now = next;
    }
    assert!(
        p.few.active || p.placed.iter().all(|q| q.released),
        "{:?}",
        p.stats
    );
    assert_eq!(m.slice, vec![None; 3]);
}

#[test]
fn speed_credits_forget_within_two_rounds_while_the_host_holds_rounds_back() {
    let t = topo(1, 1, 2, 1);
    let rounds = |gap_ms: f64| {
        let mut p = Speed::new(&settings(None), &t).unwrap();
        for _ in 0..8 {
            p.sparse.ask(Nanos::from_millis(1));
            p.sparse.observe(gap_ms * 1e6);
        }
        p.credit_tau_ns()
    };
    // No round yet, and rounds as often as asked (free ticks): 20 ms.
    let p = Speed::new(&settings(None), &t).unwrap();
    assert_eq!(p.credit_tau_ns(), 20e6);
    assert_eq!(rounds(1.0), 20e6);
    // Held back to a round every 3 ms against 1 ms asked: two rounds, 6 ms.
    assert!((rounds(3.0) - 6e6).abs() < 1.0, "{}", rounds(3.0));
    // Every 30 ms: two rounds are longer than 20 ms, which stays.
    assert_eq!(rounds(30.0), 20e6);
}

/// Three threads on two cores on a host whose ticks are paced `pace_ms` apart: the first
/// tick (pace unknown yet) at 0, the second at 1 ms (the pace known), the third one pace
/// later, each thread having run 60 % of that window, waited 10 % and blocked `vol`
/// times. Returns the policy and each tick's moves.
fn paced_three(pace_ms: u64, vol: u64) -> (Speed, Vec<Vec<Move>>) {
    use threadbalance_model::pace::Pace;
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let mut moves = Vec::new();
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    let mut w = window(0.0, 0.0, &first);
    w.pace = Pace::Unknown;
    moves.push(p.decide(&t, &w).moves);
    let busy: Vec<Rate> = (0..3).map(|i| (100 + i, 0.6, 0.1, 0, 0)).collect();
    let mut w = window(0.0, 1.0, &busy);
    w.pace = Pace::Gap(Nanos::from_millis(pace_ms));
    moves.push(p.decide(&t, &w).moves);
    let end = 1.0 + pace_ms as f64;
    let blocking: Vec<Rate> = (0..3).map(|i| (100 + i, 0.6, 0.1, vol, 0)).collect();
    let mut w = window(1.0, end, &blocking);
    w.pace = Pace::Gap(Nanos::from_millis(pace_ms));
    moves.push(p.decide(&t, &w).moves);
    (p, moves)
}

#[test]
fn speed_looks_at_a_slow_pace_and_keeps_phases_shorter_than_its_rounds_lent() {
    // Rounds every 100 ms; 6 blocks in 100 ms at 60 % of a core: 10 ms of work a phase,
    // 100 > 1.5 × 10. Placed at the first tick (the pace unknown), lent at the second,
    // the pace known; kept lent after the window at that pace. (The work reads 10.1 ms:
    // the first 1 ms window's work, with no block in it, is averaged in.)
    let (p, moves) = paced_three(100, 6);
    assert_eq!(moves[0].len(), 3);
    assert!(moves[0].iter().all(|m| m.why == Reason::Initial));
    assert_eq!(moves[1].len(), 3);
    assert!(
        moves[1]
            .iter()
            .all(|m| m.to == Target::Original && m.why == Reason::Release)
    );
    assert!(moves[2].is_empty(), "{:?}", moves[2]);
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed summary")
    };
    assert_eq!((s.sparse_hand_backs, s.sparse_now), (1, true));
    let last = s.sparse_last.unwrap_or_default();
    assert!(
        last.contains("after a look") && last.contains("phases of 10.1 ms"),
        "{last}"
    );
}

#[test]
fn speed_looks_at_a_slow_pace_and_places_again_where_no_phase_is_shorter() {
    // The same pace, no block seen (no phase): placed again after the look.
    let (p, moves) = paced_three(100, 0);
    assert_eq!(moves[1].len(), 3);
    assert_eq!(moves[2].len(), 3);
    assert!(moves[2].iter().all(|m| m.why == Reason::Initial));
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed summary")
    };
    assert_eq!((s.sparse_hand_backs, s.sparse_now), (0, false));
}

#[test]
fn speed_does_not_look_at_even_counts() {
    // Four threads on two cores, rounds every 100 ms: two a core pinned needs no round,
    // so nothing is lent for a look (it would only place them again a round later).
    use threadbalance_model::pace::Pace;
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let first: Vec<Rate> = (0..4).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    let mut w = window(0.0, 0.0, &first);
    w.pace = Pace::Unknown;
    assert_eq!(p.decide(&t, &w).moves.len(), 4);
    let busy: Vec<Rate> = (0..4).map(|i| (100 + i, 0.5, 0.5, 0, 0)).collect();
    let mut w = window(0.0, 1.0, &busy);
    w.pace = Pace::Gap(Nanos::from_millis(100));
    let moves = p.decide(&t, &w).moves;
    assert!(moves.iter().all(|m| m.why != Reason::Release), "{moves:?}");
    assert!(!p.sparse.looking);
}

#[test]
fn speed_does_not_look_at_a_pace_under_a_hundred_ms() {
    // Rounds every 80 ms (the `/proc` build with ~100 threads): no look, nothing released
    // at the second tick; the sparse-rounds rule judges from its own rounds as before.
    let (_, moves) = paced_three(80, 6);
    assert_eq!(moves[0].len(), 3);
    assert!(
        moves[1].iter().all(|m| m.why != Reason::Release),
        "{:?}",
        moves[1]
    );
}

/// Three threads on two cores, blocking once per 6 ms of work, driven through windows
/// `gap_ms` apart from `now_ms` for `ms`: a placed thread runs at 0.9 / (threads on its
/// core) and waits for a CPU the rest of that share's room; a thread with Linux (released
/// to its original mask) runs at `linux`. Returns the time reached.
fn blocking_three(
    p: &mut Speed,
    t: &Topology,
    queue: &mut [Option<usize>],
    now_ms: f64,
    gap_ms: f64,
    ms: f64,
    linux: f64,
) -> f64 {
    let mut now = now_ms;
    while now < now_ms + ms {
        let next = now + gap_ms;
        let rates: Vec<Rate> = (0..queue.len())
            .map(|i| {
                let speed = match queue[i] {
                    Some(q) => 0.9 / queue.iter().filter(|&&o| o == Some(q)).count() as f64,
                    None => linux,
                };
                // One block per 6 ms of work.
                let vol = (speed * gap_ms / 6.0).round() as u64;
                (100 + i as i32, speed, 0.9 - speed, vol, 0)
            })
            .collect();
        let plan = p.decide(t, &window(now, next, &rates));
        for m in &plan.moves {
            queue[(m.thread.tid.0 - 100) as usize] = match m.to {
                Target::Original => None,
                _ => Some(queue_of(m)),
            };
        }
        now = next;
    }
    now
}

/// `blocking_three` on a host that paces rounds 4 ms apart for 400 ms, then 20 ms apart
/// (more than 1.5 phases of 6 ms of work: the threads are lent) for `lent_ms`, under a
/// Linux that runs each thread at `linux`. Returns the policy and where the threads are.
fn lent_on_trial(linux: f64, lent_ms: f64) -> (Speed, Vec<Option<usize>>, f64) {
    let t = topo(1, 1, 2, 1);
    // The lending rule's own trial, the guard off: the guard times its tails by these
    // threads' blocks, and its probe would hold the threads itself in a later stretch.
    let mut s = settings(None);
    s.speed.guard = false;
    let mut p = Speed::new(&s, &t).unwrap();
    let mut queue = vec![None; 3];
    let first: Vec<Rate> = (0..3).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    for m in &p.decide(&t, &window(0.0, 0.0, &first)).moves {
        queue[(m.thread.tid.0 - 100) as usize] = Some(queue_of(m));
    }
    let now = blocking_three(&mut p, &t, &mut queue, 0.0, 4.0, 400.0, linux);
    assert!(
        !p.sparse.active,
        "lent before the rounds slowed: {:?}",
        p.sparse.last
    );
    let now = blocking_three(&mut p, &t, &mut queue, now, 20.0, lent_ms, linux);
    (p, queue, now)
}

#[test]
fn speed_lending_for_sparse_rounds_is_taken_back_when_linux_runs_the_program_slower() {
    // Rotated at 4 ms rounds, each thread got 0.45 or 0.9 of a core by turns: the slowest
    // 0.58 over the last span. Lent at 20 ms rounds to a Linux that runs each thread at
    // 0.5: 0.58 > 1.05 × 0.5, so after the settling and a 200 ms span they are placed
    // again.
    let (p, queue, now) = lent_on_trial(0.5, 300.0);
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed summary")
    };
    assert_eq!(
        (s.sparse_hand_backs, s.sparse_trials_lost, s.sparse_now),
        (1, 1, false),
        "{:?}",
        s.sparse_last
    );
    let last = s.sparse_last.unwrap_or_default();
    assert!(
        last.contains("Linux ran the slowest thread at 50.0 %"),
        "{last}"
    );
    assert!(queue.iter().all(Option::is_some), "{queue:?}");
    // Rounds as sparse as those that lent them do not lend them again …
    let t = topo(1, 1, 2, 1);
    let mut p = p;
    let mut queue = queue;
    let now = blocking_three(&mut p, &t, &mut queue, now, 20.0, 400.0, 0.5);
    assert!(!p.sparse.active && p.sparse.hand_backs == 1);
    // … but rounds 1.5 times sparser do, on trial again.
    blocking_three(&mut p, &t, &mut queue, now, 31.0, 200.0, 0.5);
    assert!(
        p.sparse.active && p.sparse.hand_backs == 2,
        "{:?}",
        p.sparse.last
    );
}

#[test]
fn speed_lending_for_sparse_rounds_stays_when_linux_runs_the_program_no_slower() {
    // The same, under a Linux that runs each thread at 0.56: slower than the rotation's
    // slowest thread (0.58), but not by the guard's margin (1.05 × 0.56 = 0.588); they
    // stay lent.
    let (p, queue, _) = lent_on_trial(0.56, 300.0);
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed summary")
    };
    assert_eq!(
        (s.sparse_hand_backs, s.sparse_trials_lost, s.sparse_now),
        (1, 0, true)
    );
    assert!(queue.iter().all(Option::is_none), "{queue:?}");
}

/// `n` threads on `cores` cores (the policy's own interval), the guard off, for 200
/// windows of 2 ms: each window a thread
/// sharing its core runs half of it and waits the other half, a thread alone runs all of
/// it, and every thread blocks once every `block_every` windows (0: never; it yields at
/// barriers instead, 40 involuntary switches a window). Returns the watching budget the
/// policy asks for after the last window, and the summary's count of ticks it asked.
fn rounds_budget_after(cores: u32, n: i32, block_every: u32) -> (Option<f64>, u64) {
    let t = topo(1, 1, cores, 1);
    let mut s = settings(None);
    s.speed.guard = false;
    let mut p = Speed::new(&s, &t).unwrap();
    let first: Vec<Rate> = (0..n).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
    p.decide(&t, &window(0.0, 0.0, &first));
    let mut now = 0.0;
    for w in 0..200u32 {
        let rates: Vec<Rate> = (0..n)
            .map(|i| {
                let at = p.placed.iter().find(|q| q.key == key(1, 100 + i)).unwrap();
                let shared = p.placed.iter().filter(|q| q.queue == at.queue).count() > 1;
                let (run, wait) = if shared { (0.5, 0.5) } else { (1.0, 0.0) };
                let vol = u64::from(block_every > 0 && w % block_every == 0);
                let invol = if block_every == 0 {
                    40
                } else {
                    u64::from(shared)
                };
                (100 + i, run, wait, vol, invol)
            })
            .collect();
        p.decide(&t, &window(now, now + 2.0, &rates));
        now += 2.0;
    }
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("not speed's summary")
    };
    (p.watch_budget(), s.rounds_budget_ticks)
}

#[test]
fn speed_asks_for_rounds_by_the_cores_it_turns_over() {
    // 17 yielding threads on 16 cores: 0.16 % of one core for each of the 16, at most
    // 2.5 % ("Rounds bought" in the module docs).
    let (share, ticks) = rounds_budget_after(16, 17, 0);
    assert_eq!(share, Some(ROUNDS_BUDGET_MAX));
    assert!(ticks > 150, "{ticks}");
    // 9 threads on 8 cores: 1.28 %.
    let (share, _) = rounds_budget_after(8, 9, 0);
    assert!(
        share.is_some_and(|s| (s - 0.0128).abs() < 1e-9),
        "{share:?}"
    );
    // 3 threads on 2 cores: 0.32 %, under the host's default; nothing asked.
    assert_eq!(rounds_budget_after(2, 3, 0), (None, 0));
    // 16 threads on 16 cores: nothing to turn.
    assert_eq!(rounds_budget_after(16, 16, 0), (None, 0));
}

#[test]
fn speed_asks_for_no_rounds_where_threads_block_between_long_phases() {
    // Blocking once every 5 windows (about 9 ms of work between blocks): asked.
    assert_eq!(rounds_budget_after(16, 17, 5).0, Some(ROUNDS_BUDGET_MAX));
    // Once every 40 windows (about 75 ms of work between blocks; the signals read
    // 40 ms, from the threads that switched, those of the shared core, which ran half of
    // each window), past the 25 ms of `ROUNDS_BUDGET_PHASE_S`: Linux's pull at each
    // phase's end does much of the work, and each further round's moves cost refills.
    // Not asked.
    assert_eq!(rounds_budget_after(16, 17, 40).0, None);
}

/// Threads on each physical core, from the machine's queues at the CPU level.
fn per_core(m: &Machine, t: &Topology) -> Vec<usize> {
    let mut n = vec![0; t.domains(Level::Core).len()];
    for &q in &m.queue {
        n[t.domain_of(CpuId(q as u32), Level::Core).unwrap()] += 1;
    }
    n
}

#[test]
fn speed_on_smt_places_threads_on_cores_before_siblings() {
    // See: issue 38. 4 cores × 2 hardware threads, speed's own level (the logical CPUs).
    // 10 threads: the two CPUs holding a second thread are on two cores (3 3 2 2), not
    // siblings (CPUs 0 and 1: 4 2 2 2, core 0's threads all slowed by sharing it).
    let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
    let mut p = Speed::new(&Settings::default(), &t).unwrap();
    assert_eq!(p.level, Level::Cpu);
    let mut m = Machine::new(10);
    m.run(&mut p, &t, 0.0);
    assert_eq!(per_core(&m, &t), [3, 3, 2, 2]);
    // 12 threads: three on every core.
    let mut p = Speed::new(&Settings::default(), &t).unwrap();
    let mut m = Machine::new(12);
    m.run(&mut p, &t, 0.0);
    assert_eq!(per_core(&m, &t), [3, 3, 3, 3]);
}

#[test]
fn speed_on_smt_rotation_keeps_every_core_even() {
    // 12 threads on 4 cores × 2: four CPUs hold two threads, four one, every core three.
    // The rotation turns the doubled-up CPUs over; a one-move swap onto a CPU of another
    // core would leave that core four threads and this one two (and the two idle halves
    // of a core at a blocking barrier), so it swaps between siblings, or exchanges.
    let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
    let mut p = Speed::new(&settings_at(Level::Cpu, Some(2)), &t).unwrap();
    let mut m = Machine::new(12);
    m.run(&mut p, &t, 200.0);
    assert!(p.stats.swaps > 10, "{}", p.stats.swaps);
    assert_eq!(per_core(&m, &t), [3, 3, 3, 3]);
    // Every thread got about the same CPU time: 8 CPUs for 12 threads, 2/3 each.
    let (lo, hi) = m
        .exec_ms
        .iter()
        .fold((f64::MAX, 0.0_f64), |(lo, hi), &e| (lo.min(e), hi.max(e)));
    assert!(lo > 0.9 * hi, "{lo} {hi}");
}
