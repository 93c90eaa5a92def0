//! The soak's pure parts: which programs start when, how each one ends, what the daemon's
//! log lines mean, the RSS figures, the verdict and the text. No I/O here; `soak` carries
//! the plan out.
//!
//! ```text
//!  D = minutes × 60 s, P programs, gap = D / P
//!  program k (0 ≤ k < P): starts at k × gap, lives (2 + 3k mod 5) × gap (at least 3 s),
//!                         1 + 3k mod 6 threads,   fate by k mod 5:
//!    0 exits      ends on its own at the end of its life
//!    1 term       SIGTERM at the end of its life
//!    2 kill       SIGKILL at the end of its life
//!    3 forks      a worker starts a child (not matched by any rule) a third into its life;
//!                 the program ends on its own, the child 2 s after it
//!    4 released   `ctl release` halfway, masks checked at once; SIGTERM at the end
//!  fates 3 and 4 run under `pbind` (every thread pinned: the checks have something to
//!  check), the others under `pbind` (even k) or `speed` (odd k)
//! ```
//!
//! With P = 100 over 10 minutes, gap = 6 s: lives of 12 to 30 s, so about 3.5 programs
//! are alive at once (the mean life, (2+3+4+5+6)/5 = 4 gaps, over one start per gap), and
//! the last ones are still running when the daemon is stopped.

use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// RSS growth after the warm-up that fails the soak, kB.
pub const RSS_LIMIT_KB: i64 = 1024;

/// How a program ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fate {
    /// It exits on its own.
    Exits,
    /// The soak sends it SIGTERM.
    Term,
    /// The soak sends it SIGKILL.
    Kill,
    /// It starts a child process, then exits on its own.
    Forks,
    /// The daemon is told to release it (`ctl release`) halfway; SIGTERM at the end.
    Released,
}

/// One program of the soak.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Planned {
    /// Its number, 0 to P − 1.
    pub index: usize,
    /// When it starts, from the start of the soak.
    pub start_ms: u64,
    /// How long it lives.
    pub life_ms: u64,
    /// Its worker threads.
    pub threads: u32,
    /// How it ends.
    pub fate: Fate,
    /// The policy of the rule that matches it.
    pub policy: &'static str,
}

impl Planned {
    /// When a forking program starts its child, from its own start.
    pub fn fork_at_ms(&self) -> u64 {
        self.life_ms / 3
    }
}

/// The shortest life: a program must live a few of the daemon's windows to be managed.
pub const MIN_LIFE: Duration = Duration::from_secs(3);

/// How much longer than its parent a forked child lives.
pub const CHILD_OUTLIVES_MS: u64 = 2000;

/// The programs of a soak of `duration` with `programs` of them.
pub fn schedule(duration: Duration, programs: usize) -> Vec<Planned> {
    let total = duration.as_millis() as u64;
    let gap = total / programs.max(1) as u64;
    (0..programs)
        .map(|k| {
            let fate = match k % 5 {
                0 => Fate::Exits,
                1 => Fate::Term,
                2 => Fate::Kill,
                3 => Fate::Forks,
                _ => Fate::Released,
            };
            let policy = match fate {
                Fate::Forks | Fate::Released => "pbind",
                _ if k % 2 == 0 => "pbind",
                _ => "speed",
            };
            Planned {
                index: k,
                start_ms: k as u64 * gap,
                life_ms: ((2 + (3 * k as u64) % 5) * gap).max(MIN_LIFE.as_millis() as u64),
                threads: 1 + (3 * k as u32) % 6,
                fate,
                policy,
            }
        })
        .collect()
}

/// What a program does, as `bench --soak-program THREADS:LIFE_MS:FORK_MS:TAG` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramSpec {
    /// Worker threads.
    pub threads: u32,
    /// How long it runs before exiting on its own; 0: until killed.
    pub life_ms: u64,
    /// When a worker starts the child process; 0: none.
    pub fork_ms: u64,
    /// The tag at the end of its command line (the rules match it).
    pub tag: String,
}

/// A `--soak-program` not of the form `THREADS:LIFE_MS:FORK_MS:TAG`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--soak-program {0:?}: expected THREADS:LIFE_MS:FORK_MS:TAG")]
pub struct BadProgramSpec(pub String);

