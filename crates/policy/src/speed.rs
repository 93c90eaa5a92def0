//! `speed`: speed balancing (Hofmeyr, Iancu, Blagojević, PPoPP 2010) for M cores: every
//! thread of a program gets the same share of time on the less loaded cores, planned
//! centrally, so that threads meeting at barriers make equal progress; and a guard that
//! gives the threads back to Linux when Linux does better.
//!
//! The rules as they are now, each with the figure that keeps it, are in
//! `docs/speed-rules.md`; every tuned number, with its mechanism and what it was measured
//! on, is in `speed/tuned.rs`. In short: with N threads on M queues (logical CPUs by
//! default), the k = N mod M heavy queues hold one thread more than the others. One planner
//! sees every thread and gives each a *credit*, how far ahead of the program's mean it is
//! in time not held back; every round it pairs the heavy queues' threads of least credit
//! with the light queues' threads of most credit and swaps them while the light one is
//! ahead, so the doubling rotates within a phase. Counts never change but to level them.
//!
//! ```text
//!   window ─► credit_i ← credit_i·e^(−dt/τ) + (free_i − mean_j free_j),  free = dt − wait
//!                 │
//!   every B:  heavy queues (T+1 threads)  x₁ ≤ x₂ ≤ …   (credit, ascending)
//!             light queues (T threads)    y₁ ≥ y₂ ≥ …   (credit, descending)
//!             swap (xᵢ, yᵢ) while yᵢ − xᵢ > 0  ─► 1 move per pair (xᵢ's queue-mate
//!             joins yᵢ) where heavy queues hold 2 and light ones 1, else 2 moves
//!             (threads that block: the xᵢ held back now first, swapped whatever yᵢ − xᵢ)
//! ```
//!
//! The layers:
//! - **The core** decides from what it sees: `track` keeps each thread's books (placement,
//!   run and wait time, sleepers, credits), `signals` turns switches into the interval,
//!   `rotate` is the round, and `few`, `peers` and `fine` say who is lent to Linux or kept
//!   placed. The policy's mode is one `regime::Regime` with one transition.
//! - **The host layer** (`host`) compensates for a live host: ticks paced by a CPU budget
//!   (sparse rounds, paced credits, the rounds budget), `/proc` counters that report waits
//!   late, and kernel slices longer than a round (short slices).
//! - **The guard** ([`guard`]) probes Linux and hands the threads back when it does better.
//!
//! Per tick the policy walks the window once, merging it with its own key-sorted table of
//! placed threads; buffers are reused, so ticks at 1–2 ms allocate only the plan's moves
//! once the thread set is stable. One decision costs about 5 µs with 64 threads and 0.1 ms
//! with 1024 (`benches/speed.rs`).

mod few;
mod fine;
pub mod guard;
mod host;
mod peers;
mod regime;
mod signals;
mod track;
mod tuned;

use crate::{Needs, Policy, PolicyError, Settings};
use guard::Guard;
use regime::{IntervalRule, Lent, Regime, Round, Seen};
use signals::follow;
use threadbalance_model::{
    Level, Nanos, NodeId, Plan, PolicySummary, SpeedSummary, Target, ThreadKey, Topology, Window,
};
use tuned::*;

/// Settings of the `speed` policy.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeedSettings {
    /// Whether the rotation may move threads across NUMA nodes (blocked by default, as in
    /// the paper's §6.4): then every node rotates its own threads.
    pub allow_numa: bool,
    /// Shortest balance interval the adaptation may choose (1 ms). What the policy asks
    /// for, not a promise: a live host paces its ticks by a CPU budget, so rounds this
    /// short happen only where a tick is cheap enough.
    pub min_interval: Nanos,
    /// Longest balance interval, where it backs off to (100 ms, the paper's fixed value).
    pub max_interval: Nanos,
    /// Whether the guard may hand the threads back to Linux (see [`guard`]).
    pub guard: bool,
    /// Whether the threads it rotates run in short time slices (see "Short slices" in
    /// `docs/speed-rules.md`).
    pub short_slices: bool,
    /// Whether it asks a pacing host for a larger watching budget while its rotation turns
    /// over more than a few cores (see "Rounds bought" in `docs/speed-rules.md`). Off, rounds
    /// come as the host's default budget allows (the rules for sparse rounds and short
    /// slices are tested so, at the gaps they were written for).
    pub rounds_budget: bool,
}

