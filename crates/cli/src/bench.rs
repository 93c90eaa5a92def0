//! `bench`: the many-core benchmark. One command that runs on a machine of any size and
//! says where balancing helps and where it hurts there, through the same `compare` as
//! everything else (each run a fresh `threadbalance run`, policies interleaved).
//!
//! ```text
//!  M = the CPUs this process may use (sched_getaffinity: honours taskset and cpusets)
//!
//!  matrix    workload spmd, N ∈ {M, M+1, 1.25M, 1.5M, 2M} (rounded, deduplicated)
//!            × barrier {yield, block} × phase {10, 100 ms}
//!  openmp    bench/omp_stencil.c (2-D Jacobi, a barrier per sweep, libgomp), N ∈ {M, M+1, 1.5M}
//!            × sweep {one pass (a fraction of a ms), 10 ms, 100 ms}
//!  figure 3  workload spmd with a fixed T threads confined to k CPUs, as a container's
//!            cpuset would (the speed balancing paper's Figure 3):
//!            M ≥ 16: T = 16, k = 9…16;  M < 16: T = M + 1, k = 1…M
//!
//!  every cell: compare --policies none,speed,pbind --repeat R --level core
//!  one table on stdout: % of the fair share (median) per policy, ratio to none
//!  (min/median/max, run by run) and moves/s; --json FILE: every run of every cell
//!  then the simulator beside it (unless --no-sim): every cell simulated on this
//!  machine's topology, each policy paced by its runs' measured tick (`predict`)
//! ```
//!
//! **Figure 3 on a small machine.** The paper gives 16 threads 1 to 16 cores: SPEED stays
//! near-optimal at every core count, pinning is optimal only when 16 mod k = 0. With 16
//! or more CPUs the benchmark runs the interesting half, k = 9…16, confining each cell to
//! the first k CPUs it may use. Below 16 CPUs there is no k between 9 and 16, so the
//! program has T = M + 1 threads and k runs from 1 to M: the largest k is the
//! one-thread-too-many case (T mod k ≠ 0, where pinning leaves a CPU doubled up) and k = 1
//! is a case where T mod k = 0 (every placement is optimal), so both halves of the claim
//! can be seen even on 2 CPUs. The cells use yield barriers (the paper's UPC runtime
//! yields in oversubscribed barriers) and 100 ms phases (EP synchronizes rarely).
//!
//! The benchmark changes one affinity of its own: to confine a Figure 3 cell it narrows
//! the mask of its own thread, which the runs it starts inherit, and it puts the mask back
//! when the cell ends (the report shows the mask before and after). Every run restores the
//! masks it changed, as `run` always does. Interrupted (SIGINT, SIGTERM, SIGHUP), it lets
//! the run under way finish and stops before the next cell, removing what it built.

mod cost;
mod fit;
mod omp;
mod plans;
mod predict;
mod soak;
mod soak_plan;

use crate::compare::{self, CompareArgs, Comparison, Spread};
use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;
use threadbalance_model::{CpuSet, Level, Tid};
use threadbalance_policy::PolicyKind;

/// Options of `bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// A smoke run: N ∈ {M, M+1}, 10 ms phases only, the OpenMP program at M+1, the
    /// smallest and largest Figure 3 cell, one run each, 200 ms of work.
    #[arg(long)]
    pub quick: bool,
    /// Runs of each policy in each cell [default: 3, or 1 with --quick].
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Compute per thread in each run, in ms [default: 1000, or 200 with --quick].
    #[arg(long, value_name = "MS")]
    pub work_ms: Option<u64>,
    /// Policies compared in each cell, comma-separated; `none` is the baseline.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,speed,pbind",
        value_parser = crate::settings::ByName::<PolicyKind>::new()
    )]
    pub policies: Vec<PolicyKind>,
    /// Also write every result (each run of each cell) as JSON to FILE (`-`: stdout, the
    /// table then going to stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Leave out the simulator's table (by default every cell is also simulated on this
    /// machine's topology, each policy paced by the tick its runs measured, and printed
    /// beside what was measured: the check of the simulator's calibration on this machine).
    #[arg(long)]
    pub no_sim: bool,
    /// Instead of the matrix, measure what management costs: `run --policy speed
    /// --interval 2` over 64, 256 and 1024 threads (and 4, for the fit), the tick's cost
    /// fitted as the argument of `sim --tick-cost`, and one migration's cost to the thread.
    #[arg(long)]
    pub cost: bool,
    /// Instead of the matrix, the daemon's soak: a daemon whose rules match the programs
    /// the soak starts, P short-lived multithreaded programs started and stopped over M
    /// minutes; figures on the daemon's RSS, errors and masks not restored (exit 1 when
    /// RSS grows by 1 MB or more after the warm-up, on any error or any mask not restored).
    #[arg(long)]
    pub soak: bool,
    /// The soak's length in minutes.
    #[arg(long, value_name = "M", default_value_t = 10.0, requires = "soak")]
    pub minutes: f64,
    /// Programs the soak starts.
    #[arg(long, value_name = "P", default_value_t = 100, requires = "soak")]
    pub programs: usize,
    /// One program of the soak (`THREADS:LIFE_MS:FORK_MS:TAG`); the soak starts these.
    #[arg(long, value_name = "SPEC", hide = true)]
    pub soak_program: Option<String>,
}

