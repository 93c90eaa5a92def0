//! Hardware counters of the simulated threads: instructions, cycles and last-level-cache
//! misses, cumulative per thread, as `perf_event_open` reads them on Linux
//! (`Sample::counters`), so that a policy that reads them (`dino`) runs unchanged here.
//!
//! They follow the work the memory model ([`crate::memory`]) already charges. A segment of
//! `user` nanoseconds on a CPU counts `user × CLOCK_GHZ` cycles. Of a compute op, the
//! nominal work done in it (its time at full speed, `user / factor`) splits into a
//! compute part `(1 − m)` and a memory-bound part `m` (the op's memory-bound fraction):
//!
//! ```text
//!   misses       = m × done × mlp / local_ns × contention
//!   instructions = (1 − m) × done × CLOCK_GHZ × CORE_IPC + base misses × INSTR_PER_MISS
//! ```
//!
//! The memory-bound part is time spent waiting for lines from local memory (`local_ns`
//! each, `mlp` of them in flight, the machine's [`crate::Costs`]); the compute part
//! retires instructions at [`CORE_IPC`]; around each miss the thread retires
//! [`INSTR_PER_MISS`] instructions (the loads and the work on their data). `contention` is
//! the extra misses of a working set that sharing its last-level cache with memory-bound
//! neighbours evicts ([`crate::llc`]): under contention a thread misses more for the same
//! instructions, and its MPKI rises, as DINO's measurements show on real machines. A
//! thread spinning (on a mutex, at a barrier) or in a yield loop retires
//! [`SPIN_IPC`] instructions a cycle and misses nothing.
//!
//! So MPKI depends on the op's memory-bound fraction and the machine: on the Opteron 6272
//! (128 ns, 8 lines in flight) `m` = 0.05 reads 1.1 MPKI (a turtle for DINO), 0.3 reads 7.6,
//! 0.6 (streamcluster) 19 (devils); a fully memory-bound op reads the ceiling,
//! `1000 / INSTR_PER_MISS` = 50. The constants are a shape, not a measurement of any
//! program: the policies read ratios (IPC, MPKI) and classes, never absolute counts.
//!
//! Counting changes nothing in the model: a run with counters read is the run without.

use crate::state::{Act, CpuIdx, ThreadIdx, Userspace, World};
use threadbalance_model::{HwCounters, Nanos};

/// Cycles per nanosecond of the simulated cores.
pub const CLOCK_GHZ: f64 = 2.0;

/// Instructions a cycle of the compute part of an op.
pub const CORE_IPC: f64 = 1.5;

/// Instructions retired around each LLC miss of the memory-bound part.
pub const INSTR_PER_MISS: f64 = 20.0;

/// Instructions a cycle of a spin or yield loop (a `pause` loop retires few).
pub const SPIN_IPC: f64 = 0.25;

/// The counters of every thread, and the cache contention of each CPU's segment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    threads: Vec<HwCounters>,
    /// Per CPU, the misses multiplier of its running segment ([`crate::llc`]), 1 when the
    /// segment is not memory-bound or not contended.
    seg_extra: Vec<f64>,
    /// Per application (in the workload's order), the LLC working set its threads
    /// declare, in lines (`App::llc_working_set_kb`; 0: none declared).
    ws_lines: Vec<f64>,
}

/// What one stretch of a running thread retires, as fractional counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Retired {
    pub instructions: f64,
    pub cycles: f64,
    pub misses: f64,
}

impl Retired {
    /// `user_ns` of CPU time; `work`: the nominal work done (ns) and its memory-bound
    /// fraction, for a compute op (else a spin); `extra`: the misses multiplier.
    pub fn of(user_ns: f64, work: Option<(f64, f64)>, extra: f64, local_ns: f64, mlp: f64) -> Self {
        let cycles = user_ns * CLOCK_GHZ;
        let (instructions, misses) = match work {
            Some((done, m)) => {
                let base = if m > 0.0 {
                    m * done * mlp / local_ns.max(1.0)
                } else {
                    0.0
                };
                (
                    (1.0 - m) * done * CLOCK_GHZ * CORE_IPC + base * INSTR_PER_MISS,
                    base * extra,
                )
            }
            None => (cycles * SPIN_IPC, 0.0),
        };
        Retired {
            instructions,
            cycles,
            misses,
        }
    }

