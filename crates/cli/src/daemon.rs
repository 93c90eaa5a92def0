//! `threadbalance daemon --config FILE.toml`: operator mode, a whole machine managed from
//! one config file (see the `threadbalance-daemon` crate for the config, the rules, the
//! control socket and the metrics).
//!
//! ```text
//!  log init ─► read config (bad: one line, exit 2) ─► replay journals of dead instances
//!  ─► bind metrics and control socket (refused: one line, exit 2) ─► loop {
//!      every sample_ms: list processes, read each, facts over the window, match the rules
//!        matched, new ─► Managed::start (its own journal)  ·  no longer matched ─► release
//!        groups re-formed: processes sharing CPUs under one policy and level are one
//!      each group: tick when its policy is due, over all its processes' threads
//!      publish status/list, metrics; answer ctl commands while waiting
//!      SIGHUP, ctl reload ─► a reload thread reads (capped, no FIFO wait) and parses the
//!        file; the loop goes on meanwhile (signals and ctl answered) and takes the result
//!        when ready (bad: keep the old one, one log line)
//!      SIGTERM, SIGINT, … ─► stop (also while a reload is under way)
//!  } ─► release every process (restore every mask) ─► exit 0 (1 if one could not be)
//! ```
//!
//! `--oneshot` matches once (over one window), places each matched process with one
//! policy decision and exits leaving the placement, as irqbalance's one-shot mode leaves
//! its IRQs; nothing is journaled, so nothing undoes it later. `--observe` (or
//! `observe = true`) decides and logs but changes no mask, as `--dry-run` does.

mod groups;
mod managed;
mod threads;

use crate::input_error;
use anyhow::{Context, Result};
use clap::Args;
use groups::Groups;
use managed::{Assignment, Managed, Refused, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use threadbalance_daemon::control::channel::{Command, Inbox, Pending, Snapshot};
use threadbalance_daemon::control::socket::ControlServer;
use threadbalance_daemon::control::{Candidate, ProcessEntry, Status};
use threadbalance_daemon::metrics::Metrics;
use threadbalance_daemon::metrics::exposition::{Exposure, MetricsServer};
use threadbalance_daemon::process::{ProcessReading, Users, facts_between};
use threadbalance_daemon::rule::near_miss;
use threadbalance_daemon::{Config, Decision, HandsOff, log, read};
use threadbalance_linux::Root;
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::runshare::SharedCounters;
use threadbalance_linux::signal;
use threadbalance_linux::state::StateDir;
use threadbalance_model::{CpuSet, DisplayWindow, Level, Nanos, Pid, Topology};
use threadbalance_policy::PolicyKind;

/// Options of `threadbalance daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The config file (see `packaging/threadbalance.toml`).
    #[arg(long, value_name = "FILE.toml")]
    pub config: PathBuf,
    /// Match and place once, then exit leaving the placement.
    #[arg(long)]
    pub oneshot: bool,
    /// Decide and report, change no mask (as the config's `observe = true`).
    #[arg(long)]
    pub observe: bool,
    /// Serve metrics here instead of the config's `metrics` address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Log filter (`debug`, `warn,threadbalance_daemon=debug`) [default: $THREADBALANCE_LOG
    /// or info].
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
}

/// How long a `ctl` change may wait for the loop (inside the socket's 5 s per client).
const ANSWER_WITHIN: Duration = Duration::from_secs(4);
/// The longest the loop waits without looking at signals.
const SIGNAL_POLL: Duration = Duration::from_millis(100);
/// Competitors are looked for every this many windows.
const COMPETITORS_EVERY: u64 = 30;
/// A process a rule almost matched is explained in the log at most once this often. The
/// match runs every `sample_ms` (a second by default): once a window would be 3,600 lines
/// an hour for one compressor that keeps missing by the same amount, and the reason
/// rarely changes within minutes; once per process alone would hide that it is still
/// missing an hour later. Ten minutes is at most six lines an hour for each such process,
/// and `ctl list --all` shows the current reason at any time.
const EXPLAIN_EVERY: Duration = Duration::from_secs(600);

