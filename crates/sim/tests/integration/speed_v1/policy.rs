#![allow(dead_code)] // A frozen copy: its unused settings stay as they were measured.
//! `speed-v1`: **calibration reference, not a policy to use.** This is the speed balancing
//! design that was measured on a real 16-core machine (`calibration/linux-6.18-16core.md`,
//! §2, threadbalance at commit 7907d26), kept unchanged apart from its names so that the
//! simulator can be held to that machine's results: 2.8× slower than Linux at N = 32 with
//! yield barriers (28 % of the fair share, about 900 moves/s), 2–9 % slower at 17 and 20
//! threads with block barriers, +27 % at 17 threads with yield barriers; on 2 cores it
//! lifted 3 threads with 10 ms phases by 1.23× (yield) and 1.14× (block). The policy to
//! use is `speed`; `speed-v1` lives with the simulator's tests that hold it to those
//! machines (`run_built` runs it), and is neither in the registry nor in the production crate.
//!
//! What follows is that version's own documentation.
//!
//! The measured design: speed balancing (Hofmeyr, Iancu, Blagojević, PPoPP 2010, §4–5), with a balance
//! interval that adapts to the program's synchronization granularity.
//!
//! **The paper's rules.** A thread's *speed* is its execution time over wall time; a core's
//! speed is the mean speed of the threads placed on it; the global speed is the mean over
//! cores. Every core has a balancer. When it wakes, a core faster than the global speed
//! pulls one thread from a core whose speed is below `T_s`·global (`T_s` = 0.9) and that has
//! not been in a migration for two intervals; it pulls the thread that has migrated least.
//! Each balancer sleeps one interval plus a random jitter of up to one interval. Beyond
//! the paper, a core pulls only from a core that holds more of the threads we place than
//! it does (3 threads on 2 cores: 2 against 1), and threads that mostly sleep are given
//! back to Linux (blocked more than 40 % of the time): both keep pinning from costing more than it gains
//! on programs that are not oversubscribed barrier codes. Threads
//! start round-robin over the cores; a thread discovered later goes to the core with the
//! fewest threads. Migrations inside an LLC may happen every interval, across LLCs (same
//! node) every 2 intervals, across NUMA nodes every 4 — and not at all unless
//! [`V1Settings::allow_numa`] (blocked by default, as in the paper's §6.4).
//!
//! ```text
//!   window (exec ns per thread) ─► per-thread speed since its core's last wake-up
//!        │                                │
//!        │                                ▼
//!        │           core speed s_j = mean of its threads   global = mean_j s_j
//!        │                                │
//!        ▼                                ▼
//!   sync signals ─► interval B     for each core whose timer expired (one loop, a
//!   (wake-ups/s, yields/s)          timer per core — not one OS thread per core):
//!                                     s_j > global and ∃ k: s_k < T_s·global, k quiet
//!                                     for 2B ─► pull least-migrated thread of k to j
//!                                   timer_j = now + B + U[0, B)
//!   Plan.next_in = earliest timer − now
//! ```
//!
//! The balancers are logical: one [`Policy::decide`] call runs every balancer whose timer
//! has expired, and asks to be called again when the earliest timer is due.
//!
//! **Why the interval adapts (beyond the paper).** With N threads on M < N cores, some core
//! holds one thread more than another. In a program that meets at a barrier every S ms, the
//! doubled-up threads gate everyone in every phase unless the doubling *rotates within the
//! phase*: Lemma 1 says 2·⌈SQ/FQ⌉ balancing steps are needed before every thread has run on
//! a fast core (two for 3 threads on 2 cores), and each step is followed by the two-interval
//! post-migration block, so a step takes about 2.3 B with the jitter. Linux 6.18 already
//! shares cores fairly when phases are long (≥ 100 ms), so a 100 ms balancer gains nothing
//! there, and loses to it when phases are short. The interval is therefore chosen as:
//!
//! | signal (per running thread, smoothed over ~200 ms) | meaning | interval B |
//! |---|---|---|
//! | involuntary switches ≥ 2000/s | threads spin with `sched_yield` at synchronization points: phases finer than we can see | `min_interval` (2 ms) |
//! | context switches r/s (voluntary + involuntary) | threads block, yield or are preempted about once per phase: phase P ≈ 1/r | P / 8, clamped to [`min_interval`, `max_interval`] |
//! | neither | no synchronization seen | `max_interval` (100 ms, the paper's) |
//!
//! Context switches come from `status`, which a host may not read (it is the costliest
//! file); then every timeslice (each time a thread was given a CPU: its wake-ups plus its
//! preemptions, from `schedstat`) stands in for both counts. That over-counts wake-ups, so
//! it errs toward the fast side: a program whose threads share cores is then balanced at
//! the floor. P / 8: a rotation step takes ≈ 2.3 B (block of 2 B, then the next jittered
//! wake-up), and 3 threads on 2 cores need 2 steps per phase (Lemma 1) with margin for the
//! phase not starting on a step — measured on 2 cores, 10 ms phases need B ≈ 2 ms.
//!
//! The interval backs off (×1.5 per balancing round, up to `max_interval`) once 16 rounds
//! in a row found no core slow enough to pull from — when the cores are balanced (N ≤ M, or
//! N a multiple of M) or moves stop improving the spread, there is nothing to gain from
//! sampling often. The first slow core seen brings B back to the signals' choice.
//! `Settings::interval` fixes B instead.
//!
//! **Speed of a thread (a measured deviation).** By default exec / (exec + run-queue wait)
//! over the span, i.e. exec time over the wall time during which the thread *wanted* a
//! CPU ([`V1Measure::Runnable`]); the paper's exec / wall is [`V1Measure::Wall`].
//! They agree for always-runnable threads. They differ when a thread sleeps: under the
//! paper's measure a thread asleep at a blocking barrier makes its core look slow, so the
//! busy core "pulls" the sleeper and doubles up the two workers when it wakes. On this
//! 2-core machine that took 2 threads with 100 ms phases from 98 % to 50–60 % of the fair
//! share; with the runnable measure they stay put (3–7 moves per run). Threads that hardly
//! wanted a CPU over the span (under 5 %) count for nothing under either measure.
//!
//! Per tick the policy walks the window once, merging it with its own key-sorted table of
//! placed threads; buffers are reused, so ticks at 2 ms do not allocate once the thread set
//! is stable.

