//! The end-of-run summary, `perf stat`-like, on stderr and optionally as JSON.
//!
//! A summary is made once, after the loop, from typed parts ([`Summary::new`]): what was
//! asked for ([`Setup`]), what the loop counted tick by tick ([`Tally`]), what the host
//! reports once it has restored ([`HostReport`]), how the run ended ([`Ended`]) and the
//! policy's own account ([`PolicySummary`]). It is rendered, as text and as JSON, in
//! `render`.
//!
//! The text says only what means something: the tool's share of one core is given over a
//! management of at least [`MIN_WALL_FOR_PCT`] (over a few milliseconds, start-up and the
//! final restore dominate and the share reads "8738 %"); restoring says how many of the
//! masks changed it put back ("restored 3 of 4"); the lock-time line appears when lock time
//! was measured exactly or the policy decides on it (an estimate nothing reads is noise);
//! and a policy chosen by default is named as such ("policy tumbler (default)"). The JSON
//! keeps every field whatever the text leaves out.
//!
//! By default the text is short: what ran and how it ended, the moves and what was put
//! back, the tool's own CPU time, the policy's first line, and any mask left changed;
//! `-v` adds the rest (threads and ticks, the move outcomes, per-domain utilization and
//! its spread, pacing, lock time, every line of the policy's account, its last notes).
//! "Restored" counts every changed mask given back: those handed back during the run at
//! the policy's asking (`speed`'s guard handing the threads to Linux) and those put back
//! at the end.
//!
//! ```text
//!  threadbalance summary: policy speed at level core (2 domains) on CPUs 0-1
//!          1.701 s  wall time (exit 0)
//!            310    moves made, restored 310 of 310 (306 handed back during the run)
//!          0.027 s  threadbalance's own CPU time (1.58 % of one core)
//!    balance interval: 2 ms (…)
//!    (-v for the rest)
//! ```

mod render;
mod tally;

pub use tally::{Tally, ThreadCounters};

use threadbalance_linux::actuate::SliceCounts;
use threadbalance_linux::adapter::LinuxAdapter;
use threadbalance_linux::adapter::lockprobe::{LockReport, ProbeOff};
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::runcount::RunSource;
use threadbalance_linux::sampler::CountersStopped;
use threadbalance_model::{
    Level, Nanos, Pid, PolicySummary, Topology, coefficient_of_variation, mean,
};
use threadbalance_policy::PolicyKind;

/// The shortest management, in seconds, over which the tool's CPU share is reported.
pub const MIN_WALL_FOR_PCT: f64 = 0.1;

/// What was asked for: the policy, where it placed threads, and whether it changed any.
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// The policy.
    pub policy: PolicyKind,
    /// Whether the policy is the default one (no `--policy` given).
    pub policy_default: bool,
    /// The level the policy grouped at.
    pub level: Level,
    /// Number of domains at that level.
    pub domains: usize,
    /// The CPUs the policy placed threads on (the usable ones, cut down to `--cpus`), in
    /// taskset's syntax.
    pub cpus: String,
    /// Whether affinities were left untouched.
    pub dry_run: bool,
}

impl Setup {
    /// `policy` (the default one when `policy_default`) at `level` of `topo`.
    pub fn new(
        policy: PolicyKind,
        policy_default: bool,
        topo: &Topology,
        level: Level,
        dry_run: bool,
    ) -> Setup {
        Setup {
            policy,
            policy_default,
            level,
            domains: topo.domains(level).len(),
            cpus: topo.online().to_string(),
            dry_run,
        }
    }
}

/// How the managed command ended, or why management stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// `run`'s command exited with this status.
    Exit(i32),
    /// `run`'s command was killed by this signal.
    Killed(i32),
    /// `run`'s command ended with neither a status nor a signal.
    Unknown,
    /// `attach` was interrupted by this signal.
    Interrupted(i32),
    /// The attached process exited.
    ProcessExited(Pid),
    /// Management stopped on an error, said on one line.
    Stopped(String),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Exit(c) => write!(f, "exit {c}"),
            Ended::Killed(s) => write!(f, "killed by signal {s}"),
            Ended::Unknown => f.write_str("ended"),
            Ended::Interrupted(s) => {
                write!(
                    f,
                    "interrupted by {}",
                    threadbalance_linux::signal::signal_name(*s)
                )
            }
            Ended::ProcessExited(pid) => write!(f, "process {pid} exited"),
            Ended::Stopped(why) => write!(f, "stopped: {why}"),
        }
    }
}