    fn add_to(self, c: &mut HwCounters) {
        c.instructions = c
            .instructions
            .saturating_add(self.instructions.round() as u64);
        c.cycles = c.cycles.saturating_add(self.cycles.round() as u64);
        c.llc_misses = c.llc_misses.saturating_add(self.misses.round() as u64);
    }
}

impl Counters {
    /// Records the LLC working set each application declares.
    pub(crate) fn working_sets(&mut self, apps: &[crate::workload::App]) {
        self.ws_lines = apps
            .iter()
            .map(|a| f64::from(a.llc_working_set_kb) * 16.0)
            .collect();
    }

    /// The LLC working set of application `app`, in lines (0 when not declared).
    pub(crate) fn working_set_lines(&self, app: usize) -> f64 {
        self.ws_lines.get(app).copied().unwrap_or(0.0)
    }

    /// The cache contention of CPU `c`'s segment starting now.
    pub(crate) fn set_extra(&mut self, c: CpuIdx, extra: f64) {
        if self.seg_extra.len() <= c.ix() {
            self.seg_extra.resize(c.ix() + 1, 1.0);
        }
        self.seg_extra[c] = extra;
    }

    fn extra(&self, c: CpuIdx) -> f64 {
        self.seg_extra.get(c.ix()).copied().unwrap_or(1.0)
    }

    fn thread(&mut self, t: ThreadIdx) -> &mut HwCounters {
        if self.threads.len() <= t.ix() {
            self.threads.resize(t.ix() + 1, HwCounters::default());
        }
        &mut self.threads[t]
    }
}

impl Userspace {
    /// What thread `t` retired in `user` of CPU time on CPU `c` in its current activity,
    /// `done` being the nominal work a compute op got through.
    fn retired(
        &self,
        world: &World,
        c: CpuIdx,
        t: ThreadIdx,
        user: Nanos,
        done: f64,
    ) -> Option<Retired> {
        let work = match world.th[t].act {
            Act::Work { mem, .. } => Some((done, f64::from(mem))),
            Act::Spin { .. } | Act::BarrierSpin { .. } | Act::Yield { .. } => None,
            Act::Idle => return None,
        };
        Some(Retired::of(
            user.0 as f64,
            work,
            self.hwc.extra(c),
            world.hw.local_ns,
            world.hw.mlp,
        ))
    }

    /// Counts a stopped segment of thread `t` on CPU `c`: `user` of CPU time, `done` of
    /// nominal work (compute ops). Called by `stop_segment` before the activity changes.
    pub(crate) fn count_segment(
        &mut self,
        world: &World,
        c: CpuIdx,
        t: ThreadIdx,
        user: Nanos,
        done: f64,
    ) {
        if let Some(r) = self.retired(world, c, t, user, done) {
            r.add_to(self.hwc.thread(t));
        }
    }

