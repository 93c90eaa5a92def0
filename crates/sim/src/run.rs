//! The simulation: threads executing their programs on the machine, driven by events.
//!
//! ```text
//!            ┌────────────── EventQueue (time, seq) ──────────────┐
//!            ▼                                                    │
//!   Cpu: activity ends ──► account segment ──► op done? ──► advance(program)
//!   Tick: slice expiry, periodic + nohz balance (scheduler.rs)    │  lock / barrier /
//!   Timer: sleep ends ──► wake-up placement (scheduler.rs)        │  queue / sleep
//!   Policy: Engine::tick(SimHost) ──► affinities (host.rs)        │
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

use crate::machine::Machine;
use crate::queue::{EventKind, EventQueue};
use crate::scheduler::{Linux, SdLevel};
use crate::workload::{Op, Wait, Workload};
use threadbalance_model::{CpuId, CpuSet, Level, Nanos, Pid, ThreadKey, Tid, Topology};
use threadbalance_policy::rng::Rng;

/// "No thread", "no lock", "no time".
pub(crate) const NONE: u32 = u32::MAX;
/// An end time that never comes.
pub(crate) const NEVER: u64 = u64::MAX;

/// Life-cycle state of a simulated thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    /// Not created yet.
    New,
    /// On a CPU.
    Running,
    /// On a run queue, waiting for its CPU.
    Runnable,
    /// Sleeping (lock, barrier, queue, timer).
    Blocked,
    /// Exited.
    Done,
}

/// What a running thread is doing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Act {
    /// Between operations.
    Idle,
    /// Work of `left` ns at full speed; inside lock `lock`'s critical section unless `NONE`.
    Work { left: f64, lock: u32, mem: f32 },
    /// Spinning on held mutex `lock` until `until`, then sleeping.
    Spin { lock: u32, until: u64 },
    /// Spinning at barrier `barrier` until `until` (`NEVER`: pure spin), then sleeping.
    BarrierSpin { barrier: u32, until: u64 },
    /// `sched_yield` loop at barrier `barrier`.
    Yield { barrier: u32 },
}

/// One simulated thread.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub key: ThreadKey,
    pub app: u32,
    pub prog: u32,
    pub pc: u32,
    pub iter: u64,
    pub st: St,
    /// CPU it runs or waits on, or last ran on.
    pub cpu: u32,
    pub allowed: CpuSet,
    pub original: CpuSet,
    pub vruntime: u64,
    /// vruntime − the CPU's min_vruntime when it left a queue (EEVDF keeps lag).
    pub lag: i64,
    pub act: Act,
    /// System work to pay before the activity (context switch, cache refill, wake-up).
    pub debt: u64,
    /// Item data to fetch in the next compute op (ns).
    pub carry: f64,
    pub home: u32,
    pub rng: Rng,
    // Accounting (ns unless said otherwise).
    pub run: u64,
    pub wait: u64,
    pub utime: u64,
    pub stime: u64,
    pub lock_ns: u64,
    pub timeslices: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub migrations: u64,
    pub born: u64,
    pub died: u64,
    pub runnable_since: u64,
    pub wait_start: u64,
    pub picked_at: u64,
    pub last_ran: u64,
    pub bar_gen: u64,
    /// Inside a ticket loop: the ticket op's index, and the index just past its body
    /// (`NONE`: not in a loop).
    pub loop_pc: u32,
    pub loop_end: u32,
    /// Ticket loops finished (pool found empty): the pass whose tickets it takes next.
    pub passes: u64,
    pub last_wakee: u32,
    pub wakee_flips: u32,
    pub flip_decay: u64,
    /// PELT-like runnable average (0–1 task) as of `load_at`: the kernel's `task_h_load`
    /// for a nice-0 thread.
    pub load_avg: f64,
    /// When `load_avg` was last brought up to date, ns.
    pub load_at: u64,
    /// The CPU it left the last time its wake-up looked past `prev`
    /// (`p->recent_used_cpu`).
    pub recent_cpu: u32,
}

/// One CPU.
#[derive(Debug, Clone)]
pub(crate) struct CpuState {
    pub cur: u32,
    pub rq: Vec<u32>,
    pub min_vruntime: u64,
    pub version: u32,
    pub seg_start: u64,
    pub seg_factor: f64,
    pub seg_stream: f64,
    pub seg_node: u32,
    pub seg_debt: u64,
    pub tick_armed: bool,
    pub idle_since: u64,
    pub avg_idle: u64,
    pub last_balance: Vec<u64>,
    pub interval: Vec<u64>,
    pub failed: Vec<u32>,
    pub busy_ns: u64,
    /// Its thread's program is being advanced: wake-ups must not preempt it now.
    pub in_advance: bool,
}

impl CpuState {
    /// Runnable threads on it, the running one included.
    pub fn nr(&self) -> usize {
        self.rq.len() + usize::from(self.cur != NONE)
    }

