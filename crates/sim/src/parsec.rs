//! `parsec-mix`: the experiment of Chiang & Su (Appl. Sci. 2021, §4.2): many PARSEC
//! programs run at once on the 4-node Opteron 6320 so that the kernel must move threads
//! between nodes, and *which* thread it moves decides how much memory becomes remote.
//!
//! Each application is a pthreads program: a main thread (the thread group leader, tid =
//! pid) reads its input (a memory-bound setup phase: the first touch of the shared data),
//! creates its workers, and sleeps in `pthread_join` until they exit. Every program has
//! [`WORKERS`] (16) workers, the paper's analysed test case (`threads=N` sets 1–32), and a
//! fixed input (PARSEC's "native" set) split among them: more workers, less work each.
//! Table 2 of the paper says who first touches each program's memory:
//!
//! | program | Table 2 | start | the input, split among the workers | memory-bound | memory |
//! |---|---|---|---|---|---|
//! | blackscholes | leader | 0 s | 6 240 chunks of 8 ms of option pricing, no synchronization | 25 % | 600 MB shared |
//! | swaptions | leader | 0 s | 4 800 swaptions of 18 ms | 5 % | 50 MB shared |
//! | canneal | leader | 0.5 s | 330 temperature steps of 40 ms of random netlist swaps, barrier | 85 % | 900 MB shared |
//! | streamcluster | leader | 1 s | 540 phases of 64 ms (±50 % per worker), a shared-gain update under a mutex, barrier | 60 % | 250 MB shared |
//! | bodytrack | leader | 1.5 s | 540 frame steps: a particle taken under the work-queue mutex, 40 ms (±40 %) of likelihood, barrier | 30 % | 150 MB shared |
//! | raytrace | leader | 3 s | 10 800 tiles of 2 ms (±50 %) taken under the task-queue mutex (BVH) | 40 % | 700 MB shared |
//! | dedup | leader | 1 s | a pipeline of 7 200 chunks: fragment (1 thread) → compress (the workers, 1.2 ms) → write (1), bounded queues | 40 % | 700 MB shared |
//! | facesim | thread | 2 s | 420 steps of 48 ms, barrier | 50 % | 40 MB per thread |
//! | fluidanimate | thread | 0 s | 750 steps of 48 ms, a cell mutex, barrier | 50 % | 30 MB per thread |
//! | ferret | thread | 2.5 s | 4 500 queries through Tumbler Table I's stages (segment, extract, vector, rank: a quarter of the workers each) | rank 70 % | 60 MB per thread |
//! | freqmine | thread | 0.5 s | OpenMP, the leader works too: 300 steps of 40 ms, barrier | 50 % | 100 MB per thread |
//! | x264 | thread | 4 s | 360 frames of 15 ms, a frame-dependency mutex | 30 % | 60 MB per thread |
//!
//! With the SPLASH-2x programs and `vips` of [`crate::splash2x`] that makes 27 programs, the
//! paper's 29 but its network programs: 462 threads on 32 CPUs, starting over 4 s and
//! ending at different times. The run queues are long, the nodes' loads drift apart as
//! programs start, wait and finish, and the numa-* balancers have candidates to choose
//! from. Durations are rough shapes of the programs (compute and memory phases, barriers,
//! locks, pipelines), not measurements; `scale` multiplies every program's input (its
//! items, or the work of each of its phases).
//!
//! Nothing here names an outcome: run times and remote fractions emerge from where the
//! pages were first touched (and where automatic NUMA balancing moves them later), where
//! the threads run, and the NUMA factor (1.6 on `opteron6320-4x8`) that slows the
//! memory-bound part of remote work.

use crate::workload::{App, Group, Op, QueueSpec, Wait};

const MS: f64 = 1e6;
const US: f64 = 1e3;
const MB: u32 = 1024;

fn ns(x: f64) -> u64 {
    x.round() as u64
}

pub(crate) fn work(ms: f64, spread: f32, mem: f32) -> Op {
    Op::Compute {
        ns: ns(ms * MS),
        spread,
        mem,
    }
}

pub(crate) fn lock(lock: u16, us: f64, lines: u32) -> Op {
    Op::Lock {
        lock,
        hold_ns: ns(us * US),
        lines,
    }
}

