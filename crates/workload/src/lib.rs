//! Real multithreaded programs for measuring thread placement, like rt-app but built in.
//!
//! Each scenario starts its threads, does a fixed amount of *calibrated* work and reports
//! how long that took, as one JSON line. Work is measured in the thread's own CPU time
//! (see [`compute`]), so "10 ms of work" costs 10 ms of CPU wherever and however the thread
//! runs; only placement and waiting change the wall time.
//!
//! ```text
//!  spmd      N threads × K phases of S ms, then a barrier (spin | yield | block)
//!  locks     N threads; each op: C µs inside one of M mutexes, W µs outside
//!  pipeline  load → segment → extract → vector → rank → out, pools of threads per stage,
//!            bounded queues between stages (default: ferret, Tumbler Table I)
//!  uneven    threads with different duty cycles: run d·P ms, sleep (1−d)·P ms, K times
//! ```
//!
//! Each [`Score`] gives the wall time, every thread's progress (useful CPU work over wall
//! time) and, where a bound is meaningful, the *fair-share wall time*: the least wall time
//! any placement could reach on the cores this process may use (see each scenario's docs).
//! `fair_share_pct` = 100 × fair-share wall / wall.
//!
//! ```
//! use threadbalance_workload::{run, BarrierKind, Scenario, SpmdOpts};
//! let s = Scenario::Spmd(SpmdOpts {
//!     threads: 2, phase_ms: 0.2, work_ms: 1.0, phases: None, barrier: BarrierKind::Block,
//!     cores: None,
//! });
//! let score = run(&s).unwrap();
//! assert_eq!(score.scenario, "spmd");
//! assert_eq!(score.progress.len(), 2);
//! ```
#![forbid(unsafe_code)]

mod barrier;
pub mod compute;
mod locks;
mod pipeline;
mod spmd;
mod uneven;

pub use barrier::{BarrierKind, PhaseBarrier};
pub use locks::{LocksOpts, MutexKind};
pub use pipeline::{BadStage, PipelineOpts, StageSpec};
pub use spmd::SpmdOpts;
pub use uneven::UnevenOpts;

use serde::Serialize;

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The OS refused to start a thread.
    #[error("starting thread {index} of {scenario}: {source}")]
    Spawn {
        /// The scenario.
        scenario: &'static str,
        /// Which of its threads.
        index: usize,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A thread panicked (a bug, or a poisoned lock).
    #[error("a thread of {scenario} panicked")]
    Panicked {
        /// The scenario.
        scenario: &'static str,
    },
    /// The options make no sense (zero threads, empty pipeline, …).
    #[error("{scenario}: {why}")]
    Invalid {
        /// The scenario.
        scenario: &'static str,
        /// What is wrong.
        why: String,
    },
}

/// A scenario and its options, as `threadbalance workload <scenario> [options]` takes them.
#[derive(Debug, Clone, PartialEq, clap::Subcommand)]
pub enum Scenario {
    /// N threads, K phases of S ms of compute each, a barrier after every phase.
    Spmd(SpmdOpts),
    /// N threads contending for M mutexes: C µs inside, W µs outside.
    Locks(LocksOpts),
    /// Pipeline stages with thread pools and per-item costs (default: ferret).
    Pipeline(PipelineOpts),
    /// Threads with different duty cycles.
    Uneven(UnevenOpts),
}

impl Scenario {
    /// The scenario's name, as in the command line and the score.
    pub fn name(&self) -> &'static str {
        match self {
            Scenario::Spmd(_) => "spmd",
            Scenario::Locks(_) => "locks",
            Scenario::Pipeline(_) => "pipeline",
            Scenario::Uneven(_) => "uneven",
        }
    }
}

