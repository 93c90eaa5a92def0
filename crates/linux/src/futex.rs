//! What the futex probe's records mean: which waits were lock waits, per thread.
//!
//! The BPF program (`bpf/futex.bpf.c`, loaded by `bpf.rs` under the `bpf` feature) counts,
//! for each thread, the time and number of futex waits per address and operation, the
//! wake-ups each thread issued per address, and who woke whom. This module, pure and always
//! built, turns those counters into per-thread **lock** and **sync** wait time.
//!
//! A futex wait is not always a lock wait: a main thread in `pthread_join`, a consumer on a
//! condition variable, an idle pool thread parked on its own futex and a thread at a
//! barrier all wait on futexes too. Each address a process waited on is classified:
//!
//! | how it was waited on | its wake-ups | kind |
//! |---|---|---|
//! | `FUTEX_LOCK_PI`, `FUTEX_LOCK_PI2` | any | lock (a priority-inheritance mutex) |
//! | `FUTEX_WAIT_REQUEUE_PI`, `futex_waitv` | any | sync (a PI condition variable; several words at once) |
//! | `FUTEX_WAIT`, `FUTEX_WAIT_BITSET`, `futex_wait` | each wakes one, and a thread that woke it also waited on it | lock |
//! | the same | none seen (`join` is woken by the kernel at thread exit), or one that wakes many (broadcast, barrier), or wakers that never wait there (condition variable, parker) | sync |
//!
//! A mutex word is *symmetric*: its contenders both sleep on it and, unlocking, wake one
//! waiter of it. A condition variable or a parker is woken by others (producers, the
//! unparking thread) who do not sleep on that word. An address found to be a lock stays a
//! lock (its earlier waits are counted then), so a thread's cumulative lock time only grows
//! unless an address has only just been seen waking many.
//!
//! ```
//! use threadbalance_linux::futex::{Classifier, WaitOp, WaitRecord, WakeRecord};
//! use threadbalance_model::{Nanos, Pid, Snapshot, Tid, WakeEdge};
//! let t = |tid| (Pid(1), Tid(tid));
//! // Threads 2 and 3 contend on a mutex at 0x10 and wake each other; thread 1 is in join
//! // on 0x20, which nobody wakes with a syscall.
//! let waits = [
//!     WaitRecord { thread: t(2), uaddr: 0x10, op: WaitOp::WaitBitset, ns: 300, count: 3 },
//!     WaitRecord { thread: t(3), uaddr: 0x10, op: WaitOp::WaitBitset, ns: 500, count: 4 },
//!     WaitRecord { thread: t(1), uaddr: 0x20, op: WaitOp::Wait, ns: 9_000, count: 1 },
//! ];
//! let wakes = [
//!     WakeRecord { thread: t(2), uaddr: 0x10, many: false, count: 4 },
//!     WakeRecord { thread: t(3), uaddr: 0x10, many: false, count: 3 },
//! ];
//! let mut c = Classifier::default();
//! let totals = c.update(&waits, &wakes, &[]);
//! assert_eq!(totals.thread(t(2)).map(|f| f.lock_ns), Some(300));
//! assert_eq!(totals.thread(t(1)).map(|f| (f.lock_ns, f.sync_ns)), Some((0, 9_000)));
//! ```

use std::collections::{HashMap, HashSet};
use threadbalance_model::{Nanos, Pid, Snapshot, Tid, WakeEdge};

/// A thread, as the probe keys it.
pub type FutexThread = (Pid, Tid);

/// How a thread waited: the futex operation, or the newer syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WaitOp {
    /// `futex(FUTEX_WAIT)`: glibc's mutexes, barriers, `pthread_join`.
    Wait,
    /// `futex(FUTEX_WAIT_BITSET)`: glibc's condition variables, Rust's std locks and parkers.
    WaitBitset,
    /// `futex(FUTEX_LOCK_PI)` or `FUTEX_LOCK_PI2`: priority-inheritance mutexes.
    LockPi,
    /// `futex(FUTEX_WAIT_REQUEUE_PI)`: condition variables over PI mutexes.
    WaitRequeuePi,
    /// The `futex_wait` syscall (Linux 6.7).
    FutexWait,
    /// The `futex_waitv` syscall (Linux 5.16): several words at once.
    FutexWaitv,
}

