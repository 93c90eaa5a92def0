//! When the CPUs a managed process may use change under it.
//!
//! Two things other than the daemon change where a process may run: its cgroup's cpuset
//! (systemd, a container runtime, an operator writing `cpuset.cpus`), and masks set on its
//! threads from inside or outside (`taskset -a -p`, the program's own
//! `sched_setaffinity`). Either way the group's policy plans over CPUs that are no longer
//! the right ones. The daemon reads both every window and, when the result differs, logs
//! one warning naming the process and the change, and re-plans its group on the new set.
//!
//! The masks the daemon itself sets must not count as a change, so a thread whose mask is
//! one the daemon set on some thread of the process (a thread created by a confined thread
//! inherits its mask) is left out of the union; when every thread carries such a mask, the
//! masks say nothing new and the last known set stays. What the program sets is its own:
//! the actuator leaves such a thread alone from then on and never restores over it, as
//! `run` and `attach` do.
//!
//! ```text
//!  window ─► cpuset.cpus.effective of its cgroup (None: no cpuset controller)
//!         ─► masks of its threads, less the daemon's own ─► program's CPUs (None: all ours)
//!  observe(before, …) ─► usable ∩ cpuset ∩ program  ≠ before? ─► one warning, re-plan
//! ```
//!
//! ```
//! use threadbalance_daemon::allowed::{Allowed, observe};
//! use threadbalance_model::{CpuSet, Pid};
//! let s = |l: &str| CpuSet::parse_list(l).unwrap();
//! let before = Allowed { cpuset: Some(s("0-15")), program: s("0-15") };
//! // systemd narrowed the service's cpuset to 0-7.
//! let (now, change) = observe(Pid(42), &before, Some(s("0-7")), None, &s("0-15"));
//! assert_eq!(now.cpus(&s("0-15")), s("0-7"));
//! assert_eq!(change.unwrap().to_string(),
//!     "the CPUs of process 42 changed from 0-15 to 0-7 (its cgroup's cpuset.cpus.effective \
//!      went from 0-15 to 0-7): its group is re-planned on the new set");
//! ```

use std::fmt;
use threadbalance_model::{CpuSet, Pid};

/// What a managed process may use, as last seen.
#[derive(Debug, Clone, PartialEq)]
pub struct Allowed {
    /// Its cgroup's `cpuset.cpus.effective`; `None` without a cpuset controller.
    pub cpuset: Option<CpuSet>,
    /// The union of its threads' own masks (those the daemon did not set).
    pub program: CpuSet,
}

impl Allowed {
    /// The CPUs it may use that the daemon may use too.
    pub fn cpus(&self, usable: &CpuSet) -> CpuSet {
        let cpus = usable.intersection(&self.program);
        match &self.cpuset {
            Some(c) => cpus.intersection(c),
            None => cpus,
        }
    }
}

/// What changed the CPUs of a process.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// Its cgroup's cpuset.
    Cpuset {
        /// `cpuset.cpus.effective` before (`None`: unreadable then).
        before: Option<CpuSet>,
        /// And now.
        after: Option<CpuSet>,
    },
    /// Masks set on its threads by someone other than the daemon.
    Masks,
}

/// A change of a managed process's CPUs, printed as one warning line.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The process.
    pub pid: Pid,
    /// Its CPUs (within the usable ones) before.
    pub before: CpuSet,
    /// And now.
    pub after: CpuSet,
    /// What changed them (the cpuset when both did).
    pub cause: Cause,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let opt = |c: &Option<CpuSet>| c.as_ref().map_or("none".to_string(), |c| c.to_string());
        let cause = match &self.cause {
            Cause::Cpuset { before, after } => format!(
                "its cgroup's cpuset.cpus.effective went from {} to {}",
                opt(before),
                opt(after)
            ),
            Cause::Masks => {
                "its threads' masks were set outside the daemon; those threads are left \
                 as set"
                    .to_string()
            }
        };
        let after = if self.after.is_empty() {
            "none".to_string()
        } else {
            self.after.to_string()
        };
        write!(
            f,
            "the CPUs of process {} changed from {} to {after} ({cause}): its group is \
             re-planned on the new set",
            self.pid, self.before
        )
    }
}

