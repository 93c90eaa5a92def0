//! Rounds too sparse for the phases: the threads are lent to Linux until rounds come fast
//! enough again.
//!
//! The policy asks for a round every B (1 ms at 10 ms phases, see `speed`'s interval
//! table), but a live host paces its ticks by a CPU budget: 0.8 % of one core. Where a
//! tick costs C µs, a round comes at best every C / 0.008 µs, whatever B is: 133 µs (the
//! `/proc` sampler with 17 threads, `--tick-cost 21.1,6.246`: 21.1 + 6.246 × 18) gives a
//! round every 16.7 ms. A rotation step must be short against the phase: a doubled-up
//! thread stays doubled until the next round, so with a round every G and phases of S
//! every phase that holds no round runs at the slow cores' speed, 1/(T + 1), the whole
//! phase long — pinning without the rotation. Worse, with blocking barriers the pinning
//! also takes Linux's work conservation away: a thread that wakes on its busy core waits
//! there while the cores of the threads that went to sleep at the barrier stand idle.
//! Linux alone would have pulled it over.
//!
//! **The rule.** At each round the policy measures the gap G since the last one (smoothed
//! over about four rounds; or the last two gaps, when both are longer) and compares it
//! with the phase's work S: the CPU time a thread runs between two blocking points,
//! the busy threads' CPU time per voluntary switch (both smoothed as the interval's
//! signals are; see "The work over every busy thread"), read
//! only while the threads *block*: at least a third of their switches voluntary, or asleep
//! at least 1 % of the time (`SLEEPING`; see "Threads that sleep block" below). When the host
//! holds the rounds back (G more than twice the periods asked for those rounds, smoothed
//! alike, so that a gap after a long period asked, a backed-off rotation, does not count)
//! and G > 1.5 S while the rotation runs, every placed thread is *lent* to Linux (its
//! original mask, as [`super::super::few`] does); the policy keeps asking for rounds every B and
//! keeps measuring. When G < 0.8 S again (the budget recovered, or the phases
//! lengthened), or the signals no longer give a phase, the lent threads are placed again
//! on the emptiest cores and the rotation takes over.
//!
//! ```text
//!   round: G ← G + ¼ (now − last round − G);   S = CPU time / voluntary switches
//!          A ← A + ¼ (asked for that gap − A)
//!          G' = max(G, min(last two gaps))
//!   held = G > 2 · max(A, asked) ∨ min(last two gaps) > 2 · max(their two asked)
//!   rotating ∧ held ∧ G' > 1.5 S        ─► lend every placed thread to Linux
//!                         (1.0 S when the window's waits may come late)
//!   lent ∧ (G + M < 0.8 S ∨ no phase seen)  ─► place them again, rotate
//!          M = what the rotation's moves added to the gap: 0 unless moves are charged,
//!              or the host reports no pace and the threads were placed again before
//!   lent on trial ∧ r_rotation > (1 + δ) · r_lent  ─► place them again; lend only
//!          once G' > 1.5 × the gap that lost         (see "Lending on trial")
//! ```
//!
//! **Waits read late lend from one phase.** The 1.5 below was swept with exact counters
//! (the BPF counters). Read from `schedstat` (`Window::waits_late`), a queued thread's wait
//! comes only once it runs again, the rotation keeps less of its gain, and it loses to
//! Linux from about one phase: with the `/proc` tick measured on the idle 2-core VM
//! (24.2 µs + 4.148 µs a thread), 24 threads with 10 ms blocking phases on 16 cores got a
//! round every ~16 ms, were never lent, and took 1.009–1.078× Linux's time (simulated,
//! seeds 1–3); swept at 1.5, 1.2, 1.0 and 0.8 phases, 1.0 held 17, 20 and 24 threads
//! within 1.6 % of Linux and 0.8 did no better (`docs/speed-rules.md`).
//!
//! **Why the work and not the phase on the wall clock.** The rule first compared G with
//! the phase the interval uses, 1 / (switches per thread-second of wall time). That phase
//! stretches with the waiting the rule is there to judge: under a slow rotation (rounds
//! every 18 ms, 17 threads on 16 cores, 10 ms of work a phase) it read 15 ms, the rule
//! never fired (18 < 1.5 × 15), and `speed` ran 3.1–3.9 points of the fair share behind
//! Linux; early in a run, before the doubled-up cores slowed the phases, it read short,
//! and lent 24 threads whose rotation at a round every 11–14 ms gains 2–6 points. The
//! work between blocking points reads 10 ms in both, and under Linux too, so lending and
//! taking back do not feed back on the estimate. Re-swept with it (the simulator with the
//! Linux model's run queues following the running thread, `--tick-cost F,0`, seeds 1–3,
//! `speed` − `none` in points): 17 threads at 18 ms rounds −0.2…+0.3 (lent; was
//! −3.9…−3.1), 24 threads at 11–14 ms +2.4…+6.2 (was lent, −0.4…+1.3), 20 threads at
//! 13–16 ms −0.4…+2.3 (was lent, −1.3…+0.3); the cost is the `/proc` fit at 17 threads
//! (rounds every 16.7 ms), now lent, −0.3…+0.1 where the slow rotation gained +0.1…+1.1,
//! and 24 threads at 15 ms, −2.4…+0.9 where lent gave −1.8…+1.0. `docs/speed-rules.md`
//! has the whole sweep.
//!
//! **Where 1.5 comes from.** It was set on the phase on the wall clock, by the sweep
//! below (the Linux model before its run queues followed the running thread), and kept
//! for the work: in the new sweep the rotation still gains at 1.1–1.4 phases of work
//! (20 and 24 threads), is level with Linux at 1.4–1.5 (17 threads), and lending from
//! 1.5 on holds every row within 2.4 points of Linux. The first sweep (simulator, 16
//! cores, `ep-barrier` 10 ms nominal phases, blocking barriers, seeds 1–3, ticks of F µs and no per-thread part, so G ≈ F / 0.008).
//! Without the rule the rotation still beat Linux at G = 1.4 nominal phases (17 threads
//! 63 % of the fair share against 59 %, 20 threads 73–74 against 69–70, 24 threads 81–83
//! against 78–80), but not at 1.6 with 24 threads (77–79 against 78–80), and from 1.8 on
//! it lost at every N (58–59 against 59–60 at 17 threads, 66–69 against 69–70 at 20):
//! past G ≈ 1.5 nominal phases at least one phase in three holds no round at all, and by
//! 2 every other phase runs pinned and doubled. The signals count the phase as the program
//! runs it, slowed by the doubled cores and with their preemptions counted: 8–10 ms
//! early in a run, 12–13 ms later under rotation for a 10 ms phase, 14–15 ms under
//! Linux. So the threshold is set on the phase seen early, where the decision falls:
//! at 1.25 phases seen the rule also fired on rows where the rotation wins (the BPF fit
//! at 24 threads, rounds every ~8 ms against phases read as 6 ms at first), and cost
//! them up to 3 points; at 1.5 it fires on the rows where Linux wins (`/proc` fit, 20 and
//! 24 threads: rounds every 13–19 ms against 9–10 ms) and on no other row of the
//! README's sweep. The last two gaps count so that the decision does not wait for the
//! smoothed gap to forget the pacer's burst of cheap first ticks (lent at 0.04 s instead
//! of 0.10 s). On the way back the phase reads longer under Linux (19 ms rounds against
//! 15 ms phases: 1.27), so coming back at 1.2 would lend and place every few rounds;
//! 0.8 is below what Linux's slower phases show.
//!
//! **Yield barriers are left alone.** Threads that spin with `sched_yield` keep every core
//! busy, so Linux has no idle core to conserve work on, and almost all their switches are
//! involuntary (0 voluntary against ~100 involuntary per thread-second in the simulator).
//! In the same sweep the slow rotation beats Linux under yield at every gap up to 4
//! nominal phases (53.6 % against 52.6 % at 17 threads, 75 against 72 at 24).
//!
//! With free ticks (G = the period asked for) the rule never fires.
//!
//! **Threads that sleep block.** With phases of 100 ms and more a thread blocks a few times
//! a second, and two threads sharing a core preempt each other hundreds of times (more in
//! short slices at HZ 1000: ~460 a thread-second against ~7 voluntary switches at 24
//! threads). The switches alone then read "not blocking", no work phase was given, and the
//! rule never saw such phases, however sparse the rounds: 24 threads with 100 ms blocking
//! phases, `schedstat` counters and ticks of 1.6 ms (rounds every 200 ms) ran a slow
//! rotation at 87.5–87.7 % of the fair share where Linux reached 97.0–97.7. Time asleep
//! says it as well: threads asleep at least 5 % of the time block (1 % since: a rotation
//! that works keeps barrier waits at 2–4 %, `tuned::SLEEPING`). Now they are lent
//! (94.0–94.8 %); 20 threads 75.7–75.8 → 78.9–79.2 % (Linux 81.7–81.8), 17 threads 66.8 →
//! 67.8 (69.9–70.0). Where the rounds are 1.25 phases of work apart (ticks of 1 ms) 17
//! threads lose 1.5–1.8 points by it (69.9 → 68.1–68.4: the slow rotation was level with
//! Linux, and lending comes only after the rounds that measure the gap) and 24 threads
//! gain 1.9–7.6; at 1.5 nothing changes (simulated, 16 cores, HZ 1000, seeds 1–2;
//! `docs/speed-rules.md`). Every row with the fitted tick costs (16 and 64 cores, 10 and
//! 100 ms phases, both fits) and the scenarios moved by at most 0.4 points. The phase on
//! the wall clock (the fine-phase rule's) still comes from the switches alone.
//!
//! **A look at the pace.** The rule needs two rounds to trust the gap, and the first
//! placement comes before any: with rounds far apart the threads run pinned, doubled up,
//! for two gaps before they are lent. 320 threads on 256 cores with 100 ms blocking phases
//! and the `/proc` build's tick (24.2 µs + 4.148 µs a thread: a round every ~169 ms) ran
//! pinned until 0.35 s and then under Linux from a worse start than Linux's own: 71.0 % of
//! the fair share against Linux's 77.8 % (simulated, seed 1). The host knows the gap
//! before the rounds show it: its budget lets ticks that cost C come every C / 0.008
//! (`Window::pace`, from the last tick's cost; the simulator's pacer and `run`'s give
//! it from the second tick on). So, at the first tick that gives a pace of at least
//! `LOOK_FROM` (100 ms), unless the placed threads' count is a multiple of the cores (even
//! pinning needs no round), every placed thread is lent to Linux at once (placed one tick
//! before, ~1 ms), one window at that pace is read, and then
//!
//! ```text
//!   counts would rotate ∧ pace > lend × S  ─► stay lent (taken back as above)
//!   otherwise                              ─► placed again on the emptiest cores
//! ```
//!
//! The 320 threads now run as Linux runs them, to the microsecond (77.8 %), and with yield
//! barriers 65.2 → 67.2 % at 100 ms phases and 70.2 → 77.5 % at 300 ms; where the phases
//! outlast the rounds the look costs its wait (300 ms blocking phases 81.7 → 81.4 %, 1 s
//! yield phases 87.8 → 87.0 %). **Why 100 ms.** From 50 ms on, the look also took 65 and
//! 80 threads on 64 cores (`/proc` fit 21.1 + 6.246 µs a thread: rounds every 53–65 ms)
//! with 100 ms phases, where the slow rotation beats Linux by 10 points: placed again after
//! the look, mid-phase, their blocked fractions and CPU shares read apart, the peer test
//! handed them to Linux, and they fell to Linux's level (78.2 → 67.3 %, 91.1 → 81.7 %;
//! a peer test that waits eight phases of work kept 77.2 and 89.9 % but lost 96 threads,
//! 87–89 → 80–84 %, where the misfire had been lending them to a Linux that wins). From
//! 5 ms on it cost the BPF build's rows up to 1 point for nothing. With rounds 100 ms apart
//! no rotation follows phases under about 100 ms of work, and every row of the README's
//! paced tables (rounds under 100 ms apart), the scenarios and every free-tick run is
//! unchanged but for the take-back, which now holds the gap at least at the host's pace
//! (three `/proc` rows on 16 cores moved by −0.1…+0.4 points).
//!
//! **Moves charged to the budget.** An operator's whole budget (`--cpu-budget`) charges
//! the moves as well as the ticks, so a rotation's gap includes its moves, and lent
//! threads make none: the ticks alone then come far more often. The take-back read that
//! gap and placed the threads again at once, to lend them a round or two later: 24
//! threads with blocking 10 ms phases under `--cpu-budget 2` (this VM's tick, 19.8 µs +
//! 0.298 µs a thread, and 46 µs a move, HZ 1000) got a round every ~17 ms rotating and
//! every ~1.3 ms lent, were lent 16 times in 1.9 s and ran pinned and doubled up in
//! between: 77.4–79.0 % of the fair share against Linux's 82.5–83.4 (simulated, 16
//! cores, seeds 1–3). So the rule keeps the gap that lent the threads and, from the least
//! pace the host gives over the first ticks after (`LENT_PACE_TICKS`: the first is
//! charged with the lending moves), what the moves added to it (`Sparse::moves_gap`); the
//! take-back holds the gap now plus that against 0.8 phases. They are lent once and stay
//! lent: 82.1–82.7 %. Only the first ticks count, so that a pace that falls later (the
//! ticks' own cost fell) still brings them back. Where moves are free (the default
//! budget) the pace is the same with or without them, nothing is added, and every paced
//! row is as it was (the BPF, `/proc` and this VM's tick fits; 17 and 24 threads, both
//! barriers, 10 and 100 ms phases, seeds 1–3).
//!
//! **The work over every busy thread.** S counts the CPU time of every busy thread in a
//! window, not only of those that switched in it. Counted over those alone (as the
//! interval's basis still is, `Speed::work_phase_ns`), it read a part of the phase
//! wherever windows are shorter than phases: a thread that blocks in a 1 ms window ran at
//! most 1 ms of its phase there, and the threads that ran on without a switch were left
//! out. Unpaced (the simulator's default, rounds every 1–3 ms) 10 ms blocking phases read
//! 3.7–5.3 ms and 30 ms phases 3.5–12 ms; over every busy thread they read 7.5–11 and
//! 19–22 ms. Paced rounds (windows of 10 ms and more) read about the same either way,
//! and that is where 1.5 and 0.8 were swept. Read short, S lent threads whose rotation
//! beat Linux: 80 threads on 64 cores with 30 ms blocking phases were lent at "phases of
//! 4.3 ms", and 144 threads on `package:2 core:24 pu:2` with 10 ms phases were lent and
//! placed again four times in 1.5 s (688 placements), where the guard measured the
//! rotation at 43.4 phases a second against Linux's 41.2 (a 6.5 s run of the same).
//! Simulated, default settings: 96 threads on 64 cores with 10 ms blocking phases
//! 1.085–1.129 → 1.149–1.159× Linux's speed (seeds 1–3), the 144 threads 0.966–0.979 →
//! 0.977–1.001×; the paced 16-core rows, the criteria rows and the 360-cell grid unchanged
//! (`docs/speed-rules.md`, "The work over every busy thread").
//!
//! **Rounds held back by their own moves.** Where the host reports no pace (the tool's
//! whole cap holds the rounds back, not the watching budget), lent threads' rounds move
//! nothing and come as often as asked, so "G + M < 0.8 S" with M = 0 placed them again at
//! the first round: 320 threads on `package:2 core:64 pu:2` with 10 ms blocking phases
//! were lent and placed again three times in 0.9 s (1,190 placements of 46 µs each) and
//! ran 0.948× Linux's speed. So M is also the gap that lent them less the least gap of the
//! first `LENT_PACE_TICKS` rounds after, as the pace is where the host gives one, but only
//! once the threads have been placed again: the first lending may come from the start's
//! placements, whose gaps (25 ms down to 4 ms over the first rounds at 144 threads) say
//! nothing of a rotation's, and an M read from them kept threads lent whose rotation beat
//! Linux (64 cores, 80 threads, 30 ms phases: 1.148 → 1.123×, seed 3). The 320 threads:
//! 0.948 → 0.971× (seed 5).
//!
//! **Lending on trial.** The threshold was swept in the simulator, whose Linux conserves
//! work at blocking barriers better than this 2-core VM's kernel does: 3 threads with 10 ms
//! blocking phases read 87–94 % of the fair share under the model's Linux (HZ 250 and 1000)
//! and 80.5–83.3 % under the real one, while a slow rotation, a round every 6–16 ms on a
//! day of dear ticks (40–100 µs), held 88–92 %. There the rule lent the threads in 9 of 12
//! runs as a dear tick stretched a few gaps to 16–22 ms, and those runs were the lowest
//! (85.1–88.8 %; the three others 89.4–89.6). Whether Linux does better is a measurement,
//! as the guard's is: while the rotation runs, the rule measures its rate span after span
//! (the guard's measure: the least CPU share of the busy threads, over `TRIAL_SPAN` or
//! `TRIAL_PHASES` phases of work, whichever is longer). A lending after a whole span is on
//! trial: after `TRIAL_SETTLE` the lent threads' rate is measured over a span as long, and
//! when the rotation's last span beat it by the guard's `MARGIN` they are placed again at
//! once, and lending waits until the gap is `TRIAL_VETO` times the one that lost. A lending
//! before the first whole span (the pacer's cheap first ticks give way to dear ones at
//! 0.04–0.1 s) has nothing to be judged against and stands, as before. Real, 2 cores, 3
//! threads, 10 ms blocking phases, 12 interleaved runs each: 85.1 / 88.5 / 89.6 → 88.5 /
//! 89.5 / 93.1 % (min / median / max), three trials lost (Linux's slowest thread at 47.7–
//! 54.9 % of a core against the rotation's 56.6–61.1 %). Every simulated row is unchanged
//! (the model's lendings come before the first span).
//!
//! **Barrier peers with phases finer than any round are left to [`super::super::fine`].** No
//! rotation follows such phases at any pace, and `fine` holds the threads evenly placed,
//! which lending would give up: while `fine` holds, this rule does not lend, and gives back
//! what it lent once it starts to hold. Fine phases of unequal work (`memcached-like`'s
//! server and clients) are still lent: Linux does better there. (A live run of the OpenMP
//! stencil, 3 threads on 2 cores, read 0.3 ms phases against rounds paced to every 5 ms,
//! and this rule lent them all for good before.)