impl WaitOp {
    /// Every operation, in the BPF program's class order.
    pub const ALL: [WaitOp; 6] = [
        WaitOp::Wait,
        WaitOp::WaitBitset,
        WaitOp::LockPi,
        WaitOp::WaitRequeuePi,
        WaitOp::FutexWait,
        WaitOp::FutexWaitv,
    ];

    /// The operation for the BPF program's class number.
    pub fn from_class(class: u64) -> Option<WaitOp> {
        WaitOp::ALL.get(usize::try_from(class).ok()?).copied()
    }

    /// Its short name.
    pub fn name(self) -> &'static str {
        match self {
            WaitOp::Wait => "wait",
            WaitOp::WaitBitset => "wait-bitset",
            WaitOp::LockPi => "lock-pi",
            WaitOp::WaitRequeuePi => "wait-requeue-pi",
            WaitOp::FutexWait => "futex_wait",
            WaitOp::FutexWaitv => "futex_waitv",
        }
    }
}

/// Cumulative waits of one thread on one address with one operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitRecord {
    /// The waiting thread.
    pub thread: FutexThread,
    /// The futex word's user address (the `futex_waitv` array's for that syscall).
    pub uaddr: u64,
    /// How it waited.
    pub op: WaitOp,
    /// Nanoseconds from entering the syscall to leaving it.
    pub ns: u64,
    /// Waits.
    pub count: u64,
}

/// Cumulative wake-ups one thread issued on one address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WakeRecord {
    /// The waking thread.
    pub thread: FutexThread,
    /// The futex word's user address.
    pub uaddr: u64,
    /// Whether it asked to wake more than one waiter.
    pub many: bool,
    /// Wake calls.
    pub count: u64,
}

/// One thread's futex waits, classified.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadFutex {
    /// The thread.
    pub thread: FutexThread,
    /// Nanoseconds waiting on addresses classified as locks.
    pub lock_ns: u64,
    /// Lock waits.
    pub lock_waits: u64,
    /// Nanoseconds in other futex waits ("sync wait": join, condition variables, parkers,
    /// barriers, and whatever could not be told apart).
    pub sync_ns: u64,
    /// Other futex waits.
    pub sync_waits: u64,
    /// Wake calls it issued on addresses not classified as locks (a barrier's release, a
    /// condition variable's signal).
    pub sync_wakes: u64,
    /// Nanoseconds and waits per operation, in [`WaitOp::ALL`] order.
    pub by_op: [(u64, u64); 6],
}

/// Every thread's classified waits and the wake edges, as of one read of the probe.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FutexTotals {
    /// One entry per thread that waited, sorted by thread.
    pub threads: Vec<ThreadFutex>,
    /// `(waker, woken, wake-ups)`: the waker's last wake on an address before the woken
    /// thread returned from waiting there. Sorted.
    pub edges: Vec<(FutexThread, FutexThread, u64)>,
    /// Addresses classified as locks.
    pub lock_addresses: usize,
    /// Addresses classified as sync.
    pub sync_addresses: usize,
}

impl FutexTotals {
    /// Sets every sample's `lock` to its thread's cumulative lock-wait time (zero for a
    /// thread that never waited on a lock): the window then takes lock time as exact.
    /// Also sets the snapshot's wake edges (`Snapshot::wakes`, cumulative) between the
    /// threads it holds; edges to threads not in it (exited, or not managed) are left out.
    ///
    /// And every sample's `progress`: the sync waits it returned from plus the sync wakes it
    /// issued (one or the other at each round of a blocking barrier: the guard of `speed`
    /// counts rounds with it).
    pub fn fill(&self, snap: &mut Snapshot) {
        for s in &mut snap.threads {
            let t = self.thread((s.key.pid, s.key.tid));
            s.lock = Some(Nanos(t.map_or(0, |t| t.lock_ns)));
            s.progress = Some(t.map_or(0, |t| t.sync_waits + t.sync_wakes));
        }
        let key = |(pid, tid): FutexThread| {
            snap.threads
                .binary_search_by(|s| (s.key.pid, s.key.tid).cmp(&(pid, tid)))
                .ok()
                .map(|i| snap.threads[i].key)
        };
        let wakes: Vec<WakeEdge> = self
            .edges
            .iter()
            .filter_map(|&(a, b, count)| {
                Some(WakeEdge {
                    waker: key(a)?,
                    woken: key(b)?,
                    count,
                })
            })
            .collect();
        snap.wakes = wakes;
        snap.wakes.sort_unstable_by_key(|e| (e.waker, e.woken));
        snap.wakes_measured = true;
    }

