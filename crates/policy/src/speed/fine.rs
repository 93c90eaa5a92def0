//! Phases finer than any round: barrier waiters are peers, placed evenly and held.
//!
//! A rotation acts once a round, and a round is at least `min_interval` (1 ms) long. An
//! OpenMP program whose parallel loops meet at a barrier every 0.13 ms runs seven or more
//! phases per round: a thread doubled up on a core gates every one of them until the next
//! round, whatever the rotation does, so rotating only adds moves. What is left is the
//! placement itself, and the best one still is the even one (⌊N/M⌋ or ⌈N/M⌉ threads per
//! core, held still): what pinning gets.
//!
//! The sleeper rule (blocked more than 40 % of the time: a sleeper, given back to Linux)
//! misreads such a program once its threads outnumber the cores. libgomp's waiters spin a
//! short while and then sleep in `futex_wait` (with more threads than CPUs the spin is
//! throttled to ~100 iterations, 2.6 µs), so the threads that finish a sweep early sleep
//! at every barrier and each thread is blocked for a large part of the time. Counted as
//! sleepers they leave no busy thread, [`super::few`] lends them all to Linux, and Linux
//! does worse than even pinning here (simulator, 16 cores, 24 threads: 45 % of the fair
//! share against pinning's 66.7 %).
//!
//! **The rule.** When the synchronization signals give a phase S (threads that *block*:
//! at least a third of their switches voluntary, see `speed`'s interval table) shorter
//! than the shortest round, the placed threads' sleeps are barrier waits, not idleness:
//!
//! ```text
//!   S = 1 / (switches per running thread-second)    (blocking threads only)
//!   S < min_interval  ─► a thread blocked over 40 % of the time is *not* released;
//!                        a released one that runs at all is placed again (emptiest core)
//!                     ─► counts even (the levelling step keeps them so), no swaps
//!   only while the threads that ran do equal work: CPU shares within 15 % of each other
//! ```
//!
//! Barrier peers share the sweeps equally wherever they run; a cache server's 4 server
//! threads and 64 clients (`memcached-like`, phases of ~0.2 ms read from the clients'
//! waits for replies) do not, and held they ran 11 % slower than lent to Linux (simulator,
//! 16 cores: 0.163 s against 0.147 s), so the equal-work test leaves them as before.
//!
//! Worked example (simulator, 24 threads on 16 cores, 0.13 ms sweeps): under Linux the
//! threads switch 2205 times per thread-second, all voluntary, so S = 1 / 2205 s =
//! 0.45 ms < 1 ms: fine. The threads stay placed, 24 > 16 so `few` does not lend them,
//! eight cores hold two threads and eight hold one, and nothing rotates. An `ep-barrier`
//! with 10 ms phases reads S ≈ 8–15 ms: not fine, the rotation runs as before; a program
//! that yields at its barriers gives no S at all (its cores stay busy either way).
//!
//! **Lent before the shares settle.** The equal-work test reads each thread's CPU share
//! averaged over every window since it was first seen, whether it was placed or with
//! Linux then (`Placed::life_work`). It read the share measured while placed (`work`, the
//! peer test's), which stands still while a thread is with Linux. Paced by a live
//! budget, the sparse-rounds rule may lend the threads in the first rounds, before the
//! shares have settled: with this VM's BPF tick (a round every ~1.8 ms against phases read
//! as 0.2 ms) one window's shares of the stencil's 24 threads read 0.44–0.53, over the
//! 15 %, so the rule did not hold and the threads were lent; then their shares never
//! moved again, the rule never held, and the threads stayed with Linux for good:
//! 1.46–1.55× pinning's time at 24 threads on five seeds of six, 1.41–1.48× at 20 on
//! two, 1.27–1.30× at 40 on five (simulated, 16 cores, 300 ms of work a thread). The
//! older BPF fit (54.8 µs + 0.442 µs a thread) lent 18 of the 24 runs at 17–40 threads for
//! good, the `/proc` fit (24.2 µs + 4.148 µs) four. With every window counted the shares
//! settle while the threads are lent, the rule holds, and the sparse-rounds rule gives
//! them back: every run of those three fits and of the older `/proc` fit (21.1 µs +
//! 6.246 µs), 17–40 threads, seeds 1–6, is within 0.994–1.020× pinning's time, and the
//! runs that were not lent are unchanged. Free ticks, the 2-core runs and every row that
//! is not fine-phased are byte for byte the same
//! (`speed_sparse_fine_phases_lent_before_their_shares_settle_come_back`).
//!
//! What the rule keeps: a thread asleep since it was first seen (a main thread in `join`)
//! still goes back at once, and with no more busy threads than cores [`super::few`] still
//! lends them all (N ≤ M: nothing to double up). The guard still compares the stint with
//! Linux and hands the threads back when Linux does better.

use super::Speed;
use super::tuned::EQUAL_WORK;

/// Whether a phase of `phase_ns` (from the synchronization signals; `None` when they give
/// none) is shorter than the shortest round, `min_interval_ns`.
pub(super) fn fine_phase(phase_ns: Option<f64>, min_interval_ns: u64) -> bool {
    phase_ns.is_some_and(|s| s > 0.0 && s < min_interval_ns as f64)
}

/// Whether the CPU shares `works` of the threads that ran are within `EQUAL_WORK`.
pub(super) fn equal_work(works: impl Iterator<Item = f64>) -> bool {
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for w in works.filter(|&w| w > 0.0) {
        lo = lo.min(w);
        hi = hi.max(w);
    }
    hi > 0.0 && hi <= EQUAL_WORK * lo
}

