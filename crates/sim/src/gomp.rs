//! libgomp's barrier wait, and the OpenMP stencil (`bench/omp_stencil.c`) built on it.
//!
//! A thread of a GCC-compiled OpenMP program that reaches `#pragma omp barrier` and is not
//! the last one there calls libgomp's `do_wait` on the barrier's generation word
//! (`config/linux/wait.h`, used by `gomp_team_barrier_wait_end` in `config/linux/bar.c`):
//!
//! ```text
//! do_spin: count = gomp_spin_count_var
//!          if gomp_managed_threads > gomp_available_cpus: count = gomp_throttled_spin_count_var
//!          repeat count times: if the generation changed, return (released: no sleep)
//!                              else cpu_relax()              (x86: one `pause`)
//! do_wait: if do_spin ran out, futex_wait(generation)        (sleep until the last arrival's
//!                                                             futex_wake(INT_MAX))
//! ```
//!
//! The two counts come from the environment once, at start-up (`initialize_env` in
//! `env.c`; both variables are zero-initialized):
//!
//! | `OMP_WAIT_POLICY` | `gomp_spin_count_var` | `gomp_throttled_spin_count_var` |
//! |---|---|---|
//! | unset (the default) | 300 000 ("3 msec", at libgomp's own estimate of 100 000 spins a millisecond) | 100 |
//! | `active` | 30 000 000 000 ("5 min") | 1000 |
//! | `passive` | 0 | 0 |
//!
//! `GOMP_SPINCOUNT=N` replaces the first count; the throttled one is then capped at it.
//! (Since 2023 an unset policy on a hybrid x86 CPU, CPUID leaf 7 EDX bit 15, spins once:
//! `config/linux/x86/spincount.h`; `spincount=1` models it.) `gomp_available_cpus` is the
//! number of CPUs in the process's affinity mask at start-up (a later `sched_setaffinity`,
//! as a placement policy does, does not change it) and `gomp_managed_threads` the threads
//! libgomp runs, the team's N once the parallel region has started (`gomp_team_start`).
//!
//! So a team of at most one thread per CPU spins for milliseconds and, with sweeps of a
//! fraction of a millisecond, never sleeps: a waiting thread holds its CPU, runnable, as
//! [`Wait::Spin`] does. One thread more than the CPUs and every waiter spins for 100
//! `pause`s, microseconds, then sleeps: it behaves as [`Wait::Block`] with a negligible spin.
//!
//! **What a spin costs in time.** The counts are iterations of a relaxed load and one
//! `pause`, whose latency depends on the CPU: about 10 cycles on Intel cores before Skylake
//! and about 140 on Skylake-SP and later (Intel's optimization reference manual, Skylake
//! server microarchitecture, "pause latency"), and 63 cycles on the 2-core development machine
//! (AMD EPYC, family 25, at 2.45 GHz), where a loop of 3 000 000 iterations of exactly that
//! body took 25.8–26.7 ns of thread CPU time per iteration, five runs. So 300 000 spins are
//! 7.8 ms there, about 1.5 ms on an old Xeon and 15 ms on a new one; 100 spins are 0.4–5 µs.
//! The builtin takes `pause_ns` (default 26, the measured value); any value from 4 to 50
//! keeps the two regimes as they are for sweeps of 0.13 ms, and the figures do not move
//! with it (`crates/sim/README.md`, "The OpenMP barrier").
//!
//! **The stencil.** `bench/omp_stencil.c` gives each thread its own block of 128 × 1024
//! doubles in each of two grids (2 MiB); a sweep is a 5-point average over the block (about
//! 0.13 ms of one thread on the development machine), then the barrier. As a program: a
//! compute op of `sweep_us` (mostly in cache: the block fits in L2 + L3) and a barrier with
//! [`Wait::Gomp`], `work_ms / sweep_us` times. The cache footprint refilled after a move is
//! a parameter (`footprint_kb`, default 512): 8192 lines at the in-LLC line cost over the
//! machine's memory-level parallelism (40 ns / 8), about 41 µs a move, inside the 33–58 µs
//! that one migration cost a thread on the development machine for working sets of 64 KiB
//! to 8 MiB (`docs/cost.md`, "What management costs").

