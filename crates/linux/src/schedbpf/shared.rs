//! One BPF probe for the whole daemon: the program of `bpf/sched.bpf.c` loaded and
//! attached once, its array mapped once, and one [`ProbeShare`] per managed process, each a
//! [`RunCounters`] over its own threads (see [`crate::runshare`] for the why and the
//! costs).
//!
//! ```text
//!  SharedProbe::load() ─► open(): program, maps, the mapped array, 4 tracepoints
//!  handle() ─► ProbeShare { id in Holders, the array (Arc), its own `now` and events }
//!    refresh(pids)  same pids as last time? nothing locked, nothing called; else the
//!                   lock: Holders::set ─► union into `targets` (one system call per pid
//!                   added or removed) ─► threads of pids no handle holds now: slots freed
//!    get / seed / forget  the array, lock-free, as `SchedProbe` does
//!  drop ─► Holders::close ─► `targets` without its pids ─► the slots of its threads (the
//!          task directories of its pids, and the threads it seeded) freed
//! ```
//!
//! Freeing matters because the program counts every thread that owns a slot, whatever
//! its process: without it a released process would go on being counted (two array
//! lookups and a few stores per switch of its threads) and hold its slots.

use super::{Slots, counted, seeded};
use crate::LinuxError;
use crate::bpf::{Links, ProbeUnavailable};
use crate::counted::{Counted, RunCounters};
use crate::holders::{Holders, ShareStats};
use crate::monotonic_now;
use aya::Ebpf;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use threadbalance_model::{Pid, Sample, Tid};

/// The source's name, as the daemon's log line and the summary give it.
pub const NAME: &str = "BPF sched_switch counters (one probe shared by every managed process)";

/// What the handles share.
struct Core {
    // `slots` is declared first: it is unmapped before the program and its maps go; the
    // links next: detached, all at once, before the program goes.
    slots: Slots,
    _links: Links,
    registry: Mutex<Registry>,
}

/// The program and who holds which pid; changed only when a handle's pids change.
struct Registry {
    ebpf: Ebpf,
    /// The pids in the program's `targets` map now.
    tracked: HashSet<i32>,
    holders: Holders,
}

impl Registry {
    /// Handle `id` holds `pids` (or, `None`, is gone): `targets` follows the union; returns
    /// the pids no handle holds any more.
    fn set(&mut self, id: u64, pids: Option<&[Pid]>) -> Result<Vec<Pid>, ProbeUnavailable> {
        let change = match pids {
            Some(p) => self.holders.set(id, p),
            None => self.holders.close(id),
        };
        if !change.is_empty() {
            let union = self.holders.union();
            crate::bpf::track_targets(&mut self.ebpf, &mut self.tracked, &union)?;
        }
        Ok(change.removed)
    }
}

/// The daemon's probe: hands out one [`ProbeShare`] per managed process.
pub struct SharedProbe {
    core: Arc<Core>,
}

impl std::fmt::Debug for SharedProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedProbe")
            .field("slots", &self.core.slots)
            .finish_non_exhaustive()
    }
}

impl SharedProbe {
    /// Loads and attaches the program once, or says why it cannot.
    pub fn load() -> Result<SharedProbe, ProbeUnavailable> {
        let (ebpf, slots, links) = super::open()?;
        Ok(SharedProbe {
            core: Arc::new(Core {
                slots,
                _links: links,
                registry: Mutex::new(Registry {
                    ebpf,
                    tracked: HashSet::new(),
                    holders: Holders::default(),
                }),
            }),
        })
    }

    /// A handle for one more process's sampler, and a look at what it does.
    pub fn handle(&self) -> (ProbeShare, Arc<ShareStats>) {
        let id = match self.core.registry.lock() {
            Ok(mut r) => r.holders.open(),
            // A poisoned lock: the handle's first refresh fails and its sampler reads /proc.
            Err(_) => 0,
        };
        let stats = Arc::new(ShareStats::default());
        let share = ProbeShare {
            core: Arc::clone(&self.core),
            id,
            pids: Vec::new(),
            now: 0,
            events: self.core.slots.events(),
            answered: Cell::new(0),
            seeded: HashSet::new(),
            stats: Arc::clone(&stats),
        };
        (share, stats)
    }