use super::super::guard::MARGIN;
use super::super::tuned::{
    GAP_WEIGHT, LEND, LEND_LATE, LENT_PACE_TICKS, LOOK_FROM, MAX_SPAN, MIN_ROUNDS, PACED,
    TAKE_BACK, TRIAL_PHASES, TRIAL_SETTLE, TRIAL_SPAN, TRIAL_VETO,
};
use super::super::{Mark, Speed};
use threadbalance_model::pace::Pace;
use threadbalance_model::{Move, Nanos, Target, Window};

/// The sparse-rounds rule's own measure of the rotation and of Linux (see "Lending on
/// trial" in the module docs).
#[derive(Debug, Clone, Copy, Default)]
struct Trial {
    /// When the span being measured opened (the threads' `Placed::trial` marks), and how
    /// long it is to be; `None` while none is open.
    since: Option<(Nanos, Nanos)>,
    /// The least CPU share of the rotation's busy threads over its last whole span.
    managed: Option<f64>,
    /// Lent on trial: the lent threads' span opens at this time, and is then compared
    /// with `managed`.
    lent_from: Option<Nanos>,
    /// A trial was lost when rounds came this far apart, ns: no lending again until the
    /// gap is `TRIAL_VETO` times it.
    lost_at: Option<f64>,
    /// How many trials Linux lost.
    lost: u64,
}

