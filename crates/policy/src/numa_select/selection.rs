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

    /// Whether its metric reads per-node memory (TM, MB, BCE, MB+: the kMLB policies).
    pub fn needs_memory(self) -> bool {
        matches!(
            self,
            Selection::TotalMin
                | Selection::MostBenefit
                | Selection::BestCostEffectiveness
                | Selection::MbPlus
        )
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
        let mut best: Option<(usize, Score)> = None;
        for (i, c) in rq.candidates.iter().enumerate() {
            counts.examined += 1;
            let Some(g) = rq.groups.get(c.group) else {
                continue;
            };
            let Some(s) = self.score(g, rq.src, rq.dst) else {
                continue;
            };
            counts.evaluated += 1;
            if best.as_ref().is_none_or(|(_, b)| s.better_than(b)) {
                best = Some((i, s));
            }
        }
        best.map(|(index, s)| Choice {
            index,
            key: rq.candidates[index].key,
            why: Why::Best(s),
        })
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
        best.map(|(index, s)| Choice {
            index,
            key: rq.candidates[index].key,
            why: Why::Best(s),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::key;

    const PAGE: u64 = 4096;

    /// A group from its threads per node and resident pages per node.
    fn group(pid: i32, leader_node: Option<usize>, threads: &[u32], pages: &[u64]) -> Group {
        let rss: Vec<u64> = pages.iter().map(|p| p * PAGE).collect();
        Group {
            pid: Pid(pid),
            leader_node,
            threads_per_node: threads.to_vec(),
            rss_total: rss.iter().sum(),
            rss,
        }
    }

    fn chosen_tid(s: Selection, rq: &RunQueue<'_>) -> Option<i32> {
        s.select(rq).choice.map(|c| c.key.tid.0)
    }

    /// Figure 2 / Table 1: the source core's run queue holds Task#3, Task#9 and Task#10,
    /// single-threaded tasks with (source, destination) resident pages (3, 7), (3, 3) and
    /// (5, 10): "migrating Task#3 incurs 3-page remote memory access but migrating Task#10
    /// incurs 5-page remote memory access".
    fn table1() -> (Vec<Candidate>, Vec<Group>) {
        let groups = vec![
            group(3, Some(0), &[1, 0], &[3, 7]),
            group(9, Some(0), &[1, 0], &[3, 3]),
            group(10, Some(0), &[1, 0], &[5, 10]),
        ];
        let candidates = [3, 9, 10]
            .iter()
            .enumerate()
            .map(|(g, &t)| Candidate {
                key: key(t, t),
                group: g,
            })
            .collect();
        (candidates, groups)
    }

    #[test]
    fn selection_table1_each_policy_picks_the_papers_task() {
        let (candidates, groups) = table1();
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        // The metrics, in pages, as Table 1 lists them:
        //   TM  = 3 + 7 = 10 | 3 + 3 = 6 | 5 + 10 = 15        → min: Task#9
        //   MB  = 7 − 3 = 4  | 3 − 3 = 0 | 10 − 5 = 5         → max: Task#10
        //   BCE = (7 − 3)/3 = 1.333 | (3 − 3)/3 = 0 | (10 − 5)/5 = 1 → max: Task#3
        let tm: Vec<f64> = groups.iter().map(|g| g.total_min().value()).collect();
        let mb: Vec<f64> = groups
            .iter()
            .map(|g| g.most_benefit(0, 1).value())
            .collect();
        let bce: Vec<f64> = groups
            .iter()
            .map(|g| g.cost_effectiveness(0, 1).value())
            .collect();
        let p = PAGE as f64;
        assert_eq!(tm, vec![10.0 * p, 6.0 * p, 15.0 * p]);
        assert_eq!(mb, vec![4.0 * p, 0.0, 5.0 * p]);
        assert!((bce[0] - 4.0 / 3.0).abs() < 1e-12 && bce[1] == 0.0 && bce[2] == 1.0);
        for (s, want) in [
            (Selection::FirstFit, 3),
            (Selection::TotalMin, 9),
            (Selection::MostBenefit, 10),
            (Selection::BestCostEffectiveness, 3),
        ] {
            assert_eq!(chosen_tid(s, &rq), Some(want), "{}", s.name());
        }
        // Our reading of §3.2.1: single-threaded processes are not "multithreaded", so the
        // enhanced procedure evaluates them too. MB+ = MB here; every Excl is 1/1, first wins.
        assert_eq!(chosen_tid(Selection::MbPlus, &rq), Some(10));
        assert_eq!(chosen_tid(Selection::Excl, &rq), Some(3));
        assert_eq!(chosen_tid(Selection::ExclBase, &rq), Some(3));
    }

    /// Figure 9 / Table 3(a): ten threads in two groups on four nodes. Hexagon (pid 1) has
    /// four threads on node 0 (its leader, Task#2, Task#4, Task#5) and Task#7 on node 3:
    /// Excl = 4/5 = 0.8. Rectangle (pid 6) is spread: Task#3 and Task#10 on node 0, Task#8
    /// on node 1, its leader on node 2, Task#9 on node 3: Excl = 2/5 = 0.4. Core#0's run
    /// queue holds the hexagon leader, Task#4, Task#5 and Task#10; the idle core is on node 1.
    /// (The figure is an image: the layout is rebuilt from the counts the text gives.)
    #[test]
    fn selection_table3a_least_exclusive_group_is_chosen() {
        let groups = vec![
            group(1, Some(0), &[4, 0, 0, 1], &[]),
            group(6, Some(2), &[2, 1, 1, 1], &[]),
        ];
        assert_eq!(groups[0].exclusivity().value(), 0.8);
        assert_eq!(groups[1].exclusivity().value(), 0.4);
        let candidates = [(1, 1, 0), (1, 4, 0), (1, 5, 0), (6, 10, 1)].map(|(p, t, g)| Candidate {
            key: key(p, t),
            group: g,
        });
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        // Excl_base evaluates all four: 0.8, 0.8, 0.8, 0.4 → Task#10.
        let base = Selection::ExclBase.select(&rq);
        assert_eq!(base.choice.map(|c| c.key.tid.0), Some(10));
        assert_eq!(base.counts.evaluated, 4);
        // Excl skips the leader and Task#4, Task#5 (leader on the source), evaluates Task#10.
        let excl = Selection::Excl.select(&rq);
        assert_eq!(excl.choice.map(|c| c.key.tid.0), Some(10));
        assert_eq!(
            (
                excl.counts.evaluated,
                excl.counts.skipped_leaders,
                excl.counts.skipped_leader_on_source
            ),
            (1, 1, 2)
        );
    }

    /// Figure 7 / Table 3(b): 19 tasks in four groups on four nodes; Core#1 (node 0) is the
    /// source and the idle Core#3 is on node 1. Rebuilt from the text and Table 3(b):
    ///
    /// | group | leader | node 0 | node 1 | node 2 | node 3 | Excl |
    /// |---|---|---|---|---|---|---|
    /// | pentagon (pid 1) | 1 on node 0 | 1, 2, **3** | | 4 | | 3/4 = 0.75 |
    /// | rectangle (pid 5) | 5 on node 1 | **11** | 5, 7 | 8 | 10 | 2/5 = 0.4 |
    /// | shape (pid 12) | 12 on node 3 | **19**, **16** | 13 | | 12, 14 | 2/5 = 0.4 |
    /// | hexagon (pid 15) | 15 on node 2 | **6**, **9** | | 15, 17, 18 | | 3/5 = 0.6 |
    ///
    /// Core#1's run queue (bold), in order: Task#3, Task#11, Task#19, Task#6, Task#16, Task#9.
    fn table3b() -> (Vec<Candidate>, Vec<Group>) {
        let groups = vec![
            group(1, Some(0), &[3, 0, 1, 0], &[]),
            group(5, Some(1), &[1, 2, 1, 1], &[]),
            group(12, Some(3), &[2, 1, 0, 2], &[]),
            group(15, Some(2), &[2, 0, 3, 0], &[]),
        ];
        let candidates = [
            (1, 3, 0),
            (5, 11, 1),
            (12, 19, 2),
            (15, 6, 3),
            (12, 16, 2),
            (15, 9, 3),
        ]
        .map(|(p, t, g)| Candidate {
            key: key(p, t),
            group: g,
        })
        .to_vec();
        (candidates, groups)
    }

    #[test]
    fn selection_table3b_excl_moves_task11_at_once_and_base_agrees() {
        let (candidates, groups) = table3b();
        let excl: Vec<f64> = groups.iter().map(|g| g.exclusivity().value()).collect();
        assert_eq!(excl, vec![0.75, 0.4, 0.4, 0.6]);
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        // Excl_base: 0.75, 0.4, 0.4, 0.6, 0.4, 0.6 → the first 0.4 is Task#11.
        let base = Selection::ExclBase.select(&rq);
        assert_eq!(base.choice.map(|c| c.key.tid.0), Some(11));
        assert_eq!(base.counts.evaluated, 6);
        // Excl and MB+: Task#3 is skipped (its leader is on the source), Task#11's leader is
        // on the destination: moved at once, nothing evaluated.
        for s in [Selection::Excl, Selection::MbPlus] {
            let sel = s.select(&rq);
            let c = sel.choice.unwrap();
            assert_eq!((c.key.tid.0, c.why), (11, Why::LeaderOnDestination));
            assert_eq!(
                (
                    sel.counts.examined,
                    sel.counts.evaluated,
                    sel.counts.skipped_leader_on_source
                ),
                (2, 0, 1)
            );
        }
    }

    #[test]
    fn selection_table3b_second_move_evaluates_only_task19_and_task6() {
        // "If more tasks must be migrated ... the remaining tasks (Task#19, Task#6, Task#16,
        // and Task#9) are evaluated ... only Task#19 and Task#6 are evaluated."
        let (mut candidates, mut groups) = table3b();
        candidates.remove(1);
        groups[1].threads_per_node = vec![0, 3, 1, 1];
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        let sel = Selection::Excl.select(&rq);
        // Task#19: shape 2/5 = 0.4; Task#6: hexagon 3/5 = 0.6; Task#16, Task#9: same groups.
        assert_eq!(sel.choice.map(|c| c.key.tid.0), Some(19));
        assert_eq!(sel.counts.evaluated, 2);
        assert_eq!(sel.counts.skipped_same_group, 2);
        assert_eq!(sel.counts.skipped_leader_on_source, 1);
        // Without the enhancements all five are evaluated, and the pentagon thread competes.
        assert_eq!(Selection::ExclBase.select(&rq).counts.evaluated, 5);
    }

    #[test]
    fn selection_enhanced_never_moves_a_leader_of_a_multithreaded_group() {
        // Only the leader of a two-thread group (its other thread on node 2) is on the source.
        let groups = vec![group(1, Some(0), &[1, 0, 1], &[1, 9, 0])];
        let candidates = [Candidate {
            key: key(1, 1),
            group: 0,
        }];
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        for s in [Selection::Excl, Selection::MbPlus] {
            let sel = s.select(&rq);
            assert_eq!(sel.choice, None, "{}", s.name());
            assert_eq!(sel.counts.skipped_leaders, 1);
        }
        // The base policies would move it.
        for s in [
            Selection::FirstFit,
            Selection::MostBenefit,
            Selection::ExclBase,
        ] {
            assert_eq!(chosen_tid(s, &rq), Some(1), "{}", s.name());
        }
    }

    #[test]
    fn selection_enhanced_moves_thread_with_leader_on_destination_before_better_ones() {
        // Thread 21 (group 20, leader on the destination, little memory there) comes after
        // thread 11 (group 10, leader elsewhere, far more memory on the destination).
        let groups = vec![
            group(10, Some(2), &[1, 0, 1], &[0, 100, 0]),
            group(20, Some(1), &[1, 1, 0], &[50, 1, 0]),
        ];
        let candidates = [(10, 11, 0), (20, 21, 1)].map(|(p, t, g)| Candidate {
            key: key(p, t),
            group: g,
        });
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        // MB: 100 − 0 = 100 vs 1 − 50 = −49 → Task 11; MB+: Task 21 at once.
        assert_eq!(chosen_tid(Selection::MostBenefit, &rq), Some(11));
        let sel = Selection::MbPlus.select(&rq);
        assert_eq!(
            sel.choice.map(|c| (c.key.tid.0, c.why)),
            Some((21, Why::LeaderOnDestination))
        );
        assert_eq!(sel.counts.evaluated, 1);
    }

    #[test]
    fn selection_enhanced_skips_threads_whose_leader_is_on_the_source() {
        let groups = vec![
            group(10, Some(0), &[3, 0, 0], &[0, 100, 0]),
            group(20, Some(2), &[1, 0, 1], &[5, 0, 0]),
        ];
        let candidates = [(10, 11, 0), (10, 12, 0), (20, 21, 1)].map(|(p, t, g)| Candidate {
            key: key(p, t),
            group: g,
        });
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        // MB picks Task 11 (100 on the destination); MB+ may not (its leader is on node 0).
        assert_eq!(chosen_tid(Selection::MostBenefit, &rq), Some(11));
        let sel = Selection::MbPlus.select(&rq);
        assert_eq!(sel.choice.map(|c| c.key.tid.0), Some(21));
        assert_eq!(sel.counts.skipped_leader_on_source, 2);
        // When every thread is skipped, nothing moves.
        let only = &candidates[..2];
        let rq = RunQueue {
            candidates: only,
            ..rq
        };
        assert_eq!(Selection::Excl.select(&rq).choice, None);
    }

    #[test]
    fn selection_unknown_leader_counts_as_other_node_and_empty_queue_selects_nothing() {
        let groups = vec![group(10, None, &[2, 0], &[])];
        let candidates = [(10, 11, 0), (10, 12, 0)].map(|(p, t, g)| Candidate {
            key: key(p, t),
            group: g,
        });
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        let sel = Selection::Excl.select(&rq);
        assert_eq!(sel.choice.map(|c| c.key.tid.0), Some(11));
        assert_eq!(
            (sel.counts.evaluated, sel.counts.skipped_same_group),
            (1, 1)
        );
        for s in Selection::ALL {
            let rq = RunQueue {
                candidates: &[],
                ..rq
            };
            assert_eq!(s.select(&rq).choice, None, "{}", s.name());
        }
    }

    #[test]
    fn selection_enhanced_evaluates_one_member_per_group_beyond_256_groups() {
        // 300 groups (leaders on node 2), two queued threads each, interleaved: the second
        // pass meets every group again. 300 evaluations, 300 skipped as already seen.
        let groups: Vec<Group> = (0..300)
            .map(|g| group(1000 + g, Some(2), &[2, 0, 1], &[0, g as u64, 0]))
            .collect();
        let candidates: Vec<Candidate> = (0..600)
            .map(|i| {
                let g = i % 300;
                Candidate {
                    key: key(1000 + g as i32, 2000 + i as i32),
                    group: g,
                }
            })
            .collect();
        let rq = RunQueue {
            src: 0,
            dst: 1,
            candidates: &candidates,
            groups: &groups,
        };
        let sel = Selection::MbPlus.select(&rq);
        assert_eq!(
            (sel.counts.evaluated, sel.counts.skipped_same_group),
            (300, 300)
        );
        // MB = g pages on the destination: the last group, first met at position 299.
        assert_eq!(sel.choice.map(|c| c.index), Some(299));
        assert_eq!(
            Selection::MostBenefit.select(&rq).choice.map(|c| c.index),
            Some(299)
        );
    }

    #[test]
    fn selection_bce_with_nothing_on_source_is_infinitely_cost_effective() {
        let inf = Score::CostEffectiveness {
            benefit: 5,
            cost: 0,
        };
        let big = Score::CostEffectiveness {
            benefit: 1_000_000,
            cost: 1,
        };
        let none = Score::CostEffectiveness {
            benefit: 0,
            cost: 0,
        };
        assert!(inf.better_than(&big) && !big.better_than(&inf));
        assert!(!inf.better_than(&inf));
        assert!(big.better_than(&none));
        assert_eq!(inf.value(), f64::INFINITY);
        assert_eq!(none.value(), 0.0);
        // Scores of different policies never beat each other.
        assert!(!Score::Benefit(5).better_than(&Score::TotalBytes(1)));
    }

    #[test]
    fn selection_names_round_trip() {
        for s in Selection::ALL {
            assert_eq!(Selection::from_name(s.name()), Some(s));
            assert_eq!(Selection::from_name(s.policy_name()), Some(s));
            assert_eq!(s.policy_name(), format!("numa-{}", s.name()));
        }
        assert_eq!(Selection::from_name("numa-nonesuch"), None);
    }
}
