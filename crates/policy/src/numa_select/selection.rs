//! The paper's selection policies as pure functions over one run queue: given the threads
//! waiting on the source node, which one moves to the destination node.
//!
//! Chiang & Su (Appl. Sci. 2021) write `RSS_p(i)` for the memory of task `p` on NUMA node
//! `i`, `src_node`/`dest_node` for the source and destination nodes, `thrd_nr_i` for the
//! number of threads of `p`'s thread group on node `i` and `n` for the number of nodes:
//!
//! | selection | metric (per evaluated thread `p`) | picks | paper |
//! |---|---|---|---|
//! | [`Selection::FirstFit`] | none | the first movable thread | §2.3, Linux |
//! | [`Selection::TotalMin`] | `TM_p = Σ_{i=0}^{n−1} RSS_p(i)` | minimum | §2.3 |
//! | [`Selection::MostBenefit`] | `MB_p = RSS_p(dest_node) − RSS_p(src_node)` | maximum | §2.3 |
//! | [`Selection::BestCostEffectiveness`] | `BCE_p = (RSS_p(dest_node) − RSS_p(src_node)) / RSS_p(src_node)` | maximum | §2.3 |
//! | [`Selection::ExclBase`] | `Excl_p = max_{0≤i≤n−1} thrd_nr_i / Σ_{i=0}^{n−1} thrd_nr_i` (Eq. 7) | minimum | §3.3 |
//! | [`Selection::Excl`] | Eq. 7 under the enhanced procedure | minimum | §3.2, §3.3 |
//! | [`Selection::MbPlus`] | `MB_p` under the enhanced procedure | maximum | §3.2, §4.2 |
//!
//! Threads of one group share one address space, so `RSS_p` is the group's (the process's)
//! memory: our per-process bytes per node stand in for the kMLB per-task counters. Ties go
//! to the thread evaluated first ("for tasks with equal exclusivity, the first one to be
//! evaluated is the target task"), so the run queue's order decides them.
//!
//! The *enhanced procedure* (§3.2, Figure 5) walks the run queue in order and, for each
//! thread:
//!
//! ```text
//!  thread is the leader of a multithreaded group ──► skip (never move a leader, §3.2.1)
//!  its leader is on the destination node ─────────► move it at once, stop (§3.2.2)
//!  its leader is on the source node ──────────────► skip (§3.2.2)
//!  a thread of its group was already evaluated ───► skip (one member per group, §3.2.3)
//!  otherwise ─────────────────────────────────────► evaluate the metric, keep the best
//! ```
//!
//! The paper does not move "the thread group leader for each multithreaded process"
//! (§3.2.1); we read that literally: a single-threaded process is its own leader but is not
//! a *multithreaded* one, so it stays movable and is evaluated like any other thread. A
//! group whose leader is not among the observed threads (it exited, or is not managed) has
//! its leader "on other nodes": its threads are evaluated.

use std::cmp::Ordering;
use threadbalance_model::{Pid, ThreadKey};

/// Which thread of the source run queue to move (Chiang & Su 2021, Table 6 plus TM and BCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Selection {
    /// Linux's default: the first movable thread in the run queue.
    FirstFit,
    /// Total Min (TM): the thread whose group has the least memory in total.
    TotalMin,
    /// Most Benefit (MB): the thread whose group has the most memory on the destination
    /// beyond what it has on the source.
    MostBenefit,
    /// Best Cost-Effectiveness (BCE): MB's benefit over the memory left on the source.
    BestCostEffectiveness,
    /// Exclusivity without the enhancements (Excl_base): the least exclusive group, Eq. 7,
    /// every thread evaluated.
    ExclBase,
    /// Exclusivity (Excl): Eq. 7 under the enhanced procedure.
    Excl,
    /// Most Benefit Plus (MB+): MB under the enhanced procedure.
    MbPlus,
}

impl Selection {
    /// Every selection, in the paper's order.
    pub const ALL: [Selection; 7] = [
        Selection::FirstFit,
        Selection::TotalMin,
        Selection::MostBenefit,
        Selection::BestCostEffectiveness,
        Selection::ExclBase,
        Selection::Excl,
        Selection::MbPlus,
    ];

