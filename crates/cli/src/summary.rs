//! The end-of-run summary, `perf stat`-like, on stderr and optionally as JSON.
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

use serde::Serialize;
use std::fmt::Write;
use threadbalance_model::{
    ApplyReport, Level, Nanos, PolicySummary, Topology, Window, coefficient_of_variation, mean,
};
use threadbalance_policy::{PolicyKind, TickReport};

/// The shortest management, in seconds, over which the tool's CPU share is reported.
pub const MIN_WALL_FOR_PCT: f64 = 0.1;

/// How many of the policy's explanations the summary keeps (the last ones).
const NOTES_KEPT: usize = 8;

/// What a run did, accumulated tick by tick.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The version of this JSON's shape (`schema/threadbalance.schema.json`).
    pub schema_version: u32,
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
    /// Wall time from start to end of management, seconds.
    pub wall_s: f64,
    /// Distinct threads seen.
    pub threads_seen: u64,
    /// Distinct processes whose threads were managed: the command (or the attached
    /// process) and every descendant seen, orphans re-parented to `run` included; 1 when
    /// children are not followed (`--no-children`) or the command started none.
    pub processes_seen: u64,
    /// Most threads alive at once.
    pub threads_peak: usize,
    /// Control ticks taken.
    pub ticks: u64,
    /// Moves the policy decided.
    pub moves_decided: u64,
    /// What the host did with them.
    pub applied: ApplyReport,
    /// Affinities put back at the end.
    pub restored: u64,
    /// Masks changed that restoring dealt with: put back, already back, gone with their
    /// thread, or left (as the program chose them, or refused by the kernel).
    pub restore_total: u64,
    /// Of `restore_total`, threads already back on their original mask.
    pub restore_already: u64,
    /// Of `restore_total`, threads gone before they could be restored.
    pub restore_vanished: u64,
    /// Masks put back to the thread's original during the run, at the policy's asking
    /// (`speed`'s guard handing the threads to Linux); not counted in `restored` or
    /// `restore_total`, which are the restore at the end.
    pub handed_back: u64,
    /// Masks that could not be put back at the end (the kernel refused); each is listed in
    /// `left`, and the exit status is 1.
    pub unrestored: u64,
    /// Threads that chose a mask of their own after we moved them: left as they are.
    /// A mask is ours only when it is the last we set on that thread (`origin` in
    /// `threadbalance-linux`), so a program that pins a thread to a mask we set on it
    /// earlier is counted here, not in `restored`.
    pub program_chose: u64,
    /// Threads born pinned by their program to a CPU one of our threads held (told from
    /// inheritance by their having migrated there): never ours, left as they are, and not
    /// among the masks counted in `restore_total`.
    pub program_born_pinned: u64,
    /// Threads whose mask we found narrowed by their cgroup cpuset (during the run or at
    /// the end): ours all the same, never counted in `program_chose`; kept managed, and
    /// put back if still there at the end.
    pub cpuset_narrowed: u64,
    /// One line per mask not put back, with the reason.
    pub left: Vec<String>,
    /// Threads that ran in short time slices of ours while `speed` rotated them (see
    /// "Short slices" in `speed`'s docs), and of those, given their own slice back (during
    /// the run or at the end).
    pub slices_set: u64,
    pub slices_restored: u64,
    /// Short slices asked for and not set: without `CAP_SYS_NICE`, on a kernel before
    /// 6.12, on a thread not of a fair class with nice ≥ 0, or on one whose program set a
    /// slice of its own.
    pub slices_skipped: u64,
    /// CPU time threadbalance itself used (user + system, its own process only), seconds.
    pub tool_cpu_s: f64,
    /// `tool_cpu_s` over the wall time: the share of one core the management cost; 0
    /// when `tool_cpu_pct_known` is false.
    pub tool_cpu_pct: f64,
    /// Whether management lasted long enough (0.1 s) for `tool_cpu_pct` to mean anything.
    pub tool_cpu_pct_known: bool,
    /// Ticks the cost budget (0.8 % of one core, or `cpu_budget_pct`) pushed back: the
    /// policy asked for a tick sooner than the tool could afford.
    pub ticks_paced: u64,
    /// The cost budget, % of one core: 0.8 for the ticks alone, or the operator's
    /// `--cpu-budget`, which charges moves too (`moves_charged`).
    pub cpu_budget_pct: f64,
    /// Whether the budget charged moves as well as ticks (`--cpu-budget`).
    pub moves_charged: bool,
    /// The largest budget the ticks were held to, % of one core: `cpu_budget_pct`, or more
    /// while the policy asked for more (`Policy::watch_budget`).
    pub watch_budget_max_pct: f64,
    /// CPU time a tick cost once every thread had been seen, µs: sampling, deciding and
    /// the wait with its wake-up, as the cost budget charges them (moves and the ticks that
    /// saw a thread for the first time are left out); 0 without two such ticks.
    pub tick_cpu_us: f64,
    /// The ticks `tick_cpu_us` is measured over.
    pub steady_ticks: u64,
    /// Mean utilization of each domain over the run (busy managed-thread time / CPU time).
    pub domain_util: Vec<f64>,
    /// Mean of `domain_util`.
    pub domain_util_mean: f64,
    /// Coefficient of variation of `domain_util`, averaged over the ticks (time-weighted).
    pub domain_util_cv: f64,
    /// Where the threads' run time and run-queue wait came from: `run time from BPF
    /// sched_switch counters` (exact at each read), or `run time from /proc (why)` (a
    /// queued thread's wait reported once it runs again); and, if the counters stopped
    /// during the run, why. Results with one and with the other differ on many cores.
    pub run_time: String,
    /// How the program's own masks were told from ours: `masks set by the program traced
    /// (sched_setaffinity)`, or `program's masks judged from the masks alone (why)`.
    pub choices: String,
    /// Whether lock time was exact (the futex probe) or estimated from blocked time, and
    /// why there was no probe.
    pub lock_time: String,
    /// What the futex probe saw (per-thread lock and sync waits, wake edges), or why it
    /// did not run.
    pub lock_probe: crate::lockprobe::LockReport,
    /// The policy's own account, typed (`kind` names the policy family).
    pub policy_summary: PolicySummary,
    /// The last explanations the policy gave, with the time (seconds from start).
    pub notes: Vec<(f64, String)>,
    /// How the managed command ended ("exit 0", "signal 9"), or why management stopped.
    pub ended: String,
    #[serde(skip)]
    start: Nanos,
    #[serde(skip)]
    cpu_at_start: f64,
    #[serde(skip)]
    busy: Vec<f64>,
    #[serde(skip)]
    cv_weighted: f64,
    #[serde(skip)]
    weight: f64,
    #[serde(skip)]
    exact_lock: bool,
    /// The processes counted in `processes_seen`.
    #[serde(skip)]
    processes: std::collections::HashSet<threadbalance_model::Pid>,
    /// Tick-by-tick samples for `--report` (`None`: no plot asked for).
    #[serde(skip)]
    pub trace: Option<crate::trace::RunTrace>,
}

