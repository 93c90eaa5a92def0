//! The daemon's loop, apart from any operating system: which processes it manages, how
//! they are grouped and ticked, what `ctl` is answered, how a reload is taken, and that
//! every mask is handed back however the loop ends. What it needs of the machine comes
//! through a [`DaemonHost`] (the Linux one is in the binary); its tests drive it with a
//! host made of plain values, as `threadbalance_manage`'s are.
//!
//! ```text
//!  Daemon::run ─► loop {
//!      host.take_signal: Reload ─► host.start_reload │ Stop(sig) ─► end
//!      host.reload_done? ─► the new config (bad: the running one kept), ctl answered
//!      every sample_ms: window ─► host.list_processes, host.read_process each
//!        facts over the window ─► match the rules ─► near misses explained
//!        matched, new ─► host.claim ─► CPUs? policy builds? ─► host.open
//!        no longer matched (after_window) ─► ProcessHost::release
//!        groups re-formed: processes sharing CPUs under one policy and level are one
//!      each group: tick when due, over all its unpaused processes' threads
//!      host.publish(status, list)  ·  host.publish_threads while watched
//!      host.wait(until something is due) ─► a ctl command? carried out, answered
//!  } ─► release every process (restore every mask), also after a panic (caught)
//! ```
//!
//! `--oneshot` ([`Daemon::oneshot`]) matches once over one window, places each matched
//! process with one decision and leaves the placement ([`ProcessHost::keep_placement`]).

mod answer;
mod display;
pub mod groups;
pub mod managed;
mod window;

use crate::competitor::Competitor;
use crate::control::channel::{Command, Pending, Snapshot};
use crate::control::threads::{MoveCounts, ThreadsView};
use crate::control::{Candidate, ProcessEntry, Status};
use crate::error::{Chain, ReloadError};
use crate::metrics::Metrics;
use crate::process::{ProcessReading, Users};
use crate::read::PidFiles;
use crate::{Config, ReadError};
use groups::Groups;
use managed::{Managed, ProcessHost, Restored, Why};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use threadbalance_model::{CpuId, CpuSet, DisplayWindow, ModelError, Nanos, Pid, Topology, Window};
use threadbalance_policy::{Policy, PolicyError};

/// The longest the loop waits without looking at signals.
pub const SIGNAL_POLL: Nanos = Nanos::from_millis(100);
/// Competitors are looked for every this many windows.
pub const COMPETITORS_EVERY: u64 = 30;
/// A process a rule almost matched is explained in the log at most once this often. The
/// match runs every `sample_ms` (a second by default): once a window would be 3,600 lines
/// an hour for one compressor that keeps missing by the same amount, and the reason
/// rarely changes within minutes; once per process alone would hide that it is still
/// missing an hour later. Ten minutes is at most six lines an hour for each such process,
/// and `ctl list --all` shows the current reason at any time.
pub const EXPLAIN_EVERY: Nanos = Nanos::from_secs(600);

/// A signal, as the loop reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGHUP: re-read the config.
    Reload,
    /// Any other catchable signal that would end the process: stop (the number).
    Stop(i32),
}

/// The CPUs the daemon may use and the machine cut down to them (its default level's
/// domains are the metrics').
#[derive(Debug, Clone)]
pub struct Usable {
    /// Online, within the config's `cpus`, less the banned ones.
    pub cpus: CpuSet,
    /// The machine restricted to `cpus`.
    pub machine: Topology,
}

/// A process the host has claimed: nobody else manages it, and this is what it may use.
#[derive(Debug)]
pub struct Claimed<L> {
    /// Its start time (a reused pid is another process).
    pub start: u64,
    /// The union of its threads' masks, on the machine's online CPUs.
    pub program: CpuSet,
    /// What holds it for this daemon (a lock file) until it is opened or dropped.
    pub lock: L,
}

/// How to open a claimed process.
pub struct Open<'a> {
    /// The process.
    pub pid: Pid,
    /// Its start time.
    pub start: u64,
    /// The machine (the usable CPUs): moves name its domains.
    pub machine: &'a Topology,
    /// Decide only, change no mask.
    pub observe: bool,
    /// Keep a journal of the masks changed (not for `--oneshot`, whose placement stays).
    pub journal: bool,
    /// The rule's policy over the process's CPUs: what it asks the host to read.
    pub policy: &'a dyn Policy,
}