impl Speed {
    /// Whether the program's phases are finer than any round (see the module docs), as
    /// of the last window's signals.
    pub(super) fn fine(&self) -> bool {
        self.fine_now
    }

    /// The rule's test, once a window: a fine phase, and threads that do equal work; or
    /// threads that pass the CPU back and forth by yielding (`PING_PONG`), whose rotation
    /// gains nothing whatever their work.
    pub(super) fn fine_now_from_signals(&self) -> bool {
        self.ping_pong
            || fine_phase(self.phase_ns, self.cfg.min_interval.0)
                && equal_work(
                    self.placed
                        .iter()
                        .filter(|p| {
                            p.age >= super::ASLEEP_AGE && p.exec + p.wait >= super::IDLE * p.age
                        })
                        .map(|p| p.life_work),
                )
    }
}

#[cfg(test)]
mod tests {
    use super::fine_phase;
    use crate::speed::Speed;
    use crate::{Policy, Settings};
    use threadbalance_model::testutil::{key, topo};
    use threadbalance_model::{
        CpuId, Level, Nanos, PolicySummary, SpeedSummary, ThreadRates, ThreadState, Window,
    };

    /// 24 threads on 16 cores for 1 s in 10 ms windows, each running 40 % of the time,
    /// waiting 10 % for a CPU and blocked 50 % (past the sleeper rule's 40 %), with
    /// `switches` voluntary switches a window.
    fn run_24_on_16(switches: u64) -> SpeedSummary {
        let t = topo(1, 1, 16, 1);
        let mut p = Speed::new(&Settings::new(Level::Core), &t).unwrap();
        for w in 0..100u64 {
            let threads = (0..24)
                .map(|i| ThreadRates {
                    key: key(1, 100 + i),
                    util: 0.4,
                    latency: 0.1,
                    stolen: 0.0,
                    blocked: 0.5,
                    late: 0.0,
                    late_wait: 0.0,
                    lock: 0.0,
                    lock_exact: false,
                    speed: 0.4,
                    timeslices: 0,
                    voluntary: switches,
                    involuntary: 0,
                    last_cpu: CpuId(0),
                    state: ThreadState::Running,
                    appeared: false,
                    ipc: None,
                    mpki: None,
                    progress: None,
                })
                .collect();
            let win = Window {
                start: Nanos::from_millis(10 * w),
                end: Nanos::from_millis(10 * (w + 1)),
                threads,
                ..Window::default()
            };
            p.decide(&t, &win);
        }
        let PolicySummary::Speed(s) = p.summary() else {
            panic!("speed reports a speed summary")
        };
        *s
    }

    #[test]
    fn fine_phase_barrier_waiters_outnumbering_cores_are_held_evenly_not_lent() {
        // 22 voluntary switches per 10 ms window: 2200 per thread-second, S = 1 / 2200 s
        // = 0.45 ms < the 1 ms floor. The blocked fraction reaches 0.4 after
        // 200 ms · ln(0.5 / 0.1) ≈ 320 ms, but the threads are peers: none is released,
        // 24 > 16 so `few` never lends, and no swap runs (8 cores hold 2, 8 hold 1).
        let s = run_24_on_16(22);
        assert_eq!(s.released_to_linux, 0, "{s:?}");
        assert_eq!((s.few_hand_backs, s.few_now), (0, false), "{s:?}");
        assert_eq!(s.rotation_swaps, 0, "{s:?}");
        assert_eq!(s.initial_placements, 24, "{s:?}");
    }

    #[test]
    fn fine_phase_same_sleeps_at_10ms_phases_are_sleepers_as_before() {
        // One switch per 10 ms window: S = 10 ms, not fine. Blocked 50 % > 40 %: every
        // thread is released as a sleeper (24 releases), as before the rule.
        let s = run_24_on_16(1);
        assert_eq!(s.released_to_linux, 24, "{s:?}");
    }

    #[test]
    fn fine_phase_omp_sweeps_against_1ms_rounds_are_fine() {
        // 2205 voluntary switches per thread-second (24 threads, 0.13 ms sweeps under
        // Linux): S = 1e9 / 2205 = 453 515 ns < 1 000 000 ns.
        assert!(fine_phase(Some(1e9 / 2205.0), 1_000_000));
    }

    #[test]
    fn fine_equal_work_barrier_peers_yes_server_and_clients_no() {
        // Peers: 0.40 to 0.45 of a CPU each: 0.45 ≤ 1.15 · 0.40 = 0.46. Threads that did
        // not run (0.0) are left out.
        assert!(super::equal_work([0.40, 0.45, 0.42, 0.0].into_iter()));
        // A server at 0.5 against clients at 0.1: 0.5 > 1.15 · 0.1.
        assert!(!super::equal_work([0.5, 0.1, 0.1].into_iter()));
        // Nobody ran: no peers to hold.
        assert!(!super::equal_work([0.0].into_iter()));
    }

    #[test]
    fn fine_phase_10ms_barriers_or_no_phase_are_not_fine() {
        // ep-barrier, 10 ms phases: ~100 switches per thread-second, S = 10 ms ≥ 1 ms.
        assert!(!fine_phase(Some(1e9 / 100.0), 1_000_000));
        // Exactly one round long: a rotation could still act once a phase.
        assert!(!fine_phase(Some(1e6), 1_000_000));
        // Yielding threads give no phase.
        assert!(!fine_phase(None, 1_000_000));
    }
}
