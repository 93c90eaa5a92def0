//! `handoff`: beyond the papers. Threads that hand locks to each other are placed in the
//! same domain, found as a balanced k-way partition of the measured who-wakes-whom graph.
//!
//! Shuffling groups threads by lock time, which works when threads that share a lock also
//! wait about as long as each other, and not when lock times carry no signal (several
//! mutexes with equal hold times: every thread waits alike). The graph says directly who
//! hands a lock to whom.
//!
//! ```text
//!  every interval (500 ms): the window's wake edges (Snapshot::wakes: the futex probe's
//!  waker → woken on Linux, lock hand-offs in the simulator)
//!     │  none measured ──► nothing moves ("no wake edges")
//!     ▼
//!  graph over the live threads: w(u, v) = edges u→v + v→u in the window
//!     │  hand-offs across domains under the current placement < 20/s ──► nothing moves
//!     ▼
//!  balanced partition of the heavy threads into K parts (one per domain, sizes differ
//!  by ≤ 1), the lower cut of:
//!     greedy growth + Kernighan–Lin,
//!     the current placement with half its threads swapped at random + Kernighan–Lin
//!  the light threads added, heaviest first: each to the part it hands off with most
//!  while that part stays within the mean load, else to the least loaded
//!     │  cut not below (1 − 20 %) of the current placement's ──► nothing moves
//!     ▼
//!  parts → domains with the fewest moves (grouping::Assignment); Move { why: HandOff }
//! ```
//!
//! **Why a perturbed start.** A graph measured under one placement favours it: spinners on
//! the releasing socket see the lock first, so threads already together hand off to each
//! other more than to the rest. Refined from the current placement itself, Kernighan–Lin
//! would mostly confirm it. Greedy growth does not look at the placement at all, and the
//! second start keeps only half of it; the current placement is then only the yardstick
//! the new partition must beat by 20 % (hysteresis: a graph with no structure, such as one
//! mutex shared by all, never beats its own placement by that much, so nothing moves).
//!
//! **Balance** is by thread count, as Shuffling's groups are: one part per domain, of
//! [`crate::grouping::equal_size`] threads. A thread that neither hands off nor runs
//! (no wake edge, under [`IDLE_UTIL`] of a CPU: a main thread in `join`) is left out of
//! the partition and stays where it is. Counted, it filled a part of its own: at `--level
//! core` on 2 cores the main thread of `workload spmd --threads 2` took one core's part,
//! and the two workers, which wake each other at every barrier, were put on the other,
//! one core for two busy threads (1.51–1.53 s for 1 s of work, Linux 1.01).
//!
//! A thread that runs but uses less than [`LIGHT`] (half) of what the busiest partitioned
//! thread uses is light: it takes no part's place either. Once the heavy threads are
//! partitioned, the light ones join, heaviest first, each the part it hands off with
//! most, as long as that part's load (the CPU its threads used) stays within the mean
//! over the parts; a light thread that hands off with no part that has room joins the
//! least loaded. Counted as a thread, a main thread that runs a little (10 % of a CPU,
//! say) filled a part as the idle one did, and the two workers went together onto the
//! other core; a helper thread that feeds one worker now rides with it where there is
//! room, and goes elsewhere where there is not. With threads that are all about as busy
//! (within 2×) every thread is heavy, and the parts are as before.
//!
//! ```
//! use threadbalance_model::{Level, Nanos, Topology};
//! use threadbalance_model::testutil::window;
//! use threadbalance_policy::{Policy, Settings, build};
//! let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let mut p = build("handoff", &Settings::new(Level::Package), &topo).unwrap();
//! // A window without wake edges (no probe): nothing moves, look again in 500 ms.
//! let plan = p.decide(&topo, &window(500, &[0.9, 0.9], &[0, 1]));
//! assert!(plan.moves.is_empty());
//! assert_eq!(plan.next_in, Nanos::from_millis(500));
//! let threadbalance_model::PolicySummary::Handoff(s) = p.summary() else { unreachable!() };
//! assert!(!s.wake_edges_measured);
//! ```