    /// The short name (`"first-fit"`, `"tm"`, `"mb"`, `"bce"`, `"excl-base"`, `"excl"`,
    /// `"mb-plus"`).
    pub fn name(self) -> &'static str {
        match self {
            Selection::FirstFit => "first-fit",
            Selection::TotalMin => "tm",
            Selection::MostBenefit => "mb",
            Selection::BestCostEffectiveness => "bce",
            Selection::ExclBase => "excl-base",
            Selection::Excl => "excl",
            Selection::MbPlus => "mb-plus",
        }
    }

    /// The policy name used in config and on the command line (`"numa-tm"`).
    pub fn policy_name(self) -> &'static str {
        match self {
            Selection::FirstFit => "numa-first-fit",
            Selection::TotalMin => "numa-tm",
            Selection::MostBenefit => "numa-mb",
            Selection::BestCostEffectiveness => "numa-bce",
            Selection::ExclBase => "numa-excl-base",
            Selection::Excl => "numa-excl",
            Selection::MbPlus => "numa-mb-plus",
        }
    }

    /// The selection for a short name (`"tm"`) or a policy name (`"numa-tm"`).
    pub fn from_name(name: &str) -> Option<Selection> {
        let short = name.strip_prefix("numa-").unwrap_or(name);
        Selection::ALL.into_iter().find(|s| s.name() == short)
    }

    /// Whether it runs the enhanced procedure of §3.2 (Excl, MB+).
    pub fn is_enhanced(self) -> bool {
        matches!(self, Selection::Excl | Selection::MbPlus)
    }

    /// Chooses the thread of `rq.candidates` to move from `rq.src` to `rq.dst`.
    pub fn select(self, rq: &RunQueue<'_>) -> Selected {
        let mut counts = Counts::default();
        let choice = match self {
            Selection::FirstFit => rq.candidates.first().map(|c| {
                counts.examined = 1;
                Choice {
                    index: 0,
                    key: c.key,
                    why: Why::FirstMovable,
                }
            }),
            Selection::Excl | Selection::MbPlus => self.enhanced(rq, &mut counts),
            _ => self.every_thread(rq, &mut counts),
        };
        Selected { choice, counts }
    }

    /// Chooses a thread when the enhanced procedure refused every one and the imbalance has
    /// lasted (Linux's active balancing, see [`crate::numa_select`]): the base policy's
    /// metric (Eq. 7 for Excl, `MB_p` for MB+) over every thread that is not the leader of a
    /// multithreaded group, or over the leaders when nothing else waits. The other
    /// selections refuse only an empty queue, so for them this is [`Selection::select`].
    pub fn fallback(self, rq: &RunQueue<'_>) -> Selected {
        if !self.is_enhanced() {
            return self.select(rq);
        }
        let mut counts = Counts::default();
        let lead = |c: &Candidate, g: &Group| c.key.is_leader() && g.is_multithreaded();
        let best = self
            .best_where(rq, &mut counts, |c, g| !lead(c, g))
            .or_else(|| self.best_where(rq, &mut counts, lead));
        let choice = best.map(|(index, _)| Choice {
            index,
            key: rq.candidates[index].key,
            why: Why::Forced,
        });
        Selected { choice, counts }
    }

    /// The metric of this selection for one group; `None` for First-Fit, which has none.
    pub fn score(self, group: &Group, src: usize, dst: usize) -> Option<Score> {
        match self {
            Selection::FirstFit => None,
            Selection::TotalMin => Some(group.total_min()),
            Selection::MostBenefit | Selection::MbPlus => Some(group.most_benefit(src, dst)),
            Selection::BestCostEffectiveness => Some(group.cost_effectiveness(src, dst)),
            Selection::ExclBase | Selection::Excl => Some(group.exclusivity()),
        }
    }

    /// TM, MB, BCE and Excl_base: evaluate every thread, keep the first best.
    fn every_thread(self, rq: &RunQueue<'_>, counts: &mut Counts) -> Option<Choice> {
        best_choice(rq, self.best_where(rq, counts, |_, _| true))
    }

    /// The first best-scoring candidate among those `keep` accepts, and its score; every
    /// accepted candidate is examined and evaluated.
    fn best_where(
        self,
        rq: &RunQueue<'_>,
        counts: &mut Counts,
        keep: impl Fn(&Candidate, &Group) -> bool,
    ) -> Option<(usize, Score)> {
        let mut best: Option<(usize, Score)> = None;
        for (i, c) in rq.candidates.iter().enumerate() {
            let Some(g) = rq.groups.get(c.group).filter(|g| keep(c, g)) else {
                continue;
            };
            counts.examined += 1;
            let Some(s) = self.score(g, rq.src, rq.dst) else {
                continue;
            };
            counts.evaluated += 1;
            if best.as_ref().is_none_or(|(_, b)| s.better_than(b)) {
                best = Some((i, s));
            }
        }
        best
    }

    /// Excl and MB+: the enhanced procedure of §3.2 (see the module docs).
    fn enhanced(self, rq: &RunQueue<'_>, counts: &mut Counts) -> Option<Choice> {
        let mut best: Option<(usize, Score)> = None;
        let mut seen = GroupSet::new(rq.groups.len());
        for (i, c) in rq.candidates.iter().enumerate() {
            counts.examined += 1;
            let Some(g) = rq.groups.get(c.group) else {
                continue;
            };
            let leader = c.key.is_leader();
            if leader && g.is_multithreaded() {
                counts.skipped_leaders += 1;
                continue;
            }
            match g.leader_node {
                Some(n) if n == rq.dst => {
                    return Some(Choice {
                        index: i,
                        key: c.key,
                        why: Why::LeaderOnDestination,
                    });
                }
                Some(n) if n == rq.src && !leader => {
                    counts.skipped_leader_on_source += 1;
                    continue;
                }
                _ => {}
            }
            if !seen.insert(c.group) {
                counts.skipped_same_group += 1;
                continue;
            }
            let Some(s) = self.score(g, rq.src, rq.dst) else {
                continue;
            };
            counts.evaluated += 1;
            if best.as_ref().is_none_or(|(_, b)| s.better_than(b)) {
                best = Some((i, s));
            }
        }
        best_choice(rq, best)
    }
}

