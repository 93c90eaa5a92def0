//! Every tuned number of `speed`, in one place: each says its value, the mechanism that
//! justifies it and what it was measured on. "Simulated" means the simulator's default
//! Linux model; "real" the 2-core VM (Linux 6.18) unless it says 16 cores.
//!
//! Three groups:
//! - **The core** (the rotation, the signals, the per-thread books, [`super::few`],
//!   [`super::peers`], [`super::fine`]): what a policy that sees every thread's run time,
//!   run-queue wait and switches decides, whatever the host. 25 numbers. Not counted:
//!   structural factors (a majority of the judged threads, doubling a period, a round due
//!   within half an interval).
//! - **The host layer** ([`super::host`]): what compensates for a live host, whose ticks
//!   are paced by a CPU budget, whose `/proc` counters report waits late and whose
//!   kernel slices are longer than a round, and whose moves cost CPU time. 25 numbers (in 23
//!   constants).
//! - **The guard** ([`super::guard`]): its own nine constants stay in `guard.rs` (it is
//!   being rebuilt to judge progress); the two below say how long its measured span is.

use threadbalance_model::Nanos;

// ---------------------------------------------------------------------------------------
// The core.
// ---------------------------------------------------------------------------------------

/// 0.05: below this fraction of a span running or runnable, a thread counts as idle (it
/// neither speaks for the program's signals nor is judged by a round). Mechanism: a thread
/// that wanted a CPU 5 % of a 1 ms round wanted it 50 µs, under one kernel tick; its rate
/// is noise. Measured: no sweep of its own; every simulated table since the first uses it.
pub(super) const IDLE: f64 = 0.05;

/// 0.01: threads asleep this fraction of their time or more block, whatever their switches
/// say. Mechanism: a thread that waits at a barrier by blocking sleeps there; one that
/// yields or spins never sleeps (0 in the simulator, by construction). Its switches cannot
/// tell: with more threads than CPUs a shared CPU's threads preempt each other hundreds of
/// times a second (the kernel's slices, the rotation's short ones, and every move
/// preempting a running thread), against a few blocks a second with 30–100 ms phases. And
/// the better the rotation, the less the threads wait at the barrier: under `speed`, 36
/// threads on 12 cores × 2 with 30–50 ms blocking phases slept 2–4 % of the time and read
/// 400–500 involuntary switches a thread-second against 20–60 voluntary ones, so at 5 %
/// (the value before) they did not count as blocking: no phase of work, no swap margin on
/// SMT, rounds every 1–3 ms, 3,000–7,000 moves a second.
/// Measured: simulated, default settings (the tool's cost charged), a tuning grid of
/// `package:1 core:8 pu:2`, `package:2 core:8 pu:2`, `package:1 core:16 pu:2`,
/// `package:1 core:16 pu:1`, `package:2 core:12 pu:1`, N = M+1, 5M/4, 3M/2, 2M−1, 10, 30
/// and 80 ms yield and blocking phases, seeds 1–3 (360 cells): at 0.05 16 cells more than
/// 1 % behind Linux, geometric mean of Linux/speed 1.221; at 0.005, 0.01 and 0.02 5 cells,
/// 1.228–1.230, with 11 % fewer moves. (At 0.05 the first rule measured was 16 cores, 24
/// threads, 100 ms blocking phases with `schedstat` counters and rounds every 200 ms:
/// 87.5 → 94.0 % of the fair share; threads sleep more there.)
pub(super) const SLEEPING: f64 = 0.01;

/// 2000/s: involuntary switches per thread-second above which threads yield at
/// synchronization points (rounds go to `min_interval`). Mechanism: preemption alone gives
/// a few hundred a second (a 3 ms slice: ~330/s); a yield barrier gives one per yield.
/// Measured: kept from `speed-v1` (real, 16 cores); no sweep of its own.
pub(super) const YIELD_RATE: f64 = 2000.0;

