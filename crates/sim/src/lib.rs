//! A deterministic discrete-event model of multi-socket machines that runs the **same**
//! placement policies as the Linux host, through [`SimHost`], an implementation of the
//! engine's `Host` trait.
//!
//! ```text
//!  Machine (Topology + Costs) ─┐
//!  Workload (apps → threads →  ├─► Sim: the event loop (run/, events in queue.rs), owning
//!            programs of ops)  ┘     the World (clock, threads, hardware) and two parts:
//!                                    Userspace (run/): programs, locks, barriers, queues
//!                                      ⇅ block / wake / yield  ·  Programs (state/)
//!                                    Kernel (scheduler/): run queues, slices, wake-up
//!                                      placement, domain load balancing
//!  Policy (threadbalance-policy) ◄── Engine::tick ◄── SimHost (host.rs): /proc-like samples,
//!                                                     affinities
//!  RunResult → Comparison: table, JSON, SVG (report.rs); the papers' claims (suite.rs)
//! ```
//!
//! The kernel and the programs are types of their own (`state/` holds their data and the
//! `Programs` interface between them); neither holds the other, each method takes the
//! shared world and the other part as arguments. NUMA balancing (`autonuma.rs`) is the
//! loop's.
//!
//! Nothing here names an outcome: speedups, cross-socket fractions and utilization spreads
//! *emerge* from time slices, queues, lock hand-offs and cache and memory costs. The Linux
//! model is calibrated against measurements of Linux 6.18 on two cores
//! (`calibration/linux-6.18-2core.md`; see the integration test `calibration`).
//!
//! ```
//! use threadbalance_sim::{compare, machine, workload};
//! use threadbalance_policy::Settings;
//! use threadbalance_model::Level;
//! let m = machine("package:2 core:2 pu:1", None).unwrap();
//! let w = workload("ep-barrier:phase_ms=5,work_ms=50", Some(3), None).unwrap();
//! let c = compare(&m, &w, &["none".to_string()], 1, &Settings::new(Level::Package)).unwrap();
//! assert_eq!(c.results.len(), 1);
//! assert!(c.results[0].runtime_s > 0.05);
//! assert!(c.to_table().contains("none"));
//! ```
#![forbid(unsafe_code)]

pub mod app;
pub mod apps;
pub mod autonuma;
pub mod counters;
mod error;
pub mod gomp;
pub mod host;
mod kit;
pub mod llc;
pub mod lockgroups;
pub mod machine;
pub mod memory;
mod params;
pub mod parsec;
pub mod phases;
pub mod plot;
pub mod queue;
pub mod report;
pub mod run;
pub mod scenario;
pub mod scheduler;
pub mod splash2x;
mod state;
pub mod suite;
pub mod verdict;
pub mod workload;

pub use error::{SimError, Violation};
pub use host::{SimHost, run_built, run_policy};
pub use machine::{Costs, MACHINES, Machine, machine};
pub use report::{Comparison, RunResult};
pub use run::{MEASURED, RunOptions, Sim, TickCost, TimelinePoint};
pub use scheduler::{Baseline, Linux};
pub use suite::suite_papers;
pub use verdict::{Claim, Counts, Effect, Kind, SuiteReport, Verdict, verdict};
pub use workload::{App, BUILTINS, FirstTouch, Group, Op, QueueSpec, Wait, Workload};

use std::path::Path;
use threadbalance_policy::Settings;

/// A workload: a built-in name (with `:key=value,…` parameters), a scenario in
/// `scenarios_dir` (`<name>.toml`, default `./scenarios`), a scenario built into the program
/// ([`scenario::EMBEDDED`], when the folder has none of that name) or a path to a `.toml`
/// file; `a+b` runs two at once.
/// `threads` overrides each built-in's thread count.
pub fn workload(
    name: &str,
    threads: Option<usize>,
    scenarios_dir: Option<&Path>,
) -> Result<Workload, SimError> {
    if name.contains('+') {
        let mut apps = Vec::new();
        let mut descs = Vec::new();
        for part in name.split('+') {
            let w = workload(part, threads, scenarios_dir)?;
            descs.push(w.name.clone());
            apps.extend(w.apps);
        }
        let threads = apps
            .iter()
            .try_fold(0usize, |n, a| n.checked_add(a.threads()))
            .unwrap_or(usize::MAX);
        workload::check_threads(threads).map_err(|source| SimError::WorkloadInvalid {
            name: name.to_string(),
            source,
        })?;
        return Ok(Workload {
            name: name.to_string(),
            description: format!("{} at once", descs.join(" and ")),
            apps,
        });
    }
    if let Some(w) = workload::builtin(name, threads)? {
        return Ok(w);
    }
    let dir = scenarios_dir.unwrap_or(Path::new("scenarios"));
    if let Some(w) = scenario::read_scenario(name, dir)? {
        return Ok(w);
    }
    if let Some(w) = scenario::embedded_scenario(name)? {
        return Ok(w);
    }
    let known: Vec<&str> = BUILTINS.iter().map(|(n, _)| *n).collect();
    let embedded: Vec<&str> = scenario::EMBEDDED.iter().map(|(n, _)| *n).collect();
    Err(SimError::Workload {
        name: name.to_string(),
        why: format!(
            "unknown (built-ins: {}; scenarios: {}; or a scenario {}/<name>.toml)",
            known.join(", "),
            embedded.join(", "),
            dir.display()
        ),
    })
}

/// Runs `workload` on `machine` under each policy (and `none` as the baseline), same seed.
pub fn compare(
    machine: &Machine,
    workload: &Workload,
    policies: &[String],
    seed: u64,
    settings: &Settings,
) -> Result<Comparison, SimError> {
    let opts = RunOptions::new(seed);
    compare_with(machine, workload, policies, settings, &opts)
}

/// [`compare`] with explicit run options.
pub fn compare_with(
    machine: &Machine,
    workload: &Workload,
    policies: &[String],
    settings: &Settings,
    opts: &RunOptions,
) -> Result<Comparison, SimError> {
    if policies.is_empty() {
        return Err(SimError::Policy {
            name: String::new(),
            why: "no policy to compare".into(),
        });
    }
    // Build every policy first so a bad name fails before any simulation.
    for p in policies {
        threadbalance_policy::build(p, settings, &machine.topo).map_err(|e| {
            SimError::PolicyBuild {
                name: p.clone(),
                source: e,
            }
        })?;
    }
    let mut results = Vec::new();
    let mut baseline = None;
    for p in policies {
        let r = run_policy(machine, workload, p, settings, opts)?;
        if p == "none" && baseline.is_none() {
            baseline = Some(r.clone());
        }
        results.push(r);
    }
    let baseline = match baseline {
        Some(b) => b,
        None => run_policy(machine, workload, "none", settings, opts)?,
    };
    Ok(Comparison {
        machine: machine.name.clone(),
        topology: machine.topo.describe(),
        workload: workload.name.clone(),
        threads: workload.threads(),
        seed: opts.seed,
        baseline,
        results,
    })
}
