//! The planner's round (levelling and the rotation), the back-off of moves that did not
//! speed anything up, and the guard's bookkeeping; see `docs/speed-rules.md`.

use super::guard::{Action, BUSY, LEVEL, Mode};
use super::{
    CREDIT_TAU_S, FAR_LEAD_ROUNDS, HELD, IDLE, MIN_SWAPS, SIGNAL_TAU_S, SLOWER, SPED_UP,
    SWAP_SHARE, Speed, per_core_cmp,
};
use threadbalance_model::{Move, Nanos, NodeId, Reason, Target};

/// What a round needs to know of a group of cores (see [`Speed::view`]).
struct View {
    hi: usize,
    lo: usize,
    nh: u32,
    nl: u32,
    cores: usize,
    at_hi: f64,
    at_lo: f64,
    below_hi: f64,
}

/// What the rotation can give the slowest threads of a group of `cores` queues holding
/// `threads` threads, `hi` on the fullest: each queue's share of a CPU, evened over the
/// group, against the fullest queue's: `hi · cores / threads` (×1.94 for 17 threads on 16
/// CPUs, ×1.03 for 31).
///
/// Where the threads never block, that is all a rotation can gain: a thread that waits by
/// yielding or spinning stays runnable, so no CPU goes idle at a barrier and the level
/// placement already runs every CPU; the rotation only evens who gets the emptier ones.
/// (Where they block, a rotation also hands work to CPUs whose threads went to sleep,
/// a gain the counts do not show.) Below 1/T_s ([`SLOWER`], the paper's threshold for a
/// core) the rotation is not worth its moves: each refetches the moved thread's caches
/// and preempts two threads, and at the 1 ms rounds yielding threads ask for that costs
/// more than it gains. Measured: simulated, default settings, 10 and 30 ms yield phases,
/// seeds 1–3, N = 2M−1 on 16, 2 × 12, 8 × 2, 2 × 8 × 2, 16 × 2 and 64 CPUs: rotating
/// (count gain ×1.02–1.03) ran 0.93–1.38× Linux, holding the level placement 1.03–1.47×;
/// N = 11M/4 (×1.09) on 16 and 2 × 12 cores: 0.88–1.10 against 1.01–1.17; N = 7M/4
/// (×1.14), where the rotation keeps running, on 16 and 2 × 12 cores: 1.05–1.11 against
/// 0.94–1.00 level.
pub(super) fn count_gain(hi: u32, cores: usize, threads: u32) -> f64 {
    f64::from(hi) * cores as f64 / f64::from(threads.max(1))
}

impl Speed {
    /// One round at `now`: judges the last round's moves, then levels and rotates every
    /// node's cores. Returns whether some node has uneven counts with threads to rotate.
    pub(super) fn round(&mut self, now: Nanos, moves: &mut Vec<Move>) -> bool {
        let span = now.saturating_sub(self.last_round).0 as f64;
        self.last_round = now;
        let (mut judged, mut sped) = (0u32, 0u32);
        self.q_exec.clear();
        self.q_exec.resize(self.queues.len(), 0.0);
        self.q_want.clear();
        self.q_want.resize(self.queues.len(), 0.0);
        for p in self.placed.iter_mut() {
            if !p.released {
                let exec = p.exec - p.round_exec;
                self.q_exec[p.queue] += exec;
                self.q_want[p.queue] += exec + (p.wait - p.round_wait);
            }
            let exec = p.exec - p.round_exec;
            let want = exec + (p.wait - p.round_wait);
            // Its speed over the time it wanted a CPU (not its CPU share of the round): a
            // thread moved to a light core that then sleeps at a barrier ran fast while it
            // ran, and says nothing when it hardly wanted a CPU at all.
            let rate = (want > IDLE * span).then(|| exec / want);
            if let (Some(before), Some(after)) = (p.judge.take(), rate) {
                judged += 1;
                if after > before * SPED_UP {
                    sped += 1;
                }
            }
            p.round_rate = rate;
            p.round_exec = p.exec;
            p.round_wait = p.wait;
        }
        if judged > 0 {
            if sped * 2 < judged {
                let cap = (self.cfg.max_interval.0 / self.interval.0.max(1)).max(1);
                self.slow_down = (self.slow_down * 2).min(cap);
                self.stats.backoffs += 1;
            } else {
                self.slow_down = 1;
            }
        }
        let mut rotating = false;
        self.level_held = false;
        let groups = if self.cfg.allow_numa {
            1
        } else {
            self.nodes.len()
        };
        if !self.cfg.allow_numa && self.nodes.len() > 1 {
            self.level_nodes(moves);
        }
        for g in 0..groups {
            let node = (!self.cfg.allow_numa).then(|| self.nodes[g]);
            rotating |= self.rotate_group(node, moves);
        }
        if rotating {
            self.stats.rotating_rounds += 1;
        }
        rotating
    }

