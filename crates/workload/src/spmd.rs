//! `spmd`: N threads, K phases of S ms of compute each, a barrier after every phase: the
//! shape of NAS EP with barriers, the speed balancing paper's §6.1 experiment.
//!
//! Fair share: each thread has W = K·S of work. On C cores no placement can finish before
//! W (each thread needs its own work) nor before N·W/C (the cores' total), so the fair-share
//! wall time is `max(W, N·W/C)`. With 3 threads on 2 cores and S = 10 ms, a static 2+1
//! split needs 2·S per phase instead of 1.5·S: 75 % of the fair share. C is the machine's
//! online CPUs unless `--cores` says otherwise (a program confined by `taskset -c 0-8` to 9
//! of 16 CPUs is judged against 9).

use crate::{PhaseBarrier, Score, WorkloadError, barrier::BarrierKind, compute, ms_to_ns};
use serde::Serialize;

/// Options of `workload spmd`.
#[derive(Debug, Clone, PartialEq, Serialize, clap::Args)]
pub struct SpmdOpts {
    /// Worker threads (N).
    #[arg(long, default_value_t = 3)]
    pub threads: u32,
    /// Compute per phase and thread, in ms of the thread's own CPU time (S).
    #[arg(long, default_value_t = 10.0)]
    pub phase_ms: f64,
    /// Total compute per thread, in ms; the phase count is work / phase unless --phases.
    #[arg(long, default_value_t = 3000.0)]
    pub work_ms: f64,
    /// Number of phases (K); overrides --work-ms.
    #[arg(long)]
    pub phases: Option<u32>,
    /// How threads wait at the barrier.
    #[arg(long, value_enum, default_value_t = BarrierKind::Yield)]
    pub barrier: BarrierKind,
    /// CPUs the fair share is computed for [default: the machine's online CPUs]; give the
    /// size of the CPU set when the program is confined to fewer (`taskset`, a cpuset).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores: Option<u32>,
}

impl SpmdOpts {
    /// The number of phases K: `--phases`, else work / phase, at least 1.
    pub fn phase_count(&self) -> u32 {
        self.phases
            .unwrap_or_else(|| (self.work_ms / self.phase_ms.max(1e-6)).round().max(1.0) as u32)
    }
}

pub(crate) fn run(o: &SpmdOpts) -> Result<Score, WorkloadError> {
    if o.threads == 0 || o.phase_ms <= 0.0 || o.cores == Some(0) {
        return Err(WorkloadError::Invalid {
            scenario: "spmd",
            why: "--threads, --phase-ms and --cores must be positive".into(),
        });
    }
    let k = o.phase_count();
    let phase_ns = ms_to_ns(o.phase_ms);
    let barrier = PhaseBarrier::new(o.threads, o.barrier);
    let (work, wall) = crate::run_threads("spmd", o.threads as usize, |_| {
        for _ in 0..k {
            compute::burn_cpu_ns(phase_ns);
            barrier.wait();
        }
        f64::from(k) * phase_ns as f64 / 1e9
    })?;
    let params = serde_json::to_value(o).unwrap_or_default();
    let mut score = Score::new("spmd", params, wall, &work);
    if let Some(c) = o.cores {
        score.cores = c as usize;
    }
    let per_thread = f64::from(k) * phase_ns as f64 / 1e9;
    let fair = per_thread.max(f64::from(o.threads) * per_thread / score.cores as f64);
    score.ops_per_s = Some(f64::from(k) / wall.max(1e-9));
    Ok(score.with_fair_share(fair))
}
