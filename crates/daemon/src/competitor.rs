//! Other things on the machine that move threads or pages, and so fight the daemon.
//!
//! Two placers working at once undo each other's work: the daemon pins a thread to a
//! package, numad then binds the whole process to a node, and the thread's placement is
//! whatever wrote last. The daemon cannot stop them; it can say so, once, on a line an
//! operator will read. Each check is a pure function over what [`crate::read`] found:
//!
//! | what | where it shows | why it competes |
//! |---|---|---|
//! | a sched_ext scheduler | `/sys/kernel/sched_ext/state` = `enabled`, name in `root/ops` | it replaces the kernel's placement and may ignore or fight affinity changes |
//! | numad | a process with comm `numad` | it rebinds whole processes to nodes |
//! | NUMA balancing | `/proc/sys/kernel/numa_balancing` ≠ 0 | the kernel migrates pages and tasks towards each other |
//! | a cpuset change | `cpuset.cpus.effective` of a managed process's cgroup differs between two reads | someone (systemd, a container runtime) changed where it may run; plans made for the old set are stale |
//!
//! ```
//! use threadbalance_daemon::competitor::{Competitor, sched_ext};
//! let w = sched_ext("enabled\n", "rusty_1.0.4\n").unwrap();
//! assert_eq!(w.to_string(), "a sched_ext scheduler (rusty_1.0.4) is loaded: it replaces \
//!     the kernel's placement and may override the daemon's");
//! assert!(sched_ext("disabled\n", "").is_none());
//! ```

use crate::error::ParseError;
use std::fmt;
use threadbalance_model::{CpuSet, Pid};

/// Something that competes with the daemon. Prints as one human line.
#[derive(Debug, Clone, PartialEq)]
pub enum Competitor {
    /// A sched_ext BPF scheduler is loaded (or being loaded or unloaded).
    SchedExt {
        /// `/sys/kernel/sched_ext/state`: `enabled`, `enabling` or `disabling`.
        state: String,
        /// `/sys/kernel/sched_ext/root/ops`: the scheduler's name, when given.
        ops: Option<String>,
    },
    /// numad is running.
    Numad {
        /// Its process.
        pid: Pid,
    },
    /// The kernel's automatic NUMA balancing is on.
    NumaBalancing {
        /// `/proc/sys/kernel/numa_balancing`: 1 normal, 2 memory tiering, 3 both.
        mode: u32,
    },
    /// The CPUs a managed process's cgroup may use changed between two reads.
    CpusetChanged {
        /// The process whose cgroup it is.
        pid: Pid,
        /// The cgroup (`/system.slice/app.service`).
        cgroup: String,
        /// `cpuset.cpus.effective` at the earlier read.
        before: CpuSet,
        /// `cpuset.cpus.effective` now.
        after: CpuSet,
    },
}

impl fmt::Display for Competitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Competitor::SchedExt { state, ops } => {
                let name = ops.as_deref().map_or(String::new(), |o| format!(" ({o})"));
                let verb = match state.as_str() {
                    "enabled" => "is loaded",
                    "enabling" => "is being loaded",
                    "disabling" => "is being unloaded",
                    _ => "is in an unknown state",
                };
                write!(
                    f,
                    "a sched_ext scheduler{name} {verb}: it replaces the kernel's placement and \
                     may override the daemon's"
                )
            }
            Competitor::Numad { pid } => write!(
                f,
                "numad is running (pid {pid}): it binds whole processes to NUMA nodes and will \
                 undo the daemon's placement; stop one of the two"
            ),
            Competitor::NumaBalancing { mode } => write!(
                f,
                "the kernel's NUMA balancing is on (kernel.numa_balancing = {mode}): it migrates \
                 tasks and pages too; set it to 0 for the daemon alone to place threads"
            ),
            Competitor::CpusetChanged {
                pid,
                cgroup,
                before,
                after,
            } => write!(
                f,
                "the CPUs of process {pid}'s cgroup {cgroup} changed from {before} to {after} \
                 (cpuset.cpus.effective): placements made for the old set are stale"
            ),
        }
    }
}

/// A sched_ext scheduler is loaded when `state` (`/sys/kernel/sched_ext/state`) is anything
/// but `disabled`; `ops` (`root/ops`) names it.
pub fn sched_ext(state: &str, ops: &str) -> Option<Competitor> {
    let state = state.trim();
    if state.is_empty() || state == "disabled" {
        return None;
    }
    let ops = ops.trim();
    Some(Competitor::SchedExt {
        state: state.to_string(),
        ops: (!ops.is_empty()).then(|| ops.to_string()),
    })
}