    fn in_group(&self, q: usize, node: Option<NodeId>) -> bool {
        node.is_none_or(|n| self.queues[q].node == n)
    }

    /// The group's fullest and emptiest cores (ties to the lowest index), its core count,
    /// and the speeds over the last round of the threads on cores holding as many threads
    /// as the fullest, as the emptiest, and fewer than the fullest (1.0 where nobody wanted
    /// a CPU: nothing held them back). Two passes over the cores.
    ///
    /// Where queues are SMT siblings, ties go to the CPU of the fullest physical core (for
    /// the fullest) and of the emptiest (for the emptiest): a levelling move then also
    /// evens the cores (see "Siblings" in `docs/speed-rules.md`).
    fn view(&self, node: Option<NodeId>) -> Option<View> {
        let (mut hi, mut lo, mut cores) = (None::<usize>, None::<usize>, 0);
        let mut core_load = Vec::new();
        if self.siblings {
            self.tally(|q| q.core, &mut core_load);
        }
        // Compares queues a and b by their cores' threads per CPU (equal without siblings).
        let by_core = |a: usize, b: usize| match (
            core_load.get(self.queues[a].core),
            core_load.get(self.queues[b].core),
        ) {
            (Some(&ca), Some(&cb)) => per_core_cmp(ca, cb),
            _ => std::cmp::Ordering::Equal,
        };
        for q in (0..self.queues.len()).filter(|&q| self.in_group(q, node)) {
            let load = self.queues[q].load;
            cores += 1;
            if hi.is_none_or(|h| {
                load.cmp(&self.queues[h].load)
                    .then_with(|| by_core(q, h))
                    .is_gt()
            }) {
                hi = Some(q);
            }
            if lo.is_none_or(|l| {
                load.cmp(&self.queues[l].load)
                    .then_with(|| by_core(q, l))
                    .is_lt()
            }) {
                lo = Some(q);
            }
        }
        let (hi, lo) = (hi?, lo?);
        let (nh, nl) = (self.queues[hi].load, self.queues[lo].load);
        let mut sums = [(0.0, 0.0); 3];
        for q in (0..self.queues.len()).filter(|&q| self.in_group(q, node)) {
            let load = self.queues[q].load;
            for (k, hit) in [load == nh, load == nl, load < nh].into_iter().enumerate() {
                if hit {
                    sums[k].0 += self.q_exec[q];
                    sums[k].1 += self.q_want[q];
                }
            }
        }
        let speed = |(exec, want): (f64, f64)| if want > 0.0 { exec / want } else { 1.0 };
        Some(View {
            hi,
            lo,
            nh,
            nl,
            cores,
            at_hi: speed(sums[0]),
            at_lo: speed(sums[1]),
            below_hi: speed(sums[2]),
        })
    }

