//! `tumbler`: Tumbler (Pusukuri, Gupta, Bhuyan, TACO 2015). Keeps the mean CPU utilization
//! of the thread groups on each socket nearly equal, regrouping more often when thread
//! utilization varies more.
//!
//! ```text
//!  window ──► util of every managed thread (all processes together)
//!               │
//!               ├─► CV = σ/μ over threads ──► Table IV ──► next interval (or: no grouping)
//!               │
//!               └─► sort by demand (util + wait) ──► Algorithm 2 wave into K groups
//!                                         │            (K = domains at the level)
//!                   groups → domains so the fewest threads move (grouping::Assignment)
//!                                         │
//!                   hysteresis: adopted only if the load spread narrows by > the margin,
//!                   else the groups stay (new threads confined where they run)
//!                                         │
//!                   Move { to: Domain, why: Regroup } for threads whose domain changed
//!                   or that are placed for the first time (confined where they run);
//!                   Linux balances inside each domain (§3.3).
//! ```
//!
//! **Utilization.** The paper's utilization is the share of time a thread spent in user
//! and kernel mode over the interval, read through `/proc` (Solaris `prstat` microstate
//! accounting). Our `Window::util` is schedstat run time over the window: the same quantity
//! — time on a CPU, user and kernel — counted in nanoseconds by the scheduler rather than
//! in clock ticks, so it is the same measure taken more precisely.
//!
//! **Table IV** ([`VARIATION_INTERVAL`]) prints its rows as 0.40–0.36, 0.35–0.31,
//! 0.30–0.21, … and leaves the gaps between them (0.35–0.36, 0.30–0.31, 0.20–0.21,
//! 0.10–0.11) open. We read each row as its lower bound, inclusive, up to the next row's
//! lower bound, exclusive: `[0.31, 0.36) → 150 ms`, `[0.21, 0.31) → 200 ms`, … so a gap
//! belongs to the row below it, the longer interval. Below CV 0.05 the paper does no
//! grouping; we move nothing and look again after 800 ms, the table's longest interval —
//! the utilizations are as even as the table knows, and 800 ms still catches a phase
//! change within a second.
//!
//! **Balanced domains are left alone** (beyond the paper). Before regrouping, Tumbler
//! looks at the utilization of each domain as the threads sit now (each on its last CPU's
//! domain). When those already vary by a CV below [`BALANCED_DOMAINS_CV`] (the table's own
//! 0.05), a regroup could not balance them further and would only move threads away from
//! their caches and first-touched pages: it moves nothing and looks again at the table's
//! interval. Without this, a program whose threads' utilizations vary from interval to
//! interval around an even split (streamcluster's data-dependent phases) is reshuffled
//! every interval: in the simulator, streamcluster alone on the 4 × 16 Opteron ran 15 %
//! slower under Tumbler than under Linux, with 49 % of its memory work on remote pages
//! against 3 %; with the check it runs as under Linux.
//!
//! **Hysteresis: a regrouping must pay for itself** (beyond the paper's letter, after its
//! intent). Tumbler keeps the groups as they are when regrouping would not lower the load
//! imbalance by more than [`REGROUP_MARGIN`] of a CPU plus what the readings of the threads
//! it would move wander by:
//!
//! ```text
//!  demand(t)    = util + stolen + latency (≤ 1)   what t would use alone
//!  load(d)      = Σ demand of d's threads / CPUs of d
//!  imbalance    = max_d load(d) − min_d load(d)    (the spread of Tables II and III)
//!  jitter(t)    ← jitter(t) + ¼ (|demand(t) − its last reading| − jitter(t))
//!  regroup iff  imbalance(now) − imbalance(wave) > REGROUP_MARGIN + Σ jitter(moved) / CPUs
//!               (the jitter term only where the counters report late: `Window::waits_late`)
//!  else keep    the groups as they are; threads not placed yet are confined where they run
//! ```
//!
//! * *The measure.* §3 sets Tumbler's goal as Equation (2), the difference between the
//!   cumulative loads of the groups on every pair of sockets, and Tables II and III report
//!   it as the range of socket utilization (Tumbler: 23–26 %). The imbalance is that range,
//!   per CPU of a domain.
//! * *When to regroup.* §3.4: "in some programs, over many intervals, the CPU utilizations
//!   of threads may not change significantly. If this is the case, the thread groups formed
//!   will not change, and hence no threads will be migrated … when thread migrations are
//!   not expected to yield any benefit, they will not be performed." The paper relies on
//!   the sorted utilizations giving the same groups again; they do not when two threads'
//!   readings are within noise of each other (two busy threads swap places in the sort, and
//!   their light partners swap domains), so we judge the benefit directly: the new groups
//!   must lower the imbalance, by more than the readings can be wrong by.
//! * *The margin.* [`REGROUP_MARGIN`] is Table IV's own floor, 0.05: below it the paper
//!   finds a variation not worth a migration. Where the counters report late (`/proc`'s
//!   schedstat adds a queued thread's wait only when it runs again, and a running thread's
//!   run time only at ticks), we add the measurement's own noise: for each thread, how much
//!   its demand reading moves from one window to the next (a running mean of the changes,
//!   [`JITTER_WEIGHT`]), summed over the threads the new groups would move to another
//!   domain (the worst case: errors that add up), over the CPUs of the smallest domain: a
//!   moved thread's reading, off by its jitter, shifts the loads of the domain it leaves
//!   and the one it joins by that much. There a thread's readings jitter by a tenth or two
//!   of a 50 ms window, and a swap of two such threads must gain that much more. Exact
//!   counters (the BPF build, the simulator's default) have no such noise: what their
//!   readings change by is the threads' own doing, which regrouping is there to follow, so
//!   the margin stays 0.05 (in the simulator, counting their changes as noise held back
//!   regroupings that followed ferret's and radix's phases and cost them up to 1 %). A
//!   thread seen once has no jitter yet.
//! * *Demand, not share* (beyond the paper). The paper's utilization (§3.1) leaves out a
//!   thread's run-queue wait, its "thread latency"; on its machine, one thread per core,
//!   there was little of it, and the time a thread ran is what it would run alone. Where
//!   threads outnumber a domain's CPUs (two cores, four busy threads), the share a thread
//!   gets depends on whom it shares with: moved next to a light thread it gets more, next
//!   to a busy one less, so the next window's sort, and the groups, differ with the
//!   placement just made, and threads bounce every interval. A thread's run time plus its
//!   wait (plus time the hypervisor stole) is what it asked for wherever it sat, so the
//!   sort and the imbalance use that ([`demand`]). The CV that picks the interval (Table
//!   IV) stays on utilization, as the paper has it.
//!
//! Measured on a 2-core machine with two shell loops competing (one busy, one on and off),
//! `workload uneven` with duties 1, 1, 0.5, 0.25 under `run --level core --interval 50`
//! (about 130 regroupings in 8.5 s): 49 moves before, 5 after (the first placement),
//! reading the BPF counters; 59 before, 15 after reading `/proc`, where a busy thread's
//! wait, reported a window late and cut at 1, can read it a fifth low for a window, which
//! still lets a swap through now and then.
//!
//! **Threads.** Every thread in the window takes part, across processes (§3.4 "Multiple
//! Applications"), and any number of them, including more threads than cores (§3.2). A
//! thread that appeared takes part in the next regroup, with its utilization since it
//! started; a vanished thread is forgotten. The first window of a run has zero length, so
//! Tumbler waits [`FIRST_LOOK`] before its first grouping.
//!
//! ```
//! use threadbalance_model::{Level, Nanos, Topology};
//! use threadbalance_model::testutil::window;
//! use threadbalance_policy::{Policy, Settings, tumbler::Tumbler};
//! let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let mut p = Tumbler::new(&Settings::new(Level::Package));
//! // The two busy threads share package 0 (CPUs 0, 1), the idle ones package 1.
//! let plan = p.decide(&topo, &window(100, &[0.9, 0.8, 0.2, 0.1], &[0, 1, 2, 3]));
//! // Mean .5, σ ≈ .354, CV ≈ .71 ≥ .40: regroup, next look in 50 ms.
//! assert_eq!(plan.next_in, Nanos::from_millis(50));
//! // One busy thread swaps with one idle thread; the other two are confined where they run.
//! assert_eq!(plan.moves.len(), 4);
//! ```