/// Which part of the benchmark a cell belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Group {
    /// `workload spmd` over the N × barrier × phase matrix.
    Matrix,
    /// The OpenMP stencil.
    Openmp,
    /// The speed balancing paper's Figure 3: T threads confined to k CPUs.
    Figure3,
}

/// One cell: a program, its thread count and the CPUs it may use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cell {
    /// Which part of the benchmark.
    pub group: Group,
    /// Threads of the program (N, or T for Figure 3).
    pub threads: usize,
    /// CPUs it runs on (M, or k for Figure 3).
    pub cpus: usize,
    /// `yield` or `block` (`workload spmd`), `libgomp` for the OpenMP program.
    pub barrier: &'static str,
    /// Compute per phase and thread in ms; for the OpenMP program, one sweep's (measured
    /// once the program is sized; until then the sweep asked for, 0 for one pass).
    pub phase_ms: f64,
    /// The OpenMP program's passes a sweep, once sized (`None` for the other programs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<u32>,
}

impl Cell {
    fn program(&self) -> &'static str {
        match self.group {
            Group::Matrix => "spmd",
            Group::Openmp => "omp-stencil",
            Group::Figure3 => "spmd fig.3",
        }
    }

    fn label(&self) -> String {
        format!(
            "{} N={} on {} CPUs {} {}",
            self.program(),
            self.threads,
            self.cpus,
            self.barrier,
            show_phase(self.phase_ms)
        )
    }
}

/// The columns that name a cell in the benchmark's tables, and their header.
const CELL_COLUMNS: [&str; 5] = ["program", "N", "CPUs", "barrier", "phase"];

/// `CELL_COLUMNS`' header, or a cell's values under it.
fn cell_columns(cell: Option<&Cell>) -> String {
    let [program, n, cpus, barrier, phase] = match cell {
        None => CELL_COLUMNS.map(str::to_string),
        Some(c) => [
            c.program().to_string(),
            c.threads.to_string(),
            c.cpus.to_string(),
            c.barrier.to_string(),
            show_phase(c.phase_ms),
        ],
    };
    format!("{program:<12} {n:>4} {cpus:>4} {barrier:<7} {phase:>7}")
}

fn show_phase(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.0} ms")
    } else {
        format!("{ms:.2} ms")
    }
}

/// The matrix's thread counts on M CPUs: M, M+1, 1.25·M, 1.5·M and 2·M, each rounded to
/// the nearest integer (halves up), sorted, duplicates dropped.
pub fn thread_counts(m: usize) -> Vec<usize> {
    let scaled = |f: f64| (m as f64 * f).round() as usize;
    let mut v = vec![m, m + 1, scaled(1.25), scaled(1.5), 2 * m];
    v.sort_unstable();
    v.dedup();
    v
}

/// The OpenMP program's thread counts on M CPUs: M, M+1 and 1.5·M, rounded, deduplicated.
pub fn openmp_thread_counts(m: usize) -> Vec<usize> {
    let mut v = vec![m, m + 1, (m as f64 * 1.5).round() as usize];
    v.sort_unstable();
    v.dedup();
    v
}

/// Figure 3 on M CPUs: the fixed thread count T and the CPU counts k it is confined to
/// (see the module docs for why below 16 CPUs T = M + 1 and k = 1…M).
pub fn figure3(m: usize) -> (usize, Vec<usize>) {
    if m >= 16 {
        (16, (9..=16).collect())
    } else {
        (m + 1, (1..=m).collect())
    }
}