impl Summary {
    /// An empty summary for `policy` at `level`, starting at `start`.
    pub fn new(
        policy: PolicyKind,
        policy_default: bool,
        topo: &Topology,
        level: Level,
        dry_run: bool,
        start: Nanos,
    ) -> Summary {
        let domains = topo.domains(level).len();
        Summary {
            schema_version: crate::schema::SCHEMA_VERSION,
            policy,
            policy_default,
            level,
            domains,
            cpus: topo.online().to_string(),
            dry_run,
            wall_s: 0.0,
            threads_seen: 0,
            processes_seen: 0,
            threads_peak: 0,
            ticks: 0,
            moves_decided: 0,
            applied: ApplyReport::default(),
            restored: 0,
            handed_back: 0,
            restore_total: 0,
            restore_already: 0,
            restore_vanished: 0,
            unrestored: 0,
            program_chose: 0,
            program_born_pinned: 0,
            cpuset_narrowed: 0,
            left: Vec::new(),
            slices_set: 0,
            slices_restored: 0,
            slices_skipped: 0,
            tool_cpu_s: 0.0,
            tool_cpu_pct: 0.0,
            tool_cpu_pct_known: false,
            ticks_paced: 0,
            cpu_budget_pct: crate::host::pace::BUDGET * 100.0,
            moves_charged: false,
            watch_budget_max_pct: crate::host::pace::BUDGET * 100.0,
            tick_cpu_us: 0.0,
            steady_ticks: 0,
            domain_util: vec![0.0; domains],
            domain_util_mean: 0.0,
            domain_util_cv: 0.0,
            run_time: String::new(),
            choices: String::new(),
            lock_time: "estimate from blocked time".into(),
            lock_probe: crate::lockprobe::LockReport::default(),
            policy_summary: PolicySummary::Nothing,
            notes: Vec::new(),
            ended: String::new(),
            start,
            cpu_at_start: own_cpu_seconds(),
            busy: vec![0.0; domains],
            cv_weighted: 0.0,
            weight: 0.0,
            exact_lock: false,
            processes: std::collections::HashSet::new(),
            trace: None,
        }
    }

