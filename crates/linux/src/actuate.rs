//! Carrying out a plan: `sched_setaffinity` per thread, and putting every mask back.
//!
//! ```text
//!  Move { thread: (pid, tid, start_time), to } ─► stat start time still the same? ── no ─► Vanished
//!                                                   │ yes
//!       current = sched_getaffinity(tid); first touch: original = current
//!       want = cpus(to) ∩ original ── empty ─► Denied      want == current ─► Unchanged
//!       sched_setaffinity(tid, want) ── ESRCH ─► Vanished  EPERM/EINVAL ─► Denied
//!       start time re-checked: if the tid changed hands meanwhile, its mask is put back
//! ```
//!
//! A thread is never given a CPU outside the mask it had before we first touched it, a tid
//! whose start time differs from the plan's is never touched, and every changed mask is
//! restored by [`Actuator::restore_all`], which `Drop` also calls as a safety net.
//!
//! **Inherited masks.** A thread starts with its creator's mask, so a thread created by
//! a thread we confined carries a mask we chose, not one the program chose. Once told
//! when management began and what the managed processes' masks were then
//! ([`Actuator::inherit_from`]), the actuator treats a thread that started after that
//! instant and whose mask is exactly one it applied as having inherited it: its original
//! is the process's mask from the start (so later moves may use every CPU the program
//! allowed), and [`Actuator::restore_inherited`] widens it back at the end even if no move
//! ever named it. A program that itself sets a thread to exactly a mask we applied is
//! indistinguishable from this and is widened too; that is the one case this rule gets
//! wrong.
//!
//! Masks of any size are supported: the fixed 1024-CPU set of the C library is used while
//! it can hold the mask, and the raw system calls with a larger buffer beyond that.

use crate::read::{Root, read_start_time};
use std::collections::BTreeMap;
use std::io;
use threadbalance_model::{
    ApplyReport, CpuId, CpuSet, Move, MoveOutcome, Plan, Target, ThreadKey, Tid, Topology,
};

