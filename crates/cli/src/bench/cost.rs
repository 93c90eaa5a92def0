//! `bench --cost`: what management costs, two ways.
//!
//! **The tool's own CPU time.** `threadbalance run --policy speed --level core --interval 2
//! --no-children` manages `workload uneven` with T = 64, 256 and 1024 threads; `run`'s JSON
//! summary gives its own CPU time (`getrusage`) as a share of one core, and its ticks.
//! The threads are *mostly idle*: each computes d·50 ms every 50 ms with d = M / (2T), so
//! the program keeps half the CPUs busy whatever T is, and every thread runs (and so must
//! be sampled again) 20 times a second. Spinning threads would be the wrong test on a
//! small machine: 1024 always-runnable threads on 2 CPUs starve the tool's own thread, and
//! its CPU share would then measure the starvation, not the cost.
//!
//! **The fastest interval**, as measured here: `--interval 2` pins `speed`'s interval to
//! its floor, 2 ms (the policy's own adaptive interval, P/16 of the program's phase, never
//! goes below it). The tick actually taken is the later of that and what the cost budget
//! allows (`run`'s loop never spends more than 0.8 % of one core: see the host's `pace` module), so
//! the table gives the ticks per second reached, the share of ticks the budget pushed back,
//! and the tool's CPU time per tick (the first ticks, which open every thread's files and
//! place and release every thread, weigh on it).
//!
//! **What a tick costs, as a line.** Each run's summary also gives the CPU time of a tick
//! once every thread has been seen (`tick_cpu_us`: sampling, deciding, the wait and its
//! wake-up, as the budget charges them; start-up and moves left out). Those medians, at
//! T = 64, 256 and 1024 and in one more run with [`FIT_SMALL`] threads, are fitted by least
//! squares on the relative error to `FIXED_US + PER_THREAD_US · T` ([`super::fit::fit_line`]), and
//! the report prints the pair as the argument of `threadbalance sim --tick-cost`: the
//! simulator then paces its policies as this machine would.
//!
//! **One migration, to the moved thread.** A thread updates a working set of W bytes over
//! and over, in units of 512 KiB of updates, and times each unit with its own CPU clock
//! (`CLOCK_THREAD_CPUTIME_ID`, so time it spends preempted or in flight does not count).
//! Every millisecond another thread changes its mask: to the other CPU (a migration), or,
//! in the control run, to the CPU it is already on (the same system call, no migration).
//! The cost of a move is what the units around it cost: the sum over a window of units
//! (about 0.6 ms) that starts one unit before the worker saw the change. One migration's
//! cost is the median window after a migration minus the median window after a same-CPU
//! change: mostly refilling the caches on the new CPU. A window in which the worker was
//! off its CPU for more than 50 µs at a time is left out (another program ran there and may
//! have evicted its caches: not the move's doing), and the medians make what is left robust
//! to the rest; moved and control runs alternate, and each pair gives one estimate.
//!
//! **One move, to the tool.** `threadbalance run --policy speed --level cpu` manages
//! `workload spmd` with M + 1 threads and 10 ms yielding phases, which it keeps rotating
//! (on 2 CPUs about 190 moves a second). `run` times its own CPU around each plan it
//! carries out (the identity checks, the mask read, the journal line,
//! `sched_setaffinity`, and the slice changes in the same plans) and its JSON gives that
//! over the moves made (`move_cpu_us`); the report gives the runs' min, median and max.
//! That is the price of a move in plans of one or two, slice changes included.
//!
//! **A plan of k moves, to the tool** ([`super::plans`]). The tool's own apply over a
//! program's busy threads, plans of 1 to 16 moves and of 1 to 16 slice changes: a plan's
//! price as `PLAN_US + MOVE_US · k`, and a slice change's. The simulator's `--tick-cost`
//! is printed with all five parts: the tick's two, then the move, the plan and the slice.
//!
//! **What `run` adds to a command.** `true` alone, then `threadbalance run --policy P --
//! true` for P = none and speed, [`RUN_ADDS_RUNS`] times each, interleaved, wall time from
//! the start of the process until its exit is reaped: start, the BPF counters loaded and
//! attached, the command, its exit, the masks restored, the summary. What `run` adds is
//! each run's wall time minus the median of `true` alone; the table gives its min, median
//! and max (the aim: at most 20 ms, start and exit included).
//!
//! ```text
//!  worker: pin to CPU a, warm W ─► unit, unit, unit, …  (CPU ns each; "changed since?")
//!  mover:  every 1 ms: mask → other CPU (moved run)  |  → same CPU (control run)
//!  extra per migration = median Σ(window after a move) − median Σ(window after a no-op)
//! ```

