//! What the policy knows of each thread, window by window: first sight and placement
//! (the emptiest core, spread over nodes and LLCs, which is round-robin on the first
//! window), run and wait time, the blocked fraction that releases sleepers and adopts them
//! again, and the credits the rotation orders threads by.

use super::{
    ADOPT_BELOW, ASLEEP_AGE, DUTY_TAU_S, IDLE, Mark, Placed, RELEASE_ABOVE, SIGNAL_TAU_S, Speed,
};
use threadbalance_model::{Move, Reason, Target, ThreadKey, ThreadRates, Window};

impl Speed {
    /// Updates a thread we know with its rates over the window: exec, wait, its blocked
    /// fraction, and whether it is given back to Linux or placed again.
    pub(super) fn update_known(
        &mut self,
        p: &mut Placed,
        t: &ThreadRates,
        dt: f64,
        managing: bool,
        moves: &mut Vec<Move>,
    ) {
        // The window with late counters accounted for (the host layer's `observe`).
        let seen = super::host::observe(t);
        p.last_free = seen.free * dt;
        p.held = t.latency;
        p.exec += t.speed * dt;
        p.life_work += life_weight(dt, p.age + dt) * (t.speed - p.life_work);
        p.wait += seen.waited * dt;
        p.age += dt;
        let blocked = seen.blocked;
        if p.lent || p.released {
            // With Linux, its duty cycle is Linux's doing, not evidence of how it fares
            // pinned: the peer test's averages start again when it is placed.
            p.started = None;
        } else if let Some(started) = p.started {
            let started = started + dt;
            p.started = Some(started);
            let a = life_weight(dt, started);
            p.duty = (p.duty + a * (blocked - p.duty)).max(0.0);
            p.work += a * (t.speed - p.work);
        } else {
            // The first window after it was placed does not count (see `Placed::started`).
            p.started = Some(0.0);
        }
        let alpha = dt / (SIGNAL_TAU_S * 1e9 + dt);
        p.blocked = (p.blocked + alpha * (blocked - p.blocked)).max(0.0);
        // Asleep ever since it was first seen (a main thread waiting in `join`): released
        // at once rather than when its 200 ms average catches up, so that it does not
        // hold a core's count up meanwhile.
        let asleep = p.age >= ASLEEP_AGE && p.exec + p.wait < IDLE * p.age;
        // Phases finer than any round: its sleeps are barrier waits (see [`fine`]). Nor is
        // a barrier peer that sleeps more than its peers for a while a sleeper (see
        // "Barrier peers are not sleepers" in [`peers`]).
        let fine = self.fine();
        let peer = self.sleep_shared && p.exec + p.wait >= IDLE * p.age;
        let sleeper = p.blocked > RELEASE_ABOVE && !fine && !peer;
        if p.lent {
            // Lent to Linux while busy threads are few: one that goes to sleep is a
            // sleeper like any other (already with Linux, so no move).
            if sleeper || asleep {
                p.lent = false;
                self.stats.released += 1;
            }
        } else if !p.released && (sleeper || asleep) {
            p.released = true;
            self.queues[p.queue].load -= 1;
            self.stats.released += 1;
            if managing {
                moves.push(Move {
                    thread: p.key,
                    to: Target::Original,
                    why: Reason::Release,
                });
            }
        } else if p.released && (p.blocked < ADOPT_BELOW || fine) && !asleep && !self.peers.apart {
            if self.few.active || self.sparse.active {
                // Busy again, but counted only: `check_few` places the lent threads
                // once they outnumber the cores.
                p.lent = true;
                return;
            }
            let queue = self.emptiest();
            if queue < self.queues.len() {
                p.released = false;
                p.queue = queue;
                p.credit = 0.0;
                self.place(p.key, queue, managing, moves);
            }
        }
    }

