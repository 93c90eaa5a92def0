//! `threadbalance sim`: compare policies on a simulated machine, or run the papers' claims.
//!
//! ```text
//! threadbalance sim --machine opteron6272-4x16 --workload ferret-pipeline --policy none,tumbler,pbind
//! threadbalance sim --machine local --workload ep-barrier:phase_ms=10 --threads 3 --policy none,speed --json
//! threadbalance sim --suite papers --seeds 1,2,3
//! threadbalance sim --machine opteron6272-4x16 --workload bodytrack --threads 64 --policy none,shuffling --baseline solaris
//! ```

use crate::compare::options::ProgressMode;
use crate::compare::progress::Progress;
use crate::error::{ValueError, bad_input};
use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use threadbalance_model::{Nanos, pace};
use threadbalance_policy::PolicyKind;
use threadbalance_sim::{Baseline, RunOptions, TickCost};

/// Options of `threadbalance sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Machine: opteron6272-4x16, tigerton-4x4, barcelona-4x4, opteron6320-4x8, local (this
    /// machine's topology), or an hwloc spec such as "package:2 core:8 pu:2".
    #[arg(long, short = 'm', default_value = "opteron6272-4x16")]
    machine: String,
    /// Workload: ep-barrier, omp-stencil, spinners, ferret-pipeline, streamcluster, bodytrack,
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
    /// Also draw the runs to FILE.svg: per-socket utilization over time per policy (one
    /// scale), migrations per second and, for memory-bound work, remote accesses over time.
    /// With --suite: each claim's effects, the paper's against the simulated.
    #[arg(long, value_name = "FILE.svg")]
    report: Option<PathBuf>,
    /// Also write when each thread reached each barrier to FILE.csv, one row per policy,
    /// phase and thread: `policy,app,phase,thread,start_ms,arrive_ms,queued_ms` (the
    /// phase's start from the run's, then the arrival and the run-queue wait from the
    /// phase's start). A phase lasts as long as its last arrival: the rows say which
    /// thread that was and what held it back.
    #[arg(long, value_name = "FILE.csv")]
    phases: Option<PathBuf>,
    /// Directory of scenario files, read first; the repository's scenarios (lock-convoy,
    /// memory-bound-barrier, memory-mix, oversubscribed-barrier, two-apps,
    /// two-stage-pipeline) are built in, for any directory.
    #[arg(long, default_value = "scenarios")]
    scenarios: PathBuf,
    /// Run a suite of claims instead of one comparison: "papers". Each paper claim prints
    /// the paper's effect, the simulated one and their ratio, and is "reproduced" (direction
    /// and size within 2×), "direction only" or "not reproduced"; calibration rows are
    /// counted apart. With --json: `claims` (each with `paper_effect`, `simulated_effect`,
    /// `ratio`, `verdict`) and `counts`.
    #[arg(long, value_name = "SUITE")]
    suite: Option<String>,
    /// Kernel model playing `none` (and under every policy): linux, or solaris (a woken
    /// thread goes to any idle CPU, no cache preference, idle CPUs steal from anywhere).
    /// With --suite: every claim on this baseline [default: each claim on the paper's own
    /// baseline, printed with the claim].
    #[arg(long, value_name = "KERNEL")]
    baseline: Option<String>,
    /// Pace the policy as the live loop's CPU budget (0.8 % of one core) would, with each
    /// tick costing FIXED_US plus PER_THREAD_US per thread, e.g. "20,0.07" [default: ticks
    /// are free and come when the policy asks].
    /// A third number, PER_MOVE_US, is what each move costs the tool, a fourth,
    /// PER_PLAN_US, what a plan that changed anything costs once, a fifth, PER_SLICE_US,
    /// what each time slice changed costs (parts left out are 0; `bench --cost` prints all
    /// five), charged only under --cpu-budget.
    #[arg(
        long,
        value_name = "FIXED_US[,PER_THREAD_US[,PER_MOVE_US[,PER_PLAN_US[,PER_SLICE_US]]]]",
        value_parser = tick_cost
    )]
    tick_cost: Option<TickCost>,
    /// Hold the tool's whole CPU time, moves included, to PCT % of one core, as `run
    /// --cpu-budget PCT` does: with --tick-cost, its ticks and plans (as its parts price
    /// them); without, what the tool's thread is charged on the machine
    /// (`--tool-cpu`) [default: ticks held to 0.8 %, or what the policy asks for (speed: up
    /// to 2.5 % while its rotation turns 6 cores or more over), moves not charged by it;
    /// ticks and moves together held to 25 % while the tool's thread runs on the machine,
    /// `--tool-cpu`].
    #[arg(long, value_name = "PCT", value_parser = crate::cpu_budget)]
    cpu_budget: Option<f64>,
    /// The tool's own CPU time on the simulated machine: a thread of the machine that runs
    /// at each tick for what the tick and its plan cost, taking that time from the
    /// program's threads on its CPU. "measured": what `bench --cost` measured (19.8 µs +
    /// 0.298 µs a thread a tick; a plan that changed anything 14.0 µs, and 14.6 µs a move
    /// and 6.4 µs a slice changed), or with --tick-cost its tick (and its plan's parts,
    /// when PER_MOVE_US is not 0); "free": the tool costs the machine nothing (every table
    /// made before it was charged); or the five parts of --tick-cost. Never under `none`,
    /// where no tool runs.
    #[arg(long, value_name = "measured|free|F,P,M[,J,S]", default_value = "measured", value_parser = tool_cpu)]
    tool_cpu: ToolCpu,
    /// How the policies read threads' run time and run-queue wait: exact (at each read, as
    /// a `--features bpf` build run as root reads them from its counters) or proc (as
    /// `/proc/<pid>/task/<tid>/schedstat` gives them: a running thread's run time only up
    /// to its CPU's last tick, a queued thread's wait only once it runs again).
    #[arg(long, value_enum, default_value_t = Counters::Exact)]
    counters: Counters,
    /// The simulated kernel's tick rate, CONFIG_HZ: 100, 250, 300 or 1000 [default: 250].
    /// It sets the slices' granularity and, with --counters proc, how stale a running
    /// thread's run time may be.
    #[arg(long, value_name = "HZ")]
    hz: Option<u32>,
    /// Seeds the suite runs each claim with, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    seeds: Vec<u64>,
    /// With --suite: a line on stderr per group of claims ("suite 5/10: Shuffling on
    /// bodytrack"): auto (when stderr is a terminal), always or never.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    progress: ProgressMode,
}

