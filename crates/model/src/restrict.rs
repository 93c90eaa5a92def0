//! The machine cut down to the CPUs a program may use.
//!
//! A program started under `taskset -c 0-8`, inside a container whose cpuset holds nine
//! CPUs, or given `--cpus 0-8`, still sees every CPU of the machine listed as online; only
//! its affinity says which nine can run its threads. A policy that planned over the whole
//! machine would place threads where the kernel refuses them. Planning over the allowed
//! part instead makes every target a policy can name (a domain, a CPU) lie inside it:
//!
//! ```text
//!  16 cores ──┐
//!             ├─► restricted_to ─► 9 cores, CPU ids 0-8 kept, domains renumbered from 0
//!  0-8 ───────┘
//! ```
//!
//! ```
//! use threadbalance_model::{CpuSet, Level, Topology};
//! let t = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let r = t.restricted_to(&CpuSet::parse_list("2-3").unwrap()).unwrap();
//! assert_eq!(r.domains(Level::Package).len(), 1);
//! assert_eq!(r.online().to_string(), "2-3");
//! ```

use crate::{Cpu, CpuSet, ModelError, NodeId, Topology};
use std::collections::BTreeMap;

impl Topology {
    /// This machine with only the CPUs in `allowed` (domains renumbered from 0 at each
    /// level, CPU ids and node distances kept). Unchanged when `allowed` holds every CPU
    /// or none of them: a caller that must refuse an empty set checks
    /// [`Topology::allowed_part`] first.
    pub fn restricted_to(&self, allowed: &CpuSet) -> Result<Topology, ModelError> {
        let kept: Vec<Cpu> = self
            .cpus()
            .iter()
            .filter(|c| allowed.contains(c.id))
            .copied()
            .collect();
        if kept.is_empty() || kept.len() == self.cpus().len() {
            return Ok(self.clone());
        }
        let distances: BTreeMap<NodeId, Vec<u32>> = self
            .nodes()
            .iter()
            .map(|&a| {
                let row = self
                    .nodes()
                    .iter()
                    .map(|&b| self.distance(a, b).unwrap_or(if a == b { 10 } else { 20 }))
                    .collect();
                (a, row)
            })
            .collect();
        let cut = Topology::new(kept, distances)?;
        Ok(if self.has_cache_info() {
            cut
        } else {
            cut.without_cache_info()
        })
    }

    /// The CPUs of `allowed` this machine has (empty when none).
    pub fn allowed_part(&self, allowed: &CpuSet) -> CpuSet {
        self.online().intersection(allowed)
    }
}

#[cfg(test)]
mod tests {
    use crate::{CpuSet, Level, Topology};

    #[test]
    fn restricted_to_nine_of_sixteen_cpus_keeps_nine_cores() {
        // `taskset -c 0-8` on a 16-core machine: cores 0..=8 remain, numbered 0..=8.
        let t = Topology::synthetic("package:1 core:16 pu:1").unwrap();
        let r = t
            .restricted_to(&CpuSet::parse_list("0-8").unwrap())
            .unwrap();
        assert_eq!(r.cpus().len(), 9);
        assert_eq!(r.domains(Level::Core).len(), 9);
        assert_eq!(r.online().to_string(), "0-8");
    }

    #[test]
    fn restricted_to_keeps_cpu_ids_and_drops_emptied_packages() {
        // Two packages of two cores; CPUs 1 and 3 allowed: one core in each package.
        let t = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let r = t
            .restricted_to(&CpuSet::parse_list("1,3").unwrap())
            .unwrap();
        assert_eq!(r.domains(Level::Package).len(), 2);
        assert_eq!(r.online().to_string(), "1,3");
        // Only CPUs 2 and 3 (package 1): one package left.
        let r = t
            .restricted_to(&CpuSet::parse_list("2-3").unwrap())
            .unwrap();
        assert_eq!(r.domains(Level::Package).len(), 1);
        assert_eq!(r.domains(Level::Core).len(), 2);
    }

    #[test]
    fn restricted_to_every_cpu_or_none_is_the_whole_machine() {
        let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
        assert_eq!(t.restricted_to(t.online()).unwrap(), t);
        assert_eq!(t.restricted_to(&CpuSet::new()).unwrap(), t);
        // Larger than the machine: still the whole machine.
        let wide = CpuSet::parse_list("0-63").unwrap();
        assert_eq!(t.restricted_to(&wide).unwrap(), t);
        // And the allowed part says which of a list the machine has.
        assert_eq!(t.allowed_part(&wide).to_string(), "0-7");
        assert!(t.allowed_part(&CpuSet::parse_list("9").unwrap()).is_empty());
    }
}
