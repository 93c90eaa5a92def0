//! `threadbalance topo`: the machine as placement sees it: every level (package, node,
//! LLC, core, and the logical CPUs, SMT siblings grouped by core), the widest level with
//! more than one domain, and the level each policy runs at when none is given.

use crate::error::{bad_input, refused};
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use threadbalance_linux::Root;
use threadbalance_model::{Level, Topology};
use threadbalance_policy::PolicyKind;

/// Options of `topo`.
#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Read `sys/devices/system/{cpu,node}` under DIR instead of `/`.
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    sysfs_root: Option<PathBuf>,
    /// An hwloc-style synthetic machine, e.g. "package:4 core:16 pu:1".
    #[arg(long, value_name = "SPEC")]
    synthetic: Option<String>,
    /// Print JSON instead of a tree.
    #[arg(long)]
    json: bool,
    /// Show every CPU, also those the cpuset this command runs in does not allow (as
    /// `lstopo --whole-system`); by default, as `lstopo`, only the allowed ones.
    #[arg(long, conflicts_with = "synthetic")]
    whole_system: bool,
}

/// Reads the machine's topology from `/`, or fails with an input error naming the path.
pub fn read_system() -> Result<Topology> {
    load(None, None)
}

fn load(root: Option<&PathBuf>, synthetic: Option<&str>) -> Result<Topology> {
    if let Some(spec) = synthetic {
        return Topology::synthetic(spec).map_err(bad_input);
    }
    let root = match root {
        Some(dir) => Root::new(dir),
        None => Root::system(),
    };
    threadbalance_linux::read_topology(&root).map_err(bad_input)
}

/// Runs `topo`.
pub fn topo(args: &TopoArgs) -> Result<()> {
    let t = load(args.sysfs_root.as_ref(), args.synthetic.as_deref())?;
    let (t, hidden) = if args.synthetic.is_some() || args.whole_system {
        (t, None)
    } else {
        let root = args
            .sysfs_root
            .as_ref()
            .map_or_else(Root::system, Root::new);
        let cpuset = threadbalance_linux::read_cpuset(&root, "self").map_err(bad_input)?;
        within_cpuset(t, cpuset)?
    };
    if args.json {
        let mut v = to_json(&t);
        if let (Some((name, cpus)), Some(o)) = (&hidden, v.as_object_mut()) {
            o.insert(
                "cpuset".to_string(),
                json!({"name": name, "hidden": cpus.to_string()}),
            );
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&crate::schema::stamp(v))?
        );
    } else {
        out!("{}", to_tree(&t));
        if let Some((name, cpus)) = &hidden {
            outln!("cpuset {name}: CPUs {cpus} not shown (--whole-system shows them)");
        }
    }
    Ok(())
}

/// The topology cut down to the CPUs `cpuset` allows, as `lstopo` shows it, with the
/// cpuset's name and the CPUs left out; unchanged (and `None`) when it allows every CPU,
/// or none of them (a cpuset file that names no online CPU says nothing of this machine).
fn within_cpuset(
    t: Topology,
    cpuset: Option<threadbalance_linux::Cpuset>,
) -> Result<(Topology, Option<(String, threadbalance_model::CpuSet)>)> {
    let Some(c) = cpuset else {
        return Ok((t, None));
    };
    let kept = t.allowed_part(&c.cpus);
    if kept.is_empty() || kept.len() == t.cpus().len() {
        return Ok((t, None));
    }
    let hidden = t.online().difference(&kept);
    let cut = t
        .restricted_to(&kept)
        .map_err(|e| refused(format!("cpuset {}", c.name), e))?;
    Ok((cut, Some((c.name, hidden))))
}

/// The topology as JSON: counts, each domain at each level, node distances.
pub fn to_json(t: &Topology) -> serde_json::Value {
    let levels: serde_json::Map<String, serde_json::Value> = Level::ALL
        .iter()
        .map(|&l| {
            if l == Level::Llc && !t.has_cache_info() {
                return (l.name().to_string(), json!([]));
            }
            let ds: Vec<_> = t
                .domains(l)
                .iter()
                .map(|d| json!({"index": d.index, "cpus": d.cpus.to_string(), "node": d.node, "package": d.package}))
                .collect();
            (l.name().to_string(), serde_json::Value::Array(ds))
        })
        .collect();
    let distances: Vec<Vec<u32>> = t
        .nodes()
        .iter()
        .map(|&a| {
            t.nodes()
                .iter()
                .map(|&b| t.distance(a, b).unwrap_or(0))
                .collect()
        })
        .collect();
    let mut cpus = serde_json::to_value(t.cpus()).unwrap_or_default();
    if !t.has_cache_info()
        && let Some(cpus) = cpus.as_array_mut()
    {
        for c in cpus.iter_mut().filter_map(|c| c.as_object_mut()) {
            c.insert("llc".to_string(), serde_json::Value::Null);
        }
    }
    json!({
        "summary": t.describe(),
        "caches": t.has_cache_info(),
        "cpus": cpus,
        "online": t.online().to_string(),
        "default_level": t.default_level(),
        "default_levels": default_levels(t)
            .into_iter()
            .map(|(k, l)| (k.name().to_string(), json!(l)))
            .collect::<serde_json::Map<_, _>>(),
        "smt_width": t.smt_width(),
        "levels": levels,
        "nodes": t.nodes(),
        "distances": distances,
    })
}

