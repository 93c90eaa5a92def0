//! Balanced k-way partition of a weighted undirected graph, for the `handoff` policy: cut as
//! little weight as possible between parts whose sizes are fixed in advance.
//!
//! ```text
//!  weights w(u, v) = hand-offs u→v + v→u            sizes s_0 … s_(k−1) (differ by ≤ 1)
//!        │
//!        ├─► greedy growth: part p starts from the heaviest free vertex and takes, one at a
//!        │   time, the free vertex most connected to it until it has s_p vertices
//!        ├─► a given start (the current placement with half its vertices swapped at random)
//!        ▼
//!  Kernighan–Lin refinement, per pass: swap the unlocked pair (u in A, v in B) of largest
//!  gain D(u) + D(v) − 2 w(u, v) (D = weight to the other part − weight to its own), lock
//!  both, repeat until every vertex is locked; keep the prefix of swaps whose summed gain is
//!  largest; stop when no prefix gains. Swaps keep every part's size.
//! ```
//!
//! Dense weights (`n × n`): the policy's graphs have tens to a few hundred threads. A pass
//! costs O(n³) in the worst case (n/2 swaps, each a scan of the pairs); passes are capped.
//!
//! ```
//! use threadbalance_policy::handoff_partition::{Graph, cut, partition};
//! // Two triangles {0, 1, 2} and {3, 4, 5} joined by one light edge 2–3.
//! let mut g = Graph::new(6);
//! for (u, v) in [(0, 1), (1, 2), (0, 2), (3, 4), (4, 5), (3, 5)] {
//!     g.add(u, v, 10.0);
//! }
//! g.add(2, 3, 1.0);
//! let part = partition(&g, &[3, 3], None);
//! assert_eq!(cut(&g, &part), 1.0);
//! assert_eq!(part[0], part[1]);
//! assert_ne!(part[0], part[3]);
//! ```

/// Passes of Kernighan–Lin refinement at most.
pub const MAX_PASSES: usize = 8;

/// A symmetric weighted graph on vertices `0..n`, stored dense.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Graph {
    n: usize,
    w: Vec<f64>,
}

impl Graph {
    /// `n` vertices, no edge.
    pub fn new(n: usize) -> Graph {
        Graph {
            n,
            w: vec![0.0; n * n],
        }
    }

    /// Vertices.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether it has no vertex.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Adds `x` to the weight of edge `u`–`v` (both directions); self-loops and vertices
    /// out of range are ignored.
    pub fn add(&mut self, u: usize, v: usize, x: f64) {
        if u == v || u >= self.n || v >= self.n {
            return;
        }
        self.w[u * self.n + v] += x;
        self.w[v * self.n + u] += x;
    }

    /// Weight of edge `u`–`v` (0 when absent).
    pub fn weight(&self, u: usize, v: usize) -> f64 {
        if u >= self.n || v >= self.n {
            return 0.0;
        }
        self.w[u * self.n + v]
    }

    /// Summed weight of the edges at `u` (0 out of range).
    pub fn degree(&self, u: usize) -> f64 {
        if u >= self.n {
            return 0.0;
        }
        self.row(u).iter().sum()
    }

    /// The graph on `keep` (vertex `i` of the result is `keep[i]` here), with the edges
    /// among them.
    pub fn induced(&self, keep: &[usize]) -> Graph {
        let mut g = Graph::new(keep.len());
        for (a, &u) in keep.iter().enumerate() {
            for (b, &v) in keep.iter().enumerate() {
                if u < self.n && v < self.n {
                    g.w[a * g.n + b] = self.w[u * self.n + v];
                }
            }
        }
        g
    }

    /// Summed weight of every edge.
    pub fn total(&self) -> f64 {
        self.w.iter().sum::<f64>() / 2.0
    }

    fn row(&self, u: usize) -> &[f64] {
        &self.w[u * self.n..(u + 1) * self.n]
    }
}

/// Weight of the edges whose ends are in different parts.
pub fn cut(g: &Graph, part: &[usize]) -> f64 {
    let mut c = 0.0;
    for u in 0..g.n.min(part.len()) {
        for v in u + 1..g.n.min(part.len()) {
            if part[u] != part[v] {
                c += g.weight(u, v);
            }
        }
    }
    c
}

