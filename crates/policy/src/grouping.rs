//! One group of threads per domain, and the domain each group goes to. Shared by
//! `tumbler`, `shuffling` and `psets`.
//!
//! The papers split `N` threads into `K` groups, one per socket, and give group *i* to
//! socket *i*. We keep their groups and improve the second half: groups go to domains so
//! that the fewest threads change domain.
//!
//! ```text
//!  threads sorted by a metric          K groups, sizes differ by ≤ 1      K domains
//!  (util for Tumbler,                                                     (packages, nodes,
//!   lock time for Shuffling)                                               LLCs or cores)
//!  t0 t1 t2 … t(N-1) ──► Scheme::Wave        (Tumbler Algorithm 2) ──┐
//!                    ──► Scheme::Contiguous  (Shuffling §3.1)      ──┴─► Assignment::fewest_moves
//!                                                                        weight(g, d) = threads of g
//!                                                                        already in d; maximum-weight
//!                                                                        matching (Hungarian, O(K³))
//! ```
//!
//! A thread's *current domain* is the one the policy last assigned it ([`Placement`]), else
//! the domain of the CPU it last ran on. Threads whose domain changes get a move, and so do
//! threads not placed before, even if they already run in their new domain: the move
//! confines them there, so that the placement recorded is the one the OS enforces.
//!
//! ```
//! use threadbalance_policy::grouping::{contiguous_group, equal_size, wave_group};
//! // 17 threads into 4 groups: 5, 4, 4, 4.
//! let sizes: Vec<usize> = (0..4).map(|g| equal_size(17, 4, g)).collect();
//! assert_eq!(sizes, [5, 4, 4, 4]);
//! // Algorithm 2 runs over the sorted threads as a wave: 0 1 2 3 3 2 1 0 0 1 …
//! let wave: Vec<usize> = (0..10).map(|i| wave_group(i, 4)).collect();
//! assert_eq!(wave, [0, 1, 2, 3, 3, 2, 1, 0, 0, 1]);
//! // Shuffling cuts the sorted threads into consecutive runs: 0 0 0 0 0 1 1 1 1 2 …
//! assert_eq!(contiguous_group(4, 17, 4), 0);
//! assert_eq!(contiguous_group(5, 17, 4), 1);
//! ```

use threadbalance_model::{Level, ThreadKey, ThreadRates, Topology};

/// Up to this many domains, groups are matched to domains exactly (Hungarian algorithm,
/// O(K³): about 17 million steps at 256, a few milliseconds). Above it (core level on very
/// large machines), a greedy match by overlap is used: it takes the largest overlaps first,
/// is O(N log N) in the threads, and keeps at least half the threads the exact match keeps
/// in place.
pub const HUNGARIAN_MAX_DOMAINS: usize = 256;

/// The size of group `g` when `n` threads go into `k` groups: the first `n % k` groups get
/// one more than the others, so sizes differ by at most one. 0 for `g ≥ k`.
pub fn equal_size(n: usize, k: usize, g: usize) -> usize {
    if k == 0 || g >= k {
        return 0;
    }
    n / k + usize::from(g < n % k)
}

/// Tumbler's Algorithm 2: the group of the `i`-th thread in sorted order, scanning the
/// groups as a wave (0, 1, …, K−1, K−1, …, 1, 0, 0, 1, …). Every full pass gives each
/// group one thread and the last, partial pass gives one more to a run of groups at one
/// end, so sizes differ by at most one for any `N`, including `N < K`.
pub fn wave_group(i: usize, k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let (pass, pos) = (i / k, i % k);
    if pass % 2 == 0 { pos } else { k - pos - 1 }
}

/// Shuffling's grouping: the group of the `i`-th of `n` threads in sorted order when they
/// are cut into `k` runs of consecutive threads whose sizes are [`equal_size`].
pub fn contiguous_group(i: usize, n: usize, k: usize) -> usize {
    if k == 0 {
        return 0;
    }
    let (q, r) = (n / k, n % k);
    let big = r * (q + 1);
    if i < big {
        i / (q + 1)
    } else {
        r + (i - big) / q.max(1)
    }
}

/// How sorted threads are cut into groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Tumbler's wave ([`wave_group`]): each group gets a mix of high and low values, so
    /// group means are nearly equal.
    Wave,
    /// Shuffling's consecutive runs ([`contiguous_group`]): similar values together.
    Contiguous,
}

