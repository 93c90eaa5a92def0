//! What memory-bound work costs on a NUMA machine: latency, and three shared resources.
//!
//! A thread's memory-bound fraction `m` of an op runs at the speed the memory system
//! gives it; the rest runs at full speed. Its slowdown is
//!
//! ```text
//!   factor = (1 − m) + m × latency × max(1, llc, dram, link)
//! ```
//!
//! | term | who shares it | load counted | capacity |
//! |---|---|---|---|
//! | `latency` | — | remote over local memory latency (`node_mem`, 1 on the home node) | — |
//! | `llc` | memory-bound threads running on one node: its last-level cache and miss queue | streams issued from the node | `node_streams` |
//! | `dram` | every access to pages on one node, from wherever it is issued: the home node's memory channels serve it | streams whose pages live on the node | `node_streams` |
//! | `link` | accesses from node `a` to pages on node `b`: the interconnect between them (one direction, `b` → `a`, as the data flows) | remote streams of that pair | `link_streams` |
//!
//! Each share is (streams already there + this one's `m`) / capacity: a node that
//! serves 6 streams at full speed and has 8 (this one included) runs each at 6/8 of its
//! speed, a share of 8/6. The scarcest resource decides (the `max`): a request is served no
//! faster than its slowest stage.
//!
//! Until this model, bandwidth was charged only where a thread ran (the `llc` term), so a
//! node whose pages served remote threads looked idle to its own, and moving a thread next
//! to its pages cost it the bandwidth of a node it already used; remote memory cost the
//! latency ratio alone, with no interconnect to share.
//!
//! Worked example (Opteron 6320, `node_streams` 6, `link_streams` 2.5, NUMA factor 1.6):
//! three fully memory-bound threads (`m` = 1) run on node 0 with their pages on node 1,
//! where four local memory-bound threads already run. For the third remote thread:
//! `llc` = (2 + 1) / 6 = 0.5, `dram` = (4 + 2 + 1) / 6 = 1.17, `link` = (2 + 1) / 2.5 =
//! 1.2, so factor = 1.6 × 1.2 = 1.92. Before, it paid 1.6 × max(1, 0.5) = 1.6, and node 1's
//! own threads were charged for 4 streams, not 7.

/// Capacities of the shared resources, in memory-bound threads served at full speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    /// Streams one node's LLC, miss queue and memory channels serve at full speed.
    pub node_streams: f64,
    /// Streams one direction of the link between two nodes carries at full speed.
    pub link_streams: f64,
}

/// The memory-bound streams in flight: per issuing node, per home node, per link.
#[derive(Debug, Clone, PartialEq)]
pub struct MemLoad {
    nnode: usize,
    issue: Vec<f64>,
    dram: Vec<f64>,
    /// `link[home × nnode + here]`: data flowing from `home` to `here`.
    link: Vec<f64>,
}

impl MemLoad {
    /// No streams on a machine of `nnode` nodes.
    pub fn new(nnode: usize) -> MemLoad {
        let n = nnode.max(1);
        MemLoad {
            nnode: n,
            issue: vec![0.0; n],
            dram: vec![0.0; n],
            link: vec![0.0; n * n],
        }
    }

    /// A stream of weight `m` starts: issued from node `here`, served by node `home`.
    pub fn add(&mut self, here: usize, home: usize, m: f64) {
        self.change(here, home, m);
    }

    /// The stream added with the same arguments ends.
    pub fn remove(&mut self, here: usize, home: usize, m: f64) {
        self.change(here, home, -m);
    }

    fn change(&mut self, here: usize, home: usize, d: f64) {
        let (here, home) = (here.min(self.nnode - 1), home.min(self.nnode - 1));
        let bump = |x: &mut f64| *x = (*x + d).max(0.0);
        bump(&mut self.issue[here]);
        bump(&mut self.dram[home]);
        if here != home {
            bump(&mut self.link[home * self.nnode + here]);
        }
    }

