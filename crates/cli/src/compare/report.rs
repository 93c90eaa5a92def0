//! What `compare` and `demo` print: the comparison with mean ± σ beside min/median/max,
//! then a verdict line per policy (see [`super::stats`] for when a difference counts), or,
//! on a busy machine (see [`super::busy`]), a warning instead of the verdicts.
//!
//! ```text
//! 5 runs of each policy (after 1 warm-up), interleaved; ratio = policy / none run by run (< 1 is faster)
//! fair-share bound: 1.500 s
//! run time from /proc (built without the bpf feature)
//! policy           wall s mean ± σ         min / med / max   ratio min / med / max   moves/s   spread   % fair
//! none              1.975 ± 0.010    1.966 / 1.975 / 1.993   1.000 / 1.000 / 1.000       0.0     1.4%     76.0
//! speed             1.633 ± 0.007    1.625 / 1.633 / 1.642   0.823 / 0.827 / 0.829     726.0     1.1%     91.8
//! speed is 1.21 ± 0.01 times faster than none
//! ```

use super::busy::Busy;
use super::stats::{Stats, Verdict, judge};
use super::{Comparison, judged};
use serde::Serialize;
use std::fmt::Write;

/// One policy's statistics and verdict.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyStats {
    /// The policy.
    pub policy: String,
    /// Mean, σ, median, min and max of the wall time the runs are judged by (the command's
    /// own score when it prints one, else the whole command's), seconds.
    pub wall_s: Stats,
    /// Runs whose command exited non-zero (kept with `--ignore-failure`).
    pub failed_runs: usize,
    /// Against the baseline; `None` for the baseline itself.
    pub verdict: Option<Verdict>,
    /// The verdict as a line of text.
    pub verdict_line: Option<String>,
}

/// A comparison with its statistics, verdicts and the machine's business.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Everything `compare --json` has always given.
    #[serde(flatten)]
    pub comparison: Comparison,
    /// Warm-up runs of each policy, discarded.
    pub warmup: usize,
    /// One entry per policy, in the order given.
    pub stats: Vec<PolicyStats>,
    /// Whether other work disturbed the runs; when `busy.warnings` is not empty the
    /// verdicts are not printed (they stay here, for the record).
    pub busy: Busy,
}

impl Report {
    /// Adds statistics and verdicts to `comparison`.
    pub fn new(comparison: Comparison, warmup: usize, failed: &[usize], busy: Busy) -> Report {
        let walls = |i: usize| -> Option<Stats> {
            let r = comparison.results.get(i)?;
            Stats::of(&r.runs.iter().map(judged).collect::<Vec<_>>())
        };
        let base = comparison
            .results
            .iter()
            .position(|r| r.policy == comparison.baseline)
            .unwrap_or(0);
        let base_stats = walls(base);
        let stats = comparison
            .results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                let wall_s = walls(i)?;
                let verdict = match (&base_stats, i == base) {
                    (Some(b), false) => Some(judge(b, &wall_s)),
                    _ => None,
                };
                Some(PolicyStats {
                    verdict_line: verdict
                        .as_ref()
                        .map(|v| v.line(&r.policy, &comparison.baseline)),
                    policy: r.policy.clone(),
                    wall_s,
                    failed_runs: failed.get(i).copied().unwrap_or(0),
                    verdict,
                })
            })
            .collect();
        Report {
            comparison,
            warmup,
            stats,
            busy,
        }
    }

    /// Whether the verdicts may be trusted (no busy-machine warning).
    pub fn quiet_machine(&self) -> bool {
        self.busy.warnings.is_empty()
    }

    /// The table, then the verdict lines or the busy-machine warning.
    pub fn to_text(&self) -> String {
        let c = &self.comparison;
        let mut s = String::new();
        let runs = c.results.first().map_or(0, |r| r.runs.len());
        let warm = match self.warmup {
            0 => String::new(),
            1 => " (after 1 warm-up)".to_string(),
            n => format!(" (after {n} warm-ups)"),
        };
        let plural = if runs == 1 { "" } else { "s" };
        let _ = writeln!(
            s,
            "{runs} run{plural} of each policy{warm}, interleaved; ratio = policy / {} run by run (< 1 is faster)",
            c.baseline
        );
        if let Some(f) = c.fair_share_wall_s {
            let _ = writeln!(s, "fair-share bound: {f:.3} s");
        }
        if !c.run_time.is_empty() {
            let _ = writeln!(s, "{}", c.run_time.join("; "));
        }
        let _ = writeln!(
            s,
            "{:<16} {:>18} {:>24} {:>23} {:>9} {:>8} {:>8}",
            "policy",
            "wall s mean ± σ",
            "min / med / max",
            "ratio min / med / max",
            "moves/s",
            "spread",
            "% fair"
        );
        for (r, st) in c.results.iter().zip(&self.stats) {
            let ratio = r.ratio_vs_baseline.map_or_else(
                || "-".to_string(),
                |x| format!("{:.3} / {:.3} / {:.3}", x.min, x.median, x.max),
            );
            let pct = r
                .fair_share_pct
                .map_or_else(|| "-".to_string(), |p| format!("{:.1}", p.median));
            let _ = writeln!(
                s,
                "{:<16} {:>18} {:>24} {:>23} {:>9.1} {:>7.1}% {:>8}",
                r.policy,
                format!("{:.3} ± {:.3}", st.wall_s.mean, st.wall_s.stddev),
                format!(
                    "{:.3} / {:.3} / {:.3}",
                    st.wall_s.min, st.wall_s.median, st.wall_s.max
                ),
                ratio,
                r.moves_per_s,
                r.spread_frac * 100.0,
                pct
            );
        }
        for st in self.stats.iter().filter(|st| st.failed_runs > 0) {
            let _ = writeln!(
                s,
                "{}: {} of {runs} runs failed (kept: --ignore-failure)",
                st.policy, st.failed_runs
            );
        }
        if self.quiet_machine() {
            for line in self.stats.iter().filter_map(|st| st.verdict_line.as_ref()) {
                let _ = writeln!(s, "{line}");
            }
        } else {
            let _ = writeln!(s, "{}", self.busy_warning());
        }
        s
    }

    /// The warning printed instead of the verdicts.
    pub fn busy_warning(&self) -> String {
        format!(
            "warning: the machine was busy with other work, so no verdict: {}",
            self.busy.warnings.join("; ")
        )
    }
}
