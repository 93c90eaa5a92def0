//! The host layer: what `speed` does about the live host it runs on, apart from the
//! rotation itself. A live host paces its ticks by a CPU budget (rounds come later than
//! asked), reads `/proc` counters that report a queued thread's wait late, and runs
//! threads in kernel slices longer than a round. The core (the rotation, the signals, the
//! books of each thread) decides from what it sees; this layer turns the host's window into
//! what the core sees, and adds what the host needs:
//!
//! - **Late counters** ([`observe`]): wait reported late is taken off what read as blocked
//!   and free, and added to the time a thread wanted a CPU.
//! - **Paced rounds**: the credits forget faster while the host holds the rounds back
//!   ([`paced_credit_tau_ns`]), a round the host's watching pace holds back may swap as
//!   many times as the periods it spans (`sparse::Sparse::periods_per_round`; not one held
//!   back by its own moves under the whole cap), and the rotation asks a pacing host for
//!   more watching budget while it turns ([`rounds_budget_share`]).
//! - **Sparse rounds** ([`sparse`]): threads lent to Linux while rounds are too far apart
//!   for the phases, a look at the host's pace, lending on trial.
//! - **Moves' cost on SMT** ([`swap_margin_ns`]): where the queues are SMT siblings and
//!   the threads block, a swap needs a lead of `SMT_SWAP_MARGIN` of a phase's work.
//! - **Short slices** ([`short_slices_often`]): while rounds come every 1.5–3.5 ms the
//!   threads the rotation moves run in 0.5 ms slices.
//!
//! Why here, inside the policy, and not as a layer of the manage loop: every one of these
//! rules reads the policy's own books (which threads it placed, their marks and credits,
//! whether its rotation turns) and acts on its placement (lending, placing again), which
//! only the policy knows, as with the guard. The manage loop tells the policy the host's
//! pace (`Window::pace`) and whether waits may come late (`Window::waits_late`); the
//! policy does the rest here, and its core reads only [`Observed`] rates and the credits'
//! time constant from this layer. Their numbers are in `tuned.rs`, under "The host layer".

pub(in crate::speed) mod sparse;

use super::Speed;
use super::tuned::{
    CREDIT_TAU_S, PACED_CREDIT_ROUNDS, QUIET_ROUNDS, ROUNDS_BUDGET_MAX, ROUNDS_BUDGET_PER_CORE,
    ROUNDS_BUDGET_PHASE_S, SHORT_SLICE, SHORT_SLICES_GAPS, SHORT_SLICES_KEEP, SMT_SWAP_MARGIN,
};
use threadbalance_model::{Nanos, SliceChange, ThreadKey, ThreadRates};

/// What a window says of one thread once late counters are accounted for, as fractions of
/// the window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Observed {
    /// Not held back: running, or not wanting a CPU (the window less its run-queue wait,
    /// less the wait reported late: negative when that is more than the window).
    pub(super) free: f64,
    /// All the wait the window reported: the room its run time left, and the late wait
    /// beyond it (`latency` alone is clamped to the window).
    pub(super) waited: f64,
    /// Blocked (sleeping), less what was reported late: the windows it belongs to read it
    /// as blocked.
    pub(super) blocked: f64,
}

/// `t`'s window with the late counters accounted for (see `ThreadRates::late`). Time
/// reported late was read as blocked in the windows it belongs to, and a queued thread's
/// wait (added only when it runs again) as free: now that wait counts as wanted and comes
/// off the time not held back that the credits add up, and all late time comes off the
/// blocked averages, which would otherwise hold a thread that shares a core for a sleeper.
/// With exact counters (nothing late) this is the window as it reads.
pub(super) fn observe(t: &ThreadRates) -> Observed {
    Observed {
        free: (1.0 - t.latency).clamp(0.0, 1.0) - t.late_wait,
        waited: if t.late_wait > 0.0 {
            t.late_wait + (1.0 - t.util - t.stolen).max(0.0)
        } else {
            t.latency
        },
        blocked: t.blocked - t.late,
    }
}

/// The credits' time constant, ns: `CREDIT_TAU_S`, or `PACED_CREDIT_ROUNDS` smoothed gaps
/// between rounds (`gap`, ns) when the host holds the rounds back (`held`) and that is
/// shorter (see "Credits in paced rounds" in `docs/speed-rules.md`).
pub(super) fn paced_credit_tau_ns(gap: Option<f64>, held: bool) -> f64 {
    let tau = CREDIT_TAU_S * 1e9;
    match gap {
        Some(gap) if held => (PACED_CREDIT_ROUNDS * gap).clamp(1.0, tau),
        _ => tau,
    }
}