use crate::compare::Spread;
use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;
use threadbalance_model::{CpuId, CpuSet, Tid};
use threadbalance_workload::compute::thread_cpu_ns;

/// Thread counts of the management-cost runs.
pub const THREADS: [usize; 3] = [64, 256, 1024];
/// Threads of the one extra run made for the tick-cost fit only: a small program, so the
/// line's fixed part is measured and not only extrapolated.
pub const FIT_SMALL: usize = 4;
/// Period of the mostly-idle threads, ms.
const PERIOD_MS: u32 = 50;
/// Working-set sizes of the migration runs, bytes: inside a core's private caches, about
/// one core's L2, and well beyond it.
pub const WORKING_SETS: [usize; 3] = [64 << 10, 1 << 20, 8 << 20];
/// How often the mover moves the worker.
const MOVE_EVERY: Duration = Duration::from_millis(1);

/// What `run` cost with T threads.
#[derive(Debug, Clone, Serialize)]
pub struct ManagementRow {
    /// Threads of the managed program.
    pub threads: usize,
    /// Each thread's duty cycle.
    pub duty: f64,
    /// The tool's CPU time as % of one core, over the runs.
    pub tool_cpu_pct: Spread,
    /// Ticks per second of wall time (median).
    pub ticks_per_s: f64,
    /// The tool's CPU time per tick, µs (median).
    pub us_per_tick: f64,
    /// Share of the ticks the cost budget pushed back, % (median): the policy asked for
    /// 2 ms and the tool could not afford it.
    pub paced_pct: f64,
    /// CPU time of one tick once every thread had been seen, µs (median of the runs'
    /// `tick_cpu_us`): what the fit reads.
    pub steady_us_per_tick: f64,
}

/// The tick's cost as a line in the thread count, fitted to the runs.
#[derive(Debug, Clone, Serialize)]
pub struct TickFit {
    /// The points fitted: threads and steady µs per tick.
    pub points: Vec<(usize, f64)>,
    /// µs a tick costs whatever the thread count (at least 0).
    pub fixed_us: f64,
    /// µs each thread adds to a tick (at least 0).
    pub per_thread_us: f64,
    /// The argument to give `threadbalance sim --tick-cost`.
    pub sim_tick_cost: String,
}

/// What one migration cost a thread with a working set of some size.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationRow {
    /// Working set, bytes.
    pub working_set: usize,
    /// CPU time of one unit of work (512 KiB of updates), ns, measured pinned.
    pub unit_ns: f64,
    /// Units in the window summed after each move.
    pub window_units: usize,
    /// CPU time of the pinned runs, ms (median).
    pub pinned_cpu_ms: f64,
    /// CPU time of the moved runs, ms (median).
    pub moved_cpu_ms: f64,
    /// Migrations per moved run (median).
    pub migrations: f64,
    /// Share of the migrations whose window stayed on its CPU and was counted (median).
    pub windows_kept: f64,
    /// Extra CPU time of the moved thread per migration, ns: per pair of runs, the median
    /// window after a move minus the median window after a same-CPU mask change.
    pub extra_cpu_ns: Spread,
}

/// Phase of the program whose moves [`move_row`] measures, ms: short enough that `speed`
/// keeps rotating its M + 1 threads (rounds every 1 ms; on 2 CPUs about 190 moves a
/// second).
const MOVE_PHASE_MS: u32 = 10;

/// What one move costs the tool: `run --policy speed --level cpu` over `workload spmd`
/// with M + 1 threads and yielding barriers, each run's CPU time spent carrying out its
/// plans over the moves it made (`run`'s `move_cpu_us`).
#[derive(Debug, Clone, Serialize)]
pub struct MoveRow {
    /// Threads of the managed program (M + 1).
    pub threads: usize,
    /// Moves made per run (median).
    pub moves: f64,
    /// The tool's CPU time per move, µs, over the runs that made one.
    pub us_per_move: Spread,
}

/// Runs of each command measured for [`RunAdds`].
pub const RUN_ADDS_RUNS: usize = 9;

/// What `threadbalance run --policy P -- true` adds to `true`'s wall time.
#[derive(Debug, Clone, Serialize)]
pub struct RunAdds {
    /// The policy.
    pub policy: String,
    /// `true` alone, ms (median).
    pub bare_ms: f64,
    /// Each run's wall time minus `bare_ms`, ms: min, median and max.
    pub added_ms: Spread,
}

