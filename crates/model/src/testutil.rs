//! Test machines and windows built from values, for policy tests in other crates.
//! Enabled by the `testutil` feature (dev-dependencies only).

use crate::{CpuId, Nanos, Pid, Sample, Snapshot, ThreadKey, Tid, Topology, Window};

/// A synthetic machine of `packages` × `nodes` per package × `cores` per node × `smt` PUs.
///
/// # Panics
/// If the shape is out of range (tests only).
#[allow(clippy::expect_used)]
pub fn topo(packages: u32, nodes: u32, cores: u32, smt: u32) -> Topology {
    Topology::synthetic(&format!(
        "package:{packages} numa:{nodes} core:{cores} pu:{smt}"
    ))
    .expect("valid synthetic topology")
}

/// The key of thread `tid` of process `pid`, started at tick 1.
pub fn key(pid: i32, tid: i32) -> ThreadKey {
    ThreadKey {
        pid: Pid(pid),
        tid: Tid(tid),
        start_time: 1,
    }
}

/// A window of `dt_ms` in which thread `i` of process 1 (tid 100 + i) had utilization
/// `utils[i]`, waited `latency[i]` (0 if absent) and last ran on CPU `cpus[i]`.
pub fn window(dt_ms: u64, utils: &[f64], cpus: &[u32]) -> Window {
    let threads: Vec<(ThreadKey, f64, u32)> = utils
        .iter()
        .zip(cpus)
        .enumerate()
        .map(|(i, (&u, &c))| (key(1, 100 + i as i32), u, c))
        .collect();
    window_of(dt_ms, &threads)
}

/// A window of `dt_ms` from `(thread, util, last cpu)` triples.
pub fn window_of(dt_ms: u64, threads: &[(ThreadKey, f64, u32)]) -> Window {
    let dt = Nanos::from_millis(dt_ms);
    let mut prev = Snapshot::default();
    let mut cur = Snapshot {
        at: dt,
        ..Snapshot::default()
    };
    for &(k, u, c) in threads {
        let base = Sample {
            key: k,
            last_cpu: CpuId(c),
            ..Sample::default()
        };
        prev.threads.push(base);
        cur.threads.push(Sample {
            run: Nanos((u * dt.0 as f64).round() as u64),
            ..base
        });
    }
    prev.sort();
    cur.sort();
    let mut w = Window::default();
    w.update(&prev, &cur);
    w
}