/// The watching budget to ask of a pacing host for `queues` cores, a share of one core:
/// `ROUNDS_BUDGET_PER_CORE` a core, at most `ROUNDS_BUDGET_MAX`; `None` where that is no
/// more than the host's default (up to 5 cores).
pub(super) fn rounds_budget_share(queues: usize) -> Option<f64> {
    let share = (ROUNDS_BUDGET_PER_CORE * queues as f64).min(ROUNDS_BUDGET_MAX);
    (share > threadbalance_model::pace::BUDGET).then_some(share)
}

/// The lead in credit, ns, a light thread needs over a heavy one before they swap:
/// `SMT_SWAP_MARGIN` of the work between blocking points where the queues are SMT siblings
/// and the threads block (`work_phase_ns`), else none. A swap costs a live host a move (the
/// tool's CPU time, taken from a CPU of the program, and the moved thread's refill), and
/// on SMT siblings with blocking barriers at N = 5M/4…3M/2 the rounds' many small turns
/// cost more than they gain.
pub(super) fn swap_margin_ns(siblings: bool, work_phase_ns: Option<f64>) -> f64 {
    match work_phase_ns {
        Some(work) if siblings => SMT_SWAP_MARGIN * work,
        _ => 0.0,
    }
}

/// Whether rounds come often enough for short slices: the smoothed gap (`gap`, ns) within
/// `SHORT_SLICES_GAPS`, or, once on (`on`), within the wider `SHORT_SLICES_KEEP`, so that
/// a gap near an edge does not turn the slices over every round.
pub(super) fn short_slices_often(on: bool, gap: Option<f64>) -> bool {
    let (lo, hi) = if on {
        SHORT_SLICES_KEEP
    } else {
        SHORT_SLICES_GAPS
    };
    gap.is_some_and(|g| g > lo.0 as f64 && g <= hi.0 as f64)
}

impl Speed {
    /// The watching budget to ask of a pacing host (see "Rounds bought" in
    /// `docs/speed-rules.md`): [`rounds_budget_share`], while the policy manages and its
    /// rotation turns (it has rotated, and not `QUIET_ROUNDS` rounds in a row went by
    /// without a swap: with blocking barriers a round at a phase's end often finds nothing
    /// to swap) or the threads are lent or looked at for sparse rounds (so that the gaps
    /// that judge the lending are the rotation's); unless the threads block between long
    /// phases of work.
    pub(super) fn rounds_budget(&self) -> Option<f64> {
        if !self.cfg.rounds_budget {
            return None;
        }
        let quiet = self.regime.rotation().quiet;
        let turning = self.stats.rotating_rounds > 0 && quiet < QUIET_ROUNDS;
        let turning = turning || self.regime.lent_or_looking();
        // The work between two blocking points, wherever the threads block at all: not
        // only where they count as blocking (`work_phase_ns`), since with phases of 100 ms
        // a rotation's preemptions outnumber the voluntary switches many times over.
        let long = self.counted
            && self.vol_rate > 0.0
            && self.run_rate >= ROUNDS_BUDGET_PHASE_S * self.vol_rate;
        rounds_budget_share(self.queues.len()).filter(|_| turning && self.managing() && !long)
    }

    /// The credits' time constant now ([`paced_credit_tau_ns`]).
    pub(super) fn credit_tau_ns(&self) -> f64 {
        paced_credit_tau_ns(self.sparse.gap(), self.sparse.held())
    }

    /// The slices to change: while the rotation turns and rounds come often enough
    /// ([`short_slices_often`]), every placed thread runs in short slices
    /// ([`SHORT_SLICE`]); otherwise (no rotation, the guard's probe or hand-back), and once
    /// released or lent, in its own.
    pub(super) fn slices(&mut self) -> Vec<SliceChange> {
        let often = short_slices_often(self.sliced, self.sparse.gap());
        // Under the guard's probe, or handed back, Linux places the threads: its own slices.
        self.sliced = self.cfg.short_slices && self.regime.turning() && often;
        let short = self.sliced.then_some(SHORT_SLICE);
        let mut out = Vec::new();
        for p in self.placed.iter_mut() {
            let want: Option<Nanos> = if p.released { None } else { short };
            if want != p.slice {
                p.slice = want;
                out.push(SliceChange {
                    thread: p.key,
                    slice: want,
                });
            }
        }
        out
    }

