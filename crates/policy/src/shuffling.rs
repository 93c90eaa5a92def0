//! `shuffling`: Shuffling (Pusukuri, Gupta, Bhuyan, PACT 2014). Threads that wait for
//! locks about as long as each other are put on the same socket, so a contended lock and
//! the data it protects stay in one socket's cache instead of crossing between sockets.
//!
//! ```text
//!   200 ms       200 ms      100 ms
//!  ├─sample────┼─sample────┼─sample─┤  lock time accumulated per thread since the last shuffle
//!                                   │
//!                                   ▼  every 500 ms (Figure 5)
//!              mean lock time of each process's threads > threshold (5 %)?
//!                   no ──► nothing moves          yes ──► sort all threads by lock time,
//!                                                         K consecutive groups of equal size,
//!                                                         groups → domains with fewest moves,
//!                                                         Move { why: Shuffle } for threads
//!                                                         whose domain changed (or that
//!                                                         are placed for the first time)
//! ```
//!
//! **Sampling and shuffling intervals** (§3.2): lock times are sampled every 200 ms and
//! threads are shuffled every 500 ms. Each decision asks for the next window after the
//! sampling interval, or sooner if the shuffle is due sooner (200, 200, 100 ms), and adds
//! the window's lock time to each thread's total. When 500 ms have accumulated the
//! decision is taken on the lock time accumulated since the last shuffle, and the totals
//! start again. A shuffle is due once less than a tenth of a sampling interval remains, so
//! a host that wakes slightly early does not ask for a sliver of a window.
//!
//! **Threshold.** The paper shuffles when "lock times exceed a preset threshold" (5 % of
//! elapsed time), a property of the program. We take, for each process, the mean over its
//! threads of each thread's lock time as a fraction of the time it was observed, and
//! shuffle when any process's mean exceeds the threshold (strictly). All managed threads,
//! of every process, are then grouped together, as Tumbler does with several programs.
//!
//! **Lock time** is exact when a probe measures futex waits (`ThreadRates::lock_exact`);
//! otherwise the window estimates it as the thread's blocked time (neither running nor
//! runnable), which also counts sleeps on I/O, condition variables and barriers, so it
//! overstates lock time and crosses the threshold sooner. The summary says which.
//!
//! **Idle threads without a probe.** With estimated lock time, a thread that ran less than
//! [`IDLE_METRIC`] (1 %) of the time since the last check — a main thread asleep in
//! `pthread_join`, an idle pool thread — is left out of its process's mean, as Tumbler's
//! wave leaves such threads out of its dealing: its blocked time says nothing about locks,
//! and counted as lock time it would add 1/(N + 1) to the mean of N workers, crossing 5 %
//! for any program with fewer than 20 of them. So is a thread that ran under 1 % in any
//! window of the check (a main thread that spawned the workers early in a check and then
//! joined them). It is still grouped. With a probe, a thread
//! that hardly ran counts only if it was measured waiting for locks at least 1 % of the
//! time (a thread queued on a contended mutex all along is the signal; one asleep in
//! `join`, whose wait is no lock wait, would only dilute the mean).
//!
//! **Estimates over a check.** `/proc/<tid>/schedstat` adds a thread's run-queue wait
//! only when it gets a CPU, and its run time only at the next scheduler event: a thread
//! waiting in a run queue when a window closes shows that wait as neither run nor wait,
//! so as blocked, and the next window shows it as extra wait, blocked below zero, which
//! the window clamps to 0. On an overloaded host, summing clamped windows turned a
//! control with under 1 % of real lock waiting into 5–7 %. Shuffling therefore sums the
//! estimate `blocked − late` over the windows of a check (`1 − util − latency` unclamped,
//! less the wait or run time reported beyond the window's length, which `latency` and
//! `util` leave out; `ThreadRates::late`) and clamps the total, so a wait counted late
//! cancels out within the check. The last window of a
//! check has no next window in it: if the thread was running or runnable (`R`) as that
//! window closed, its estimate there is deferred to the next check, where the late wait
//! cancels it (a thread that was runnable was not blocked then; whatever it did block
//! earlier in that window still counts, one check later).
//!
//! **Stolen time.** On a VM the run time also leaves out what the hypervisor took while
//! the thread ran, which is no run-queue wait either: it too would read as blocked. A
//! thread that spins 100 % on a host stealing a tenth of its CPUs' busy time reads 90 %
//! run time, so 10 % "lock time", twice the threshold (a test's cold-lock control on a
//! busy host read 10.2 % and shuffled once). Shuffling therefore asks the host for the
//! machine's stolen time ([`crate::Needs::steal`]) and takes the window's
//! [`ThreadRates::stolen`](threadbalance_model::ThreadRates::stolen) out of the estimate:
//! `1 − util − stolen − latency`.
//!
//! A thread that appeared during a window is observed from its next window (its share of
//! the window it started in is unknown); until then it counts as lock time 0 and is left
//! out of its process's mean. Vanished threads are forgotten.
//!
//! ```
//! use threadbalance_model::{Level, Nanos, Topology};
//! use threadbalance_model::testutil::window;
//! use threadbalance_policy::{Policy, Settings, shuffling::Shuffling};
//! let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let mut p = Shuffling::new(&Settings::new(Level::Package));
//! // Threads that run 90 % of the time are estimated to block 10 %: above 5 %.
//! let w = window(200, &[0.9, 0.9, 0.9, 0.9], &[0, 1, 2, 3]);
//! assert_eq!(p.decide(&topo, &w).next_in, Nanos::from_millis(200));
//! assert_eq!(p.decide(&topo, &w).next_in, Nanos::from_millis(100)); // 400 of 500 ms
//! p.decide(&topo, &window(100, &[0.9, 0.9, 0.9, 0.9], &[0, 1, 2, 3]));
//! assert_eq!(p.stats().shuffles, 1);
//! ```