/// 20 µs: CPU time per involuntary switch under which yielding threads pass the CPU back
/// and forth with nothing to do in between, and no round can follow their phases (they are
/// held like phases finer than any round, [`super::fine`]). Mechanism: the kernel preempts
/// a running thread no sooner than its slice (0.7–3 ms; the rotation's short ones 0.5 ms),
/// so threads that switch every few µs of CPU hand the CPU over themselves, by
/// `sched_yield`, to threads that yield it straight back: their yields are their work (a
/// yield-and-mutex benchmark) or all of them wait. Measured (real, 2-core VM, Linux 6.18,
/// under `speed`): `sysbench threads --threads=3` 2.7 µs (244,000 switches a
/// thread-second); the `spmd` yield barrier at 1, 10 and 100 ms phases 110–230 µs
/// (2,800–5,400 a thread-second). The simulator's yield barriers never come near it.
pub(super) const PING_PONG: Nanos = Nanos::from_micros(20);

/// ×2: threads block when their program's involuntary switches are at most this many times
/// their voluntary ones (at least a third of the switches voluntary); only then do the
/// signals give a phase of work, which the sparse-rounds rule holds the rounds against.
/// Mechanism: a blocking barrier gives one voluntary switch a phase and a few preemptions;
/// a yield barrier almost only involuntary ones (0 against ~100 a thread-second,
/// simulated). Measured: no sweep of its own.
pub(super) const INVOL_PER_VOL: f64 = 2.0;

/// 1/16: the round is this fraction of the phase the switches give (of the work between
/// two blocks, where threads block and that is longer). Mechanism: a doubled
/// thread waits at most one round per phase, so a round of P/16 costs a phase about 6 %;
/// the `min_interval` floor (1 ms) is reached at 16 ms phases. Measured: simulated, 16
/// cores, 17 threads, 10 ms yield phases: 92 % of the fair share at 1 ms rounds, 86 % at
/// 2 ms.
pub(super) const PHASE_FRACTION: f64 = 0.0625;

/// 0.2 s: time constant of the synchronization signals (and of the blocked fraction).
/// Mechanism: a few phases of 10–100 ms programs, long enough that one phase's burst does
/// not flip the interval. Measured: kept from `speed-v1` (real, 16 cores); no sweep of its
/// own. The averaging over the first windows (`signals_age`) keeps start-up short.
pub(super) const SIGNAL_TAU_S: f64 = 0.2;

/// 0.02 s: time constant of the credits. Mechanism: a few phases of a fine-grained
/// program, so a lead earned asleep at a barrier does not follow a thread into later
/// phases. Measured: simulated, 16 cores, 17–24 threads, 10 ms phases, seeds 1–3.
pub(super) const CREDIT_TAU_S: f64 = 0.02;

/// 1 s: time constant of the duty cycle and CPU share the peer test compares. Mechanism:
/// long against any phase the rotation follows (≤ 100 ms), so barrier peers' duty cycles
/// converge before they are compared. Measured: no sweep of its own; set with the peer test
/// (real, 2 cores, and the simulated scenarios).
pub(super) const DUTY_TAU_S: f64 = 1.0;

/// ×1.5: growth of the interval per round once `QUIET_ROUNDS` rounds found nothing to
/// rotate, and the most the interval may grow per round while it rotates. Mechanism: from
/// 1 ms to the 100 ms ceiling in about 12 rounds, so an idle rotation stops sampling within
/// ~0.3 s. Measured: kept from `speed-v1` (real, 16 cores); no sweep of its own.
pub(super) const BACKOFF: f64 = 1.5;

/// 16 rounds without a swap before the interval backs off. Mechanism: with blocking
/// barriers a round at a phase's end often finds nothing to swap; 16 rounds of 1 ms span
/// more than one 10 ms phase. Measured: kept from `speed-v1`; no sweep of its own.
pub(super) const QUIET_ROUNDS: u32 = 16;

/// 0.9 (the paper's `T_s`): cores are levelled or rotated only when the fuller ones run
/// their threads below this fraction of the emptier ones' speed. Mechanism: a heavy core of
/// T + 1 threads runs at T/(T+1) of a light one's: 0.5 at T = 1, 0.9 at T = 9, so the
/// rotation stops where a core's extra thread costs under 10 %, or where the threads sleep
/// and do not compete. The same bar for a node as a whole, where threads never block: a
/// rotation that would lift the slowest by less than 1/0.9 is not made
/// ([`super::rotate::count_gain`]). Measured: the paper (§5); simulated 16 and 64 cores.
pub(super) const SLOWER: f64 = 0.9;