/// Whether the threads are lent to Linux because rounds are too sparse for the phases.
#[derive(Debug, Clone, Default)]
pub(in crate::speed) struct Sparse {
    /// Every busy thread is lent to Linux now for this reason.
    pub(in crate::speed) active: bool,
    /// How many times the threads were lent.
    pub(in crate::speed) hand_backs: u64,
    /// Smoothed gap between rounds, ns, and the rounds it has seen.
    gap: f64,
    rounds: u32,
    /// The last two gaps, ns, the latest first.
    last_gaps: [f64; 2],
    /// The period asked for at the last round, ns.
    asked: f64,
    /// The periods asked for the gaps seen, smoothed as `gap` is and the last two: what
    /// the gaps are held against. A gap after a long period asked (a backed-off rotation,
    /// quiet rounds) is not the host holding rounds back.
    asked_avg: f64,
    last_asked: [f64; 2],
    /// When the last round came, managed or not.
    last_at: Option<Nanos>,
    /// The host's own word on the gap (`Window::pace`), ns: ticks that cost what the last
    /// did come at best this far apart. `None` when the host does not pace or does not
    /// know yet.
    pace: Option<f64>,
    /// Looking (see "A look at the pace"): the threads are lent until a window at the
    /// host's pace has been read; and whether the first pace the host gave was seen.
    pub(in crate::speed) looking: bool,
    paced_seen: bool,
    /// The last lending or taking back, explained.
    pub(in crate::speed) last: Option<String>,
    /// The gap that lent the threads, ns, while they are lent (see "Moves charged to the
    /// budget").
    lent_gap: Option<f64>,
    /// The least pace the host gave over the first `LENT_PACE_TICKS` ticks after the
    /// threads were lent, ns, and how many of those ticks have been seen.
    lent_pace: Option<f64>,
    lent_ticks: u32,
    /// The least gap between rounds over the first `LENT_PACE_TICKS` rounds after the
    /// threads were lent, ns, and how many of those rounds have been seen: what a host
    /// that reports no pace (the tool's whole cap) gives rounds that move nothing.
    lent_least: Option<f64>,
    lent_rounds: u32,
    /// Whether the lent threads were placed again since the policy started: a lending
    /// after that measured the rotation's own rounds, not the start's placements.
    placed_again: bool,
    /// Lending on trial.
    trial: Trial,
}