    /// Levels the nodes' counts: when the fullest node (threads per core) would still hold
    /// at least as many per core as the emptiest after giving it one thread, and its
    /// fullest core is measurably slower than the emptiest node's emptiest core, that
    /// core's least-credited thread moves there. One move a round.
    ///
    /// Each node rotates only its own threads (the paper's §6.4), so counts that drift
    /// apart (threads exit, or go to sleep and are given back to Linux, on one node) stay
    /// apart: with 10 threads on one 8-core node and 6 on the other, two cores stand idle
    /// while two run doubled. Threads are spread over nodes when placed
    /// ([`Speed::emptiest`]); this keeps them so, moving a thread across nodes once where
    /// Linux's balancer would too, never to rotate.
    fn level_nodes(&mut self, moves: &mut Vec<Move>) {
        let mut load = std::mem::take(&mut self.node_load);
        self.tally(|q| self.node_ix(q), &mut load);
        let (mut hi, mut lo) = (0, 0);
        for k in 0..load.len() {
            if per_core_cmp(load[k], load[hi]).is_gt() {
                hi = k;
            }
            if per_core_cmp(load[k], load[lo]).is_lt() {
                lo = k;
            }
        }
        let ((lh, ch), (ll, cl)) = (load[hi], load[lo]);
        self.node_load = load;
        // After one move the fuller node still holds at least as many per core:
        // (lh − 1) / ch ≥ (ll + 1) / cl.
        if hi == lo || lh == 0 || per_core_cmp((lh - 1, ch), (ll + 1, cl)).is_lt() {
            return;
        }
        let (node_hi, node_lo) = (self.nodes[hi], self.nodes[lo]);
        let fullest = (0..self.queues.len())
            .filter(|&q| self.queues[q].node == node_hi)
            .max_by_key(|&q| (self.queues[q].load, std::cmp::Reverse(q)));
        let emptiest = (0..self.queues.len())
            .filter(|&q| self.queues[q].node == node_lo)
            .min_by_key(|&q| (self.queues[q].load, q));
        let (Some(from), Some(to)) = (fullest, emptiest) else {
            return;
        };
        let speed = |q: usize| {
            if self.q_want[q] > 0.0 {
                self.q_exec[q] / self.q_want[q]
            } else {
                1.0
            }
        };
        if speed(from) >= SLOWER * speed(to) {
            return;
        }
        let Some(i) = (0..self.placed.len())
            .filter(|&i| self.placed[i].queue == from && !self.placed[i].released)
            .min_by(|&a, &b| self.placed[a].credit.total_cmp(&self.placed[b].credit))
        else {
            return;
        };
        self.queues[from].load -= 1;
        self.queues[to].load += 1;
        self.placed[i].queue = to;
        self.stats.levels += 1;
        moves.push(Move {
            thread: self.placed[i].key,
            to: self.target(to),
            why: Reason::SpeedRotate {
                lead_ms: self.placed[i].credit / 1e6,
            },
        });
    }

