//! One set of run-time counters for many hosts: the daemon's.
//!
//! `run`, `attach` and `top` manage one target each, and each loads its own BPF
//! counters ([`crate::runcount::announce`]). The daemon manages many processes, each with a
//! host of its own; loading one probe per process would put one program per process on
//! every context switch of the machine. So the daemon opens one [`SharedCounters`] and
//! gives each managed process's sampler a handle on it ([`SharedCounters::handle`]):
//!
//! ```text
//!  daemon: SharedCounters::new()              nothing loaded yet
//!  first process taken on ─► handle() ─► loads the probe once (BPF: root, tracefs,
//!                                        verifier) ─► one log line: which source, or why
//!                                        /proc (then every handle is /proc, quietly)
//!  each process: LinuxAdapter::with_counters(.., Counters::Given(handle))
//!    refresh(pids) ─► Holders: this handle's pids ─► union of every handle's ─► `targets`
//!    get / seed / forget ─► the one mapped array (slot tid & (SLOTS − 1)), no lock
//!  process released or exited ─► handle dropped ─► its pids leave `targets` (unless
//!                                another handle holds them) ─► its threads' slots freed
//! ```
//!
//! What is shared, and what it costs: the program counts births, deaths and new
//! processes in one header for all targets, so a thread born in one managed process makes
//! every other process's sampler list its task directory once (one `getdents`), and a
//! process started by one makes every other host read its `children` files once. Per
//! target process the program keeps one entry of its `targets` map (4096 at most: past
//! that a handle's refresh fails and its sampler reads `/proc`); per thread, one slot of
//! the array, freed when the sampler sees the thread gone, taken over when its thread has
//! exited, and freed for every thread of a process when its handle is dropped, so a
//! released process's threads stop being counted and a long-running daemon does not fill
//! the array.
//!
//! The bookkeeping of who holds which pid ([`Holders`]) is pure and always built; the
//! probe itself is in `crate::schedbpf::shared` (feature `bpf`).

use crate::runcount::{Counters, RunSource};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use threadbalance_model::Pid;

/// Which handle holds which processes, and the union the program filters on.
#[derive(Debug, Clone, Default)]
pub struct Holders {
    /// Each handle's processes, sorted.
    by_handle: BTreeMap<u64, Vec<Pid>>,
    /// How many handles hold each pid.
    count: HashMap<i32, u32>,
    next: u64,
}

/// What a change of one handle's processes does to the union.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Change {
    /// Pids no handle held before: into the program's `targets`.
    pub added: Vec<Pid>,
    /// Pids no handle holds now: out of `targets`, their threads' slots freed.
    pub removed: Vec<Pid>,
}

impl Change {
    /// Nothing to do.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty()
    }
}

impl Holders {
    /// A new handle, holding nothing yet.
    pub fn open(&mut self) -> u64 {
        self.next += 1;
        self.by_handle.insert(self.next, Vec::new());
        self.next
    }

    /// Handle `id` holds exactly `pids` from now on.
    pub fn set(&mut self, id: u64, pids: &[Pid]) -> Change {
        let mut want = pids.to_vec();
        want.sort_unstable();
        want.dedup();
        let old = self.by_handle.insert(id, want.clone()).unwrap_or_default();
        let mut change = Change::default();
        for p in old.iter().filter(|p| want.binary_search(p).is_err()) {
            if let Some(n) = self.count.get_mut(&p.0) {
                *n -= 1;
                if *n == 0 {
                    self.count.remove(&p.0);
                    change.removed.push(*p);
                }
            }
        }
        for p in want.iter().filter(|p| old.binary_search(p).is_err()) {
            let n = self.count.entry(p.0).or_insert(0);
            *n += 1;
            if *n == 1 {
                change.added.push(*p);
            }
        }
        change
    }

    /// Handle `id` is gone: what it alone held leaves the union.
    pub fn close(&mut self, id: u64) -> Change {
        let change = self.set(id, &[]);
        self.by_handle.remove(&id);
        change
    }

    /// Every pid some handle holds, sorted.
    pub fn union(&self) -> Vec<Pid> {
        let mut all: Vec<Pid> = self.count.keys().map(|&p| Pid(p)).collect();
        all.sort_unstable();
        all
    }

    /// Open handles.
    pub fn handles(&self) -> usize {
        self.by_handle.len()
    }
}

/// What one handle did, for the daemon's log: read by the daemon while the handle lives
/// in a sampler, and after it is dropped.
#[derive(Debug, Default)]
pub struct ShareStats {
    /// Threads the shared counters answered for in the handle's last sample.
    pub counted: AtomicU64,
    /// Samples taken through the handle.
    pub samples: AtomicU64,
    /// Slots freed when the handle was dropped.
    pub freed: AtomicU64,
}

/// A look at one handle's [`ShareStats`]; `None` inside when the process reads `/proc`.
#[derive(Debug, Clone, Default)]
pub struct Watch(pub Option<Arc<ShareStats>>);

impl Watch {
    /// One clause for the release line: "4 threads counted by the shared BPF counters at
    /// its last sample (of 57); 4 counter slots freed", or `None` without counters.
    pub fn describe(&self) -> Option<String> {
        let s = self.0.as_ref()?;
        Some(format!(
            "{} threads counted by the shared BPF counters at its last sample (of {}); {} counter slots freed",
            s.counted.load(Ordering::Relaxed),
            s.samples.load(Ordering::Relaxed),
            s.freed.load(Ordering::Relaxed),
        ))
    }
}

/// A handle for one process's host, and what to log if it was the first.
#[derive(Debug)]
pub struct Handed {
    /// For [`crate::LinuxAdapter::with_counters`].
    pub counters: Counters,
    /// What the handle did, for the release line.
    pub watch: Watch,
    /// Set on the call that loaded the probe (or found it could not): the daemon logs it,
    /// once.
    pub loaded: Option<RunSource>,
}