impl Default for SpeedSettings {
    fn default() -> SpeedSettings {
        SpeedSettings {
            allow_numa: false,
            min_interval: Nanos::from_millis(1),
            max_interval: Nanos::from_millis(100),
            guard: true,
            short_slices: true,
            rounds_budget: true,
        }
    }
}

/// What speed reads. Only run time and run-queue wait (fresh from `schedstat` on every
/// sample), and it knows where it placed every thread, so last CPU and state may be as
/// old as its longest interval (`tuned::MAX_STAT_AGE`). The synchronization signals read
/// voluntary and involuntary switches: blocking and yielding threads, hence the phases
/// the sparse-rounds and fine-phase rules go by.
pub const NEEDS: Needs = Needs {
    stat_max_age: Some(tuned::MAX_STAT_AGE),
    switches: Some(tuned::SWITCHES_MAX_AGE),
    ..Needs::NOTHING
};

/// One core (a domain at the balancing level).
#[derive(Debug, Clone)]
struct Queue {
    node: NodeId,
    /// Its last-level cache: the index of the LLC domain of its lowest CPU at the core
    /// level; at coarser levels each queue is its own (see [`Speed::new`]).
    llc: usize,
    /// Its physical core at the CPU level, where SMT siblings share one (see "Siblings" in
    /// `docs/speed-rules.md`); elsewhere each queue is its own.
    core: usize,
    /// Threads placed on it.
    load: u32,
}

/// A thread the policy has placed.
#[derive(Debug, Clone, Copy)]
struct Placed {
    key: ThreadKey,
    queue: usize,
    /// Cumulative exec and run-queue wait ns since we first saw it.
    exec: f64,
    wait: f64,
    /// Ns of the latest window in which it was not held back: running, or not wanting a
    /// CPU (window − run-queue wait, less the wait reported late: negative when that is
    /// more than the window).
    last_free: f64,
    /// Decayed lead over the mean, in exec ns.
    credit: f64,
    /// The fraction of the latest window it waited for a CPU (see [`HELD`]).
    held: f64,
    /// Smoothed fraction of time it was blocked (sleeping, not runnable).
    blocked: f64,
    /// How long it has been watched, ns.
    age: f64,
    /// How long it has been placed, ns, from the end of the first window after it was
    /// placed (`None` while with Linux and during that window): `duty` and `work` count
    /// from there (see [`peers`]). Time with Linux (lent while busy threads are few,
    /// released) is Linux's placement, not evidence of how the thread fares pinned; and
    /// the first window is the start-up interval (up to 100 ms before the program shows
    /// any synchronization), in which a live program was seen with one of three workers
    /// idle for its whole length, which then outweighed everything after it for longer
    /// than the peer test waits.
    started: Option<f64>,
    /// Its blocked fraction averaged over its life, or its last second once older: the
    /// peer test's duty cycle (see [`peers`]).
    duty: f64,
    /// Its CPU share (exec over wall time), averaged as `duty` is: the work it does, which
    /// barrier peers share equally wherever they run (see [`peers`]).
    work: f64,
    /// Its CPU share averaged the same way over every window since it was first seen,
    /// placed or with Linux: what the fine-phase rule reads (see [`fine`], "Lent before
    /// the shares settle"). `work` stands still while the thread is with Linux.
    life_work: f64,
    /// Given back to Linux because it mostly sleeps; counts on no queue meanwhile.
    released: bool,
    /// Released too, but busy: lent to Linux while the program has no more busy threads
    /// than cores (see [`few`]).
    lent: bool,
    /// Its `exec` and `wait` when the guard's measured span opened (see [`guard`]).
    seg: Mark,
    /// Its `exec` and `wait` when the sparse-rounds rule's measured span opened (see
    /// "Lending on trial" in [`host::sparse`]).
    trial: Mark,
    /// `exec` and `wait` at the last round, its speed over that round (exec over the time
    /// it wanted a CPU; `None` when it hardly wanted one), and that speed before it moved
    /// to a light core when it did in the last round.
    round_exec: f64,
    round_wait: f64,
    round_rate: Option<f64>,
    judge: Option<f64>,
    /// The slice last asked for it (`None`: its own).
    slice: Option<Nanos>,
}