    /// Levels and rotates the cores of one node (`None`: all cores).
    ///
    /// Long because its steps (numbered below) share the cores' tallies and must run in
    /// that order within one round.
    fn rotate_group(&mut self, node: Option<NodeId>, moves: &mut Vec<Move>) -> bool {
        // 1. Level: while a core holds two threads more than another and is slower, its
        //    least-credited thread moves to the emptiest.
        let v = loop {
            let Some(v) = self.view(node) else {
                return false;
            };
            if v.nh <= v.nl + 1 || v.at_hi >= SLOWER * v.at_lo {
                break v;
            }
            let Some(i) = (0..self.placed.len())
                .filter(|&i| self.placed[i].queue == v.hi && !self.placed[i].released)
                .min_by(|&a, &b| self.placed[a].credit.total_cmp(&self.placed[b].credit))
            else {
                break v;
            };
            self.queues[v.hi].load -= 1;
            self.queues[v.lo].load += 1;
            self.placed[i].queue = v.lo;
            self.stats.levels += 1;
            moves.push(Move {
                thread: self.placed[i].key,
                to: self.target(v.lo),
                why: Reason::SpeedRotate {
                    lead_ms: self.placed[i].credit / 1e6,
                },
            });
        };
        // 2. Even counts: nothing to rotate. (After a levelling move `v` may be stale only
        //    when the loop broke for lack of a thread, in which case counts are unchanged.)
        let (hi, lo) = (v.nh, v.nl);
        if lo == 0 || hi <= lo {
            return false;
        }
        // Threads that never block: only the counts' gain is there to take (see
        // [`count_gain`]), and under 1/T_s it is worth no rotation. "Never" once the
        // signals have watched them for their time constant: threads that block once a
        // phase show it within two phases of 100 ms.
        if self.work_phase_ns.is_none() && self.signals_age >= SIGNAL_TAU_S {
            let threads: u32 = (0..self.queues.len())
                .filter(|&q| self.in_group(q, node))
                .map(|q| self.queues[q].load)
                .sum();
            if count_gain(hi, v.cores, threads) * SLOWER < 1.0 {
                self.stats.held_level += 1;
                self.level_held = true;
                return false;
            }
        }
        // Heavy cores no slower than light ones (threads that sleep, or do not compete):
        // nothing a rotation would fix.
        if v.at_hi >= SLOWER * v.below_hi {
            return false;
        }
        // Phases finer than any round: the even placement is held (see [`super::fine`]).
        if self.fine() {
            return false;
        }
        // 3. Pair heavy threads (least credit first) with light ones (most credit first).
        let mut heavy = std::mem::take(&mut self.heavy);
        let mut light = std::mem::take(&mut self.light);
        heavy.clear();
        light.clear();
        // Heavy cores of two threads and light ones of one: a swap can be one move (see
        // "One move a swap" in `docs/speed-rules.md`), for which each heavy core's two threads
        // are noted, and the cores this round's moves change.
        let one_move = hi == 2 && lo == 1 && !self.waits_late;
        // Threads and CPUs of each physical core, where queues are SMT siblings, and whether
        // the group's cores hold as many threads per CPU as each other (see "Siblings").
        let mut core_load = std::mem::take(&mut self.core_load);
        core_load.clear();
        let mut cores_even = false;
        if self.siblings {
            self.tally(|q| q.core, &mut core_load);
            let mut group = (0..self.queues.len())
                .filter(|&q| self.in_group(q, node))
                .map(|q| core_load[self.queues[q].core]);
            let first = group.next();
            cores_even = first.is_some_and(|f| group.all(|c| per_core_cmp(c, f).is_eq()));
        }
        let mut mates = std::mem::take(&mut self.mates);
        let mut touched = std::mem::take(&mut self.touched);
        mates.clear();
        touched.clear();
        if one_move {
            mates.resize(self.queues.len(), [None, None]);
            touched.resize(self.queues.len(), false);
        }
        for (i, p) in self.placed.iter().enumerate() {
            if p.released || !self.in_group(p.queue, node) {
                continue;
            }
            if self.queues[p.queue].load == hi {
                heavy.push(i);
                if one_move {
                    let pair = &mut mates[p.queue];
                    pair[usize::from(pair[0].is_some())] = Some(i);
                }
            } else {
                light.push(i);
            }
        }
        // At most a quarter of the group's cores (and at least 8) swap per round: the best
        // pairs first, so only those need sorting. When the host's watching pace holds the
        // rounds back (a live loop's CPU budget), a round spans several periods asked, and
        // may swap as many times more: the moves a second stay bounded as asked, and the round is not
        // left with a quarter of the heavy cores to turn over when it comes a phase late.
        let cap = (v.cores / SWAP_SHARE)
            .max(MIN_SWAPS)
            .saturating_mul(self.sparse.periods_per_round());
        // Heavy threads held back now go first when the threads block between phases
        // shorter than the credits' memory and do equal work (see "Held back now" in
        // `docs/speed-rules.md`), then the least credited.
        let blocking = self.phase_ns.is_some()
            && self
                .work_phase_ns
                .is_none_or(|work| work < CREDIT_TAU_S * 1e9)
            && self.equal_work_now();
        let held = |i: usize| blocking && self.placed[i].held >= HELD;
        let credit = |i: &usize| self.placed[*i].credit;
        let up = |a: &usize, b: &usize| {
            held(*b)
                .cmp(&held(*a))
                .then(credit(a).total_cmp(&credit(b)))
        };
        let down = |a: &usize, b: &usize| credit(b).total_cmp(&credit(a));
        if heavy.len() > cap {
            heavy.select_nth_unstable_by(cap - 1, up);
            heavy.truncate(cap);
        }
        if light.len() > cap {
            light.select_nth_unstable_by(cap - 1, down);
            light.truncate(cap);
        }
        heavy.sort_unstable_by(up);
        light.sort_unstable_by(down);
        // The lead a light thread needs over a heavy one to swap: none but on SMT siblings
        // with blocking phases, where moves cost more than such a turn gains (the host
        // layer's `swap_margin_ns`).
        let margin = super::host::swap_margin_ns(self.siblings, self.work_phase_ns);
        // The lead a light thread behind another LLC needs, where threads never block
        // (`FAR_LEAD_ROUNDS`).
        let far_round = if self.work_phase_ns.is_none() {
            FAR_LEAD_ROUNDS * self.interval.0 as f64
        } else {
            0.0
        };
        let mut used = std::mem::take(&mut self.used);
        used.clear();
        used.resize(light.len(), false);
        let mut first_free = 0;
        for &x in &heavy {
            // The light thread with the most credit, unless one of the `cap` best behind
            // the same LLC is worth the swap too: that one (see "Nodes and LLCs" in
            // `docs/speed-rules.md`). With one LLC that is the same thread.
            while first_free < light.len() && used[first_free] {
                first_free += 1;
            }
            let any = (first_free < light.len()).then_some(first_free);
            let llc_x = self.queues[self.placed[x].queue].llc;
            let held_x = blocking && self.placed[x].held >= HELD;
            let worth = |y: usize| held_x || self.placed[y].credit - self.placed[x].credit > margin;
            let near = (first_free..light.len()).find(|&j| {
                !used[j] && self.queues[self.placed[light[j]].queue].llc == llc_x && worth(light[j])
            });
            // Where every core holds as many threads as every other, x's SMT sibling first:
            // a move between siblings keeps the cores even and refetches nothing.
            let core_x = self.queues[self.placed[x].queue].core;
            let sibling = cores_even
                .then(|| {
                    (first_free..light.len()).find(|&j| {
                        !used[j]
                            && self.queues[self.placed[light[j]].queue].core == core_x
                            && worth(light[j])
                    })
                })
                .flatten();
            let Some(j) = sibling.or(near).or(any) else {
                break;
            };
            let y = light[j];
            if !worth(y) {
                break;
            }
            // Behind another LLC, a thread that never blocks must lead by a round: see
            // "Nodes and LLCs" in `docs/speed-rules.md`.
            if far_round > 0.0
                && self.queues[self.placed[y].queue].llc != llc_x
                && self.placed[y].credit - self.placed[x].credit <= far_round
            {
                continue;
            }
            used[j] = true;
            let (qx, qy) = (self.placed[x].queue, self.placed[y].queue);
            self.placed[x].judge = self.placed[x].round_rate;
            self.stats.swaps += 1;
            if one_move {
                // One move takes a thread off x's physical core and onto y's: only where
                // that does not leave y's core fuller than x's was (siblings, or y's core
                // the emptier); else a swap, which keeps every core's count.
                let (cx, cy) = (self.queues[qx].core, self.queues[qy].core);
                let keeps_cores = match (core_load.get(cx), core_load.get(cy)) {
                    (Some(&lx), Some(&ly)) => cx == cy || per_core_cmp(ly, lx).is_lt(),
                    _ => true,
                };
                let z = if keeps_cores {
                    mate_to_move(&mates, &touched, x, qx, qy)
                } else {
                    None
                };
                touched[qx] = true;
                touched[qy] = true;
                if let Some(z) = z {
                    // x stays, alone now; its core-mate joins y.
                    self.placed[z].queue = qy;
                    self.queues[qx].load -= 1;
                    self.queues[qy].load += 1;
                    if cx != cy
                        && let (Some(lx), Some(ly)) = (core_load.get(cx), core_load.get(cy))
                    {
                        let (lx, ly) = (lx.0, ly.0);
                        core_load[cx].0 = lx - 1;
                        core_load[cy].0 = ly + 1;
                    }
                    moves.push(Move {
                        thread: self.placed[z].key,
                        to: self.target(qy),
                        why: Reason::SpeedRotate {
                            lead_ms: self.placed[z].credit / 1e6,
                        },
                    });
                    continue;
                }
            }
            self.placed[x].queue = qy;
            self.placed[y].queue = qx;
            for (i, q) in [(x, qy), (y, qx)] {
                moves.push(Move {
                    thread: self.placed[i].key,
                    to: self.target(q),
                    why: Reason::SpeedRotate {
                        lead_ms: self.placed[i].credit / 1e6,
                    },
                });
            }
        }
        self.heavy = heavy;
        self.light = light;
        self.core_load = core_load;
        self.used = used;
        self.mates = mates;
        self.touched = touched;
        true
    }

