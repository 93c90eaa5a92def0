//! Machines: a [`Topology`] plus what moving data costs on it.
//!
//! Every cost is a property of the hardware, never of an outcome:
//!
//! | cost | meaning | used for |
//! |---|---|---|
//! | `llc_ns` | latency of a line held by another core behind the same last-level cache (an LLC hit, cache to cache) | lock hand-offs, queue items, cache refill within an LLC |
//! | `local_ns` | latency of a line from local memory (another LLC of the same node) | same, between LLCs of a node |
//! | `remote_ns` | latency of a line from the farthest socket (scaled by node distance in between) | same, across sockets |
//! | `mem_remote_factor` | slowdown of memory-bound work whose pages sit on another node | memory phases (first touch) |
//! | `node_streams` | memory-bound threads one node's controller serves at full speed | bandwidth sharing at the home node and in the issuing node's LLC ([`crate::memory`]) |
//! | `link_streams` | memory-bound threads' worth of traffic one direction of an inter-socket link carries at full speed | link sharing for remote memory ([`crate::memory`]) |
//! | `smt_factor` | slowdown of a thread whose SMT sibling is busy | hyperthreads / modules |
//! | `mlp` | lines fetched in parallel when a migrated thread refills its cache | migration cost |
//!
//! Built-in machines are the papers' testbeds:
//!
//! | name | shape | source of the costs |
//! |---|---|---|
//! | `opteron6272-4x16` | 4 sockets × 16 cores | Tumbler/Shuffling testbed: 128 ns local, 201 ns remote |
//! | `tigerton-4x4` | 4 × 4 cores, L2 per pair, UMA | speed balancing testbed (front-side bus: one latency) |
//! | `barcelona-4x4` | 4 × 4 cores, L3 per socket, NUMA | speed balancing NUMA testbed |
//! | `opteron6320-4x8` | 4 × 8 cores, NUMA factor 1.6 | Chiang & Su testbed |
//! | `local` | the caller's topology (the CLI reads sysfs) | generic costs |
//! | any hwloc spec | e.g. `package:2 numa:2 core:8 pu:2` | generic costs |

use crate::SimError;
use serde::Serialize;
use threadbalance_model::Topology;

/// What moving data costs on a machine. See the module docs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Costs {
    /// Nanoseconds to fetch a line another core holds behind the same last-level cache:
    /// the LLC serves it (Shuffling §2.1: within a socket "LLC hits occur when the lock, and
    /// the shared data it protects, are accessed").
    pub llc_ns: f64,
    /// Nanoseconds to fetch a line from local memory (same node, another LLC).
    pub local_ns: f64,
    /// Nanoseconds to fetch a line from the farthest socket.
    pub remote_ns: f64,
    /// Slowdown of memory-bound work on remote pages (remote over local memory latency).
    pub mem_remote_factor: f64,
    /// Memory-bound threads one node serves at full bandwidth; more share it.
    pub node_streams: f64,
    /// Memory-bound threads' worth of traffic one direction of the link between two nodes
    /// carries at full speed; more remote streams on it share it.
    pub link_streams: f64,
    /// Slowdown of a thread whose SMT sibling is running (1 = none).
    pub smt_factor: f64,
    /// Lines a migrated thread fetches in parallel while refilling its cache.
    pub mlp: f64,
    /// KiB of cache a core keeps to itself (L1 and a private L2): all that a move to
    /// another core behind the same LLC can lose. The rest of a larger footprint stays in
    /// the shared LLC, or was never cached at all, wherever the thread runs.
    pub private_kb: f64,
    /// KiB of the shared last-level cache per core behind it (the LLC is this times its
    /// cores). A move to another LLC refetches, beyond the private caches, only the
    /// thread's share of the LLC it left: a footprint larger than that share was never all
    /// cached, wherever the thread ran.
    pub llc_kb_per_core: f64,
}