/// A thread's `exec` and `wait` when a measured span opened, and whether it was there
/// then (a thread first seen later has no mark, and does not count in the span).
#[derive(Debug, Clone, Copy, Default)]
struct Mark {
    exec: f64,
    wait: f64,
    valid: bool,
}

impl Mark {
    /// The mark of `p` now.
    fn of(p: &Placed) -> Mark {
        Mark {
            exec: p.exec,
            wait: p.wait,
            valid: true,
        }
    }
}

/// The speed balancing policy; see the module docs.
#[derive(Debug, Clone)]
pub struct Speed {
    cfg: SpeedSettings,
    level: Level,
    fixed: Option<Nanos>,
    queues: Vec<Queue>,
    /// Whether some queues are SMT siblings of one core (see "Siblings" in `docs/speed-rules.md`).
    siblings: bool,
    /// Threads placed and queues of each physical core ([`Queue::core`]), during a round.
    core_load: Vec<(u32, u32)>,
    /// Distinct nodes of the queues, for per-node rotation.
    nodes: Vec<NodeId>,
    placed: Vec<Placed>,
    spare: Vec<Placed>,
    /// Scratch lists of a round (indexes into `placed`).
    heavy: Vec<usize>,
    light: Vec<usize>,
    /// Which of `light` a round has paired.
    used: Vec<bool>,
    /// One move a swap (see `docs/speed-rules.md`): the two threads of each core that holds
    /// two, by queue, as the round found them; and the queues the round's moves changed.
    mates: Vec<[Option<usize>; 2]>,
    touched: Vec<bool>,
    /// Whether the last window's waits may be reported late (`Window::waits_late`): then
    /// a swap stays two moves ("One move a swap" in `docs/speed-rules.md`).
    waits_late: bool,
    /// Whether the placed threads run in short slices now.
    sliced: bool,
    /// The watching budget the last decision asked for ([`Speed::rounds_budget`]).
    asked_budget: Option<f64>,
    /// Threads and cores per node, for levelling the nodes (reused).
    node_load: Vec<(u32, u32)>,
    /// Exec and wanted (exec + run-queue wait) ns of each queue's threads over the last
    /// round.
    q_exec: Vec<f64>,
    q_want: Vec<f64>,
    /// The policy's mode (see [`regime`]): who places the threads, and the rotation's clock.
    regime: Regime,
    interval: Nanos,
    /// Rotation period multiplier from unhelpful moves (1 = every interval).
    slow_down: u64,
    next_round: Nanos,
    last_round: Nanos,
    /// When the policy first ran.
    started_at: Nanos,
    vol_rate: f64,
    /// Voluntary switches and CPU time per thread-second over every busy thread, those
    /// that did not switch in the window included, smoothed as the rates: their ratio is
    /// the work between blocking points (`block_work_ns`).
    busy_vol_rate: f64,
    busy_run_rate: f64,
    /// CPU time per thread-second of the threads that switched, smoothed as the rates:
    /// with `vol_rate` it gives the work between blocking points (`work_phase_ns`).
    run_rate: f64,
    /// Fraction of the time the threads that switched spent asleep (late wait taken off),
    /// smoothed as the rates: the other sign that threads block (see `SLEEPING`).
    sleep_frac: f64,
    invol_rate: f64,
    /// `invol_rate` without the threads running in our short slices on a shared core,
    /// while others speak for it: the program's own, for the test whether threads block.
    invol_prog_rate: f64,
    slice_rate: f64,
    counted: bool,
    /// Seconds of windows the signals have been averaged over (see `observe_signals`).
    signals_age: f64,
    guard: Option<Guard>,
    /// When the guard's measured span started (and whether it is open).
    seg_open: bool,
    seg_at: Nanos,
    /// Whether the busy threads are CPU-bound peers (see [`peers`]).
    peers: peers::Peers,
    /// Whether the busy threads are no more than the cores (see [`few`]).
    few: few::Few,
    /// Whether rounds come too sparsely for the phases (see [`host::sparse`]).
    sparse: host::sparse::Sparse,
    /// The phase the synchronization signals give, ns (`None` when they give none:
    /// yielding threads, or no synchronization seen).
    phase_ns: Option<f64>,
    /// The CPU time a thread that switched in a window ran per voluntary switch, ns
    /// (`None` unless the threads block): the basis of the interval, the SMT siblings'
    /// swap lead and the held-back order, as they were tuned. Only the threads that
    /// switched count, so a window shorter than the phase reads part of it: the threads
    /// that blocked in it ran only part of their phase there (10 ms phases read 3.7–5.3 ms
    /// in 1 ms windows; see `block_work_ns`).
    work_phase_ns: Option<f64>,
    /// The CPU time a thread runs between two blocking points, ns: the phase's work,
    /// whoever places the threads and however long the windows (`None` unless the threads
    /// block). The sparse-rounds rule holds the gap between rounds against it (see
    /// [`host::sparse`], "The work over every busy thread").
    block_work_ns: Option<f64>,
    /// Whether the phases are finer than any round, for equal-work threads (see [`fine`]).
    fine_now: bool,
    /// Whether the threads pass the CPU back and forth by yielding, a few µs of CPU a
    /// switch (`PING_PONG`): held as phases finer than any round.
    ping_pong: bool,
    /// Whether the last round held the level placement for lack of a gain worth a
    /// rotation (see [`rotate::count_gain`]).
    level_held: bool,
    /// Whether the placed threads' sleep is the program's, not any one thread's: barrier
    /// peers, whom the sleeper rule leaves placed (see "Barrier peers are not sleepers"
    /// in [`peers`]). As of the window before.
    sleep_shared: bool,
    stats: Stats,
}

