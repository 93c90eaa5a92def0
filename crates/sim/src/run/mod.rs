//! The simulation: threads executing their programs on the machine, driven by events.
//!
//! ```text
//!            ┌────────────── EventQueue (time, seq) ──────────────┐
//!            ▼                                                    │
//!   Cpu: activity ends ──► account segment ──► op done? ──► advance(program)
//!   Tick: slice expiry, periodic + nohz balance (scheduler/)      │  lock / barrier /
//!   Timer: sleep ends ──► wake-up placement (scheduler/)          │  queue / sleep
//!   Policy: Engine::tick(SimHost) ──► affinities (host.rs)        │
//!   NumaScan: pages follow their threads (autonuma.rs)            │
//!   Sample: per-socket utilization for the report ────────────────┘
//! ```
//!
//! A running thread has one *activity* with an end time: work (a compute op or a critical
//! section), a spin (on a held mutex or at a barrier, with a budget), or a yield loop. Its
//! CPU holds one pending event for that end; preemption, migration or a hand-off bumps
//! the CPU's version so the old event is skipped. A *segment* is the time a thread spends on
//! a CPU without interruption; accounting (run time, user/system time, lock time, speed
//! factors) happens when a segment stops.
//!
//! Work runs at a *speed factor* fixed when its segment starts: the memory-bound fraction
//! is slowed by remote pages (first touch places a thread's pages on the node where it first
//! does memory-bound work) and by sharing the node's memory bandwidth; a busy SMT sibling
//! slows everything. Changes during a segment are not re-applied (ops are short).

mod build;
mod ops;
mod phase_log;
mod segment;
mod tool;

pub use tool::MEASURED;

pub(crate) use crate::state::{
    Act, AppState, BarrierState, CpuState, Kernel, LockState, Prog, Programs, QueueState, St,
    Stats, Thread, Userspace, World,
};
pub use crate::state::{Sim, TimelinePoint};

use crate::queue::EventKind;
use crate::scheduler::Linux;
use crate::state::{CpuIdx, LockIdx, ThreadIdx};
use threadbalance_model::{Level, Nanos, Topology};

/// The programs as the kernel sees them (see [`Programs`]).
impl Programs for Userspace {
    fn run_program(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx, t: ThreadIdx) {
        self.advance(kernel, world, c, t);
    }

    fn begin_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx) {
        self.start_segment(kernel, world, c);
    }

    fn end_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx) {
        self.stop_segment(kernel, world, c);
    }

    fn wait_over(&mut self, world: &World, t: ThreadIdx) -> bool {
        match world.th[t].act {
            Act::Spin { lock, .. } if self.locks[lock].holder.is_none() => {
                self.locks[lock].spinners.retain(|&x| x != t);
                true
            }
            Act::BarrierSpin { barrier, .. } | Act::Yield { barrier } => {
                Some(self.barriers[barrier].generation) != world.th[t].bar_gen
            }
            _ => false,
        }
    }

    fn yield_waiting(&self, world: &World, t: ThreadIdx) -> bool {
        match world.th[t].act {
            Act::Yield { barrier } => {
                Some(self.barriers[barrier].generation) == world.th[t].bar_gen
            }
            _ => false,
        }
    }

    fn footprint_lines(&self, world: &World, t: ThreadIdx) -> f64 {
        self.apps[world.th[t].app].footprint_lines
    }

    fn segment_start(&self, c: CpuIdx) -> Nanos {
        self.cpus[c].seg_start
    }

    fn mid_operation(&self, c: CpuIdx) -> bool {
        self.cpus[c].in_advance
    }

    fn apps(&self) -> usize {
        self.apps.len()
    }
}