/// A reload under way: the config file read and parsed on a thread of its own, so that a
/// slow file (or a large one) never holds up the loop, its signals or `ctl`.
struct Reloading {
    /// The new config, or the line saying why the running one is kept.
    result: std::sync::mpsc::Receiver<Result<Config, String>>,
    /// The `ctl reload`s to answer when it is done.
    waiting: Vec<Pending>,
}

/// The loop's state.
struct Daemon {
    path: PathBuf,
    config: Config,
    observe: bool,
    root: Root,
    ticks_per_sec: u64,
    usable: CpuSet,
    /// The machine cut down to `usable`: its default level's domains are the metrics'.
    machine: Topology,
    users: Users,
    state: StateDir,
    metrics: Arc<Metrics>,
    managed: BTreeMap<Pid, Managed>,
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
    explained: BTreeMap<(Pid, u64), Instant>,
    /// The snapshots each group's display window keeps while somebody watches `threads`.
    display: BTreeMap<u64, DisplayWindow>,
    last_sample: Instant,
    warned: BTreeSet<String>,
    /// The pid files found unusable last window, so each is logged when it turns bad.
    bad_pid_files: BTreeSet<String>,
    /// The reload under way on its own thread, if any.
    reloading: Option<Reloading>,
    windows: u64,
    started: Instant,
    restore_failures: u64,
    /// The run-time counters every managed process's sampler reads: one BPF probe for the
    /// daemon (feature `bpf`), loaded when the first process is taken on.
    counters: SharedCounters,
}

/// `threadbalance daemon`.
pub fn run(args: &DaemonArgs) -> Result<u8> {
    // Said first, as such: without it every later step fails on a permission of its own.
    // Root, or CAP_SYS_NICE as the packaged unit gives it.
    let system = Root::system();
    if !threadbalance_linux::permit::we_are_root(&system)
        && !threadbalance_linux::permit::we_may_renice_any(&system)
    {
        return Err(input_error(
            "daemon needs root (or CAP_SYS_NICE): it changes every user's threads and keeps \
             its journal and socket under /run; run it as root, or manage your own program \
             with `threadbalance run -- CMD` or `threadbalance attach --pid PID`",
        ));
    }
    let settings = log::LogSettings::detect(args.log_level.as_deref())
        .map_err(|e| input_error(format!("--log-level: {e}")))?;
    let config = read::read_config(&args.config).map_err(|e| input_error(e.to_string()))?;
    let _ = log::init(&settings);
    let observe = args.observe || config.daemon.observe;
    let root = Root::system();
    let state = StateDir::new(&config.daemon.state_dir);
    crate::recover::ready_state_dir(&state)?;
    let (report, journals) = crate::recover::restore_tree(&state, &root)?;
    if journals > 0 {
        tracing::warn!(
            "{journals} journal(s) left by instances that died under {}: {}",
            state.path().display(),
            crate::recover::describe(&report)
        );
    }
    let (usable, machine) = usable_cpus(&root, &config)?;
    let ticks_per_sec = threadbalance_linux::HostFacts::system()?.ticks_per_sec;
    let metrics = Arc::new(Metrics::new());
    let mut d = Daemon {
        path: args.config.clone(),
        observe,
        users: read::read_users(&root).unwrap_or_default(),
        ticks_per_sec,
        usable,
        machine,
        state,
        metrics: Arc::clone(&metrics),
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
        last_sample: Instant::now(),
        warned: BTreeSet::new(),
        bad_pid_files: BTreeSet::new(),
        reloading: None,
        windows: 0,
        started: Instant::now(),
        restore_failures: 0,
        counters: SharedCounters::new(),
        root,
        config,
    };
    signal::catch_fatal_signals().context("installing signal handlers")?;
    if args.oneshot {
        return oneshot(&mut d);
    }
    let exposition = match args.metrics.or(d.config.daemon.metrics) {
        Some(addr) => {
            let server = MetricsServer::bind(addr, Exposure::of(&d.config.daemon))
                .map_err(|e| input_error(format!("metrics: {e}")))?;
            Some(
                server
                    .spawn(metrics, |e| tracing::warn!("metrics: {e}"))
                    .map_err(|e| input_error(format!("metrics: {e}")))?,
            )
        }
        None => None,
    };
    let (control, inbox) =
        threadbalance_daemon::control::channel::channel(Snapshot::default(), ANSWER_WITHIN);
    let server = ControlServer::bind(&d.config.daemon.control_socket)
        .map_err(|e| input_error(format!("control socket: {e}")))?
        .spawn(Arc::new(control), |e| tracing::warn!("control: {e}"))
        .map_err(|e| input_error(format!("control socket: {e}")))?;
    if let Some(e) = &exposition {
        tracing::info!("metrics on http://{}/metrics", e.local_addr());
    }
    tracing::info!(
        "control socket {}",
        d.config.daemon.control_socket.display()
    );
    tracing::info!(
        "started: {}; {}; CPUs {}{}",
        d.config.file,
        d.config.summary(),
        d.usable,
        if d.observe {
            "; observing, changing nothing"
        } else {
            ""
        }
    );
    let looped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| d.serve(&inbox)))
        .unwrap_or_else(|_| Err(anyhow::anyhow!("internal error (panic)")));
    let released = d.release_all();
    server.stop();
    if let Some(e) = exposition {
        e.stop();
    }
    let failed = released.failures().count();
    match &looped {
        Ok(sig) => tracing::info!(
            "stopped by {}: {}",
            signal::signal_name(*sig),
            crate::recover::describe(&released)
        ),
        Err(e) => tracing::error!("stopped: {e:#}; {}", crate::recover::describe(&released)),
    }
    looped?;
    Ok(if failed > 0 { 1 } else { 0 })
}