    /// Adds one tick and the window it decided on.
    pub fn record(&mut self, topo: &Topology, window: &Window, tick: &TickReport) {
        self.ticks += 1;
        self.threads_seen += tick.appeared as u64;
        if tick.appeared > 0 {
            // A process is new only with a thread that is.
            for t in window.threads.iter().filter(|t| t.appeared) {
                self.processes.insert(t.key.pid);
            }
            self.processes_seen = self.processes.len() as u64;
        }
        self.threads_peak = self.threads_peak.max(tick.threads);
        self.moves_decided += tick.moves as u64;
        self.applied.add(&tick.applied);
        self.exact_lock |= window.lock_exact;
        if let Some(trace) = &mut self.trace {
            trace.record(topo, window, tick);
        }
        if let Some(note) = &tick.note {
            if self.notes.len() == NOTES_KEPT {
                self.notes.remove(0);
            }
            self.notes.push((
                tick.at.saturating_sub(self.start).as_secs_f64(),
                note.clone(),
            ));
        }
        let dt = window.duration().as_secs_f64();
        if dt > 0.0 {
            let load = window.domain_load(topo, self.level);
            for (b, u) in self.busy.iter_mut().zip(&load.util) {
                *b += u * dt;
            }
            self.cv_weighted += load.cv * dt;
            self.weight += dt;
        }
    }

    /// Records what restoring at the end did.
    pub fn set_restored(&mut self, r: &threadbalance_linux::ledger::RestoreReport) {
        self.restored = u64::from(r.restored);
        self.restore_already = u64::from(r.already);
        self.restore_vanished = u64::from(r.vanished);
        self.restore_total =
            self.restored + self.restore_already + self.restore_vanished + r.kept.len() as u64;
        self.unrestored = r.failures().count() as u64;
        self.program_chose = (r.kept.len() as u64).saturating_sub(self.unrestored);
        self.program_born_pinned = r.born_pinned.len() as u64;
        self.cpuset_narrowed = r.narrowed.len() as u64;
        self.left = crate::recover::kept_lines(r);
    }

    /// Takes how many masks the policy handed back during the run.
    pub fn set_handed_back(&mut self, n: u64) {
        self.handed_back = n;
    }

    /// Takes what became of the time slices asked for.
    pub fn set_slices(&mut self, c: threadbalance_linux::actuate::SliceCounts) {
        self.slices_set = c.set;
        self.slices_restored = c.restored;
        self.slices_skipped = c.skipped;
    }

    /// Takes how many ticks the cost budget pushed back.
    pub fn set_paced(&mut self, paced: u64) {
        self.ticks_paced = paced;
    }

    /// Takes the cost budget: its share of one core, and whether it charges moves.
    pub fn set_budget(&mut self, (share, moves): (f64, bool)) {
        self.cpu_budget_pct = share * 100.0;
        self.moves_charged = moves;
        self.watch_budget_max_pct = self.cpu_budget_pct;
    }

    /// Takes the largest budget the ticks were held to, a share of one core.
    pub fn set_watch_budget_max(&mut self, share: f64) {
        self.watch_budget_max_pct = share * 100.0;
    }

    /// Takes what the steady-state ticks cost (see `tick_cpu_us`).
    pub fn set_steady_ticks(&mut self, steady: threadbalance_linux::adapter::SteadyTicks) {
        if let Some((n, cpu)) = steady.measured() {
            self.steady_ticks = n;
            self.tick_cpu_us = cpu.0 as f64 / 1e3 / n as f64;
        }
    }

    /// Takes what the futex probe saw (before [`Summary::finish`]).
    pub fn lock_probe(&mut self, report: crate::lockprobe::LockReport) {
        self.lock_probe = report;
    }