    /// The classified waits of `thread`, if it waited at all.
    pub fn thread(&self, thread: FutexThread) -> Option<&ThreadFutex> {
        self.threads
            .binary_search_by(|t| t.thread.cmp(&thread))
            .ok()
            .map(|i| &self.threads[i])
    }
}

/// Classifies addresses, remembering those found to be locks.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    locks: HashSet<(Pid, u64)>,
    totals: FutexTotals,
}

/// What the wakes on one address looked like.
#[derive(Debug, Clone, Default)]
struct AddressWakes {
    any: bool,
    many: bool,
    wakers: Vec<Tid>,
}

impl Classifier {
    /// Classifies the cumulative `waits`, `wakes` and `edges` of one read; returns every
    /// thread's totals.
    pub fn update(
        &mut self,
        waits: &[WaitRecord],
        wakes: &[WakeRecord],
        edges: &[(FutexThread, FutexThread, u64)],
    ) -> &FutexTotals {
        let mut woken: HashMap<(Pid, u64), AddressWakes> = HashMap::new();
        for w in wakes {
            let a = woken.entry((w.thread.0, w.uaddr)).or_default();
            a.any |= w.count > 0;
            a.many |= w.many && w.count > 0;
            a.wakers.push(w.thread.1);
        }
        let mut waiters: HashMap<(Pid, u64), HashSet<Tid>> = HashMap::new();
        for w in waits {
            waiters
                .entry((w.thread.0, w.uaddr))
                .or_default()
                .insert(w.thread.1);
        }
        let mut sync_addresses: HashSet<(Pid, u64)> = HashSet::new();
        let mut per_thread: HashMap<FutexThread, ThreadFutex> = HashMap::new();
        for w in waits {
            let addr = (w.thread.0, w.uaddr);
            let lock = match w.op {
                WaitOp::LockPi => true,
                WaitOp::WaitRequeuePi | WaitOp::FutexWaitv => false,
                WaitOp::Wait | WaitOp::WaitBitset | WaitOp::FutexWait => {
                    self.locks.contains(&addr)
                        || woken.get(&addr).is_some_and(|a| {
                            a.any
                                && !a.many
                                && waiters
                                    .get(&addr)
                                    .is_some_and(|ws| a.wakers.iter().any(|t| ws.contains(t)))
                        })
                }
            };
            if lock {
                self.locks.insert(addr);
            } else {
                sync_addresses.insert(addr);
            }
            let t = per_thread.entry(w.thread).or_insert_with(|| ThreadFutex {
                thread: w.thread,
                ..ThreadFutex::default()
            });
            if lock {
                t.lock_ns += w.ns;
                t.lock_waits += w.count;
            } else {
                t.sync_ns += w.ns;
                t.sync_waits += w.count;
            }
            let i = WaitOp::ALL.iter().position(|&o| o == w.op).unwrap_or(0);
            t.by_op[i].0 += w.ns;
            t.by_op[i].1 += w.count;
        }
        for w in wakes {
            if self.locks.contains(&(w.thread.0, w.uaddr)) {
                continue;
            }
            let t = per_thread.entry(w.thread).or_insert_with(|| ThreadFutex {
                thread: w.thread,
                ..ThreadFutex::default()
            });
            t.sync_wakes += w.count;
        }
        let mut threads: Vec<ThreadFutex> = per_thread.into_values().collect();
        threads.sort_by_key(|t| t.thread);
        let mut edges = edges.to_vec();
        edges.sort();
        let lock_addresses = self.locks.len();
        self.totals = FutexTotals {
            threads,
            edges,
            lock_addresses,
            sync_addresses: sync_addresses.difference(&self.locks).count(),
        };
        &self.totals
    }

