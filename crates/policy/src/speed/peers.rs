//! Rotating CPU-bound peers only: when the busy threads' duty cycles differ, every thread
//! goes back to Linux.
//!
//! The rotation assumes peers: threads that all want a CPU about as much, so that a core
//! holding one thread more is slower and the doubling must move. Pinning threads whose
//! duty cycles differ costs what Linux's balancer never pays: a pinned core idles while its
//! partly sleeping thread sleeps, and a core holding a full-time and a half-time thread
//! stays busier than its neighbour with no way for the load to even out. `uneven`
//! (duty cycles 1, 1, ½, ¼ on two cores) and a pipeline whose stages wait for work lost
//! 2–3 % against Linux this way. So, at every tick:
//!
//! ```text
//!  duty_i = thread i's blocked fraction: its mean over its life, over its last second
//!           once older (an exponential average, τ = 1 s)
//!  gap    = max − min of duty_i over the placed threads watched ≥ 50 ms
//!  gap > 0.2 for 150 ms ─► apart: every placed thread to Linux, for a stint of 4 s
//!                          (8, 16, … s each time it is found apart again); after the
//!                          stint, threads are placed again as they qualify, and tested
//! ```
//!
//! The duty cycle is averaged over a second, not the 200 ms that decide whether a single
//! thread mostly sleeps: barrier programs stay peers because a rotation gives every
//! thread the same time doubled up, so over a second their waits at the barriers are
//! alike, even when in one 200 ms stretch some waited more; and a thread that slept
//! while the program started is not held apart for longer than about a second. A thread passing
//! through the gap on its way to being released (a main thread gone to sleep in `join`)
//! leaves the placed set within about 100 ms, before the 150 ms have passed.
//!
//! While apart the threads are with Linux, and their blocked fractions are Linux's, which
//! for a barrier program would differ as much as `uneven`'s: so the verdict is not
//! re-tested while apart, only after the stint.

use super::Speed;
use threadbalance_model::{Move, Nanos, Reason, Target};

/// Blocked fractions further apart than this: not peers.
const GAP_APART: f64 = 0.2;
/// How long a verdict must hold before the policy acts on it.
const HOLD: Nanos = Nanos::from_millis(150);
/// A thread counts in the test once watched this long, ns.
const MIN_AGE: f64 = 50e6;
/// The first stint with Linux after the threads were found apart; it doubles each time.
const FIRST_STINT: Nanos = Nanos::from_secs(4);

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

impl Speed {
    /// The spread of the duty cycles of the placed threads watched
    /// long enough; `None` with fewer than two.
    fn duty_gap(&self) -> Option<f64> {
        let mut range: Option<(f64, f64)> = None;
        let mut n = 0;
        for p in self
            .placed
            .iter()
            .filter(|p| !p.released && p.age >= MIN_AGE)
        {
            n += 1;
            let b = p.duty;
            range = Some(match range {
                None => (b, b),
                Some((lo, hi)) => (lo.min(b), hi.max(b)),
            });
        }
        range.filter(|_| n >= 2).map(|(lo, hi)| hi - lo)
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
        if self.duty_gap().is_none_or(|g| g <= GAP_APART) {
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
        for i in 0..self.placed.len() {
            let p = &mut self.placed[i];
            if p.released {
                continue;
            }
            p.released = true;
            self.queues[p.queue].load -= 1;
            if managing {
                moves.push(Move {
                    thread: p.key,
                    to: Target::Original,
                    why: Reason::Release,
                });
            }
        }
    }
}
