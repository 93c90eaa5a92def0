//! `numa-<selection>`: the inter-node balancer of Chiang & Su (Appl. Sci. 2021), in user
//! space. When NUMA nodes are imbalanced it moves threads from the busiest node to the
//! idlest, one at a time, and the *selection* decides which thread: Linux's First-Fit, the
//! memory-aware TM, MB and BCE, or the thread-aware Exclusivity, with or without the
//! enhanced procedure that keeps threads near their group leader (see [`selection`]).
//! Inside a node Linux balances: a moved thread may run on any CPU of its new node.
//!
//! ```text
//!  Window ─► node of each thread (where we placed it, else its last CPU)
//!         ─► load per node: runnable threads (or summed utilization), scaled to equal size
//!         ─► busiest b, idlest i: L_b − L_i > 1 thread and L_b > 1.25·L_i?
//!              yes ─► RunQueue { src: b, dst: i, threads runnable on b, groups }
//!                     ─► Selection::select ─► Move { thread, to: node i, NumaBalance }
//!                     ─► update loads and the group's thread distribution, repeat
//!              no  ─► done (or 8 moves this tick)
//! ```
//!
//! * **Thread group** = process; **group leader** = the thread whose tid is the pid.
//! * **Node of a thread** = the node we last placed it on, else the node of its last CPU.
//! * **`RSS_p(i)`** = the process's resident bytes on node `i` (`Window::memory`, from
//!   `numa_maps`); a process with no memory sample has zero everywhere, so the memory-aware
//!   selections fall back to run-queue order for it.
//! * **`thrd_nr_i`** = the process's threads (runnable or not) whose node is `i`.
//! * **Run queue** = the runnable threads on the busiest node, in [`ThreadKey`] order (pid,
//!   then tid), which decides ties.
//!
//! A thread is *runnable* when its state at the end of the window is `R` or it ran at least
//! 5 % of the window ([`ACTIVE_UTIL`]): the state alone is an instant and misses threads that
//! ran and just blocked. With [`LoadMetric::Runnable`] (the default) each runnable thread
//! weighs 1; with [`LoadMetric::Util`] a thread with utilization ≥ 5 % weighs its
//! utilization. Node loads are scaled to the mean node size (`L'_k = L_k · C̄ / C_k` for `C_k`
//! CPUs), so nodes of unequal size compare fairly; on equal nodes `L' = L`.
//!
//! Balancing starts when `L'_b − L'_i > min_imbalance` (1 thread) **and**
//! `L'_b > (1 + imbalance_pct) · L'_i` (25 %, Linux's `imbalance_pct` of 125 for NUMA
//! domains). A move is made only if it shrinks the gap (`|d − w(s_b + s_i)| < d` for a
//! thread of weight `w`), so a balanced machine never sees a thread go back and forth.
//!
//! ```
//! use threadbalance_model::testutil::key;
//! use threadbalance_policy::numa_select::{Candidate, Group, RunQueue, Selection};
//! use threadbalance_model::Pid;
//! // Process 7 has its leader on node 1 and two threads on node 0.
//! let mut g = Group::new(Pid(7), 2);
//! g.leader_node = Some(1);
//! g.threads_per_node = vec![2, 1];
//! let candidates = [Candidate { key: key(7, 8), group: 0 }, Candidate { key: key(7, 9), group: 0 }];
//! let rq = RunQueue { src: 0, dst: 1, candidates: &candidates, groups: &[g] };
//! // Its leader is on the destination: Excl moves thread 8 at once.
//! let chosen = Selection::Excl.select(&rq).choice.unwrap();
//! assert_eq!(chosen.key.tid.0, 8);
//! ```

pub mod selection;

pub use selection::{Candidate, Choice, Counts, Group, RunQueue, Score, Selected, Selection, Why};

use crate::{Policy, PolicyError, Settings};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use threadbalance_model::{
    Level, Move, Nanos, Pid, Plan, Reason, Target, ThreadKey, ThreadState, Topology, Window,
};