    /// Every pid some handle holds (what the program's `targets` holds).
    pub fn targets(&self) -> Vec<Pid> {
        self.core
            .registry
            .lock()
            .map(|r| r.holders.union())
            .unwrap_or_default()
    }

    /// The mapped counters (for tests).
    pub fn slots(&self) -> &Slots {
        &self.core.slots
    }
}

/// One process's view of the shared probe: a [`RunCounters`] over its threads.
pub struct ProbeShare {
    core: Arc<Core>,
    id: u64,
    /// The pids of the last refresh, as given.
    pids: Vec<Pid>,
    /// Ktime of the last refresh: a running thread's run time is counted up to it.
    now: u64,
    /// Births, deaths and spawns (of every handle's processes) at the last refresh.
    events: [u64; 3],
    /// Threads answered for since the last refresh.
    answered: Cell<u64>,
    /// Threads this handle seeded, or found counted, and has not forgotten: freed when it
    /// is dropped (even when their process has gone).
    seeded: HashSet<i32>,
    stats: Arc<ShareStats>,
}

impl std::fmt::Debug for ProbeShare {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeShare")
            .field("id", &self.id)
            .field("pids", &self.pids)
            .finish_non_exhaustive()
    }
}

/// Frees the slots of `tids` that they own; returns how many.
pub fn free_tids(slots: &Slots, tids: impl IntoIterator<Item = i32>) -> u64 {
    tids.into_iter().map(|t| u64::from(slots.free(t))).sum()
}

/// The threads of `pid` now (none when it has gone).
fn threads_of(pid: Pid) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{}/task", pid.0))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl ProbeShare {
    /// Frees the slots of the threads of `gone` (pids no handle holds any more).
    fn free_processes(&self, gone: &[Pid]) -> u64 {
        gone.iter()
            .map(|&p| free_tids(&self.core.slots, threads_of(p)))
            .sum()
    }
}

impl RunCounters for ProbeShare {
    fn name(&self) -> &'static str {
        "BPF sched_switch counters (shared)"
    }

    fn refresh(&mut self, pids: &[Pid]) -> Result<bool, LinuxError> {
        if pids != self.pids.as_slice() {
            let err = |why: std::io::Error| LinuxError::io("bpf counters", why);
            let gone = self
                .core
                .registry
                .lock()
                .map_err(|_| err(std::io::Error::other("the shared probe's lock is poisoned")))?
                .set(self.id, Some(pids))
                .map_err(|e| err(std::io::Error::other(e)))?;
            let freed = self.free_processes(&gone);
            self.stats.freed.fetch_add(freed, Ordering::Relaxed);
            self.pids.clear();
            self.pids.extend_from_slice(pids);
        }
        self.now = monotonic_now().0;
        let events = self.core.slots.events();
        let changed = events[..2] != self.events[..2];
        self.events = events;
        self.stats
            .counted
            .store(self.answered.replace(0), Ordering::Relaxed);
        self.stats.samples.fetch_add(1, Ordering::Relaxed);
        Ok(changed)
    }

    fn get(&self, tid: Tid) -> Option<Counted> {
        let c = counted(&self.core.slots.read(tid.0)?, self.now)?;
        self.answered.set(self.answered.get() + 1);
        Some(c)
    }

    fn seed(&mut self, tid: Tid, sample: &Sample) {
        use super::Claim;
        match self
            .core
            .slots
            .claim(tid.0, &seeded(sample, monotonic_now().0))
        {
            Claim::Seeded | Claim::Owned => {
                self.seeded.insert(tid.0);
            }
            Claim::Taken => {}
        }
    }

    fn forget(&mut self, tid: Tid) {
        self.core.slots.free(tid.0);
        self.seeded.remove(&tid.0);
    }

    fn births(&self) -> Option<u64> {
        Some(self.events[0])
    }

    fn births_now(&self) -> Option<u64> {
        Some(self.core.slots.events()[0])
    }

    fn spawns(&self) -> Option<u64> {
        Some(self.events[2])
    }
}

