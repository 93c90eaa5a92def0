//! `LinuxAdapter`: the host that `run`, `attach` and the daemon hand to the shared control
//! loop (`threadbalance_manage`). It forwards the engine's [`Host`] to [`LinuxHost`] and adds
//! what the loop needs around it ([`LoopHost`]): waiting for the target with a pidfd (so the
//! loop wakes the moment it exits), forwarding signals, dry runs, reaping a command's orphans,
//! and the cost budget ([`pace`]: the tool's loop never spends more than 0.8 % of one core,
//! whatever interval the policy asks for).
//!
//! ```text
//!  threadbalance_manage::manage(adapter, …)
//!    Host::now / sample / apply ─► LinuxHost (CLOCK_MONOTONIC, Sampler, Actuator)
//!                                  + lockprobe::LockProbe::fill (exact lock time, feature bpf)
//!    LoopHost::target_exited     ─► ppoll(pidfd, 0), unless the wait just before timed out
//!                                   (no pidfd: /proc/PID/stat)
//!    Host::earliest              ─► the next tick, later if over budget (Pacer::hold)
//!    LoopHost::wait_until        ─► ppoll(pidfd, until the deadline)
//!    LoopHost::forward           ─► kill(target, sig)
//!    LoopHost::housekeeping      ─► run only: waitpid(orphan, WNOHANG), once a second
//!                                   (the orphans themselves are sampled and managed as
//!                                   the command's tree: `Sampler::adopt_orphans_of`)
//!    LoopHost::restore_all       ─► LinuxHost::restore_all
//! ```
//!
//! The loop itself has no I/O and no `unsafe`; the system calls live here and in
//! [`crate::host`]. Because the adapter is a library type, tests drive the real loop on the
//! real host inside one process (see `tests/adapter`), with no command to start.

use crate::host::pidfd_open;
use crate::ledger::RestoreReport;
use crate::state::Journal;
use crate::{HostFacts, LinuxError, LinuxHost, Root, SamplerConfig};
use nix::unistd::Pid as NixPid;
use std::os::fd::{AsFd, OwnedFd};
use threadbalance_manage::LoopHost;
use threadbalance_model::{ApplyReport, Nanos, Pid, Plan, Snapshot, Topology};
use threadbalance_policy::{Host, Needs};

pub mod lockprobe;
use lockprobe::{LockProbe, LockReport};
use pace::Pacer;
pub use threadbalance_model::pace;

/// The longest a sleeping thread goes unread under a policy that allows stale `stat`
/// fields (see `SamplerConfig::idle_max_age`): a thread that wakes is seen this late at
/// the most.
const IDLE_MAX_AGE: Nanos = Nanos::from_millis(16);

/// The longest the loop sleeps without looking at signals and the target, when the target
/// cannot be watched through a pidfd.
const POLL_FALLBACK: Nanos = Nanos::from_millis(20);

/// What is managed.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// A process we launched (`run`), and optionally its descendants.
    Child {
        /// The command's pid.
        pid: Pid,
        /// Also manage the processes it starts.
        follow_children: bool,
    },
    /// A process that was already running (`attach`), and optionally its descendants.
    Attached {
        /// Its pid.
        pid: Pid,
        /// Also manage the processes it starts.
        follow_children: bool,
    },
}

