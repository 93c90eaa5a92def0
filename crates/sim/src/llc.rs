//! Sharing a last-level cache with memory-intensive threads: the contention DINO avoids.
//!
//! The memory model ([`crate::memory`]) charges the bandwidth that memory-bound streams
//! share (a node's LLC miss queue and memory channels, the links). It does not charge the
//! cache *space* they share: a thread whose working set needs more than its share of the
//! LLC keeps it cached only as long as its neighbours do not evict it, and a neighbour
//! streaming through memory evicts it. That costs even when bandwidth is plentiful, and
//! it is what contention-aware schedulers (DI, DINO) separate threads for.
//!
//! A thread is **sensitive** when its op is memory-bound (`m` > 0) and the working set it
//! reuses from the LLC, as its application declares it (`App::llc_working_set_kb`,
//! `llc_working_set_kb` in a scenario), is larger than its share of the LLC (the LLC's
//! size over its CPUs, [`crate::Costs::llc_kb_per_core`]). The memory-bound part of a
//! sensitive thread's op then takes longer, and misses more, by
//!
//! ```text
//!   contention = 1 + SHARED_LLC_PENALTY × occupancy
//!   occupancy  = Σ m of the memory-bound ops running on the LLC's other CPUs
//!                / (CPUs of the LLC − 1)
//! ```
//!
//! `occupancy` is 0 when every other core of the LLC runs compute-bound work or nothing,
//! 1 when all of them run fully memory-bound work. Like the other factors it is fixed
//! when the segment starts.
//!
//! **The measurement.** Fedorova, Blagodurov and Zhuravlev ("Managing contention for
//! shared resources on multicore processors", CACM 53(2), 2010, Fig. 2, the experiment of
//! Zhuravlev et al., ASPLOS 2010) ran four SPEC CPU2006 programs two per memory domain on
//! an Intel quad-core Xeon (two cores per shared L2, the LLC) in every pairing: the
//! memory-intensive Soplex ran about 50 % slower sharing its cache with the
//! memory-intensive Sphinx than with a CPU-bound program. We read that as the penalty of a
//! fully memory-bound thread whose only neighbour is fully memory-bound: occupancy 1,
//! [`SHARED_LLC_PENALTY`] 0.5. It is the worst pairing of the published figure, so the
//! model charges no more than measured.
//!
//! **Who pays.** Only sensitive threads, so a workload that declares no memory-bound work,
//! or no LLC working set, or one that fits its share, runs exactly as before this term. No
//! built-in workload declares one (their `footprint_kb`, what a migration refills, was
//! chosen for that cost, not as a claim about cache sharing); the `memory-mix` scenario
//! does.

use crate::state::{Act, CpuIdx, Kernel, ThreadIdx, Userspace, World};

/// How much longer the memory-bound part of a sensitive thread's work takes when every
/// other CPU of its LLC runs fully memory-bound work (see the module docs).
pub const SHARED_LLC_PENALTY: f64 = 0.5;

/// The contention multiplier for a sensitive thread of working set `footprint_lines` in an
/// LLC of `llc_lines` and `cpus` CPUs whose other CPUs run memory-bound work of total
/// weight `others` (the sum of their `m`).
pub fn contention(footprint_lines: f64, llc_lines: f64, cpus: usize, others: f64) -> f64 {
    if cpus < 2 || footprint_lines <= llc_lines / cpus as f64 || others <= 0.0 {
        return 1.0;
    }
    let occupancy = (others / (cpus - 1) as f64).min(1.0);
    1.0 + SHARED_LLC_PENALTY * occupancy
}

impl Userspace {
    /// The speed factor `f` of thread `t`'s op on CPU `c` (memory-bound fraction `m`, which
    /// is > 0) with the shared-cache contention of its LLC applied to the memory-bound part;
    /// records the multiplier for the counters ([`crate::counters`]).
    pub(crate) fn llc_contended(
        &mut self,
        kernel: &Kernel,
        world: &World,
        (c, t): (CpuIdx, ThreadIdx),
        m: f64,
        f: f64,
    ) -> f64 {
        let extra = self.llc_contention(kernel, world, c, t);
        self.hwc.set_extra(c, extra);
        if extra == 1.0 {
            return f;
        }
        // f = (1 − m) + m × latency × share: the memory-bound part takes `extra` longer.
        (1.0 - m) + (f - (1.0 - m)) * extra
    }

    fn llc_contention(&self, kernel: &Kernel, world: &World, c: CpuIdx, t: ThreadIdx) -> f64 {
        let l = world.hw.llc[c] as usize;
        let (Some(cpus), Some(&lines)) = (world.hw.llc_cpus.get(l), world.hw.llc_lines.get(l))
        else {
            return 1.0;
        };
        let footprint = self.hwc.working_set_lines(world.th[t].app.ix());
        if cpus.len() < 2 || footprint <= lines / cpus.len() as f64 {
            return 1.0;
        }
        let others: f64 = cpus
            .iter()
            .filter(|&&s| s != c)
            .filter_map(|&s| kernel.running(s))
            .map(|u| match world.th[u].act {
                Act::Work { mem, .. } => f64::from(mem),
                _ => 0.0,
            })
            .sum();
        contention(footprint, lines, cpus.len(), others)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llc_contention_only_for_working_sets_beyond_the_share() {
        // 16 CPUs, 16 MiB (262 144 lines): a share is 16 384 lines.
        let lines = 262_144.0;
        assert_eq!(contention(16_384.0, lines, 16, 15.0), 1.0);
        assert_eq!(contention(16_385.0, lines, 16, 0.0), 1.0);
        // Every other core fully memory-bound: the measured 50 %.
        assert!((contention(65_536.0, lines, 16, 15.0) - 1.5).abs() < 1e-12);
        // Half of them at m = 0.6: occupancy 0.3 (7.5 × 0.6 = 4.5 of 15).
        assert!((contention(65_536.0, lines, 16, 4.5) - 1.15).abs() < 1e-12);
        // A lone CPU shares nothing.
        assert_eq!(contention(65_536.0, lines, 1, 3.0), 1.0);
    }
}
