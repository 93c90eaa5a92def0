//! The simulation's plain data: threads, CPUs, locks, barriers, queues, applications,
//! programs and counters.

#[cfg(doc)]
use super::Userspace;
use crate::workload::Op;
use threadbalance_model::{CpuSet, Nanos, ThreadKey};
use threadbalance_policy::rng::Rng;

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
    /// Work of `left` ns at full speed; inside lock `lock`'s critical section if any.
    Work {
        left: f64,
        lock: Option<super::LockIdx>,
        mem: f32,
    },
    /// Spinning on held mutex `lock` until `until`, then sleeping.
    Spin { lock: super::LockIdx, until: Nanos },
    /// Spinning at barrier `barrier` until `until`, then sleeping (`None`: a pure spin,
    /// never sleeping).
    BarrierSpin {
        barrier: super::BarrierIdx,
        until: Option<Nanos>,
    },
    /// `sched_yield` loop at barrier `barrier`.
    Yield { barrier: super::BarrierIdx },
}

/// One simulated thread.
#[derive(Debug, Clone)]
pub(crate) struct Thread {
    pub key: ThreadKey,
    pub app: super::AppIdx,
    pub prog: super::ProgIdx,
    pub pc: u32,
    pub iter: u64,
    pub st: St,
    /// CPU it runs or waits on, or last ran on.
    pub cpu: super::CpuIdx,
    pub allowed: CpuSet,
    pub original: CpuSet,
    pub vruntime: Nanos,
    /// vruntime − the CPU's min_vruntime when it left a queue (EEVDF keeps lag).
    pub lag: i64,
    pub act: Act,
    /// System work to pay before the activity (context switch, cache refill, wake-up).
    pub debt: Nanos,
    /// Item data to fetch in the next compute op (ns).
    pub carry: f64,
    /// The node of its own pages, once first touched (`None`: not yet).
    pub home: Option<u32>,
    pub rng: Rng,
    // Accounting.
    pub run: Nanos,
    pub wait: Nanos,
    pub utime: Nanos,
    pub stime: Nanos,
    /// Every wait for a lock, barrier, queue or join, spinning included (ns).
    pub lock_ns: Nanos,
    /// Solaris `LCK`: time asleep on a user-level lock or condition variable (a mutex's
    /// sleep queue, a barrier's or queue's condition variable), ns; not spinning, not
    /// `pthread_join` (Solaris joins in the kernel's `lwp_wait`: `SLP`), not timed sleeps.
    pub lck_ns: Nanos,
    /// When its current `LCK` sleep began (`None`: not asleep on a lock).
    pub lck_start: Option<Nanos>,
    pub timeslices: u64,
    pub voluntary: u64,
    pub involuntary: u64,
    pub migrations: u64,
    /// Barrier rounds it has passed: its progress (`Sample::progress`).
    pub rounds: u64,
    pub born: Nanos,
    pub died: Nanos,
    pub runnable_since: Nanos,
    /// When its current wait for a lock, barrier or queue began (`None`: not waiting).
    pub wait_start: Option<Nanos>,
    pub picked_at: Nanos,
    /// Its own time slice, set with `sched_setattr` (`None`: the kernel's default).
    pub slice: Option<Nanos>,
    pub last_ran: Nanos,
    /// Waiting at a barrier: the barrier's generation when it arrived (`None`: not waiting).
    pub bar_gen: Option<u64>,
    /// Inside a ticket loop: the ticket op's index, and the index just past its body
    /// (`None`: not in a loop).
    pub ticket_loop: Option<(u32, u32)>,
    /// Ticket loops finished (pool found empty): the pass whose tickets it takes next.
    pub passes: u64,
    /// The thread it last woke (`p->last_wakee`).
    pub last_wakee: Option<super::ThreadIdx>,
    pub wakee_flips: u32,
    pub flip_decay: Nanos,
    /// PELT-like runnable average (0–1 task) as of `load_at`: the kernel's `task_h_load`
    /// for a nice-0 thread.
    pub load_avg: f64,
    /// When `load_avg` was last brought up to date, ns.
    pub load_at: Nanos,
    /// The CPU it left the last time its wake-up looked past `prev`
    /// (`p->recent_used_cpu`).
    pub recent_cpu: Option<super::CpuIdx>,
    /// Automatic NUMA balancing's scanner.
    pub scan: super::Scan,
}

