//! `LinuxHost`: the sampler, the actuator and the machine's topology behind the three
//! operations the engine needs (`now`, `sample`, `apply`), plus restoring and liveness.
//!
//! The engine's `Host` trait is implemented by [`crate::adapter::LinuxAdapter`], in three
//! lines that forward to the methods here:
//!
//! ```text
//!  engine.tick(host) ─► Host::now    ─► LinuxHost::now      CLOCK_MONOTONIC
//!                   ─► Host::sample ─► LinuxHost::sample   Sampler (pread on kept fds)
//!                   ─► Host::apply  ─► LinuxHost::apply    Actuator (sched_setaffinity)
//!  exit, Ctrl-C, target gone ─────────► LinuxHost::restore_all (Drop does it too)
//! ```
//!
//! ```no_run
//! use threadbalance_linux::{HostFacts, LinuxHost, Root, SamplerConfig, read_topology};
//! use threadbalance_model::{Pid, Snapshot};
//! let root = Root::system();
//! let topo = read_topology(&root)?;
//! let cfg = SamplerConfig::new(HostFacts::system()?);
//! let mut host = LinuxHost::new(root, topo, &[Pid(1234)], cfg)?;
//! let mut snap = Snapshot::default();
//! while host.target_alive() {
//!     host.sample(&mut snap)?;
//!     // … window, policy, host.apply(&plan) …
//!     # break;
//! }
//! host.restore_all();
//! # Ok::<(), threadbalance_linux::LinuxError>(())
//! ```

use crate::LinuxError;
use crate::actuate::Actuator;
use crate::ledger::RestoreReport;
use crate::read::{Root, read_start_time};
use crate::sampler::{Sampler, SamplerConfig};
use crate::state::Journal;
use nix::time::{ClockId, clock_gettime};
use threadbalance_model::{ApplyReport, Nanos, Pid, Plan, Snapshot, Tid, Topology};

/// A pidfd for `pid` (Linux 5.3+): readable once the process has exited. `None` where
/// the kernel has none.
pub fn pidfd_open(pid: Pid) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1; no memory is shared.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.0, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the syscall returned a fresh descriptor that nothing else owns.
    Some(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) })
}

