//! One process under the daemon: the same machinery `attach` uses (a [`LinuxAdapter`] on
//! the process, the shared loop's [`Ticker`] and the rule's policy), plus its own journal and lock.
//!
//! ```text
//!  rule matches pid ─► permit? lock.<pid>.<start> free? ─► journal in
//!  <state>/managed.<pid>.<start>/ ─► tick when due (unless paused) ─► … ─►
//!  stops matching, released, exits, or daemon stops ─► restore_all ─► subdir removed
//! ```
//!
//! Each managed process has a journal of its own, in a subdirectory of the state directory
//! named after it, because a journal is one file per instance and per actuator: a daemon
//! killed by SIGKILL leaves one journal per process it had changed, and the next daemon
//! (or `threadbalance restore`) replays every one of them (see [`crate::recover::restore_tree`]).

use crate::host::{LinuxAdapter, Target};
use anyhow::{Result, anyhow};
use std::path::PathBuf;
use threadbalance_daemon::metrics::{Metrics, reason_name};
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::state::{ProcessLock, StateDir};
use threadbalance_linux::{LinuxError, Root};
use threadbalance_manage::Ticker;
use threadbalance_model::{ApplyReport, CpuSet, Nanos, Pid, Plan, Snapshot, Topology};
use threadbalance_policy::{Host, Policy};

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
    host: LinuxAdapter,
    policy: Box<dyn Policy>,
    ticker: Ticker,
    topo: Topology,
    dir: Option<PathBuf>,
    _lock: ProcessLock,
}

/// The journal subdirectory of process `pid` started at `start`.
fn journal_dir(state: &StateDir, pid: Pid, start: u64) -> PathBuf {
    state.path().join(format!("managed.{}.{start}", pid.0))
}

impl Managed {
    /// Takes `pid` on under `assignment`, placing its threads only on `usable` CPUs (and
    /// those its threads may use). `journal` is false for `--oneshot`, whose placement is
    /// meant to stay, and in observe mode, which changes nothing.
    pub fn start(
        pid: Pid,
        comm: &str,
        assignment: Assignment,
        usable: &CpuSet,
        state: &StateDir,
        observe: bool,
        journal: bool,
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
        let topo = allowed
            .restricted_to(&usable.intersection(allowed.online()))
            .map_err(|e| Refused::Failed(e.into()))?;
        let policy = threadbalance_policy::build(&assignment.policy, &assignment.settings, &topo)
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
        let host = LinuxAdapter::new(
            &topo,
            Target::Attached {
                pid,
                follow_children: false,
            },
            observe,
            policy.stat_max_age(),
            journal,
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
            ticker: Ticker::new(host.now()),
            assignment,
            paused: false,
            threads: 0,
            misses: 0,
            host,
            policy,
            topo,
            dir,
            _lock: lock,
        })
    }

    /// When this process wants its next tick.
    pub fn next(&self) -> Nanos {
        self.ticker.next()
    }

    /// The last window its engine measured (threads, their CPU and utilization).
    pub fn window(&self) -> &threadbalance_model::Window {
        self.ticker.window()
    }

    /// Ticks when due and not paused: samples, decides, applies (or, observing, only
    /// decides). Every move is logged at debug level and counted by reason in `metrics`
    /// when it was carried out. `Ok(false)` when the process has exited.
    pub fn tick_if_due(&mut self, now: Nanos, metrics: &Metrics, observe: bool) -> Result<bool> {
        if self.host.target_exited() {
            return Ok(false);
        }
        if self.paused {
            return Ok(true);
        }
        let mut moves = Vec::new();
        let mut rec = Recording {
            host: &mut self.host,
            moves: &mut moves,
        };
        match self
            .ticker
            .tick_if_due(&mut rec, &self.topo, self.policy.as_mut(), now)
        {
            Ok(None) => Ok(true),
            Ok(Some(tick)) => {
                self.threads = tick.threads;
                metrics.record_decision(&self.assignment.policy);
                for m in &moves {
                    threadbalance_daemon::log::log_move(m);
                    if !observe {
                        metrics.record_move(&reason_name(&m.why));
                    }
                }
                if let Some(note) = &tick.note {
                    tracing::debug!("pid {} ({}): {note}", self.pid, self.comm);
                }
                Ok(true)
            }
            Err(_) if self.host.target_exited() => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Restores every mask changed and removes the journal's directory.
    pub fn release(mut self) -> RestoreReport {
        let report = self.host.restore_all();
        if report.failures().next().is_none() {
            if let Some(d) = self.dir.take() {
                remove_journal_dir(&d);
            }
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

/// The adapter, keeping the moves of each plan for the log and the metrics.
struct Recording<'a> {
    host: &'a mut LinuxAdapter,
    moves: &'a mut Vec<threadbalance_model::Move>,
}

impl Host for Recording<'_> {
    type Error = LinuxError;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        self.host.sample(into)
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        self.moves.extend(plan.moves.iter().cloned());
        self.host.apply(plan)
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