/// `--oneshot`: one window to measure, one placement per group of matched processes,
/// exit.
fn oneshot(d: &mut Daemon) -> Result<u8> {
    d.sample();
    std::thread::sleep(Duration::from_nanos(d.config.daemon.sample_interval.0));
    let matched = d.sample();
    for (pid, comm, assignment) in matched {
        d.taken += 1;
        let cpuset = d.cpuset_of(pid);
        match Managed::start(
            pid,
            &comm,
            assignment,
            &d.machine,
            &d.state,
            d.observe,
            false,
            d.taken,
            cpuset,
            &mut d.counters,
        ) {
            Ok(m) => {
                d.managed.insert(pid, m);
            }
            Err(Refused::NotOurs(why)) => tracing::info!("pid {pid} ({comm}) left alone: {why}"),
            Err(Refused::Failed(e)) => tracing::warn!("pid {pid} ({comm}): {e:#}"),
        }
    }
    let now = threadbalance_linux::host::monotonic_now();
    d.groups.regroup(&d.managed, &d.machine, now);
    // Two ticks per group: the first measures nothing yet, the second decides on a window,
    // as a policy always does.
    let ids: Vec<u64> = d.groups.by_id.keys().copied().collect();
    let mut gone = BTreeSet::new();
    for id in ids {
        for turn in 0..2 {
            let Some(g) = d.groups.by_id.get_mut(&id) else {
                break;
            };
            if turn == 1 {
                std::thread::sleep(Duration::from_nanos(
                    g.next()
                        .saturating_sub(threadbalance_linux::host::monotonic_now())
                        .0,
                ));
            }
            let now = g.next().max(threadbalance_linux::host::monotonic_now());
            let ticked = g.tick_if_due(now, &mut d.managed, &d.machine, &d.metrics, d.observe);
            for (pid, why) in ticked.gone {
                tracing::info!("pid {pid}: {why}");
                gone.insert(pid);
            }
        }
    }
    let mut placed = 0;
    for (pid, m) in std::mem::take(&mut d.managed) {
        if gone.contains(&pid) {
            drop(m.release());
            continue;
        }
        let done = if d.observe { "decided for" } else { "placed" };
        tracing::info!("{done} pid {pid} ({}): {} threads", m.comm, m.threads);
        placed += 1;
        if d.observe {
            drop(m.release());
        } else {
            m.keep_placement();
        }
    }
    let done = if d.observe {
        "decided for, nothing changed"
    } else {
        "placed"
    };
    tracing::info!("one-shot: {placed} process(es) {done}");
    Ok(0)
}