/// Greedy growth: parts in order, each seeded with the free vertex of largest weighted
/// degree (ties: lowest index) and grown by the free vertex most connected to it (ties:
/// larger degree, then lowest index) until it has `sizes[p]` vertices. Sizes must sum to
/// the vertex count; a shortfall leaves vertices in the last part.
pub fn greedy_growth(g: &Graph, sizes: &[usize]) -> Vec<usize> {
    let n = g.n;
    let k = sizes.len().max(1);
    let degree: Vec<f64> = (0..n).map(|u| g.row(u).iter().sum()).collect();
    let mut part = vec![k - 1; n];
    let mut free = vec![true; n];
    let mut conn = vec![0.0; n];
    for (p, &size) in sizes.iter().enumerate() {
        conn.iter_mut().for_each(|c| *c = 0.0);
        for _ in 0..size {
            let best = (0..n).filter(|&u| free[u]).max_by(|&a, &b| {
                (conn[a], degree[a])
                    .partial_cmp(&(conn[b], degree[b]))
                    .unwrap_or(std::cmp::Ordering::Equal)
                    .then(b.cmp(&a))
            });
            let Some(u) = best else { break };
            free[u] = false;
            part[u] = p;
            for (c, &x) in conn.iter_mut().zip(g.row(u)) {
                *c += x;
            }
        }
    }
    part
}

/// Kernighan–Lin refinement of `part` (values below `k`), in place; part sizes do not
/// change. Returns the cut after it.
pub fn refine(g: &Graph, part: &mut [usize], k: usize) -> f64 {
    let n = g.n.min(part.len());
    if n < 2 || k < 2 {
        return cut(g, part);
    }
    // conn[u * k + p]: weight from u to the vertices of part p.
    let mut conn = vec![0.0; n * k];
    let fill = |conn: &mut [f64], part: &[usize]| {
        conn.iter_mut().for_each(|c| *c = 0.0);
        for u in 0..n {
            for v in 0..n {
                conn[u * k + part[v]] += g.weight(u, v);
            }
        }
    };
    let moved = |conn: &mut [f64], v: usize, from: usize, to: usize| {
        for u in 0..n {
            let x = g.weight(u, v);
            conn[u * k + from] -= x;
            conn[u * k + to] += x;
        }
    };
    for _ in 0..MAX_PASSES {
        fill(&mut conn, part);
        let mut locked = vec![false; n];
        let mut swaps: Vec<(usize, usize)> = Vec::new();
        let (mut sum, mut best_sum, mut best_len) = (0.0_f64, 0.0_f64, 0usize);
        loop {
            let mut best: Option<(f64, usize, usize)> = None;
            for u in (0..n).filter(|&u| !locked[u]) {
                let (pu, cu) = (part[u], &conn[u * k..(u + 1) * k]);
                for v in (u + 1..n).filter(|&v| !locked[v] && part[v] != pu) {
                    let pv = part[v];
                    let cv = &conn[v * k..(v + 1) * k];
                    let gain = cu[pv] - cu[pu] + cv[pu] - cv[pv] - 2.0 * g.weight(u, v);
                    if best.is_none_or(|(b, _, _)| gain > b + 1e-12) {
                        best = Some((gain, u, v));
                    }
                }
            }
            let Some((gain, u, v)) = best else { break };
            let (pu, pv) = (part[u], part[v]);
            part[u] = pv;
            moved(&mut conn, u, pu, pv);
            part[v] = pu;
            moved(&mut conn, v, pv, pu);
            locked[u] = true;
            locked[v] = true;
            swaps.push((u, v));
            sum += gain;
            if sum > best_sum + 1e-9 {
                (best_sum, best_len) = (sum, swaps.len());
            }
        }
        // Undo the swaps past the best prefix.
        for &(u, v) in swaps[best_len..].iter().rev() {
            part.swap(u, v);
        }
        if best_len == 0 {
            break;
        }
    }
    cut(g, part)
}

