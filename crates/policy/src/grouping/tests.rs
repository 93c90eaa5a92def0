use super::*;
use crate::rng::Rng;
use threadbalance_model::testutil::{key, topo, window_of};

#[test]
fn regroup_idle_thread_takes_no_place_in_the_wave() {
    // Five threads into two cores: a main thread at 0 (asleep in join) and workers at
    // .25, .5, 1, 1. Algorithm 2 over all five, sorted [0, .25, .5, 1, 1]: positions
    // 0 → g0, 1 → g1, 2 → g1, 3 → g0, 4 → g0 (third pass forward again): both busy
    // workers in g0. Without the idle main thread the wave deals [.25, .5, 1, 1]:
    // g0 = {.25, 1}, g1 = {.5, 1} (means .625 and .75), then the main thread fills g0.
    let t = topo(1, 1, 2, 1);
    let utils = [0.0, 0.25, 0.5, 1.0, 1.0];
    let threads: Vec<_> = utils
        .iter()
        .enumerate()
        .map(|(i, &u)| (key(1, 100 + i as i32), u, 0))
        .collect();
    let w = window_of(100, &threads);
    let metric: Vec<f64> = w.threads.iter().map(|t| t.util).collect();
    let mut r = Regroup::new();
    let mut placement = Placement::default();
    r.run(
        &t,
        Level::Core,
        &w.threads,
        &metric,
        Scheme::Wave,
        &mut placement,
    );
    let g = r.groups().to_vec();
    assert_ne!(
        g[3], g[4],
        "the two busy workers are in different groups: {g:?}"
    );
    assert_ne!(g[1], g[3], "{g:?}");
    let in0 = g.iter().filter(|&&x| x == 0).count();
    assert_eq!((in0, g.len() - in0), (3, 2), "sizes differ by at most one");
    assert_eq!(g[0], 0, "the idle thread fills the smaller group: {g:?}");
}

/// Threads that would change domain if group g went to domain `dog[g]`.
fn moves(dog: &[usize], group: &[usize], current: &[Option<usize>]) -> usize {
    group
        .iter()
        .zip(current)
        .filter(|&(&g, &c)| c != Some(dog[g]))
        .count()
}

#[test]
fn equal_size_17_into_4_differs_by_one() {
    // 17 = 4·4 + 1: one group of 5, three of 4.
    let sizes: Vec<usize> = (0..4).map(|g| equal_size(17, 4, g)).collect();
    assert_eq!(sizes, [5, 4, 4, 4]);
    // The wave gives the extra thread to group 0 too: i = 16 is pass 4 (even), pos 0.
    let mut wave = [0; 4];
    let mut cont = [0; 4];
    for i in 0..17 {
        wave[wave_group(i, 4)] += 1;
        cont[contiguous_group(i, 17, 4)] += 1;
    }
    assert_eq!(wave, [5, 4, 4, 4]);
    assert_eq!(cont, [5, 4, 4, 4]);
}

#[test]
fn equal_size_3_into_4_leaves_one_group_empty() {
    // 3 = 4·0 + 3: three groups of one, one empty.
    let sizes: Vec<usize> = (0..4).map(|g| equal_size(3, 4, g)).collect();
    assert_eq!(sizes, [1, 1, 1, 0]);
    let wave: Vec<usize> = (0..3).map(|i| wave_group(i, 4)).collect();
    assert_eq!(wave, [0, 1, 2]);
    let cont: Vec<usize> = (0..3).map(|i| contiguous_group(i, 3, 4)).collect();
    assert_eq!(cont, [0, 1, 2]);
}

#[test]
fn wave_any_n_sizes_differ_by_at_most_one() {
    for k in 1..=9 {
        for n in 0..=40 {
            let mut wave = vec![0usize; k];
            let mut cont = vec![0usize; k];
            for i in 0..n {
                wave[wave_group(i, k)] += 1;
                cont[contiguous_group(i, n, k)] += 1;
            }
            for sizes in [&wave, &cont] {
                let (lo, hi) = (sizes.iter().min(), sizes.iter().max());
                assert!(hi.zip(lo).is_some_and(|(h, l)| h - l <= 1), "n={n} k={k}");
                assert_eq!(sizes.iter().sum::<usize>(), n);
            }
            // Contiguous runs are non-decreasing in i.
            assert!((1..n).all(|i| contiguous_group(i - 1, n, k) <= contiguous_group(i, n, k)));
        }
    }
}

