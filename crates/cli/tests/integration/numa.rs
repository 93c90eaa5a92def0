//! NUMA selection on a multi-node machine read from fixtures: the topology of a 2-socket,
//! 4-node machine from its `/sys` tree, a process's memory per node from its `numa_maps`,
//! and the policies' choice of which thread moves off an overloaded node. The balancer also
//! adopts every thread it sees for the first time, confining it to the node it runs on
//! (`Reason::Initial`): those moves keep a thread where it is and are checked apart.

use std::path::PathBuf;
use threadbalance_linux::{Root, read_numa_balancing, read_process_memory, read_topology};
use threadbalance_model::testutil::{key, window_of};
use threadbalance_model::{CpuId, Level, Move, NodeId, Pid, ProcessMemory, Reason, Target};
use threadbalance_policy::{Settings, build};

fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures"))
}

#[test]
fn numa_fixture_machine_moves_threads_off_the_crowded_node_by_memory() {
    let topo = read_topology(&Root::new(fixtures().join("topo/2s-4n-32c-smt2"))).unwrap();
    assert_eq!(topo.domains(Level::Node).len(), 4);
    let proc_root = Root::new(fixtures().join("proc/numa-4n"));
    assert_eq!(read_numa_balancing(&proc_root), Some(true));
    // Process 777 has most of its memory on node 1 (8 MiB) and least on node 0 (4.1 MiB).
    let omp = read_process_memory(&proc_root, Pid(777), 4096).unwrap();
    assert_eq!(omp.on_node(NodeId(1)), 8_388_608);
    assert_eq!(omp.on_node(NodeId(0)), 4_317_184);
    // A second process whose memory is all on node 0.
    let other = ProcessMemory {
        pid: Pid(900),
        bytes_per_node: vec![(NodeId(0), 64 << 20)],
    };
    // Eight busy threads crowd node 0: 777's leader and five of its threads, and two
    // threads of 900, whose leader runs on node 1.
    let first_cpu = |node: usize| topo.domains(Level::Node)[node].cpus.first().unwrap().0;
    let mut threads = vec![(key(777, 777), 1.0, first_cpu(0))];
    threads.extend((1..=5).map(|i| (key(777, 777 + i), 1.0, first_cpu(0))));
    threads.push((key(900, 900), 1.0, first_cpu(1)));
    threads.extend((1..=2).map(|i| (key(900, 900 + i), 1.0, first_cpu(0))));
    let mut w = window_of(100, &threads);
    w.memory = vec![omp, other];

    for name in ["numa-mb", "numa-mb-plus", "numa-excl"] {
        let mut p = build(name, &Settings::new(Level::Node), &topo).unwrap();
        let plan = p.decide(&topo, &w);
        // Adoption: each of the 9 threads not moved is confined to the node it runs on.
        let (adopted, moves): (Vec<Move>, Vec<Move>) =
            plan.moves.iter().partition(|m| m.why == Reason::Initial);
        for m in &adopted {
            let (_, _, cpu) = threads.iter().find(|t| t.0 == m.thread).unwrap();
            let here = topo.domain_of(CpuId(*cpu), Level::Node);
            assert_eq!(
                m.to,
                Target::Domain {
                    level: Level::Node,
                    index: here.unwrap()
                },
                "{name}: adoption keeps {m:?} on its node"
            );
        }
        assert_eq!(adopted.len() + moves.len(), threads.len(), "{name}");
        assert!(
            !moves.is_empty(),
            "{name}: node 0 has 8 threads, nodes 2 and 3 none"
        );
        for m in &moves {
            assert!(
                matches!(
                    m.why,
                    Reason::NumaBalance {
                        from: NodeId(0),
                        ..
                    }
                ),
                "{name}: {m:?}"
            );
            let Target::Domain { level, index } = m.to else {
                panic!("{name}: moves go to a node: {m:?}");
            };
            assert_eq!(level, Level::Node);
            assert_ne!(index, 0, "{name}: nothing moves onto the crowded node");
        }
        let first = moves[0].thread;
        if name == "numa-mb" {
            // MB's benefit RSS(dest) − RSS(src) with dest node 2: 777 gains
            // 6291456 − 4317184 > 0, 900 loses 64 MiB: one of 777's threads goes first.
            assert_eq!(first.pid, Pid(777), "{name}: {moves:?}");
        } else {
            // The enhanced procedure skips 777's threads (their leader is on the source),
            // never moves a leader, and evaluates 900's (its leader is on another node).
            assert_eq!(first.pid, Pid(900), "{name}: {moves:?}");
            assert!(moves.iter().all(|m| !m.thread.is_leader()), "{name}");
            assert!(moves.iter().all(|m| m.thread.pid == Pid(900)), "{name}");
        }
    }
}

#[test]
fn numa_on_this_one_node_machine_says_there_is_nothing_to_balance() {
    let topo = threadbalance_model::Topology::synthetic("package:1 core:2 pu:1").unwrap();
    let mut p = build("numa-mb-plus", &Settings::new(Level::Node), &topo).unwrap();
    let w = window_of(
        100,
        &[
            (key(1, 1), 1.0, 0),
            (key(1, 2), 1.0, 0),
            (key(1, 3), 1.0, 1),
        ],
    );
    let plan = p.decide(&topo, &w);
    assert!(plan.moves.is_empty());
    let note = plan.note.unwrap_or_default();
    assert!(note.contains("nothing to balance between nodes"), "{note}");
}
