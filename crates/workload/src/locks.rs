//! `locks`: N threads, M mutexes. Each operation picks a mutex (a per-thread xorshift
//! stream, so runs repeat), computes C µs while holding it, then W µs outside it.
//!
//! Mutex groups (`--groups G`): thread `i` is in group `i mod G` and uses only the mutexes
//! `m` with `m mod G` equal to its group, so threads hand locks only within their group: the
//! case the `handoff` policy is for (with G = 1, the default, every thread uses every mutex).
//!
//! Mutexes: `std` is the standard library's mutex, a futex with a short spin on Linux;
//! `spin-block` spins up to `--spins` times on `try_lock` before blocking (the adaptive
//! spin-then-block mutex of Solaris and glibc's `PTHREAD_MUTEX_ADAPTIVE_NP`).
//!
//! Self-measurement: each worker times every `lock()` call (from the call until it holds the
//! mutex) with the monotonic clock and reports the sum per thread, with its kernel thread id,
//! in the score (`lock_wait_s`, `tids`): the ground truth a lock-time probe is checked
//! against. Two clock reads per operation cost about 50 ns, under 1 % of a 20 µs section.
//!
//! Fair share: the cores' total work Σ(C + W)/C_cores and the busiest mutex's serialized
//! critical sections (≈ N·ops·C/M) both bound the wall time; the larger is reported.

use crate::{Score, WorkloadError, compute, us_to_ns};
use serde::Serialize;
use std::sync::{Mutex, MutexGuard};

/// Which mutex implementation the threads contend on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum MutexKind {
    /// The standard mutex (futex-based).
    Std,
    /// Spin on `try_lock` up to `--spins` times, then block.
    SpinBlock,
}

/// Options of `workload locks`.
#[derive(Debug, Clone, PartialEq, Serialize, clap::Args)]
pub struct LocksOpts {
    /// Worker threads (N).
    #[arg(long, default_value_t = 4)]
    pub threads: u32,
    /// Mutexes (M).
    #[arg(long, default_value_t = 1)]
    pub mutexes: u32,
    /// Compute while holding the mutex, in µs of CPU time (C).
    #[arg(long, default_value_t = 20.0)]
    pub cs_us: f64,
    /// Compute outside the mutex, in µs of CPU time (W).
    #[arg(long, default_value_t = 80.0)]
    pub outside_us: f64,
    /// Operations per thread.
    #[arg(long, default_value_t = 10_000)]
    pub ops: u32,
    /// Mutex groups (G): thread i uses only the mutexes m with m mod G = i mod G.
    #[arg(long, default_value_t = 1)]
    pub groups: u32,
    /// Mutex implementation.
    #[arg(long, value_enum, default_value_t = MutexKind::Std)]
    pub mutex: MutexKind,
    /// Spins before blocking (spin-block only).
    #[arg(long, default_value_t = 1000)]
    pub spins: u32,
}

fn lock<'a>(m: &'a Mutex<u64>, kind: MutexKind, spins: u32) -> MutexGuard<'a, u64> {
    if kind == MutexKind::SpinBlock {
        for _ in 0..spins {
            if let Ok(g) = m.try_lock() {
                return g;
            }
            std::hint::spin_loop();
        }
    }
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The mutex thread `i` takes for random draw `x`: one of the `m` mutexes of its group
/// (`i mod g`), those whose index has the same remainder mod `g`.
fn group_mutex(i: u32, x: u64, m: u32, g: u32) -> u32 {
    let group = i % g;
    // Mutexes group, group + g, group + 2g, … below m.
    let own = (m - group).div_ceil(g);
    group + g * (x % u64::from(own.max(1))) as u32
}

pub(crate) fn run(o: &LocksOpts) -> Result<Score, WorkloadError> {
    if o.threads == 0 || o.mutexes == 0 {
        return Err(WorkloadError::Invalid {
            scenario: "locks",
            why: "--threads and --mutexes must be positive".into(),
        });
    }
    if o.groups == 0 || o.groups > o.mutexes {
        return Err(WorkloadError::Invalid {
            scenario: "locks",
            why: format!(
                "--groups {} must be between 1 and --mutexes ({})",
                o.groups, o.mutexes
            ),
        });
    }
    let mutexes: Vec<Mutex<u64>> = (0..o.mutexes).map(|_| Mutex::new(0)).collect();
    let (cs, outside) = (us_to_ns(o.cs_us), us_to_ns(o.outside_us));
    let (done, wall) = crate::run_threads("locks", o.threads as usize, |i| {
        let tid = nix::unistd::gettid().as_raw();
        let mut waited = std::time::Duration::ZERO;
        let mut x = 0x2545_F491_4F6C_DD1Du64 ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9);
        for _ in 0..o.ops {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let m = &mutexes[group_mutex(i as u32, x, o.mutexes, o.groups) as usize];
            {
                let asked = std::time::Instant::now();
                let mut g = lock(m, o.mutex, o.spins);
                waited += asked.elapsed();
                *g = g.wrapping_add(compute::burn_cpu_ns(cs) & 1);
            }
            compute::burn_cpu_ns(outside);
        }
        let work = f64::from(o.ops) * (cs + outside) as f64 / 1e9;
        (work, waited.as_secs_f64(), tid)
    })?;
    let work: Vec<f64> = done.iter().map(|d| d.0).collect();
    let params = serde_json::to_value(o).unwrap_or_default();
    let score = Score::new("locks", params, wall, &work);
    let total_ops = f64::from(o.ops) * f64::from(o.threads);
    let serialized = total_ops * cs as f64 / 1e9 / f64::from(o.mutexes);
    let per_thread = f64::from(o.ops) * (cs + outside) as f64 / 1e9;
    let fair = (score.work_s / score.cores as f64)
        .max(serialized)
        .max(per_thread);
    let mut score = score.with_fair_share(fair);
    score.ops_per_s = Some(total_ops / wall.max(1e-9));
    score.lock_wait_s = Some(done.iter().map(|d| d.1).collect());
    score.tids = Some(done.iter().map(|d| d.2).collect());
    Ok(score)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_mutex_stays_within_the_threads_group() {
        // 5 mutexes in 2 groups: group 0 has 0, 2, 4 (3 of them), group 1 has 1, 3.
        // Thread 2 (group 0), draws 0..6 → 0 2 4 0 2 4; thread 3 (group 1) → 1 3 1 3 1 3.
        let t2: Vec<u32> = (0..6).map(|x| group_mutex(2, x, 5, 2)).collect();
        assert_eq!(t2, [0, 2, 4, 0, 2, 4]);
        let t3: Vec<u32> = (0..6).map(|x| group_mutex(3, x, 5, 2)).collect();
        assert_eq!(t3, [1, 3, 1, 3, 1, 3]);
        // One group: every mutex, as x mod m.
        assert_eq!(group_mutex(7, 11, 4, 1), 3);
    }
}