#[test]
fn wave_16_threads_into_4_groups_balances_means() {
    // Sixteen utilizations (%), sorted, in the spirit of Tumbler's Figure 3.
    let util = [
        5, 10, 12, 20, 25, 30, 41, 45, 50, 58, 62, 70, 78, 85, 90, 99,
    ];
    // Pass 0 (→): T0..T3 to g0..g3; pass 1 (←): T4..T7 to g3..g0; pass 2 (→); pass 3 (←).
    let mut groups: Vec<Vec<u32>> = vec![Vec::new(); 4];
    for (i, &u) in util.iter().enumerate() {
        groups[wave_group(i, 4)].push(u);
    }
    assert_eq!(groups[0], [5, 45, 50, 99]); //  199 / 4 = 49.75
    assert_eq!(groups[1], [10, 41, 58, 90]); // 199 / 4 = 49.75
    assert_eq!(groups[2], [12, 30, 62, 85]); // 189 / 4 = 47.25
    assert_eq!(groups[3], [20, 25, 70, 78]); // 193 / 4 = 48.25
    // Overall mean 780 / 16 = 48.75; the group means span 2.5 points. Consecutive
    // runs would span 11.75 (5+10+12+20 = 47) to 88 (78+85+90+99 = 352).
    let means: Vec<f64> = groups
        .iter()
        .map(|g| g.iter().sum::<u32>() as f64 / 4.0)
        .collect();
    assert_eq!(means, [49.75, 49.75, 47.25, 48.25]);
}

#[test]
fn fewest_moves_rotated_groups_move_nobody() {
    // 8 threads, 2 per domain. The new groups are exactly the threads already together,
    // but numbered one off: group g sits in domain g+1 (mod 4).
    let group = [0, 0, 1, 1, 2, 2, 3, 3];
    let current = [1, 1, 2, 2, 3, 3, 0, 0].map(Some);
    let mut a = Assignment::new();
    let dog = a.fewest_moves(4, &group, &current).to_vec();
    assert_eq!(dog, [1, 2, 3, 0]);
    // Group i → domain i, as the papers do, would move all 8; ours moves none.
    assert_eq!(moves(&[0, 1, 2, 3], &group, &current), 8);
    assert_eq!(moves(&dog, &group, &current), 0);
}

#[test]
fn fewest_moves_beats_greedy_when_largest_overlap_misleads() {
    // Overlaps (threads of g already in d):   d0  d1
    //                                   g0     3   2
    //                                   g1     2   0
    // Greedy takes g0→d0 (3) then g1→d1 (0): 3 stay, 4 of 7 move.
    // Exact takes g0→d1 (2) and g1→d0 (2): 4 stay, 3 move.
    let group = [0, 0, 0, 0, 0, 1, 1];
    let current = [0, 0, 0, 1, 1, 0, 0].map(Some);
    let mut a = Assignment::new();
    let exact = a.fewest_moves(2, &group, &current).to_vec();
    assert_eq!(exact, [1, 0]);
    assert_eq!(moves(&exact, &group, &current), 3);
    a.greedy(2, &group, &current);
    assert_eq!(a.domain_of_group, [0, 1]);
    assert_eq!(moves(&a.domain_of_group, &group, &current), 4);
}

#[test]
fn fewest_moves_nothing_known_keeps_papers_identity() {
    let group = [0, 1, 2, 3, 0, 1];
    let current = [None; 6];
    let mut a = Assignment::new();
    assert_eq!(a.fewest_moves(4, &group, &current), [0, 1, 2, 3]);
    a.greedy(4, &group, &current);
    assert_eq!(a.domain_of_group, [0, 1, 2, 3]);
}

#[test]
fn fewest_moves_matches_brute_force_on_random_cases() {
    fn permutations(k: usize) -> Vec<Vec<usize>> {
        if k == 0 {
            return vec![vec![]];
        }
        let mut out = Vec::new();
        for p in permutations(k - 1) {
            for pos in 0..=p.len() {
                let mut q = p.clone();
                q.insert(pos, k - 1);
                out.push(q);
            }
        }
        out
    }
    let mut rng = Rng::new(11);
    let mut a = Assignment::new();
    for k in 1..=6 {
        let perms = permutations(k);
        for _ in 0..50 {
            let n = 1 + rng.below(20) as usize;
            let group: Vec<usize> = (0..n).map(|_| rng.below(k as u64) as usize).collect();
            let current: Vec<Option<usize>> = (0..n)
                .map(|_| {
                    let d = rng.below(k as u64 + 1) as usize;
                    (d < k).then_some(d)
                })
                .collect();
            let best = perms
                .iter()
                .map(|p| moves(p, &group, &current))
                .min()
                .unwrap();
            let dog = a.fewest_moves(k, &group, &current).to_vec();
            let mut sorted = dog.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..k).collect::<Vec<_>>(), "a permutation");
            assert_eq!(moves(&dog, &group, &current), best);
            // Greedy is a permutation and never worse than twice the stayers lost.
            a.greedy(k, &group, &current);
            let mut g = a.domain_of_group.clone();
            g.sort_unstable();
            assert_eq!(g, (0..k).collect::<Vec<_>>());
            let stay_exact = n - best;
            let stay_greedy = n - moves(&a.domain_of_group, &group, &current);
            assert!(2 * stay_greedy >= stay_exact);
        }
    }
}

