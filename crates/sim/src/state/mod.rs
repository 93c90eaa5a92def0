//! The simulator's data and the shape of its parts: the event loop [`Sim`], which owns
//! the shared [`World`] (clock, event queue, threads, hardware, counters), the
//! [`Kernel`] and the programs ([`Userspace`]); the data each keeps (threads and CPUs,
//! the hardware facts, the Linux model's parameters and domains, the programs' locks,
//! barriers and queues, the NUMA scanner's state); and [`Programs`], the interface
//! through which the kernel calls the programs.
//!
//! ```text
//!   Sim (run/: the event loop, the tool's host) ── owns ──┬── World (now, q, th, hw, …)
//!        │ hands each event to                            ├── Kernel (scheduler/)
//!        │                                                └── Userspace (run/)
//!        ▼
//!   Kernel::on_tick / wake / …  (world, programs) ──► Programs (run_program, segments)
//!   Userspace::on_activity_end  (kernel, world)   ──► Kernel (block, wake, yield_cpu, …)
//! ```
//!
//! Neither part holds the other: each method takes the [`World`] and the other part as
//! arguments, so the kernel reaches the programs only through [`Programs`] (and reads
//! no lock, barrier or queue), and the programs never touch a run queue, since
//! [`KernelCpu`] is the kernel's. `autonuma.rs` (NUMA balancing) is the loop's
//! (`impl Sim`): pages follow threads, whichever part moved them.
//!
//! Who owns what:
//!
//! - [`Kernel`]: its parameters ([`Linux`]), the domains, `SIS_UTIL`'s depths, the nohz
//!   balancer and per CPU a [`KernelCpu`] with its **run queue** (`cur`, the running
//!   thread, and `rq`, the queued ones), `min_vruntime`, tick, idle statistics and balance
//!   intervals. It also writes a thread's kernel fields (`st`, `cpu`, `vruntime`, `lag`,
//!   `load_avg`, wakee flips, `recent_cpu`).
//! - [`Userspace`]: the locks, barriers, queues, applications and programs, and per CPU
//!   a [`CpuState`]: the running thread's segment (activity, speed, memory stream) and the
//!   CPU's busy time. It learns which thread a CPU runs from the kernel (`running`) and
//!   asks it to block, wake, yield, start a new thread or retire an exited one (`block`,
//!   `wake`, `yield_cpu`, `wake_up_new`, `exited`).
//! - the NUMA part: the scanners' state ([`Scan`], [`SharedScan`]) and the pages' homes.

mod baseline;
mod data;
mod hw;
mod idx;
mod kernel;
mod numa;

pub use baseline::Baseline;
pub use data::TimelinePoint;
pub(crate) use data::{
    Act, AppState, BarrierState, CpuState, LockState, Prog, QueueState, St, Stats, Thread,
    ToolThread,
};
pub(crate) use hw::{Hw, build_hw};
pub(crate) use idx::{AppIdx, BarrierIdx, CpuIdx, LockIdx, ProgIdx, QueueIdx, ThreadIdx};
pub use kernel::Linux;
pub(crate) use kernel::{Kernel, KernelCpu, NewidleStats, QueueView, SdLevel, SeenQueue};
pub(crate) use numa::{SCAN_MIN_NS, Scan, SharedScan};

use crate::queue::EventQueue;
use threadbalance_model::{Nanos, Topology};
use threadbalance_policy::rng::Rng;

