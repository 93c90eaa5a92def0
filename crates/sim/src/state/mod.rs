//! The state every part of the simulator reads, and nothing else: the [`Sim`] struct,
//! threads and CPUs, the hardware facts, the Linux model's parameters and domains, the
//! programs' locks, barriers and queues, and the NUMA scanner's state.
//!
//! The parts that act on it import this module and not each other; the kernel asks the
//! programs part for what it needs through [`Programs`]:
//!
//! ```text
//!   run/ (programs, event loop) ──► scheduler/ (kernel) ──► state/
//!        │                                                    ▲
//!        └──► autonuma (NUMA balancing) ──────────────────────┘
//! ```
//!
//! Each part adds its own `impl Sim` block: `run/` executes programs and drives events,
//! `scheduler/` places, switches and balances threads, `autonuma.rs` moves pages.
//!
//! Who owns what:
//!
//! - the kernel part owns [`Kernel`] (`Sim::kernel`): the domains, `SIS_UTIL`'s depths, the
//!   nohz balancer and per CPU a [`KernelCpu`] with its **run queue** (`cur`, the running
//!   thread, and `rq`, the queued ones), `min_vruntime`, tick, idle statistics and balance
//!   intervals; only `scheduler/` changes them. It also writes a thread's kernel fields
//!   (`st`, `cpu`, `vruntime`, `lag`, `load_avg`, wakee flips, `recent_cpu`).
//! - the programs part owns the locks, barriers, queues, applications and programs, and
//!   per CPU a [`CpuState`]: the running thread's segment (activity, speed, memory
//!   stream) and the CPU's busy time. It learns which thread a CPU runs from the kernel
//!   (`running`) and asks it to block, wake, yield, start a new thread or retire an
//!   exited one (`block`, `wake`, `yield_cpu`, `wake_up_new`, `exited`), never touching a
//!   run queue.
//! - the NUMA part owns the scanners' state ([`Scan`], [`SharedScan`]) and the pages'
//!   homes.

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

/// What the kernel part (`scheduler/`) asks of the programs part (`run/`): the only calls
/// that go that way. The programs part calls the kernel's `impl Sim` methods directly
/// (`running`, `block`, `wake`, `yield_cpu`, `wake_up_new`, `exited`, `set_affinity`,
/// `fork_cpu`).
pub(crate) trait Programs {
    /// Runs thread `t`'s program on CPU `c`, which has just given it the CPU and has no
    /// activity for it, until something takes time, blocks or exits.
    fn run_program(&mut self, c: CpuIdx, t: ThreadIdx);
    /// Starts (or restarts) the running thread's activity on CPU `c` now.
    fn begin_segment(&mut self, c: CpuIdx);
    /// Stops the running thread's activity on CPU `c` now and accounts its time.
    fn end_segment(&mut self, c: CpuIdx);
    /// Whether thread `t`, spinning or yielding, no longer needs to wait: its mutex is
    /// free (it then leaves the spinners) or its barrier opened.
    fn wait_over(&mut self, t: ThreadIdx) -> bool;
    /// Whether thread `t` is in a yield loop at a barrier that has not opened yet.
    fn yield_waiting(&self, t: ThreadIdx) -> bool;
    /// Cache lines thread `t`'s working set spans (refetched after a migration).
    fn footprint_lines(&self, t: ThreadIdx) -> f64;
}

