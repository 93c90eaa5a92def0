//! Workloads: applications whose threads run small programs of operations.
//!
//! A thread repeats its group's list of [`Op`]s `iterations` times (or until a queue it
//! reads is closed), then exits. Operations are coarse on purpose: one compute op is one
//! event, not one per nanosecond.
//!
//! | op | what the thread does | what it costs |
//! |---|---|---|
//! | `Compute` | runs `ns` of work (± `spread`), a fraction `mem` of it memory-bound | CPU time; memory part slowed by remote pages and shared bandwidth |
//! | `Lock` | acquires a mutex (spin, then block), holds it `hold_ns`, releases | the lock's line and `lines` protected lines move from the previous holder |
//! | `Ticket` | takes the next ticket of a mutex-protected work pool, runs the following `body` ops for it, comes back until the pool is empty | as `Lock`, once per ticket and once more to find the pool empty |
//! | `Barrier` | waits until every thread of the barrier arrives (`spin`, `yield`, `block` or libgomp's spin-then-sleep, [`crate::gomp`]) | spin/yield burn CPU, block sleeps |
//! | `Put` / `Get` | produces into / consumes from a bounded queue (blocking when full / empty) | the item's `lines` move from producer to consumer |
//! | `Sleep` | blocks for `ns` (I/O, network) | nothing |
//!
//! Built-in workloads model the papers' benchmarks; each takes parameters after a colon,
//! e.g. `ep-barrier:phase_ms=10,wait=yield` (see [`BUILTINS`] and `scenarios/README.md`).
//! Two workloads joined with `+` run at once as two applications
//! (`ferret-pipeline+streamcluster`).

use crate::SimError;
use serde::Serialize;
use std::collections::BTreeMap;

mod builtins;
pub(crate) use builtins::ferret_pipeline;
pub use builtins::{bodytrack, ep_barrier, ferret, memcached, spinners, streamcluster};

/// How a thread waits at a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Busy-waits on the CPU until released (preempted only at slice end).
    Spin,
    /// Calls `sched_yield` in a loop: gives the CPU to any other runnable thread there.
    Yield,
    /// Spins briefly, then sleeps on a futex (pthread barrier).
    Block,
    /// libgomp's barrier wait ([`crate::gomp`]): spins `spin_ns`, or `throttled_ns` while
    /// the application has more threads than the CPUs it started with, then sleeps on the
    /// futex.
    Gomp {
        /// The spin with at most one thread per CPU (`gomp_spin_count_var` spins), ns.
        spin_ns: u64,
        /// The spin with more threads than CPUs (`gomp_throttled_spin_count_var`), ns.
        throttled_ns: u64,
    },
}

/// One operation of a thread's program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum Op {
    /// Work for `ns` nanoseconds at full speed, varied uniformly by ±`spread` (a fraction),
    /// of which a fraction `mem` is memory-bound.
    Compute {
        /// Nominal duration in nanoseconds.
        ns: u64,
        /// Uniform variation, as a fraction of `ns` (0.2 = ±20 %).
        spread: f32,
        /// Memory-bound fraction (0 = all in cache, 1 = all memory stalls).
        mem: f32,
    },
    /// A critical section: acquire mutex `lock`, work `hold_ns`, release.
    Lock {
        /// Lock index within the application.
        lock: u16,
        /// Work inside the critical section, nanoseconds.
        hold_ns: u64,
        /// Cache lines of protected data the section touches (they follow the lock).
        lines: u32,
    },
    /// Take the next ticket of a shared work pool, as PARSEC's `TicketDispenser` does: lock
    /// mutex `lock` (spin, then block, as [`Op::Lock`]), take one of the pool's `items`
    /// tickets and unlock; with a ticket, run the next `body` ops (the work unit) and come
    /// back for another; once the pool is empty, go on after them.
    ///
    /// The pool belongs to the mutex. Each thread counts the ticket loops it has finished
    /// (found the pool empty); a thread starting loop *k* on a pool last filled for an
    /// earlier loop refills it with `items` tickets (PARSEC's rank 0 calls
    /// `resetDispenser` before the workers' `workInit` barrier). So every thread must run
    /// the same sequence of ticket loops, and a barrier should separate two loops on one
    /// pool: a thread still in loop *k* when another has refilled the pool for *k* + 1
    /// finds it empty.
    Ticket {
        /// Mutex (and pool) index within the application.
        lock: u16,
        /// Tickets in the pool at each loop.
        items: u32,
        /// Work inside the critical section (reading and advancing the counter), ns.
        hold_ns: u64,
        /// Cache lines of protected data the section touches (the counter).
        lines: u32,
        /// Ops after this one that process one ticket (at least 1, no ticket among them).
        body: u16,
    },
    /// Wait at barrier `barrier` until all its threads arrive.
    Barrier {
        /// Barrier index within the application.
        barrier: u16,
        /// How to wait.
        wait: Wait,
    },
    /// Put one item into bounded queue `queue` (blocks while full).
    Put {
        /// Queue index within the application.
        queue: u16,
    },
    /// Take one item from queue `queue` (blocks while empty; exits when closed and empty).
    Get {
        /// Queue index within the application.
        queue: u16,
    },
    /// Sleep for `ns` nanoseconds (± `spread`).
    Sleep {
        /// Nominal duration in nanoseconds.
        ns: u64,
        /// Uniform variation, as a fraction.
        spread: f32,
    },
}