/// Options of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOptions {
    /// Seed of every random choice (op durations, tie-breaks).
    pub seed: u64,
    /// Simulated time after which the run stops even if threads remain.
    pub horizon: Nanos,
    /// Period of the utilization timeline.
    pub sample_every: Nanos,
    /// The Linux model's parameters.
    pub linux: Linux,
    /// How often `SimHost` samples per-process memory per node (`numa_maps`); in between,
    /// snapshots carry none and policies keep the last sample. Zero: at every sample.
    pub memory_every: Nanos,
    /// A flat-cost oracle: every lock hand-off moves its lines at the in-LLC cost, wherever
    /// the previous holder ran (nothing else changes), so that a run bounds what any
    /// placement could gain from hand-offs.
    pub flat_handoffs: bool,
    /// What one tick costs the tool on a live machine, so that the policy is paced as the
    /// live loop's CPU budget paces it (`threadbalance_model::pace`): a tick waits while
    /// the tool is over 0.8 % of one core. `None` (the default): ticks are free and come
    /// whenever the policy asks (no sooner than every millisecond). Paced by
    /// `run_policy`, and by `apps::run_per_app` for each instance on its own.
    pub tick_cost: Option<TickCost>,
    /// An operator's whole budget (`--cpu-budget`), as a share of one core: with a tick
    /// cost, the pacer holds ticks *and moves* to it, each move charged
    /// [`TickCost::per_move`], as the live loop does when given one. `None` (the default):
    /// ticks are held to 0.8 % and moves are not charged.
    pub cpu_budget: Option<f64>,
    /// What the tool's own thread takes from the simulated machine (`run/tool.rs`): at each
    /// tick of `run_policy` (not under `none`, where no tool runs) a thread of the
    /// machine runs for [`TickCost::of`] the program's threads plus
    /// [`TickCost::acting`] for what the plan changed, competing for a CPU as any thread
    /// does.
    /// Default: [`MEASURED`], what `bench --cost` measured. `None`: the tool costs the
    /// machine nothing (as every simulated table was made before issue 38).
    pub tool_cpu: Option<TickCost>,
    /// Log when each thread reached each barrier (`RunResult::phases`; see
    /// [`crate::phases`]). Off by default.
    pub phases: bool,
}

/// The CPU time one live tick costs the tool: `fixed` plus `per_thread_ns` for each thread
/// of the program (sampling, deciding and the loop), and what carrying out its plan costs
/// ([`TickCost::acting`]): `per_plan` once for a plan that changed anything, `per_move`
/// for each move and `per_slice` for each time slice changed. What a plan costs is charged
/// to the watching pacer only under an operator's whole budget
/// ([`RunOptions::cpu_budget`]), as live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickCost {
    /// Per tick, whatever the thread count.
    pub fixed: Nanos,
    /// Per thread alive, ns.
    pub per_thread_ns: f64,
    /// Per move made.
    pub per_move: Nanos,
    /// Per plan that changed a mask or a slice (the journal's one write, the first call's
    /// cold caches).
    pub per_plan: Nanos,
    /// Per time slice changed.
    pub per_slice: Nanos,
}

impl TickCost {
    /// What a tick with `threads` threads costs.
    pub fn of(&self, threads: usize) -> Nanos {
        self.fixed + Nanos((self.per_thread_ns * threads as f64).max(0.0) as u64)
    }

    /// What carrying out a plan that made `moves` moves and changed `slices` slices costs.
    pub fn acting(&self, moves: u32, slices: u32) -> Nanos {
        if moves == 0 && slices == 0 {
            return Nanos::ZERO;
        }
        self.per_plan
            + Nanos(self.per_move.0 * u64::from(moves))
            + Nanos(self.per_slice.0 * u64::from(slices))
    }
}

