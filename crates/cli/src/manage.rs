//! `run` and `attach`: the control loop around the engine on the Linux host.
//!
//! ```text
//!  resolve level, build policy ─► (run: spawn CMD) ─► loop {
//!      signal?  run: forward to CMD │ attach: stop
//!      target exited? stop
//!      deadline reached? engine.tick(host, topo, policy); next deadline = now + plan.next_in
//!      wait on the target's pidfd until the deadline (wakes at once when it exits)
//!  } ─► restore every mask changed ─► summary ─► exit with CMD's status
//! ```
//!
//! Everything that can be rejected (policy, level, interval, pid) is checked before the
//! command starts or the first affinity changes, so bad input leaves nothing changed.

use crate::host::{LinuxAdapter, Target};
use crate::lockprobe::LockProbe;
use crate::summary::Summary;
use crate::{ManageArgs, input_error, signals};
use anyhow::{Context, Result};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use threadbalance_model::{Level, Nanos, Pid, Topology};
use threadbalance_policy::{Engine, Host, Policy, Settings};

/// The shortest pause between ticks, whatever a policy asks.
const MIN_TICK: Nanos = Nanos::from_millis(1);

/// Everything checked before anything starts.
struct Prepared {
    topo: Topology,
    level: Level,
    policy: Box<dyn Policy>,
}

fn prepare(args: &ManageArgs) -> Result<Prepared> {
    let topo = crate::topo::read_system()?;
    let level = match &args.level {
        None => topo.default_level(),
        Some(l) => l.parse::<Level>().map_err(|e| input_error(e.to_string()))?,
    };
    if args.interval == Some(0) {
        return Err(input_error("--interval must be at least 1 ms"));
    }
    let mut settings = Settings::new(level);
    settings.interval = args.interval.map(Nanos::from_millis);
    settings.seed = args.seed;
    let policy = threadbalance_policy::build(&args.policy, &settings, &topo)
        .map_err(|e| input_error(e.to_string()))?;
    if args.policy.starts_with("numa-")
        && threadbalance_linux::read_numa_balancing(&threadbalance_linux::Root::system())
            == Some(true)
    {
        eprintln!(
            "threadbalance: warning: the kernel's automatic NUMA balancing is on \
             (/proc/sys/kernel/numa_balancing = 1); it moves threads and pages too and will \
             compete with {}; `sysctl kernel.numa_balancing=0` turns it off",
            args.policy
        );
    }
    Ok(Prepared {
        topo,
        level,
        policy,
    })
}

/// `threadbalance run`: launch `command`, manage it, exit with its status.
pub fn run(args: &ManageArgs, command: &[String], follow_children: bool) -> Result<u8> {
    let mut p = prepare(args)?;
    let Some((program, rest)) = command.split_first() else {
        return Err(input_error("no command given"));
    };
    signals::install().context("installing signal handlers")?;
    let lock_probe = LockProbe::start();
    let mut child = Command::new(program)
        .args(rest)
        .spawn()
        .map_err(|e| input_error(format!("cannot execute {program:?}: {e}")))?;
    let pid = Pid(child.id() as i32);
    let target = Target::Child {
        pid,
        follow_children,
    };
    let mut host = match LinuxAdapter::new(&p.topo, target, args.dry_run, p.policy.stat_max_age()) {
        Ok(h) => h,
        Err(e) => {
            // We cannot manage it: do not leave it running unmanaged behind our error.
            let _ = child.kill();
            let _ = child.wait();
            return Err(e);
        }
    };
    host.set_lock_probe(lock_probe);
    let (mut summary, looped) = manage(&mut host, &mut p, args, true);
    if let Err(e) = &looped {
        eprintln!("threadbalance: stopped managing ({e:#}); masks restored; waiting for {program}");
    }
    let status = child.wait().context("waiting for the command")?;
    let ended = match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "ended".to_string(),
    };
    summary.finish(host.now(), p.policy.summary(), ended);
    report(&summary, args)?;
    looped?;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => c.clamp(0, 255) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        _ => 1,
    })
}

/// `threadbalance attach`: manage a running process until it exits or we are interrupted.
pub fn attach(args: &ManageArgs, pid: i32) -> Result<u8> {
    let mut p = prepare(args)?;
    if pid <= 0 {
        return Err(input_error(format!("--pid {pid}: not a process id")));
    }
    signals::install().context("installing signal handlers")?;
    let mut host = LinuxAdapter::new(
        &p.topo,
        Target::Attached { pid: Pid(pid) },
        args.dry_run,
        p.policy.stat_max_age(),
    )?;
    host.set_lock_probe(LockProbe::start());
    let (mut summary, looped) = manage(&mut host, &mut p, args, false);
    let ended = match &looped {
        Ok(Some(sig)) => format!("interrupted by {sig}"),
        Ok(None) => format!("process {pid} exited"),
        Err(e) => format!("stopped: {e:#}"),
    };
    summary.finish(host.now(), p.policy.summary(), ended);
    report(&summary, args)?;
    looped.map(|_| 0)
}

/// Runs the control loop, then restores every mask changed (before anything else, so an
/// error or a command that lingers never leaves threads pinned).
fn manage(
    host: &mut LinuxAdapter,
    p: &mut Prepared,
    args: &ManageArgs,
    forward: bool,
) -> (Summary, Result<Option<nix::sys::signal::Signal>>) {
    let mut summary = Summary::new(&args.policy, &p.topo, p.level, args.dry_run, host.now());
    let looped = control_loop(
        host,
        &p.topo,
        p.policy.as_mut(),
        &mut summary,
        args,
        forward,
    );
    summary.restored = host.restore_all();
    summary.lock_probe(host.lock_report());
    (summary, looped)
}

/// Ticks until the target exits (`Ok(None)`) or, when not forwarding, until a signal
/// arrives (`Ok(Some(signal))`). With `forward`, signals go to the target instead.
fn control_loop(
    host: &mut LinuxAdapter,
    topo: &Topology,
    policy: &mut dyn Policy,
    summary: &mut Summary,
    args: &ManageArgs,
    forward: bool,
) -> Result<Option<nix::sys::signal::Signal>> {
    let mut engine = Engine::new();
    let mut next = host.now();
    loop {
        if let Some(sig) = signals::take() {
            if forward {
                host.forward(sig);
            } else {
                return Ok(Some(sig));
            }
        }
        if host.target_exited() {
            return Ok(None);
        }
        let now = host.now();
        if now >= next {
            match engine.tick(host, topo, policy) {
                Ok(tick) => {
                    if args.verbose {
                        if let Some(note) = &tick.note {
                            eprintln!("threadbalance: {note}");
                        }
                    }
                    summary.record(topo, engine.window(), &tick);
                    next = now + tick.next_in.max(MIN_TICK);
                }
                Err(e) => {
                    if host.target_exited() {
                        return Ok(None);
                    }
                    return Err(e.into());
                }
            }
        }
        host.wait_until(next);
    }
}

fn report(summary: &Summary, args: &ManageArgs) -> Result<()> {
    eprint!("{}", summary.to_text());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(summary)?;
        std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