impl Scheme {
    /// The group of the `i`-th of `n` sorted threads among `k` groups.
    pub fn group(self, i: usize, n: usize, k: usize) -> usize {
        match self {
            Scheme::Wave => wave_group(i, k),
            Scheme::Contiguous => contiguous_group(i, n, k),
        }
    }
}

/// Matches `K` groups to `K` domains so the fewest threads change domain, reusing its
/// buffers between calls.
#[derive(Debug, Clone, Default)]
pub struct Assignment {
    /// `overlap[g * k + d]`: threads of group `g` currently in domain `d`.
    overlap: Vec<u32>,
    // Hungarian algorithm state, 1-indexed as in the textbook formulation.
    u: Vec<i64>,
    v: Vec<i64>,
    minv: Vec<i64>,
    p: Vec<usize>,
    way: Vec<usize>,
    used: Vec<bool>,
    // Greedy state.
    pairs: Vec<(usize, usize)>,
    runs: Vec<(u32, usize, usize)>,
    group_done: Vec<bool>,
    domain_taken: Vec<bool>,
    /// The answer: the domain of each group.
    domain_of_group: Vec<usize>,
}

impl Assignment {
    /// An empty assignment; buffers grow on first use.
    pub fn new() -> Assignment {
        Assignment::default()
    }

    /// The domain of each of `k` groups, given each thread's new `group` and `current`
    /// domain (`None` when unknown). The matching maximizes the threads left where they
    /// are; among equally good matchings it prefers group *g* → domain *g* (the papers'
    /// choice), so a first placement with nothing known follows the papers. Groups or
    /// domains `≥ k` are ignored.
    pub fn fewest_moves(
        &mut self,
        k: usize,
        group: &[usize],
        current: &[Option<usize>],
    ) -> &[usize] {
        if k <= HUNGARIAN_MAX_DOMAINS {
            self.hungarian(k, group, current);
        } else {
            self.greedy(k, group, current);
        }
        &self.domain_of_group
    }

    /// Exact maximum-weight matching. Weight of (g, d) = overlap·(K+1) + [g = d]: the
    /// identity bonus sums to at most K, less than one thread of overlap, so it only
    /// breaks ties.
    fn hungarian(&mut self, k: usize, group: &[usize], current: &[Option<usize>]) {
        self.overlap.clear();
        self.overlap.resize(k * k, 0);
        for (&g, &c) in group.iter().zip(current) {
            if let Some(d) = c {
                if g < k && d < k {
                    self.overlap[g * k + d] += 1;
                }
            }
        }
        let scale = k as i64 + 1;
        let overlap = &self.overlap;
        // Minimizing cost = −weight.
        let cost = |i: usize, j: usize| -> i64 {
            let w = i64::from(overlap[(i - 1) * k + (j - 1)]) * scale + i64::from(i == j);
            -w
        };
        const INF: i64 = i64::MAX / 4;
        let n = k;
        for buf in [&mut self.u, &mut self.v] {
            buf.clear();
            buf.resize(n + 1, 0);
        }
        self.p.clear();
        self.p.resize(n + 1, 0);
        self.way.clear();
        self.way.resize(n + 1, 0);
        for i in 1..=n {
            self.p[0] = i;
            let mut j0 = 0;
            self.minv.clear();
            self.minv.resize(n + 1, INF);
            self.used.clear();
            self.used.resize(n + 1, false);
            loop {
                self.used[j0] = true;
                let i0 = self.p[j0];
                let mut delta = INF;
                let mut j1 = 0;
                for j in 1..=n {
                    if !self.used[j] {
                        let cur = cost(i0, j) - self.u[i0] - self.v[j];
                        if cur < self.minv[j] {
                            self.minv[j] = cur;
                            self.way[j] = j0;
                        }
                        if self.minv[j] < delta {
                            delta = self.minv[j];
                            j1 = j;
                        }
                    }
                }
                for j in 0..=n {
                    if self.used[j] {
                        self.u[self.p[j]] += delta;
                        self.v[j] -= delta;
                    } else {
                        self.minv[j] -= delta;
                    }
                }
                j0 = j1;
                if self.p[j0] == 0 {
                    break;
                }
            }
            loop {
                let j1 = self.way[j0];
                self.p[j0] = self.p[j1];
                j0 = j1;
                if j0 == 0 {
                    break;
                }
            }
        }
        self.domain_of_group.clear();
        self.domain_of_group.resize(k, 0);
        for j in 1..=n {
            let g = self.p[j];
            if g >= 1 {
                self.domain_of_group[g - 1] = j - 1;
            }
        }
    }

