//! `run` and `attach`: the control loop around the engine on the Linux host.
//!
//! ```text
//!  resolve level, build policy ─► (run: spawn CMD) ─► threadbalance_manage::manage: loop {
//!      signal?  run: forward to CMD │ attach: stop
//!      target exited? stop
//!      deadline reached? engine.tick(host, topo, policy); next deadline = now + plan.next_in
//!      wait on the target's pidfd until the deadline (wakes at once when it exits)
//!  } ─► restore every mask changed ─► summary ─► exit with CMD's status
//! ```
//!
//! `run` places threads only on the CPUs it may use itself (`taskset`, a cpuset): the
//! command it launches inherits that mask, and a policy that counted CPUs outside it would
//! plan moves the kernel refuses. `attach` places threads only on the CPUs its target's
//! threads may use. `--cpus LIST` narrows either further, and `run` starts the command
//! confined to that list, as `taskset -c LIST` would.
//!
//! Everything that can be rejected (policy, level, interval, CPU list, `--json` file, pid, a process
//! already managed) is checked before the command starts or the first affinity changes,
//! so bad input leaves nothing changed. Before the first change, journals left by
//! instances that died are replayed and this instance's journal is opened (see
//! `recover`); a panic in the loop is caught, and the masks are restored as after any
//! other stop.

use crate::error::{bad_input, one_line, refused};
use crate::summary::{Ended, HostReport, Setup, Summary, Tally};
use crate::trace::RunTrace;
use crate::{ManageArgs, input_error, recover};
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use threadbalance_linux::adapter::lockprobe::LockProbe;
use threadbalance_linux::adapter::{LinuxAdapter, Target};
use threadbalance_linux::signal;
use threadbalance_linux::state::{Journal, ProcessLock, StateDir};
use threadbalance_linux::{LinuxError, Root};
use threadbalance_manage::{LoopError, OnSignal};
use threadbalance_model::{Level, Nanos, Pid, Topology};
use threadbalance_policy::{Host, Policy, PolicyKind};

/// Everything checked before anything starts.
pub(crate) struct Prepared {
    pub(crate) topo: Topology,
    pub(crate) level: Level,
    pub(crate) kind: PolicyKind,
    kind_default: bool,
    pub(crate) policy: Box<dyn Policy>,
    /// The hardware counters, open, when the policy or the operator asked for them.
    pub(crate) counters: Option<Box<dyn threadbalance_linux::perf::CounterSource>>,
    state: StateDir,
    /// The `--json` file, opened (not truncated) before the command starts; `None` for
    /// stdout (`--json -`).
    json: Option<File>,
}

/// Checks the options and builds the policy over `usable`, the CPUs the threads may use
/// (for `run` this process's own affinity, inherited by the command it launches, so
/// `taskset -c 0-8 threadbalance run …` balances over those nine CPUs as a container's
/// cpuset would; for `attach` its target's), cut down to `--cpus`.
pub(crate) fn prepare(args: &ManageArgs, command: &str, usable: Topology) -> Result<Prepared> {
    let s = &args.settings;
    let (kind, kind_default) = s.one_policy(command)?;
    let topo = s.topology(usable)?;
    let level = s.level(kind, &topo);
    let policy = s.build(kind, &topo)?;
    let ask = match (args.fake_counters, args.counters) {
        (true, _) => crate::host::CounterAsk::Fake,
        (false, true) => crate::host::CounterAsk::Always,
        (false, false) => crate::host::CounterAsk::Policy,
    };
    let counters = crate::host::counter_source(policy.as_ref(), &kind.to_string(), ask)?;
    if args.keep_trace {
        threadbalance_linux::tracegate::hold_open();
    }
    if let Some(path) = &args.report {
        crate::trace::check_writable(path)?;
    }
    // `-` is stdout, written at the end; a real file is opened now, so that one that
    // cannot be written is refused before the command starts.
    let json = match &args.json {
        Some(path) if crate::jsonout::is_stdout(path) => None,
        Some(path) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(path)
                .map_err(|e| refused(format!("--json {}: cannot write it", path.display()), e))?,
        ),
        None => None,
    };
    let state = recover::state_dir(args.state_dir.as_ref())?;
    recover::ready_state_dir(&state)?;
    // What instances that died left changed is put back before anything else happens.
    recover::restore_stale(&state)?;
    if kind.is_numa() && threadbalance_linux::read_numa_balancing(&Root::system()) == Some(true) {
        errln!(
            "threadbalance: warning: the kernel's automatic NUMA balancing is on \
             (/proc/sys/kernel/numa_balancing = 1); it moves threads and pages too and will \
             compete with {kind}; `sysctl kernel.numa_balancing=0` turns it off"
        );
    }
    Ok(Prepared {
        topo,
        level,
        kind,
        kind_default,
        policy,
        counters,
        state,
        json,
    })
}

