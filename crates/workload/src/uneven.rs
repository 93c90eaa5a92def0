//! `uneven`: threads with different duty cycles. Thread i repeats K times: d_i·P ms of
//! compute, then sleeps (1 − d_i)·P ms. Threads that sleep leave room for the others, so
//! a good placement keeps busy threads apart and pairs them with sleepy ones.
//!
//! Fair share: each thread needs at least K·P of wall time (its compute at full speed plus
//! its sleeps), and the cores' total is Σ d_i·K·P / C, so the bound is the larger of the two.

use crate::{Score, WorkloadError, compute, ms_to_ns};
use serde::Serialize;
use std::time::Duration;

/// Options of `workload uneven`.
#[derive(Debug, Clone, PartialEq, Serialize, clap::Args)]
pub struct UnevenOpts {
    /// Duty cycle of each thread (fraction of each period spent computing), comma-separated;
    /// one thread per value.
    #[arg(long, value_delimiter = ',', default_values_t = vec![1.0, 1.0, 0.5, 0.25])]
    pub duty: Vec<f64>,
    /// Period P, in ms.
    #[arg(long, default_value_t = 10.0)]
    pub period_ms: f64,
    /// Number of periods K.
    #[arg(long, default_value_t = 200)]
    pub periods: u32,
}

pub(crate) fn run(o: &UnevenOpts) -> Result<Score, WorkloadError> {
    if o.duty.is_empty() || o.duty.iter().any(|d| !(0.0..=1.0).contains(d)) || o.period_ms <= 0.0 {
        return Err(WorkloadError::Invalid {
            scenario: "uneven",
            why: "--duty needs values in [0, 1] and --period-ms must be positive".into(),
        });
    }
    let period_ns = ms_to_ns(o.period_ms);
    let (work, wall) = crate::run_threads("uneven", o.duty.len(), |i| {
        let d = o.duty[i];
        let run_ns = (d * period_ns as f64) as u64;
        let sleep = Duration::from_nanos(period_ns - run_ns.min(period_ns));
        for _ in 0..o.periods {
            compute::burn_cpu_ns(run_ns);
            if !sleep.is_zero() {
                std::thread::sleep(sleep);
            }
        }
        f64::from(o.periods) * run_ns as f64 / 1e9
    })?;
    let params = serde_json::to_value(o).unwrap_or_default();
    let score = Score::new("uneven", params, wall, &work);
    let span = f64::from(o.periods) * period_ns as f64 / 1e9;
    let fair = span.max(score.work_s / score.cores as f64);
    Ok(score.with_fair_share(fair))
}