/// `LinuxHost` plus a pidfd on the target.
pub struct LinuxAdapter {
    host: LinuxHost,
    /// Where run time and wait come from, as chosen when the adapter opened.
    run_source: crate::runcount::RunSource,
    target: Pid,
    pidfd: Option<OwnedFd>,
    dry_run: bool,
    exited: bool,
    /// Whether the target is our child (`run`): then its orphans are ours to reap.
    reap: bool,
    /// When orphans were last reaped.
    reaped: Nanos,
    /// The futex probe, or why there is none.
    lock_probe: LockProbe,
    /// The processes sampled last (reused buffer for the probe's lookup).
    pids: Vec<Pid>,
    /// The cost budget: ticks wait while the tool is over it.
    pacer: Pacer,
    /// CPU time spent carrying out plans (moves), which the budget does not charge
    /// unless the operator set a whole budget ([`LinuxAdapter::set_cpu_budget`]).
    acting: Nanos,
    /// CPU time spent letting BPF programs go (a fork, some closes: once or twice a run),
    /// which no budget charges: spread over the ticks by the pacing, the 0.3-0.5 ms it
    /// takes held `speed`'s 1 ms rounds 40 ms apart, and it lent its threads to Linux.
    letting_go: Nanos,
    /// Whether the budget charges moves too ([`LinuxAdapter::set_cpu_budget`]).
    charge_moves: bool,
    /// The cap on the tool's whole CPU time, moves included ([`pace::WHOLE_BUDGET`]), where
    /// no operator's whole budget stands.
    whole: Pacer,
    /// The largest watching budget the policy was granted (`Policy::watch_budget`), a
    /// share of one core: the default until a policy asks for more.
    watch_max: f64,
    /// The last wait on the pidfd ran to its deadline without the target exiting: the
    /// next [`LinuxAdapter::target_exited`], just after it, need not ask again.
    seen_alive: bool,
    /// What a tick costs once every thread has been seen: see [`SteadyTicks`].
    steady: SteadyTicks,
    /// What one turn of the loop costs, which the samples report as [`pace::Pace`].
    turns: LoopTurns,
    /// How the program's own masks are told from ours ([`LinuxAdapter::choices_source`]).
    choices: String,
}

/// The CPU time the budget charges, as read at the last wait (`None` before one), and as
/// it stood when the last sample began: the difference is what one turn of the loop cost
/// (sampling, deciding, the wait and its wake-up; moves counted only under a whole budget,
/// `--cpu-budget`, so that the pace a policy reads then includes them).
#[derive(Debug, Clone, Copy, Default)]
struct LoopTurns {
    watched: Option<Nanos>,
    at_sample: Option<Nanos>,
    samples: u64,
}

impl LoopTurns {
    /// Notes the charged CPU time read at a wait.
    fn waited(&mut self, watching: Nanos) {
        self.watched = Some(watching);
    }

    /// The pace for the sample about to be taken: the last turn's CPU time over the
    /// budget. The first sample does not know yet (`now` gives the charged CPU time then:
    /// where the first turn starts); samples that no wait went before (a member of the
    /// daemon's groups, whose loop is the daemon's) are not paced by this loop.
    fn pace(&mut self, now: impl FnOnce() -> Nanos, budget: f64) -> pace::Pace {
        self.samples += 1;
        let at = match self.watched {
            Some(w) => w,
            None if self.samples == 1 => now(),
            None => return pace::Pace::Free,
        };
        match self.at_sample.replace(at) {
            None => pace::Pace::Unknown,
            Some(b) => pace::Pace::Gap(pace::steady_gap_within(at.saturating_sub(b), budget)),
        }
    }
}

/// The CPU time of the loop's ticks in the steady state, as the cost budget charges them:
/// sampling, deciding and the wait with its wake-up, moves not counted, and no tick that
/// saw a thread for the first time (opening its files is start-up, not what a tick costs).
/// The host reads its own CPU time at every wait anyway (for the budget): the window runs
/// from the wait after the last tick that saw a new thread to the latest wait.
#[derive(Debug, Clone, Copy, Default)]
pub struct SteadyTicks {
    /// Ticks taken so far.
    ticks: u64,
    /// Whether the last tick saw a thread for the first time.
    fresh: bool,
    /// Ticks and watching CPU time at the window's start, once there is one.
    from: Option<(u64, Nanos)>,
    /// Ticks and watching CPU time at the latest wait.
    to: (u64, Nanos),
}

impl SteadyTicks {
    /// A tick was taken; `fresh` when it saw a thread for the first time.
    fn ticked(&mut self, fresh: bool) {
        self.ticks += 1;
        self.fresh |= fresh;
    }

    /// The loop waits, having spent `watching` CPU time so far outside moves.
    fn waiting(&mut self, watching: Nanos) {
        if self.from.is_none() || std::mem::take(&mut self.fresh) {
            self.from = Some((self.ticks, watching));
        }
        self.to = (self.ticks, watching);
    }