/// The CPUs thread `tid` may run on (`sched_getaffinity`).
pub fn affinity_of(tid: Tid) -> io::Result<CpuSet> {
    use nix::sched::{CpuSet as NixSet, sched_getaffinity};
    match sched_getaffinity(nix::unistd::Pid::from_raw(tid.0)) {
        Ok(set) => Ok((0..NixSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .map(|i| CpuId(i as u32))
            .collect()),
        // The kernel's masks are larger than the fixed set: ask with a larger buffer.
        Err(nix::errno::Errno::EINVAL) => raw_affinity_of(tid),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// `sched_getaffinity` with a buffer that grows until the kernel's mask fits.
fn raw_affinity_of(tid: Tid) -> io::Result<CpuSet> {
    let mut words: Vec<u64> = vec![0; 32];
    loop {
        let len = words.len() * std::mem::size_of::<u64>();
        // SAFETY: the kernel writes at most `len` bytes to the pointer, and `words` owns
        // exactly `len` writable bytes; the other arguments are plain integers.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                libc::pid_t::from(tid.0),
                len,
                words.as_mut_ptr(),
            )
        };
        if r >= 0 {
            let bytes = usize::try_from(r).unwrap_or(len).min(len);
            return Ok(CpuSet::from_words(&words[..bytes.div_ceil(8)]));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) && words.len() < (1 << 16) {
            words.resize(words.len() * 2, 0);
            continue;
        }
        return Err(e);
    }
}

/// Lets thread `tid` run only on `cpus` (`sched_setaffinity`).
pub fn set_affinity(tid: Tid, cpus: &CpuSet) -> io::Result<()> {
    use nix::sched::{CpuSet as NixSet, sched_setaffinity};
    if cpus.bound() as usize > NixSet::count() {
        return raw_set_affinity(tid, cpus);
    }
    let mut set = NixSet::new();
    for c in cpus.iter() {
        set.set(c.0 as usize).map_err(io::Error::from)?;
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(tid.0), &set).map_err(io::Error::from)
}

/// `sched_setaffinity` with a mask of any size.
pub(crate) fn raw_set_affinity(tid: Tid, cpus: &CpuSet) -> io::Result<()> {
    let words = cpus.as_words();
    let len = std::mem::size_of_val(words);
    // SAFETY: the kernel reads at most `len` bytes from the pointer, and `words` holds
    // exactly `len` readable bytes; the other arguments are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            libc::pid_t::from(tid.0),
            len,
            words.as_ptr(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What an error from the affinity calls means for a move.
fn outcome_of(e: &io::Error) -> MoveOutcome {
    match e.raw_os_error() {
        Some(libc::ESRCH) => MoveOutcome::Vanished,
        _ => MoveOutcome::Denied,
    }
}

/// A thread whose mask we changed.
#[derive(Debug, Clone)]
struct Touched {
    /// Which thread (the start time guards against tid reuse).
    key: ThreadKey,
    /// Its mask before we first touched it.
    original: CpuSet,
}

/// Applies plans with `sched_setaffinity` and remembers what to restore.
#[derive(Debug)]
pub struct Actuator {
    root: Root,
    touched: BTreeMap<Tid, Touched>,
    /// Every distinct mask this actuator has set (there are as many as domains used).
    applied: Vec<CpuSet>,
    /// Start time (clock ticks since boot) from which a thread may have inherited a mask
    /// of ours, and the managed processes' mask at that time.
    inherit: Option<(u64, CpuSet)>,
}

impl Actuator {
    /// An actuator that checks start times under `root` (the `/proc` the threads live in:
    /// [`Root::system`] on a live system).
    pub fn new(root: Root) -> Actuator {
        Actuator {
            root,
            touched: BTreeMap::new(),
            applied: Vec::new(),
            inherit: None,
        }
    }

    /// Declares that management began at `since` (clock ticks since boot, as thread start
    /// times are counted) with the managed processes allowed on `base`; see the module docs
    /// on inherited masks.
    pub fn inherit_from(&mut self, since: u64, base: CpuSet) {
        self.inherit = Some((since, base));
    }

    /// The mask `key` had before we touched it: its current mask, or the processes' base
    /// mask when it started after management began with a mask of ours.
    fn original_of(&self, key: ThreadKey, current: &CpuSet) -> CpuSet {
        match &self.inherit {
            Some((since, base)) if key.start_time >= *since && self.applied.contains(current) => {
                base.clone()
            }
            _ => current.clone(),
        }
    }

    /// Carries out every move of `plan`, counting each outcome; see the module docs.
    pub fn apply(&mut self, topo: &Topology, plan: &Plan) -> ApplyReport {
        let mut report = ApplyReport::default();
        for mv in &plan.moves {
            report.count(self.apply_move(topo, mv));
        }
        report
    }

    /// Carries out one move.
    pub fn apply_move(&mut self, topo: &Topology, mv: &Move) -> MoveOutcome {
        let key = mv.thread;
        match self.same_thread(key) {
            Some(true) => {}
            Some(false) => {
                // The tid is gone or names another thread; forget what we knew of it.
                self.touched.remove(&key.tid);
                return MoveOutcome::Vanished;
            }
            None => return MoveOutcome::Denied,
        }
        if self.touched.get(&key.tid).is_some_and(|t| t.key != key) {
            self.touched.remove(&key.tid);
        }
        let current = match affinity_of(key.tid) {
            Ok(c) => c,
            Err(e) => return outcome_of(&e),
        };
        let original = match self.touched.get(&key.tid) {
            Some(t) => t.original.clone(),
            None => self.original_of(key, &current),
        };
        let want = match mv.to {
            Target::Original => original.clone(),
            Target::Domain { level, index } => match topo.domains(level).get(index) {
                Some(d) => d.cpus.intersection(&original),
                None => return MoveOutcome::Denied,
            },
            Target::Cpu(cpu) => {
                if topo.cpu(cpu).is_none() {
                    return MoveOutcome::Denied;
                }
                CpuSet::single(cpu).intersection(&original)
            }
        };
        if want.is_empty() {
            return MoveOutcome::Denied;
        }
        if want == current {
            if mv.to == Target::Original {
                self.touched.remove(&key.tid);
            }
            return MoveOutcome::Unchanged;
        }
        if let Err(e) = set_affinity(key.tid, &want) {
            return outcome_of(&e);
        }
        if !self.applied.contains(&want) {
            self.applied.push(want.clone());
        }
        if self.same_thread(key) != Some(true) {
            // The thread exited and its tid was reused between the check and the call: put
            // the stranger's mask back (best effort) and leave it alone.
            let _ = set_affinity(key.tid, &current);
            self.touched.remove(&key.tid);
            return MoveOutcome::Vanished;
        }
        if mv.to == Target::Original {
            self.touched.remove(&key.tid);
        } else {
            self.touched
                .entry(key.tid)
                .or_insert(Touched { key, original });
        }
        MoveOutcome::Done
    }

    /// Whether `key`'s tid still names the thread that started at `key.start_time`:
    /// `Some(false)` when it has gone or been reused, `None` when its `stat` cannot be read.
    fn same_thread(&self, key: ThreadKey) -> Option<bool> {
        match read_start_time(&self.root, key.pid, key.tid) {
            Ok(Some(start)) => Some(start == key.start_time),
            Ok(None) => Some(false),
            Err(_) => None,
        }
    }

    /// Restores the original mask of every thread whose mask was changed, skipping those
    /// that vanished or whose tid now names another thread, and forgets them all. `done`
    /// counts masks restored, `unchanged` those already back, `vanished` and `denied` the
    /// rest.
    pub fn restore_all(&mut self) -> ApplyReport {
        let mut report = ApplyReport::default();
        for (tid, t) in std::mem::take(&mut self.touched) {
            let outcome = match self.same_thread(t.key) {
                Some(true) => match affinity_of(tid) {
                    Ok(current) if current == t.original => MoveOutcome::Unchanged,
                    Ok(_) => match set_affinity(tid, &t.original) {
                        Ok(()) => MoveOutcome::Done,
                        Err(e) => outcome_of(&e),
                    },
                    Err(e) => outcome_of(&e),
                },
                Some(false) => MoveOutcome::Vanished,
                None => MoveOutcome::Denied,
            };
            report.count(outcome);
        }
        report
    }

    /// Widens back the threads of `pids` that inherited a mask of ours and were never moved
    /// (see the module docs): each thread that started after management began and whose
    /// mask is one we applied gets the processes' base mask. Call after
    /// [`Actuator::restore_all`]. Counts as `restore_all` does.
    pub fn restore_inherited(&mut self, pids: &[threadbalance_model::Pid]) -> ApplyReport {
        let mut report = ApplyReport::default();
        let Some((since, base)) = self.inherit.clone() else {
            return report;
        };
        if self.applied.is_empty() {
            return report;
        }
        for &pid in pids {
            let dir = self.root.proc_dir(pid).join("task");
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                    continue;
                };
                let tid = Tid(tid);
                let Ok(Some(start)) = read_start_time(&self.root, pid, tid) else {
                    continue;
                };
                if start < since {
                    continue;
                }
                let key = ThreadKey {
                    pid,
                    tid,
                    start_time: start,
                };
                let outcome = match affinity_of(tid) {
                    Ok(current) if self.applied.contains(&current) && current != base => {
                        match set_affinity(tid, &base) {
                            Ok(()) if self.same_thread(key) == Some(true) => MoveOutcome::Done,
                            Ok(()) => MoveOutcome::Vanished,
                            Err(e) => outcome_of(&e),
                        }
                    }
                    Ok(_) => continue,
                    Err(e) => outcome_of(&e),
                };
                report.count(outcome);
            }
        }
        report
    }

    /// The threads whose masks are changed now, with their original masks.
    pub fn changed(&self) -> impl Iterator<Item = (ThreadKey, &CpuSet)> {
        self.touched.values().map(|t| (t.key, &t.original))
    }
}

impl Drop for Actuator {
    /// Restores every changed mask, so an early return or a panic never leaves threads pinned.
    fn drop(&mut self) {
        if !self.touched.is_empty() {
            let _ = self.restore_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_thread() -> Tid {
        Tid(nix::unistd::gettid().as_raw())
    }

    #[test]
    fn affinity_round_trips_on_a_thread_of_our_own() {
        // Runs on a thread of its own so no other test thread is ever touched.
        std::thread::spawn(|| {
            let tid = this_thread();
            let before = affinity_of(tid).unwrap();
            assert!(!before.is_empty());
            let first = before.first().unwrap();
            set_affinity(tid, &CpuSet::single(first)).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), CpuSet::single(first));
            set_affinity(tid, &before).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn raw_set_affinity_takes_masks_beyond_1024_cpus() {
        std::thread::spawn(|| {
            let tid = this_thread();
            let before = affinity_of(tid).unwrap();
            let first = before.first().unwrap();
            // CPU 1500 does not exist here; the kernel ignores bits beyond its CPUs, so the
            // thread ends up on `first` alone. The mask is too large for the fixed set, so
            // this goes through the raw call.
            let mut big = CpuSet::single(first);
            big.insert(CpuId(1500));
            assert!(big.bound() > 1024);
            set_affinity(tid, &big).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), CpuSet::single(first));
            assert_eq!(raw_affinity_of(tid).unwrap(), CpuSet::single(first));
            raw_set_affinity(tid, &before).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
