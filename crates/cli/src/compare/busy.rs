//! Is the machine busy with other work? A comparison measured on a busy machine says more
//! about the other work than about the policies, so `compare` and `demo` print a warning
//! instead of a verdict when any of these holds:
//!
//! 1. **Load average.** The 1-minute load average, read before the first run (when nothing
//!    of ours runs), is above the number of CPUs the command may use.
//! 2. **Steal time.** Over the whole comparison, the hypervisor took more than
//!    [`STEAL_LIMIT`] of the time of the CPUs in use (the `steal` column of their `cpuN`
//!    lines in `/proc/stat`, read before the first run and after the last).
//! 3. **`none` far from its usual share.** When the command reports its percentage of the
//!    fair-share bound (as `threadbalance workload` does), `none` runs are Linux alone on
//!    the same program: their percentages should agree. A `none` run more than
//!    [`FAIR_SHARE_SPREAD`] percentage points from the median of the `none` runs had its
//!    CPUs taken by something else part of the time.
//!
//! Parsing is pure (`parse_*`); reading takes the `/proc` directory as a parameter, so tests
//! use fixture files.

use serde::Serialize;
use std::path::{Path, PathBuf};

/// Steal time above this share of the CPUs' time over a comparison makes it busy.
pub const STEAL_LIMIT: f64 = 0.02;

/// A `none` run this many percentage points from the `none` median makes it busy.
pub const FAIR_SHARE_SPREAD: f64 = 10.0;

/// The 1-minute load average from the text of `/proc/loadavg` ("0.52 0.41 0.30 1/123 4567").
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Jiffies of one CPU line of `/proc/stat`: the time accounted to anything, and the part
/// of it stolen by the hypervisor.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal.
    pub total: u64,
    /// steal.
    pub steal: u64,
}

