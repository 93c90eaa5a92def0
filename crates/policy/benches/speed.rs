//! How long one `speed` decision takes at the fastest interval (1 ms), with 64, 256 and
//! 1024 threads, in the rotation's busiest shape: N threads on M = 3N/4 cores, so a third
//! of the cores hold two threads and every round plans swaps for all of them.
//!
//! Each iteration is one 1 ms window, so every call runs a round: it merges the window,
//! updates the credits, sorts the heavy and light threads and swaps. The threads' run-queue
//! waits follow the policy's own placement (half of every 1 ms window waiting on a core
//! with two threads), as on a machine whose scheduler shares each core fairly.
//!
//! The budget (issue: ≤ 1 % of one core with 64 threads and ≤ 3 % with 1024 at the fastest
//! interval) is 10 µs and 30 µs per 1 ms decision; sampling `/proc` is measured apart
//! (`threadbalance-linux`'s `sample` bench).
//!
//! Run: `cargo bench -p threadbalance-policy --bench speed -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use threadbalance_model::testutil::window;
use threadbalance_model::{Level, Nanos, Target, Topology};
use threadbalance_policy::speed::Speed;
use threadbalance_policy::{Policy, Settings};

const SIZES: [usize; 3] = [64, 256, 1024];

fn decide(c: &mut Criterion) {
    let mut group = c.benchmark_group("speed");
    for n in SIZES {
        let cores = n * 3 / 4;
        let topo = Topology::synthetic(&format!("package:1 core:{cores} pu:1"))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut s = Settings::new(Level::Core);
        s.interval = Some(Nanos::from_millis(1));
        let mut policy = Speed::new(&s, &topo).unwrap_or_else(|e| panic!("{e}"));
        let mut w = window(2, &vec![1.0; n], &vec![0; n]);
        let mut core = vec![0usize; n];
        let mut load = vec![0u32; cores];
        let mut at = Nanos::ZERO;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                w.start = at;
                at += Nanos::from_millis(1);
                w.end = at;
                for (i, t) in w.threads.iter_mut().enumerate() {
                    let shared = load.get(core[i]).is_some_and(|&l| l > 1);
                    t.speed = if shared { 0.5 } else { 1.0 };
                    t.util = t.speed;
                    t.latency = 1.0 - t.speed;
                    t.appeared = false;
                }
                let plan = policy.decide(&topo, black_box(&w));
                for m in &plan.moves {
                    if let Target::Domain { index, .. } = m.to {
                        let i = (m.thread.tid.0 - 100) as usize;
                        if let Some(old) = load.get_mut(core[i]) {
                            *old = old.saturating_sub(1);
                        }
                        core[i] = index;
                        load[index] += 1;
                    }
                }
                black_box(plan)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, decide);
criterion_main!(benches);
