//! `bench --soak`: the daemon's reliability figures. One daemon, started with a config
//! whose rules match only the programs this soak starts (by a tag unique to the run at the
//! end of their command lines), and P short-lived multithreaded programs started and
//! stopped over M minutes (see `soak_plan` for who starts when and how each ends).
//!
//! ```text
//!  daemon --config (rules: "--soak-program …soak<pid>-p<k>-pbind$" → pbind, "…-speed$" → speed)
//!  every 100 ms: start the programs due; SIGTERM/SIGKILL those due; `ctl release` those
//!                due and check their masks at once; read the daemon's log lines
//!  every 1 s:    find the programs' children; note which programs have a thread off the
//!                mask they started with (moved)
//!  every ~5 s:   VmRSS of the daemon (/proc/PID/status)
//!  a program's parent released ─► its children (started by a pinned thread) must be back
//!                                 on the soak's own mask
//!  at the end:   scrape metrics (restore failures), the daemon's CPU time, SIGTERM it;
//!                every program and child still running must be back on the soak's mask,
//!                and the state directory must hold no journal
//! ```
//!
//! The run fails (exit 1) when the daemon's RSS grows by 1 MB or more after the warm-up
//! (a quarter of the run, at most 60 s), on any error (a WARN or ERROR log line that is not
//! an advisory: about a competitor, or about the soak's two rules' processes sharing CPUs
//! under different policies, which the daemon balances apart; a restore failure in the metrics, a refused `ctl release`, a daemon
//! exit other than 0, a journal left behind), or on any mask not restored. Every process
//! it starts is stopped by pid before it returns, also when interrupted (SIGINT, SIGTERM,
//! SIGHUP: the soak then stops early and checks what it has).

use super::soak_plan::{
    self, Fate, LogLine, Planned, ProgramSpec, Rss, SoakReport, to_text, verdict,
};
use crate::input_error;
use anyhow::{Context, Result, bail};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use threadbalance_model::{CpuSet, Pid, Tid};

/// The daemon's window.
const SAMPLE_MS: u64 = 500;
/// The bound on every wait (the daemon starting or stopping, `ctl`).
const LIMIT: Duration = Duration::from_secs(60);

/// `bench --soak-program SPEC`: one program of the soak. `threads` workers each compute
/// for 0.2 ms then sleep 20 ms (1 % of a core each), until `life_ms` has passed (0: until
/// killed); at `fork_ms` worker 0 starts a child program (two workers, living 2 s past
/// this one, its tag this one's plus `-child`, which no rule matches).
pub fn program(spec: &ProgramSpec) -> Result<u8> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let exe = std::env::current_exe().context("finding this program")?;
    let handles: Vec<_> = (0..spec.threads)
        .map(|i| {
            let stop = Arc::clone(&stop);
            let child = (i == 0 && spec.fork_ms > 0).then(|| {
                let life = spec.life_ms.saturating_sub(spec.fork_ms) + soak_plan::CHILD_OUTLIVES_MS;
                (
                    spec.fork_ms,
                    ProgramSpec {
                        threads: 2,
                        life_ms: life,
                        fork_ms: 0,
                        tag: format!("{}-child", spec.tag),
                    },
                )
            });
            let exe = exe.clone();
            std::thread::spawn(move || {
                let mut forked = false;
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_micros(200) {
                        std::hint::spin_loop();
                    }
                    std::thread::sleep(Duration::from_millis(20));
                    if let Some((at, c)) = &child
                        && !forked
                        && started.elapsed() >= Duration::from_millis(*at)
                    {
                        forked = true;
                        // Started from this (maybe pinned) worker: the child inherits its mask.
                        let _ = Command::new(&exe)
                            .args(["bench", "--soak-program", &c.arg()])
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .spawn();
                    }
                }
            })
        })
        .collect();
    let life = (spec.life_ms > 0).then(|| Duration::from_millis(spec.life_ms));
    while life.is_none_or(|l| started.elapsed() < l) {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        let _ = h.join();
    }
    Ok(0)
}

/// One program started by the soak.
struct Running {
    plan: Planned,
    child: Child,
    pid: i32,
    started_ms: u64,
    ended: bool,
    signalled: bool,
    released: bool,
}