use crate::grouping::{IDLE_METRIC, Placement, Regroup, Scheme};
use crate::{Needs, Policy, PolicyKind, Settings};

/// What shuffling reads: lock time (exact from a lock probe, or estimated from blocked
/// time), and the machine's stolen time, which would otherwise read as blocked.
pub const NEEDS: Needs = Needs {
    lock_time: true,
    steal: true,
    ..Needs::NOTHING
};
use threadbalance_model::{
    Level, LockTimeSource, Move, Nanos, Plan, PolicySummary, Reason, ShufflingSummary, Target,
    ThreadKey, ThreadState, Topology, Window,
};

/// Lock time of one thread accumulated since the last shuffle.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LockTotal {
    key: ThreadKey,
    /// Nanoseconds spent waiting for locks (exact or estimated).
    lock_ns: f64,
    /// Nanoseconds the thread was observed.
    seen_ns: f64,
    /// Nanoseconds it ran on a CPU while observed.
    run_ns: f64,
    /// Whether every window of the total measured its lock time (a probe).
    exact: bool,
    /// Whether it hardly ran (under [`IDLE_METRIC`]) in some window of the total.
    idle_window: bool,
    /// The estimate of the last window, when the thread was running or runnable as it
    /// closed (see "Estimates over a check"); 0 otherwise.
    deferred_ns: f64,
}

/// Where lock times come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LockSource {
    /// No window with rates yet.
    #[default]
    NotSampled,
    /// Every thread's lock time was measured by a probe.
    Measured,
    /// Some thread's lock time was estimated from its blocked time (sticky once seen).
    Estimated,
}

impl LockSource {
    /// How the summary words it.
    pub fn describe(self) -> &'static str {
        match self {
            LockSource::NotSampled => "not sampled",
            LockSource::Measured => "measured",
            LockSource::Estimated => "estimated from blocked time (no exact probe)",
        }
    }
}

/// What Shuffling did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShufflingStats {
    /// Times a shuffle interval elapsed and lock times were checked.
    pub checks: u64,
    /// Checks that found a process above the threshold and regrouped.
    pub shuffles: u64,
    /// Checks that found every process at or below the threshold.
    pub below_threshold: u64,
    /// Threads moved to another domain, over all shuffles.
    pub moves: u64,
    /// The highest per-process mean lock time (fraction of time) at the last check.
    pub last_lock: Option<f64>,
    /// Where lock times came from.
    pub lock_source: LockSource,
}