/// The cost report, as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct CostReport {
    /// M: the CPUs the benchmark may use.
    pub cpus: usize,
    /// `/proc/loadavg` before and after.
    pub load: [Option<[f64; 3]>; 2],
    /// The tool's own cost, one row per thread count.
    pub management: Vec<ManagementRow>,
    /// The migration cost, one row per working set; empty with a single CPU.
    pub migration: Vec<MigrationRow>,
    /// The CPUs the worker moved between.
    pub migration_cpus: String,
    /// The tick's cost fitted as `FIXED_US + PER_THREAD_US · T`; absent when the runs gave
    /// fewer than two thread counts with a measured tick.
    pub tick_cost: Option<TickFit>,
    /// What `run` adds to a command's wall time, one row per policy.
    pub run_adds: Vec<RunAdds>,
    /// What one move costs the tool in `run`'s own rounds; absent when no run made a move
    /// (one CPU).
    pub move_cost: Option<MoveRow>,
    /// What plans of k moves, and of k slice changes, cost the tool; empty with a single
    /// CPU.
    pub plans: super::plans::PlanRows,
    /// The plans' cost as `PLAN_US + MOVE_US · k` and a slice change's, when it could be
    /// fitted.
    pub plan_fit: Option<super::plans::PlanFit>,
    /// The simulator's `--tick-cost` with all five parts (the fit's tick; the plans' move,
    /// plan and slice change), when both fits were made.
    pub sim_tool_cost: Option<String>,
}

/// The wall time of `program args…`, from its start until its exit is reaped, in ms;
/// `None` when it could not be started or failed.
fn wall_ms(program: &Path, args: &[&str]) -> Option<f64> {
    let t0 = std::time::Instant::now();
    let status = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .ok()?;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    status.success().then_some(ms)
}

/// Measures [`RunAdds`] for `policies`, each command run `runs` times, interleaved.
fn run_adds(exe: &Path, policies: &[&str], runs: usize) -> Result<Vec<RunAdds>> {
    let bare = which_true()?;
    let mut alone = Vec::new();
    let mut managed = vec![Vec::new(); policies.len()];
    for _ in 0..runs {
        alone.push(wall_ms(&bare, &[]).context("running `true`")?);
        for (i, p) in policies.iter().enumerate() {
            let args = ["run", "--policy", p, "--", "true"];
            managed[i]
                .push(wall_ms(exe, &args).with_context(|| {
                    format!("running `threadbalance run --policy {p} -- true`")
                })?);
        }
    }
    let bare_ms = Spread::of(&alone).map_or(0.0, |s| s.median);
    Ok(policies
        .iter()
        .zip(managed)
        .filter_map(|(p, walls)| {
            let added: Vec<f64> = walls.iter().map(|w| w - bare_ms).collect();
            Some(RunAdds {
                policy: (*p).to_string(),
                bare_ms,
                added_ms: Spread::of(&added)?,
            })
        })
        .collect())
}

/// `true` as `run` would find it in `PATH`.
fn which_true() -> Result<std::path::PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("true"))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow!("no `true` in PATH"))
}

/// The fit of `rows` (their steady µs per tick), `None` when it cannot be made.
fn tick_fit(rows: &[ManagementRow]) -> Option<TickFit> {
    let points: Vec<(usize, f64)> = rows
        .iter()
        .filter(|r| r.steady_us_per_tick > 0.0)
        .map(|r| (r.threads, r.steady_us_per_tick))
        .collect();
    let (fixed_us, per_thread_us) = super::fit::fit_line(&points)?;
    Some(TickFit {
        points,
        fixed_us,
        per_thread_us,
        sim_tick_cost: format!("{fixed_us:.1},{per_thread_us:.3}"),
    })
}

