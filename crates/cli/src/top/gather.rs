//! The shell's half of a [`ThreadsView`]: what `/proc` and the kernel say of each managed
//! thread (its name, its mask) next to what the loop measured ([`ThreadRates`]) and the
//! moves carried out on it. Used by `top --pid` and by the daemon's `threads` answer.

use std::collections::BTreeMap;
use threadbalance_daemon::control::threads::{ThreadInput, ThreadsView};
use threadbalance_model::{Level, Move, ThreadKey, ThreadRates, Topology, Window};

/// Moves carried out per thread, pruned to the threads still alive.
#[derive(Debug, Clone, Default)]
pub struct MoveCounts {
    counts: BTreeMap<ThreadKey, u64>,
}

impl MoveCounts {
    /// Counts each move of a plan that was carried out.
    pub fn record(&mut self, moves: &[Move]) {
        for m in moves {
            *self.counts.entry(m.thread).or_default() += 1;
        }
    }

    /// Moves carried out on `key`.
    pub fn of(&self, key: &ThreadKey) -> u64 {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Forgets the threads that are not in `window` any more (so a long run with threads
    /// that come and go does not grow).
    pub fn keep_only(&mut self, window: &Window) {
        self.counts.retain(|k, _| window.thread(k).is_some());
    }
}

/// The input row of one thread: its rates, its moves, and its name and mask read now. A
/// thread that has just exited keeps an empty name and mask.
pub fn thread_input(rates: &ThreadRates, moves: u64) -> ThreadInput {
    let comm = std::fs::read_to_string(format!(
        "/proc/{}/task/{}/comm",
        rates.key.pid.0, rates.key.tid.0
    ))
    .map(|s| s.trim_end_matches('\n').to_string())
    .unwrap_or_default();
    let mask = threadbalance_linux::affinity_of(rates.key.tid)
        .map(|m| m.to_string())
        .unwrap_or_default();
    ThreadInput {
        pid: rates.key.pid.0,
        tid: rates.key.tid.0,
        comm,
        mask,
        cpu: rates.last_cpu,
        util: rates.util,
        speed: rates.speed,
        lock: rates.lock_exact.then_some(rates.lock),
        moves,
    }
}

/// The view of the threads of several windows (one per managed process) on `topo` at
/// `level`.
pub fn view_of<'a>(
    topo: &Topology,
    level: Level,
    windows: impl IntoIterator<Item = (&'a Window, &'a MoveCounts)>,
) -> ThreadsView {
    let mut longest = 0;
    let mut inputs = Vec::new();
    for (window, moves) in windows {
        longest = longest.max(window.duration().0 / 1_000_000);
        inputs.extend(
            window
                .threads
                .iter()
                .map(|t| thread_input(t, moves.of(&t.key))),
        );
    }
    ThreadsView::build(topo, level, longest, inputs)
}
