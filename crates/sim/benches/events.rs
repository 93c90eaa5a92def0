//! Event-loop throughput: events handled per second on the papers' workloads.
//! The target is ≥ 5 million events per second (release build).
#![allow(missing_docs, clippy::unwrap_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use threadbalance_model::Nanos;
use threadbalance_sim::{RunOptions, Sim, machine, workload};

fn events(c: &mut Criterion) {
    let m = machine("opteron6272-4x16", None).unwrap();
    let mut g = c.benchmark_group("events");
    for name in [
        "bodytrack:frames=20",
        "ferret-pipeline:items=1000",
        "streamcluster:phases=40",
    ] {
        let w = workload(name, Some(64), None).unwrap();
        // Count the events of one run to report throughput in events/s.
        let mut probe = Sim::new(&m, &w, &RunOptions::new(1));
        probe.run_until(Nanos::from_secs(120));
        g.throughput(Throughput::Elements(probe.events()));
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
                sim.run_until(Nanos::from_secs(120));
                black_box(sim.events())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = events
}
criterion_main!(benches);