    /// The program's progress rate since the guard's span opened: the least CPU share of a
    /// thread that was there all along and was busy (see [`super::guard`]); and the mean
    /// share of those threads.
    pub(super) fn segment_rate(&self, now: Nanos) -> Option<(f64, f64)> {
        self.span_rate(self.seg_at, now, |p| p.seg)
    }

    /// The least and the mean CPU share from `from` to `now` of the threads that `mark`
    /// gives a valid mark and that were busy through the span (wanted a CPU at least
    /// `BUSY` of it); `None` when no thread counts.
    pub(super) fn span_rate(
        &self,
        from: Nanos,
        now: Nanos,
        mark: impl Fn(&super::Placed) -> super::Mark,
    ) -> Option<(f64, f64)> {
        let span = now.saturating_sub(from).0 as f64;
        if span <= 0.0 {
            return None;
        }
        let (mut least, mut sum, mut n) = (f64::INFINITY, 0.0, 0u32);
        for p in &self.placed {
            let m = mark(p);
            if !m.valid {
                continue;
            }
            let exec = p.exec - m.exec;
            if exec + (p.wait - m.wait) >= BUSY * span {
                let rate = exec / span;
                least = least.min(rate);
                sum += rate;
                n += 1;
            }
        }
        (n > 0).then(|| (least, sum / f64::from(n)))
    }