impl Sparse {
    /// Notes a round at `now`; `start` is when the policy first ran, for the first one.
    ///
    /// The gap is timed from the last round whoever placed the threads: the rotation's own
    /// clock (`Speed::last_round`) stops while the guard's probe hands them to Linux, and
    /// the gap read across a probe (a quarter of a second and more) said nothing of how
    /// often the host lets the policy run.
    pub(in crate::speed) fn round_at(&mut self, now: Nanos, start: Nanos) {
        let last = self.last_at.unwrap_or(start);
        self.last_at = Some(now);
        self.observe(now.saturating_sub(last).0 as f64);
    }

    /// Notes a round `gap` ns after the last one.
    pub(in crate::speed) fn observe(&mut self, gap: f64) {
        if self.rounds == 0 {
            self.gap = gap;
            self.asked_avg = self.asked;
        } else {
            self.gap += GAP_WEIGHT * (gap - self.gap);
            self.asked_avg += GAP_WEIGHT * (self.asked - self.asked_avg);
        }
        self.rounds = self.rounds.saturating_add(1);
        if self.lent_gap.is_some() && self.lent_rounds < LENT_PACE_TICKS {
            self.lent_rounds += 1;
            self.lent_least = Some(self.lent_least.map_or(gap, |l| l.min(gap)));
        }
        self.last_gaps = [gap, self.last_gaps[0]];
        self.last_asked = [self.asked, self.last_asked[0]];
    }

    /// The smoothed gap between rounds, ns (`None` before the first round).
    pub(in crate::speed) fn gap(&self) -> Option<f64> {
        (self.rounds > 0).then_some(self.gap)
    }

    /// Notes the period the policy asks for until the next round.
    pub(in crate::speed) fn ask(&mut self, period: Nanos) {
        self.asked = period.0 as f64;
    }

    /// Whether the host holds the rounds back: the smoothed gap, or the last two gaps
    /// both, over `PACED` times the period asked. Two sparse rounds in a row say as much
    /// as the average, without waiting for it to forget the first cheap ticks (the
    /// pacer's burst).
    pub(in crate::speed) fn held(&self) -> bool {
        let last_two = self.last_gaps[0].min(self.last_gaps[1]);
        self.rounds >= MIN_ROUNDS
            && (self.gap > PACED * self.asked_avg.max(self.asked)
                || last_two > PACED * self.last_asked[0].max(self.last_asked[1]))
    }

    /// How many periods asked for one round spans while the host's watching pace holds
    /// the rounds back (the smoothed gap, at most the host's pace, over the period asked,
    /// whole periods, at most `MAX_SPAN`); 1 otherwise. The rotation allows this many
    /// times its swaps a round, so that what it may move a second stays what it would be
    /// with the rounds it asked for.
    ///
    /// Only the pace counts: a watching budget spaces ticks by what *watching* costs,
    /// whatever a round moves. A host that holds rounds back for what its moves cost (the
    /// tool's whole cap) reports no pace, and there more swaps a round would only push the
    /// next round further back: 85 threads with 60 ms blocking phases on `package:2
    /// core:16 pu:2` (the tool's cost charged) swapped in bursts, drew rounds ~13 ms
    /// apart, and ran 0.95–1.00× Linux's speed; with rounds of the usual size they come
    /// every 1.1–1.2 ms and run 1.05–1.06× (see "Rounds held back by moves" in
    /// `docs/speed-rules.md`).
    pub(in crate::speed) fn periods_per_round(&self) -> usize {
        let Some(pace) = self.pace.filter(|_| self.held()) else {
            return 1;
        };
        let asked = self.asked_avg.max(self.asked).max(1.0);
        (self.gap.min(pace) / asked).floor().clamp(1.0, MAX_SPAN) as usize
    }