/// Threads that run the same program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// Name, for reports (`rank`, `worker`).
    pub name: String,
    /// How many threads run it.
    pub threads: usize,
    /// The program.
    pub ops: Vec<Op>,
    /// Times each thread runs the program; `None` = until a queue it reads closes.
    pub iterations: Option<u64>,
}

/// A bounded queue between threads (a condition-variable protected ring).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSpec {
    /// Items it holds before producers block.
    pub capacity: usize,
    /// Cache lines of one item, moved from producer to consumer.
    pub lines: u32,
}

/// One multithreaded process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct App {
    /// Its name.
    pub name: String,
    /// Its threads, by program; created in this order.
    pub groups: Vec<Group>,
    /// Its queues.
    pub queues: Vec<QueueSpec>,
    /// Cache footprint of each thread in KiB, refilled after a migration.
    pub footprint_kb: u32,
    /// The working set each thread reuses from the last-level cache, KiB, when declared:
    /// beyond its share of the LLC, memory-bound neighbours evict it and its memory-bound
    /// work takes longer ([`crate::llc`]). 0: not declared, no such contention.
    #[serde(skip_serializing_if = "is_zero")]
    pub llc_working_set_kb: u32,
    /// How long a thread spins on a held mutex before sleeping, nanoseconds.
    pub spin_ns: u64,
    /// Whether memory-bound work reads data shared by all threads (placed by the first
    /// thread's first touch) rather than each thread's own pages. See [`App::first_touch`].
    pub shared_data: bool,
    /// Resident memory first-touched, KiB: the shared data (with `shared_data`) or each
    /// thread's own pages; what `numa_maps` reports per node. 0 = `footprint_kb` stands in.
    pub memory_kb: u32,
    /// Delay from the start of the run until the application is launched (its first thread
    /// is exec'd), nanoseconds.
    pub start_ns: u64,
    /// Whether the first group's single thread is a pthreads program's main thread: it runs
    /// its program (reading the input: the first touch of shared data), then creates the
    /// other threads and sleeps in `pthread_join` until they have exited, then exits.
    pub main_thread: bool,
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}

/// Who first touches an application's memory (Chiang & Su 2021, Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirstTouch {
    /// The thread group leader allocates and initializes the shared working set: its pages
    /// sit on the node where the leader ran then (`shared_data`).
    Leader,
    /// Each thread allocates and initializes its own pages, on the node where it first runs
    /// memory-bound work.
    Thread,
}

impl App {
    /// Who first touches its memory.
    pub fn first_touch(&self) -> FirstTouch {
        if self.shared_data {
            FirstTouch::Leader
        } else {
            FirstTouch::Thread
        }
    }

    /// Threads in the application.
    pub fn threads(&self) -> usize {
        self.groups.iter().map(|g| g.threads).sum()
    }

    /// Number of locks (highest index used + 1).
    pub fn locks(&self) -> usize {
        self.max_index(|op| match op {
            Op::Lock { lock, .. } | Op::Ticket { lock, .. } => Some(*lock),
            _ => None,
        })
    }

    /// Threads taking part in each barrier.
    pub fn barrier_parties(&self) -> Vec<usize> {
        let n = self.max_index(|op| match op {
            Op::Barrier { barrier, .. } => Some(*barrier),
            _ => None,
        });
        let mut parties = vec![0; n];
        for g in &self.groups {
            let mut seen = vec![false; n];
            for op in &g.ops {
                if let Op::Barrier { barrier, .. } = op {
                    seen[usize::from(*barrier)] = true;
                }
            }
            for (p, s) in parties.iter_mut().zip(seen) {
                if s {
                    *p += g.threads;
                }
            }
        }
        parties
    }