    /// Ticks in the window and their CPU time; `None` before two waits apart.
    pub fn measured(&self) -> Option<(u64, Nanos)> {
        let (t0, c0) = self.from?;
        let (t1, c1) = self.to;
        let n = t1.checked_sub(t0).filter(|&n| n > 0)?;
        Some((n, c1.saturating_sub(c0)))
    }
}

impl LinuxAdapter {
    /// Opens the target for sampling and actuation. A missing or forbidden pid is
    /// [`LinuxError::NoSuchProcess`] or [`LinuxError::PermissionDenied`]: nothing has been
    /// changed yet.
    pub fn new(
        topo: &Topology,
        target: Target,
        dry_run: bool,
        needs: Needs,
        journal: Option<Journal>,
    ) -> Result<LinuxAdapter, LinuxError> {
        let counters = crate::runcount::Counters::Choose;
        LinuxAdapter::with_counters(topo, target, dry_run, needs, journal, counters)
    }

    /// As [`LinuxAdapter::new`], with run time from where `counters` says: the daemon
    /// gives each process a handle on its one shared probe ([`crate::runshare`]) instead of
    /// a probe of its own. The one place the policy's [`Needs`] set what is sampled: how
    /// stale `stat` may be, switch counts (`status`), the machine's stolen time
    /// (`/proc/stat`). Its lock probe is [`LockProbe::start_for`]'s, started apart because
    /// `run` starts it before its command.
    pub fn with_counters(
        topo: &Topology,
        target: Target,
        dry_run: bool,
        needs: Needs,
        journal: Option<Journal>,
        counters: crate::runcount::Counters,
    ) -> Result<LinuxAdapter, LinuxError> {
        let (pid, follow) = match target {
            Target::Child {
                pid,
                follow_children,
            }
            | Target::Attached {
                pid,
                follow_children,
            } => (pid, follow_children),
        };
        let facts = HostFacts::system()?;
        let mut cfg = SamplerConfig::new(facts);
        cfg.follow_children = follow;
        // On one NUMA node every page is on it: `numa_maps`, which walks every page table
        // of the process (tens of ms with 1024 thread stacks), cannot tell a policy anything.
        if topo.nodes().len() <= 1 {
            cfg.memory_every = None;
        }
        if let Some(age) = needs.stat_max_age {
            // A policy that allows stale `stat` fields reads run time and wait only, and
            // a sleeping thread has none to report: it is read less often while it sleeps.
            cfg.stat_max_age = age;
            cfg.idle_max_age = age.min(IDLE_MAX_AGE);
        }
        let ticks_per_sec = facts.ticks_per_sec;
        let mut host = LinuxHost::with_journal(Root::system(), topo.clone(), &[pid], cfg, journal)?;
        // Who set each mask, where the trace loads: the program's choices exactly.
        let choices = if dry_run {
            crate::setters::judged("a dry run changes no mask")
        } else if needs.moves_nothing {
            crate::setters::judged("the policy moves no thread")
        } else if pid.0 == std::process::id() as i32 {
            // The trace tells the tool's calls from others' by process: not here.
            crate::setters::judged("the tool manages its own process")
        } else if let crate::tracegate::Gate::Shut(why) = crate::tracegate::gate(ticks_per_sec) {
            // Another host of this process let it go for its cost (the daemon's).
            crate::setters::judged(format!("the trace was let go: {why}"))
        } else {
            match load_trace(ticks_per_sec) {
                Ok(trace) => {
                    host.actuator_mut().set_trace(trace);
                    crate::setters::TRACED.to_string()
                }
                Err(why) => crate::setters::judged(&why),
            }
        };
        if follow && matches!(target, Target::Child { .. }) {
            // `run` is its command's subreaper: the command's orphans hang under it, and are
            // part of the command's tree all the same.
            host.sampler_mut()
                .adopt_orphans_of(Pid(std::process::id() as i32));
        }
        if let Some(age) = needs.switches {
            host.sampler_mut().read_switches(age);
        }
        if needs.steal {
            host.sampler_mut().read_steal();
        }
        let run_source = counters.give(&mut host);
        Ok(LinuxAdapter {
            host,
            run_source,
            target: pid,
            reap: matches!(target, Target::Child { .. }),
            pidfd: pidfd_open(pid),
            dry_run,
            exited: false,
            reaped: Nanos::ZERO,
            lock_probe: LockProbe::off(),
            pids: Vec::new(),
            pacer: Pacer::new(pace::BUDGET, pace::BURST),
            whole: Pacer::new(pace::WHOLE_BUDGET, pace::BURST),
            acting: Nanos::ZERO,
            letting_go: Nanos::ZERO,
            charge_moves: false,
            watch_max: pace::BUDGET,
            seen_alive: false,
            steady: SteadyTicks::default(),
            turns: LoopTurns::default(),
            choices,
        })
    }