/// The CPUs the daemon may use (online, within `cpus`, less the banned ones), and the
/// machine cut down to them.
fn usable_cpus(root: &Root, config: &Config) -> Result<(CpuSet, Topology)> {
    let topo = crate::usable::read_usable()?;
    let bans = read::read_kernel_bans(root).map_err(|e| input_error(e.to_string()))?;
    let usable = threadbalance_daemon::banned::usable_cpus(topo.online(), &config.daemon, &bans)
        .map_err(input_error)?;
    let machine = topo.restricted_to(&usable)?;
    Ok((usable, machine))
}

impl Daemon {
    /// The loop; returns the signal that stopped it.
    fn serve(&mut self, inbox: &Inbox) -> Result<i32> {
        let mut next_sample = Instant::now();
        let mut next_display = Instant::now();
        loop {
            if let Some(sig) = signal::take_signal() {
                if sig == libc::SIGHUP {
                    self.start_reload(None);
                } else {
                    return Ok(sig);
                }
            }
            self.finish_reload();
            if Instant::now() >= next_sample {
                self.window();
                self.publish(inbox);
                next_sample =
                    Instant::now() + Duration::from_nanos(self.config.daemon.sample_interval.0);
            }
            if !inbox.threads_watched() {
                self.display.clear();
            } else if Instant::now() >= next_display {
                next_display = self.publish_threads(inbox);
            }
            let now = threadbalance_linux::host::monotonic_now();
            let mut gone = Vec::new();
            for g in self.groups.by_id.values_mut() {
                let ticked = g.tick_if_due(
                    now,
                    &mut self.managed,
                    &self.machine,
                    &self.metrics,
                    self.observe,
                );
                gone.extend(ticked.gone);
            }
            for (pid, why) in gone {
                self.release(pid, &why);
            }
            self.publish(inbox);
            let wake = self.next_wake(next_sample);
            if let Some(p) = inbox.wait(wake.min(SIGNAL_POLL)) {
                if p.command == Command::Threads {
                    next_display = self.publish_threads(inbox);
                    p.answer(Ok(String::new()));
                } else {
                    self.carry_out(p, inbox);
                }
            }
        }
    }

    /// How long until something is due.
    fn next_wake(&self, next_sample: Instant) -> Duration {
        let mut left = next_sample.saturating_duration_since(Instant::now());
        let now = threadbalance_linux::host::monotonic_now();
        for g in self.groups.by_id.values() {
            let live = g
                .members
                .iter()
                .any(|p| self.managed.get(p).is_some_and(|m| !m.paused));
            if live {
                left = left.min(Duration::from_nanos(g.next().saturating_sub(now).0));
            }
        }
        left
    }