use threadbalance_model::{
    Level, Move, Nanos, NodeId, Plan, PolicySummary, Reason, SpeedSummary, Target, ThreadKey,
    Topology, Window,
};
use threadbalance_policy::rng::Rng;
use threadbalance_policy::{Needs, Policy, PolicyError, Settings};

/// How a thread's speed is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V1Measure {
    /// The paper's: execution time over wall time.
    Wall,
    /// Execution time over the time the thread wanted a CPU (run + run-queue wait); a thread
    /// that did not want to run counts as fast.
    Runnable,
}

/// Settings of the `speed` policy.
#[derive(Debug, Clone, PartialEq)]
pub struct V1Settings {
    /// `T_s`: pull only from cores slower than this fraction of the global speed (0.9).
    pub threshold: f64,
    /// Whether threads may be pulled across NUMA nodes (blocked by default).
    pub allow_numa: bool,
    /// Shortest balance interval the adaptation may choose (2 ms).
    pub min_interval: Nanos,
    /// Longest balance interval, where it backs off to (100 ms, the paper's fixed value).
    pub max_interval: Nanos,
    /// How thread speed is measured.
    pub measure: V1Measure,
}

impl Default for V1Settings {
    fn default() -> V1Settings {
        V1Settings {
            threshold: 0.9,
            allow_numa: false,
            min_interval: Nanos::from_millis(2),
            max_interval: Nanos::from_millis(100),
            measure: V1Measure::Runnable,
        }
    }
}