use crate::grouping::{Placement, Regroup, Scheme};
use crate::{Policy, PolicyKind, Settings};
use threadbalance_model::{
    Level, Move, Nanos, Plan, PolicySummary, Reason, Target, ThreadKey, ThreadRates, Topology,
    TumblerSummary, Window, coefficient_of_variation,
};

/// Domains whose utilizations vary by less than this CV (σ/μ) are already balanced: Tumbler
/// does not regroup (the threshold of Table IV's last row, applied to the domains).
pub const BALANCED_DOMAINS_CV: f64 = 0.05;

/// A regrouping must lower the imbalance of the domains' loads (max − min, per CPU) by more
/// than this share of a CPU, plus the jitter of the threads it would move, or the groups
/// stay as they are: Table IV's floor, the variation the paper does not group for (see the
/// module docs).
pub const REGROUP_MARGIN: f64 = 0.05;

/// How much of a new change between two consecutive demand readings of a thread enters its
/// jitter (a running mean of those changes): a quarter, so the estimate follows about the
/// last four windows, long enough that one quiet window does not drop it.
pub const JITTER_WEIGHT: f64 = 0.25;

/// A thread's last demand reading and how much its readings move between windows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Reading {
    key: ThreadKey,
    last: f64,
    jitter: f64,
}

/// What a thread would use alone: its run time plus its run-queue wait and the time the
/// hypervisor stole while it ran, as a share of the window, at most 1. Where the thread
/// has a CPU to itself this is its utilization; where it shares one, it is what it asked
/// for rather than what it got there.
pub fn demand(t: &ThreadRates) -> f64 {
    (t.util + t.stolen + t.latency).min(1.0)
}

/// The domains' loads (the summed `value` of the threads in each, per CPU of the domain)
/// into `load`, given each thread's domain (`None`: left out); returns max − min.
fn imbalance(
    topo: &Topology,
    level: Level,
    value: &[f64],
    domain: impl Iterator<Item = Option<usize>>,
    load: &mut Vec<f64>,
) -> f64 {
    let domains = topo.domains(level);
    load.clear();
    load.resize(domains.len(), 0.0);
    for (v, d) in value.iter().zip(domain) {
        if let Some(l) = d.and_then(|d| load.get_mut(d)) {
            *l += v;
        }
    }
    for (l, d) in load.iter_mut().zip(domains) {
        *l /= d.cpus.len().max(1) as f64;
    }
    let max = load.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = load.iter().copied().fold(f64::INFINITY, f64::min);
    if load.is_empty() { 0.0 } else { max - min }
}

/// One row of Tumbler's variation-interval table (Table IV).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IntervalRow {
    /// The lowest coefficient of variation of thread utilization this row covers
    /// (inclusive); the row extends up to the previous row's `min_cv` (exclusive).
    pub min_cv: f64,
    /// The grouping interval; `None` means no grouping.
    pub interval: Option<Nanos>,
}

