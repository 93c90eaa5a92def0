//! The end-of-run summary, `perf stat`-like, on stderr and optionally as JSON.

use serde::Serialize;
use std::fmt::Write;
use threadbalance_model::{
    ApplyReport, Level, Nanos, Topology, Window, coefficient_of_variation, mean,
};
use threadbalance_policy::TickReport;

/// The shortest management, in seconds, over which the tool's CPU share is reported.
const MIN_WALL_FOR_PCT: f64 = 0.01;

/// How many of the policy's explanations the summary keeps (the last ones).
const NOTES_KEPT: usize = 8;

/// What a run did, accumulated tick by tick.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The policy's name.
    pub policy: String,
    /// The level the policy grouped at.
    pub level: Level,
    /// Number of domains at that level.
    pub domains: usize,
    /// Whether affinities were left untouched.
    pub dry_run: bool,
    /// Wall time from start to end of management, seconds.
    pub wall_s: f64,
    /// Distinct threads seen.
    pub threads_seen: u64,
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
    /// Masks that could not be put back at the end (the kernel refused); each is listed in
    /// `left`, and the exit status is 1.
    pub unrestored: u64,
    /// Threads that chose a mask of their own after we moved them: left as they are.
    pub program_chose: u64,
    /// One line per mask not put back, with the reason.
    pub left: Vec<String>,
    /// CPU time threadbalance itself used (user + system, its own process only), seconds.
    pub tool_cpu_s: f64,
    /// `tool_cpu_s` over the wall time: the share of one core the management cost.
    pub tool_cpu_pct: f64,
    /// Mean utilization of each domain over the run (busy managed-thread time / CPU time).
    pub domain_util: Vec<f64>,
    /// Mean of `domain_util`.
    pub domain_util_mean: f64,
    /// Coefficient of variation of `domain_util`, averaged over the ticks (time-weighted).
    pub domain_util_cv: f64,
    /// Whether lock time was exact (the futex probe) or estimated from blocked time, and
    /// why there was no probe.
    pub lock_time: String,
    /// What the futex probe saw (per-thread lock and sync waits, wake edges), or why it
    /// did not run.
    pub lock_probe: crate::lockprobe::LockReport,
    /// The policy's own account, `(what, value)`.
    pub policy_summary: Vec<(String, String)>,
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
}

impl Summary {
    /// An empty summary for `policy` at `level`, starting at `start`.
    pub fn new(
        policy: &str,
        topo: &Topology,
        level: Level,
        dry_run: bool,
        start: Nanos,
    ) -> Summary {
        let domains = topo.domains(level).len();
        Summary {
            policy: policy.to_string(),
            level,
            domains,
            dry_run,
            wall_s: 0.0,
            threads_seen: 0,
            threads_peak: 0,
            ticks: 0,
            moves_decided: 0,
            applied: ApplyReport::default(),
            restored: 0,
            unrestored: 0,
            program_chose: 0,
            left: Vec::new(),
            tool_cpu_s: 0.0,
            tool_cpu_pct: 0.0,
            domain_util: vec![0.0; domains],
            domain_util_mean: 0.0,
            domain_util_cv: 0.0,
            lock_time: "estimate from blocked time".into(),
            lock_probe: crate::lockprobe::LockReport::default(),
            policy_summary: Vec::new(),
            notes: Vec::new(),
            ended: String::new(),
            start,
            cpu_at_start: own_cpu_seconds(),
            busy: vec![0.0; domains],
            cv_weighted: 0.0,
            weight: 0.0,
            exact_lock: false,
        }
    }

    /// Adds one tick and the window it decided on.
    pub fn record(&mut self, topo: &Topology, window: &Window, tick: &TickReport) {
        self.ticks += 1;
        self.threads_seen += tick.appeared as u64;
        self.threads_peak = self.threads_peak.max(tick.threads);
        self.moves_decided += tick.moves as u64;
        self.applied.add(&tick.applied);
        self.exact_lock |= window.lock_exact;
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
        self.unrestored = r.failures().count() as u64;
        self.program_chose = (r.kept.len() as u64).saturating_sub(self.unrestored);
        self.left = crate::recover::kept_lines(r);
    }

    /// Takes what the futex probe saw (before [`Summary::finish`]).
    pub fn lock_probe(&mut self, report: crate::lockprobe::LockReport) {
        self.lock_probe = report;
    }

    /// Closes the summary at `end`.
    pub fn finish(&mut self, end: Nanos, policy_summary: Vec<(String, String)>, ended: String) {
        self.wall_s = end.saturating_sub(self.start).as_secs_f64();
        // Over the same span as the wall time (not counting start-up), and not at all over
        // a span too short to mean anything (a target that had already exited).
        self.tool_cpu_s = (own_cpu_seconds() - self.cpu_at_start).max(0.0);
        self.tool_cpu_pct = if self.wall_s >= MIN_WALL_FOR_PCT {
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

    /// The human-readable form, for stderr.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "\n threadbalance summary: policy {} at level {} ({} domains){}",
            self.policy,
            self.level,
            self.domains,
            if self.dry_run { ", dry run" } else { "" }
        );
        let _ = writeln!(s, "   {:>12.3} s  wall time ({})", self.wall_s, self.ended);
        let _ = writeln!(
            s,
            "   {:>12}    threads seen (peak {} at once), {} ticks",
            self.threads_seen, self.threads_peak, self.ticks
        );
        let a = &self.applied;
        if self.dry_run {
            let _ = writeln!(
                s,
                "   {:>12}    moves decided, none applied (dry run)",
                self.moves_decided
            );
        } else {
            let _ = writeln!(
                s,
                "   {:>12}    moves made ({} decided: {} unchanged, {} vanished, {} denied), {} restored",
                a.done, self.moves_decided, a.unchanged, a.vanished, a.denied, self.restored
            );
        }
        if self.program_chose > 0 || self.unrestored > 0 {
            let _ = writeln!(
                s,
                "   {:>12}    left as their program set them, {} NOT restored",
                self.program_chose, self.unrestored
            );
            for line in &self.left {
                let _ = writeln!(s, "     {line}");
            }
        }
        let per: Vec<String> = self
            .domain_util
            .iter()
            .enumerate()
            .map(|(i, u)| format!("{}{}={:.1}%", self.level, i, u * 100.0))
            .collect();
        let _ = writeln!(
            s,
            "   {:>11.1}%    mean {} utilization, CV {:.3}  [{}]",
            self.domain_util_mean * 100.0,
            self.level,
            self.domain_util_cv,
            per.join(" ")
        );
        let _ = writeln!(
            s,
            "   {:>12.3} s  threadbalance's own CPU time ({:.2} % of one core)",
            self.tool_cpu_s, self.tool_cpu_pct
        );
        let _ = writeln!(s, "   lock time: {}", self.lock_time);
        let probe = &self.lock_probe;
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
        for (what, value) in &self.policy_summary {
            let _ = writeln!(s, "   {what}: {value}");
        }
        for (t, note) in &self.notes {
            let _ = writeln!(s, "   at {t:.3} s: {note}");
        }
        s
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

    #[test]
    fn summary_finish_right_after_start_reports_no_cpu_share() {
        // Attaching to a process that had already exited used to print "70086 % of one
        // core": start-up CPU time (topology reading) over a wall time of microseconds.
        let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
        let mut s = Summary::new("none", &topo, Level::Core, false, Nanos(1_000));
        s.finish(Nanos(21_000), Vec::new(), "process exited".into());
        assert_eq!(s.tool_cpu_pct, 0.0);
        assert!(s.to_text().contains("(0.00 % of one core)"));
    }
}
