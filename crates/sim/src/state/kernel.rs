//! The Linux model's parameters and its scheduling domains: the data of the kernel part
//! ([`crate::scheduler`]), which builds the domains and does the scheduling.

use super::{Baseline, CpuIdx};
use serde::Serialize;
use threadbalance_model::Nanos;

/// Parameters of the Linux model (defaults: Linux 6.x, `HZ=250`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Linux {
    /// Which dispatcher places and balances threads: the Linux model, or a Solaris-like
    /// one ([`Baseline`]). The other parameters apply to both.
    pub baseline: Baseline,
    /// Scheduler ticks per second.
    pub hz: u32,
    /// `sysctl_sched_base_slice` before scaling by `1 + log2(min(ncpu, 8))`, ns.
    pub base_slice_ns: u64,
    /// `sysctl_sched_migration_cost`: a task that ran this recently is cache-hot, ns.
    pub migration_cost_ns: u64,
    /// Balance interval multiplier for busy CPUs (`busy_factor`).
    pub busy_factor: u64,
    /// Cost of a context switch, charged as system time, ns.
    pub switch_ns: u64,
    /// Cost of a futex or yield system call, ns.
    pub syscall_ns: u64,
    /// Extra delay for waking an idle CPU (IPI, idle exit), ns.
    pub wake_idle_ns: u64,
    /// Time between two thread creations, ns.
    pub spawn_gap_ns: u64,
    /// Kernel threads (kworkers, RCU, timers) that briefly preempt a busy CPU, per second.
    /// They break the lock-step of perfectly periodic ticks, as on a real machine.
    pub kernel_noise_per_s: f64,
    /// How long each such kernel thread runs, ns: time the CPU's thread does not get
    /// (kworkers, RCU callbacks, timer softirqs, a hypervisor's exits). With 20 a second
    /// of 0.5 ms, 1 % of every busy CPU.
    pub kernel_noise_ns: u64,
    /// `SIS_UTIL`: the idle-CPU scan of a wake-up shrinks as its LLC gets busy and stops
    /// at about 85 % utilization (on by default since Linux 6.0).
    pub sis_util: bool,
    /// Automatic NUMA balancing moves pages after their threads ([`crate::autonuma`]).
    pub numa_balancing: bool,
    /// Cost of migrating one 4 KiB page (hinting fault, copy, remap), ns.
    pub page_migrate_ns: u64,
    /// `SimHost` reports `schedstat` as the kernel keeps it rather than exactly: a running
    /// thread's run time (`sum_exec_runtime`) only up to its CPU's last tick (`update_curr`
    /// runs at ticks and switches), a queued thread's run-queue wait (`run_delay`) only
    /// once it runs again (`sched_info_arrive`) or leaves the queue. Off by default: it
    /// reproduces the direction of the first `speed` design's loss at N = 2M on 16 cores
    /// (with `hz` 1000) but also erases most of its measured gain on 2 cores (see the
    /// simulator's README, "Calibration at 16 cores"). On: what a live `run` reads from
    /// `/proc`. Off (exact at each read): what it reads from the BPF counters.
    pub schedstat_at_ticks: bool,
    /// Group scheduling with autogroup (on in distribution kernels): each application is
    /// one task group, whose weight is split over its runnable threads, so periodic
    /// balancing between busy CPUs weighs a thread at `1024 / N` and kernel threads at
    /// their full weight (`scheduler::group_load`).
    pub autogroup: bool,
    /// EEVDF `sched_yield` forfeits the rest of the yielder's slice: an eligible yielder's
    /// vruntime moves to its deadline (`yield_task_fair`, Linux 6.6+), so it queues behind
    /// its peers instead of being picked again at the next switch (`scheduler::forfeit`).
    pub yield_forfeit: bool,
    /// New-idle balancing runs at each domain with a probability that follows its success
    /// rate there ("Proportional newidle balance", `NI_RANDOM`, Linux 6.18.5+;
    /// `scheduler::newidle`).
    pub newidle_random: bool,
    /// `DELAY_DEQUEUE` (Linux 6.12+): a thread that blocks while it is not eligible (it
    /// ran more than its CPU's average) stays queued, "delayed", until it would be picked
    /// or is woken; a wake-up requeues it where it is, without wake-up placement, and
    /// while delayed it counts in its CPU's `nr_running` but cannot be pulled
    /// (`scheduler::delayed`).
    pub delay_dequeue: bool,
    /// New-idle balancing is gated by the root domain's overload flag as the kernel keeps
    /// it (`rd->overloaded`: set by `add_nr_running` when a queue reaches two threads,
    /// refreshed only by balancing passes at the top level), rather than by whether a CPU
    /// has two threads at this instant (`scheduler::overload`).
    pub sticky_overload: bool,
}