/// How often the balancer looks by default: 200 ms, between Linux's NUMA-domain balancing
/// intervals and the rarer per-node memory samples.
pub const NUMA_INTERVAL: Nanos = Nanos::from_millis(200);

/// Utilization (fraction of the window) from which a thread counts as runnable even if it
/// was asleep at the instant of the sample.
pub const ACTIVE_UTIL: f64 = 0.05;

/// What a node's load counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadMetric {
    /// Runnable threads (state `R`, or utilization ≥ [`ACTIVE_UTIL`]), each weighing 1, as
    /// Linux's run-queue lengths.
    #[default]
    Runnable,
    /// Summed utilization of threads with utilization ≥ [`ACTIVE_UTIL`] (CPUs' worth).
    Util,
}

/// The balancer's settings (part of [`Settings`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NumaSettings {
    /// What node load counts.
    pub load: LoadMetric,
    /// Balance only when busiest − idlest exceeds this (threads, or CPUs' worth with
    /// [`LoadMetric::Util`]). Default 1.
    pub min_imbalance: f64,
    /// …and the busiest exceeds the idlest by more than this fraction. Default 0.25.
    pub imbalance_pct: f64,
    /// At most this many moves per tick. Default 8.
    pub max_moves: u32,
}

impl Default for NumaSettings {
    fn default() -> NumaSettings {
        NumaSettings {
            load: LoadMetric::Runnable,
            min_imbalance: 1.0,
            imbalance_pct: 0.25,
            max_moves: 8,
        }
    }
}

/// Builds `numa-<selection>` for its policy name (`"numa-excl"`).
pub fn build(
    name: &str,
    settings: &Settings,
    topo: &Topology,
) -> Result<Box<dyn Policy>, PolicyError> {
    match Selection::from_name(name).filter(|s| s.policy_name() == name) {
        Some(s) => Ok(Box::new(NumaBalance::new(s, settings, topo)?)),
        None => Err(PolicyError::Unknown {
            name: name.to_string(),
            known: crate::names().join(", "),
        }),
    }
}

/// What the balancer did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumaTotals {
    /// Ticks on which nodes were imbalanced.
    pub imbalanced_ticks: u64,
    /// Threads moved between nodes.
    pub moves: u64,
    /// Moves made at once because the thread's leader was on the destination.
    pub leader_on_destination: u64,
    /// Selections that found no thread allowed to move.
    pub nothing_movable: u64,
    /// Candidates examined by the selections.
    pub examined: u64,
    /// Metric evaluations made by the selections.
    pub evaluated: u64,
}

/// The `numa-<selection>` policy: balances runnable threads between NUMA nodes.
#[derive(Debug, Clone)]
pub struct NumaBalance {
    selection: Selection,
    cfg: NumaSettings,
    interval: Nanos,
    /// The node (dense index) we last placed each thread on.
    placed: BTreeMap<ThreadKey, usize>,
    said_one_node: bool,
    stuck: bool,
    totals: NumaTotals,
}

impl NumaBalance {
    /// The balancer with `selection`, checking `settings.numa` (the level setting does not
    /// apply: it always balances between NUMA nodes).
    pub fn new(
        selection: Selection,
        settings: &Settings,
        topo: &Topology,
    ) -> Result<NumaBalance, PolicyError> {
        let _ = topo;
        let cfg = settings.numa.clone();
        let bad = |why: String| PolicyError::Invalid {
            policy: selection.policy_name(),
            why,
        };
        if !(cfg.min_imbalance.is_finite() && cfg.min_imbalance >= 0.0) {
            return Err(bad(format!(
                "minimum imbalance {} must be a number ≥ 0",
                cfg.min_imbalance
            )));
        }
        if !(cfg.imbalance_pct.is_finite() && cfg.imbalance_pct >= 0.0) {
            return Err(bad(format!(
                "imbalance fraction {} must be a number ≥ 0",
                cfg.imbalance_pct
            )));
        }
        if cfg.max_moves == 0 {
            return Err(bad("at most 0 moves per tick would never balance".into()));
        }
        let interval = settings.interval.unwrap_or(NUMA_INTERVAL);
        if interval == Nanos::ZERO {
            return Err(bad("interval must be positive".into()));
        }
        Ok(NumaBalance {
            selection,
            cfg,
            interval,
            placed: BTreeMap::new(),
            said_one_node: false,
            stuck: false,
            totals: NumaTotals::default(),
        })
    }

