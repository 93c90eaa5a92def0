//! `numa-<selection>`: the inter-node balancer of Chiang & Su (Appl. Sci. 2021), in user
//! space. When NUMA nodes are imbalanced it moves threads from the busiest node to the
//! idlest, one at a time, and the *selection* decides which thread: Linux's First-Fit, the
//! memory-aware TM, MB and BCE, or the thread-aware Exclusivity, with or without the
//! enhanced procedure that keeps threads near their group leader (see [`selection`]).
//!
//! **The balancer owns inter-node placement.** In the paper the selection policy sits in
//! the kernel's inter-node load balancing, so it chooses *every* migration between nodes;
//! inside a node Linux balances as usual. In user space the only way to get that split is
//! to confine every thread to one node: each managed thread is *adopted* the first time the
//! balancer sees it, confined to the node it is running on (its CPUs ∩ the thread's
//! original mask), with [`Reason::Initial`]. From then on Linux moves it only between the
//! CPUs of that node (idle pulls, wake-up placement, periodic balancing), and it changes
//! node only when this balancer moves it ([`Reason::NumaBalance`]). Without adoption the
//! balancer would confine only the threads it moved, and Linux would keep moving all the
//! others between nodes on its own, whatever the selection.
//!
//! *Which node a new thread is adopted on.* The node of its last CPU: adoption pins a
//! thread where Linux put it and never moves it. That is the paper's split: "when a task is
//! created, the OS scheduler dispatches it to the core with the least load" (§3.1), and the
//! selection policies act only when the balancer migrates threads. Keeping threads with
//! their leader (§3.2) is the *selection's* job, not the placement's: Excl and MB+ move a
//! thread at once when its leader is on the idlest node and never take one away from its
//! leader's node. Adopting every worker on its leader's node instead would be a placement
//! policy the paper does not have, would pile a program's threads onto one node (32
//! workers on 8 CPUs), and under Excl and MB+ those threads could never leave (their leader
//! is on the source), so the imbalance could not be undone.
//!
//! A thread created between two ticks is placed by Linux and may cross nodes until the
//! next tick adopts it (one interval at most). On Linux a new thread inherits its
//! creator's mask, so one created by a confined thread starts, and is adopted, on its
//! creator's node. **So a process's only thread is not adopted**: a program is its main
//! thread alone until it starts its workers, and confining it then would confine every
//! worker to its node (the pile-up above, without a placement policy having chosen it).
//! It is counted on the node it runs on, may be moved by the balancer like any thread, and
//! is adopted with its workers at the first look that sees them. In the simulator, whose
//! threads now start with their creator's mask as on Linux, adopting each program's
//! leader first gave `parsec-mix` excl +0.9 % and MB+ +1.5 % over First-Fit (seeds 1–3);
//! with this rule +3.6 % and +4.4 %. `pbind` lost about 50 ms a run on 2 cores to the same
//! inheritance (`StartUp` in `baseline.rs`).
//!
//! ```text
//!  Window ─► forget vanished threads; adopt new ones: Move { thread, to: its node, Initial }
//!         ─► node of each thread (where we placed it)
//!         ─► load per node: runnable threads (or summed utilization), scaled to equal size
//!         ─► busiest b, idlest i: L_b − L_i > 1 thread and L_b > 1.25·L_i?
//!             or else b = the node waiting most, i = the idlest: ≥ 1 waiting, ≥ 1 CPU idle?
//!              yes ─► RunQueue { src: b, dst: i, threads runnable on b, groups }
//!                     ─► Selection::select ─► Move { thread, to: node i, NumaBalance }
//!                        (refused? after 4 refused ticks in a row: Selection::fallback,
//!                         one such move a tick)
//!                     ─► update loads and the group's thread distribution, repeat
//!              no  ─► done (or 8 balancing moves this tick)
//! ```
//!
//! * **Thread group** = process; **group leader** = the thread whose tid is the pid.
//! * **Node of a thread** = the node we adopted it on or last moved it to (a sleeping
//!   thread's last CPU lags behind a move until it wakes up).
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
//! utilization. Since every managed thread is confined to its node, these per-node sums are
//! exactly what each node's CPUs have to run. Node loads are scaled to the mean node size
//! (`L'_k = L_k · C̄ / C_k` for `C_k` CPUs), so nodes of unequal size compare fairly; on
//! equal nodes `L' = L`.
//!
//! Balancing starts when `L'_b − L'_i > min_imbalance` (1 thread) **and**
//! `L'_b > (1 + imbalance_pct) · L'_i` (25 %, Linux's `imbalance_pct` of 125 for NUMA
//! domains); such a move is made only if it shrinks the gap (`|d − w(s_b + s_i)| < d` for
//! a thread of weight `w`), so a balanced machine never sees a thread go back and forth.
//!
//! It also starts, whatever the loads, when a CPU idles on one node while threads wait
//! for a CPU on another ([`IDLE_NEXT_TO_QUEUE`]): with every thread confined, Linux can
//! no longer pull a waiting thread across nodes, so this is the balancer's to fix even
//! when the 25 % rule tolerates it (17 threads sharing 16 CPUs next to 15 threads on 16
//! CPUs: 17 < 1.25 · 15). A node idles when its threads ran at least one CPU's worth less
//! than its CPUs (`C_i − Σ util ≥ 1`) and queues when they waited at least one thread's
//! worth (`Σ latency ≥ 1`, schedstat's run-queue delay); the run-queue count alone would
//! mistake threads that block at a barrier for a queue. Each such move counts as filling
//! one idle CPU and removing one waiting thread, so no more threads move than there were
//! of either.
//! At most `max_moves` (8) balancing moves are made per tick; adoptions do not count, they
//! move nothing.
//!
//! **When the enhanced procedure refuses.** Excl and MB+ refuse every thread of a node
//! that holds only group leaders and threads whose leader is on it; read alone, the paper's
//! rules would then leave that node overloaded, and CPUs elsewhere idle, for as long as the
//! programs run. In the kernel the selection sits inside `load_balance`, which counts
//! failed attempts and, once `nr_balance_failed > cache_nice_tries + 2` (NUMA domains have
//! `cache_nice_tries = 2`), starts *active balancing*: it moves a thread anyway. The
//! balancer does the same: after [`REFUSALS_BEFORE_FORCE`] ticks in a row on which a
//! selection refused, the next refusal is overridden by [`Selection::fallback`] (the base
//! metric, Eq. 7 or `MB_p`, over the non-leaders, leaders only when nothing else waits),
//! one such move a tick until a tick passes without a refusal. This is what lets Excl and
//! MB+ keep threads near their leader and still balance: without it they finished
//! `parsec-mix` 16 % and 10 % later than First-Fit (10 seeds), despite fewer remote
//! accesses (29 % and 25 %, against 42 %).
//!
//! On a machine with one NUMA node there is nothing to balance between nodes: the policy
//! adopts nothing, moves nothing, and says so once.
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
    Domain, Level, Move, Nanos, NumaSummary, Pid, Plan, PolicySummary, Reason, Target, ThreadKey,
    ThreadState, Topology, Window,
};