    fn max_index(&self, f: impl Fn(&Op) -> Option<u16>) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.ops.iter())
            .filter_map(f)
            .map(|i| usize::from(i) + 1)
            .max()
            .unwrap_or(0)
    }

    /// Checks indices and sizes; called by every constructor.
    pub fn validate(&self) -> Result<(), String> {
        let threads = self
            .groups
            .iter()
            .try_fold(0usize, |n, g| n.checked_add(g.threads));
        if self.groups.is_empty() || threads == Some(0) {
            return Err(format!("application {:?} has no thread", self.name));
        }
        check_threads(threads.unwrap_or(usize::MAX))?;
        for g in &self.groups {
            if g.ops.is_empty() {
                return Err(format!("group {:?} has no operation", g.name));
            }
            let reads = g.ops.iter().any(|o| matches!(o, Op::Get { .. }));
            if g.iterations.is_none() && !reads {
                return Err(format!(
                    "group {:?} has no iteration count and reads no queue: it would never end",
                    g.name
                ));
            }
            for (i, op) in g.ops.iter().enumerate() {
                match *op {
                    Op::Ticket { body, items, .. } => {
                        let end = i + 1 + usize::from(body);
                        let nested = g.ops[i + 1..end.min(g.ops.len())]
                            .iter()
                            .any(|o| matches!(o, Op::Ticket { .. }));
                        if body == 0 || end > g.ops.len() || nested || items == 0 {
                            return Err(format!(
                                "group {:?}: a ticket op needs items ≥ 1 and a body of 1 or \
                                 more following ops without another ticket op",
                                g.name
                            ));
                        }
                    }
                    Op::Put { queue } | Op::Get { queue }
                        if usize::from(queue) >= self.queues.len() =>
                    {
                        return Err(format!(
                            "group {:?} uses queue {queue}, not declared",
                            g.name
                        ));
                    }
                    Op::Compute { spread, mem, .. }
                        if !(0.0..=1.0).contains(&spread) || !(0.0..=1.0).contains(&mem) =>
                    {
                        return Err(format!(
                            "group {:?}: spread and mem must be within 0..1",
                            g.name
                        ));
                    }
                    Op::Sleep { spread, .. } if !(0.0..=1.0).contains(&spread) => {
                        return Err(format!("group {:?}: spread must be within 0..1", g.name));
                    }
                    _ => {}
                }
            }
        }
        if self.main_thread {
            let main = &self.groups[0];
            let sync = main
                .ops
                .iter()
                .any(|o| !matches!(o, Op::Compute { .. } | Op::Sleep { .. }));
            if main.threads != 1 || main.iterations.is_none() || sync {
                return Err(format!(
                    "application {:?}: the main thread's group must have one thread, an \
                     iteration count and only compute and sleep operations",
                    self.name
                ));
            }
        }
        if self.queues.iter().any(|q| q.capacity == 0) {
            return Err(format!(
                "application {:?} has a queue of capacity 0",
                self.name
            ));
        }
        Ok(())
    }
}

/// What the simulator runs: one or more applications at once.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Workload {
    /// Its name as given.
    pub name: String,
    /// One line on what it models.
    pub description: String,
    /// The applications.
    pub apps: Vec<App>,
}

impl Workload {
    /// Threads over all applications.
    pub fn threads(&self) -> usize {
        self.apps.iter().map(App::threads).sum()
    }
}

/// The most threads one simulation holds, all applications together: 65 536.
///
/// Twice the kernel's default `pid_max` (32 768; a real machine with that default cannot
/// run more threads at once) and 4 times the roughly 16 000 threads one process reaches
/// with the default `vm.max_map_count` (see the `workload` crate's `thread_limit`), so no
/// program the simulator models is refused. Above it the simulator's own state is the
/// bound: every thread has its slots in the run queues, the samples and the report
/// from the start (10⁸ threads asked for 7.6 GB at once and aborted), and a run of
/// seconds of simulated time takes hours. A scenario or `--threads` above it is refused,
/// one line naming the count, before anything is built.
pub const MAX_THREADS: usize = 65_536;