    /// Its selection.
    pub fn selection(&self) -> Selection {
        self.selection
    }

    /// What it did so far.
    pub fn totals(&self) -> NumaTotals {
        self.totals
    }

    /// Whether `busiest` exceeds `idlest` by more than both thresholds (scaled loads).
    fn imbalanced(&self, busiest: f64, idlest: f64) -> bool {
        busiest - idlest > self.cfg.min_imbalance
            && busiest > (1.0 + self.cfg.imbalance_pct) * idlest
    }
}

/// The balancer's view of one window: groups, run queues and loads per node.
struct State {
    groups: Vec<Group>,
    /// Runnable threads on each node, in key order.
    queues: Vec<Vec<Candidate>>,
    /// The weight of each queued thread, parallel to `queues`.
    weights: Vec<Vec<f64>>,
    /// Summed weight per node.
    load: Vec<f64>,
}

impl State {
    fn build(
        topo: &Topology,
        w: &Window,
        placed: &BTreeMap<ThreadKey, usize>,
        metric: LoadMetric,
    ) -> State {
        let domains = topo.domains(Level::Node);
        let n = domains.len();
        let mut st = State {
            groups: Vec::new(),
            queues: vec![Vec::new(); n],
            weights: vec![Vec::new(); n],
            load: vec![0.0; n],
        };
        let mut index: BTreeMap<Pid, usize> = BTreeMap::new();
        for t in &w.threads {
            let node = placed
                .get(&t.key)
                .copied()
                .or_else(|| topo.domain_of(t.last_cpu, Level::Node));
            let Some(node) = node.filter(|&k| k < n) else {
                continue;
            };
            let next = st.groups.len();
            let g = *index.entry(t.key.pid).or_insert(next);
            if g == next {
                st.groups.push(Group::new(t.key.pid, n));
            }
            let group = &mut st.groups[g];
            group.threads_per_node[node] += 1;
            if t.key.is_leader() {
                group.leader_node = Some(node);
            }
            let weight = match metric {
                LoadMetric::Runnable
                    if t.state == ThreadState::Running || t.util >= ACTIVE_UTIL =>
                {
                    1.0
                }
                LoadMetric::Util if t.util >= ACTIVE_UTIL => t.util,
                _ => continue,
            };
            st.queues[node].push(Candidate {
                key: t.key,
                group: g,
            });
            st.weights[node].push(weight);
            st.load[node] += weight;
        }
        for g in &mut st.groups {
            let mem = w
                .memory
                .binary_search_by_key(&g.pid, |m| m.pid)
                .ok()
                .and_then(|i| w.memory.get(i))
                .or_else(|| w.memory.iter().find(|m| m.pid == g.pid));
            if let Some(m) = mem {
                for (k, d) in domains.iter().enumerate() {
                    g.rss[k] = m.on_node(d.node);
                }
                g.rss_total = m.total();
            }
        }
        st
    }
}