/// The groups already evaluated, one bit each: on the stack for up to 256 groups, so the
/// hot path does not allocate on ordinary machines.
enum GroupSet {
    Small([u64; 4]),
    Large(Vec<u64>),
}

impl GroupSet {
    fn new(groups: usize) -> GroupSet {
        if groups <= 256 {
            GroupSet::Small([0; 4])
        } else {
            GroupSet::Large(vec![0; groups.div_ceil(64)])
        }
    }

    /// Adds `group`; `false` if it was there already.
    fn insert(&mut self, group: usize) -> bool {
        let words: &mut [u64] = match self {
            GroupSet::Small(w) => w,
            GroupSet::Large(w) => w,
        };
        let (word, bit) = (group / 64, 1u64 << (group % 64));
        match words.get_mut(word) {
            Some(w) if *w & bit != 0 => false,
            Some(w) => {
                *w |= bit;
                true
            }
            None => true,
        }
    }
}

/// One thread waiting on the source node, in run-queue order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    /// The thread; [`ThreadKey::is_leader`] tells a group leader.
    pub key: ThreadKey,
    /// Its thread group: an index into [`RunQueue::groups`].
    pub group: usize,
}

/// What the selection policies know about one thread group (a process).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The process.
    pub pid: Pid,
    /// The node (dense index) its leader is on, or `None` when the leader is not observed.
    pub leader_node: Option<usize>,
    /// `thrd_nr_i`: its threads on each node (dense node index).
    pub threads_per_node: Vec<u32>,
    /// `RSS_p(i)`: its resident bytes on each node (dense node index), from `numa_maps`.
    pub rss: Vec<u64>,
    /// `Σ_i RSS_p(i)` over every node, CPU-less nodes included, in bytes.
    pub rss_total: u64,
}

impl Group {
    /// A group of `nodes` nodes with no thread and no memory yet.
    pub fn new(pid: Pid, nodes: usize) -> Group {
        Group {
            pid,
            leader_node: None,
            threads_per_node: vec![0; nodes],
            rss: vec![0; nodes],
            rss_total: 0,
        }
    }

