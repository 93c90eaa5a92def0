//! `threadbalance doctor`: what this machine offers the tool and what competes with it,
//! one line each, with what it means for the user.
//!
//! ```text
//!  Env { root, is_root, live } ─► one Check per question ─► text (a line each) or --json
//!     schedstat          proc/self/task/*/schedstat
//!     bpf counters       built with bpf? root? tracefs? (live: loaded, as run loads them)
//!     futex probe        the same, for the lock-wait probe
//!     hardware counters  CPU PMU? perf_event_paranoid? (live: a group opened on this thread)
//!     numa balancing     proc/sys/kernel/numa_balancing
//!     sched_ext          sys/kernel/sched_ext/state, root/ops
//!     competitors        irqbalance, numad, tuned in proc/*/comm (read as untrusted files)
//!     cpuset             the own cpuset and affinity against the online CPUs
//!     isolated CPUs      sys/devices/system/cpu/{isolated,nohz_full}, proc/cmdline
//!     smt                sys/devices/system/cpu/smt/active
//!     kernel HZ          boot/config-RELEASE or proc/config.gz; else estimated from jiffies
//! ```
//!
//! Every file is read under a root directory (`/`, or a fixture tree given with the
//! hidden `--root`); the probes that act (loading BPF programs, opening counters, waiting
//! a fifth of a second for jiffies to advance) run only on the real root.

use crate::input_error;
use anyhow::Result;
use clap::Args;
use serde::Serialize;
use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::PathBuf;
use threadbalance_linux::Root;
use threadbalance_linux::untrusted::read_untrusted_text;
use threadbalance_model::CpuSet;

/// Options of `threadbalance doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print JSON instead of lines.
    #[arg(long)]
    pub json: bool,
    /// Read `proc/`, `sys/` and `boot/` under DIR instead of `/`, acting on nothing (for
    /// tests on fixture trees).
    #[arg(long, hide = true, value_name = "DIR")]
    pub root: Option<PathBuf>,
    /// With `--root`: answer as for root.
    #[arg(long, hide = true, requires = "root")]
    pub as_root: bool,
}

/// An answer: the facility is there (or the competitor runs), is not, or cannot be told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer {
    /// Yes.
    Yes,
    /// No.
    No,
    /// Could not be told.
    Unknown,
}

impl Answer {
    fn word(self) -> &'static str {
        match self {
            Answer::Yes => "yes",
            Answer::No => "no",
            Answer::Unknown => "unknown",
        }
    }
}

/// One question about the machine and its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    /// What was asked (`schedstat`, `numa balancing`, …).
    pub name: &'static str,
    /// The answer.
    pub answer: Answer,
    /// What was found, briefly.
    pub found: String,
    /// What it means for the user.
    pub meaning: String,
}

fn check(name: &'static str, answer: Answer, found: impl Into<String>, meaning: &str) -> Check {
    Check {
        name,
        answer,
        found: found.into(),
        meaning: meaning.to_string(),
    }
}

/// Where the answers come from.
#[derive(Debug, Clone)]
pub struct Env {
    /// The root the files are read under.
    pub root: Root,
    /// Whether the tool runs as root.
    pub is_root: bool,
    /// Whether the probes that act may run (loading BPF, opening counters, waiting for
    /// jiffies): only on the real root.
    pub live: bool,
}

/// `threadbalance doctor`.
pub fn run(args: &DoctorArgs) -> Result<u8> {
    let env = match &args.root {
        Some(dir) => {
            if !dir.is_dir() {
                return Err(input_error(format!(
                    "--root {}: not a directory",
                    dir.display()
                )));
            }
            Env {
                root: Root::new(dir),
                is_root: args.as_root,
                live: false,
            }
        }
        None => Env {
            root: Root::system(),
            is_root: nix::unistd::geteuid().is_root(),
            live: true,
        },
    };
    let checks = gather(&env);
    if args.json {
        #[derive(Serialize)]
        struct Out<'a> {
            checks: &'a [Check],
        }
        let out = Out { checks: &checks };
        outln!(
            "{}",
            serde_json::to_string_pretty(&crate::schema::versioned(&out))?
        );
    } else {
        out!("{}", to_text(&checks));
    }
    Ok(0)
}

