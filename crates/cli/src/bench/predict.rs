//! The simulator beside the benchmark: every cell simulated on the machine's own topology,
//! so that one run of `bench` says, on the machine it runs on, where the simulator's Linux
//! model and its policies agree with what was measured, and where they do not.
//!
//! ```text
//!  cell (program, N, k CPUs, barrier, phase)       its runs (compare)
//!        │                                             │ per policy: tick_cpu_us, run_time
//!        ▼                                             ▼
//!  sim --machine local (the usable topology cut to the cell's CPUs)
//!      --workload ep-barrier:phase_ms,wait,work_ms   (omp-stencil:sweep_us,work_ms,footprint_kb)
//!      --hz CONFIG_HZ  --tick-cost <median tick_cpu_us of the policy's runs>,0
//!      --counters proc when its runs read /proc, seeds 1…repeat
//!        │
//!        ▼
//!  % of the fair share, measured / simulated, and whether within ±10 points
//! ```
//!
//! The simulator was calibrated against real Linux 6.18 on 2 and 16 cores
//! (`calibration/`); on any other machine this table is the check of that calibration.
//! Each policy's simulation is paced by the tick its own live runs measured (the CPU
//! budget holds a live loop to a tick every tick-cost / 0.8 %), and reads run time as its
//! runs did: exact at each read with the BPF counters, as `schedstat` keeps it from
//! `/proc`. `none` moves nothing, so it is simulated with free ticks.

use super::omp::Sizing;
use super::{BenchReport, Cell, Group};
use crate::compare::{Comparison, Spread};
use crate::settings::SettingsArgs;
use anyhow::{Context, Result, anyhow};
use serde::Serialize;
use std::fmt::Write;
use threadbalance_model::{CpuSet, Nanos, Topology};
use threadbalance_sim::{RunOptions, TickCost};

/// How far a simulated cell may be from the measured one and still agree: the
/// calibration's tolerance, in points of the fair share.
pub const AGREE_POINTS: f64 = 10.0;

/// The tick rate the simulated kernel runs at, and where it was read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelHz {
    /// `CONFIG_HZ`.
    pub hz: u32,
    /// Where it came from: a kernel config file, or that none was readable (then the
    /// simulator's default, 250, as Debian builds its kernels).
    pub from: String,
}

/// The running kernel's `CONFIG_HZ`, from `/boot/config-RELEASE` or `/proc/config.gz`
/// (through `gzip -dc`); 250 when neither can be read.
pub fn kernel_hz() -> KernelHz {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let boot = format!("/boot/config-{release}");
    if let Some(hz) = std::fs::read_to_string(&boot)
        .ok()
        .and_then(|t| parse_config_hz(&t))
    {
        return KernelHz { hz, from: boot };
    }
    let gz = std::process::Command::new("gzip")
        .args(["-dc", "/proc/config.gz"])
        .stderr(std::process::Stdio::null())
        .output();
    if let Some(hz) = gz
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse_config_hz(&String::from_utf8_lossy(&o.stdout)))
    {
        return KernelHz {
            hz,
            from: "/proc/config.gz".into(),
        };
    }
    KernelHz {
        hz: RunOptions::new(1).linux.hz,
        from: "no kernel config readable: the simulator's default".into(),
    }
}

/// `CONFIG_HZ=250` in a kernel config.
fn parse_config_hz(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| hz > 0)
}

/// One policy of one cell, simulated.
#[derive(Debug, Clone, Serialize)]
pub struct Simulated {
    /// The policy.
    pub policy: String,
    /// % of the fair share over seeds 1…repeat.
    pub fair_share_pct: Spread,
    /// The tick cost the simulation was paced by (the median of the policy's runs'
    /// `tick_cpu_us`), µs; `None`: free ticks (`none`, or no tick measured).
    pub tick_cost_us: Option<f64>,
    /// Run time and wait as the policy's runs read them: `exact` (the BPF counters) or
    /// `proc` (`schedstat`).
    pub counters: &'static str,
}