    /// Closes the summary at `end`.
    pub fn finish(&mut self, end: Nanos, policy_summary: PolicySummary, ended: String) {
        self.wall_s = end.saturating_sub(self.start).as_secs_f64();
        // Over the same span as the wall time (not counting start-up), and not at all over
        // a span too short to mean anything (a target that had already exited).
        self.tool_cpu_s = (own_cpu_seconds() - self.cpu_at_start).max(0.0);
        self.tool_cpu_pct_known = self.wall_s >= MIN_WALL_FOR_PCT;
        self.tool_cpu_pct = if self.tool_cpu_pct_known {
            100.0 * self.tool_cpu_s / self.wall_s
        } else {
            0.0
        };
        if self.weight > 0.0 {
            self.domain_util = self.busy.iter().map(|b| b / self.weight).collect();
            self.domain_util_cv = self.cv_weighted / self.weight;
        }
        self.domain_util_mean = mean(&self.domain_util);
        if self.weight == 0.0 {
            self.domain_util_cv = coefficient_of_variation(&self.domain_util);
        }
        let exact = self.exact_lock || self.lock_probe.exact;
        self.lock_time = match (&self.lock_probe.why_not, exact) {
            (_, true) => "exact (futex probe)".into(),
            (Some(why), false) => format!("estimate from blocked time ({why})"),
            (None, false) => "estimate from blocked time".into(),
        };
        self.policy_summary = policy_summary;
        self.ended = ended;
    }