/// `Err` naming `threads` when it is above [`MAX_THREADS`].
pub fn check_threads(threads: usize) -> Result<(), String> {
    if threads > MAX_THREADS {
        return Err(format!(
            "{threads} threads: the simulator holds at most {MAX_THREADS} (all applications \
             together)"
        ));
    }
    Ok(())
}

/// Built-in workloads and their parameters (defaults in parentheses).
pub const BUILTINS: &[(&str, &str)] = &[
    (
        "ep-barrier",
        "NAS EP with barriers (speed balancing §4): threads (3) each do work_ms (3000) in phases of phase_ms (10), then wait=spin|yield|block (block)",
    ),
    (
        "omp-stencil",
        "an OpenMP stencil on libgomp (bench/omp_stencil.c): threads (3) each run sweeps of sweep_us (130, ± spread 0) until work_ms (1000), a team barrier after each; libgomp's wait: spin spincount (300000, GOMP_SPINCOUNT) × pause_ns (26), or 100 × pause_ns with more threads than CPUs, then sleep; wait_policy=default|active|passive (OMP_WAIT_POLICY); footprint_kb (512)",
    ),
    (
        "spinners",
        "independent always-runnable threads (calibration): threads (3) compute work_ms (100000) each",
    ),
    (
        "ferret-pipeline",
        "PARSEC ferret (Tumbler Table I): load → segment → extract → vector → rank → out; threads (64) split over the 4 middle stages; items (3000)",
    ),
    (
        "streamcluster",
        "PARSEC streamcluster: threads (64) of statically partitioned, data-dependent phases (phases 150) with a shared update and a barrier",
    ),
    (
        "bodytrack",
        "PARSEC bodytrack (Shuffling §2): a main thread sends each kernel (12 edge passes, then 5 annealing layers of particle weights and resampling) to threads (64) workers, which take work-unit tickets from a mutex-protected dispenser until it is empty, then meet at a barrier; frames (100)",
    ),
    (
        "memcached-like",
        "a cache server: servers (4) threads serve requests (20000) from threads (64) clients through one queue and one cache lock",
    ),
    (
        "lock-groups",
        "threads (64) in groups (4), thread i using mutex i mod groups: lock for hold_us (1) with lines (64) protected lines, compute outside_us (150, ± 50 %), ops (12000) times; hold=equal|distinct (distinct: group g holds hold_us · ratio^g, ratio (2)). The positive control of lock-aware placement (see the lockgroups module)",
    ),
    (
        "parsec-mix",
        "Chiang & Su §4.2: 27 PARSEC 3.0 programs at once (Table 2's first touch by leader or by thread), 16 workers each (threads sets them all, 1–32) splitting a fixed input, starting over 4 s; scale (1) multiplies their inputs; only=NAME runs one of them alone (e.g. only=facesim, only=splash2x.fft)",
    ),
];

/// Parameters after `name:` as `key=value` pairs.
#[derive(Debug, Default)]
pub(crate) struct Params {
    pub(crate) map: BTreeMap<String, String>,
    pub(crate) workload: String,
}

impl Params {
    fn parse(workload: &str, text: &str) -> Result<Params, SimError> {
        let mut map = BTreeMap::new();
        for kv in text.split(',').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| SimError::Workload {
                name: workload.to_string(),
                why: format!("parameter {kv:?} is not key=value"),
            })?;
            map.insert(k.trim().to_string(), v.trim().to_string());
        }
        Ok(Params {
            map,
            workload: workload.to_string(),
        })
    }

    pub(crate) fn num(&mut self, key: &str, default: f64) -> Result<f64, SimError> {
        match self.map.remove(key) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| SimError::Workload {
                    name: self.workload.clone(),
                    why: format!("{key}={v} is not a non-negative number"),
                }),
        }
    }

    pub(crate) fn count(&mut self, key: &str, default: usize) -> Result<usize, SimError> {
        let x = self.num(key, default as f64)?;
        if x < 1.0 || x.fract() != 0.0 {
            return Err(SimError::Workload {
                name: self.workload.clone(),
                why: format!("{key} must be a whole number ≥ 1"),
            });
        }
        Ok(x as usize)
    }

    fn wait(&mut self, default: Wait) -> Result<Wait, SimError> {
        match self.map.remove("wait").as_deref() {
            None => Ok(default),
            Some("spin") => Ok(Wait::Spin),
            Some("yield") => Ok(Wait::Yield),
            Some("block") => Ok(Wait::Block),
            Some(other) => Err(SimError::Workload {
                name: self.workload.clone(),
                why: format!("wait={other} (expected spin, yield or block)"),
            }),
        }
    }

    fn finish(self) -> Result<(), SimError> {
        match self.map.keys().next() {
            None => Ok(()),
            Some(k) => Err(SimError::Workload {
                name: self.workload,
                why: format!("unknown parameter {k:?}"),
            }),
        }
    }
}