/// The simulator's workload for a cell, in `sim --workload`'s syntax, and the CPU time
/// each of its threads computes, seconds (its fair share is this × max(N, k) / k);
/// `None` for an OpenMP cell whose program was not sized. A `workload spmd` cell computes
/// K = round(work / phase) phases, at least one, as `spmd` counts them (40 ms of work in
/// 100 ms phases is one phase of 100 ms).
pub fn workload_spec(cell: &Cell, work_ms: u64, omp: Option<&Sizing>) -> Option<(String, f64)> {
    match cell.group {
        Group::Matrix | Group::Figure3 => {
            let phases = (work_ms as f64 / cell.phase_ms.max(1e-6)).round().max(1.0);
            let work = phases * cell.phase_ms;
            Some((
                format!(
                    "ep-barrier:phase_ms={},wait={},work_ms={work}",
                    cell.phase_ms, cell.barrier
                ),
                work / 1e3,
            ))
        }
        Group::Openmp => omp.map(|s| {
            // Two grids of 8-byte cells per thread.
            let footprint_kb = u64::from(s.rows_per_thread) * u64::from(s.cols) * 16 / 1024;
            let passes = cell.passes.unwrap_or(1);
            let sweep_ms = s.sweep_ms(passes);
            let work_ms = f64::from(s.sweeps(work_ms, passes)) * sweep_ms;
            (
                format!(
                    "omp-stencil:sweep_us={:.3},work_ms={work_ms:.3},footprint_kb={footprint_kb}",
                    sweep_ms * 1e3
                ),
                work_ms / 1e3,
            )
        }),
    }
}

/// What every cell's simulation shares: the machine, the settings the runs had, the
/// kernel's tick rate, the seeds, the work per thread and the OpenMP program's sizing.
#[derive(Debug, Clone, Copy)]
pub struct Simulator<'a> {
    /// The machine as the benchmark may use it (cut to each cell's CPUs).
    pub usable: &'a Topology,
    /// The runs' settings (`--level core`).
    pub settings: &'a SettingsArgs,
    /// `CONFIG_HZ`.
    pub hz: u32,
    /// Seeds 1…`seeds` (the runs' `--repeat`).
    pub seeds: usize,
    /// `--work-ms`.
    pub work_ms: u64,
    /// The OpenMP program as sized, when it was built.
    pub omp: Option<&'a Sizing>,
}

impl Simulator<'_> {
    /// Simulates every policy of `cmp` (the cell's runs) on the machine cut to `cpus`.
    pub fn cell(&self, cell: &Cell, cpus: &CpuSet, cmp: &Comparison) -> Result<Vec<Simulated>> {
        let (spec, work_s) = workload_spec(cell, self.work_ms, self.omp)
            .ok_or_else(|| anyhow!("the OpenMP program was not sized"))?;
        let topo = self
            .usable
            .restricted_to(cpus)
            .with_context(|| format!("cutting the topology to CPUs {cpus}"))?;
        let k = topo.cpus().len().max(1);
        let machine = threadbalance_sim::machine("local", Some(topo))?;
        let workload = threadbalance_sim::workload::builtin(&spec, Some(cell.threads))?
            .ok_or_else(|| anyhow!("{spec}: not a workload of the simulator"))?;
        let settings = self.settings.settings();
        let fair_s = work_s * cell.threads.max(k) as f64 / k as f64;
        let mut out = Vec::with_capacity(cmp.results.len());
        for r in &cmp.results {
            let proc = r
                .runs
                .iter()
                .any(|x| threadbalance_linux::runcount::RunSource::described_proc(&x.run_time));
            let ticks: Vec<f64> = r
                .runs
                .iter()
                .map(|x| x.tick_cpu_us)
                .filter(|&us| us > 0.0)
                .collect();
            // `none` moves nothing: its ticks pace nothing.
            let tick = if r.policy == "none" {
                None
            } else {
                Spread::of(&ticks).map(|s| s.median)
            };
            let mut pcts = Vec::with_capacity(self.seeds);
            for seed in 1..=self.seeds.max(1) as u64 {
                let mut opts = RunOptions::new(seed);
                opts.linux.hz = self.hz;
                opts.linux.schedstat_at_ticks = proc;
                opts.tick_cost = tick.map(|us| TickCost {
                    fixed: Nanos((us * 1e3).round() as u64),
                    per_thread_ns: 0.0,
                    per_move: Nanos::ZERO,
                    per_plan: Nanos::ZERO,
                    per_slice: Nanos::ZERO,
                });
                let run =
                    threadbalance_sim::run_policy(&machine, &workload, &r.policy, &settings, &opts)
                        .with_context(|| format!("simulating {} on {spec}", r.policy))?;
                if run.runtime_s > 0.0 {
                    pcts.push(100.0 * fair_s / run.runtime_s);
                }
            }
            let Some(fair_share_pct) = Spread::of(&pcts) else {
                continue;
            };
            out.push(Simulated {
                policy: r.policy.clone(),
                fair_share_pct,
                tick_cost_us: tick,
                counters: if proc { "proc" } else { "exact" },
            });
        }
        Ok(out)
    }
}

