//! The machine as placement sees it: CPUs with their core, last-level cache, package and
//! NUMA node; node distances; and the *domains* at each level, the units a policy assigns
//! thread groups to.
//!
//! ```text
//!  Level::Package  ┌──────── package 0 ────────┐┌──────── package 1 ────────┐
//!  Level::Node     │  node 0     │  node 1     ││  node 2     │  node 3     │
//!  Level::Llc      │  llc 0      │  llc 1      ││  llc 2      │  llc 3      │
//!  Level::Core     │ c0 c1 c2 c3 │ c4 c5 c6 c7 ││ ...                       │
//!  Level::Cpu      │ 0,32 1,33 … │             ││                           │
//! ```
//!
//! [`Level::Cpu`] is the narrowest level: one logical CPU (hardware thread, PU) a domain,
//! the unit the kernel runs queues on. On a machine without SMT its domains are the
//! cores'; with SMT each core holds several, its *siblings* ([`Topology::siblings`]).
//!
//! Domains are numbered densely from 0 at each level in order of their lowest CPU, so a
//! policy can index them with plain `usize`s. Core, LLC and package ids given to
//! [`Topology::new`] may be sparse or repeated per package; they are renumbered densely.
//!
//! Synthetic machines follow hwloc's synthetic description (`package:4 core:16 pu:1`): each
//! `type:count` says how many children of that type every object of the level above has.
//! Accepted types, top down: `package` (or `socket`), `die`, `numa` (or `node`, `numanode`),
//! `l3` (or `llc`, `l3cache`), `l2`, `l1`, `core`, `pu`. As in hwloc, a spec without `numa`
//! describes a single NUMA node (a UMA machine). The last-level cache is the `l3` level if
//! given, else `l2`, else the deepest of `numa`/`die`/`package`. Without `core`, each PU is
//! its own core; without `pu`, each core has one PU. Node distances follow ACPI SLIT
//! conventions: 10 local, 16 for another node of the same package, 21 across packages.

use crate::{CoreId, CpuId, CpuSet, LlcId, ModelError, NodeId, PackageId};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// One online logical CPU and where it sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Cpu {
    /// The CPU number the kernel uses.
    pub id: CpuId,
    /// Its physical core, unique across the machine.
    pub core: CoreId,
    /// Its last-level cache, unique across the machine.
    pub llc: LlcId,
    /// Its package (socket).
    pub package: PackageId,
    /// Its NUMA node.
    pub node: NodeId,
}

/// A level of the hierarchy that can play the role the papers give to a "socket".
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Level {
    /// Packages (sockets).
    Package,
    /// NUMA nodes.
    Node,
    /// Last-level caches.
    Llc,
    /// Physical cores (all hardware threads of a core together).
    Core,
    /// Logical CPUs (hardware threads): one CPU a domain, the kernel's run queues.
    Cpu,
}

