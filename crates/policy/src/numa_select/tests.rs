//! The balancer on synthetic machines: adoption, the imbalance rules, the move cap, the
//! selections' choices through the whole pass, and the settings it rejects.

use super::*;
use threadbalance_model::testutil::{key, topo, window_of};
use threadbalance_model::{CpuId, NodeId, ProcessMemory};

/// A thread of the test machines: its key, utilization and CPU.
type T = (ThreadKey, f64, u32);

fn policy(s: Selection) -> NumaBalance {
    NumaBalance::new(s, &Settings::new(Level::Node)).unwrap()
}

/// Runnable threads per node, by last CPU.
fn per_node(topo: &Topology, threads: &[T]) -> Vec<u32> {
    let mut v = vec![0; topo.domains(Level::Node).len()];
    for &(_, u, c) in threads {
        if u >= ACTIVE_UTIL {
            v[topo.domain_of(CpuId(c), Level::Node).unwrap()] += 1;
        }
    }
    v
}

/// One tick: decide on a 100 ms window, then apply the moves by putting each moved
/// thread on the first CPU of its node (when `follow` is set; else its last CPU lags).
fn tick(p: &mut NumaBalance, topo: &Topology, threads: &mut [T], follow: bool) -> Plan {
    let w = window_of(100, threads);
    let plan = p.decide(topo, &w);
    if follow {
        for m in &plan.moves {
            let Target::Domain { index, .. } = m.to else {
                panic!("numa moves target nodes");
            };
            let cpu = topo.domains(Level::Node)[index].cpus.first().unwrap().0;
            for t in threads.iter_mut().filter(|t| t.0 == m.thread) {
                t.2 = cpu;
            }
        }
    }
    plan
}

/// The moves of a plan that balance nodes (not adoptions).
fn balancing(plan: &Plan) -> Vec<Move> {
    plan.moves
        .iter()
        .copied()
        .filter(|m| matches!(m.why, Reason::NumaBalance { .. }))
        .collect()
}

/// The adoptions of a plan: each thread confined to the node it runs on.
fn adoptions(plan: &Plan) -> Vec<Move> {
    plan.moves
        .iter()
        .copied()
        .filter(|m| m.why == Reason::Initial)
        .collect()
}

/// The node a move confines its thread to.
fn node_of(m: &Move) -> usize {
    match m.to {
        Target::Domain {
            level: Level::Node,
            index,
        } => index,
        other => panic!("numa moves target nodes, not {other:?}"),
    }
}

/// Four nodes of two CPUs (0-1, 2-3, 4-5, 6-7). Process 10 has its leader on node 1 and
/// six threads on node 0; process 20 its leader on node 2 and six threads on node 0.
/// Loads: node 0 = 12, node 1 = 1, node 2 = 1, node 3 = 0; 14 in all.
fn crowded_node0() -> (Topology, Vec<T>) {
    let mut threads = vec![(key(10, 10), 1.0, 2), (key(20, 20), 1.0, 4)];
    for i in 0..6 {
        threads.push((key(10, 11 + i), 1.0, (i % 2) as u32));
        threads.push((key(20, 21 + i), 1.0, (i % 2) as u32));
    }
    (topo(4, 1, 2, 1), threads)
}

#[test]
fn numa_balance_one_node_machine_says_nothing_to_balance_once() {
    let t = topo(1, 1, 4, 1);
    for s in Selection::ALL {
        let mut p = policy(s);
        let mut threads = vec![
            (key(1, 1), 1.0, 0),
            (key(1, 2), 1.0, 0),
            (key(1, 3), 1.0, 0),
        ];
        let first = tick(&mut p, &t, &mut threads, true);
        assert!(first.moves.is_empty());
        let note = first.note.unwrap();
        assert!(note.contains("nothing to balance between nodes"), "{note}");
        let second = tick(&mut p, &t, &mut threads, true);
        assert!(second.moves.is_empty() && second.note.is_none());
        assert_eq!(second.next_in, ONE_NODE_INTERVAL);
    }
}