/// The Shuffling policy. Keeps its buffers between decisions.
#[derive(Debug, Clone)]
pub struct Shuffling {
    /// The level set, `None` for the policy's own ([`PolicyKind::default_level`]).
    level: Option<Level>,
    threshold: f64,
    sample: Nanos,
    shuffle: Nanos,
    totals: Vec<LockTotal>,
    next_totals: Vec<LockTotal>,
    since: Nanos,
    metric: Vec<f64>,
    placement: Placement,
    regroup: Regroup,
    stats: ShufflingStats,
}

impl Shuffling {
    /// Shuffling at `settings.level` with `settings.lock_threshold`, sampling every
    /// `settings.lock_sample_interval` and shuffling every `settings.interval` if set, else
    /// `settings.shuffle_interval`. Settings are checked by [`crate::build`].
    pub fn new(settings: &Settings) -> Shuffling {
        Shuffling {
            level: settings.level,
            threshold: settings.lock_threshold,
            sample: settings.lock_sample_interval,
            shuffle: settings.interval.unwrap_or(settings.shuffle_interval),
            totals: Vec::new(),
            next_totals: Vec::new(),
            since: Nanos::ZERO,
            metric: Vec::new(),
            placement: Placement::new(),
            regroup: Regroup::new(),
            stats: ShufflingStats::default(),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &ShufflingStats {
        &self.stats
    }

    /// Adds the window's lock time to each live thread's total, forgetting vanished ones.
    fn accumulate(&mut self, window: &Window) {
        let dt = window.duration().0 as f64;
        self.next_totals.clear();
        let mut j = 0;
        for t in &window.threads {
            while j < self.totals.len() && self.totals[j].key < t.key {
                j += 1;
            }
            let mut total = match self.totals.get(j) {
                Some(prev) if prev.key == t.key => *prev,
                _ => LockTotal {
                    key: t.key,
                    lock_ns: 0.0,
                    seen_ns: 0.0,
                    run_ns: 0.0,
                    exact: true,
                    idle_window: false,
                    deferred_ns: 0.0,
                },
            };
            if !t.appeared {
                // An estimate is summed unclamped (see "Estimates over a check"): blocked
                // less what the window reported beyond its length.
                let lock = if t.lock_exact {
                    t.lock
                } else {
                    t.blocked - t.late
                };
                total.lock_ns += lock * dt;
                let runnable = t.state == ThreadState::Running;
                total.deferred_ns = if !t.lock_exact && runnable && lock > 0.0 {
                    lock * dt
                } else {
                    0.0
                };
                total.seen_ns += dt;
                total.run_ns += t.util * dt;
                total.exact &= t.lock_exact;
                total.idle_window |= t.util < IDLE_METRIC;
            }
            self.next_totals.push(total);
        }
        std::mem::swap(&mut self.totals, &mut self.next_totals);
    }

    /// Each thread's lock fraction into `metric`; returns the highest per-process mean and
    /// its pid.
    fn lock_fractions(&mut self) -> (f64, i32) {
        self.metric.clear();
        let (mut best, mut best_pid) = (0.0_f64, 0);
        let (mut sum, mut n) = (0.0, 0usize);
        for (i, t) in self.totals.iter().enumerate() {
            let frac = if t.seen_ns > 0.0 {
                ((t.lock_ns - t.deferred_ns) / t.seen_ns).clamp(0.0, 1.0)
            } else {
                0.0
            };
            self.metric.push(frac);
            if counts_in_mean(t) {
                sum += frac;
                n += 1;
            }
            let last_of_process = self
                .totals
                .get(i + 1)
                .is_none_or(|next| next.key.pid != t.key.pid);
            if last_of_process {
                if n > 0 && sum / n as f64 > best {
                    best = sum / n as f64;
                    best_pid = t.key.pid.0;
                }
                (sum, n) = (0.0, 0);
            }
        }
        (best, best_pid)
    }
}

/// Whether a thread's lock fraction counts in its process's mean: it was observed, and it
/// ran at least [`IDLE_METRIC`] of the time or a probe measured it waiting for locks that
/// long. An estimate is blocked time, so a thread that hardly ran (a main thread asleep in
/// `join`, an idle pool thread) would count as waiting for locks all along; measured, the
/// same thread would count as 0 and dilute the mean. Either way it is left out, as
/// Tumbler's wave leaves such threads out of its dealing.
///
/// An estimate also needs the thread to have run in *every* window of the check: a main
/// thread that starts the workers and then joins them runs a few percent of its first
/// check and is blocked, in `join`, for the rest, which the estimate cannot tell from
/// waiting for a lock.
fn counts_in_mean(t: &LockTotal) -> bool {
    let floor = IDLE_METRIC * t.seen_ns;
    let busy = if t.exact {
        t.run_ns >= floor
    } else {
        t.run_ns >= floor && !t.idle_window
    };
    t.seen_ns > 0.0 && (busy || (t.exact && t.lock_ns >= floor))
}

impl Policy for Shuffling {
    fn name(&self) -> &'static str {
        "shuffling"
    }

    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan {
        let level = self
            .level
            .unwrap_or_else(|| PolicyKind::Shuffling.default_level(topo));
        self.placement.retain_alive(&window.threads);
        let dt = window.duration();
        let first = self.sample.min(self.shuffle.saturating_sub(self.since));
        if dt == Nanos::ZERO {
            return Plan::wait(first);
        }
        if !window.threads.is_empty() {
            let all_exact = window.threads.iter().all(|t| t.lock_exact);
            self.stats.lock_source = match (self.stats.lock_source, all_exact) {
                (LockSource::Estimated, _) | (_, false) => LockSource::Estimated,
                _ => LockSource::Measured,
            };
        }
        self.accumulate(window);
        self.since += dt;
        let remaining = self.shuffle.saturating_sub(self.since);
        if remaining.0.saturating_mul(10) > self.sample.0 {
            return Plan::wait(self.sample.min(remaining));
        }
        self.since = Nanos::ZERO;
        let next_in = self.sample.min(self.shuffle);
        if window.threads.is_empty() {
            self.totals.clear();
            return Plan::wait(next_in);
        }
        self.stats.checks += 1;
        let (worst, pid) = self.lock_fractions();
        self.stats.last_lock = Some(worst);
        // From now on, totals count from this check.
        for t in &mut self.totals {
            (t.lock_ns, t.seen_ns, t.run_ns, t.exact) = (t.deferred_ns, 0.0, 0.0, true);
            t.idle_window = false;
            t.deferred_ns = 0.0;
        }
        if worst <= self.threshold {
            self.stats.below_threshold += 1;
            return Plan::wait(next_in);
        }
        self.stats.shuffles += 1;
        let moved = self.regroup.run(
            topo,
            level,
            &window.threads,
            &self.metric,
            Scheme::Contiguous,
            &mut self.placement,
        );
        let metric = &self.metric;
        let moves: Vec<Move> = moved
            .iter()
            .map(|&(i, d)| Move {
                thread: window.threads[i].key,
                to: Target::Domain { level, index: d },
                why: Reason::Shuffle {
                    group: d,
                    lock: metric[i],
                },
            })
            .collect();
        self.stats.moves += moves.len() as u64;
        let note = (!moves.is_empty()).then(|| {
            let how = match self.stats.lock_source {
                LockSource::Measured => "measured",
                _ => "estimated",
            };
            format!(
                "lock time {:.1} % ({how}) in process {pid} > {:.1} %: shuffled {} threads, moved {}",
                worst * 100.0,
                self.threshold * 100.0,
                window.threads.len(),
                moves.len()
            )
        });
        Plan {
            slices: Vec::new(),
            moves,
            next_in,
            note,
        }
    }

    fn needs(&self) -> Needs {
        NEEDS
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Shuffling(ShufflingSummary {
            shuffles: s.shuffles,
            moves: s.moves,
            lock_checks: s.checks,
            below_threshold: s.below_threshold,
            last_lock_time_pct: s.last_lock.map(|l| l * 100.0),
            lock_time_source: match s.lock_source {
                LockSource::NotSampled => LockTimeSource::NotSampled,
                LockSource::Measured => LockTimeSource::Measured,
                LockSource::Estimated => LockTimeSource::Estimated,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{key, topo, window, window_of};
    use threadbalance_model::{CpuId, Sample, Snapshot};

    /// A window of `dt_ms` in which each `(tid, lock fraction, last cpu)` of process 1 ran
    /// half the time and waited for locks, as measured by a probe, `lock` of the time.
    fn measured(dt_ms: u64, threads: &[(i32, f64, u32)]) -> Window {
        let dt = Nanos::from_millis(dt_ms);
        let mut prev = Snapshot::default();
        let mut cur = Snapshot {
            at: dt,
            ..Snapshot::default()
        };
        for &(tid, lock, cpu) in threads {
            let base = Sample {
                key: key(1, tid),
                last_cpu: CpuId(cpu),
                lock: Some(Nanos::ZERO),
                ..Sample::default()
            };
            prev.threads.push(base);
            cur.threads.push(Sample {
                run: Nanos(dt.0 / 2),
                lock: Some(Nanos((lock * dt.0 as f64).round() as u64)),
                ..base
            });
        }
        prev.sort();
        cur.sort();
        let mut w = Window::default();
        w.update(&prev, &cur);
        w
    }

    fn settings() -> Settings {
        Settings::new(Level::Package)
    }

    #[test]
    fn shuffling_samples_200_200_100_then_shuffles_at_500() {
        let t = topo(2, 1, 2, 1);
        let mut p = Shuffling::new(&settings());
        let w = measured(
            200,
            &[(1, 0.30, 0), (2, 0.01, 1), (3, 0.29, 2), (4, 0.02, 3)],
        );
        let mut first = Window::default();
        first.first(&Snapshot::default());
        assert_eq!(p.decide(&t, &first).next_in, Nanos::from_millis(200));
        // 200 ms accumulated, 300 to go: sample again in 200.
        assert_eq!(p.decide(&t, &w).next_in, Nanos::from_millis(200));
        // 400 accumulated, 100 to go.
        let plan = p.decide(&t, &w);
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(100));
        assert_eq!(p.stats().checks, 0);
        // 500: check. Lock times .30 .01 .29 .02 (same in every window); mean .155 > .05.
        // Sorted .01(2) .02(4) .29(3) .30(1): g0 = {2, 4}, g1 = {3, 1}. Package 0 holds 1, 2
        // and package 1 holds 3, 4: each group has one thread in each, a tie, so g0 → 0:
        // thread 4 → 0 and thread 1 → 1; threads 2 and 3 stay, confined where they run.
        let plan = p.decide(
            &t,
            &measured(
                100,
                &[(1, 0.30, 0), (2, 0.01, 1), (3, 0.29, 2), (4, 0.02, 3)],
            ),
        );
        let got: Vec<(i32, usize)> = plan
            .moves
            .iter()
            .map(|m| match m.to {
                Target::Domain { index, .. } => (m.thread.tid.0, index),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(got, [(1, 1), (2, 0), (3, 1), (4, 0)]);
        assert!(
            matches!(plan.moves[0].why, Reason::Shuffle { group: 1, lock } if (lock - 0.30).abs() < 1e-9)
        );
        assert_eq!(plan.next_in, Nanos::from_millis(200));
        assert_eq!(p.stats().shuffles, 1);
        let summary = p.summary().lines();
        assert_eq!(summary[5], ("lock time".into(), "measured".into()));
        assert_eq!(summary[4], ("last lock time".into(), "15.5 %".into()));
        assert!(
            plan.note
                .as_deref()
                .is_some_and(|n| n.contains("(measured)"))
        );
    }

    #[test]
    fn shuffling_below_threshold_moves_nothing() {
        // Lock times .04 .02 .03 .01: mean .025 ≤ .05.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        let plan = p.decide(
            &t,
            &measured(
                200,
                &[(1, 0.04, 0), (2, 0.02, 0), (3, 0.03, 0), (4, 0.01, 0)],
            ),
        );
        assert!(plan.moves.is_empty());
        assert_eq!(p.stats().checks, 1);
        assert_eq!(p.stats().below_threshold, 1);
        assert_eq!(p.stats().shuffles, 0);
    }

    #[test]
    fn shuffling_threshold_is_per_process_mean() {
        // Process 1: .02 and .04 (mean .03); process 2: .06 and .10 (mean .08 > .05).
        // Overall mean .055 would also pass, so raise the threshold to .07: only process 2's
        // mean is above it, and that is enough.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        s.lock_threshold = 0.07;
        let mut p = Shuffling::new(&s);
        // Estimated lock = blocked = 1 − util: util .98 .96 → .02 .04; .94 .90 → .06 .10.
        let w = window_of(
            200,
            &[
                (key(1, 1), 0.98, 0),
                (key(1, 2), 0.96, 0),
                (key(2, 1), 0.94, 0),
                (key(2, 2), 0.90, 0),
            ],
        );
        let plan = p.decide(&t, &w);
        assert_eq!(p.stats().shuffles, 1);
        // Sorted .02 .04 | .06 .10: process 1 → g0, process 2 → g1. All on package 0:
        // g0 → 0 (tie → identity), so process 2's threads move to package 1 and process
        // 1's are confined to package 0, where they run.
        let tids: Vec<(i32, i32)> = plan
            .moves
            .iter()
            .map(|m| (m.thread.pid.0, m.thread.tid.0))
            .collect();
        assert_eq!(tids, [(1, 1), (1, 2), (2, 1), (2, 2)]);
        let to: Vec<Target> = plan.moves.iter().map(|m| m.to).collect();
        let pkg = |index| Target::Domain {
            level: Level::Package,
            index,
        };
        assert_eq!(to, [pkg(0), pkg(0), pkg(1), pkg(1)]);
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.08).abs() < 1e-9));
        // With every process at or below .09, nothing happens.
        let mut s = s.clone();
        s.lock_threshold = 0.09;
        let mut p = Shuffling::new(&s);
        assert!(p.decide(&t, &w).moves.is_empty());
    }

    #[test]
    fn shuffling_without_probe_reports_estimate() {
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        assert_eq!(p.summary().lines()[5].1, "not sampled");
        // util .5 → blocked .5 → lock estimated .5.
        let plan = p.decide(&t, &window(200, &[0.5, 0.5, 0.9, 0.9], &[0, 0, 0, 0]));
        assert_eq!(
            p.summary().lines()[5],
            (
                "lock time".into(),
                "estimated from blocked time (no exact probe)".into()
            )
        );
        assert!(
            plan.note
                .as_deref()
                .is_some_and(|n| n.contains("(estimated)"))
        );
    }

    #[test]
    fn shuffling_totals_start_again_after_each_check() {
        // Window 1 (check): .20 lock each → shuffle. Window 2 (check): .01 → below, even
        // though the average over both windows would be .105.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        p.decide(&t, &measured(200, &[(1, 0.20, 0), (2, 0.20, 1)]));
        assert_eq!(p.stats().shuffles, 1);
        p.decide(&t, &measured(200, &[(1, 0.01, 0), (2, 0.01, 1)]));
        assert_eq!(p.stats().below_threshold, 1);
        assert_eq!(p.stats().checks, 2);
    }

    #[test]
    fn shuffling_estimate_leaves_idle_main_thread_out_of_mean() {
        // Process 1: a main thread asleep in join (util 0, so blocked 1, estimated lock 1)
        // and four workers that ran 97 % (estimated lock .03). Counting the main thread the
        // mean would be (1 + 4 × .03) / 5 = .224 > .05; without it it is .03 ≤ .05.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        let w = window(200, &[0.0, 0.97, 0.97, 0.97, 0.97], &[0, 0, 1, 2, 3]);
        assert!(p.decide(&t, &w).moves.is_empty());
        assert_eq!(p.stats().below_threshold, 1);
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.03).abs() < 1e-9));
        // Workers at 80 % (estimated lock .20) still shuffle: mean .20 > .05.
        let w = window(200, &[0.0, 0.8, 0.8, 0.8, 0.8], &[0, 0, 1, 2, 3]);
        p.decide(&t, &w);
        assert_eq!(p.stats().shuffles, 1);
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.20).abs() < 1e-9));
    }

    #[test]
    fn shuffling_measured_idle_thread_counts_only_if_it_waited_for_locks() {
        // Measured: workers ran half the time (see `measured`). Add a main thread that did
        // not run at all: with measured lock 0 (asleep in join) it is left out, so the mean
        // of .06 and .06 is .06 > .05 and the process shuffles (with it: .04, below).
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        let mut w = measured(200, &[(1, 0.0, 0), (2, 0.06, 0), (3, 0.06, 1)]);
        w.threads[0].util = 0.0;
        p.decide(&t, &w);
        assert_eq!(p.stats().shuffles, 1);
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.06).abs() < 1e-9));
        // A thread that did not run because it was queued on a mutex all along (measured
        // lock .90) counts: (.90 + .01 + .01) / 3 ≈ .307 > .05.
        let mut w = measured(200, &[(1, 0.90, 0), (2, 0.01, 0), (3, 0.01, 1)]);
        w.threads[0].util = 0.0;
        p.decide(&t, &w);
        assert_eq!(p.stats().shuffles, 2);
        assert!(
            p.stats()
                .last_lock
                .is_some_and(|l| (l - 0.92 / 3.0).abs() < 1e-9)
        );
    }

    /// One check of two 100 ms windows of two threads each reading `(util, latency,
    /// blocked, late)` as given; the policy after it (nothing moved).
    fn check_of_two_windows(
        first: (f64, f64, f64, f64),
        second: (f64, f64, f64, f64),
    ) -> Shuffling {
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        s.lock_sample_interval = Nanos::from_millis(100);
        let mut p = Shuffling::new(&s);
        for (util, latency, blocked, late) in [first, second] {
            let mut w = window(100, &[util, util], &[0, 1]);
            for r in &mut w.threads {
                (r.latency, r.blocked, r.late, r.lock) = (latency, blocked, late, blocked);
            }
            assert!(p.decide(&t, &w).moves.is_empty());
        }
        p
    }

    #[test]
    fn shuffling_estimate_sums_windows_unclamped() {
        // Two 100 ms windows of a check of 200 ms; the thread ran 50 % and waited 50 % in
        // a run queue all along, but the sample closing window 1 caught it waiting 20 ms
        // not yet counted: window 1 reads util .5, latency .3 (blocked .2), window 2 util
        // .5, latency .7 (blocked −.2: clamped to 0 by the window, which reports the .2
        // beyond its length as late). Clamped and summed: (.2 + 0) / 2 = .10 > .05.
        // Unclamped: (.2 − .2) / 2 = 0.
        let p = check_of_two_windows((0.5, 0.3, 0.2, 0.0), (0.5, 0.7, 0.0, 0.2));
        assert_eq!(p.stats().below_threshold, 1);
        assert!(p.stats().last_lock.is_some_and(|l| l.abs() < 1e-9));
    }

    #[test]
    fn shuffling_estimate_counts_the_wait_reported_beyond_its_window() {
        // As above, but the thread ran 10 ms of window 1 and waited in a run queue for the
        // other 90, none of it counted yet (blocked .9); then it ran 50 ms of window 2 and
        // waited 50, and its 140 ms of wait arrived: latency clamped to 1, blocked 0, late
        // .9 (.5 + 1.4 − 1). `1 − util − latency` summed reads (.9 − .5) / 2 = .2 and
        // shuffles; blocked less late reads (.9 − .9) / 2 = 0.
        let p = check_of_two_windows((0.1, 0.0, 0.9, 0.0), (0.5, 1.0, 0.0, 0.9));
        assert_eq!(p.stats().shuffles, 0);
        assert!(p.stats().last_lock.is_some_and(|l| l.abs() < 1e-9));
    }

    #[test]
    fn shuffling_estimate_leaves_out_time_stolen_by_the_hypervisor() {
        // Spinning workers on a VM whose host takes a tenth of the busy time: run .90,
        // stolen .09, no wait. Unaccounted .10 would read as lock time, above .05; without
        // the stolen time .01 is left, below. The same windows with nothing measured as
        // stolen shuffle.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let with = |stolen: f64| {
            let mut w = window(200, &[0.9, 0.9], &[0, 1]);
            for r in &mut w.threads {
                r.stolen = stolen;
                r.blocked = 1.0 - r.util - stolen;
            }
            w
        };
        let mut p = Shuffling::new(&s);
        assert!(p.needs().steal);
        assert!(p.decide(&t, &with(0.09)).moves.is_empty());
        assert_eq!((p.stats().below_threshold, p.stats().shuffles), (1, 0));
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.01).abs() < 1e-9));
        let mut p = Shuffling::new(&s);
        p.decide(&t, &with(0.0));
        assert_eq!(p.stats().shuffles, 1);
    }

    #[test]
    fn shuffling_estimate_of_runnable_thread_at_check_is_deferred() {
        // One-window checks of 100 ms. Check 1: util .5, latency .3, state R at the close:
        // the .2 "blocked" is deferred (it is a run-queue wait not yet counted), so the
        // check sees 0. Check 2: util .5, latency .7, blocked −.2 unclamped; with the
        // deferred .2 carried in: (.2 − .2) / .1 s = 0 again. A thread asleep (S) at the
        // close keeps its estimate: check 3 sees .2 > .05 and shuffles.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(100);
        s.lock_sample_interval = Nanos::from_millis(100);
        let mut p = Shuffling::new(&s);
        let with = |latency: f64, state: ThreadState| {
            let mut w = window(100, &[0.5, 0.5], &[0, 1]);
            for r in &mut w.threads {
                (r.latency, r.state) = (latency, state);
                r.blocked = (1.0 - r.util - latency).max(0.0);
                r.late = (r.util + latency - 1.0).max(0.0);
                r.lock = r.blocked;
            }
            w
        };
        p.decide(&t, &with(0.3, ThreadState::Running));
        assert!(p.stats().last_lock.is_some_and(|l| l.abs() < 1e-9));
        p.decide(&t, &with(0.7, ThreadState::Running));
        assert!(p.stats().last_lock.is_some_and(|l| l.abs() < 1e-9));
        assert_eq!(p.stats().shuffles, 0);
        p.decide(&t, &with(0.3, ThreadState::Sleeping));
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.2).abs() < 1e-9));
        assert_eq!(p.stats().shuffles, 1);
    }

    #[test]
    fn shuffling_estimate_leaves_out_thread_idle_in_one_window_of_the_check() {
        // A check of two 100 ms windows. The main thread starts the workers in window 1
        // (util .05, estimated lock .95) and joins them in window 2 (util 0): over the
        // check it ran 2.5 % (above 1 %), but it was idle in one window, so it is left
        // out. The workers ran 98 % (estimated .02): mean .02 ≤ .05. Counted, the main
        // thread's (.95 + 1) / 2 = .975 would make the mean (.975 + .02 + .02) / 3 ≈ .34.
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        s.lock_sample_interval = Nanos::from_millis(100);
        let mut p = Shuffling::new(&s);
        p.decide(&t, &window(100, &[0.05, 0.98, 0.98], &[0, 0, 1]));
        p.decide(&t, &window(100, &[0.0, 0.98, 0.98], &[0, 0, 1]));
        assert_eq!(p.stats().below_threshold, 1);
        assert!(p.stats().last_lock.is_some_and(|l| (l - 0.02).abs() < 1e-9));
    }

    #[test]
    fn shuffling_new_thread_counts_from_its_next_window() {
        let t = topo(2, 1, 2, 1);
        let mut s = settings();
        s.shuffle_interval = Nanos::from_millis(200);
        let mut p = Shuffling::new(&s);
        // Thread 1 has a full window with lock .02; thread 2 appeared in it with .90 (over
        // a window it did not live through). Only thread 1 counts: mean .02 ≤ .05.
        let mut w = measured(200, &[(1, 0.02, 0), (2, 0.90, 0)]);
        w.threads[1].appeared = true;
        assert!(p.decide(&t, &w).moves.is_empty());
        assert_eq!(p.stats().below_threshold, 1);
        // Vanished threads are forgotten.
        let mut w = measured(200, &[(1, 0.02, 0)]);
        w.vanished.push(key(1, 2));
        p.decide(&t, &w);
        assert_eq!(p.totals.len(), 1);
    }

    #[test]
    fn shuffling_registry_rejects_bad_threshold_and_intervals() {
        let t = topo(2, 1, 2, 1);
        let ok = settings();
        assert_eq!(
            crate::build("shuffling", &ok, &t).map(|p| p.name()),
            Ok("shuffling")
        );
        let mut bad = Vec::new();
        for th in [-0.01, 1.01, f64::NAN] {
            let mut s = settings();
            s.lock_threshold = th;
            bad.push(s);
        }
        let mut s = settings();
        s.lock_sample_interval = Nanos::ZERO;
        bad.push(s);
        let mut s = settings();
        s.shuffle_interval = Nanos::ZERO;
        bad.push(s);
        for s in bad {
            assert!(
                matches!(
                    crate::build("shuffling", &s, &t),
                    Err(crate::PolicyError::Invalid { .. })
                ),
                "{s:?}"
            );
        }
    }
}