fn tick_cost(s: &str) -> std::result::Result<TickCost, ValueError> {
    Ok(s.parse()?)
}

/// What the tool's own thread costs the simulated machine (`--tool-cpu`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ToolCpu {
    /// `bench --cost`'s figures, or the tick given by `--tick-cost`.
    Measured,
    /// Nothing.
    Free,
    /// These costs.
    Given(TickCost),
}

impl ToolCpu {
    /// The cost charged at each tick, given the pacing's tick cost (`--tick-cost`).
    fn charged(self, tick: Option<TickCost>) -> Option<TickCost> {
        let measured = threadbalance_sim::MEASURED;
        match (self, tick) {
            (ToolCpu::Free, _) => None,
            (ToolCpu::Given(c), _) => Some(c),
            (ToolCpu::Measured, None) => Some(measured),
            // A tick cost without a move's keeps the measured plan costs; one with a
            // move's is the whole of what the caller gave.
            (ToolCpu::Measured, Some(t)) if t.per_move.0 == 0 => Some(TickCost {
                per_move: measured.per_move,
                per_plan: measured.per_plan,
                per_slice: measured.per_slice,
                ..t
            }),
            (ToolCpu::Measured, Some(t)) => Some(t),
        }
    }
}

fn tool_cpu(s: &str) -> std::result::Result<ToolCpu, ValueError> {
    match s {
        "measured" => Ok(ToolCpu::Measured),
        "free" => Ok(ToolCpu::Free),
        _ if s.contains(',') => Ok(ToolCpu::Given(s.parse()?)),
        _ => Err(ValueError::ToolCpu(s.into())),
    }
}

/// Where the simulated policies' run time and wait come from (`--counters`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Counters {
    /// Exact at each read: the BPF counters.
    Exact,
    /// As `schedstat` keeps them (`Linux::schedstat_at_ticks`).
    Proc,
}

impl Counters {
    fn name(self) -> &'static str {
        match self {
            Counters::Exact => "exact",
            Counters::Proc => "proc",
        }
    }
}

