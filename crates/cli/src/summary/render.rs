//! The summary as a person reads it (stderr) and as JSON (`--json`, the run object of
//! `schema/threadbalance.schema.json`: one flat object, every field whatever the text
//! leaves out).

use super::{MIN_WALL_FOR_PCT, Summary, ThreadCounters};

/// Threads listed one a line in the verbose summary, most run first (`--json` has all).
const COUNTER_LINES: usize = 16;
use serde::{Serialize, Serializer};
use std::fmt::Write;
use threadbalance_model::{ApplyReport, Level, Nanos, PolicySummary};
use threadbalance_policy::PolicyKind;

impl Summary {
    /// The human-readable form, for stderr: short, or with every detail when `verbose`.
    pub fn to_text(&self, verbose: bool) -> String {
        let mut s = String::new();
        self.head(&mut s, verbose);
        self.moves(&mut s, verbose);
        self.left(&mut s);
        self.counter_lines(&mut s, verbose);
        if !verbose {
            let _ = writeln!(s, "{}", self.own_cpu_line());
            if let Some((what, value)) = self.policy.lines().first() {
                let _ = writeln!(s, "   {what}: {value}");
            }
            let _ = writeln!(
                s,
                "   (-v for the rest: threads, utilization per {}, pacing, the policy's account)",
                self.setup.level
            );
            return s;
        }
        self.utilization(&mut s);
        let _ = writeln!(s, "{}", self.own_cpu_line());
        self.pacing(&mut s);
        self.locks(&mut s);
        for (what, value) in &self.policy.lines() {
            let _ = writeln!(s, "   {what}: {value}");
        }
        for (t, note) in &self.tally.notes {
            let _ = writeln!(s, "   at {t:.3} s: {note}");
        }
        s
    }

    /// The hardware counters' lines: one (the run-time-weighted means over the threads)
    /// or, when `verbose`, one a thread too; nothing when they were not read.
    fn counter_lines(&self, s: &mut String, verbose: bool) {
        let Some(source) = &self.host.hw_counters else {
            return;
        };
        let t = self.tally.thread_counters();
        let run: f64 = t.iter().map(|c| c.run_s).sum();
        let ipc_w: f64 = t.iter().map(|c| c.ipc * c.run_s).sum();
        let mpki_w: f64 = t.iter().map(|c| c.mpki * c.ipc * c.run_s).sum();
        if run <= 0.0 {
            let _ = writeln!(s, "   hardware counters ({source}): no thread counted");
            return;
        }
        let _ = writeln!(
            s,
            "   {:>12.2}    IPC, {:.2} MPKI over {} threads (hardware counters: {source}){}",
            ipc_w / run,
            if ipc_w > 0.0 { mpki_w / ipc_w } else { 0.0 },
            t.len(),
            if verbose { "" } else { "; -v: per thread" }
        );
        if verbose {
            let mut most: Vec<&ThreadCounters> = t.iter().collect();
            most.sort_by(|a, b| b.run_s.total_cmp(&a.run_s));
            for c in most.iter().take(COUNTER_LINES) {
                let _ = writeln!(
                    s,
                    "     thread {}/{}: IPC {:.2}, MPKI {:.2} ({:.3} s run)",
                    c.pid, c.tid, c.ipc, c.mpki, c.run_s
                );
            }
            if most.len() > COUNTER_LINES {
                let _ = writeln!(
                    s,
                    "     … {} more threads (every one in --json)",
                    most.len() - COUNTER_LINES
                );
            }
        }
    }

    /// What ran, where, for how long and how it ended.
    fn head(&self, s: &mut String, verbose: bool) {
        let u = &self.setup;
        let _ = writeln!(
            s,
            "\n threadbalance summary: policy {}{} at level {} ({} domains) on CPUs {}{}",
            u.policy,
            if u.policy_default { " (default)" } else { "" },
            u.level,
            u.domains,
            u.cpus,
            if u.dry_run { ", dry run" } else { "" }
        );
        let t = &self.tally;
        let processes = if t.processes_seen() == 1 {
            "process"
        } else {
            "processes"
        };
        if verbose {
            let _ = writeln!(s, "   {:>12.3} s  wall time ({})", self.wall_s, self.ended);
            let _ = writeln!(
                s,
                "   {:>12}    threads seen in {} {processes} (peak {} at once), {} ticks",
                t.threads_seen,
                t.processes_seen(),
                t.threads_peak,
                t.ticks
            );
        } else {
            // The process count stays in the short summary: `in 1 process` under
            // `run -- make` says nothing it started was seen.
            let _ = writeln!(
                s,
                "   {:>12.3} s  wall time ({}), {} threads in {} {processes}",
                self.wall_s,
                self.ended,
                t.threads_seen,
                t.processes_seen()
            );
        }
    }

