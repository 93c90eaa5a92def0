//! The engine's `Host` on Linux: forwards to `threadbalance_linux::LinuxHost`, and adds what
//! the control loop needs around it: waiting for the target with a pidfd (so the loop wakes
//! the moment it exits), forwarding signals, and dry runs.

use crate::input_error;
use crate::lockprobe::{LockProbe, LockReport};
use anyhow::Result;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid as NixPid;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use threadbalance_linux::{HostFacts, LinuxError, LinuxHost, Root, SamplerConfig};
use threadbalance_model::{ApplyReport, Nanos, Pid, Plan, Snapshot, Topology};
use threadbalance_policy::Host;

/// The longest the loop sleeps without looking at signals and the target, when the target
/// cannot be watched through a pidfd.
const POLL_FALLBACK: Nanos = Nanos::from_millis(20);

/// What is managed.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A process we launched (`run`), and optionally its descendants.
    Child {
        /// The command's pid.
        pid: Pid,
        /// Also manage the processes it starts.
        follow_children: bool,
    },
    /// A process that was already running (`attach`).
    Attached {
        /// Its pid.
        pid: Pid,
    },
}

/// `LinuxHost` plus a pidfd on the target.
pub struct LinuxAdapter {
    host: LinuxHost,
    target: Pid,
    pidfd: Option<OwnedFd>,
    dry_run: bool,
    exited: bool,
    lock_probe: LockProbe,
    pids: Vec<Pid>,
}

impl LinuxAdapter {
    /// Opens the target for sampling and actuation. A missing or forbidden pid is an input
    /// error: nothing has been changed yet.
    pub fn new(
        topo: &Topology,
        target: Target,
        dry_run: bool,
        stat_max_age: Option<Nanos>,
    ) -> Result<LinuxAdapter> {
        let (pid, follow) = match target {
            Target::Child {
                pid,
                follow_children,
            } => (pid, follow_children),
            Target::Attached { pid } => (pid, false),
        };
        let facts = HostFacts::system()?;
        let mut cfg = SamplerConfig::new(facts);
        cfg.follow_children = follow;
        if let Some(age) = stat_max_age {
            cfg.stat_max_age = age;
        }
        let host =
            LinuxHost::new(Root::system(), topo.clone(), &[pid], cfg).map_err(|e| match e {
                LinuxError::NoSuchProcess { .. } | LinuxError::PermissionDenied { .. } => {
                    input_error(e.to_string())
                }
                other => other.into(),
            })?;
        if let Target::Attached { pid } = target {
            // Changing another user's threads needs CAP_SYS_NICE; find out now, not at the
            // first move, so a refused attach changes nothing.
            check_may_set_affinity(pid)?;
        }
        Ok(LinuxAdapter {
            host,
            target: pid,
            pidfd: pidfd_open(pid),
            dry_run,
            exited: false,
            lock_probe: LockProbe::off(),
            pids: Vec::new(),
        })
    }

    /// Sends `sig` to the target.
    pub fn forward(&self, sig: Signal) {
        let _ = kill(NixPid::from_raw(self.target.0), sig);
    }

    /// Whether the target has exited.
    pub fn target_exited(&mut self) -> bool {
        if !self.exited {
            self.exited = match &self.pidfd {
                Some(fd) => poll_readable(fd, 0),
                None => !self.host.target_alive(),
            };
        }
        self.exited
    }

    /// Sleeps until `deadline`, or until the target exits or a signal arrives.
    pub fn wait_until(&mut self, deadline: Nanos) {
        let now = self.host.now();
        if deadline <= now {
            return;
        }
        let left = deadline.saturating_sub(now);
        match &self.pidfd {
            Some(fd) => {
                let ms = left.0.div_ceil(1_000_000).min(i32::MAX as u64) as i32;
                if poll_readable(fd, ms) {
                    self.exited = true;
                }
            }
            None => {
                let pause = left.min(POLL_FALLBACK);
                std::thread::sleep(std::time::Duration::from_nanos(pause.0));
            }
        }
    }

    /// Takes the futex probe (started before the command, so that its first waits count).
    pub fn set_lock_probe(&mut self, probe: LockProbe) {
        self.lock_probe = probe;
    }

    /// What the futex probe saw over the run, or why it did not run.
    pub fn lock_report(&mut self) -> LockReport {
        self.lock_probe.report()
    }

    /// Restores every mask changed; returns how many were put back.
    pub fn restore_all(&mut self) -> u64 {
        u64::from(self.host.restore_all().done)
    }
}

impl Host for LinuxAdapter {
    type Error = LinuxError;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        self.host.sample(into)?;
        self.pids = self.host.sampler().pids();
        self.lock_probe.fill(&self.pids, into);
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        if self.dry_run {
            return ApplyReport::default();
        }
        self.host.apply(plan)
    }
}

/// A pidfd for `pid` (Linux 5.3+); `None` where the kernel has none.
fn pidfd_open(pid: Pid) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is shared.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.0, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    Some(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether `fd` becomes readable within `timeout_ms` (a pidfd is readable once the process
/// has exited). A signal ends the wait early, which is what the loop wants.
fn poll_readable(fd: &OwnedFd, timeout_ms: i32) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(timeout_ms).unwrap_or(PollTimeout::MAX);
    matches!(poll(&mut fds, timeout), Ok(n) if n > 0)
}

/// Fails with an input error when we may not change the affinity of `pid`'s threads: we
/// set its leader's mask to what it already is.
fn check_may_set_affinity(pid: Pid) -> Result<()> {
    let tid = threadbalance_model::Tid(pid.0);
    let mask = threadbalance_linux::affinity_of(tid)
        .map_err(|e| input_error(format!("process {pid}: cannot read its affinity: {e}")))?;
    threadbalance_linux::set_affinity(tid, &mask)
        .map_err(|e| input_error(format!("process {pid}: may not change its affinity: {e}")))
}