/// The phases of the matrix, in ms.
const PHASES_MS: [f64; 2] = [10.0, 100.0];
/// The barriers of the matrix.
const BARRIERS: [&str; 2] = ["yield", "block"];
/// Figure 3's phase, in ms.
const FIGURE3_PHASE_MS: f64 = 100.0;
/// The OpenMP program's sweeps, in ms: one pass (0: a fraction of a millisecond, the
/// program's finest grain), then the matrix's phases.
const OPENMP_SWEEPS_MS: [f64; 3] = [0.0, 10.0, 100.0];

/// Every cell on M CPUs, in the order they run. The OpenMP cells are listed with the sweep
/// they ask for (0 for one pass); it is measured when the program is built.
pub fn plan(m: usize, quick: bool) -> Vec<Cell> {
    let mut cells = Vec::new();
    let ns: Vec<usize> = if quick {
        vec![m, m + 1]
    } else {
        thread_counts(m)
    };
    let phases: &[f64] = if quick { &PHASES_MS[..1] } else { &PHASES_MS };
    for &phase_ms in phases {
        for &n in &ns {
            for barrier in BARRIERS {
                cells.push(Cell {
                    group: Group::Matrix,
                    threads: n,
                    cpus: m,
                    barrier,
                    phase_ms,
                    passes: None,
                });
            }
        }
    }
    let (omp, sweeps): (Vec<usize>, &[f64]) = if quick {
        (vec![m + 1], &OPENMP_SWEEPS_MS[..2])
    } else {
        (openmp_thread_counts(m), &OPENMP_SWEEPS_MS)
    };
    for &phase_ms in sweeps {
        for &n in &omp {
            cells.push(Cell {
                group: Group::Openmp,
                threads: n,
                cpus: m,
                barrier: "libgomp",
                phase_ms,
                passes: None,
            });
        }
    }
    let (t, mut ks) = figure3(m);
    if quick && ks.len() > 2 {
        ks = vec![ks[0], ks[ks.len() - 1]];
    }
    for k in ks {
        cells.push(Cell {
            group: Group::Figure3,
            threads: t,
            cpus: k,
            barrier: "yield",
            phase_ms: FIGURE3_PHASE_MS,
            passes: None,
        });
    }
    cells
}

/// One cell and what each policy did there.
#[derive(Debug, Clone, Serialize)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// The CPUs it ran on, as a kernel CPU list.
    pub cpu_list: String,
    /// The comparison: every run of every policy.
    pub comparison: Comparison,
    /// The same cell simulated on this machine's topology, each policy as its runs ran
    /// (empty with `--no-sim`, or when it could not be simulated: `not_simulated`).
    pub simulated: Vec<predict::Simulated>,
    /// Why the cell was not simulated, when it was not (and `--no-sim` was not given).
    pub not_simulated: Option<String>,
}

/// The whole benchmark, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// The machine, as `topo` describes it.
    pub machine: String,
    /// M: the CPUs the benchmark may use.
    pub cpus: usize,
    /// Those CPUs as a kernel CPU list.
    pub cpu_list: String,
    /// The machine's online CPUs.
    pub online_cpus: usize,
    /// `/proc/loadavg` (1, 5, 15 min) before the first run.
    pub load_before: Option<[f64; 3]>,
    /// `/proc/loadavg` after the last run.
    pub load_after: Option<[f64; 3]>,
    /// Runs of each policy in each cell.
    pub repeat: usize,
    /// Compute per thread in each run, ms.
    pub work_ms: u64,
    /// Whether this was a `--quick` run.
    pub quick: bool,
    /// The policies compared.
    pub policies: Vec<String>,
    /// Where the runs read run time and wait from, each source once (see
    /// `Comparison::run_time`): with the BPF counters (root, a `bpf` build) `speed` reads
    /// a queued thread's wait as it happens, from `/proc` only once the thread runs again.
    pub run_time: Vec<String>,
    /// The OpenMP program as built and sized.
    pub openmp: Option<omp::Sizing>,
    /// Why the OpenMP cells did not run, when they did not.
    pub openmp_left_out: Option<String>,
    /// The tick rate the simulated kernel ran at (`None` with `--no-sim`).
    pub kernel_hz: Option<predict::KernelHz>,
    /// This thread's CPU mask when the benchmark started.
    pub affinity_before: String,
    /// This thread's CPU mask when it ended (the same: Figure 3's confinement is undone).
    pub affinity_after: String,
    /// Every cell that ran.
    pub cells: Vec<CellResult>,
}