    /// Reads every process, and returns those a rule manages, with its assignment.
    fn sample(&mut self) -> Vec<(Pid, String, Assignment)> {
        let elapsed = Nanos(self.last_sample.elapsed().as_nanos() as u64);
        self.last_sample = Instant::now();
        let comms = match read::read_comms(&self.root) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("listing processes: {e}");
                return Vec::new();
            }
        };
        if self.windows.is_multiple_of(COMPETITORS_EVERY) {
            self.competitors(&comms);
        }
        self.windows += 1;
        let read = read::read_pid_files(&self.root, &self.config.daemon.hands_off_pid_files);
        let bad: BTreeSet<String> = read.bad.iter().map(|e| e.to_string()).collect();
        for line in bad.difference(&self.bad_pid_files) {
            tracing::warn!("hands-off pid file skipped, the others still count: {line}");
        }
        self.bad_pid_files = bad;
        let mut pids = read.pids;
        pids.insert(Pid(std::process::id() as i32));
        self.config.rules.hands_off_pids = pids;
        let busy = self.config.daemon.busy_thread_percent;
        let mut readings = BTreeMap::new();
        let mut matched = Vec::new();
        let mut no_rule = BTreeSet::new();
        let mut candidates = Vec::new();
        for (pid, _) in comms {
            let reading = match read::read_process(&self.root, pid, self.ticks_per_sec) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!("pid {pid}: {e}");
                    continue;
                }
            };
            let before = self.readings.get(&pid).unwrap_or(&reading);
            let facts = facts_between(before, &reading, elapsed, busy, &self.users);
            let decision = threadbalance_daemon::match_process(&self.config.rules, &facts);
            if matches!(decision, Decision::HandsOff(HandsOff::NoRule)) {
                no_rule.insert(pid);
                if let Some(miss) = near_miss(&self.config.rules, &facts, busy) {
                    candidates.push((
                        reading.start_time,
                        Candidate {
                            pid: pid.0,
                            comm: reading.comm.clone(),
                            rule: miss.rule.name.clone(),
                            why: miss.why,
                        },
                    ));
                }
            }
            if let Decision::Manage { rule, placement } = decision
                && !self.released.contains(&(pid, reading.start_time))
            {
                let level = placement
                    .level
                    .unwrap_or_else(|| self.default_level(placement.policy_name()));
                matched.push((
                    pid,
                    reading.comm.clone(),
                    Assignment {
                        rule: rule.name.clone(),
                        policy: placement.policy_name().to_string(),
                        settings: placement.settings(level),
                    },
                ));
            }
            readings.insert(pid, reading);
        }
        self.readings = readings;
        self.no_rule = no_rule;
        self.explain(candidates);
        matched
    }

    /// Logs why each process a rule almost matched is not managed (at most once per
    /// [`EXPLAIN_EVERY`] for each), and keeps them for `ctl list --all`.
    fn explain(&mut self, candidates: Vec<(u64, Candidate)>) {
        let alive: BTreeSet<(Pid, u64)> = self
            .readings
            .iter()
            .map(|(pid, r)| (*pid, r.start_time))
            .collect();
        self.explained.retain(|k, _| alive.contains(k));
        self.candidates.clear();
        for (start, c) in candidates {
            let key = (Pid(c.pid), start);
            if self
                .explained
                .get(&key)
                .is_none_or(|at| at.elapsed() >= EXPLAIN_EVERY)
            {
                tracing::info!(
                    "pid {} ({}) not managed: rule {:?} almost matched: {}",
                    c.pid,
                    c.comm,
                    c.rule,
                    c.why
                );
                self.explained.insert(key, Instant::now());
            }
            self.candidates.push(c);
        }
    }

    /// The level a rule without one balances at: its policy's own
    /// ([`PolicyKind::default_level`]; the machine's widest level with more than one domain
    /// for a name that is not a policy kind).
    fn default_level(&self, policy: &str) -> Level {
        policy.parse::<PolicyKind>().map_or_else(
            |_| self.machine.default_level(),
            |kind| kind.default_level(&self.machine),
        )
    }

    /// Sets each domain's utilization (default level) from the managed threads' last
    /// windows: busy managed-thread time over the domain's CPU time.
    fn domain_metrics(&self) {
        let level = self.machine.default_level();
        let mut util = vec![0.0; self.machine.domains(level).len()];
        for g in self.groups.by_id.values() {
            let load = g.window().domain_load(&self.machine, level);
            for (u, add) in util.iter_mut().zip(&load.util) {
                *u += add;
            }
        }
        for (i, u) in util.iter().enumerate() {
            self.metrics
                .set_domain_utilization(&threadbalance_daemon::metrics::domain_label(level, i), *u);
        }
    }

    /// One window: match, take on the new, release those no longer matched.
    fn window(&mut self) {
        let matched = self.sample();
        let wanted: BTreeMap<Pid, &Assignment> =
            matched.iter().map(|(pid, _, a)| (*pid, a)).collect();
        let mut stale = Vec::new();
        for (pid, m) in &mut self.managed {
            let verdict = managed::after_window(
                &m.assignment.rule,
                wanted.get(pid).map(|a| a.rule.as_str()),
                self.no_rule.contains(pid),
                self.readings.get(pid).map(|r| r.start_time) == Some(m.start),
                m.misses,
            );
            match verdict {
                Verdict::Keep { misses } => m.misses = misses,
                Verdict::Release(why) => stale.push((*pid, why)),
            }
        }
        for (pid, why) in stale {
            self.release_only(pid, why);
        }
        self.watch_allowed();
        for (pid, comm, assignment) in matched {
            if self.managed.contains_key(&pid) {
                continue;
            }
            let start = self.readings.get(&pid).map_or(0, |r| r.start_time);
            if self.refused.contains(&(pid, start)) {
                continue;
            }
            let rule = assignment.rule.clone();
            let policy = assignment.policy.clone();
            self.taken += 1;
            let cpuset = self.cpuset_of(pid);
            match Managed::start(
                pid,
                &comm,
                assignment,
                &self.machine,
                &self.state,
                self.observe,
                true,
                self.taken,
                cpuset,
                &mut self.counters,
            ) {
                Ok(m) => {
                    tracing::info!(
                        "pid {pid} ({comm}): managed by rule {rule:?} (policy {policy})"
                    );
                    self.managed.insert(pid, m);
                }
                Err(Refused::NotOurs(why)) => {
                    tracing::info!("pid {pid} ({comm}) left alone: {why}");
                    self.refused.insert((pid, start));
                }
                Err(Refused::Failed(e)) => {
                    tracing::warn!("pid {pid} ({comm}): not managed: {e:#}");
                    self.refused.insert((pid, start));
                }
            }
        }
        self.regroup();
        let live: BTreeSet<Pid> = self.readings.keys().copied().collect();
        self.refused.retain(|(pid, _)| live.contains(pid));
        self.released.retain(|(pid, _)| live.contains(pid));
        let threads: usize = self.managed.values().map(|m| m.threads).sum();
        self.metrics
            .set_managed(self.managed.len() as u64, threads as u64);
        self.metrics.set_groups(
            self.groups
                .by_id
                .values()
                .map(|g| (g.id, g.policy_name.as_str(), g.members.len() as u64)),
        );
        self.domain_metrics();
        if let Ok(cpu) = threadbalance_daemon::metrics::own_cpu_seconds() {
            self.metrics.set_own_cpu_seconds(cpu);
        }
    }

    /// Logs each competitor the first time it is seen.
    fn competitors(&mut self, comms: &[(Pid, String)]) {
        match read::read_competitors(&self.root, comms) {
            Ok(found) => {
                for c in found {
                    let line = c.to_string();
                    if self.warned.insert(line.clone()) {
                        tracing::warn!("{line}");
                    }
                }
            }
            Err(e) => tracing::debug!("competitors: {e}"),
        }
    }

    /// The `cpuset.cpus.effective` of `pid`'s cgroup, from this window's reading; `None`
    /// without a cpuset controller (or a reading).
    fn cpuset_of(&self, pid: Pid) -> Option<CpuSet> {
        let cg = read::cpuset_cgroup(self.readings.get(&pid)?)?;
        read::read_cpuset_effective(&self.root, &cg).ok().flatten()
    }

    /// Looks at the CPUs of each managed process: when its cgroup's cpuset or masks set
    /// outside the daemon changed them, one warning, and its group is re-planned on the
    /// new set at the next regrouping (none left: it is released).
    fn watch_allowed(&mut self) {
        let mut empty = Vec::new();
        let pids: Vec<Pid> = self.managed.keys().copied().collect();
        for pid in pids {
            let cpuset = self.cpuset_of(pid);
            let Some(m) = self.managed.get_mut(&pid) else {
                continue;
            };
            let program = threadbalance_daemon::allowed::program_cpus(&m.thread_masks(), &m.ours);
            let (now, change) = threadbalance_daemon::allowed::observe(
                pid,
                &m.allowed,
                cpuset,
                program,
                &self.usable,
            );
            m.allowed = now;
            if let Some(c) = change {
                tracing::warn!("{c}");
                if c.after.is_empty() {
                    empty.push(pid);
                } else {
                    m.cpus = c.after;
                }
            }
        }
        for pid in empty {
            self.release_only(pid, "it may use none of the daemon's CPUs now");
        }
    }

    /// Re-forms the groups over the managed processes.
    fn regroup(&mut self) {
        let now = threadbalance_linux::host::monotonic_now();
        self.groups.regroup(&self.managed, &self.machine, now);
    }

    /// Stops managing `pid`, restoring its masks (and only its), and re-forms its group
    /// without it.
    fn release(&mut self, pid: Pid, why: &str) -> Option<RestoreReport> {
        let report = self.release_only(pid, why)?;
        self.regroup();
        Some(report)
    }

    /// Stops managing `pid`, restoring its masks; the groups are left as they are.
    fn release_only(&mut self, pid: Pid, why: &str) -> Option<RestoreReport> {
        let m = self.managed.remove(&pid)?;
        let comm = m.comm.clone();
        let counters = m.counters.clone();
        let report = m.release();
        let failed = report.failures().count() as u64;
        if failed > 0 {
            self.restore_failures += failed;
            self.metrics.record_restore_failures(failed);
            for line in crate::recover::kept_lines(&report) {
                tracing::warn!("pid {pid}: {line}");
            }
        }
        // The handle on the shared counters went with the process's host: its slots are
        // freed by now, and what it counted can be said.
        let counted = counters
            .describe()
            .map_or(String::new(), |c| format!("; {c}"));
        tracing::info!(
            "pid {pid} ({comm}) released ({why}): {}{counted}",
            crate::recover::describe(&report)
        );
        Some(report)
    }

    /// Releases every managed process.
    fn release_all(&mut self) -> RestoreReport {
        let mut all = RestoreReport::default();
        let pids: Vec<Pid> = self.managed.keys().copied().collect();
        for pid in pids {
            if let Some(r) = self.release_only(pid, "the daemon is stopping") {
                all.add(r);
            }
        }
        self.groups = Groups::default();
        self.metrics.set_managed(0, 0);
        self.metrics.set_groups(std::iter::empty());
        all
    }

    /// SIGHUP and `ctl reload` (`answer`): starts reading and parsing the file on a thread
    /// of its own; a reload already under way answers this one too.
    fn start_reload(&mut self, answer: Option<Pending>) {
        if let Some(r) = &mut self.reloading {
            r.waiting.extend(answer);
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (path, old) = (self.path.clone(), self.config.clone());
        let spawned = std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || {
                let parsed = read::read_config_text(&path)
                    .map_err(|e| format!("reload rejected, keeping the running config: {e}"))
                    .and_then(|text| Config::reload(old, &text).map_err(|(_, line)| line));
                let _ = tx.send(parsed);
            });
        let waiting: Vec<Pending> = answer.into_iter().collect();
        match spawned {
            Ok(_) => {
                self.reloading = Some(Reloading {
                    result: rx,
                    waiting,
                })
            }
            Err(e) => {
                let line = format!("reload rejected, keeping the running config: {e}");
                tracing::warn!("{line}");
                for p in waiting {
                    p.answer(Err(line.clone()));
                }
            }
        }
    }

    /// Takes the result of the reload under way when it is ready, and answers the `ctl
    /// reload`s that wait for it.
    fn finish_reload(&mut self) {
        let Some(r) = &self.reloading else {
            return;
        };
        let parsed = match r.result.try_recv() {
            Ok(parsed) => parsed,
            Err(std::sync::mpsc::TryRecvError::Empty) => return,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                Err("reload rejected, keeping the running config: the reload failed".into())
            }
        };
        let waiting = self.reloading.take().map(|r| r.waiting).unwrap_or_default();
        let answer = self.reload(parsed);
        for p in waiting {
            p.answer(answer.clone());
        }
    }

    /// The new config replaces the running one only if valid (`parsed` is the reload
    /// thread's result).
    fn reload(&mut self, parsed: Result<Config, String>) -> Result<String, String> {
        let (socket, metrics) = (
            self.config.daemon.control_socket.clone(),
            self.config.daemon.metrics,
        );
        match parsed {
            Ok(new) => {
                if new.daemon.control_socket != socket || new.daemon.metrics != metrics {
                    tracing::info!("control_socket and metrics changes take effect at restart");
                }
                self.config = new;
                match usable_cpus(&self.root, &self.config) {
                    Ok((usable, machine)) => {
                        self.usable = usable;
                        self.machine = machine;
                        self.metrics.clear_domains();
                    }
                    Err(e) => tracing::warn!("after reload: {e:#}; keeping CPUs {}", self.usable),
                }
                let line = format!("reloaded: {}", self.config.summary());
                tracing::info!("{line}");
                Ok(line)
            }
            Err(line) => {
                tracing::warn!("{line}");
                Err(line)
            }
        }
    }

    /// What `ctl status` and `ctl list` answer from now on.
    fn publish(&self, inbox: &Inbox) {
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
            daemon_pid: std::process::id() as i32,
            uptime_s: self.started.elapsed().as_secs(),
            config: self.config.summary(),
            observe: self.observe,
            managed_processes: processes.len() as u64,
            groups: self.groups.by_id.len() as u64,
            managed_threads: processes.iter().map(|p| p.threads).sum(),
            paused_processes: processes.iter().filter(|p| p.paused).count() as u64,
        };
        inbox.publish(Snapshot {
            status,
            processes,
            candidates: self.candidates.clone(),
        });
    }

    /// Carries out a `ctl` change and answers it.
    fn carry_out(&mut self, p: Pending, inbox: &Inbox) {
        if matches!(p.command, Command::Reload) {
            // Answered when the reload thread is done (see `finish_reload`).
            self.start_reload(Some(p));
            return;
        }
        let not_managed = |pid: Pid| Err(format!("process {pid} is not managed"));
        let result = match p.command {
            Command::Pause(pid) => match self.managed.get_mut(&pid) {
                Some(m) if m.paused => Err(format!("process {pid} is already paused")),
                Some(m) => {
                    m.paused = true;
                    tracing::info!("pid {pid} ({}) paused", m.comm);
                    Ok(format!("paused {pid} ({})", m.comm))
                }
                None => not_managed(pid),
            },
            Command::Resume(pid) => match self.managed.get_mut(&pid) {
                Some(m) if !m.paused => Err(format!("process {pid} is not paused")),
                Some(m) => {
                    m.paused = false;
                    tracing::info!("pid {pid} ({}) resumed", m.comm);
                    Ok(format!("resumed {pid} ({})", m.comm))
                }
                None => not_managed(pid),
            },
            Command::Release(pid) => match self.managed.get(&pid) {
                Some(m) => {
                    let (start, comm) = (m.start, m.comm.clone());
                    self.released.insert((pid, start));
                    match self.release(pid, "ctl release") {
                        Some(r) if r.failures().next().is_some() => Err(format!(
                            "released {pid} ({comm}), but {}",
                            crate::recover::describe(&r)
                        )),
                        Some(r) => Ok(format!(
                            "released {pid} ({comm}): {}",
                            crate::recover::describe(&r)
                        )),
                        None => not_managed(pid),
                    }
                }
                None => not_managed(pid),
            },
            Command::Reload => Err("reload is answered by its thread".into()),
            Command::Threads => {
                self.publish_threads(inbox);
                Ok(String::new())
            }
        };
        p.answer(result);
    }
}
