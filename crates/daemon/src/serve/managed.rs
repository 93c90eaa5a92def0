//! One process under the daemon: what the loop knows of it (its rule, its CPUs, whether
//! it is paused, the moves made on it) around the host's handle on it, which samples,
//! moves and restores its threads. The policy that moves them belongs to its group (see
//! [`super::groups`]): one process alone, or several that share CPUs.
//!
//! ```text
//!  rule matches pid ─► host.claim (permit, start time, lock) ─► CPUs it may use? its
//!  rule's policy builds? ─► host.open (journal, sampler) ─► sampled and moved by its
//!  group's policy (unless paused) ─► … ─► stops matching, released, exits, or the daemon
//!  stops ─► ProcessHost::release (every mask restored)
//! ```

use crate::allowed::Allowed;
use crate::control::threads::MoveCounts;
use std::fmt;
use threadbalance_manage::joined::Member;
use threadbalance_model::{ApplyReport, CpuSet, Nanos, Pid, Plan, Snapshot, Tid};
use threadbalance_policy::Host;

/// What releasing a process reports, as the host sees it. Its `Display` is the one-line
/// summary the release line and `ctl release` give ("3 restored, 0 already back, …").
pub trait Restored: fmt::Display + Default {
    /// Masks that could not be put back.
    fn failures(&self) -> u64;
    /// One line per thread whose mask was not put back, with why.
    fn kept(&self) -> Vec<String>;
    /// What the process's handle on the shared run-time counters did, said on its release
    /// line (`None`: nothing to say).
    fn counted(&self) -> Option<String> {
        None
    }
    /// Adds another report (the total over every process released at stop).
    fn add(&mut self, other: Self);
}

/// The host's handle on one managed process: the engine's [`Host`] over its threads, as a
/// [`Member`] of a group, and its masks.
pub trait ProcessHost: Member<Error = <Self as ProcessHost>::Failure> {
    /// Why sampling it failed (the engine's [`Host::Error`]).
    type Failure: std::error::Error + Send + Sync + 'static;
    /// What [`ProcessHost::release`] reports.
    type Restored: Restored;
    /// The mask thread `tid` carries now (`None`: it is gone).
    fn mask_of(&self, tid: Tid) -> Option<CpuSet>;
    /// The masks of its threads now (threads that go meanwhile are left out).
    fn thread_masks(&self) -> Vec<CpuSet>;
    /// Restores every mask changed (and forgets its journal).
    fn release(self) -> Self::Restored;
    /// Leaves the masks as placed (`--oneshot`): nothing is restored, now or later.
    fn keep_placement(self);
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
pub struct Managed<P> {
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
    pub moved: MoveCounts,
    /// The CPUs it may use that the daemon may use too (its threads' masks when it was
    /// taken on, within the usable CPUs).
    pub cpus: CpuSet,
    /// When it was taken on (a sequence number): the longest managed leads its group.
    pub since: u64,
    /// Its cgroup's cpuset and its threads' own masks, as last seen (see
    /// [`crate::allowed`]).
    pub allowed: Allowed,
    /// The masks the daemon set on its threads (read back after each move): a thread
    /// carrying one of them has not been given a mask by anyone else.
    pub ours: Vec<CpuSet>,
    /// The host's handle on it.
    pub host: P,
}

impl<P: ProcessHost> Host for Managed<P> {
    type Error = P::Error;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), P::Error> {
        self.host.sample(into)
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let report = self.host.apply(plan);
        if report.done > 0 {
            // What the moved threads carry now is ours (the domain within their mask).
            for mv in &plan.moves {
                if let Some(mask) = self.host.mask_of(mv.thread.tid)
                    && !self.ours.contains(&mask)
                {
                    self.ours.push(mask);
                }
            }
        }
        report
    }
}

impl<P: ProcessHost> Member for Managed<P> {
    fn pid(&self) -> Pid {
        self.pid
    }

    fn exited(&mut self) -> bool {
        self.host.exited()
    }

    fn machine_time_elsewhere(&mut self, elsewhere: bool) {
        self.host.machine_time_elsewhere(elsewhere);
    }
}

/// Windows in a row with no rule matching before a managed process is released. A
/// process managed for its CPU use or busy threads may dip under a threshold for a window
/// (a phase of I/O, or the very placement that spread it); releasing and taking it back
/// at every dip would restore and re-place its threads each time.
pub const RELEASE_AFTER: u32 = 3;

/// Why a window lets a managed process go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unmatched {
    /// The pid names another process now, or none.
    Exited,
    /// A rule other than its own matches it now (after a reload, or a rule above it).
    OtherRule,
    /// No rule has matched it for [`RELEASE_AFTER`] windows.
    NoRule,
    /// A hands-off rule, a listed name or pid holds it now.
    HandsOff,
}

impl fmt::Display for Unmatched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmatched::Exited => f.write_str("exited"),
            Unmatched::OtherRule => f.write_str("another rule matches it now"),
            Unmatched::NoRule => write!(f, "no rule has matched it for {RELEASE_AFTER} windows"),
            Unmatched::HandsOff => f.write_str("it is to be left alone now"),
        }
    }
}

/// Why a managed process is let go (said on its release line).
#[derive(Debug)]
pub enum Why {
    /// A window said so.
    Unmatched(Unmatched),
    /// Its cgroup's cpuset or masks set outside the daemon left it none of the usable
    /// CPUs.
    NoCpus,
    /// `ctl release`.
    Ctl,
    /// The daemon is stopping.
    Stopping,
    /// Sampling it failed while it still ran.
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::Unmatched(u) => u.fmt(f),
            Why::NoCpus => f.write_str("it may use none of the daemon's CPUs now"),
            Why::Ctl => f.write_str("ctl release"),
            Why::Stopping => f.write_str("the daemon is stopping"),
            Why::Failed(e) => e.fmt(f),
        }
    }
}

/// What a window means for a managed process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Still managed, with this many windows in a row unmatched.
    Keep {
        /// Windows in a row in which no rule matched it.
        misses: u32,
    },
    /// Restore and let go, for this reason.
    Release(Unmatched),
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
        return Verdict::Release(Unmatched::Exited);
    }
    match now {
        Some(r) if r == rule => Verdict::Keep { misses: 0 },
        Some(_) => Verdict::Release(Unmatched::OtherRule),
        None if no_rule && misses + 1 < RELEASE_AFTER => Verdict::Keep { misses: misses + 1 },
        None if no_rule => Verdict::Release(Unmatched::NoRule),
        None => Verdict::Release(Unmatched::HandsOff),
    }
}

#[cfg(test)]
mod tests {
    use super::{RELEASE_AFTER, Unmatched, Verdict, after_window};

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
        assert_eq!(
            after_window("busy", None, true, true, misses),
            Verdict::Release(Unmatched::NoRule)
        );
        assert_eq!(
            Unmatched::NoRule.to_string(),
            "no rule has matched it for 3 windows"
        );
    }

    #[test]
    fn after_window_hands_off_other_rule_or_exit_release_at_once() {
        // A hands-off rule, a listed name or pid: no grace.
        assert_eq!(
            after_window("busy", None, false, true, 0),
            Verdict::Release(Unmatched::HandsOff)
        );
        // Another rule (after a reload, or a rule above it now holds): released, to be
        // taken on again under the new one.
        assert_eq!(
            after_window("busy", Some("batch"), false, true, 0),
            Verdict::Release(Unmatched::OtherRule)
        );
        // The pid names another process (or none): released whatever matched.
        assert_eq!(
            after_window("busy", Some("busy"), false, false, 0),
            Verdict::Release(Unmatched::Exited)
        );
    }
}