    /// Whether the threads should be lent now: the rotation runs (`rotating`), the host
    /// holds the rounds back and they are too sparse for the phase `phase` (ns): over
    /// `LEND` phases, or `LEND_LATE` when the waits may be reported late (`late`).
    fn should_lend(&self, rotating: bool, phase: Option<f64>, late: bool) -> bool {
        let lend = if late { LEND_LATE } else { LEND };
        let gap = self.lending_gap();
        rotating
            && self.held()
            && phase.is_some_and(|s| gap > lend * s)
            && self.trial.lost_at.is_none_or(|g| gap > TRIAL_VETO * g)
    }

    /// How many times lending lost its trial (see "Lending on trial").
    pub(in crate::speed) fn trials_lost(&self) -> u64 {
        self.trial.lost
    }

    /// The gap the lending rule reads: the smoothed gap, or the last two gaps when both
    /// are longer.
    fn lending_gap(&self) -> f64 {
        self.gap.max(self.last_gaps[0].min(self.last_gaps[1]))
    }

    /// Whether lent threads should be placed again: the gap a rotation would get (the
    /// gap now, with what the rotation's moves added to it) is short against the phase.
    fn should_take_back(&self, phase: Option<f64>) -> bool {
        let gap = self.gap.max(self.pace.unwrap_or(0.0)) + self.moves_gap();
        phase.is_none_or(|s| gap < TAKE_BACK * s)
    }

    /// What the rotation's moves added to the gap between rounds, ns: the gap that lent
    /// the threads less the least pace the host gave in the first ticks after (ticks
    /// without moves), never below 0; where the host reports no pace and the threads were
    /// placed again before, less the least gap between those first rounds instead (see
    /// "Rounds held back by their own moves"). Zero where the host paces ticks but does
    /// not charge moves to its budget, as the pace is then the same with or without
    /// moves; and before either is known. The first ticks only: a pace that falls later
    /// is the ticks' own cost falling (the budget recovered), which is what the rule
    /// takes the threads back for.
    fn moves_gap(&self) -> f64 {
        let least = self
            .lent_pace
            .or(self.lent_least.filter(|_| self.placed_again));
        match (self.lent_gap, least) {
            (Some(lent), Some(least)) => (lent - least).max(0.0),
            _ => 0.0,
        }
    }

    /// Notes that the threads are lent now, by a gap of `gap` ns.
    fn lend(&mut self, gap: f64) {
        self.active = true;
        self.hand_backs += 1;
        self.lent_gap = Some(gap);
        self.lent_pace = None;
        self.lent_ticks = 0;
        self.lent_least = None;
        self.lent_rounds = 0;
    }

    /// Notes that the lent threads are placed again.
    fn take_back(&mut self) {
        self.active = false;
        self.lent_gap = None;
        self.lent_pace = None;
        self.lent_least = None;
        self.placed_again = true;
        // Whatever span was open measured Linux: the rotation's starts again.
        self.trial.since = None;
        self.trial.lent_from = None;
    }

    /// Notes the host's pace for this tick; in the first `LENT_PACE_TICKS` ticks after
    /// the threads were lent, the least of those paces. The first of them is charged with
    /// the moves that lent the threads, so its pace is not the ticks' alone; the least
    /// of the few that follow is.
    pub(in crate::speed) fn note_pace(&mut self, pace: Pace) {
        self.pace = match pace {
            Pace::Gap(g) => Some(g.0 as f64),
            Pace::Free | Pace::Unknown => None,
        };
        if let (Some(p), Some(_)) = (self.pace, self.lent_gap)
            && self.lent_ticks < LENT_PACE_TICKS
        {
            self.lent_ticks += 1;
            self.lent_pace = Some(self.lent_pace.map_or(p, |l| l.min(p)));
        }
    }
}

impl Speed {
    /// Lends every placed thread to Linux when rounds come too sparsely for the phase,
    /// and places the lent ones again when they come fast enough (see the module docs).
    /// Called after a round at `now`; `rotating` is what that round found, `waits_late`
    /// whether the window's waits may be reported late (`Window::waits_late`).
    pub(in crate::speed) fn check_sparse(
        &mut self,
        now: Nanos,
        rotating: bool,
        managing: bool,
        waits_late: bool,
        moves: &mut Vec<Move>,
    ) {
        if self.sparse.looking {
            return; // `check_look` decides
        }
        let phase = self.block_work_ns;
        // Counted from the policy's start: a live host's clock is the machine's.
        let at = now.saturating_sub(self.started_at).as_secs_f64();
        let (gap_ms, phase_ms) = (self.sparse.gap / 1e6, phase.unwrap_or(0.0) / 1e6);
        // Equal-work threads with phases finer than any round (`fine`): no rotation could
        // follow them at any pace, and `fine` holds them evenly placed, which lending would
        // give up. A live host paces its rounds (every 4–5 ms for three threads of an
        // OpenMP loop here) far apart against 0.3 ms phases; that is not a reason to lend.
        // Fine phases of unequal work (a server and its clients) are still lent: Linux does
        // better with those (simulator, `memcached-like`, paced).
        let fine = self.fine();
        if self.sparse.active {
            if self.judge_lending(now, managing, moves) {
                return;
            }
            if !fine && !self.sparse.should_take_back(phase) {
                return;
            }
            self.sparse.take_back();
            self.sparse.last = Some(match phase {
                Some(_) if fine => format!(
                    "placed again at {at:.2} s: phases of {phase_ms:.2} ms, finer than any round"
                ),
                Some(_) => format!(
                    "placed again at {at:.2} s: rounds every {gap_ms:.1} ms, phases of {phase_ms:.1} ms"
                ),
                None => format!("placed again at {at:.2} s: no phase seen"),
            });
            self.place_lent_again(managing, moves);
            return;
        }
        self.measure_rotation(now, managing);
        if fine || !self.sparse.should_lend(rotating, phase, waits_late) {
            return;
        }
        self.sparse.lend(self.sparse.lending_gap());
        // On trial when the rotation's rate is known (see "Lending on trial").
        let trial = &mut self.sparse.trial;
        trial.since = None;
        trial.lent_from = trial.managed.map(|_| now + TRIAL_SETTLE);
        self.sparse.last = Some(format!(
            "lent at {at:.2} s: rounds every {gap_ms:.1} ms (asked {:.1} ms), phases of {phase_ms:.1} ms{}",
            self.sparse.asked / 1e6,
            if waits_late { ", waits read late" } else { "" }
        ));
        // This round's swaps and placements are taken back: every placed thread goes to
        // Linux instead (releases of sleepers stay).
        moves.retain(|m| m.to == Target::Original);
        self.release_placed(true, managing, &[], moves);
    }
}

