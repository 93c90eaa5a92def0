//! The CPUs this process may use, and the machine cut down to them.
//!
//! A program started under `taskset -c 0-8`, or inside a container whose cpuset holds nine
//! CPUs, still sees every CPU of the machine listed as online in sysfs; only its affinity
//! mask says which nine can run its threads. `run` balances over those (the command it
//! launches inherits the same mask), `demo` and `bench` size themselves by them.
//!
//! ```text
//!  sysfs: 16 cores online ──┐
//!                           ├─► restrict ─► 9 cores, CPU ids 0-8 kept, domains renumbered
//!  sched_getaffinity: 0-8 ──┘
//! ```

use anyhow::Result;
use std::collections::BTreeMap;
use threadbalance_model::{Cpu, CpuSet, NodeId, Topology};

/// The machine's topology cut down to the CPUs this thread may run on, as a program
/// started under `taskset -c 0-8` or inside a container's cpuset sees its machine: the
/// kernel lists every CPU as online there, but only these can run the program's threads.
/// With every online CPU allowed (or the mask unreadable), the whole machine.
pub fn read_usable() -> Result<Topology> {
    let topo = crate::topo::read_system()?;
    match threadbalance_linux::affinity_of(threadbalance_model::Tid(0)) {
        Ok(allowed) => restrict(&topo, &allowed),
        Err(_) => Ok(topo),
    }
}

/// `topo` with only the CPUs in `allowed` (domains renumbered from 0 at each level, CPU
/// ids kept). Unchanged when `allowed` holds every CPU of `topo` or none of them.
pub fn restrict(topo: &Topology, allowed: &CpuSet) -> Result<Topology> {
    let kept: Vec<Cpu> = topo
        .cpus()
        .iter()
        .filter(|c| allowed.contains(c.id))
        .copied()
        .collect();
    if kept.is_empty() || kept.len() == topo.cpus().len() {
        return Ok(topo.clone());
    }
    let distances: BTreeMap<NodeId, Vec<u32>> = topo
        .nodes()
        .iter()
        .map(|&a| {
            let row = topo
                .nodes()
                .iter()
                .map(|&b| topo.distance(a, b).unwrap_or(if a == b { 10 } else { 20 }))
                .collect();
            (a, row)
        })
        .collect();
    Ok(Topology::new(kept, distances)?)
}

#[cfg(test)]
mod tests {
    use super::restrict;
    use threadbalance_model::{CpuSet, Level, Topology};

    #[test]
    fn restrict_to_nine_of_sixteen_cpus_keeps_nine_cores() {
        // `taskset -c 0-8` on a 16-core machine: cores 0..=8 remain, numbered 0..=8.
        let t = Topology::synthetic("package:1 core:16 pu:1").unwrap();
        let allowed = CpuSet::parse_list("0-8").unwrap();
        let r = restrict(&t, &allowed).unwrap();
        assert_eq!(r.cpus().len(), 9);
        assert_eq!(r.domains(Level::Core).len(), 9);
        assert_eq!(r.online().to_string(), "0-8");
    }

    #[test]
    fn restrict_keeps_cpu_ids_and_drops_emptied_packages() {
        // Two packages of two cores; CPUs 1 and 3 allowed: one core in each package.
        let t = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let allowed = CpuSet::parse_list("1,3").unwrap();
        let r = restrict(&t, &allowed).unwrap();
        assert_eq!(r.domains(Level::Package).len(), 2);
        assert_eq!(r.online().to_string(), "1,3");
        // Only CPUs 2 and 3 (package 1): one package left.
        let r = restrict(&t, &CpuSet::parse_list("2-3").unwrap()).unwrap();
        assert_eq!(r.domains(Level::Package).len(), 1);
        assert_eq!(r.domains(Level::Core).len(), 2);
    }

    #[test]
    fn restrict_to_every_cpu_or_none_is_the_whole_machine() {
        let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
        assert_eq!(restrict(&t, t.online()).unwrap(), t);
        assert_eq!(restrict(&t, &CpuSet::new()).unwrap(), t);
        // Larger than the machine: still the whole machine.
        let wide = CpuSet::parse_list("0-63").unwrap();
        assert_eq!(restrict(&t, &wide).unwrap(), t);
    }
}