    /// Largest overlaps first (ties by group, then domain); groups left over take their own
    /// index if free, else the lowest free domain.
    fn greedy(&mut self, k: usize, group: &[usize], current: &[Option<usize>]) {
        self.pairs.clear();
        for (&g, &c) in group.iter().zip(current) {
            if let Some(d) = c {
                if g < k && d < k {
                    self.pairs.push((g, d));
                }
            }
        }
        self.pairs.sort_unstable();
        self.runs.clear();
        for &(g, d) in &self.pairs {
            match self.runs.last_mut() {
                Some((n, lg, ld)) if (*lg, *ld) == (g, d) => *n += 1,
                _ => self.runs.push((1, g, d)),
            }
        }
        self.runs
            .sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
        self.group_done.clear();
        self.group_done.resize(k, false);
        self.domain_taken.clear();
        self.domain_taken.resize(k, false);
        self.domain_of_group.clear();
        self.domain_of_group.resize(k, 0);
        for &(_, g, d) in &self.runs {
            if !self.group_done[g] && !self.domain_taken[d] {
                self.group_done[g] = true;
                self.domain_taken[d] = true;
                self.domain_of_group[g] = d;
            }
        }
        for g in 0..k {
            if !self.group_done[g] && !self.domain_taken[g] {
                self.group_done[g] = true;
                self.domain_taken[g] = true;
                self.domain_of_group[g] = g;
            }
        }
        let mut free = 0;
        for g in 0..k {
            if self.group_done[g] {
                continue;
            }
            while free < k && self.domain_taken[free] {
                free += 1;
            }
            self.domain_taken[free.min(k - 1)] = true;
            self.domain_of_group[g] = free.min(k - 1);
        }
    }
}

/// The domain a policy last assigned each live thread, sorted by key. Threads that vanish
/// are forgotten by [`Placement::retain_alive`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    entries: Vec<(ThreadKey, usize)>,
}

impl Placement {
    /// Nothing assigned yet.
    pub fn new() -> Placement {
        Placement::default()
    }

    /// The domain assigned to `key`, if any.
    pub fn get(&self, key: &ThreadKey) -> Option<usize> {
        self.entries
            .binary_search_by(|(k, _)| k.cmp(key))
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// Records that `key` was assigned `domain`.
    pub fn set(&mut self, key: ThreadKey, domain: usize) {
        match self.entries.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => self.entries[i].1 = domain,
            Err(i) => self.entries.insert(i, (key, domain)),
        }
    }

    /// Forgets every thread not in `threads` (which must be sorted by key, as a window's
    /// are): one merge pass, no allocation.
    pub fn retain_alive(&mut self, threads: &[ThreadRates]) {
        let mut j = 0;
        self.entries.retain(|(key, _)| {
            while j < threads.len() && threads[j].key < *key {
                j += 1;
            }
            j < threads.len() && threads[j].key == *key
        });
    }

    /// The thread's current domain at `level`: the one assigned, else that of its last CPU
    /// (`None` when that CPU is not in the topology).
    pub fn current(&self, t: &ThreadRates, topo: &Topology, level: Level) -> Option<usize> {
        self.get(&t.key)
            .or_else(|| topo.domain_of(t.last_cpu, level))
    }

    /// How many threads are assigned.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no thread is assigned.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every assigned thread and its domain, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (ThreadKey, usize)> + '_ {
        self.entries.iter().copied()
    }

    /// Adds to `counts[d]` the threads assigned to domain `d` (domains beyond `counts` are
    /// ignored).
    pub fn count_per_domain(&self, counts: &mut [usize]) {
        for &(_, d) in &self.entries {
            if let Some(c) = counts.get_mut(d) {
                *c += 1;
            }
        }
    }
}