pub(crate) const MS: f64 = 1e6;
pub(crate) const US: f64 = 1e3;

pub(crate) fn ns(x: f64) -> u64 {
    x.round() as u64
}

/// A built-in workload by name (with optional `:key=value,…` parameters); `threads`
/// overrides the thread-count parameter.
pub fn builtin(spec: &str, threads: Option<usize>) -> Result<Option<Workload>, SimError> {
    let (name, rest) = spec.split_once(':').unwrap_or((spec, ""));
    let mut p = Params::parse(spec, rest)?;
    if let Some(t) = threads {
        p.map.insert("threads".into(), t.to_string());
    }
    let app = match name {
        "parsec-mix" => {
            let scale = p.num("scale", 1.0)?;
            // Workers of every program; each its own count (1–32) when not given.
            let workers = if p.map.contains_key("threads") {
                Some(p.count("threads", 1)?)
            } else {
                None
            };
            let only = p.map.remove("only");
            return parsec_mix_builtin(spec, workers, scale, only.as_deref(), p);
        }
        "ep-barrier" => {
            let n = p.count("threads", 3)?;
            let phase = p.num("phase_ms", 10.0)?;
            let work = p.num("work_ms", 3000.0)?;
            let wait = p.wait(Wait::Block)?;
            ep_barrier(n, ns(phase * MS), ns(work * MS), wait)
        }
        "omp-stencil" => crate::gomp::builtin(&mut p)?,
        "spinners" => {
            let n = p.count("threads", 3)?;
            let work = p.num("work_ms", 100_000.0)?;
            spinners(n, ns(work * MS))
        }
        "ferret-pipeline" => {
            let n = p.count("threads", 64)?;
            let items = p.count("items", 3000)?;
            ferret(n, items as u64)
        }
        "streamcluster" => {
            let n = p.count("threads", 64)?;
            let phases = p.count("phases", 150)?;
            streamcluster(n, phases as u64)
        }
        "bodytrack" => {
            let n = p.count("threads", 64)?;
            let frames = p.count("frames", 100)?;
            bodytrack(n, frames as u64)
        }
        "lock-groups" => {
            let n = p.count("threads", 64)?;
            let groups = p.count("groups", 4)?;
            let hold = match p.map.remove("hold").as_deref() {
                None | Some("distinct") => crate::lockgroups::Hold::Distinct,
                Some("equal") => crate::lockgroups::Hold::Equal,
                Some(other) => {
                    return Err(SimError::Workload {
                        name: spec.to_string(),
                        why: format!("hold={other} (expected equal or distinct)"),
                    });
                }
            };
            if groups > 16 {
                return Err(SimError::Workload {
                    name: spec.to_string(),
                    why: format!("groups={groups}: at most 16"),
                });
            }
            let hold_us = p.num("hold_us", 1.0)?;
            let ratio = p.num("ratio", 2.0)?;
            let outside = p.num("outside_us", 150.0)?;
            let lines = p.count("lines", 64)?;
            let ops = p.count("ops", 12_000)?;
            crate::lockgroups::lock_groups(&crate::lockgroups::LockGroups {
                threads: n,
                groups,
                hold,
                hold_ns: ns(hold_us * US),
                ratio,
                outside_ns: ns(outside * US),
                lines: lines.min(u32::MAX as usize) as u32,
                ops: ops as u64,
            })
        }
        "memcached-like" => {
            let n = p.count("threads", 64)?;
            let servers = p.count("servers", 4)?;
            let requests = p.count("requests", 20_000)?;
            memcached(n, servers, requests as u64)
        }
        _ => return Ok(None),
    };
    p.finish()?;
    app.validate().map_err(|why| SimError::Workload {
        name: spec.to_string(),
        why,
    })?;
    let description = BUILTINS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(String::new(), |(_, d)| (*d).to_string());
    Ok(Some(Workload {
        name: spec.to_string(),
        description,
        apps: vec![app],
    }))
}

