//! The daemon's Linux host: what the loop in `threadbalance_daemon::serve` needs of this
//! machine. Processes are read under `/proc`, each managed one through the host `attach`
//! uses (a [`LinuxAdapter`] on the process) with its own journal and lock, `ctl` comes in
//! through the control socket's [`Inbox`], and a reload reads the file on a thread of its
//! own.
//!
//! ```text
//!  claim: permit? start time ─► lock.<pid>.<start> free? ─► its threads' masks
//!  open:  journal in <state>/managed.<pid>.<start>/ (unless one-shot or observing)
//!         ─► adapter on the process, its run time read through the daemon's one probe
//!  release: restore_all ─► subdir removed (when every mask went back)
//! ```
//!
//! Each managed process has a journal of its own, in a subdirectory of the state directory
//! named after it, because a journal is one file per instance and per actuator: a daemon
//! killed by SIGKILL leaves one journal per process it had changed, and the next daemon
//! (or `threadbalance restore`) replays every one of them (see [`crate::recover::restore_tree`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, TryRecvError};
use threadbalance_daemon::competitor::Competitor;
use threadbalance_daemon::control::channel::{Inbox, Pending, Snapshot};
use threadbalance_daemon::control::threads::{DEFAULT_WINDOW_MS, MoveCounts, ThreadsView};
use threadbalance_daemon::process::ProcessReading;
use threadbalance_daemon::read::{self, PidFiles};
use threadbalance_daemon::serve::managed::{ProcessHost, Restored};
use threadbalance_daemon::serve::{
    Claimed, DaemonHost, NotOurs, Open, Refused, Signal, TakeOnError, Usable,
};
use threadbalance_daemon::{Config, ReadError, ReloadError, banned};
use threadbalance_linux::adapter::{LinuxAdapter, Target};
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::runshare::{SharedCounters, Watch};
use threadbalance_linux::signal;
use threadbalance_linux::state::{ProcessLock, StateDir};
use threadbalance_linux::{LinuxError, Root};
use threadbalance_manage::joined::Member;
use threadbalance_model::{
    ApplyReport, CpuSet, ModelError, Nanos, Pid, Plan, Snapshot as Sample, Tid, Topology, Window,
};
use threadbalance_policy::Host;