pub(crate) fn barrier() -> Op {
    Op::Barrier {
        barrier: 0,
        wait: Wait::Block,
    }
}

pub(crate) fn steps(n: f64, scale: f64) -> u64 {
    (n * scale).round().max(1.0) as u64
}

/// One PARSEC-like program: who first touches, when it starts, how long the main thread
/// reads its input, its worker groups, queues and memory.
pub(crate) struct Program {
    pub name: &'static str,
    pub leader_touch: bool,
    pub start_s: f64,
    pub setup_ms: f64,
    pub groups: Vec<Group>,
    pub queues: Vec<QueueSpec>,
    pub memory_mb: u32,
    pub footprint_kb: u32,
    /// OpenMP: the leader is the first worker (no separate main thread).
    pub master_works: bool,
}

impl Program {
    pub(crate) fn app(self) -> App {
        let mut groups = Vec::with_capacity(self.groups.len() + 1);
        if !self.master_works {
            groups.push(Group {
                name: "main".into(),
                threads: 1,
                ops: vec![work(self.setup_ms, 0.1, 0.9)],
                iterations: Some(1),
            });
        }
        groups.extend(self.groups);
        App {
            name: self.name.to_string(),
            groups,
            queues: self.queues,
            footprint_kb: self.footprint_kb,
            llc_working_set_kb: 0,
            spin_ns: 10_000,
            shared_data: self.leader_touch,
            memory_kb: self.memory_mb * MB,
            start_ns: ns(self.start_s * 1e9),
            main_thread: !self.master_works,
        }
    }
}

pub(crate) fn workers(name: &str, threads: usize, ops: Vec<Op>, iterations: u64) -> Group {
    Group {
        name: name.into(),
        threads,
        ops,
        iterations: Some(iterations),
    }
}

/// Workers of each program unless `threads` says otherwise: the paper's 16-thread test case,
/// the one its Figures 13 and 14 analyse ("a sufficient number of threads must be run
/// simultaneously on the system").
pub const WORKERS: usize = 16;