/// The checks as lines: `name  answer  found — meaning`.
pub fn to_text(checks: &[Check]) -> String {
    let mut s = String::new();
    for c in checks {
        s.push_str(&format!(
            "{:<18} {:<7} {} — {}\n",
            c.name,
            c.answer.word(),
            c.found,
            c.meaning
        ));
    }
    s
}

/// Every check, in the order the module docs list them.
pub fn gather(env: &Env) -> Vec<Check> {
    let (bpf, futex) = bpf_checks(env);
    vec![
        schedstat(env),
        bpf,
        futex,
        hardware_counters(env),
        numa_balancing(env),
        sched_ext(env),
        competitors(env),
        cpuset(env),
        isolated(env),
        smt(env),
        hz(env),
    ]
}

/// A file under the root, trimmed; `None` when absent or unreadable.
fn read(env: &Env, rel: &str) -> Option<String> {
    std::fs::read_to_string(env.root.join(rel))
        .ok()
        .map(|s| s.trim().to_string())
}

fn schedstat(env: &Env) -> Check {
    let tasks = env.root.join("proc/self/task");
    let Ok(dir) = std::fs::read_dir(&tasks) else {
        return check(
            "schedstat",
            Answer::Unknown,
            "proc/self/task unreadable",
            "whether run-queue waits can be read is not known",
        );
    };
    let any = dir
        .filter_map(|e| e.ok())
        .any(|e| e.path().join("schedstat").is_file());
    if any {
        check(
            "schedstat",
            Answer::Yes,
            "/proc/<pid>/task/<tid>/schedstat",
            "run time and run-queue wait per thread, to the nanosecond",
        )
    } else {
        check(
            "schedstat",
            Answer::No,
            "no schedstat files (CONFIG_SCHED_INFO off)",
            "run time from stat's clock ticks, run-queue wait unknown: the policies judge \
             by utilization alone",
        )
    }
}

/// Where tracefs's events are, if mounted.
fn tracefs_events(env: &Env) -> Option<String> {
    [
        "sys/kernel/tracing/events",
        "sys/kernel/debug/tracing/events",
    ]
    .into_iter()
    .find(|e| env.root.join(e).join("sched").is_dir() || env.root.join(e).join("syscalls").is_dir())
    .map(|e| format!("/{e}"))
}

/// Why the BPF programs cannot load, before trying.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum NoBpf {
    /// This binary was built without the `bpf` feature.
    #[error("built without the bpf feature")]
    NotBuilt,
    /// Not root.
    #[error("not root (BPF needs CAP_BPF and CAP_PERFMON)")]
    NotRoot,
    /// No tracefs with the scheduler's or the system calls' events under the root.
    #[error("tracefs not mounted (mount -t tracefs tracefs /sys/kernel/tracing)")]
    NoTracefs,
}