/// `bench --cost`.
pub fn run(repeat: usize, quick: bool, json: Option<&Path>) -> Result<u8> {
    let topo = crate::usable::read_usable()?;
    let cpus: Vec<CpuId> = topo.cpus().iter().map(|c| c.id).collect();
    let m = cpus.len();
    let load_before = super::load_average();
    let exe = std::env::current_exe().context("finding this program")?;
    let periods = if quick { 20 } else { 100 };
    let mut management = Vec::new();
    for t in THREADS {
        management.push(management_row(&exe, t, m, periods, repeat)?);
    }
    // One more run, for the fit only: a small program (not a row of the table).
    let small = management_row(&exe, FIT_SMALL, m, periods, 1)?;
    let mut fitted = vec![small];
    fitted.extend(management.iter().cloned());
    let tick_cost = tick_fit(&fitted);
    let mut migration = Vec::new();
    let pair: Vec<CpuId> = cpus.iter().take(2).copied().collect();
    if let [a, b] = pair[..] {
        let target = if quick {
            Duration::from_millis(50)
        } else {
            Duration::from_millis(500)
        };
        let pairs = if quick { 1 } else { 5.max(repeat) };
        for w in WORKING_SETS {
            errln!("migration cost: working set {} KiB", w >> 10);
            migration.push(migration_row([a, b], w, target, pairs)?);
        }
    } else {
        errln!("threadbalance: one CPU only: no migration to measure");
    }
    errln!("what run adds: `true` alone and under run, {RUN_ADDS_RUNS} times each");
    let run_adds = run_adds(&exe, &["none", "speed"], RUN_ADDS_RUNS)?;
    let work_ms = if quick { 300 } else { 2000 };
    let move_cost = move_row(&exe, m, work_ms, repeat)?;
    let plans = match pair[..] {
        [a, b] => super::plans::plan_rows(&exe, &topo, [a, b], if quick { 20 } else { 200 })?,
        _ => super::plans::PlanRows::default(),
    };
    let plan_fit = super::plans::fit(&plans);
    let sim_tool_cost = tick_cost.as_ref().zip(plan_fit.as_ref()).map(|(f, p)| {
        format!(
            "{},{:.1},{:.1},{:.1}",
            f.sim_tick_cost, p.per_move_us, p.per_plan_us, p.per_slice_us
        )
    });
    let report = CostReport {
        cpus: m,
        load: [load_before, super::load_average()],
        management,
        migration,
        migration_cpus: pair.iter().copied().collect::<CpuSet>().to_string(),
        tick_cost,
        run_adds,
        move_cost,
        plans,
        plan_fit,
        sim_tool_cost,
    };
    // With `--json -` the JSON alone goes to stdout and the table to stderr.
    match json {
        Some(path) if crate::jsonout::is_stdout(path) => err!("{}", to_table(&report)),
        _ => out!("{}", to_table(&report)),
    }
    if let Some(path) = json {
        crate::jsonout::write(path, &crate::schema::versioned(&report))?;
    }
    Ok(0)
}

/// Each thread's duty cycle with T threads on M CPUs: half the CPUs busy in all.
fn duty(threads: usize, m: usize) -> f64 {
    (m as f64 / (2.0 * threads as f64)).min(1.0)
}

fn management_row(
    exe: &Path,
    threads: usize,
    m: usize,
    periods: u32,
    repeat: usize,
) -> Result<ManagementRow> {
    let d = duty(threads, m);
    let duties = vec![format!("{d:.6}"); threads].join(",");
    let mut pct = Vec::new();
    let mut ticks = Vec::new();
    let mut per_tick = Vec::new();
    let mut paced = Vec::new();
    let mut steady = Vec::new();
    // The runs' summaries go to a private directory (mode 0700, a random name).
    let dir = tempfile::Builder::new()
        .prefix("threadbalance-cost-")
        .tempdir()
        .context("creating a temporary directory")?;
    for r in 0..repeat {
        errln!(
            "management cost: {threads} threads (run {}/{repeat})",
            r + 1
        );
        let s = managed_run(
            exe,
            &dir.path().join(format!("run-{threads}-{r}.json")),
            &["--level", "core", "--interval", "2", "--no-children"],
            &[
                "uneven",
                "--duty",
                &duties,
                "--period-ms",
                &PERIOD_MS.to_string(),
                "--periods",
                &periods.to_string(),
            ],
        )
        .with_context(|| format!("the management-cost run with {threads} threads"))?;
        let (p, cpu_s, wall_s, n) = (s.tool_cpu_pct, s.tool_cpu_s, s.wall_s, s.ticks as f64);
        pct.push(p);
        paced.push(100.0 * s.ticks_paced as f64 / n.max(1.0));
        ticks.push(n / wall_s.max(1e-9));
        per_tick.push(cpu_s * 1e6 / n.max(1.0));
        if s.tick_cpu_us > 0.0 {
            steady.push(s.tick_cpu_us);
        }
    }
    let median = |v: &[f64]| Spread::of(v).map_or(0.0, |s| s.median);
    Ok(ManagementRow {
        threads,
        duty: d,
        tool_cpu_pct: Spread::of(&pct).ok_or_else(|| anyhow!("no run"))?,
        ticks_per_s: median(&ticks),
        us_per_tick: median(&per_tick),
        paced_pct: median(&paced),
        steady_us_per_tick: median(&steady),
    })
}