/// Takes the lock on `pid` and opens our journal (none in a dry
/// run: it changes nothing). A process another live instance manages is an input error.
pub(crate) fn claim(
    p: &Prepared,
    pid: Pid,
    dry_run: bool,
) -> Result<(ProcessLock, Option<Journal>)> {
    let root = Root::system();
    let start = threadbalance_linux::read_start_time(&root, pid, threadbalance_model::Tid(pid.0))?
        .ok_or_else(|| input_error(format!("no process with pid {pid}")))?;
    let lock = p.state.lock_process(pid, start)?.map_err(|busy| {
        let by = busy
            .holder
            .map_or(String::new(), |h| format!(" (threadbalance pid {h})"));
        input_error(format!(
            "process {pid} is already managed by another threadbalance{by}"
        ))
    })?;
    let journal = if dry_run {
        None
    } else {
        Some(p.state.open_journal(&root)?)
    };
    Ok((lock, journal))
}

/// Raises the soft limit on open files to the hard limit: the sampler keeps two files
/// open per thread.
pub(crate) fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE)
        && soft < hard
    {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// The exit status for a command that ended with `status`.
fn status_code(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        _ => 1,
    }
}

/// `threadbalance run`: launch `command`, manage it, exit with its status.
pub fn run(args: &ManageArgs, command: &[String], follow_children: bool) -> Result<u8> {
    let mut p = prepare(args, "run", crate::usable::read_usable()?)?;
    let Some((program, rest)) = command.split_first() else {
        return Err(input_error("no command given"));
    };
    signal::catch_fatal_signals().context("installing signal handlers")?;
    raise_fd_limit();
    // The command's orphans (a process it started, then exited) become ours, so that one
    // born of a thread we confined is found and restored at the end.
    nix::sys::prctl::set_child_subreaper(true).context("becoming the command's subreaper")?;
    let mut lock_probe = LockProbe::start_for(p.policy.as_ref());
    // The run-time counters too are loaded before the command starts: the first sample
    // then follows its start closely, and a thread that ends within its first few tens of
    // milliseconds is still seen (loading them can take that long on a busy machine).
    let counters =
        threadbalance_linux::runcount::Counters::Loaded(threadbalance_linux::runcount::load());
    // So is the trace of who sets each mask (a dry run sets none, nor does a policy that moves nothing): the program's own first
    // calls are then traced. Held to the end; the host takes a handle of its own.
    let trace_ahead = (!args.settings.dry_run && !p.policy.needs().moves_nothing)
        .then(threadbalance_linux::adapter::TraceAhead::load);
    let mut child = spawn_confined(Command::new(program).args(rest), &p.topo, args)
        .map_err(|e| refused(format!("cannot execute {program:?}"), e))?;
    let pid = Pid(child.id() as i32);
    // The probe counts the program's lock waits from its first instant, not from the
    // first sample (which comes after the journal is claimed and the host is opened).
    lock_probe.track(&[pid]);
    let target = Target::Child {
        pid,
        follow_children,
    };
    let dry_run = args.settings.dry_run;
    let host = {
        // Held until the host has its own handle on the trace (and may let it go).
        let _ahead = trace_ahead;
        claim(&p, pid, dry_run).and_then(|(lock, journal)| {
            LinuxAdapter::with_counters(
                &p.topo,
                target,
                dry_run,
                p.policy.needs(),
                journal,
                counters,
            )
            .map_err(crate::manage::adapter_error)
            .map(|h| (lock, h))
        })
    };
    let (_lock, mut host) = match host {
        Ok(h) => h,
        Err(e) => {
            // We cannot manage it: do not leave it running unmanaged behind our error.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    host.restore_orphans();
    host.set_lock_probe(lock_probe);
    if let Some(source) = p.counters.take() {
        host.read_hw_counters(source);
    }
    let (loop_end, looped) = manage(&mut host, &mut p, args, true);
    if let Err(e) = &looped {
        errln!(
            "threadbalance: stopped managing ({}); masks restored; waiting for {program}",
            one_line(e)
        );
    }
    let status = child.wait().context("waiting for the command")?;
    let ended = match (status.code(), status.signal()) {
        (Some(c), _) => Ended::Exit(c),
        (None, Some(s)) => Ended::Killed(s),
        _ => Ended::Unknown,
    };
    let (summary, trace) = loop_end.summary(&p, args, ended, host.now());
    report(&summary, trace.as_ref(), &mut p.json, args);
    if summary.host.restore.unrestored > 0 {
        errln!("threadbalance: some masks could not be restored (listed above); exit status 1");
        return Ok(1);
    }
    looped?;
    Ok(status_code(status))
}

/// `threadbalance attach`: manage a running process until it exits or we are interrupted.
pub fn attach(args: &ManageArgs, pid: i32, follow_children: bool) -> Result<u8> {
    if pid <= 0 {
        return Err(input_error(format!("--pid {pid}: not a process id")));
    }
    let pid = Pid(pid);
    let (mut p, _lock, mut host) = open_attached(args, "attach", pid, follow_children)?;
    let (loop_end, looped) = manage(&mut host, &mut p, args, false);
    let ended = match &looped {
        Ok(Some(sig)) => Ended::Interrupted(*sig),
        Ok(None) => Ended::ProcessExited(pid),
        Err(e) => Ended::Stopped(one_line(e)),
    };
    let (summary, trace) = loop_end.summary(&p, args, ended, host.now());
    report(&summary, trace.as_ref(), &mut p.json, args);
    if summary.host.restore.unrestored > 0 {
        errln!("threadbalance: some masks could not be restored (listed above); exit status 1");
        return Ok(1);
    }
    looped.map(|_| 0)
}

/// What `attach` and `top --pid` do before they manage a running process: the settings
/// prepared over the CPUs `pid` may use, the refusals checked (a process we must not
/// manage, or may not change: changing another user's threads needs CAP_SYS_NICE, found
/// out now without writing, so a refused attach or a dry run changes nothing), signal
/// handlers installed, the process lock and journal claimed, and the adapter open with
/// the policy's lock probe. A missing or forbidden pid is bad input (exit 2).
pub(crate) fn open_attached(
    args: &ManageArgs,
    command: &str,
    pid: Pid,
    follow_children: bool,
) -> Result<(Prepared, ProcessLock, LinuxAdapter)> {
    // Whether the process may be managed at all, and by us, comes first: a missing pid or
    // another user's process is the reason to give, before anything about settings or the
    // state directory.
    let root = Root::system();
    let me = Pid(std::process::id() as i32);
    let refusal = threadbalance_linux::permit::refusal(&root, pid, me)
        .map_err(crate::manage::adapter_error)?;
    if let Some(why) = refusal {
        return Err(input_error(format!("{why}; not managed")));
    }
    threadbalance_linux::permit::may_set_affinity(&root, pid).map_err(bad_input)?;
    if let Some(depth) = ancestor_depth(&root, me, pid) {
        errln!(
            "threadbalance: warning: process {pid} is {} of this threadbalance: every \
             process it starts from now on is managed too{}",
            if depth == 1 {
                "the shell or program that started this threadbalance (its parent)".to_string()
            } else {
                format!("an ancestor ({depth} levels up)")
            },
            if follow_children {
                " (--no-children to manage its own threads only)"
            } else {
                ""
            }
        );
    }
    let p = prepare(args, command, crate::usable::read_allowed_for(pid)?)?;
    signal::catch_fatal_signals().context("installing signal handlers")?;
    raise_fd_limit();
    let dry_run = args.settings.dry_run;
    let (lock, journal) = claim(&p, pid, dry_run)?;
    let mut host = LinuxAdapter::new(
        &p.topo,
        Target::Attached {
            pid,
            follow_children,
        },
        dry_run,
        p.policy.needs(),
        journal,
    )
    .map_err(crate::manage::adapter_error)?;
    host.set_lock_probe(LockProbe::start_for(p.policy.as_ref()));
    let mut p = p;
    if let Some(source) = p.counters.take() {
        host.read_hw_counters(source);
    }
    Ok((p, lock, host))
}

/// How many parents up from `me` the process `pid` is (1: our parent), if it is one of our
/// ancestors: attaching to it manages the shell we were started from, and everything it
/// starts afterwards.
fn ancestor_depth(root: &Root, me: Pid, pid: Pid) -> Option<u32> {
    let mut at = me;
    for depth in 1..=64 {
        let text = std::fs::read_to_string(root.proc_dir(at).join("stat")).ok()?;
        let parent = threadbalance_linux::parse::parse_stat(&text, 100)
            .ok()?
            .ppid;
        if parent == pid {
            return Some(depth);
        }
        if parent.0 <= 1 {
            return None;
        }
        at = parent;
    }
    None
}

/// Starts `command` confined to the CPUs the policy plans over when `--cpus` narrowed them,
/// as `taskset -c LIST` would start it: this thread takes that mask for the fork (the
/// child inherits it) and gets its own back at once. Without `--cpus` the command inherits
/// this process's mask unchanged.
fn spawn_confined(
    command: &mut Command,
    topo: &Topology,
    args: &ManageArgs,
) -> std::io::Result<std::process::Child> {
    if args.settings.cpus.is_none() {
        return command.spawn();
    }
    let me = threadbalance_model::Tid(0);
    let own = threadbalance_linux::affinity_of(me)?;
    threadbalance_linux::set_affinity(me, topo.online())?;
    let child = command.spawn();
    let back = threadbalance_linux::set_affinity(me, &own);
    let child = child?;
    if let Err(e) = back {
        errln!("threadbalance: warning: could not widen its own mask back to {own}: {e}");
    }
    Ok(child)
}

/// What the loop leaves for the summary: its tally, the host's report once every mask
/// was restored, and the trace for `--report`.
struct LoopEnd {
    tally: Tally,
    host: HostReport,
    trace: Option<RunTrace>,
}

impl LoopEnd {
    /// The run's summary, `ended` as said, at `end`, and its trace.
    fn summary(
        self,
        p: &Prepared,
        args: &ManageArgs,
        ended: Ended,
        end: Nanos,
    ) -> (Summary, Option<RunTrace>) {
        let setup = Setup::new(
            p.kind,
            p.kind_default,
            &p.topo,
            p.level,
            args.settings.dry_run,
        );
        let summary = Summary::new(setup, self.tally, self.host, ended, p.policy.summary(), end);
        (summary, self.trace)
    }
}

/// Runs the control loop (`threadbalance_manage`), then restores every mask changed
/// (before anything else, so an error, a panic or a command that lingers never leaves
/// threads pinned).
fn manage(
    host: &mut LinuxAdapter,
    p: &mut Prepared,
    args: &ManageArgs,
    forward: bool,
) -> (LoopEnd, Result<Option<i32>>) {
    if let Some(share) = args.cpu_budget {
        host.set_cpu_budget(share);
    }
    let budget = host.cpu_budget();
    let mut tally = Tally::new(&p.topo, p.level, host.now());
    let mut trace = args
        .report
        .is_some()
        .then(|| RunTrace::new(&p.topo, p.level, host.now()));
    let on_signal = if forward {
        OnSignal::Forward
    } else {
        OnSignal::Stop
    };
    let topo = &p.topo;
    let mut take = signal::take_signal;
    // The adapter is the loop's host: it reaps `run`'s orphans at every turn.
    let (restored, looped) = threadbalance_manage::manage(
        host,
        topo,
        p.policy.as_mut(),
        on_signal,
        &mut take,
        &mut |window, tick| {
            if args.verbose
                && let Some(note) = &tick.note
            {
                errln!("threadbalance: {note}");
            }
            tally.record(topo, window, tick);
            if let Some(trace) = &mut trace {
                trace.record(topo, window, tick);
            }
            if args.fault_panic_after.is_some_and(|n| tally.ticks >= n) {
                panic!("--fault-panic-after {} ticks", tally.ticks);
            }
        },
    );
    let host = HostReport::read(host, &restored, budget);
    let looped = match looped {
        Ok(threadbalance_manage::Ended::Signal(sig)) => Ok(Some(sig)),
        Ok(threadbalance_manage::Ended::TargetExited) => Ok(None),
        Err(LoopError::Host(e)) => Err(e.into()),
        Err(e @ LoopError::Panic(_)) => Err(e.into()),
    };
    (LoopEnd { tally, host, trace }, looped)
}

/// Prints the summary, and writes it to the `--json` file opened at the start, or to
/// stdout for `--json -` (the command has exited by now: its output and ours do not
/// interleave). A file that cannot be written now is reported, and the command's status
/// is kept.
fn report(summary: &Summary, trace: Option<&RunTrace>, json: &mut Option<File>, args: &ManageArgs) {
    err!("{}", summary.to_text(args.verbose));
    if let (Some(path), Some(trace)) = (&args.report, trace) {
        let title = format!(
            "policy {} at level {}: {} ticks, {} moves applied",
            summary.setup.policy,
            summary.setup.level,
            summary.tally.ticks,
            summary.tally.applied.done
        );
        crate::trace::write_report(trace, &title, path);
    }
    if let Some(path) = args
        .json
        .as_deref()
        .filter(|p| crate::jsonout::is_stdout(p))
    {
        if let Err(e) = crate::jsonout::write(path, summary) {
            errln!("threadbalance: {}", one_line(&e));
        }
        return;
    }
    let (Some(file), Some(path)) = (json.as_mut(), &args.json) else {
        return;
    };
    let written = serde_json::to_string_pretty(summary)
        .map_err(std::io::Error::other)
        .and_then(|text| {
            file.set_len(0)?;
            file.write_all((text + "\n").as_bytes())
        });
    if let Err(e) = written {
        errln!("threadbalance: writing {}: {e}", path.display());
    }
}

/// The adapter's error as the binary reports it: a missing or forbidden pid is bad input
/// (exit 2, nothing has changed yet); anything else is a failure.
pub(crate) fn adapter_error(e: LinuxError) -> anyhow::Error {
    match e {
        LinuxError::NoSuchProcess { .. } | LinuxError::PermissionDenied { .. } => bad_input(e),
        other => other.into(),
    }
}