/// One CPU as the programs part sees it: the running thread's current segment (its
/// activity, speed and memory stream) and the CPU's busy time. Which thread runs and
/// which wait are the kernel's ([`super::KernelCpu`]).
#[derive(Debug, Clone)]
pub(crate) struct CpuState {
    pub version: u32,
    pub seg_start: Nanos,
    pub seg_factor: f64,
    pub seg_stream: f64,
    pub seg_node: u32,
    /// The node whose pages the segment's memory-bound work uses.
    pub seg_home: u32,
    pub seg_debt: Nanos,
    pub busy_ns: Nanos,
    /// Its thread's program is being advanced: wake-ups must not preempt it now.
    pub in_advance: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct LockState {
    /// The thread inside its critical section, if any.
    pub holder: Option<super::ThreadIdx>,
    /// The CPU that released it last (`None`: never released).
    pub last_cpu: Option<super::CpuIdx>,
    pub spinners: Vec<super::ThreadIdx>,
    /// Sleepers, the next to wake first (see [`Userspace::park`]).
    pub waiters: std::collections::VecDeque<super::ThreadIdx>,
    /// Enqueues so far, for the queue's occasional FIFO turn (`qh_qcnt`).
    pub enqueues: u8,
    pub acquisitions: u64,
    /// The thread that held it last (`None`: never held).
    pub last_holder: Option<super::ThreadIdx>,
    pub handoffs: u64,
    pub cross: u64,
    /// Its ticket pool (`Op::Ticket`): the pass it was last filled for (`None`: not
    /// yet) and the tickets taken since.
    pub pass: Option<u64>,
    pub taken: u32,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct BarrierState {
    pub parties: usize,
    pub count: usize,
    pub generation: u64,
    pub waiters: Vec<super::ThreadIdx>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct QueueState {
    pub capacity: usize,
    pub lines: u32,
    /// CPU of the producer of each item.
    pub items: std::collections::VecDeque<super::CpuIdx>,
    pub getters: std::collections::VecDeque<super::ThreadIdx>,
    pub putters: std::collections::VecDeque<super::ThreadIdx>,
    pub producers: usize,
    pub closed: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct AppState {
    pub name: String,
    /// Its first (leader or main) thread; the others follow it in `World::th`.
    pub first: super::ThreadIdx,
    pub threads: usize,
    pub done: usize,
    pub finished_at: Option<Nanos>,
    /// Its first lock, barrier and queue; its others follow them.
    pub lock_base: super::LockIdx,
    pub barrier_base: super::BarrierIdx,
    pub queue_base: super::QueueIdx,
    pub footprint_lines: f64,
    pub spin_ns: u64,
    pub shared_data: bool,
    /// Resident bytes of the shared data (leader first touch) or of each thread's pages.
    pub memory_bytes: u64,
    /// The first thread is a main thread that creates the others after its program.
    pub main_thread: bool,
    /// Automatic NUMA balancing's scanner of the shared data.
    pub scan: super::SharedScan,
    /// The main thread has created the others and sleeps in `pthread_join`.
    pub joining: bool,
}

impl AppState {
    /// Its threads' positions in `World::th`, to slice it.
    pub fn members(&self) -> std::ops::Range<usize> {
        self.first.ix()..self.first.ix() + self.threads
    }

    /// Its lock `k` (the `lock` of its ops).
    pub fn lock(&self, k: u16) -> super::LockIdx {
        super::LockIdx(self.lock_base.0 + u32::from(k))
    }

    /// Its barrier `k`.
    pub fn barrier(&self, k: u16) -> super::BarrierIdx {
        super::BarrierIdx(self.barrier_base.0 + u32::from(k))
    }

    /// Its queue `k`.
    pub fn queue(&self, k: u16) -> super::QueueIdx {
        super::QueueIdx(self.queue_base.0 + u32::from(k))
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Prog {
    pub ops: Vec<Op>,
    pub iterations: Option<u64>,
    /// Queues this program puts into (it is a producer of each).
    pub puts: Vec<super::QueueIdx>,
}

/// The tool's own thread (`RunOptions::tool_cpu`): a thread of the machine that the policy
/// does not see, woken at each tick to run for what the tick and its moves cost.
#[derive(Debug, Clone)]
pub(crate) struct ToolThread {
    /// Its place in `World::th` (the last one) and its application (the last one).
    pub thread: super::ThreadIdx,
    pub app: super::AppIdx,
    /// CPU time charged and not yet run.
    pub owed: Nanos,
    /// CPU time charged over the run.
    pub charged: Nanos,
}

/// Counters only a simulator can see.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub events: u64,
    pub migrations: u64,
    pub cross_migrations: u64,
    pub mem_total: f64,
    pub mem_remote: f64,
    /// 4 KiB pages moved by automatic NUMA balancing.
    pub page_migrations: u64,
    /// Sleeps that stayed queued, delayed (`Linux::delay_dequeue`).
    pub delayed_dequeues: u64,
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
    /// Share of the period's memory-bound work done on another node's pages (0 when none
    /// was done).
    pub remote_frac: f64,
}