    /// Lets the setter trace go when it costs the machine too much: its tracepoints put
    /// every system call of the machine on the slow path. Two signs of that cost, the
    /// first to come: the run-time counters went for their cost ([`crate::sampler::weigh`]:
    /// a program that switches that often makes at least as many calls, each yield and
    /// each wait being one), or the machine's system time bounds the trace's cost over
    /// the tool's budget ([`crate::tracegate`], one verdict for every host of the
    /// process). `sysbench threads --threads=3` ran 15 % longer with the trace alone
    /// attached than bare (5 paired runs on the 2-core VM), 1 % with neither.
    fn follow_trace(&mut self) {
        if !self.host.actuator().traced() {
            return;
        }
        let why = match self.host.sampler().counters_stopped() {
            Some(crate::sampler::CountersStopped::Dropped(d)) => {
                format!("the trace went with the run-time counters: {d}")
            }
            _ => match crate::tracegate::gate(self.host.sampler().config().facts.ticks_per_sec) {
                crate::tracegate::Gate::Open => return,
                crate::tracegate::Gate::Shut(why) => format!("the trace was let go: {why}"),
            },
        };
        let before = own_cpu();
        self.host.actuator_mut().drop_trace();
        self.letting_go += own_cpu().saturating_sub(before);
        self.choices = crate::setters::judged(&why);
    }

    /// How the program's own masks are told from ours, as one line (see
    /// [`crate::setters`]): traced, or judged from the masks alone and why.
    pub fn choices_source(&self) -> String {
        self.choices.clone()
    }

    /// Where run time and wait came from: the source chosen when the adapter opened (BPF
    /// sched_switch counters, or `/proc` with why).
    pub fn run_source(&self) -> &crate::runcount::RunSource {
        &self.run_source
    }

    /// Why the faster run-time source stopped during the run (`/proc` took over), if it
    /// did.
    pub fn counters_stopped(&self) -> Option<&crate::sampler::CountersStopped> {
        self.host.sampler().counters_stopped()
    }

    /// Reads each thread's hardware counters from `source` from now on (instructions,
    /// cycles, LLC misses: IPC and MPKI in the windows), for a policy that asks
    /// (`Needs::counters`) or an operator who does.
    pub fn read_hw_counters(&mut self, source: Box<dyn crate::perf::CounterSource>) {
        self.host.sampler_mut().set_hw_counters(source);
    }