impl Speed {
    /// The length of a span "Lending on trial" measures: `TRIAL_SPAN`, or `TRIAL_PHASES`
    /// phases of work when longer.
    fn trial_span(&self) -> Nanos {
        let phases = self.block_work_ns.map_or(0.0, |s| TRIAL_PHASES * s);
        TRIAL_SPAN.max(Nanos(phases as u64))
    }

    /// While the rotation runs, measures its rate span after span (the least CPU share of
    /// its busy threads), for a lending to be judged against.
    fn measure_rotation(&mut self, now: Nanos, managing: bool) {
        if !managing {
            self.sparse.trial.since = None;
            return;
        }
        if let Some((from, len)) = self.sparse.trial.since {
            if now.saturating_sub(from) < len {
                return;
            }
            let rate = self.span_rate(from, now, |p| {
                if p.released { Mark::default() } else { p.trial }
            });
            self.sparse.trial.managed = rate.map(|(least, _)| least);
        }
        self.open_trial_span(now, |p| !p.released);
    }

    /// Opens a measured span at `now`: marks the threads `counts` picks.
    fn open_trial_span(&mut self, now: Nanos, counts: impl Fn(&super::super::Placed) -> bool) {
        for p in self.placed.iter_mut() {
            p.trial = if counts(p) {
                Mark::of(p)
            } else {
                Mark::default()
            };
        }
        self.sparse.trial.since = Some((now, self.trial_span()));
    }

    /// Lent on trial: once the lent threads' span is measured, takes them back when the
    /// rotation's last span beat it by the guard's margin (see "Lending on trial").
    /// Returns whether it took them back.
    fn judge_lending(&mut self, now: Nanos, managing: bool, moves: &mut Vec<Move>) -> bool {
        let trial = self.sparse.trial;
        let (Some(from), Some(managed)) = (trial.lent_from, trial.managed) else {
            return false;
        };
        let Some((at, len)) = trial.since else {
            if now >= from {
                self.open_trial_span(now, |p| p.lent);
            }
            return false;
        };
        if now.saturating_sub(at) < len {
            return false;
        }
        self.sparse.trial.lent_from = None;
        self.sparse.trial.since = None;
        let linux = self.span_rate(at, now, |p| if p.lent { p.trial } else { Mark::default() });
        let Some((linux, _)) = linux else {
            return false;
        };
        if managed <= linux * (1.0 + MARGIN) {
            return false;
        }
        // The gap that lent them, or the one the trial ran at when longer: the smoothed
        // gap may still be catching up with sparser rounds when it lends.
        let gap = self.sparse.lent_gap.unwrap_or(0.0).max(self.sparse.gap);
        self.sparse.trial.lost_at = Some(gap);
        self.sparse.trial.lost += 1;
        self.sparse.take_back();
        let at_s = now.saturating_sub(self.started_at).as_secs_f64();
        self.sparse.last = Some(format!(
            "placed again at {at_s:.2} s: lent at rounds every {:.1} ms, Linux ran the slowest thread at {:.1} % of a core against the rotation's {:.1} %",
            gap / 1e6,
            100.0 * linux,
            100.0 * managed
        ));
        self.place_lent_again(managing, moves);
        true
    }

    /// Whether `threads` placed on the cores would rotate: more than the cores, and not a
    /// multiple of them (even pinning needs no round).
    fn would_rotate(&self, threads: usize) -> bool {
        let cores = self.queues.len();
        threads > cores && !threads.is_multiple_of(cores)
    }

    /// Whether the signals give a phase finer than any round (`fine`'s test without its
    /// equal-work half, which needs placed threads: a look has none).
    fn fine_phase_seen(&self) -> bool {
        super::super::fine::fine_phase(self.phase_ns, self.cfg.min_interval.0)
    }

    /// Starts a look (see "A look at the pace" in the module docs) at the first tick whose
    /// window gives the host's pace: when rounds are held back to `LOOK_FROM` or more, every
    /// placed thread is lent to Linux until a window at that pace has been read.
    pub(in crate::speed) fn start_look(
        &mut self,
        w: &Window,
        managing: bool,
        moves: &mut Vec<Move>,
    ) {
        let Pace::Gap(g) = w.pace else {
            return;
        };
        if std::mem::replace(&mut self.sparse.paced_seen, true) {
            return;
        }
        if g < LOOK_FROM || self.fine_phase_seen() {
            return;
        }
        if self.sparse.active || self.few.active || self.peers.apart {
            return; // with Linux already
        }
        // Counts that do not rotate (a multiple of the cores) are never lent for sparse
        // rounds: even pinning needs no round.
        if !self.would_rotate(self.placed.iter().filter(|p| !p.released).count()) {
            return;
        }
        self.sparse.active = true;
        self.sparse.looking = true;
        self.sparse.trial.since = None;
        self.release_placed(true, managing, &[], moves);
    }