/// 1 round: the lead over a heavy thread that a light thread behind another LLC needs
/// before they swap, where the threads never block. Mechanism: such a swap refetches both
/// working sets from the other cache and buys at most a round of progress; threads that
/// block also fill CPUs gone idle with it, and take it at any lead. Measured: simulated,
/// default settings, 17 threads on `package:2 core:8 pu:1` with 30 ms yield phases (seeds
/// 1–3): 89.4 % of the fair share at no lead, 94.5 at half a round, 95.7 at one, 94.5 at
/// two; the 360-cell tuning grid: 3 cells behind Linux at half a round, none at one or
/// two, the 10 ms yield rows on two LLCs 2–5 points lower at two.
pub(super) const FAR_LEAD_ROUNDS: f64 = 1.0;

/// 4: swaps per round and node at most one per this many cores. Mechanism: bounds the
/// moves a round makes (each refills the moved thread's caches and costs the tool ~46 µs,
/// real), the best pairs first. Measured: with `MIN_SWAPS`, simulated 16 and 64 cores (the
/// figures there); no sweep of its own.
pub(super) const SWAP_SHARE: usize = 4;

/// 8: at least this many swaps per round and node. Mechanism: up to 32 cores every heavy
/// core of N < 2M may hand a thread over each round. Measured: simulated, 16 cores, 24
/// threads, 10 ms phases (every heavy core a round), and 64 cores, 96 threads, 100 ms
/// blocking phases (with the periods a paced round spans: 1.045 → 0.944× Linux's time).
pub(super) const MIN_SWAPS: usize = 8;

/// 0.5: a heavy core's thread that waited for a CPU through at least this fraction of the
/// last window is held back now and swaps first, when the threads block and do equal work.
/// Mechanism: at a blocking barrier both threads of a heavy core wake together and one
/// waits out the other's slice. Measured: simulated, 16 cores, 20 threads, 3 ms blocking
/// phases: 62 of 332 phases over 5.75 ms without the rule (the bound is 3.75).
pub(super) const HELD: f64 = 0.5;

/// ×1.1: a thread moved to a light core "sped up" when its speed rose by this factor;
/// fewer than half sped up doubles the rotation's period. Mechanism: 1/T against 1/(T+1)
/// is ×2 at T = 1 and ×1.125 at T = 8; below 10 % the move is within noise. Measured: no
/// sweep of its own (what it is for: another program on a core stops the rotation).
pub(super) const SPED_UP: f64 = 1.1;

/// 0.4: threads blocked more than this fraction of the time go back to Linux (sleepers).
/// Mechanism: a thread that sleeps 40 % leaves its core idle that often; pinned, it costs
/// work conservation more than a rotation gains. Measured: kept from `speed-v1` (real, 16
/// cores); no sweep of its own.
pub(super) const RELEASE_ABOVE: f64 = 0.4;

/// 0.25: released threads are placed again once blocked less than this. Mechanism:
/// hysteresis below `RELEASE_ABOVE`, so a thread near the edge does not flip every window.
/// Measured: as `RELEASE_ABOVE`.
pub(super) const ADOPT_BELOW: f64 = 0.25;

/// 20 ms: a thread watched this long that ran or waited less than `IDLE` of it is released
/// at once (a main thread in `join`). Mechanism: its 0.2 s blocked average would hold a
/// core's count up for that long. Measured: no sweep of its own.
pub(super) const ASLEEP_AGE: f64 = 20e6;

/// 1.15: barrier peers' CPU shares over their lives are within this factor (fine phases,
/// "held back now"). Mechanism: peers do the same phases wherever they run; a server and
/// its clients do not. Measured: simulated `two-stage-pipeline` on 2 cores (up to 1 %
/// longer with "held back now" applied to it) against `ep-barrier` and `omp-stencil`.
pub(super) const EQUAL_WORK: f64 = 1.15;