/// Why a process is not a process this daemon takes on (logged once, at info).
#[derive(Debug, thiserror::Error)]
pub enum NotOurs<E: std::error::Error + 'static> {
    /// The host's permission check refused it (the daemon itself, init, a kernel thread…),
    /// in the host's words.
    #[error("{0}")]
    Refused(String),
    /// Its permission or start time could not be read.
    #[error(transparent)]
    Unreadable(E),
    /// It has exited.
    #[error("it has exited")]
    Exited,
    /// Another instance holds its lock (that instance's pid, when known).
    #[error("already managed by another threadbalance{}", holder.map_or(String::new(), |h| format!(" (threadbalance pid {h})")))]
    Locked {
        /// The pid of the instance that holds it.
        holder: Option<Pid>,
    },
    /// Its threads may use none of the daemon's CPUs (these).
    #[error("its threads may use none of the CPUs {0}")]
    NoCpus(CpuSet),
}

/// Why taking on a process failed (logged once, at warn).
#[derive(Debug, thiserror::Error)]
pub enum TakeOnError<E: std::error::Error + 'static> {
    /// The host failed (its lock, its mask, its journal, its sampler).
    #[error(transparent)]
    Host(E),
    /// The machine could not be cut down to its CPUs.
    #[error(transparent)]
    Cpus(ModelError),
    /// Its rule's policy did not build over its CPUs.
    #[error("policy {name}")]
    Policy {
        /// The policy's name.
        name: String,
        /// Why.
        #[source]
        source: PolicyError,
    },
}

/// Why a process could not be taken on (not an error of the daemon).
#[derive(Debug, thiserror::Error)]
pub enum Refused<E: std::error::Error + 'static> {
    /// Not a process this daemon manages.
    #[error(transparent)]
    NotOurs(NotOurs<E>),
    /// Something failed while setting it up.
    #[error(transparent)]
    Failed(TakeOnError<E>),
}

/// What the daemon's loop needs of the machine. Every method that reads or changes the
/// machine is here; the loop itself holds only values.
pub trait DaemonHost {
    /// Its handle on one managed process.
    type Process: ProcessHost;
    /// What holds a claimed process until it is opened.
    type Lock;
    /// Why something failed.
    type Error: std::error::Error + Send + Sync + 'static;

    /// Now, on the monotonic clock the processes' samples use.
    fn now(&self) -> Nanos;
    /// Sleeps for `span` (`--oneshot` only; the loop waits in [`DaemonHost::wait`]).
    fn sleep(&mut self, span: Nanos);
    /// The signal received since the last call, if any.
    fn take_signal(&mut self) -> Option<Signal>;
    /// Waits up to `timeout` for a `ctl` command.
    fn wait(&mut self, timeout: Nanos) -> Option<Pending>;
    /// Replaces what `ctl status` and `ctl list` answer.
    fn publish(&mut self, snapshot: Snapshot);
    /// Whether a client asked for the per-thread view lately (only then is it built).
    fn threads_watched(&self) -> bool;
    /// The display window the last `threads` request asked for, in milliseconds.
    fn threads_window_ms(&self) -> u64;
    /// Replaces what `ctl threads` answers.
    fn publish_threads(&mut self, view: ThreadsView);
    /// The per-thread view of these windows (one per group, with its moves) on `machine`
    /// at its default level: each thread's name and mask are read now.
    fn threads_view(&self, machine: &Topology, windows: &[(Window, MoveCounts)]) -> ThreadsView;
    /// Each online CPU's busy time so far, stamped on the host's clock (`/proc/stat` on
    /// Linux), for the view's `busy` per group; `None` when it cannot be read.
    fn cpu_busy(&self) -> Option<(Nanos, Vec<(CpuId, Nanos)>)>;
    /// The running processes, with their names.
    fn list_processes(&mut self) -> Result<Vec<(Pid, String)>, ReadError>;
    /// One reading of process `pid` (`Ok(None)`: it has gone).
    fn read_process(&mut self, pid: Pid) -> Result<Option<ProcessReading>, ReadError>;
    /// The pids in the hands-off pid files.
    fn read_pid_files(&mut self, files: &[std::path::PathBuf]) -> PidFiles;
    /// What else on the machine places threads (`comms`: the running processes).
    fn competitors(&mut self, comms: &[(Pid, String)]) -> Result<Vec<Competitor>, ReadError>;
    /// The `cpuset.cpus.effective` of the process's cgroup (`None`: no cpuset controller).
    fn cpuset_of(&mut self, reading: &ProcessReading) -> Option<CpuSet>;
    /// The daemon's own pid (always hands-off).
    fn own_pid(&self) -> Pid;
    /// The daemon's own CPU time so far, in seconds, when readable.
    fn own_cpu_seconds(&self) -> Option<f64>;
    /// The CPUs `config` lets the daemon use.
    fn usable_cpus(&mut self, config: &Config) -> Result<Usable, Self::Error>;
    /// Claims process `pid`: checks it may be managed, reads its start time and the masks
    /// of its threads, takes its lock.
    fn claim(&mut self, pid: Pid) -> Result<Claimed<Self::Lock>, Refused<Self::Error>>;
    /// Opens a claimed process: its journal (when asked) and its sampler.
    fn open(
        &mut self,
        lock: Self::Lock,
        how: Open<'_>,
    ) -> Result<Self::Process, TakeOnError<Self::Error>>;
    /// Starts reading the config file again, from `old`'s file, without holding up the
    /// loop (its result comes from [`DaemonHost::reload_done`]).
    fn start_reload(&mut self, old: &Config) -> Result<(), ReloadError>;
    /// The reload under way's result, once there is one.
    fn reload_done(&mut self) -> Option<Result<Config, ReloadError>>;
}