/// Where the threads' run time and run-queue wait came from, and, if the counters
/// stopped during the run, why.
#[derive(Debug, Clone)]
pub struct RunTime {
    /// The source chosen at the start.
    pub source: RunSource,
    /// Why the counters stopped, when they did (run time from /proc from then on).
    pub stopped: Option<CountersStopped>,
}

impl std::fmt::Display for RunTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chosen = self.source.describe();
        match &self.stopped {
            Some(why) => write!(f, "{chosen}, then /proc (the counters stopped: {why})"),
            None => f.write_str(&chosen),
        }
    }
}

/// Whether lock time was exact or estimated.
#[derive(Debug, Clone)]
pub enum LockTime {
    /// Measured by the futex probe.
    Exact,
    /// Estimated from blocked time, with why there was no probe when that is known.
    Estimate(Option<ProbeOff>),
}

impl std::fmt::Display for LockTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockTime::Exact => f.write_str("exact (futex probe)"),
            LockTime::Estimate(Some(why)) => write!(f, "estimate from blocked time ({why})"),
            LockTime::Estimate(None) => f.write_str("estimate from blocked time"),
        }
    }
}

/// What restoring at the end did with the masks changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restore {
    /// Affinities put back.
    pub restored: u64,
    /// Masks restoring dealt with: put back, already back, gone with their thread, or
    /// left (as the program chose them, or refused by the kernel).
    pub total: u64,
    /// Of `total`, threads already back on their original mask.
    pub already: u64,
    /// Of `total`, threads gone before they could be restored.
    pub vanished: u64,
    /// Masks the kernel refused to put back; each is listed in `left`.
    pub unrestored: u64,
    /// Threads that chose a mask of their own after we moved them: left as they are.
    pub program_chose: u64,
    /// Threads born pinned by their program to a CPU one of ours held.
    pub program_born_pinned: u64,
    /// Threads whose mask was found narrowed by their cgroup cpuset: ours all the same.
    pub cpuset_narrowed: u64,
    /// One line per mask not put back, with the reason.
    pub left: Vec<String>,
}

impl From<&RestoreReport> for Restore {
    fn from(r: &RestoreReport) -> Restore {
        let restored = u64::from(r.restored);
        let already = u64::from(r.already);
        let vanished = u64::from(r.vanished);
        let unrestored = r.failures().count() as u64;
        Restore {
            restored,
            total: restored + already + vanished + r.kept.len() as u64,
            already,
            vanished,
            unrestored,
            program_chose: (r.kept.len() as u64).saturating_sub(unrestored),
            program_born_pinned: r.born_pinned.len() as u64,
            cpuset_narrowed: r.narrowed.len() as u64,
            left: crate::recover::kept_lines(r),
        }
    }
}

/// The cost budget the ticks were held to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The budget, % of one core: 0.8 for the ticks alone, or the operator's
    /// `--cpu-budget`, which charges moves too.
    pub pct: f64,
    /// Whether the budget charged moves as well as ticks (`--cpu-budget`).
    pub moves_charged: bool,
    /// The largest budget the ticks were held to, % of one core.
    pub watch_max_pct: f64,
}

impl Default for Budget {
    fn default() -> Budget {
        let pct = threadbalance_linux::adapter::pace::BUDGET * 100.0;
        Budget {
            pct,
            moves_charged: false,
            watch_max_pct: pct,
        }
    }
}

/// What the host reports once the loop has ended and every mask was restored.
#[derive(Debug, Clone)]
pub struct HostReport {
    /// What restoring at the end did.
    pub restore: Restore,
    /// Masks put back during the run at the policy's asking (`speed`'s guard handing the
    /// threads to Linux); not counted in `restore`, which is the restore at the end.
    pub handed_back: u64,
    /// What became of the short time slices asked for.
    pub slices: SliceCounts,
    /// Ticks the cost budget pushed back.
    pub ticks_paced: u64,
    /// The cost budget.
    pub budget: Budget,
    /// The ticks measured once every thread had been seen, and their CPU time.
    pub steady: Option<(u64, Nanos)>,
    /// The tool's CPU time spent carrying out plans (see [`LinuxAdapter::acting_cpu`]).
    pub acting: Nanos,
    /// Where run time came from.
    pub run_time: RunTime,
    /// How the program's own masks were told from ours: `masks set by the program traced
    /// (sched_setaffinity)`, or `program's masks judged from the masks alone (why)`.
    pub choices: String,
    /// What the futex probe saw, or why it did not run.
    pub lock_probe: LockReport,
    /// Where the hardware counters came from (`perf_event`), when they were read.
    pub hw_counters: Option<String>,
}