#[test]
fn numa_balance_converges_and_then_stops_under_every_selection() {
    for s in Selection::ALL {
        for follow in [true, false] {
            let (t, mut threads) = crowded_node0();
            let mut p = policy(s);
            let mut moved = Vec::new();
            for k in 0..10 {
                let plan = tick(&mut p, &t, &mut threads, follow);
                moved.push(balancing(&plan).len());
                if k == 0 {
                    // Every thread is adopted; the 8 that move need only their move.
                    assert_eq!(adoptions(&plan).len(), 14 - 8, "{}", s.name());
                    let mut keys: Vec<ThreadKey> = plan.moves.iter().map(|m| m.thread).collect();
                    keys.sort_unstable();
                    keys.dedup();
                    assert_eq!(keys.len(), 14, "one move per thread");
                } else {
                    assert!(adoptions(&plan).is_empty());
                }
            }
            // 14 runnable threads on 4 nodes: 12, 1, 1, 0 → 4, 4, 3, 3 (in some order)
            // takes 8 moves, all in the first tick; then nothing ever moves again.
            let w = window_of(100, &threads);
            let st = State::build(&t, &w, &p.placed, LoadMetric::Runnable);
            let mut loads: Vec<u32> = st.load.iter().map(|&l| l as u32).collect();
            loads.sort_unstable();
            assert_eq!(loads, vec![3, 3, 4, 4], "{} follow={follow}", s.name());
            let total: usize = moved.iter().sum();
            assert_eq!(moved[0], 8, "{}: {moved:?}", s.name());
            assert_eq!(total, 8, "{}: {moved:?}", s.name());
            if follow {
                assert_eq!(per_node(&t, &threads).iter().sum::<u32>(), 14);
            }
        }
    }
}

#[test]
fn numa_balance_caps_moves_per_tick() {
    // Twenty threads of process 1 (leader asleep on node 1) on node 0 of two: 20 vs 0.
    // Tick 1: 8 moves (the cap) → 12 vs 8. Tick 2: 12 − 8 = 4 > 1 and 12 > 1.25 · 8 = 10:
    // one move → 11 vs 9; now 11 < 1.25 · 9 = 11.25: balanced enough, as Linux's
    // imbalance_pct of 125 would say. Then nothing.
    let t = topo(2, 1, 4, 1);
    let mut threads: Vec<T> = (0..20)
        .map(|i| (key(1, 2 + i), 1.0, (i % 4) as u32))
        .collect();
    threads.push((key(1, 1), 0.0, 4));
    for s in Selection::ALL {
        let mut th = threads.clone();
        let mut p = policy(s);
        let moved: Vec<usize> = (0..4)
            .map(|_| balancing(&tick(&mut p, &t, &mut th, true)).len())
            .collect();
        assert_eq!(moved, vec![8, 1, 0, 0], "{}", s.name());
        assert_eq!(per_node(&t, &th), vec![11, 9]);
    }
}

#[test]
fn numa_balance_balanced_machine_never_moves() {
    // 2, 2, 2, 1 on four nodes (difference 1), and 8 vs 7 on two nodes (difference 1,
    // 8 < 1.25 · 7): both are balanced by the thresholds.
    let four = topo(4, 1, 2, 1);
    let cpus4 = [0, 1, 2, 3, 4, 5, 6];
    let two = topo(2, 1, 4, 1);
    let cpus2: Vec<u32> = (0..15)
        .map(|i| if i < 8 { i % 4 } else { 4 + i % 4 })
        .collect();
    for s in Selection::ALL {
        for (t, cpus) in [(&four, &cpus4[..]), (&two, &cpus2[..])] {
            let mut threads: Vec<T> = cpus
                .iter()
                .enumerate()
                .map(|(i, &c)| (key(1, 2 + i as i32), 1.0, c))
                .collect();
            let mut p = policy(s);
            // The first tick only adopts: every thread stays on its node.
            let first = tick(&mut p, t, &mut threads, true);
            assert_eq!(adoptions(&first).len(), cpus.len(), "{}", s.name());
            assert!(balancing(&first).is_empty(), "{}", s.name());
            for _ in 0..4 {
                let plan = tick(&mut p, t, &mut threads, true);
                assert!(plan.moves.is_empty() && plan.note.is_none(), "{}", s.name());
            }
            assert_eq!(p.totals().imbalanced_ticks, 0);
        }
    }
}

