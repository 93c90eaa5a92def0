//! The SPLASH-2x programs of PARSEC 3.0 (and PARSEC's `vips`) in `parsec-mix`: with them
//! the mix runs the paper's experiment of 29 programs at once (Chiang & Su 2021, §4.2)
//! minus its three network programs, which need a client. Table 2 of the paper says who
//! first touches their memory: the thread group leader for twelve of the SPLASH-2x
//! programs, the individual threads for `fmm`, `water_nsquared` and `vips`.
//!
//! Each program's input is fixed (times `scale`) and split among its `n` workers, as in
//! [`crate::parsec`]: a *phase* program runs its phases in lock step (a barrier after each)
//! and splits each phase's work; an *item* program takes its items one at a time from a
//! mutex-protected task queue.
//!
//! | program | Table 2 | start | shape | memory-bound | memory |
//! |---|---|---|---|---|---|
//! | barnes | leader | 0 s | 400 time steps of 48 ms (tree insertions under a mutex) | 30 % | 250 MB |
//! | cholesky | leader | 0.5 s | 1 600 supernode tasks of 1.5 ms from a task queue | 40 % | 300 MB |
//! | fft | leader | 1 s | 60 transpose-and-butterfly phases of 160 ms | 70 % | 800 MB |
//! | fmm | thread | 1.5 s | 300 steps of 64 ms | 30 % | 40 MB per thread |
//! | lu_cb | leader | 0 s | 500 block steps of 32 ms, contiguous blocks | 20 % | 200 MB |
//! | lu_ncb | leader | 2 s | 500 block steps of 32 ms, non-contiguous blocks | 50 % | 200 MB |
//! | ocean_cp | leader | 0.5 s | 900 grid sweeps of 24 ms | 70 % | 900 MB |
//! | ocean_ncp | leader | 3 s | 900 grid sweeps of 24 ms | 75 % | 900 MB |
//! | radiosity | leader | 1 s | 6 000 patch tasks of 2 ms from a task queue | 20 % | 300 MB |
//! | radix | leader | 2.5 s | 40 permutation phases of 200 ms | 70 % | 1 000 MB |
//! | raytrace | leader | 1.5 s | 8 000 ray bundles of 2 ms from a task queue | 40 % | 600 MB |
//! | volrend | leader | 3.5 s | 4 000 tiles of 2.5 ms from a task queue | 30 % | 100 MB |
//! | water_nsquared | thread | 0 s | 200 steps of 64 ms, then a molecule update under a mutex | 20 % | 20 MB per thread |
//! | water_spatial | leader | 2 s | 300 steps of 48 ms | 25 % | 100 MB |
//! | vips (PARSEC) | thread | 3 s | 1 500 image tiles of 2 ms from a task queue | 40 % | 30 MB per thread |
//!
//! `ms` of a phase is the whole phase's work, split among the workers. Like the PARSEC
//! programs, these are rough shapes (phases, barriers, task queues, how memory-bound),
//! not measurements; `cholesky` and `vips` are short on purpose ("their running time is
//! too short", §4.3.4).

use crate::kit::{Program, barrier, lock, steps, work, workers};

/// What one program's workers do.
#[derive(Clone, Copy)]
enum Shape {
    /// `phases` phases of `ms` of work in all (each worker `ms / n`), a barrier after
    /// each; with `lock`, a critical section of `us` µs over `lines` cache lines in each
    /// phase (before the work when `lock_first`).
    Phases {
        ms: f64,
        phases: f64,
        lock: Option<(f64, u32)>,
        lock_first: bool,
    },
    /// `items` items of `ms` each, taken one at a time under the task-queue mutex.
    Items { items: f64, ms: f64 },
}

struct Spec {
    name: &'static str,
    leader_touch: bool,
    start_s: f64,
    setup_ms: f64,
    shape: Shape,
    spread: f32,
    mem: f32,
    memory_mb: u32,
}

const fn phases(ms: f64, phases: f64) -> Shape {
    Shape::Phases {
        ms,
        phases,
        lock: None,
        lock_first: false,
    }
}

