//! No more busy threads than cores: every thread goes back to Linux until there are.
//!
//! The rotation has something to do only when some core must hold more threads than
//! another: N busy threads on M cores with N > M. With N ≤ M every placed thread has a
//! core to itself, the counts are even, and the rotation stops (step 3 of the round). But
//! the threads stay *pinned*, and pinning one thread per core is what Linux would do at
//! best, minus its freedom: a pinned thread that wakes next to a busy core waits for it
//! even when another core is idle. That freedom matters whenever the program has other
//! threads that run now and then — the stages of a pipeline that mostly wait for work, a
//! main thread, helper threads given back as sleepers. Measured on two cores (real, idle
//! machine): ferret's stage profile (`workload pipeline`) left two busy stage threads pinned
//! one per core, and ran 3 % slower than under Linux alone; the NPB CG run of the 16-core
//! calibration (one thread per core) ran up to twice as slow under `speed` as under Linux.
//! Pinning with N ≤ M wins nothing a rotation could build on; Linux wins the work
//! conservation. So:
//!
//! ```text
//!  placed busy threads ≤ cores  ─► every one of them is *lent* to Linux (original mask)
//!                                  (at first sight: not placed at all)
//!  lent + newly busy threads > cores ─► every one of them placed again, on the emptiest
//!                                  cores, and the rotation takes over
//! ```
//!
//! Who counts as busy is the sleeper rule's word (blocked over 40 % of the time is a
//! sleeper, under 25 % busy again), unchanged: a lent thread that goes to sleep becomes a
//! sleeper, a sleeper that wakes up for good is counted as lent, and a new thread is lent
//! at once. So the test adds no threshold of its own and reacts as fast as the sleeper
//! rule: a barrier program with three workers on two cores whose main thread sleeps in
//! `join` is placed at first sight (four threads on two cores), and stays placed when
//! the main thread is released (three on two). It differs from the peer test
//! ([`super::peers`]) in that nothing is wrong with the threads: they are simply no more
//! than the cores, and Linux places them as well as pinning would, and better next to
//! other work.

use super::Speed;
use threadbalance_model::{Move, Reason, Target, ThreadKey};

/// Whether the program's busy threads are lent to Linux, and how often they were.
#[derive(Debug, Clone, Default)]
pub(super) struct Few {
    /// Every busy thread is lent to Linux now.
    pub(super) active: bool,
    /// How many times the threads were lent to Linux.
    pub(super) hand_backs: u64,
}

impl Speed {
    /// Gives every placed thread not yet released back to Linux (its original mask), marking
    /// it `lent` (when `lent`) to be placed again by [`Speed::place_lent_again`]. No move is
    /// sent for the threads in `unmoved` (sorted: placed by this same plan, so never moved)
    /// nor when not `managing`.
    pub(super) fn release_placed(
        &mut self,
        lent: bool,
        managing: bool,
        unmoved: &[ThreadKey],
        moves: &mut Vec<Move>,
    ) {
        for p in self.placed.iter_mut().filter(|p| !p.released) {
            p.released = true;
            p.lent |= lent;
            self.queues[p.queue].load -= 1;
            if managing && unmoved.binary_search(&p.key).is_err() {
                moves.push(Move {
                    thread: p.key,
                    to: Target::Original,
                    why: Reason::Release,
                });
            }
        }
    }

    /// Places every lent thread again, each on the emptiest core at its turn (the end of
    /// a lending, for whichever reason it was lent: this module's or `sparse`'s).
    pub(super) fn place_lent_again(&mut self, managing: bool, moves: &mut Vec<Move>) {
        for i in 0..self.placed.len() {
            if !self.placed[i].lent {
                continue;
            }
            let queue = self.emptiest();
            let p = &mut self.placed[i];
            p.lent = false;
            p.released = false;
            p.queue = queue;
            p.credit = 0.0;
            let key = p.key;
            self.place(key, queue, managing, moves);
        }
    }

    /// Lends every placed thread to Linux when they are no more than the cores, and places
    /// the lent ones again when they outnumber the cores (see the module docs). A thread
    /// placed by this same plan (first sight) is simply not moved.
    pub(super) fn check_few(&mut self, managing: bool, moves: &mut Vec<Move>) {
        let cores = self.queues.len();
        if self.few.active {
            let lent = self.placed.iter().filter(|p| p.lent).count();
            if lent <= cores {
                return;
            }
            self.few.active = false;
            self.place_lent_again(managing, moves);
            return;
        }
        // Every placed thread counts on its queue: the loads' sum, without a walk of the
        // threads on every tick.
        let placed: u32 = self.queues.iter().map(|q| q.load).sum();
        if placed == 0 || placed as usize > cores {
            return;
        }
        self.few.active = true;
        self.few.hand_backs += 1;
        // Threads placed by this very plan (first sight) were never pinned: their
        // placement is taken back instead of undone.
        let mut fresh: Vec<_> = moves
            .iter()
            .filter(|m| m.why == Reason::Initial)
            .map(|m| m.thread)
            .collect();
        fresh.sort_unstable();
        moves.retain(|m| !(m.why == Reason::Initial && fresh.binary_search(&m.thread).is_ok()));
        self.release_placed(true, managing, &fresh, moves);
    }
}