/// Below this fraction of a span running or runnable, a thread counts as idle.
const IDLE: f64 = 0.05;
/// Involuntary switches per thread-second above which threads are taken to be yielding at
/// synchronization points (preemption alone gives a few hundred per second).
const YIELD_RATE: f64 = 2000.0;
/// The interval is this fraction of the estimated phase (see the module docs).
const PHASE_FRACTION: f64 = 0.125;
/// Time constant of the smoothing of the synchronization signals, in seconds.
const SIGNAL_TAU_S: f64 = 0.2;
/// Growth of the interval per balancing round that finds no slow core, once
/// `QUIET_ROUNDS` rounds in a row found none.
const BACKOFF: f64 = 1.5;
const QUIET_ROUNDS: u32 = 16;
/// Post-migration block, in intervals (the paper's two).
const BLOCK_INTERVALS: u64 = 2;
/// Interval multipliers for pulls across LLCs and across NUMA nodes.
const CROSS_LLC: u64 = 2;
const CROSS_NODE: u64 = 4;
/// A placed thread blocked more than this fraction of the time (smoothed over
/// `SIGNAL_TAU_S`) is released to Linux. Speed balancing equalizes the progress of threads
/// that compete for cores; a thread that mostly sleeps (on a timer, a queue, I/O) gains
/// nothing from it, and pinning it costs work conservation: when its core's other thread
/// sleeps too, the core idles while work waits elsewhere, which Linux's wake-up placement
/// would have used. Threads of a barrier program block only while waiting for the slowest,
/// a small fraction once phases rotate, so they stay placed.
const RELEASE_ABOVE: f64 = 0.4;
/// A released thread blocked less than this (smoothed) is placed again: the gap to
/// `RELEASE_ABOVE` keeps a thread near the line from going back and forth.
const ADOPT_BELOW: f64 = 0.25;
/// How stale last CPU and state may be for this policy (see `Needs::stat_max_age`): the
/// paper's (and our longest) interval.
const MAX_STAT_AGE: Nanos = Nanos::from_millis(100);

/// What speed-v1 reads: only run time and run-queue wait (fresh from `schedstat` on every
/// sample), and it knows where it placed every thread, so last CPU and state may be as
/// old as its longest interval.
pub const NEEDS: Needs = Needs {
    stat_max_age: Some(MAX_STAT_AGE),
    ..Needs::NOTHING
};

/// One balancer's queue: a domain at the balancing level.
#[derive(Debug, Clone)]
struct Queue {
    llc: usize,
    node: NodeId,
    next_wake: Nanos,
    last_migration: Option<Nanos>,
    /// When this queue last pulled across an LLC, and across a node.
    last_cross: [Option<Nanos>; 2],
    /// Threads placed on it.
    load: u32,
}

/// A thread the policy has placed.
#[derive(Debug, Clone, Copy)]
struct Placed {
    key: ThreadKey,
    queue: usize,
    migrations: u32,
    /// When it arrived on its queue.
    since: Nanos,
    /// Cumulative exec and run-queue wait ns since we first saw it.
    exec: f64,
    wait: f64,
    /// Values of `exec`/`wait` and the time at its mark (its queue's last wake-up).
    mark_exec: f64,
    mark_wait: f64,
    mark_at: Nanos,
    /// Speed over the span before the mark (used while the current span is too short).
    last_speed: Option<f64>,
    /// Smoothed fraction of time it was blocked (sleeping, not runnable).
    blocked: f64,
    /// Given back to Linux because it mostly sleeps (see `RELEASE_ABOVE`); it counts on
    /// no queue until it competes for a CPU again.
    released: bool,
}

/// The speed balancing policy; see the module docs.
#[derive(Debug, Clone)]
pub struct SpeedV1 {
    cfg: V1Settings,
    level: Level,
    fixed: Option<Nanos>,
    rng: Rng,
    queues: Vec<Queue>,
    placed: Vec<Placed>,
    spare: Vec<Placed>,
    speeds: Vec<f64>,
    counts: Vec<u32>,
    started: bool,
    interval: Nanos,
    /// Smoothed voluntary and involuntary switches per thread-second.
    vol_rate: f64,
    invol_rate: f64,
    /// Smoothed timeslices (times given a CPU) per thread-second.
    slice_rate: f64,
    /// Whether the host counts context switches (reads `status`).
    counted: bool,
    signals_seen: bool,
    /// Balancing rounds in a row that found no slow core.
    quiet_rounds: u32,
    stats: Stats,
}

#[derive(Debug, Clone, Default)]
struct Stats {
    rounds: u64,
    balance_ticks: u64,
    pulls: u64,
    initial: u64,
    blocked: u64,
    released: u64,
    interval_sum_ms: f64,
    min_seen: Option<Nanos>,
    max_seen: Option<Nanos>,
    reason: &'static str,
}

