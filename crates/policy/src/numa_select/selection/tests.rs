//! Worked examples of the selections: the paper's Tables 1 and 3, and the enhanced
//! procedure's rules.
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

#[test]
fn selection_fallback_picks_by_the_base_metric_when_the_procedure_refuses() {
    // Source node 0, destination 1. Process 1: leader and two threads on node 0, one on
    // node 2 (Excl 3/4). Process 2: leader on node 0, one thread on each of nodes 0, 2, 3
    // (Excl 2/4), with more memory on the destination. Every thread's leader is on the
    // source, so the enhanced procedure refuses them all.
    let groups = vec![
        group(1, Some(0), &[3, 0, 1, 0], &[100, 0, 0, 0]),
        group(2, Some(0), &[2, 0, 1, 1], &[10, 50, 0, 0]),
    ];
    let c = |pid: i32, tid: i32, g: usize| Candidate {
        key: key(pid, tid),
        group: g,
    };
    let candidates = vec![
        c(1, 1, 0),
        c(1, 11, 0),
        c(1, 12, 0),
        c(2, 2, 1),
        c(2, 21, 1),
    ];
    let rq = RunQueue {
        src: 0,
        dst: 1,
        candidates: &candidates,
        groups: &groups,
    };
    for s in [Selection::Excl, Selection::MbPlus] {
        assert_eq!(chosen_tid(s, &rq), None, "{}", s.name());
        let f = s.fallback(&rq);
        let choice = f.choice.unwrap();
        // Never a leader while another thread waits: Excl's least exclusive group and
        // MB's most benefit (50 − 10 pages against 0 − 100) are both process 2.
        assert_eq!(choice.key.tid.0, 21, "{}", s.name());
        assert_eq!(choice.why, Why::Forced);
        // Three non-leaders evaluated (two of process 1, one of process 2).
        assert_eq!(f.counts.evaluated, 3, "{}", s.name());
    }
    // Only leaders wait: one of them moves.
    let leaders = vec![c(1, 1, 0), c(2, 2, 1)];
    let rq = RunQueue {
        candidates: &leaders,
        ..rq
    };
    assert_eq!(Selection::Excl.fallback(&rq).choice.unwrap().key.tid.0, 2);
    assert_eq!(Selection::MbPlus.fallback(&rq).choice.unwrap().key.tid.0, 2);
    // The other selections refuse only an empty queue: their fallback is their choice.
    for s in [
        Selection::FirstFit,
        Selection::ExclBase,
        Selection::MostBenefit,
    ] {
        assert_eq!(s.fallback(&rq), s.select(&rq), "{}", s.name());
    }
    let empty = RunQueue {
        candidates: &[],
        ..rq
    };
    assert_eq!(Selection::Excl.fallback(&empty).choice, None);
}