use crate::SimError;
use crate::app::{App, Group, Op, Wait};
use crate::params::{MS, Params, US, ns};

/// What one iteration of libgomp's spin loop (`pause`) costs, ns, measured on the
/// development machine (see the module docs): the default of `omp-stencil`'s `pause_ns`
/// and of a scenario's `gomp` wait.
pub const PAUSE_NS: f64 = 26.0;

/// `OMP_WAIT_POLICY` as libgomp's `parse_wait_policy` reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitPolicy {
    /// Unset (libgomp's default): spin a while, then sleep.
    Default,
    /// `active`: spin for minutes.
    Active,
    /// `passive`: sleep at once.
    Passive,
}

/// libgomp's two spin counts (iterations of `do_spin`'s loop).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpinCounts {
    /// `gomp_spin_count_var`: while the team fits the CPUs.
    pub spin: u64,
    /// `gomp_throttled_spin_count_var`: while there are more threads than CPUs.
    pub throttled: u64,
}

impl SpinCounts {
    /// The counts `initialize_env` sets from `OMP_WAIT_POLICY` and `GOMP_SPINCOUNT`.
    pub fn from_env(policy: WaitPolicy, gomp_spincount: Option<u64>) -> SpinCounts {
        let spin = gomp_spincount.unwrap_or(match policy {
            WaitPolicy::Default => 300_000,
            WaitPolicy::Active => 30_000_000_000,
            WaitPolicy::Passive => 0,
        });
        let throttled = match policy {
            WaitPolicy::Default => 100,
            WaitPolicy::Active => 1000,
            WaitPolicy::Passive => 0,
        };
        SpinCounts {
            spin,
            throttled: throttled.min(spin),
        }
    }

    /// The barrier wait these counts make when one spin costs `pause_ns`.
    pub fn wait(self, pause_ns: f64) -> Wait {
        let ns = |count: u64| (count as f64 * pause_ns).round().min(u64::MAX as f64) as u64;
        Wait::Gomp {
            spin_ns: ns(self.spin),
            throttled_ns: ns(self.throttled),
        }
    }
}

/// How long a waiter spins before it sleeps: `do_spin`'s choice between the full and the
/// throttled count, by `managed` threads (`gomp_managed_threads`) against the `available`
/// CPUs (`gomp_available_cpus`).
pub fn spin_window(spin_ns: u64, throttled_ns: u64, managed: usize, available: usize) -> u64 {
    if managed > available {
        throttled_ns
    } else {
        spin_ns
    }
}

/// `omp-stencil`: `n` threads, `sweeps` sweeps of `sweep_ns` (± `spread`) each, a libgomp
/// barrier (`wait`, a [`Wait::Gomp`]) after every sweep.
pub fn omp_stencil(n: usize, sweep_ns: u64, sweeps: u64, spread: f32, wait: Wait) -> App {
    App {
        name: "omp-stencil".into(),
        groups: vec![Group {
            name: "omp".into(),
            threads: n,
            ops: vec![
                Op::Compute {
                    ns: sweep_ns.max(1),
                    spread,
                    mem: 0.0,
                },
                Op::Barrier { barrier: 0, wait },
            ],
            iterations: Some(sweeps.max(1)),
        }],
        queues: vec![],
        footprint_kb: 512,
        llc_working_set_kb: 0,
        spin_ns: 10_000,
        shared_data: false,
        memory_kb: 0,
        start_ns: 0,
        main_thread: false,
    }
}