impl SpeedV1 {
    /// Builds the policy: one balancer per domain at `settings.level` (`core` is the
    /// paper's), checking the speed settings.
    pub fn new(settings: &Settings, topo: &Topology) -> Result<SpeedV1, PolicyError> {
        let cfg = V1Settings {
            allow_numa: settings.speed.allow_numa,
            // Its own floor (2 ms): `speed`'s is shorter since its rotation was planned.
            max_interval: settings.speed.max_interval,
            ..V1Settings::default()
        };
        let bad = |why: String| PolicyError::Invalid {
            policy: "speed-v1",
            why,
        };
        if !(cfg.threshold > 0.0 && cfg.threshold <= 1.0) {
            return Err(bad(format!("T_s {} is not in (0, 1]", cfg.threshold)));
        }
        if cfg.min_interval.0 == 0 || cfg.min_interval > cfg.max_interval {
            return Err(bad(format!(
                "interval range {}..{} is empty",
                cfg.min_interval, cfg.max_interval
            )));
        }
        if settings.interval.is_some_and(|i| i.0 == 0) {
            return Err(bad("interval must be positive".into()));
        }
        let level = settings.level_for(threadbalance_policy::PolicyKind::Speed, topo);
        let queues = topo
            .domains(level)
            .iter()
            .map(|d| Queue {
                llc: d
                    .cpus
                    .first()
                    .and_then(|c| topo.domain_of(c, Level::Llc))
                    .unwrap_or(0),
                node: d.node,
                next_wake: Nanos::ZERO,
                last_migration: None,
                last_cross: [None, None],
                load: 0,
            })
            .collect();
        Ok(SpeedV1 {
            interval: settings.interval.unwrap_or(cfg.min_interval),
            fixed: settings.interval,
            cfg,
            level,
            rng: Rng::new(settings.seed),
            queues,
            placed: Vec::new(),
            spare: Vec::new(),
            speeds: Vec::new(),
            counts: Vec::new(),
            started: false,
            vol_rate: 0.0,
            invol_rate: 0.0,
            slice_rate: 0.0,
            counted: false,
            signals_seen: false,
            quiet_rounds: 0,
            stats: Stats {
                reason: "no synchronization seen yet",
                ..Stats::default()
            },
        })
    }

