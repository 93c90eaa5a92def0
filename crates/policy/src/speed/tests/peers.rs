//! Worked examples of threads that are not all busy peers: duty cycles that differ, barrier
//! peers whose waits take turns, sleepers, and no more busy threads than cores.

use super::*;

/// Drives `p` with 10 ms windows from `from_ms` to `to_ms`, each thread at the rates
/// `rates(ms)` gives; returns the moves with the end of their window.
fn drive(
    p: &mut Speed,
    t: &Topology,
    from_ms: u32,
    to_ms: u32,
    rates: impl Fn(u32) -> Vec<Rate>,
) -> Vec<(u32, Move)> {
    let mut out = Vec::new();
    for end in (from_ms + 10..=to_ms).step_by(10) {
        let plan = p.decide(t, &window(f64::from(end - 10), f64::from(end), &rates(end)));
        out.extend(plan.moves.into_iter().map(|m| (end, m)));
    }
    out
}

/// Threads 101, 102 and 103 on two cores, placed by a first window at 0 ms; rounds of
/// 10 ms, the guard on or off (off where its probe would release them for its own
/// reasons). Returns the topology, the policy and the first window's moves.
fn three_on_two_cores(guard: bool) -> (Topology, Speed, Vec<Move>) {
    let t = topo(1, 1, 2, 1);
    let mut s = settings(Some(10));
    s.speed.guard = guard;
    let mut p = Speed::new(&s, &t).unwrap();
    let start = [
        (101, 0.0, 0.0, 0, 0),
        (102, 0.0, 0.0, 0, 0),
        (103, 0.0, 0.0, 0, 0),
    ];
    let plan = p.decide(&t, &window(0.0, 0.0, &start));
    (t, p, plan.moves)
}

