//! Building a run: the machine's kernel, the workload's applications, their programs,
//! locks, barriers and queues, and their threads, spawned from t = 0, 20 µs apart.

use super::{
    Act, AppState, BarrierState, CpuState, LockState, Prog, QueueState, RunOptions, Sim, St, Stats,
    Thread,
};
use crate::machine::Machine;
use crate::queue::{EventKind, EventQueue};
use crate::state::{
    AppIdx, BarrierIdx, CpuIdx, Kernel, LockIdx, ProgIdx, QueueIdx, Scan, SharedScan, ThreadIdx,
    Userspace, World, build_hw,
};
use crate::workload::{App, Group, Op, Workload};
use threadbalance_model::{CpuSet, Nanos, Pid, ThreadKey, Tid};
use threadbalance_policy::rng::Rng;

impl Sim {
    /// Builds the machine and the workload's threads (created from t = 0, 20 µs apart).
    pub fn new(machine: &Machine, workload: &Workload, opts: &RunOptions) -> Sim {
        let topo = machine.topo.clone();
        let hw = build_hw(machine);
        let kernel = Kernel::new(&topo, &hw, opts.linux.clone(), opts.seed);
        let user = Userspace::new(hw.cpu_id.len(), hw.nnode, opts);
        let last_sample_busy = vec![Nanos::ZERO; hw.npkg];
        let world = World {
            now: Nanos::ZERO,
            q: EventQueue::new(),
            th: Vec::new(),
            hw,
            rng: Rng::new(opts.seed ^ 0x005E_ED0F_51A1),
            stats: Stats::default(),
        };
        let mut sim = Sim {
            world,
            kernel,
            user,
            timeline: Vec::new(),
            sample_every: opts.sample_every.max(Nanos(1)),
            last_sample_busy,
            last_sample_migr: 0,
            last_sample_mem: (0.0, 0.0),
            horizon: opts.horizon,
            topo,
            memory_every: opts.memory_every,
            memory_at: None,
        };
        sim.user.hwc.working_sets(&workload.apps);
        let all = sim.topo.online().clone();
        let mut spawn_at = 0u64;
        for (ai, app) in workload.apps.iter().enumerate() {
            sim.add_app(AppIdx::from(ai), app, &all, &mut spawn_at, opts.seed);
        }
        sim.user.live = sim.world.th.len();
        sim.world.q.push(sim.sample_every, EventKind::Sample, 0, 0);
        sim.autonuma_start();
        sim
    }

    /// Adds application `ai` with its locks, barriers, queues, programs and threads, and
    /// schedules its threads' spawns: from its own start if it is launched later, else
    /// from `spawn_at`, which moves on past its threads.
    fn add_app(&mut self, ai: AppIdx, app: &App, all: &CpuSet, spawn_at: &mut u64, seed: u64) {
        let pid = 1000 * (ai.0 as i32 + 1);
        // A launched-later application spawns from its own start; the others one after
        // another from t = 0.
        let mut app_at = (app.start_ns > 0).then_some(app.start_ns);
        let first = self.world.th.len();
        let (lock_base, barrier_base, queue_base) = self.user.add_sync(app);
        for g in &app.groups {
            let prog = self.user.add_prog(g, queue_base);
            for _ in 0..g.threads {
                let i = self.world.th.len();
                let at = app_at.unwrap_or(*spawn_at);
                let tid = if i == first {
                    pid
                } else {
                    pid + (i - first) as i32
                };
                let key = ThreadKey {
                    pid: Pid(pid),
                    tid: Tid(tid),
                    start_time: 1 + at / 10_000_000,
                };
                let rng = Rng::new(
                    seed.wrapping_mul(0x9E37_79B9)
                        .wrapping_add(i as u64 * 7919 + 1),
                );
                self.world.th.push(new_thread(key, ai, prog, all, rng));
                // A main thread creates the others itself, once its program is done.
                if !(app.main_thread && i > first) {
                    self.world.q.push(Nanos(at), EventKind::Spawn, i as u32, 0);
                }
                match app_at.as_mut() {
                    Some(a) => *a += self.kernel.lx.spawn_gap_ns,
                    None => *spawn_at += self.kernel.lx.spawn_gap_ns,
                }
            }
        }
        self.user.apps.push(AppState {
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
            scan: SharedScan::new(Nanos(app.start_ns)),
        });
    }
}

impl Userspace {
    /// No application yet, `ncpu` idle CPUs, `nnode` nodes' memory idle.
    fn new(ncpu: usize, nnode: usize, opts: &RunOptions) -> Userspace {
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
        Userspace {
            cpus,
            locks: Vec::new(),
            barriers: Vec::new(),
            queues: Vec::new(),
            progs: Vec::new(),
            apps: Vec::new(),
            mem: crate::memory::MemLoad::new(nnode),
            hwc: crate::counters::Counters::default(),
            live: 0,
            wakes: std::collections::HashMap::new(),
            flat_handoffs: opts.flat_handoffs,
            phases: opts.phases.then(crate::phases::PhaseLog::default),
            tool: None,
        }
    }

    /// Adds application `app`'s locks, barriers and queues; where each kind starts.
    fn add_sync(&mut self, app: &App) -> (LockIdx, BarrierIdx, QueueIdx) {
        let lock_base = LockIdx::from(self.locks.len());
        let barrier_base = BarrierIdx::from(self.barriers.len());
        let queue_base = QueueIdx::from(self.queues.len());
        self.locks.extend((0..app.locks()).map(|_| LockState {
            holder: None,
            last_cpu: None,
            pass: None,
            ..LockState::default()
        }));
        self.barriers.extend(
            app.barrier_parties()
                .into_iter()
                .map(|parties| BarrierState {
                    parties,
                    ..BarrierState::default()
                }),
        );
        self.queues.extend(app.queues.iter().map(|q| QueueState {
            capacity: q.capacity,
            lines: q.lines,
            ..QueueState::default()
        }));
        (lock_base, barrier_base, queue_base)
    }

    /// Adds group `g`'s program (its application's queues start at `queue_base`), counting
    /// its threads as producers of the queues it puts to.
    fn add_prog(&mut self, g: &Group, queue_base: QueueIdx) -> ProgIdx {
        let prog = ProgIdx::from(self.progs.len());
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
            self.queues[qi].producers += g.threads;
        }
        self.progs.push(Prog {
            ops: g.ops.clone(),
            iterations: g.iterations,
            puts,
        });
        prog
    }
}

/// A thread not started yet, of application `app` running program `prog`, allowed on
/// `all`, drawing from `rng`.
fn new_thread(key: ThreadKey, app: AppIdx, prog: ProgIdx, all: &CpuSet, rng: Rng) -> Thread {
    Thread {
        key,
        app,
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
        rng,
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
        rounds: 0,
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
        scan: Scan::new(Nanos::ZERO),
    }
}
