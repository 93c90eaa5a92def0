//! The crate's only I/O: reading the config file, `/proc`, `/sys` and `/etc/passwd` under a
//! [`Root`], and handing the text to the pure parsers of the other modules.
//!
//! ```text
//!  Root ("/" live, a fixture tree in tests)
//!   ├─ proc/<pid>/{stat,comm,cmdline,cgroup,status}, task/<tid>/stat   read_process → ProcessReading
//!   ├─ proc/cmdline, sys/devices/system/cpu/{isolated,nohz_full}       read_kernel_bans → KernelBans
//!   ├─ proc/sys/kernel/numa_balancing, sys/kernel/sched_ext/…, comms   read_competitors → [Competitor]
//!   ├─ sys/fs/cgroup/{<v2>/cpuset.cpus.effective,cpuset/<v1>/cpuset.effective_cpus}  read_cpuset_effective
//!   └─ etc/passwd, pid files                                           read_users, read_pid_files
//! ```
//!
//! The daemon runs as root, and some of these files may be written by others: the pid files
//! (a service's own user writes its pid file) and the config file. Those are read through
//! [`threadbalance_linux::untrusted::read_untrusted`] only: never through a symlink, never
//! blocking on a FIFO, regular files only, at most [`MAX_PID_FILE_BYTES`] or
//! [`MAX_CONFIG_BYTES`]. One bad pid file is reported on its own and the others still count.
//!
//! A process or thread that vanishes while being read is an outcome, not an error: it is
//! left out (`Ok(None)`). A file that is there but makes no sense is a [`ReadError`] naming
//! the file and the line.
//!
//! ```
//! use threadbalance_daemon::read::{Root, read_process};
//! use threadbalance_model::Pid;
//! let root = Root::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/proc/daemon-host"));
//! let p = read_process(&root, Pid(2100), 100).unwrap().unwrap();
//! assert_eq!((p.comm.as_str(), p.threads.len()), ("ffmpeg", 3));
//! assert!(read_process(&root, Pid(99999), 100).unwrap().is_none()); // no such process
//! ```

pub use threadbalance_linux::Root;

use crate::banned::{KernelBans, parse_kernel_cmdline, parse_sysfs_cpus};
use crate::competitor::{self, Competitor};
use crate::config::Config;
use crate::error::{ConfigError, ParseError, ReadError};
use crate::process::{ProcessReading, Users, parse_cgroup, parse_cmdline, parse_passwd, parse_uid};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use threadbalance_linux::parse::parse_stat;
use threadbalance_linux::untrusted::{UntrustedError, read_untrusted};
use threadbalance_model::{CpuSet, Nanos, Pid, Tid};

/// `ESRCH`: the task behind a `/proc` file has exited.
const ESRCH: i32 = 3;

/// Whether an I/O error means the thing read has gone.
fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ESRCH)
}

fn io_err(path: &Path, source: io::Error) -> ReadError {
    ReadError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn parse_err(path: &Path, why: ParseError) -> ReadError {
    ReadError::Parse {
        path: path.to_path_buf(),
        why: Box::new(why),
    }
}

/// The file's bytes, `None` when it (or its task) is gone.
fn bytes_opt(path: &Path) -> Result<Option<Vec<u8>>, ReadError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(io_err(path, e)),
    }
}