/// How often the balancer looks by default: 20 ms. Linux balances between NUMA nodes
/// from a CPU that goes idle at once (newidle balancing) and from idle CPUs every
/// `sd_weight` ms (32 ms on 32 CPUs). With every thread confined to its node the balancer
/// stands in for both, so it looks more often than the periodic interval. A look costs
/// 1–7 µs of sampling per thread (README, "Sampling a live process"): 0.2–1.4 ms for 200
/// threads, at most 7 % of one CPU. Longer intervals leave the selection fewer moves to
/// decide (sim README, parsec-mix: at 200 ms it barely matters which thread moves).
pub const NUMA_INTERVAL: Nanos = Nanos::from_millis(20);

/// How often the balancer looks on a machine with one NUMA node, where it has nothing to
/// do: once a second.
pub const ONE_NODE_INTERVAL: Nanos = Nanos::from_secs(1);

/// Utilization (fraction of the window) from which a thread counts as runnable even if it
/// was asleep at the instant of the sample.
pub const ACTIVE_UTIL: f64 = 0.05;

/// CPUs' worth of idle time on one node, and threads' worth of waiting for a CPU on
/// another, from which the balancer moves a thread whatever the load thresholds say: with
/// every thread confined to its node, Linux can no longer pull a waiting thread onto an
/// idle CPU of another node.
pub const IDLE_NEXT_TO_QUEUE: f64 = 1.0;

/// Ticks in a row on which the enhanced procedure may refuse every thread of an imbalanced
/// node before the balancer moves one anyway ([`Selection::fallback`]): Linux's active
/// balancing starts when `nr_balance_failed > cache_nice_tries + 2`, and NUMA domains have
/// `cache_nice_tries = 2`, so on the fifth failed attempt.
pub const REFUSALS_BEFORE_FORCE: u32 = 4;

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
pub fn build(name: &str, settings: &Settings) -> Result<Box<dyn Policy>, PolicyError> {
    match Selection::from_name(name).filter(|s| s.policy_name() == name) {
        Some(s) => Ok(Box::new(NumaBalance::new(s, settings)?)),
        None => Err(PolicyError::Unknown {
            name: name.to_string(),
            known: crate::names().join(", "),
        }),
    }
}

