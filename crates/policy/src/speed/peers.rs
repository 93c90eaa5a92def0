//! Rotating CPU-bound peers only: when the busy threads' duty cycles differ *and* they do
//! unequal work, every thread goes back to Linux.
//!
//! The rotation assumes peers: threads that all want a CPU about as much, so that a core
//! holding one thread more is slower and the doubling must move. Pinning threads whose
//! duty cycles differ costs what Linux's balancer never pays: a pinned core idles while its
//! partly sleeping thread sleeps, and a core holding a full-time and a half-time thread
//! stays busier than its neighbour with no way for the load to even out. `uneven`
//! (duty cycles 1, 1, ½, ¼ on two cores) and a pipeline whose stages wait for work lost
//! 2–3 % against Linux this way.
//!
//! **Barrier peers have unequal duty cycles too, for a while.** Three threads meeting at
//! a blocking barrier on two cores, before the rotation has evened them out: the thread
//! alone on a core finishes its phase in half the time and sleeps at the barrier while the
//! two that share a core catch up.
//!
//! ```text
//!                 runs   waits for a CPU   blocked (duty)   CPU share (work)
//!  alone          0.5    0                 0.5              0.5
//!  doubled up     0.5    0.5               0                0.5
//! ```
//!
//! The blocked fractions differ by 0.5 — as much as `uneven`'s — only because of where the
//! threads sit: the one that shares a core is the slow one, and its peers wait for it.
//! What they do not differ in is the work: threads that meet at a barrier after every
//! phase have all done the same phases, so their CPU shares over any stretch longer than
//! a phase are alike wherever they ran. Threads that are not peers differ in both:
//! `uneven`'s quarter-time thread never uses more than a quarter of a core, its full-time
//! threads use what they get. (Always-runnable threads that are not rotated differ in
//! work but not in duty: peers as well.) So, at every tick:
//!
//! ```text
//!  duty_i = thread i's blocked fraction  ┐ each: its mean over its life, over its last
//!  work_i = thread i's CPU share         ┘ second once older (exponential, τ = 1 s)
//!  gap    = max − min of duty_i          ┐ over the placed threads
//!  spread = 1 − min/max of work_i        ┘ watched ≥ 50 ms
//!  gap > 0.2 and spread > 0.15 for 150 ms
//!         ─► apart: every placed thread to Linux, for a stint of 4 s (8, 16, … s each
//!            time it is found apart again); after the stint, threads are placed again
//!            as they qualify, and tested again
//! ```
//!
//! Before the work was compared, a barrier program whose rotation started late was read
//! as not peers: a main thread asleep in `join`, placed with the workers until the sleeper
//! rule released it (≈ 100 ms), made the counts even (2 + 2 on two cores) so nothing
//! rotated, the alone thread's duty cycle stayed 0.5 against 0, and at 200 ms every thread
//! went to Linux for 4 s: 85 % of the fair share instead of 92 % on a real two-core
//! machine with 10 ms blocking phases, and a loss to Linux with 100 ms ones.
//!
//! Both are averaged over a second, not the 200 ms that decide whether a single thread
//! mostly sleeps: a rotation gives every thread the same time doubled up, so over a second
//! their waits at the barriers are alike, even when in one 200 ms stretch some waited
//! more; and a thread that slept while the program started is not held apart for longer
//! than about a second. How far apart the CPU shares of barrier peers can be is bounded by
//! one phase's work over the time averaged: 10 ms of work over 200 ms at two thirds of a
//! core is 0.075, under the 0.15. A thread passing through the gap on its way to being
//! released (a main thread gone to sleep in `join`) leaves the placed set within 20 ms
//! when it has not run since it was first seen, within about 100 ms otherwise, before the
//! 150 ms have passed.
//!
//! **What counts.** Only time placed counts, from the end of a thread's first window after
//! it was placed (`Placed::started`; the test waits 50 ms of that). Time lent to Linux
//! while busy threads were few is Linux's placement. The first window is the policy's
//! start-up interval, up to 100 ms long before any synchronization is seen, and on the
//! real 2-core machine (`workload spmd --threads 3 --phase-ms 100 --barrier block`) one
//! of the three workers ran 13 % of it and slept the rest; averaged over its life that
//! window outweighed everything after it until about 250 ms, and the peer test gave the
//! threads to Linux in a fifth to two thirds of the runs (94–95 % of the fair share
//! instead of 97–98 %; in none of 25 runs since). Blocked time also has the late wait
//! taken off (`ThreadRates::late`): a thread queued behind its core's other one shows no
//! wait until it runs again.
//!
//! While apart the threads are with Linux, and their blocked fractions are Linux's, which
//! for a barrier program would differ as much as `uneven`'s: so the verdict is not
//! re-tested while apart, only after the stint.
//!
//! **Yields for work.** Threads that pass the CPU back and forth by yielding, a few µs of
//! CPU a switch (`PING_PONG`), are apart too, after the same 150 ms: each runs µs between
//! handing the CPU to a thread that hands it straight back, so none is CPU-bound, and no
//! round can follow what they do (until then they are held as phases finer than any round,
//! [`super::fine`]). Pinned, they lose what Linux's balancer gives a program whose threads
//! block now and then on a mutex: a CPU whose only thread blocks takes one from the other.
//! `sysbench threads --threads=3 --events=3000` (a yield inside each of 8 mutexes an event)
//! ran 1.060× its bare wall time under `speed` rotating it every millisecond, 1.041× held,
//! and 1.045–1.050× held then given to Linux (30 and 60 pairs; 1.010–1.018× `run --policy
//! none`, which costs the same start, exit and counters: 1.022× bare; real, 2-core VM, whose
//! pairs spread ±15 %): 8–11 moves a run instead of 470–614.
//!
//! **Barrier peers are not sleepers.** The sleeper rule gives a thread back to Linux once
//! its blocked fraction over about 200 ms passes 0.4 (`RELEASE_ABOVE`): a thread that
//! mostly sleeps should not hold a core's count up. A barrier peer's sleep is not its
//! own. With short blocking phases (2–3 ms, 24 threads on 16 cores) a rotation's rounds
//! are as long as half a phase, and a thread that sat on lone cores for a few rounds
//! sleeps at the barriers more than the others for a while. Four to nine of the 24 went
//! past 0.4 and were given to Linux, which then doubled them up where the rotation could
//! not see them: 73.6–76.0 % of the fair share instead of 78.5–82.2 (simulated, 16 cores,
//! seeds 1–3).
//!
//! ```text
//!  peers  = the placed threads that ran (ran or waited for a CPU ≥ 5 % of their life)
//!  shared = peers do equal work (CPU shares within 15 %, as `fine` tests it)
//!           and their mean blocked fraction ≤ 0.4
//!  shared ─► a peer past 0.4 stays placed; a thread that hardly ran is released as before
//! ```
//!
//! Threads that all sleep more than a sleeper does (the mean past 0.4) are still given
//! back, one by one, as before; so are threads of unequal work (a server and its clients,
//! a pipeline's light stages), and a main thread asleep in `join` (it never ran: the
//! 20 ms rule of `update_known`). A thread that stops working for good drops out of equal
//! work as its CPU share, averaged over a second, falls away, and is released then.