    /// Counts a thread on `queue` and, while managing, asks for it to be placed there.
    pub(super) fn place(
        &mut self,
        key: ThreadKey,
        queue: usize,
        managing: bool,
        moves: &mut Vec<Move>,
    ) {
        self.queues[queue].load += 1;
        self.stats.initial += 1;
        if managing {
            moves.push(Move {
                thread: key,
                to: self.target(queue),
                why: Reason::Initial,
            });
        }
    }

    /// Credits: each placed thread's time not held back (running, or not wanting a CPU:
    /// window − run-queue wait) minus the mean over the placed threads, decayed.
    pub(super) fn update_credits(&mut self, dt: f64) {
        let (mut sum, mut n) = (0.0, 0u32);
        for p in self.placed.iter().filter(|p| !p.released) {
            sum += p.last_free;
            n += 1;
        }
        let mean = sum / f64::from(n.max(1));
        let decay = (-dt / self.credit_tau_ns()).exp();
        for p in self.placed.iter_mut().filter(|p| !p.released) {
            p.credit = p.credit * decay + (p.last_free - mean);
        }
    }

    /// Merges the window into the table of placed threads: accumulates exec and wait
    /// time and credits, drops threads that are gone, places new ones (on the emptiest
    /// queue, see `Speed::emptiest`) and releases or adopts sleepers. Moves are
    /// asked for only while the policy manages; otherwise it keeps its books.
    pub(super) fn track(&mut self, w: &Window, moves: &mut Vec<Move>) {
        let dt = w.duration().0 as f64;
        let first = !self.regime.started();
        let managing = self.managing();
        self.sleep_shared = self.sleep_shared_now();
        // The usual tick: the same threads as last time, updated in place.
        if !first
            && w.threads.len() == self.placed.len()
            && w.threads
                .iter()
                .zip(&self.placed)
                .all(|(t, p)| t.key == p.key)
        {
            for (i, t) in w.threads.iter().enumerate() {
                let mut p = self.placed[i];
                self.update_known(&mut p, t, dt, managing, moves);
                self.placed[i] = p;
            }
            self.update_credits(dt);
            return;
        }
        let mut old = std::mem::take(&mut self.placed);
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        let mut i = 0;
        for t in &w.threads {
            while i < old.len() && old[i].key < t.key {
                if !old[i].released {
                    self.queues[old[i].queue].load -= 1;
                }
                i += 1;
            }
            if i < old.len() && old[i].key == t.key {
                let mut p = old[i];
                self.update_known(&mut p, t, dt, managing, moves);
                out.push(p);
                i += 1;
                continue;
            }
            // Round-robin at first sight too: the emptiest core, spread over nodes and LLCs.
            let queue = self.emptiest();
            if queue >= self.queues.len() {
                continue;
            }
            // While the threads are apart (not peers), a new thread stays with Linux too;
            // while busy threads are few, it is lent to Linux with them.
            let apart = self.peers.apart;
            let lent = !apart && (self.few.active || self.sparse.active);
            if !apart && !lent {
                self.place(t.key, queue, managing, moves);
            }
            let exec = t.speed * dt;
            out.push(Placed {
                key: t.key,
                queue,
                exec,
                wait: t.latency * dt,
                last_free: 0.0,
                credit: 0.0,
                held: t.latency,
                blocked: 0.0,
                age: 0.0,
                started: None,
                duty: 0.0,
                work: 0.0,
                life_work: 0.0,
                released: apart || lent,
                lent,
                seg: Mark::default(),
                trial: Mark::default(),
                round_exec: exec,
                round_wait: t.latency * dt,
                round_rate: None,
                judge: None,
                slice: None,
            });
        }
        for p in &old[i..] {
            if !p.released {
                self.queues[p.queue].load -= 1;
            }
        }
        old.clear();
        self.placed = out;
        self.spare = old;
        self.update_credits(dt);
    }
}

/// The weight of a window of `dt` ns in an average over the `span` ns it closes (the
/// window included), at most the last `DUTY_TAU_S`: an even mean over a short life, a
/// decaying one after.
fn life_weight(dt: f64, span: f64) -> f64 {
    (dt / span.min(DUTY_TAU_S * 1e9)).min(1.0)
}