impl Costs {
    /// Generic costs of a recent two-socket server (40 ns within an LLC, 90 ns local
    /// memory, 140 ns remote).
    pub fn generic() -> Costs {
        Costs {
            llc_ns: 40.0,
            local_ns: 90.0,
            remote_ns: 140.0,
            mem_remote_factor: 140.0 / 90.0,
            node_streams: 4.0,
            // A UPI link carries about 20 GB/s a direction, a core streams about 10 GB/s.
            link_streams: 2.0,
            smt_factor: 1.3,
            mlp: 8.0,
            // A recent server core's private L2 (1–2 MiB).
            private_kb: 1024.0,
            // 1.5–1.875 MiB a core on recent Xeons, 4 MiB on EPYC (32 MiB an 8-core CCD).
            llc_kb_per_core: 2048.0,
        }
    }
}

/// A simulated machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Machine {
    /// Its name (`opteron6272-4x16`, `local`, or the synthetic spec).
    pub name: String,
    /// CPUs, caches, sockets and nodes.
    pub topo: Topology,
    /// What moving data costs.
    pub costs: Costs,
}

/// The built-in machine names.
pub const MACHINES: &[&str] = &[
    "opteron6272-4x16",
    "tigerton-4x4",
    "barcelona-4x4",
    "opteron6320-4x8",
    "local",
];

/// The machine of the papers named `name`: its hwloc spec and its costs (`None`: not
/// one of them).
fn paper_machine(name: &str) -> Option<(&'static str, Costs)> {
    let machine = match name {
        // Shuffling §2, Fig. 2: 4 × 16-core Opteron 6272, memory 128 ns local, 201 ns remote.
        // Within a socket a line comes from the shared L3 (Fig. 2: "L3: 16 MB shared by 16
        // cores"): an L3 hit (≈ 26 ns on the Opteron 6100, 57 cycles at 2.2 GHz) plus the
        // probe of the core that holds it modified, about 40 ns. A socket has 4 DDR3-1600
        // channels (2 per die), about 30 GB/s achievable; a Bulldozer core streams about
        // 5 GB/s, so some 6 memory-bound threads share a socket at full speed. Sockets are
        // linked by HyperTransport 3 at 6.4 GT/s, 16 bits wide: 12.8 GB/s a direction, the
        // streams of about 2.5 cores.
        "opteron6272-4x16" => (
            "package:4 numa:1 core:16 pu:1",
            Costs {
                llc_ns: 40.0,
                local_ns: 128.0,
                remote_ns: 201.0,
                mem_remote_factor: 201.0 / 128.0,
                node_streams: 6.0,
                link_streams: 2.5,
                smt_factor: 1.0,
                mlp: 8.0,
                // A Bulldozer module's 2 MiB L2 (16 KiB L1D a core).
                private_kb: 2048.0,
                // Fig. 2: 16 MB of L3 shared by 16 cores.
                llc_kb_per_core: 1024.0,
            },
        ),
        // Speed balancing Table 1: Xeon E7310 "Tigerton", 4 × 4 cores, L2 per core pair, one
        // front-side bus (UMA): every miss costs the same; a core pair shares its L2 (a hit
        // is about 14 cycles at 1.6 GHz).
        "tigerton-4x4" => (
            "package:4 l2:2 core:2 pu:1",
            Costs {
                llc_ns: 10.0,
                local_ns: 110.0,
                remote_ns: 110.0,
                mem_remote_factor: 1.0,
                node_streams: 2.0,
                // One node: no link is ever used.
                link_streams: 2.0,
                smt_factor: 1.0,
                mlp: 4.0,
                // The L1D: the L2 is the pair's LLC.
                private_kb: 32.0,
                // Table 1: 4 MB of L2 per core pair.
                llc_kb_per_core: 2048.0,
            },
        ),
        // Speed balancing Table 1: Opteron 8350 "Barcelona", 4 × 4 cores, L3 per socket, NUMA
        // (an L3 hit plus a probe, as on the 6272).
        "barcelona-4x4" => (
            "package:4 numa:1 core:4 pu:1",
            Costs {
                llc_ns: 40.0,
                local_ns: 100.0,
                remote_ns: 150.0,
                mem_remote_factor: 1.5,
                node_streams: 2.0,
                // HyperTransport at 2 GT/s, 16 bits: 4 GB/s a direction; a core of the
                // two per node that saturate its 2 DDR2 channels streams about 5 GB/s.
                link_streams: 0.8,
                smt_factor: 1.0,
                mlp: 6.0,
                // 64 KiB L1D and 512 KiB L2 a core.
                private_kb: 576.0,
                // Table 1: 2 MB of L3 per socket of 4 cores.
                llc_kb_per_core: 512.0,
            },
        ),
        // Chiang & Su: 4 × 8-core Opteron 6320, NUMA factor 1.6; within a socket, the
        // shared L3, the 4 memory channels and the HyperTransport 3 links as on the 6272.
        "opteron6320-4x8" => (
            "package:4 numa:1 core:8 pu:1",
            Costs {
                llc_ns: 40.0,
                local_ns: 100.0,
                remote_ns: 160.0,
                mem_remote_factor: 1.6,
                node_streams: 6.0,
                link_streams: 2.5,
                smt_factor: 1.0,
                mlp: 8.0,
                // A Piledriver module's 2 MiB L2.
                private_kb: 2048.0,
                // 8 MiB of L3 per 4-core die.
                llc_kb_per_core: 2048.0,
            },
        ),
        _ => return None,
    };
    Some(machine)
}