    /// Whether `key` ran in a short slice of ours on a core it shares with another placed
    /// thread: its preemptions are ours, not the program's. Without short slices on, no
    /// thread has one (`slices` clears them all), so the usual tick does not search.
    pub(super) fn sliced_and_shared(&self, key: ThreadKey) -> bool {
        self.sliced
            && self
                .placed
                .binary_search_by(|p| p.key.cmp(&key))
                .ok()
                .map(|i| &self.placed[i])
                .is_some_and(|p| p.slice.is_some() && !p.released && self.queues[p.queue].load >= 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::Nanos;

    fn rates(latency: f64, util: f64, blocked: f64, late: f64, late_wait: f64) -> ThreadRates {
        ThreadRates {
            key: ThreadKey {
                pid: threadbalance_model::Pid(1),
                tid: threadbalance_model::Tid(1),
                start_time: 0,
            },
            util,
            latency,
            stolen: 0.0,
            blocked,
            late,
            late_wait,
            lock: 0.0,
            lock_exact: false,
            speed: util,
            timeslices: 0,
            voluntary: 0,
            involuntary: 0,
            last_cpu: threadbalance_model::CpuId(0),
            state: threadbalance_model::ThreadState::Running,
            appeared: false,
            ipc: None,
            mpki: None,
            progress: None,
        }
    }

    #[test]
    fn exact_counters_are_observed_as_they_read() {
        let o = observe(&rates(0.25, 0.5, 0.25, 0.0, 0.0));
        assert_eq!(
            o,
            Observed {
                free: 0.75,
                waited: 0.25,
                blocked: 0.25
            }
        );
    }

    #[test]
    fn wait_reported_late_is_wanted_not_free_nor_blocked() {
        // A thread that waited behind its core's other thread over the last windows shows
        // its wait only now, beyond what this window holds: 0.6 of a window late, the
        // window itself all run time but 0.1.
        let o = observe(&rates(0.1, 0.9, 0.0, 0.6, 0.6));
        assert!((o.free - (0.9 - 0.6)).abs() < 1e-12, "{o:?}");
        assert!((o.waited - (0.6 + 0.1)).abs() < 1e-12, "{o:?}");
        assert!((o.blocked + 0.6).abs() < 1e-12, "{o:?}");
    }

    #[test]
    fn the_credits_forget_within_two_gaps_only_while_rounds_are_held_back() {
        let tau = CREDIT_TAU_S * 1e9;
        assert_eq!(paced_credit_tau_ns(None, true), tau);
        assert_eq!(paced_credit_tau_ns(Some(3e6), false), tau);
        assert_eq!(paced_credit_tau_ns(Some(3e6), true), 6e6);
        // Rounds 10 ms apart and more keep the free ticks' constant.
        assert_eq!(paced_credit_tau_ns(Some(15e6), true), tau);
    }

    #[test]
    fn the_rounds_budget_grows_with_the_cores_up_to_its_ceiling() {
        // Up to 5 cores the host's default is as much.
        assert_eq!(rounds_budget_share(2), None);
        assert_eq!(rounds_budget_share(5), None);
        assert_eq!(rounds_budget_share(8), Some(ROUNDS_BUDGET_PER_CORE * 8.0));
        assert_eq!(rounds_budget_share(16), Some(ROUNDS_BUDGET_MAX));
        assert_eq!(rounds_budget_share(256), Some(ROUNDS_BUDGET_MAX));
    }

    #[test]
    fn swaps_need_a_lead_only_on_smt_siblings_with_blocking_phases() {
        assert_eq!(swap_margin_ns(false, Some(10e6)), 0.0);
        assert_eq!(swap_margin_ns(true, None), 0.0);
        assert_eq!(swap_margin_ns(true, Some(10e6)), SMT_SWAP_MARGIN * 10e6);
        assert!(swap_margin_ns(true, Some(10e6)) > 0.0);
    }

    #[test]
    fn short_slices_go_on_in_the_band_and_off_outside_a_wider_one() {
        let ms = |x: f64| Some(x * 1e6);
        assert!(!short_slices_often(false, None));
        assert!(!short_slices_often(false, ms(1.0)));
        assert!(short_slices_often(false, ms(2.0)));
        assert!(short_slices_often(false, ms(3.5)));
        assert!(!short_slices_often(false, ms(4.0)));
        // Once on, a gap of 4 ms or 1.3 ms keeps them; past 4.5 ms or at 1.2 ms they go.
        assert!(short_slices_often(true, ms(4.0)));
        assert!(short_slices_often(true, ms(1.3)));
        assert!(!short_slices_often(true, ms(4.6)));
        assert!(!short_slices_often(true, ms(1.2)));
        assert_eq!(SHORT_SLICE, Nanos::from_micros(500));
    }
}