    /// The totals of the last update.
    pub fn totals(&self) -> &FutexTotals {
        &self.totals
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: i32) -> FutexThread {
        (Pid(1), Tid(tid))
    }

    fn wait(tid: i32, uaddr: u64, op: WaitOp, ns: u64) -> WaitRecord {
        WaitRecord {
            thread: t(tid),
            uaddr,
            op,
            ns,
            count: 1,
        }
    }

    fn wake(tid: i32, uaddr: u64, many: bool) -> WakeRecord {
        WakeRecord {
            thread: t(tid),
            uaddr,
            many,
            count: 1,
        }
    }

    #[test]
    fn classifier_condvar_woken_by_a_producer_is_sync() {
        // Consumer 2 waits on 0x30; producer 3 wakes it (one at a time) but never waits
        // there: a condition variable, not a lock.
        let mut c = Classifier::default();
        let got = c.update(
            &[wait(2, 0x30, WaitOp::WaitBitset, 700)],
            &[wake(3, 0x30, false)],
            &[],
        );
        let f = got.thread(t(2)).unwrap();
        assert_eq!((f.lock_ns, f.sync_ns, f.sync_waits), (0, 700, 1));
        assert_eq!((got.lock_addresses, got.sync_addresses), (0, 1));
    }

    #[test]
    fn classifier_broadcast_is_sync_even_if_waker_waits_there() {
        // A barrier: each thread waits on 0x40 in turn and the last one wakes all.
        let mut c = Classifier::default();
        let got = c.update(
            &[
                wait(2, 0x40, WaitOp::Wait, 100),
                wait(3, 0x40, WaitOp::Wait, 200),
            ],
            &[wake(3, 0x40, true), wake(2, 0x40, true)],
            &[],
        );
        assert_eq!(got.thread(t(3)).unwrap().sync_ns, 200);
        assert_eq!(got.lock_addresses, 0);
    }

    #[test]
    fn classifier_pi_lock_is_lock_and_requeue_pi_and_waitv_are_sync() {
        let mut c = Classifier::default();
        let got = c.update(
            &[
                wait(2, 0x50, WaitOp::LockPi, 10),
                wait(2, 0x60, WaitOp::WaitRequeuePi, 20),
                wait(2, 0x70, WaitOp::FutexWaitv, 40),
            ],
            &[],
            &[],
        );
        let f = got.thread(t(2)).unwrap();
        // 10 ns of lock; 20 + 40 = 60 of sync; each op in its own slot.
        assert_eq!((f.lock_ns, f.sync_ns), (10, 60));
        assert_eq!(f.by_op[2], (10, 1));
        assert_eq!(f.by_op[3], (20, 1));
        assert_eq!(f.by_op[5], (40, 1));
    }

    #[test]
    fn classifier_lock_stays_lock_once_found() {
        // First read: thread 2 waited on 0x10, nobody woke it yet: sync. Second read: 3
        // waited and 2 woke 3 (and 3 woke 2): a lock; all of 2's waits now count as lock.
        let mut c = Classifier::default();
        let first = c.update(&[wait(2, 0x10, WaitOp::FutexWait, 50)], &[], &[]);
        assert_eq!(first.thread(t(2)).unwrap().sync_ns, 50);
        let waits = [
            wait(2, 0x10, WaitOp::FutexWait, 80),
            wait(3, 0x10, WaitOp::FutexWait, 30),
        ];
        let wakes = [wake(2, 0x10, false), wake(3, 0x10, false)];
        let edges = [(t(3), t(2), 1), (t(2), t(3), 1)];
        let second = c.update(&waits, &wakes, &edges);
        assert_eq!(second.thread(t(2)).unwrap().lock_ns, 80);
        assert_eq!(second.edges[0], (t(2), t(3), 1));
        // Third read: a stray broadcast on the same word does not undo it.
        let third = c.update(&waits, &[wake(4, 0x10, true)], &[]);
        assert_eq!(third.thread(t(3)).unwrap().lock_ns, 30);
    }