#[test]
fn fewest_moves_above_hungarian_limit_uses_greedy() {
    // 300 domains (core level of a large machine), 2 threads each, groups rotated by
    // one as above: the greedy match also finds the assignment that moves nobody.
    let k = HUNGARIAN_MAX_DOMAINS + 44;
    let group: Vec<usize> = (0..2 * k).map(|i| i / 2).collect();
    let current: Vec<Option<usize>> = (0..2 * k).map(|i| Some((i / 2 + 1) % k)).collect();
    let mut a = Assignment::new();
    let dog = a.fewest_moves(k, &group, &current).to_vec();
    assert_eq!(moves(&dog, &group, &current), 0);
}

#[test]
fn ordered_bits_sorts_like_total_cmp() {
    let mut xs = [
        0.5,
        -0.0,
        0.0,
        -1.5,
        f64::INFINITY,
        1e-300,
        -1e-300,
        0.25,
        f64::NEG_INFINITY,
    ];
    let mut by_bits = xs;
    xs.sort_by(f64::total_cmp);
    by_bits.sort_by_key(|&x| ordered_bits(x));
    assert_eq!(xs.map(f64::to_bits), by_bits.map(f64::to_bits));
}

#[test]
fn placement_forgets_vanished_threads() {
    let mut p = Placement::new();
    p.set(key(1, 10), 0);
    p.set(key(1, 12), 3);
    p.set(key(1, 11), 2);
    assert_eq!(
        p.iter().map(|(k, _)| k.tid.0).collect::<Vec<_>>(),
        [10, 11, 12]
    );
    // Thread 11 is gone; 13 is new (not assigned yet).
    let w = window_of(
        100,
        &[
            (key(1, 10), 0.5, 0),
            (key(1, 12), 0.5, 0),
            (key(1, 13), 0.5, 5),
        ],
    );
    p.retain_alive(&w.threads);
    assert_eq!(p.len(), 2);
    assert_eq!(p.get(&key(1, 11)), None);
    assert_eq!(p.get(&key(1, 12)), Some(3));
    // Current domain: the assigned one, else that of the last CPU (CPU 5 → package 1 of
    // 2 packages × 4 CPUs).
    let t = topo(2, 1, 4, 1);
    assert_eq!(p.current(&w.threads[1], &t, Level::Package), Some(3));
    assert_eq!(p.current(&w.threads[2], &t, Level::Package), Some(1));
}

#[test]
fn regroup_moves_threads_whose_domain_changes_and_confines_new_ones() {
    // 2 packages of 2 CPUs. Utilizations .9 .8 .2 .1 on CPUs 0 0 2 2: both busy threads
    // share package 0. The wave over .1 .2 .8 .9 gives g0 = {.1, .9}, g1 = {.2, .8}.
    let t = topo(2, 1, 2, 1);
    let w = window_of(
        100,
        &[
            (key(1, 1), 0.9, 0),
            (key(1, 2), 0.8, 0),
            (key(1, 3), 0.2, 2),
            (key(1, 4), 0.1, 2),
        ],
    );
    let metric: Vec<f64> = w.threads.iter().map(|t| t.util).collect();
    let mut r = Regroup::new();
    let mut p = Placement::new();
    let moved = r
        .run(
            &t,
            Level::Package,
            &w.threads,
            &metric,
            Scheme::Wave,
            &mut p,
        )
        .to_vec();
    // Both matchings keep 2 of 4 in place; the tie goes to g0 → package 0, so .8 (tid 2)
    // goes to package 1 and .1 (tid 4) comes to package 0. Tids 1 and 3 stay in their
    // package; placed for the first time, they get a move that confines them there.
    assert_eq!(r.groups(), [0, 1, 1, 0]);
    assert_eq!(moved, [(0, 0), (1, 1), (2, 1), (3, 0)]);
    assert_eq!(p.get(&key(1, 1)), Some(0));
    assert_eq!(p.get(&key(1, 4)), Some(0));
    // Again with the same rates: nothing moves.
    let again = r.run(
        &t,
        Level::Package,
        &w.threads,
        &metric,
        Scheme::Wave,
        &mut p,
    );
    assert!(again.is_empty());
}