/// Each policy with the level it runs at on `t` when none is given.
fn default_levels(t: &Topology) -> Vec<(PolicyKind, Level)> {
    PolicyKind::ALL
        .iter()
        .map(|&k| (k, k.default_level(t)))
        .collect()
}

/// The policies' default levels in one line, policies sharing a level together:
/// `speed cpu; tumbler, shuffling, … package; numa-first-fit, … node`.
fn default_levels_line(t: &Topology) -> String {
    let mut by_level: Vec<(Level, Vec<&str>)> = Vec::new();
    for (k, l) in default_levels(t) {
        match by_level.iter_mut().find(|(x, _)| *x == l) {
            Some((_, names)) => names.push(k.name()),
            None => by_level.push((l, vec![k.name()])),
        }
    }
    by_level
        .iter()
        .map(|(l, names)| format!("{} {l}", names.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The domains of `child` level grouped under the domains of `parent` level: entry `p` lists
/// the children contained in parent `p`, in index order. A child belongs to the parent that
/// holds its lowest CPU, and is listed only if the parent holds all of its CPUs (an LLC wider
/// than its node is not shown under the node). One pass over the children: linear.
fn children(t: &Topology, parent: Level, child: Level) -> Vec<Vec<usize>> {
    let parents = t.domains(parent);
    let mut out = vec![Vec::new(); parents.len()];
    for c in t.domains(child) {
        let Some(p) = c.cpus.first().and_then(|cpu| t.domain_of(cpu, parent)) else {
            continue;
        };
        if c.cpus.is_subset(&parents[p].cpus) {
            out[p].push(c.index);
        }
    }
    out
}

/// Whether every domain of `child` level lies within one domain of `parent` level.
fn nests(t: &Topology, parent: Level, child: Level) -> bool {
    children(t, parent, child)
        .iter()
        .map(Vec::len)
        .sum::<usize>()
        == t.domains(child).len()
}

/// The order in which the package, node and LLC levels nest on this machine, widest first:
/// package → node → LLC on most machines; node → package → LLC where a node holds several
/// packages (POWER, where each core is its own package); the usual order, with the
/// children that do not nest left out, when no order nests.
fn nesting(t: &Topology) -> [Level; 3] {
    use Level::{Llc, Node, Package};
    let orders = [
        [Package, Node, Llc],
        [Package, Llc, Node],
        [Node, Package, Llc],
        [Node, Llc, Package],
        [Llc, Package, Node],
        [Llc, Node, Package],
    ];
    orders
        .into_iter()
        .find(|[a, b, c]| nests(t, *a, *b) && nests(t, *b, *c))
        .unwrap_or(orders[0])
}

/// The topology as an indented tree, package → node → LLC → core → CPUs (or in the order
/// the levels nest on this machine, see [`nesting`]).
pub fn to_tree(t: &Topology) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", t.describe());
    let _ = writeln!(out, "default level: {}", t.default_level());
    let _ = writeln!(out, "policies' levels: {}", default_levels_line(t));
    let smt = t.smt_width();
    let _ = writeln!(
        out,
        "cpu level: {} logical CPUs, {smt} hardware thread{} a core{}",
        t.domains(Level::Cpu).len(),
        if smt == 1 { "" } else { "s" },
        if smt > 1 {
            " (siblings: core:CPUs below)"
        } else {
            ""
        }
    );
    let [top, mid, low] = nesting(t);
    let label = |level: Level, i: usize| {
        let d = &t.domains(level)[i];
        match level {
            Level::Node => format!("node {} (CPUs {})", d.node, d.cpus),
            Level::Llc if !t.has_cache_info() => format!("no cache information (CPUs {})", d.cpus),
            _ => format!("{level} {} (CPUs {})", d.index, d.cpus),
        }
    };
    let mids_of = children(t, top, mid);
    let lows_of = children(t, mid, low);
    let cores_of = children(t, low, Level::Core);
    for (ti, mids) in mids_of.iter().enumerate() {
        let _ = writeln!(out, "{}", label(top, ti));
        for &mi in mids {
            let _ = writeln!(out, "  {}", label(mid, mi));
            for &li in &lows_of[mi] {
                let _ = writeln!(out, "    {}", label(low, li));
                let cores: Vec<String> = cores_of[li]
                    .iter()
                    .map(|&ci| {
                        let c = &t.domains(Level::Core)[ci];
                        format!("{}:{}", c.index, c.cpus)
                    })
                    .collect();
                let _ = writeln!(out, "      cores {}", cores.join(" "));
            }
        }
    }
    if t.nodes().len() > 1 {
        let _ = writeln!(out, "node distances:");
        for &a in t.nodes() {
            let row: Vec<String> = t
                .nodes()
                .iter()
                .map(|&b| t.distance(a, b).unwrap_or(0).to_string())
                .collect();
            let _ = writeln!(out, "  {a}: {}", row.join(" "));
        }
    }
    out
}