    #[test]
    fn classifier_same_address_in_two_processes_is_two_addresses() {
        // Process 1's threads contend on 0x10; process 2's only thread waits at 0x10 of its
        // own address space, woken by nobody: sync.
        let mut c = Classifier::default();
        let other = WaitRecord {
            thread: (Pid(2), Tid(9)),
            ..wait(9, 0x10, WaitOp::Wait, 5)
        };
        let got = c.update(
            &[
                wait(2, 0x10, WaitOp::Wait, 1),
                wait(3, 0x10, WaitOp::Wait, 1),
                other,
            ],
            &[wake(2, 0x10, false), wake(3, 0x10, false)],
            &[],
        );
        assert_eq!(got.thread((Pid(2), Tid(9))).unwrap().sync_ns, 5);
        assert_eq!(got.thread(t(2)).unwrap().lock_ns, 1);
    }

    #[test]
    fn totals_fill_sets_exact_lock_time_on_every_sample() {
        use threadbalance_model::{Sample, ThreadKey};
        let mut c = Classifier::default();
        let totals = c.update(
            &[
                wait(2, 0x10, WaitOp::Wait, 1_000),
                wait(3, 0x10, WaitOp::Wait, 3_000),
            ],
            &[wake(2, 0x10, false), wake(3, 0x10, false)],
            // 3 woke 2 twice and 2 woke 3 once; 9 (not sampled: exited) woke 2 once.
            &[(t(3), t(2), 2), (t(2), t(3), 1), (t(9), t(2), 1)],
        );
        let sample = |tid| Sample {
            key: ThreadKey {
                pid: Pid(1),
                tid: Tid(tid),
                start_time: 1,
            },
            ..Sample::default()
        };
        let mut snap = Snapshot {
            threads: vec![sample(1), sample(2), sample(3)],
            ..Snapshot::default()
        };
        totals.fill(&mut snap);
        let got: Vec<Option<Nanos>> = snap.threads.iter().map(|s| s.lock).collect();
        assert_eq!(
            got,
            [Some(Nanos(0)), Some(Nanos(1_000)), Some(Nanos(3_000))]
        );
        // Wake edges between sampled threads, sorted by waker: 2→3 once, 3→2 twice.
        assert!(snap.wakes_measured);
        let edges: Vec<(i32, i32, u64)> = snap
            .wakes
            .iter()
            .map(|e| (e.waker.tid.0, e.woken.tid.0, e.count))
            .collect();
        assert_eq!(edges, [(2, 3, 1), (3, 2, 2)]);
    }

    #[test]
    fn totals_fill_counts_barrier_rounds_as_progress() {
        use threadbalance_model::{Sample, ThreadKey};
        // A barrier at 0x40 (woken all at once), three rounds: thread 2 arrived last twice
        // (two wakes) and waited once, thread 3 waited three times and woke it once (wait
        // counts 1, 3). Thread 4 waited on a lock at 0x10 only: no progress. Thread 5 was
        // never seen: zero.
        let mut c = Classifier::default();
        let lock_wait = WaitRecord {
            count: 1,
            ..wait(4, 0x10, WaitOp::LockPi, 10)
        };
        let totals = c.update(
            &[
                wait(2, 0x40, WaitOp::Wait, 100),
                WaitRecord {
                    count: 2,
                    ..wait(3, 0x40, WaitOp::Wait, 300)
                },
                lock_wait,
            ],
            &[
                WakeRecord {
                    count: 2,
                    ..wake(2, 0x40, true)
                },
                wake(3, 0x40, true),
                wake(5, 0x10, false),
            ],
            &[],
        );
        let sample = |tid| Sample {
            key: ThreadKey {
                pid: Pid(1),
                tid: Tid(tid),
                start_time: 1,
            },
            ..Sample::default()
        };
        let mut snap = Snapshot {
            threads: vec![sample(2), sample(3), sample(4), sample(6)],
            ..Snapshot::default()
        };
        totals.fill(&mut snap);
        let got: Vec<Option<u64>> = snap.threads.iter().map(|s| s.progress).collect();
        assert_eq!(got, [Some(3), Some(3), Some(0), Some(0)]);
    }

    #[test]
    fn wait_op_classes_round_trip() {
        for (i, op) in WaitOp::ALL.iter().enumerate() {
            assert_eq!(WaitOp::from_class(i as u64), Some(*op));
        }
        assert_eq!(WaitOp::from_class(6), None);
        assert_eq!(WaitOp::LockPi.name(), "lock-pi");
    }
}
