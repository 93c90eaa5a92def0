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

mod ops;
mod segment;
mod tool;

pub use tool::MEASURED;

pub(crate) use crate::state::{
    Act, AppState, BarrierState, CpuState, LockState, Prog, Programs, QueueState, St, Stats, Thread,
};
pub use crate::state::{Sim, TimelinePoint};

use crate::machine::Machine;
use crate::queue::{EventKind, EventQueue};
use crate::scheduler::Linux;
use crate::state::build_hw;
use crate::state::{
    AppIdx, BarrierIdx, CpuIdx, Kernel, KernelCpu, LockIdx, ProgIdx, QueueIdx, ThreadIdx,
};
use crate::workload::{Op, Workload};
use threadbalance_model::{Level, Nanos, Pid, ThreadKey, Tid, Topology};
use threadbalance_policy::rng::Rng;

/// The programs part as the kernel sees it (see [`Programs`]).
impl Programs for Sim {
    fn run_program(&mut self, c: CpuIdx, t: ThreadIdx) {
        self.advance(c, t);
    }

    fn begin_segment(&mut self, c: CpuIdx) {
        self.start_segment(c);
    }

    fn end_segment(&mut self, c: CpuIdx) {
        self.stop_segment(c);
    }

    fn wait_over(&mut self, t: ThreadIdx) -> bool {
        match self.th[t].act {
            Act::Spin { lock, .. } if self.locks[lock].holder.is_none() => {
                self.locks[lock].spinners.retain(|&x| x != t);
                true
            }
            Act::BarrierSpin { barrier, .. } | Act::Yield { barrier } => {
                Some(self.barriers[barrier].generation) != self.th[t].bar_gen
            }
            _ => false,
        }
    }

    fn yield_waiting(&self, t: ThreadIdx) -> bool {
        match self.th[t].act {
            Act::Yield { barrier } => Some(self.barriers[barrier].generation) == self.th[t].bar_gen,
            _ => false,
        }
    }

    fn footprint_lines(&self, t: ThreadIdx) -> f64 {
        self.apps[self.th[t].app].footprint_lines
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
    /// `run_policy`; `apps::run_per_app`'s instances tick free.
    pub tick_cost: Option<TickCost>,
    /// An operator's whole budget (`--cpu-budget`), as a share of one core: with a tick
    /// cost, the pacer holds ticks *and moves* to it, each move charged
    /// [`TickCost::per_move`], as the live loop does when given one. `None` (the default):
    /// ticks are held to 0.8 % and moves are not charged.
    pub cpu_budget: Option<f64>,
    /// What the tool's own thread takes from the simulated machine (`run/tool.rs`): at each
    /// tick of `run_policy` (not under `none`, where no tool runs) a thread of the
    /// machine runs for [`TickCost::of`] the program's threads plus
    /// [`TickCost::per_move`] for each move done, competing for a CPU as any thread does.
    /// Default: [`MEASURED`], what `bench --cost` measured. `None`: the tool costs the
    /// machine nothing (as every simulated table was made before issue 38).
    pub tool_cpu: Option<TickCost>,
    /// Log when each thread reached each barrier (`RunResult::phases`; see
    /// [`crate::phases`]). Off by default.
    pub phases: bool,
}

/// The CPU time one live tick costs the tool: `fixed` plus `per_thread_ns` for each thread
/// of the program (sampling, deciding and the loop), and what each move costs it. Moves
/// are charged only under an operator's whole budget ([`RunOptions::cpu_budget`]), as live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TickCost {
    /// Per tick, whatever the thread count.
    pub fixed: Nanos,
    /// Per thread alive, ns.
    pub per_thread_ns: f64,
    /// Per move made.
    pub per_move: Nanos,
}

impl TickCost {
    /// What a tick with `threads` threads costs.
    pub fn of(&self, threads: usize) -> Nanos {
        self.fixed + Nanos((self.per_thread_ns * threads as f64).max(0.0) as u64)
    }
}