impl Default for Linux {
    fn default() -> Linux {
        Linux {
            baseline: Baseline::Linux,
            hz: 250,
            base_slice_ns: 750_000,
            migration_cost_ns: 500_000,
            busy_factor: 16,
            switch_ns: 1_500,
            syscall_ns: 500,
            wake_idle_ns: 4_000,
            spawn_gap_ns: 20_000,
            kernel_noise_per_s: 20.0,
            kernel_noise_ns: 500_000,
            sis_util: true,
            numa_balancing: true,
            page_migrate_ns: 2_000,
            schedstat_at_ticks: false,
            autogroup: true,
            yield_forfeit: false,
            newidle_random: true,
            delay_dequeue: false,
            sticky_overload: false,
        }
    }
}

impl Linux {
    pub(crate) fn tick_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }
}

/// One level of scheduling domains.
#[derive(Debug, Clone)]
pub(crate) struct SdLevel {
    /// Domain index of each CPU.
    pub dom_of: Vec<u32>,
    /// For each domain, its groups, each a list of CPUs.
    pub groups: Vec<Vec<Vec<CpuIdx>>>,
    pub numa: bool,
    pub imbalance_pct: u64,
    pub cache_nice_tries: u32,
    /// The shortest and longest balance intervals (`sd->min_interval`, `max_interval`).
    pub min_interval: Nanos,
    pub max_interval: Nanos,
    pub imb_numa_nr: usize,
    pub prefer_sibling: bool,
}

/// The kernel part's own state: what only [`crate::scheduler`] reads and writes.
#[derive(Debug, Clone)]
pub(crate) struct Kernel {
    /// The model's parameters.
    pub lx: Linux,
    /// Scheduling domains, lowest level first.
    pub levels: Vec<SdLevel>,
    /// Per LLC, when `SIS_UTIL`'s scan depth was last computed and the depth.
    pub llc_scan: Vec<Option<(Nanos, usize)>>,
    /// When idle CPUs may next be kicked into balancing (`nohz.next_balance`).
    pub nohz_next: Nanos,
    /// The root domain's overload flag (`rd->overloaded`): set when a CPU's queue
    /// reaches two threads, and set or cleared by each balancing pass at the top level
    /// from what it sees (`Linux::sticky_overload`).
    pub overloaded: bool,
    /// Per CPU, what only the kernel keeps about it.
    pub cpus: Vec<KernelCpu>,
    /// The run queues as the periodic passes begun at one instant read them (see
    /// "Passes at one tick" in `scheduler/balance.rs`), and that instant.
    pub seen: Option<(Nanos, Vec<SeenQueue>)>,
    /// Draws the order in which equally loaded groups rank as busiest at a tick (see
    /// "Passes at one tick"); a stream of its own, so the rest of the run draws as before.
    pub tie: threadbalance_policy::rng::Rng,
}

/// One CPU's queue as a periodic balancing pass read it: the running thread, the queued
/// ones and the delayed sleepers.
#[derive(Debug, Clone, Default)]
pub(crate) struct SeenQueue {
    pub cur: Option<super::ThreadIdx>,
    pub rq: Vec<super::ThreadIdx>,
    pub delayed: Vec<super::ThreadIdx>,
    /// Where its load stands among equal loads (the PELT jitter the model does not keep):
    /// the higher ranks busier.
    pub rank: u64,
}