/// Why a BPF program is not offered: refused before trying, or by its loader.
#[derive(Debug, thiserror::Error)]
enum BpfOff {
    /// Refused before trying.
    #[error(transparent)]
    Before(#[from] NoBpf),
    /// The run-time counters did not load.
    #[error(transparent)]
    Sched(#[from] threadbalance_linux::runcount::NoCounters),
    /// The futex probe did not load.
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Futex(#[from] threadbalance_linux::bpf::ProbeUnavailable),
}

/// Why the BPF programs cannot load, before trying: not built with them, not root, no
/// tracefs. Else where tracefs's events are.
fn bpf_preconditions(env: &Env) -> Result<String, NoBpf> {
    if !cfg!(feature = "bpf") {
        return Err(NoBpf::NotBuilt);
    }
    if !env.is_root {
        return Err(NoBpf::NotRoot);
    }
    tracefs_events(env).ok_or(NoBpf::NoTracefs)
}

fn bpf_checks(env: &Env) -> (Check, Check) {
    let (sched, futex) = match bpf_preconditions(env) {
        Err(why) => (Err(why.into()), Err(why.into())),
        Ok(events) if !env.live => (
            Ok(format!("root, tracefs at {events}")),
            Ok(format!("root, tracefs at {events}")),
        ),
        Ok(_) => (load_sched(), load_futex()),
    };
    let bpf = match sched {
        Ok(how) => check(
            "bpf counters",
            Answer::Yes,
            how,
            "run time and run-queue wait from BPF sched_switch counters, exact at each read \
             and cheaper than /proc on many threads",
        ),
        Err(why) => check(
            "bpf counters",
            Answer::No,
            why.to_string(),
            "run time from /proc: a queued thread's wait is seen once it runs again",
        ),
    };
    let futex = match futex {
        Ok(how) => check(
            "futex probe",
            Answer::Yes,
            how,
            "exact lock and sync waits per thread for shuffling and handoff",
        ),
        Err(why) => check(
            "futex probe",
            Answer::No,
            why.to_string(),
            "lock time estimated from blocked time (shuffling and handoff decide on it)",
        ),
    };
    (bpf, futex)
}

/// Loads the run-time counters as `run` does, then drops them.
fn load_sched() -> Result<String, BpfOff> {
    let c = threadbalance_linux::runcount::load()?;
    Ok(format!("{} loaded", c.name()))
}

/// Loads the futex probe as `run` does, then drops it.
fn load_futex() -> Result<String, BpfOff> {
    #[cfg(feature = "bpf")]
    {
        threadbalance_linux::bpf::FutexProbe::load()?;
        Ok("loaded on the futex tracepoints".to_string())
    }
    #[cfg(not(feature = "bpf"))]
    {
        Err(NoBpf::NotBuilt.into())
    }
}

fn hardware_counters(env: &Env) -> Check {
    use threadbalance_linux::perf;
    let pmus = perf::cpu_pmus(&env.root).unwrap_or_default();
    let level = perf::paranoid(&env.root).map_or("perf_event_paranoid unknown".to_string(), |l| {
        format!("perf_event_paranoid {l}")
    });
    let result = if env.live {
        perf::PerfSource::system().map(|_| ())
    } else {
        perf::preconditions(&env.root, env.is_root)
    };
    match result {
        Ok(()) => check(
            "hardware counters",
            Answer::Yes,
            format!("PMU {}, {level}", pmus.join(",")),
            "IPC and MPKI per thread (`--counters`); the dino policy can run",
        ),
        Err(why) => check(
            "hardware counters",
            Answer::No,
            format!("{why}; {level}"),
            "no IPC or MPKI; policies that read counters (dino) refuse to start, `sim` runs them",
        ),
    }
}

fn numa_balancing(env: &Env) -> Check {
    match threadbalance_linux::read_numa_balancing(&env.root) {
        Some(true) => check(
            "numa balancing",
            Answer::Yes,
            "kernel.numa_balancing on",
            "the kernel moves threads and pages too and competes with the numa-* policies \
             (`sysctl kernel.numa_balancing=0` turns it off)",
        ),
        Some(false) => check(
            "numa balancing",
            Answer::No,
            "kernel.numa_balancing 0",
            "nothing in the kernel moves pages behind the numa-* policies",
        ),
        None => check(
            "numa balancing",
            Answer::Unknown,
            "no /proc/sys/kernel/numa_balancing",
            "a kernel without automatic NUMA balancing (or one node): nothing to compete",
        ),
    }
}

fn sched_ext(env: &Env) -> Check {
    let Some(state) = read(env, "sys/kernel/sched_ext/state") else {
        return check(
            "sched_ext",
            Answer::No,
            "no /sys/kernel/sched_ext",
            "the kernel's own scheduler places the threads within the masks set",
        );
    };
    if state == "enabled" || state == "enabling" {
        let ops = read(env, "sys/kernel/sched_ext/root/ops").unwrap_or_else(|| "?".into());
        check(
            "sched_ext",
            Answer::Yes,
            format!("BPF scheduler {ops} {state}"),
            "a sched_ext scheduler chooses CPUs within the masks set, and may balance against \
             the policy",
        )
    } else {
        check(
            "sched_ext",
            Answer::No,
            format!("state {state}"),
            "the kernel's own scheduler places the threads within the masks set",
        )
    }
}

/// Programs that move threads or interrupts, or retune the scheduler.
const COMPETITORS: [&str; 3] = ["irqbalance", "numad", "tuned"];

fn competitors(env: &Env) -> Check {
    let Ok(dir) = std::fs::read_dir(env.root.join("proc")) else {
        return check(
            "competitors",
            Answer::Unknown,
            "/proc unreadable",
            "whether irqbalance, numad or tuned run is not known",
        );
    };
    let mut found = BTreeSet::new();
    for e in dir.filter_map(|e| e.ok()) {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        // Another user's process: its comm is theirs to set; read it as untrusted.
        if let Ok(comm) = read_untrusted_text(&e.path().join("comm"), 64)
            && let Some(hit) = COMPETITORS.iter().find(|c| comm.trim_end() == **c)
        {
            found.insert(*hit);
        }
    }
    if found.is_empty() {
        check(
            "competitors",
            Answer::No,
            "no irqbalance, numad or tuned running",
            "nothing else moves threads or interrupts",
        )
    } else {
        let names: Vec<&str> = found.into_iter().collect();
        check(
            "competitors",
            Answer::Yes,
            format!("{} running", names.join(", ")),
            "numad moves processes and their memory across nodes (stop it under numa-*), \
             irqbalance moves interrupts onto CPUs the threads are placed on, tuned may \
             change scheduler settings",
        )
    }
}

/// The online CPUs under the root.
fn online(env: &Env) -> Option<CpuSet> {
    CpuSet::parse_list(&read(env, "sys/devices/system/cpu/online")?).ok()
}

fn cpuset(env: &Env) -> Check {
    let Some(online) = online(env) else {
        return check(
            "cpuset limit",
            Answer::Unknown,
            "no /sys/devices/system/cpu/online",
            "whether the tool may use every CPU is not known",
        );
    };
    let cpuset = threadbalance_linux::read_cpuset(&env.root, "self")
        .ok()
        .flatten();
    let affinity = read(env, "proc/self/status").and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .and_then(|v| CpuSet::parse_list(v.trim()).ok())
    });
    let mut limits = Vec::new();
    if let Some(cs) = &cpuset {
        let within = cs.cpus.intersection(&online);
        if within != online {
            limits.push(format!("cpuset {} allows {within}", cs.name));
        }
    }
    if let Some(a) = &affinity {
        let within = a.intersection(&online);
        if within != online {
            limits.push(format!("affinity {within}"));
        }
    }
    if limits.is_empty() {
        check(
            "cpuset limit",
            Answer::No,
            format!("all {} online CPUs ({online}) usable", online.len()),
            "run places threads over the whole machine (--cpus narrows it)",
        )
    } else {
        check(
            "cpuset limit",
            Answer::Yes,
            format!("{} of online {online}", limits.join(", ")),
            "run places threads only on those CPUs (the command inherits the limit)",
        )
    }
}

fn isolated(env: &Env) -> Check {
    let list = |rel: &str| read(env, rel).filter(|v| !v.is_empty() && v != "(null)");
    let cmdline = read(env, "proc/cmdline").unwrap_or_default();
    let args: Vec<&str> = cmdline
        .split_whitespace()
        .filter(|w| w.starts_with("isolcpus=") || w.starts_with("nohz_full="))
        .collect();
    let mut found = Vec::new();
    if let Some(v) = list("sys/devices/system/cpu/isolated") {
        found.push(format!("isolated {v}"));
    }
    if let Some(v) = list("sys/devices/system/cpu/nohz_full") {
        found.push(format!("nohz_full {v}"));
    }
    if found.is_empty() {
        found.extend(args.iter().map(|a| a.to_string()));
    }
    let known = env.root.join("sys/devices/system/cpu/isolated").exists() || !cmdline.is_empty();
    if !found.is_empty() {
        check(
            "isolated CPUs",
            Answer::Yes,
            found.join(", "),
            "the kernel balances nothing onto isolated CPUs: a thread placed there stays, \
             and `--cpus` should leave them out unless they are meant for the program",
        )
    } else if known {
        check(
            "isolated CPUs",
            Answer::No,
            "no isolcpus or nohz_full",
            "every CPU takes part in the kernel's balancing",
        )
    } else {
        check(
            "isolated CPUs",
            Answer::Unknown,
            "no /sys/devices/system/cpu/isolated, no /proc/cmdline",
            "whether CPUs are isolated is not known",
        )
    }
}

fn smt(env: &Env) -> Check {
    match read(env, "sys/devices/system/cpu/smt/active").as_deref() {
        Some("1") => check(
            "smt",
            Answer::Yes,
            "SMT active",
            "sibling CPUs share a core: the core level groups them, and two busy threads on \
             one core run slower than on two",
        ),
        Some("0") => check(
            "smt",
            Answer::No,
            format!(
                "SMT {}",
                read(env, "sys/devices/system/cpu/smt/control")
                    .map_or("inactive".to_string(), |c| format!("inactive ({c})"))
            ),
            "every CPU is a core of its own: the core and cpu levels are the same",
        ),
        _ => check(
            "smt",
            Answer::Unknown,
            "no /sys/devices/system/cpu/smt/active",
            "whether CPUs share cores is read from the topology (`threadbalance topo`)",
        ),
    }
}

/// `CONFIG_HZ=N` in a kernel configuration.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
}