/// 0.2: placed threads whose duty cycles differ by more than this (and `WORK_APART`) are
/// not peers. Mechanism: barrier peers differ in duty cycle only while a rotation has not
/// evened them out. Measured: no sweep of its own; set with the live runs of `uneven` and
/// pipelines (real, 2 cores).
pub(super) const GAP_APART: f64 = 0.2;

/// 0.15: CPU shares further apart than this fraction of the largest: unequal work (the
/// peer test's second condition). Mechanism: peers never differ in CPU share. Measured: as
/// `GAP_APART`.
pub(super) const WORK_APART: f64 = 0.15;

/// 150 ms: how long the peer test's verdict must hold before it acts. Mechanism: longer
/// than the guard's probe settling and a few 10–100 ms phases. Measured: as `GAP_APART`.
pub(super) const HOLD: Nanos = Nanos::from_millis(150);

/// 50 ms: a thread counts in the peer test once placed this long. Mechanism: its first
/// windows are the start-up's (a live run had one of three workers idle through them).
/// Measured: real, 2 cores, 3 threads (that run); no sweep.
pub(super) const MIN_AGE: f64 = 50e6;

/// 4 s: the first stint with Linux after the threads were found apart, doubling each time.
/// Mechanism: a retry costs a placement and `HOLD` of watching; 4 s keeps that under 4 %.
/// Measured: no sweep of its own.
pub(super) const FIRST_STINT: Nanos = Nanos::from_secs(4);

// ---------------------------------------------------------------------------------------
// The guard's measured span (its other numbers are in `guard.rs`).
// ---------------------------------------------------------------------------------------

/// 50 intervals: the guard measures over the last this-many `min_interval`s of a stint
/// (and at least `max_interval` and `GUARD_MIN_MEASURE`).
pub(super) const GUARD_INTERVALS: u64 = 50;
/// 200 ms: the least measured span of the guard: at least two 100 ms phases.
pub(super) const GUARD_MIN_MEASURE: Nanos = Nanos::from_millis(200);

// ---------------------------------------------------------------------------------------
// The host layer.
// ---------------------------------------------------------------------------------------

/// 0.5 ms: the time slice of a thread the rotation moves. Mechanism: at HZ 1000 two
/// threads of a core take turns at every tick, and a thread moved in may take the CPU at
/// once. Measured: simulated, 16 cores, HZ 1000, the BPF tick paced: 17 threads 79–80 →
/// 85–87 % of the fair share, 20 threads 87–89 → 90–91 %.
pub(super) const SHORT_SLICE: Nanos = Nanos::from_micros(500);

/// 1.5–3.5 ms: short slices go on while the smoothed gap between rounds is within this
/// band. Mechanism: the kernel's slice is ~3 ms from 8 CPUs, so within shorter rounds a
/// thread moved to a shared core may not get its turn; within 1 ms rounds the rotation
/// turns a thread over before any slice matters. Measured: simulated, 16 cores, HZ 1000,
/// 10 ms phases, 17–24 threads, seeds 1–3, against `speed-long-slices`: 0.91–0.99× the
/// time at 2–3 ms rounds, 0.87–1.06× at 4–10 ms.
pub(super) const SHORT_SLICES_GAPS: (Nanos, Nanos) =
    (Nanos::from_micros(1_500), Nanos::from_micros(3_500));

/// 1.2–4.5 ms: once on, short slices stay while the gap stays within this wider band.
/// Mechanism: hysteresis, so a gap near an edge does not turn the slices over every round.
/// Measured: as `SHORT_SLICES_GAPS`.
pub(super) const SHORT_SLICES_KEEP: (Nanos, Nanos) =
    (Nanos::from_micros(1_200), Nanos::from_micros(4_500));

/// 50 ms: how stale the switch counts may be (a quarter of `SIGNAL_TAU_S`). Mechanism: the
/// smoothing is linear in the counts, so counts every 50 ms average to the same rates a
/// little later; `status` costs ~17 µs a thread. Measured: real, 2 cores: read every 10 ms
/// it took a tick with three threads from 15 to 25 µs.
pub(super) const SWITCHES_MAX_AGE: Nanos = Nanos::from_millis(50);