    /// The balance interval in force.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    fn target(&self, q: usize) -> Target {
        Target::Domain {
            level: self.level,
            index: q,
        }
    }

    fn jittered(&mut self, now: Nanos) -> Nanos {
        now + self.interval + Nanos(self.rng.below(self.interval.0))
    }

    /// The queue with the fewest placed threads; ties go to the lowest index.
    fn emptiest(&self) -> usize {
        (0..self.queues.len())
            .min_by_key(|&q| self.queues[q].load)
            .unwrap_or(0)
    }

    /// Merges the window into the table of placed threads: accumulates their exec and wait
    /// time, drops threads that are gone and places new ones (round-robin on the first
    /// window, else on the emptiest queue).
    fn track(&mut self, w: &Window, moves: &mut Vec<Move>) {
        let dt = w.duration().0 as f64;
        let now = w.end;
        let first = !self.started;
        let mut old = std::mem::take(&mut self.placed);
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        let mut i = 0;
        for t in &w.threads {
            while i < old.len() && old[i].key < t.key {
                if !old[i].released {
                    self.queues[old[i].queue].load -= 1;
                }
                i += 1;
            }
            if i < old.len() && old[i].key == t.key {
                let mut p = old[i];
                p.exec += t.speed * dt;
                p.wait += t.latency * dt;
                let alpha = dt / (SIGNAL_TAU_S * 1e9 + dt);
                p.blocked += alpha * (t.blocked - p.blocked);
                if !p.released && p.blocked > RELEASE_ABOVE {
                    p.released = true;
                    self.queues[p.queue].load -= 1;
                    self.stats.released += 1;
                    moves.push(Move {
                        thread: p.key,
                        to: Target::Original,
                        why: Reason::Release,
                    });
                } else if p.released && p.blocked < ADOPT_BELOW {
                    let queue = self.emptiest();
                    if let Some(q) = self.queues.get_mut(queue) {
                        q.load += 1;
                        p.released = false;
                        p.queue = queue;
                        p.since = now;
                        p.mark_exec = p.exec;
                        p.mark_wait = p.wait;
                        p.mark_at = now;
                        p.last_speed = None;
                        self.stats.initial += 1;
                        moves.push(Move {
                            thread: p.key,
                            to: self.target(queue),
                            why: Reason::Initial,
                        });
                    }
                }
                out.push(p);
                i += 1;
                continue;
            }
            let queue = if first {
                (self.stats.initial as usize) % self.queues.len().max(1)
            } else {
                self.emptiest()
            };
            if let Some(q) = self.queues.get_mut(queue) {
                q.load += 1;
            } else {
                continue;
            }
            self.stats.initial += 1;
            moves.push(Move {
                thread: t.key,
                to: self.target(queue),
                why: Reason::Initial,
            });
            let exec = t.speed * dt;
            out.push(Placed {
                key: t.key,
                queue,
                migrations: 0,
                since: now,
                exec,
                wait: t.latency * dt,
                mark_exec: exec,
                mark_wait: t.latency * dt,
                mark_at: now,
                last_speed: None,
                blocked: 0.0,
                released: false,
            });
        }
        for p in &old[i..] {
            if !p.released {
                self.queues[p.queue].load -= 1;
            }
        }
        old.clear();
        self.placed = out;
        self.spare = old;
    }

    /// A thread's speed since its mark (or over the span before it, if the current span is
    /// shorter than half the minimum interval); `None` when it hardly wanted a CPU over the
    /// span (under 5 % of it running or runnable): an idle thread perceives no speed.
    fn thread_speed(&self, p: &Placed, now: Nanos) -> Option<f64> {
        let span = now.saturating_sub(p.mark_at).0 as f64;
        if span < self.cfg.min_interval.0 as f64 / 2.0 {
            return p.last_speed;
        }
        let exec = p.exec - p.mark_exec;
        let wanted = exec + (p.wait - p.mark_wait);
        if wanted < span * IDLE {
            return None;
        }
        Some(match self.cfg.measure {
            V1Measure::Wall => (exec / span).clamp(0.0, 1.0),
            V1Measure::Runnable => (exec / wanted).clamp(0.0, 1.0),
        })
    }

    /// Every queue's speed into `self.speeds`: the mean over its threads that wanted a CPU;
    /// a queue with none is as fast as can be (1.0). Returns the global speed.
    fn queue_speeds(&mut self, now: Nanos) -> f64 {
        let mut sum = std::mem::take(&mut self.speeds);
        let mut count = std::mem::take(&mut self.counts);
        sum.clear();
        sum.resize(self.queues.len(), 0.0);
        count.clear();
        count.resize(self.queues.len(), 0);
        for p in self.placed.iter().filter(|p| !p.released) {
            if let Some(s) = self.thread_speed(p, now) {
                sum[p.queue] += s;
                count[p.queue] += 1;
            }
        }
        for (s, &n) in sum.iter_mut().zip(&count) {
            *s = if n == 0 { 1.0 } else { *s / f64::from(n) };
        }
        let global = sum.iter().sum::<f64>() / sum.len().max(1) as f64;
        self.speeds = sum;
        self.counts = count;
        global
    }

    /// Smooths the synchronization signals and picks the interval the signals call for.
    fn observe_signals(&mut self, w: &Window) -> Nanos {
        let dt_s = w.duration().as_secs_f64();
        // Only threads that ran speak for the program's synchronization (a main thread
        // asleep in join would dilute the rates).
        let (mut n, mut vol, mut invol, mut slices) = (0u64, 0u64, 0u64, 0u64);
        for t in w.threads.iter().filter(|t| t.util + t.latency >= IDLE) {
            n += 1;
            vol += t.voluntary;
            invol += t.involuntary;
            slices += t.timeslices;
        }
        if dt_s > 0.0 && n > 0 {
            let thread_s = dt_s * n as f64;
            let a = if self.signals_seen {
                (dt_s / SIGNAL_TAU_S).min(1.0)
            } else {
                1.0
            };
            self.signals_seen = true;
            self.counted |= vol + invol > 0;
            self.vol_rate += (vol as f64 / thread_s - self.vol_rate) * a;
            self.invol_rate += (invol as f64 / thread_s - self.invol_rate) * a;
            self.slice_rate += (slices as f64 / thread_s - self.slice_rate) * a;
        }
        let (lo, hi) = (self.cfg.min_interval, self.cfg.max_interval);
        // Switches: voluntary plus involuntary when the host counts them (a sched_yield that
        // hands the CPU over counts as involuntary, so a yield barrier shows up here), else
        // every time a thread was given a CPU, which is the same count seen from the other
        // side (wake-ups plus preemptions). Either errs on the fast side.
        let (wakeups, yields) = if self.counted {
            (self.vol_rate + self.invol_rate, self.invol_rate)
        } else {
            (self.slice_rate, self.slice_rate)
        };
        if yields >= YIELD_RATE {
            self.stats.reason = "threads yield at synchronization points";
            lo
        } else if wakeups >= 1.0 {
            self.stats.reason = if self.counted {
                "threads block, yield or are preempted about once per phase"
            } else {
                "threads wake or are preempted about once per phase"
            };
            let phase_ns = 1e9 / wakeups;
            Nanos((phase_ns * PHASE_FRACTION) as u64).clamp(lo, hi)
        } else {
            self.stats.reason = "no synchronization seen";
            hi
        }
    }

    /// Quiet time a pull between queues `j` and `k` needs at queue `j`, or `None` when the
    /// pull is blocked (a NUMA crossing without `allow_numa`); and which cross slot it uses.
    fn crossing(&self, j: usize, k: usize) -> Option<(u64, Option<usize>)> {
        let (a, b) = (&self.queues[j], &self.queues[k]);
        if a.node != b.node {
            self.cfg.allow_numa.then_some((CROSS_NODE, Some(1)))
        } else if a.llc != b.llc {
            Some((CROSS_LLC, Some(0)))
        } else {
            Some((1, None))
        }
    }

    /// Balancer of queue `j`: pull from a slow queue if `j` is fast.
    fn balance(&mut self, j: usize, now: Nanos, global: f64, moves: &mut Vec<Move>) -> bool {
        let b = self.interval.0;
        let sj = self.speeds[j];
        let mut slow_seen = false;
        let mut best: Option<(usize, f64)> = None;
        for k in 0..self.queues.len() {
            let sk = self.speeds[k];
            // Beyond the paper: only a queue holding more of our threads that want a CPU
            // than this one can give one up. With equal counts, unequal speeds come from
            // threads we do not place (released sleepers, other programs); trading places
            // does not fix that, it only makes two threads share a core until the next pull.
            if k == j || self.counts[k] <= self.counts[j] || sk >= self.cfg.threshold * global {
                continue;
            }
            slow_seen = true;
            if sj <= global {
                continue;
            }
            let Some((mult, slot)) = self.crossing(j, k) else {
                continue;
            };
            let quiet = |t: Option<Nanos>, need: u64| {
                t.is_none_or(|t| now.saturating_sub(t).0 >= need.saturating_mul(b))
            };
            let cross_ok = slot.is_none_or(|s| quiet(self.queues[j].last_cross[s], mult));
            if !quiet(self.queues[k].last_migration, BLOCK_INTERVALS) || !cross_ok {
                self.stats.blocked += 1;
                continue;
            }
            if best.is_none_or(|(_, s)| sk < s) {
                best = Some((k, sk));
            }
        }
        let Some((k, sk)) = best else {
            return slow_seen;
        };
        // The least-migrated thread of k that wants a CPU; ties go to the one that has been
        // there longest.
        let Some((idx, speed)) = (0..self.placed.len())
            .filter(|&i| self.placed[i].queue == k && !self.placed[i].released)
            .filter_map(|i| Some((i, self.thread_speed(&self.placed[i], now)?)))
            .min_by_key(|&(i, _)| (self.placed[i].migrations, self.placed[i].since))
        else {
            return slow_seen;
        };
        let p = &mut self.placed[idx];
        p.queue = j;
        p.migrations += 1;
        p.since = now;
        p.last_speed = Some(speed);
        p.mark_exec = p.exec;
        p.mark_wait = p.wait;
        p.mark_at = now;
        let thread = p.key;
        self.queues[k].load -= 1;
        self.queues[j].load += 1;
        self.queues[k].last_migration = Some(now);
        self.queues[j].last_migration = Some(now);
        if let Some((_, Some(s))) = self.crossing(j, k) {
            self.queues[j].last_cross[s] = Some(now);
        }
        self.stats.pulls += 1;
        moves.push(Move {
            thread,
            to: self.target(j),
            why: Reason::SpeedPull {
                to_speed: sj,
                from_speed: sk,
                global,
            },
        });
        slow_seen
    }

    /// Starts a new measurement span for the threads of queue `j`.
    fn mark(&mut self, j: usize, now: Nanos) {
        for i in 0..self.placed.len() {
            if self.placed[i].queue == j {
                let s = self.thread_speed(&self.placed[i], now);
                let p = &mut self.placed[i];
                if now.saturating_sub(p.mark_at).0 >= self.cfg.min_interval.0 / 2 {
                    p.last_speed = s;
                    p.mark_exec = p.exec;
                    p.mark_wait = p.wait;
                    p.mark_at = now;
                }
            }
        }
    }

    fn note_interval(&mut self) {
        let i = self.interval;
        self.stats.balance_ticks += 1;
        self.stats.interval_sum_ms += i.as_millis_f64();
        self.stats.min_seen = Some(self.stats.min_seen.map_or(i, |m| m.min(i)));
        self.stats.max_seen = Some(self.stats.max_seen.map_or(i, |m| m.max(i)));
    }
}