use crate::grouping::{Assignment, Placement, equal_size};
use crate::handoff_partition::{Graph, cut, partition};
use crate::rng::Rng;
use crate::{Needs, Policy, PolicyKind, Settings};

/// What handoff reads: the wake edges (who hands a lock to whom), not lock time.
pub const NEEDS: Needs = Needs {
    wake_edges: true,
    ..Needs::NOTHING
};
use threadbalance_model::{
    HandoffSummary, Level, Move, Nanos, Plan, PolicySummary, Reason, Target, Topology, Window,
};

/// The default interval between decisions (Shuffling's shuffle interval).
pub const INTERVAL: Nanos = Nanos::from_millis(500);
/// Hand-offs across domains per second below which placement is not worth changing. Low,
/// because on Linux the probe sees a hand-off only when the next holder slept in the
/// kernel: 2 threads per mutex on 2 cores with 20 µs sections (`workload locks --groups
/// 2`) give some 60 wake edges a second, where the simulator counts every hand-off (about
/// 10⁵ a second on `lock-groups`).
pub const MIN_CUT_PER_S: f64 = 20.0;
/// How much lower than the current placement's cut a new partition's must be.
pub const MIN_GAIN: f64 = 0.2;
/// A thread without wake edges that used less of a CPU than this over the window is idle:
/// it is left out of the partition (see "Balance").
pub const IDLE_UTIL: f64 = 0.05;
/// A partitioned thread that used less than this fraction of what the busiest one used is
/// light: it takes no part's place, and joins the parts once they are made (see
/// "Balance").
pub const LIGHT: f64 = 0.5;

/// What `handoff` did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HandoffStats {
    /// Decisions taken on a window with wake edges.
    pub checks: u64,
    /// Checks that moved threads.
    pub regroupings: u64,
    /// Threads moved.
    pub moves: u64,
    /// Checks with too few cross-domain hand-offs to act on.
    pub quiet: u64,
    /// Checks whose best partition did not beat the current placement by [`MIN_GAIN`].
    pub kept: u64,
    /// Fraction of hand-offs across domains at the last check (current placement).
    pub last_cut: Option<f64>,
    /// Hand-offs per second in the graph at the last check, across domains or not.
    pub last_rate: Option<f64>,
    /// Whether any window carried wake edges.
    pub measured: bool,
}

/// The `handoff` policy.
#[derive(Debug, Clone)]
pub struct Handoff {
    /// The level set, `None` for the policy's own ([`PolicyKind::default_level`]).
    level: Option<Level>,
    interval: Nanos,
    rng: Rng,
    placement: Placement,
    assignment: Assignment,
    stats: HandoffStats,
}

