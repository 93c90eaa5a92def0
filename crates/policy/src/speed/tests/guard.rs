//! Worked examples of the guard: hand-backs when Linux does better, probes that lose, no
//! probe at the fair share.

use super::*;

/// Drives `p` with three threads on two cores that run at `managed` of a core while the
/// policy places them and at `linux` while it has given them back, calling it when it asks
/// until `until_ms`; returns every move with the time it was asked for (ms).
fn drive_guard(
    p: &mut Speed,
    t: &Topology,
    managed: f64,
    linux: f64,
    until_ms: f64,
) -> Vec<(f64, Move)> {
    drive_guard_switching(p, t, managed, linux, until_ms, 0.0)
}

/// As [`drive_guard`], with `invol_per_ms` involuntary switches per thread and ms of
/// window (3 = 3000/s: threads that yield at barriers, rounds every `min_interval`).
fn drive_guard_switching(
    p: &mut Speed,
    t: &Topology,
    managed: f64,
    linux: f64,
    until_ms: f64,
    invol_per_ms: f64,
) -> Vec<(f64, Move)> {
    let mut released = [false; 3];
    let mut out = Vec::new();
    let first = [
        (100, 0.0, 0.0, 0, 0),
        (101, 0.0, 0.0, 0, 0),
        (102, 0.0, 0.0, 0, 0),
    ];
    let mut plan = p.decide(t, &window(0.0, 0.0, &first));
    let (mut last, mut now) = (0.0, 0.0);
    loop {
        for m in &plan.moves {
            released[(m.thread.tid.0 - 100) as usize] = m.to == Target::Original;
            out.push((now, *m));
        }
        last = if now == last { last } else { now };
        now += plan.next_in.as_millis_f64();
        if now > until_ms {
            return out;
        }
        let rates: Vec<Rate> = (0..3)
            .map(|i| {
                let s = if released[i] { linux } else { managed };
                let invol = (invol_per_ms * (now - last)).round() as u64;
                (100 + i as i32, s, 1.0 - s, 0, invol)
            })
            .collect();
        plan = p.decide(t, &window(last, now, &rates));
        last = now;
    }
}

/// The times (ms, rounded) at which the threads were given back (`Release`) or placed again
/// (`Initial` after the first).
fn guard_events(moves: &[(f64, Move)]) -> (Vec<u64>, Vec<u64>) {
    let mut rel: Vec<u64> = moves
        .iter()
        .filter(|(_, m)| m.why == Reason::Release)
        .map(|(at, _)| at.round() as u64)
        .collect();
    let mut res: Vec<u64> = moves
        .iter()
        .filter(|(at, m)| m.why == Reason::Initial && *at > 0.0)
        .map(|(at, _)| at.round() as u64)
        .collect();
    rel.dedup();
    res.dedup();
    (rel, res)
}

#[test]
fn speed_guard_hands_back_when_linux_does_better_and_retries_with_back_off() {
    // Three threads on two cores (fair share 2/3). Managed, the slowest thread gets 40 %
    // of a core; under Linux 60 %. The guard's measured tail is L = 200 ms, its settling
    // 50 ms; a probe's are half these.
    // - 1000 ms: the first managed stint ends (0.4 < 0.9 · 2/3 = 0.6): probe, every
    //   thread released.
    // - 1125 ms: the probe measured 0.6 > 1.05 · 0.4: handed back for 1 s.
    // - 2125 ms: trial, placed again; 2375 ms: trial 0.4 < 0.6: released for 2 s.
    // - 4375 ms: trial; 4625 ms: released for 4 s; 8625 ms: trial again; 8875 ms:
    //   released for 8 s.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_guard(&mut p, &t, 0.4, 0.6, 8900.0);
    let (released, resumed) = guard_events(&moves);
    assert_eq!(released, vec![1000, 2375, 4625, 8875]);
    assert_eq!(resumed, vec![2125, 4375, 8625]);
    let g = p.guard.as_ref().unwrap();
    assert_eq!((g.probes, g.handbacks, g.resumes), (1, 1, 0));
    let summary = p.summary().lines();
    let line = &summary.iter().find(|(k, _)| k == "guard").unwrap().1;
    assert!(line.contains("handed back at 1.12 s"), "{line}");
    assert!(
        line.contains("60 % of a core under Linux, 40 % managed"),
        "{line}"
    );
}

#[test]
fn speed_guard_keeps_managing_when_probes_lose_and_probes_less_often() {
    // Three threads on two cores, managed 0.5 (under 0.9 · 2/3 = 0.6: probed), Linux 0.45:
    // every probe loses. Probes at 1000 ms (back at 1125), then after a managed stint of
    // 2 s (3125, back at 3250), then of 4 s (7250, back at 7375).
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_guard(&mut p, &t, 0.5, 0.45, 8000.0);
    let (released, resumed) = guard_events(&moves);
    assert_eq!(released, vec![1000, 3125, 7250]);
    assert_eq!(resumed, vec![1125, 3250, 7375]);
    let g = p.guard.as_ref().unwrap();
    assert_eq!((g.probes, g.handbacks), (3, 0));
}