impl Level {
    /// All levels, from the widest to the narrowest.
    pub const ALL: [Level; 5] = [
        Level::Package,
        Level::Node,
        Level::Llc,
        Level::Core,
        Level::Cpu,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Level::Package => "package",
            Level::Node => "node",
            Level::Llc => "llc",
            Level::Core => "core",
            Level::Cpu => "cpu",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Each level with the other names [`FromStr`] accepts, for command lines (`--level`).
#[cfg(feature = "clap")]
impl clap::ValueEnum for Level {
    fn value_variants<'a>() -> &'a [Level] {
        &Level::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let (aliases, help): (&[&str], &str) = match self {
            Level::Package => (&["socket"], "packages (sockets)"),
            Level::Node => (&["numa"], "NUMA nodes"),
            Level::Llc => (&["l3"], "last-level caches"),
            Level::Core => (&[], "physical cores"),
            Level::Cpu => (
                &["pu"],
                "logical CPUs (hardware threads): the kernel's run queues",
            ),
        };
        Some(
            clap::builder::PossibleValue::new(self.name())
                .aliases(aliases.iter().copied())
                .help(help),
        )
    }
}

impl FromStr for Level {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Level, ModelError> {
        match s {
            "package" | "socket" => Ok(Level::Package),
            "node" | "numa" => Ok(Level::Node),
            "llc" | "l3" => Ok(Level::Llc),
            "core" => Ok(Level::Core),
            "cpu" | "pu" => Ok(Level::Cpu),
            other => Err(ModelError::Level(other.to_string())),
        }
    }
}

/// A group of CPUs at one level: one package, one node, one LLC, one core or one CPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Domain {
    /// The level it belongs to.
    pub level: Level,
    /// Dense index within its level, in order of lowest CPU.
    pub index: usize,
    /// The CPUs it holds (online only).
    pub cpus: CpuSet,
    /// The NUMA node of its lowest CPU.
    pub node: NodeId,
    /// The package of its lowest CPU.
    pub package: PackageId,
}

/// A machine's online CPUs, their hierarchy and node distances.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    cpus: Vec<Cpu>,
    /// Position of each CPU id in `cpus`, `u32::MAX` where the id is not online.
    pos: Vec<u32>,
    nodes: Vec<NodeId>,
    /// Position of each node id in `nodes`, `u32::MAX` where the id is not a node.
    node_pos: Vec<u32>,
    /// Row-major `nodes.len()²` distances, in `nodes` order.
    distance: Vec<u32>,
    domains: [Vec<Domain>; 5],
    /// For each level, the domain index of each CPU, in `cpus` order.
    of_cpu: [Vec<u32>; 5],
    online: CpuSet,
    /// Whether the LLCs come from cache information (sysfs `cache/`, or a synthetic
    /// spec); without it [`Level::Llc`] holds each package whole, and nothing should be
    /// planned over it. See [`Topology::without_cache_info`].
    caches: bool,
}