/// The tick rates kernels are built with.
const HZ_CHOICES: [u32; 4] = [100, 250, 300, 1000];

/// Runs `threadbalance sim`.
pub fn run(a: &SimArgs) -> Result<u8> {
    let baseline = match &a.baseline {
        Some(b) => Some(b.parse::<Baseline>().map_err(bad_input)?),
        None => None,
    };
    check(a)?;
    if a.suite.is_some() {
        return run_suite(a, baseline);
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
    let machine = threadbalance_sim::machine(&a.machine, local).map_err(bad_input)?;
    let workload = threadbalance_sim::workload(&a.workload, a.threads, Some(&a.scenarios))
        .map_err(bad_input)?;
    let settings = s.settings();
    let (policies, _) = s.policies(&[PolicyKind::None, PolicyKind::Tumbler]);
    let names: Vec<String> = policies.iter().map(ToString::to_string).collect();
    let mut opts = RunOptions::new(s.seed);
    opts.linux.baseline = baseline.unwrap_or_default();
    opts.tick_cost = a.tick_cost;
    opts.cpu_budget = a.cpu_budget;
    opts.tool_cpu = a.tool_cpu.charged(a.tick_cost);
    opts.linux.schedstat_at_ticks = a.counters == Counters::Proc;
    if let Some(hz) = a.hz {
        opts.linux.hz = hz;
    }
    opts.phases = a.phases.is_some();
    let cmp = threadbalance_sim::compare_with(&machine, &workload, &names, &settings, &opts)
        .map_err(bad_input)?;
    if a.json {
        let json = crate::schema::stamp(json_of(a, &cmp, &opts));
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        say_costs(a, &opts);
        out!("{}", cmp.to_table());
    }
    if let Some(path) = &a.report {
        std::fs::write(path, cmp.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &a.phases {
        let csv = threadbalance_sim::phases::to_csv(
            cmp.results
                .iter()
                .map(|r| (r.policy.as_str(), r.phases.as_slice())),
        );
        std::fs::write(path, csv).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}

/// Refuses the options that make no sense together, before anything runs.
fn check(a: &SimArgs) -> Result<()> {
    if let Some(hz) = a.hz
        && !HZ_CHOICES.contains(&hz)
    {
        return Err(input_error(format!(
            "--hz {hz}: kernels tick at 100, 250, 300 or 1000 Hz"
        )));
    }
    if a.cpu_budget.is_some() && a.tick_cost.is_none() && a.tool_cpu == ToolCpu::Free {
        return Err(input_error(
            "--cpu-budget: paces a tool that costs something; give --tick-cost, or leave --tool-cpu free out",
        ));
    }
    if let Some(suite) = &a.suite {
        if a.tick_cost.is_some() || a.tool_cpu != ToolCpu::Measured {
            return Err(input_error(
                "--tick-cost, --tool-cpu: the suite runs with free ticks and a tool that costs nothing, as calibrated; leave them out",
            ));
        }
        if a.phases.is_some() {
            return Err(input_error(
                "--phases: the suite logs no phases; give it a workload run instead",
            ));
        }
        if a.counters != Counters::Exact || a.hz.is_some() {
            return Err(input_error(
                "--counters, --hz: the suite runs the model as calibrated; leave them out",
            ));
        }
        if suite != "papers" {
            return Err(input_error(format!(
                "unknown suite {suite:?} (known: papers)"
            )));
        }
    }
    Ok(())
}

/// `--suite papers`: every claim of the papers, on the seeds given.
fn run_suite(a: &SimArgs, baseline: Option<Baseline>) -> Result<u8> {
    let mut shown = Progress::new(a.progress);
    let report =
        threadbalance_sim::suite::suite_papers_with(&a.seeds, baseline, &mut |i, n, group| {
            shown.show(&format!("suite {}/{n}: {group}", i + 1))
        });
    shown.clear();
    if a.json {
        let json = crate::schema::stamp(report.to_json());
        outln!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        out!("{}", report.to_table());
    }
    if let Some(path) = &a.report {
        std::fs::write(path, report.to_svg())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(0)
}

/// The comparison as JSON, with the kernel model, the counters and the costs it ran with.
fn json_of(
    a: &SimArgs,
    cmp: &threadbalance_sim::Comparison,
    opts: &RunOptions,
) -> serde_json::Value {
    let mut v = cmp.to_json();
    if let Some(o) = v.as_object_mut() {
        o.insert("baseline".into(), opts.linux.baseline.to_string().into());
        o.insert("counters".into(), a.counters.name().into());
        o.insert("hz".into(), opts.linux.hz.into());
        if let Some(c) = opts.tick_cost {
            o.insert("tick_cost_us".into(), cost_json(&c));
        }
        // The watching budget where ticks cost something, and an operator's whole budget
        // wherever one was set (without a tick cost it holds the tool's thread).
        if opts.tick_cost.is_some() || opts.cpu_budget.is_some() {
            o.insert(
                "cpu_budget_pct".into(),
                (opts.cpu_budget.unwrap_or(pace::BUDGET) * 100.0).into(),
            );
            o.insert("moves_charged".into(), opts.cpu_budget.is_some().into());
        }
        o.insert(
            "tool_cpu_us".into(),
            opts.tool_cpu
                .map_or(serde_json::Value::Null, |c| cost_json(&c)),
        );
    }
    v
}

/// A tick cost's parts in µs, as the JSON gives them.
fn cost_json(c: &TickCost) -> serde_json::Value {
    let us = |n: Nanos| n.0 as f64 / 1e3;
    serde_json::json!({
        "fixed": us(c.fixed),
        "per_thread": c.per_thread_ns / 1e3,
        "per_move": us(c.per_move),
        "per_plan": us(c.per_plan),
        "per_slice": us(c.per_slice),
    })
}

/// What a plan costs, in words: "14.6 µs a move, 14.0 µs a plan, 6.4 µs a slice" (the
/// parts that are not 0; "plans free" when none is).
fn plan_costs(c: &TickCost) -> String {
    let parts: Vec<String> = [
        (c.per_move, "a move"),
        (c.per_plan, "a plan"),
        (c.per_slice, "a slice"),
    ]
    .iter()
    .filter(|(n, _)| n.0 > 0)
    .map(|(n, what)| format!("{:.1} µs {what}", n.0 as f64 / 1e3))
    .collect();
    if parts.is_empty() {
        "plans free".to_string()
    } else {
        parts.join(", ")
    }
}

/// The lines above the table: the kernel model, the pacing and the tool's costs, when not
/// the defaults.
fn say_costs(a: &SimArgs, opts: &RunOptions) {
    if opts.linux.baseline != Baseline::Linux {
        outln!("kernel model: {} (--baseline)", opts.linux.baseline);
    }
    if let Some(c) = opts.tick_cost {
        match opts.cpu_budget {
            None => outln!(
                "policy paced by a 0.8 % CPU budget, a tick costing {:.1} µs + {:.3} µs a thread (--tick-cost)",
                c.fixed.0 as f64 / 1e3,
                c.per_thread_ns / 1e3
            ),
            Some(b) => outln!(
                "policy paced by a whole budget of {:.1} % of one core, a tick costing {:.1} µs + {:.3} µs a thread and {} (--tick-cost, --cpu-budget)",
                b * 100.0,
                c.fixed.0 as f64 / 1e3,
                c.per_thread_ns / 1e3,
                plan_costs(&c)
            ),
        }
    }
    match opts.tool_cpu {
        Some(c) => outln!(
            "the tool's own thread runs on the machine: {:.1} µs + {:.3} µs a thread a tick, {} (--tool-cpu){}",
            c.fixed.0 as f64 / 1e3,
            c.per_thread_ns / 1e3,
            plan_costs(&c),
            match (opts.tick_cost, opts.cpu_budget) {
                (None, Some(b)) => format!(
                    ", all of it held to {:.1} % of one core (--cpu-budget)",
                    b * 100.0
                ),
                _ => String::new(),
            }
        ),
        None => outln!("the tool's own CPU time is not charged (--tool-cpu free)"),
    }
    if a.counters == Counters::Proc || a.hz.is_some() {
        outln!(
            "run time and wait read {}, kernel ticking at {} Hz (--counters, --hz)",
            match a.counters {
                Counters::Exact => "exact at each read",
                Counters::Proc => "as schedstat keeps them",
            },
            opts.linux.hz
        );
    }
}