/// 1 s: how stale last CPU and state may be. Mechanism: the policy never reads them (only
/// the summary's per-core utilization does); `stat` costs 3 µs a thread a read. Measured:
/// real, 2 cores: re-reading it every tick doubled the cost of paced ticks of many threads.
pub(super) const MAX_STAT_AGE: Nanos = Nanos::from_secs(1);

/// 2 gaps: while the host holds the rounds back, the credits' time constant is at most this
/// many smoothed gaps. Mechanism: with a round every ~3 ms, 20 ms still counts turns later
/// rounds made up for. Measured: simulated, 16 cores, the BPF tick, seeds 1–3, swept at 1,
/// 1.5, 2 and 3 gaps at HZ 1000 and 250: 2 gained at both (20 and 24 threads 89.1–91.3 →
/// 90.6–91.8 % at 10 ms phases, HZ 1000).
pub(super) const PACED_CREDIT_ROUNDS: f64 = 2.0;

/// 0.16 % of a core per core the rotation turns over: the watching budget asked of a
/// pacing host while it turns. Mechanism: ticks cost the same on any machine, the rounds
/// serve every core; 16 cores reach `ROUNDS_BUDGET_MAX`, up to 5 keep the host's 0.8 %.
/// Measured: simulated, 16 cores, the BPF tick, seeds 1–3: 17 threads, 10 ms phases 80 →
/// 92 % at HZ 250; real, 2 cores, a flat 2.5 %: +1 to +1.5 points at 10 ms phases.
pub(super) const ROUNDS_BUDGET_PER_CORE: f64 = 0.0016;

/// 2.5 % of one core at most: a 25 µs tick (the BPF counters' with 17–24 threads, real)
/// every millisecond, the rounds' floor. Measured: as `ROUNDS_BUDGET_PER_CORE`.
pub(super) const ROUNDS_BUDGET_MAX: f64 = 0.025;

/// 25 ms: threads that block between phases of at least this much work are left to the
/// default budget. Mechanism: Linux's own pull at each phase's end does much of a
/// rotation's work there, and every further round's moves cost cache refills. Measured:
/// simulated, 24 threads, 100 ms phases half memory-bound: 4.0–4.3 % slower than Linux
/// with the rounds bought, 1.5–1.7 % without.
pub(super) const ROUNDS_BUDGET_PHASE_S: f64 = 0.025;

/// ¼ a round: the weight with which the gap between rounds is smoothed (about four
/// rounds). Mechanism: a single dear tick does not lend the threads. Measured: with `LEND`
/// (the sweep there); no sweep of its own.
pub(super) const GAP_WEIGHT: f64 = 0.25;

/// 2 rounds seen before the gap is trusted. Mechanism: the first gap follows the start-up.
/// Measured: as `GAP_WEIGHT`.
pub(super) const MIN_ROUNDS: u32 = 2;

/// ×2: the host holds rounds back when the gap exceeds this many periods asked for.
/// Mechanism: a backed-off period asked is not the host's doing. Measured: as `GAP_WEIGHT`.
pub(super) const PACED: f64 = 2.0;

/// 1.5 phases of work: rounds further apart than this lend the threads to Linux. Mechanism:
/// past ~1.5 phases at least one phase in three holds no round and runs pinned and
/// doubled. Measured: simulated, 16 cores, 10 ms blocking phases, seeds 1–3, swept over
/// the gap: the rotation beat Linux at 1.4 phases, lost from 1.6–1.8.
pub(super) const LEND: f64 = 1.5;

/// 1.0 phase: `LEND` when waits are reported late (`schedstat`). Mechanism: the rotation
/// keeps less of its gain when it sees waits late. Measured: simulated, the `/proc` tick,
/// 17, 20 and 24 threads swept at 1.5, 1.2, 1.0, 0.8: 1.0 held every row within 1.6 %.
pub(super) const LEND_LATE: f64 = 1.0;

/// 0.8 phases: lent threads are placed again when rounds come within this. Mechanism: the
/// phase reads longer under Linux (1.27× measured), so 1.2 would lend and place every few
/// rounds. Measured: as `LEND`.
pub(super) const TAKE_BACK: f64 = 0.8;