/// Every process the soak started; all are stopped by pid when dropped.
struct Fleet {
    daemon: Option<Child>,
    programs: Vec<Running>,
    /// Children of programs (not ours to wait for): pid → parent's index.
    children: BTreeMap<i32, usize>,
    tag: String,
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if let Some(mut d) = self.daemon.take() {
            let _ = threadbalance_linux::signal::send(Pid(d.id() as i32), libc::SIGTERM);
            let _ = finish(&mut d);
        }
        for r in &mut self.programs {
            if !r.ended {
                let _ = r.child.kill();
            }
            let _ = r.child.wait();
        }
        for &pid in self.children.keys() {
            if is_ours(pid, &self.tag) {
                let _ = threadbalance_linux::signal::send(Pid(pid), libc::SIGKILL);
            }
        }
    }
}

/// Waits for `child` up to [`LIMIT`], then kills it; its exit code (128 + signal).
fn finish(child: &mut Child) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    let until = Instant::now() + LIMIT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                break child.wait().ok()?;
            }
        }
    };
    status.code().or(status.signal().map(|s| 128 + s))
}

/// Whether process `pid` is one of this soak's (its command line holds the run's tag).
fn is_ours(pid: i32, tag: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(tag))
}

/// Every running process whose command line holds `--soak-program` and `tag`, with its
/// last argument (the program's own tag).
fn find_programs(tag: &str) -> Vec<(i32, String)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let args: Vec<String> = raw
                .split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            let last = args.iter().rev().find(|a| !a.is_empty())?;
            (args.iter().any(|a| a == "--soak-program") && last.contains(tag))
                .then(|| (pid, last.clone()))
        })
        .collect()
}

/// The masks of every thread of `pid` that differ from `want`, as `tid:mask`.
fn off_mask(pid: i32, want: &CpuSet) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|tid| {
            let m = threadbalance_linux::affinity_of(Tid(tid)).ok()?;
            (&m != want).then(|| format!("{tid}:{m}"))
        })
        .collect()
}

/// The daemon's config: a rule per policy, matching only this run's programs.
fn config_text(dir: &Path, tag: &str) -> String {
    let rule = |policy: &str| {
        format!(
            "[[rule]]\nname = \"soak-{policy}\"\ncomm = \"^threadbalance$\"\n\
             cmdline = \"--soak-program [0-9:]+{tag}-p[0-9]+-{policy}$\"\npolicy = \"{policy}\"\n"
        )
    };
    format!(
        "[daemon]\nmetrics = \"127.0.0.1:0\"\ncontrol_socket = \"{d}/run/control.sock\"\n\
         state_dir = \"{d}/state\"\nsample_ms = {SAMPLE_MS}\n\n{}\n{}",
        rule("pbind"),
        rule("speed"),
        d = dir.display()
    )
}

/// `GET /metrics` on `addr`: the value of every sample named `name` (summed over labels).
fn scrape(addr: &str, name: &str) -> Option<f64> {
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: soak\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let values: Vec<f64> = text
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter(|l| l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .collect();
    (!values.is_empty()).then(|| values.iter().sum())
}

fn load_average() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(str::parse::<f64>);
    Some([it.next()?.ok()?, it.next()?.ok()?, it.next()?.ok()?])
}