use super::tuned::{FIRST_STINT, GAP_APART, HOLD, MIN_AGE, WORK_APART};
use super::{ASLEEP_AGE, IDLE, Placed, RELEASE_ABOVE, Speed};
use threadbalance_model::{Move, Nanos};

/// Whether the busy threads are peers, and since when the verdict has been changing.
#[derive(Debug, Clone, Default)]
pub(super) struct Peers {
    /// The threads are not peers: all of them are with Linux.
    pub(super) apart: bool,
    /// Since when the other verdict has held (`None`: it does not).
    since: Option<Nanos>,
    /// How often the threads were found apart and handed to Linux.
    pub(super) hand_backs: u64,
    /// When the stint with Linux ends.
    until: Nanos,
    /// The next stint's length (zero: the first, `FIRST_STINT`).
    stint: Nanos,
}

/// A placed thread watched long enough that ran or waited for a CPU at least `IDLE` of
/// its life.
fn ran(p: &&Placed) -> bool {
    !p.released && p.age >= ASLEEP_AGE && p.exec + p.wait >= IDLE * p.age
}

impl Speed {
    /// Whether the placed threads' sleep is the program's (see "Barrier peers are not
    /// sleepers" in the module docs): the placed threads that ran do equal work and are
    /// blocked, on average, no more than a sleeper's `RELEASE_ABOVE`.
    pub(super) fn sleep_shared_now(&self) -> bool {
        let (mut sum, mut n) = (0.0, 0u32);
        for p in self.placed.iter().filter(ran) {
            sum += p.blocked;
            n += 1;
        }
        n >= 2 && sum / f64::from(n) <= RELEASE_ABOVE && self.equal_work_now()
    }

    /// Whether the placed threads that ran do equal work (`fine::equal_work`): barrier
    /// peers, as far as their CPU shares tell.
    pub(super) fn equal_work_now(&self) -> bool {
        super::fine::equal_work(self.placed.iter().filter(ran).map(|p| p.work))
    }

    /// The spread of the duty cycles (max − min) and of the CPU shares (1 − min/max) of
    /// the placed threads watched long enough; `None` with fewer than two.
    fn spreads(&self) -> Option<(f64, f64)> {
        let mut duty: Option<(f64, f64)> = None;
        let mut work: Option<(f64, f64)> = None;
        let mut n = 0;
        let widen = |r: Option<(f64, f64)>, x: f64| {
            Some(r.map_or((x, x), |(lo, hi): (f64, f64)| (lo.min(x), hi.max(x))))
        };
        for p in self
            .placed
            .iter()
            .filter(|p| !p.released && p.started.is_some_and(|s| s >= MIN_AGE))
        {
            n += 1;
            duty = widen(duty, p.duty);
            work = widen(work, p.work);
        }
        let ((dlo, dhi), (wlo, whi)) = (duty?, work?);
        let work_spread = if whi > 0.0 { 1.0 - wlo / whi } else { 0.0 };
        (n >= 2).then_some((dhi - dlo, work_spread))
    }

    /// Runs the peer test at `now` (see the module docs): hands every placed thread to
    /// Linux when the threads have been apart for long enough, and ends the stint.
    pub(super) fn check_peers(&mut self, now: Nanos, managing: bool, moves: &mut Vec<Move>) {
        if self.peers.apart {
            if now >= self.peers.until {
                self.peers.apart = false;
            }
            return;
        }
        // Threads that pass the CPU back and forth by yielding (`PING_PONG`, as of the last
        // window's signals) are no CPU-bound peers either (see "Yields for work").
        let apart = self.ping_pong
            || self
                .spreads()
                .is_some_and(|(duty, work)| duty > GAP_APART && work > WORK_APART);
        if !apart {
            self.peers.since = None;
            return;
        }
        let since = *self.peers.since.get_or_insert(now);
        if now.saturating_sub(since) < HOLD {
            return;
        }
        self.peers.since = None;
        self.peers.apart = true;
        self.peers.hand_backs += 1;
        let stint = if self.peers.stint == Nanos::ZERO {
            FIRST_STINT
        } else {
            self.peers.stint
        };
        self.peers.until = now + stint;
        self.peers.stint = Nanos(stint.0.saturating_mul(2));
        self.release_placed(false, managing, &[], moves);
    }
}
