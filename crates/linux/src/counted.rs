//! What a source of run counters faster than `/proc` answers ([`RunCounters`]), one
//! thread at a time ([`Counted`]). A leaf: the sources (`crate::schedbpf`) implement it,
//! the sampler reads it, and [`crate::runcount`] chooses among them.

use crate::LinuxError;
use crate::parse::SchedStat;
use threadbalance_model::{CpuId, Pid, Sample, ThreadState, Tid};

/// One thread's counters, as a [`RunCounters`] source gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counted {
    /// Run ns, run-queue wait ns and timeslices: `schedstat`'s three fields.
    pub sched: SchedStat,
    /// The CPU it last ran on (or runs on now).
    pub last_cpu: CpuId,
    /// Its state now: running or runnable, asleep, or exited.
    pub state: ThreadState,
    /// Voluntary switches (`status`'s `voluntary_ctxt_switches`): it blocked.
    pub voluntary: u64,
    /// Involuntary switches (`nonvoluntary_ctxt_switches`): preempted, or it yielded.
    pub involuntary: u64,
}

/// A source of per-thread run counters that is cheaper than reading `schedstat`.
pub trait RunCounters: std::fmt::Debug + Send {
    /// What it is, for the summary ("BPF sched_switch counters").
    fn name(&self) -> &'static str;
    /// Makes the counts current for the processes `pids` (and makes sure threads they
    /// create from now on are counted). Returns whether a thread of theirs was born or
    /// died since the last refresh, so the task directories are listed again.
    fn refresh(&mut self, pids: &[Pid]) -> Result<bool, LinuxError>;
    /// Thread `tid`'s counters as of the last refresh, or `None` when the source cannot
    /// vouch for them (never seen; or seeded as running and not switched since, so its
    /// run time may be going up unseen).
    fn get(&self, tid: Tid) -> Option<Counted>;
    /// Thread `tid` was just read from `/proc` with these values: counting goes on from
    /// them unless the source already counts the thread.
    fn seed(&mut self, tid: Tid, sample: &Sample);
    /// Thread `tid` has gone.
    fn forget(&mut self, tid: Tid);
    /// Threads and processes the managed processes have created since the source
    /// started, as of the last refresh (`None`: the source does not count them). A source
    /// that counts them counts every exit of the managed processes' threads too, so that
    /// `refresh` returning `false` means no thread came or went: the sampler then does not
    /// even look at the task directories' link counts.
    fn births(&self) -> Option<u64> {
        None
    }
    /// As [`RunCounters::births`], but now rather than as of the last refresh (`None`:
    /// the source cannot say between refreshes): whether threads were born since the last
    /// refresh, for a look between samples.
    fn births_now(&self) -> Option<u64> {
        None
    }
    /// Processes the managed processes have started since the source started, as of the
    /// last refresh (`None`: not counted). Unchanged means no new child process, so its
    /// caller need not read the `children` files to look for one.
    fn spawns(&self) -> Option<u64> {
        None
    }
    /// Stops counting at once, for a source about to be let go: what it costs the
    /// threads it counts ends now, whatever letting it go takes (the BPF counters' links
    /// wait for the kernel). Nothing by default.
    fn quiesce(&mut self) {}
}