/// What the daemon starts with.
pub struct Start {
    /// The config, validated.
    pub config: Config,
    /// Decide and log, change no mask.
    pub observe: bool,
    /// The CPUs it may use.
    pub usable: Usable,
    /// User names, for the rules' `user`.
    pub users: Users,
    /// The metrics it keeps.
    pub metrics: Arc<Metrics>,
}

/// The loop panicked (a bug): what it said (kept for a debugger; the line says only that
/// it panicked). Every mask was handed back all the same.
#[derive(Debug, thiserror::Error)]
#[error("internal error (panic)")]
pub struct Panicked(pub String);

/// The loop's state.
pub struct Daemon<H: DaemonHost> {
    host: H,
    config: Config,
    observe: bool,
    usable: Usable,
    users: Users,
    metrics: Arc<Metrics>,
    managed: BTreeMap<Pid, Managed<H::Process>>,
    /// The policy instances, each over one group of managed processes.
    groups: Groups,
    /// Processes taken on so far (orders them: the longest managed leads its group).
    taken: u64,
    /// Processes released by `ctl release` (pid, start time): left alone from then on.
    released: BTreeSet<(Pid, u64)>,
    /// Processes refused once (pid, start time), so the reason is logged once.
    refused: BTreeSet<(Pid, u64)>,
    readings: BTreeMap<Pid, ProcessReading>,
    /// The processes of the last window that no rule matched.
    no_rule: BTreeSet<Pid>,
    /// The processes of the last window a rule almost matched, and why it did not.
    candidates: Vec<Candidate>,
    /// When each almost-matched process (pid, start time) was last explained in the log.
    explained: BTreeMap<(Pid, u64), Nanos>,
    /// The snapshots each group's display window keeps while somebody watches `threads`.
    display: BTreeMap<u64, DisplayWindow>,
    last_sample: Nanos,
    /// Competitor lines already logged.
    warned: BTreeSet<String>,
    /// The pid files found unusable last window, so each is logged when it turns bad.
    bad_pid_files: BTreeSet<String>,
    /// The reload under way, with the `ctl reload`s to answer when it is done.
    reloading: Option<Vec<Pending>>,
    windows: u64,
    started: Nanos,
}

impl<H: DaemonHost> Daemon<H> {
    /// A daemon over `host`, managing nothing yet.
    pub fn new(host: H, start: Start) -> Daemon<H> {
        let now = host.now();
        Daemon {
            config: start.config,
            observe: start.observe,
            usable: start.usable,
            users: start.users,
            metrics: start.metrics,
            managed: BTreeMap::new(),
            groups: Groups::default(),
            taken: 0,
            released: BTreeSet::new(),
            refused: BTreeSet::new(),
            readings: BTreeMap::new(),
            no_rule: BTreeSet::new(),
            candidates: Vec::new(),
            explained: BTreeMap::new(),
            display: BTreeMap::new(),
            last_sample: now,
            warned: BTreeSet::new(),
            bad_pid_files: BTreeSet::new(),
            reloading: None,
            windows: 0,
            started: now,
            host,
        }
    }