    /// The largest share a new stream of weight `m` from `here` to pages on `home` would
    /// see (at least 1): see the module docs.
    pub fn share(&self, cap: Capacity, here: usize, home: usize, m: f64) -> f64 {
        let (here, home) = (here.min(self.nnode - 1), home.min(self.nnode - 1));
        let node = cap.node_streams.max(0.1);
        let llc = (self.issue[here] + m) / node;
        let dram = (self.dram[home] + m) / node;
        let link = if here == home {
            0.0
        } else {
            (self.link[home * self.nnode + here] + m) / cap.link_streams.max(0.1)
        };
        llc.max(dram).max(link).max(1.0)
    }

    /// Slowdown of an op with memory-bound fraction `m` issued from `here` on pages of
    /// `home`, whose latency ratio is `latency`: `(1 − m) + m × latency × share`.
    pub fn factor(&self, cap: Capacity, here: usize, home: usize, m: f64, latency: f64) -> f64 {
        (1.0 - m) + m * latency * self.share(cap, here, home, m)
    }
}

#[cfg(test)]
mod tests {
    use super::{Capacity, MemLoad};

    const OPTERON6320: Capacity = Capacity {
        node_streams: 6.0,
        link_streams: 2.5,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn memory_factor_module_example_is_link_bound() {
        // Node 1 runs 4 local streams; node 0 runs 2 streams on node 1's pages. A third
        // from node 0: llc (2 + 1) / 6 = 0.5, dram (4 + 2 + 1) / 6 = 7/6, link (2 + 1) /
        // 2.5 = 1.2: the link decides, 1.6 × 1.2 = 1.92.
        let mut l = MemLoad::new(4);
        for _ in 0..4 {
            l.add(1, 1, 1.0);
        }
        l.add(0, 1, 1.0);
        l.add(0, 1, 1.0);
        assert!(close(l.share(OPTERON6320, 0, 1, 1.0), 1.2));
        assert!(close(l.factor(OPTERON6320, 0, 1, 1.0, 1.6), 1.92));
        // A local thread of node 1 now shares its channels with the remote streams:
        // dram (6 + 1) / 6; the old model charged it (4 + 1) / 6 < 1, full speed.
        assert!(close(l.factor(OPTERON6320, 1, 1, 1.0, 1.0), 7.0 / 6.0));
    }

    #[test]
    fn memory_factor_half_bound_local_thread_pays_only_its_node() {
        // m = 0.5 on node 2's own pages, 8.5 streams there already: share (8.5 + 0.5) / 6
        // = 1.5, factor 0.5 + 0.5 × 1 × 1.5 = 1.25. No link is used.
        let mut l = MemLoad::new(4);
        for _ in 0..17 {
            l.add(2, 2, 0.5);
        }
        assert!(close(l.factor(OPTERON6320, 2, 2, 0.5, 1.0), 1.25));
        assert!(l.link.iter().all(|&x| x == 0.0));
    }

    #[test]
    fn memory_moving_next_to_the_pages_frees_the_link_and_keeps_the_dram() {
        // One thread (m = 1) on node 0 with pages on node 3, five more remote streams on
        // that link: link (5 + 1) / 2.5 = 2.4, factor 1.6 × 2.4 = 3.84. Moved to node 3
        // (idle otherwise) its stream leaves the link; its node's DRAM already counted
        // the 5 others: dram (5 + 1) / 6 = 1, factor 1.
        let mut l = MemLoad::new(4);
        for _ in 0..5 {
            l.add(0, 3, 1.0);
        }
        assert!(close(l.factor(OPTERON6320, 0, 3, 1.0, 1.6), 3.84));
        assert!(close(l.factor(OPTERON6320, 3, 3, 1.0, 1.0), 1.0));
    }

    #[test]
    fn memory_remove_undoes_add_and_never_goes_negative() {
        let mut l = MemLoad::new(2);
        l.add(0, 1, 0.7);
        l.remove(0, 1, 0.7);
        assert_eq!(l, MemLoad::new(2));
        l.remove(1, 0, 0.3);
        assert_eq!(l, MemLoad::new(2));
        // Out-of-range nodes clamp to the last node rather than panic.
        l.add(9, 9, 1.0);
        assert!(close(l.dram[1], 1.0));
    }
}