    /// The hardware counter source in use, by name (`perf_event`), if any.
    pub fn hw_counters_name(&self) -> Option<&'static str> {
        self.host.sampler().hw_counters_name()
    }

    /// Whether the next samples leave the machine's CPU time to another host that reads it
    /// for the same tick (see `Sampler::machine_time_elsewhere`).
    pub fn machine_time_elsewhere(&mut self, elsewhere: bool) {
        self.host.sampler_mut().machine_time_elsewhere(elsewhere);
    }

    /// Makes the orphans of the command hang under us (we are its subreaper, set before it
    /// started), so that those born of confined threads are restored at the end.
    pub fn restore_orphans(&mut self) {
        self.host.restore_under(Pid(std::process::id() as i32));
    }

    /// Reaps the orphans of the command that have exited (as a subreaper we inherit them);
    /// the command itself is left for `run` to wait for. At most once a second.
    pub fn reap_orphans(&mut self) {
        use nix::sys::wait::{WaitPidFlag, waitpid};
        let now = self.host.now();
        if now.saturating_sub(self.reaped) < Nanos::from_secs(1) {
            return;
        }
        self.reaped = now;
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read_to_string(task.path().join("children")) else {
                continue;
            };
            for child in text
                .split_whitespace()
                .filter_map(|w| w.parse::<i32>().ok())
            {
                if child != self.target.0 {
                    let reaped = waitpid(NixPid::from_raw(child), Some(WaitPidFlag::WNOHANG));
                    if reaped.is_ok_and(|s| s.pid().is_some()) {
                        crate::detached::forget(child);
                    }
                }
            }
        }
    }

    /// Sends signal `sig` to the target.
    pub fn forward(&self, sig: i32) {
        let _ = crate::signal::send(self.target, sig);
    }

    /// Whether the target has exited. Right after a wait that ran to its deadline on the
    /// pidfd (the loop asks just after waiting), that wait's answer stands: one system call
    /// a tick fewer. An exit in between is seen at the next turn, or when the tick's sample
    /// fails (the loop asks again then).
    pub fn target_exited(&mut self) -> bool {
        if std::mem::take(&mut self.seen_alive) {
            return self.exited;
        }
        if !self.exited {
            self.exited = match &self.pidfd {
                Some(fd) => poll_pidfd(fd, Nanos::ZERO) == Polled::Exited,
                None => !self.host.target_alive(),
            };
        }
        self.exited
    }

    /// Sleeps until `deadline` (which the loop's step has already held back while the tool
    /// was over its cost budget, [`Host::earliest`]), or until the target exits or a
    /// signal arrives.
    pub fn wait_until(&mut self, deadline: Nanos) {
        let mut now = self.host.now();
        let (watching, charged, _) = self.cpu_spent();
        self.turns.waited(charged);
        self.steady.waiting(watching);
        loop {
            if deadline <= now {
                return;
            }
            // While the run-time counters' first verdict is open, they are weighed between
            // ticks too (`sampler::weigh::FIRST_LOOKS`): a program that switches so often
            // that they cost it a tenth of its speed is not kept paying until the second
            // tick.
            let look = self
                .host
                .sampler()
                .weigh_between_due(now)
                .filter(|&at| at < deadline);
            let until = look.unwrap_or(deadline);
            let left = until.saturating_sub(now);
            match &self.pidfd {
                Some(fd) => match poll_pidfd(fd, left) {
                    Polled::Exited => self.exited = true,
                    Polled::TimedOut => self.seen_alive = true,
                    Polled::Interrupted => return,
                },
                None => {
                    let pause = left.min(POLL_FALLBACK);
                    std::thread::sleep(std::time::Duration::from_nanos(pause.0));
                }
            }
            if self.exited || look.is_none() {
                return;
            }
            now = self.host.now();
            self.host.sampler_mut().weigh_between(now);
            self.follow_trace();
            self.let_go_retired();
        }
    }

    /// Lets go of run-time counters dropped for their cost, once the setter trace that went
    /// with them is let go, the time it takes kept off the watching budget.
    fn let_go_retired(&mut self) {
        if self.host.sampler().has_retired() {
            let before = own_cpu();
            self.host.sampler_mut().release_retired();
            self.letting_go += own_cpu().saturating_sub(before);
        }
    }

    /// This process's CPU time spent watching (all of it but the moves), what the budget
    /// charges (all of it under an operator's whole budget, the watching otherwise), and
    /// all of it (what [`pace::WHOLE_BUDGET`] charges).
    fn cpu_spent(&self) -> (Nanos, Nanos, Nanos) {
        let cpu = own_cpu().saturating_sub(self.letting_go);
        let watching = cpu.saturating_sub(self.acting);
        (
            watching,
            if self.charge_moves { cpu } else { watching },
            cpu,
        )
    }

    /// The target's pid.
    pub fn target(&self) -> Pid {
        self.target
    }

    /// What became of the time slices the policy asked for (see
    /// [`crate::actuate::SliceCounts`]).
    pub fn slice_counts(&self) -> crate::actuate::SliceCounts {
        self.host.actuator().slice_counts()
    }

    /// Masks handed back to their thread's original during the run, at the policy's
    /// asking (see [`crate::actuate::Actuator::handed_back`]).
    pub fn handed_back(&self) -> u64 {
        self.host.actuator().handed_back()
    }

    /// Holds the tool's whole CPU time, moves included, to `share` of one core (an
    /// operator's `--cpu-budget`, checked by [`pace::cpu_budget_from_pct`]) instead of its
    /// ticks alone to [`pace::BUDGET`]. Call before the first tick.
    pub fn set_cpu_budget(&mut self, share: f64) {
        self.charge_moves = true;
        self.pacer = Pacer::new(share.max(pace::MIN_CPU_BUDGET), pace::BURST);
    }

    /// The budget's share of one core, and whether it charges moves.
    pub fn cpu_budget(&self) -> (f64, bool) {
        (self.pacer.budget(), self.charge_moves)
    }

    /// The largest watching budget the policy was granted, a share of one core
    /// ([`pace::BUDGET`] unless it asked for more; the operator's whole budget when one
    /// was set).
    pub fn watch_budget_max(&self) -> f64 {
        if self.charge_moves {
            self.pacer.budget()
        } else {
            self.watch_max
        }
    }

    /// How many times a cost budget pushed a tick back (watching, or the whole).
    pub fn paced(&self) -> u64 {
        self.pacer.stretched() + self.whole.stretched()
    }

    /// What the ticks cost once every thread had been seen: see [`SteadyTicks`].
    pub fn steady_ticks(&self) -> SteadyTicks {
        self.steady
    }

    /// The tool's CPU time spent carrying out plans (moves, and the slice changes in the
    /// same plans; not the restore at the end), measured around each [`Host::apply`].
    pub fn acting_cpu(&self) -> Nanos {
        self.acting
    }

    /// Takes the futex probe (started before the command, so that its first waits count).
    pub fn set_lock_probe(&mut self, probe: LockProbe) {
        self.lock_probe = probe;
    }

    /// What the futex probe saw over the run, or why it did not run.
    pub fn lock_report(&mut self) -> LockReport {
        self.lock_probe.report()
    }

    /// Restores every mask changed; see [`LinuxHost::restore_all`].
    pub fn restore_all(&mut self) -> RestoreReport {
        self.host.restore_all()
    }
}