/// The applications of `parsec-mix` (see the module docs); `threads` gives every program
/// that many workers (the paper's test cases of 1–32 threads each; [`WORKERS`] by default),
/// `scale` multiplies their inputs.
pub fn parsec_mix(threads: Option<usize>, scale: f64) -> Vec<App> {
    let n = threads.unwrap_or(WORKERS).max(1);
    // A program's input is fixed (PARSEC's "native" set, times `scale`) and split among its
    // workers: `items(total)` independent items each, or `split(ms)` of each phase's work
    // each, phases in lock step (`phases(k)`: as many whatever the input).
    let s = |x: f64| steps(x, scale);
    let items = |total: f64| total / n as f64;
    let split = |ms: f64| ms * scale / n as f64;
    let phases = |k: f64| steps(k, 1.0);
    let mut programs = vec![
        Program {
            name: "blackscholes",
            leader_touch: true,
            start_s: 0.0,
            setup_ms: 300.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(8.0, 0.1, 0.25)],
                s(items(6240.0)),
            )],
            queues: vec![],
            memory_mb: 600,
            footprint_kb: 256,
            master_works: false,
        },
        Program {
            name: "swaptions",
            leader_touch: true,
            start_s: 0.0,
            setup_ms: 20.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(18.0, 0.05, 0.05)],
                s(items(4800.0)),
            )],
            queues: vec![],
            memory_mb: 50,
            footprint_kb: 128,
            master_works: false,
        },
        Program {
            name: "canneal",
            leader_touch: true,
            start_s: 0.5,
            setup_ms: 600.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(split(40.0), 0.1, 0.85), barrier()],
                phases(330.0),
            )],
            queues: vec![],
            memory_mb: 900,
            footprint_kb: 1024,
            master_works: false,
        },
        Program {
            name: "streamcluster",
            leader_touch: true,
            start_s: 1.0,
            setup_ms: 200.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(split(64.0), 0.5, 0.6), lock(0, 2.0, 8), barrier()],
                phases(540.0),
            )],
            queues: vec![],
            memory_mb: 250,
            footprint_kb: 1024,
            master_works: false,
        },
        Program {
            name: "bodytrack",
            leader_touch: true,
            start_s: 1.5,
            setup_ms: 150.0,
            groups: vec![workers(
                "worker",
                n,
                vec![lock(0, 1.5, 16), work(split(40.0), 0.4, 0.3), barrier()],
                phases(540.0),
            )],
            queues: vec![],
            memory_mb: 150,
            footprint_kb: 256,
            master_works: false,
        },
        Program {
            name: "raytrace",
            leader_touch: true,
            start_s: 3.0,
            setup_ms: 400.0,
            groups: vec![workers(
                "worker",
                n,
                vec![lock(0, 1.0, 4), work(2.0, 0.5, 0.4)],
                s(items(10800.0)),
            )],
            queues: vec![],
            memory_mb: 700,
            footprint_kb: 512,
            master_works: false,
        },
        dedup(n, s(7200.0)),
        Program {
            name: "facesim",
            leader_touch: false,
            start_s: 2.0,
            setup_ms: 200.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(split(48.0), 0.2, 0.5), barrier()],
                phases(420.0),
            )],
            queues: vec![],
            memory_mb: 40,
            footprint_kb: 512,
            master_works: false,
        },
        Program {
            name: "fluidanimate",
            leader_touch: false,
            start_s: 0.0,
            setup_ms: 150.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(split(48.0), 0.1, 0.5), lock(0, 1.0, 4), barrier()],
                phases(750.0),
            )],
            queues: vec![],
            memory_mb: 30,
            footprint_kb: 512,
            master_works: false,
        },
        ferret(n, s(4500.0)),
        Program {
            name: "freqmine",
            leader_touch: false,
            start_s: 0.5,
            setup_ms: 0.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(split(40.0), 0.2, 0.5), barrier()],
                phases(300.0),
            )],
            queues: vec![],
            memory_mb: 100,
            footprint_kb: 512,
            master_works: true,
        },
        Program {
            name: "x264",
            leader_touch: false,
            start_s: 4.0,
            setup_ms: 50.0,
            groups: vec![workers(
                "worker",
                n,
                vec![work(15.0, 0.3, 0.3), lock(0, 2.0, 32)],
                s(items(360.0)),
            )],
            queues: vec![],
            memory_mb: 60,
            footprint_kb: 512,
            master_works: false,
        },
    ];
    programs.extend(crate::splash2x::programs(n, scale));
    programs.drain(..).map(Program::app).collect()
}

/// dedup: a fragmenting thread feeds `n` compressing threads, one thread writes; `items`
/// chunks. The input file is read (first touched) by the main thread.
fn dedup(n: usize, items: u64) -> Program {
    let q = |queue: u16| Op::Put { queue };
    let g = |queue: u16| Op::Get { queue };
    Program {
        name: "dedup",
        leader_touch: true,
        start_s: 1.0,
        setup_ms: 300.0,
        groups: vec![
            workers("fragment", 1, vec![work(0.3, 0.3, 0.5), q(0)], items),
            Group {
                name: "compress".into(),
                threads: n,
                ops: vec![g(0), work(1.2, 0.3, 0.4), q(1)],
                iterations: None,
            },
            Group {
                name: "write".into(),
                threads: 1,
                ops: vec![g(1), work(0.05, 0.2, 0.2)],
                iterations: None,
            },
        ],
        queues: vec![
            QueueSpec {
                capacity: 4 * n,
                lines: 64,
            },
            QueueSpec {
                capacity: 4 * n,
                lines: 64,
            },
        ],
        memory_mb: 700,
        footprint_kb: 512,
        master_works: false,
    }
}

/// ferret: load → segment → extract → vector → rank → out (Tumbler Table I's per-item work
/// ratios), `threads / 4` threads per middle stage; `items` queries.
/// Each thread allocates its own buffers (Table 2: by individual threads).
fn ferret(threads: usize, items: u64) -> Program {
    let per = (threads / 4).max(1);
    let (groups, queues) = crate::workload::ferret_pipeline(per, items, 0.2);
    Program {
        name: "ferret",
        leader_touch: false,
        start_s: 2.5,
        setup_ms: 100.0,
        groups,
        queues,
        memory_mb: 60,
        footprint_kb: 512,
        master_works: false,
    }
}