/// The `omp-stencil` builtin from its parameters (see [`crate::workload::BUILTINS`]).
pub(crate) fn builtin(p: &mut Params) -> Result<App, SimError> {
    let n = p.count("threads", 3)?;
    let sweep = p.num("sweep_us", 130.0)?;
    let work = p.num("work_ms", 1000.0)?;
    let spread = p.num("spread", 0.0)?;
    let pause = p.num("pause_ns", PAUSE_NS)?;
    let footprint = p.num("footprint_kb", 512.0)?;
    let policy = match p.map.remove("wait_policy").as_deref() {
        None | Some("default") => WaitPolicy::Default,
        Some("active") => WaitPolicy::Active,
        Some("passive") => WaitPolicy::Passive,
        Some(other) => {
            return Err(SimError::Workload {
                name: p.workload.clone(),
                why: format!("wait_policy={other} (expected default, active or passive)"),
            });
        }
    };
    let spincount = if p.map.contains_key("spincount") {
        Some(p.num("spincount", 0.0)?.round() as u64)
    } else {
        None
    };
    if sweep <= 0.0 || spread > 1.0 {
        return Err(SimError::Workload {
            name: p.workload.clone(),
            why: "sweep_us must be positive and spread within 0..1".into(),
        });
    }
    let sweeps = ((work * MS) / (sweep * US)).round().max(1.0) as u64;
    let wait = SpinCounts::from_env(policy, spincount).wait(pause);
    let mut app = omp_stencil(n, ns(sweep * US), sweeps, spread as f32, wait);
    app.footprint_kb = footprint.round().min(f64::from(u32::MAX)) as u32;
    Ok(app)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{RunOptions, Sim};
    use crate::state::ThreadIdx;
    use crate::workload::Workload;
    use threadbalance_model::Nanos;

    #[test]
    fn spin_counts_follow_the_wait_policy_and_gomp_spincount() {
        let d = SpinCounts::from_env(WaitPolicy::Default, None);
        assert_eq!((d.spin, d.throttled), (300_000, 100));
        let a = SpinCounts::from_env(WaitPolicy::Active, None);
        assert_eq!((a.spin, a.throttled), (30_000_000_000, 1000));
        let p = SpinCounts::from_env(WaitPolicy::Passive, None);
        assert_eq!((p.spin, p.throttled), (0, 0));
        // GOMP_SPINCOUNT=50 under the default policy: the throttled 100 is capped at 50.
        let s = SpinCounts::from_env(WaitPolicy::Default, Some(50));
        assert_eq!((s.spin, s.throttled), (50, 50));
        // 300 000 spins × 26 ns = 7.8 ms; 100 × 26 ns = 2.6 µs.
        assert_eq!(
            d.wait(26.0),
            Wait::Gomp {
                spin_ns: 7_800_000,
                throttled_ns: 2_600
            }
        );
    }

    #[test]
    fn builtin_omp_stencil_parses_parameters() {
        let w = crate::workload::builtin("omp-stencil:sweep_us=100,work_ms=50", Some(4))
            .unwrap()
            .unwrap();
        let a = &w.apps[0];
        // 50 ms of work in sweeps of 0.1 ms: 500 sweeps of 4 threads.
        assert_eq!(a.threads(), 4);
        assert_eq!(a.groups[0].iterations, Some(500));
        assert_eq!(
            a.groups[0].ops[1],
            Op::Barrier {
                barrier: 0,
                wait: Wait::Gomp {
                    spin_ns: 7_800_000,
                    throttled_ns: 2_600
                }
            }
        );
        // OMP_WAIT_POLICY=passive: no spin at all.
        let p = crate::workload::builtin("omp-stencil:wait_policy=passive", None)
            .unwrap()
            .unwrap();
        assert!(matches!(
            p.apps[0].groups[0].ops[1],
            Op::Barrier {
                wait: Wait::Gomp {
                    spin_ns: 0,
                    throttled_ns: 0
                },
                ..
            }
        ));
        assert!(crate::workload::builtin("omp-stencil:wait_policy=lazy", None).is_err());
        assert!(crate::workload::builtin("omp-stencil:sweep_us=0", None).is_err());
        assert!(crate::workload::builtin("omp-stencil:bogus=1", None).is_err());
    }

    #[test]
    fn spin_window_is_throttled_when_threads_exceed_the_cpus() {
        // 16 threads on 16 CPUs: the full count; 17 on 16: the throttled one.
        assert_eq!(spin_window(7_800_000, 2_600, 16, 16), 7_800_000);
        assert_eq!(spin_window(7_800_000, 2_600, 17, 16), 2_600);
    }

    /// Two threads on the 2-core machine meeting at a libgomp barrier ten times: `fast`
    /// computes 0.1 ms a round, `slow` 1 ms, so `fast` waits 0.9 ms each time.
    fn uneven(threads_fast: usize, wait: Wait) -> Sim {
        let group = |name: &str, threads: usize, us: u64| Group {
            name: name.into(),
            threads,
            ops: vec![
                Op::Compute {
                    ns: us * 1_000,
                    spread: 0.0,
                    mem: 0.0,
                },
                Op::Barrier { barrier: 0, wait },
            ],
            iterations: Some(10),
        };
        let mut app = omp_stencil(1, 1, 1, 0.0, wait);
        app.groups = vec![group("fast", threads_fast, 100), group("slow", 1, 1_000)];
        let w = Workload {
            name: "uneven-omp".into(),
            description: String::new(),
            apps: vec![app],
        };
        let m = crate::suite::two_core().unwrap();
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.run_until(Nanos::from_secs(5));
        assert!(sim.finished());
        sim.check_invariants().unwrap();
        sim
    }

    #[test]
    fn gomp_wait_spin_expires_then_the_waiter_sleeps() {
        // A 50 µs window against 0.9 ms waits: `fast` spins 50 µs, then sleeps, every round
        // (10 voluntary switches), and burns 10 × (0.1 + 0.05) = 1.5 ms of CPU, not 10 ms.
        let sim = uneven(
            1,
            Wait::Gomp {
                spin_ns: 50_000,
                throttled_ns: 0,
            },
        );
        let fast = &sim.world.th[ThreadIdx(0)];
        assert_eq!(fast.voluntary, 10);
        assert!(fast.run < Nanos(2_000_000), "ran {:?}", fast.run);
    }

    #[test]
    fn gomp_wait_release_during_the_spin_means_no_sleep() {
        // A 7.8 ms window (the default count at 26 ns) against 0.9 ms waits: the release
        // always comes first; `fast` never sleeps and holds its CPU the whole 10 ms.
        let sim = uneven(
            1,
            SpinCounts::from_env(WaitPolicy::Default, None).wait(26.0),
        );
        let fast = &sim.world.th[ThreadIdx(0)];
        assert_eq!(fast.voluntary, 0);
        assert!(fast.run > Nanos(9_500_000), "ran {:?}", fast.run);
    }

    #[test]
    fn gomp_wait_is_throttled_with_more_threads_than_cpus() {
        // The same window, but two `fast` threads and `slow`: 3 threads on 2 CPUs, so the
        // waiters spin the throttled 2.6 µs and sleep. Each round at least one `fast`
        // thread waits for `slow` longer than that (they cannot all run at once), so there
        // are at least 10 sleeps; unthrottled, the spinning `fast` pair would not sleep
        // before its 7.8 ms ran out.
        let wait = SpinCounts::from_env(WaitPolicy::Default, None).wait(26.0);
        let sim = uneven(2, wait);
        let sleeps: u64 = (0..2).map(|i| sim.world.th[ThreadIdx(i)].voluntary).sum();
        assert!(sleeps >= 10, "{sleeps} sleeps");
        let Wait::Gomp { spin_ns, .. } = wait else {
            unreachable!()
        };
        let unthrottled = uneven(
            2,
            Wait::Gomp {
                spin_ns,
                throttled_ns: spin_ns,
            },
        );
        let spun: u64 = (0..2)
            .map(|i| unthrottled.world.th[ThreadIdx(i)].voluntary)
            .sum();
        assert!(
            spun < sleeps,
            "{spun} sleeps unthrottled, {sleeps} throttled"
        );
    }
}