impl Policy for NumaBalance {
    fn name(&self) -> &'static str {
        self.selection.policy_name()
    }

    fn decide(&mut self, topo: &Topology, w: &Window) -> Plan {
        let domains = topo.domains(Level::Node);
        if domains.len() < 2 {
            let mut plan = Plan::wait(self.interval);
            if !self.said_one_node {
                self.said_one_node = true;
                plan.note = Some(format!(
                    "one NUMA node ({} CPUs): nothing to balance between nodes; Linux balances \
                     inside it",
                    topo.cpus().len()
                ));
            }
            return plan;
        }
        // Forget threads that are gone; a reused tid has another start time, another key.
        self.placed.retain(|k, _| w.thread(k).is_some());
        if w.duration() == Nanos::ZERO {
            return Plan::wait(self.interval);
        }
        let mut st = State::build(topo, w, &self.placed, self.cfg.load);
        let n = domains.len();
        let mean_cpus = domains.iter().map(|d| d.cpus.len()).sum::<usize>() as f64 / n as f64;
        let scale: Vec<f64> = domains
            .iter()
            .map(|d| mean_cpus / d.cpus.len().max(1) as f64)
            .collect();
        let scaled = |load: &[f64], k: usize| load[k] * scale[k];
        let before: Vec<f64> = (0..n).map(|k| scaled(&st.load, k)).collect();
        let mut exhausted = vec![false; n];
        let mut moves: Vec<Move> = Vec::new();
        let mut was_imbalanced = false;
        let mut stuck_on: Option<(usize, Counts)> = None;
        while moves.len() < self.cfg.max_moves as usize {
            // Busiest among nodes that still have a thread to give; idlest overall. Ties go
            // to the lower node index.
            let loads: Vec<f64> = (0..n).map(|k| scaled(&st.load, k)).collect();
            let mut busiest: Option<usize> = None;
            let mut idlest: Option<usize> = None;
            for (k, &l) in loads.iter().enumerate() {
                if !exhausted[k] && busiest.is_none_or(|a| l > loads[a]) {
                    busiest = Some(k);
                }
                if idlest.is_none_or(|a| l < loads[a]) {
                    idlest = Some(k);
                }
            }
            let (Some(b), Some(i)) = (busiest, idlest) else {
                break;
            };
            let (lb, li) = (scaled(&st.load, b), scaled(&st.load, i));
            if b == i || !self.imbalanced(lb, li) {
                break;
            }
            was_imbalanced = true;
            let rq = RunQueue {
                src: b,
                dst: i,
                candidates: &st.queues[b],
                groups: &st.groups,
            };
            let sel = self.selection.select(&rq);
            self.totals.examined += u64::from(sel.counts.examined);
            self.totals.evaluated += u64::from(sel.counts.evaluated);
            let Some(choice) = sel.choice else {
                self.totals.nothing_movable += 1;
                stuck_on = Some((b, sel.counts));
                exhausted[b] = true;
                continue;
            };
            let weight = st.weights[b][choice.index];
            let d = lb - li;
            if (d - weight * (scale[b] + scale[i])).abs() >= d {
                // Moving it would not narrow the gap (a heavy thread under `Util`).
                exhausted[b] = true;
                continue;
            }
            let c = st.queues[b].remove(choice.index);
            st.weights[b].remove(choice.index);
            st.load[b] -= weight;
            st.load[i] += weight;
            // The moved thread is not a candidate again this tick: no back and forth.
            if let Some(g) = st.groups.get_mut(c.group) {
                g.threads_per_node[b] = g.threads_per_node[b].saturating_sub(1);
                g.threads_per_node[i] += 1;
                if c.key.is_leader() {
                    g.leader_node = Some(i);
                }
            }
            if choice.why == Why::LeaderOnDestination {
                self.totals.leader_on_destination += 1;
            }
            self.placed.insert(c.key, i);
            moves.push(Move {
                thread: c.key,
                to: Target::Domain {
                    level: Level::Node,
                    index: i,
                },
                why: Reason::NumaBalance {
                    from: domains[b].node,
                    to: domains[i].node,
                },
            });
        }
        if was_imbalanced {
            self.totals.imbalanced_ticks += 1;
        }
        self.totals.moves += moves.len() as u64;
        let mut plan = Plan::wait(self.interval);
        let fmt_loads = |v: &[f64]| {
            let mut s = String::from("[");
            for (k, x) in v.iter().enumerate() {
                let sep = if k == 0 { "" } else { ", " };
                let _ = write!(s, "{sep}{x:.1}");
            }
            s.push(']');
            s
        };
        if !moves.is_empty() {
            let after: Vec<f64> = (0..n).map(|k| scaled(&st.load, k)).collect();
            plan.note = Some(format!(
                "{}: moved {} thread{} between nodes; node loads {} → {}",
                self.name(),
                moves.len(),
                if moves.len() == 1 { "" } else { "s" },
                fmt_loads(&before),
                fmt_loads(&after),
            ));
            self.stuck = false;
        } else if let Some((b, c)) = stuck_on {
            if !self.stuck {
                plan.note = Some(format!(
                    "{}: node {} is the busiest (loads {}) but none of its threads may move: \
                     {} group leader{}, {} with their leader on that node",
                    self.name(),
                    domains[b].node,
                    fmt_loads(&before),
                    c.skipped_leaders,
                    if c.skipped_leaders == 1 { "" } else { "s" },
                    c.skipped_leader_on_source,
                ));
            }
            self.stuck = true;
        } else {
            self.stuck = false;
        }
        plan.moves = moves;
        plan
    }

    fn summary(&self) -> Vec<(String, String)> {
        let t = &self.totals;
        vec![
            (
                "numa imbalanced ticks".into(),
                t.imbalanced_ticks.to_string(),
            ),
            ("numa moves".into(), t.moves.to_string()),
            (
                "numa moves with leader on destination".into(),
                t.leader_on_destination.to_string(),
            ),
            (
                "numa selections without a movable thread".into(),
                t.nothing_movable.to_string(),
            ),
            ("numa candidates examined".into(), t.examined.to_string()),
            ("numa metric evaluations".into(), t.evaluated.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{key, topo, window_of};
    use threadbalance_model::{CpuId, NodeId, ProcessMemory};

    /// A thread of the test machines: its key, utilization and CPU.
    type T = (ThreadKey, f64, u32);

    fn policy(s: Selection, topo: &Topology) -> NumaBalance {
        NumaBalance::new(s, &Settings::new(Level::Node), topo).unwrap()
    }

    /// Runnable threads per node, by last CPU.
    fn per_node(topo: &Topology, threads: &[T]) -> Vec<u32> {
        let mut v = vec![0; topo.domains(Level::Node).len()];
        for &(_, u, c) in threads {
            if u >= ACTIVE_UTIL {
                v[topo.domain_of(CpuId(c), Level::Node).unwrap()] += 1;
            }
        }
        v
    }

    /// One tick: decide on a 100 ms window, then apply the moves by putting each moved
    /// thread on the first CPU of its node (when `follow` is set; else its last CPU lags).
    fn tick(p: &mut NumaBalance, topo: &Topology, threads: &mut [T], follow: bool) -> Plan {
        let w = window_of(100, threads);
        let plan = p.decide(topo, &w);
        if follow {
            for m in &plan.moves {
                let Target::Domain { index, .. } = m.to else {
                    panic!("numa moves target nodes");
                };
                let cpu = topo.domains(Level::Node)[index].cpus.first().unwrap().0;
                for t in threads.iter_mut().filter(|t| t.0 == m.thread) {
                    t.2 = cpu;
                }
            }
        }
        plan
    }

    /// Four nodes of two CPUs (0-1, 2-3, 4-5, 6-7). Process 10 has its leader on node 1 and
    /// six threads on node 0; process 20 its leader on node 2 and six threads on node 0.
    /// Loads: node 0 = 12, node 1 = 1, node 2 = 1, node 3 = 0; 14 in all.
    fn crowded_node0() -> (Topology, Vec<T>) {
        let mut threads = vec![(key(10, 10), 1.0, 2), (key(20, 20), 1.0, 4)];
        for i in 0..6 {
            threads.push((key(10, 11 + i), 1.0, (i % 2) as u32));
            threads.push((key(20, 21 + i), 1.0, (i % 2) as u32));
        }
        (topo(4, 1, 2, 1), threads)
    }

    #[test]
    fn numa_balance_one_node_machine_says_nothing_to_balance_once() {
        let t = topo(1, 1, 4, 1);
        for s in Selection::ALL {
            let mut p = policy(s, &t);
            let mut threads = vec![
                (key(1, 1), 1.0, 0),
                (key(1, 2), 1.0, 0),
                (key(1, 3), 1.0, 0),
            ];
            let first = tick(&mut p, &t, &mut threads, true);
            assert!(first.moves.is_empty());
            let note = first.note.unwrap();
            assert!(note.contains("nothing to balance between nodes"), "{note}");
            let second = tick(&mut p, &t, &mut threads, true);
            assert!(second.moves.is_empty() && second.note.is_none());
            assert_eq!(second.next_in, NUMA_INTERVAL);
        }
    }

    #[test]
    fn numa_balance_converges_and_then_stops_under_every_selection() {
        for s in Selection::ALL {
            for follow in [true, false] {
                let (t, mut threads) = crowded_node0();
                let mut p = policy(s, &t);
                let mut moved = Vec::new();
                for _ in 0..10 {
                    moved.push(tick(&mut p, &t, &mut threads, follow).moves.len());
                }
                // 14 runnable threads on 4 nodes: 12, 1, 1, 0 → 4, 4, 3, 3 (in some order)
                // takes 8 moves, all in the first tick; then nothing ever moves again.
                let w = window_of(100, &threads);
                let st = State::build(&t, &w, &p.placed, LoadMetric::Runnable);
                let mut loads: Vec<u32> = st.load.iter().map(|&l| l as u32).collect();
                loads.sort_unstable();
                assert_eq!(loads, vec![3, 3, 4, 4], "{} follow={follow}", s.name());
                let total: usize = moved.iter().sum();
                assert_eq!(moved[0], 8, "{}: {moved:?}", s.name());
                assert_eq!(total, 8, "{}: {moved:?}", s.name());
                if follow {
                    assert_eq!(per_node(&t, &threads).iter().sum::<u32>(), 14);
                }
            }
        }
    }

    #[test]
    fn numa_balance_caps_moves_per_tick() {
        // Twenty threads of process 1 (leader asleep on node 1) on node 0 of two: 20 vs 0.
        // Tick 1: 8 moves (the cap) → 12 vs 8. Tick 2: 12 − 8 = 4 > 1 and 12 > 1.25 · 8 = 10:
        // one move → 11 vs 9; now 11 < 1.25 · 9 = 11.25: balanced enough, as Linux's
        // imbalance_pct of 125 would say. Then nothing.
        let t = topo(2, 1, 4, 1);
        let mut threads: Vec<T> = (0..20)
            .map(|i| (key(1, 2 + i), 1.0, (i % 4) as u32))
            .collect();
        threads.push((key(1, 1), 0.0, 4));
        for s in Selection::ALL {
            let mut th = threads.clone();
            let mut p = policy(s, &t);
            let moved: Vec<usize> = (0..4)
                .map(|_| tick(&mut p, &t, &mut th, true).moves.len())
                .collect();
            assert_eq!(moved, vec![8, 1, 0, 0], "{}", s.name());
            assert_eq!(per_node(&t, &th), vec![11, 9]);
        }
    }

    #[test]
    fn numa_balance_balanced_machine_never_moves() {
        // 2, 2, 2, 1 on four nodes (difference 1), and 8 vs 7 on two nodes (difference 1,
        // 8 < 1.25 · 7): both are balanced by the thresholds.
        let four = topo(4, 1, 2, 1);
        let cpus4 = [0, 1, 2, 3, 4, 5, 6];
        let two = topo(2, 1, 4, 1);
        let cpus2: Vec<u32> = (0..15)
            .map(|i| if i < 8 { i % 4 } else { 4 + i % 4 })
            .collect();
        for s in Selection::ALL {
            for (t, cpus) in [(&four, &cpus4[..]), (&two, &cpus2[..])] {
                let mut threads: Vec<T> = cpus
                    .iter()
                    .enumerate()
                    .map(|(i, &c)| (key(1, 2 + i as i32), 1.0, c))
                    .collect();
                let mut p = policy(s, t);
                for _ in 0..5 {
                    let plan = tick(&mut p, t, &mut threads, true);
                    assert!(plan.moves.is_empty() && plan.note.is_none(), "{}", s.name());
                }
                assert_eq!(p.totals().imbalanced_ticks, 0);
            }
        }
    }

    #[test]
    fn numa_balance_enhanced_never_moves_a_leader_and_moves_threads_of_destination_leaders() {
        // Two nodes of four CPUs. Process 1: leader and five threads on node 0. Process 2:
        // leader asleep on node 1 (CPU 4), two threads on node 0. Loads 8 vs 0.
        let t = topo(2, 1, 4, 1);
        let mut base: Vec<T> = vec![
            (key(2, 2), 0.0, 4),
            (key(2, 30), 1.0, 2),
            (key(2, 31), 1.0, 3),
        ];
        for i in 0..6 {
            base.push((key(1, 1 + i), 1.0, (i % 4) as u32));
        }
        for s in [Selection::Excl, Selection::MbPlus] {
            let mut threads = base.clone();
            let mut p = policy(s, &t);
            let plan = tick(&mut p, &t, &mut threads, true);
            // Threads 30 and 31 go at once (their leader is on node 1); process 1's threads
            // are skipped (leader on the source) and its leader is never moved: 6 vs 2 stays.
            let tids: Vec<i32> = plan.moves.iter().map(|m| m.thread.tid.0).collect();
            assert_eq!(tids, vec![30, 31], "{}", s.name());
            assert_eq!(p.totals().leader_on_destination, 2);
            assert_eq!(p.totals().evaluated, 0);
            let note = plan.note.unwrap();
            assert!(note.contains("moved 2 threads"), "{note}");
            let again = tick(&mut p, &t, &mut threads, true);
            assert!(again.moves.is_empty());
            let note = again.note.unwrap();
            assert!(
                note.contains("none of its threads may move: 1 group leader, 5 with"),
                "{note}"
            );
            // Said once, not on every tick.
            assert!(tick(&mut p, &t, &mut threads, true).note.is_none());
        }
        // First-Fit takes the first in key order: process 1's leader.
        let mut threads = base.clone();
        let mut p = policy(Selection::FirstFit, &t);
        let plan = tick(&mut p, &t, &mut threads, true);
        assert_eq!(plan.moves[0].thread, key(1, 1));
        assert_eq!(
            plan.moves[0].why,
            Reason::NumaBalance {
                from: NodeId(0),
                to: NodeId(1)
            }
        );
        assert_eq!(
            plan.moves[0].to,
            Target::Domain {
                level: Level::Node,
                index: 1
            }
        );
    }

    #[test]
    fn numa_balance_memory_aware_selections_read_per_node_memory() {
        // Two nodes; processes 1 and 2 (leaders asleep on node 1) each with two threads on
        // node 0. Process 2 has 90 MiB on node 1 and 10 on node 0; process 1 the reverse.
        // MB: process 1: 10 − 90 = −80 MiB, process 2: 90 − 10 = +80 MiB → thread 21 first.
        // TM: both 100 MiB → the first in key order, thread 11.
        let t = topo(2, 1, 4, 1);
        let mib = 1 << 20;
        let threads: Vec<T> = vec![
            (key(1, 1), 0.0, 4),
            (key(1, 11), 1.0, 0),
            (key(1, 12), 1.0, 1),
            (key(2, 2), 0.0, 5),
            (key(2, 21), 1.0, 2),
            (key(2, 22), 1.0, 3),
        ];
        let mut w = window_of(100, &threads);
        w.memory = vec![
            ProcessMemory {
                pid: Pid(1),
                bytes_per_node: vec![(NodeId(0), 90 * mib), (NodeId(1), 10 * mib)],
            },
            ProcessMemory {
                pid: Pid(2),
                bytes_per_node: vec![(NodeId(0), 10 * mib), (NodeId(1), 90 * mib)],
            },
        ];
        // Loads 4 vs 0: two moves bring them to 2 vs 2.
        let first = |s: Selection| {
            let plan = policy(s, &t).decide(&t, &w);
            assert_eq!(plan.moves.len(), 2, "{}", s.name());
            plan.moves
                .iter()
                .map(|m| m.thread.tid.0)
                .collect::<Vec<_>>()
        };
        assert_eq!(first(Selection::MostBenefit), vec![21, 22]);
        assert_eq!(first(Selection::BestCostEffectiveness), vec![21, 22]);
        assert_eq!(first(Selection::TotalMin), vec![11, 12]);
        // Both leaders are on the destination: MB+ moves thread 11 at once, then thread 12.
        assert_eq!(first(Selection::MbPlus), vec![11, 12]);
    }

    #[test]
    fn numa_balance_util_metric_moves_only_while_the_gap_narrows() {
        // Two nodes; four threads at 0.9 on node 0, one at 0.9 on node 1: 3.6 vs 0.9.
        // One move: 2.7 vs 1.8, a gap of 0.9 ≤ 1 CPU: done.
        let t = topo(2, 1, 4, 1);
        let mut settings = Settings::new(Level::Node);
        settings.numa.load = LoadMetric::Util;
        let mut p = NumaBalance::new(Selection::FirstFit, &settings, &t).unwrap();
        let mut threads: Vec<T> = (0..4).map(|i| (key(1, 2 + i), 0.9, i as u32)).collect();
        threads.push((key(1, 1), 0.9, 4));
        assert_eq!(tick(&mut p, &t, &mut threads, true).moves.len(), 1);
        assert!(tick(&mut p, &t, &mut threads, true).moves.is_empty());
    }

    #[test]
    fn numa_balance_waits_on_the_first_window_and_forgets_vanished_threads() {
        let t = topo(2, 1, 4, 1);
        let mut p = policy(Selection::Excl, &t);
        let w = window_of(
            0,
            &[
                (key(1, 2), 1.0, 0),
                (key(1, 3), 1.0, 0),
                (key(1, 4), 1.0, 0),
            ],
        );
        assert!(p.decide(&t, &w).moves.is_empty());
        let mut threads: Vec<T> = (0..4).map(|i| (key(1, 2 + i), 1.0, i as u32)).collect();
        let plan = tick(&mut p, &t, &mut threads, true);
        assert_eq!(plan.moves.len(), 2);
        assert_eq!(p.placed.len(), 2);
        threads.clear();
        tick(&mut p, &t, &mut threads, true);
        assert!(p.placed.is_empty());
    }

    #[test]
    fn numa_balance_registry_builds_every_selection_and_rejects_bad_settings() {
        let t = topo(2, 1, 4, 1);
        for s in Selection::ALL {
            let built = crate::build(s.policy_name(), &Settings::new(Level::Node), &t).unwrap();
            assert_eq!(built.name(), s.policy_name());
            assert!(crate::names().contains(&s.policy_name()));
        }
        assert!(matches!(
            build("numa-nonesuch", &Settings::new(Level::Node), &t),
            Err(PolicyError::Unknown { .. })
        ));
        for bad in [
            NumaSettings {
                max_moves: 0,
                ..NumaSettings::default()
            },
            NumaSettings {
                imbalance_pct: -0.1,
                ..NumaSettings::default()
            },
            NumaSettings {
                min_imbalance: f64::NAN,
                ..NumaSettings::default()
            },
        ] {
            let mut settings = Settings::new(Level::Node);
            settings.numa = bad;
            assert!(matches!(
                crate::build("numa-excl", &settings, &t),
                Err(PolicyError::Invalid {
                    policy: "numa-excl",
                    ..
                })
            ));
        }
    }
}
