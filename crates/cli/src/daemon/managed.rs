//! One process under the daemon: the host `attach` uses (a [`LinuxAdapter`] on the
//! process), plus its own journal and lock. The policy that moves its threads belongs to
//! its group (see [`super::groups`]): one process alone, or several that share CPUs.
//!
//! ```text
//!  rule matches pid ─► permit? lock.<pid>.<start> free? ─► journal in
//!  <state>/managed.<pid>.<start>/ ─► sampled and moved by its group's policy (unless
//!  paused) ─► … ─► stops matching, released, exits, or daemon stops ─► restore_all ─►
//!  subdir removed
//! ```
//!
//! Each managed process has a journal of its own, in a subdirectory of the state directory
//! named after it, because a journal is one file per instance and per actuator: a daemon
//! killed by SIGKILL leaves one journal per process it had changed, and the next daemon
//! (or `threadbalance restore`) replays every one of them (see [`crate::recover::restore_tree`]).

use anyhow::{Result, anyhow};
use std::path::PathBuf;
use threadbalance_daemon::allowed::Allowed;
use threadbalance_linux::adapter::{LinuxAdapter, Target};
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::runshare::{SharedCounters, Watch};
use threadbalance_linux::state::{ProcessLock, StateDir};
use threadbalance_linux::{LinuxError, Root};
use threadbalance_manage::joined::Member;
use threadbalance_model::{ApplyReport, CpuSet, Nanos, Pid, Plan, Snapshot, Topology};
use threadbalance_policy::Host;

/// Why a process could not be taken on (logged once per process, not an error of the
/// daemon).
#[derive(Debug)]
pub enum Refused {
    /// Not a process this tool manages (the daemon itself, a kernel thread, …), or another
    /// instance manages it already.
    NotOurs(String),
    /// Something failed while setting it up.
    Failed(anyhow::Error),
}

/// What a rule said to do with a process.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The rule's name.
    pub rule: String,
    /// The policy's name.
    pub policy: String,
    /// The policy settings, at the level to use.
    pub settings: threadbalance_policy::Settings,
}

/// A managed process.
pub struct Managed {
    /// Its pid.
    pub pid: Pid,
    /// Its start time (a reused pid is another process).
    pub start: u64,
    /// Its name.
    pub comm: String,
    /// The rule and policy it is under.
    pub assignment: Assignment,
    /// Paused by `ctl pause`: not ticked, masks left where they are.
    pub paused: bool,
    /// Threads seen at the last tick.
    pub threads: usize,
    /// Windows in a row in which no rule matched it (see [`after_window`]).
    pub misses: u32,
    /// Moves carried out per thread (for `threads`).
    pub moved: crate::top::gather::MoveCounts,
    /// The CPUs it may use that the daemon may use too (its threads' masks when it was
    /// taken on, within the usable CPUs).
    pub cpus: CpuSet,
    /// When it was taken on (a sequence number): the longest managed leads its group.
    pub since: u64,
    /// Its cgroup's cpuset and its threads' own masks, as last seen (see
    /// `threadbalance_daemon::allowed`).
    pub allowed: Allowed,
    /// The masks the daemon set on its threads (read back after each move): a thread
    /// carrying one of them has not been given a mask by anyone else.
    pub ours: Vec<CpuSet>,
    /// What its handle on the daemon's shared run-time counters did (for the release line).
    pub counters: Watch,
    host: LinuxAdapter,
    dir: Option<PathBuf>,
    _lock: ProcessLock,
}

/// The journal subdirectory of process `pid` started at `start`.
fn journal_dir(state: &StateDir, pid: Pid, start: u64) -> PathBuf {
    state.path().join(format!("managed.{}.{start}", pid.0))
}