/// Tumbler's Table IV, highest CV first. Gaps between the printed rows are closed by
/// extending each row up to the next one's lower bound (see the module docs).
pub const VARIATION_INTERVAL: [IntervalRow; 7] = [
    row(0.40, Some(50)),  // ≥ 0.40
    row(0.36, Some(100)), // 0.40 – 0.36
    row(0.31, Some(150)), // 0.35 – 0.31, and 0.35 – 0.36
    row(0.21, Some(200)), // 0.30 – 0.21, and 0.30 – 0.31
    row(0.11, Some(400)), // 0.20 – 0.11, and 0.20 – 0.21
    row(0.05, Some(800)), // 0.10 – 0.05, and 0.10 – 0.11
    row(0.0, None),       // < 0.05: no grouping
];

const fn row(min_cv: f64, ms: Option<u64>) -> IntervalRow {
    IntervalRow {
        min_cv,
        interval: match ms {
            Some(ms) => Some(Nanos::from_millis(ms)),
            None => None,
        },
    }
}

/// When to look again after a CV below 0.05 (no grouping): the table's longest interval.
pub const NO_GROUPING_LOOK: Nanos = Nanos::from_millis(800);

/// When to look again after the zero-length first window, which has no rates.
pub const FIRST_LOOK: Nanos = Nanos::from_millis(100);

/// The grouping interval Table IV gives for `cv`; `None` below 0.05 (no grouping) and for
/// a CV that is not a number.
pub fn grouping_interval(cv: f64) -> Option<Nanos> {
    VARIATION_INTERVAL
        .iter()
        .find(|r| cv >= r.min_cv)
        .and_then(|r| r.interval)
}

/// What Tumbler did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TumblerStats {
    /// Decisions that grouped threads (CV ≥ 0.05), whether or not a thread moved.
    pub regroupings: u64,
    /// Threads moved to another domain or confined to theirs for the first time, over all
    /// regroupings.
    pub moves: u64,
    /// Decisions that did no grouping because the CV was below 0.05.
    pub skipped: u64,
    /// Decisions that did no grouping because the domains were already balanced
    /// ([`BALANCED_DOMAINS_CV`]).
    pub balanced: u64,
    /// The CV of thread utilization at the last decision with rates.
    pub last_cv: Option<f64>,
    /// The interval chosen at the last decision.
    pub last_interval: Option<Nanos>,
    /// Of the regroupings, those that kept the groups as they were because the new ones
    /// would not have lowered the imbalance by the margin ([`REGROUP_MARGIN`]); threads not
    /// placed before were still confined where they ran.
    pub kept: u64,
    /// The imbalance (max − min of the domains' loads per CPU, by [`demand`]) of the
    /// groups in force after the last regrouping.
    pub last_imbalance: Option<f64>,
}

/// The Tumbler policy. Keeps its buffers between decisions.
#[derive(Debug, Clone)]
pub struct Tumbler {
    /// The level set, `None` for the policy's own ([`PolicyKind::default_level`]).
    level: Option<Level>,
    fixed: Option<Nanos>,
    placement: Placement,
    /// The placement a regrouping proposes, adopted only if it beats the margin.
    proposal: Placement,
    regroup: Regroup,
    utils: Vec<f64>,
    demands: Vec<f64>,
    load: Vec<f64>,
    /// Each live thread's last demand and jitter, in key order (as the window's threads).
    readings: Vec<Reading>,
    fresh: Vec<Reading>,
    /// Whether the hysteresis applies: always, but for the tests that show the paper's rule.
    hysteresis: bool,
    stats: TumblerStats,
}

impl Tumbler {
    /// Tumbler at `settings.level`; `settings.interval`, when set, replaces Table IV's
    /// interval (the CV still decides whether to group).
    pub fn new(settings: &Settings) -> Tumbler {
        Tumbler {
            level: settings.level,
            fixed: settings.interval,
            placement: Placement::new(),
            proposal: Placement::new(),
            regroup: Regroup::new(),
            utils: Vec::new(),
            demands: Vec::new(),
            load: Vec::new(),
            readings: Vec::new(),
            fresh: Vec::new(),
            hysteresis: true,
            stats: TumblerStats::default(),
        }
    }