impl Drop for ProbeShare {
    fn drop(&mut self) {
        let gone = match self.core.registry.lock() {
            Ok(mut r) => r.set(self.id, None).unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        let mut freed = self.free_processes(&gone);
        // The threads it seeded are its processes' (exited ones included), unless another
        // handle still holds one of its pids.
        if self.pids.iter().all(|p| gone.contains(p)) {
            freed += free_tids(&self.core.slots, self.seeded.drain());
        }
        self.stats.freed.fetch_add(freed, Ordering::Relaxed);
        self.stats
            .counted
            .store(self.answered.get(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedbpf::{Claim, Raw};

    fn sleeper() -> Raw {
        Raw {
            run: 7,
            state: 0x01,
            seeded: 1,
            ..Raw::default()
        }
    }

    #[test]
    fn free_tids_frees_only_the_slots_the_threads_own() {
        let s = Slots::anonymous();
        for tid in [10, 11, 12] {
            assert_eq!(s.claim(tid, &sleeper()), Claim::Seeded);
        }
        // 11 + 16384 shares 11's slot but does not own it; 13 has none: 2 freed.
        assert_eq!(free_tids(&s, [10, 11 + 16384, 11, 13]), 2);
        assert_eq!(s.read(10), None);
        assert_eq!(s.read(11), None);
        assert!(s.read(12).is_some(), "a thread not named keeps its slot");
        // A freed slot is free for any thread again.
        assert_eq!(s.claim(11 + 16384, &sleeper()), Claim::Seeded);
    }

    /// Live (root, tracefs): two handles on one process, then none.
    mod live {
        use super::super::*;
        use std::sync::atomic::AtomicBool;
        use std::time::{Duration, Instant};

        /// Waits up to 10 s for `f`.
        fn within<T>(mut f: impl FnMut() -> Option<T>) -> Option<T> {
            let end = Instant::now() + Duration::from_secs(10);
            while Instant::now() < end {
                if let Some(v) = f() {
                    return Some(v);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            None
        }

        #[test]
        fn shared_probe_counts_a_thread_until_its_last_holder_lets_go() {
            let probe = SharedProbe::load()
                .expect("the shared BPF counters load (run as root, tracefs mounted)");
            let me = Pid(std::process::id() as i32);
            let (mut a, stats_a) = probe.handle();
            let (mut b, stats_b) = probe.handle();
            a.refresh(&[me]).unwrap();
            b.refresh(&[me]).unwrap();
            assert_eq!(probe.targets(), vec![me]);
            // A thread born now is counted from its birth: it sleeps 1 ms at a time, so
            // it switches in and out hundreds of times a second.
            let stop = Arc::new(AtomicBool::new(false));
            let (tx, rx) = std::sync::mpsc::channel();
            let worker = {
                let stop = Arc::clone(&stop);
                std::thread::spawn(move || {
                    let _ = tx.send(Tid(nix::unistd::gettid().as_raw()));
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            };
            let tid = rx.recv().unwrap();
            let slices = |h: &mut ProbeShare| {
                h.refresh(&[me]).unwrap();
                h.get(tid).map(|c| c.sched.timeslices)
            };
            let first = within(|| slices(&mut b).filter(|&s| s >= 5))
                .expect("the new thread is counted through handle b");
            assert!(slices(&mut a).is_some(), "handle a sees it too");
            // a goes: b still holds the process, so the thread is still counted.
            drop(a);
            assert_eq!(probe.targets(), vec![me]);
            assert_eq!(stats_a.freed.load(Ordering::Relaxed), 0);
            within(|| slices(&mut b).filter(|&s| s > first))
                .expect("still counted after the other handle went");
            // b goes: nobody holds the process; its threads' slots are freed, and the
            // thread, switching on, is not counted again.
            drop(b);
            assert!(probe.targets().is_empty());
            assert!(stats_b.freed.load(Ordering::Relaxed) >= 1);
            assert_eq!(probe.slots().read(tid.0), None);
            std::thread::sleep(Duration::from_millis(50));
            assert_eq!(probe.slots().read(tid.0), None, "a freed slot stays free");
            stop.store(true, Ordering::Relaxed);
            worker.join().unwrap();
        }
    }
}