/// The daemon's counters: loaded at the first [`SharedCounters::handle`], shared by every
/// handle, unloaded when the daemon drops it (after its hosts).
#[derive(Debug, Default)]
pub struct SharedCounters {
    source: Option<RunSource>,
    #[cfg(feature = "bpf")]
    probe: Option<crate::schedbpf::shared::SharedProbe>,
}

impl SharedCounters {
    /// Nothing loaded until the first handle is asked for.
    pub fn new() -> SharedCounters {
        SharedCounters::default()
    }

    /// The source in use, once the first handle was given.
    pub fn source(&self) -> Option<&RunSource> {
        self.source.as_ref()
    }

    /// A handle for one more host: the shared BPF counters (loaded now if this is the
    /// first), or `/proc` when the build or the machine does not allow them.
    pub fn handle(&mut self) -> Handed {
        let loaded = if self.source.is_none() {
            let source = self.load();
            self.source = Some(source.clone());
            Some(source)
        } else {
            None
        };
        #[cfg(feature = "bpf")]
        if let Some(p) = &self.probe {
            let (share, stats) = p.handle();
            return Handed {
                counters: Counters::Given(Some(Box::new(share))),
                watch: Watch(Some(stats)),
                loaded,
            };
        }
        Handed {
            counters: Counters::Given(None),
            watch: Watch(None),
            loaded,
        }
    }

    #[cfg(feature = "bpf")]
    fn load(&mut self) -> RunSource {
        match crate::schedbpf::shared::SharedProbe::load() {
            Ok(p) => {
                self.probe = Some(p);
                RunSource::Fast(crate::schedbpf::shared::NAME)
            }
            Err(why) => RunSource::Proc(why.0),
        }
    }

    #[cfg(not(feature = "bpf"))]
    fn load(&mut self) -> RunSource {
        RunSource::Proc("built without the bpf feature".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pids(v: &[i32]) -> Vec<Pid> {
        v.iter().map(|&p| Pid(p)).collect()
    }

    #[test]
    fn holders_first_holder_adds_and_last_holder_removes() {
        let mut h = Holders::default();
        let (a, b) = (h.open(), h.open());
        assert_eq!(h.set(a, &pids(&[10, 11])).added, pids(&[10, 11]));
        // b holds 11 too: nothing new for the program, 12 is.
        let c = h.set(b, &pids(&[12, 11]));
        assert_eq!((c.added, c.removed), (pids(&[12]), vec![]));
        assert_eq!(h.union(), pids(&[10, 11, 12]));
        // a lets go of 11: b still holds it, so it stays; 10 goes.
        let c = h.set(a, &pids(&[]));
        assert_eq!((c.added, c.removed), (vec![], pids(&[10])));
        assert_eq!(h.union(), pids(&[11, 12]));
    }

    #[test]
    fn holders_close_frees_only_what_the_handle_alone_held() {
        let mut h = Holders::default();
        let (a, b) = (h.open(), h.open());
        h.set(a, &pids(&[10, 11]));
        h.set(b, &pids(&[11]));
        assert_eq!(h.handles(), 2);
        let c = h.close(a);
        assert_eq!(c.removed, pids(&[10]));
        assert_eq!(h.handles(), 1);
        let c = h.close(b);
        assert_eq!(c.removed, pids(&[11]));
        assert!(h.union().is_empty());
        // Closing twice changes nothing.
        assert!(h.close(b).is_empty());
    }

    #[test]
    fn holders_same_set_again_is_no_change() {
        // A sampler refreshes with the same pids every sample: no map update.
        let mut h = Holders::default();
        let a = h.open();
        h.set(a, &pids(&[7, 3, 7]));
        assert!(h.set(a, &pids(&[3, 7])).is_empty());
        assert_eq!(h.union(), pids(&[3, 7]));
    }

    #[test]
    fn holders_many_processes_come_and_go_leave_nothing_held() {
        // 50 handles, each holding its own pid and then released: the union (the
        // program's `targets`) ends empty, every pid removed exactly once.
        let mut h = Holders::default();
        let ids: Vec<u64> = (0..50).map(|_| h.open()).collect();
        let mut added = 0;
        for (i, id) in ids.iter().enumerate() {
            added += h.set(*id, &pids(&[1000 + i as i32])).added.len();
        }
        assert_eq!((added, h.union().len()), (50, 50));
        let removed: usize = ids.iter().map(|id| h.close(*id).removed.len()).sum();
        assert_eq!(removed, 50);
        assert!(h.union().is_empty());
        assert_eq!(h.handles(), 0);
    }

    #[test]
    fn watch_without_counters_says_nothing() {
        assert_eq!(Watch(None).describe(), None);
        let s = Arc::new(ShareStats::default());
        s.counted.store(4, Ordering::Relaxed);
        s.samples.store(57, Ordering::Relaxed);
        s.freed.store(4, Ordering::Relaxed);
        assert_eq!(
            Watch(Some(s)).describe().unwrap(),
            "4 threads counted by the shared BPF counters at its last sample (of 57); 4 counter slots freed"
        );
    }

    #[cfg(not(feature = "bpf"))]
    #[test]
    fn shared_counters_without_the_feature_hand_out_proc_and_say_so_once() {
        let mut s = SharedCounters::new();
        let first = s.handle();
        assert!(matches!(first.counters, Counters::Given(None)));
        assert_eq!(
            first.loaded,
            Some(RunSource::Proc("built without the bpf feature".into()))
        );
        assert!(s.handle().loaded.is_none(), "said once");
    }
}