/// Measured against simulated, one policy of one cell: the medians, and whether they are
/// within [`AGREE_POINTS`].
pub fn agreement(measured: Option<Spread>, simulated: &Simulated) -> Option<(f64, f64, bool)> {
    let m = measured?.median;
    let s = simulated.fair_share_pct.median;
    Some((m, s, (s - m).abs() <= AGREE_POINTS))
}

/// The simulator's table: per cell and policy, the median % of the fair share measured
/// and simulated (`*` where they are more than [`AGREE_POINTS`] apart), then how many
/// cells agree, per policy. Empty when no cell was simulated.
pub fn table(r: &BenchReport) -> String {
    let mut s = String::new();
    if r.cells.iter().all(|c| c.simulated.is_empty()) {
        return s;
    }
    let hz = r
        .kernel_hz
        .as_ref()
        .map_or_else(String::new, |k| format!("HZ {} ({})", k.hz, k.from));
    let seeds = if r.repeat <= 1 {
        "seed 1".to_string()
    } else {
        format!("seeds 1–{}", r.repeat)
    };
    let _ = writeln!(
        s,
        "\nthe simulator beside it (this machine's topology, {hz}; each policy paced by its runs' \
         tick and reading run time as they did; {seeds}): median % of the fair share, \
         measured / simulated (* more than {AGREE_POINTS:.0} points apart)"
    );
    let mut head = super::cell_columns(None);
    for p in &r.policies {
        let _ = write!(head, " | {p:>14}");
    }
    let _ = writeln!(s, "{head}");
    let mut agree: Vec<(usize, usize)> = vec![(0, 0); r.policies.len()];
    for c in &r.cells {
        s += &super::cell_columns(Some(&c.cell));
        for (i, p) in r.policies.iter().enumerate() {
            let measured = c
                .comparison
                .results
                .iter()
                .find(|x| &x.policy == p)
                .and_then(|x| x.fair_share_pct);
            let cellv = c
                .simulated
                .iter()
                .find(|x| &x.policy == p)
                .and_then(|sim| agreement(measured, sim));
            let shown = match cellv {
                Some((m, sm, ok)) => {
                    agree[i].1 += 1;
                    if ok {
                        agree[i].0 += 1;
                    }
                    format!("{m:.1} / {sm:.1}{}", if ok { " " } else { "*" })
                }
                None => "-".to_string(),
            };
            let _ = write!(s, " | {shown:>14}");
        }
        let _ = writeln!(s);
    }
    let counts: Vec<String> = r
        .policies
        .iter()
        .zip(&agree)
        .map(|(p, (ok, of))| format!("{p} {ok} of {of}"))
        .collect();
    let _ = writeln!(
        s,
        "cells within {AGREE_POINTS:.0} points of the simulator: {}",
        counts.join(", ")
    );
    for c in r.cells.iter().filter(|c| c.not_simulated.is_some()) {
        let _ = writeln!(
            s,
            "not simulated: {}: {}",
            c.cell.label(),
            c.not_simulated.as_deref().unwrap_or_default()
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::Group;

    fn cell(group: Group, threads: usize, cpus: usize, barrier: &'static str, phase: f64) -> Cell {
        Cell {
            group,
            threads,
            cpus,
            barrier,
            phase_ms: phase,
            passes: None,
        }
    }

    #[test]
    fn parse_config_hz_reads_the_line_and_refuses_nonsense() {
        let text =
            "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_HZ_PERIODIC=n\n";
        assert_eq!(parse_config_hz(text), Some(250));
        assert_eq!(parse_config_hz("CONFIG_HZ=1000"), Some(1000));
        assert_eq!(parse_config_hz("CONFIG_HZ_1000=y"), None);
        assert_eq!(parse_config_hz("CONFIG_HZ=0"), None);
        assert_eq!(parse_config_hz("CONFIG_HZ=fast"), None);
        assert_eq!(parse_config_hz(""), None);
    }

    #[test]
    fn workload_spec_is_the_cells_program_in_the_simulators_terms() {
        let m = cell(Group::Matrix, 17, 16, "yield", 10.0);
        assert_eq!(
            workload_spec(&m, 1000, None),
            Some(("ep-barrier:phase_ms=10,wait=yield,work_ms=1000".into(), 1.0))
        );
        // spmd computes round(work / phase) phases, at least one: 40 ms of work in 100 ms
        // phases is one phase of 100 ms, 260 ms in 100 ms phases three.
        let f = cell(Group::Figure3, 16, 9, "yield", 100.0);
        assert_eq!(
            workload_spec(&f, 40, None),
            Some(("ep-barrier:phase_ms=100,wait=yield,work_ms=100".into(), 0.1))
        );
        assert_eq!(
            workload_spec(&f, 260, None),
            Some(("ep-barrier:phase_ms=100,wait=yield,work_ms=300".into(), 0.3))
        );
        let mut o = cell(Group::Openmp, 3, 2, "libgomp", 0.134);
        o.passes = Some(1);
        assert_eq!(workload_spec(&o, 1000, None), None);
        let sizing = Sizing {
            rows_per_thread: 128,
            cols: 1024,
            pass_ms: 0.134,
        };
        // 128 × 1024 cells × 2 grids × 8 bytes = 2048 KiB; 7463 sweeps of 134 µs.
        let (spec, work_s) = workload_spec(&o, 1000, Some(&sizing)).unwrap();
        assert_eq!(
            spec,
            "omp-stencil:sweep_us=134.000,work_ms=1000.042,footprint_kb=2048"
        );
        assert!((work_s - 1.000042).abs() < 1e-9);
        // Sweeps of 75 passes (10.05 ms): 100 of them.
        o.passes = Some(75);
        let (spec, work_s) = workload_spec(&o, 1000, Some(&sizing)).unwrap();
        assert_eq!(
            spec,
            "omp-stencil:sweep_us=10050.000,work_ms=1005.000,footprint_kb=2048"
        );
        assert!((work_s - 1.005).abs() < 1e-9);
    }

    #[test]
    fn agreement_is_within_the_calibrations_ten_points() {
        let sim = |pct: f64| Simulated {
            policy: "none".into(),
            fair_share_pct: Spread {
                min: pct,
                median: pct,
                max: pct,
            },
            tick_cost_us: None,
            counters: "exact",
        };
        let measured = |pct: f64| {
            Some(Spread {
                min: pct,
                median: pct,
                max: pct,
            })
        };
        assert_eq!(
            agreement(measured(75.0), &sim(84.9)),
            Some((75.0, 84.9, true))
        );
        assert_eq!(
            agreement(measured(75.0), &sim(85.5)),
            Some((75.0, 85.5, false))
        );
        assert_eq!(
            agreement(measured(92.0), &sim(81.0)),
            Some((92.0, 81.0, false))
        );
        assert_eq!(agreement(None, &sim(80.0)), None);
    }
}