/// What the kernel ([`Kernel`]'s methods, `scheduler/`) asks of the programs
/// ([`Userspace`]'s, `run/`): the only calls that go that way. The programs call the
/// kernel's methods directly (`running`, `block`, `wake`, `yield_cpu`, `wake_up_new`,
/// `exited`, `fork_cpu`), handing themselves over as the `programs` the kernel may call
/// back.
pub(crate) trait Programs {
    /// Runs thread `t`'s program on CPU `c`, which has just given it the CPU and has no
    /// activity for it, until something takes time, blocks or exits.
    fn run_program(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx, t: ThreadIdx);
    /// Starts (or restarts) the running thread's activity on CPU `c` now.
    fn begin_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx);
    /// Stops the running thread's activity on CPU `c` now and accounts its time.
    fn end_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx);
    /// Whether thread `t`, spinning or yielding, no longer needs to wait: its mutex is
    /// free (it then leaves the spinners) or its barrier opened.
    fn wait_over(&mut self, world: &World, t: ThreadIdx) -> bool;
    /// Whether thread `t` is in a yield loop at a barrier that has not opened yet.
    fn yield_waiting(&self, world: &World, t: ThreadIdx) -> bool;
    /// Cache lines thread `t`'s working set spans (refetched after a migration).
    fn footprint_lines(&self, world: &World, t: ThreadIdx) -> f64;
    /// When the running thread's segment on CPU `c` began (its run time since is not
    /// accounted yet).
    fn segment_start(&self, c: CpuIdx) -> Nanos;
    /// Whether CPU `c`'s thread is mid-operation (its program is being advanced): a
    /// wake-up or a tick must not preempt it now.
    fn mid_operation(&self, c: CpuIdx) -> bool;
    /// How many applications there are (each one task group, `group_load.rs`).
    fn apps(&self) -> usize;
}

/// What the kernel and the programs both act on: the clock, the event queue, the threads
/// (each with its kernel fields and its program's), the hardware, the random stream they
/// share and the run's counters. The event loop ([`Sim`]) owns it and lends it to each.
#[derive(Debug)]
pub(crate) struct World {
    pub now: Nanos,
    pub q: EventQueue,
    pub th: Vec<Thread>,
    pub hw: Hw,
    pub rng: Rng,
    pub stats: Stats,
}

/// The programs: the applications, their threads' programs, locks, barriers and queues,
/// per CPU the running thread's segment ([`CpuState`]), the memory streams in flight and
/// the tool's own thread. Its methods (in `run/`) interpret ops and account segments,
/// and ask the kernel to block, wake, yield, start or retire a thread.
#[derive(Debug)]
pub(crate) struct Userspace {
    pub cpus: Vec<CpuState>,
    pub locks: Vec<LockState>,
    pub barriers: Vec<BarrierState>,
    pub queues: Vec<QueueState>,
    pub progs: Vec<Prog>,
    pub apps: Vec<AppState>,
    /// Memory-bound streams in flight per node and link ([`crate::memory`]).
    pub mem: crate::memory::MemLoad,
    /// Each thread's hardware counters ([`crate::counters`]).
    pub hwc: crate::counters::Counters,
    /// Threads not exited yet.
    pub live: usize,
    /// Lock hand-offs between two different threads, `(previous holder, next holder)` →
    /// count: the who-wakes-whom graph `SimHost` reports.
    pub wakes: std::collections::HashMap<(ThreadIdx, ThreadIdx), u64>,
    /// Lock hand-offs all cost the in-LLC line latency (`RunOptions::flat_handoffs`).
    pub flat_handoffs: bool,
    /// When each thread reached each barrier (`RunOptions::phases`; `None`: not logged).
    pub phases: Option<crate::phases::PhaseLog>,
    /// The tool's own thread, when its CPU time is taken from the machine
    /// (`RunOptions::tool_cpu`); `None`: the tool costs the machine nothing.
    pub tool: Option<ToolThread>,
}

/// A machine running a workload: the event loop, which owns the shared `World`, the
/// `Kernel` and the programs (`Userspace`), and hands each event to the one it
/// concerns; plus what the report and the host read (the timeline, memory samples).
#[derive(Debug)]
pub struct Sim {
    pub(crate) world: World,
    pub(crate) kernel: Kernel,
    pub(crate) user: Userspace,
    pub(crate) timeline: Vec<TimelinePoint>,
    pub(crate) sample_every: Nanos,
    pub(crate) last_sample_busy: Vec<Nanos>,
    pub(crate) last_sample_migr: u64,
    /// `(mem_total, mem_remote)` at the last sample.
    pub(crate) last_sample_mem: (f64, f64),
    pub(crate) horizon: Nanos,
    pub(crate) topo: Topology,
    /// Period of per-process memory samples, ns (0: every sample).
    pub(crate) memory_every: Nanos,
    /// When `SimHost` last sampled memory (`None`: not yet).
    pub(crate) memory_at: Option<Nanos>,
}