    /// `Σ_i thrd_nr_i`: its threads on all nodes.
    pub fn threads(&self) -> u32 {
        self.threads_per_node.iter().sum()
    }

    /// Whether it has more than one thread (the leader rules apply only then).
    pub fn is_multithreaded(&self) -> bool {
        let mut n = 0;
        for &t in &self.threads_per_node {
            n += t;
            if n > 1 {
                return true;
            }
        }
        false
    }

    fn rss_on(&self, node: usize) -> u64 {
        self.rss.get(node).copied().unwrap_or(0)
    }

    /// TM: `TM_p = Σ_{i=0}^{n−1} RSS_p(i)`, the memory the thread would access remotely
    /// after any move at worst (smaller is better).
    pub fn total_min(&self) -> Score {
        Score::TotalBytes(self.rss_total)
    }

    /// MB: `MB_p = RSS_p(dest_node) − RSS_p(src_node)` (larger is better). By Eq. 6 of the
    /// paper, moving one thread of a group changes the group's total memory access cost by
    /// `(R_D − R_S)(1 − f)` for a NUMA factor `f > 1`, so the largest `MB_p` saves the most.
    pub fn most_benefit(&self, src: usize, dst: usize) -> Score {
        Score::Benefit(i128::from(self.rss_on(dst)) - i128::from(self.rss_on(src)))
    }

    /// BCE: `BCE_p = (RSS_p(dest_node) − RSS_p(src_node)) / RSS_p(src_node)`, MB's benefit
    /// over the cost of the memory left behind on the source (larger is better). With
    /// nothing on the source the cost is zero: the ratio is +∞ when the benefit is positive
    /// and 0 when it is zero too.
    pub fn cost_effectiveness(&self, src: usize, dst: usize) -> Score {
        let cost = self.rss_on(src);
        Score::CostEffectiveness {
            benefit: i128::from(self.rss_on(dst)) - i128::from(cost),
            cost,
        }
    }

    /// Excl, Eq. 7: `Excl_p = max_{0≤i≤n−1} thrd_nr_i / Σ_{i=0}^{n−1} thrd_nr_i` (smaller is
    /// better: the group is spread more evenly, so moving one of its threads disturbs its
    /// thread and data mapping less).
    pub fn exclusivity(&self) -> Score {
        let (mut max, mut total) = (0, 0);
        for &t in &self.threads_per_node {
            max = max.max(t);
            total += t;
        }
        Score::Exclusivity { max, total }
    }
}

/// The source run queue seen by a selection: borrowed, so building one costs nothing.
#[derive(Debug, Clone, Copy)]
pub struct RunQueue<'a> {
    /// The busiest node (dense index), whose threads are candidates.
    pub src: usize,
    /// The idlest node (dense index), where the chosen thread goes.
    pub dst: usize,
    /// The movable threads on `src`, in run-queue order (ties go to the earlier).
    pub candidates: &'a [Candidate],
    /// Every thread group, indexed by [`Candidate::group`].
    pub groups: &'a [Group],
}

/// A policy's metric for one thread, compared exactly (no rounding decides a tie).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Score {
    /// TM: the group's bytes on all nodes; smaller is better.
    TotalBytes(u64),
    /// MB: bytes on the destination minus bytes on the source; larger is better.
    Benefit(i128),
    /// BCE: `benefit / cost` (bytes over bytes); larger is better; `cost == 0` is +∞ when
    /// `benefit > 0`.
    CostEffectiveness {
        /// `RSS_p(dest_node) − RSS_p(src_node)`, bytes.
        benefit: i128,
        /// `RSS_p(src_node)`, bytes.
        cost: u64,
    },
    /// Excl: `max / total` threads; smaller is better.
    Exclusivity {
        /// `max_i thrd_nr_i`.
        max: u32,
        /// `Σ_i thrd_nr_i`.
        total: u32,
    },
}