/// `threadbalance bench`.
pub fn run(args: &BenchArgs) -> Result<u8> {
    if let Some(spec) = &args.soak_program {
        return soak::program(
            &soak_plan::ProgramSpec::parse(spec).map_err(crate::error::bad_input)?,
        );
    }
    if args.soak {
        return soak::run(args.minutes, args.programs, args.json.as_deref());
    }
    let quick = args.quick;
    let repeat = args.repeat.unwrap_or(if quick { 1 } else { 3 });
    let work_ms = args.work_ms.unwrap_or(if quick { 200 } else { 1000 });
    if work_ms == 0 {
        return Err(input_error("--work-ms must be at least 1"));
    }
    let settings = SettingsArgs {
        policy: args.policies.clone(),
        level: Some(Level::Core),
        ..SettingsArgs::default()
    };
    compare::check(&settings, &args.policies, repeat, &[])?;
    if args.cost {
        return cost::run(repeat, quick, args.json.as_deref());
    }
    let topo = crate::usable::read_usable()?;
    let online = crate::topo::read_system()?.cpus().len();
    let allowed: Vec<_> = topo.cpus().iter().map(|c| c.id).collect();
    let m = allowed.len();
    let me = own_affinity()?;
    let load_before = load_warned(online);
    let mut cells = plan(m, quick);
    let stencil = omp::Stencil::build();
    let openmp = match &stencil {
        Ok(s) => s.size().map_err(|e| crate::error::one_line(&e)),
        Err(why) => Err(format!("{why}")),
    };
    fit_openmp(&mut cells, openmp.as_ref().map_err(String::as_str));
    let kernel_hz = (!args.no_sim).then(predict::kernel_hz);
    let exe = std::env::current_exe().context("finding this program")?;
    let exe = exe.to_string_lossy().to_string();
    let total = cells.len();
    let simulator = kernel_hz.as_ref().map(|hz| predict::Simulator {
        usable: &topo,
        settings: &settings,
        hz: hz.hz,
        seeds: repeat,
        work_ms,
        omp: openmp.as_ref().ok(),
    });
    let bench = Cells {
        settings: &settings,
        allowed: &allowed,
        omp: match (&stencil, &openmp) {
            (Ok(s), Ok(sizing)) => Some((s, sizing)),
            _ => None,
        },
        exe: &exe,
        work_ms,
        repeat,
        total,
        simulator,
    };
    let mut results = Vec::with_capacity(total);
    // SIGINT, SIGTERM, SIGHUP: finish the run under way, then stop before the next cell
    // (the temporary directory is removed and the mask put back on the way out).
    threadbalance_linux::signal::catch_fatal_signals().context("installing signal handlers")?;
    for (i, cell) in cells.into_iter().enumerate() {
        if let Some(sig) = threadbalance_linux::signal::take_signal() {
            anyhow::bail!("interrupted by {sig} after {i} of {total} cells");
        }
        results.push(bench.run(i, cell)?);
    }
    drop(stencil);
    let run_time = compare::each_once(results.iter().flat_map(|c| &c.comparison.run_time));
    let report = BenchReport {
        machine: topo.describe(),
        cpus: m,
        cpu_list: topo.online().to_string(),
        online_cpus: online,
        load_before,
        load_after: load_average(),
        repeat,
        work_ms,
        quick,
        policies: args.policies.iter().map(ToString::to_string).collect(),
        run_time,
        openmp_left_out: openmp.as_ref().err().cloned(),
        openmp: openmp.ok(),
        kernel_hz,
        affinity_before: me.to_string(),
        affinity_after: own_affinity()?.to_string(),
        cells: results,
    };
    print(&report, args.json.as_deref())?;
    Ok(0)
}

/// Prints the report's table, and writes its JSON to `json` when given (with `--json -`
/// the JSON alone goes to stdout and the table to stderr).
fn print(report: &BenchReport, json: Option<&std::path::Path>) -> Result<()> {
    match json {
        Some(path) if crate::jsonout::is_stdout(path) => err!("{}", to_table(report)),
        _ => out!("{}", to_table(report)),
    }
    if let Some(path) = json {
        crate::jsonout::write(path, &crate::schema::versioned(report))?;
    }
    Ok(())
}