#[derive(Debug, Clone, Default)]
struct Stats {
    rounds: u64,
    rotating_rounds: u64,
    swaps: u64,
    levels: u64,
    /// Rounds that held the level placement: a rotation would not have paid (see
    /// [`rotate::count_gain`]).
    held_level: u64,
    initial: u64,
    released: u64,
    backoffs: u64,
    /// Ticks after which the policy asked for a larger watching budget
    /// ([`Speed::rounds_budget`]).
    bought: u64,
    /// The share of one core last asked for.
    bought_share: f64,
    interval_sum_ms: f64,
    min_seen: Option<Nanos>,
    max_seen: Option<Nanos>,
    reason: &'static str,
}

impl Speed {
    /// Builds the policy: one queue per domain at `settings.level` (by default `cpu`, the
    /// kernel's run queues; `core` is the paper's),
    /// checking the speed settings.
    ///
    /// Long because it checks each speed setting with its own message and fills every
    /// field of the policy's state in one place.
    pub fn new(settings: &Settings, topo: &Topology) -> Result<Speed, PolicyError> {
        let cfg = settings.speed.clone();
        let bad = |why: String| PolicyError::Invalid {
            policy: "speed",
            why,
        };
        if cfg.min_interval.0 == 0 || cfg.min_interval > cfg.max_interval {
            return Err(bad(format!(
                "interval range {}..{} is empty",
                cfg.min_interval, cfg.max_interval
            )));
        }
        if settings.interval.is_some_and(|i| i.0 == 0) {
            return Err(bad("interval must be positive".into()));
        }
        let level = settings.level_for(crate::PolicyKind::Speed, topo);
        // Cores group by LLC only where a domain lies inside one; at the LLC level or above
        // every queue is its own group, and nothing prefers one pair over another.
        let llc_of = |d: &threadbalance_model::Domain| match level {
            Level::Core | Level::Cpu => d
                .cpus
                .iter()
                .next()
                .and_then(|c| topo.domain_of(c, Level::Llc))
                .unwrap_or(d.index),
            _ => d.index,
        };
        // Queues share a physical core only at the CPU level (SMT siblings).
        let core_of = |d: &threadbalance_model::Domain| match level {
            Level::Cpu => d
                .cpus
                .first()
                .and_then(|c| topo.domain_of(c, Level::Core))
                .unwrap_or(d.index),
            _ => d.index,
        };
        let queues: Vec<Queue> = topo
            .domains(level)
            .iter()
            .map(|d| Queue {
                node: d.node,
                llc: llc_of(d),
                core: core_of(d),
                load: 0,
            })
            .collect();
        let mut cores: Vec<usize> = queues.iter().map(|q| q.core).collect();
        cores.sort_unstable();
        cores.dedup();
        let siblings = cores.len() < queues.len();
        let mut nodes: Vec<NodeId> = queues.iter().map(|q| q.node).collect();
        nodes.sort_unstable();
        nodes.dedup();
        Ok(Speed {
            interval: settings.interval.unwrap_or(cfg.min_interval),
            fixed: settings.interval,
            cfg,
            level,
            queues,
            siblings,
            core_load: Vec::new(),
            nodes,
            placed: Vec::new(),
            spare: Vec::new(),
            heavy: Vec::new(),
            light: Vec::new(),
            used: Vec::new(),
            mates: Vec::new(),
            touched: Vec::new(),
            waits_late: false,
            sliced: false,
            asked_budget: None,
            node_load: Vec::new(),
            q_exec: Vec::new(),
            q_want: Vec::new(),
            regime: Regime::Unstarted,
            slow_down: 1,
            next_round: Nanos::ZERO,
            last_round: Nanos::ZERO,
            started_at: Nanos::ZERO,
            vol_rate: 0.0,
            busy_vol_rate: 0.0,
            busy_run_rate: 0.0,
            run_rate: 0.0,
            sleep_frac: 0.0,
            invol_rate: 0.0,
            invol_prog_rate: 0.0,
            slice_rate: 0.0,
            counted: false,
            signals_age: 0.0,
            guard: None,
            seg_open: false,
            seg_at: Nanos::ZERO,
            peers: peers::Peers::default(),
            few: few::Few::default(),
            sparse: host::sparse::Sparse::default(),
            phase_ns: None,
            work_phase_ns: None,
            block_work_ns: None,
            fine_now: false,
            ping_pong: false,
            level_held: false,
            sleep_shared: false,
            stats: Stats {
                reason: "no synchronization seen yet",
                ..Stats::default()
            },
        })
    }