impl Policy for SpeedV1 {
    fn needs(&self) -> Needs {
        NEEDS
    }

    fn name(&self) -> &'static str {
        "speed-v1"
    }

    fn decide(&mut self, _topo: &Topology, w: &Window) -> Plan {
        let now = w.end;
        let mut moves = Vec::new();
        self.track(w, &mut moves);
        let wanted = self.observe_signals(w);
        if !self.started {
            self.started = true;
            for q in 0..self.queues.len() {
                let wake = self.jittered(now);
                self.queues[q].next_wake = wake;
            }
        } else {
            // Timers due within half an interval run now: fewer ticks, longer windows.
            let due = now + Nanos(self.interval.0 / 2);
            let global = self.queue_speeds(now);
            let mut slow_seen = false;
            let mut ran = false;
            for j in 0..self.queues.len() {
                if self.queues[j].next_wake > due {
                    continue;
                }
                ran = true;
                self.stats.rounds += 1;
                slow_seen |= self.balance(j, now, global, &mut moves);
                self.mark(j, now);
            }
            if ran {
                self.quiet_rounds = if slow_seen {
                    0
                } else {
                    self.quiet_rounds.saturating_add(1)
                };
                self.interval = match self.fixed {
                    Some(f) => f,
                    None if slow_seen => wanted,
                    None if self.quiet_rounds < QUIET_ROUNDS => wanted.max(self.interval),
                    None => Nanos((self.interval.0 as f64 * BACKOFF) as u64)
                        .clamp(wanted, self.cfg.max_interval),
                };
                self.note_interval();
                for j in 0..self.queues.len() {
                    if self.queues[j].next_wake <= due {
                        let wake = self.jittered(now);
                        self.queues[j].next_wake = wake;
                    }
                }
            }
        }
        let earliest = self.queues.iter().map(|q| q.next_wake).min().unwrap_or(now);
        let floor = Nanos(self.cfg.min_interval.0 / 4);
        Plan {
            slices: Vec::new(),
            moves,
            next_in: earliest.saturating_sub(now).max(floor),
            note: None,
        }
    }

    /// Speed's summary shape: this design had no rotation and no guard, so its pulls are
    /// reported as levelling moves and the pulls held by the post-migration block as
    /// back-offs.
    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Speed(Box::new(SpeedSummary {
            balance_interval_ms: self.interval.as_millis_f64(),
            interval_reason: s.reason.to_string(),
            interval_min_ms: s.min_seen.map(Nanos::as_millis_f64),
            interval_max_ms: s.max_seen.map(Nanos::as_millis_f64),
            interval_mean_ms: s.interval_sum_ms / s.balance_ticks.max(1) as f64,
            voluntary_switches_per_thread_s: self.vol_rate,
            involuntary_switches_per_thread_s: self.invol_rate,
            switches_counted: self.counted,
            timeslices_per_thread_s: self.slice_rate,
            rounds: s.rounds,
            rotating_rounds: 0,
            rotation_swaps: 0,
            levelling_moves: s.pulls,
            held_level_rounds: 0,
            backoffs: s.blocked,
            initial_placements: s.initial,
            released_to_linux: s.released,
            peer_hand_backs: 0,
            peers_apart_now: false,
            few_hand_backs: 0,
            few_now: false,
            sparse_hand_backs: 0,
            sparse_trials_lost: 0,
            rounds_budget_ticks: 0,
            rounds_budget_pct: 0.0,
            sparse_now: false,
            sparse_last: None,
            guard: None,
        }))
    }
}
