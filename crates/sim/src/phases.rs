//! The phase log (`RunOptions::phases`, `sim --phases FILE.csv`): when each thread reached
//! each barrier, measured from the phase's start, and how long it waited for a CPU on the
//! way.
//!
//! A barrier program's run time is the sum of its phases, and a phase lasts as long as its
//! slowest thread takes, so the log says where a policy loses: a thread that arrives at
//! `arrive` after waiting `queued` for a CPU ran (or was delayed by kernel threads and
//! switches) for the rest. With every thread doing the same work W a phase, the last
//! arrival is W plus the most any thread lost; who lost it, and whether to a shared core
//! (`queued`) or to something else, is in its row.
//!
//! A phase starts at the last opening of any barrier of the thread's application (for the
//! one barrier of `ep-barrier`, the previous phase's end), and the first phase, which has
//! no opening before it, is not logged. Off by default: a run keeps one row per thread and
//! phase.

use serde::Serialize;
use std::fmt::Write as _;
use threadbalance_model::Nanos;

/// One thread's way through one phase.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PhaseArrival {
    /// Its application, in the workload's order.
    pub app: usize,
    /// The phase: the barrier's openings before the one this arrival waits for.
    pub phase: u64,
    /// The thread, in the run's thread order (`RunResult::thread_cpu_s`'s).
    pub thread: usize,
    /// When the phase started: the last opening of a barrier of its application.
    pub start: Nanos,
    /// When it arrived at the barrier.
    pub arrive: Nanos,
    /// Run-queue wait between the two.
    pub queued: Nanos,
}

/// What a run logs of its phases (see the module docs).
#[derive(Debug, Clone, Default)]
pub(crate) struct PhaseLog {
    pub rows: Vec<PhaseArrival>,
    /// Per thread: its phase's start and its run-queue wait then (`None`: before the
    /// first opening).
    pub since: Vec<Option<(Nanos, Nanos)>>,
}

/// The rows of `runs` (each a policy's name and its log) as CSV, in milliseconds: the
/// phase's start from the run's, the arrival and the run-queue wait from the phase's
/// start: `policy,app,phase,thread,start_ms,arrive_ms,queued_ms`.
pub fn to_csv<'a>(runs: impl IntoIterator<Item = (&'a str, &'a [PhaseArrival])>) -> String {
    let mut out = String::from("policy,app,phase,thread,start_ms,arrive_ms,queued_ms\n");
    let ms = |n: Nanos| n.0 as f64 / 1e6;
    for (policy, rows) in runs {
        for r in rows {
            let _ = writeln!(
                out,
                "{policy},{},{},{},{:.6},{:.6},{:.6}",
                r.app,
                r.phase,
                r.thread,
                ms(r.start),
                ms(r.arrive.saturating_sub(r.start)),
                ms(r.queued)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::machine;
    use crate::workload::{Wait, Workload, ep_barrier};
    use crate::{RunOptions, run_policy};
    use threadbalance_model::Level;
    use threadbalance_policy::Settings;

    /// 17 threads of 10 ms blocking phases on 16 cores (200 ms of work each), phases logged.
    fn seventeen(policy: &str, tick_cost: Option<&str>) -> crate::RunResult {
        let m = machine("package:1 core:16 pu:1", None).unwrap();
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            apps: vec![ep_barrier(17, 10_000_000, 200_000_000, Wait::Block)],
        };
        let mut o = RunOptions::new(1);
        o.phases = true;
        o.tick_cost = tick_cost.map(|c| c.parse().unwrap());
        let r = run_policy(&m, &w, policy, &Settings::new(Level::Core), &o).unwrap();
        assert!(r.finished);
        r
    }

    /// The rows of phase `k`.
    fn phase(r: &crate::RunResult, k: u64) -> Vec<PhaseArrival> {
        r.phases.iter().filter(|p| p.phase == k).copied().collect()
    }

    #[test]
    fn phases_one_row_per_thread_and_phase_each_opened_by_the_last_arrival() {
        for r in [
            seventeen("none", None),
            seventeen("speed", Some("19.8,0.298")),
        ] {
            // 20 phases; the first has no opening before it.
            assert_eq!(r.phases.len(), 19 * 17, "{}", r.policy);
            for k in 1..20 {
                let rows = phase(&r, k);
                let mut threads: Vec<usize> = rows.iter().map(|p| p.thread).collect();
                threads.sort_unstable();
                assert_eq!(
                    threads,
                    (0..17).collect::<Vec<_>>(),
                    "{} phase {k}",
                    r.policy
                );
                for p in &rows {
                    // 10 ms of work, and the wait for a CPU on top of it.
                    assert!(
                        p.arrive >= p.start + Nanos::from_millis(10) + p.queued,
                        "{p:?}"
                    );
                }
                // The last arrival opens the barrier: the next phase starts then.
                let last = rows.iter().map(|p| p.arrive).max().unwrap();
                if k < 19 {
                    assert!(
                        phase(&r, k + 1).iter().all(|p| p.start == last),
                        "phase {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn phases_under_linux_at_one_thread_more_than_cores_end_with_a_doubled_up_thread() {
        // The N = M + 1 loss: two threads share a core, and the phase lasts until both are
        // done, so its last arrival waited for a CPU for much of its work (6 ms of 10 in
        // most phases here). `speed` rotates the sharing in 1 ms rounds: its last arrivals
        // waited about 1 ms.
        let wait_of_last = |r: &crate::RunResult| -> Vec<f64> {
            (1..20)
                .map(|k| {
                    let rows = phase(r, k);
                    let last = rows.iter().max_by_key(|p| p.arrive).unwrap();
                    last.queued.0 as f64 / 1e6
                })
                .collect()
        };
        let linux = wait_of_last(&seventeen("none", None));
        assert!(
            linux.iter().filter(|&&q| q >= 4.0).count() >= 15,
            "{linux:?}"
        );
        let speed = wait_of_last(&seventeen("speed", None));
        assert!(
            speed.iter().filter(|&&q| q <= 2.0).count() >= 15,
            "{speed:?}"
        );
    }
}