/// `threadbalance run --policy speed RUN_ARGS --json JSON -- threadbalance workload
/// WORKLOAD_ARGS`, its summary read back (and its file removed); an error when it could
/// not start or failed.
fn managed_run(
    exe: &Path,
    json: &Path,
    run_args: &[&str],
    workload_args: &[&str],
) -> Result<crate::runread::RunSummary> {
    let out = Command::new(exe)
        .args(["run", "--policy", "speed"])
        .args(run_args)
        .arg("--json")
        .arg(json)
        .arg("--")
        .arg(exe)
        .arg("workload")
        .args(workload_args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("starting it")?;
    let summary = std::fs::read_to_string(json);
    let _ = std::fs::remove_file(json);
    if !out.status.success() {
        bail!("it failed ({})", out.status);
    }
    crate::runread::parse(&summary.context("reading its summary")?)
}

/// Measures [`MoveRow`]: `repeat` runs of `run --policy speed --level cpu` over `workload
/// spmd` with `m + 1` threads, `work_ms` of work each, 10 ms yielding phases. `None` when
/// no run made a move (one CPU: nothing to rotate over).
fn move_row(exe: &Path, m: usize, work_ms: u32, repeat: usize) -> Result<Option<MoveRow>> {
    let threads = m + 1;
    let dir = tempfile::Builder::new()
        .prefix("threadbalance-moves-")
        .tempdir()
        .context("creating a temporary directory")?;
    let mut per_move = Vec::new();
    let mut moves = Vec::new();
    for r in 0..repeat {
        errln!("move cost: {threads} threads (run {}/{repeat})", r + 1);
        let s = managed_run(
            exe,
            &dir.path().join(format!("moves-{r}.json")),
            &["--level", "cpu"],
            &[
                "spmd",
                "--threads",
                &threads.to_string(),
                "--phase-ms",
                &MOVE_PHASE_MS.to_string(),
                "--barrier",
                "yield",
                "--work-ms",
                &work_ms.to_string(),
            ],
        )
        .context("the move-cost run")?;
        moves.push(s.applied.done as f64);
        if s.applied.done > 0 {
            per_move.push(s.move_cpu_us);
        }
    }
    Ok(Spread::of(&per_move).map(|us_per_move| MoveRow {
        threads,
        moves: Spread::of(&moves).map_or(0.0, |s| s.median),
        us_per_move,
    }))
}

/// Words updated per unit of work: 512 KiB of traffic, tens of microseconds.
const UNIT_WORDS: usize = 1 << 16;
/// The window after a move over which its cost is summed, ns of CPU time (it must be
/// longer than a refill of the largest working set and shorter than `MOVE_EVERY`).
const WINDOW_NS: f64 = 600_000.0;

/// One unit of work: the next `UNIT_WORDS` words of the working set, cyclically (so the
/// thread goes over its whole working set again and again), a multiply-add per word.
fn unit(buf: &mut [u64], at: &mut usize) {
    let n = buf.len();
    for _ in 0..UNIT_WORDS {
        let x = &mut buf[*at];
        *x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        *at += 1;
        if *at == n {
            *at = 0;
        }
    }
    std::hint::black_box(&buf[0]);
}

/// Longest a unit may spend off its CPU (wall − CPU time) and still count: longer means
/// another program ran there meanwhile and may have evicted the worker's caches, which is
/// not the migration's doing. A move itself stops the thread for a few microseconds.
const MAX_OFF_CPU_NS: u64 = 50_000;

/// One unit of the worker's work as it went.
#[derive(Debug, Clone, Copy)]
struct Unit {
    /// CPU time, ns.
    cpu_ns: u64,
    /// Wall time minus CPU time, ns: how long it was off its CPU.
    off_cpu_ns: u64,
    /// Whether the mover had acted since the unit before.
    acted: bool,
}

/// One run of the migration benchmark.
struct MigrationRun {
    /// Every unit, in order.
    units: Vec<Unit>,
    /// Moves that changed the worker's CPU.
    migrations: u64,
}

impl MigrationRun {
    fn cpu_ns(&self) -> u64 {
        self.units.iter().map(|u| u.cpu_ns).sum()
    }

    /// The CPU time of the `k` units that start one unit before each mover action (the
    /// action lands somewhere in the unit it is seen after, or the one before), for each
    /// window whose units all stayed on their CPU (see [`MAX_OFF_CPU_NS`]).
    fn windows(&self, k: usize) -> Vec<f64> {
        let u = &self.units;
        (1..u.len())
            .filter(|&i| u[i].acted && i - 1 + k <= u.len())
            .map(|i| &u[i - 1..i - 1 + k])
            .filter(|w| w.iter().all(|x| x.off_cpu_ns <= MAX_OFF_CPU_NS))
            .map(|w| w.iter().map(|x| x.cpu_ns).sum::<u64>() as f64)
            .collect()
    }
}

/// One run: the worker does `units` units pinned to `cpus[0]`; every `MOVE_EVERY` the
/// mover sets its mask to the other CPU (`moving`) or to the same one (not moving: the
/// same system call, no migration), and counts each action so the worker can see it.
fn migration_run(
    cpus: [CpuId; 2],
    words: usize,
    units: usize,
    moving: bool,
) -> Result<MigrationRun> {
    let done = AtomicBool::new(false);
    let acted = AtomicU64::new(0);
    let (tx, rx) = std::sync::mpsc::channel::<Option<Tid>>();
    std::thread::scope(|s| {
        let (done, acted) = (&done, &acted);
        let worker = s.spawn(move || {
            let tid = Tid(nix::unistd::gettid().as_raw());
            if threadbalance_linux::set_affinity(tid, &CpuSet::single(cpus[0])).is_err() {
                let _ = tx.send(None);
                return None;
            }
            let mut buf = vec![1u64; words];
            let mut at = 0;
            for _ in 0..words.div_ceil(UNIT_WORDS) {
                unit(&mut buf, &mut at);
            }
            let _ = tx.send(Some(tid));
            let mut out = Vec::with_capacity(units);
            let mut seen = acted.load(Ordering::SeqCst);
            for _ in 0..units {
                let (t0, w0) = (thread_cpu_ns(), std::time::Instant::now());
                unit(&mut buf, &mut at);
                let cpu_ns = thread_cpu_ns().saturating_sub(t0);
                let wall_ns = w0.elapsed().as_nanos() as u64;
                let now = acted.load(Ordering::SeqCst);
                out.push(Unit {
                    cpu_ns,
                    off_cpu_ns: wall_ns.saturating_sub(cpu_ns),
                    acted: now != seen,
                });
                seen = now;
            }
            done.store(true, Ordering::SeqCst);
            Some(out)
        });
        let tid = rx.recv().ok().flatten();
        let mut migrations = 0u64;
        let mut on = 0;
        if let Some(tid) = tid {
            while !done.load(Ordering::SeqCst) {
                std::thread::sleep(MOVE_EVERY);
                if done.load(Ordering::SeqCst) {
                    break;
                }
                if moving {
                    on ^= 1;
                }
                if threadbalance_linux::set_affinity(tid, &CpuSet::single(cpus[on])).is_ok() {
                    acted.fetch_add(1, Ordering::SeqCst);
                    if moving {
                        migrations += 1;
                    }
                }
            }
        }
        match worker.join() {
            Ok(Some(units)) => Ok(MigrationRun { units, migrations }),
            _ => Err(anyhow!(
                "the migration worker could not be pinned to CPU {}",
                cpus[0]
            )),
        }
    })
}

fn migration_row(
    cpus: [CpuId; 2],
    bytes: usize,
    target: Duration,
    pairs: usize,
) -> Result<MigrationRow> {
    let words = bytes / 8;
    // Size the runs: units for `target` of CPU time, from a pinned run of 64 units.
    let probe = migration_run(cpus, words, 64, false)?;
    let per_unit = (probe.cpu_ns() as f64 / 64.0).max(1.0);
    let units = ((target.as_nanos() as f64 / per_unit).round() as usize).max(64);
    let k = ((WINDOW_NS / per_unit).round() as usize).clamp(1, units / 4);
    let (mut pinned, mut moved, mut migrations) = (Vec::new(), Vec::new(), Vec::new());
    let (mut extra, mut kept) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        let p = migration_run(cpus, words, units, false)?;
        let q = migration_run(cpus, words, units, true)?;
        pinned.push(p.cpu_ns() as f64 / 1e6);
        moved.push(q.cpu_ns() as f64 / 1e6);
        migrations.push(q.migrations as f64);
        let (wq, wp) = (q.windows(k), p.windows(k));
        kept.push(wq.len() as f64 / (q.migrations.max(1) as f64));
        if let (Some(a), Some(b)) = (Spread::of(&wq), Spread::of(&wp)) {
            extra.push(a.median - b.median);
        }
    }
    let median = |v: &[f64]| Spread::of(v).map_or(0.0, |s| s.median);
    Ok(MigrationRow {
        working_set: bytes,
        unit_ns: per_unit,
        window_units: k,
        pinned_cpu_ms: median(&pinned),
        moved_cpu_ms: median(&moved),
        migrations: median(&migrations),
        windows_kept: median(&kept),
        extra_cpu_ns: Spread::of(&extra).ok_or_else(|| anyhow!("no move was seen"))?,
    })
}