impl Managed {
    /// Takes `pid` on under `assignment`, placing its threads only on the CPUs of
    /// `machine` (the usable ones) that its threads may use. `journal` is false for
    /// `--oneshot`, whose placement is meant to stay, and in observe mode, which changes
    /// nothing. `since` orders the managed processes (see [`Managed::since`]); `cpuset`
    /// is its cgroup's `cpuset.cpus.effective`, when it has one. Its sampler reads run
    /// time through a handle on `counters`, the daemon's one probe (loaded by the first
    /// process taken on, which logs which source it is).
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        pid: Pid,
        comm: &str,
        assignment: Assignment,
        machine: &Topology,
        state: &StateDir,
        observe: bool,
        journal: bool,
        since: u64,
        cpuset: Option<CpuSet>,
        counters: &mut SharedCounters,
    ) -> Result<Managed, Refused> {
        let root = Root::system();
        let me = Pid(std::process::id() as i32);
        match threadbalance_linux::permit::refusal(&root, pid, me) {
            Ok(Some(why)) => return Err(Refused::NotOurs(why)),
            Ok(None) => {}
            Err(e) => return Err(Refused::NotOurs(e.to_string())),
        }
        let start =
            threadbalance_linux::read_start_time(&root, pid, threadbalance_model::Tid(pid.0))
                .map_err(|e| Refused::NotOurs(e.to_string()))?
                .ok_or_else(|| Refused::NotOurs("it has exited".into()))?;
        let lock = state
            .lock_process(pid, start)
            .map_err(|e| Refused::Failed(e.into()))?
            .map_err(|busy| {
                let by = busy
                    .holder
                    .map_or(String::new(), |h| format!(" (threadbalance pid {h})"));
                Refused::NotOurs(format!("already managed by another threadbalance{by}"))
            })?;
        let allowed = crate::usable::read_allowed_for(pid).map_err(Refused::Failed)?;
        let allowed = Allowed {
            cpuset,
            program: allowed.online().clone(),
        };
        let cpus = allowed.cpus(machine.online());
        if cpus.is_empty() {
            return Err(Refused::NotOurs(format!(
                "its threads may use none of the CPUs {}",
                machine.online()
            )));
        }
        // The group's policy is built over the CPUs of all its members; this one only
        // checks that the rule's policy builds, and says how fresh its samples must be.
        let policy = threadbalance_policy::build(
            &assignment.policy,
            &assignment.settings,
            &machine
                .restricted_to(&cpus)
                .map_err(|e| Refused::Failed(e.into()))?,
        )
        .map_err(|e| Refused::Failed(anyhow!("policy {}: {e}", assignment.policy)))?;
        let (dir, journal) = if journal && !observe {
            let dir = journal_dir(state, pid, start);
            let sub = StateDir::new(&dir);
            let j = sub
                .open_journal(&root)
                .map_err(|e| Refused::Failed(e.into()))?;
            (Some(dir), Some(j))
        } else {
            (None, None)
        };
        // The adapter places on the machine: a move names a domain of the group's
        // topology, translated to the machine's (`joined::translate`), and the actuator
        // never gives a thread a CPU outside the mask it had.
        let handed = counters.handle();
        if cfg!(feature = "bpf")
            && let Some(source) = &handed.loaded
        {
            tracing::info!("{}", source.describe());
        }
        let host = LinuxAdapter::with_counters(
            machine,
            Target::Attached {
                pid,
                follow_children: false,
            },
            observe,
            policy.needs(),
            journal,
            handed.counters,
        );
        let host = match host {
            Ok(h) => h,
            Err(e) => {
                if let Some(d) = &dir {
                    remove_journal_dir(d);
                }
                return Err(Refused::Failed(e.into()));
            }
        };
        Ok(Managed {
            pid,
            start,
            comm: comm.to_string(),
            assignment,
            paused: false,
            threads: 0,
            misses: 0,
            moved: Default::default(),
            cpus,
            since,
            allowed,
            ours: Vec::new(),
            counters: handed.watch,
            host,
            dir,
            _lock: lock,
        })
    }

    /// The masks of its threads now (`sched_getaffinity`; threads that go meanwhile are
    /// left out).
    pub fn thread_masks(&self) -> Vec<CpuSet> {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter_map(|tid| threadbalance_linux::affinity_of(threadbalance_model::Tid(tid)).ok())
            .collect()
    }

    /// Restores every mask changed and removes the journal's directory.
    pub fn release(mut self) -> RestoreReport {
        let report = self.host.restore_all();
        if report.failures().next().is_none()
            && let Some(d) = self.dir.take()
        {
            remove_journal_dir(&d);
        }
        report
    }

    /// Leaves the masks as placed (`--oneshot`): nothing is restored, now or later.
    pub fn keep_placement(self) {
        // The actuator restores when dropped; a one-shot placement is meant to stay, so
        // the adapter alone is not dropped (the process is about to exit, which closes
        // what it holds). The process lock and the rest are released as usual.
        let Managed { host, .. } = self;
        std::mem::forget(host);
    }
}