    /// Neither running nor queued anything.
    pub fn idle(&self) -> bool {
        self.cur == NONE && self.rq.is_empty()
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct LockState {
    pub holder: u32,
    pub last_cpu: u32,
    pub spinners: Vec<u32>,
    /// Sleepers, the next to wake first (see [`Sim::park`]).
    pub waiters: std::collections::VecDeque<u32>,
    /// Enqueues so far, for the queue's occasional FIFO turn (`qh_qcnt`).
    pub enqueues: u8,
    pub acquisitions: u64,
    pub handoffs: u64,
    pub cross: u64,
    /// Its ticket pool (`Op::Ticket`): the pass it was last filled for (`NEVER`: not
    /// yet) and the tickets taken since.
    pub pass: u64,
    pub taken: u32,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct BarrierState {
    pub parties: usize,
    pub count: usize,
    pub generation: u64,
    pub waiters: Vec<u32>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct QueueState {
    pub capacity: usize,
    pub lines: u32,
    /// CPU of the producer of each item.
    pub items: std::collections::VecDeque<u32>,
    pub getters: std::collections::VecDeque<u32>,
    pub putters: std::collections::VecDeque<u32>,
    pub producers: usize,
    pub closed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub name: String,
    pub first: usize,
    pub threads: usize,
    pub done: usize,
    pub finished_at: Option<u64>,
    pub lock_base: u32,
    pub barrier_base: u32,
    pub queue_base: u32,
    pub footprint_lines: f64,
    pub spin_ns: u64,
    pub shared_data: bool,
    /// Resident bytes of the shared data (leader first touch) or of each thread's pages.
    pub memory_bytes: u64,
    /// The first thread is a main thread that creates the others after its program.
    pub main_thread: bool,
    /// The main thread has created the others and sleeps in `pthread_join`.
    pub joining: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Prog {
    pub ops: Vec<Op>,
    pub iterations: Option<u64>,
    /// Queues this program puts into (it is a producer of each).
    pub puts: Vec<u32>,
}

/// Fixed facts about the hardware, indexed by dense CPU position.
#[derive(Debug, Clone)]
pub(crate) struct Hw {
    pub cpu_id: Vec<CpuId>,
    pub pkg: Vec<u32>,
    pub node: Vec<u32>,
    pub llc: Vec<u32>,
    pub core: Vec<u32>,
    pub siblings: Vec<Vec<u32>>,
    pub llc_cpus: Vec<Vec<u32>>,
    pub npkg: usize,
    pub nnode: usize,
    /// Line latency between nodes, ns (row-major).
    pub node_line: Vec<f64>,
    /// Memory slowdown of node a's CPUs on node b's pages.
    pub node_mem: Vec<f64>,
    pub llc_ns: f64,
    pub local_ns: f64,
    pub node_streams: f64,
    pub smt_factor: f64,
    pub mlp: f64,
}

impl Hw {
    /// Latency of a line another core modified (a lock, the data it protects, a queue
    /// item) moving from CPU `a` to CPU `b`: the LLC they share serves it, else memory of
    /// the node, else the interconnect.
    pub fn line_ns(&self, a: u32, b: u32) -> f64 {
        if a == b || a == NONE {
            return 0.0;
        }
        if self.llc[a as usize] == self.llc[b as usize] {
            return self.llc_ns;
        }
        self.mem_ns(a, b)
    }

    /// Latency of a line of a thread's working set refetched on CPU `b` after it ran on
    /// CPU `a`: its private caches are lost and a victim L3 (AMD) does not hold them, so it
    /// comes from memory, local to `a`'s node or across the interconnect.
    pub fn mem_ns(&self, a: u32, b: u32) -> f64 {
        if a == b || a == NONE {
            return 0.0;
        }
        let (na, nb) = (
            self.node[a as usize] as usize,
            self.node[b as usize] as usize,
        );
        if na == nb && self.pkg[a as usize] == self.pkg[b as usize] {
            self.local_ns
        } else {
            self.node_line[na * self.nnode + nb]
        }
    }
}

/// Counters only a simulator can see.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub events: u64,
    pub migrations: u64,
    pub cross_migrations: u64,
    pub mem_total: f64,
    pub mem_remote: f64,
}

/// Per-socket utilization and migrations over one sampling period.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TimelinePoint {
    /// End of the period, seconds.
    pub t_s: f64,
    /// Busy fraction of each socket's CPUs during the period.
    pub socket_util: Vec<f64>,
    /// Migrations during the period.
    pub migrations: u64,
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
        }
    }
}

/// A machine running a workload.
#[derive(Debug)]
pub struct Sim {
    pub(crate) now: u64,
    pub(crate) q: EventQueue,
    pub(crate) th: Vec<Thread>,
    pub(crate) cpus: Vec<CpuState>,
    pub(crate) locks: Vec<LockState>,
    pub(crate) barriers: Vec<BarrierState>,
    pub(crate) queues: Vec<QueueState>,
    pub(crate) progs: Vec<Prog>,
    pub(crate) apps: Vec<AppState>,
    pub(crate) hw: Hw,
    pub(crate) lx: Linux,
    pub(crate) levels: Vec<SdLevel>,
    pub(crate) rng: Rng,
    pub(crate) stats: Stats,
    pub(crate) streams: Vec<f64>,
    pub(crate) timeline: Vec<TimelinePoint>,
    pub(crate) sample_every: u64,
    pub(crate) last_sample_busy: Vec<u64>,
    pub(crate) last_sample_migr: u64,
    pub(crate) live: usize,
    pub(crate) horizon: u64,
    pub(crate) nohz_next: u64,
    pub(crate) topo: Topology,
    /// Period of per-process memory samples, ns (0: every sample).
    pub(crate) memory_every: u64,
    /// When `SimHost` last sampled memory (`NEVER`: not yet).
    pub(crate) memory_at: u64,
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
        let cpus = (0..ncpu)
            .map(|_| CpuState {
                cur: NONE,
                rq: Vec::with_capacity(8),
                min_vruntime: 0,
                version: 0,
                seg_start: 0,
                seg_factor: 1.0,
                seg_stream: 0.0,
                seg_node: 0,
                seg_debt: 0,
                tick_armed: false,
                idle_since: 0,
                avg_idle: 2 * lx.migration_cost_ns,
                last_balance: vec![0; nlv],
                interval: levels.iter().map(|l| l.min_interval).collect(),
                failed: vec![0; nlv],
                busy_ns: 0,
                in_advance: false,
            })
            .collect();
        let mut sim = Sim {
            now: 0,
            q: EventQueue::new(),
            th: Vec::new(),
            cpus,
            locks: Vec::new(),
            barriers: Vec::new(),
            queues: Vec::new(),
            progs: Vec::new(),
            apps: Vec::new(),
            streams: vec![0.0; hw.nnode],
            last_sample_busy: vec![0; hw.npkg],
            hw,
            lx,
            levels,
            rng: Rng::new(opts.seed ^ 0x005E_ED0F_51A1),
            stats: Stats::default(),
            timeline: Vec::new(),
            sample_every: opts.sample_every.0.max(1),
            last_sample_migr: 0,
            live: 0,
            horizon: opts.horizon.0,
            nohz_next: 0,
            topo,
            memory_every: opts.memory_every.0,
            memory_at: NEVER,
        };
        let all = sim.topo.online().clone();
        let mut spawn_at = 0u64;
        for (ai, app) in workload.apps.iter().enumerate() {
            let pid = 1000 * (ai as i32 + 1);
            // A launched-later application spawns from its own start; the others one after
            // another from t = 0.
            let mut app_at = (app.start_ns > 0).then_some(app.start_ns);
            let first = sim.th.len();
            let lock_base = sim.locks.len() as u32;
            let barrier_base = sim.barriers.len() as u32;
            let queue_base = sim.queues.len() as u32;
            sim.locks.extend((0..app.locks()).map(|_| LockState {
                holder: NONE,
                last_cpu: NONE,
                pass: NEVER,
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
                let prog = sim.progs.len() as u32;
                let mut puts: Vec<u32> = g
                    .ops
                    .iter()
                    .filter_map(|o| match o {
                        Op::Put { queue } => Some(queue_base + u32::from(*queue)),
                        _ => None,
                    })
                    .collect();
                puts.sort_unstable();
                puts.dedup();
                for &qi in &puts {
                    sim.queues[qi as usize].producers += g.threads;
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
                        app: ai as u32,
                        prog,
                        pc: 0,
                        iter: 0,
                        st: St::New,
                        cpu: 0,
                        allowed: all.clone(),
                        original: all.clone(),
                        vruntime: 0,
                        lag: 0,
                        act: Act::Idle,
                        debt: 0,
                        carry: 0.0,
                        home: NONE,
                        rng: Rng::new(
                            opts.seed
                                .wrapping_mul(0x9E37_79B9)
                                .wrapping_add(i as u64 * 7919 + 1),
                        ),
                        run: 0,
                        wait: 0,
                        utime: 0,
                        stime: 0,
                        lock_ns: 0,
                        timeslices: 0,
                        voluntary: 0,
                        involuntary: 0,
                        migrations: 0,
                        born: 0,
                        died: 0,
                        runnable_since: 0,
                        wait_start: NEVER,
                        picked_at: 0,
                        last_ran: 0,
                        bar_gen: NEVER,
                        loop_pc: NONE,
                        loop_end: NONE,
                        passes: 0,
                        last_wakee: NONE,
                        wakee_flips: 0,
                        flip_decay: 0,
                        load_avg: 1.0,
                        load_at: 0,
                        recent_cpu: NONE,
                    });
                    let at = app_at.unwrap_or(spawn_at);
                    // A main thread creates the others itself, once its program is done.
                    if !(app.main_thread && i > first) {
                        sim.q.push(at, EventKind::Spawn, i as u32, 0);
                    }
                    match app_at.as_mut() {
                        Some(a) => *a += sim.lx.spawn_gap_ns,
                        None => spawn_at += sim.lx.spawn_gap_ns,
                    }
                }
            }
            sim.apps.push(AppState {
                name: app.name.clone(),
                first,
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
            });
        }
        sim.live = sim.th.len();
        sim.q.push(sim.sample_every, EventKind::Sample, 0, 0);
        sim
    }