/// The cost report as two tables.
///
/// Long because it lays out both tables of the report column by column, in the order
/// they print; split, a column's header and its values would sit apart.
pub fn to_table(r: &CostReport) -> String {
    let mut s = String::new();
    if let Some(first) = r.run_adds.first() {
        let _ = writeln!(
            s,
            "what run adds to a command: `run --policy P -- true` minus `true` alone \
             ({:.1} ms, median), wall time, {RUN_ADDS_RUNS} runs each",
            first.bare_ms
        );
        for row in &r.run_adds {
            let a = row.added_ms;
            let _ = writeln!(
                s,
                "{:>8}  {:.1} / {:.1} / {:.1} ms min/med/max",
                row.policy, a.min, a.median, a.max
            );
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "management cost: run --policy speed --level core --interval 2 --no-children over \
         `workload uneven`, T mostly idle threads (each computes d·{PERIOD_MS} ms every {PERIOD_MS} ms, \
         d = M/(2T): half of the {} CPUs busy); load average {} before, {} after",
        r.cpus,
        super::show_load(r.load[0]),
        super::show_load(r.load[1])
    );
    let _ = writeln!(
        s,
        "{:>7} {:>8} {:>30} {:>8} {:>12} {:>12} {:>8} {:>13}",
        "threads",
        "duty",
        "tool CPU % of one core min/med/max",
        "ticks/s",
        "ms per tick",
        "µs per tick",
        "paced %",
        "steady µs/tick"
    );
    for row in &r.management {
        let p = row.tool_cpu_pct;
        let _ = writeln!(
            s,
            "{:>7} {:>8.5} {:>30} {:>8.0} {:>12.1} {:>12.1} {:>8.0} {:>13.1}",
            row.threads,
            row.duty,
            format!("{:.2} / {:.2} / {:.2}", p.min, p.median, p.max),
            row.ticks_per_s,
            1000.0 / row.ticks_per_s.max(1e-9),
            row.us_per_tick,
            row.paced_pct,
            row.steady_us_per_tick
        );
    }
    let _ = writeln!(
        s,
        "(µs per tick: the whole run's CPU time over its ticks, start-up and moves included; \
         steady µs/tick: a tick once every thread had been seen, moves left out, as the budget charges it)"
    );
    match &r.tick_cost {
        Some(f) => {
            let points: Vec<String> = f
                .points
                .iter()
                .map(|(t, us)| format!("{t} threads {us:.1} µs"))
                .collect();
            let _ = writeln!(
                s,
                "tick cost fit (least squares on the relative error over {}): {:.1} µs + {:.3} µs a thread; \
                 for the simulator: threadbalance sim --tick-cost {}",
                points.join(", "),
                f.fixed_us,
                f.per_thread_us,
                f.sim_tick_cost
            );
        }
        None => {
            let _ = writeln!(s, "tick cost fit: not enough runs with a steady tick");
        }
    }
    match &r.move_cost {
        Some(mv) => {
            let u = mv.us_per_move;
            let _ = writeln!(
                s,
                "move cost: run --policy speed --level cpu over `workload spmd`, {} threads, \
                 {MOVE_PHASE_MS} ms yielding phases: {:.1} / {:.1} / {:.1} µs of the tool's CPU \
                 a move min/med/max ({:.0} moves a run, median; the slice changes in the same \
                 plans included)",
                mv.threads, u.min, u.median, u.max, mv.moves
            );
        }
        None => {
            let _ = writeln!(s, "move cost: no run made a move");
        }
    }
    if !r.plans.moves.is_empty() {
        let _ = writeln!(
            s,
            "plan cost: the tool's own apply over `workload spmd` ({} busy threads), plans of k \
             changes, one a ms (moves between CPUs {}; slices {} ms and back)",
            super::plans::BUSY,
            r.migration_cpus,
            0.5
        );
        let _ = writeln!(
            s,
            "{:>7} {:>30} {:>10} {:>30} {:>10}",
            "k",
            "moves: µs a plan min/med/max",
            "µs each",
            "slices: µs a plan min/med/max",
            "µs each"
        );
        let cell = |p: Option<&super::plans::PlanRow>| match p {
            Some(p) if p.done >= p.moves as f64 => {
                let u = p.us_per_plan;
                (
                    format!("{:.1} / {:.1} / {:.1}", u.min, u.median, u.max),
                    format!("{:.1}", u.median / p.moves as f64),
                )
            }
            Some(p) => (
                format!("{:.0} of {} done", p.done, p.moves),
                "-".to_string(),
            ),
            None => ("-".to_string(), "-".to_string()),
        };
        for (i, p) in r.plans.moves.iter().enumerate() {
            let (m, me) = cell(Some(p));
            let (sl, se) = cell(r.plans.slices.get(i));
            let _ = writeln!(s, "{:>7} {m:>30} {me:>10} {sl:>30} {se:>10}", p.moves);
        }
        match &r.plan_fit {
            Some(f) => {
                let _ = writeln!(
                    s,
                    "plan cost fit (least squares on the relative error over the medians): \
                     {:.1} µs a plan + {:.1} µs a move; {:.1} µs a slice change",
                    f.per_plan_us, f.per_move_us, f.per_slice_us
                );
            }
            None => {
                let _ = writeln!(s, "plan cost fit: not enough plan sizes measured");
            }
        }
    }
    if let Some(c) = &r.sim_tool_cost {
        let _ = writeln!(
            s,
            "for the simulator, ticks, moves, plans and slices: threadbalance sim --tick-cost {c}"
        );
    }
    if r.migration.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "migration cost: a thread updating a working set, its mask changed every {} ms, \
         to the other of CPUs {} or to the same CPU (pairs of runs; medians)",
        MOVE_EVERY.as_millis(),
        r.migration_cpus
    );
    let _ = writeln!(
        s,
        "{:>11} {:>9} {:>7} {:>10} {:>9} {:>10} {:>7} {:>36}",
        "working set",
        "unit µs",
        "window",
        "pinned ms",
        "moved ms",
        "migrations",
        "counted",
        "extra CPU µs per migration min/med/max"
    );
    for row in &r.migration {
        let x = row.extra_cpu_ns;
        let _ = writeln!(
            s,
            "{:>7} KiB {:>9.1} {:>7} {:>10.1} {:>9.1} {:>10.0} {:>6.0}% {:>36}",
            row.working_set >> 10,
            row.unit_ns / 1e3,
            row.window_units,
            row.pinned_cpu_ms,
            row.moved_cpu_ms,
            row.migrations,
            row.windows_kept * 100.0,
            format!(
                "{:.1} / {:.1} / {:.1}",
                x.min / 1e3,
                x.median / 1e3,
                x.max / 1e3
            )
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{MigrationRun, Unit, duty};

    #[test]
    fn windows_start_one_unit_before_each_seen_change() {
        // Units of 10 ns; the change is seen after units 2 and 5, so with k = 3 the
        // windows are units 1..=3 (10 + 10 + 40) and 4..=6 (10 + 30 + 20).
        let unit = |cpu_ns, acted| Unit {
            cpu_ns,
            off_cpu_ns: 0,
            acted,
        };
        let mut run = MigrationRun {
            units: vec![
                unit(10, false),
                unit(10, false),
                unit(10, true),
                unit(40, false),
                unit(10, false),
                unit(30, true),
                unit(20, false),
                unit(10, false),
            ],
            migrations: 2,
        };
        assert_eq!(run.windows(3), vec![60.0, 60.0]);
        assert_eq!(run.cpu_ns(), 140);
        // With k = 5 the first window is units 1..=5 (10 + 10 + 40 + 10 + 30); the second
        // would need units 4..=8, one past the last, and is left out.
        assert_eq!(run.windows(5), vec![100.0]);
        // Unit 5 spent 60 µs off its CPU (another program ran there): the second window
        // (units 4..=6) is left out, the first (1..=3) stays.
        run.units[5].off_cpu_ns = 60_000;
        assert_eq!(run.windows(3), vec![60.0]);
    }

    #[test]
    fn duty_keeps_half_the_cpus_busy() {
        // 64 threads on 2 CPUs: 2 / 128 = 1/64 each, 64 × 1/64 = 1 CPU busy.
        assert!((duty(64, 2) - 1.0 / 64.0).abs() < 1e-12);
        // 1024 threads on 16 CPUs: 16 / 2048 each, 8 CPUs busy in all.
        assert!((duty(1024, 16) * 1024.0 - 8.0).abs() < 1e-9);
        // More CPUs than twice the threads: every thread always busy.
        assert_eq!(duty(64, 256), 1.0);
    }
}