#[test]
fn numa_balance_enhanced_never_moves_a_leader_and_moves_threads_of_destination_leaders() {
    // Two nodes of four CPUs. Process 1: leader and five threads on node 0. Process 2:
    // leader asleep on node 1 (CPU 4), two threads on node 0. Loads 8 vs 0.
    let t = topo(2, 1, 4, 1);
    let mut base: Vec<T> = vec![
        (key(2, 2), 0.0, 4),
        (key(2, 30), 1.0, 2),
        (key(2, 31), 1.0, 3),
    ];
    for i in 0..6 {
        base.push((key(1, 1 + i), 1.0, (i % 4) as u32));
    }
    for s in [Selection::Excl, Selection::MbPlus] {
        let mut threads = base.clone();
        let mut p = policy(s);
        let plan = tick(&mut p, &t, &mut threads, true);
        let moved = balancing(&plan);
        // Threads 30 and 31 go at once (their leader is on node 1); process 1's threads
        // are skipped (leader on the source) and its leader is never moved: 6 vs 2 stays.
        let tids: Vec<i32> = moved.iter().map(|m| m.thread.tid.0).collect();
        assert_eq!(tids, vec![30, 31], "{}", s.name());
        assert_eq!(p.totals().leader_on_destination, 2);
        assert_eq!(p.totals().evaluated, 0);
        let note = plan.note.unwrap();
        assert!(
            note.contains("confined 7 new threads") && note.contains("moved 2 threads"),
            "{note}"
        );
        let again = tick(&mut p, &t, &mut threads, true);
        assert!(again.moves.is_empty());
        let note = again.note.unwrap();
        assert!(
            note.contains("none of its threads may move: 1 group leader, 5 with"),
            "{note}"
        );
        // Said once, not on every tick.
        assert!(tick(&mut p, &t, &mut threads, true).note.is_none());
        assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
        // The fifth tick in a row that refuses (the first refused after its two moves)
        // moves a thread anyway, as Linux's active balancing would: one a tick, never a
        // leader while another thread waits, until the nodes are balanced (4 vs 4).
        let mut forced = Vec::new();
        for _ in 0..3 {
            let plan = tick(&mut p, &t, &mut threads, true);
            forced.extend(balancing(&plan).iter().map(|m| m.thread.tid.0));
        }
        assert_eq!(forced, vec![2, 3], "{}", s.name());
        assert_eq!(p.totals().forced, 2);
        assert_eq!(per_node(&t, &threads), vec![4, 4]);
        assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
    }
    // First-Fit takes the first in key order: process 1's leader.
    let mut threads = base.clone();
    let mut p = policy(Selection::FirstFit);
    let plan = balancing(&tick(&mut p, &t, &mut threads, true));
    assert_eq!(plan[0].thread, key(1, 1));
    assert_eq!(
        plan[0].why,
        Reason::NumaBalance {
            from: NodeId(0),
            to: NodeId(1)
        }
    );
    assert_eq!(
        plan[0].to,
        Target::Domain {
            level: Level::Node,
            index: 1
        }
    );
}