/// The load average, with a warning when the machine looks busy (more runnable threads
/// than its `online` CPUs).
fn load_warned(online: usize) -> Option<[f64; 3]> {
    let load = load_average();
    if let Some([one, ..]) = load
        && one > online as f64
    {
        errln!(
            "threadbalance: warning: the machine looks busy (load average {one:.2} over {online} CPUs); \
                 other programs will skew these results"
        );
    }
    load
}

/// Sizes the OpenMP cells to the program's measured pass, or leaves them out, saying why.
fn fit_openmp(cells: &mut Vec<Cell>, openmp: std::result::Result<&omp::Sizing, &str>) {
    match openmp {
        Ok(sizing) => {
            for c in cells.iter_mut().filter(|c| c.group == Group::Openmp) {
                let passes = sizing.passes_for((c.phase_ms > 0.0).then_some(c.phase_ms));
                c.phase_ms = sizing.sweep_ms(passes);
                c.passes = Some(passes);
            }
        }
        Err(why) => {
            errln!("threadbalance: the OpenMP cells are left out: {why}");
            cells.retain(|c| c.group != Group::Openmp);
        }
    }
}

/// What every cell of a bench run shares.
struct Cells<'a> {
    settings: &'a SettingsArgs,
    /// The CPUs this process may use, in order: a cell on k CPUs takes the first k.
    allowed: &'a [threadbalance_model::CpuId],
    /// The OpenMP program and its sizing, when it could be built.
    omp: Option<(&'a omp::Stencil, &'a omp::Sizing)>,
    exe: &'a str,
    work_ms: u64,
    repeat: usize,
    total: usize,
    simulator: Option<predict::Simulator<'a>>,
}

impl Cells<'_> {
    /// Runs cell `i` under every policy, and simulates it when asked.
    fn run(&self, i: usize, cell: Cell) -> Result<CellResult> {
        let (total, repeat, m) = (self.total, self.repeat, self.allowed.len());
        let cpus: CpuSet = self.allowed.iter().take(cell.cpus).copied().collect();
        let (command, env) = match (cell.group, self.omp) {
            (Group::Openmp, Some((s, sizing))) => (
                s.command(sizing, m, cell.passes.unwrap_or(1), self.work_ms),
                vec![("OMP_NUM_THREADS".to_string(), cell.threads.to_string())],
            ),
            _ => (spmd_command(self.exe, &cell, self.work_ms), Vec::new()),
        };
        let cmp = CompareArgs {
            settings: self.settings.clone(),
            repeat,
            json: false,
            opts: compare::options::CompareOptions::quiet(),
            command,
            env,
        };
        let label = cell.label();
        let mut progress = |round: usize, policy: &str| {
            errln!(
                "cell {}/{total}: {label}: {policy} (run {}/{repeat})",
                i + 1,
                round + 1
            );
        };
        // A Figure 3 cell runs confined to its k CPUs; the guard restores our mask.
        let confined = if cell.cpus < m {
            Some(Confined::to(&cpus)?)
        } else {
            None
        };
        let comparison = compare::compare_with_progress(&cmp, &mut progress);
        drop(confined);
        let comparison = comparison?;
        let (simulated, not_simulated) =
            match self.simulator.map(|s| s.cell(&cell, &cpus, &comparison)) {
                None => (Vec::new(), None),
                Some(Ok(s)) => (s, None),
                Some(Err(e)) => (Vec::new(), Some(crate::error::one_line(&e))),
            };
        Ok(CellResult {
            cpu_list: cpus.to_string(),
            cell,
            comparison,
            simulated,
            not_simulated,
        })
    }
}

