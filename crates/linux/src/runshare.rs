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
//! The bookkeeping of who holds which pid ([`crate::holders::Holders`]) is pure and always
//! built; the probe itself is in `crate::schedbpf::shared` (feature `bpf`).

use crate::holders::ShareStats;
use crate::runcount::{Counters, RunSource};
use std::sync::Arc;
use std::sync::atomic::Ordering;

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
            Err(why) => RunSource::Proc(crate::runcount::NoCounters::Refused(why).into()),
        }
    }

    #[cfg(not(feature = "bpf"))]
    fn load(&mut self) -> RunSource {
        RunSource::Proc(crate::runcount::NoCounters::NotBuilt.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let said = first.loaded.as_ref().map(RunSource::describe);
        assert_eq!(
            said.as_deref(),
            Some("run time from /proc (built without the bpf feature)")
        );
        assert!(s.handle().loaded.is_none(), "said once");
    }
}