#[test]
fn numa_balance_memory_aware_selections_read_per_node_memory() {
    // Two nodes; processes 1 and 2 (leaders asleep on node 1) each with two threads on
    // node 0. Process 2 has 90 MiB on node 1 and 10 on node 0; process 1 the reverse.
    // MB: process 1: 10 − 90 = −80 MiB, process 2: 90 − 10 = +80 MiB → thread 21 first.
    // TM: both 100 MiB → the first in key order, thread 11.
    let t = topo(2, 1, 4, 1);
    let mib = 1 << 20;
    let threads: Vec<T> = vec![
        (key(1, 1), 0.0, 4),
        (key(1, 11), 1.0, 0),
        (key(1, 12), 1.0, 1),
        (key(2, 2), 0.0, 5),
        (key(2, 21), 1.0, 2),
        (key(2, 22), 1.0, 3),
    ];
    let mut w = window_of(100, &threads);
    w.memory = vec![
        ProcessMemory {
            pid: Pid(1),
            bytes_per_node: vec![(NodeId(0), 90 * mib), (NodeId(1), 10 * mib)],
        },
        ProcessMemory {
            pid: Pid(2),
            bytes_per_node: vec![(NodeId(0), 10 * mib), (NodeId(1), 90 * mib)],
        },
    ];
    // Loads 4 vs 0: two moves bring them to 2 vs 2.
    let first = |s: Selection| {
        let plan = balancing(&policy(s).decide(&t, &w));
        assert_eq!(plan.len(), 2, "{}", s.name());
        plan.iter().map(|m| m.thread.tid.0).collect::<Vec<_>>()
    };
    assert_eq!(first(Selection::MostBenefit), vec![21, 22]);
    assert_eq!(first(Selection::BestCostEffectiveness), vec![21, 22]);
    assert_eq!(first(Selection::TotalMin), vec![11, 12]);
    // Both leaders are on the destination: MB+ moves thread 11 at once, then thread 12.
    assert_eq!(first(Selection::MbPlus), vec![11, 12]);
}

#[test]
fn numa_balance_util_metric_moves_only_while_the_gap_narrows() {
    // Two nodes; four threads at 0.9 on node 0, one at 0.9 on node 1: 3.6 vs 0.9.
    // One move: 2.7 vs 1.8, a gap of 0.9 ≤ 1 CPU: done.
    let t = topo(2, 1, 4, 1);
    let mut settings = Settings::new(Level::Node);
    settings.numa.load = LoadMetric::Util;
    let mut p = NumaBalance::new(Selection::FirstFit, &settings).unwrap();
    let mut threads: Vec<T> = (0..4).map(|i| (key(1, 2 + i), 0.9, i as u32)).collect();
    threads.push((key(1, 1), 0.9, 4));
    assert_eq!(balancing(&tick(&mut p, &t, &mut threads, true)).len(), 1);
    assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
}

#[test]
fn numa_balance_first_decision_confines_every_thread_to_its_current_node() {
    // Four nodes of two CPUs (CPU c is on node c / 2); two processes of four threads, two
    // threads per node. On the engine's first, zero-length window nothing is measured yet:
    // every thread is confined to the node it runs on (Reason::Initial), none is balanced.
    let t = topo(4, 1, 2, 1);
    let threads: Vec<T> = [(1, 1, 0), (1, 2, 3), (1, 3, 4), (1, 4, 7)]
        .into_iter()
        .chain([(2, 2, 1), (2, 21, 2), (2, 22, 5), (2, 23, 6)])
        .map(|(pid, tid, cpu)| (key(pid, tid), 1.0, cpu))
        .collect();
    for s in Selection::ALL {
        let mut p = policy(s);
        let plan = p.decide(&t, &window_of(0, &threads));
        assert_eq!(plan.moves.len(), 8, "{}", s.name());
        for m in &plan.moves {
            assert_eq!(m.why, Reason::Initial, "{}", s.name());
            let &(_, _, cpu) = threads.iter().find(|t| t.0 == m.thread).unwrap();
            assert_eq!(node_of(m), cpu as usize / 2, "{}: {m:?}", s.name());
        }
        let note = plan.note.unwrap();
        assert!(
            note.contains("confined 8 new threads to the node each runs on"),
            "{note}"
        );
        assert_eq!((p.totals().adopted, p.totals().moves), (8, 0));
        // Two threads per node is balanced: nothing more, and nothing said.
        let again = p.decide(&t, &window_of(100, &threads));
        assert!(
            again.moves.is_empty() && again.note.is_none(),
            "{}",
            s.name()
        );
    }
}