/// `bench --soak`: P programs over `minutes`, then the figures; exit 1 if the soak failed.
pub fn run(minutes: f64, programs: usize, json: Option<&Path>) -> Result<u8> {
    if !(minutes > 0.0 && minutes <= 24.0 * 60.0) {
        return Err(input_error(format!(
            "--minutes {minutes}: expected more than 0 and at most 1440"
        )));
    }
    if !(1..=10_000).contains(&programs) {
        return Err(input_error(format!(
            "--programs {programs}: expected 1 to 10000"
        )));
    }
    let duration = Duration::from_secs_f64(minutes * 60.0);
    let plan = soak_plan::schedule(duration, programs);
    let dir = tempfile::Builder::new()
        .prefix("threadbalance-soak")
        .tempdir()
        .context("creating a temporary directory")?;
    let tag = format!("soak{}", std::process::id());
    let config = dir.path().join("soak.toml");
    std::fs::write(&config, config_text(dir.path(), &tag))
        .with_context(|| format!("writing {}", config.display()))?;
    threadbalance_linux::signal::catch_fatal_signals().context("installing signal handlers")?;
    let mut soak = Soak {
        exe: std::env::current_exe().context("finding this program")?,
        socket: dir.path().join("run/control.sock"),
        mask: threadbalance_linux::affinity_of(Tid(0)).context("reading this thread's CPU mask")?,
        report: SoakReport {
            minutes,
            programs_planned: programs,
            load_before: load_average(),
            warmup_s: (duration.as_secs_f64() / 4.0).min(60.0),
            ..SoakReport::default()
        },
        fleet: Fleet {
            daemon: None,
            programs: Vec::new(),
            children: BTreeMap::new(),
            tag: tag.clone(),
        },
        lines: Arc::new(Mutex::new(Vec::new())),
        log: Log::default(),
        managed: BTreeSet::new(),
        moved: BTreeSet::new(),
        tag,
    };
    let (daemon_pid, metrics_addr) = soak.start_daemon(&config)?;
    let t0 = Instant::now();
    let ms = || t0.elapsed().as_millis() as u64;
    let total_ms = duration.as_millis() as u64;
    let rss_every = (total_ms / 60).clamp(1000, 5000);
    let (mut next_rss, mut next_scan) = (0u64, 0u64);
    let mut pending = plan.iter().peekable();
    let mut interrupted = None;
    while ms() < total_ms {
        if let Some(sig) = threadbalance_linux::signal::take_signal() {
            interrupted = Some(sig);
            break;
        }
        let now = ms();
        while let Some(p) = pending.next_if(|p| p.start_ms <= now) {
            soak.start_program(p, now)?;
        }
        soak.act(now)?;
        soak.read_log();
        if now >= next_scan {
            next_scan = now + 1000;
            soak.scan();
        }
        if now >= next_rss {
            next_rss = now + rss_every;
            soak.sample_rss(daemon_pid, now);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    soak.sample_rss(daemon_pid, ms());
    let wall_s = t0.elapsed().as_secs_f64();
    let mut report = soak.stop(daemon_pid, &metrics_addr, wall_s, dir.path())?;
    verdict(&mut report, interrupted);
    report.error_lines.truncate(50);
    outln!("{}", to_text(&report));
    if let Some(path) = json {
        crate::jsonout::write(path, &crate::schema::versioned(&report))?;
    }
    Ok(if report.failures.is_empty() { 0 } else { 1 })
}

/// A soak under way.
struct Soak {
    exe: PathBuf,
    socket: PathBuf,
    /// The soak's own mask: what every program starts with, and must be back on.
    mask: CpuSet,
    report: SoakReport,
    fleet: Fleet,
    /// The daemon's stderr, line by line, filled by a reader thread.
    lines: Arc<Mutex<Vec<String>>>,
    log: Log,
    /// Pids the daemon logged as managed.
    managed: BTreeSet<i32>,
    /// Programs (by index) seen with a thread off `mask`.
    moved: BTreeSet<usize>,
    tag: String,
}

impl Soak {
    /// Starts the daemon and waits for its "started:" line; its pid and metrics address.
    fn start_daemon(&mut self, config: &Path) -> Result<(i32, String)> {
        let mut daemon = Command::new(&self.exe)
            .args(["daemon", "--log-level", "info", "--config"])
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the daemon")?;
        let pid = daemon.id() as i32;
        if let Some(err) = daemon.stderr.take() {
            let sink = Arc::clone(&self.lines);
            std::thread::spawn(move || {
                for l in BufReader::new(err).lines().map_while(Result::ok) {
                    if let Ok(mut v) = sink.lock() {
                        v.push(l);
                    }
                }
            });
        }
        self.fleet.daemon = Some(daemon);
        let since = Instant::now();
        loop {
            self.log.drain(&self.lines);
            let addr = self.log.all.iter().find_map(|l| {
                let rest = l.split_once("metrics on http://")?.1;
                Some(rest.trim_end_matches("/metrics").to_string())
            });
            if let Some(addr) = addr
                && self.log.all.iter().any(|l| l.contains("started:"))
            {
                return Ok((pid, addr));
            }
            if since.elapsed() > LIMIT {
                bail!(
                    "the daemon did not start within {LIMIT:?}: {:?}",
                    self.log.all
                );
            }
            if let Some(Ok(Some(status))) = self.fleet.daemon.as_mut().map(Child::try_wait) {
                bail!("the daemon exited at start ({status}): {:?}", self.log.all);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts program `p` at `now` (ms into the soak).
    fn start_program(&mut self, p: &Planned, now: u64) -> Result<()> {
        let own_end = matches!(p.fate, Fate::Exits | Fate::Forks);
        let spec = ProgramSpec {
            threads: p.threads,
            life_ms: if own_end { p.life_ms } else { 0 },
            fork_ms: if p.fate == Fate::Forks {
                p.fork_at_ms()
            } else {
                0
            },
            tag: format!("{}-p{}-{}", self.tag, p.index, p.policy),
        };
        let child = Command::new(&self.exe)
            .args(["bench", "--soak-program", &spec.arg()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting a program")?;
        self.fleet.programs.push(Running {
            pid: child.id() as i32,
            child,
            plan: p.clone(),
            started_ms: now,
            ended: false,
            signalled: false,
            released: false,
        });
        self.report.programs_started += 1;
        Ok(())
    }

    /// What is due for each running program: `ctl release` (then its masks are checked),
    /// a signal; and whether it has ended.
    fn act(&mut self, now: u64) -> Result<()> {
        for i in 0..self.fleet.programs.len() {
            let r = &self.fleet.programs[i];
            if r.ended {
                continue;
            }
            let (pid, index, fate, life) = (r.pid, r.plan.index, r.plan.fate, r.plan.life_ms);
            let age = now.saturating_sub(r.started_ms);
            if fate == Fate::Released
                && !r.released
                && age >= life / 2
                && self.managed.contains(&pid)
            {
                self.fleet.programs[i].released = true;
                self.release(pid, index)?;
            }
            let r = &mut self.fleet.programs[i];
            let signal = match fate {
                Fate::Term | Fate::Released => Some(libc::SIGTERM),
                Fate::Kill => Some(libc::SIGKILL),
                Fate::Exits | Fate::Forks => None,
            };
            if let Some(sig) = signal.filter(|_| !r.signalled && age >= life) {
                r.signalled = true;
                let _ = threadbalance_linux::signal::send(Pid(pid), sig);
            }
            if let Ok(Some(_)) = r.child.try_wait() {
                r.ended = true;
                let fate = format!("{fate:?}").to_lowercase();
                *self.report.fates.entry(fate).or_default() += 1;
            }
        }
        Ok(())
    }

    /// `ctl release PID`, then every thread of the program must be back on our mask.
    fn release(&mut self, pid: i32, index: usize) -> Result<()> {
        let out = Command::new(&self.exe)
            .args(["ctl", "--socket"])
            .arg(&self.socket)
            .args(["release", &pid.to_string()])
            .output()
            .context("running ctl release")?;
        if out.status.code() == Some(0) {
            self.report.checks += 1;
            let off = off_mask(pid, &self.mask);
            note_off(
                &mut self.report,
                &off,
                &format!("program {index} (pid {pid}) after ctl release"),
            );
        } else {
            self.report.errors += 1;
            self.report.error_lines.push(format!(
                "ctl release {pid}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }

    /// Reads the daemon's new log lines: managed pids, releases (a forking program's
    /// children are then checked), errors and advisories.
    fn read_log(&mut self) {
        for line in self.log.drain(&self.lines) {
            match soak_plan::classify(&line) {
                LogLine::Managed(pid) => {
                    self.managed.insert(pid);
                }
                LogLine::Released(pid) => self.check_orphans(pid),
                LogLine::Advisory => self.report.advisory_warnings.push(line),
                LogLine::Error => {
                    self.report.errors += 1;
                    self.report.error_lines.push(line);
                }
                LogLine::Other => {}
            }
        }
    }

    /// After a forking program `pid` was released (it exited): its children, started by a
    /// pinned thread, must be back on the mask the program started with.
    fn check_orphans(&mut self, pid: i32) {
        let Some(index) = self
            .fleet
            .programs
            .iter()
            .find(|r| r.pid == pid && r.plan.fate == Fate::Forks)
            .map(|r| r.plan.index)
        else {
            return;
        };
        let children: Vec<i32> = self
            .fleet
            .children
            .iter()
            .filter(|&(_, &i)| i == index)
            .map(|(&c, _)| c)
            .collect();
        for c in children.into_iter().filter(|&c| is_ours(c, &self.tag)) {
            self.report.orphan_checks += 1;
            let off = off_mask(c, &self.mask);
            self.report.orphans_left_pinned += off.len();
            note_off(
                &mut self.report,
                &off,
                &format!("child {c} of program {index} after its parent exited"),
            );
        }
    }

    /// Finds the programs' children, and notes the programs with a thread moved.
    fn scan(&mut self) {
        for (pid, last) in find_programs(&self.tag) {
            if let Some(r) = self.fleet.programs.iter().find(|r| r.pid == pid) {
                if !off_mask(pid, &self.mask).is_empty() {
                    self.moved.insert(r.plan.index);
                }
            } else if let Some(index) = parent_index(&last, &self.tag) {
                self.fleet.children.entry(pid).or_insert(index);
            }
        }
    }

    /// One VmRSS sample of the daemon at `now`.
    fn sample_rss(&mut self, daemon_pid: i32, now: u64) {
        let status = std::fs::read_to_string(format!("/proc/{daemon_pid}/status"));
        if let Some(kb) = status.ok().as_deref().and_then(soak_plan::parse_vm_rss) {
            self.report.rss_samples.push((now, kb));
        }
    }

    /// The stop: metrics and CPU time, SIGTERM, then everything still running must be on
    /// our mask and the state directory empty; every process started is stopped.
    fn stop(
        mut self,
        daemon_pid: i32,
        metrics_addr: &str,
        wall_s: f64,
        dir: &Path,
    ) -> Result<SoakReport> {
        let ticks = threadbalance_linux::HostFacts::system()?
            .ticks_per_sec
            .max(1);
        self.report.restore_failures_metric =
            scrape(metrics_addr, "threadbalance_restore_failures_total");
        let stat = std::fs::read_to_string(format!("/proc/{daemon_pid}/stat"));
        let cpu = stat.ok().as_deref().and_then(soak_plan::parse_cpu_ticks);
        self.report.wall_s = wall_s;
        self.report.daemon_cpu_s = cpu.unwrap_or(0) as f64 / ticks as f64;
        self.report.daemon_cpu_pct = 100.0 * self.report.daemon_cpu_s / wall_s.max(1e-9);
        if let Some(mut d) = self.fleet.daemon.take() {
            let _ = threadbalance_linux::signal::send(Pid(daemon_pid), libc::SIGTERM);
            self.report.daemon_exit = finish(&mut d);
        }
        // The reader thread has the last lines once the daemon's stderr is closed.
        std::thread::sleep(Duration::from_millis(200));
        self.read_log();
        for (pid, _) in find_programs(&self.tag) {
            self.report.alive_at_stop += 1;
            self.report.checks += 1;
            let off = off_mask(pid, &self.mask);
            self.report.left_pinned_at_stop += off.len();
            note_off(
                &mut self.report,
                &off,
                &format!("pid {pid} after the daemon's stop"),
            );
        }
        self.report.journals_left = std::fs::read_dir(dir.join("state")).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with("managed."))
                .count()
        });
        let managed = &self.managed;
        self.report.programs_managed = self
            .fleet
            .programs
            .iter()
            .filter(|r| managed.contains(&r.pid))
            .count();
        self.report.children_seen = self.fleet.children.len();
        self.report.programs_moved = self.moved.len();
        let mut report = std::mem::take(&mut self.report);
        drop(self);
        report.load_after = load_average();
        report.rss =
            Rss::of(&report.rss_samples, (report.warmup_s * 1000.0) as u64).unwrap_or_default();
        Ok(report)
    }
}

/// The daemon's log lines, as read so far.
#[derive(Default)]
struct Log {
    all: Vec<String>,
}

impl Log {
    /// The lines read since the last call (kept in `all` too).
    fn drain(&mut self, from: &Mutex<Vec<String>>) -> Vec<String> {
        let new: Vec<String> = from
            .lock()
            .map(|mut v| v.drain(..).collect())
            .unwrap_or_default();
        self.all.extend(new.iter().cloned());
        new
    }
}

/// Counts the threads in `off` as not restored, saying where.
fn note_off(report: &mut SoakReport, off: &[String], at: &str) {
    if !off.is_empty() {
        report.masks_not_restored += off.len();
        report.not_restored.push(format!("{at}: {}", off.join(" ")));
    }
}

/// The index of the program whose child carries tag `last` (`<tag>-p<k>-<policy>-child`).
fn parent_index(last: &str, tag: &str) -> Option<usize> {
    let rest = last.strip_suffix("-child")?;
    let rest = rest.split_once(&format!("{tag}-p"))?.1;
    rest.split('-').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_index_reads_the_child_tag() {
        assert_eq!(parent_index("soak9-p13-pbind-child", "soak9"), Some(13));
        assert_eq!(parent_index("soak9-p13-pbind", "soak9"), None);
        assert_eq!(parent_index("soak8-p13-pbind-child", "soak9"), None);
    }

    #[test]
    fn config_rules_match_only_the_run_s_programs() {
        let text = config_text(Path::new("/tmp/x"), "soak9");
        assert!(text.contains(r#"cmdline = "--soak-program [0-9:]+soak9-p[0-9]+-pbind$""#));
        assert!(text.contains(r#"policy = "speed""#));
        assert!(text.contains("sample_ms = 500"));
    }
}