/// numad is running when one of the processes (pid and comm, as
/// [`crate::read::read_comms`] lists them) is named `numad`; the lowest such pid is named.
///
/// ```
/// use threadbalance_daemon::competitor::numad;
/// use threadbalance_model::Pid;
/// let procs = [(Pid(1), "systemd".to_string()), (Pid(812), "numad".to_string())];
/// assert_eq!(numad(&procs).unwrap().to_string().split(':').next(), Some("numad is running (pid 812)"));
/// assert!(numad(&procs[..1]).is_none());
/// ```
pub fn numad(processes: &[(Pid, String)]) -> Option<Competitor> {
    processes
        .iter()
        .filter(|(_, comm)| comm == "numad")
        .map(|(pid, _)| *pid)
        .min()
        .map(|pid| Competitor::Numad { pid })
}

/// The kernel balances NUMA when `/proc/sys/kernel/numa_balancing` holds a non-zero mode.
/// A file that is not a number is an error (the caller names the file).
///
/// ```
/// use threadbalance_daemon::competitor::numa_balancing;
/// assert!(numa_balancing("0\n").unwrap().is_none());
/// assert!(numa_balancing("1\n").unwrap().is_some());
/// assert!(numa_balancing("on\n").is_err());
/// ```
pub fn numa_balancing(text: &str) -> Result<Option<Competitor>, ParseError> {
    let text = text.trim();
    let mode: u32 = text
        .parse()
        .map_err(|_| ParseError::NumaBalancing(text.to_string()))?;
    Ok((mode != 0).then_some(Competitor::NumaBalancing { mode }))
}

/// A managed process's cgroup changed its CPUs when two reads of its
/// `cpuset.cpus.effective` differ.
pub fn cpuset_changed(
    pid: Pid,
    cgroup: &str,
    before: &CpuSet,
    after: &CpuSet,
) -> Option<Competitor> {
    (before != after).then(|| Competitor::CpusetChanged {
        pid,
        cgroup: cgroup.to_string(),
        before: before.clone(),
        after: after.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sched_ext_each_state_gives_its_line_or_none() {
        // (state, ops, first words of the line or None)
        let cases = [
            ("disabled\n", "", None),
            ("", "", None),
            (
                "enabled\n",
                "lavd\n",
                Some("a sched_ext scheduler (lavd) is loaded:"),
            ),
            (
                "enabling\n",
                "",
                Some("a sched_ext scheduler is being loaded:"),
            ),
            (
                "disabling\n",
                "x",
                Some("a sched_ext scheduler (x) is being unloaded:"),
            ),
        ];
        for (state, ops, want) in cases {
            let got = sched_ext(state, ops).map(|c| c.to_string());
            match want {
                None => assert_eq!(got, None, "{state:?}"),
                Some(start) => {
                    let line = got.unwrap();
                    assert!(line.starts_with(start), "{line}");
                    assert!(!line.contains('\n'));
                }
            }
        }
    }

    #[test]
    fn numad_two_instances_names_the_lowest_pid() {
        let procs = [
            (Pid(900), "numad".to_string()),
            (Pid(17), "numad".to_string()),
            (Pid(5), "numadx".to_string()),
        ];
        assert_eq!(numad(&procs), Some(Competitor::Numad { pid: Pid(17) }));
    }

    #[test]
    fn numa_balancing_tiering_mode_is_reported() {
        let w = numa_balancing("2\n").unwrap().unwrap();
        assert_eq!(w, Competitor::NumaBalancing { mode: 2 });
        assert!(w.to_string().contains("kernel.numa_balancing = 2"));
    }

    #[test]
    fn cpuset_changed_only_when_sets_differ() {
        let a = CpuSet::parse_list("0-7").unwrap();
        let b = CpuSet::parse_list("0-3").unwrap();
        assert!(cpuset_changed(Pid(3), "/a", &a, &a).is_none());
        let w = cpuset_changed(Pid(3), "/a.slice", &a, &b).unwrap();
        assert_eq!(
            w.to_string(),
            "the CPUs of process 3's cgroup /a.slice changed from 0-7 to 0-3 \
             (cpuset.cpus.effective): placements made for the old set are stale"
        );
    }
}
