//! The kit the benchmark models are built from (PARSEC's, SPLASH-2x's and the built-in
//! ferret): ops in milliseconds and microseconds, a program with its main thread, a
//! group of workers, and ferret's pipeline. A leaf below [`crate::parsec`],
//! [`crate::splash2x`] and [`crate::workload`].

use crate::app::{App, Group, Op, QueueSpec, Wait};

pub(crate) const MS: f64 = 1e6;
pub(crate) const US: f64 = 1e3;
pub(crate) const MB: u32 = 1024;

pub(crate) fn ns(x: f64) -> u64 {
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

/// Ferret's six stages with `per` threads in each middle stage and `items` queries: the
/// groups and the five bounded queues between them. Middle stages vary ±30 % per item;
/// the load and out stages by `edge_spread`.
pub(crate) fn ferret_pipeline(
    per: usize,
    items: u64,
    edge_spread: f32,
) -> (Vec<Group>, Vec<QueueSpec>) {
    let q = |i: u16| Op::Put { queue: i };
    let g = |i: u16| Op::Get { queue: i };
    let work = |ms: f64, spread: f32, mem: f32| Op::Compute {
        ns: ns(ms * MS),
        spread,
        mem,
    };
    let stage = |name: &str, input: u16, ms: f64, mem: f32| Group {
        name: name.into(),
        threads: per,
        ops: vec![g(input), work(ms, 0.3, mem), q(input + 1)],
        iterations: None,
    };
    let groups = vec![
        Group {
            name: "load".into(),
            threads: 1,
            ops: vec![work(0.05, edge_spread, 0.2), q(0)],
            iterations: Some(items),
        },
        stage("segment", 0, 0.2, 0.1),
        stage("extract", 1, 0.1, 0.1),
        stage("vector", 2, 1.1, 0.3),
        stage("rank", 3, 3.6, 0.7),
        Group {
            name: "out".into(),
            threads: 1,
            ops: vec![g(4), work(0.02, edge_spread, 0.1)],
            iterations: None,
        },
    ];
    let queues = (0..5)
        .map(|_| QueueSpec {
            capacity: 4 * per,
            lines: 64,
        })
        .collect();
    (groups, queues)
}