#[test]
fn speed_guard_does_not_probe_at_the_fair_share_and_can_be_turned_off() {
    // Three threads on two cores, each at 2/3 of a core: the fair share, nothing Linux
    // could add.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_guard(&mut p, &t, 2.0 / 3.0, 2.0 / 3.0, 5000.0);
    assert_eq!(guard_events(&moves), (vec![], vec![]));
    let g = p.guard.as_ref().unwrap();
    assert!(g.skipped >= 2 && g.probes == 0, "{g:?}");
    // Without the guard, even a worse placement is kept.
    let mut s = settings(None);
    s.speed.guard = false;
    let mut p = Speed::new(&s, &t).unwrap();
    let moves = drive_guard(&mut p, &t, 0.4, 0.6, 5000.0);
    assert_eq!(guard_events(&moves), (vec![], vec![]));
    assert!(p.guard.is_none());
}

#[test]
fn speed_guard_asks_for_rounds_at_once_after_a_probe_that_linux_loses() {
    // Yielding threads (3000 involuntary switches a second): rounds every 1 ms. Managed
    // 0.5, Linux 0.45: the probe at 1000 ms loses and the threads are placed again at
    // 1125 ms. The 125 ms of rounds under Linux rotated nothing and backed the interval
    // off (×1.5 a round after 16 quiet rounds, to about 40 ms); once the policy has the
    // threads again its rounds must come as the signals ask, not that late.
    // The same run twice (deterministic): stopped under Linux at 1110 ms, then at 1130.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    drive_guard_switching(&mut p, &t, 0.5, 0.45, 1110.0, 3.0);
    assert!(p.interval() > Nanos::from_millis(10), "{}", p.interval());
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_guard_switching(&mut p, &t, 0.5, 0.45, 1130.0, 3.0);
    assert_eq!(guard_events(&moves), (vec![1000], vec![1125]));
    assert!(p.interval() <= Nanos::from_millis(2), "{}", p.interval());
}

#[test]
fn speed_guard_probe_gives_the_threads_their_own_slices() {
    // Rounds every 2 ms: the rotation runs in short slices (each placed thread runs at
    // 0.7 / the threads on its core: under the fair share, so the guard does not skip its
    // probe). At 1000 ms the guard probes Linux (every thread to its
    // original mask; 60 % of a core each there), and Linux places them in its own slices:
    // the probe must not measure Linux with ours.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(2)), &t).unwrap();
    let mut slice = [None; 3];
    let mut queue: [Option<usize>; 3] = [None; 3];
    let first = [
        (100, 0.0, 0.0, 0, 0),
        (101, 0.0, 0.0, 0, 0),
        (102, 0.0, 0.0, 0, 0),
    ];
    let mut plan = p.decide(&t, &window(0.0, 0.0, &first));
    let (mut last, mut now) = (0.0, 0.0);
    let mut seen_short = false;
    loop {
        for m in &plan.moves {
            queue[(m.thread.tid.0 - 100) as usize] = match m.to {
                Target::Original => None,
                _ => Some(queue_of(m)),
            };
        }
        for s in &plan.slices {
            slice[(s.thread.tid.0 - 100) as usize] = s.slice;
        }
        seen_short |= slice.iter().all(Option::is_some);
        if queue.iter().all(Option::is_none) && now > 0.0 {
            break;
        }
        now += plan.next_in.as_millis_f64();
        assert!(now < 1200.0, "no probe by 1200 ms");
        let rates: Vec<Rate> = (0..3)
            .map(|i| {
                let s = match queue[i] {
                    None => 0.6,
                    Some(q) => 0.7 / queue.iter().filter(|&&o| o == Some(q)).count() as f64,
                };
                (100 + i as i32, s, 1.0 - s, 0, 0)
            })
            .collect();
        plan = p.decide(&t, &window(last, now, &rates));
        last = now;
    }
    assert!(
        seen_short,
        "the rotation ran in short slices before the probe"
    );
    assert_eq!(slice, [None; 3], "probing at {now} ms");
}

/// Drives `p` with four threads on two cores (N = 2M: two a core, even pinning), each
/// running at `rate(queue)` of a core while placed on `queue` and at `linux` while given
/// back, until `until_ms`; returns every move with the time it was asked for (ms).
fn drive_even(
    p: &mut Speed,
    t: &Topology,
    rate: impl Fn(usize) -> f64,
    linux: f64,
    until_ms: f64,
) -> Vec<(f64, Move)> {
    drive_level(p, t, 4, |q, _, _| rate(q), linux, until_ms)
}