/// The current time on `CLOCK_MONOTONIC` (nanoseconds since boot, not counting suspend).
pub fn monotonic_now() -> Nanos {
    match clock_gettime(ClockId::CLOCK_MONOTONIC) {
        Ok(ts) => {
            let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
            let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
            Nanos(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
        }
        // CLOCK_MONOTONIC cannot fail on Linux; zero keeps time from running backwards.
        Err(_) => Nanos::ZERO,
    }
}

/// The Linux host: samples the managed processes and applies plans to their threads.
#[derive(Debug)]
pub struct LinuxHost {
    root: Root,
    topo: Topology,
    sampler: Sampler,
    actuator: Actuator,
    /// A descriptor kept to be closed just before restoring.
    reserve: Option<std::fs::File>,
    /// When the actuator last forgot gone threads and compacted its journal.
    maintained: Nanos,
    /// Whether the sampler follows the targets' children (then they are managed, and
    /// `adopt_children` is not needed).
    follow_children: bool,
    /// When the targets' children were last looked at for inherited masks.
    children_seen: Nanos,
    /// The faster run-time source's count of processes started then (`None`: no such
    /// source, or not looked yet): while it stays the same no child can have appeared.
    children_spawns: Option<u64>,
}

/// How often the children of targets whose children are not sampled are looked at for
/// masks inherited from a moved thread.
const CHILDREN_EVERY: Nanos = Nanos::from_millis(100);

/// How often the actuator forgets threads that have gone and compacts its journal.
const MAINTAIN_EVERY: Nanos = Nanos::from_secs(10);

impl LinuxHost {
    /// A host managing processes `pids` (and their descendants if `cfg.follow_children`)
    /// on the machine `topo`, reading `proc/` under `root`. Fails with
    /// [`LinuxError::NoSuchProcess`] or [`LinuxError::PermissionDenied`] for a pid that
    /// cannot be read.
    pub fn new(
        root: Root,
        topo: Topology,
        pids: &[Pid],
        cfg: SamplerConfig,
    ) -> Result<LinuxHost, LinuxError> {
        LinuxHost::with_journal(root, topo, pids, cfg, None)
    }

    /// [`LinuxHost::new`], writing every change to `journal` before making it (see
    /// [`crate::state`]).
    pub fn with_journal(
        root: Root,
        topo: Topology,
        pids: &[Pid],
        cfg: SamplerConfig,
        journal: Option<Journal>,
    ) -> Result<LinuxHost, LinuxError> {
        let follow_children = cfg.follow_children;
        let sampler = Sampler::new(root.clone(), pids, cfg)?;
        let mut actuator = Actuator::new(root.clone());
        if let Some(j) = journal {
            actuator.set_journal(j);
        }
        // Threads that start from now on may inherit masks we set: management began no
        // earlier than this process did, and the managed processes' mask is their leader's.
        let me = Pid(std::process::id() as i32);
        if let (Ok(Some(since)), Some(&first)) =
            (read_start_time(&root, me, Tid(me.0)), pids.first())
            && let Ok(base) = crate::affinity::affinity_of(Tid(first.0))
        {
            actuator.inherit_from(since, base);
        }
        for &pid in pids {
            actuator.manage_process(pid);
        }
        // One descriptor held back for the end: restoring must not fail for want of one.
        let reserve = std::fs::File::open("/dev/null").ok();
        Ok(LinuxHost {
            follow_children,
            children_seen: Nanos::ZERO,
            children_spawns: None,
            maintained: monotonic_now(),
            reserve,
            actuator,
            root,
            topo,
            sampler,
        })
    }

    /// Now, on `CLOCK_MONOTONIC`.
    pub fn now(&self) -> Nanos {
        monotonic_now()
    }

    /// Fills `into` with one sample per live managed thread, sorted by key, reusing its
    /// buffers; see [`Sampler::sample`].
    pub fn sample(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        let now = self.now();
        self.sampler.sample(now, into)?;
        for pid in self.sampler.managed() {
            self.actuator.manage_process(pid);
        }
        self.actuator
            .adopt_born(self.sampler.fresh().iter().copied());
        // A child started by a thread we moved carries its mask; when children are not
        // sampled it is recorded here, so that it is restored even if it outlives its parent.
        // The BPF counters count the processes the targets start: while that count stays
        // the same, the targets' `children` files (one per thread) are not read.
        let spawns = self.sampler.counted_spawns();
        let spawned = spawns.is_none() || spawns != self.children_spawns;
        if !self.follow_children
            && spawned
            && now.saturating_sub(self.children_seen) >= CHILDREN_EVERY
        {
            self.children_seen = now;
            self.children_spawns = spawns;
            for &pid in self.sampler.targets() {
                self.actuator.adopt_children(pid);
            }
        }
        if now.saturating_sub(self.maintained) >= MAINTAIN_EVERY {
            self.maintained = now;
            let sampler = &self.sampler;
            self.actuator
                .maintain_known(&|pid, tid| sampler.kept_start_time(pid, tid));
        }
        Ok(())
    }

    /// Also walks process `pid`'s descendants born after management began when
    /// restoring (see [`crate::ledger`]). `run` gives its own pid: it is the command's
    /// subreaper, so the command's orphans hang under it.
    pub fn restore_under(&mut self, pid: Pid) {
        self.actuator.manage_process(pid);
    }

    /// Carries out a plan's moves; each outcome is counted, none is an error.
    /// A move's start-time checks are a `pread` of the sampler's kept file of the thread
    /// when it has one ([`Sampler::kept_start_time`]), `stat` read by path otherwise.
    pub fn apply(&mut self, plan: &Plan) -> ApplyReport {
        for m in &plan.moves {
            self.sampler.keep_schedstat(m.thread.pid, m.thread.tid);
        }
        let sampler = &self.sampler;
        self.actuator.apply_known(&self.topo, plan, &|pid, tid| {
            sampler.kept_start_time(pid, tid)
        })
    }

    /// Restores every mask changed so far, and widens back the threads and processes that
    /// inherited a mask of ours without ever being moved; see [`Actuator::restore_all`].
    /// The sampler's kept files and a reserved descriptor are closed first, so restoring
    /// never fails for want of a file descriptor.
    pub fn restore_all(&mut self) -> RestoreReport {
        self.reserve = None;
        self.sampler.close_files();
        self.actuator.restore_all()
    }

    /// Whether any of the processes given to [`LinuxHost::new`] is still running (exists and
    /// is not a zombie).
    pub fn target_alive(&self) -> bool {
        let ticks_per_sec = self.sampler.config().facts.ticks_per_sec;
        self.sampler.targets().iter().any(|&pid| {
            let path = self.root.proc_dir(pid).join("stat");
            std::fs::read(&path).is_ok_and(|text| {
                crate::parse::parse_stat_bytes(&text, ticks_per_sec).is_ok_and(|s| {
                    !matches!(
                        s.state,
                        threadbalance_model::ThreadState::Zombie
                            | threadbalance_model::ThreadState::Dead
                    )
                })
            })
        })
    }

    /// Whether thread `tid` of `pid` still has start time `start_time`.
    pub fn same_thread(&self, pid: Pid, tid: Tid, start_time: u64) -> bool {
        matches!(read_start_time(&self.root, pid, tid), Ok(Some(s)) if s == start_time)
    }

    /// The machine.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// The sampler (for its managed pids and configuration).
    pub fn sampler(&self) -> &Sampler {
        &self.sampler
    }

    /// The sampler, to give it a faster run-time source ([`crate::runcount::choose`]).
    pub fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// The actuator (for the masks it has changed).
    pub fn actuator(&self) -> &Actuator {
        &self.actuator
    }

    /// The actuator, to give it a trace of who sets masks ([`Actuator::set_trace`]).
    pub fn actuator_mut(&mut self) -> &mut Actuator {
        &mut self.actuator
    }
}