impl ProgramSpec {
    /// `THREADS:LIFE_MS:FORK_MS:TAG`.
    pub fn parse(text: &str) -> Result<ProgramSpec, BadProgramSpec> {
        let bad = || BadProgramSpec(text.to_string());
        let mut it = text.splitn(4, ':');
        let mut num = || {
            it.next()
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(bad)
        };
        let threads = u32::try_from(num()?).map_err(|_| bad())?;
        let (life_ms, fork_ms) = (num()?, num()?);
        let tag = it.next().filter(|t| !t.is_empty()).ok_or_else(bad)?;
        if threads == 0 || threads > 64 {
            return Err(bad());
        }
        Ok(ProgramSpec {
            threads,
            life_ms,
            fork_ms,
            tag: tag.to_string(),
        })
    }

    /// The argument that gives this spec.
    pub fn arg(&self) -> String {
        format!(
            "{}:{}:{}:{}",
            self.threads, self.life_ms, self.fork_ms, self.tag
        )
    }
}

/// A line of the daemon's log, as the soak counts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    /// `pid P (…): managed by rule …`.
    Managed(i32),
    /// `pid P (…) released (…): …`.
    Released(i32),
    /// An advisory: a warning about the machine (a competitor: sched_ext, numad, NUMA
    /// balancing, a cpuset change) or about the rules (two processes sharing CPUs under
    /// different policies, which the soak's two rules make on purpose), not an error of
    /// the daemon.
    Advisory,
    /// Any other WARN or ERROR line: an error.
    Error,
    /// Anything else.
    Other,
}

/// What `line` (the daemon's log, with or without a timestamp before the level) means to
/// the soak.
pub fn classify(line: &str) -> LogLine {
    const LEVELS: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];
    let level = line
        .split_whitespace()
        .take(2)
        .find(|w| LEVELS.contains(w))
        .unwrap_or("");
    if level == "WARN" || level == "ERROR" {
        const ADVISORIES: [&str; 5] = [
            "sched_ext scheduler",
            "numad is running",
            "NUMA balancing is on",
            "cpuset",
            "under different policies or levels",
        ];
        if level == "WARN" && ADVISORIES.iter().any(|c| line.contains(c)) {
            return LogLine::Advisory;
        }
        return LogLine::Error;
    }
    let pid = || {
        let rest = line.split_once(" pid ")?.1;
        rest.split_whitespace().next()?.parse::<i32>().ok()
    };
    if line.contains(": managed by rule ")
        && let Some(p) = pid()
    {
        return LogLine::Managed(p);
    }
    if line.contains(") released (")
        && let Some(p) = pid()
    {
        return LogLine::Released(p);
    }
    LogLine::Other
}

/// The daemon's resident memory over the soak.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Rss {
    /// The first sample, kB.
    pub first_kb: u64,
    /// The first sample after the warm-up, kB.
    pub after_warmup_kb: u64,
    /// The last sample, kB.
    pub last_kb: u64,
    /// The largest sample, kB.
    pub max_kb: u64,
    /// Last minus after-warm-up, kB (negative: it shrank).
    pub growth_kb: i64,
    /// Samples taken.
    pub samples: usize,
}

impl Rss {
    /// The figures of `(ms since start, kB)` samples, in time order, with a warm-up of
    /// `warmup_ms`. `None` without samples.
    pub fn of(samples: &[(u64, u64)], warmup_ms: u64) -> Option<Rss> {
        let &(_, first_kb) = samples.first()?;
        let &(_, last_kb) = samples.last()?;
        let after_warmup_kb = samples
            .iter()
            .find(|(t, _)| *t >= warmup_ms)
            .map_or(last_kb, |&(_, kb)| kb);
        Some(Rss {
            first_kb,
            after_warmup_kb,
            last_kb,
            max_kb: samples.iter().map(|&(_, kb)| kb).max().unwrap_or(0),
            growth_kb: last_kb as i64 - after_warmup_kb as i64,
            samples: samples.len(),
        })
    }
}