impl std::str::FromStr for TickCost {
    type Err = crate::SimError;
    /// `FIXED_US[,PER_THREAD_US[,PER_MOVE_US[,PER_PLAN_US[,PER_SLICE_US]]]]`, in µs:
    /// `"20"`, `"20,0.07"`, `"20,0.07,46"` or `"20,0.07,10,5,4.5"`; a part left out is 0.
    fn from_str(s: &str) -> Result<TickCost, crate::SimError> {
        let bad = || crate::SimError::TickCost { given: s.into() };
        let mut parts = s.split(',');
        let us = |x: Option<&str>| -> Result<f64, crate::SimError> {
            let v: f64 = x.unwrap_or("0").trim().parse().map_err(|_| bad())?;
            if v.is_finite() && (0.0..1e6).contains(&v) {
                Ok(v)
            } else {
                Err(bad())
            }
        };
        let fixed = us(parts.next())?;
        let per_thread = us(parts.next())?;
        let per_move = us(parts.next())?;
        let per_plan = us(parts.next())?;
        let per_slice = us(parts.next())?;
        if parts.next().is_some() {
            return Err(bad());
        }
        let ns = |v: f64| Nanos((v * 1e3) as u64);
        Ok(TickCost {
            fixed: ns(fixed),
            per_thread_ns: per_thread * 1e3,
            per_move: ns(per_move),
            per_plan: ns(per_plan),
            per_slice: ns(per_slice),
        })
    }
}

impl RunOptions {
    /// Defaults: 120 s horizon, 50 ms timeline.
    pub fn new(seed: u64) -> RunOptions {
        RunOptions {
            seed,
            horizon: Nanos::from_secs(120),
            sample_every: Nanos::from_millis(50),
            linux: Linux::default(),
            memory_every: Nanos::from_secs(2),
            flat_handoffs: false,
            tick_cost: None,
            cpu_budget: None,
            tool_cpu: Some(MEASURED),
            phases: false,
        }
    }
}