/// What the balancer did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NumaTotals {
    /// Threads adopted: confined to the node they ran on when first seen.
    pub adopted: u64,
    /// Ticks on which nodes were imbalanced.
    pub imbalanced_ticks: u64,
    /// Threads moved between nodes.
    pub moves: u64,
    /// Moves made at once because the thread's leader was on the destination.
    pub leader_on_destination: u64,
    /// Selections that found no thread allowed to move.
    pub nothing_movable: u64,
    /// Moves made by [`Selection::fallback`] after [`REFUSALS_BEFORE_FORCE`] refused ticks.
    pub forced: u64,
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
    /// The node (dense index) each managed thread is confined to: where we adopted it, or
    /// where we last moved it.
    placed: BTreeMap<ThreadKey, usize>,
    said_one_node: bool,
    stuck: bool,
    /// Ticks in a row on which a selection refused every thread of an imbalanced node.
    refused: u32,
    totals: NumaTotals,
}

impl NumaBalance {
    /// The balancer with `selection`, checking `settings.numa` (the level setting does not
    /// apply: it always balances between NUMA nodes).
    pub fn new(selection: Selection, settings: &Settings) -> Result<NumaBalance, PolicyError> {
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
            refused: 0,
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

    /// Confines every thread seen for the first time to the node of its last CPU (see the
    /// module docs): one [`Reason::Initial`] move each, in key order.
    fn adopt(&mut self, topo: &Topology, w: &Window, nodes: usize) -> Vec<Move> {
        let mut adopted = Vec::new();
        // Threads per process in the window, and processes with a thread adopted.
        let mut per_pid: BTreeMap<Pid, (usize, bool)> = BTreeMap::new();
        for t in &w.threads {
            let e = per_pid.entry(t.key.pid).or_default();
            e.0 += 1;
            e.1 |= self.placed.contains_key(&t.key);
        }
        for t in &w.threads {
            if self.placed.contains_key(&t.key) {
                continue;
            }
            // A process's only thread, never adopted: its mask would be its workers'
            // (module docs). Counted where it runs until it has company.
            if per_pid.get(&t.key.pid) == Some(&(1, false)) {
                continue;
            }
            let Some(node) = topo
                .domain_of(t.last_cpu, Level::Node)
                .filter(|&k| k < nodes)
            else {
                continue;
            };
            self.placed.insert(t.key, node);
            adopted.push(Move {
                thread: t.key,
                to: Target::Domain {
                    level: Level::Node,
                    index: node,
                },
                why: Reason::Initial,
            });
        }
        self.totals.adopted += adopted.len() as u64;
        adopted
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
    /// CPUs' worth the node's threads ran (summed utilization), whatever the load metric.
    busy: Vec<f64>,
    /// Threads' worth of waiting for a CPU on the node (summed run-queue latency).
    waiting: Vec<f64>,
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
            busy: vec![0.0; n],
            waiting: vec![0.0; n],
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
            st.busy[node] += t.util;
            st.waiting[node] += t.latency;
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

    /// The node whose threads waited longest for a CPU (at least [`IDLE_NEXT_TO_QUEUE`]
    /// threads' worth) among those not `exhausted`, and the node with the most idle CPUs
    /// (at least [`IDLE_NEXT_TO_QUEUE`] CPUs' worth), if they differ. Ties go to the lower
    /// index.
    fn idle_next_to_queue(&self, domains: &[Domain], exhausted: &[bool]) -> Option<(usize, usize)> {
        let mut queue: Option<(usize, f64)> = None;
        let mut idle: Option<(usize, f64)> = None;
        for (k, d) in domains.iter().enumerate() {
            let waiting = self.waiting[k];
            if !exhausted[k]
                && waiting >= IDLE_NEXT_TO_QUEUE
                && queue.is_none_or(|(_, w)| waiting > w)
            {
                queue = Some((k, waiting));
            }
            let spare = d.cpus.len() as f64 - self.busy[k];
            if spare >= IDLE_NEXT_TO_QUEUE && idle.is_none_or(|(_, s)| spare > s) {
                idle = Some((k, spare));
            }
        }
        match (queue, idle) {
            (Some((b, _)), Some((i, _))) if b != i => Some((b, i)),
            _ => None,
        }
    }
}

impl Policy for NumaBalance {
    fn name(&self) -> &'static str {
        self.selection.policy_name()
    }

    fn decide(&mut self, topo: &Topology, w: &Window) -> Plan {
        let domains = topo.domains(Level::Node);
        if domains.len() < 2 {
            // Nothing will ever need balancing here: look rarely.
            let mut plan = Plan::wait(self.interval.max(ONE_NODE_INTERVAL));
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
        let adopted = self.adopt(topo, w, domains.len());
        let mut plan = if w.duration() == Nanos::ZERO {
            Plan::wait(self.interval)
        } else {
            self.balance(topo, w)
        };
        // A thread adopted and moved in the same tick needs only its move.
        let mut adopted: Vec<Move> = adopted
            .into_iter()
            .filter(|a| plan.moves.iter().all(|m| m.thread != a.thread))
            .collect();
        if !adopted.is_empty() {
            let said = format!(
                "{}: confined {} new thread{} to the node each runs on",
                self.name(),
                adopted.len(),
                if adopted.len() == 1 { "" } else { "s" },
            );
            let prefix = format!("{}: ", self.name());
            plan.note = Some(match plan.note.take() {
                Some(other) => {
                    let other = other.strip_prefix(&prefix).unwrap_or(&other);
                    format!("{said}; {other}")
                }
                None => said,
            });
            adopted.append(&mut plan.moves);
            plan.moves = adopted;
        }
        plan
    }

    fn summary(&self) -> PolicySummary {
        let t = &self.totals;
        PolicySummary::Numa(NumaSummary {
            threads_adopted: t.adopted,
            imbalanced_ticks: t.imbalanced_ticks,
            moves: t.moves,
            moves_leader_on_destination: t.leader_on_destination,
            selections_nothing_movable: t.nothing_movable,
            moves_forced: t.forced,
            candidates_examined: t.examined,
            metric_evaluations: t.evaluated,
        })
    }
}

impl NumaBalance {
    /// One balancing pass over a window of positive length: moves from the busiest node to
    /// the idlest while they are imbalanced, at most `max_moves`.
    ///
    /// Long because it is the paper's procedure (§3) as one loop: pick the pair of nodes,
    /// ask the selection for a thread, force one after refusals, check that the move
    /// narrows the gap, then count it; every step reads and updates the same per-node
    /// loads, idle CPUs and waiting threads, which a split would pass around whole.
    fn balance(&mut self, topo: &Topology, w: &Window) -> Plan {
        let domains = topo.domains(Level::Node);
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
        let mut forced = false;
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
            let by_load = match (busiest, idlest) {
                (Some(b), Some(i)) if b != i && self.imbalanced(loads[b], loads[i]) => Some((b, i)),
                _ => None,
            };
            let (b, i, by_load) = match by_load {
                Some((b, i)) => (b, i, true),
                None => match st.idle_next_to_queue(domains, &exhausted) {
                    Some((b, i)) => (b, i, false),
                    None => break,
                },
            };
            was_imbalanced = true;
            let rq = RunQueue {
                src: b,
                dst: i,
                candidates: &st.queues[b],
                groups: &st.groups,
            };
            let mut sel = self.selection.select(&rq);
            if sel.choice.is_none() {
                self.totals.nothing_movable += 1;
                stuck_on = Some((b, sel.counts));
                // Refused for long enough: one move a tick whatever the procedure prefers,
                // as Linux's active balancing would make.
                if !forced && self.refused >= REFUSALS_BEFORE_FORCE {
                    let counts = sel.counts;
                    sel = self.selection.fallback(&rq);
                    sel.counts.examined += counts.examined;
                    sel.counts.evaluated += counts.evaluated;
                }
            }
            self.totals.examined += u64::from(sel.counts.examined);
            self.totals.evaluated += u64::from(sel.counts.evaluated);
            let Some(choice) = sel.choice else {
                exhausted[b] = true;
                continue;
            };
            let weight = st.weights[b][choice.index];
            let d = loads[b] - loads[i];
            if by_load && (d - weight * (scale[b] + scale[i])).abs() >= d {
                // Moving it would not narrow the gap (a heavy thread under `Util`).
                exhausted[b] = true;
                continue;
            }
            let c = st.queues[b].remove(choice.index);
            st.weights[b].remove(choice.index);
            st.load[b] -= weight;
            st.load[i] += weight;
            // At worst the thread keeps one more CPU busy on `i` and one fewer thread waits
            // on `b`: at most as many moves as there were idle CPUs and waiting threads.
            st.busy[i] += 1.0;
            st.waiting[b] -= 1.0;
            // The moved thread is not a candidate again this tick: no back and forth.
            if let Some(g) = st.groups.get_mut(c.group) {
                g.threads_per_node[b] = g.threads_per_node[b].saturating_sub(1);
                g.threads_per_node[i] += 1;
                if c.key.is_leader() {
                    g.leader_node = Some(i);
                }
            }
            match choice.why {
                Why::LeaderOnDestination => self.totals.leader_on_destination += 1,
                Why::Forced => {
                    self.totals.forced += 1;
                    forced = true;
                }
                Why::FirstMovable | Why::Best(_) => {}
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
        // A forced move keeps the count, so a refusal that goes on forces one move a tick.
        if stuck_on.is_none() {
            self.refused = 0;
        } else if !forced {
            self.refused = self.refused.saturating_add(1);
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
}

#[cfg(test)]
mod tests;