const SPECS: [Spec; 15] = [
    Spec {
        name: "splash2x.barnes",
        leader_touch: true,
        start_s: 0.0,
        setup_ms: 300.0,
        shape: Shape::Phases {
            ms: 48.0,
            phases: 400.0,
            lock: Some((1.0, 8)),
            lock_first: true,
        },
        spread: 0.2,
        mem: 0.3,
        memory_mb: 250,
    },
    Spec {
        name: "splash2x.cholesky",
        leader_touch: true,
        start_s: 0.5,
        setup_ms: 200.0,
        shape: Shape::Items {
            items: 1600.0,
            ms: 1.5,
        },
        spread: 0.5,
        mem: 0.4,
        memory_mb: 300,
    },
    Spec {
        name: "splash2x.fft",
        leader_touch: true,
        start_s: 1.0,
        setup_ms: 400.0,
        shape: phases(160.0, 60.0),
        spread: 0.05,
        mem: 0.7,
        memory_mb: 800,
    },
    Spec {
        name: "splash2x.fmm",
        leader_touch: false,
        start_s: 1.5,
        setup_ms: 100.0,
        shape: phases(64.0, 300.0),
        spread: 0.3,
        mem: 0.3,
        memory_mb: 40,
    },
    Spec {
        name: "splash2x.lu_cb",
        leader_touch: true,
        start_s: 0.0,
        setup_ms: 150.0,
        shape: phases(32.0, 500.0),
        spread: 0.2,
        mem: 0.2,
        memory_mb: 200,
    },
    Spec {
        name: "splash2x.lu_ncb",
        leader_touch: true,
        start_s: 2.0,
        setup_ms: 150.0,
        shape: phases(32.0, 500.0),
        spread: 0.2,
        mem: 0.5,
        memory_mb: 200,
    },
    Spec {
        name: "splash2x.ocean_cp",
        leader_touch: true,
        start_s: 0.5,
        setup_ms: 300.0,
        shape: phases(24.0, 900.0),
        spread: 0.1,
        mem: 0.7,
        memory_mb: 900,
    },
    Spec {
        name: "splash2x.ocean_ncp",
        leader_touch: true,
        start_s: 3.0,
        setup_ms: 300.0,
        shape: phases(24.0, 900.0),
        spread: 0.1,
        mem: 0.75,
        memory_mb: 900,
    },
    Spec {
        name: "splash2x.radiosity",
        leader_touch: true,
        start_s: 1.0,
        setup_ms: 200.0,
        shape: Shape::Items {
            items: 6000.0,
            ms: 2.0,
        },
        spread: 0.6,
        mem: 0.2,
        memory_mb: 300,
    },
    Spec {
        name: "splash2x.radix",
        leader_touch: true,
        start_s: 2.5,
        setup_ms: 200.0,
        shape: phases(200.0, 40.0),
        spread: 0.05,
        mem: 0.7,
        memory_mb: 1000,
    },
    Spec {
        name: "splash2x.raytrace",
        leader_touch: true,
        start_s: 1.5,
        setup_ms: 400.0,
        shape: Shape::Items {
            items: 8000.0,
            ms: 2.0,
        },
        spread: 0.5,
        mem: 0.4,
        memory_mb: 600,
    },
    Spec {
        name: "splash2x.volrend",
        leader_touch: true,
        start_s: 3.5,
        setup_ms: 150.0,
        shape: Shape::Items {
            items: 4000.0,
            ms: 2.5,
        },
        spread: 0.5,
        mem: 0.3,
        memory_mb: 100,
    },
    Spec {
        name: "splash2x.water_nsquared",
        leader_touch: false,
        start_s: 0.0,
        setup_ms: 100.0,
        shape: Shape::Phases {
            ms: 64.0,
            phases: 200.0,
            lock: Some((2.0, 8)),
            lock_first: false,
        },
        spread: 0.2,
        mem: 0.2,
        memory_mb: 20,
    },
    Spec {
        name: "splash2x.water_spatial",
        leader_touch: true,
        start_s: 2.0,
        setup_ms: 150.0,
        shape: phases(48.0, 300.0),
        spread: 0.2,
        mem: 0.25,
        memory_mb: 100,
    },
    Spec {
        name: "vips",
        leader_touch: false,
        start_s: 3.0,
        setup_ms: 100.0,
        shape: Shape::Items {
            items: 1500.0,
            ms: 2.0,
        },
        spread: 0.3,
        mem: 0.4,
        memory_mb: 30,
    },
];

/// The fifteen programs with `n` workers each, inputs times `scale` (more items, or more
/// work in each phase).
pub(crate) fn programs(n: usize, scale: f64) -> Vec<Program> {
    let n = n.max(1);
    SPECS
        .iter()
        .map(|p| {
            let (ops, iterations) = match p.shape {
                Shape::Phases {
                    ms,
                    phases,
                    lock: cs,
                    lock_first,
                } => {
                    let mut ops = vec![work(ms * scale / n as f64, p.spread, p.mem)];
                    if let Some((us, lines)) = cs {
                        let at = if lock_first { 0 } else { 1 };
                        ops.insert(at, lock(0, us, lines));
                    }
                    ops.push(barrier());
                    (ops, steps(phases, 1.0))
                }
                Shape::Items { items, ms } => (
                    vec![lock(0, 1.0, 4), work(ms, p.spread, p.mem)],
                    steps(items / n as f64, scale),
                ),
            };
            Program {
                name: p.name,
                leader_touch: p.leader_touch,
                start_s: p.start_s,
                setup_ms: p.setup_ms,
                groups: vec![workers("worker", n, ops, iterations)],
                queues: vec![],
                memory_mb: p.memory_mb,
                footprint_kb: 512,
                master_works: false,
            }
        })
        .collect()
}