/// A machine by name, `local` (which needs the caller's topology) or an hwloc-style spec.
pub fn machine(name_or_spec: &str, local: Option<Topology>) -> Result<Machine, SimError> {
    let synth = |spec: &str| {
        Topology::synthetic(spec).map_err(|source| SimError::MachineSpec {
            name: name_or_spec.to_string(),
            source,
        })
    };
    if let Some((spec, costs)) = paper_machine(name_or_spec) {
        return Ok(Machine {
            name: name_or_spec.to_string(),
            topo: synth(spec)?,
            costs,
        });
    }
    let (topo, costs) = match name_or_spec {
        "local" => {
            let topo = local.ok_or_else(|| SimError::Machine {
                name: "local".into(),
                why: "no local topology was given".into(),
            })?;
            (topo, Costs::generic())
        }
        spec if spec.contains(':') => (synth(spec)?, Costs::generic()),
        other => {
            return Err(SimError::Machine {
                name: other.to_string(),
                why: format!(
                    "unknown machine (known: {}, or an hwloc spec such as \"package:2 core:8 pu:2\")",
                    MACHINES.join(", ")
                ),
            });
        }
    };
    Ok(Machine {
        name: name_or_spec.to_string(),
        topo,
        costs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::Level;

    #[test]
    fn machine_builtins_have_the_papers_shapes() {
        // (name, packages, nodes, LLCs, CPUs)
        let cases = [
            ("opteron6272-4x16", 4, 4, 4, 64),
            ("tigerton-4x4", 4, 1, 8, 16),
            ("barcelona-4x4", 4, 4, 4, 16),
            ("opteron6320-4x8", 4, 4, 4, 32),
        ];
        for (name, p, n, l, c) in cases {
            let m = machine(name, None).unwrap();
            let t = &m.topo;
            assert_eq!(t.domains(Level::Package).len(), p, "{name}");
            assert_eq!(t.domains(Level::Node).len(), n, "{name}");
            assert_eq!(t.domains(Level::Llc).len(), l, "{name}");
            assert_eq!(t.cpus().len(), c, "{name}");
        }
    }

    #[test]
    fn machine_local_needs_a_topology_and_specs_parse() {
        assert!(machine("local", None).is_err());
        let t = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        assert_eq!(machine("local", Some(t)).unwrap().topo.cpus().len(), 2);
        assert_eq!(
            machine("package:2 core:4 pu:2", None)
                .unwrap()
                .topo
                .cpus()
                .len(),
            16
        );
        assert!(machine("cray-1", None).is_err());
        assert!(machine("package:0", None).is_err());
    }
}