/// A machine running a workload.
#[derive(Debug)]
pub struct Sim {
    pub(crate) now: Nanos,
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
    /// The kernel part's own state: domains, SIS_UTIL depths, the nohz balancer.
    pub(crate) kernel: Kernel,
    pub(crate) rng: Rng,
    pub(crate) stats: Stats,
    /// Memory-bound streams in flight per node and link ([`crate::memory`]).
    pub(crate) mem: crate::memory::MemLoad,
    /// Each thread's hardware counters ([`crate::counters`]).
    pub(crate) hwc: crate::counters::Counters,
    pub(crate) timeline: Vec<TimelinePoint>,
    pub(crate) sample_every: Nanos,
    pub(crate) last_sample_busy: Vec<Nanos>,
    pub(crate) last_sample_migr: u64,
    /// `(mem_total, mem_remote)` at the last sample.
    pub(crate) last_sample_mem: (f64, f64),
    pub(crate) live: usize,
    pub(crate) horizon: Nanos,
    pub(crate) topo: Topology,
    /// Period of per-process memory samples, ns (0: every sample).
    pub(crate) memory_every: Nanos,
    /// When `SimHost` last sampled memory (`None`: not yet).
    pub(crate) memory_at: Option<Nanos>,
    /// Lock hand-offs between two different threads, `(previous holder, next holder)` →
    /// count: the who-wakes-whom graph `SimHost` reports.
    pub(crate) wakes: std::collections::HashMap<(ThreadIdx, ThreadIdx), u64>,
    /// Lock hand-offs all cost the in-LLC line latency (`RunOptions::flat_handoffs`).
    pub(crate) flat_handoffs: bool,
    /// When each thread reached each barrier (`RunOptions::phases`; `None`: not logged).
    pub(crate) phases: Option<crate::phases::PhaseLog>,
    /// The tool's own thread, when its CPU time is taken from the machine
    /// (`RunOptions::tool_cpu`); `None`: the tool costs the machine nothing.
    pub(crate) tool: Option<ToolThread>,
}

#[cfg(test)]
mod tests {
    /// The non-test code of a source file, comments and docs left out.
    fn code(src: &str) -> String {
        let body = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
        body.lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn kernel_and_numa_parts_import_state_not_the_programs_part() {
        // The shape the module docs teach: `scheduler/` and `autonuma.rs` reach the
        // programs part only through `Programs`, and never read its locks, barriers,
        // queues or applications.
        let kernel = [
            ("scheduler/mod.rs", include_str!("../scheduler/mod.rs")),
            ("scheduler/wake.rs", include_str!("../scheduler/wake.rs")),
            (
                "scheduler/solaris.rs",
                include_str!("../scheduler/solaris.rs"),
            ),
            (
                "scheduler/balance.rs",
                include_str!("../scheduler/balance.rs"),
            ),
            (
                "scheduler/group_load.rs",
                include_str!("../scheduler/group_load.rs"),
            ),
        ];
        for (name, src) in kernel {
            let code = code(src);
            for banned in ["crate::run", ".locks[", ".barriers[", ".queues[", ".apps["] {
                assert!(!code.contains(banned), "{name} uses {banned}");
            }
        }
        // The run queues are the kernel's: the programs part and the host read the running
        // thread through `Sim::running` and change no queue.
        for (name, src) in [
            ("run/mod.rs", include_str!("../run/mod.rs")),
            ("run/ops.rs", include_str!("../run/ops.rs")),
            ("run/segment.rs", include_str!("../run/segment.rs")),
            ("host.rs", include_str!("../host.rs")),
            ("report.rs", include_str!("../report.rs")),
        ] {
            let code = code(src);
            for banned in ["kernel.cpus", ".rq", ".cur", "min_vruntime ="] {
                assert!(!code.contains(banned), "{name} uses {banned}");
            }
        }
        let numa = code(include_str!("../autonuma.rs"));
        assert!(!numa.contains("crate::run"), "autonuma.rs imports run/");
        for (name, src) in [
            ("state/baseline.rs", include_str!("baseline.rs")),
            ("state/data.rs", include_str!("data.rs")),
            ("state/hw.rs", include_str!("hw.rs")),
            ("state/idx.rs", include_str!("idx.rs")),
            ("state/kernel.rs", include_str!("kernel.rs")),
            ("state/numa.rs", include_str!("numa.rs")),
        ] {
            for banned in ["crate::run", "crate::scheduler", "crate::autonuma"] {
                assert!(!code(src).contains(banned), "{name} uses {banned}");
            }
        }
    }
}
