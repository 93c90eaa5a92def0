//! What a host reports about threads: cumulative counters per thread at one instant.

use crate::{CpuId, Nanos, NodeId, Pid, Tid};
use serde::Serialize;

/// A thread, identified so that a reused tid is never mistaken for the thread it replaced:
/// the kernel's start time (field 22 of `/proc/<pid>/task/<tid>/stat`, clock ticks since
/// boot) differs between the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct ThreadKey {
    /// The process (thread group) it belongs to.
    pub pid: Pid,
    /// The thread's own id.
    pub tid: Tid,
    /// When it started, in clock ticks since boot (simulated ticks in the simulator).
    pub start_time: u64,
}

impl ThreadKey {
    /// Whether this thread leads its process (its tid is the pid).
    pub fn is_leader(&self) -> bool {
        self.pid.0 == self.tid.0
    }
}

/// The scheduler state of a thread, field 3 of `stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadState {
    /// `R`: running or runnable.
    Running,
    /// `S`: interruptible sleep.
    #[default]
    Sleeping,
    /// `D`: uninterruptible sleep (usually I/O).
    DiskSleep,
    /// `T` or `t`: stopped or traced.
    Stopped,
    /// `Z`: exited, not yet reaped.
    Zombie,
    /// `X` (or `x`): dead.
    Dead,
    /// `I`: idle kernel thread.
    Idle,
    /// Any other letter.
    Other,
}

impl ThreadState {
    /// The state for a `stat` state letter.
    pub fn from_letter(c: char) -> ThreadState {
        match c {
            'R' => ThreadState::Running,
            'S' => ThreadState::Sleeping,
            'D' => ThreadState::DiskSleep,
            'T' | 't' => ThreadState::Stopped,
            'Z' => ThreadState::Zombie,
            'X' | 'x' => ThreadState::Dead,
            'I' => ThreadState::Idle,
            _ => ThreadState::Other,
        }
    }
}

/// Cumulative counters of one thread at one instant. Every field only grows over a thread's
/// life; a [`crate::Window`] turns two of them into rates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct Sample {
    /// Which thread.
    pub key: ThreadKey,
    /// Time in user mode (`stat` field 14, `utime`, converted from clock ticks).
    pub utime: Nanos,
    /// Time in kernel mode (`stat` field 15, `stime`, converted from clock ticks).
    pub stime: Nanos,
    /// Time on a CPU (`schedstat` field 1, nanoseconds). Zero when schedstat is missing.
    pub run: Nanos,
    /// Time runnable but waiting on a run queue (`schedstat` field 2, nanoseconds).
    pub wait: Nanos,
    /// Number of times it was given a CPU (`schedstat` field 3).
    pub timeslices: u64,
    /// Voluntary context switches (`status`, `voluntary_ctxt_switches`): it blocked.
    pub voluntary: u64,
    /// Involuntary context switches (`status`, `nonvoluntary_ctxt_switches`): preempted.
    pub involuntary: u64,
    /// The CPU it last ran on (`stat` field 39).
    pub last_cpu: CpuId,
    /// Its state at the instant of the sample (`stat` field 3).
    pub state: ThreadState,
    /// Time spent waiting for locks (futex waits), when a probe measures it exactly: the BPF
    /// futex probe on Linux, the lock model in the simulator. `None` when not measured.
    pub lock: Option<Nanos>,
    /// Migrations between CPUs, when the host can count them (the simulator; Linux's
    /// `sched` debug file is not read). `None` when not counted.
    pub migrations: Option<u64>,
    /// Hardware counters (instructions, cycles, last-level-cache misses), when the host reads
    /// them: `perf_event_open` on Linux where a PMU exists and is allowed, the memory model
    /// in the simulator. `None` when not measured.
    pub counters: Option<HwCounters>,
    /// Progress events so far, when the host can see the program's progress: barrier
    /// rounds passed in the simulator; on Linux, futex wake-ups the thread issued or was
    /// woken by (the BPF futex probe), one per round of a blocking barrier. `None` when no
    /// progress signal exists.
    pub progress: Option<u64>,
}

/// Cumulative hardware counters of one thread, each already scaled for multiplexing as
/// `perf stat` scales it (`value * time_enabled / time_running`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub struct HwCounters {
    /// Instructions retired (`PERF_COUNT_HW_INSTRUCTIONS`).
    pub instructions: u64,
    /// Core cycles (`PERF_COUNT_HW_CPU_CYCLES`).
    pub cycles: u64,
    /// Last-level-cache read misses (`PERF_COUNT_HW_CACHE_LL`, read, miss).
    pub llc_misses: u64,
}

