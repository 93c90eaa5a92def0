//! Which managed processes share one policy instance.
//!
//! Two programs whose threads may run on the same CPUs compete for them. Balanced one by
//! one, each program's policy sees only its own threads: Tumbler evens out *its* threads'
//! utilization over the sockets while the other program's busy threads sit on one of
//! them, and the two policies undo each other's placements. Tumbler (§5.4, "it considers
//! CPU utilization values of all the threads (belong to multiple applications) in grouping
//! threads") and Shuffling (§4.5, pairs of programs each using all four sockets) run one
//! instance over the threads of every application. The daemon does the same: processes
//! whose usable CPUs overlap and whose rules give the same policy at the same level form
//! one group, and one policy instance balances the union of their threads.
//!
//! ```text
//!  A  speed core  CPUs 0-7 ──┐ overlap, same policy and level
//!  B  speed core  CPUs 4-15 ─┤──────────────► group {A, B, C}: one speed over all threads
//!  C  speed core  CPUs 8-15 ─┘ (B joins A and C: sharing is transitive)
//!  D  tumbler pkg CPUs 0-15 ───► group {D} alone, and a warning: D overlaps A, B, C under
//!                                another policy, so two policies move threads on CPUs 0-15
//!  E  speed core  CPUs 16-23 ──► group {E}: no CPU in common with anyone
//! ```
//!
//! **Different policies on shared CPUs are kept apart, with a warning**, rather than put
//! under the policy of whichever process matched first: a rule is the operator's word on
//! how to place that program, and silently running another program under it would break
//! the rule of the other one (a `shuffling` rule asks for lock-time grouping, a `speed`
//! rule for fairness between threads; neither is a special case of the other). The
//! warning tells the operator that the two policies contend, and the fix is theirs: one
//! policy for both, or disjoint `cpus`.
//!
//! **Settings other than the policy and the level** (the interval, the seed, Shuffling's
//! threshold) come from the group's *leader*, the member managed longest (the lowest
//! `since`, then the lowest pid), so a process that joins a running group does not change
//! how the group is balanced.
//!
//! [`form`] is pure; the daemon calls it every window with the processes it manages and
//! rebuilds the policy of every group whose members changed (a process started, exited, was
//! released or paused), leaving the masks of the others where they are.
//!
//! ```
//! use threadbalance_daemon::group::{form, Member};
//! use threadbalance_model::{CpuSet, Level, Pid};
//! let m = |pid, policy: &str, cpus: &str| Member {
//!     pid: Pid(pid), policy: policy.into(), level: Level::Core,
//!     cpus: CpuSet::parse_list(cpus).unwrap(), since: pid as u64,
//! };
//! let g = form(&[m(10, "speed", "0-3"), m(11, "speed", "2-5"), m(12, "shuffling", "0-1")]);
//! assert_eq!(g.groups.len(), 2);
//! assert_eq!(g.groups[0].members, vec![Pid(10), Pid(11)]);
//! assert_eq!(g.groups[0].leader, Pid(10));
//! assert_eq!(g.apart.len(), 1); // 12 shares CPUs 0-1 with 10 under another policy
//! ```

use threadbalance_model::{CpuSet, Level, Pid};

/// A managed process, as grouping sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The process.
    pub pid: Pid,
    /// Its rule's policy.
    pub policy: String,
    /// The level its rule balances at.
    pub level: Level,
    /// The CPUs its threads may use that the daemon may use too.
    pub cpus: CpuSet,
    /// When it was taken on (any increasing count: windows, a sequence number); the
    /// longest-managed member leads its group.
    pub since: u64,
}

/// Processes under one policy instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its members, by pid.
    pub members: Vec<Pid>,
    /// The member whose rule's settings the group uses.
    pub leader: Pid,
}

/// Two processes that share CPUs under different policies or levels, so kept apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Apart {
    /// One process (the lower pid).
    pub a: Pid,
    /// The other.
    pub b: Pid,
    /// The CPUs both may use.
    pub shared: CpuSet,
}