/// Why the daemon's host failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// A system call or a file of the linux crate.
    #[error(transparent)]
    Linux(#[from] LinuxError),
    /// The rule's policy reads hardware counters and this machine has none (the one line
    /// that says why).
    #[error(transparent)]
    Counters(Box<dyn std::error::Error + Send + Sync>),
    /// The machine's topology, or the masks of a process's threads, could not be read.
    #[error(transparent)]
    Machine(Box<dyn std::error::Error + Send + Sync>),
    /// The kernel's banned CPUs could not be read.
    #[error(transparent)]
    Bans(#[from] ReadError),
    /// The config's CPUs leave none to use.
    #[error(transparent)]
    Usable(#[from] banned::NoCpuLeft),
    /// The machine could not be cut down to the usable CPUs.
    #[error(transparent)]
    Restrict(#[from] ModelError),
}

impl HostError {
    /// Whether the operator can fix it in the config or on the command line (exit 2).
    pub fn is_input(&self) -> bool {
        matches!(self, HostError::Bans(_) | HostError::Usable(_))
    }
}

impl From<anyhow::Error> for HostError {
    fn from(e: anyhow::Error) -> HostError {
        HostError::Machine(e.into())
    }
}

/// The daemon on this machine.
pub struct LinuxDaemon {
    root: Root,
    ticks_per_sec: u64,
    state: StateDir,
    /// The control socket's side of the loop (none for `--oneshot`).
    inbox: Option<Inbox>,
    /// The run-time counters every managed process's sampler reads: one BPF probe for the
    /// daemon (feature `bpf`), loaded when the first process is taken on.
    counters: SharedCounters,
    /// The config file, as named on the command line.
    path: PathBuf,
    /// The reload under way: its thread's result.
    reloading: Option<Receiver<Result<Config, ReloadError>>>,
}

impl LinuxDaemon {
    /// The host of a daemon reading `path`, journaling under `state`.
    pub fn new(path: PathBuf, state: StateDir, ticks_per_sec: u64) -> LinuxDaemon {
        LinuxDaemon {
            root: Root::system(),
            ticks_per_sec,
            state,
            inbox: None,
            counters: SharedCounters::new(),
            path,
            reloading: None,
        }
    }

    /// Answers `ctl` through `inbox` from now on.
    pub fn serve_control(&mut self, inbox: Inbox) {
        self.inbox = Some(inbox);
    }
}

/// The CPUs the daemon may use (online, within `cpus`, less the banned ones), and the
/// machine cut down to them.
pub fn usable_cpus(root: &Root, config: &Config) -> Result<Usable, HostError> {
    let topo = crate::usable::read_usable()?;
    let bans = read::read_kernel_bans(root)?;
    let cpus = banned::usable_cpus(topo.online(), &config.daemon, &bans)?;
    let machine = topo.restricted_to(&cpus)?;
    Ok(Usable { cpus, machine })
}

impl DaemonHost for LinuxDaemon {
    type Process = LinuxProcess;
    type Lock = ProcessLock;
    type Error = HostError;

    fn now(&self) -> Nanos {
        threadbalance_linux::host::monotonic_now()
    }

    fn sleep(&mut self, span: Nanos) {
        std::thread::sleep(std::time::Duration::from_nanos(span.0));
    }

    fn take_signal(&mut self) -> Option<Signal> {
        signal::take_signal().map(|sig| match sig {
            libc::SIGHUP => Signal::Reload,
            other => Signal::Stop(other),
        })
    }

    fn wait(&mut self, timeout: Nanos) -> Option<Pending> {
        let timeout = std::time::Duration::from_nanos(timeout.0);
        match &self.inbox {
            Some(inbox) => inbox.wait(timeout),
            None => {
                std::thread::sleep(timeout);
                None
            }
        }
    }

    fn publish(&mut self, snapshot: Snapshot) {
        if let Some(inbox) = &self.inbox {
            inbox.publish(snapshot);
        }
    }

    fn threads_watched(&self) -> bool {
        self.inbox.as_ref().is_some_and(Inbox::threads_watched)
    }

    fn threads_window_ms(&self) -> u64 {
        self.inbox
            .as_ref()
            .map_or(DEFAULT_WINDOW_MS, Inbox::threads_window_ms)
    }

    fn publish_threads(&mut self, view: ThreadsView) {
        if let Some(inbox) = &self.inbox {
            inbox.publish_threads(view);
        }
    }

    fn threads_view(&self, machine: &Topology, windows: &[(Window, MoveCounts)]) -> ThreadsView {
        crate::top::gather::view_of(
            machine,
            machine.default_level(),
            windows.iter().map(|(w, moved)| (w, moved)),
        )
    }

    fn cpu_busy(&self) -> Option<(Nanos, Vec<(threadbalance_model::CpuId, Nanos)>)> {
        crate::top::gather::cpu_reading()
    }

    fn list_processes(&mut self) -> Result<Vec<(Pid, String)>, ReadError> {
        read::read_comms(&self.root)
    }

    fn read_process(&mut self, pid: Pid) -> Result<Option<ProcessReading>, ReadError> {
        read::read_process(&self.root, pid, self.ticks_per_sec)
    }

    fn read_pid_files(&mut self, files: &[PathBuf]) -> PidFiles {
        read::read_pid_files(&self.root, files)
    }

    fn competitors(&mut self, comms: &[(Pid, String)]) -> Result<Vec<Competitor>, ReadError> {
        read::read_competitors(&self.root, comms)
    }

    fn cpuset_of(&mut self, reading: &ProcessReading) -> Option<CpuSet> {
        let cg = read::cpuset_cgroup(reading)?;
        read::read_cpuset_effective(&self.root, &cg).ok().flatten()
    }

    fn own_pid(&self) -> Pid {
        Pid(std::process::id() as i32)
    }

    fn own_cpu_seconds(&self) -> Option<f64> {
        threadbalance_daemon::metrics::own_cpu_seconds().ok()
    }

    fn usable_cpus(&mut self, config: &Config) -> Result<Usable, HostError> {
        usable_cpus(&self.root, config)
    }

    fn claim(&mut self, pid: Pid) -> Result<Claimed<ProcessLock>, Refused<HostError>> {
        let not_ours = |e: LinuxError| Refused::NotOurs(NotOurs::Unreadable(e.into()));
        let me = self.own_pid();
        if let Some(why) =
            threadbalance_linux::permit::refusal(&self.root, pid, me).map_err(not_ours)?
        {
            return Err(Refused::NotOurs(NotOurs::Refused(why)));
        }
        let start = threadbalance_linux::read_start_time(&self.root, pid, Tid(pid.0))
            .map_err(not_ours)?
            .ok_or(Refused::NotOurs(NotOurs::Exited))?;
        let failed = |e: HostError| Refused::Failed(TakeOnError::Host(e));
        let lock = self
            .state
            .lock_process(pid, start)
            .map_err(|e| failed(e.into()))?
            .map_err(|busy| {
                Refused::NotOurs(NotOurs::Locked {
                    holder: busy.holder,
                })
            })?;
        let program = crate::usable::read_allowed_for(pid)
            .map_err(|e| failed(e.into()))?
            .online()
            .clone();
        Ok(Claimed {
            start,
            program,
            lock,
        })
    }

    fn open(
        &mut self,
        lock: ProcessLock,
        how: Open<'_>,
    ) -> Result<LinuxProcess, TakeOnError<HostError>> {
        let failed = |e: LinuxError| TakeOnError::Host(HostError::Linux(e));
        // A policy that reads hardware counters is refused here, before anything is
        // changed, on a machine without them.
        let hw = crate::host::counter_source(
            how.policy,
            how.policy.name(),
            crate::host::CounterAsk::Policy,
        )
        .map_err(|e| TakeOnError::Host(HostError::Counters(e.into())))?;
        let (dir, journal) = if how.journal {
            let dir = journal_dir(&self.state, how.pid, how.start);
            let j = StateDir::new(&dir)
                .open_journal(&self.root)
                .map_err(failed)?;
            (Some(dir), Some(j))
        } else {
            (None, None)
        };
        // The adapter places on the machine: a move names a domain of the group's
        // topology, translated to the machine's (`joined::translate`), and the actuator
        // never gives a thread a CPU outside the mask it had.
        let handed = self.counters.handle();
        if cfg!(feature = "bpf")
            && let Some(source) = &handed.loaded
        {
            tracing::info!("{}", source.describe());
        }
        let adapter = LinuxAdapter::with_counters(
            how.machine,
            Target::Attached {
                pid: how.pid,
                follow_children: false,
            },
            how.observe,
            how.policy.needs(),
            journal,
            handed.counters,
        );
        let mut adapter = match adapter {
            Ok(a) => a,
            Err(e) => {
                if let Some(d) = &dir {
                    remove_journal_dir(d);
                }
                return Err(failed(e));
            }
        };
        if let Some(source) = hw {
            adapter.read_hw_counters(source);
        }
        Ok(LinuxProcess {
            pid: how.pid,
            adapter,
            dir,
            watch: handed.watch,
            _lock: lock,
        })
    }

    fn start_reload(&mut self, old: &Config) -> Result<(), ReloadError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let (path, file) = (self.path.clone(), old.file.clone());
        std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || {
                let parsed =
                    read::read_config_text(&path).and_then(|text| Config::parse(&file, &text));
                let _ = tx.send(parsed.map_err(ReloadError::from));
            })
            .map_err(|e| ReloadError::Spawn(std::sync::Arc::new(e)))?;
        self.reloading = Some(rx);
        Ok(())
    }

    fn reload_done(&mut self) -> Option<Result<Config, ReloadError>> {
        let rx = self.reloading.as_ref()?;
        let done = match rx.try_recv() {
            Ok(parsed) => parsed,
            Err(TryRecvError::Empty) => return None,
            Err(TryRecvError::Disconnected) => Err(ReloadError::Lost),
        };
        self.reloading = None;
        Some(done)
    }
}

/// The journal subdirectory of process `pid` started at `start`.
fn journal_dir(state: &StateDir, pid: Pid, start: u64) -> PathBuf {
    state.path().join(format!("managed.{}.{start}", pid.0))
}

/// Removes a process's journal directory once its journal is gone.
fn remove_journal_dir(dir: &Path) {
    let _ = std::fs::remove_dir(dir);
}

/// One managed process on this machine: its adapter, journal directory and lock.
pub struct LinuxProcess {
    pid: Pid,
    adapter: LinuxAdapter,
    dir: Option<PathBuf>,
    /// What its handle on the daemon's shared run-time counters did (for the release line).
    watch: Watch,
    _lock: ProcessLock,
}

/// What releasing processes did: the masks restored, and (for one process) what its
/// handle on the shared counters counted.
#[derive(Debug, Default)]
pub struct Released {
    /// The masks put back, kept or failed.
    pub report: RestoreReport,
    watch: Option<Watch>,
}

impl fmt::Display for Released {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::recover::describe(&self.report))
    }
}

