//! `bench --cost`'s plan rows: what carrying out a plan of k moves costs the tool, on the
//! tool's own path, for the plan sizes machines of every size make.
//!
//! A rotation's round is one plan: on M CPUs it moves up to a quarter of the queues (at
//! least 8) at once. Carrying it out is one journal write for the whole plan, then, for
//! each move, the identity checks (a `pread` of the sampler's kept `stat` file, before and
//! after), the mask read and `sched_setaffinity`. On a 2-CPU machine `run`'s own rounds move
//! one or two threads, so its `move_cpu_us` is the price of a move in a plan of one; a
//! 64-core machine's plans hold 16. Those are not the same price: the first call after the
//! tool slept meets cold caches, and the journal write is paid once a plan.
//!
//! Measured here: [`LinuxHost::apply`], the very call `run` makes, over a child `workload
//! spmd` of [`BUSY`] always-busy threads, with plans of k = 1, 2, 4, … [`BUSY`] moves (each
//! thread to the other of two CPUs, so every move changes a mask), one plan a millisecond
//! with the tool asleep in between as between ticks, the tool's thread CPU time taken
//! around each plan. The medians per k are fitted to `PLAN_US + MOVE_US · k` by least
//! squares on the relative error (as the tick's line), and the simulator charges a tick's
//! moves that way (`sim --tick-cost F,P,MOVE_US,PLAN_US,SLICE_US`, a slice change's price the
//! slope of the slice rows).
//!
//! What it leaves out: on this machine most of the busy threads wait in a run queue when
//! they are moved, where on a large machine about half of a rotation's moved threads are
//! running (moving a running thread costs its CPU a stop and the caller a wait); the
//! choice trace (a BPF map read a move, where it loads) is not loaded.
//!
//! ```text
//!  child: workload spmd, BUSY threads computing
//!  tool:  sample ─► { sleep 1 ms ─► t0 = own CPU ─► apply(plan of k moves) ─► own CPU − t0 } × plans
//!         k = 1, 2, 4, … BUSY ─► medians ─► fit PLAN_US + MOVE_US · k ─► restore every mask
//! ```

use crate::compare::Spread;
use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use threadbalance_linux::LinuxHost;
use threadbalance_linux::read::{HostFacts, Root};
use threadbalance_linux::sampler::SamplerConfig;
use threadbalance_linux::state::StateDir;
use threadbalance_model::{
    CpuId, Move, Nanos, Plan, Reason, SliceChange, Snapshot, Target, ThreadKey, Topology,
};
use threadbalance_workload::compute::thread_cpu_ns;

/// Busy threads of the managed child, and the largest plan measured: the plan size of a
/// round on 64 CPUs (a quarter of the queues) and twice the least a round may swap.
pub const BUSY: usize = 16;
/// Pause between two plans, as between two ticks: the tool sleeps, and its caches cool.
const BETWEEN: Duration = Duration::from_millis(1);
/// How long the child's threads may take to appear.
const APPEAR_WITHIN: Duration = Duration::from_secs(5);

/// The slice a slice change gives (`speed`'s short slice), ns.
const SHORT: Nanos = Nanos(500_000);

/// What plans of k changes cost the tool, one row per k.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlanRows {
    /// Plans of k moves.
    pub moves: Vec<PlanRow>,
    /// Plans of k slice changes (empty rows where the kernel has no slices to set: then
    /// none is done).
    pub slices: Vec<PlanRow>,
}

/// What a plan of `moves` changes cost the tool.
#[derive(Debug, Clone, Serialize)]
pub struct PlanRow {
    /// Changes in each plan (moves, or slice changes).
    pub moves: usize,
    /// The tool's CPU time per plan, µs, over the plans.
    pub us_per_plan: Spread,
    /// Changes carried out per plan (median): `moves` when every one changed something.
    pub done: f64,
}

/// The plans' cost as a line in their moves, and what a slice change adds.
#[derive(Debug, Clone, Serialize)]
pub struct PlanFit {
    /// The points fitted: moves a plan and median µs a plan.
    pub points: Vec<(usize, f64)>,
    /// µs a plan with changes costs whatever their number (at least 0).
    pub per_plan_us: f64,
    /// µs each move adds (at least 0).
    pub per_move_us: f64,
    /// µs each slice change adds (at least 0): the slope of the slice rows; 0 where none
    /// was done.
    pub per_slice_us: f64,
}