    /// The balance interval in force.
    pub fn interval(&self) -> Nanos {
        self.interval
    }

    fn target(&self, q: usize) -> Target {
        Target::Domain {
            level: self.level,
            index: q,
        }
    }

    fn managing(&self) -> bool {
        self.guard.as_ref().is_none_or(|g| g.mode.managing())
    }

    /// What the tick has seen so far, for the regime's transition: whether the guard lets
    /// the policy manage, and why the threads are lent (the sparse-rounds reasons first).
    fn seen(&self, round: Round) -> Seen {
        let lent = if self.sparse.active {
            Some(Lent::Sparse {
                looking: self.sparse.looking,
            })
        } else if self.sparse.looking {
            Some(Lent::Look)
        } else if self.peers.apart {
            Some(Lent::NotPeers)
        } else if self.few.active {
            Some(Lent::Few)
        } else {
            None
        };
        Seen {
            managing: self.managing(),
            lent,
            sparse: self.sparse.active,
            round,
        }
    }

    /// The queue with the fewest placed threads; ties go to the core whose node, then
    /// whose LLC, holds the fewest threads per core, then to the lowest index.
    ///
    /// So threads spread over nodes and LLCs in proportion to their cores, as Linux's
    /// balancer spreads them: with 24 threads on two 8-core nodes each gets 12, and each
    /// node's rotation (which never crosses nodes) has heavy and light cores to rotate
    /// between. Filled in index order instead, node 0 got 16 (two a core) and node 1 eight
    /// (one a core): even counts in both, nothing rotated, and `speed` ran as `pbind`
    /// (2.065 s against 1.607 on one 16-core node; simulated, ep-barrier, 10 ms yield
    /// phases). Within a node, an even spread over LLCs lets most swaps stay within an
    /// LLC (see `rotate.rs`).
    ///
    /// Where queues are SMT siblings (the CPU level on an SMT machine), the emptiest CPU
    /// of the emptiest physical core comes first: a thread whose sibling runs is slowed
    /// down (about 1.3× in the simulator), so with 8 threads on 8 cores × 2 every core gets
    /// one, as the kernel's `select_idle_sibling` gives them, and not CPUs 0–7 (four cores
    /// doubled up, four idle); with 24, every core gets three.
    fn emptiest(&self) -> usize {
        let (mut node_load, mut llc_load, mut core_load) = (Vec::new(), Vec::new(), Vec::new());
        self.tally(|q| self.node_ix(q), &mut node_load);
        self.tally(|q| q.llc, &mut llc_load);
        if self.siblings {
            self.tally(|q| q.core, &mut core_load);
        }
        (0..self.queues.len())
            .min_by(|&a, &b| {
                let (qa, qb) = (&self.queues[a], &self.queues[b]);
                qa.load
                    .cmp(&qb.load)
                    .then_with(|| match (core_load.get(qa.core), core_load.get(qb.core)) {
                        (Some(&ca), Some(&cb)) => per_core_cmp(ca, cb),
                        _ => std::cmp::Ordering::Equal,
                    })
                    .then_with(|| {
                        per_core_cmp(node_load[self.node_ix(qa)], node_load[self.node_ix(qb)])
                    })
                    .then_with(|| per_core_cmp(llc_load[qa.llc], llc_load[qb.llc]))
                    .then(a.cmp(&b))
            })
            .unwrap_or(0)
    }

