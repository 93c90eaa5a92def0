//! The CPUs this process may use, and the machine cut down to them.
//!
//! A program started under `taskset -c 0-8`, or inside a container whose cpuset holds nine
//! CPUs, still sees every CPU of the machine listed as online in sysfs; only its affinity
//! mask says which nine can run its threads. `run` balances over those (the command it
//! launches inherits the same mask), `demo` and `bench` size themselves by them. `attach`
//! balances over the CPUs its target's threads may use, and `--cpus LIST` narrows either
//! further (see [`crate::settings::SettingsArgs::topology`]): a policy never plans a move
//! to a CPU the kernel would refuse.
//!
//! ```text
//!  sysfs: 16 cores online ──┐
//!                           ├─► restrict ─► 9 cores, CPU ids 0-8 kept, domains renumbered
//!  sched_getaffinity: 0-8 ──┘
//! ```

use anyhow::Result;
use threadbalance_model::{CpuSet, Pid, Tid, Topology};

/// The machine's topology cut down to the CPUs this thread may run on, as a program
/// started under `taskset -c 0-8` or inside a container's cpuset sees its machine: the
/// kernel lists every CPU as online there, but only these can run the program's threads.
/// With every online CPU allowed (or the mask unreadable), the whole machine.
pub fn read_usable() -> Result<Topology> {
    let topo = crate::topo::read_system()?;
    match threadbalance_linux::affinity_of(Tid(0)) {
        Ok(allowed) => restrict(&topo, &allowed),
        Err(_) => Ok(topo),
    }
}

/// The machine's topology cut down to the CPUs the threads of running process `pid` may
/// use: the union of their masks (its cgroup's cpuset, a mask it inherited, or one it set),
/// as read when `attach` starts. With a mask unreadable (the process is going), the whole
/// machine: the attach then fails on its own, with the reason.
pub fn read_allowed_for(pid: Pid) -> Result<Topology> {
    let topo = crate::topo::read_system()?;
    let mut allowed = CpuSet::new();
    let tids: Vec<Tid> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|dir| {
            dir.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok().map(Tid))
                .collect()
        })
        .unwrap_or_else(|_| vec![Tid(pid.0)]);
    for tid in tids {
        if let Ok(mask) = threadbalance_linux::affinity_of(tid) {
            allowed = allowed.union(&mask);
        }
    }
    restrict(&topo, &allowed)
}

/// `topo` with only the CPUs in `allowed` (domains renumbered from 0 at each level, CPU
/// ids kept). Unchanged when `allowed` holds every CPU of `topo` or none of them; see
/// [`Topology::restricted_to`].
pub fn restrict(topo: &Topology, allowed: &CpuSet) -> Result<Topology> {
    Ok(topo.restricted_to(allowed)?)
}

#[cfg(test)]
mod tests {
    use super::restrict;
    use threadbalance_model::{CpuSet, Level, Topology};

    #[test]
    fn restrict_to_nine_of_sixteen_cpus_keeps_nine_cores() {
        // `taskset -c 0-8` on a 16-core machine: cores 0..=8 remain, numbered 0..=8 (the
        // other cases are the model's `Topology::restricted_to` tests).
        let t = Topology::synthetic("package:1 core:16 pu:1").unwrap();
        let allowed = CpuSet::parse_list("0-8").unwrap();
        let r = restrict(&t, &allowed).unwrap();
        assert_eq!(r.cpus().len(), 9);
        assert_eq!(r.domains(Level::Core).len(), 9);
        assert_eq!(r.online().to_string(), "0-8");
    }
}