/// What a run achieved; printed as one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Score {
    /// The scenario's name.
    pub scenario: &'static str,
    /// Its options, as given.
    pub params: serde_json::Value,
    /// Worker threads it ran.
    pub threads: usize,
    /// CPUs the fair share is computed for (see [`cores`]).
    pub cores: usize,
    /// Wall time from the moment every thread was ready until the last finished, in seconds.
    pub wall_s: f64,
    /// Useful CPU work done by all threads together, in seconds.
    pub work_s: f64,
    /// For each thread, its useful CPU work over the wall time (1.0 = a core to itself all
    /// along).
    pub progress: Vec<f64>,
    /// The least wall time any placement could reach on `cores` CPUs, in seconds, where the
    /// scenario defines one.
    pub fair_share_wall_s: Option<f64>,
    /// 100 × `fair_share_wall_s` / `wall_s`.
    pub fair_share_pct: Option<f64>,
    /// Operations per second (locks: critical sections; spmd: phases), where meaningful.
    pub ops_per_s: Option<f64>,
    /// Items per second through the pipeline.
    pub items_per_s: Option<f64>,
    /// Each worker's kernel thread id, in the order of `progress` (locks only), so that a
    /// balancer's per-thread figures can be matched to `lock_wait_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tids: Option<Vec<i32>>,
    /// For each worker, the wall time it spent inside `lock()` (from the call until it held
    /// the mutex: spinning, sleeping on the futex, and the uncontended fast path), in
    /// seconds (locks only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lock_wait_s: Option<Vec<f64>>,
}

impl Score {
    fn new(scenario: &'static str, params: serde_json::Value, wall_s: f64, work: &[f64]) -> Score {
        let wall = wall_s.max(1e-9);
        Score {
            scenario,
            params,
            threads: work.len(),
            cores: cores(),
            wall_s,
            work_s: work.iter().sum(),
            progress: work.iter().map(|w| w / wall).collect(),
            fair_share_wall_s: None,
            fair_share_pct: None,
            ops_per_s: None,
            items_per_s: None,
            tids: None,
            lock_wait_s: None,
        }
    }

    fn with_fair_share(mut self, fair_wall_s: f64) -> Score {
        self.fair_share_wall_s = Some(fair_wall_s);
        self.fair_share_pct = Some(100.0 * fair_wall_s / self.wall_s.max(1e-9));
        self
    }

