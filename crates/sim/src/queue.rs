//! The event queue: a binary heap ordered by time, ties broken first-in first-out.
//!
//! Every event carries a monotonically increasing sequence number, so two events due at the
//! same nanosecond pop in the order they were pushed, whatever the heap's internal layout.
//! That is what makes a run reproducible byte for byte.
//!
//! Events are small `Copy` values (32 bytes); cancelled events are not removed but carry a
//! `version` that the handler compares with its target's current version ("lazy deletion"),
//! which keeps push and pop at O(log n) with no allocation once the heap has grown.
//!
//! ```text
//!   push(at=5,A) push(at=3,B) push(at=5,C)  →  pop: B(3)  A(5)  C(5)
//! ```

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use threadbalance_model::Nanos;

/// What an event asks the simulator to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// The running activity of CPU `target` (work, spin budget) reaches its end.
    Cpu,
    /// Scheduler tick of CPU `target`: slice check, periodic balancing, idle kick.
    Tick,
    /// CPU `target` switches threads after its tick found the slice used up (after every
    /// tick due at the same instant, as the kernel switches after the balancing softirq).
    Resched,
    /// A kernel thread (kworker, RCU) briefly takes CPU `target`, so its thread is preempted.
    Noise,
    /// Thread `target` wakes from a timed sleep.
    Timer,
    /// Thread `target` is created.
    Spawn,
    /// The placement policy samples, decides and applies.
    Policy,
    /// Per-socket utilization is recorded for the report.
    Sample,
    /// Automatic NUMA balancing scans the threads whose scan is due.
    NumaScan,
}

/// One scheduled event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Event {
    /// When it is due, in simulated nanoseconds.
    pub at: Nanos,
    /// Push order, for FIFO ties.
    pub seq: u64,
    /// What to do.
    pub kind: EventKind,
    /// The CPU or thread index it concerns.
    pub target: u32,
    /// The target's version when the event was pushed; stale events are skipped.
    pub version: u32,
}

/// A time-ordered queue with FIFO ties.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
}

impl EventQueue {
    /// An empty queue.
    pub fn new() -> EventQueue {
        EventQueue::default()
    }

    /// Schedules `kind` for `target` at `at`.
    pub fn push(&mut self, at: Nanos, kind: EventKind, target: u32, version: u32) {
        self.seq += 1;
        self.heap.push(Reverse(Event {
            at,
            seq: self.seq,
            kind,
            target,
            version,
        }));
    }

    /// Removes and returns the earliest event (FIFO among equal times).
    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop().map(|Reverse(e)| e)
    }

    /// The time of the earliest event, if any.
    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse(e)| e.at)
    }

    /// Events waiting (stale ones included).
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no event is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_equal_times_pop_in_push_order() {
        let mut q = EventQueue::new();
        q.push(Nanos(5), EventKind::Cpu, 1, 0);
        q.push(Nanos(3), EventKind::Tick, 2, 0);
        q.push(Nanos(5), EventKind::Timer, 3, 0);
        q.push(Nanos(5), EventKind::Cpu, 4, 0);
        let order: Vec<(u64, u32)> = std::iter::from_fn(|| q.pop())
            .map(|e| (e.at.0, e.target))
            .collect();
        assert_eq!(order, vec![(3, 2), (5, 1), (5, 3), (5, 4)]);
        assert!(q.is_empty());
    }
}