impl Score {
    /// The metric as a number, for reports (BCE's +∞ is `f64::INFINITY`).
    pub fn value(&self) -> f64 {
        match *self {
            Score::TotalBytes(b) => b as f64,
            Score::Benefit(b) => b as f64,
            Score::CostEffectiveness { benefit, cost } => match (cost, benefit.signum()) {
                (0, 1) => f64::INFINITY,
                (0, _) => 0.0,
                _ => benefit as f64 / cost as f64,
            },
            Score::Exclusivity { max, total } => {
                if total == 0 {
                    0.0
                } else {
                    f64::from(max) / f64::from(total)
                }
            }
        }
    }

    /// Whether `self` is strictly better than `other` under its policy's rule; scores of
    /// different policies are never better than each other.
    pub fn better_than(&self, other: &Score) -> bool {
        match (*self, *other) {
            (Score::TotalBytes(a), Score::TotalBytes(b)) => a < b,
            (Score::Benefit(a), Score::Benefit(b)) => a > b,
            (
                Score::CostEffectiveness {
                    benefit: a,
                    cost: b,
                },
                Score::CostEffectiveness {
                    benefit: c,
                    cost: d,
                },
            ) => ratio_cmp(a, b, c, d) == Ordering::Greater,
            (Score::Exclusivity { max: a, total: b }, Score::Exclusivity { max: c, total: d }) => {
                // a/b < c/d ⇔ a·d < c·b (totals are counts, never negative).
                u64::from(a) * u64::from(d.max(1)) < u64::from(c) * u64::from(b.max(1))
            }
            _ => false,
        }
    }
}

/// Compares `a/b` with `c/d` for BCE, with `x/0` meaning +∞ when `x > 0` and 0 otherwise.
fn ratio_cmp(a: i128, b: u64, c: i128, d: u64) -> Ordering {
    let norm = |x: i128, y: u64| -> (i128, u64, bool) {
        match (y, x > 0) {
            (0, true) => (1, 0, true),
            (0, false) => (0, 1, false),
            _ => (x, y, false),
        }
    };
    let (a, b, a_inf) = norm(a, b);
    let (c, d, c_inf) = norm(c, d);
    match (a_inf, c_inf) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            match (a.checked_mul(i128::from(d)), c.checked_mul(i128::from(b))) {
                (Some(l), Some(r)) => l.cmp(&r),
                // Beyond 2^127 (exabytes of memory): compare approximately.
                _ => (a as f64 / b as f64)
                    .partial_cmp(&(c as f64 / d as f64))
                    .unwrap_or(Ordering::Equal),
            }
        }
    }
}

/// Why a thread was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// First-Fit: it was first.
    FirstMovable,
    /// Enhanced procedure: its leader is on the destination node; nothing else was evaluated.
    LeaderOnDestination,
    /// Its metric was the best (first of equals).
    Best(Score),
    /// The enhanced procedure refused every thread for too long; [`Selection::fallback`]
    /// chose it.
    Forced,
}

/// The thread a selection chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Choice {
    /// Its position in [`RunQueue::candidates`].
    pub index: usize,
    /// The thread.
    pub key: ThreadKey,
    /// Why.
    pub why: Why,
}

/// What one selection looked at: the work the enhanced procedure saves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Candidates looked at, in order, until the choice was final.
    pub examined: u32,
    /// Metric evaluations (Eq. 7, `MB_p`, …).
    pub evaluated: u32,
    /// Enhanced: leaders of multithreaded groups passed over.
    pub skipped_leaders: u32,
    /// Enhanced: threads passed over because their leader is on the source node.
    pub skipped_leader_on_source: u32,
    /// Enhanced: threads passed over because a thread of their group was evaluated.
    pub skipped_same_group: u32,
}

/// A selection's result: the chosen thread, if any may move, and the work done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selected {
    /// The thread to move; `None` when the queue is empty or, under the enhanced procedure,
    /// every thread is a leader or has its leader on the source.
    pub choice: Option<Choice>,
    /// What was looked at.
    pub counts: Counts,
}

/// The best-scoring candidate found by a selection, as its choice.
fn best_choice(rq: &RunQueue<'_>, best: Option<(usize, Score)>) -> Option<Choice> {
    best.map(|(index, s)| Choice {
        index,
        key: rq.candidates[index].key,
        why: Why::Best(s),
    })
}

#[cfg(test)]
mod tests;