impl Restored for Released {
    fn failures(&self) -> u64 {
        self.report.failures().count() as u64
    }

    fn kept(&self) -> Vec<String> {
        crate::recover::kept_lines(&self.report)
    }

    fn counted(&self) -> Option<String> {
        self.watch.as_ref()?.describe()
    }

    fn add(&mut self, other: Released) {
        self.report.add(other.report);
    }
}

impl Host for LinuxProcess {
    type Error = LinuxError;

    fn now(&self) -> Nanos {
        self.adapter.now()
    }

    fn sample(&mut self, into: &mut Sample) -> Result<(), LinuxError> {
        let sampled = self.adapter.sample(into);
        if let Some(why) = threadbalance_linux::tracegate::shut_news() {
            // Said as the run-time source is (info): a verdict on cost, not an error.
            tracing::info!(
                "the trace of sched_setaffinity was let go for every managed process: {why}; \
                 the programs' own masks are judged from the masks alone from now on"
            );
        }
        sampled
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        self.adapter.apply(plan)
    }
}

impl Member for LinuxProcess {
    fn pid(&self) -> Pid {
        self.pid
    }

    fn exited(&mut self) -> bool {
        self.adapter.target_exited()
    }

    fn machine_time_elsewhere(&mut self, elsewhere: bool) {
        self.adapter.machine_time_elsewhere(elsewhere);
    }
}

impl ProcessHost for LinuxProcess {
    type Failure = LinuxError;
    type Restored = Released;

    fn mask_of(&self, tid: Tid) -> Option<CpuSet> {
        threadbalance_linux::affinity_of(tid).ok()
    }

    fn thread_masks(&self) -> Vec<CpuSet> {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .filter_map(|tid| threadbalance_linux::affinity_of(Tid(tid)).ok())
            .collect()
    }

    fn release(mut self) -> Released {
        let report = self.adapter.restore_all();
        if report.failures().next().is_none()
            && let Some(d) = self.dir.take()
        {
            remove_journal_dir(&d);
        }
        // The adapter (and its handle on the shared counters) goes first: its slots are
        // freed by the time the release line says what it counted.
        let LinuxProcess { adapter, watch, .. } = self;
        drop(adapter);
        Released {
            report,
            watch: Some(watch),
        }
    }

    fn keep_placement(self) {
        // The actuator restores when dropped; a one-shot placement is meant to stay, so
        // the adapter alone is not dropped (the process is about to exit, which closes
        // what it holds). The process lock and the rest are released as usual.
        let LinuxProcess { adapter, .. } = self;
        std::mem::forget(adapter);
    }
}