/// The summed times of the `cpuN` lines of `/proc/stat` for the CPUs in `cpus`; `None`
/// when any of them is missing.
pub fn parse_stat(text: &str, cpus: &[u32]) -> Option<CpuTimes> {
    let mut sum = CpuTimes::default();
    let mut found = 0;
    for line in text.lines() {
        let mut fields = line.split_whitespace();
        let Some(id) = fields
            .next()
            .and_then(|name| name.strip_prefix("cpu"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if !cpus.contains(&id) {
            continue;
        }
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
        sum.total += v.iter().sum::<u64>();
        sum.steal += v.get(7).copied().unwrap_or(0);
        found += 1;
    }
    (found == cpus.len()).then_some(sum)
}

/// The share of `after − before` that was stolen; `None` when no time passed.
pub fn steal_share(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total.checked_sub(before.total)?;
    let steal = after.steal.checked_sub(before.steal)?;
    (total > 0).then(|| steal as f64 / total as f64)
}

/// Warnings from the `none` runs' percentages of the fair share (rule 3).
pub fn fair_share_warning(none_pcts: &[f64]) -> Option<String> {
    let s = super::Spread::of(none_pcts)?;
    let far = (s.median - s.min).max(s.max - s.median);
    (far > FAIR_SHARE_SPREAD).then(|| {
        format!(
            "none reached {:.1} % to {:.1} % of the fair share across its runs (median {:.1} %): \
             more than {FAIR_SHARE_SPREAD} points apart, so other work took its CPUs in some runs",
            s.min, s.max, s.median
        )
    })
}

/// What the machine looked like around a comparison.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Busy {
    /// The 1-minute load average before the first run.
    pub load_before: Option<f64>,
    /// CPUs the command may use.
    pub cpus: usize,
    /// Share of those CPUs' time stolen by the hypervisor over the comparison.
    pub steal_share: Option<f64>,
    /// Why the machine counts as busy; empty when it does not.
    pub warnings: Vec<String>,
}

/// Reads `/proc` before the first run and after the last.
#[derive(Debug)]
pub struct Probe {
    root: PathBuf,
    cpus: Vec<u32>,
    load_before: Option<f64>,
    stat_before: Option<CpuTimes>,
}

impl Probe {
    /// Takes the first reading of `proc_root` (normally `/proc`) for the CPUs in `cpus`.
    pub fn start(proc_root: &Path, cpus: Vec<u32>) -> Probe {
        let read = |name: &str| std::fs::read_to_string(proc_root.join(name)).ok();
        Probe {
            load_before: read("loadavg").as_deref().and_then(parse_loadavg),
            stat_before: read("stat").as_deref().and_then(|t| parse_stat(t, &cpus)),
            root: proc_root.to_path_buf(),
            cpus,
        }
    }

    /// Takes the second reading and judges the three rules; `none_pcts` are the `none`
    /// runs' percentages of the fair share (empty when the command reports none).
    pub fn finish(self, none_pcts: &[f64]) -> Busy {
        let after = std::fs::read_to_string(self.root.join("stat"))
            .ok()
            .and_then(|t| parse_stat(&t, &self.cpus));
        let steal = match (self.stat_before, after) {
            (Some(b), Some(a)) => steal_share(b, a),
            _ => None,
        };
        judge(self.load_before, self.cpus.len(), steal, none_pcts)
    }
}

/// The three rules on readings already taken.
pub fn judge(
    load_before: Option<f64>,
    cpus: usize,
    steal_share: Option<f64>,
    none_pcts: &[f64],
) -> Busy {
    let mut warnings = Vec::new();
    if let Some(load) = load_before.filter(|l| *l > cpus as f64) {
        warnings.push(format!(
            "load average {load:.2} before the first run, above the {cpus} CPUs in use"
        ));
    }
    if let Some(s) = steal_share.filter(|s| *s > STEAL_LIMIT) {
        warnings.push(format!(
            "the hypervisor stole {:.1} % of the CPUs' time during the runs (more than {:.0} %)",
            s * 100.0,
            STEAL_LIMIT * 100.0
        ));
    }
    warnings.extend(fair_share_warning(none_pcts));
    Busy {
        load_before,
        cpus,
        steal_share,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT_BEFORE: &str = "cpu  200 0 100 1000 0 0 0 10 0 0\n\
        cpu0 100 0 50 500 0 0 0 5 0 0\n\
        cpu1 100 0 50 500 0 0 0 5 0 0\n\
        intr 12345\n";
    const STAT_AFTER: &str = "cpu  300 0 150 1100 0 0 0 60 0 0\n\
        cpu0 150 0 75 550 0 0 0 30 0 0\n\
        cpu1 150 0 75 550 0 0 0 30 0 0\n";

    #[test]
    fn parse_loadavg_takes_the_one_minute_figure() {
        assert_eq!(parse_loadavg("2.63 1.00 0.50 3/123 4567\n"), Some(2.63));
        assert_eq!(parse_loadavg(""), None);
    }

    #[test]
    fn parse_stat_sums_the_cpus_in_use_and_skips_the_total_line() {
        // cpu0: 100 + 50 + 500 + 5 = 655 jiffies, 5 stolen.
        assert_eq!(
            parse_stat(STAT_BEFORE, &[0]),
            Some(CpuTimes {
                total: 655,
                steal: 5
            })
        );
        assert_eq!(
            parse_stat(STAT_BEFORE, &[0, 1]).map(|t| t.total),
            Some(1310)
        );
        assert_eq!(parse_stat(STAT_BEFORE, &[0, 7]), None);
    }

    #[test]
    fn steal_share_over_a_run_of_fixture_readings_is_a_fifth() {
        // Per CPU: total 655 → 805 (+150), steal 5 → 30 (+25); both CPUs: 50 / 300.
        let b = parse_stat(STAT_BEFORE, &[0, 1]).unwrap();
        let a = parse_stat(STAT_AFTER, &[0, 1]).unwrap();
        let s = steal_share(b, a).unwrap();
        assert!((s - 50.0 / 300.0).abs() < 1e-9, "{s}");
        assert_eq!(steal_share(b, b), None);
    }

    #[test]
    fn judge_an_idle_machine_gives_no_warning() {
        let busy = judge(Some(0.4), 2, Some(0.0), &[76.0, 75.5, 76.4]);
        assert!(busy.warnings.is_empty(), "{:?}", busy.warnings);
    }

    #[test]
    fn judge_load_above_the_cpus_warns() {
        let busy = judge(Some(3.1), 2, None, &[]);
        assert_eq!(busy.warnings.len(), 1);
        assert!(busy.warnings[0].contains("load average 3.10"), "{:?}", busy);
        // Exactly as many runnable tasks as CPUs is not busy.
        assert!(judge(Some(2.0), 2, None, &[]).warnings.is_empty());
    }

    #[test]
    fn judge_steal_above_the_limit_warns() {
        assert_eq!(judge(None, 2, Some(0.17), &[]).warnings.len(), 1);
        assert!(judge(None, 2, Some(0.01), &[]).warnings.is_empty());
    }

    #[test]
    fn judge_a_none_run_far_from_the_others_warns() {
        // Median 76.0; the 58.0 run is 18 points below it.
        let busy = judge(None, 2, None, &[76.0, 58.0, 75.0, 77.0]);
        assert_eq!(busy.warnings.len(), 1, "{:?}", busy.warnings);
        assert!(busy.warnings[0].contains("58.0 %"), "{:?}", busy.warnings);
    }

    #[test]
    fn probe_reads_fixture_files_from_the_given_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("loadavg"), "5.00 4.00 3.00 5/100 42\n").unwrap();
        std::fs::write(dir.path().join("stat"), STAT_BEFORE).unwrap();
        let probe = Probe::start(dir.path(), vec![0, 1]);
        std::fs::write(dir.path().join("stat"), STAT_AFTER).unwrap();
        let busy = probe.finish(&[]);
        assert_eq!(busy.load_before, Some(5.0));
        assert_eq!(busy.warnings.len(), 2, "{:?}", busy.warnings);
    }
}