/// Windows in a row with no rule matching before a managed process is released. A
/// process managed for its CPU use or busy threads may dip under a threshold for a window
/// (a phase of I/O, or the very placement that spread it); releasing and taking it back
/// at every dip would restore and re-place its threads each time.
pub const RELEASE_AFTER: u32 = 3;

/// What a window means for a managed process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Still managed, with this many windows in a row unmatched.
    Keep {
        /// Windows in a row in which no rule matched it.
        misses: u32,
    },
    /// Restore and let go, for this reason.
    Release(&'static str),
}

/// The verdict on a process managed under rule `rule` after a window in which the first
/// matching rule was `now` (`None`: none managed it), `no_rule` whether that was because
/// no rule matched at all (rather than a hands-off rule, a listed name or pid), `same`
/// whether it is still the same process (pid and start time), and `misses` its unmatched
/// windows in a row so far. Pure.
pub fn after_window(
    rule: &str,
    now: Option<&str>,
    no_rule: bool,
    same: bool,
    misses: u32,
) -> Verdict {
    if !same {
        return Verdict::Release("exited");
    }
    match now {
        Some(r) if r == rule => Verdict::Keep { misses: 0 },
        Some(_) => Verdict::Release("another rule matches it now"),
        None if no_rule && misses + 1 < RELEASE_AFTER => Verdict::Keep { misses: misses + 1 },
        None if no_rule => Verdict::Release("no rule has matched it for 3 windows"),
        None => Verdict::Release("it is to be left alone now"),
    }
}

/// Removes a process's journal directory once its journal is gone.
fn remove_journal_dir(dir: &std::path::Path) {
    let _ = std::fs::remove_dir(dir);
}

impl Host for Managed {
    type Error = LinuxError;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        self.host.sample(into)
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let report = self.host.apply(plan);
        if report.done > 0 {
            // What the moved threads carry now is ours (the domain within their mask).
            for mv in &plan.moves {
                if let Ok(mask) = threadbalance_linux::affinity_of(mv.thread.tid)
                    && !self.ours.contains(&mask)
                {
                    self.ours.push(mask);
                }
            }
        }
        report
    }
}

impl Member for Managed {
    fn pid(&self) -> Pid {
        self.pid
    }

    fn exited(&mut self) -> bool {
        self.host.target_exited()
    }

    fn machine_time_elsewhere(&mut self, elsewhere: bool) {
        self.host.machine_time_elsewhere(elsewhere);
    }
}

#[cfg(test)]
mod tests {
    use super::{RELEASE_AFTER, Verdict, after_window};

    #[test]
    fn after_window_same_rule_keeps_and_clears_misses() {
        assert_eq!(
            after_window("busy", Some("busy"), false, true, 2),
            Verdict::Keep { misses: 0 }
        );
    }

    #[test]
    fn after_window_no_rule_releases_on_the_third_window_in_a_row() {
        // Windows 1 and 2 without a match keep it (misses 1, 2); the third releases it.
        let mut misses = 0;
        for expect in 1..RELEASE_AFTER {
            assert_eq!(
                after_window("busy", None, true, true, misses),
                Verdict::Keep { misses: expect }
            );
            misses = expect;
        }
        assert!(matches!(
            after_window("busy", None, true, true, misses),
            Verdict::Release(_)
        ));
    }

    #[test]
    fn after_window_hands_off_other_rule_or_exit_release_at_once() {
        // A hands-off rule, a listed name or pid: no grace.
        assert!(matches!(
            after_window("busy", None, false, true, 0),
            Verdict::Release(_)
        ));
        // Another rule (after a reload, or a rule above it now holds): released, to be
        // taken on again under the new one.
        assert!(matches!(
            after_window("busy", Some("batch"), false, true, 0),
            Verdict::Release(_)
        ));
        // The pid names another process (or none): released whatever matched.
        assert!(matches!(
            after_window("busy", Some("busy"), false, false, 0),
            Verdict::Release(_)
        ));
    }
}