    /// The current simulated time.
    pub fn now(&self) -> Nanos {
        Nanos(self.now)
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
            if t > until.0 || self.live == 0 {
                break;
            }
            let Some(e) = self.q.pop() else { break };
            self.now = e.at;
            if e.kind == EventKind::Policy {
                return Some(e);
            }
            self.handle(e);
        }
        if self.now < until.0 && self.live > 0 {
            self.now = until.0.min(self.horizon);
        }
        None
    }

    pub(crate) fn handle(&mut self, e: crate::queue::Event) {
        self.stats.events += 1;
        match e.kind {
            EventKind::Cpu => {
                let c = e.target as usize;
                if self.cpus[c].version == e.version && self.cpus[c].cur != NONE {
                    self.on_activity_end(c);
                }
            }
            EventKind::Tick => self.on_tick(e.target as usize),
            EventKind::Resched => self.on_resched(e.target as usize),
            EventKind::Noise => self.on_noise(e.target as usize),
            EventKind::Timer => {
                let t = e.target as usize;
                if self.th[t].st == St::Blocked {
                    self.wake(t, NONE);
                }
            }
            EventKind::Spawn => self.spawn(e.target as usize),
            EventKind::Sample => self.on_sample(),
            EventKind::Policy => {}
        }
    }

    fn on_sample(&mut self) {
        let now = self.now;
        let mut busy = vec![0u64; self.hw.npkg];
        for (c, cpu) in self.cpus.iter().enumerate() {
            let mut b = cpu.busy_ns;
            if cpu.cur != NONE {
                b += now - cpu.seg_start;
            }
            busy[self.hw.pkg[c] as usize] += b;
        }
        let per_pkg = self.topo.domains(Level::Package);
        let util = busy
            .iter()
            .zip(&self.last_sample_busy)
            .zip(per_pkg)
            .map(|((b, l), d)| (b - l) as f64 / (self.sample_every as f64 * d.cpus.len() as f64))
            .collect();
        self.timeline.push(TimelinePoint {
            t_s: now as f64 / 1e9,
            socket_util: util,
            migrations: self.stats.migrations - self.last_sample_migr,
        });
        self.last_sample_busy = busy;
        self.last_sample_migr = self.stats.migrations;
        if self.live > 0 {
            self.q
                .push(now + self.sample_every, EventKind::Sample, 0, 0);
        }
    }

    fn spawn(&mut self, t: usize) {
        let app = self.th[t].app as usize;
        let first = self.apps[app].first;
        // The first thread of an application is exec'd onto the idlest CPU; the others are
        // forked by it, from wherever it runs.
        let parent = if t == first { NONE } else { self.th[first].cpu };
        let c = self.fork_cpu(t, parent);
        let th = &mut self.th[t];
        th.born = self.now;
        // A new task starts with a full load (init_entity_runnable_average).
        th.load_avg = 1.0;
        th.load_at = self.now;
        th.cpu = c;
        th.st = St::Runnable;
        th.vruntime = self.cpus[c as usize].min_vruntime;
        th.lag = 0;
        self.enqueue(t, c as usize, true);
    }

    // ---- segments ------------------------------------------------------------------------

    /// Starts (or restarts) the running thread's activity on CPU `c` at `now`.
    pub(crate) fn start_segment(&mut self, c: usize) {
        let t = self.cpus[c].cur as usize;
        let now = self.now;
        let (factor, stream, node) = self.speed_factor(c, t);
        let th = &self.th[t];
        let base = now + th.debt;
        let end = match th.act {
            Act::Work { left, .. } => base + (left * factor).ceil() as u64,
            Act::Spin { until, .. } => base.max(until),
            Act::BarrierSpin { until, .. } => {
                if until == NEVER {
                    NEVER
                } else {
                    base.max(until)
                }
            }
            Act::Yield { .. } => NEVER,
            Act::Idle => base,
        };
        let cpu = &mut self.cpus[c];
        cpu.version = cpu.version.wrapping_add(1);
        cpu.seg_start = now;
        cpu.seg_factor = factor;
        cpu.seg_stream = stream;
        cpu.seg_node = node;
        cpu.seg_debt = th.debt;
        if stream > 0.0 {
            self.streams[node as usize] += stream;
        }
        if end != NEVER {
            self.q
                .push(end, EventKind::Cpu, c as u32, self.cpus[c].version);
        }
    }

    fn speed_factor(&mut self, c: usize, t: usize) -> (f64, f64, u32) {
        let mut f = 1.0;
        let mut stream = 0.0;
        let mut node = 0;
        if let Act::Work { mem, .. } = self.th[t].act {
            let m = f64::from(mem);
            if m > 0.0 {
                let h = self.home_of(t, c) as usize;
                let here = self.hw.node[c] as usize;
                let remote = self.hw.node_mem[here * self.hw.nnode + h];
                // The socket issuing the requests shares its request queue and cache among
                // its memory-bound threads.
                let share = ((self.streams[here] + m) / self.hw.node_streams).max(1.0);
                f = (1.0 - m) + m * remote * share;
                stream = m;
                node = here as u32;
            }
        }
        if self.hw.smt_factor != 1.0
            && self.hw.siblings[c]
                .iter()
                .any(|&s| s as usize != c && self.cpus[s as usize].cur != NONE)
        {
            f *= self.hw.smt_factor;
        }
        (f, stream, node)
    }

    /// The node holding the pages thread `t` works on, placing them by first touch from CPU
    /// `c` if nobody touched them yet: the thread's own pages, or the application's shared
    /// data (first touched by its first thread).
    fn home_of(&mut self, t: usize, c: usize) -> u32 {
        let app = self.th[t].app as usize;
        let owner = if self.apps[app].shared_data {
            self.apps[app].first
        } else {
            t
        };
        if self.th[owner].home == NONE {
            let cpu = if owner == t {
                c
            } else {
                self.th[owner].cpu as usize
            };
            self.th[owner].home = self.hw.node[cpu];
        }
        self.th[owner].home
    }

    /// Stops the running thread's segment on CPU `c` at `now` and accounts it.
    pub(crate) fn stop_segment(&mut self, c: usize) {
        let t = self.cpus[c].cur as usize;
        let now = self.now;
        let cpu = &mut self.cpus[c];
        let elapsed = now.saturating_sub(cpu.seg_start);
        cpu.busy_ns += elapsed;
        cpu.version = cpu.version.wrapping_add(1);
        let (factor, stream, node, debt) =
            (cpu.seg_factor, cpu.seg_stream, cpu.seg_node, cpu.seg_debt);
        cpu.seg_start = now;
        if stream > 0.0 {
            let s = &mut self.streams[node as usize];
            *s = (*s - stream).max(0.0);
        }
        let home = {
            let app = self.th[t].app as usize;
            if self.apps[app].shared_data {
                self.th[self.apps[app].first].home
            } else {
                self.th[t].home
            }
        };
        let th = &mut self.th[t];
        th.run += elapsed;
        th.vruntime += elapsed;
        let sys = elapsed.min(debt).min(th.debt);
        th.debt -= sys;
        th.stime += sys;
        let user = elapsed - sys;
        th.utime += user;
        if let Act::Work { left, mem, .. } = &mut th.act {
            let done = (user as f64 / factor).min(*left);
            *left -= done;
            if *left < 0.5 {
                *left = 0.0;
            }
            if *mem > 0.0 {
                let m = done * f64::from(*mem);
                self.stats.mem_total += m;
                if home != self.hw.node[c] {
                    self.stats.mem_remote += m;
                }
            }
        }
        th.last_ran = now;
    }

    /// The CPU's activity reached its end.
    fn on_activity_end(&mut self, c: usize) {
        let t = self.cpus[c].cur as usize;
        self.stop_segment(c);
        if self.th[t].debt > 0 {
            // Only possible when the end was computed before extra debt was added.
            self.start_segment(c);
            return;
        }
        match self.th[t].act {
            Act::Work { lock, .. } => {
                self.th[t].act = Act::Idle;
                if lock == NONE {
                    self.th[t].pc += 1;
                } else {
                    let (prog, pc) = (self.th[t].prog as usize, self.th[t].pc);
                    if let Op::Ticket { items, body, .. } = self.progs[prog].ops[pc as usize] {
                        // Still holding the mutex: take a ticket, then unlock.
                        let got = self.take_ticket(lock as usize, t, items);
                        let th = &mut self.th[t];
                        if got {
                            th.loop_pc = pc;
                            th.loop_end = pc + 1 + u32::from(body);
                            th.pc = pc + 1;
                        } else {
                            th.passes += 1;
                            th.pc = pc + 1 + u32::from(body);
                        }
                    } else {
                        self.th[t].pc += 1;
                    }
                    self.release(lock as usize, t, c);
                }
            }
            Act::Spin { lock, .. } => {
                // Spin budget spent: park on the lock's sleep queue.
                let l = &mut self.locks[lock as usize];
                l.spinners.retain(|&x| x as usize != t);
                Self::park(l, t);
                self.th[t].act = Act::Idle;
                self.block(c, t);
                return;
            }
            Act::BarrierSpin { barrier, .. } => {
                let passed = self.barriers[barrier as usize].generation != self.th[t].bar_gen;
                self.th[t].act = Act::Idle;
                if !passed {
                    self.barriers[barrier as usize].waiters.push(t as u32);
                    self.block(c, t);
                    return;
                }
            }
            Act::Yield { .. } | Act::Idle => self.th[t].act = Act::Idle,
        }
        self.advance(c, t);
    }

    // ---- programs ------------------------------------------------------------------------

    /// Runs thread `t`'s program on CPU `c` from its current op until something takes time,
    /// blocks or the thread exits; then dispatches the CPU.
    pub(crate) fn advance(&mut self, c: usize, t: usize) {
        self.cpus[c].in_advance = true;
        self.advance_program(c, t);
        self.cpus[c].in_advance = false;
    }

    fn advance_program(&mut self, c: usize, t: usize) {
        loop {
            let prog = self.th[t].prog as usize;
            if self.th[t].pc == self.th[t].loop_end {
                // A ticket's work unit is done: back to the dispenser for the next.
                let th = &mut self.th[t];
                th.pc = th.loop_pc;
                th.loop_end = NONE;
            }
            if self.th[t].pc as usize >= self.progs[prog].ops.len() {
                let th = &mut self.th[t];
                th.pc = 0;
                th.iter += 1;
                if self.progs[prog].iterations.is_some_and(|n| th.iter >= n) {
                    if self.main_joins(t) {
                        return self.join(c, t);
                    }
                    self.exit(c, t);
                    return;
                }
            }
            let op = self.progs[prog].ops[self.th[t].pc as usize];
            let app = self.th[t].app as usize;
            match op {
                Op::Compute { ns, spread, mem } => {
                    let th = &mut self.th[t];
                    let mut left = vary(&mut th.rng, ns, spread) as f64;
                    left += std::mem::take(&mut th.carry);
                    th.act = Act::Work {
                        left: left.max(1.0),
                        lock: NONE,
                        mem,
                    };
                    break;
                }
                Op::Lock {
                    lock,
                    hold_ns,
                    lines,
                }
                | Op::Ticket {
                    lock,
                    hold_ns,
                    lines,
                    ..
                } => {
                    let l = (self.apps[app].lock_base + u32::from(lock)) as usize;
                    if self.locks[l].holder == NONE {
                        self.acquire(l, t, c, hold_ns, lines);
                    } else {
                        if self.th[t].wait_start == NEVER {
                            self.th[t].wait_start = self.now;
                        }
                        self.locks[l].spinners.push(t as u32);
                        self.th[t].act = Act::Spin {
                            lock: l as u32,
                            until: self.now + self.apps[app].spin_ns,
                        };
                    }
                    break;
                }
                Op::Barrier { barrier, wait } => {
                    let b = (self.apps[app].barrier_base + u32::from(barrier)) as usize;
                    if self.th[t].bar_gen != NEVER {
                        if self.barriers[b].generation != self.th[t].bar_gen {
                            self.end_wait(t);
                            self.th[t].bar_gen = NEVER;
                            self.th[t].pc += 1;
                            continue;
                        }
                    } else {
                        let bar = &mut self.barriers[b];
                        bar.count += 1;
                        if bar.count >= bar.parties {
                            bar.count = 0;
                            bar.generation += 1;
                            self.release_barrier(b, c);
                            self.th[t].pc += 1;
                            continue;
                        }
                        self.th[t].bar_gen = bar.generation;
                        self.th[t].wait_start = self.now;
                    }
                    self.th[t].act = match wait {
                        Wait::Spin => Act::BarrierSpin {
                            barrier: b as u32,
                            until: NEVER,
                        },
                        Wait::Block => Act::BarrierSpin {
                            barrier: b as u32,
                            until: self.now + self.apps[app].spin_ns,
                        },
                        Wait::Yield => {
                            self.th[t].act = Act::Yield { barrier: b as u32 };
                            self.th[t].debt += self.lx.syscall_ns;
                            self.start_segment(c);
                            if self.queued_non_yielder(c) {
                                self.yield_cpu(c);
                            }
                            return;
                        }
                    };
                    break;
                }
                Op::Put { queue } => {
                    let qi = (self.apps[app].queue_base + u32::from(queue)) as usize;
                    let q = &mut self.queues[qi];
                    if q.items.len() >= q.capacity {
                        if self.th[t].wait_start == NEVER {
                            self.th[t].wait_start = self.now;
                        }
                        q.putters.push_back(t as u32);
                        self.block(c, t);
                        return;
                    }
                    q.items.push_back(c as u32);
                    let getter = q.getters.pop_front();
                    self.end_wait(t);
                    self.th[t].debt += self.lx.syscall_ns;
                    self.th[t].pc += 1;
                    if let Some(g) = getter {
                        self.wake(g as usize, c as u32);
                    }
                }
                Op::Get { queue } => {
                    let qi = (self.apps[app].queue_base + u32::from(queue)) as usize;
                    let q = &mut self.queues[qi];
                    if let Some(src) = q.items.pop_front() {
                        let lines = f64::from(q.lines);
                        let putter = q.putters.pop_front();
                        let cost = lines * self.hw.line_ns(src, c as u32) / self.hw.mlp;
                        self.th[t].carry += cost;
                        self.end_wait(t);
                        self.th[t].debt += self.lx.syscall_ns;
                        self.th[t].pc += 1;
                        if let Some(p) = putter {
                            self.wake(p as usize, c as u32);
                        }
                    } else if q.closed {
                        self.end_wait(t);
                        self.exit(c, t);
                        return;
                    } else {
                        if self.th[t].wait_start == NEVER {
                            self.th[t].wait_start = self.now;
                        }
                        q.getters.push_back(t as u32);
                        self.block(c, t);
                        return;
                    }
                }
                Op::Sleep { ns, spread } => {
                    let d = vary(&mut self.th[t].rng, ns, spread);
                    self.th[t].pc += 1;
                    self.q.push(self.now + d, EventKind::Timer, t as u32, 0);
                    self.block(c, t);
                    return;
                }
            }
        }
        self.start_segment(c);
    }

    /// Whether thread `t` is a main thread that has yet to create its application's other
    /// threads, or is waiting for them.
    fn main_joins(&self, t: usize) -> bool {
        let app = &self.apps[self.th[t].app as usize];
        app.main_thread && app.first == t && app.done + 1 < app.threads
    }

    /// Main thread `t` on CPU `c` finished its program: the first time it creates the
    /// other threads (forked from `c`, as `pthread_create` does, 20 µs apart); then it
    /// sleeps in `pthread_join` (a futex wait) until the last of them exits.
    fn join(&mut self, c: usize, t: usize) {
        let app = self.th[t].app as usize;
        if !self.apps[app].joining {
            self.apps[app].joining = true;
            let (first, n) = (self.apps[app].first, self.apps[app].threads);
            for (k, i) in (first + 1..first + n).enumerate() {
                let at = self.now + (k as u64 + 1) * self.lx.spawn_gap_ns;
                self.th[i].key.start_time = 1 + at / 10_000_000;
                self.q.push(at, EventKind::Spawn, i as u32, 0);
            }
        }
        // Wake up past the end of the program, so the next advance exits.
        let prog = self.th[t].prog as usize;
        let th = &mut self.th[t];
        th.pc = self.progs[prog].ops.len() as u32;
        th.iter = th.iter.saturating_sub(1);
        if th.wait_start == NEVER {
            th.wait_start = self.now;
        }
        self.block(c, t);
    }

    /// Ends a lock/barrier/queue wait, adding it to the thread's lock time.
    fn end_wait(&mut self, t: usize) {
        let th = &mut self.th[t];
        if th.wait_start != NEVER {
            th.lock_ns += self.now.saturating_sub(th.wait_start);
            th.wait_start = NEVER;
        }
    }

    /// Thread `t` on CPU `c` takes free lock `l` and starts its critical section.
    fn acquire(&mut self, l: usize, t: usize, c: usize, hold_ns: u64, lines: u32) {
        self.end_wait(t);
        let lock = &mut self.locks[l];
        let from = lock.last_cpu;
        lock.holder = t as u32;
        lock.acquisitions += 1;
        if from != NONE {
            lock.handoffs += 1;
            if self.hw.pkg[from as usize] != self.hw.pkg[c] {
                lock.cross += 1;
            }
        }
        // The lock's line and the protected data follow the lock.
        let cost = f64::from(1 + lines) * self.hw.line_ns(from, c as u32);
        self.th[t].act = Act::Work {
            left: hold_ns as f64 + cost,
            lock: l as u32,
            mem: 0.0,
        };
    }

    /// Holder `t` on CPU `c` releases lock `l`: the spinner that sees the line first takes
    /// it; if nobody spins, the first sleeper is woken and must race for it.
    fn release(&mut self, l: usize, t: usize, c: usize) {
        let lock = &mut self.locks[l];
        debug_assert_eq!(lock.holder, t as u32);
        lock.holder = NONE;
        lock.last_cpu = c as u32;
        let mut best: Option<(f64, usize)> = None;
        for (i, &s) in lock.spinners.iter().enumerate() {
            let sc = self.th[s as usize].cpu;
            if self.th[s as usize].st != St::Running || self.cpus[sc as usize].cur != s {
                continue;
            }
            // Who sees the release first: line latency, plus up to 10 ns of spin-loop phase.
            let seen = self.hw.line_ns(c as u32, sc) + 10.0 * self.rng.next_f64();
            if best.is_none_or(|(b, _)| seen < b) {
                best = Some((seen, i));
            }
        }
        if let Some((_, i)) = best {
            let s = self.locks[l].spinners.swap_remove(i) as usize;
            let sc = self.th[s].cpu as usize;
            self.stop_segment(sc);
            let (hold, lines) = self.lock_op(s);
            self.acquire(l, s, sc, hold, lines);
            self.start_segment(sc);
        } else if let Some(w) = self.locks[l].waiters.pop_front() {
            self.th[t].debt += self.lx.syscall_ns;
            self.wake(w as usize, c as u32);
        }
    }

    /// Puts thread `t` on lock `l`'s sleep queue the way the papers' Solaris libc does
    /// (`enqueue()` in `synch.c`, `thread_queue_fifo` = 4): at the head (LIFO) except every
    /// 16th enqueue, which goes to the tail (FIFO); a release wakes the head. LIFO "is unfair
    /// and can lead to starvation, but it gives better performance for heavily contended
    /// locks": the threads that parked last, and are still warm, get the lock again while
    /// the others sleep on, so waiting is spread unevenly over the threads.
    fn park(l: &mut LockState, t: usize) {
        l.enqueues = l.enqueues.wrapping_add(1);
        if l.enqueues.wrapping_shl(4) == 0 {
            l.waiters.push_back(t as u32);
        } else {
            l.waiters.push_front(t as u32);
        }
    }

    fn lock_op(&self, t: usize) -> (u64, u32) {
        let th = &self.th[t];
        match self.progs[th.prog as usize].ops[th.pc as usize] {
            Op::Lock { hold_ns, lines, .. } | Op::Ticket { hold_ns, lines, .. } => (hold_ns, lines),
            _ => (0, 0),
        }
    }

    /// Thread `t`, holding lock `l`, takes a ticket from the lock's pool of `items` per
    /// pass; whether there was one. The first thread of a later pass refills the pool; a
    /// thread of an earlier pass than the pool's finds it empty.
    fn take_ticket(&mut self, l: usize, t: usize, items: u32) -> bool {
        let k = self.th[t].passes;
        let pool = &mut self.locks[l];
        if pool.pass == NEVER || pool.pass < k {
            pool.pass = k;
            pool.taken = 0;
        }
        if pool.pass == k && pool.taken < items {
            pool.taken += 1;
            true
        } else {
            false
        }
    }

    /// The last thread arrived at barrier `b` (from CPU `c`): everyone else goes on.
    fn release_barrier(&mut self, b: usize, c: usize) {
        let waiters = std::mem::take(&mut self.barriers[b].waiters);
        for &w in &waiters {
            self.wake(w as usize, c as u32);
        }
        self.barriers[b].waiters = waiters;
        self.barriers[b].waiters.clear();
        // Spinners and yielders still on a CPU notice when the line reaches them.
        for sc in 0..self.cpus.len() {
            let s = self.cpus[sc].cur;
            if s == NONE || sc == c {
                continue;
            }
            let waiting = match self.th[s as usize].act {
                Act::BarrierSpin { barrier, .. } | Act::Yield { barrier } => barrier as usize == b,
                _ => false,
            };
            if waiting {
                let at = self.now + self.hw.line_ns(c as u32, sc as u32).ceil() as u64;
                let cpu = &mut self.cpus[sc];
                cpu.version = cpu.version.wrapping_add(1);
                // Re-time the segment end: the spin ends when the release is seen.
                self.q.push(at, EventKind::Cpu, sc as u32, cpu.version);
                self.th[s as usize].act = match self.th[s as usize].act {
                    Act::BarrierSpin { barrier, .. } => Act::BarrierSpin { barrier, until: at },
                    other => other,
                };
                if let Act::Yield { barrier } = self.th[s as usize].act {
                    self.th[s as usize].act = Act::BarrierSpin { barrier, until: at };
                }
            }
        }
    }

    /// Thread `t` on CPU `c` exits.
    fn exit(&mut self, c: usize, t: usize) {
        let now = self.now;
        let th = &mut self.th[t];
        th.st = St::Done;
        th.died = now;
        th.act = Act::Idle;
        self.live -= 1;
        let app = th.app as usize;
        let prog = th.prog as usize;
        self.end_wait(t);
        self.apps[app].done += 1;
        if self.apps[app].done == self.apps[app].threads {
            self.apps[app].finished_at = Some(now);
        }
        let main = self.apps[app].first;
        if self.apps[app].joining && self.apps[app].done + 1 == self.apps[app].threads {
            // The last other thread exited: pthread_join returns in the main thread.
            self.wake(main, c as u32);
        }
        let puts = self.progs[prog].puts.clone();
        for qi in puts {
            let q = &mut self.queues[qi as usize];
            q.producers = q.producers.saturating_sub(1);
            if q.producers == 0 && !q.closed {
                q.closed = true;
                let getters: Vec<u32> = q.getters.drain(..).collect();
                for g in getters {
                    self.wake(g as usize, c as u32);
                }
            }
        }
        self.cpus[c].cur = NONE;
        self.schedule(c);
    }

    /// Sampled counters of every live thread, as `/proc` and the probes would give them.
    pub(crate) fn sample_threads(&self, into: &mut Vec<threadbalance_model::Sample>) {
        use threadbalance_model::{Sample, ThreadState};
        into.clear();
        let now = self.now;
        for th in &self.th {
            if matches!(th.st, St::New | St::Done) {
                continue;
            }
            let mut run = th.run;
            let mut utime = th.utime;
            let mut wait = th.wait;
            if th.st == St::Running {
                let d = now.saturating_sub(self.cpus[th.cpu as usize].seg_start);
                run += d;
                utime += d;
            }
            if th.st == St::Runnable {
                wait += now.saturating_sub(th.runnable_since);
            }
            let lock = th.lock_ns
                + if th.wait_start == NEVER {
                    0
                } else {
                    now.saturating_sub(th.wait_start)
                };
            into.push(Sample {
                key: th.key,
                utime: Nanos(utime),
                stime: Nanos(th.stime),
                run: Nanos(run),
                wait: Nanos(wait),
                timeslices: th.timeslices,
                voluntary: th.voluntary,
                involuntary: th.involuntary,
                last_cpu: self.hw.cpu_id[th.cpu as usize],
                state: match th.st {
                    St::Running | St::Runnable => ThreadState::Running,
                    _ => ThreadState::Sleeping,
                },
                lock: Some(Nanos(lock)),
                migrations: Some(th.migrations),
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
        for (c, cpu) in self.cpus.iter().enumerate() {
            if cpu.cur != NONE {
                let t = cpu.cur as usize;
                seen[t] += 1;
                if self.th[t].st != St::Running || self.th[t].cpu as usize != c {
                    return Err(format!(
                        "CPU {c} runs thread {t} which is not running there"
                    ));
                }
            }
            for &t in &cpu.rq {
                seen[t as usize] += 1;
                if self.th[t as usize].st != St::Runnable || self.th[t as usize].cpu as usize != c {
                    return Err(format!(
                        "thread {t} queued on CPU {c} but not runnable there"
                    ));
                }
            }
        }
        for (t, th) in self.th.iter().enumerate() {
            let expect = u32::from(matches!(th.st, St::Running | St::Runnable));
            if seen[t] != expect {
                return Err(format!("thread {t} ({:?}) is on {} CPUs", th.st, seen[t]));
            }
            if expect == 1 && !th.allowed.contains(self.hw.cpu_id[th.cpu as usize]) {
                return Err(format!(
                    "thread {t} is on CPU {} outside its affinity",
                    th.cpu
                ));
            }
        }
        for (l, lock) in self.locks.iter().enumerate() {
            if lock.holder != NONE {
                let h = lock.holder as usize;
                let inside = matches!(self.th[h].act, Act::Work { lock: x, .. } if x as usize == l);
                if !inside {
                    return Err(format!(
                        "lock {l} held by thread {h} outside its critical section"
                    ));
                }
            }
            let holders = self
                .th
                .iter()
                .filter(|th| matches!(th.act, Act::Work { lock: x, .. } if x as usize == l))
                .count();
            if holders > 1 {
                return Err(format!("lock {l} has {holders} threads inside"));
            }
        }
        let ran: u64 = self.th.iter().map(|t| t.run).sum();
        let busy: u64 = self.cpus.iter().map(|c| c.busy_ns).sum();
        if ran != busy {
            return Err(format!("threads ran {ran} ns but CPUs were busy {busy} ns"));
        }
        Ok(())
    }

    /// Iterations each thread has completed, in thread order.
    pub fn iterations(&self) -> Vec<u64> {
        self.th.iter().map(|t| t.iter).collect()
    }

    /// Every thread's CPU time so far (completed segments), in thread order.
    pub fn thread_run(&self) -> Vec<Nanos> {
        self.th.iter().map(|t| Nanos(t.run)).collect()
    }
}

/// `ns` varied uniformly by ±`spread`.
pub(crate) fn vary(rng: &mut Rng, ns: u64, spread: f32) -> u64 {
    if spread <= 0.0 {
        return ns;
    }
    let f = 1.0 + f64::from(spread) * (2.0 * rng.next_f64() - 1.0);
    (ns as f64 * f).round().max(1.0) as u64
}

fn build_hw(m: &Machine) -> Hw {
    let topo = &m.topo;
    let cpus = topo.cpus();
    let nodes = topo.nodes();
    let node_ix =
        |n: threadbalance_model::NodeId| nodes.iter().position(|&x| x == n).unwrap_or(0) as u32;
    let pkg: Vec<u32> = cpus.iter().map(|c| c.package.0).collect();
    let node: Vec<u32> = cpus.iter().map(|c| node_ix(c.node)).collect();
    let llc: Vec<u32> = cpus.iter().map(|c| c.llc.0).collect();
    let core: Vec<u32> = cpus.iter().map(|c| c.core.0).collect();
    let siblings = (0..cpus.len())
        .map(|i| {
            (0..cpus.len() as u32)
                .filter(|&j| core[j as usize] == core[i])
                .collect()
        })
        .collect();
    let nllc = llc.iter().max().map_or(1, |&x| x as usize + 1);
    let mut llc_cpus = vec![Vec::new(); nllc];
    for (i, &l) in llc.iter().enumerate() {
        llc_cpus[l as usize].push(i as u32);
    }
    let nnode = nodes.len().max(1);
    let dist = |a: usize, b: usize| f64::from(topo.distance(nodes[a], nodes[b]).unwrap_or(10));
    let dmax = (0..nnode)
        .flat_map(|a| (0..nnode).map(move |b| (a, b)))
        .map(|(a, b)| dist(a, b))
        .fold(10.0, f64::max);
    let c = &m.costs;
    let mut node_line = vec![c.local_ns; nnode * nnode];
    let mut node_mem = vec![1.0; nnode * nnode];
    for a in 0..nnode {
        for b in 0..nnode {
            let x = if dmax > 10.0 {
                (dist(a, b) - 10.0) / (dmax - 10.0)
            } else {
                0.0
            };
            node_line[a * nnode + b] = c.local_ns + (c.remote_ns - c.local_ns) * x;
            node_mem[a * nnode + b] = 1.0 + (c.mem_remote_factor - 1.0) * x;
        }
    }
    Hw {
        cpu_id: cpus.iter().map(|c| c.id).collect(),
        npkg: topo.domains(Level::Package).len(),
        nnode,
        pkg,
        node,
        llc,
        core,
        siblings,
        llc_cpus,
        node_line,
        node_mem,
        llc_ns: c.llc_ns,
        local_ns: c.local_ns,
        node_streams: c.node_streams.max(0.1),
        smt_factor: c.smt_factor,
        mlp: c.mlp.max(1.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn park_is_lifo_except_every_sixteenth_enqueue() {
        // Solaris `enqueue()` with thread_queue_fifo = 4: enqueues 1–15 go to the head,
        // the 16th to the tail. Threads 0..16 park in order: the head is the last LIFO one.
        let mut l = LockState::default();
        for t in 0..16 {
            Sim::park(&mut l, t);
        }
        let order: Vec<u32> = l.waiters.iter().copied().collect();
        let mut want: Vec<u32> = (0..15).rev().collect();
        want.push(15);
        assert_eq!(order, want);
    }

    #[test]
    fn ticket_loops_hand_out_every_ticket_once_per_loop() {
        // bodytrack with 4 workers, 2 frames: each loop takes all its tickets, plus one
        // empty take per worker that ends it.
        let m = crate::machine::machine("opteron6272-4x16", None).unwrap();
        let w = crate::workload::Workload {
            name: "bodytrack".into(),
            description: String::new(),
            apps: vec![crate::workload::bodytrack(4, 2)],
        };
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.run_until(Nanos::from_secs(120));
        assert!(sim.finished());
        assert_eq!(sim.locks[0].acquisitions, 2 * 12 * (60 + 4));
        assert_eq!(sim.locks[1].acquisitions, 2 * 5 * (1000 + 4 + 125 + 4));
        // Every worker finished 2 frames × 22 loops.
        assert!(sim.th[1..].iter().all(|t| t.passes == 2 * 22));
        sim.check_invariants().unwrap();
    }

    #[test]
    fn line_moves_within_an_llc_cost_an_llc_hit_and_refills_cost_memory() {
        // Opteron 6272: CPUs 0 and 1 share socket 0's L3; CPU 16 is on socket 1.
        let m = crate::machine::machine("opteron6272-4x16", None).unwrap();
        let hw = build_hw(&m);
        assert_eq!(hw.line_ns(0, 1), 40.0);
        assert_eq!(hw.line_ns(0, 16), 201.0);
        assert_eq!(hw.mem_ns(0, 1), 128.0);
        assert_eq!(hw.mem_ns(0, 16), 201.0);
        assert_eq!(hw.line_ns(3, 3), 0.0);
    }
}