#[test]
fn numa_balance_leaves_a_programs_only_thread_unconfined() {
    // Two nodes of two CPUs. A program started under `run` is its main thread alone at the
    // first tick: confined, every worker it starts would inherit its node. Nothing is
    // adopted; once its workers run (two on each node) all four are adopted where they run.
    let t = topo(2, 1, 2, 1);
    for s in Selection::ALL {
        let mut p = policy(s);
        let plan = p.decide(&t, &window_of(0, &[(key(1, 1), 1.0, 0)]));
        assert!(plan.moves.is_empty(), "{}", s.name());
        assert_eq!(p.totals().adopted, 0, "{}", s.name());
        let threads: Vec<T> = [(1, 0), (2, 1), (3, 2), (4, 3)]
            .into_iter()
            .map(|(tid, cpu)| (key(1, tid), 1.0, cpu))
            .collect();
        let plan = p.decide(&t, &window_of(20, &threads));
        let nodes: Vec<usize> = plan.moves.iter().map(node_of).collect();
        assert_eq!(nodes, [0, 0, 1, 1], "{}", s.name());
        assert!(plan.moves.iter().all(|m| m.why == Reason::Initial));
        // Its workers gone, the main thread alone stays adopted: nothing more.
        let plan = p.decide(&t, &window_of(20, &threads[..1]));
        assert!(plan.moves.is_empty(), "{}", s.name());
        assert_eq!(p.totals().adopted, 4, "{}", s.name());
        // A second program starts beside it, its main thread alone on CPU 3: not adopted
        // while the first program's threads are (per process, not per window).
        let mut both = threads[..1].to_vec();
        both.push((key(2, 2), 1.0, 3));
        let plan = p.decide(&t, &window_of(20, &both));
        assert!(plan.moves.is_empty(), "{}: {:?}", s.name(), plan.moves);
        both.push((key(2, 3), 1.0, 1));
        let plan = p.decide(&t, &window_of(20, &both));
        let adopted: Vec<(i32, usize)> = plan
            .moves
            .iter()
            .map(|m| (m.thread.tid.0, node_of(m)))
            .collect();
        assert_eq!(adopted, [(2, 1), (3, 0)], "{}", s.name());
    }
}

#[test]
fn numa_balance_adopts_new_threads_once_and_forgets_vanished_ones() {
    // Two nodes of four CPUs. Three threads on node 0, one asleep: adopted there.
    let t = topo(2, 1, 4, 1);
    let mut p = policy(Selection::Excl);
    let mut threads: Vec<T> = vec![
        (key(1, 2), 0.0, 0),
        (key(1, 3), 1.0, 1),
        (key(1, 4), 1.0, 2),
    ];
    let first = p.decide(&t, &window_of(0, &threads));
    assert_eq!(adoptions(&first).len(), 3);
    assert!(balancing(&first).is_empty());
    // A fourth thread appears on node 1 (CPU 5): it alone is adopted, on node 1. Loads
    // 2 vs 1 differ by 1 thread: balanced.
    threads.push((key(1, 5), 1.0, 5));
    let second = tick(&mut p, &t, &mut threads, true);
    assert_eq!(second.moves.len(), 1);
    assert_eq!(
        (second.moves[0].thread, node_of(&second.moves[0])),
        (key(1, 5), 1)
    );
    assert_eq!(second.moves[0].why, Reason::Initial);
    assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
    // Thread 3 exits and its tid is reused by a new thread (another start time) on node 1:
    // the old key is forgotten, the new one adopted.
    threads.retain(|th| th.0 != key(1, 3));
    let reused = ThreadKey {
        start_time: 2,
        ..key(1, 3)
    };
    threads.push((reused, 1.0, 6));
    let third = tick(&mut p, &t, &mut threads, true);
    assert_eq!(adoptions(&third).len(), 1);
    assert_eq!(third.moves[0].thread, reused);
    assert!(!p.placed.contains_key(&key(1, 3)));
    assert_eq!(p.placed.get(&reused), Some(&1));
    assert_eq!(p.totals().adopted, 5);
    threads.clear();
    assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
    assert!(p.placed.is_empty());
}