/// The plan sizes measured: 1, 2, 4, … up to `busy`.
pub fn sizes(busy: usize) -> Vec<usize> {
    std::iter::successors(Some(1usize), |k| Some(k * 2))
        .take_while(|&k| k <= busy)
        .collect()
}

/// The rows' medians as points for [`super::fit::fit_line`]: the rows in which
/// every change was done.
fn done_points(rows: &[PlanRow]) -> Vec<(usize, f64)> {
    rows.iter()
        .filter(|r| r.done >= r.moves as f64)
        .map(|r| (r.moves, r.us_per_plan.median))
        .collect()
}

/// The fit of `rows`, `None` when the move rows cannot be fitted (see
/// [`super::fit::fit_line`]).
pub fn fit(rows: &PlanRows) -> Option<PlanFit> {
    let points = done_points(&rows.moves);
    let (per_plan_us, per_move_us) = super::fit::fit_line(&points)?;
    let per_slice_us = super::fit::fit_line(&done_points(&rows.slices)).map_or(0.0, |f| f.1);
    Some(PlanFit {
        points,
        per_plan_us,
        per_move_us,
        per_slice_us,
    })
}

/// The child, killed and reaped when dropped.
struct Busy(Child);

impl Drop for Busy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Measures a [`PlanRow`] for each of [`sizes`]`(BUSY)`, `plans` plans each: plans of
/// moves between `cpus`, then plans of slice changes. Every mask and slice changed is put
/// back, and the child is killed, whatever the measurement gave.
pub fn plan_rows(exe: &Path, topo: &Topology, cpus: [CpuId; 2], plans: usize) -> Result<PlanRows> {
    let busy = BUSY.to_string();
    let child = Command::new(exe)
        .args(["workload", "spmd", "--threads", &busy])
        .args([
            "--phase-ms",
            "600000",
            "--barrier",
            "yield",
            "--work-ms",
            "600000",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting `workload spmd`")?;
    let child = Busy(child);
    let pid = threadbalance_model::Pid(child.0.id() as i32);
    let dir = tempfile::Builder::new()
        .prefix("threadbalance-plans-")
        .tempdir()
        .context("creating a temporary directory")?;
    let root = Root::system();
    let journal = StateDir::new(dir.path().join("state")).open_journal(&root)?;
    let cfg = SamplerConfig::new(HostFacts::system()?);
    let mut host = LinuxHost::with_journal(root, topo.clone(), &[pid], cfg, Some(journal))?;
    let measured = measure(&mut host, pid, cpus, plans);
    let restored = host.restore_all();
    drop(child);
    if let Some((key, why)) = restored.kept.first() {
        bail!(
            "thread {} was not put back after the plan runs: {why:?}",
            key.tid.0
        );
    }
    measured
}

/// The busy threads of `pid` (every thread but its leader, which waits in `join`), once
/// all [`BUSY`] have appeared.
fn busy_threads(host: &mut LinuxHost, pid: threadbalance_model::Pid) -> Result<Vec<ThreadKey>> {
    let start = Instant::now();
    let mut snap = Snapshot::default();
    loop {
        host.sample(&mut snap)?;
        let keys: Vec<ThreadKey> = snap
            .threads
            .iter()
            .map(|s| s.key)
            .filter(|k| k.tid.0 != pid.0)
            .collect();
        if keys.len() >= BUSY {
            return Ok(keys);
        }
        if start.elapsed() > APPEAR_WITHIN {
            return Err(anyhow!(
                "`workload spmd` showed {} of its {BUSY} threads within {} s",
                keys.len(),
                APPEAR_WITHIN.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Both kinds of rows: plans of k moves, then plans of k slice changes.
fn measure(
    host: &mut LinuxHost,
    pid: threadbalance_model::Pid,
    cpus: [CpuId; 2],
    plans: usize,
) -> Result<PlanRows> {
    let keys = busy_threads(host, pid)?;
    Ok(PlanRows {
        moves: move_rows(host, &keys, cpus, plans)?,
        slices: slice_rows(host, &keys, plans)?,
    })
}

/// Plans of k moves, each thread to the other of `cpus`.
fn move_rows(
    host: &mut LinuxHost,
    keys: &[ThreadKey],
    cpus: [CpuId; 2],
    plans: usize,
) -> Result<Vec<PlanRow>> {
    // Which of the two CPUs each thread was last sent to; every move sends it to the
    // other, so each one changes a mask (a thread not moved yet has both).
    let mut side = vec![0usize; keys.len()];
    let mut next = 0usize;
    rows(host, plans, "moves", |k, _| {
        let moves = (0..k)
            .map(|_| {
                let i = next % keys.len();
                next += 1;
                side[i] ^= 1;
                Move {
                    thread: keys[i],
                    to: Target::Cpu(cpus[side[i]]),
                    why: Reason::SpeedRotate { lead_ms: 0.0 },
                }
            })
            .collect();
        (moves, Vec::new())
    })
}

/// Plans of k slice changes: the same k threads given `SHORT` slices, then their own back,
/// in turn.
fn slice_rows(host: &mut LinuxHost, keys: &[ThreadKey], plans: usize) -> Result<Vec<PlanRow>> {
    rows(host, plans, "slice changes", |k, p| {
        let slice = (p % 2 == 0).then_some(SHORT);
        let slices = keys[..k]
            .iter()
            .map(|&thread| SliceChange { thread, slice })
            .collect();
        (Vec::new(), slices)
    })
}

/// A row for each of [`sizes`]`(BUSY)`: `plans` plans of k changes each, the `p`-th made by
/// `changes(k, p)`, each carried out after a pause as between ticks and timed on the
/// tool's thread CPU clock; what was done is its moves plus its slices.
fn rows(
    host: &mut LinuxHost,
    plans: usize,
    what: &str,
    mut changes: impl FnMut(usize, usize) -> (Vec<Move>, Vec<SliceChange>),
) -> Result<Vec<PlanRow>> {
    let mut rows = Vec::new();
    for k in sizes(BUSY) {
        errln!("plan cost: plans of {k} {what} ({plans} plans)");
        let mut us = Vec::with_capacity(plans);
        let mut done = Vec::with_capacity(plans);
        for p in 0..plans {
            let (moves, slices) = changes(k, p);
            let plan = Plan {
                moves,
                slices,
                next_in: Nanos::from_millis(1),
                note: None,
            };
            std::thread::sleep(BETWEEN);
            let t0 = thread_cpu_ns();
            let report = host.apply(&plan);
            us.push(thread_cpu_ns().saturating_sub(t0) as f64 / 1e3);
            done.push(f64::from(report.done + report.slices));
        }
        rows.push(row_of(k, &us, &done)?);
    }
    Ok(rows)
}

fn row_of(k: usize, us: &[f64], done: &[f64]) -> Result<PlanRow> {
    Ok(PlanRow {
        moves: k,
        us_per_plan: Spread::of(us).ok_or_else(|| anyhow!("no plan measured"))?,
        done: Spread::of(done).map_or(0.0, |s| s.median),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(moves: usize, us: f64) -> PlanRow {
        PlanRow {
            moves,
            us_per_plan: Spread {
                min: us,
                median: us,
                max: us,
            },
            done: moves as f64,
        }
    }

    #[test]
    fn plan_sizes_double_up_to_the_busy_threads() {
        assert_eq!(sizes(16), vec![1, 2, 4, 8, 16]);
        assert_eq!(sizes(5), vec![1, 2, 4]);
        assert_eq!(sizes(1), vec![1]);
    }

    #[test]
    fn plan_fit_splits_a_plans_price_into_its_fixed_part_each_move_and_each_slice() {
        let line = |a: f64, b: f64| -> Vec<PlanRow> {
            sizes(16)
                .into_iter()
                .map(|k| row(k, a + b * k as f64))
                .collect()
        };
        let rows = PlanRows {
            moves: line(30.0, 12.0),
            slices: line(20.0, 4.0),
        };
        let f = fit(&rows).unwrap();
        assert!((f.per_plan_us - 30.0).abs() < 1e-6, "{f:?}");
        assert!((f.per_move_us - 12.0).abs() < 1e-6, "{f:?}");
        assert!((f.per_slice_us - 4.0).abs() < 1e-6, "{f:?}");
        // One size cannot be split.
        let one = PlanRows {
            moves: rows.moves[..1].to_vec(),
            slices: Vec::new(),
        };
        assert!(fit(&one).is_none());
        // Slices the kernel would not set are not a price of nothing.
        let mut unsliced = rows.clone();
        for r in &mut unsliced.slices {
            r.done = 0.0;
        }
        assert_eq!(fit(&unsliced).unwrap().per_slice_us, 0.0);
    }
}