impl Topology {
    /// Builds a topology from its CPUs and, for each node, its distance to every node (in
    /// the order of `distances`' keys). Missing distances default to 10 for a node to itself
    /// and 20 otherwise. Core, LLC and package ids are renumbered densely; a core id given
    /// per package (as the kernel's `core_id` is) is made unique by its package.
    pub fn new(
        mut cpus: Vec<Cpu>,
        distances: BTreeMap<NodeId, Vec<u32>>,
    ) -> Result<Topology, ModelError> {
        if cpus.is_empty() {
            return Err(ModelError::Topology("no online CPU".into()));
        }
        cpus.sort_by_key(|c| c.id);
        if let Some(w) = cpus.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(ModelError::Topology(format!(
                "CPU {} listed twice",
                w[0].id
            )));
        }
        // Dense renumbering in order of first appearance (i.e. of lowest CPU).
        let mut packages = BTreeMap::new();
        let mut cores = BTreeMap::new();
        let mut llcs = BTreeMap::new();
        for c in &cpus {
            let n = packages.len() as u32;
            packages.entry(c.package).or_insert(n);
            let n = cores.len() as u32;
            cores.entry((c.package, c.core)).or_insert(n);
            let n = llcs.len() as u32;
            llcs.entry((c.package, c.llc)).or_insert(n);
        }
        for c in &mut cpus {
            let core = cores[&(c.package, c.core)];
            let llc = llcs[&(c.package, c.llc)];
            c.core = CoreId(core);
            c.llc = LlcId(llc);
            c.package = PackageId(packages[&c.package]);
        }
        // A core must not span two nodes or two LLCs.
        let mut core_home: BTreeMap<CoreId, (LlcId, NodeId)> = BTreeMap::new();
        for c in &cpus {
            let home = core_home.entry(c.core).or_insert((c.llc, c.node));
            if *home != (c.llc, c.node) {
                return Err(ModelError::Topology(format!(
                    "core of CPU {} spans two caches or nodes",
                    c.id
                )));
            }
        }
        let mut nodes: Vec<NodeId> = cpus.iter().map(|c| c.node).collect();
        nodes.extend(distances.keys().copied());
        nodes.sort();
        nodes.dedup();
        let n = nodes.len();
        // Position of each node id in `nodes`, `u32::MAX` for an id that is not a node: one
        // lookup per pair, so the matrix is built in n² steps, not n³.
        let mut node_pos = vec![u32::MAX; nodes.last().map_or(0, |l| usize::from(l.0) + 1)];
        for (i, a) in nodes.iter().enumerate() {
            node_pos[usize::from(a.0)] = i as u32;
        }
        let mut distance = vec![0u32; n * n];
        for i in 0..n {
            distance[i * n + i] = 10;
            for j in 0..n {
                if i != j {
                    distance[i * n + j] = 20;
                }
            }
        }
        // Each row lists distances in the order of the map's keys, as sysfs lists them in
        // node id order; entries past the last key are ignored, missing ones keep 10/20.
        for (a, row) in &distances {
            let i = node_pos[usize::from(a.0)] as usize;
            for (b, &d) in distances.keys().zip(row) {
                let j = node_pos[usize::from(b.0)] as usize;
                distance[i * n + j] = d;
            }
        }
        let max_id = cpus.last().map_or(0, |c| c.id.0) as usize;
        let mut pos = vec![u32::MAX; max_id + 1];
        for (i, c) in cpus.iter().enumerate() {
            pos[c.id.0 as usize] = i as u32;
        }
        let online: CpuSet = cpus.iter().map(|c| c.id).collect();
        let mut topo = Topology {
            cpus,
            pos,
            nodes,
            node_pos,
            distance,
            domains: Default::default(),
            of_cpu: Default::default(),
            online,
            caches: true,
        };
        for level in Level::ALL {
            topo.build_level(level);
        }
        Ok(topo)
    }

    fn key(c: &Cpu, level: Level) -> u32 {
        match level {
            Level::Package => c.package.0,
            Level::Node => u32::from(c.node.0),
            Level::Llc => c.llc.0,
            Level::Core => c.core.0,
            Level::Cpu => c.id.0,
        }
    }

    fn build_level(&mut self, level: Level) {
        let mut index_of: BTreeMap<u32, usize> = BTreeMap::new();
        let mut domains: Vec<Domain> = Vec::new();
        let mut of_cpu = Vec::with_capacity(self.cpus.len());
        for c in &self.cpus {
            let k = Self::key(c, level);
            let next = domains.len();
            let idx = *index_of.entry(k).or_insert(next);
            if idx == next {
                domains.push(Domain {
                    level,
                    index: idx,
                    cpus: CpuSet::new(),
                    node: c.node,
                    package: c.package,
                });
            }
            domains[idx].cpus.insert(c.id);
            of_cpu.push(idx as u32);
        }
        self.domains[level.index()] = domains;
        self.of_cpu[level.index()] = of_cpu;
    }

    /// Parses an hwloc-style synthetic description; see the module docs.
    ///
    /// ```
    /// use threadbalance_model::{Level, Topology};
    /// let t = Topology::synthetic("package:2 numa:2 core:8 pu:2").unwrap();
    /// assert_eq!(t.cpus().len(), 64);
    /// assert_eq!(t.domains(Level::Node).len(), 4);
    /// assert_eq!(t.domains(Level::Core).len(), 32);
    /// ```
    pub fn synthetic(spec: &str) -> Result<Topology, ModelError> {
        crate::topology::synthetic::parse(spec)
    }

    /// The online CPUs in increasing id order.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// The online CPUs as a set.
    pub fn online(&self) -> &CpuSet {
        &self.online
    }

    /// The CPU with this id, if online.
    pub fn cpu(&self, id: CpuId) -> Option<&Cpu> {
        let p = *self.pos.get(id.0 as usize)?;
        self.cpus.get(p as usize)
    }

    /// The domains at `level`, indexed densely from 0.
    pub fn domains(&self, level: Level) -> &[Domain] {
        &self.domains[level.index()]
    }

    /// The index of the domain at `level` that holds `cpu`, if `cpu` is online.
    pub fn domain_of(&self, cpu: CpuId, level: Level) -> Option<usize> {
        let p = *self.pos.get(cpu.0 as usize)?;
        self.of_cpu[level.index()]
            .get(p as usize)
            .map(|&d| d as usize)
    }

    /// The widest level with more than one domain: the one with the fewest domains, the
    /// earlier in [`Level::ALL`] on a tie; `Core` if every level has one. On most machines
    /// that is the first level of [`Level::ALL`] with more than one domain; where a node
    /// holds several packages (POWER, where Linux makes each core a package) it is the node.
    /// It is the default of the policies that group threads into "sockets" (Tumbler,
    /// Shuffling, hand-off); each policy's own default is `PolicyKind::default_level` in
    /// the policy crate.
    pub fn default_level(&self) -> Level {
        Level::ALL
            .into_iter()
            .filter(|&l| self.domains(l).len() > 1)
            .min_by_key(|&l| (self.domains(l).len(), l.index()))
            .unwrap_or(Level::Core)
    }

    /// The NUMA nodes, in id order (memoryless and CPU-less nodes included when given).
    pub fn nodes(&self) -> &[NodeId] {
        &self.nodes
    }

    /// The distance from node `a` to node `b` (10 = local), or `None` for an unknown node.
    pub fn distance(&self, a: NodeId, b: NodeId) -> Option<u32> {
        let i = *self.node_pos.get(usize::from(a.0))?;
        let j = *self.node_pos.get(usize::from(b.0))?;
        if i == u32::MAX || j == u32::MAX {
            return None;
        }
        self.distance
            .get(i as usize * self.nodes.len() + j as usize)
            .copied()
    }

    /// The same machine, marked as having no cache information: its sysfs lists no cache
    /// (s390, ia64, the PS3, many arm64 boards and VMs). hwloc then shows no cache at all;
    /// the LLC level still holds each package whole, so that a policy that groups by LLC
    /// groups by package, but [`Topology::has_cache_info`] says the LLCs are not known,
    /// `topo` says so and `--level llc` is refused.
    pub fn without_cache_info(mut self) -> Topology {
        self.caches = false;
        self
    }

    /// Whether the LLCs come from cache information; see [`Topology::without_cache_info`].
    pub fn has_cache_info(&self) -> bool {
        self.caches
    }

    /// The CPUs of `cpu`'s core other than `cpu` (its SMT siblings), in id order; empty
    /// without SMT or for a CPU that is not online.
    ///
    /// ```
    /// use threadbalance_model::{CpuId, Topology};
    /// let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
    /// assert_eq!(t.siblings(CpuId(5)), [CpuId(4)]);
    /// assert!(Topology::synthetic("core:4").unwrap().siblings(CpuId(1)).is_empty());
    /// ```
    pub fn siblings(&self, cpu: CpuId) -> Vec<CpuId> {
        self.domain_of(cpu, Level::Core)
            .map(|core| {
                self.domains(Level::Core)[core]
                    .cpus
                    .iter()
                    .filter(|&c| c != cpu)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The number of hardware threads of each core (SMT width) of the first core.
    pub fn smt_width(&self) -> usize {
        self.domains(Level::Core)
            .first()
            .map_or(1, |d| d.cpus.len())
    }

    /// A one-line description such as `2 packages, 4 nodes, 4 LLCs, 32 cores, 64 CPUs`
    /// (`no cache information` in place of the LLCs where there is none).
    pub fn describe(&self) -> String {
        let n = |l: Level| self.domains(l).len();
        let plural =
            |k: usize, one: &str, many: &str| format!("{k} {}", if k == 1 { one } else { many });
        let llcs = if self.caches {
            plural(n(Level::Llc), "LLC", "LLCs")
        } else {
            "no cache information".to_string()
        };
        format!(
            "{}, {}, {}, {}, {}",
            plural(n(Level::Package), "package", "packages"),
            plural(n(Level::Node), "node", "nodes"),
            llcs,
            plural(n(Level::Core), "core", "cores"),
            plural(self.cpus.len(), "CPU", "CPUs"),
        )
    }
}

mod synthetic {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    enum Kind {
        Package,
        Die,
        Numa,
        L3,
        L2,
        L1,
        Core,
        Pu,
    }

    /// Highest number of PUs a synthetic machine may have (the kernel's `NR_CPUS` limit).
    const MAX_PUS: u64 = 8192;

    /// Highest number of NUMA nodes a synthetic machine may have: Linux's `MAX_NUMNODES`
    /// is at most 1024 (`NODES_SHIFT` ≤ 10). It also bounds the distance matrix, the one
    /// part of a topology that grows with the square of a count, to 1024² entries.
    const MAX_NODES: u64 = 1024;

    /// The levels of a synthetic spec, top down, with the number of objects at the last
    /// (every count checked: known type, not 0, in order, no overflow past [`MAX_PUS`]).
    fn levels_of(
        spec: &str,
        bad: &dyn Fn(String) -> ModelError,
    ) -> Result<(Vec<(Kind, u32)>, u64), ModelError> {
        let mut levels: Vec<(Kind, u32)> = Vec::new();
        // The number of objects at the level just parsed: the product of the counts so far,
        // checked at every step so that no count, however large, can overflow it.
        let mut objects: u64 = 1;
        for tok in spec.split_whitespace() {
            let (name, count) = tok
                .split_once(':')
                .ok_or_else(|| bad(format!("{tok:?} is not type:count")))?;
            let kind = kind_named(name)
                .ok_or_else(|| bad(format!("unknown type {:?}", name.to_ascii_lowercase())))?;
            let count: u32 = count
                .parse()
                .map_err(|_| bad(format!("{count:?} is not a count")))?;
            if count == 0 {
                return Err(bad(format!("{name} count is 0")));
            }
            if let Some(&(prev, _)) = levels.last()
                && kind <= prev
            {
                return Err(bad(format!("{name} must come before the levels above it")));
            }
            objects = objects
                .checked_mul(u64::from(count))
                .filter(|&n| n <= MAX_PUS)
                .ok_or_else(|| bad(format!("more than {MAX_PUS} objects at level {name}")))?;
            if kind == Kind::Numa && objects > MAX_NODES {
                return Err(bad(format!(
                    "{objects} NUMA nodes is more than {MAX_NODES}"
                )));
            }
            levels.push((kind, count));
        }
        Ok((levels, objects))
    }

    /// The level a synthetic spec names `name` (any case; hwloc's names and a few more).
    fn kind_named(name: &str) -> Option<Kind> {
        Some(match name.to_ascii_lowercase().as_str() {
            "package" | "socket" => Kind::Package,
            "die" => Kind::Die,
            "numa" | "node" | "numanode" => Kind::Numa,
            "l3" | "l3cache" | "llc" => Kind::L3,
            "l2" | "l2cache" => Kind::L2,
            "l1" | "l1cache" | "l1d" => Kind::L1,
            "core" => Kind::Core,
            "pu" => Kind::Pu,
            _ => return None,
        })
    }

    pub(super) fn parse(spec: &str) -> Result<Topology, ModelError> {
        let bad = |why: String| ModelError::Synthetic {
            spec: spec.to_string(),
            why,
        };
        let (levels, objects) = levels_of(spec, &bad)?;
        if levels.is_empty() {
            return Err(bad("empty".into()));
        }
        // Every level's product divides the next, so `total` is the largest and none is 0.
        let total = objects;
        let has = |k: Kind| levels.iter().any(|&(x, _)| x == k);
        let llc_kind = [Kind::L3, Kind::L2, Kind::Numa, Kind::Die, Kind::Package]
            .into_iter()
            .find(|&k| has(k));
        // For each kind, how many PUs each of its objects holds: the total divided by the
        // number of objects of that kind (the product of the counts down to it). A PU's
        // ancestor of that kind is then its index divided by that size. Computed once per
        // kind, so building is linear in the number of PUs.
        let span = |k: Kind| -> u64 {
            let above: u64 = levels
                .iter()
                .take_while(|&&(x, _)| x <= k)
                .map(|&(_, c)| u64::from(c))
                .product();
            total / above.max(1)
        };
        let core_kind = if has(Kind::Core) {
            Kind::Core
        } else {
            Kind::Pu
        };
        let size_of = |k: Kind| has(k).then(|| span(k));
        let (core_size, llc_size) = (size_of(core_kind), llc_kind.and_then(size_of));
        let (package_size, node_size) = (size_of(Kind::Package), size_of(Kind::Numa));
        let group = |size: Option<u64>, pu: u64| size.map_or(0, |s| (pu / s) as u32);
        let mut cpus = Vec::with_capacity(total as usize);
        for pu in 0..total {
            cpus.push(Cpu {
                id: CpuId(pu as u32),
                core: CoreId(if core_size.is_some() {
                    group(core_size, pu)
                } else {
                    pu as u32
                }),
                llc: LlcId(group(llc_size, pu)),
                package: PackageId(group(package_size, pu)),
                node: NodeId(group(node_size, pu) as u16),
            });
        }
        let nodes: Vec<(NodeId, PackageId)> = {
            let mut v: Vec<_> = cpus.iter().map(|c| (c.node, c.package)).collect();
            v.dedup();
            v
        };
        let mut distances = BTreeMap::new();
        for &(a, pa) in &nodes {
            let row = nodes
                .iter()
                .map(|&(b, pb)| {
                    if a == b {
                        10
                    } else if pa == pb {
                        16
                    } else {
                        21
                    }
                })
                .collect();
            distances.insert(a, row);
        }
        Topology::new(cpus, distances)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_opteron_testbed_has_four_packages_of_sixteen_cores() {
        let t = Topology::synthetic("package:4 core:16 pu:1").unwrap();
        assert_eq!(t.cpus().len(), 64);
        assert_eq!(t.domains(Level::Package).len(), 4);
        assert_eq!(t.domains(Level::Core).len(), 64);
        // No numa level: one node, as in hwloc.
        assert_eq!(t.nodes(), &[NodeId(0)]);
        // LLC defaults to the package.
        assert_eq!(t.domains(Level::Llc).len(), 4);
        assert_eq!(t.domains(Level::Package)[1].cpus.to_string(), "16-31");
        assert_eq!(t.default_level(), Level::Package);
    }

    #[test]
    fn synthetic_two_nodes_per_package_with_smt() {
        let t = Topology::synthetic("package:2 numa:2 core:8 pu:2").unwrap();
        assert_eq!(t.cpus().len(), 64);
        assert_eq!(t.domains(Level::Node).len(), 4);
        assert_eq!(t.domains(Level::Llc).len(), 4);
        assert_eq!(t.smt_width(), 2);
        // CPU 17 is the second PU of core 8 (first core of node 1, package 0).
        let c = t.cpu(CpuId(17)).unwrap();
        assert_eq!(
            (c.core, c.node, c.package),
            (CoreId(8), NodeId(1), PackageId(0))
        );
        assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(16));
        assert_eq!(t.distance(NodeId(0), NodeId(2)), Some(21));
        assert_eq!(t.distance(NodeId(3), NodeId(3)), Some(10));
        assert_eq!(t.domain_of(CpuId(17), Level::Node), Some(1));
        assert_eq!(t.domain_of(CpuId(17), Level::Core), Some(8));
    }

    #[test]
    fn synthetic_rejects_malformed_specs() {
        for spec in [
            "",
            "package",
            "package:x",
            "package:0 core:2",
            "core:2 package:2",
            "widget:2",
            "package:64 core:64 pu:4",
        ] {
            assert!(
                Topology::synthetic(spec).is_err(),
                "{spec:?} should be rejected"
            );
        }
    }

    #[test]
    fn synthetic_huge_counts_are_rejected_without_overflow() {
        // See: issue 11, item 10. 4294967295³ overflows a u64: the product used to wrap
        // (a panic in debug builds, a division by zero in release builds).
        for spec in [
            "package:4294967295 core:4294967295 pu:4294967295",
            "package:65536 die:65536 numa:65536 l3:65536 l2:65536 core:65536 pu:65536",
            "package:8193",
            "package:4096 core:2 pu:2",
        ] {
            let err = Topology::synthetic(spec).unwrap_err().to_string();
            assert!(err.contains("more than 8192"), "{spec:?}: {err}");
        }
        // 1025 nodes is one more than Linux's MAX_NUMNODES.
        let err = Topology::synthetic("numa:1025 pu:1")
            .unwrap_err()
            .to_string();
        assert!(err.contains("1025 NUMA nodes is more than 1024"), "{err}");
    }

    #[test]
    fn synthetic_largest_machine_builds_with_every_node_and_distance() {
        // See: issue 11, item 10: 2048 nodes took 79 s in a debug build (the distance
        // matrix looked each node up by a scan: n³ steps). The largest accepted machine:
        // 1024 nodes × 8 PUs = 8192 PUs, 1024² distances.
        let t = Topology::synthetic("package:2 numa:512 core:8 pu:1").unwrap();
        assert_eq!(t.cpus().len(), 8192);
        assert_eq!(t.nodes().len(), 1024);
        assert_eq!(t.domains(Level::Node).len(), 1024);
        // Nodes 0-511 are package 0, 512-1023 package 1.
        assert_eq!(t.distance(NodeId(0), NodeId(511)), Some(16));
        assert_eq!(t.distance(NodeId(511), NodeId(512)), Some(21));
        assert_eq!(t.distance(NodeId(1023), NodeId(1023)), Some(10));
        assert_eq!(t.distance(NodeId(1023), NodeId(1024)), None);
        // CPU 8191 is the last core of node 1023.
        assert_eq!(t.domain_of(CpuId(8191), Level::Node), Some(1023));
        assert_eq!(t.domain_of(CpuId(8191), Level::Core), Some(8191));
    }

    #[test]
    fn default_level_on_one_socket_two_core_machine_is_core() {
        let t = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        assert_eq!(t.default_level(), Level::Core);
        let t = Topology::synthetic("pu:1").unwrap();
        assert_eq!(t.default_level(), Level::Core);
    }

    #[test]
    fn default_level_is_the_node_when_nodes_hold_several_packages() {
        // Four one-core packages in two nodes (a POWER7 LPAR read as hwloc reads it):
        // 4 packages, 2 nodes; the node is the wider level.
        let cpu = |id: u32| Cpu {
            id: CpuId(id),
            core: CoreId(id),
            llc: LlcId(id),
            package: PackageId(id),
            node: NodeId((id / 2) as u16),
        };
        let t = Topology::new((0..4).map(cpu).collect(), BTreeMap::new()).unwrap();
        assert_eq!(t.domains(Level::Package).len(), 4);
        assert_eq!(t.domains(Level::Node).len(), 2);
        assert_eq!(t.default_level(), Level::Node);
        // The usual nesting is unchanged: 2 packages of 2 nodes each → package.
        let t = Topology::synthetic("package:2 numa:2 core:2").unwrap();
        assert_eq!(t.default_level(), Level::Package);
    }

    #[test]
    fn topology_renumbers_per_package_core_ids() {
        // Two packages whose cores are both numbered 0 and 1, as the kernel's core_id is.
        let cpu = |id, core, pkg| Cpu {
            id: CpuId(id),
            core: CoreId(core),
            llc: LlcId(pkg),
            package: PackageId(pkg),
            node: NodeId(pkg as u16),
        };
        let t = Topology::new(
            vec![cpu(0, 0, 0), cpu(1, 1, 0), cpu(2, 0, 1), cpu(3, 1, 1)],
            BTreeMap::new(),
        )
        .unwrap();
        assert_eq!(t.domains(Level::Core).len(), 4);
        assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(20));
        assert!(t.cpu(CpuId(4)).is_none());
    }

    #[test]
    fn level_cpu_on_smt_machine_has_one_domain_per_logical_cpu() {
        // 2 packages × 4 cores × 2 PUs: 8 cores, 16 CPUs; CPU 5 is the second PU of core 2.
        let t = Topology::synthetic("package:2 core:4 pu:2").unwrap();
        let cpus = t.domains(Level::Cpu);
        assert_eq!(cpus.len(), 16);
        assert!(cpus.iter().all(|d| d.cpus.len() == 1));
        assert_eq!(cpus[5].cpus.to_string(), "5");
        assert_eq!(t.domain_of(CpuId(5), Level::Cpu), Some(5));
        assert_eq!(t.domain_of(CpuId(5), Level::Core), Some(2));
        assert_eq!(cpus[9].package, PackageId(1));
        assert_eq!(t.siblings(CpuId(5)), [CpuId(4)]);
        assert_eq!(t.siblings(CpuId(16)), []);
        // Adding the level leaves the widest level the default.
        assert_eq!(t.default_level(), Level::Package);
        // Without SMT the CPU level's domains are the cores'.
        let t = Topology::synthetic("package:1 core:4 pu:1").unwrap();
        let cores: Vec<_> = t.domains(Level::Core).iter().map(|d| &d.cpus).collect();
        let cpus: Vec<_> = t.domains(Level::Cpu).iter().map(|d| &d.cpus).collect();
        assert_eq!(cores, cpus);
        assert!(t.siblings(CpuId(1)).is_empty());
    }

    #[test]
    fn default_level_of_one_smt_core_is_the_cpu() {
        // One core of two hardware threads: the CPU is the only level with two domains.
        let t = Topology::synthetic("package:1 core:1 pu:2").unwrap();
        assert_eq!(t.default_level(), Level::Cpu);
    }

    #[test]
    fn level_names_parse() {
        for l in Level::ALL {
            assert_eq!(l.name().parse::<Level>().unwrap(), l);
        }
        assert!("rack".parse::<Level>().is_err());
        assert_eq!("pu".parse::<Level>().unwrap(), Level::Cpu);
        assert_eq!(Level::Cpu.to_string(), "cpu");
    }
}