/// `x` as an integer that sorts as [`f64::total_cmp`] does (the same bit trick: negative
/// values have their magnitude bits flipped, then the sign bit is flipped so negatives come
/// first).
fn ordered_bits(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// Below this utilization a thread takes no place in Tumbler's wave (see [`Regroup::run`]).
pub const IDLE_METRIC: f64 = 0.01;

/// Sort → group → assign → compare, with buffers kept between decisions.
#[derive(Debug, Clone, Default)]
pub struct Regroup {
    order: Vec<(u64, usize)>,
    group: Vec<usize>,
    current: Vec<Option<usize>>,
    /// Whether `current` is a domain the policy assigned (the thread is confined to it).
    placed: Vec<bool>,
    assignment: Assignment,
    moved: Vec<(usize, usize)>,
}

impl Regroup {
    /// Empty buffers.
    pub fn new() -> Regroup {
        Regroup::default()
    }

    /// Sorts `threads` (sorted by key, as in a window) by `metric` (one value per thread,
    /// same order; ties by key), cuts them into one group per domain at `level` with
    /// `scheme`, matches groups to domains with [`Assignment::fewest_moves`], records every
    /// thread's new domain in `placement` (forgetting threads not in `threads`), and returns
    /// the threads whose domain changed, or that were not placed before, as `(index into
    /// threads, new domain)`, in key order.
    ///
    /// Beyond the paper, for [`Scheme::Wave`]: threads whose metric is below
    /// [`IDLE_METRIC`] (a main thread asleep in `join`, an idle pool thread) take no place in
    /// the wave; the busy threads are dealt as Algorithm 2 deals them, and the idle ones
    /// then fill the smallest groups. Sizes still differ by at most one, and an odd thread
    /// with no load cannot shift the wave so that the two busiest threads share a group
    /// (five threads into two groups: the wave deals positions 3 and 4 to the same group).
    pub fn run(
        &mut self,
        topo: &Topology,
        level: Level,
        threads: &[ThreadRates],
        metric: &[f64],
        scheme: Scheme,
        placement: &mut Placement,
    ) -> &[(usize, usize)] {
        let n = threads.len().min(metric.len());
        let k = topo.domains(level).len();
        // (value as an ordered integer, index) pairs: sorting contiguous integer pairs is
        // several times faster than sorting indices that point into `metric`.
        self.order.clear();
        self.order
            .extend(metric[..n].iter().map(|&x| ordered_bits(x)).zip(0..n));
        self.order.sort_unstable();
        self.group.clear();
        self.group.resize(n, 0);
        let idle = match scheme {
            Scheme::Wave => {
                let m = self
                    .order
                    .partition_point(|&(b, _)| b < ordered_bits(IDLE_METRIC));
                if m == n { 0 } else { m }
            }
            Scheme::Contiguous => 0,
        };
        let mut sizes = vec![0usize; k.max(1)];
        for (pos, &(_, i)) in self.order.iter().enumerate().skip(idle) {
            let g = scheme.group(pos - idle, n - idle, k);
            self.group[i] = g;
            if let Some(c) = sizes.get_mut(g) {
                *c += 1;
            }
        }
        for &(_, i) in &self.order[..idle] {
            let g = (0..sizes.len()).min_by_key(|&g| (sizes[g], g)).unwrap_or(0);
            self.group[i] = g;
            sizes[g] += 1;
        }
        placement.retain_alive(&threads[..n]);
        self.current.clear();
        self.placed.clear();
        let mut j = 0;
        for t in &threads[..n] {
            let entries = &placement.entries;
            while j < entries.len() && entries[j].0 < t.key {
                j += 1;
            }
            let assigned = entries.get(j).filter(|e| e.0 == t.key).map(|e| e.1);
            self.placed.push(assigned.is_some());
            self.current
                .push(assigned.or_else(|| topo.domain_of(t.last_cpu, level)));
        }
        let domain_of_group = self.assignment.fewest_moves(k, &self.group, &self.current);
        self.moved.clear();
        placement.entries.clear();
        for (i, t) in threads[..n].iter().enumerate() {
            let d = domain_of_group.get(self.group[i]).copied().unwrap_or(0);
            if !self.placed[i] || self.current[i] != Some(d) {
                self.moved.push((i, d));
            }
            placement.entries.push((t.key, d));
        }
        &self.moved
    }

    /// The group (before assignment to a domain) of each thread of the last run, in the
    /// order of the threads given.
    pub fn groups(&self) -> &[usize] {
        &self.group
    }
}

#[cfg(test)]
mod tests {
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
}
