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
//! **One migration, to the moved thread.** A thread updates a working set of W bytes over
//! and over (a fixed number of passes); another thread either moves it between two CPUs
//! every millisecond or sets it to the CPU it is already on (same system calls, no
//! migration). The moved thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`, so time it
//! spends preempted or in flight does not count) minus the pinned run's, over the number
//! of migrations, is what one migration costs it: mostly refilling its caches on the new
//! CPU. The wall-time difference, which also holds the move itself, is given alongside.
//! Pinned and moved runs alternate, and each pair gives one estimate.
//!
//! ```text
//!  worker: pin to CPU a, one warm pass ─► t0 ─► P passes over W bytes ─► t1 (CPU, wall)
//!  mover:  every 1 ms: set worker → other CPU (moved)  |  → same CPU (pinned)
//!  extra per migration = (CPU_moved − CPU_pinned) / migrations
//! ```

use crate::compare::Spread;
use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use std::fmt::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use threadbalance_model::{CpuId, CpuSet, Tid};
use threadbalance_workload::compute::thread_cpu_ns;

/// Thread counts of the management-cost runs.
pub const THREADS: [usize; 3] = [64, 256, 1024];
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
}

/// What one migration cost a thread with a working set of some size.
#[derive(Debug, Clone, Serialize)]
pub struct MigrationRow {
    /// Working set, bytes.
    pub working_set: usize,
    /// Passes over it in each run.
    pub passes: u64,
    /// CPU time of the pinned runs, ms (median).
    pub pinned_cpu_ms: f64,
    /// CPU time of the moved runs, ms (median).
    pub moved_cpu_ms: f64,
    /// Migrations per moved run (median).
    pub migrations: f64,
    /// Extra CPU time of the moved thread per migration, ns, pair by pair.
    pub extra_cpu_ns: Spread,
    /// Extra wall time per migration, ns, pair by pair.
    pub extra_wall_ns: Spread,
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
}

