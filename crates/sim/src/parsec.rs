//! `parsec-mix`: the experiment of Chiang & Su (Appl. Sci. 2021, §4.2): many PARSEC
//! programs run at once on the 4-node Opteron 6320 so that the kernel must move threads
//! between nodes, and *which* thread it moves decides how much memory becomes remote.
//!
//! Each application is a pthreads program: a main thread (the thread group leader, tid =
//! pid) reads its input (a memory-bound setup phase: the first touch of the shared data),
//! creates its workers, and sleeps in `pthread_join` until they exit. Table 2 of the paper
//! says who first touches each program's memory:
//!
//! | program | Table 2 | workers | start | the model of one worker | memory |
//! |---|---|---|---|---|---|
//! | blackscholes | leader | 16 | 0 s | 390 chunks of 8 ms of option pricing, 25 % memory-bound, no synchronization | 600 MB shared |
//! | swaptions | leader | 32 | 0 s | 150 swaptions of 18 ms, compute-bound (5 % memory) | 50 MB shared |
//! | canneal | leader | 4 | 0.5 s | 330 temperature steps of 10 ms of random netlist swaps, 85 % memory-bound, barrier | 900 MB shared |
//! | streamcluster | leader | 16 | 1 s | 540 phases of 4 ms (±50 %), 60 % memory-bound, a shared-gain update under a mutex, barrier | 250 MB shared |
//! | bodytrack | leader | 8 | 1.5 s | 540 frame steps: a particle taken under the work-queue mutex, 5 ms (±40 %) of likelihood, 30 % memory-bound, barrier | 150 MB shared |
//! | raytrace | leader | 8 | 3 s | 1350 tiles taken under the task-queue mutex, 2 ms (±50 %), 40 % memory-bound (BVH) | 700 MB shared |
//! | dedup | leader | 1 + 6 + 1 | 1 s | a pipeline: fragment (1) → compress (6, 1.2 ms, 40 % memory) → write (1), bounded queues | 700 MB shared |
//! | facesim | thread | 8 | 2 s | 420 steps of 6 ms, 50 % memory-bound, barrier | 40 MB per thread |
//! | fluidanimate | thread | 16 | 0 s | 750 steps of 3 ms, 50 % memory-bound, a cell mutex, barrier | 30 MB per thread |
//! | ferret | thread | 1 + 4 × 2 + 1 | 2.5 s | Tumbler Table I's stages (segment, extract, vector, rank), rank 70 % memory-bound | 60 MB per thread |
//! | freqmine | thread | 4 | 0.5 s | OpenMP: the leader works too; 300 steps of 10 ms, 50 % memory-bound, barrier | 100 MB per thread |
//! | x264 | thread | 2 | 4 s | 180 frames of 15 ms, 30 % memory-bound, a frame-dependency mutex | 60 MB per thread |
//!
//! 142 threads on 32 CPUs, starting over 4 s and ending at different times: the run
//! queues are long, the nodes' loads drift apart as programs start and finish, and the
//! numa-* balancers have candidates to choose from. Durations are rough shapes of the
//! programs (compute and memory phases, barriers, locks, pipelines), not measurements;
//! `scale` multiplies every program's length (iterations or items).
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

fn work(ms: f64, spread: f32, mem: f32) -> Op {
    Op::Compute {
        ns: ns(ms * MS),
        spread,
        mem,
    }
}

fn lock(lock: u16, us: f64, lines: u32) -> Op {
    Op::Lock {
        lock,
        hold_ns: ns(us * US),
        lines,
    }
}

fn barrier() -> Op {
    Op::Barrier {
        barrier: 0,
        wait: Wait::Block,
    }
}

fn steps(n: f64, scale: f64) -> u64 {
    (n * scale).round().max(1.0) as u64
}

/// One PARSEC-like program: who first touches, when it starts, how long the main thread
/// reads its input, its worker groups, queues and memory.
struct Program {
    name: &'static str,
    leader_touch: bool,
    start_s: f64,
    setup_ms: f64,
    groups: Vec<Group>,
    queues: Vec<QueueSpec>,
    memory_mb: u32,
    footprint_kb: u32,
    /// OpenMP: the leader is the first worker (no separate main thread).
    master_works: bool,
}

impl Program {
    fn app(self) -> App {
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
            spin_ns: 10_000,
            shared_data: self.leader_touch,
            memory_kb: self.memory_mb * MB,
            start_ns: ns(self.start_s * 1e9),
            main_thread: !self.master_works,
        }
    }
}

fn workers(name: &str, threads: usize, ops: Vec<Op>, iterations: u64) -> Group {
    Group {
        name: name.into(),
        threads,
        ops,
        iterations: Some(iterations),
    }
}

/// The applications of `parsec-mix` (see the module docs); `threads` gives every program
/// that many workers (the paper's test cases of 1–32 threads each), `scale` multiplies
/// their lengths.
pub fn parsec_mix(threads: Option<usize>, scale: f64) -> Vec<App> {
    let n = |default: usize| threads.unwrap_or(default).max(1);
    let s = |x: f64| steps(x, scale);
    let mut programs = vec![
        Program {
            name: "blackscholes",
            leader_touch: true,
            start_s: 0.0,
            setup_ms: 300.0,
            groups: vec![workers(
                "worker",
                n(16),
                vec![work(8.0, 0.1, 0.25)],
                s(390.0),
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
                n(32),
                vec![work(18.0, 0.05, 0.05)],
                s(150.0),
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
                n(4),
                vec![work(10.0, 0.1, 0.85), barrier()],
                s(330.0),
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
                n(16),
                vec![work(4.0, 0.5, 0.6), lock(0, 2.0, 8), barrier()],
                s(540.0),
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
                n(8),
                vec![lock(0, 1.5, 16), work(5.0, 0.4, 0.3), barrier()],
                s(540.0),
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
                n(8),
                vec![lock(0, 1.0, 4), work(2.0, 0.5, 0.4)],
                s(1350.0),
            )],
            queues: vec![],
            memory_mb: 700,
            footprint_kb: 512,
            master_works: false,
        },
        dedup(n(6), s(7200.0)),
        Program {
            name: "facesim",
            leader_touch: false,
            start_s: 2.0,
            setup_ms: 200.0,
            groups: vec![workers(
                "worker",
                n(8),
                vec![work(6.0, 0.2, 0.5), barrier()],
                s(420.0),
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
                n(16),
                vec![work(3.0, 0.1, 0.5), lock(0, 1.0, 4), barrier()],
                s(750.0),
            )],
            queues: vec![],
            memory_mb: 30,
            footprint_kb: 512,
            master_works: false,
        },
        ferret(threads, s(4500.0)),
        Program {
            name: "freqmine",
            leader_touch: false,
            start_s: 0.5,
            setup_ms: 0.0,
            groups: vec![workers(
                "worker",
                n(4),
                vec![work(10.0, 0.2, 0.5), barrier()],
                s(300.0),
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
                n(2),
                vec![work(15.0, 0.3, 0.3), lock(0, 2.0, 32)],
                s(180.0),
            )],
            queues: vec![],
            memory_mb: 60,
            footprint_kb: 512,
            master_works: false,
        },
    ];
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
/// ratios), two threads per middle stage unless `threads` says otherwise; `items` queries.
/// Each thread allocates its own buffers (Table 2: by individual threads).
fn ferret(threads: Option<usize>, items: u64) -> Program {
    let per = threads.map_or(2, |t| (t / 4).max(1));
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