/// What the kernel keeps about one CPU: its run queue (the running thread and the
/// queued ones), the queue's `min_vruntime`, its tick, idle statistics and balancing.
/// The programs part learns which thread runs through the kernel's `running`, and never
/// changes a run queue itself.
#[derive(Debug, Clone)]
pub(crate) struct KernelCpu {
    /// The thread it runs, if any (`rq->curr`).
    pub cur: Option<super::ThreadIdx>,
    /// The threads queued on it, waiting for it (in the order they were queued).
    pub rq: Vec<super::ThreadIdx>,
    /// Threads asleep but still queued on it (`sched_delayed`, `Linux::delay_dequeue`).
    pub delayed: Vec<super::ThreadIdx>,
    /// The queue's `min_vruntime`.
    pub min_vruntime: Nanos,
    /// A tick is pending (idle CPUs stop ticking: nohz).
    pub tick_armed: bool,
    /// When it went idle (`None`: it runs a thread).
    pub idle_since: Option<Nanos>,
    /// `rq->avg_idle`.
    pub avg_idle: Nanos,
    /// Per domain level: when it last balanced, its balance interval and its failed
    /// attempts since the last success (`nr_balance_failed`).
    pub last_balance: Vec<Nanos>,
    pub interval: Vec<Nanos>,
    pub failed: Vec<u32>,
    /// Per domain level: new-idle balancing's success statistics (`NI_RANDOM`).
    pub newidle: Vec<NewidleStats>,
    /// Load kernel threads left on it (PELT, decayed from `noise_at`).
    pub noise_load: f64,
    pub noise_at: Nanos,
}

/// A domain's record of its new-idle balancing (`sd->newidle_call`, `newidle_success`,
/// `newidle_ratio`): calls and successes over a sliding window of about 1024 calls, the
/// successes weighted back up for the calls the dice skipped, and the success rate in
/// 1024ths that the dice use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NewidleStats {
    pub call: u32,
    pub success: u32,
    pub ratio: u32,
}

impl Default for NewidleStats {
    /// The kernel's start (`sd_init`): a 50 % success rate.
    fn default() -> NewidleStats {
        NewidleStats {
            call: 512,
            success: 256,
            ratio: 512,
        }
    }
}

/// A CPU's run queue, read: as it is ([`KernelCpu::view`]) or as a balancing pass saw it
/// ([`SeenQueue::view`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueView<'a> {
    pub cur: Option<super::ThreadIdx>,
    pub rq: &'a [super::ThreadIdx],
    pub delayed: &'a [super::ThreadIdx],
}

impl<'a> QueueView<'a> {
    /// Threads on the queue, the running one and delayed sleepers included
    /// (`rq->nr_running`).
    pub fn nr(&self) -> usize {
        self.runnable() + self.delayed.len()
    }

    /// Runnable threads, the running one included, delayed sleepers not
    /// (`cfs.h_nr_runnable`).
    pub fn runnable(&self) -> usize {
        self.rq.len() + usize::from(self.cur.is_some())
    }

    /// Neither running nor queued anything.
    pub fn idle(&self) -> bool {
        self.cur.is_none() && self.rq.is_empty() && self.delayed.is_empty()
    }

    /// Every thread on it: running, queued and delayed.
    pub fn threads(self) -> impl Iterator<Item = super::ThreadIdx> + 'a {
        self.cur
            .into_iter()
            .chain(self.rq.iter().copied())
            .chain(self.delayed.iter().copied())
    }
}

impl SeenQueue {
    /// The queue as the pass saw it.
    pub fn view(&self) -> QueueView<'_> {
        QueueView {
            cur: self.cur,
            rq: &self.rq,
            delayed: &self.delayed,
        }
    }
}

impl KernelCpu {
    /// Its run queue as it is.
    pub fn view(&self) -> QueueView<'_> {
        QueueView {
            cur: self.cur,
            rq: &self.rq,
            delayed: &self.delayed,
        }
    }

    /// Threads on its queue, the running one and delayed sleepers included
    /// (`rq->nr_running`).
    pub fn nr(&self) -> usize {
        self.view().nr()
    }

    /// Neither running nor queued anything.
    pub fn idle(&self) -> bool {
        self.view().idle()
    }
}