/// `VmRSS` in kB from a `/proc/PID/status` text.
pub fn parse_vm_rss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// User plus system CPU time in clock ticks from a `/proc/PID/stat` text (fields 14 and 15,
/// counted after the parenthesised command name, which may hold spaces).
pub fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After ")": field 3 (state) is index 0, so utime (14) is index 11 and stime (15) 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// What a soak measured, as `--json` writes it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SoakReport {
    /// Minutes asked for.
    pub minutes: f64,
    /// Wall time from the daemon's start to its stop, s.
    pub wall_s: f64,
    /// `/proc/loadavg` (1, 5, 15 min) at the start and at the end.
    pub load_before: Option<[f64; 3]>,
    /// The same at the end.
    pub load_after: Option<[f64; 3]>,
    /// Programs planned.
    pub programs_planned: usize,
    /// Programs started.
    pub programs_started: usize,
    /// Programs the daemon logged as managed.
    pub programs_managed: usize,
    /// Programs seen with a thread off the mask they started with.
    pub programs_moved: usize,
    /// Programs that ended each way, by fate.
    pub fates: BTreeMap<String, usize>,
    /// Children the forking programs started.
    pub children_seen: usize,
    /// Mask checks made: after a `ctl release`, and of every process alive at the stop.
    pub checks: usize,
    /// Threads found on another mask than the soak's own at a check.
    pub masks_not_restored: usize,
    /// Which, and when.
    pub not_restored: Vec<String>,
    /// Of those, at the daemon's stop.
    pub left_pinned_at_stop: usize,
    /// Of those, threads of forked children (started by a pinned thread of a program)
    /// still on that mask after the program exited and was released: orphans, found by
    /// the restore only because the daemon recorded them while their parent lived.
    pub orphans_left_pinned: usize,
    /// Checks of forked children after their parent's release (it exited, or the daemon stopped).
    pub orphan_checks: usize,
    /// Programs and children still running when the daemon stopped.
    pub alive_at_stop: usize,
    /// The daemon's resident memory.
    pub rss: Rss,
    /// Every RSS sample `(ms since start, kB)`.
    pub rss_samples: Vec<(u64, u64)>,
    /// The warm-up, s.
    pub warmup_s: f64,
    /// Errors counted (see the module docs).
    pub errors: usize,
    /// What they were (the first 50).
    pub error_lines: Vec<String>,
    /// Advisories: warnings about competitors or the rules (not errors).
    pub advisory_warnings: Vec<String>,
    /// `threadbalance_restore_failures_total` before the stop.
    pub restore_failures_metric: Option<f64>,
    /// The daemon's exit status.
    pub daemon_exit: Option<i32>,
    /// The daemon's CPU time (user + system), s, read just before its stop.
    pub daemon_cpu_s: f64,
    /// The same as a share of one core over the wall time, %.
    pub daemon_cpu_pct: f64,
    /// Journal directories left in the state directory after the stop.
    pub journals_left: usize,
    /// Why the soak failed; empty when it passed.
    pub failures: Vec<String>,
}

/// Fills `failures`: RSS growth, errors, masks not restored, an early stop.
pub fn verdict(report: &mut SoakReport, interrupted: Option<i32>) {
    let mut f = Vec::new();
    if let Some(sig) = interrupted {
        f.push(format!("interrupted by signal {sig} before the end"));
    }
    if report.rss.samples == 0 {
        f.push("no RSS sample of the daemon".to_string());
    } else if report.rss.growth_kb >= RSS_LIMIT_KB {
        f.push(format!(
            "RSS grew by {} kB after the warm-up (limit: under {RSS_LIMIT_KB} kB)",
            report.rss.growth_kb
        ));
    }
    if report.restore_failures_metric.is_none_or(|n| n > 0.0) {
        report.errors += 1;
        report.error_lines.push(format!(
            "threadbalance_restore_failures_total: {:?}",
            report.restore_failures_metric
        ));
    }
    if report.daemon_exit != Some(0) {
        report.errors += 1;
        report
            .error_lines
            .push(format!("daemon exit status {:?}", report.daemon_exit));
    }
    if report.journals_left > 0 {
        report.errors += 1;
        report.error_lines.push(format!(
            "{} journal(s) left in the state directory",
            report.journals_left
        ));
    }
    if report.errors > 0 {
        f.push(format!("{} error(s)", report.errors));
    }
    if report.masks_not_restored > 0 {
        f.push(format!(
            "{} mask(s) not restored",
            report.masks_not_restored
        ));
    }
    report.failures = f;
}