    /// Whether the placed threads kept every CPU that holds some of them busy at least
    /// `LEVEL` of the guard's span (the threads there all along; none moved while the level
    /// placement is held). What takes a CPU from them is another program, which Linux
    /// might steer them away from.
    fn queues_kept_busy(&self, now: Nanos) -> bool {
        let span = now.saturating_sub(self.seg_at).0 as f64;
        if span <= 0.0 {
            return false;
        }
        // Once a stint: a fresh tally is cheap.
        let mut busy = vec![(0.0, 0u32); self.queues.len()];
        for p in self.placed.iter().filter(|p| !p.released && p.seg.valid) {
            busy[p.queue].0 += p.exec - p.seg.exec;
            busy[p.queue].1 += 1;
        }
        busy.iter()
            .zip(&self.queues)
            .all(|(&(exec, n), q)| q.load == 0 || (n == q.load && exec >= LEVEL * span))
    }

    /// Whether every core holds as many placed threads as every other (N a multiple of M):
    /// even pinning, which nothing can better for threads that progress alike (see "Even
    /// pinning needs no probe" in [`super::guard`]).
    fn counts_even(&self) -> bool {
        let mut loads = self.queues.iter().map(|q| q.load);
        let Some(first) = loads.next() else {
            return false;
        };
        first > 0 && loads.all(|l| l == first)
    }