impl std::str::FromStr for TickCost {
    type Err = String;
    /// `FIXED_US[,PER_THREAD_US[,PER_MOVE_US]]`, in µs: `"20"`, `"20,0.07"` or
    /// `"20,0.07,46"`.
    fn from_str(s: &str) -> Result<TickCost, String> {
        let bad = || {
            format!(
                "tick cost {s:?}: expected FIXED_US[,PER_THREAD_US[,PER_MOVE_US]], e.g. 20,0.07"
            )
        };
        let mut parts = s.split(',');
        let us = |x: Option<&str>| -> Result<f64, String> {
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
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(TickCost {
            fixed: Nanos((fixed * 1e3) as u64),
            per_thread_ns: per_thread * 1e3,
            per_move: Nanos((per_move * 1e3) as u64),
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
    /// Builds the machine and the workload's threads (created from t = 0, 20 µs apart).
    pub fn new(machine: &Machine, workload: &Workload, opts: &RunOptions) -> Sim {
        let topo = machine.topo.clone();
        let hw = build_hw(machine);
        let levels = crate::scheduler::build_levels(&topo, &hw);
        let ncpu = hw.cpu_id.len();
        let nlv = levels.len();
        let lx = opts.linux.clone();
        let kcpus = (0..ncpu)
            .map(|_| KernelCpu {
                cur: None,
                rq: Vec::with_capacity(8),
                delayed: Vec::new(),
                min_vruntime: Nanos::ZERO,
                tick_armed: false,
                idle_since: Some(Nanos::ZERO),
                avg_idle: Nanos(2 * lx.migration_cost_ns),
                last_balance: vec![Nanos::ZERO; nlv],
                interval: levels.iter().map(|l| l.min_interval).collect(),
                failed: vec![0; nlv],
                newidle: vec![crate::state::NewidleStats::default(); nlv],
                noise_load: 0.0,
                noise_at: Nanos::ZERO,
            })
            .collect();
        let cpus = (0..ncpu)
            .map(|_| CpuState {
                version: 0,
                seg_start: Nanos::ZERO,
                seg_factor: 1.0,
                seg_stream: 0.0,
                seg_node: 0,
                seg_home: 0,
                seg_debt: Nanos::ZERO,
                busy_ns: Nanos::ZERO,
                in_advance: false,
            })
            .collect();
        let mut sim = Sim {
            now: Nanos::ZERO,
            q: EventQueue::new(),
            th: Vec::new(),
            cpus,
            locks: Vec::new(),
            barriers: Vec::new(),
            queues: Vec::new(),
            progs: Vec::new(),
            apps: Vec::new(),
            mem: crate::memory::MemLoad::new(hw.nnode),
            hwc: crate::counters::Counters::default(),
            last_sample_busy: vec![Nanos::ZERO; hw.npkg],
            hw,
            lx,
            kernel: Kernel {
                levels,
                llc_scan: Vec::new(),
                nohz_next: Nanos::ZERO,
                seen: None,
                tie: Rng::new(opts.seed ^ 0x0071_E50F_7AC4),
                overloaded: false,
                cpus: kcpus,
            },
            rng: Rng::new(opts.seed ^ 0x005E_ED0F_51A1),
            stats: Stats::default(),
            timeline: Vec::new(),
            sample_every: opts.sample_every.max(Nanos(1)),
            last_sample_migr: 0,
            last_sample_mem: (0.0, 0.0),
            live: 0,
            horizon: opts.horizon,
            topo,
            memory_every: opts.memory_every,
            memory_at: None,
            wakes: std::collections::HashMap::new(),
            flat_handoffs: opts.flat_handoffs,
            phases: opts.phases.then(crate::phases::PhaseLog::default),
            tool: None,
        };
        sim.kernel.llc_scan = vec![None; sim.hw.llc_cpus.len()];
        sim.hwc.working_sets(&workload.apps);
        let all = sim.topo.online().clone();
        let mut spawn_at = 0u64;
        for (ai, app) in workload.apps.iter().enumerate() {
            let pid = 1000 * (ai as i32 + 1);
            // A launched-later application spawns from its own start; the others one after
            // another from t = 0.
            let mut app_at = (app.start_ns > 0).then_some(app.start_ns);
            let first = sim.th.len();
            let lock_base = LockIdx::from(sim.locks.len());
            let barrier_base = BarrierIdx::from(sim.barriers.len());
            let queue_base = QueueIdx::from(sim.queues.len());
            sim.locks.extend((0..app.locks()).map(|_| LockState {
                holder: None,
                last_cpu: None,
                pass: None,
                ..LockState::default()
            }));
            sim.barriers.extend(
                app.barrier_parties()
                    .into_iter()
                    .map(|parties| BarrierState {
                        parties,
                        ..BarrierState::default()
                    }),
            );
            sim.queues.extend(app.queues.iter().map(|q| QueueState {
                capacity: q.capacity,
                lines: q.lines,
                ..QueueState::default()
            }));
            for g in &app.groups {
                let prog = ProgIdx::from(sim.progs.len());
                let mut puts: Vec<QueueIdx> = g
                    .ops
                    .iter()
                    .filter_map(|o| match o {
                        Op::Put { queue } => Some(QueueIdx(queue_base.0 + u32::from(*queue))),
                        _ => None,
                    })
                    .collect();
                puts.sort_unstable();
                puts.dedup();
                for &qi in &puts {
                    sim.queues[qi].producers += g.threads;
                }
                sim.progs.push(Prog {
                    ops: g.ops.clone(),
                    iterations: g.iterations,
                    puts,
                });
                for _ in 0..g.threads {
                    let i = sim.th.len();
                    let tid = if i == first {
                        pid
                    } else {
                        pid + (i - first) as i32
                    };
                    sim.th.push(Thread {
                        key: ThreadKey {
                            pid: Pid(pid),
                            tid: Tid(tid),
                            start_time: 1 + app_at.unwrap_or(spawn_at) / 10_000_000,
                        },
                        app: AppIdx::from(ai),
                        prog,
                        pc: 0,
                        iter: 0,
                        st: St::New,
                        cpu: CpuIdx(0),
                        allowed: all.clone(),
                        original: all.clone(),
                        vruntime: Nanos::ZERO,
                        lag: 0,
                        act: Act::Idle,
                        debt: Nanos::ZERO,
                        carry: 0.0,
                        home: None,
                        rng: Rng::new(
                            opts.seed
                                .wrapping_mul(0x9E37_79B9)
                                .wrapping_add(i as u64 * 7919 + 1),
                        ),
                        run: Nanos::ZERO,
                        wait: Nanos::ZERO,
                        utime: Nanos::ZERO,
                        stime: Nanos::ZERO,
                        lock_ns: Nanos::ZERO,
                        lck_ns: Nanos::ZERO,
                        lck_start: None,
                        timeslices: 0,
                        voluntary: 0,
                        involuntary: 0,
                        migrations: 0,
                        born: Nanos::ZERO,
                        died: Nanos::ZERO,
                        runnable_since: Nanos::ZERO,
                        wait_start: None,
                        picked_at: Nanos::ZERO,
                        slice: None,
                        last_ran: Nanos::ZERO,
                        bar_gen: None,
                        ticket_loop: None,
                        passes: 0,
                        last_wakee: None,
                        wakee_flips: 0,
                        flip_decay: Nanos::ZERO,
                        load_avg: 1.0,
                        load_at: Nanos::ZERO,
                        recent_cpu: None,
                        scan: crate::state::Scan::new(Nanos::ZERO),
                    });
                    let at = app_at.unwrap_or(spawn_at);
                    // A main thread creates the others itself, once its program is done.
                    if !(app.main_thread && i > first) {
                        sim.q.push(Nanos(at), EventKind::Spawn, i as u32, 0);
                    }
                    match app_at.as_mut() {
                        Some(a) => *a += sim.lx.spawn_gap_ns,
                        None => spawn_at += sim.lx.spawn_gap_ns,
                    }
                }
            }
            sim.apps.push(AppState {
                name: app.name.clone(),
                first: ThreadIdx::from(first),
                threads: app.threads(),
                done: 0,
                finished_at: None,
                lock_base,
                barrier_base,
                queue_base,
                footprint_lines: f64::from(app.footprint_kb) * 16.0,
                spin_ns: app.spin_ns,
                shared_data: app.shared_data,
                memory_bytes: 1024
                    * u64::from(if app.memory_kb > 0 {
                        app.memory_kb
                    } else {
                        app.footprint_kb
                    }),
                main_thread: app.main_thread,
                joining: false,
                scan: crate::state::SharedScan::new(Nanos(app.start_ns)),
            });
        }
        sim.live = sim.th.len();
        sim.q.push(sim.sample_every, EventKind::Sample, 0, 0);
        sim.autonuma_start();
        sim
    }

    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Whether every thread has exited.
    pub fn finished(&self) -> bool {
        self.live == 0
    }

    /// The machine's topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.stats.events
    }

    /// Handles events up to and including time `until`, or until every thread exited.
    /// Policy events are left in the queue for the caller ([`crate::host`]).
    pub fn run_until(&mut self, until: Nanos) -> Option<crate::queue::Event> {
        while let Some(t) = self.q.peek_time() {
            if t > until || self.live == 0 {
                break;
            }
            let Some(e) = self.q.pop() else { break };
            self.now = e.at;
            if e.kind == EventKind::Policy {
                return Some(e);
            }
            #[cfg(debug_assertions)]
            let (kind, target) = (e.kind, e.target);
            self.handle(e);
            // Debug builds (the tests) check the model every 64 events, so a lost or doubled
            // thread fails there instead of stalling a run until its horizon.
            #[cfg(debug_assertions)]
            if self.stats.events.is_multiple_of(64)
                && let Err(why) = self.check_invariants()
            {
                panic!(
                    "after a {kind:?} event for {target} at {} ns: {why}",
                    self.now
                );
            }
        }
        if self.now < until && self.live > 0 {
            self.now = until.min(self.horizon);
        }
        None
    }

    pub(crate) fn handle(&mut self, e: crate::queue::Event) {
        self.stats.events += 1;
        match e.kind {
            EventKind::Cpu => {
                let c = CpuIdx(e.target);
                if self.cpus[c].version == e.version && self.running(c).is_some() {
                    self.on_activity_end(c);
                }
            }
            EventKind::Tick => self.on_tick(CpuIdx(e.target)),
            EventKind::Resched => self.on_resched(CpuIdx(e.target)),
            EventKind::Noise => self.on_noise(CpuIdx(e.target)),
            EventKind::Timer => {
                let t = ThreadIdx(e.target);
                if self.th[t].st == St::Blocked {
                    self.wake(t, None);
                }
            }
            EventKind::Spawn => self.spawn(ThreadIdx(e.target)),
            EventKind::Sample => self.on_sample(),
            EventKind::NumaScan => self.on_numa_scan(),
            EventKind::Policy => {}
        }
    }

    fn on_sample(&mut self) {
        let now = self.now;
        let mut busy = vec![Nanos::ZERO; self.hw.npkg];
        for (c, cpu) in self.cpus.iter().enumerate() {
            let c = CpuIdx::from(c);
            let mut b = cpu.busy_ns;
            if self.running(c).is_some() {
                b += now - cpu.seg_start;
            }
            busy[self.hw.pkg[c] as usize] += b;
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
            migrations: self.stats.migrations - self.last_sample_migr,
            remote_frac: {
                let total = self.stats.mem_total - self.last_sample_mem.0;
                let remote = self.stats.mem_remote - self.last_sample_mem.1;
                if total > 0.0 { remote / total } else { 0.0 }
            },
        });
        self.last_sample_mem = (self.stats.mem_total, self.stats.mem_remote);
        self.last_sample_busy = busy;
        self.last_sample_migr = self.stats.migrations;
        if self.live > 0 {
            self.q
                .push(now + self.sample_every, EventKind::Sample, 0, 0);
        }
    }

    fn spawn(&mut self, t: ThreadIdx) {
        let app = self.th[t].app;
        let first = self.apps[app].first;
        // The first thread of an application is exec'd onto the idlest CPU; the others are
        // forked by it, from wherever it runs.
        let parent = (t != first).then(|| self.th[first].cpu);
        if t != first {
            // A thread starts with its creator's CPU mask (`clone` copies `cpus_mask`): a
            // mask a policy set on the first thread before it forked is the new one's too.
            self.th[t].allowed = self.th[first].allowed.clone();
        }
        let c = self.fork_cpu(t, parent);
        let th = &mut self.th[t];
        th.born = self.now;
        th.scan = crate::state::Scan::new(self.now);
        self.wake_up_new(t, c);
    }

    /// Sampled counters of every live thread, as `/proc` and the probes would give them.
    pub(crate) fn sample_threads(&self, into: &mut Vec<threadbalance_model::Sample>) {
        use threadbalance_model::{Sample, ThreadState};
        into.clear();
        let now = self.now;
        // The tool's own thread is not the program's: the policy never sees it.
        for (i, th) in self.th[..self.program_threads()].iter().enumerate() {
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
            let stale = self.lx.schedstat_at_ticks;
            if th.st == St::Running {
                let tick = self.lx.tick_ns();
                let upto = if stale { now / tick * tick } else { now };
                let d = upto.saturating_sub(self.cpus[th.cpu].seg_start);
                run += d;
                utime += d;
                running = Some(d.saturating_sub(self.cpus[th.cpu].seg_debt.min(th.debt)));
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
                last_cpu: self.hw.cpu_id[th.cpu],
                state: match th.st {
                    St::Running | St::Runnable => ThreadState::Running,
                    _ => ThreadState::Sleeping,
                },
                lock: Some(lock),
                migrations: Some(th.migrations),
                counters: Some(self.counters_now(ThreadIdx::from(i), running)),
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
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = vec![0u32; self.th.len()];
        self.count_queued(&mut seen)?;
        for (t, th) in self.th.iter().enumerate() {
            let expect = u32::from(matches!(th.st, St::Running | St::Runnable));
            if seen[t] != expect {
                return Err(format!("thread {t} ({:?}) is on {} CPUs", th.st, seen[t]));
            }
            if expect == 1 && !th.allowed.contains(self.hw.cpu_id[th.cpu]) {
                return Err(format!(
                    "thread {t} is on CPU {} outside its affinity",
                    th.cpu
                ));
            }
        }
        for (l, lock) in self.locks.iter().enumerate() {
            let l = LockIdx::from(l);
            if let Some(h) = lock.holder {
                let inside = matches!(self.th[h].act, Act::Work { lock: Some(x), .. } if x == l);
                if !inside {
                    return Err(format!(
                        "lock {l} held by thread {h} outside its critical section"
                    ));
                }
            }
            let holders = self
                .th
                .iter()
                .filter(|th| matches!(th.act, Act::Work { lock: Some(x), .. } if x == l))
                .count();
            if holders > 1 {
                return Err(format!("lock {l} has {holders} threads inside"));
            }
        }
        let ran: Nanos = self.th.iter().map(|t| t.run).sum();
        let busy: Nanos = self.cpus.iter().map(|c| c.busy_ns).sum();
        if ran != busy {
            return Err(format!(
                "threads ran {} ns but CPUs were busy {} ns",
                ran.0, busy.0
            ));
        }
        Ok(())
    }

    /// Iterations each thread has completed, in thread order.
    pub fn iterations(&self) -> Vec<u64> {
        self.th[..self.program_threads()]
            .iter()
            .map(|t| t.iter)
            .collect()
    }

    /// Every thread's CPU time so far (completed segments), in thread order.
    pub fn thread_run(&self) -> Vec<Nanos> {
        self.th[..self.program_threads()]
            .iter()
            .map(|t| t.run)
            .collect()
    }
}