    /// The index in `nodes` of queue `q`'s node.
    fn node_ix(&self, q: &Queue) -> usize {
        self.nodes.binary_search(&q.node).unwrap_or(0)
    }

    /// Fills `into` with (threads placed, cores) per group of queues, the group of each
    /// queue given by `group` (a node's index, an LLC).
    fn tally(&self, group: impl Fn(&Queue) -> usize, into: &mut Vec<(u32, u32)>) {
        into.clear();
        for q in &self.queues {
            let g = group(q);
            if into.len() <= g {
                into.resize(g + 1, (0, 0));
            }
            into[g].0 += q.load;
            into[g].1 += 1;
        }
    }
}

/// Compares two groups' threads per core, given as (threads, cores), exactly: a/b
/// against c/d as a·d against c·b.
fn per_core_cmp((a, b): (u32, u32), (c, d): (u32, u32)) -> std::cmp::Ordering {
    (u64::from(a) * u64::from(d)).cmp(&(u64::from(c) * u64::from(b)))
}

mod rotate;

impl Policy for Speed {
    fn needs(&self) -> Needs {
        NEEDS
    }

    fn name(&self) -> &'static str {
        "speed"
    }

    /// More than the host's default while the rotation turns over more than a few cores
    /// (see "Rounds bought" in `docs/speed-rules.md`).
    fn watch_budget(&self) -> Option<f64> {
        self.asked_budget
    }

    /// One round in order: what the host layer corrects, the lending rules, the signals,
    /// the regime's transition, the guard, then the rotation.
    ///
    /// Long because those stages share the round's moves and must run in that order; each
    /// is a call, and what is left here is the glue between them.
    fn decide(&mut self, _topo: &Topology, w: &Window) -> Plan {
        let now = w.end;
        let mut moves = Vec::new();
        self.sparse.note_pace(w.pace);
        self.waits_late = w.waits_late;
        self.track(w, &mut moves);
        let managing = self.managing();
        self.check_peers(now, managing, &mut moves);
        self.check_few(managing, &mut moves);
        let wanted = self.observe_signals(w);
        self.fine_now = self.fine_now_from_signals();
        let mut guard_note = None;
        if !self.regime.started() {
            self.regime = self.regime.next(&self.seen(Round::None));
            self.next_round = now + self.interval;
            self.last_round = now;
            self.started_at = now;
            if self.cfg.guard {
                let measure = Nanos(
                    self.cfg
                        .max_interval
                        .0
                        .max(self.cfg.min_interval.0 * GUARD_INTERVALS),
                )
                .max(GUARD_MIN_MEASURE);
                self.guard = Some(Guard::new(now, measure));
            }
        } else {
            if let Some(g) = self.guard.as_mut() {
                g.observe(w);
            }
            let events = |g: &Guard| (g.handbacks, g.resumes);
            let before = self.guard.as_ref().map(events);
            self.guard_step(now, &mut moves);
            // A hand-back or a resumption is said in the plan's note (`run --verbose`
            // prints it, `run --report` marks it).
            guard_note = self
                .guard
                .as_ref()
                .filter(|g| Some(events(g)) != before)
                .and_then(|g| g.last.as_ref())
                .map(|last| format!("guard: {last}"));
            // Rounds due within half an interval run now: fewer ticks, longer windows.
            let due = now + Nanos(self.interval.0 / 2);
            if self.next_round <= due {
                self.sparse.round_at(now, self.started_at);
                let managed = self.managing();
                let rotating = managed && self.round(now, &mut moves);
                let managing = self.managing();
                self.check_sparse(now, rotating, managing, w.waits_late, &mut moves);
                let round = match (managed, rotating) {
                    (false, _) => Round::Skipped,
                    (true, true) => Round::Turned,
                    (true, false) => Round::Still,
                };
                self.regime = self.regime.next(&self.seen(round));
                self.interval = match (self.fixed, self.regime.interval_rule()) {
                    (Some(f), _) => f,
                    // Lent for sparse rounds: keep asking for what a rotation would, to
                    // see when rounds come fast enough again.
                    (None, IntervalRule::Follow) => follow(self.interval, wanted),
                    (None, IntervalRule::Hold) => wanted.max(self.interval),
                    (None, IntervalRule::BackOff) => {
                        Nanos((self.interval.0 as f64 * BACKOFF) as u64)
                            .clamp(wanted, self.cfg.max_interval)
                    }
                };
                self.note_interval();
                let period = Nanos(self.interval.0.saturating_mul(self.slow_down))
                    .min(self.cfg.max_interval.max(self.interval));
                self.next_round = now + period;
                self.sparse.ask(period);
            }
        }
        let managing = self.managing();
        if self.started_at != now {
            self.start_look(w, managing, &mut moves);
        }
        self.check_look(now, w, managing, &mut moves);
        let mut next = self.next_round;
        if let Some(g) = &self.guard {
            let at = if self.seg_open {
                g.until
            } else {
                g.measure_from()
            };
            next = next.min(at.max(now));
            if let Some(cap) = g.tick_cap(now) {
                next = next.min(now + cap);
            }
        }
        let floor = Nanos(self.cfg.min_interval.0 / 4);
        self.regime = self.regime.next(&self.seen(Round::None));
        let slices = self.slices();
        self.asked_budget = self.rounds_budget();
        if let Some(share) = self.asked_budget {
            self.stats.bought += 1;
            self.stats.bought_share = share;
        }
        Plan {
            slices,
            moves,
            next_in: next.saturating_sub(now).max(floor),
            note: guard_note,
        }
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Speed(Box::new(SpeedSummary {
            balance_interval_ms: self.interval.as_millis_f64(),
            interval_reason: s.reason.to_string(),
            interval_min_ms: s.min_seen.map(Nanos::as_millis_f64),
            interval_max_ms: s.max_seen.map(Nanos::as_millis_f64),
            interval_mean_ms: s.interval_sum_ms / s.rounds.max(1) as f64,
            voluntary_switches_per_thread_s: self.vol_rate,
            involuntary_switches_per_thread_s: self.invol_rate,
            switches_counted: self.counted,
            timeslices_per_thread_s: self.slice_rate,
            rounds: s.rounds,
            rotating_rounds: s.rotating_rounds,
            rotation_swaps: s.swaps,
            levelling_moves: s.levels,
            held_level_rounds: s.held_level,
            backoffs: s.backoffs,
            initial_placements: s.initial,
            released_to_linux: s.released,
            peer_hand_backs: self.peers.hand_backs,
            peers_apart_now: self.peers.apart,
            few_hand_backs: self.few.hand_backs,
            few_now: self.few.active,
            sparse_hand_backs: self.sparse.hand_backs,
            sparse_now: self.sparse.active,
            sparse_last: self.sparse.last.clone(),
            sparse_trials_lost: self.sparse.trials_lost(),
            rounds_budget_ticks: s.bought,
            rounds_budget_pct: s.bought_share * 100.0,
            guard: self.guard_summary(),
        }))
    }
}

#[cfg(test)]
mod tests;