impl HostReport {
    /// Reads the report from `host`, whose restore at the end gave `restored` and whose
    /// cost budget was `(share, moves_charged)` when the loop started
    /// ([`LinuxAdapter::cpu_budget`] then: a policy's watching budget moves it since).
    pub fn read(
        host: &mut LinuxAdapter,
        restored: &RestoreReport,
        (share, moves_charged): (f64, bool),
    ) -> HostReport {
        HostReport {
            restore: Restore::from(restored),
            handed_back: host.handed_back(),
            slices: host.slice_counts(),
            ticks_paced: host.paced(),
            budget: Budget {
                pct: share * 100.0,
                moves_charged,
                watch_max_pct: host.watch_budget_max() * 100.0,
            },
            steady: host.steady_ticks().measured(),
            acting: host.acting_cpu(),
            run_time: RunTime {
                source: host.run_source().clone(),
                stopped: host.counters_stopped().cloned(),
            },
            choices: host.choices_source(),
            lock_probe: host.lock_report(),
            hw_counters: host.hw_counters_name().map(String::from),
        }
    }
}

/// Each domain's mean utilization over the run, and its spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Utilization {
    /// Mean utilization of each domain (busy managed-thread time / CPU time).
    pub per_domain: Vec<f64>,
    /// Mean of `per_domain`.
    pub mean: f64,
    /// Coefficient of variation across the domains, averaged over the ticks
    /// (time-weighted).
    pub cv: f64,
}

/// The tool's own CPU time over the management.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OwnCpu {
    /// User + system CPU time of this process, seconds.
    pub seconds: f64,
    /// Its share of one core, %, when management lasted long enough
    /// ([`MIN_WALL_FOR_PCT`]) for one to mean anything.
    pub pct: Option<f64>,
}

/// What a run did: made once, after the loop, from its typed parts.
#[derive(Debug, Clone)]
pub struct Summary {
    /// What was asked for.
    pub setup: Setup,
    /// Wall time from start to end of management, seconds.
    pub wall_s: f64,
    /// What the loop counted.
    pub tally: Tally,
    /// What the host reported.
    pub host: HostReport,
    /// Each domain's utilization.
    pub util: Utilization,
    /// The tool's own CPU time.
    pub own_cpu: OwnCpu,
    /// Whether lock time was exact.
    pub lock_time: LockTime,
    /// The policy's own account.
    pub policy: PolicySummary,
    /// How the run ended.
    pub ended: Ended,
}

impl Summary {
    /// The summary of a management that ended at `end`.
    pub fn new(
        setup: Setup,
        tally: Tally,
        host: HostReport,
        ended: Ended,
        policy: PolicySummary,
        end: Nanos,
    ) -> Summary {
        let wall_s = end.saturating_sub(tally.start()).as_secs_f64();
        // Over the same span as the wall time (not counting start-up), and not at all over
        // a span too short to mean anything (a target that had already exited).
        let seconds = (own_cpu_seconds() - tally.cpu_at_start()).max(0.0);
        let own_cpu = OwnCpu {
            seconds,
            pct: (wall_s >= MIN_WALL_FOR_PCT).then(|| 100.0 * seconds / wall_s),
        };
        let util = match tally.weighted_util() {
            Some((per_domain, cv)) => Utilization {
                mean: mean(&per_domain),
                per_domain,
                cv,
            },
            None => {
                let per_domain = vec![0.0; setup.domains];
                Utilization {
                    mean: mean(&per_domain),
                    cv: coefficient_of_variation(&per_domain),
                    per_domain,
                }
            }
        };
        let lock_time = if tally.exact_lock() || host.lock_probe.exact {
            LockTime::Exact
        } else {
            LockTime::Estimate(host.lock_probe.why_not.clone())
        };
        Summary {
            setup,
            wall_s,
            tally,
            host,
            util,
            own_cpu,
            lock_time,
            policy,
            ended,
        }
    }
}

/// User + system CPU time of this process so far (`getrusage(RUSAGE_SELF)`), in seconds.
fn own_cpu_seconds() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

#[cfg(test)]
mod tests;