#[test]
fn speed_guard_does_not_probe_even_pinning_of_threads_that_progress_alike() {
    // Four threads on two cores, two a core: nothing rotates. Each runs at 40 % of a
    // core (barrier waits, say): 0.4 < 0.9 · 1/2, so the 90 % rule would probe, and a
    // probe would cost what Linux lacks for its 125 ms. But with the threads evenly
    // pinned and progressing alike (slowest 0.4 = their mean), no placement can do
    // better: every stint skips its probe.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_even(&mut p, &t, |_| 0.4, 0.45, 5000.0);
    assert_eq!(guard_events(&moves), (vec![], vec![]));
    let g = p.guard.as_ref().unwrap();
    assert!(g.skipped >= 2 && g.probes == 0, "{g:?}");
}

#[test]
fn speed_guard_probes_even_pinning_when_one_core_runs_its_threads_slower() {
    // The same, but core 0 is shared with another program: its two threads get 30 % of
    // a core, core 1's 45 %. The slowest (0.3) is 80 % of the mean (0.375), under 97 %:
    // the threads do not progress alike, Linux might spread them better, and the first
    // stint ends in a probe. Under Linux the slowest gets 0.4 > 1.05 · 0.3: handed back.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_even(&mut p, &t, |q| if q == 0 { 0.3 } else { 0.45 }, 0.4, 1200.0);
    let (released, _) = guard_events(&moves);
    assert_eq!(released, vec![1000]);
    let g = p.guard.as_ref().unwrap();
    assert_eq!((g.probes, g.handbacks), (1, 1), "{g:?}");
}

/// Drives `p` with `n` always-runnable threads on `t`'s queues: a thread placed on a queue
/// of `load` threads runs at `share(queue, rank, load)` of a CPU (`rank`: its place among
/// them by tid), at `linux` while given back, until `until_ms`; returns every move with the
/// time it was asked for (ms).
fn drive_level(
    p: &mut Speed,
    t: &Topology,
    n: usize,
    share: impl Fn(usize, usize, usize) -> f64,
    linux: f64,
    until_ms: f64,
) -> Vec<(f64, Move)> {
    let mut queue: Vec<Option<usize>> = vec![None; n];
    let mut out = Vec::new();
    let first: Vec<Rate> = (0..n).map(|i| (100 + i as i32, 0.0, 0.0, 0, 0)).collect();
    let mut plan = p.decide(t, &window(0.0, 0.0, &first));
    let mut now = 0.0;
    loop {
        for m in &plan.moves {
            queue[(m.thread.tid.0 - 100) as usize] = match m.to {
                Target::Original => None,
                _ => Some(queue_of(m)),
            };
            out.push((now, *m));
        }
        let last = now;
        now += plan.next_in.as_millis_f64();
        if now > until_ms {
            return out;
        }
        let rates: Vec<Rate> = (0..n)
            .map(|i| {
                let s = queue[i].map_or(linux, |q| {
                    let on: Vec<usize> = (0..n).filter(|&j| queue[j] == Some(q)).collect();
                    let rank = on.iter().position(|&j| j == i).unwrap_or(0);
                    share(q, rank, on.len())
                });
                (100 + i as i32, s, 1.0 - s, 0, 0)
            })
            .collect();
        plan = p.decide(t, &window(last, now, &rates));
    }
}

#[test]
fn speed_guard_does_not_probe_a_level_placement_held_where_no_rotation_pays() {
    // 31 threads on 16 cores that never block: after 0.2 s the rotation holds the level
    // placement (a rotation would lift the slowest by ×1.03). The two threads of a core
    // split it 43/57 (one has less work a phase and yields the rest to the other), so the
    // slowest runs at 0.43 < 0.9 × 16/31 and the 90 % rule would probe. But each core is
    // kept busy by its threads: Linux, which evens counts and rotates nothing, can place
    // them no better, and no stint probes.
    let t = topo(1, 1, 16, 1);
    let split = |_q: usize, rank: usize, load: usize| match (load, rank) {
        (1, _) => 1.0,
        (_, 0) => 0.43,
        (_, _) => 0.57,
    };
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let moves = drive_level(&mut p, &t, 31, split, 0.43, 3000.0);
    assert_eq!(guard_events(&moves), (vec![], vec![]));
    assert!(p.stats.held_level > 0, "{:?}", p.stats);
    let g = p.guard.as_ref().unwrap();
    assert!(g.skipped >= 2 && g.probes == 0, "{g:?}");

    // Another program takes 40 % of core 0: its threads keep it busy 60 % of the time,
    // under `LEVEL`, and Linux might steer them away: the first stint ends in a probe.
    let mut p = Speed::new(&settings(None), &t).unwrap();
    let shared =
        |q: usize, rank: usize, load: usize| split(q, rank, load) * if q == 0 { 0.6 } else { 1.0 };
    let moves = drive_level(&mut p, &t, 31, shared, 0.43, 1200.0);
    let (released, _) = guard_events(&moves);
    assert_eq!(released, vec![1000], "{:?}", p.guard);
}