/// `threadbalance workload spmd …` for a matrix or Figure 3 cell.
fn spmd_command(exe: &str, cell: &Cell, work_ms: u64) -> Vec<String> {
    [
        exe,
        "workload",
        "spmd",
        "--threads",
        &cell.threads.to_string(),
        "--phase-ms",
        &cell.phase_ms.to_string(),
        "--work-ms",
        &work_ms.to_string(),
        "--barrier",
        cell.barrier,
        "--cores",
        &cell.cpus.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// The calling thread's CPU mask.
fn own_affinity() -> Result<CpuSet> {
    threadbalance_linux::affinity_of(Tid(0)).context("reading this thread's CPU mask")
}

/// The calling thread confined to some CPUs until dropped; then its mask is put back.
struct Confined {
    before: CpuSet,
}

impl Confined {
    fn to(cpus: &CpuSet) -> Result<Confined> {
        let before = own_affinity()?;
        threadbalance_linux::set_affinity(Tid(0), cpus)
            .with_context(|| format!("confining this thread to CPUs {cpus}"))?;
        Ok(Confined { before })
    }
}

impl Drop for Confined {
    fn drop(&mut self) {
        if let Err(e) = threadbalance_linux::set_affinity(Tid(0), &self.before) {
            errln!(
                "threadbalance: could not put this thread's CPU mask back to {}: {e}",
                self.before
            );
        }
    }
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`).
fn load_average() -> Option<[f64; 3]> {
    parse_load_average(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// Parses `/proc/loadavg`: `0.52 0.91 0.53 1/86 13632`.
fn parse_load_average(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
}

/// The report as one table: a row per cell; per policy the median % of the fair share,
/// and for every policy but the baseline its wall-time ratio to the baseline run by run
/// (min/median/max) and its moves per second.
pub fn to_table(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "machine: {}; M = {} CPUs ({}); load average {} before, {} after",
        r.machine,
        r.cpus,
        r.cpu_list,
        show_load(r.load_before),
        show_load(r.load_after)
    );
    let _ = writeln!(
        s,
        "{} run(s) of each policy per cell, interleaved, --level core, {} ms of work per thread; \
         % = median % of the fair share; ratio = wall time / {}'s, run by run (< 1 is faster)",
        r.repeat,
        r.work_ms,
        r.cells
            .first()
            .map_or("none", |c| c.comparison.baseline.as_str())
    );
    if !r.run_time.is_empty() {
        let _ = writeln!(s, "{}", r.run_time.join("; "));
    }
    match (&r.openmp, &r.openmp_left_out) {
        (Some(o), _) => {
            let _ = writeln!(
                s,
                "omp-stencil: {} rows × {} columns per thread, one pass ≈ {:.2} ms of one thread; a barrier after each sweep of one pass, or of as many as make 10 or 100 ms",
                o.rows_per_thread, o.cols, o.pass_ms
            );
        }
        (None, why) => {
            let why = why.as_deref().unwrap_or("not built");
            let _ = writeln!(s, "omp-stencil: left out ({why})");
        }
    }
    let baseline = r
        .cells
        .first()
        .map_or_else(|| "none".to_string(), |c| c.comparison.baseline.clone());
    let mut head = cell_columns(None);
    for p in &r.policies {
        if *p == baseline {
            let _ = write!(head, " | {:>7}", format!("{p} %"));
        } else {
            let _ = write!(
                head,
                " | {:>7} {:>20} {:>8}",
                format!("{p} %"),
                "ratio min/med/max",
                "moves/s"
            );
        }
    }
    let _ = writeln!(s, "{head}");
    for c in &r.cells {
        s += &cell_columns(Some(&c.cell));
        for p in &c.comparison.results {
            let pct = p
                .fair_share_pct
                .map_or_else(|| "-".to_string(), |x| format!("{:.1}", x.median));
            if p.policy == c.comparison.baseline {
                let _ = write!(s, " | {pct:>7}");
            } else {
                let ratio = p.ratio_vs_baseline.map_or_else(|| "-".to_string(), show3);
                let _ = write!(s, " | {pct:>7} {ratio:>20} {:>8.1}", p.moves_per_s);
            }
        }
        let _ = writeln!(s);
    }
    s += &predict::table(r);
    s
}

fn show3(x: Spread) -> String {
    format!("{:.3}/{:.3}/{:.3}", x.min, x.median, x.max)
}

fn show_load(l: Option<[f64; 3]>) -> String {
    l.map_or_else(
        || "unknown".to_string(),
        |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_on_2_16_and_64_cpus_are_m_to_2m() {
        // M = 2: 2, 3, 2.5 → 3, 3, 4.
        assert_eq!(thread_counts(2), vec![2, 3, 4]);
        // M = 16: 16, 17, 20, 24, 32.
        assert_eq!(thread_counts(16), vec![16, 17, 20, 24, 32]);
        // M = 64: 64, 65, 80, 96, 128.
        assert_eq!(thread_counts(64), vec![64, 65, 80, 96, 128]);
    }

    #[test]
    fn thread_counts_round_halves_up_and_drop_duplicates() {
        // M = 1: 1, 2, 1.25 → 1, 1.5 → 2, 2.
        assert_eq!(thread_counts(1), vec![1, 2]);
        // M = 6: 6, 7, 7.5 → 8, 9, 12.
        assert_eq!(thread_counts(6), vec![6, 7, 8, 9, 12]);
        // M = 3: 3, 4, 3.75 → 4, 4.5 → 5, 6.
        assert_eq!(thread_counts(3), vec![3, 4, 5, 6]);
    }

    #[test]
    fn openmp_thread_counts_on_2_and_16_cpus_are_m_m_plus_1_and_1_5m() {
        // M = 2: 2, 3, 3 → {2, 3}. M = 16: 16, 17, 24.
        assert_eq!(openmp_thread_counts(2), vec![2, 3]);
        assert_eq!(openmp_thread_counts(16), vec![16, 17, 24]);
    }

    #[test]
    fn figure3_is_the_papers_case_from_16_cpus_and_scaled_below() {
        assert_eq!(figure3(16), (16, vec![9, 10, 11, 12, 13, 14, 15, 16]));
        assert_eq!(figure3(64), (16, vec![9, 10, 11, 12, 13, 14, 15, 16]));
        // 2 CPUs: 3 threads on 1 CPU (3 mod 1 = 0) and on 2 (3 mod 2 = 1).
        assert_eq!(figure3(2), (3, vec![1, 2]));
        assert_eq!(figure3(8), (9, (1..=8).collect()));
    }

    #[test]
    fn plan_on_2_cpus_has_every_cell_once() {
        let cells = plan(2, false);
        // 3 thread counts × 2 barriers × 2 phases + 2 OpenMP × 3 sweeps + 2 Figure 3 = 20.
        assert_eq!(cells.len(), 20);
        let count = |g: Group| cells.iter().filter(|c| c.group == g).count();
        assert_eq!(count(Group::Matrix), 12);
        assert_eq!(count(Group::Openmp), 6);
        assert_eq!(count(Group::Figure3), 2);
        for (i, a) in cells.iter().enumerate() {
            assert!(!cells[i + 1..].contains(a), "{a:?} twice");
        }
        assert!(
            cells
                .iter()
                .filter(|c| c.group != Group::Figure3)
                .all(|c| c.cpus == 2)
        );
    }

    #[test]
    fn plan_on_16_cpus_has_the_issue_matrix() {
        let cells = plan(16, false);
        // 5 × 2 × 2 + 3 × 3 + 8 = 37.
        assert_eq!(cells.len(), 37);
        let omp: Vec<(usize, f64)> = cells
            .iter()
            .filter(|c| c.group == Group::Openmp)
            .map(|c| (c.threads, c.phase_ms))
            .collect();
        assert_eq!(
            omp,
            [0.0, 10.0, 100.0]
                .iter()
                .flat_map(|&s| [(16, s), (17, s), (24, s)])
                .collect::<Vec<_>>()
        );
        let fig3: Vec<usize> = cells
            .iter()
            .filter(|c| c.group == Group::Figure3)
            .map(|c| c.cpus)
            .collect();
        assert_eq!(fig3, (9..=16).collect::<Vec<_>>());
    }

    #[test]
    fn plan_quick_keeps_m_and_m_plus_1_at_10_ms() {
        let cells = plan(16, true);
        // 2 thread counts × 2 barriers + 2 OpenMP (M + 1, one pass and 10 ms) + 2 Figure 3
        // (k = 9 and 16) = 8.
        assert_eq!(cells.len(), 8);
        assert!(cells.iter().all(|c| c.group != Group::Matrix
            || (c.phase_ms == 10.0 && (c.threads == 16 || c.threads == 17))));
        let fig3: Vec<usize> = cells
            .iter()
            .filter(|c| c.group == Group::Figure3)
            .map(|c| c.cpus)
            .collect();
        assert_eq!(fig3, vec![9, 16]);
    }

    #[test]
    fn load_average_parses_the_first_three_fields() {
        assert_eq!(
            parse_load_average("0.52 0.91 0.53 1/86 13632\n"),
            Some([0.52, 0.91, 0.53])
        );
        assert_eq!(parse_load_average("0.52"), None);
        assert_eq!(parse_load_average(""), None);
    }
}
