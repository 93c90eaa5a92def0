//! The shared run-time counters' bookkeeping ([`crate::runshare`]): which handle holds
//! which processes, the union the program filters on, and what each handle did. Pure and
//! always built; a leaf, so the probe (`crate::schedbpf::shared`) and the daemon's side
//! ([`crate::runshare`]) both build on it.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicU64;
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
}