impl Host for LinuxAdapter {
    type Error = LinuxError;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        let uncharged = self.letting_go
            + if self.charge_moves {
                Nanos::ZERO
            } else {
                self.acting
            };
        let pace = self
            .turns
            .pace(|| own_cpu().saturating_sub(uncharged), self.pacer.budget());
        self.host.sample(into)?;
        self.follow_trace();
        self.let_go_retired();
        crate::detached::reap();
        into.pace = pace;
        self.steady.ticked(!self.host.sampler().fresh().is_empty());
        self.pids.clear();
        self.pids.extend(self.host.sampler().managed());
        self.lock_probe.fill(&self.pids, into);
        Ok(())
    }

    /// A policy's watching budget, never under the default, never over one core; an
    /// operator's whole budget stands.
    fn watch_budget(&mut self, share: Option<f64>) {
        if self.charge_moves {
            return;
        }
        let share = pace::watch_share(share);
        self.watch_max = self.watch_max.max(share);
        self.pacer.set_budget(share);
    }

    /// The next tick held back while the tool is over its CPU budget (see [`pace`]), or
    /// over [`pace::WHOLE_BUDGET`] with its moves counted (unless an operator's whole
    /// budget already counts them).
    fn earliest(&mut self, due: Nanos) -> Nanos {
        let (_, charged, all) = self.cpu_spent();
        let now = self.host.now();
        let at = self.pacer.hold(due, now, charged);
        if self.charge_moves {
            return at;
        }
        at.max(self.whole.hold(due, now, all))
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        // Slices alone are applied too: the round that stops a rotation gives the threads
        // back the kernel's slice and may move nothing.
        if self.dry_run || (plan.moves.is_empty() && plan.slices.is_empty()) {
            return ApplyReport::default();
        }
        let before = own_cpu();
        let report = self.host.apply(plan);
        self.acting += own_cpu().saturating_sub(before);
        report
    }
}

impl LoopHost for LinuxAdapter {
    type Restored = RestoreReport;

    fn target_exited(&mut self) -> bool {
        LinuxAdapter::target_exited(self)
    }