    /// The human-readable form, for stderr: short, or with every detail when `verbose`.
    pub fn to_text(&self, verbose: bool) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n threadbalance summary: policy {}{} at level {} ({} domains) on CPUs {}{}",
            self.policy,
            if self.policy_default {
                " (default)"
            } else {
                ""
            },
            self.level,
            self.domains,
            self.cpus,
            if self.dry_run { ", dry run" } else { "" }
        );
        let processes = if self.processes_seen == 1 {
            "process"
        } else {
            "processes"
        };
        if verbose {
            let _ = writeln!(s, "   {:>12.3} s  wall time ({})", self.wall_s, self.ended);
            let _ = writeln!(
                s,
                "   {:>12}    threads seen in {} {processes} (peak {} at once), {} ticks",
                self.threads_seen, self.processes_seen, self.threads_peak, self.ticks
            );
        } else {
            // The process count stays in the short summary: `in 1 process` under
            // `run -- make` says nothing it started was seen.
            let _ = writeln!(
                s,
                "   {:>12.3} s  wall time ({}), {} threads in {} {processes}",
                self.wall_s, self.ended, self.threads_seen, self.processes_seen
            );
        }
        let a = &self.applied;
        if self.dry_run {
            let _ = writeln!(
                s,
                "   {:>12}    moves decided, none applied (dry run)",
                self.moves_decided
            );
        } else if verbose {
            let _ = writeln!(
                s,
                "   {:>12}    moves made ({} decided: {} unchanged, {} vanished, {} denied), {}",
                a.done,
                self.moves_decided,
                a.unchanged,
                a.vanished,
                a.denied,
                self.restored_text()
            );
        } else {
            let _ = writeln!(
                s,
                "   {:>12}    moves made, {}",
                a.done,
                self.restored_text()
            );
        }
        if verbose && (self.slices_set > 0 || self.slices_skipped > 0) {
            let _ = writeln!(
                s,
                "   {:>12}    threads ran in short time slices while rotated, {} given their own back{}",
                self.slices_set,
                self.slices_restored,
                if self.slices_skipped > 0 {
                    format!(
                        "; {} not set (no CAP_SYS_NICE, a kernel before 6.12, not a fair-class thread of nice ≥ 0, or a slice its program set)",
                        self.slices_skipped
                    )
                } else {
                    String::new()
                }
            );
        }
        if self.program_chose > 0 || self.program_born_pinned > 0 || self.unrestored > 0 {
            let born = match self.program_born_pinned {
                0 => String::new(),
                n => format!(" ({n} pinned as they started)"),
            };
            let _ = writeln!(
                s,
                "   {:>12}    left as their program set them{born}, {} NOT restored",
                self.program_chose + self.program_born_pinned,
                self.unrestored
            );
            for line in &self.left {
                let _ = writeln!(s, "     {line}");
            }
        }
        if !verbose {
            let _ = writeln!(s, "{}", self.own_cpu_line());
            if let Some((what, value)) = self.policy_summary.lines().first() {
                let _ = writeln!(s, "   {what}: {value}");
            }
            let _ = writeln!(
                s,
                "   (-v for the rest: threads, utilization per {}, pacing, the policy's account)",
                self.level
            );
            return s;
        }
        let per: Vec<String> = self
            .domain_util
            .iter()
            .enumerate()
            .map(|(i, u)| format!("{}{}={:.1}%", self.level, i, u * 100.0))
            .collect();
        let _ = writeln!(
            s,
            "   {:>11.1}%    mean {} utilization  [{}]",
            self.domain_util_mean * 100.0,
            self.level,
            per.join(" ")
        );
        let _ = writeln!(
            s,
            "   {:>12.3}    CV of {} utilization: its spread across the {}s (σ / mean; 0 = evenly loaded)",
            self.domain_util_cv, self.level, self.level
        );
        let _ = writeln!(s, "{}", self.own_cpu_line());
        if self.ticks_paced > 0 {
            let _ = writeln!(
                s,
                "   {:>14}  ticks later than asked, to stay within {:.1} % of one core{}{}",
                self.ticks_paced,
                self.cpu_budget_pct,
                if self.moves_charged {
                    " (moves included)"
                } else {
                    ""
                },
                if self.watch_budget_max_pct > self.cpu_budget_pct {
                    format!(
                        " ({:.1} % while the policy asked for more)",
                        self.watch_budget_max_pct
                    )
                } else {
                    String::new()
                }
            );
        }
        let probe = &self.lock_probe;
        if probe.exact || self.policy.reads_lock_time() {
            let _ = writeln!(s, "   lock time: {}", self.lock_time);
        }
        if probe.exact {
            let lock = probe.threads.iter().fold(0.0, |a, t| a + t.lock_s);
            let sync = probe.threads.iter().fold(0.0, |a, t| a + t.sync_s);
            let _ = writeln!(
                s,
                "   futex waits: {:.3} s lock, {:.3} s sync wait, over {} threads; {} lock and {} sync words; {} wake edges",
                lock,
                sync,
                probe.threads.len(),
                probe.addresses.0,
                probe.addresses.1,
                probe.edges.len()
            );
            if probe.dropped > 0 {
                let _ = writeln!(
                    s,
                    "   futex probe: {} records lost (a map was full): lock time is low",
                    probe.dropped
                );
            }
        }
        for (what, value) in &self.policy_summary.lines() {
            let _ = writeln!(s, "   {what}: {value}");
        }
        for (t, note) in &self.notes {
            let _ = writeln!(s, "   at {t:.3} s: {note}");
        }
        s
    }

    /// The tool's own CPU time, and its share of one core when management lasted long
    /// enough for one to mean anything.
    fn own_cpu_line(&self) -> String {
        let share = if self.tool_cpu_pct_known {
            format!("{:.2} % of one core", self.tool_cpu_pct)
        } else {
            format!("no share of one core: under {MIN_WALL_FOR_PCT} s of management")
        };
        format!(
            "   {:>12.3} s  threadbalance's own CPU time ({share})",
            self.tool_cpu_s
        )
    }

    /// "restored 3 of 4 (1 already back)": how many of the masks changed were put back,
    /// and what became of the others.
    fn restored_text(&self) -> String {
        let mut text = format!(
            "restored {} of {}",
            self.restored + self.handed_back,
            self.restore_total + self.handed_back
        );
        let kept = self
            .restore_total
            .saturating_sub(self.restored + self.restore_already + self.restore_vanished);
        let others: Vec<String> = [
            (self.handed_back, "handed back during the run"),
            (self.restore_already, "already back"),
            (self.restore_vanished, "gone with their thread"),
            (kept, "left (below)"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !others.is_empty() {
            let _ = write!(text, " ({})", others.join(", "));
        }
        if self.cpuset_narrowed > 0 {
            let _ = write!(
                text,
                "; {} found narrowed by their cpuset, ours all the same",
                self.cpuset_narrowed
            );
        }
        text
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
mod tests {
    use super::*;
    use threadbalance_linux::ledger::RestoreReport;

    /// A summary of `kind` at the core level of a one-socket, two-core machine.
    fn on_two_cores(kind: PolicyKind) -> Summary {
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        Summary::new(kind, false, &topo, Level::Core, false, Nanos(0))
    }

    #[test]
    fn summary_finish_right_after_start_reports_no_cpu_share() {
        // Attaching to a process that had already exited used to print "70086 % of one
        // core": start-up CPU time (topology reading) over a wall time of microseconds.
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut s = Summary::new(
            PolicyKind::None,
            false,
            &topo,
            Level::Core,
            false,
            Nanos(1_000),
        );
        s.finish(
            Nanos(21_000),
            PolicySummary::Nothing,
            "process exited".into(),
        );
        assert_eq!(s.tool_cpu_pct, 0.0);
        assert!(!s.tool_cpu_pct_known);
        let text = s.to_text(false);
        assert!(!text.contains("% of one core"), "{text}");
        assert!(text.contains("no share of one core: under 0.1 s"), "{text}");
    }

    #[test]
    fn summary_finish_after_50_ms_still_reports_no_cpu_share() {
        // 50 ms of management is under the 0.1 s floor: a few milliseconds of start-up
        // and restore CPU time over it would read as a large share of a core.
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut s = Summary::new(PolicyKind::None, false, &topo, Level::Core, false, Nanos(0));
        s.finish(
            Nanos::from_millis(50),
            PolicySummary::Nothing,
            "exit 0".into(),
        );
        assert!(!s.tool_cpu_pct_known);
        assert_eq!(s.tool_cpu_pct, 0.0);
    }

    #[test]
    fn summary_finish_after_a_second_reports_the_share() {
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut s = Summary::new(PolicyKind::None, false, &topo, Level::Core, false, Nanos(0));
        s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        assert!(s.tool_cpu_pct_known);
        // The share is tool_cpu_s / 1 s, in percent.
        assert!((s.tool_cpu_pct - 100.0 * s.tool_cpu_s).abs() < 1e-9);
        assert!(s.to_text(false).contains("% of one core"));
    }

    fn restore_report(restored: u32, already: u32, vanished: u32) -> RestoreReport {
        RestoreReport {
            restored,
            already,
            vanished,
            ..RestoreReport::default()
        }
    }

    #[test]
    fn summary_restored_says_n_of_m_and_what_became_of_the_rest() {
        let mut s = on_two_cores(PolicyKind::Pbind);
        // 3 put back + 1 already back + 2 gone = 6 masks changed.
        s.set_restored(&restore_report(3, 1, 2));
        s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        assert_eq!(s.restore_total, 6);
        let text = s.to_text(false);
        assert!(
            text.contains("restored 3 of 6 (1 already back, 2 gone with their thread)"),
            "{text}"
        );
        // All put back: no parenthesis.
        s.set_restored(&restore_report(4, 0, 0));
        assert!(
            s.to_text(false).contains("restored 4 of 4\n"),
            "{}",
            s.to_text(false)
        );
    }

    #[test]
    fn summary_program_choices_are_counted_apart_from_what_was_restored() {
        // See: issue 39. 3 masks put back, one of them found narrowed by its cpuset; one
        // thread pinned itself after we moved it, one was born pinned.
        use threadbalance_linux::ledger::Kept;
        use threadbalance_model::{CpuId, CpuSet, Pid, ThreadKey, Tid};
        let k = |tid| ThreadKey {
            pid: Pid(5),
            tid: Tid(tid),
            start_time: 1,
        };
        let mut s = on_two_cores(PolicyKind::Tumbler);
        let mut r = restore_report(3, 0, 0);
        r.kept = vec![(k(7), Kept::ProgramChoice(CpuSet::single(CpuId(1))))];
        r.narrowed = vec![k(6)];
        r.born_pinned = vec![k(8)];
        s.set_restored(&r);
        assert_eq!((s.restored, s.restore_total), (3, 4));
        assert_eq!((s.program_chose, s.program_born_pinned), (1, 1));
        assert_eq!(s.cpuset_narrowed, 1);
        let text = s.to_text(true);
        assert!(
            text.contains("restored 3 of 4 (1 left (below)); 1 found narrowed by their cpuset"),
            "{text}"
        );
        assert!(
            text.contains(
                "2    left as their program set them (1 pinned as they started), 0 NOT restored"
            ),
            "{text}"
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["program_born_pinned"], 1);
        assert_eq!(v["cpuset_narrowed"], 1);
    }

    #[test]
    fn summary_default_policy_is_named_as_the_default() {
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut given = Summary::new(
            PolicyKind::Tumbler,
            false,
            &topo,
            Level::Core,
            false,
            Nanos(0),
        );
        given.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        assert!(
            given
                .to_text(false)
                .contains("policy tumbler at level core")
        );
        let mut default = Summary::new(
            PolicyKind::Tumbler,
            true,
            &topo,
            Level::Core,
            false,
            Nanos(0),
        );
        default.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        assert!(
            default
                .to_text(false)
                .contains("policy tumbler (default) at level core")
        );
    }

    #[test]
    fn summary_estimated_lock_time_shown_only_to_a_policy_that_reads_it() {
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        for (policy, shown) in [
            (PolicyKind::Tumbler, false),
            (PolicyKind::None, false),
            (PolicyKind::Shuffling, true),
        ] {
            let mut s = Summary::new(policy, false, &topo, Level::Core, false, Nanos(0));
            s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
            assert!(!s.lock_probe.exact);
            assert_eq!(s.to_text(true).contains("lock time:"), shown, "{policy}");
            // The JSON keeps it either way.
            assert!(s.lock_time.starts_with("estimate from blocked time"));
        }
        // Measured exactly, it is shown whatever the policy.
        let mut s = Summary::new(
            PolicyKind::Tumbler,
            false,
            &topo,
            Level::Core,
            false,
            Nanos(0),
        );
        s.lock_probe.exact = true;
        s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        assert!(s.to_text(true).contains("lock time: exact (futex probe)"));
    }

    #[test]
    fn summary_cv_is_explained_where_printed() {
        // Two cores, one busy 90 % and one 30 % of a one-second window: mean .6, σ .3,
        // CV = .3 / .6 = .5.
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut s = Summary::new(PolicyKind::None, false, &topo, Level::Core, false, Nanos(0));
        s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        s.domain_util = vec![0.9, 0.3];
        s.domain_util_mean = 0.6;
        s.domain_util_cv = 0.5;
        let text = s.to_text(true);
        assert!(
            text.contains(
                "0.500    CV of core utilization: its spread across the cores (σ / mean; 0 = evenly loaded)"
            ),
            "{text}"
        );
        assert!(
            text.contains("mean core utilization  [core0=90.0% core1=30.0%]"),
            "{text}"
        );
    }

    #[test]
    fn summary_restored_counts_the_masks_handed_back_during_the_run() {
        // 310 moves, every mask handed back by the policy before the end (speed's guard
        // giving the threads to Linux): the restore at the end found nothing left to do,
        // and the summary must not read "restored 0 of 0".
        let mut s = on_two_cores(PolicyKind::Speed);
        s.applied.done = 310;
        s.set_handed_back(310);
        s.set_restored(&restore_report(0, 0, 0));
        s.finish(Nanos::from_secs(1), PolicySummary::Nothing, "exit 0".into());
        let text = s.to_text(false);
        assert!(
            text.contains(
                "310    moves made, restored 310 of 310 (310 handed back during the run)"
            ),
            "{text}"
        );
        // Some handed back, the rest put back at the end.
        s.set_handed_back(300);
        s.set_restored(&restore_report(8, 2, 0));
        let text = s.to_text(true);
        assert!(
            text.contains("restored 308 of 310 (300 handed back during the run, 2 already back)"),
            "{text}"
        );
        // The JSON keeps the restore at the end apart.
        assert_eq!((s.restored, s.restore_total, s.handed_back), (8, 10, 300));
    }

    #[test]
    fn summary_short_by_default_the_details_with_verbose() {
        let mut s = on_two_cores(PolicyKind::Tumbler);
        s.applied.done = 12;
        s.set_restored(&restore_report(4, 0, 0));
        s.finish(
            Nanos::from_secs(2),
            PolicySummary::Tumbler(Default::default()),
            "exit 0".into(),
        );
        let short = s.to_text(false);
        let lines: Vec<&str> = short.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 6, "{short}");
        for want in [
            "threadbalance summary: policy tumbler at level core",
            "s  wall time (exit 0), 0 threads in 0 processes",
            "12    moves made, restored 4 of 4",
            "threadbalance's own CPU time (",
            "regroupings: 0",
            "-v for the rest",
        ] {
            assert!(short.contains(want), "{want:?} in {short}");
        }
        for detail in ["threads seen", "CV of core utilization", "last interval"] {
            assert!(!short.contains(detail), "{detail:?} in {short}");
        }
        let long = s.to_text(true);
        for detail in [
            "threads seen",
            "12    moves made (0 decided",
            "CV of core utilization",
            "last interval",
        ] {
            assert!(long.contains(detail), "{detail:?} in {long}");
        }
        assert!(!long.contains("-v for the rest"), "{long}");
    }
}