impl Handoff {
    /// `handoff` at `settings.level`, deciding every `settings.interval` (default
    /// [`INTERVAL`]), its random perturbation seeded by `settings.seed`.
    pub fn new(settings: &Settings) -> Handoff {
        Handoff {
            level: settings.level,
            interval: settings.interval.unwrap_or(INTERVAL),
            rng: Rng::new(settings.seed ^ 0x4A4D_0FF5),
            placement: Placement::new(),
            assignment: Assignment::new(),
            stats: HandoffStats::default(),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &HandoffStats {
        &self.stats
    }

    /// The window's wake edges as a graph over `window.threads` (by index); edges to
    /// threads no longer alive are left out.
    fn graph(window: &Window) -> Graph {
        let mut g = Graph::new(window.threads.len());
        let index = |k| window.threads.binary_search_by(|t| t.key.cmp(k)).ok();
        for e in &window.wakes {
            if let (Some(u), Some(v)) = (index(&e.waker), index(&e.woken)) {
                g.add(u, v, e.count as f64);
            }
        }
        g
    }

    /// `current` as a balanced start with half its threads swapped at random: a thread of
    /// each pair goes to the other's part, so sizes stay as they are.
    fn perturbed(&mut self, current: &[usize]) -> Vec<usize> {
        let mut start = current.to_vec();
        let n = start.len();
        for _ in 0..n / 2 {
            let a = self.rng.below(n as u64) as usize;
            let b = self.rng.below(n as u64) as usize;
            start.swap(a, b);
        }
        start
    }
}

/// The heavy vertices' parts (`part_heavy[j]` is vertex `heavy[j]`'s) with every other
/// vertex of `g` added, heaviest first (`util`), each to the part it has the most edge
/// weight to among those it leaves within the mean load (every vertex's `util` over `k`),
/// else to the least loaded part (ties: the lower index).
fn with_light(
    g: &Graph,
    util: &[f64],
    heavy: &[usize],
    part_heavy: &[usize],
    k: usize,
) -> Vec<usize> {
    let n = util.len();
    let mut part = vec![usize::MAX; n];
    let mut load = vec![0.0; k];
    for (&a, &p) in heavy.iter().zip(part_heavy) {
        part[a] = p;
        load[p] += util[a];
    }
    let mean = util.iter().sum::<f64>() / k as f64;
    let mut light: Vec<usize> = (0..n).filter(|&a| part[a] == usize::MAX).collect();
    light.sort_by(|&a, &b| util[b].total_cmp(&util[a]).then(a.cmp(&b)));
    for a in light {
        let mut to_part = vec![0.0; k];
        for (v, &pv) in part.iter().enumerate() {
            if pv < k {
                to_part[pv] += g.weight(a, v);
            }
        }
        let least = (0..k)
            .min_by(|&p, &q| load[p].total_cmp(&load[q]).then(p.cmp(&q)))
            .unwrap_or(0);
        let p = (0..k)
            .filter(|&p| to_part[p] > 0.0 && load[p] + util[a] <= mean + 1e-9)
            .max_by(|&p, &q| to_part[p].total_cmp(&to_part[q]).then(q.cmp(&p)))
            .unwrap_or(least);
        part[a] = p;
        load[p] += util[a];
    }
    part
}

/// `current[i]` (a domain, or `None`) turned into a balanced grouping over `k` parts: each
/// thread keeps its domain while that part has room, the rest fill the smallest parts.
fn balanced(current: &[Option<usize>], k: usize) -> Vec<usize> {
    let n = current.len();
    let mut room: Vec<usize> = (0..k).map(|g| equal_size(n, k, g)).collect();
    let mut part = vec![usize::MAX; n];
    for (i, c) in current.iter().enumerate() {
        if let Some(d) = c.filter(|&d| d < k && room[d] > 0) {
            part[i] = d;
            room[d] -= 1;
        }
    }
    for p in part.iter_mut().filter(|p| **p == usize::MAX) {
        let g = (0..k)
            .max_by_key(|&g| (room[g], std::cmp::Reverse(g)))
            .unwrap_or(0);
        *p = g;
        room[g] = room[g].saturating_sub(1);
    }
    part
}

impl Policy for Handoff {
    fn name(&self) -> &'static str {
        "handoff"
    }

    fn needs(&self) -> Needs {
        NEEDS
    }

    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan {
        let level = self
            .level
            .unwrap_or_else(|| PolicyKind::Handoff.default_level(topo));
        self.placement.retain_alive(&window.threads);
        let dt = window.duration();
        let k = topo.domains(level).len();
        if dt == Nanos::ZERO || !window.wakes_measured || window.threads.is_empty() || k < 2 {
            return Plan::wait(self.interval);
        }
        self.stats.measured = true;
        self.stats.checks += 1;
        let g = Self::graph(window);
        let current: Vec<Option<usize>> = window
            .threads
            .iter()
            .map(|t| self.placement.current(t, topo, level))
            .collect();
        // The current placement's cut, counting a thread of unknown domain as apart.
        let now: Vec<usize> = current.iter().map(|c| c.unwrap_or(usize::MAX)).collect();
        let (total, now_cut) = (g.total(), cut(&g, &now));
        let frac = if total > 0.0 { now_cut / total } else { 0.0 };
        self.stats.last_cut = Some(frac);
        let secs = dt.0 as f64 / 1e9;
        self.stats.last_rate = Some(total / secs);
        let per_s = now_cut / secs;
        if per_s < MIN_CUT_PER_S {
            self.stats.quiet += 1;
            return Plan::wait(self.interval);
        }
        // The threads partitioned: those that hand off or run (see "Balance").
        let active: Vec<usize> = (0..window.threads.len())
            .filter(|&i| g.degree(i) > 0.0 || window.threads[i].util >= IDLE_UTIL)
            .collect();
        let g = g.induced(&active);
        let current: Vec<Option<usize>> = active.iter().map(|&i| current[i]).collect();
        let n = active.len();
        // The heavy ones are partitioned, the light ones join them (see "Balance").
        let util: Vec<f64> = active
            .iter()
            .map(|&i| window.threads[i].util.max(0.0))
            .collect();
        let busiest = util.iter().copied().fold(0.0, f64::max);
        let heavy: Vec<usize> = (0..n).filter(|&a| util[a] >= LIGHT * busiest).collect();
        let current_heavy: Vec<Option<usize>> = heavy.iter().map(|&a| current[a]).collect();
        let sizes: Vec<usize> = (0..k).map(|p| equal_size(heavy.len(), k, p)).collect();
        let start = self.perturbed(&balanced(&current_heavy, k));
        let part_heavy = partition(&g.induced(&heavy), &sizes, Some(&start));
        let part = with_light(&g, &util, &heavy, &part_heavy, k);
        let new_cut = cut(&g, &part);
        if new_cut > (1.0 - MIN_GAIN) * now_cut {
            self.stats.kept += 1;
            return Plan::wait(self.interval);
        }
        let domain_of = self.assignment.fewest_moves(k, &part, &current).to_vec();
        let mut moves = Vec::new();
        for (a, &i) in active.iter().enumerate() {
            let t = &window.threads[i];
            let d = domain_of.get(part[a]).copied().unwrap_or(0);
            let placed = self.placement.get(&t.key).is_some();
            if !placed || current[a] != Some(d) {
                moves.push(Move {
                    thread: t.key,
                    to: Target::Domain { level, index: d },
                    why: Reason::HandOff {
                        group: d,
                        cut: frac,
                    },
                });
            }
            self.placement.set(t.key, d);
        }
        self.stats.regroupings += 1;
        self.stats.moves += moves.len() as u64;
        let note = format!(
            "hand-offs across domains {:.1} % → {:.1} %: regrouped {n} threads, moved {}",
            frac * 100.0,
            if total > 0.0 {
                new_cut / total * 100.0
            } else {
                0.0
            },
            moves.len()
        );
        Plan {
            slices: Vec::new(),
            moves,
            next_in: self.interval,
            note: Some(note),
        }
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Handoff(HandoffSummary {
            wake_edges_measured: s.measured,
            regroupings: s.regroupings,
            moves: s.moves,
            checks: s.checks,
            quiet_checks: s.quiet,
            kept_placement: s.kept,
            last_cross_domain_pct: s.last_cut.map(|c| c * 100.0),
            last_handoffs_per_s: s.last_rate,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{key, topo, window_of};
    use threadbalance_model::{ThreadKey, WakeEdge};

    /// A 500 ms window of `n` threads (tid 1..=n of process 1, running half the time) on
    /// `cpus`, with the given wake edges `(waker tid, woken tid, count)`.
    fn with_edges(cpus: &[u32], edges: &[(i32, i32, u64)]) -> Window {
        let threads: Vec<(ThreadKey, f64, u32)> = cpus
            .iter()
            .enumerate()
            .map(|(i, &c)| (key(1, i as i32 + 1), 0.5, c))
            .collect();
        let mut w = window_of(500, &threads);
        w.wakes_measured = true;
        w.wakes = edges
            .iter()
            .map(|&(a, b, count)| WakeEdge {
                waker: key(1, a),
                woken: key(1, b),
                count,
            })
            .collect();
        w
    }

    fn domain(m: &Move) -> usize {
        match m.to {
            Target::Domain { index, .. } => index,
            _ => usize::MAX,
        }
    }

    #[test]
    fn handoff_pairs_threads_that_hand_locks_to_each_other() {
        // Two packages of two CPUs. Threads 1 and 3 share a mutex (1000 hand-offs each way
        // in 500 ms), as do 2 and 4; they run 1, 2 on package 0 and 3, 4 on package 1, so
        // every hand-off crosses: 4000 of 4000, 8000/s ≥ 20/s. The partition {1, 3}
        // {2, 4} cuts 0 ≤ 80 % of 4000: regroup. Either part keeps one thread where it is
        // whichever package it gets (a tie); every thread gets a move, as none was placed.
        let t = topo(2, 1, 2, 1);
        let mut p = Handoff::new(&Settings::new(Level::Package));
        let w = with_edges(
            &[0, 1, 2, 3],
            &[(1, 3, 1000), (3, 1, 1000), (2, 4, 1000), (4, 2, 1000)],
        );
        let plan = p.decide(&t, &w);
        let got: Vec<(i32, usize)> = plan
            .moves
            .iter()
            .map(|m| (m.thread.tid.0, domain(m)))
            .collect();
        assert_eq!(got.len(), 4);
        let (d1, d2) = (got[0].1, got[1].1);
        assert_ne!(d1, d2);
        assert_eq!(got, [(1, d1), (2, d2), (3, d1), (4, d2)]);
        assert!(
            matches!(plan.moves[0].why, Reason::HandOff { group, cut } if group == d1 && cut == 1.0)
        );
        assert_eq!(p.stats().regroupings, 1);
        // Measured again under the new placement: nothing crosses, so the check is quiet
        // and nothing moves.
        let cpu = |d: usize, i: u32| d as u32 * 2 + i;
        let w = with_edges(
            &[cpu(d1, 0), cpu(d2, 0), cpu(d1, 1), cpu(d2, 1)],
            &[(1, 3, 1000), (3, 1, 1000), (2, 4, 1000), (4, 2, 1000)],
        );
        assert!(p.decide(&t, &w).moves.is_empty());
        assert_eq!(p.stats().quiet, 1);
        assert_eq!(p.stats().last_cut, Some(0.0));
    }

    #[test]
    fn handoff_keeps_placement_of_one_shared_lock() {
        // One mutex passed around all four threads evenly (every ordered pair 300): any
        // balanced split cuts the 4 pairs across it, 4 × 600 = 2400 of 3600, the same as
        // the current one: not 20 % lower, so nothing moves.
        let t = topo(2, 1, 2, 1);
        let mut p = Handoff::new(&Settings::new(Level::Package));
        let mut edges = Vec::new();
        for a in 1..=4 {
            for b in 1..=4 {
                if a != b {
                    edges.push((a, b, 300));
                }
            }
        }
        let plan = p.decide(&t, &with_edges(&[0, 1, 2, 3], &edges));
        assert!(plan.moves.is_empty());
        assert_eq!(p.stats().kept, 1);
        assert!(
            p.stats()
                .last_cut
                .is_some_and(|c| (c - 2400.0 / 3600.0).abs() < 1e-9)
        );
    }

    /// `--level core` on 2 cores: a main thread (tid 1) that used `main_util` of a CPU,
    /// and workers 2 and 3 on cores 0 and 1 that wake each other at every barrier (100 a
    /// second, all across). Returns what `handoff` decided and its stats.
    fn main_and_two_workers(main_util: f64) -> (Plan, HandoffStats) {
        let t = topo(1, 1, 2, 1);
        let mut p = Handoff::new(&Settings::new(Level::Core));
        let threads = [
            (key(1, 1), main_util, 0),
            (key(1, 2), 1.0, 0),
            (key(1, 3), 1.0, 1),
        ];
        let mut w = window_of(500, &threads);
        w.wakes_measured = true;
        w.wakes = vec![
            WakeEdge {
                waker: key(1, 2),
                woken: key(1, 3),
                count: 25,
            },
            WakeEdge {
                waker: key(1, 3),
                woken: key(1, 2),
                count: 25,
            },
        ];
        let plan = p.decide(&t, &w);
        (plan, p.stats().clone())
    }

    #[test]
    fn handoff_leaves_an_idle_main_thread_out_of_the_parts() {
        // The main thread sleeps in `join`. Counted, it filled one part and the two
        // workers were put together on the other core; left out, the workers make two
        // parts of one, which cut what the current placement cuts: nothing moves.
        let (plan, stats) = main_and_two_workers(0.0);
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        assert_eq!(stats.kept, 1);
    }

    #[test]
    fn handoff_leaves_a_light_main_thread_out_of_the_part_sizes() {
        // The main thread runs 10 % of a CPU (over IDLE_UTIL: it is partitioned). Counted
        // as a thread it filled one core's part and the two workers, 1.0 each, were put
        // together on the other (the cut falls from 50 to 0). Light (under half of 1.0),
        // it takes no part's place: the workers make two parts of one, which cut what the
        // current placement cuts, and nothing moves.
        let (plan, stats) = main_and_two_workers(0.1);
        assert!(plan.moves.is_empty(), "{:?}", plan.moves);
        assert_eq!(stats.kept, 1);
    }

    #[test]
    fn handoff_puts_a_light_thread_with_its_partner_only_where_there_is_room() {
        // Two cores. Heavy threads 1 and 2 (1.0 each) run on cores 0 and 1 and never hand
        // off to each other; light threads 3 and 4 (0.4 each) both feed thread 1 (100
        // hand-offs each way, 200 a pair) and run on core 1, so 400 hand-offs cross. Mean
        // load (1 + 1 + 0.4 + 0.4) / 2 = 1.4: thread 3 joins thread 1 (1.4), thread 4
        // would take that core to 1.8 and joins the least loaded, thread 2's (1.4). The
        // cut falls from 400 to 200. (Counted as threads, the four make two parts of two with
        // the same cut: the rule that a light thread goes where there is room is what this
        // checks, not a difference from the count.)
        let t = topo(1, 1, 2, 1);
        let mut p = Handoff::new(&Settings::new(Level::Core));
        let threads = [
            (key(1, 1), 1.0, 0),
            (key(1, 2), 1.0, 1),
            (key(1, 3), 0.4, 1),
            (key(1, 4), 0.4, 1),
        ];
        let mut w = window_of(500, &threads);
        w.wakes_measured = true;
        for light in [3, 4] {
            for (a, b) in [(1, light), (light, 1)] {
                w.wakes.push(WakeEdge {
                    waker: key(1, a),
                    woken: key(1, b),
                    count: 100,
                });
            }
        }
        let plan = p.decide(&t, &w);
        let to: Vec<(ThreadKey, usize)> =
            plan.moves.iter().map(|m| (m.thread, domain(m))).collect();
        // Threads 1 and 3 on core 0, threads 2 and 4 on core 1 (each thread is confined
        // to its core, as at every first regrouping; only thread 3 changes core).
        let want: Vec<(ThreadKey, usize)> = [(1, 0), (2, 1), (3, 0), (4, 1)]
            .iter()
            .map(|&(tid, d)| (key(1, tid), d))
            .collect();
        assert_eq!(to, want, "{:?}", plan.moves);
    }

    #[test]
    fn handoff_ignores_rare_hand_offs() {
        // 8 crossing hand-offs in 500 ms: 16/s < 20/s.
        let t = topo(2, 1, 2, 1);
        let mut p = Handoff::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &with_edges(&[0, 1, 2, 3], &[(1, 3, 4), (3, 1, 4)]));
        assert!(plan.moves.is_empty());
        assert_eq!(p.stats().quiet, 1);
    }

    #[test]
    fn balanced_keeps_domains_with_room_and_fills_the_rest() {
        // 5 threads, 2 parts of sizes 3 and 2. Current: 0 0 0 0 ?: the fourth thread of
        // domain 0 finds no room and, with the unknown one, fills part 1.
        let got = balanced(&[Some(0), Some(0), Some(0), Some(0), None], 2);
        assert_eq!(got, [0, 0, 0, 1, 1]);
    }

    #[test]
    fn handoff_registry_builds_it() {
        let t = topo(2, 1, 2, 1);
        let p = crate::build("handoff", &Settings::new(Level::Package), &t).unwrap();
        assert_eq!(p.name(), "handoff");
        assert!(p.needs().wake_edges && !p.needs().lock_time);
        assert!(
            !crate::build("tumbler", &Settings::new(Level::Package), &t)
                .unwrap()
                .needs()
                .wake_edges
        );
    }
}