/// The figures, one per line.
pub fn to_text(r: &SoakReport) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let load = |l: Option<[f64; 3]>| {
        l.map_or("?".to_string(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
    };
    let _ = writeln!(
        t,
        "soak: {} programs over {:.1} min ({:.0} s of wall time)",
        r.programs_planned, r.minutes, r.wall_s
    );
    let _ = writeln!(
        t,
        "  load average before/after: {} / {}",
        load(r.load_before),
        load(r.load_after)
    );
    let _ = writeln!(
        t,
        "  programs: {} started, {} managed, {} seen moved, {} children of forking programs",
        r.programs_started, r.programs_managed, r.programs_moved, r.children_seen
    );
    let fates: Vec<String> = r.fates.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(t, "  ended: {}", fates.join(", "));
    let _ = writeln!(
        t,
        "  daemon RSS: first {} kB, after the {:.0} s warm-up {} kB, last {} kB, max {} kB; growth {:+} kB ({} samples)",
        r.rss.first_kb,
        r.warmup_s,
        r.rss.after_warmup_kb,
        r.rss.last_kb,
        r.rss.max_kb,
        r.rss.growth_kb,
        r.rss.samples
    );
    let _ = writeln!(
        t,
        "  daemon CPU: {:.2} s over {:.0} s = {:.2} % of one core",
        r.daemon_cpu_s, r.wall_s, r.daemon_cpu_pct
    );
    let _ = writeln!(
        t,
        "  errors: {}; restore failures (metric): {}; daemon exit: {}; journals left: {}",
        r.errors,
        r.restore_failures_metric
            .map_or("?".to_string(), |n| format!("{n}")),
        r.daemon_exit.map_or("?".to_string(), |c| c.to_string()),
        r.journals_left
    );
    for l in r.error_lines.iter().take(10) {
        let _ = writeln!(t, "    {l}");
    }
    let _ = writeln!(
        t,
        "  masks: {} checks, {} not restored ({} left pinned at the stop, {} processes alive then)",
        r.checks, r.masks_not_restored, r.left_pinned_at_stop, r.alive_at_stop
    );
    for l in r.not_restored.iter().take(10) {
        let _ = writeln!(t, "    {l}");
    }
    let _ = writeln!(
        t,
        "  forked children after their parent's release: {} checks, {} thread(s) not restored",
        r.orphan_checks, r.orphans_left_pinned
    );
    if !r.advisory_warnings.is_empty() {
        let _ = writeln!(
            t,
            "  advisories (competitors, processes sharing CPUs under different policies; not errors): {}",
            r.advisory_warnings.len()
        );
    }
    if r.failures.is_empty() {
        let _ = write!(t, "  PASS");
    } else {
        let _ = write!(t, "  FAIL: {}", r.failures.join("; "));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_ten_minutes_of_100_spreads_starts_six_seconds_apart() {
        let s = schedule(Duration::from_secs(600), 100);
        assert_eq!(s.len(), 100);
        // gap = 600 000 ms / 100 = 6000 ms.
        assert_eq!(s[1].start_ms, 6000);
        assert_eq!(s[99].start_ms, 594_000);
        // k = 1: (2 + 3 mod 5) × 6 s = 30 s; k = 2: (2 + 6 mod 5) × 6 s = 18 s.
        assert_eq!(s[1].life_ms, 30_000);
        assert_eq!(s[2].life_ms, 18_000);
        // 1 + 3k mod 6 threads: k = 1 → 4, k = 2 → 1.
        assert_eq!((s[1].threads, s[2].threads), (4, 1));
        // Each fate 20 times; forks and releases under pbind.
        for fate in [
            Fate::Exits,
            Fate::Term,
            Fate::Kill,
            Fate::Forks,
            Fate::Released,
        ] {
            assert_eq!(s.iter().filter(|p| p.fate == fate).count(), 20);
        }
        assert!(
            s.iter()
                .filter(|p| matches!(p.fate, Fate::Forks | Fate::Released))
                .all(|p| p.policy == "pbind")
        );
        // Mean life 4 gaps = 24 s, one start every 6 s: 4 alive at once on average.
        let mean = s.iter().map(|p| p.life_ms).sum::<u64>() / 100;
        assert_eq!(mean, 24_000);
    }

    #[test]
    fn schedule_short_soak_keeps_lives_at_least_three_seconds() {
        // 12 programs over 10 s: gap 833 ms; program 0 lives 2 gaps = 1666 ms, raised to
        // the 3 s floor.
        let s = schedule(Duration::from_secs(10), 12);
        assert!(s.iter().all(|p| p.life_ms >= 3000));
        assert_eq!(s[0].life_ms, 3000);
    }

    #[test]
    fn program_spec_round_trips_and_rejects_bad_text() {
        let p = ProgramSpec::parse("3:12000:4000:soak77-pbind").unwrap();
        assert_eq!(p.threads, 3);
        assert_eq!(p.tag, "soak77-pbind");
        assert_eq!(ProgramSpec::parse(&p.arg()).unwrap(), p);
        for bad in ["", "3", "3:1:2", "0:1:2:t", "x:1:2:t", "3:1:2:", "65:1:2:t"] {
            assert!(ProgramSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn classify_log_lines_errors_advisories_and_pids() {
        assert_eq!(
            classify(r#" INFO threadbalance::daemon: pid 42 (threadbalance): managed by rule "soak-pbind" (policy pbind)"#.trim()),
            LogLine::Managed(42)
        );
        assert_eq!(
            classify(
                "INFO threadbalance::daemon: pid 42 (threadbalance) released (exited): 3 restored"
            ),
            LogLine::Released(42)
        );
        assert_eq!(
            classify(
                "WARN threadbalance::daemon: the kernel's NUMA balancing is on (kernel.numa_balancing = 1): …"
            ),
            LogLine::Advisory
        );
        assert_eq!(
            classify(
                "WARN threadbalance::daemon::groups: processes 1 and 2 share CPUs 0-1 under different policies or levels: they are balanced apart …"
            ),
            LogLine::Advisory
        );
        assert_eq!(
            classify("WARN threadbalance::daemon: pid 42 (threadbalance): no such process"),
            LogLine::Error
        );
        assert_eq!(
            classify("ERROR threadbalance::daemon: stopped: x"),
            LogLine::Error
        );
        assert_eq!(
            classify(
                "2026-01-02T03:04:05.000006Z  WARN threadbalance::daemon: listing processes: x"
            ),
            LogLine::Error
        );
        assert_eq!(
            classify("INFO threadbalance::daemon: started: 2 rules"),
            LogLine::Other
        );
    }

    #[test]
    fn rss_growth_is_counted_from_the_end_of_the_warm_up() {
        // Samples every 5 s; warm-up 10 s: after-warm-up is the 10 s sample (15 000 kB),
        // last 15 500 kB, so growth 500 kB; the max 16 000 kB is reported too.
        let s = [
            (0, 9000),
            (5000, 14_000),
            (10_000, 15_000),
            (15_000, 16_000),
            (20_000, 15_500),
        ];
        let r = Rss::of(&s, 10_000).unwrap();
        assert_eq!(
            (r.first_kb, r.after_warmup_kb, r.last_kb),
            (9000, 15_000, 15_500)
        );
        assert_eq!((r.max_kb, r.growth_kb, r.samples), (16_000, 500, 5));
        assert_eq!(Rss::of(&[], 0), None);
    }

    #[test]
    fn proc_fields_parse_rss_and_cpu_ticks() {
        assert_eq!(parse_vm_rss("Name:\tx\nVmRSS:\t   14876 kB\n"), Some(14876));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
        // utime 120 and stime 30 ticks, behind a command name with a space and a ")".
        let stat = "77 (a b) c) S 1 77 77 0 -1 4194560 10 0 0 0 120 30 0 0 20 0 1 0 5 0 0";
        assert_eq!(parse_cpu_ticks(stat), Some(150));
    }

    #[test]
    fn verdict_fails_on_growth_errors_and_unrestored_masks() {
        let mut r = SoakReport {
            restore_failures_metric: Some(0.0),
            daemon_exit: Some(0),
            rss: Rss {
                samples: 3,
                growth_kb: 1023,
                ..Rss::default()
            },
            ..SoakReport::default()
        };
        verdict(&mut r, None);
        assert!(r.failures.is_empty(), "{:?}", r.failures);
        // 1024 kB = 1 MB is a failure; so is a restore failure in the metrics.
        r.rss.growth_kb = 1024;
        r.restore_failures_metric = Some(1.0);
        r.masks_not_restored = 2;
        verdict(&mut r, None);
        assert_eq!(r.failures.len(), 3, "{:?}", r.failures);
        assert_eq!(r.errors, 1);
    }
}