/// 100 ms: rounds held back to this or more are worth a look at the host's pace before
/// placing. Mechanism: no rotation follows phases under ~100 ms of work at that pace.
/// Measured: simulated, 256 cores, 320 threads, 100 ms phases: 71.0 → 77.8 % (Linux's);
/// from 50 ms it lost 10 points on 64 cores.
pub(super) const LOOK_FROM: Nanos = Nanos::from_millis(100);

/// 64: the most periods asked one round is taken to span (a paced round may swap this many
/// times the round's share). Mechanism: bounds a burst after a long stall. Measured: no
/// sweep of its own (the rule it bounds: 64 cores, 96 threads, rounds every ~25 ms).
pub(super) const MAX_SPAN: f64 = 64.0;

/// 3 ticks after a lending over which the ticks' own pace is read (the first is charged
/// with the lending's moves). Measured: simulated, 16 cores, 24 threads, `--cpu-budget 2`,
/// seeds 1–3: lent 16 times in 1.9 s before, once after (77.4–79.0 → 82.1–82.7 %).
pub(super) const LENT_PACE_TICKS: u32 = 3;

/// 200 ms: the least span "lending on trial" measures (the guard's measure). Mechanism: at
/// least two 100 ms phases. Measured: real, 2 cores, 3 threads, 10 ms blocking phases, 12
/// interleaved runs: 85.1 / 88.5 / 89.6 → 88.5 / 89.5 / 93.1 % (min / median / max).
pub(super) const TRIAL_SPAN: Nanos = Nanos::from_millis(200);

/// 8 phases of work: the least span of a trial in phases. Measured: as `TRIAL_SPAN`.
pub(super) const TRIAL_PHASES: f64 = 8.0;

/// 25 ms: the lent threads' span opens this long after the lending (the guard's probe
/// settles as long). Measured: as `TRIAL_SPAN`.
pub(super) const TRIAL_SETTLE: Nanos = Nanos::from_millis(25);

/// ×1.5: after a lost trial, lending waits until the gap is this many times the one that
/// lent. Mechanism: the same multiple as `LEND`. Measured: as `TRIAL_SPAN`.
pub(super) const TRIAL_VETO: f64 = 1.5;

/// 0.1 of a phase's work: on SMT siblings with blocking phases, a light thread must lead a
/// heavy one by this much credit before they swap. Mechanism: a move costs the live host
/// the tool's CPU time (46 µs, real), taken from a CPU of the program, where every thread
/// waits for the slowest at the barrier; a hardware thread's turn gains less than a core's.
/// Its limit: the lead is asked from the first barrier on, when the work between blocking
/// points is first seen, and the larger it is the longer the rotation stands still then
/// (no swap until the credits part by the lead), the doubled threads stay doubled, and the
/// peer test may read their duty cycles apart and hand them all to Linux.
/// Measured: first at 0.3 (`package:1 core:8 pu:2`, `package:2 core:8 pu:2`, 10 and 30 ms
/// blocking phases, N = M + 1, 5M/4, 3M/2, seeds 1–2: 40 threads on 32 CPUs 0.92–0.97 →
/// 1.00–1.07× Linux's speed). Swept again once paced rounds stopped multiplying their
/// swaps under the whole cap (`Sparse::periods_per_round`), simulated, default settings,
/// the tool's cost charged, geometric mean of Linux's time over `speed`'s (cells over 1 %
/// behind, the worst): the 360-cell tuning grid (16–32 CPUs, N = M + 1…2M − 1, 10/30/80 ms,
/// seeds 1–3) at 0, 0.1, 0.2, 0.3: 1.257 (0, 0.996), 1.260 (0, 0.996), 1.260 (0, 0.996),
/// 1.258 (1, 0.978); a second grid of 360 cells with SMT (`package:1 core:16 pu:2`, `2 × 8
/// × 2`, `1 × 32 × 2`, `2 × 16 × 2`, `2 × 12 × 2`; N = 9M/8…2M − 2; 15/40/80 ms; seeds 1–2):
/// 1.210 (0, 0.999), 1.214 (0, 0.997), 1.219 (1, 0.983), 1.221 (2, 0.972: 72 threads on
/// `2 × 12 × 2` at 80 ms, the stall above).
pub(super) const SMT_SWAP_MARGIN: f64 = 0.1;