/// The kernel configuration and where it came from: `boot/config-RELEASE`, else
/// `proc/config.gz`.
fn kernel_config(env: &Env) -> Option<(String, String)> {
    if let Some(release) = read(env, "proc/sys/kernel/osrelease") {
        let rel = format!("boot/config-{release}");
        if let Ok(text) = std::fs::read_to_string(env.root.join(&rel)) {
            return Some((text, format!("/{rel}")));
        }
    }
    let file = std::fs::File::open(env.root.join("proc/config.gz")).ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file)
        .take(16 << 20)
        .read_to_string(&mut text)
        .ok()?;
    Some((text, "/proc/config.gz".into()))
}

/// The jiffies count of `proc/schedstat`'s `timestamp` line.
fn jiffies(env: &Env) -> Option<u64> {
    read(env, "proc/schedstat")?
        .lines()
        .find_map(|l| l.strip_prefix("timestamp "))
        .and_then(|v| v.trim().parse().ok())
}

/// HZ from jiffies counted over 200 ms, rounded to the nearest usual value.
fn estimate_hz(env: &Env) -> Option<u32> {
    let a = jiffies(env)?;
    let t = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let b = jiffies(env)?;
    let per_s = b.saturating_sub(a) as f64 / t.elapsed().as_secs_f64();
    [100u32, 250, 300, 1000].into_iter().min_by(|x, y| {
        (f64::from(*x) - per_s)
            .abs()
            .total_cmp(&(f64::from(*y) - per_s).abs())
    })
}