impl HwCounters {
    /// The counts from `earlier` to `self`; a counter that went down counts as nothing.
    pub fn since(&self, earlier: &HwCounters) -> HwCounters {
        HwCounters {
            instructions: self.instructions.saturating_sub(earlier.instructions),
            cycles: self.cycles.saturating_sub(earlier.cycles),
            llc_misses: self.llc_misses.saturating_sub(earlier.llc_misses),
        }
    }

    /// Instructions per cycle; `None` when no cycle was counted.
    pub fn ipc(&self) -> Option<f64> {
        (self.cycles > 0).then(|| self.instructions as f64 / self.cycles as f64)
    }

    /// Last-level-cache misses per thousand instructions (DINO's memory intensity); `None`
    /// when no instruction was counted.
    pub fn mpki(&self) -> Option<f64> {
        (self.instructions > 0).then(|| self.llc_misses as f64 * 1000.0 / self.instructions as f64)
    }
}

/// Memory a process has on each NUMA node (from `/proc/<pid>/numa_maps`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct ProcessMemory {
    /// The process.
    pub pid: Pid,
    /// Bytes resident on each node, in node order; nodes with none are left out.
    pub bytes_per_node: Vec<(NodeId, u64)>,
}

impl ProcessMemory {
    /// Bytes on `node` (0 if none).
    pub fn on_node(&self, node: NodeId) -> u64 {
        self.bytes_per_node
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(0, |&(_, b)| b)
    }

    /// Bytes on all nodes.
    pub fn total(&self) -> u64 {
        self.bytes_per_node.iter().map(|&(_, b)| b).sum()
    }
}

/// How often one thread handed a lock to, or woke, another: an edge of the who-wakes-whom
/// graph. In a [`Snapshot`] the count is cumulative since the host started counting; in a
/// [`crate::Window`] it is the count within the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Default)]
pub struct WakeEdge {
    /// The thread that released the lock or woke the other.
    pub waker: ThreadKey,
    /// The thread that took the lock or was woken.
    pub woken: ThreadKey,
    /// Hand-offs or wake-ups from `waker` to `woken`.
    pub count: u64,
}

/// The machine's CPU time up to one instant, summed over its CPUs, in any one unit (Linux:
/// clock ticks of `/proc/stat`'s `cpu` line): what the guest ran and what the hypervisor
/// took from it. A thread's run time (`schedstat`) leaves out the time stolen while it
/// ran, so without this the stolen time reads as blocked time; see
/// [`crate::ThreadRates::stolen`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// user + nice + system + irq + softirq: the time the CPUs ran something.
    pub busy: u64,
    /// steal: the time the hypervisor ran something else on them.
    pub steal: u64,
}

/// Every managed thread's counters at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// When it was taken, on the host's monotonic clock.
    pub at: Nanos,
    /// One sample per live thread, sorted by key.
    pub threads: Vec<Sample>,
    /// Per-process memory per node, when it was sampled this time (it is expensive on Linux
    /// and sampled rarely); empty otherwise. Sorted by pid.
    pub memory: Vec<ProcessMemory>,
    /// Wake edges between managed threads (cumulative counts, sorted by waker then woken),
    /// when the host measures them: the futex probe's on Linux, lock hand-offs in the
    /// simulator. Empty otherwise; `wakes_measured` tells an empty graph from none.
    pub wakes: Vec<WakeEdge>,
    /// Whether `wakes` was measured at this instant.
    pub wakes_measured: bool,
    /// The machine's CPU time, when the host measures it (Linux, for a policy that asks:
    /// `Needs::steal`); `None` otherwise, and then no time counts as stolen.
    pub cpu_time: Option<CpuTime>,
    /// Whether the threads' run-queue waits may be reported late: read (for most threads)
    /// from `schedstat`, which adds a queued thread's wait only once it runs again, and
    /// brings a running thread's run time up to date only at ticks. False when they are
    /// exact at `at`: the BPF counters, or the simulator's default.
    pub waits_late: bool,
    /// How the host paces its ticks now ([`crate::pace::Pace`]; `Free` unless it says).
    pub pace: crate::pace::Pace,
}

impl Snapshot {
    /// Clears the snapshot for reuse, keeping its allocations.
    pub fn clear(&mut self) {
        self.at = Nanos::ZERO;
        self.threads.clear();
        self.memory.clear();
        self.wakes.clear();
        self.wakes_measured = false;
        self.cpu_time = None;
        self.waits_late = false;
        self.pace = crate::pace::Pace::Free;
    }

    /// Restores the order invariant after samples were pushed in any order.
    pub fn sort(&mut self) {
        self.threads.sort_unstable_by_key(|s| s.key);
        self.memory.sort_unstable_by_key(|m| m.pid);
        self.wakes.sort_unstable_by_key(|e| (e.waker, e.woken));
    }
}