/// The file's text (bytes that are not UTF-8 replaced), `None` when it is gone.
fn text_opt(path: &Path) -> Result<Option<String>, ReadError> {
    Ok(bytes_opt(path)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// An absolute host path (`/run/x.pid`) under the root.
fn under(root: &Root, path: &Path) -> PathBuf {
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// The largest pid file read: a pid is a few bytes; anything near this is not a pid file.
pub const MAX_PID_FILE_BYTES: u64 = 4096;

/// The largest config file read (a config of 40,000 rules is about 3 MiB).
pub const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// Reads and validates the config file at `path`. An unreadable file is a one-line
/// [`ConfigError`] too, so the caller has one kind of rejection to print.
pub fn read_config(path: &Path) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let text = read_config_text(path)?;
    Config::parse(&file, &text)
}

/// The config file's text, read as a file others may write is
/// ([`threadbalance_linux::untrusted`]): not through a symlink in its last component, not
/// a FIFO or device, at most [`MAX_CONFIG_BYTES`]. A refusal is a one-line
/// [`ConfigError`] naming the file.
pub fn read_config_text(path: &Path) -> Result<String, ConfigError> {
    let file = path.display().to_string();
    let text = read_untrusted(path, MAX_CONFIG_BYTES).map_err(|e| {
        let why = match &e {
            UntrustedError::Io { source, .. } => source.to_string(),
            UntrustedError::Symlink { .. } => "is a symbolic link; not following it".into(),
            UntrustedError::NotRegular { kind, .. } => format!("is a {kind}, not a regular file"),
            UntrustedError::TooLarge { cap, .. } => format!("larger than {cap} bytes"),
            UntrustedError::NotText { .. } => "not UTF-8 text".into(),
        };
        ConfigError::new(&file, None, "", format!("cannot read: {why}"))
    })?;
    String::from_utf8(text)
        .map_err(|_| ConfigError::new(&file, None, "", "cannot read: not UTF-8 text"))
}

/// The processes under `proc/`, lowest pid first.
pub fn read_pids(root: &Root) -> Result<Vec<Pid>, ReadError> {
    let dir = root.join("proc");
    let entries = std::fs::read_dir(&dir).map_err(|e| io_err(&dir, e))?;
    let mut pids = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(&dir, e))?;
        if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
            pids.push(Pid(pid));
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

/// Every process's pid and name (`comm`), lowest pid first; processes that exit meanwhile
/// are left out.
pub fn read_comms(root: &Root) -> Result<Vec<(Pid, String)>, ReadError> {
    let mut out = Vec::new();
    for pid in read_pids(root)? {
        if let Some(comm) = text_opt(&root.proc_dir(pid).join("comm"))? {
            out.push((pid, comm.trim_end_matches('\n').to_string()));
        }
    }
    Ok(out)
}

/// One look at process `pid` (see [`ProcessReading`]); `Ok(None)` when it does not exist
/// or exits while being read. `ticks_per_sec` converts `stat`'s times
/// ([`threadbalance_linux::HostFacts`]).
pub fn read_process(
    root: &Root,
    pid: Pid,
    ticks_per_sec: u64,
) -> Result<Option<ProcessReading>, ReadError> {
    let dir = root.proc_dir(pid);
    let path = dir.join("stat");
    let Some(stat_text) = text_opt(&path)? else {
        return Ok(None);
    };
    let stat =
        parse_stat(&stat_text, ticks_per_sec).map_err(|e| parse_err(&path, ParseError::Stat(e)))?;
    let Some(comm) = text_opt(&dir.join("comm"))? else {
        return Ok(None);
    };
    let Some(cmdline) = bytes_opt(&dir.join("cmdline"))? else {
        return Ok(None);
    };
    let path = dir.join("cgroup");
    let cgroups = match text_opt(&path)? {
        None => Default::default(),
        Some(text) => parse_cgroup(&text).map_err(|why| parse_err(&path, why))?,
    };
    let path = dir.join("status");
    let Some(status) = text_opt(&path)? else {
        return Ok(None);
    };
    let uid = parse_uid(&status).map_err(|why| parse_err(&path, why))?;

    let task_dir = dir.join("task");
    let entries = match std::fs::read_dir(&task_dir) {
        Ok(entries) => entries,
        Err(e) if is_gone(&e) => return Ok(None),
        Err(e) => return Err(io_err(&task_dir, e)),
    };
    let mut threads = BTreeMap::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_err(&task_dir, e))?;
        let Some(tid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let path = entry.path().join("stat");
        if let Some(text) = text_opt(&path)? {
            let t = parse_stat(&text, ticks_per_sec)
                .map_err(|e| parse_err(&path, ParseError::Stat(e)))?;
            threads.insert(Tid(tid), Nanos(t.utime.0.saturating_add(t.stime.0)));
        }
    }
    Ok(Some(ProcessReading {
        pid,
        start_time: stat.start_time,
        comm: comm.trim_end_matches('\n').to_string(),
        cmdline: parse_cmdline(&cmdline),
        cgroup: cgroups.rule_path().map(str::to_string),
        cpuset_v1: cgroups.cpuset_v1,
        uid,
        kernel_thread: stat.is_kernel_thread(),
        cpu_time: Nanos(stat.utime.0.saturating_add(stat.stime.0)),
        threads,
    }))
}

/// User names from `etc/passwd` under the root; none when the file is missing.
pub fn read_users(root: &Root) -> Result<Users, ReadError> {
    Ok(text_opt(&root.join("etc/passwd"))?
        .map(|t| parse_passwd(&t))
        .unwrap_or_default())
}

/// What the hands-off pid files gave.
#[derive(Debug, Default)]
pub struct PidFiles {
    /// The pids of the files that hold one.
    pub pids: BTreeSet<Pid>,
    /// The files that exist but could not be used, one error each naming the file (the
    /// caller logs them; the other files' pids count all the same).
    pub bad: Vec<ReadError>,
}

/// The pids in the hands-off pid files (host paths, read under the root). A missing file is
/// a program not running and gives no pid. Each file is read on its own, as a file others
/// may write ([`read_untrusted`], at most [`MAX_PID_FILE_BYTES`]): one that is a symlink, a
/// FIFO, a device, too large, or that holds no pid is listed in [`PidFiles::bad`] and
/// never keeps the others' pids out.
pub fn read_pid_files(root: &Root, files: &[PathBuf]) -> PidFiles {
    let mut out = PidFiles::default();
    for file in files {
        let path = under(root, file);
        let bytes = match read_untrusted(&path, MAX_PID_FILE_BYTES) {
            Ok(b) => b,
            Err(e) if e.is_not_found() => continue,
            Err(e) => {
                out.bad.push(ReadError::Refused(e));
                continue;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let first = text.lines().next().unwrap_or("").trim();
        match first.parse::<i32>().ok().filter(|p| *p > 0) {
            Some(pid) => {
                out.pids.insert(Pid(pid));
            }
            None => out
                .bad
                .push(parse_err(&path, ParseError::NotPid(first.to_string()))),
        }
    }
    out
}

/// What the kernel isolates: `proc/cmdline`'s `isolcpus=` and `nohz_full=`, and
/// `sys/devices/system/cpu/{isolated,nohz_full}`. A missing file (an older kernel, a
/// fixture without it) contributes nothing.
pub fn read_kernel_bans(root: &Root) -> Result<KernelBans, ReadError> {
    let path = root.join("proc/cmdline");
    let cmdline = match text_opt(&path)? {
        None => Default::default(),
        Some(text) => parse_kernel_cmdline(&text).map_err(|why| parse_err(&path, why))?,
    };
    let sysfs = |name: &str| -> Result<CpuSet, ReadError> {
        let path = root.join("sys/devices/system/cpu").join(name);
        match text_opt(&path)? {
            None => Ok(CpuSet::new()),
            Some(text) => parse_sysfs_cpus(&text).map_err(|why| parse_err(&path, why)),
        }
    };
    Ok(KernelBans {
        cmdline,
        isolated: sysfs("isolated")?,
        nohz_full: sysfs("nohz_full")?,
    })
}

/// The competitors found now: a sched_ext scheduler, numad among `processes` (from
/// [`read_comms`]), the kernel's NUMA balancing. Missing files mean the kernel lacks the
/// feature.
pub fn read_competitors(
    root: &Root,
    processes: &[(Pid, String)],
) -> Result<Vec<Competitor>, ReadError> {
    let mut found = Vec::new();
    let state = text_opt(&root.join("sys/kernel/sched_ext/state"))?.unwrap_or_default();
    let ops = text_opt(&root.join("sys/kernel/sched_ext/root/ops"))?.unwrap_or_default();
    found.extend(competitor::sched_ext(&state, &ops));
    found.extend(competitor::numad(processes));
    let path = root.join("proc/sys/kernel/numa_balancing");
    if let Some(text) = text_opt(&path)? {
        found.extend(competitor::numa_balancing(&text).map_err(|why| parse_err(&path, why))?);
    }
    Ok(found)
}

/// The cpuset cgroup of a process: its path in a v1 `cpuset` hierarchy when the host
/// mounts one, else its v2 cgroup; `None` when it has neither.
pub fn cpuset_cgroup(p: &ProcessReading) -> Option<CpusetCgroup> {
    match (&p.cpuset_v1, &p.cgroup) {
        (Some(v1), _) => Some(CpusetCgroup::V1(v1.clone())),
        (None, Some(v2)) => Some(CpusetCgroup::V2(v2.clone())),
        (None, None) => None,
    }
}

/// A cgroup whose effective CPUs are read, and in which hierarchy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CpusetCgroup {
    /// In the cgroup v2 tree at `sys/fs/cgroup`: `<path>/cpuset.cpus.effective`.
    V2(String),
    /// In the v1 cpuset hierarchy at `sys/fs/cgroup/cpuset`: `<path>/cpuset.effective_cpus`.
    V1(String),
}

impl CpusetCgroup {
    /// The cgroup's path (`/system.slice/app.service`).
    pub fn path(&self) -> &str {
        match self {
            CpusetCgroup::V2(p) | CpusetCgroup::V1(p) => p,
        }
    }
}

/// The CPUs a cgroup may use now (`cpuset.cpus.effective`, or `cpuset.effective_cpus` in
/// v1); `None` when the cgroup is gone or the file is absent (no cpuset controller).
pub fn read_cpuset_effective(
    root: &Root,
    cgroup: &CpusetCgroup,
) -> Result<Option<CpuSet>, ReadError> {
    let (dir, file) = match cgroup {
        CpusetCgroup::V2(_) => ("sys/fs/cgroup", "cpuset.cpus.effective"),
        CpusetCgroup::V1(_) => ("sys/fs/cgroup/cpuset", "cpuset.effective_cpus"),
    };
    let path = root
        .join(dir)
        .join(cgroup.path().trim_start_matches('/'))
        .join(file);
    match text_opt(&path)? {
        None => Ok(None),
        Some(text) => CpuSet::parse_list(text.trim())
            .map(Some)
            .map_err(|e| parse_err(&path, ParseError::Cpus(e))),
    }
}
