//! Worked examples of the speed policy's rules (the paper's 3-threads-on-2-cores case,
//! the post-migration block, least-migrated choice, jitter, NUMA blocking, the interval).
use super::*;
use threadbalance_model::testutil::{key, topo};
use threadbalance_model::{CpuId, ThreadRates, ThreadState};

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
                blocked: (1.0 - speed - latency).max(0.0),
                lock: 0.0,
                lock_exact: false,
                speed,
                timeslices: 0,
                voluntary,
                involuntary,
                last_cpu: CpuId(0),
                state: ThreadState::Running,
                appeared: start_ms == end_ms,
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
}

impl Machine {
    fn new(n: usize) -> Machine {
        Machine {
            queue: vec![usize::MAX; n],
            exec_ms: vec![0.0; n],
            now_ms: 0.0,
            moves: Vec::new(),
        }
    }

    fn apply(&mut self, plan: &Plan) {
        for m in &plan.moves {
            self.queue[(m.thread.tid.0 - 100) as usize] = queue_of(m);
            self.moves.push(*m);
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
            let rates: Vec<Rate> = (0..n)
                .map(|i| {
                    let load = self.queue.iter().filter(|&&q| q == self.queue[i]).count();
                    let s = 1.0 / load as f64;
                    self.exec_ms[i] += s * dt;
                    (100 + i as i32, s, 1.0 - s, 0, 0)
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
    // A fifth thread appears 5 ms later: cores 1 and 2 hold one thread each; core 1.
    let mut later: Vec<Rate> = (0..4).map(|i| (100 + i, 1.0, 0.0, 0, 0)).collect();
    later.push((104, 0.5, 0.0, 0, 0));
    let plan = p.decide(&t, &window(0.0, 5.0, &later));
    assert_eq!(plan.moves.len(), 1);
    assert_eq!(
        (plan.moves[0].thread, queue_of(&plan.moves[0])),
        (key(1, 104), 1)
    );
}

#[test]
fn speed_three_threads_on_two_cores_rotate_to_equal_progress() {
    // The paper's §4 case: N = 3, M = 2, T = 1, one slow core (2 threads, speed 0.5) and
    // one fast (1 thread, speed 1). Global = 0.75; the slow core is below 0.9 × 0.75 =
    // 0.675, so the fast core pulls one thread, which flips the cores. Repeating this,
    // every thread spends a third of the time alone: progress 1/3·1 + 2/3·0.5 = 2/3.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 3000.0);
    let pulls: Vec<&Move> = m
        .moves
        .iter()
        .filter(|m| m.why != Reason::Initial)
        .collect();
    // A pull every ~2.3 intervals (block of 2 B, wake-ups every B + U[0, B)): ~260 in 3 s.
    assert!(pulls.len() > 150, "{} pulls", pulls.len());
    for mv in &pulls {
        let Reason::SpeedPull {
            to_speed,
            from_speed,
            global,
        } = mv.why
        else {
            panic!("{mv:?}")
        };
        assert!(to_speed > global && from_speed < 0.9 * global, "{mv:?}");
    }
    let total: f64 = m.exec_ms.iter().sum();
    for e in &m.exec_ms {
        // Each thread gets a third of the 2 cores' time, within 3 %.
        assert!((e / total - 1.0 / 3.0).abs() < 0.01, "{:?}", m.exec_ms);
    }
}

#[test]
fn speed_pulls_nothing_when_cores_are_balanced() {
    // 4 threads on 2 cores, 2 each: both cores at 0.5 = global; nothing is slow.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let mut m = Machine::new(4);
    m.run(&mut p, &t, 2000.0);
    assert!(m.moves.iter().all(|m| m.why == Reason::Initial));
    // Nothing to gain: the interval backs off to the paper's 100 ms.
    assert_eq!(p.interval(), Nanos::from_millis(100));
}

/// A policy on `cores` cores with threads placed by hand: `(queue, migrations)` each,
/// speeds measured over 10 ms at `speeds[queue]`.
fn placed(cores: u32, threads: &[(usize, u32)], speeds: &[f64]) -> (Speed, Topology) {
    let t = topo(1, 1, cores, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    p.started = true;
    for (i, &(q, migrations)) in threads.iter().enumerate() {
        p.queues[q].load += 1;
        p.placed.push(Placed {
            key: key(1, 100 + i as i32),
            queue: q,
            migrations,
            since: Nanos::from_millis(i as u64),
            exec: speeds[q] * 10e6,
            wait: (1.0 - speeds[q]) * 10e6,
            mark_exec: 0.0,
            mark_wait: 0.0,
            mark_at: Nanos::ZERO,
            last_speed: None,
            blocked: 0.0,
            released: false,
        });
    }
    (p, t)
}

#[test]
fn speed_thread_that_mostly_sleeps_is_released_to_linux_and_placed_again_when_busy() {
    // Two cores; thread 101 runs all the time, thread 102 runs 20 % and sleeps 80 %.
    // Its smoothed blocked fraction climbs from 0 toward 0.8 with a 200 ms time
    // constant: past 0.4 (after ≈ 200 ms · ln 2 ≈ 140 ms) it is given back to Linux.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let plan = p.decide(
        &t,
        &window(0.0, 0.0, &[(101, 0.0, 0.0, 0, 0), (102, 0.0, 0.0, 0, 0)]),
    );
    assert_eq!(plan.moves.len(), 2, "both placed at first");
    let mut released_at = None;
    for step in 1..=40 {
        let (a, b) = (f64::from(step - 1) * 10.0, f64::from(step) * 10.0);
        let plan = p.decide(
            &t,
            &window(a, b, &[(101, 1.0, 0.0, 0, 0), (102, 0.2, 0.0, 0, 0)]),
        );
        if let Some(m) = plan.moves.iter().find(|m| m.why == Reason::Release) {
            assert_eq!((m.thread, m.to), (key(1, 102), Target::Original));
            released_at = Some(b);
            break;
        }
    }
    let at = released_at.expect("the sleeper is released");
    assert!((100.0..=200.0).contains(&at), "released at {at} ms");
    // Released, it counts on no core: the busy thread's core is the only loaded one.
    assert_eq!(p.queues.iter().map(|q| q.load).sum::<u32>(), 1);
    // It starts competing (runs 100 %): below 0.25 again it is placed on the emptiest core.
    let mut placed_again = false;
    for step in 0..60 {
        let (a, b) = (at + f64::from(step) * 10.0, at + f64::from(step + 1) * 10.0);
        let plan = p.decide(
            &t,
            &window(a, b, &[(101, 1.0, 0.0, 0, 0), (102, 1.0, 0.0, 0, 0)]),
        );
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
        vec![1, 1]
    );
}

#[test]
fn speed_post_migration_block_holds_a_slow_core_for_two_intervals() {
    // Cores: 0 fast (1.0) with one thread, 1 (three threads) and 2 (two) slow (0.5).
    // Global = 2/3; 0.5 < 0.9 × 2/3 = 0.6. Interval 10 ms; now = 10 ms. Core 1 was in a
    // migration at 0 ms (10 ms ago < 20 ms: blocked), so core 0 pulls from core 2.
    let (mut p, _) = placed(
        3,
        &[(0, 0), (1, 0), (1, 0), (1, 0), (2, 0), (2, 0)],
        &[1.0, 0.5, 0.5],
    );
    let now = Nanos::from_millis(10);
    p.queues[1].last_migration = Some(Nanos::ZERO);
    let global = p.queue_speeds(now);
    assert!((global - 2.0 / 3.0).abs() < 1e-9);
    let mut moves = Vec::new();
    p.balance(0, now, global, &mut moves);
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].thread, key(1, 104), "first thread of core 2");
    assert_eq!(p.stats.blocked, 1);
    // Both cores of that pull are now blocked: at 25 ms neither 0 nor 2 can be pulled
    // from, but core 1 (last migration 25 ms ago ≥ 20 ms, three threads against core
    // 0's two) can.
    let now = Nanos::from_millis(25);
    assert_eq!(p.queues[2].last_migration, Some(Nanos::from_millis(10)));
    p.speeds = vec![1.0, 0.5, 0.5];
    p.counts = vec![2, 3, 1];
    let mut moves = Vec::new();
    p.balance(0, now, 2.0 / 3.0, &mut moves);
    assert_eq!(moves.len(), 1);
    assert!([key(1, 101), key(1, 102), key(1, 103)].contains(&moves[0].thread));
}

#[test]
fn speed_pulls_the_least_migrated_thread() {
    // Core 1 holds threads that migrated 3, 1 and 2 times; core 0 pulls the one with 1.
    let (mut p, _) = placed(2, &[(0, 0), (1, 3), (1, 1), (1, 2)], &[1.0, 1.0 / 3.0]);
    let now = Nanos::from_millis(10);
    let global = p.queue_speeds(now);
    let mut moves = Vec::new();
    p.balance(0, now, global, &mut moves);
    assert_eq!(moves.len(), 1);
    assert_eq!(moves[0].thread, key(1, 102));
    assert_eq!(
        moves[0].to,
        Target::Domain {
            level: Level::Core,
            index: 0
        }
    );
    let pulled = p.placed.iter().find(|t| t.key == key(1, 102)).unwrap();
    assert_eq!((pulled.queue, pulled.migrations), (0, 2));
}

#[test]
fn speed_slow_core_does_not_pull() {
    // Only a core faster than the global speed balances: core 1 (slow) pulls nothing.
    let (mut p, _) = placed(2, &[(0, 0), (1, 0), (1, 0)], &[1.0, 0.5]);
    let now = Nanos::from_millis(10);
    let global = p.queue_speeds(now);
    let mut moves = Vec::new();
    p.balance(1, now, global, &mut moves);
    assert!(moves.is_empty());
}

#[test]
fn speed_jitter_stays_within_one_interval_and_follows_the_seed() {
    // Every balancer wakes B + U[0, B) after it ran: with B = 10 ms, in [10, 20) ms.
    let t = topo(1, 1, 4, 1);
    let run = |seed: u64| {
        let mut s = settings(Some(10));
        s.seed = seed;
        let mut p = Speed::new(&s, &t).unwrap();
        let mut m = Machine::new(5);
        let mut wakes = Vec::new();
        let first: Vec<Rate> = (0..5).map(|i| (100 + i, 0.0, 0.0, 0, 0)).collect();
        m.apply(&p.decide(&t, &window(0.0, 0.0, &first)));
        for q in &p.queues {
            wakes.push(q.next_wake.0);
        }
        m.run(&mut p, &t, 500.0);
        for q in &p.queues {
            wakes.push(q.next_wake.0);
        }
        wakes
    };
    let a = run(7);
    for w in &a[..4] {
        assert!((10_000_000..20_000_000).contains(w), "{w}");
    }
    assert_eq!(a, run(7), "same seed, same timers");
    assert_ne!(a, run(8), "another seed, other timers");
}

#[test]
fn speed_never_crosses_numa_nodes_unless_allowed() {
    // Two nodes of one core each; 3 threads: node 0 holds 2 (slow), node 1 holds 1.
    let t = topo(1, 2, 1, 1);
    let mut m = Machine::new(3);
    let mut p = Speed::new(&settings(Some(5)), &t).unwrap();
    m.run(&mut p, &t, 500.0);
    assert!(m.moves.iter().all(|m| m.why == Reason::Initial));
    let mut s = settings(Some(5));
    s.speed.allow_numa = true;
    let mut p = Speed::new(&s, &t).unwrap();
    let mut m = Machine::new(3);
    m.run(&mut p, &t, 500.0);
    assert!(
        m.moves
            .iter()
            .any(|m| matches!(m.why, Reason::SpeedPull { .. }))
    );
}

#[test]
fn speed_crossing_an_llc_needs_twice_the_quiet_time() {
    // Two packages (two LLCs) of one core: a pull across them waits 2 × B since the
    // pulling core's last cross-LLC pull.
    let t = Topology::synthetic("package:1 l3:2 core:1 pu:1").unwrap();
    let p = Speed::new(&settings(Some(10)), &t).unwrap();
    assert_eq!(p.crossing(0, 1), Some((CROSS_LLC, Some(0))));
    // Across NUMA nodes, blocked unless allowed, then 4 × B.
    let t = topo(1, 2, 1, 1);
    let mut s = settings(Some(10));
    assert_eq!(Speed::new(&s, &t).unwrap().crossing(0, 1), None);
    s.speed.allow_numa = true;
    assert_eq!(
        Speed::new(&s, &t).unwrap().crossing(0, 1),
        Some((CROSS_NODE, Some(1)))
    );
    let t = topo(1, 1, 2, 1);
    let p = Speed::new(&settings(Some(10)), &t).unwrap();
    assert_eq!(p.crossing(0, 1), Some((1, None)));
}

#[test]
fn speed_interval_follows_the_synchronization_signals() {
    let t = topo(1, 1, 2, 1);
    let cases: [(u64, u64, u64); 4] = [
        // Yielding: 400 involuntary switches in 60 ms ≈ 6 700/s ≥ 2 000 → floor, 2 ms.
        (0, 400, 2_000_000),
        // Blocking once per 60 ms phase: 1 in 60 ms ≈ 17 switches/s → 60 ms / 8 = 7.5 ms.
        (1, 0, 7_500_000),
        // Blocking once and handing the CPU over once (a yield or a preemption) per
        // 60 ms: 2 in 60 ms ≈ 33/s → phase 30 ms → 3.75 ms.
        (1, 1, 3_750_000),
        // Nothing: the paper's 100 ms.
        (0, 0, 100_000_000),
    ];
    for (vol, invol, want_ns) in cases {
        let mut p = Speed::new(&settings(None), &t).unwrap();
        // Per 60 ms window and thread: vol and invol switches.
        let w = window(
            0.0,
            60.0,
            &[(100, 1.0, 0.0, vol, invol), (101, 1.0, 0.0, vol, invol)],
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
fn speed_interval_uses_timeslices_when_switches_are_not_counted() {
    // A host that does not read `status` reports no switches; 3 timeslices per 60 ms
    // (50/s, wake-ups plus preemptions) stand in: phase 20 ms → 20 / 8 = 2.5 ms.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let mut w = window(0.0, 60.0, &[(100, 1.0, 0.0, 0, 0), (101, 0.5, 0.5, 0, 0)]);
    for r in &mut w.threads {
        r.timeslices = 3;
    }
    assert_eq!(p.observe_signals(&w), Nanos(2_500_000));
    assert!(!p.counted);
}

#[test]
fn speed_idle_thread_is_neither_counted_nor_pulled() {
    // A main thread asleep in join (speed 0, never runnable) shares core 0 with a worker;
    // core 1 holds two workers. Core 0's speed is its worker's (1.0), not 0.5, so core 0
    // is fast and pulls a worker, never the sleeper.
    let (mut p, _) = placed(2, &[(0, 0), (0, 0), (1, 0), (1, 0)], &[1.0, 0.5]);
    p.placed[0].exec = 0.0;
    p.placed[0].wait = 0.0;
    let now = Nanos::from_millis(10);
    let global = p.queue_speeds(now);
    assert_eq!(p.speeds, vec![1.0, 0.5]);
    let mut moves = Vec::new();
    p.balance(0, now, global, &mut moves);
    assert_eq!(moves.len(), 1);
    assert_ne!(moves[0].thread, key(1, 100));
}

#[test]
fn speed_thread_asleep_at_a_barrier_is_not_slow_under_the_runnable_measure() {
    // Two workers, one per core. Worker 0 reached the barrier halfway through the span
    // and sleeps: it ran 5 of 10 ms and never waited on a run queue.
    // Runnable: 5 / (5 + 0) = 1.0 → both cores at 1.0, nothing is slow.
    // Wall (the paper's): 5 / 10 = 0.5 < 0.9 × 0.75: core 0 looks slow, and the paper's
    // rule would pull the sleeper onto the busy core, where the two would share it once
    // the barrier opens; the one-thread-each guard stops that too.
    for (measure, slow0) in [(SpeedMeasure::Runnable, 1.0), (SpeedMeasure::Wall, 0.5)] {
        let (mut p, _) = placed(2, &[(0, 0), (1, 0)], &[1.0, 1.0]);
        p.cfg.measure = measure;
        p.placed[0].exec = 5e6;
        p.placed[0].wait = 0.0;
        let now = Nanos::from_millis(10);
        let global = p.queue_speeds(now);
        assert!(
            (p.speeds[0] - slow0).abs() < 1e-9,
            "{measure:?}: {:?}",
            p.speeds
        );
        let mut moves = Vec::new();
        p.balance(1, now, global, &mut moves);
        assert!(moves.is_empty(), "{measure:?}");
    }
}

#[test]
fn speed_rejects_bad_settings() {
    let t = topo(1, 1, 2, 1);
    let mut s = settings(None);
    s.speed.threshold = 1.5;
    assert!(Speed::new(&s, &t).is_err());
    let mut s = settings(None);
    s.speed.min_interval = Nanos::from_millis(200);
    assert!(Speed::new(&s, &t).is_err());
    assert!(Speed::new(&settings(Some(0)), &t).is_err());
    assert_eq!(
        crate::build("speed", &settings(None), &t).unwrap().name(),
        "speed"
    );
}