    /// Opens the guard's measured span when its tail starts, and ends the stint when it
    /// is over, releasing or placing again every thread as the guard says.
    pub(super) fn guard_step(&mut self, now: Nanos, moves: &mut Vec<Move>) {
        let Some((from, until)) = self.guard.as_ref().map(|g| (g.measure_from(), g.until)) else {
            return;
        };
        if !self.seg_open && now >= from {
            for p in self.placed.iter_mut() {
                p.seg = super::Mark::of(p);
            }
            self.seg_open = true;
            self.seg_at = now;
            return;
        }
        if !self.seg_open || now < until {
            return;
        }
        let rates = self.segment_rate(now);
        let rate = rates.map(|(least, _)| least);
        // Even pinning, or the level placement held where no rotation would pay (see
        // "Level placements need no probe" in [`super::guard`]).
        let even = !self.regime.rotation().turned
            && ((self.counts_even() && rates.is_some_and(|(least, mean)| least >= LEVEL * mean))
                || (self.level_held && self.queues_kept_busy(now)));
        let active = self.placed.iter().filter(|p| !p.released).count().max(1);
        let fair = (self.queues.len() as f64 / active as f64).min(1.0);
        self.seg_open = false;
        let Some(g) = self.guard.as_mut() else {
            return;
        };
        let action = g.advance(now, rate, fair, even);
        for p in self.placed.iter().filter(|p| !p.released) {
            match action {
                Action::Keep => {}
                Action::Release => moves.push(Move {
                    thread: p.key,
                    to: Target::Original,
                    why: Reason::Release,
                }),
                Action::Resume => moves.push(Move {
                    thread: p.key,
                    to: self.target(p.queue),
                    why: Reason::Initial,
                }),
            }
        }
        if action == Action::Resume {
            // The rounds while Linux held the threads rotated nothing, and the interval
            // backed off with them (to 40–100 ms over a 125 ms probe): the next round
            // would come that late and leave the threads placed but not rotated until
            // then. A round comes at once instead, from the shortest interval, which the
            // signals then set as at the start.
            self.slow_down = 1;
            self.regime = self.regime.next(&self.seen(super::Round::Resumed));
            self.next_round = now;
            self.interval = self.fixed.unwrap_or(self.cfg.min_interval);
        }
    }

    /// One line on the guard for the summary.
    pub(super) fn guard_summary(&self) -> Option<threadbalance_model::GuardSummary> {
        use threadbalance_model::GuardMode;
        let g = self.guard.as_ref()?;
        Some(threadbalance_model::GuardSummary {
            mode: match g.mode {
                Mode::Managed => GuardMode::Managing,
                Mode::Probe => GuardMode::ProbingLinux,
                Mode::HandedBack => GuardMode::HandedBack,
                Mode::Trial => GuardMode::Trial,
            },
            probes: u64::from(g.probes),
            skipped_probes: u64::from(g.skipped),
            skipped_even: u64::from(g.skipped_even),
            handbacks: u64::from(g.handbacks),
            resumptions: u64::from(g.resumes),
            last_event: g.last.clone(),
            judge: Some(g.judge_text()),
        })
    }

    pub(super) fn note_interval(&mut self) {
        let i = self.interval;
        self.stats.rounds += 1;
        self.stats.interval_sum_ms += i.as_millis_f64();
        self.stats.min_seen = Some(self.stats.min_seen.map_or(i, |m| m.min(i)));
        self.stats.max_seen = Some(self.stats.max_seen.map_or(i, |m| m.max(i)));
    }
}

/// The thread that moves instead of a swap of `x`, on heavy core `qx`, with the lone thread
/// of light core `qy` (see "One move a swap" in `docs/speed-rules.md`): `x`'s core-mate as
/// the round found it (`mates`), unless a move of this round changed either core already
/// (`touched`). `None`: swap.
fn mate_to_move(
    mates: &[[Option<usize>; 2]],
    touched: &[bool],
    x: usize,
    qx: usize,
    qy: usize,
) -> Option<usize> {
    if touched[qx] || touched[qy] {
        return None;
    }
    match mates[qx] {
        [Some(a), Some(b)] if a == x => Some(b),
        [Some(a), Some(b)] if b == x => Some(a),
        _ => None,
    }
}