    fn wait_until(&mut self, deadline: Nanos) {
        LinuxAdapter::wait_until(self, deadline);
    }

    fn forward(&mut self, sig: i32) {
        LinuxAdapter::forward(self, sig);
    }

    fn restore_all(&mut self) -> RestoreReport {
        LinuxAdapter::restore_all(self)
    }

    /// `run` reaps its command's orphans (it is their subreaper); `attach` and the daemon
    /// have none.
    fn housekeeping(&mut self) {
        if self.reap {
            self.reap_orphans();
        }
    }
}

/// This process's CPU time so far, user and system (`getrusage(RUSAGE_SELF)`).
fn own_cpu() -> Nanos {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Nanos::ZERO, |u| {
        let ns = |tv: nix::sys::time::TimeVal| {
            (tv.tv_sec().max(0) as u64) * 1_000_000_000 + (tv.tv_usec().max(0) as u64) * 1_000
        };
        Nanos(ns(u.user_time()) + ns(u.system_time()))
    })
}

/// How a wait on the pidfd ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polled {
    /// The pidfd became readable: the process has exited.
    Exited,
    /// The timeout passed with the process still there.
    TimedOut,
    /// A signal (or an error) ended the wait early, which is what the loop wants.
    Interrupted,
}

/// Waits up to `timeout` for the pidfd `fd` to become readable (once the
/// process has exited). `ppoll` takes the timeout in nanoseconds, so a tick due in 1.2 ms
/// is not put off to 2 ms as `poll`'s whole milliseconds would.
fn poll_pidfd(fd: &OwnedFd, timeout: Nanos) -> Polled {
    use nix::poll::{PollFd, PollFlags, ppoll};
    use nix::sys::time::TimeSpec;
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let ts = TimeSpec::from_duration(std::time::Duration::from_nanos(timeout.0));
    match ppoll(&mut fds, Some(ts), None) {
        Ok(n) if n > 0 => Polled::Exited,
        Ok(_) => Polled::TimedOut,
        Err(_) => Polled::Interrupted,
    }
}

/// The setter trace loaded ahead of a host, held until the host takes its own handle on
/// it ([`TraceAhead::load`]).
#[derive(Debug, Default)]
pub struct TraceAhead {
    #[cfg(feature = "bpf")]
    _probe: Option<std::sync::Arc<crate::setbpf::SetterProbe>>,
}

impl TraceAhead {
    /// Loads the trace now, where this build and machine allow (nothing is said where
    /// they do not: the host says why when it opens). `run` loads it before its command
    /// starts, as it does the run-time counters, so that the program's own first
    /// `sched_setaffinity` calls are traced; the host opened after finds it loaded
    /// (`crate::setbpf::shared`).
    pub fn load() -> TraceAhead {
        TraceAhead {
            #[cfg(feature = "bpf")]
            _probe: crate::setbpf::shared().ok(),
        }
    }
}

/// Why there is no setter trace ([`load_trace`]): said in
/// [`LinuxAdapter::choices_source`]'s line.
#[derive(Debug, thiserror::Error)]
enum NoTrace {
    /// The BPF program could not be loaded or attached.
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Refused(crate::bpf::ProbeUnavailable),
    /// This build has no BPF programs.
    #[cfg(not(feature = "bpf"))]
    #[error("built without the bpf feature")]
    NotBuilt,
}

/// Loads the trace this build and machine allow (the BPF program, shared by every host of
/// the process: `crate::setbpf::shared`), thread start times counted in `ticks_per_sec`;
/// or says why there is none.
fn load_trace(ticks_per_sec: u64) -> Result<crate::setters::Trace, NoTrace> {
    #[cfg(feature = "bpf")]
    {
        crate::setbpf::shared()
            .map(|probe| crate::setters::Trace::new(probe, ticks_per_sec))
            .map_err(NoTrace::Refused)
    }
    #[cfg(not(feature = "bpf"))]
    {
        let _ = ticks_per_sec;
        Err(NoTrace::NotBuilt)
    }
}

#[cfg(test)]
mod tests {
    use super::{LoopTurns, SteadyTicks};
    use threadbalance_model::Nanos;
    use threadbalance_model::pace::Pace;

