//! Fixed facts about the hardware: where each CPU sits and what moving a line costs.

use super::CpuIdx;
use crate::machine::Machine;
use threadbalance_model::{CpuId, Level};

/// Fixed facts about the hardware, indexed by dense CPU position.
#[derive(Debug, Clone)]
pub(crate) struct Hw {
    pub cpu_id: Vec<CpuId>,
    pub pkg: Vec<u32>,
    pub node: Vec<u32>,
    pub llc: Vec<u32>,
    pub core: Vec<u32>,
    /// Per CPU, the CPUs of its core (itself included).
    pub siblings: Vec<Vec<CpuIdx>>,
    /// Per LLC id, its CPUs in order.
    pub llc_cpus: Vec<Vec<CpuIdx>>,
    pub npkg: usize,
    pub nnode: usize,
    /// Line latency between nodes, ns (row-major).
    pub node_line: Vec<f64>,
    /// Memory slowdown of node a's CPUs on node b's pages.
    pub node_mem: Vec<f64>,
    pub llc_ns: f64,
    pub local_ns: f64,
    pub node_streams: f64,
    pub link_streams: f64,
    pub smt_factor: f64,
    pub mlp: f64,
    /// Lines of cache private to a core (`Costs::private_kb`): what a move within an LLC
    /// refills at most.
    pub private_lines: f64,
    /// Per LLC id, the lines it holds (`Costs::llc_kb_per_core` times its cores).
    pub llc_lines: Vec<f64>,
}

impl Hw {
    /// Latency of a line another core modified (a lock, the data it protects, a queue
    /// item) moving from CPU `a` to CPU `b`: the LLC they share serves it, else memory of
    /// the node, else the interconnect.
    pub fn line_ns(&self, a: CpuIdx, b: CpuIdx) -> f64 {
        if a == b {
            return 0.0;
        }
        if self.llc[a] == self.llc[b] {
            return self.llc_ns;
        }
        self.mem_ns(a, b)
    }

    /// Latency of a line that no cache shared by CPUs `a` and `b` holds: memory of the
    /// node when both are in one package and node, else across the interconnect.
    pub fn mem_ns(&self, a: CpuIdx, b: CpuIdx) -> f64 {
        if a == b {
            return 0.0;
        }
        let (na, nb) = (self.node[a] as usize, self.node[b] as usize);
        if na == nb && self.pkg[a] == self.pkg[b] {
            self.local_ns
        } else {
            self.node_line[na * self.nnode + nb]
        }
    }
}

pub(crate) fn build_hw(m: &Machine) -> Hw {
    let topo = &m.topo;
    let cpus = topo.cpus();
    let nodes = topo.nodes();
    let node_ix =
        |n: threadbalance_model::NodeId| nodes.iter().position(|&x| x == n).unwrap_or(0) as u32;
    let pkg: Vec<u32> = cpus.iter().map(|c| c.package.0).collect();
    let node: Vec<u32> = cpus.iter().map(|c| node_ix(c.node)).collect();
    let llc: Vec<u32> = cpus.iter().map(|c| c.llc.0).collect();
    let core: Vec<u32> = cpus.iter().map(|c| c.core.0).collect();
    let siblings = (0..cpus.len())
        .map(|i| {
            (0..cpus.len())
                .filter(|&j| core[j] == core[i])
                .map(CpuIdx::from)
                .collect()
        })
        .collect();
    let nllc = llc.iter().max().map_or(1, |&x| x as usize + 1);
    let mut llc_cpus = vec![Vec::new(); nllc];
    for (i, &l) in llc.iter().enumerate() {
        llc_cpus[l as usize].push(CpuIdx::from(i));
    }
    let llc_lines = llc_cpus
        .iter()
        .map(|cs| {
            let mut cores: Vec<u32> = cs.iter().map(|&c| core[c.ix()]).collect();
            cores.sort_unstable();
            cores.dedup();
            m.costs.llc_kb_per_core.max(0.0) * 16.0 * cores.len() as f64
        })
        .collect();
    let nnode = nodes.len().max(1);
    let dist = |a: usize, b: usize| f64::from(topo.distance(nodes[a], nodes[b]).unwrap_or(10));
    let dmax = (0..nnode)
        .flat_map(|a| (0..nnode).map(move |b| (a, b)))
        .map(|(a, b)| dist(a, b))
        .fold(10.0, f64::max);
    let c = &m.costs;
    let mut node_line = vec![c.local_ns; nnode * nnode];
    let mut node_mem = vec![1.0; nnode * nnode];
    for a in 0..nnode {
        for b in 0..nnode {
            let x = if dmax > 10.0 {
                (dist(a, b) - 10.0) / (dmax - 10.0)
            } else {
                0.0
            };
            node_line[a * nnode + b] = c.local_ns + (c.remote_ns - c.local_ns) * x;
            node_mem[a * nnode + b] = 1.0 + (c.mem_remote_factor - 1.0) * x;
        }
    }
    Hw {
        cpu_id: cpus.iter().map(|c| c.id).collect(),
        npkg: topo.domains(Level::Package).len(),
        nnode,
        pkg,
        node,
        llc,
        core,
        siblings,
        llc_cpus,
        node_line,
        node_mem,
        llc_ns: c.llc_ns,
        local_ns: c.local_ns,
        node_streams: c.node_streams.max(0.1),
        link_streams: c.link_streams.max(0.1),
        smt_factor: c.smt_factor,
        mlp: c.mlp.max(1.0),
        private_lines: c.private_kb.max(0.0) * 16.0,
        llc_lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_moves_within_an_llc_cost_an_llc_hit_and_across_llcs_memory() {
        // Opteron 6272: CPUs 0 and 1 share socket 0's L3; CPU 16 is on socket 1.
        let m = crate::machine::machine("opteron6272-4x16", None).unwrap();
        let hw = build_hw(&m);
        let c = CpuIdx::from;
        assert_eq!(hw.line_ns(c(0), c(1)), 40.0);
        assert_eq!(hw.line_ns(c(0), c(16)), 201.0);
        assert_eq!(hw.mem_ns(c(0), c(1)), 128.0);
        assert_eq!(hw.mem_ns(c(0), c(16)), 201.0);
        assert_eq!(hw.line_ns(c(3), c(3)), 0.0);
    }
}