/// Two nodes of 16 CPUs: `on0` threads on node 0, each running `util` and waiting `wait`
/// of the window; `on1` threads at full speed on node 1, the first of them process 1's
/// leader (so the enhanced selections may take node 0's threads to it).
fn two_big_nodes(on0: usize, util: f64, wait: f64, on1: usize) -> (Topology, Window) {
    let t = topo(2, 1, 16, 1);
    let mut threads: Vec<T> = (0..on1)
        .map(|i| (key(1, 1 + i as i32), 1.0, 16 + (i % 16) as u32))
        .collect();
    threads.extend((0..on0).map(|i| (key(1, 100 + i as i32), util, (i % 16) as u32)));
    let mut w = window_of(100, &threads);
    for th in &mut w.threads {
        if th.key.tid.0 >= 100 {
            th.latency = wait;
        }
    }
    (t, w)
}

#[test]
fn numa_balance_moves_a_waiting_thread_to_an_idle_cpu_below_the_load_thresholds() {
    // 17 threads share node 0's 16 CPUs: each ran 16/17 of the window and waited 1/17, one
    // thread's worth of waiting in all. Node 1 runs 15: one CPU idles. The load rule
    // tolerates it (17 − 15 = 2 > 1 but 17 < 1.25 · 15 = 18.75); an idle CPU next to a
    // queue is not tolerated: one move, after which node 1 has no idle CPU left.
    let (t, w) = two_big_nodes(17, 16.0 / 17.0, 1.0 / 17.0, 15);
    for s in Selection::ALL {
        let mut p = policy(s);
        let moved = balancing(&p.decide(&t, &w));
        assert_eq!(moved.len(), 1, "{}", s.name());
        assert_eq!(
            moved[0].why,
            Reason::NumaBalance {
                from: NodeId(0),
                to: NodeId(1)
            }
        );
        assert!(moved[0].thread.tid.0 >= 100);
    }
    // 17 threads that block half the time (a barrier) and never wait for a CPU: no queue.
    let (t, w) = two_big_nodes(17, 0.5, 0.0, 15);
    assert!(balancing(&policy(Selection::FirstFit).decide(&t, &w)).is_empty());
    // A queue but no idle CPU on node 1 (16 threads), and 17 − 16 = 1: nothing to do.
    let (t, w) = two_big_nodes(17, 16.0 / 17.0, 1.0 / 17.0, 16);
    assert!(balancing(&policy(Selection::FirstFit).decide(&t, &w)).is_empty());
}

#[test]
fn numa_balance_registry_builds_every_selection_and_rejects_bad_settings() {
    let t = topo(2, 1, 4, 1);
    for s in Selection::ALL {
        let built = crate::build(s.policy_name(), &Settings::new(Level::Node), &t).unwrap();
        assert_eq!(built.name(), s.policy_name());
        assert!(crate::names().contains(&s.policy_name()));
    }
    assert!(matches!(
        build("numa-nonesuch", &Settings::new(Level::Node)),
        Err(PolicyError::Unknown { .. })
    ));
    for bad in [
        NumaSettings {
            max_moves: 0,
            ..NumaSettings::default()
        },
        NumaSettings {
            imbalance_pct: -0.1,
            ..NumaSettings::default()
        },
        NumaSettings {
            min_imbalance: f64::NAN,
            ..NumaSettings::default()
        },
    ] {
        let mut settings = Settings::new(Level::Node);
        settings.numa = bad;
        assert!(matches!(
            crate::build("numa-excl", &settings, &t),
            Err(PolicyError::Invalid {
                policy: "numa-excl",
                ..
            })
        ));
    }
}