    #[test]
    fn the_constructor_samples_what_the_policy_needs() {
        use super::{LinuxAdapter, Target};
        use crate::runcount::Counters;
        use threadbalance_policy::Needs;
        // Attached to this very process, changing nothing (dry run, no journal, /proc for
        // run time).
        let topo = crate::read_topology(&crate::Root::system()).unwrap();
        let open = |needs: Needs| {
            let target = Target::Attached {
                pid: threadbalance_model::Pid(std::process::id() as i32),
                follow_children: false,
            };
            let host = LinuxAdapter::with_counters(
                &topo,
                target,
                true,
                needs,
                None,
                Counters::Given(None),
            )
            .unwrap();
            host.host.sampler().config().clone()
        };
        let plain = open(Needs::NOTHING);
        assert!(!plain.read_status && !plain.read_cpu_time);
        let wants = Needs {
            stat_max_age: Some(Nanos::from_secs(1)),
            switches: Some(Nanos::from_millis(50)),
            steal: true,
            ..Needs::NOTHING
        };
        let cfg = open(wants);
        assert!(cfg.read_status && cfg.read_cpu_time);
        assert_eq!(cfg.status_max_age, Nanos::from_millis(50));
        assert_eq!(cfg.stat_max_age, Nanos::from_secs(1));
        assert_ne!(plain.stat_max_age, cfg.stat_max_age);
    }

    #[test]
    fn loop_turns_pace_the_samples_by_the_last_turns_cpu_time() {
        let mut t = LoopTurns::default();
        let b = threadbalance_model::pace::BUDGET;
        // The first sample: no turn yet; the charged CPU time then starts the first.
        assert_eq!(t.pace(|| Nanos::from_micros(500), b), Pace::Unknown);
        // The first turn cost 800 µs (opening every thread's files): 100 ms at 0.8 %.
        t.waited(Nanos::from_micros(1300));
        assert_eq!(
            t.pace(|| unreachable!("read at the wait"), b),
            Pace::Gap(Nanos::from_millis(100))
        );
        // The next cost 24 µs: 3 ms.
        t.waited(Nanos::from_micros(1324));
        assert_eq!(t.pace(|| Nanos::ZERO, b), Pace::Gap(Nanos::from_millis(3)));
        // Under a whole budget of 2 % (`--cpu-budget 2`), a turn of 24 µs and two moves of
        // 38 µs (100 µs charged): 5 ms.
        t.waited(Nanos::from_micros(1424));
        assert_eq!(
            t.pace(|| Nanos::ZERO, 0.02),
            Pace::Gap(Nanos::from_millis(5))
        );
        // A host no wait goes before (a member of the daemon's groups): not paced here.
        let mut d = LoopTurns::default();
        assert_eq!(d.pace(|| Nanos::ZERO, b), Pace::Unknown);
        assert_eq!(d.pace(|| Nanos::ZERO, b), Pace::Free);
    }

    #[test]
    fn steady_ticks_start_after_the_last_tick_that_saw_new_threads() {
        let mut s = SteadyTicks::default();
        assert_eq!(s.measured(), None);
        // Tick 1 sees every thread (1 ms of CPU by its wait); tick 2 sees one more
        // (1.5 ms); ticks 3 and 4 see none, 100 µs each: the window starts at the wait
        // after tick 2 and holds ticks 3 and 4 alone.
        s.ticked(true);
        s.waiting(Nanos::from_micros(1_000));
        assert_eq!(s.measured(), None);
        s.ticked(true);
        s.waiting(Nanos::from_micros(1_500));
        assert_eq!(s.measured(), None);
        s.ticked(false);
        s.waiting(Nanos::from_micros(1_600));
        s.ticked(false);
        s.waiting(Nanos::from_micros(1_700));
        // 2 ticks, 1.7 − 1.5 = 0.2 ms: 100 µs a tick.
        assert_eq!(s.measured(), Some((2, Nanos::from_micros(200))));
        // A wait without a tick (woken early) adds its CPU time to the same ticks.
        s.waiting(Nanos::from_micros(1_710));
        assert_eq!(s.measured(), Some((2, Nanos::from_micros(210))));
    }
}
