//! `threadbalance sim`: compare policies on a simulated machine, or run the papers' claims.
//!
//! ```text
//! threadbalance sim --machine opteron6272-4x16 --workload ferret-pipeline --policy none,tumbler,pbind
//! threadbalance sim --machine local --workload ep-barrier:phase_ms=10 --threads 3 --policy none,speed --json
//! threadbalance sim --suite papers --seeds 1,2,3
//! ```

use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use threadbalance_policy::PolicyKind;

/// Options of `threadbalance sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Machine: opteron6272-4x16, tigerton-4x4, barcelona-4x4, opteron6320-4x8, local (this
    /// machine's topology), or an hwloc spec such as "package:2 core:8 pu:2".
    #[arg(long, short = 'm', default_value = "opteron6272-4x16")]
    machine: String,
    /// Workload: ep-barrier, spinners, ferret-pipeline, streamcluster, bodytrack,
    /// memcached-like, parsec-mix (parameters after ":", e.g. "ep-barrier:phase_ms=10,wait=yield"), a
    /// scenario in --scenarios, or a .toml file; "a+b" runs two at once.
    #[arg(long, short = 'w', default_value = "ferret-pipeline")]
    workload: String,
    /// Policies (comma-separated; speedups are relative to none), level, interval and seed
    /// (of every random choice: the same seed gives the same output), as in every command.
    /// A simulated machine takes no --cpus (give --machine a smaller spec) and changes no
    /// real affinity (no --dry-run).
    #[command(flatten)]
    settings: SettingsArgs,
    /// Threads of the built-in workload (each application of a "+" mix).
    #[arg(long)]
    threads: Option<usize>,
    /// Print one JSON object with a `results` array instead of the table.
    #[arg(long)]
    json: bool,
    /// Also draw per-socket utilization over time and migrations per policy to FILE.svg.
    #[arg(long, value_name = "FILE.svg")]
    report: Option<PathBuf>,
    /// Directory of scenario files, read first; the repository's scenarios (lock-convoy,
    /// oversubscribed-barrier, two-apps, two-stage-pipeline) are built in, for any directory.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Run a suite of claims instead of one comparison: "papers". Each paper claim prints
    /// the paper's effect, the simulated one and their ratio, and is "reproduced" (direction
    /// and size within 2×), "direction only" or "not reproduced"; calibration rows are
    /// counted apart. With --json: `claims` (each with `paper_effect`, `simulated_effect`,
    /// `ratio`, `verdict`) and `counts`.
    #[arg(long, value_name = "SUITE")]
    suite: Option<String>,
    /// Seeds the suite runs each claim with, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
}

/// Runs `threadbalance sim`.
pub fn run(a: &SimArgs) -> Result<u8> {
    if let Some(suite) = &a.suite {
        if suite != "papers" {
            return Err(input_error(format!(
                "unknown suite {suite:?} (known: papers)"
            )));
        }
        let report = threadbalance_sim::suite_papers(&a.seeds);
        if a.json {
            let json = crate::schema::stamp(report.to_json());
            outln!("{}", serde_json::to_string_pretty(&json)?);
        } else {
            out!("{}", report.to_table());
        }
        return Ok(0);
    }
    let s = &a.settings;
    if let Some(cpus) = &s.cpus {
        return Err(input_error(format!(
            "--cpus {cpus}: sim takes no CPU list; give --machine a spec of the CPUs wanted \
             (e.g. \"package:1 core:4 pu:1\")"
        )));
    }
    if s.dry_run {
        return Err(input_error(
            "--dry-run: sim changes no real affinity; leave it out",
        ));
    }
    let local = if a.machine == "local" {
        Some(crate::topo::read_system()?)
    } else {
        None
    };
    let machine =
        threadbalance_sim::machine(&a.machine, local).map_err(|e| input_error(e.to_string()))?;
    let workload = threadbalance_sim::workload(&a.workload, a.threads, Some(&a.scenarios))
        .map_err(|e| input_error(e.to_string()))?;
    let settings = s.settings(&machine.topo);
    let (policies, _) = s.policies(&[PolicyKind::None, PolicyKind::Tumbler]);
    let names: Vec<String> = policies.iter().map(ToString::to_string).collect();
    let cmp = threadbalance_sim::compare(&machine, &workload, &names, s.seed, &settings)
        .map_err(|e| input_error(e.to_string()))?;
    if a.json {
        let json = crate::schema::stamp(cmp.to_json());
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        out!("{}", cmp.to_table());
    }
    if let Some(path) = &a.report {
        std::fs::write(path, cmp.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}