    /// The running config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Whether it only decides and logs, changing no mask.
    pub fn observe(&self) -> bool {
        self.observe
    }

    /// The CPUs it uses.
    pub fn usable(&self) -> &Usable {
        &self.usable
    }

    /// The host.
    pub fn host(&self) -> &H {
        &self.host
    }

    /// The host, to change.
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// The pids managed now.
    pub fn managed(&self) -> impl Iterator<Item = Pid> + '_ {
        self.managed.keys().copied()
    }

    /// [`Daemon::serve`], then every process released whatever happened: a panic in the
    /// loop is caught and returned as [`Panicked`], and never leaves a mask changed.
    /// Returns the release's total and the signal that stopped the loop.
    pub fn run(&mut self) -> (<H::Process as ProcessHost>::Restored, Result<i32, Panicked>) {
        let looped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.serve()))
            .map_err(|panic| {
                Panicked(
                    panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default(),
                )
            });
        (self.release_all(), looped)
    }

    /// The loop; returns the signal that stopped it.
    pub fn serve(&mut self) -> i32 {
        let mut next_sample = self.host.now();
        let mut next_display = self.host.now();
        loop {
            match self.host.take_signal() {
                Some(Signal::Reload) => self.start_reload(None),
                Some(Signal::Stop(sig)) => return sig,
                None => {}
            }
            self.finish_reload();
            if self.host.now() >= next_sample {
                self.window();
                self.publish();
                next_sample = self.host.now() + self.config.daemon.sample_interval;
            }
            if !self.host.threads_watched() {
                self.display.clear();
            } else if self.host.now() >= next_display {
                next_display = self.publish_threads();
            }
            self.tick_groups();
            self.publish();
            let wake = self.next_wake(next_sample);
            if let Some(p) = self.host.wait(wake.min(SIGNAL_POLL)) {
                if p.command == Command::Threads {
                    next_display = self.publish_threads();
                    p.answer(Ok(crate::control::Done::ThreadsPublished));
                } else {
                    self.carry_out(p);
                }
            }
        }
    }

    /// Ticks each group that is due, and releases the processes that went.
    fn tick_groups(&mut self) {
        let now = self.host.now();
        let mut gone = Vec::new();
        for g in self.groups.by_id.values_mut() {
            let ticked = g.tick_if_due(
                now,
                &mut self.managed,
                &self.usable.machine,
                &self.metrics,
                self.observe,
            );
            gone.extend(ticked.gone);
        }
        for (pid, why) in gone {
            self.release(pid, why);
        }
    }

    /// How long until something is due.
    fn next_wake(&self, next_sample: Nanos) -> Nanos {
        let now = self.host.now();
        let mut left = next_sample.saturating_sub(now);
        for g in self.groups.by_id.values() {
            let live = g
                .members
                .iter()
                .any(|p| self.managed.get(p).is_some_and(|m| !m.paused));
            if live {
                left = left.min(g.next().saturating_sub(now));
            }
        }
        left
    }

    /// What `ctl status` and `ctl list` answer from now on.
    fn publish(&mut self) {
        let processes: Vec<ProcessEntry> = self
            .managed
            .values()
            .map(|m| ProcessEntry {
                pid: m.pid.0,
                comm: m.comm.clone(),
                rule: m.assignment.rule.clone(),
                policy: m.assignment.policy.clone(),
                threads: m.threads as u64,
                paused: m.paused,
                group: self.groups.of(m.pid).map_or(0, |g| g.id),
            })
            .collect();
        let status = Status {
            daemon_pid: self.host.own_pid().0,
            uptime_s: self.host.now().saturating_sub(self.started).0 / 1_000_000_000,
            config: self.config.summary(),
            observe: self.observe,
            managed_processes: processes.len() as u64,
            groups: self.groups.by_id.len() as u64,
            managed_threads: processes.iter().map(|p| p.threads).sum(),
            paused_processes: processes.iter().filter(|p| p.paused).count() as u64,
        };
        let candidates = self.candidates.clone();
        self.host.publish(Snapshot {
            status,
            processes,
            candidates,
        });
    }

    /// Re-forms the groups over the managed processes.
    fn regroup(&mut self) {
        let now = self.host.now();
        self.groups
            .regroup(&self.managed, &self.usable.machine, now);
    }

    /// Stops managing `pid`, restoring its masks (and only its), and re-forms its group
    /// without it.
    fn release(&mut self, pid: Pid, why: Why) -> Option<<H::Process as ProcessHost>::Restored> {
        let report = self.release_only(pid, why)?;
        self.regroup();
        Some(report)
    }

    /// Stops managing `pid`, restoring its masks; the groups are left as they are.
    fn release_only(
        &mut self,
        pid: Pid,
        why: Why,
    ) -> Option<<H::Process as ProcessHost>::Restored> {
        let m = self.managed.remove(&pid)?;
        let comm = m.comm;
        let report = m.host.release();
        let failed = report.failures();
        if failed > 0 {
            self.metrics.record_restore_failures(failed);
            for line in report.kept() {
                tracing::warn!("pid {pid}: {line}");
            }
        }
        // The handle on the shared counters went with the process's host: what it
        // counted can be said.
        let counted = report.counted().map_or(String::new(), |c| format!("; {c}"));
        tracing::info!("pid {pid} ({comm}) released ({why}): {report}{counted}");
        Some(report)
    }

    /// Releases every managed process.
    pub fn release_all(&mut self) -> <H::Process as ProcessHost>::Restored {
        let mut all = <H::Process as ProcessHost>::Restored::default();
        let pids: Vec<Pid> = self.managed.keys().copied().collect();
        for pid in pids {
            if let Some(r) = self.release_only(pid, Why::Stopping) {
                all.add(r);
            }
        }
        self.groups = Groups::default();
        self.metrics.set_managed(0, 0);
        self.metrics.set_groups(std::iter::empty());
        all
    }

    /// `--oneshot`: one window to measure, one placement per group of matched processes,
    /// every placement left as it is. Returns how many processes were placed.
    pub fn oneshot(&mut self) -> usize {
        self.sample();
        self.host.sleep(self.config.daemon.sample_interval);
        let matched = self.sample();
        for (pid, comm, assignment) in matched {
            match self.take_on(pid, &comm, assignment, false) {
                Ok(m) => {
                    self.managed.insert(pid, m);
                }
                Err(Refused::NotOurs(why)) => {
                    tracing::info!("pid {pid} ({comm}) left alone: {why}");
                }
                Err(Refused::Failed(e)) => tracing::warn!("pid {pid} ({comm}): {}", Chain(&e)),
            }
        }
        self.regroup();
        let gone = self.oneshot_ticks();
        let mut placed = 0;
        for (pid, m) in std::mem::take(&mut self.managed) {
            if gone.contains(&pid) {
                drop(m.host.release());
                continue;
            }
            let done = if self.observe {
                "decided for"
            } else {
                "placed"
            };
            tracing::info!("{done} pid {pid} ({}): {} threads", m.comm, m.threads);
            placed += 1;
            if self.observe {
                drop(m.host.release());
            } else {
                m.host.keep_placement();
            }
        }
        let done = if self.observe {
            "decided for, nothing changed"
        } else {
            "placed"
        };
        tracing::info!("one-shot: {placed} process(es) {done}");
        placed
    }

    /// Two ticks per group: the first measures nothing yet, the second decides on a
    /// window, as a policy always does. Returns the processes that went meanwhile.
    fn oneshot_ticks(&mut self) -> BTreeSet<Pid> {
        let ids: Vec<u64> = self.groups.by_id.keys().copied().collect();
        let mut gone = BTreeSet::new();
        for id in ids {
            for turn in 0..2 {
                let Some(next) = self.groups.by_id.get(&id).map(|g| g.next()) else {
                    break;
                };
                if turn == 1 {
                    let wait = next.saturating_sub(self.host.now());
                    self.host.sleep(wait);
                }
                let now = next.max(self.host.now());
                let Some(g) = self.groups.by_id.get_mut(&id) else {
                    break;
                };
                let ticked = g.tick_if_due(
                    now,
                    &mut self.managed,
                    &self.usable.machine,
                    &self.metrics,
                    self.observe,
                );
                for (pid, why) in ticked.gone {
                    tracing::info!("pid {pid}: {why}");
                    gone.insert(pid);
                }
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests;