/// `bench --cost`.
pub fn run(repeat: usize, quick: bool, json: Option<&Path>) -> Result<u8> {
    let topo = crate::topo::read_usable()?;
    let cpus: Vec<CpuId> = topo.cpus().iter().map(|c| c.id).collect();
    let m = cpus.len();
    let load_before = super::load_average();
    let exe = std::env::current_exe().context("finding this program")?;
    let periods = if quick { 20 } else { 100 };
    let mut management = Vec::new();
    for t in THREADS {
        management.push(management_row(&exe, t, m, periods, repeat)?);
    }
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
            eprintln!("migration cost: working set {} KiB", w >> 10);
            migration.push(migration_row([a, b], w, target, pairs)?);
        }
    } else {
        eprintln!("threadbalance: one CPU only: no migration to measure");
    }
    let report = CostReport {
        cpus: m,
        load: [load_before, super::load_average()],
        management,
        migration,
        migration_cpus: pair.iter().copied().collect::<CpuSet>().to_string(),
    };
    print!("{}", to_table(&report));
    if let Some(path) = json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
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
    for r in 0..repeat {
        eprintln!(
            "management cost: {threads} threads (run {}/{repeat})",
            r + 1
        );
        let json = std::env::temp_dir().join(format!(
            "threadbalance-cost-{}-{threads}-{r}.json",
            std::process::id()
        ));
        let out = Command::new(exe)
            .args(["run", "--policy", "speed", "--level", "core"])
            .args(["--interval", "2", "--no-children", "--json"])
            .arg(&json)
            .arg("--")
            .arg(exe)
            .args(["workload", "uneven", "--duty", &duties])
            .args(["--period-ms", &PERIOD_MS.to_string()])
            .args(["--periods", &periods.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .context("starting a management-cost run")?;
        let summary = std::fs::read_to_string(&json);
        let _ = std::fs::remove_file(&json);
        if !out.status.success() {
            bail!(
                "the management-cost run with {threads} threads failed ({})",
                out.status
            );
        }
        let v: serde_json::Value =
            serde_json::from_str(&summary.context("reading the run's summary")?)
                .context("parsing the run's summary")?;
        let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let (Some(p), Some(cpu_s), Some(wall_s), Some(n)) =
            (f("tool_cpu_pct"), f("tool_cpu_s"), f("wall_s"), f("ticks"))
        else {
            bail!("the run's summary lacks its CPU time or ticks");
        };
        pct.push(p);
        ticks.push(n / wall_s.max(1e-9));
        per_tick.push(cpu_s * 1e6 / n.max(1.0));
    }
    let median = |v: &[f64]| Spread::of(v).map_or(0.0, |s| s.median);
    Ok(ManagementRow {
        threads,
        duty: d,
        tool_cpu_pct: Spread::of(&pct).ok_or_else(|| anyhow!("no run"))?,
        ticks_per_s: median(&ticks),
        us_per_tick: median(&per_tick),
    })
}

/// One pass over the working set: a multiply-add per 8 bytes, read and written back.
fn pass(buf: &mut [u64]) {
    for x in buf.iter_mut() {
        *x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
    }
    std::hint::black_box(&buf[0]);
}

/// One run: CPU ns and wall ns of the worker's passes, and the migrations made.
fn migration_run(cpus: [CpuId; 2], words: usize, passes: u64, moving: bool) -> Result<[u64; 3]> {
    let done = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel::<Option<Tid>>();
    std::thread::scope(|s| {
        let done = &done;
        let worker = s.spawn(move || {
            let tid = Tid(nix::unistd::gettid().as_raw());
            if threadbalance_linux::set_affinity(tid, &CpuSet::single(cpus[0])).is_err() {
                let _ = tx.send(None);
                return None;
            }
            let mut buf = vec![1u64; words];
            pass(&mut buf);
            let _ = tx.send(Some(tid));
            let (c0, w0) = (thread_cpu_ns(), Instant::now());
            for _ in 0..passes {
                pass(&mut buf);
            }
            let cpu = thread_cpu_ns().saturating_sub(c0);
            let wall = w0.elapsed().as_nanos() as u64;
            done.store(true, Ordering::SeqCst);
            Some((cpu, wall))
        });
        let tid = rx.recv().ok().flatten();
        let mut moves = 0u64;
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
                if threadbalance_linux::set_affinity(tid, &CpuSet::single(cpus[on])).is_ok()
                    && moving
                {
                    moves += 1;
                }
            }
        }
        match worker.join() {
            Ok(Some((cpu, wall))) => Ok([cpu, wall, moves]),
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
    // Size the runs: passes for `target` of CPU time, from one pinned run of 8 passes.
    let [cpu, ..] = migration_run(cpus, words, 8, false)?;
    let passes = ((target.as_nanos() as f64 / (cpu.max(1) as f64 / 8.0)).round() as u64).max(8);
    let (mut pinned, mut moved, mut migrations) = (Vec::new(), Vec::new(), Vec::new());
    let (mut extra_cpu, mut extra_wall) = (Vec::new(), Vec::new());
    for _ in 0..pairs {
        let p = migration_run(cpus, words, passes, false)?;
        let q = migration_run(cpus, words, passes, true)?;
        let n = q[2].max(1) as f64;
        pinned.push(p[0] as f64 / 1e6);
        moved.push(q[0] as f64 / 1e6);
        migrations.push(q[2] as f64);
        extra_cpu.push((q[0] as f64 - p[0] as f64) / n);
        extra_wall.push((q[1] as f64 - p[1] as f64) / n);
    }
    let median = |v: &[f64]| Spread::of(v).map_or(0.0, |s| s.median);
    let spread = |v: &[f64]| Spread::of(v).ok_or_else(|| anyhow!("no pair"));
    Ok(MigrationRow {
        working_set: bytes,
        passes,
        pinned_cpu_ms: median(&pinned),
        moved_cpu_ms: median(&moved),
        migrations: median(&migrations),
        extra_cpu_ns: spread(&extra_cpu)?,
        extra_wall_ns: spread(&extra_wall)?,
    })
}

/// The cost report as two tables.
pub fn to_table(r: &CostReport) -> String {
    let mut s = String::new();
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
        "{:>7} {:>8} {:>30} {:>8} {:>12}",
        "threads", "duty", "tool CPU % of one core min/med/max", "ticks/s", "µs per tick"
    );
    for row in &r.management {
        let p = row.tool_cpu_pct;
        let _ = writeln!(
            s,
            "{:>7} {:>8.5} {:>30} {:>8.0} {:>12.1}",
            row.threads,
            row.duty,
            format!("{:.2} / {:.2} / {:.2}", p.min, p.median, p.max),
            row.ticks_per_s,
            row.us_per_tick
        );
    }
    if r.migration.is_empty() {
        return s;
    }
    let _ = writeln!(
        s,
        "migration cost: a thread updating a working set, moved between CPUs {} every {} ms, \
         against the same thread left in place (pairs of runs; medians, extra = min / med / max)",
        r.migration_cpus,
        MOVE_EVERY.as_millis()
    );
    let _ = writeln!(
        s,
        "{:>11} {:>10} {:>9} {:>10} {:>30} {:>30}",
        "working set",
        "pinned ms",
        "moved ms",
        "migrations",
        "extra CPU ns per migration",
        "extra wall ns per migration"
    );
    for row in &r.migration {
        let show = |x: Spread| format!("{:.0} / {:.0} / {:.0}", x.min, x.median, x.max);
        let _ = writeln!(
            s,
            "{:>7} KiB {:>10.1} {:>9.1} {:>10.0} {:>30} {:>30}",
            row.working_set >> 10,
            row.pinned_cpu_ms,
            row.moved_cpu_ms,
            row.migrations,
            show(row.extra_cpu_ns),
            show(row.extra_wall_ns)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::duty;

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