#[test]
fn speed_threads_whose_duty_cycles_differ_go_back_to_linux_for_a_stint() {
    // Two cores; 101 and 102 run all the time, 103 runs half the time and sleeps the
    // rest (`uneven`'s shape), placed 101 + 103 and 102: 103 computes 5 ms sharing its
    // core (10 ms) and sleeps 5 ms, so over its 15 ms it runs a third, waits a third and
    // sleeps a third; 101 runs two thirds; 102 has its core. Duty cycles (blocked
    // fraction over their lives) 0, 0, 1/3: a gap of 1/3 > 0.2 from the first window;
    // CPU shares 1, 2/3, 1/3: a spread of 1 − (1/3)/1 = 2/3 > 0.15. Both hold as soon as
    // the threads have been watched 50 ms, counted from the end of the first window after
    // they were placed (10 ms); 150 ms later, at 210 ms, every placed thread goes back to
    // Linux. (103 is never released as a sleeper: 1/3 < 0.4.)
    let (t, mut p, first) = three_on_two_cores(true);
    assert_eq!(first.len(), 3, "all three placed at first");
    let third = 1.0 / 3.0;
    let uneven = |_| {
        vec![
            (101, 2.0 * third, third, 0, 0),
            (102, 1.0, 0.0, 0, 0),
            (103, third, third, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 0, 1000, uneven);
    let released: Vec<u32> = moves
        .iter()
        .filter(|(_, m)| m.to == Target::Original)
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(released, vec![210, 210, 210], "{moves:?}");
    assert!(p.queues.iter().all(|q| q.load == 0));
    // Apart, nothing is placed again for the 4 s stint, busy as 101 and 102 are.
    let moves = drive(&mut p, &t, 1000, 4200, uneven);
    assert!(moves.is_empty(), "{moves:?}");
    // After it, the threads that qualify are 101 and 102 (103 is blocked a third of the
    // time, above the 0.25 under which a released thread is placed again): two busy
    // threads on two cores, so they are lent to Linux (`few`) rather than pinned, and
    // nothing moves.
    let moves = drive(&mut p, &t, 4200, 4300, uneven);
    assert!(moves.is_empty(), "{moves:?}");
    let threadbalance_model::PolicySummary::Speed(s) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    assert_eq!((s.peer_hand_backs, s.few_now), (1, true), "{s:?}");
}

#[test]
fn speed_threads_that_pass_the_cpu_back_and_forth_by_yielding_go_back_to_linux() {
    // Three threads on two cores that yield all the time, each handing its core to one
    // that hands it straight back (a yield-and-mutex benchmark): 101 and 102 share a core,
    // each at half of it and switching 1,000 times in a 10 ms window (5 µs of CPU a
    // switch); 103 has its core and switches never (a yield with nothing else to run).
    // From the first window the rotation turns nothing over (no round could follow such
    // threads: held as phases finer than any round), and 150 ms after the first window
    // that read it (the second, at 20 ms) every thread goes back to Linux as no CPU-bound
    // peer.
    let (t, mut p, first) = three_on_two_cores(true);
    assert_eq!(first.len(), 3);
    let yielding = |_| {
        vec![
            (101, 0.5, 0.5, 0, 1000),
            (102, 0.5, 0.5, 0, 1000),
            (103, 1.0, 0.0, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 0, 1000, yielding);
    assert!(p.ping_pong && p.fine(), "{:?}", p.stats);
    let released: Vec<u32> = moves
        .iter()
        .filter(|(_, m)| m.to == Target::Original)
        .map(|(at, _)| *at)
        .collect();
    assert_eq!(released, vec![170, 170, 170], "{moves:?}");
    assert_eq!(moves.len(), 3, "nothing rotated: {moves:?}");
    // The same shares with switches of a yield barrier's waiters, one every 180 µs of CPU
    // (real, 2 cores): no ping-pong; the threads yield at their synchronization points,
    // and nobody goes back to Linux.
    let (t, mut p, _) = three_on_two_cores(true);
    let barrier = |_| {
        vec![
            (101, 0.5, 0.5, 0, 28),
            (102, 0.5, 0.5, 0, 28),
            (103, 1.0, 0.0, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 0, 200, barrier);
    assert!(!p.ping_pong, "{:?}", p.stats);
    assert_eq!(p.stats.reason, "threads yield at synchronization points");
    assert!(
        moves.iter().all(|(_, m)| m.to != Target::Original),
        "{moves:?}"
    );
}

#[test]
fn speed_barrier_peers_whose_waits_take_turns_stay_managed() {
    // Three threads on two cores that take turns waiting at a barrier: in each 10 ms
    // window one of them is blocked 40 % of the time and the others not, in turn. Over a
    // window the gap is 0.4, but their duty cycles (averaged over their lives) stay within
    // 0.4/n of each other after n windows and converge to 0.4/3 each: never apart.
    // (The guard is off: its probe would release them too, for its own reasons.)
    let (t, mut p, _) = three_on_two_cores(false);
    let turns = |end: u32| {
        let waits = 101 + ((end / 10) % 3) as i32;
        (101..=103)
            .map(|i| (i, if i == waits { 0.6 } else { 1.0 }, 0.0, 0, 0))
            .collect()
    };
    let moves = drive(&mut p, &t, 0, 2000, turns);
    assert!(
        moves.iter().all(|(_, m)| m.to != Target::Original),
        "{moves:?}"
    );
    assert_eq!(p.queues.iter().map(|q| q.load).sum::<u32>(), 3);
}

#[test]
fn speed_barrier_peers_doubled_up_before_the_rotation_stay_peers() {
    // Three threads meeting at a blocking barrier every 10 ms phase on two cores, while
    // nothing rotates them yet (the shape a real run showed while a main thread asleep in
    // `join` still counted on a core): 101 alone runs its phase in 10 ms and sleeps 10 ms
    // at the barrier; 102 and 103 share a core and take 20 ms each. Per window:
    //   101: runs 0.5, waits 0,   blocked 0.5      102, 103: runs 0.5, waits 0.5, blocked 0
    // Duty gap 0.5 > 0.2, as `uneven`'s; CPU shares 0.5 each: spread 1 − 0.5/0.5 = 0, so
    // they are peers and stay placed. (The test without the CPU shares handed all three
    // to Linux at 200 ms.) The guard is off: its probe would release them for its own
    // reasons.
    let (t, mut p, _) = three_on_two_cores(false);
    let barrier = |_| {
        vec![
            (101, 0.5, 0.0, 0, 0),
            (102, 0.5, 0.5, 0, 0),
            (103, 0.5, 0.5, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 0, 300, barrier);
    assert!(
        moves.iter().all(|(_, m)| m.to != Target::Original),
        "{moves:?}"
    );
    assert_eq!(p.queues.iter().map(|q| q.load).sum::<u32>(), 3);
    let threadbalance_model::PolicySummary::Speed(sum) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    assert_eq!(sum.peer_hand_backs, 0, "{sum:?}");
}

/// Threads 101, 102 and 103 on two cores for `to_ms` in 10 ms windows at the rates
/// `rate(tid)` gives, the guard off; returns how many were released as sleepers, and when
/// the first was given back to Linux.
fn sleepers(to_ms: u32, rate: impl Fn(i32) -> Rate) -> (u64, Option<u32>) {
    let (t, mut p, _) = three_on_two_cores(false);
    let moves = drive(&mut p, &t, 0, to_ms, |_| (101..=103).map(&rate).collect());
    let first = moves
        .iter()
        .find(|(_, m)| m.why == Reason::Release)
        .map(|(at, _)| *at);
    let threadbalance_model::PolicySummary::Speed(s) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    (s.released_to_linux, first)
}

#[test]
fn speed_barrier_peer_that_sleeps_more_than_its_peers_is_not_a_sleeper() {
    // The shape of the test above, held for a second: 101 alone on its core runs its
    // phases in half the time and sleeps the other half at the barrier (blocked 0.5, past
    // the sleeper rule's 0.4 once its 200 ms average gets there: 0.5·(1 − e^(−t/0.2)) =
    // 0.4 at t = 0.2·ln 5 ≈ 320 ms); 102 and 103 share a core (run 0.5, wait 0.5,
    // blocked 0). They do equal work (CPU shares 0.5 each) and are blocked 1/6 on
    // average, under 0.4: the sleep is the program's, so 101 stays placed, and with it
    // the others. Before the rule 101 was released at 330 ms (and the two left, no more
    // than the cores, were lent to Linux with it).
    let got = sleepers(1000, |i| match i {
        101 => (101, 0.5, 0.0, 0, 0),
        _ => (i, 0.5, 0.5, 0, 0),
    });
    assert_eq!(got, (0, None));
}

#[test]
fn speed_threads_that_all_sleep_or_do_unequal_work_are_still_released() {
    // Equal work, but every thread blocked 0.7 (runs 0.3): their mean is past 0.4, so
    // they are all sleepers, each released when its own average passes 0.4:
    // 0.7·(1 − e^(−t/0.2)) = 0.4 at t = 0.2·ln(7/3) ≈ 170 ms (windows of 10 ms, each
    // averaged in with weight 10/210: the 150 ms window).
    let (released, first) = sleepers(400, |i| (i, 0.3, 0.0, 0, 0));
    assert_eq!(released, 3);
    assert!(
        first.is_some_and(|at| (140..=200).contains(&at)),
        "{first:?}"
    );
    // 101 runs 0.2 and sleeps 0.8 next to two that run 0.5 and wait 0.5: their mean is
    // 0.27, under 0.4, but the CPU shares (0.2 against 0.5) are not equal work, so 101
    // is a sleeper as before (past 0.4 at ≈ 140 ms), and only 101 (the two left, no
    // more than the cores, are lent to Linux rather than released).
    let (released, first) = sleepers(400, |i| match i {
        101 => (101, 0.2, 0.0, 0, 0),
        _ => (i, 0.5, 0.5, 0, 0),
    });
    assert_eq!(released, 1);
    assert!(
        first.is_some_and(|at| (100..=200).contains(&at)),
        "{first:?}"
    );
}

#[test]
fn speed_thread_asleep_since_first_seen_is_released_after_twenty_ms() {
    // Two cores; 101, 102 and 104 run all the time, 103 (a main thread waiting in `join`)
    // has not run since it was first seen. Placed round-robin it makes the counts 2 + 2
    // instead of 2 + 1 (and leaves nothing to rotate). After
    // 20 ms of watching, having run or waited less than 5 % of that time, it goes back to
    // Linux at once: at 20 ms, with 10 ms windows, long before its 200 ms average of
    // blocked time would pass 0.4 (1 − e^(−t/0.2) = 0.4 at t ≈ 102 ms). It is not placed
    // again while it sleeps, though its average is still below 0.25 then.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let start = [
        (101, 0.0, 0.0, 0, 0),
        (102, 0.0, 0.0, 0, 0),
        (103, 0.0, 0.0, 0, 0),
        (104, 0.0, 0.0, 0, 0),
    ];
    p.decide(&t, &window(0.0, 0.0, &start));
    let rates = |_| {
        vec![
            (101, 1.0, 0.0, 0, 0),
            (102, 1.0, 0.0, 0, 0),
            (103, 0.0, 0.0, 0, 0),
            (104, 1.0, 0.0, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 0, 100, rates);
    let released: Vec<(u32, i32)> = moves
        .iter()
        .filter(|(_, m)| m.why == Reason::Release)
        .map(|(at, m)| (*at, m.thread.tid.0))
        .collect();
    assert_eq!(released, vec![(20, 103)], "{moves:?}");
    assert!(
        !moves
            .iter()
            .any(|(_, m)| m.thread == key(1, 103) && m.why == Reason::Initial),
        "{moves:?}"
    );
    // Round-robin put 101 and 103 on core 0, 102 and 104 on core 1.
    assert_eq!(
        p.queues.iter().map(|q| q.load).collect::<Vec<_>>(),
        vec![1, 2]
    );
}

#[test]
fn speed_no_more_busy_threads_than_cores_are_never_pinned() {
    // N ≤ M: 2 threads on 2 cores, 16 on 16, 3 on 16. Every thread would have a core to
    // itself, so none is placed at first sight (the placements are taken back in the same
    // plan), and none is later: nothing moves at all, and the summary says why.
    for (cores, n) in [(2, 2), (16, 16), (16, 3)] {
        let t = topo(1, 1, cores, 1);
        let mut p = Speed::new(&settings(None), &t).unwrap();
        let mut m = Machine::new(n);
        m.run(&mut p, &t, 500.0);
        assert!(m.moves.is_empty(), "{n} on {cores}: {:?}", m.moves);
        assert!(p.queues.iter().all(|q| q.load == 0), "{n} on {cores}");
        let PolicySummary::Speed(s) = p.summary() else {
            panic!("speed reports a speed summary")
        };
        assert_eq!((s.few_hand_backs, s.few_now), (1, true), "{n} on {cores}");
    }
}

#[test]
fn speed_busy_threads_left_when_the_sleepers_go_are_lent_to_linux() {
    // A pipeline's shape on two cores: 101 and 102 compute all the time, 103 and 104
    // (stages that mostly wait for work) run 10 % of the time. Four threads on two cores
    // are placed at first sight (2 + 2). The sleepers' blocked fraction passes 0.4 after
    // ≈ 200 ms · ln(0.9 / 0.5) ≈ 118 ms, both in the same window: then two busy threads
    // are left for two cores, and in that same plan they go back to Linux too.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let first: Vec<Rate> = (101..=104).map(|i| (i, 0.0, 0.0, 0, 0)).collect();
    let plan = p.decide(&t, &window(0.0, 0.0, &first));
    assert_eq!(plan.moves.len(), 4);
    let rates = |_| {
        (101..=104)
            .map(|i| (i, if i <= 102 { 1.0 } else { 0.1 }, 0.0, 0, 0))
            .collect()
    };
    let moves = drive(&mut p, &t, 0, 400, rates);
    let released: Vec<(u32, i32)> = moves
        .iter()
        .filter(|(_, m)| m.to == Target::Original)
        .map(|(at, m)| (*at, m.thread.tid.0))
        .collect();
    assert_eq!(released.len(), 4, "{moves:?}");
    assert!(released.iter().all(|&(at, _)| at == released[0].0));
    assert!((110..=130).contains(&released[0].0), "{released:?}");
    assert!(p.queues.iter().all(|q| q.load == 0));
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    assert_eq!(
        (s.released_to_linux, s.few_hand_backs, s.few_now),
        (2, 1, true)
    );
}

#[test]
fn speed_lent_threads_are_placed_again_when_they_outnumber_the_cores() {
    // Two busy threads on two cores, lent to Linux from the start. A third busy thread
    // appears at 100 ms: three busy threads on two cores, so all three are placed (cores
    // 0, 1, 0: the emptiest, ties to the lowest), and the rotation takes over.
    let t = topo(1, 1, 2, 1);
    let mut p = Speed::new(&settings(Some(10)), &t).unwrap();
    let two = |_| vec![(101, 1.0, 0.0, 0, 0), (102, 1.0, 0.0, 0, 0)];
    let plan = p.decide(&t, &window(0.0, 0.0, &two(0)));
    assert!(plan.moves.is_empty(), "{:?}", plan.moves);
    assert!(drive(&mut p, &t, 0, 100, two).is_empty());
    let three = |_| {
        vec![
            (101, 1.0, 0.0, 0, 0),
            (102, 1.0, 0.0, 0, 0),
            (103, 1.0, 0.0, 0, 0),
        ]
    };
    let moves = drive(&mut p, &t, 100, 110, three);
    let placed: Vec<(i32, usize)> = moves
        .iter()
        .filter(|(_, m)| m.why == Reason::Initial)
        .map(|(_, m)| (m.thread.tid.0, queue_of(m)))
        .collect();
    assert_eq!(placed, vec![(101, 0), (102, 1), (103, 0)], "{moves:?}");
    let PolicySummary::Speed(s) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    assert_eq!((s.few_hand_backs, s.few_now), (1, false));
}

#[test]
fn speed_a_thread_idle_through_the_first_window_after_placement_does_not_set_peers_apart() {
    // Start-up as a live run showed it: the first window after the threads were placed
    // lasts 100 ms (no synchronization seen yet, so the longest interval), and one of
    // three workers ran 10 ms of it and slept the rest, then worked as the others (all
    // three at 2/3 of a core, never blocked). Counted, that window stood for all of 103's
    // life in the peer test's averages (at 250 ms duty 0.36 against 0, CPU share 0.44
    // against 0.8), and all three went to Linux at 250 ms. The first window after
    // placement does not count, so they stay peers.
    let (t, mut p, _) = three_on_two_cores(false);
    let first = [
        (101, 1.0, 0.0, 0, 0),
        (102, 1.0, 0.0, 0, 0),
        (103, 0.1, 0.0, 0, 0),
    ];
    let plan = p.decide(&t, &window(0.0, 100.0, &first));
    assert!(plan.moves.iter().all(|m| m.to != Target::Original));
    let third = 1.0 / 3.0;
    let peers = |_| (101..=103).map(|i| (i, 2.0 * third, third, 0, 0)).collect();
    let moves = drive(&mut p, &t, 100, 1500, peers);
    assert!(
        moves.iter().all(|(_, m)| m.to != Target::Original),
        "{moves:?}"
    );
    let threadbalance_model::PolicySummary::Speed(s) = p.summary() else {
        panic!("speed reports a speed summary")
    };
    assert_eq!(s.peer_hand_backs, 0, "{s:?}");
}
