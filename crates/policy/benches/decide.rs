//! How long one `decide` takes, for the policies that regroup every thread: Tumbler
//! (target ≤ 5 µs for 64 threads; the paper measured 28 µs for its grouping step) and
//! Shuffling, on the papers' 4-package machine (`package:4 core:16 pu:1`).
//!
//! Each iteration alternates between two windows whose utilizations (and so lock times)
//! are reversed, so every decision regroups and moves threads rather than confirming the
//! placement it made last time.
//!
//! Run: `cargo bench -p threadbalance-policy --bench decide -- --warm-up-time 1 --measurement-time 3`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use threadbalance_model::testutil::window;
use threadbalance_model::{Level, Nanos, Topology, Window};
use threadbalance_policy::shuffling::Shuffling;
use threadbalance_policy::tumbler::Tumbler;
use threadbalance_policy::{Policy, Settings};

const SIZES: [usize; 3] = [64, 1024, 10_000];

/// Two windows of `n` threads on 64 CPUs with spread-out utilizations (CV ≈ 0.5), the
/// second with the utilizations reversed. Each thread sits on a CPU ranked by its
/// utilization in the first window, so the packages are far from balanced in both (Tumbler
/// leaves balanced packages alone).
fn windows(n: usize, dt_ms: u64) -> [Window; 2] {
    let utils: Vec<f64> = (0..n)
        .map(|i| 0.1 + 0.8 * ((i * 37) % n) as f64 / n as f64)
        .collect();
    let reversed: Vec<f64> = utils.iter().rev().copied().collect();
    let cpus: Vec<u32> = utils
        .iter()
        .map(|u| (((u - 0.1) / 0.8 * 64.0) as u32).min(63))
        .collect();
    [
        window(dt_ms, &utils, &cpus),
        window(dt_ms, &reversed, &cpus),
    ]
}

fn bench(c: &mut Criterion, name: &str, dt_ms: u64, make: &dyn Fn() -> Box<dyn Policy>) {
    let topo = Topology::synthetic("package:4 core:16 pu:1").unwrap_or_else(|e| panic!("{e}"));
    let mut group = c.benchmark_group(name);
    for n in SIZES {
        let ws = windows(n, dt_ms);
        let mut policy = make();
        let mut which = 0;
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                which ^= 1;
                black_box(policy.decide(&topo, black_box(&ws[which])))
            })
        });
    }
    group.finish();
}

fn decide(c: &mut Criterion) {
    bench(c, "tumbler", 100, &|| {
        Box::new(Tumbler::new(&Settings::new(Level::Package)))
    });
    // Shuffle at every window, so each decision sorts, groups and assigns.
    bench(c, "shuffling", 200, &|| {
        let mut s = Settings::new(Level::Package);
        s.shuffle_interval = Nanos::from_millis(200);
        Box::new(Shuffling::new(&s))
    });
}

criterion_group!(benches, decide);
criterion_main!(benches);
