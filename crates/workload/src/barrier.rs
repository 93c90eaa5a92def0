//! Barriers that wait in the three ways parallel runtimes do: spin on a shared word, call
//! `sched_yield` in a loop (the UPC and some OpenMP runtimes when oversubscribed), or block
//! in the kernel (`pthread_barrier_wait`, here `std::sync::Barrier`, a futex underneath).

use serde::Serialize;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// How threads wait at a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BarrierKind {
    /// Busy-wait on a shared word (`spin_loop` hint).
    Spin,
    /// `sched_yield` until the last thread arrives.
    Yield,
    /// Sleep in the kernel until the last thread arrives (futex).
    Block,
}

/// A reusable barrier for a fixed number of threads.
#[derive(Debug)]
pub struct PhaseBarrier {
    kind: BarrierKind,
    n: u32,
    arrived: AtomicU32,
    generation: AtomicU64,
    blocking: std::sync::Barrier,
}

impl PhaseBarrier {
    /// A barrier for `n` threads that waits as `kind` says.
    pub fn new(n: u32, kind: BarrierKind) -> PhaseBarrier {
        PhaseBarrier {
            kind,
            n,
            arrived: AtomicU32::new(0),
            generation: AtomicU64::new(0),
            blocking: std::sync::Barrier::new(n as usize),
        }
    }

    /// Waits until all `n` threads have called `wait` for this phase.
    pub fn wait(&self) {
        if self.kind == BarrierKind::Block {
            self.blocking.wait();
            return;
        }
        // Sense by generation: the last to arrive resets the count and opens the next one.
        let generation = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        while self.generation.load(Ordering::Acquire) == generation {
            match self.kind {
                BarrierKind::Spin => std::hint::spin_loop(),
                _ => std::thread::yield_now(),
            }
        }
    }
}
