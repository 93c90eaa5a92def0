//! Selection cost of the `numa-*` policies for run queues of 10, 100 and 1000 threads.
//!
//! Selection sits on the balancer's hot path (the paper's §3.2: the kernel holds both run
//! queues' locks while it runs). Each run queue holds the runnable threads of several
//! processes (1–32 threads each) on the source node of a four-node machine (the Opteron
//! 6320 testbed's shape), in key order as the balancer builds it; node 0 is the source and
//! node 1 the destination. Two shapes:
//!
//! * `mixed`: the processes' leaders go round-robin over nodes 0, 2, 3, 1, so a quarter of
//!   the processes have their leader on the destination and the first of them is the fourth
//!   process in the queue (where it is expected when leaders sit on random nodes).
//! * `no-leader-on-destination`: leaders go round-robin over nodes 0, 2, 3, so the enhanced
//!   procedure cannot stop early and must walk the whole queue (its worst case).
//!
//! Process sizes are drawn from 1–32 threads (1–3 for the 10-thread queue, so that it too
//! holds several processes); a quarter of each process's threads are on random nodes.
//!
//! Run: `cargo bench -p threadbalance-policy --bench numa_select -- --warm-up-time 1
//! --measurement-time 2`. Before measuring, it prints how many threads each selection
//! examined and evaluated.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use threadbalance_model::{Pid, ThreadKey, Tid};
use threadbalance_policy::numa_select::{Candidate, Group, RunQueue, Selection};
use threadbalance_policy::rng::Rng;

const NODES: usize = 4;
const SRC: usize = 0;
const DST: usize = 1;
const SIZES: [usize; 3] = [10, 100, 1000];

/// A run queue of `n` threads on node 0; some leaders on the destination if `dst_leaders`.
fn run_queue(n: usize, dst_leaders: bool, seed: u64) -> (Vec<Candidate>, Vec<Group>) {
    let mut rng = Rng::new(seed);
    let mut candidates = Vec::with_capacity(n);
    let mut groups = Vec::new();
    while candidates.len() < n {
        let g = groups.len();
        let pid = 1000 * (g as i32 + 1);
        let size = 1 + rng.below((n as u64 / 3).clamp(1, 32)) as usize;
        let leader_node = if dst_leaders {
            [SRC, 2, 3, DST][g % 4]
        } else {
            [SRC, 2, 3][g % 3]
        };
        let mut group = Group::new(Pid(pid), NODES);
        group.leader_node = Some(leader_node);
        // The leader on its node; the other threads mostly on the source, some elsewhere.
        group.threads_per_node[leader_node] += 1;
        let mut queued = Vec::new();
        if leader_node == SRC {
            queued.push(pid);
        }
        for t in 1..size {
            let node = if rng.below(4) == 0 {
                rng.below(NODES as u64) as usize
            } else {
                SRC
            };
            group.threads_per_node[node] += 1;
            if node == SRC {
                queued.push(pid + t as i32);
            }
        }
        for k in 0..NODES {
            group.rss[k] = rng.below(1 << 30);
        }
        group.rss[leader_node] += 1 << 30;
        group.rss_total = group.rss.iter().sum();
        for tid in queued {
            if candidates.len() < n {
                candidates.push(Candidate {
                    key: ThreadKey {
                        pid: Pid(pid),
                        tid: Tid(tid),
                        start_time: 1,
                    },
                    group: g,
                });
            }
        }
        groups.push(group);
    }
    (candidates, groups)
}

fn bench(c: &mut Criterion) {
    for (label, dst_leaders) in [("mixed", true), ("no-leader-on-destination", false)] {
        let queues: Vec<(usize, Vec<Candidate>, Vec<Group>)> = SIZES
            .iter()
            .map(|&n| {
                let (cand, groups) = run_queue(n, dst_leaders, 42);
                (n, cand, groups)
            })
            .collect();
        for (n, cand, groups) in &queues {
            let rq = RunQueue {
                src: SRC,
                dst: DST,
                candidates: cand,
                groups,
            };
            for s in Selection::ALL {
                let sel = s.select(&rq);
                eprintln!(
                    "{label:>24} n={n:<4} groups={:<3} {:<10} examined={:<4} evaluated={:<4} chose={:?}",
                    groups.len(),
                    s.name(),
                    sel.counts.examined,
                    sel.counts.evaluated,
                    sel.choice.map(|c| (c.key.pid.0, c.key.tid.0)),
                );
            }
        }
        let mut group = c.benchmark_group(format!("numa_select/{label}"));
        for (n, cand, groups) in &queues {
            let rq = RunQueue {
                src: SRC,
                dst: DST,
                candidates: cand,
                groups,
            };
            for s in Selection::ALL {
                group.bench_with_input(BenchmarkId::new(s.name(), n), &rq, |b, rq| {
                    b.iter(|| black_box(s.select(black_box(rq))));
                });
            }
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