    /// Thread `t`'s counters now, as a sample reads them: what its stopped segments
    /// counted, plus its running segment so far (`user` of it, at the segment's factor).
    pub(crate) fn counters_now(
        &self,
        world: &World,
        t: ThreadIdx,
        running: Option<Nanos>,
    ) -> HwCounters {
        let mut out = self.hwc.threads.get(t.ix()).copied().unwrap_or_default();
        if let Some(user) = running {
            let c = world.th[t].cpu;
            let done = match world.th[t].act {
                Act::Work { left, .. } => (user.0 as f64 / self.cpus[c].seg_factor).min(left),
                _ => 0.0,
            };
            if let Some(r) = self.retired(world, c, t, user, done) {
                r.add_to(&mut out);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sim;

    #[test]
    fn counters_mpki_follows_the_memory_bound_fraction() {
        // Opteron 6272: 128 ns local, 8 lines in flight; 1 ms of nominal work at full speed.
        let mpki = |m: f64| {
            let r = Retired::of(1e6, Some((1e6, m)), 1.0, 128.0, 8.0);
            r.misses * 1000.0 / r.instructions
        };
        assert_eq!(mpki(0.0), 0.0);
        // m = 0.6: misses 0.6e6 × 8 / 128 = 37 500; instructions 0.4e6 × 3 + 37 500 × 20.
        assert!((mpki(0.6) - 37_500.0 * 1000.0 / 1_950_000.0).abs() < 1e-9);
        assert!(mpki(0.05) < 1.5 && mpki(0.3) > 1.5);
        // The ceiling: every instruction around a miss.
        assert!((mpki(1.0) - 1000.0 / INSTR_PER_MISS).abs() < 1e-9);
        // Monotone in m.
        let xs: Vec<f64> = (0..=10).map(|i| mpki(f64::from(i) / 10.0)).collect();
        assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
    }

    #[test]
    fn counters_contention_adds_misses_not_instructions() {
        let calm = Retired::of(1e6, Some((5e5, 0.6)), 1.0, 128.0, 8.0);
        let hit = Retired::of(1e6, Some((5e5, 0.6)), 1.5, 128.0, 8.0);
        assert_eq!(calm.instructions, hit.instructions);
        assert_eq!(calm.cycles, hit.cycles);
        assert!((hit.misses - 1.5 * calm.misses).abs() < 1e-9);
    }

    #[test]
    fn counters_samples_read_devils_and_turtles_and_only_grow() {
        // `memory-mix` on two LLCs of 4 cores: the memory-intensive programs (80 %
        // memory-bound, bunched on LLC 0) read far above DINO's 1.5 MPKI, the compute-bound
        // ones (2 %) below it.
        let m = crate::machine("package:2 core:4 pu:1", None).unwrap();
        let w = crate::workload("memory-mix", None, None).unwrap();
        let mut sim = Sim::new(&m, &w, &crate::RunOptions::new(1));
        sim.run_until(Nanos::from_millis(500));
        let mut first = Vec::new();
        sim.sample_threads(&mut first);
        sim.run_until(Nanos::from_millis(1000));
        let mut later = Vec::new();
        sim.sample_threads(&mut later);
        assert_eq!(first.len(), 8);
        for (a, b) in first.iter().zip(&later) {
            let (a, b) = (a.counters.unwrap(), b.counters.unwrap());
            assert!(b.instructions > a.instructions && b.cycles > a.cycles);
            assert!(b.llc_misses >= a.llc_misses);
        }
        // Pids 1000 … 4000 are the memory-intensive programs (launched first).
        for s in &later {
            let c = s.counters.unwrap();
            let mpki = c.mpki().unwrap();
            if s.key.pid.0 <= 4000 {
                // 0.8 × 8 / 90 misses and 0.2 × 3 + 20 × those instructions a nominal ns
                // (35 MPKI), misses 1.4× under contention: about 49 MPKI; the op takes
                // 1.32× its nominal time, IPC 2.02 / 1.32 / 2 ≈ 0.77.
                assert!(mpki > 40.0 && mpki < 55.0, "{mpki}");
                assert!(c.ipc().unwrap() < 1.0);
            } else {
                // 0.02 × 8 / 90 misses, 0.98 × 3 instructions a nominal ns: 0.6 MPKI.
                assert!(mpki < 1.0, "{mpki}");
                assert!(c.ipc().unwrap() > 1.2);
            }
        }
    }

    #[test]
    fn counters_spin_retires_few_instructions_and_no_miss() {
        let r = Retired::of(1e6, None, 1.0, 128.0, 8.0);
        assert_eq!(r.cycles, 2e6);
        assert_eq!(r.instructions, 2e6 * SPIN_IPC);
        assert_eq!(r.misses, 0.0);
    }
}