    /// The paper's rule alone, for the tests that show what the hysteresis prevents: groups
    /// by utilization, adopted at every regrouping.
    #[cfg(test)]
    fn paper_rule(settings: &Settings) -> Tumbler {
        Tumbler {
            hysteresis: false,
            ..Tumbler::new(settings)
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &TumblerStats {
        &self.stats
    }

    /// Takes this window's demands into each thread's reading and jitter ([`JITTER_WEIGHT`]);
    /// threads gone are forgotten. `self.demands` holds the window's demands.
    fn take_readings(&mut self, threads: &[ThreadRates]) {
        self.fresh.clear();
        let mut j = 0;
        for (t, &d) in threads.iter().zip(&self.demands) {
            while j < self.readings.len() && self.readings[j].key < t.key {
                j += 1;
            }
            let jitter = match self.readings.get(j).filter(|r| r.key == t.key) {
                Some(r) => r.jitter + JITTER_WEIGHT * ((d - r.last).abs() - r.jitter),
                None => 0.0,
            };
            self.fresh.push(Reading {
                key: t.key,
                last: d,
                jitter,
            });
        }
        std::mem::swap(&mut self.readings, &mut self.fresh);
    }
}

/// The moves of an adopted regrouping: each thread of `moved` to its new group.
fn regroup_moves(window: &Window, moved: &[(usize, usize)], level: Level, cv: f64) -> Vec<Move> {
    moved
        .iter()
        .map(|&(i, d)| Move {
            thread: window.threads[i].key,
            to: Target::Domain { level, index: d },
            why: Reason::Regroup {
                group: d,
                util: window.threads[i].util,
                cv,
            },
        })
        .collect()
}

/// How much a regrouping must lower the imbalance to be adopted: [`REGROUP_MARGIN`], plus,
/// where the counters report late, the jitter of the threads that would change domain
/// (their `readings`; `placement` is where they are) over the CPUs of the smallest domain.
/// Exact counters have no such noise: what their readings change by is the threads' own
/// doing, which regrouping is there to follow.
fn regroup_margin(
    placement: &Placement,
    readings: &[Reading],
    topo: &Topology,
    level: Level,
    window: &Window,
    moved: &[(usize, usize)],
) -> f64 {
    if !window.waits_late {
        return REGROUP_MARGIN;
    }
    let smallest = topo
        .domains(level)
        .iter()
        .map(|d| d.cpus.len())
        .min()
        .unwrap_or(1)
        .max(1);
    let jitter: f64 = moved
        .iter()
        .filter(|&&(i, d)| placement.current(&window.threads[i], topo, level) != Some(d))
        .map(|&(i, _)| readings.get(i).map_or(0.0, |r| r.jitter))
        .sum();
    REGROUP_MARGIN + jitter / smallest as f64
}

impl Tumbler {
    /// With the groups kept, the threads not placed yet confined to the domain they run
    /// in (and placed there).
    fn confine_new(
        &mut self,
        topo: &Topology,
        level: Level,
        window: &Window,
        cv: f64,
    ) -> Vec<Move> {
        let mut confined = Vec::new();
        for (i, t) in window.threads.iter().enumerate() {
            if self.placement.get(&t.key).is_none()
                && let Some(d) = topo.domain_of(t.last_cpu, level)
            {
                self.placement.set(t.key, d);
                confined.push((i, d));
            }
        }
        regroup_moves(window, &confined, level, cv)
    }
}

impl Policy for Tumbler {
    fn name(&self) -> &'static str {
        "tumbler"
    }

    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan {
        let level = self
            .level
            .unwrap_or_else(|| PolicyKind::Tumbler.default_level(topo));
        self.placement.retain_alive(&window.threads);
        if window.duration() == Nanos::ZERO || window.threads.is_empty() {
            return Plan::wait(self.fixed.unwrap_or(FIRST_LOOK));
        }
        self.utils.clear();
        self.utils.extend(window.threads.iter().map(|t| t.util));
        self.demands.clear();
        self.demands.extend(window.threads.iter().map(demand));
        self.take_readings(&window.threads);
        let cv = coefficient_of_variation(&self.utils);
        let table = grouping_interval(cv);
        let next_in = self.fixed.or(table).unwrap_or(NO_GROUPING_LOOK);
        self.stats.last_cv = Some(cv);
        self.stats.last_interval = Some(next_in);
        if table.is_none() {
            self.stats.skipped += 1;
            return Plan::wait(next_in);
        }
        if window.domain_load(topo, level).cv < BALANCED_DOMAINS_CV {
            self.stats.balanced += 1;
            return Plan::wait(next_in);
        }
        self.stats.regroupings += 1;
        let metric: &[f64] = if self.hysteresis {
            &self.demands
        } else {
            &self.utils
        };
        let now = imbalance(
            topo,
            level,
            metric,
            window
                .threads
                .iter()
                .map(|t| self.placement.current(t, topo, level)),
            &mut self.load,
        );
        self.proposal.clone_from(&self.placement);
        let moved = self.regroup.run(
            topo,
            level,
            &window.threads,
            metric,
            Scheme::Wave,
            &mut self.proposal,
        );
        let then = imbalance(
            topo,
            level,
            metric,
            window.threads.iter().map(|t| self.proposal.get(&t.key)),
            &mut self.load,
        );
        let margin = regroup_margin(&self.placement, &self.readings, topo, level, window, moved);
        let adopt = !self.hysteresis || now - then > margin;
        let moves: Vec<Move> = if adopt {
            std::mem::swap(&mut self.placement, &mut self.proposal);
            self.stats.last_imbalance = Some(then);
            regroup_moves(window, moved, level, cv)
        } else {
            // Keep the groups; confine the threads not placed yet where they run.
            self.stats.kept += 1;
            self.stats.last_imbalance = Some(now);
            self.confine_new(topo, level, window, cv)
        };
        self.stats.moves += moves.len() as u64;
        let note = (!moves.is_empty()).then(|| {
            if adopt {
                format!(
                    "CV {cv:.2}: regrouped {} threads into {} groups (imbalance {now:.2} → \
                     {then:.2}), moved {}, next in {next_in}",
                    window.threads.len(),
                    topo.domains(level).len(),
                    moves.len()
                )
            } else {
                format!(
                    "CV {cv:.2}: kept the groups (imbalance {now:.2}, regrouping would gain \
                     {:.2} ≤ {margin:.2}), confined {} new threads, next in {next_in}",
                    now - then,
                    moves.len()
                )
            }
        });
        Plan {
            slices: Vec::new(),
            moves,
            next_in,
            note,
        }
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Tumbler(TumblerSummary {
            regroupings: s.regroupings,
            moves: s.moves,
            last_cv: s.last_cv,
            last_interval_ms: s.last_interval.map(Nanos::as_millis_f64),
            skipped_low_cv: s.skipped,
            skipped_balanced: s.balanced,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{key, topo, window, window_of};
    use threadbalance_model::{Sample, Snapshot};

    fn ms(n: u64) -> Option<Nanos> {
        Some(Nanos::from_millis(n))
    }

    fn moved(plan: &Plan) -> Vec<(i32, usize)> {
        plan.moves
            .iter()
            .map(|m| match m.to {
                Target::Domain { index, .. } => (m.thread.tid.0, index),
                other => panic!("unexpected target {other:?}"),
            })
            .collect()
    }

    /// The moves that take a thread to another package than its last CPU's in `w`; the
    /// others confine a thread placed for the first time where it already runs.
    fn crossing(plan: &Plan, t: &Topology, w: &Window) -> Vec<(i32, usize)> {
        let home = |k: &threadbalance_model::ThreadKey| {
            w.thread(k)
                .and_then(|r| t.domain_of(r.last_cpu, Level::Package))
        };
        plan.moves
            .iter()
            .filter_map(|m| match m.to {
                Target::Domain { index, .. } => {
                    (home(&m.thread) != Some(index)).then_some((m.thread.tid.0, index))
                }
                other => panic!("unexpected target {other:?}"),
            })
            .collect()
    }

    #[test]
    fn grouping_interval_each_row_of_table_iv_at_its_boundaries() {
        let cases = [
            (0.90, ms(50)),
            (0.40, ms(50)),    // ≥ 0.40
            (0.3999, ms(100)), // 0.40 – 0.36
            (0.36, ms(100)),
            (0.355, ms(150)), // the 0.35–0.36 gap joins the row below
            (0.35, ms(150)),  // 0.35 – 0.31
            (0.31, ms(150)),
            (0.305, ms(200)), // the 0.30–0.31 gap
            (0.30, ms(200)),  // 0.30 – 0.21
            (0.21, ms(200)),
            (0.20, ms(400)), // 0.20 – 0.11
            (0.11, ms(400)),
            (0.10, ms(800)), // 0.10 – 0.05
            (0.05, ms(800)),
            (0.0499, None), // < 0.05: no grouping
            (0.0, None),
            (f64::NAN, None),
        ];
        for (cv, want) in cases {
            assert_eq!(grouping_interval(cv), want, "CV {cv}");
        }
    }

    #[test]
    fn tumbler_first_window_waits_without_moves() {
        let t = topo(4, 1, 4, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let mut w = Window::default();
        let mut snap = Snapshot::default();
        snap.threads.push(Sample {
            key: key(1, 1),
            ..Sample::default()
        });
        w.first(&snap);
        let plan = p.decide(&t, &w);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, FIRST_LOOK);
        assert_eq!(p.stats().regroupings, 0);
    }

    #[test]
    fn tumbler_16_threads_on_4_packages_wave_and_fewest_moves() {
        // 4 packages × 4 CPUs. Sixteen threads (tid 100..115) with the utilizations of the
        // grouping example, listed so that Linux left them sorted by package:
        // package 0 has the four lightest, package 3 the four heaviest.
        let t = topo(4, 1, 4, 1);
        let util = [
            0.05, 0.10, 0.12, 0.20, 0.25, 0.30, 0.41, 0.45, 0.50, 0.58, 0.62, 0.70, 0.78, 0.85,
            0.90, 0.99,
        ];
        let cpus: Vec<u32> = (0..16).collect();
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w = window(100, &util, &cpus);
        let plan = p.decide(&t, &w);
        // Mean .4875; CV ≈ .62 ≥ .40 → 50 ms.
        assert_eq!(plan.next_in, Nanos::from_millis(50));
        // Wave groups (by position in sorted order): g0 = {0, 7, 8, 15}, g1 = {1, 6, 9, 14},
        // g2 = {2, 5, 10, 13}, g3 = {3, 4, 11, 12}. Each group has exactly one thread in
        // each package, so every matching keeps 4 of 16 in place; ties go to g → package g.
        // Thread i moves unless its package (i / 4) is its group.
        let want: Vec<(i32, usize)> = [
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 3),
            (5, 2),
            (7, 0),
            (8, 0),
            (9, 1),
            (11, 3),
            (13, 2),
            (14, 1),
            (15, 0),
        ]
        .iter()
        .map(|&(i, d)| (100 + i, d))
        .collect();
        assert_eq!(crossing(&plan, &t, &w), want);
        // Threads 0, 6, 10, 12 (the diagonal: group g in package g) stay in their package,
        // confined there: 12 moves between packages, 16 in all.
        assert_eq!(plan.moves.len(), 16);
        assert!(matches!(
            plan.moves[1].why,
            Reason::Regroup { group: 1, util, .. } if (util - 0.10).abs() < 1e-9
        ));
        // The same rates again, with threads now where they were sent: nothing moves.
        let plan = p.decide(&t, &window(50, &util, &cpus));
        assert!(plan.moves.is_empty());
        assert_eq!(p.stats().regroupings, 2);
        assert_eq!(p.stats().moves, 16);
    }

    #[test]
    fn tumbler_fewest_moves_when_groups_are_renumbered() {
        // 2 packages × 2 CPUs; busy threads .9 and .1 on package 1, .7 and .2 on package 0
        // (.50 against .45: CV ≈ .053, not yet balanced). Sorted .1 .2 .7 .9: the wave
        // gives g0 = {.1, .9}, g1 = {.2, .7} — exactly the threads already together, but g0
        // is on package 1. Group i → package i would move all four; ours moves none to
        // another package and confines each where it runs.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w = window(100, &[0.9, 0.7, 0.2, 0.1], &[2, 0, 1, 3]);
        let plan = p.decide(&t, &w);
        assert!(crossing(&plan, &t, &w).is_empty());
        assert_eq!(moved(&plan), [(100, 1), (101, 0), (102, 0), (103, 1)]);
        assert_eq!(p.stats().regroupings, 1);
    }

    #[test]
    fn tumbler_threads_appear_and_vanish_between_windows() {
        // 2 packages × 2 CPUs.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w1 = window_of(
            100,
            &[
                (key(1, 1), 0.9, 0),
                (key(1, 2), 0.8, 1),
                (key(1, 3), 0.1, 2),
                (key(1, 4), 0.1, 3),
            ],
        );
        // Sorted .1(3) .1(4) .8(2) .9(1) → g0 = {3, 1}, g1 = {4, 2}; package 0 holds 1, 2
        // and package 1 holds 3, 4: every matching keeps 2, g0 → 0: tid 3 → 0, tid 2 → 1.
        let plan = p.decide(&t, &w1);
        assert_eq!(crossing(&plan, &t, &w1), [(2, 1), (3, 0)]);
        // Threads 1 and 4 stay where they run, confined there.
        assert_eq!(moved(&plan), [(1, 0), (2, 1), (3, 0), (4, 1)]);
        // Thread 4 exits; thread 5 (busy) starts on CPU 3, in package 1.
        let mut w2 = window_of(
            100,
            &[
                (key(1, 1), 0.9, 0),
                (key(1, 2), 0.8, 2),
                (key(1, 3), 0.1, 1),
                (key(1, 5), 0.9, 3),
            ],
        );
        w2.vanished.push(key(1, 4));
        // Sorted .1(3) .8(2) .9(1) .9(5) → g0 = {3, 5}, g1 = {2, 1}. Current: 1 → 0, 3 → 0
        // (assigned), 2 → 1 (assigned), 5 → 1 (its CPU). g0 → 0, g1 → 1 keeps 1 + 1;
        // g0 → 1, g1 → 0 keeps 1 + 1 too: a tie, so identity: thread 1 (in 0) would move
        // to 1 and thread 5 (new, in 1) to 0. That swaps two threads of .9: package 0 would
        // hold .1 + .9 and package 1 .8 + .9 as now, imbalance .35 → .35, no gain. The
        // groups stay, and thread 5, new, is confined where it runs.
        let plan = p.decide(&t, &w2);
        assert_eq!(moved(&plan), [(5, 1)]);
        assert_eq!((p.stats().regroupings, p.stats().kept), (2, 1));
        let imbalance = p.stats().last_imbalance.unwrap();
        assert!((imbalance - 0.35).abs() < 1e-9, "{imbalance}");
        // Thread 4 is forgotten: only the four live threads are placed.
        assert_eq!(p.placement.len(), 4);
        assert_eq!(p.placement.get(&key(1, 4)), None);
    }

    #[test]
    fn tumbler_groups_threads_of_several_processes_together() {
        // Process 1 has two busy threads, process 2 two idle ones, all on package 0 of 2.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w = window_of(
            100,
            &[
                (key(1, 1), 0.9, 0),
                (key(1, 2), 0.9, 1),
                (key(2, 1), 0.1, 0),
                (key(2, 2), 0.1, 1),
            ],
        );
        // Sorted .1(2.1) .1(2.2) .9(1.1) .9(1.2) → g0 = {2.1, 1.2}, g1 = {2.2, 1.1}. All on
        // package 0, so each group keeps at most 2 there: g0 → 0 (tie → identity), g1 → 1.
        // The two that stay in package 0 are confined there.
        let plan = p.decide(&t, &w);
        let got: Vec<(i32, i32, usize)> = plan
            .moves
            .iter()
            .map(|m| match m.to {
                Target::Domain { index, .. } => (m.thread.pid.0, m.thread.tid.0, index),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, [(1, 1, 1), (1, 2, 0), (2, 1, 0), (2, 2, 1)]);
    }

    #[test]
    fn tumbler_more_threads_than_cores_groups_differ_by_one() {
        // 17 threads on 2 packages × 2 CPUs (4 cores): groups of 9 and 8.
        let t = topo(2, 1, 2, 1);
        let utils: Vec<f64> = (0..17).map(|i| 0.05 + 0.05 * i as f64).collect();
        let cpus = vec![0; 17];
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w = window(100, &utils, &cpus);
        let plan = p.decide(&t, &w);
        // All start in package 0; 8 move to package 1, 9 stay (confined there).
        assert_eq!(crossing(&plan, &t, &w).len(), 8);
        assert_eq!(plan.moves.len(), 17);
        let mut counts = [0; 2];
        p.placement.count_per_domain(&mut counts);
        assert_eq!(counts, [9, 8]);
    }

    #[test]
    fn tumbler_even_utilization_skips_grouping() {
        // .50 .52 .48 .50: mean .50, σ ≈ .0141, CV ≈ .028 < .05.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &window(100, &[0.50, 0.52, 0.48, 0.50], &[0, 0, 0, 0]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, NO_GROUPING_LOOK);
        assert_eq!(p.stats().skipped, 1);
        assert_eq!(p.stats().regroupings, 0);
        let summary = p.summary().lines();
        assert_eq!(summary[4], ("skipped (CV < 0.05)".into(), "1".into()));
        assert_eq!(
            summary[2],
            (
                "last CV of thread utilization (σ / mean)".into(),
                "0.028".into()
            )
        );
        assert_eq!(summary[3], ("last interval".into(), "800.000ms".into()));
    }

    #[test]
    fn tumbler_leaves_balanced_domains_alone() {
        // Utilizations vary (CV ≈ .27 ≥ .05) but each package already holds .9 + .5:
        // nothing to balance, nothing moves; the table's interval still applies.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &window(100, &[0.9, 0.5, 0.9, 0.5], &[0, 1, 2, 3]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(200));
        assert_eq!((p.stats().balanced, p.stats().regroupings), (1, 0));
        // The same threads bunched by utilization (.9 + .9 against .5 + .5): regroup, one
        // busy thread swapping with one idle one (the other two are confined in place).
        let w = window(100, &[0.9, 0.9, 0.5, 0.5], &[0, 1, 2, 3]);
        let plan = p.decide(&t, &w);
        assert_eq!(crossing(&plan, &t, &w).len(), 2);
        assert_eq!(plan.moves.len(), 4);
        assert_eq!(p.stats().regroupings, 1);
    }

    /// Two cores (level core). Threads 100 and 101 are busy (demand 1), 102 runs half the
    /// time and 103 a quarter; on core 0 a busy thread of another program runs too, not
    /// managed. Each core shares its time max–min fairly (the kernel's fair share: a thread
    /// asking less than an equal share gets what it asks, the rest split the remainder
    /// evenly), and a thread waits on the run queue for what it asked and did not get. So
    /// a thread's utilization depends on where it sits; its demand does not.
    fn shared_cores(cpu: &[u32; 4]) -> Window {
        const DEMAND: [f64; 4] = [1.0, 1.0, 0.5, 0.25];
        const OTHER_ON_CORE_0: f64 = 1.0;
        let mut got = [0.0; 4];
        for core in 0..2 {
            let mut asks: Vec<(f64, Option<usize>)> = (0..4)
                .filter(|&i| cpu[i] == core)
                .map(|i| (DEMAND[i], Some(i)))
                .collect();
            if core == 0 {
                asks.push((OTHER_ON_CORE_0, None));
            }
            asks.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (mut left, mut n) = (1.0, asks.len());
            for (ask, i) in asks {
                let share = ask.min(left / n as f64);
                left -= share;
                n -= 1;
                if let Some(i) = i {
                    got[i] = share;
                }
            }
        }
        let threads: Vec<_> = (0..4)
            .map(|i| (key(1, 100 + i as i32), got[i], cpu[i]))
            .collect();
        let mut w = window_of(100, &threads);
        for (t, (d, u)) in w.threads.iter_mut().zip(DEMAND.iter().zip(got)) {
            t.latency = d - u;
        }
        w
    }

    /// Runs `p` for `ticks` windows of [`shared_cores`], starting from `cpu` and applying
    /// each plan's moves; returns, per tick, the threads moved and where everyone sat.
    fn bounce(p: &mut Tumbler, mut cpu: [u32; 4], ticks: usize) -> Vec<(usize, [u32; 4])> {
        let t = topo(1, 1, 2, 1);
        (0..ticks)
            .map(|_| {
                let plan = p.decide(&t, &shared_cores(&cpu));
                let mut changed = 0;
                for (tid, d) in moved(&plan) {
                    let i = (tid - 100) as usize;
                    changed += usize::from(cpu[i] != d as u32);
                    cpu[i] = d as u32;
                }
                (changed, cpu)
            })
            .collect()
    }

    #[test]
    fn tumbler_on_shared_cores_bounces_by_utilization_and_settles_with_hysteresis() {
        let s = Settings::new(Level::Core);
        // Start: the busy threads together on core 1, the light ones on core 0 with the
        // other program's thread (.25 and .375 there, .5 and .5 on core 1).
        let start = [1, 1, 0, 0];
        // The paper's rule: sort by utilization, adopt the wave's groups at every interval.
        // Sorted .25(103) .375(102) .5(100) .5(101) → {103, 101}, {102, 100}: 101 and 102
        // swap. Now 101 gets .375 beside the other program and 100 gets .5 beside 102: sorted
        // .25(103) .375(101) .5(100) .5(102) → {103, 102}, {101, 100}: they swap back, the
        // busy threads together again. Every interval moves two threads, and every other
        // one puts the busy threads on one core.
        let mut paper = Tumbler::paper_rule(&s);
        let ticks = bounce(&mut paper, start, 12);
        assert!(ticks.iter().all(|&(n, _)| n == 2), "{ticks:?}");
        assert_eq!(ticks.iter().filter(|(_, c)| c[0] == c[1]).count(), 6);
        // With the hysteresis, by demand: 1, 1, .5, .25 wherever the threads sit. Sorted
        // .25(103) .5(102) 1(100) 1(101) → {103, 101}, {102, 100}; loads per core .75 | 2
        // (imbalance 1.25) become 1.25 | 1.5 (.25): a gain of 1 > .05, regroup once, 101 and
        // 102 swapping. The same demands give the same groups again: nothing moves after.
        let mut p = Tumbler::new(&s);
        let ticks = bounce(&mut p, start, 12);
        assert_eq!(ticks[0], (2, [1, 0, 1, 0]), "{ticks:?}");
        assert!(
            ticks[1..].iter().all(|t| *t == (0, [1, 0, 1, 0])),
            "{ticks:?}"
        );
        assert_eq!((p.stats().regroupings, p.stats().kept), (12, 11));
        let imbalance = p.stats().last_imbalance.unwrap();
        assert!((imbalance - 0.25).abs() < 1e-9, "{imbalance}");
        // From the busy threads on core 0 with the other program (a third each; .5 and .25
        // on core 1), the paper's sort gives the groups as they are and nothing moves: the
        // busy threads stay together. By demand they are split at once, and stay so.
        let start = [0, 0, 1, 1];
        let ticks = bounce(&mut Tumbler::paper_rule(&s), start, 6);
        assert!(ticks.iter().all(|t| *t == (0, start)), "{ticks:?}");
        let ticks = bounce(&mut Tumbler::new(&s), start, 6);
        assert_eq!(ticks[0], (2, [0, 1, 1, 0]), "{ticks:?}");
        assert!(
            ticks[1..].iter().all(|t| *t == (0, [0, 1, 1, 0])),
            "{ticks:?}"
        );
    }

    #[test]
    fn tumbler_keeps_groups_unless_the_gain_beats_the_margin() {
        // 2 packages × 2 CPUs: 100 (.9) and 101 (.6) on package 0, 102 (.5) and 103 (.2) on
        // package 1. Loads .75 | .35: imbalance .40. Sorted .2 .5 .6 .9 → g0 = {103, 100},
        // g1 = {102, 101}; every matching keeps two, so g0 → 0: .55 | .55, a gain of .40 >
        // .05: regroup, 101 and 103 trading packages.
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        let w = window(100, &[0.9, 0.6, 0.5, 0.2], &[0, 1, 2, 3]);
        let plan = p.decide(&t, &w);
        assert_eq!(crossing(&plan, &t, &w), [(101, 1), (103, 0)]);
        assert_eq!(p.stats().kept, 0);
        // Package 0 holds 100 and 103 (CPUs 0, 1), package 1 101 and 102 (CPUs 2, 3). The
        // readings drift: 100 .8, 101 .82, 102 .5, 103 .2: loads .5 | .66, imbalance .16.
        // Now 101 sorts above 100: g0 = {103, 101}, g1 = {102, 100}, .51 | .65, imbalance
        // .14. The paper's rule swaps 100 and 101 for a gain of .02; it is not > .05: kept.
        let cpus = [0, 2, 3, 1];
        let readings = [0.8, 0.82, 0.5, 0.2];
        assert!(
            p.decide(&t, &window(100, &readings, &cpus))
                .moves
                .is_empty()
        );
        assert_eq!(p.stats().kept, 1);
        let mut paper = Tumbler::paper_rule(&Settings::new(Level::Package));
        paper.decide(&t, &window(100, &[0.9, 0.6, 0.5, 0.2], &[0, 1, 2, 3]));
        let plan = paper.decide(&t, &window(100, &readings, &cpus));
        assert_eq!(moved(&plan), [(100, 1), (101, 0)]);
    }

    #[test]
    fn tumbler_margin_grows_with_the_jitter_of_the_threads_it_would_move() {
        // 2 cores: 100 and 103 on core 0, 101 and 102 on core 1, counters that report late
        // (`/proc`). Four windows in which the cores are balanced (1 | 1: nothing to do) and
        // the threads read steadily, or with 100 and 103 trading .2 at every window as
        // `/proc`'s late waits make them do.
        let t = topo(1, 1, 2, 1);
        let cpus = [0, 1, 1, 0];
        let steady = [[0.6, 0.5, 0.5, 0.4]; 4];
        let jittery = [
            [0.6, 0.5, 0.5, 0.4],
            [0.4, 0.5, 0.5, 0.6],
            [0.6, 0.5, 0.5, 0.4],
            [0.4, 0.5, 0.5, 0.6],
        ];
        // Then .7 .6 .4 .45: loads 1.15 | 1 (imbalance .15). Sorted .4(102) .45(103) .6(101)
        // .7(100) → {102, 100}, {103, 101}: 102 and 103 trade cores, 1.1 | 1.05 (.05), a
        // gain of .10.
        let last = [0.7, 0.6, 0.4, 0.45];
        let run = |history: &[[f64; 4]; 4], late: bool| {
            let read = |utils: &[f64]| Window {
                waits_late: late,
                ..window(100, utils, &cpus)
            };
            let mut p = Tumbler::new(&Settings::new(Level::Core));
            for h in history {
                assert!(p.decide(&t, &read(h)).moves.is_empty());
            }
            assert_eq!(p.stats().balanced, 4);
            let plan = p.decide(&t, &read(&last));
            (moved(&plan), p.stats().kept)
        };
        let regrouped = vec![(100, 0), (101, 1), (102, 0), (103, 1)];
        let kept = vec![(100, 0), (101, 1), (102, 1), (103, 0)];
        // Steady: 102's jitter is ¼ · .1 (.5 → .4), 103's ¼ · .05 (.4 → .45): the margin is
        // .05 + .0375 = .0875 < .10: regroup (100 and 101 are confined where they run).
        assert_eq!(run(&steady, true), (regrouped.clone(), 0));
        // Jittery: 103's jitter is .05, .0875, .1156 after the changes of .2, then .1242
        // after .6 → .45; 102's .025: the margin is .05 + .149 ≈ .20 > .10: the groups stay,
        // each thread confined where it runs.
        assert_eq!(run(&jittery, true), (kept, 1));
        // Exact counters: what the readings change by is the threads' own doing, not noise;
        // the margin stays .05 and the same gain regroups.
        assert_eq!(run(&jittery, false), (regrouped, 0));
    }

    #[test]
    fn tumbler_fixed_interval_overrides_table() {
        let t = topo(2, 1, 2, 1);
        let mut s = Settings::new(Level::Package);
        s.interval = ms(250);
        let mut p = Tumbler::new(&s);
        // CV ≈ .71 would give 50 ms; the setting wins.
        let w = window(100, &[0.9, 0.8, 0.2, 0.1], &[0, 1, 2, 3]);
        let plan = p.decide(&t, &w);
        assert_eq!(plan.next_in, Nanos::from_millis(250));
        assert_eq!(crossing(&plan, &t, &w).len(), 2);
    }

    #[test]
    fn tumbler_summary_reports_in_stable_order() {
        let t = topo(2, 1, 2, 1);
        let mut p = Tumbler::new(&Settings::new(Level::Package));
        p.decide(&t, &window(100, &[0.9, 0.8, 0.2, 0.1], &[0, 1, 2, 3]));
        let names: Vec<String> = p.summary().lines().into_iter().map(|(k, _)| k).collect();
        assert_eq!(
            names,
            [
                "regroupings",
                "moves",
                "last CV of thread utilization (σ / mean)",
                "last interval",
                "skipped (CV < 0.05)",
                "skipped (domains balanced)"
            ]
        );
    }

    #[test]
    fn tumbler_registry_builds_and_rejects_zero_interval() {
        let t = topo(2, 1, 2, 1);
        let mut s = Settings::new(Level::Package);
        assert_eq!(
            crate::build("tumbler", &s, &t).map(|p| p.name()),
            Ok("tumbler")
        );
        s.interval = Some(Nanos::ZERO);
        for name in ["tumbler", "psets", "pbind", "shuffling"] {
            assert!(
                matches!(
                    crate::build(name, &s, &t),
                    Err(crate::PolicyError::Invalid { .. })
                ),
                "{name}"
            );
        }
    }
}