impl Sim {
    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        self.world.now
    }

    /// Whether every thread has exited.
    pub fn finished(&self) -> bool {
        self.user.live == 0
    }

    /// The machine's topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Changes thread `t`'s affinity to `allowed` (`sched_setaffinity`).
    pub(crate) fn set_affinity(&mut self, t: ThreadIdx, allowed: threadbalance_model::CpuSet) {
        self.kernel
            .set_affinity(&mut self.world, &mut self.user, t, allowed);
    }

    /// How many of the threads are the programs' (the tool's thread comes after them).
    pub(crate) fn program_threads(&self) -> usize {
        self.user.program_threads(&self.world)
    }

    /// How many of the applications are the programs' (the tool's comes after them).
    pub(crate) fn program_apps(&self) -> usize {
        self.user.program_apps()
    }

    /// How many sleeps so far stayed queued, delayed (`Linux::delay_dequeue`).
    pub fn delayed_dequeues(&self) -> u64 {
        self.world.stats.delayed_dequeues
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.world.stats.events
    }

    /// Handles events up to and including time `until`, or until every thread exited.
    /// Policy events are left in the queue for the caller ([`crate::host`]).
    pub fn run_until(&mut self, until: Nanos) -> Option<crate::queue::Event> {
        while let Some(t) = self.world.q.peek_time() {
            if t > until || self.user.live == 0 {
                break;
            }
            let Some(e) = self.world.q.pop() else { break };
            self.world.now = e.at;
            if e.kind == EventKind::Policy {
                return Some(e);
            }
            #[cfg(debug_assertions)]
            let (kind, target) = (e.kind, e.target);
            self.handle(e);
            // Debug builds (the tests) check the model every 64 events, so a lost or doubled
            // thread fails there instead of stalling a run until its horizon.
            #[cfg(debug_assertions)]
            if self.world.stats.events.is_multiple_of(64)
                && let Err(why) = self.check_invariants()
            {
                panic!(
                    "after a {kind:?} event for {target} at {} ns: {why}",
                    self.world.now
                );
            }
        }
        if self.world.now < until && self.user.live > 0 {
            self.world.now = until.min(self.horizon);
        }
        None
    }

    pub(crate) fn handle(&mut self, e: crate::queue::Event) {
        self.world.stats.events += 1;
        match e.kind {
            EventKind::Cpu => {
                let c = CpuIdx(e.target);
                if self.user.cpus[c].version == e.version && self.kernel.running(c).is_some() {
                    self.user
                        .on_activity_end(&mut self.kernel, &mut self.world, c);
                }
            }
            EventKind::Tick => {
                self.kernel
                    .on_tick(&mut self.world, &mut self.user, CpuIdx(e.target))
            }
            EventKind::Resched => {
                self.kernel
                    .on_resched(&mut self.world, &mut self.user, CpuIdx(e.target))
            }
            EventKind::Noise => {
                self.kernel
                    .on_noise(&mut self.world, &mut self.user, CpuIdx(e.target))
            }
            EventKind::Timer => {
                let t = ThreadIdx(e.target);
                if self.world.th[t].st == St::Blocked {
                    self.kernel.wake(&mut self.world, &mut self.user, t, None);
                }
            }
            EventKind::Spawn => self.spawn(ThreadIdx(e.target)),
            EventKind::Sample => self.on_sample(),
            EventKind::NumaScan => self.on_numa_scan(),
            EventKind::Policy => {}
        }
    }

    fn on_sample(&mut self) {
        let now = self.world.now;
        let mut busy = vec![Nanos::ZERO; self.world.hw.npkg];
        for (c, cpu) in self.user.cpus.iter().enumerate() {
            let c = CpuIdx::from(c);
            let mut b = cpu.busy_ns;
            if self.kernel.running(c).is_some() {
                b += now - cpu.seg_start;
            }
            busy[self.world.hw.pkg[c] as usize] += b;
        }
        let per_pkg = self.topo.domains(Level::Package);
        let util = busy
            .iter()
            .zip(&self.last_sample_busy)
            .zip(per_pkg)
            .map(|((&b, &l), d)| {
                (b - l).0 as f64 / (self.sample_every.0 as f64 * d.cpus.len() as f64)
            })
            .collect();
        self.timeline.push(TimelinePoint {
            t_s: now.as_secs_f64(),
            socket_util: util,
            migrations: self.world.stats.migrations - self.last_sample_migr,
            remote_frac: {
                let total = self.world.stats.mem_total - self.last_sample_mem.0;
                let remote = self.world.stats.mem_remote - self.last_sample_mem.1;
                if total > 0.0 { remote / total } else { 0.0 }
            },
        });
        self.last_sample_mem = (self.world.stats.mem_total, self.world.stats.mem_remote);
        self.last_sample_busy = busy;
        self.last_sample_migr = self.world.stats.migrations;
        if self.user.live > 0 {
            self.world
                .q
                .push(now + self.sample_every, EventKind::Sample, 0, 0);
        }
    }

    fn spawn(&mut self, t: ThreadIdx) {
        let app = self.world.th[t].app;
        let first = self.user.apps[app].first;
        // The first thread of an application is exec'd onto the idlest CPU; the others are
        // forked by it, from wherever it runs.
        let parent = (t != first).then(|| self.world.th[first].cpu);
        if t != first {
            // A thread starts with its creator's CPU mask (`clone` copies `cpus_mask`): a
            // mask a policy set on the first thread before it forked is the new one's too.
            self.world.th[t].allowed = self.world.th[first].allowed.clone();
        }
        let c = self.kernel.fork_cpu(&self.world, t, parent);
        let th = &mut self.world.th[t];
        th.born = self.world.now;
        th.scan = crate::state::Scan::new(self.world.now);
        self.kernel
            .wake_up_new(&mut self.world, &mut self.user, t, c);
    }

    /// Sampled counters of every live thread, as `/proc` and the probes would give them.
    pub(crate) fn sample_threads(&self, into: &mut Vec<threadbalance_model::Sample>) {
        use threadbalance_model::{Sample, ThreadState};
        into.clear();
        let now = self.world.now;
        // The tool's own thread is not the program's: the policy never sees it.
        for (i, th) in self.world.th[..self.program_threads()].iter().enumerate() {
            if matches!(th.st, St::New | St::Done) {
                continue;
            }
            let mut running = None;
            let mut run = th.run;
            let mut utime = th.utime;
            let mut wait = th.wait;
            // As the kernel keeps them (`Linux::schedstat_at_ticks`): run time up to the
            // CPU's last tick (ticks fall on multiples of the tick on every CPU), and no
            // wait for a thread still queued.
            let stale = self.kernel.lx.schedstat_at_ticks;
            if th.st == St::Running {
                let tick = self.kernel.lx.tick_ns();
                let upto = if stale { now / tick * tick } else { now };
                let d = upto.saturating_sub(self.user.cpus[th.cpu].seg_start);
                run += d;
                utime += d;
                running = Some(d.saturating_sub(self.user.cpus[th.cpu].seg_debt.min(th.debt)));
            }
            if th.st == St::Runnable && !stale {
                wait += now.saturating_sub(th.runnable_since);
            }
            let lock = th.lck_ns
                + th.lck_start
                    .map_or(Nanos::ZERO, |start| now.saturating_sub(start));
            into.push(Sample {
                key: th.key,
                utime,
                stime: th.stime,
                run,
                wait,
                timeslices: th.timeslices,
                voluntary: th.voluntary,
                involuntary: th.involuntary,
                last_cpu: self.world.hw.cpu_id[th.cpu],
                state: match th.st {
                    St::Running | St::Runnable => ThreadState::Running,
                    _ => ThreadState::Sleeping,
                },
                lock: Some(lock),
                migrations: Some(th.migrations),
                progress: Some(th.rounds),
                counters: Some(
                    self.user
                        .counters_now(&self.world, ThreadIdx::from(i), running),
                ),
            });
        }
        into.sort_unstable_by_key(|s| s.key);
    }
}