/// The best balanced partition found: greedy growth, and `start` when given (its sizes
/// must be `sizes`), each refined; the lower cut wins, `start`'s on a tie.
pub fn partition(g: &Graph, sizes: &[usize], start: Option<&[usize]>) -> Vec<usize> {
    let k = sizes.len();
    let mut grown = greedy_growth(g, sizes);
    let grown_cut = refine(g, &mut grown, k);
    match start {
        Some(s) if s.len() == g.n => {
            let mut from = s.to_vec();
            let from_cut = refine(g, &mut from, k);
            if from_cut <= grown_cut { from } else { grown }
        }
        _ => grown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degree_and_induced_graph_keep_the_edges_among_the_kept() {
        // A path 0–1–2–3 with weights 1, 2, 3; vertex 4 alone.
        let mut g = Graph::new(5);
        g.add(0, 1, 1.0);
        g.add(1, 2, 2.0);
        g.add(2, 3, 3.0);
        assert_eq!(
            (0..5).map(|u| g.degree(u)).collect::<Vec<_>>(),
            [1.0, 3.0, 5.0, 3.0, 0.0]
        );
        assert_eq!(g.degree(9), 0.0);
        // Keep 3, 1, 2 (in that order): edges 1–2 (2) and 2–3 (3) survive, renumbered.
        let h = g.induced(&[3, 1, 2]);
        assert_eq!(h.len(), 3);
        assert_eq!(h.weight(1, 2), 2.0);
        assert_eq!(h.weight(0, 2), 3.0);
        assert_eq!(h.weight(0, 1), 0.0);
        assert_eq!(h.total(), g.total() - 1.0);
    }

    /// Four cliques of four (vertices i with i mod 4 = c form clique c), edge weight 10
    /// inside, and a ring of weight-1 edges i–(i+1) across them.
    fn four_cliques() -> Graph {
        let mut g = Graph::new(16);
        for u in 0..16 {
            for v in u + 1..16 {
                if u % 4 == v % 4 {
                    g.add(u, v, 10.0);
                }
            }
            g.add(u, (u + 1) % 16, 1.0);
        }
        g
    }

    #[test]
    fn cut_counts_each_crossing_edge_once() {
        // Path 0–1–2–3 with weights 1, 2, 3; parts {0, 1} {2, 3}: only 1–2 (2) crosses.
        let mut g = Graph::new(4);
        g.add(0, 1, 1.0);
        g.add(1, 2, 2.0);
        g.add(2, 3, 3.0);
        g.add(3, 3, 9.0); // self-loop: ignored
        assert_eq!(cut(&g, &[0, 0, 1, 1]), 2.0);
        assert_eq!(cut(&g, &[0, 1, 0, 1]), 6.0);
        assert_eq!(g.total(), 6.0);
    }

    #[test]
    fn greedy_growth_recovers_interleaved_cliques() {
        // Every vertex has degree 32 (3 clique edges of 10, 2 ring edges); ties go to the
        // lowest index: part 0 grows 0, 4, 8, 12 (each 10 to the part, more than any ring
        // edge). Part 1 seeds at 1, and so on. Cut: the 16 ring edges, 16.
        let g = four_cliques();
        let part = greedy_growth(&g, &[4, 4, 4, 4]);
        let want: Vec<usize> = (0..16).map(|u| u % 4).collect();
        assert_eq!(part, want);
        assert_eq!(cut(&g, &part), 16.0);
    }

    #[test]
    fn refine_undoes_a_scrambled_partition() {
        // Contiguous parts {0..3} {4..7} … put one vertex of each clique in every part:
        // every clique edge crosses: 4 cliques × 6 edges × 10 = 240, plus the ring edges
        // between parts (3–4, 7–8, 11–12, 15–0) = 4: 244. KL swaps its way to the cliques
        // (cut 16, the ring only).
        let g = four_cliques();
        let mut part: Vec<usize> = (0..16).map(|u| u / 4).collect();
        assert_eq!(cut(&g, &part), 244.0);
        let after = refine(&g, &mut part, 4);
        assert_eq!(after, 16.0);
        for u in 0..16 {
            assert_eq!(part[u], part[u % 4], "vertex {u} with its clique");
        }
        // Sizes kept: four parts of four.
        for p in 0..4 {
            assert_eq!(part.iter().filter(|&&x| x == p).count(), 4);
        }
    }

    #[test]
    fn refine_keeps_sizes_when_balance_costs_cut() {
        // A clique of 3 (weights 5) and a lone vertex, into parts of 2 and 2: the clique
        // must be split. Best: {a, b} {c, lone}: cut 5 + 5 = 10 (c's two edges).
        let mut g = Graph::new(4);
        g.add(0, 1, 5.0);
        g.add(1, 2, 5.0);
        g.add(0, 2, 5.0);
        let mut part = vec![0, 1, 0, 1];
        assert_eq!(cut(&g, &part), 10.0);
        assert_eq!(refine(&g, &mut part, 2), 10.0);
        assert_eq!(part.iter().filter(|&&x| x == 0).count(), 2);
    }

    #[test]
    fn partition_prefers_the_start_on_a_tie() {
        // No edges: every partition cuts 0, so the start is kept as it is.
        let g = Graph::new(4);
        let start = [1, 0, 1, 0];
        assert_eq!(partition(&g, &[2, 2], Some(&start)), start);
        // Without a start: greedy growth in index order, {0, 1} {2, 3}.
        assert_eq!(partition(&g, &[2, 2], None), [0, 0, 1, 1]);
    }
}
