//! `threadbalance topo`: the machine as placement sees it.

use crate::input_error;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use threadbalance_linux::Root;
use threadbalance_model::{Level, Topology};

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
}

/// Reads the machine's topology from `/`, or fails with an input error naming the path.
pub fn read_system() -> Result<Topology> {
    load(None, None)
}

fn load(root: Option<&PathBuf>, synthetic: Option<&str>) -> Result<Topology> {
    if let Some(spec) = synthetic {
        return Topology::synthetic(spec).map_err(|e| input_error(e.to_string()));
    }
    let root = match root {
        Some(dir) => Root::new(dir),
        None => Root::system(),
    };
    threadbalance_linux::read_topology(&root).map_err(|e| input_error(e.to_string()))
}

/// Runs `topo`.
pub fn topo(args: &TopoArgs) -> Result<()> {
    let t = load(args.sysfs_root.as_ref(), args.synthetic.as_deref())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&t))?);
    } else {
        print!("{}", to_tree(&t));
    }
    Ok(())
}

/// The topology as JSON: counts, each domain at each level, node distances.
pub fn to_json(t: &Topology) -> serde_json::Value {
    let levels: serde_json::Map<String, serde_json::Value> = Level::ALL
        .iter()
        .map(|&l| {
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
    json!({
        "summary": t.describe(),
        "cpus": t.cpus(),
        "online": t.online().to_string(),
        "default_level": t.default_level(),
        "levels": levels,
        "nodes": t.nodes(),
        "distances": distances,
    })
}

/// The topology as an indented tree, package → node → LLC → core → CPUs.
pub fn to_tree(t: &Topology) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "{}", t.describe());
    let _ = writeln!(out, "default level: {}", t.default_level());
    for p in t.domains(Level::Package) {
        let _ = writeln!(out, "package {} (CPUs {})", p.index, p.cpus);
        for n in t
            .domains(Level::Node)
            .iter()
            .filter(|n| n.cpus.is_subset(&p.cpus))
        {
            let _ = writeln!(out, "  node {} (CPUs {})", n.node, n.cpus);
            for l in t
                .domains(Level::Llc)
                .iter()
                .filter(|l| l.cpus.is_subset(&n.cpus))
            {
                let _ = writeln!(out, "    llc {} (CPUs {})", l.index, l.cpus);
                let cores: Vec<String> = t
                    .domains(Level::Core)
                    .iter()
                    .filter(|c| c.cpus.is_subset(&l.cpus))
                    .map(|c| format!("{}:{}", c.index, c.cpus))
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