    /// The score as one line of JSON.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// CPUs the scenario's fair share is computed for: the machine's online CPUs
/// (`/sys/devices/system/cpu/online`), or the calling thread's affinity mask when that
/// file cannot be read. Not the affinity mask first: a balancer may already have pinned
/// the main thread to one CPU when the scenario starts.
pub fn cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| count_cpu_list(s.trim()))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn count_cpu_list(list: &str) -> Option<usize> {
    let mut n = 0;
    for part in list.split(',').filter(|p| !p.is_empty()) {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

/// The worker threads `scenario` would start.
pub fn thread_count(scenario: &Scenario) -> u64 {
    match scenario {
        Scenario::Spmd(o) => u64::from(o.threads),
        Scenario::Locks(o) => u64::from(o.threads),
        Scenario::Pipeline(o) => o
            .resolved_stages()
            .iter()
            .map(|s| u64::from(s.threads))
            .sum(),
        Scenario::Uneven(o) => o.duty.len() as u64,
    }
}

/// Room kept for the mappings a run makes besides its threads' (the allocator's arenas,
/// the channels of a pipeline, the libraries), in [`thread_limit`].
const SPARE_MAPPINGS: u64 = 1024;

/// The most threads this process can start at once, from what the kernel allows: the
/// smallest of `kernel.threads-max` (threads on the whole machine), `kernel.pid_max`
/// (every thread takes a pid) and what `vm.max_map_count` leaves room for. That last one
/// is the bound met first on most machines (65 530 by default: about 16 000 threads), and
/// the one that must not be crossed: each thread of this program maps 4 areas (its stack,
/// the stack's guard page, its signal stack and that one's guard page), and a thread that
/// cannot map its signal stack does not fail to start, it aborts the whole process
/// (`failed to set up alternative stack guard page`, exit 134). So the count is checked
/// against this before the first thread starts; a failure to start one below it (the
/// user's process limit, memory) is still an error of its own, one line, exit 1.
///
/// `maps_in_use` is the mappings the process has now; a value the kernel does not give
/// is `None` and bounds nothing.
pub fn thread_limit(
    threads_max: Option<u64>,
    pid_max: Option<u64>,
    max_map_count: Option<u64>,
    maps_in_use: u64,
) -> u64 {
    let by_maps = max_map_count.map(|m| m.saturating_sub(maps_in_use + SPARE_MAPPINGS) / 4);
    [threads_max, pid_max, by_maps]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(u64::MAX)
}

/// [`thread_limit`] as the running kernel and this process stand now.
pub fn read_thread_limit() -> u64 {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
    };
    let maps = std::fs::read_to_string("/proc/self/maps").map_or(0, |m| m.lines().count());
    thread_limit(
        read("/proc/sys/kernel/threads-max"),
        read("/proc/sys/kernel/pid_max"),
        read("/proc/sys/vm/max_map_count"),
        maps as u64,
    )
}

/// Refuses a scenario that asks for more threads than the kernel lets this process run
/// ([`read_thread_limit`]), before any starts.
fn check_thread_count(scenario: &Scenario) -> Result<(), WorkloadError> {
    let asked = thread_count(scenario);
    let limit = read_thread_limit();
    if asked > limit {
        return Err(WorkloadError::Invalid {
            scenario: scenario.name(),
            why: format!(
                "{asked} threads: this machine lets the process run at most {limit} at once \
                 (kernel.threads-max, kernel.pid_max, vm.max_map_count / 4)"
            ),
        });
    }
    Ok(())
}

/// Runs a scenario to completion and scores it.
pub fn run(scenario: &Scenario) -> Result<Score, WorkloadError> {
    check_thread_count(scenario)?;
    match scenario {
        Scenario::Spmd(o) => spmd::run(o),
        Scenario::Locks(o) => locks::run(o),
        Scenario::Pipeline(o) => pipeline::run(o),
        Scenario::Uneven(o) => uneven::run(o),
    }
}

/// Starts `n` scoped threads, lets them run `body(i)` together once all have started, and
/// returns their results in index order with the wall time in seconds from that common
/// start until the last one finished.
fn run_threads<'scope, T: Send + 'scope>(
    scenario: &'static str,
    n: usize,
    body: impl Fn(usize) -> T + Sync + 'scope,
) -> Result<(Vec<T>, f64), WorkloadError> {
    use std::sync::{Condvar, Mutex};
    // 0: wait, 1: go, 2: abort (a later thread failed to start).
    let gate = (Mutex::new(0u8), Condvar::new());
    let open = |to: u8| {
        let mut state = gate.0.lock().unwrap_or_else(|p| p.into_inner());
        *state = to;
        gate.1.notify_all();
    };
    std::thread::scope(|s| {
        let (body, gate) = (&body, &gate);
        let mut handles = Vec::with_capacity(n);
        for index in 0..n {
            let spawned = std::thread::Builder::new()
                .name(format!("{scenario}-{index}"))
                .spawn_scoped(s, move || {
                    let state = gate.0.lock().unwrap_or_else(|p| p.into_inner());
                    let state = gate
                        .1
                        .wait_while(state, |st| *st == 0)
                        .unwrap_or_else(|p| p.into_inner());
                    let go = *state == 1;
                    drop(state);
                    go.then(|| body(index))
                });
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    open(2);
                    return Err(WorkloadError::Spawn {
                        scenario,
                        index,
                        source,
                    });
                }
            }
        }
        let t0 = std::time::Instant::now();
        open(1);
        let mut out = Vec::with_capacity(n);
        for h in handles {
            match h.join() {
                Ok(Some(v)) => out.push(v),
                _ => return Err(WorkloadError::Panicked { scenario }),
            }
        }
        Ok((out, t0.elapsed().as_secs_f64()))
    })
}

/// Milliseconds to nanoseconds, rounding, never negative.
fn ms_to_ns(ms: f64) -> u64 {
    (ms.max(0.0) * 1e6).round() as u64
}

/// Microseconds to nanoseconds, rounding, never negative.
fn us_to_ns(us: f64) -> u64 {
    (us.max(0.0) * 1e3).round() as u64
}

#[cfg(test)]
mod tests {
    use super::{count_cpu_list, thread_limit};

    #[test]
    fn thread_limit_is_the_smallest_of_the_kernels_bounds() {
        // 65 530 mappings, 100 in use, 1 024 kept spare: (65 530 − 1 124) / 4 = 16 101.
        assert_eq!(
            thread_limit(Some(192_735), Some(4_194_304), Some(65_530), 100),
            16_101
        );
        assert_eq!(
            thread_limit(Some(192_735), Some(32_768), Some(1 << 30), 100),
            32_768
        );
        assert_eq!(thread_limit(Some(500), None, None, 0), 500);
        assert_eq!(thread_limit(None, None, None, 0), u64::MAX);
        // Mappings already used up: no thread fits.
        assert_eq!(thread_limit(None, None, Some(1000), 5000), 0);
    }

    #[test]
    fn cpu_list_counts_ranges_and_singles() {
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("x"), None);
    }
}