fn hz_meaning(hz: u32) -> String {
    format!(
        "the scheduler tick is {:.1} ms: stat's CPU times come in such ticks, and a \
         balance interval under it sees them move in steps",
        1000.0 / f64::from(hz)
    )
}

fn hz(env: &Env) -> Check {
    if let Some((config, from)) = kernel_config(env)
        && let Some(hz) = config_hz(&config)
    {
        return Check {
            name: "kernel HZ",
            answer: Answer::Yes,
            found: format!("HZ={hz} (CONFIG_HZ in {from})"),
            meaning: hz_meaning(hz),
        };
    }
    if env.live
        && let Some(hz) = estimate_hz(env)
    {
        return Check {
            name: "kernel HZ",
            answer: Answer::Yes,
            found: format!("HZ≈{hz} (estimated from jiffies over 200 ms; no kernel config)"),
            meaning: hz_meaning(hz),
        };
    }
    check(
        "kernel HZ",
        Answer::Unknown,
        "no kernel config (/boot/config-RELEASE, /proc/config.gz) and no jiffies to count",
        "the scheduler tick is not known (100 to 1000 a second)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A fixture tree where every check says yes.
    fn yes_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(r, "proc/self/task/1/schedstat", "1 2 3\n");
        write(r, "sys/kernel/tracing/events/sched/sched_switch/id", "1\n");
        write(
            r,
            "sys/kernel/tracing/events/syscalls/sys_enter_futex/id",
            "2\n",
        );
        std::fs::create_dir_all(r.join("sys/bus/event_source/devices/cpu")).unwrap();
        write(r, "proc/sys/kernel/perf_event_paranoid", "2\n");
        write(r, "proc/sys/kernel/numa_balancing", "1\n");
        write(r, "sys/kernel/sched_ext/state", "enabled\n");
        write(r, "sys/kernel/sched_ext/root/ops", "rusty\n");
        write(r, "proc/412/comm", "irqbalance\n");
        write(r, "proc/977/comm", "numad\n");
        write(r, "proc/978/comm", "bash\n");
        write(r, "sys/devices/system/cpu/online", "0-7\n");
        write(r, "proc/self/status", "Name:\tx\nCpus_allowed_list:\t0-3\n");
        write(r, "sys/devices/system/cpu/isolated", "6-7\n");
        write(r, "sys/devices/system/cpu/nohz_full", "(null)\n");
        write(r, "proc/cmdline", "ro isolcpus=6-7\n");
        write(r, "sys/devices/system/cpu/smt/active", "1\n");
        write(r, "proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(r, "boot/config-6.1.0-test", "CONFIG_X=y\nCONFIG_HZ=250\n");
        d
    }

    /// A fixture tree where every check says no.
    fn no_tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        std::fs::create_dir_all(r.join("proc/self/task/1")).unwrap();
        std::fs::create_dir_all(r.join("sys/bus/event_source/devices/software")).unwrap();
        write(r, "proc/sys/kernel/perf_event_paranoid", "3\n");
        write(r, "proc/sys/kernel/numa_balancing", "0\n");
        write(r, "sys/kernel/sched_ext/state", "disabled\n");
        write(r, "proc/978/comm", "tunedx\n");
        write(r, "sys/devices/system/cpu/online", "0-3\n");
        write(r, "proc/self/status", "Cpus_allowed_list:\t0-3\n");
        write(r, "sys/devices/system/cpu/isolated", "\n");
        write(r, "proc/cmdline", "ro quiet\n");
        write(r, "sys/devices/system/cpu/smt/active", "0\n");
        write(r, "sys/devices/system/cpu/smt/control", "notsupported\n");
        write(r, "proc/sys/kernel/osrelease", "6.1.0-test\n");
        write(r, "boot/config-6.1.0-test", "# CONFIG_HZ is not set\n");
        d
    }

    fn answers(root: &Path, is_root: bool) -> Vec<(&'static str, Answer, String)> {
        let env = Env {
            root: Root::new(root),
            is_root,
            live: false,
        };
        gather(&env)
            .into_iter()
            .map(|c| (c.name, c.answer, c.found))
            .collect()
    }

    fn find(a: &[(&'static str, Answer, String)], name: &str) -> (Answer, String) {
        let (_, ans, found) = a.iter().find(|(n, _, _)| *n == name).unwrap();
        (*ans, found.clone())
    }

    #[test]
    fn doctor_yes_on_a_tree_that_offers_everything() {
        let d = yes_tree();
        let a = answers(d.path(), true);
        assert_eq!(a.len(), 11);
        let bpf_built = cfg!(feature = "bpf");
        for (name, want, needle) in [
            ("schedstat", Answer::Yes, "schedstat"),
            (
                "hardware counters",
                Answer::Yes,
                "PMU cpu, perf_event_paranoid 2",
            ),
            ("numa balancing", Answer::Yes, "on"),
            ("sched_ext", Answer::Yes, "rusty enabled"),
            ("competitors", Answer::Yes, "irqbalance, numad running"),
            ("cpuset limit", Answer::Yes, "affinity 0-3 of online 0-7"),
            ("isolated CPUs", Answer::Yes, "isolated 6-7"),
            ("smt", Answer::Yes, "SMT active"),
            (
                "kernel HZ",
                Answer::Yes,
                "HZ=250 (CONFIG_HZ in /boot/config-6.1.0-test)",
            ),
        ] {
            let (ans, found) = find(&a, name);
            assert_eq!(ans, want, "{name}: {found}");
            assert!(found.contains(needle), "{name}: {found}");
        }
        let (ans, found) = find(&a, "bpf counters");
        if bpf_built {
            assert_eq!(ans, Answer::Yes, "{found}");
            assert!(found.contains("/sys/kernel/tracing/events"), "{found}");
        } else {
            assert_eq!(ans, Answer::No);
        }
        // Not root: no BPF, and perf_event_paranoid 2 still allows counters.
        let a = answers(d.path(), false);
        let (ans, found) = find(&a, "futex probe");
        assert_eq!(ans, Answer::No);
        assert!(found.contains("not root") || !bpf_built, "{found}");
        assert_eq!(find(&a, "hardware counters").0, Answer::Yes);
    }

    #[test]
    fn doctor_no_on_a_tree_that_offers_nothing() {
        let d = no_tree();
        let a = answers(d.path(), false);
        for (name, want, needle) in [
            ("schedstat", Answer::No, "CONFIG_SCHED_INFO"),
            ("bpf counters", Answer::No, ""),
            ("futex probe", Answer::No, ""),
            ("hardware counters", Answer::No, "no CPU PMU"),
            ("numa balancing", Answer::No, "0"),
            ("sched_ext", Answer::No, "disabled"),
            ("competitors", Answer::No, "no irqbalance"),
            ("cpuset limit", Answer::No, "all 4 online CPUs (0-3)"),
            ("isolated CPUs", Answer::No, "no isolcpus"),
            ("smt", Answer::No, "inactive (notsupported)"),
            ("kernel HZ", Answer::Unknown, "no kernel config"),
        ] {
            let (ans, found) = find(&a, name);
            assert_eq!(ans, want, "{name}: {found}");
            assert!(found.contains(needle), "{name}: {found}");
        }
        // A PMU, but paranoid 3 forbids it to a user.
        std::fs::create_dir_all(d.path().join("sys/bus/event_source/devices/cpu")).unwrap();
        let (ans, found) = find(&answers(d.path(), false), "hardware counters");
        assert_eq!(ans, Answer::No);
        assert!(found.contains("perf_event_paranoid is 3"), "{found}");
        assert_eq!(
            find(&answers(d.path(), true), "hardware counters").0,
            Answer::Yes
        );
    }

    #[test]
    fn doctor_unknown_on_an_empty_tree() {
        let d = tempfile::tempdir().unwrap();
        let a = answers(d.path(), false);
        for name in [
            "schedstat",
            "numa balancing",
            "competitors",
            "cpuset limit",
            "isolated CPUs",
            "smt",
            "kernel HZ",
        ] {
            assert_eq!(find(&a, name).0, Answer::Unknown, "{name}");
        }
        // Each line names the check, its answer, what was found and what it means.
        let env = Env {
            root: Root::new(d.path()),
            is_root: false,
            live: false,
        };
        let text = to_text(&gather(&env));
        assert_eq!(text.lines().count(), 11);
        assert!(text.lines().all(|l| l.contains(" — ")), "{text}");
        assert!(text.contains("smt                unknown "), "{text}");
    }

    #[test]
    fn doctor_bpf_refusals_say_each_reason_in_one_line() {
        for (why, line) in [
            (NoBpf::NotBuilt, "built without the bpf feature"),
            (
                NoBpf::NotRoot,
                "not root (BPF needs CAP_BPF and CAP_PERFMON)",
            ),
            (
                NoBpf::NoTracefs,
                "tracefs not mounted (mount -t tracefs tracefs /sys/kernel/tracing)",
            ),
        ] {
            assert_eq!(why.to_string(), line);
            // Said as it is in either check's answer.
            assert_eq!(BpfOff::from(why).to_string(), line);
        }
        // Not root on a tree with tracefs: both checks say so.
        let d = yes_tree();
        let env = Env {
            root: Root::new(d.path()),
            is_root: false,
            live: false,
        };
        let (bpf, futex) = bpf_checks(&env);
        let want = if cfg!(feature = "bpf") {
            NoBpf::NotRoot
        } else {
            NoBpf::NotBuilt
        };
        assert_eq!(bpf_preconditions(&env), Err(want));
        assert_eq!(
            (bpf.answer, bpf.found.as_str()),
            (Answer::No, &*want.to_string())
        );
        assert_eq!(futex.found, want.to_string());
    }

    #[test]
    fn doctor_reads_hz_from_proc_config_gz() {
        use flate2::{Compression, write::GzEncoder};
        use std::io::Write as _;
        let d = tempfile::tempdir().unwrap();
        let mut gz = GzEncoder::new(Vec::new(), Compression::default());
        gz.write_all(b"CONFIG_A=y\nCONFIG_HZ=1000\n").unwrap();
        write(d.path(), "proc/placeholder", "");
        std::fs::write(d.path().join("proc/config.gz"), gz.finish().unwrap()).unwrap();
        let (ans, found) = find(&answers(d.path(), false), "kernel HZ");
        assert_eq!(ans, Answer::Yes);
        assert_eq!(found, "HZ=1000 (CONFIG_HZ in /proc/config.gz)");
    }

    #[test]
    fn doctor_competitors_ignore_a_comm_that_is_not_a_regular_file() {
        // Another user's process could make its comm anything; a FIFO is refused, not
        // waited on, and the scan goes on.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proc/5")).unwrap();
        nix::unistd::mkfifo(
            &d.path().join("proc/5/comm"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        write(d.path(), "proc/6/comm", "tuned\n");
        let (ans, found) = find(&answers(d.path(), false), "competitors");
        assert_eq!((ans, found.as_str()), (Answer::Yes, "tuned running"));
    }
}