    /// Ends a look once a window at the host's pace has been read (`w`, after the signals):
    /// the threads stay lent when its phases are too short for rounds that sparse (the
    /// sparse-rounds rule takes them back as it would after lending them), and are placed
    /// again otherwise.
    pub(in crate::speed) fn check_look(
        &mut self,
        now: Nanos,
        w: &Window,
        managing: bool,
        moves: &mut Vec<Move>,
    ) {
        if !self.sparse.looking {
            return;
        }
        let gap = match w.pace {
            Pace::Gap(g) => g,
            Pace::Free | Pace::Unknown => Nanos::ZERO,
        };
        if w.duration().0 < gap.0 / 2 {
            return;
        }
        self.sparse.looking = false;
        let rotates = self.would_rotate(self.placed.iter().filter(|p| p.lent).count());
        let lend = if w.waits_late { LEND_LATE } else { LEND };
        if let Some(s) = self.block_work_ns
            && rotates
            && !self.fine_phase_seen()
            && gap.0 as f64 > lend * s
        {
            let at = now.saturating_sub(self.started_at).as_secs_f64();
            self.sparse.hand_backs += 1;
            self.sparse.last = Some(format!(
                "lent at {at:.2} s, after a look: rounds every {:.1} ms at the budget, phases of {:.1} ms{}",
                gap.0 as f64 / 1e6,
                s / 1e6,
                if w.waits_late {
                    ", waits read late"
                } else {
                    ""
                }
            ));
            return;
        }
        self.sparse.active = false;
        self.place_lent_again(managing, moves);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `Sparse` that has seen `gaps` (ms) between rounds, each asked for `asked_ms`.
    fn seen(gaps: &[f64], asked_ms: u64) -> Sparse {
        let mut s = Sparse::default();
        for &g in gaps {
            s.observe(g * 1e6);
            s.ask(Nanos::from_millis(asked_ms));
        }
        s
    }

    /// As [`seen`], on a host whose watching budget lets ticks come every `pace_ms`.
    fn seen_paced(gaps: &[f64], asked_ms: u64, pace_ms: u64) -> Sparse {
        let mut s = seen(gaps, asked_ms);
        s.note_pace(Pace::Gap(Nanos::from_millis(pace_ms)));
        s
    }

    #[test]
    fn sparse_round_spans_the_periods_asked_only_while_the_hosts_pace_holds_rounds_back() {
        // Periods a round spans after `gaps` (ms), each asked for `asked` ms, the host's
        // watching pace letting ticks come every `pace` ms.
        let spans = |gaps: &[f64], asked, pace| seen_paced(gaps, asked, pace).periods_per_round();
        // Rounds as asked (1 ms): one period a round, whatever the rotation.
        assert_eq!(spans(&[1.0, 1.0, 1.0, 1.0], 1, 1), 1);
        // The first round alone says nothing (fewer than `MIN_ROUNDS`).
        assert_eq!(spans(&[50.0], 1, 50), 1);
        // Held back by the pace to a round every 20 ms against 1 ms asked: 20 periods.
        assert_eq!(spans(&[20.0, 20.0, 20.0], 1, 20), 20);
        // 7.5 ms against 2 ms asked: 3 whole periods.
        assert_eq!(spans(&[7.5, 7.5, 7.5, 7.5], 2, 8), 3);
        // At most `MAX_SPAN`.
        assert_eq!(spans(&[500.0, 500.0, 500.0], 1, 500), 64);
        // Rounds 20 ms apart where the pace allows 5: the rest is what the moves cost
        // (the tool's whole cap), which more swaps a round would only lengthen: 5.
        assert_eq!(spans(&[20.0, 20.0, 20.0], 1, 5), 5);
        // No pace at all (only the whole cap holds the rounds back): one period.
        assert_eq!(seen(&[20.0, 20.0, 20.0], 1).periods_per_round(), 1);
    }

    #[test]
    fn sparse_gap_is_smoothed_over_about_four_rounds() {
        // 16, then 20, 20: 16 + ¼(20 − 16) = 17, then 17 + ¼(20 − 17) = 17.75 ms.
        let s = seen(&[16.0, 20.0, 20.0], 1);
        assert!((s.gap - 17.75e6).abs() < 1.0, "{}", s.gap);
        assert_eq!(s.rounds, 3);
    }

    #[test]
    fn sparse_paced_rounds_longer_than_the_phase_lend() {
        // The /proc fit with 20 threads: a tick of 21.1 + 6.246 × 21 ≈ 152 µs, so a round
        // every 152 / 0.008 ≈ 19 ms, against 1 ms asked and phases of 10 ms (100 switches
        // per thread-second): 19 > 2 × 1 (paced) and 19 > 1.5 × 10 = 15 (too sparse).
        let s = seen(&[19.0, 19.0], 1);
        assert!(s.should_lend(true, Some(10e6), false));
        // Not while the rotation is idle (even counts: nothing to lend for) …
        assert!(!s.should_lend(false, Some(10e6), false));
        // … nor without a phase (yielding threads, or no synchronization seen) …
        assert!(!s.should_lend(true, None, false));
        // … nor after a single round (the gap is not yet known).
        assert!(!seen(&[19.0], 1).should_lend(true, Some(10e6), false));
    }

    #[test]
    fn sparse_rounds_short_against_the_phase_keep_the_rotation() {
        // The BPF fit with 17 threads: 54.8 + 0.442 × 18 ≈ 62.8 µs, a round every 7.9 ms;
        // against 10 ms phases 7.9 < 15: the rotation stays (it gains 6–8 points there).
        assert!(!seen(&[7.9, 7.9], 1).should_lend(true, Some(10e6), false));
        // Phases of 100 ms with the /proc fit: 19 < 150.
        assert!(!seen(&[19.0, 19.0], 6).should_lend(true, Some(100e6), false));
    }

    #[test]
    fn sparse_two_sparse_rounds_in_a_row_lend_before_the_average_catches_up() {
        // The pacer's burst gives three cheap rounds (1 ms), then rounds every 19 ms.
        // Smoothed: 1, 1, 1, then 1 + ¼ · 18 = 5.5, then 5.5 + ¼ · 13.5 ≈ 8.9 ms, below
        // 15; but the last two gaps are both 19 > 15: lend.
        let s = seen(&[1.0, 1.0, 1.0, 19.0, 19.0], 1);
        assert!((s.gap - 8.875e6).abs() < 1.0, "{}", s.gap);
        assert!(s.should_lend(true, Some(10e6), false));
        // One long gap alone (19 after 1) does not: min(19, 1) = 1, smoothed 5.5.
        assert!(!seen(&[1.0, 1.0, 1.0, 19.0], 1).should_lend(true, Some(10e6), false));
    }

    #[test]
    fn sparse_gap_is_timed_between_rounds_whoever_placed_the_threads() {
        // Started at 0; rounds at 24, 48 ms; then the guard's probe: rounds at 72, 96 ms
        // still come every 24 ms, so the gap stays 24 ms (not 48, 72 from the rotation's
        // last round at 48).
        let mut s = Sparse::default();
        for ms in [24, 48, 72, 96] {
            s.round_at(Nanos::from_millis(ms), Nanos::ZERO);
        }
        assert_eq!(s.last_gaps, [24e6, 24e6]);
        assert!((s.gap - 24e6).abs() < 1.0, "{}", s.gap);
    }

    #[test]
    fn sparse_waits_read_late_lend_at_one_phase() {
        // The /proc fit measured on the idle VM with 24 threads: 24.2 + 4.148 × 25 ≈ 128
        // µs, a round every 16 ms, against 11.4 ms phases: 16 < 1.5 × 11.4 = 17.1, so with
        // exact waits the rotation stays; with waits read from `schedstat` the rotation
        // loses from one phase (1.009–1.078× Linux's time at 1.5, 1.008–1.010× at 1.0;
        // simulated, seeds 1–3): lend.
        let s = seen(&[16.0, 16.0], 1);
        assert!(!s.should_lend(true, Some(11.4e6), false));
        assert!(s.should_lend(true, Some(11.4e6), true));
        // Under one phase, not even then.
        assert!(!seen(&[9.0, 9.0], 1).should_lend(true, Some(11.4e6), true));
    }

    #[test]
    fn sparse_long_rounds_the_policy_asked_for_are_not_sparse() {
        // A round every 20 ms because the policy asked for 20 ms (a backed-off rotation,
        // a fixed interval): 20 < 2 × 20, the host did not hold it back.
        assert!(!seen(&[20.0, 20.0], 20).should_lend(true, Some(10e6), false));
    }

    #[test]
    fn sparse_a_gap_after_a_long_period_asked_is_not_the_host_holding_back() {
        // Rounds every 40 ms as asked (the interval backed off while the guard's probe
        // gave the threads to Linux), then the policy asks for 1 ms and gets it. The
        // smoothed gap is 40 + ¼(1 − 40) ≈ 30 ms, above 2 × 1 and 1.5 × 3.5 ms phases; but
        // the periods asked, smoothed the same way, are 30 ms too: not held back, no
        // lending. (Against the last period asked alone, this lent every thread to Linux
        // on 64 cores with 80 blocking threads, simulated.)
        let mut s = Sparse::default();
        for _ in 0..4 {
            s.ask(Nanos::from_millis(40));
            s.observe(40e6);
        }
        s.ask(Nanos::from_millis(1));
        s.observe(1e6);
        assert!((s.gap - 30.25e6).abs() < 1.0, "{}", s.gap);
        assert!(!s.should_lend(true, Some(3.5e6), false));
        // Held back for real at the new period: rounds every 19 ms against 1 ms asked.
        s.observe(19e6);
        s.observe(19e6);
        assert!(s.should_lend(true, Some(3.5e6), false));
    }

    #[test]
    fn sparse_lent_for_rounds_its_own_moves_held_back_come_back_only_when_a_rotation_fits() {
        // A whole budget that charges moves (`--cpu-budget 2`): rotating, 24 threads got a
        // round every 17–19 ms against 12 ms phases of work, and were lent. Lent, the ticks
        // alone come every 1.25 ms; the tick after the lending one is charged with the
        // lending moves (a pace of 20 ms). The moves added 19 − 1.25 = 17.75 ms a round.
        let mut s = seen(&[19.0, 19.0], 1);
        s.note_pace(Pace::Gap(Nanos::from_millis(19)));
        assert!(s.should_lend(true, Some(12e6), false));
        s.lend(s.lending_gap());
        s.note_pace(Pace::Gap(Nanos::from_millis(20)));
        for _ in 0..8 {
            s.note_pace(Pace::Gap(Nanos::from_micros(1_250)));
            s.observe(1.25e6);
        }
        assert!((s.moves_gap() - 17.75e6).abs() < 1.0, "{}", s.moves_gap());
        // The gap, 1.25 + 17.75 × 0.75⁸ ≈ 3.03 ms, is under 0.8 × 12 ms; with the moves a
        // rotation would add, 20.8 ms is not: they stay lent (they were placed again at
        // once before, and lent again a round later, 16 times in 1.9 s) …
        assert!((s.gap - 3.027e6).abs() < 1e3, "{}", s.gap);
        assert!(!s.should_take_back(Some(12e6)));
        // … until the phases are long enough for a rotation at that gap (20.8 < 0.8 × 27),
        // or no phase is seen.
        assert!(!s.should_take_back(Some(25e6)));
        assert!(s.should_take_back(Some(27e6)));
        assert!(s.should_take_back(None));
        // Placed again, nothing of the lending is left.
        s.take_back();
        assert_eq!(s.moves_gap(), 0.0);
    }

    #[test]
    fn sparse_rounds_held_by_the_whole_cap_stay_lent_once_a_rotation_was_seen() {
        // The tool's whole cap holds the rounds back and the host reports no pace:
        // rotating, rounds came every 16 ms against 10 ms phases of work; lent, they move
        // nothing and come every 1 ms, as asked.
        let lent = |s: &mut Sparse| {
            assert!(s.should_lend(true, Some(10e6), false));
            s.lend(s.lending_gap());
            for _ in 0..8 {
                s.observe(1e6);
            }
        };
        // The first lending may come of the start's placements: nothing is read as what
        // the moves add, and the threads are placed again once the gap fits the phase.
        let mut s = seen(&[16.0, 16.0], 1);
        lent(&mut s);
        assert_eq!(s.moves_gap(), 0.0);
        assert!(s.should_take_back(Some(10e6)));
        s.take_back();
        // Lent again by the rotation's own rounds: they added 16 − 1 = 15 ms a round,
        // and the threads stay lent (they were placed again at the first round before,
        // to be lent a few rounds later) …
        for _ in 0..8 {
            s.observe(16e6);
        }
        lent(&mut s);
        assert!((s.moves_gap() - 15e6).abs() < 1.0, "{}", s.moves_gap());
        assert!(!s.should_take_back(Some(10e6)));
        // … until the phases are long enough for a rotation at that gap, or none is seen.
        assert!(s.should_take_back(Some(25e6)));
        assert!(s.should_take_back(None));
    }

    #[test]
    fn sparse_a_budget_that_does_not_charge_moves_takes_back_as_the_ticks_allow() {
        // Moves free (the default budget): the pace is the ticks' alone, rotating or lent
        // (19 ms), so the moves add nothing. When the ticks get cheaper later (7 ms: the
        // budget recovered), the threads come back: the falling pace after the first
        // ticks is not read as moves.
        let mut s = seen(&[19.0, 19.0], 1);
        s.lend(s.lending_gap());
        for _ in 0..LENT_PACE_TICKS {
            s.note_pace(Pace::Gap(Nanos::from_millis(19)));
        }
        assert_eq!(s.moves_gap(), 0.0);
        assert!(!s.should_take_back(Some(10e6)));
        for _ in 0..20 {
            s.note_pace(Pace::Gap(Nanos::from_millis(7)));
            s.observe(7e6);
        }
        assert_eq!(s.moves_gap(), 0.0);
        assert!(s.should_take_back(Some(10e6)));
    }

    #[test]
    fn sparse_lent_threads_come_back_only_well_below_the_threshold() {
        // Lent at 19 ms rounds and 10 ms phases. Under Linux the program runs slower and
        // its phases read longer (15 ms): 19 / 15 ≈ 1.27 is above 0.8, so they stay
        // lent; phases of 100 ms (19 < 80) or rounds of 7 ms (7 < 8) bring them back, and
        // so does a phase no longer seen.
        let s = seen(&[19.0, 19.0], 1);
        assert!(!s.should_take_back(Some(15e6)));
        assert!(s.should_take_back(Some(100e6)));
        assert!(seen(&[7.0, 7.0], 1).should_take_back(Some(10e6)));
        assert!(s.should_take_back(None));
    }
}