impl Sim {
    /// Checks the model's invariants at the current instant; the first violation found.
    ///
    /// * every running thread sits on one CPU that its affinity allows, and every queued
    ///   thread on exactly one run queue of an allowed CPU;
    /// * a lock has at most one holder, and that holder is inside its critical section;
    /// * CPU time is conserved: the time threads ran equals the time CPUs were busy.
    pub fn check_invariants(&self) -> Result<(), crate::Violation> {
        let mut seen = vec![0u32; self.world.th.len()];
        self.kernel.count_queued(&self.world, &mut seen)?;
        for (t, th) in self.world.th.iter().enumerate() {
            let expect = u32::from(matches!(th.st, St::Running | St::Runnable));
            if seen[t] != expect {
                return Err(crate::Violation(format!(
                    "thread {t} ({:?}) is on {} CPUs",
                    th.st, seen[t]
                )));
            }
            if expect == 1 && !th.allowed.contains(self.world.hw.cpu_id[th.cpu]) {
                return Err(crate::Violation(format!(
                    "thread {t} is on CPU {} outside its affinity",
                    th.cpu
                )));
            }
        }
        for (l, lock) in self.user.locks.iter().enumerate() {
            let l = LockIdx::from(l);
            if let Some(h) = lock.holder {
                let inside =
                    matches!(self.world.th[h].act, Act::Work { lock: Some(x), .. } if x == l);
                if !inside {
                    return Err(crate::Violation(format!(
                        "lock {l} held by thread {h} outside its critical section"
                    )));
                }
            }
            let holders = self
                .world
                .th
                .iter()
                .filter(|th| matches!(th.act, Act::Work { lock: Some(x), .. } if x == l))
                .count();
            if holders > 1 {
                return Err(crate::Violation(format!(
                    "lock {l} has {holders} threads inside"
                )));
            }
        }
        let ran: Nanos = self.world.th.iter().map(|t| t.run).sum();
        let busy: Nanos = self.user.cpus.iter().map(|c| c.busy_ns).sum();
        if ran != busy {
            return Err(crate::Violation(format!(
                "threads ran {} ns but CPUs were busy {} ns",
                ran.0, busy.0
            )));
        }
        Ok(())
    }

    /// Iterations each thread has completed, in thread order.
    pub fn iterations(&self) -> Vec<u64> {
        self.world.th[..self.program_threads()]
            .iter()
            .map(|t| t.iter)
            .collect()
    }

    /// Every thread's CPU time so far (completed segments), in thread order.
    pub fn thread_run(&self) -> Vec<Nanos> {
        self.world.th[..self.program_threads()]
            .iter()
            .map(|t| t.run)
            .collect()
    }
}