    /// The moves, what was put back, and the short time slices.
    fn moves(&self, s: &mut String, verbose: bool) {
        let a = &self.tally.applied;
        if self.setup.dry_run {
            let _ = writeln!(
                s,
                "   {:>12}    moves decided, none applied (dry run)",
                self.tally.moves_decided
            );
        } else if verbose {
            let _ = writeln!(
                s,
                "   {:>12}    moves made ({} decided: {} unchanged, {} vanished, {} denied), {}",
                a.done,
                self.tally.moves_decided,
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
        let slices = &self.host.slices;
        if verbose && (slices.set > 0 || slices.skipped > 0) {
            let _ = writeln!(
                s,
                "   {:>12}    threads ran in short time slices while rotated, {} given their own back{}",
                slices.set,
                slices.restored,
                if slices.skipped > 0 {
                    format!(
                        "; {} not set (no CAP_SYS_NICE, a kernel before 6.12, not a fair-class thread of nice ≥ 0, or a slice its program set)",
                        slices.skipped
                    )
                } else {
                    String::new()
                }
            );
        }
    }

    /// The masks left as their program set them, or not restored, one line each.
    fn left(&self, s: &mut String) {
        let r = &self.host.restore;
        if r.program_chose > 0 || r.program_born_pinned > 0 || r.unrestored > 0 {
            let born = match r.program_born_pinned {
                0 => String::new(),
                n => format!(" ({n} pinned as they started)"),
            };
            let _ = writeln!(
                s,
                "   {:>12}    left as their program set them{born}, {} NOT restored",
                r.program_chose + r.program_born_pinned,
                r.unrestored
            );
            for line in &r.left {
                let _ = writeln!(s, "     {line}");
            }
        }
    }

    /// Each domain's mean utilization and the spread across them.
    fn utilization(&self, s: &mut String) {
        let level = self.setup.level;
        let per: Vec<String> = self
            .util
            .per_domain
            .iter()
            .enumerate()
            .map(|(i, u)| format!("{level}{i}={:.1}%", u * 100.0))
            .collect();
        let _ = writeln!(
            s,
            "   {:>11.1}%    mean {level} utilization  [{}]",
            self.util.mean * 100.0,
            per.join(" ")
        );
        let _ = writeln!(
            s,
            "   {:>12.3}    CV of {level} utilization: its spread across the {level}s (σ / mean; 0 = evenly loaded)",
            self.util.cv
        );
    }

    /// The ticks the cost budget pushed back, if any.
    fn pacing(&self, s: &mut String) {
        let b = &self.host.budget;
        if self.host.ticks_paced == 0 {
            return;
        }
        let _ = writeln!(
            s,
            "   {:>14}  ticks later than asked, to stay within {:.1} % of one core{}{}",
            self.host.ticks_paced,
            b.pct,
            if b.moves_charged {
                " (moves included)".to_string()
            } else {
                format!(
                    " watching, {:.0} % with the moves",
                    threadbalance_model::pace::WHOLE_BUDGET * 100.0
                )
            },
            if b.watch_max_pct > b.pct {
                format!(
                    " ({:.1} % while the policy asked for more)",
                    b.watch_max_pct
                )
            } else {
                String::new()
            }
        );
    }

    /// Lock time, when it was exact or the policy reads it, and the futex probe's figures.
    fn locks(&self, s: &mut String) {
        let probe = &self.host.lock_probe;
        if probe.exact || self.setup.policy.needs().lock_probe() {
            let _ = writeln!(s, "   lock time: {}", self.lock_time);
        }
        if !probe.exact {
            return;
        }
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

    /// The tool's own CPU time, and its share of one core when management lasted long
    /// enough for one to mean anything.
    fn own_cpu_line(&self) -> String {
        let share = match self.own_cpu.pct {
            Some(pct) => format!("{pct:.2} % of one core"),
            None => format!("no share of one core: under {MIN_WALL_FOR_PCT} s of management"),
        };
        format!(
            "   {:>12.3} s  threadbalance's own CPU time ({share})",
            self.own_cpu.seconds
        )
    }

    /// "restored 3 of 4 (1 already back)": how many of the masks changed were put back,
    /// and what became of the others.
    fn restored_text(&self) -> String {
        let r = &self.host.restore;
        let handed_back = self.host.handed_back;
        let mut text = format!(
            "restored {} of {}",
            r.restored + handed_back,
            r.total + handed_back
        );
        let kept = r.total.saturating_sub(r.restored + r.already + r.vanished);
        let others: Vec<String> = [
            (handed_back, "handed back during the run"),
            (r.already, "already back"),
            (r.vanished, "gone with their thread"),
            (kept, "left (below)"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
        if !others.is_empty() {
            let _ = write!(text, " ({})", others.join(", "));
        }
        if r.cpuset_narrowed > 0 {
            let _ = write!(
                text,
                "; {} found narrowed by their cpuset, ours all the same",
                r.cpuset_narrowed
            );
        }
        text
    }
}

/// The JSON object of a run's summary, field by field as the schema has it.
#[derive(Serialize)]
struct Json<'a> {
    schema_version: u32,
    policy: PolicyKind,
    policy_default: bool,
    level: Level,
    domains: usize,
    cpus: &'a str,
    dry_run: bool,
    wall_s: f64,
    threads_seen: u64,
    processes_seen: u64,
    threads_peak: usize,
    ticks: u64,
    moves_decided: u64,
    applied: &'a ApplyReport,
    restored: u64,
    restore_total: u64,
    restore_already: u64,
    restore_vanished: u64,
    handed_back: u64,
    unrestored: u64,
    program_chose: u64,
    program_born_pinned: u64,
    cpuset_narrowed: u64,
    left: &'a [String],
    slices_set: u64,
    slices_restored: u64,
    slices_skipped: u64,
    tool_cpu_s: f64,
    tool_cpu_pct: f64,
    tool_cpu_pct_known: bool,
    ticks_paced: u64,
    cpu_budget_pct: f64,
    moves_charged: bool,
    watch_budget_max_pct: f64,
    tick_cpu_us: f64,
    steady_ticks: u64,
    move_cpu_us: f64,
    domain_util: &'a [f64],
    domain_util_mean: f64,
    domain_util_cv: f64,
    run_time: String,
    choices: &'a str,
    lock_time: String,
    lock_probe: &'a threadbalance_linux::adapter::lockprobe::LockReport,
    policy_summary: &'a PolicySummary,
    notes: &'a [(f64, String)],
    ended: String,
    hw_counters: Option<&'a str>,
    thread_counters: Vec<ThreadCounters>,
}

/// The tool's CPU time per move made, µs: what carrying out the plans cost (`acting`,
/// slice changes in the same plans included) over the moves done; 0 when none was.
fn move_cpu_us(acting: Nanos, done: u32) -> f64 {
    if done == 0 {
        0.0
    } else {
        acting.0 as f64 / 1e3 / f64::from(done)
    }
}

impl<'a> From<&'a Summary> for Json<'a> {
    fn from(s: &'a Summary) -> Json<'a> {
        let (u, t, h, r) = (&s.setup, &s.tally, &s.host, &s.host.restore);
        let (steady_ticks, tick_cpu_us) = h
            .steady
            .map_or((0, 0.0), |(n, cpu)| (n, cpu.0 as f64 / 1e3 / n as f64));
        Json {
            schema_version: crate::schema::SCHEMA_VERSION,
            policy: u.policy,
            policy_default: u.policy_default,
            level: u.level,
            domains: u.domains,
            cpus: &u.cpus,
            dry_run: u.dry_run,
            wall_s: s.wall_s,
            threads_seen: t.threads_seen,
            processes_seen: t.processes_seen(),
            threads_peak: t.threads_peak,
            ticks: t.ticks,
            moves_decided: t.moves_decided,
            applied: &t.applied,
            restored: r.restored,
            restore_total: r.total,
            restore_already: r.already,
            restore_vanished: r.vanished,
            handed_back: h.handed_back,
            unrestored: r.unrestored,
            program_chose: r.program_chose,
            program_born_pinned: r.program_born_pinned,
            cpuset_narrowed: r.cpuset_narrowed,
            left: &r.left,
            slices_set: h.slices.set,
            slices_restored: h.slices.restored,
            slices_skipped: h.slices.skipped,
            tool_cpu_s: s.own_cpu.seconds,
            tool_cpu_pct: s.own_cpu.pct.unwrap_or(0.0),
            tool_cpu_pct_known: s.own_cpu.pct.is_some(),
            ticks_paced: h.ticks_paced,
            cpu_budget_pct: h.budget.pct,
            moves_charged: h.budget.moves_charged,
            watch_budget_max_pct: h.budget.watch_max_pct,
            tick_cpu_us,
            steady_ticks,
            move_cpu_us: move_cpu_us(h.acting, t.applied.done),
            domain_util: &s.util.per_domain,
            domain_util_mean: s.util.mean,
            domain_util_cv: s.util.cv,
            run_time: h.run_time.to_string(),
            choices: &h.choices,
            lock_time: s.lock_time.to_string(),
            lock_probe: &h.lock_probe,
            policy_summary: &s.policy,
            notes: &t.notes,
            ended: s.ended.to_string(),
            hw_counters: h.hw_counters.as_deref(),
            thread_counters: t.thread_counters(),
        }
    }
}

impl Serialize for Summary {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        Json::from(self).serialize(serializer)
    }
}