impl std::fmt::Display for Apart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "processes {} and {} share CPUs {} under different policies or levels: they are \
             balanced apart and their policies may move threads against each other (give \
             their rules one policy and level to balance them together, or disjoint cpus)",
            self.a, self.b, self.shared
        )
    }
}

/// The daemon's processes in groups.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Grouping {
    /// The groups, each sorted by pid, ordered by their lowest pid. Every member is in
    /// exactly one.
    pub groups: Vec<Group>,
    /// Pairs that share CPUs but not a policy and level, ordered by pids.
    pub apart: Vec<Apart>,
}

/// Whether two members may share a policy instance: same policy, same level.
fn compatible(a: &Member, b: &Member) -> bool {
    a.policy == b.policy && a.level == b.level
}

/// Groups `members`: the connected parts of the graph whose edges join two compatible
/// members (same policy and level) whose CPUs overlap. Pure; the order of `members` does
/// not matter.
pub fn form(members: &[Member]) -> Grouping {
    let mut sorted: Vec<&Member> = members.iter().collect();
    sorted.sort_by_key(|m| m.pid);
    let n = sorted.len();
    // Union-find over indices into `sorted`.
    let mut parent: Vec<usize> = (0..n).collect();
    fn find(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut apart = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let shared = sorted[i].cpus.intersection(&sorted[j].cpus);
            if shared.is_empty() {
                continue;
            }
            if compatible(sorted[i], sorted[j]) {
                let (a, b) = (find(&mut parent, i), find(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            } else {
                apart.push(Apart {
                    a: sorted[i].pid,
                    b: sorted[j].pid,
                    shared,
                });
            }
        }
    }
    let mut by_root: std::collections::BTreeMap<usize, Vec<&Member>> = Default::default();
    for (i, m) in sorted.iter().enumerate() {
        let r = find(&mut parent, i);
        by_root.entry(r).or_default().push(m);
    }
    // Roots are the lowest index of their part, so groups come out by their lowest pid.
    let groups = by_root
        .into_values()
        .map(|ms| Group {
            members: ms.iter().map(|m| m.pid).collect(),
            leader: ms
                .iter()
                .min_by_key(|m| (m.since, m.pid))
                .map_or(Pid(0), |m| m.pid),
        })
        .collect();
    Grouping { groups, apart }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pid: i32, policy: &str, level: Level, cpus: &str, since: u64) -> Member {
        Member {
            pid: Pid(pid),
            policy: policy.into(),
            level,
            cpus: CpuSet::parse_list(cpus).unwrap(),
            since,
        }
    }

    fn pids(g: &Group) -> Vec<i32> {
        g.members.iter().map(|p| p.0).collect()
    }

    #[test]
    fn form_nothing_managed_gives_no_group() {
        assert_eq!(form(&[]), Grouping::default());
    }

    #[test]
    fn form_two_programs_on_the_whole_machine_share_one_instance() {
        // Tumbler §5.4's runs: two programs of 64 threads on all 64 cores, one Tumbler.
        let g = form(&[
            m(200, "tumbler", Level::Package, "0-63", 1),
            m(100, "tumbler", Level::Package, "0-63", 2),
        ]);
        assert_eq!(g.groups.len(), 1);
        assert_eq!(pids(&g.groups[0]), vec![100, 200]);
        // 200 was managed first (since 1 < 2): it leads, though its pid is higher.
        assert_eq!(g.groups[0].leader, Pid(200));
        assert!(g.apart.is_empty());
    }

    #[test]
    fn form_disjoint_cpus_stay_apart_without_a_warning() {
        // Two containers with cpusets 0-7 and 8-15: nothing shared, nothing to warn about.
        let g = form(&[
            m(1, "speed", Level::Core, "0-7", 1),
            m(2, "speed", Level::Core, "8-15", 2),
        ]);
        assert_eq!(g.groups.len(), 2);
        assert!(g.apart.is_empty());
    }

    #[test]
    fn form_overlap_is_transitive() {
        // 0-7 ∩ 4-11 = 4-7 and 4-11 ∩ 8-15 = 8-11, so all three are one group although
        // 0-7 ∩ 8-15 is empty: B's threads may run on both A's CPUs and C's.
        let g = form(&[
            m(1, "speed", Level::Core, "0-7", 3),
            m(2, "speed", Level::Core, "4-11", 1),
            m(3, "speed", Level::Core, "8-15", 2),
        ]);
        assert_eq!(g.groups.len(), 1);
        assert_eq!(pids(&g.groups[0]), vec![1, 2, 3]);
        assert_eq!(g.groups[0].leader, Pid(2));
    }

    #[test]
    fn form_different_policy_or_level_on_shared_cpus_is_kept_apart_and_named() {
        // 1 and 2 share CPUs 2-3 but not the policy; 1 and 3 share 0-3 but not the level.
        let g = form(&[
            m(1, "speed", Level::Core, "0-3", 1),
            m(2, "shuffling", Level::Core, "2-5", 2),
            m(3, "speed", Level::Package, "0-3", 3),
        ]);
        assert_eq!(g.groups.len(), 3);
        assert_eq!(g.apart.len(), 3);
        assert_eq!((g.apart[0].a, g.apart[0].b), (Pid(1), Pid(2)));
        assert_eq!(g.apart[0].shared.to_string(), "2-3");
        assert_eq!((g.apart[1].a, g.apart[1].b), (Pid(1), Pid(3)));
        assert_eq!(g.apart[1].shared.to_string(), "0-3");
        assert_eq!((g.apart[2].a, g.apart[2].b), (Pid(2), Pid(3)));
        assert_eq!(g.apart[2].shared.to_string(), "2-3");
        assert!(
            g.apart[0]
                .to_string()
                .starts_with("processes 1 and 2 share CPUs 2-3 under different policies or levels")
        );
    }

    #[test]
    fn form_groups_and_apart_mixed() {
        // The module's picture: A, B, C speed at core level chained by overlaps; D tumbler
        // over all of them; E speed on CPUs of its own.
        let g = form(&[
            m(1, "speed", Level::Core, "0-7", 1),
            m(2, "speed", Level::Core, "4-15", 2),
            m(3, "speed", Level::Core, "8-15", 3),
            m(4, "tumbler", Level::Package, "0-15", 4),
            m(5, "speed", Level::Core, "16-23", 5),
        ]);
        let got: Vec<Vec<i32>> = g.groups.iter().map(pids).collect();
        assert_eq!(got, vec![vec![1, 2, 3], vec![4], vec![5]]);
        let pairs: Vec<(i32, i32)> = g.apart.iter().map(|a| (a.a.0, a.b.0)).collect();
        assert_eq!(pairs, vec![(1, 4), (2, 4), (3, 4)]);
    }

    #[test]
    fn form_a_member_leaving_splits_a_chain() {
        // B bridged A and C; once B exits, A (0-7) and C (8-15) share nothing.
        let with = form(&[
            m(1, "speed", Level::Core, "0-7", 1),
            m(2, "speed", Level::Core, "4-11", 2),
            m(3, "speed", Level::Core, "8-15", 3),
        ]);
        assert_eq!(with.groups.len(), 1);
        let without = form(&[
            m(1, "speed", Level::Core, "0-7", 1),
            m(3, "speed", Level::Core, "8-15", 3),
        ]);
        let got: Vec<Vec<i32>> = without.groups.iter().map(pids).collect();
        assert_eq!(got, vec![vec![1], vec![3]]);
    }

    #[test]
    fn form_does_not_depend_on_the_order_of_members() {
        let a = [
            m(7, "speed", Level::Core, "0-1", 2),
            m(3, "speed", Level::Core, "1", 1),
            m(5, "tumbler", Level::Core, "0", 3),
        ];
        let mut b = a.clone();
        b.reverse();
        assert_eq!(form(&a), form(&b));
    }
}