/// The union of the masks `threads` carry, leaving out every mask in `ours` (masks the
/// daemon set on threads of this process); `None` when no mask is left.
///
/// ```
/// use threadbalance_daemon::allowed::program_cpus;
/// use threadbalance_model::CpuSet;
/// let s = |l: &str| CpuSet::parse_list(l).unwrap();
/// // The daemon confined two threads to 0-3 and 4-7; a third was never moved.
/// let ours = [s("0-3"), s("4-7")];
/// assert_eq!(program_cpus(&[s("0-3"), s("4-7"), s("0-15")], &ours), Some(s("0-15")));
/// assert_eq!(program_cpus(&[s("0-3"), s("4-7")], &ours), None);
/// ```
pub fn program_cpus(threads: &[CpuSet], ours: &[CpuSet]) -> Option<CpuSet> {
    threads
        .iter()
        .filter(|m| !ours.contains(m))
        .fold(None, |acc: Option<CpuSet>, m| {
            Some(acc.map_or_else(|| m.clone(), |a| a.union(m)))
        })
}

/// The process `pid` seen again: its cgroup's `cpuset.cpus.effective` now (`None`: none or
/// unreadable) and its threads' own CPUs now (`None`: every thread carries a mask of ours,
/// so the last known set stays). Returns what it may use now, and the change if its CPUs
/// within `usable` differ from before. Pure.
pub fn observe(
    pid: Pid,
    before: &Allowed,
    cpuset: Option<CpuSet>,
    program: Option<CpuSet>,
    usable: &CpuSet,
) -> (Allowed, Option<Change>) {
    let now = Allowed {
        program: program.unwrap_or_else(|| before.program.clone()),
        cpuset,
    };
    let (was, is) = (before.cpus(usable), now.cpus(usable));
    if was == is {
        return (now, None);
    }
    let cause = if now.cpuset != before.cpuset {
        Cause::Cpuset {
            before: before.cpuset.clone(),
            after: now.cpuset.clone(),
        }
    } else {
        Cause::Masks
    };
    let change = Change {
        pid,
        before: was,
        after: is,
        cause,
    };
    (now, Some(change))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(l: &str) -> CpuSet {
        CpuSet::parse_list(l).unwrap()
    }

    #[test]
    fn observe_nothing_changed_is_silent() {
        let before = Allowed {
            cpuset: Some(s("0-15")),
            program: s("0-15"),
        };
        let (now, change) = observe(
            Pid(7),
            &before,
            Some(s("0-15")),
            Some(s("0-15")),
            &s("0-15"),
        );
        assert_eq!(now, before);
        assert_eq!(change, None);
    }

    #[test]
    fn observe_taskset_on_the_whole_process_is_a_mask_change() {
        // `taskset -a -p -c 0-3 7`: every thread's mask is 0-3, none of them ours.
        let before = Allowed {
            cpuset: None,
            program: s("0-15"),
        };
        let (now, change) = observe(Pid(7), &before, None, Some(s("0-3")), &s("0-15"));
        assert_eq!(now.cpus(&s("0-15")), s("0-3"));
        let c = change.unwrap();
        assert_eq!((c.before.clone(), c.after.clone()), (s("0-15"), s("0-3")));
        assert_eq!(c.cause, Cause::Masks);
        assert!(c.to_string().contains("masks were set outside the daemon"));
    }

    #[test]
    fn observe_every_thread_under_our_masks_keeps_the_last_known_set() {
        // All threads confined by the daemon: the masks say nothing about the program.
        let before = Allowed {
            cpuset: None,
            program: s("0-15"),
        };
        let (now, change) = observe(Pid(7), &before, None, None, &s("0-15"));
        assert_eq!(now.program, s("0-15"));
        assert_eq!(change, None);
    }

    #[test]
    fn observe_a_change_outside_the_usable_cpus_is_no_change() {
        // The daemon may use 0-7 only (8-15 banned); the cpuset losing 8-15 changes
        // nothing it plans on: 0-7 ∩ 0-15 = 0-7 ∩ 0-7.
        let before = Allowed {
            cpuset: Some(s("0-15")),
            program: s("0-15"),
        };
        let (now, change) = observe(Pid(7), &before, Some(s("0-7")), None, &s("0-7"));
        assert_eq!(now.cpuset, Some(s("0-7")));
        assert_eq!(change, None);
    }

    #[test]
    fn observe_cpuset_widened_and_emptied() {
        // 0-7 → 0-15 (a container given more CPUs), then the daemon's CPUs taken away.
        let before = Allowed {
            cpuset: Some(s("0-7")),
            program: s("0-15"),
        };
        let (now, change) = observe(Pid(9), &before, Some(s("0-15")), None, &s("0-15"));
        assert_eq!(change.unwrap().after, s("0-15"));
        let (_, change) = observe(Pid(9), &now, Some(s("16-31")), None, &s("0-15"));
        let c = change.unwrap();
        assert!(c.after.is_empty());
        assert_eq!(
            c.to_string(),
            "the CPUs of process 9 changed from 0-15 to none (its cgroup's \
             cpuset.cpus.effective went from 0-15 to 16-31): its group is re-planned on the \
             new set"
        );
    }
}
