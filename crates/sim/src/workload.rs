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
pub use crate::app::{
    App, FirstTouch, Group, Invalid, MAX_THREADS, Op, QueueSpec, Wait, check_threads,
};
pub(crate) use crate::params::{MS, Params, US, ns};
use serde::Serialize;

mod builtins;
pub use builtins::{bodytrack, ep_barrier, ferret, memcached, spinners, streamcluster};

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
        "lock-groups" => crate::lockgroups::builtin(&mut p)?,
        "memcached-like" => {
            let n = p.count("threads", 64)?;
            let servers = p.count("servers", 4)?;
            let requests = p.count("requests", 20_000)?;
            memcached(n, servers, requests as u64)
        }
        _ => return Ok(None),
    };
    p.finish()?;
    app.validate().map_err(|source| SimError::WorkloadInvalid {
        name: spec.to_string(),
        source,
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
        a.validate().map_err(|source| SimError::WorkloadInvalid {
            name: spec.to_string(),
            source,
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
