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
            if let Some(d) = c
                && g < k
                && d < k
            {
                self.overlap[g * k + d] += 1;
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
            if let Some(d) = c
                && g < k
                && d < k
            {
                self.pairs.push((g, d));
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
mod tests;