/// `parsec-mix` (see [`crate::parsec`]): several applications, so it is built apart.
fn parsec_mix_builtin(
    spec: &str,
    workers: Option<usize>,
    scale: f64,
    only: Option<&str>,
    p: Params,
) -> Result<Option<Workload>, SimError> {
    p.finish()?;
    if scale <= 0.0 {
        return Err(SimError::Workload {
            name: spec.to_string(),
            why: "scale must be positive".into(),
        });
    }
    let mut apps = crate::parsec::parsec_mix(workers, scale);
    if let Some(name) = only {
        // One program of the mix, alone, launched at once.
        let names: Vec<String> = apps.iter().map(|a| a.name.clone()).collect();
        apps.retain(|a| a.name == name);
        let Some(a) = apps.first_mut() else {
            return Err(SimError::Workload {
                name: spec.to_string(),
                why: format!(
                    "only={name} is not a program of the mix ({})",
                    names.join(", ")
                ),
            });
        };
        a.start_ns = 0;
    }
    for a in &apps {
        a.validate().map_err(|why| SimError::Workload {
            name: spec.to_string(),
            why,
        })?;
    }
    let description = BUILTINS
        .iter()
        .find(|(n, _)| *n == "parsec-mix")
        .map_or(String::new(), |(_, d)| (*d).to_string());
    Ok(Some(Workload {
        name: spec.to_string(),
        description,
        apps,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_ep_barrier_parses_parameters() {
        let w = builtin("ep-barrier:phase_ms=100,wait=yield,work_ms=3000", None)
            .unwrap()
            .unwrap();
        let a = &w.apps[0];
        assert_eq!(a.threads(), 3);
        // 3000 ms of work in 100 ms phases: 30 iterations.
        assert_eq!(a.groups[0].iterations, Some(30));
        assert_eq!(a.barrier_parties(), vec![3]);
        assert!(builtin("ep-barrier:wait=nap", None).is_err());
        assert!(builtin("ep-barrier:bogus=1", None).is_err());
        assert!(builtin("ep-barrier:threads=0", None).is_err());
        assert!(builtin("nonesuch", None).unwrap().is_none());
    }

    #[test]
    fn builtin_parsec_mix_runs_one_program_alone() {
        let w = builtin("parsec-mix:only=facesim,threads=64", None)
            .unwrap()
            .unwrap();
        assert_eq!(w.apps.len(), 1);
        let a = &w.apps[0];
        assert_eq!(a.name, "facesim");
        // Launched at once (it starts 2 s into the mix), main thread + 64 workers.
        assert_eq!(a.start_ns, 0);
        assert_eq!(a.threads(), 65);
        let e = builtin("parsec-mix:only=nonesuch", None).unwrap_err();
        assert!(e.to_string().contains("only=nonesuch"), "{e}");
    }

    #[test]
    fn builtin_ferret_has_six_stages_and_threads_override() {
        let w = builtin("ferret-pipeline", Some(128)).unwrap().unwrap();
        let a = &w.apps[0];
        assert_eq!(a.groups.len(), 6);
        // 4 stages × 32 threads + load + out.
        assert_eq!(a.threads(), 130);
        assert_eq!(a.queues.len(), 5);
    }

    #[test]
    fn bodytrack_workers_share_dispensers_and_barriers_with_the_main_thread() {
        let w = builtin("bodytrack:frames=2", Some(8)).unwrap().unwrap();
        let a = &w.apps[0];
        // 8 workers and the main thread; both barriers include the main thread.
        assert_eq!(a.threads(), 9);
        assert_eq!(a.barrier_parties(), vec![9, 9]);
        assert_eq!(a.locks(), 2);
        let tickets: u32 = a.groups[1]
            .ops
            .iter()
            .filter_map(|o| match o {
                Op::Ticket { items, .. } => Some(*items),
                _ => None,
            })
            .sum();
        // 12 edge kernels × 60 + 5 layers × (1000 + 125) tickets per frame.
        assert_eq!(tickets, 12 * 60 + 5 * 1125);
    }

    #[test]
    fn ticket_ops_need_a_body_within_the_program() {
        let mut a = bodytrack(2, 1);
        a.groups[1].ops.push(Op::Ticket {
            lock: 0,
            items: 4,
            hold_ns: 100,
            lines: 1,
            body: 1,
        });
        assert!(a.validate().is_err());
    }
}
