//! Reading the machine and its processes: I/O at the edge, under a [`Root`] given as a
//! parameter, so tests read fixture trees and a container can read the host's `/proc`.
//!
//! ```text
//!  Root ─┬─ sys/devices/system/cpu/online                      which CPUs exist now
//!        │  sys/devices/system/cpu/cpuN/online                  0 = offline (absent for cpu0)
//!        │  sys/devices/system/cpu/cpuN/topology/…              package, core siblings
//!        │  sys/devices/system/cpu/cpuN/cache/indexK/…          level, shared_cpu_list → LLC
//!        │  sys/devices/system/node/{online,possible}           NUMA nodes
//!        │  sys/devices/system/node/nodeN/{cpulist,distance}    their CPUs and SLIT row
//!        ├─ proc/<pid>/task/<tid>/{stat,schedstat,status}       threads  → read_threads
//!        ├─ proc/<pid>/numa_maps                                memory per node
//!        └─ proc/sys/kernel/numa_balancing                      the kernel's own balancer
//! ```
//!
//! Cores are identified by their sibling list (`core_cpus_list`, else
//! `thread_siblings_list`, else `core_id`), the last-level cache by the `shared_cpu_list`
//! of the highest cache level (the package when a CPU lists no cache), and a machine with
//! no `node` directory is one node 0 holding every CPU.
//!
//! ```
//! use threadbalance_linux::{Root, read_topology};
//! let root = Root::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/topo/offline-cpu"));
//! let topo = read_topology(&root).unwrap();
//! assert_eq!(topo.online().to_string(), "0-1,3");
//! ```

use crate::LinuxError;
use crate::parse::{
    TaskStat, parse_numa_maps, parse_schedstat, parse_stat, parse_stat_comm, parse_status,
};
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use threadbalance_model::{
    CoreId, Cpu, CpuId, CpuSet, LlcId, NodeId, PackageId, Pid, ProcessMemory, Sample, ThreadKey,
    Tid, Topology,
};

/// The directory under which `proc/` and `sys/` are found: `/` on a live system, a fixture
/// tree in tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    path: PathBuf,
}

impl Root {
    /// A root at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Root {
        Root { path: path.into() }
    }

    /// The live system's root, `/`.
    pub fn system() -> Root {
        Root::new("/")
    }

    /// The root directory itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `rel` under the root (`rel` is relative: `proc/1/stat`).
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }

    /// `proc/<pid>` under the root.
    pub fn proc_dir(&self, pid: Pid) -> PathBuf {
        self.path.join(format!("proc/{pid}"))
    }

    /// `proc/<pid>/task/<tid>` under the root.
    pub fn task_dir(&self, pid: Pid, tid: Tid) -> PathBuf {
        self.path.join(format!("proc/{pid}/task/{tid}"))
    }
}

/// Facts about the host that the parsers need, passed as values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostFacts {
    /// Clock ticks per second of `stat`'s time fields (`sysconf(_SC_CLK_TCK)`, usually 100).
    pub ticks_per_sec: u64,
    /// The base page size in bytes (`sysconf(_SC_PAGESIZE)`, usually 4096).
    pub page_size: u64,
}

impl HostFacts {
    /// The values of most Linux machines (100 ticks per second, 4 KiB pages), for tests and
    /// fixture trees.
    pub const TYPICAL: HostFacts = HostFacts {
        ticks_per_sec: 100,
        page_size: 4096,
    };

    /// The running host's facts, from `sysconf`.
    pub fn system() -> Result<HostFacts, LinuxError> {
        use nix::unistd::{SysconfVar, sysconf};
        let get = |name: &'static str, var: SysconfVar| -> Result<u64, LinuxError> {
            match sysconf(var) {
                Ok(Some(v)) if v > 0 => Ok(v as u64),
                Ok(_) => Err(LinuxError::HostFact {
                    name,
                    why: "not positive or unsupported".into(),
                }),
                Err(e) => Err(LinuxError::HostFact {
                    name,
                    why: e.to_string(),
                }),
            }
        };
        Ok(HostFacts {
            ticks_per_sec: get("CLK_TCK", SysconfVar::CLK_TCK)?,
            page_size: get("PAGE_SIZE", SysconfVar::PAGE_SIZE)?,
        })
    }
}

/// Whether an I/O error means the thing read has gone: the file does not exist (`ENOENT`) or
/// the task behind a `/proc` file has exited (`ESRCH`).
pub(crate) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// Reads a whole text file; errors name the path.
fn read_text(path: &Path) -> Result<String, LinuxError> {
    std::fs::read_to_string(path).map_err(|e| LinuxError::io(path, e))
}

/// Reads a whole text file, `None` when it does not exist (or its task has gone).
fn read_text_opt(path: &Path) -> Result<Option<String>, LinuxError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(LinuxError::io(path, e)),
    }
}

fn read_cpulist(path: &Path) -> Result<CpuSet, LinuxError> {
    let text = read_text(path)?;
    CpuSet::parse_list(&text).map_err(|e| LinuxError::parse(path, e))
}

fn read_cpulist_opt(path: &Path) -> Result<Option<CpuSet>, LinuxError> {
    match read_text_opt(path)? {
        None => Ok(None),
        Some(text) => CpuSet::parse_list(&text)
            .map(Some)
            .map_err(|e| LinuxError::parse(path, e)),
    }
}

/// A small signed integer file such as `physical_package_id` (which may be `-1`).
fn read_int(path: &Path) -> Result<i64, LinuxError> {
    let text = read_text(path)?;
    text.trim()
        .parse()
        .map_err(|_| LinuxError::parse(path, format!("{:?} is not a number", text.trim())))
}

fn read_int_opt(path: &Path) -> Result<Option<i64>, LinuxError> {
    match read_text_opt(path)? {
        None => Ok(None),
        Some(text) => text
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| LinuxError::parse(path, format!("{:?} is not a number", text.trim()))),
    }
}

/// The machine's online CPUs, their cores, last-level caches, packages and NUMA nodes, and
/// the node distances, from `sys/devices/system/{cpu,node}` under `root`. Offline CPUs are
/// left out; CPU-less and memoryless nodes are kept in [`Topology::nodes`].
pub fn read_topology(root: &Root) -> Result<Topology, LinuxError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = read_cpulist(&cpu_dir.join("online"))?;
    let (node_of, distances) = read_nodes(root, &online)?;
    let mut cpus = Vec::with_capacity(online.len());
    for id in online.iter() {
        let dir = cpu_dir.join(format!("cpu{id}"));
        if read_int_opt(&dir.join("online"))? == Some(0) {
            continue;
        }
        let topo = dir.join("topology");
        let package = read_int(&topo.join("physical_package_id"))?;
        // -1 means "unknown" (some virtual machines): one package.
        let package = PackageId(u32::try_from(package).unwrap_or(0));
        let core = match read_cpulist_opt(&topo.join("core_cpus_list"))? {
            Some(s) if !s.is_empty() => s.first(),
            _ => match read_cpulist_opt(&topo.join("thread_siblings_list"))? {
                Some(s) if !s.is_empty() => s.first(),
                _ => None,
            },
        };
        let core = match core {
            Some(first) => CoreId(first.0),
            None => {
                let path = topo.join("core_id");
                let id = read_int(&path)?;
                CoreId(u32::try_from(id).map_err(|_| LinuxError::parse(&path, "negative core id"))?)
            }
        };
        let llc = read_llc(&dir.join("cache"))?.unwrap_or(LlcId(u32::MAX));
        let node = node_of.get(&id).copied().unwrap_or(NodeId(0));
        cpus.push(Cpu {
            id,
            core,
            llc,
            package,
            node,
        });
    }
    Topology::new(cpus, distances).map_err(|source| LinuxError::Topology {
        root: root.path().to_path_buf(),
        source,
    })
}

/// The LLC of one CPU: the lowest CPU sharing its highest-level data or unified cache, or
/// `None` when it lists no cache.
fn read_llc(cache_dir: &Path) -> Result<Option<LlcId>, LinuxError> {
    let mut best: Option<(i64, LlcId)> = None;
    for k in 0.. {
        let index = cache_dir.join(format!("index{k}"));
        let Some(level) = read_int_opt(&index.join("level"))? else {
            break;
        };
        if let Some(kind) = read_text_opt(&index.join("type"))? {
            if kind.trim() == "Instruction" {
                continue;
            }
        }
        let Some(shared) = read_cpulist_opt(&index.join("shared_cpu_list"))? else {
            continue;
        };
        let Some(first) = shared.first() else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, LlcId(first.0)));
        }
    }
    Ok(best.map(|(_, id)| id))
}

/// Which node each CPU is on, and each node's distance row.
#[allow(clippy::type_complexity)]
fn read_nodes(
    root: &Root,
    online: &CpuSet,
) -> Result<(BTreeMap<CpuId, NodeId>, BTreeMap<NodeId, Vec<u32>>), LinuxError> {
    let node_dir = root.join("sys/devices/system/node");
    let mut node_of = BTreeMap::new();
    let mut distances = BTreeMap::new();
    if !node_dir.is_dir() {
        for cpu in online.iter() {
            node_of.insert(cpu, NodeId(0));
        }
        distances.insert(NodeId(0), vec![10]);
        return Ok((node_of, distances));
    }
    let nodes = match read_cpulist_opt(&node_dir.join("online"))? {
        Some(s) => s,
        None => read_cpulist(&node_dir.join("possible"))?,
    };
    for n in nodes.iter() {
        let node = NodeId(
            u16::try_from(n.0)
                .map_err(|_| LinuxError::parse(node_dir.join("online"), "node id too large"))?,
        );
        let dir = node_dir.join(format!("node{n}"));
        if let Some(cpus) = read_cpulist_opt(&dir.join("cpulist"))? {
            for cpu in cpus.iter() {
                node_of.insert(cpu, node);
            }
        }
        let path = dir.join("distance");
        let row = match read_text_opt(&path)? {
            None => Vec::new(),
            Some(text) => text
                .split_whitespace()
                .map(|d| {
                    d.parse::<u32>()
                        .map_err(|_| LinuxError::parse(&path, format!("{d:?} is not a distance")))
                })
                .collect::<Result<Vec<u32>, LinuxError>>()?,
        };
        distances.insert(node, row);
    }
    Ok((node_of, distances))
}

/// The kernel's automatic NUMA balancing (`proc/sys/kernel/numa_balancing`): `Some(true)`
/// when on (any non-zero mode), `Some(false)` when off, `None` when the kernel has none or
/// the file cannot be read.
pub fn read_numa_balancing(root: &Root) -> Option<bool> {
    let text = std::fs::read_to_string(root.join("proc/sys/kernel/numa_balancing")).ok()?;
    let mode: u32 = text.trim().parse().ok()?;
    Some(mode != 0)
}

/// One thread of a process, as [`read_threads`] finds it.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadInfo {
    /// The thread's name (`comm`, from `stat`; bytes that are not UTF-8 replaced).
    pub comm: String,
    /// Its counters. `run`, `wait` and `timeslices` are zero when `schedstat` is missing;
    /// `voluntary` and `involuntary` when `status` is.
    pub sample: Sample,
    /// Its `stat` fields (parent, flags: [`TaskStat::is_kernel_thread`]).
    pub stat: TaskStat,
    /// The CPUs it may run on (`status`, `Cpus_allowed_list`), when `status` gives them.
    pub cpus_allowed: Option<CpuSet>,
}

/// Maps an error on a process's own directory to the error that names the process.
pub(crate) fn process_error(pid: Pid, path: &Path, e: io::Error) -> LinuxError {
    if is_gone(&e) {
        LinuxError::NoSuchProcess { pid }
    } else if e.kind() == io::ErrorKind::PermissionDenied {
        LinuxError::PermissionDenied {
            pid,
            path: path.to_path_buf(),
        }
    } else {
        LinuxError::io(path, e)
    }
}

/// Every thread of process `pid`, sorted by key, read once (open, read, close) from
/// `proc/<pid>/task`. A task whose `stat` cannot be read (it exited meanwhile) is left out.
/// The sampler is the fast way to read the same counters repeatedly.
pub fn read_threads(
    root: &Root,
    pid: Pid,
    facts: &HostFacts,
) -> Result<Vec<ThreadInfo>, LinuxError> {
    let task_dir = root.proc_dir(pid).join("task");
    let entries = std::fs::read_dir(&task_dir).map_err(|e| process_error(pid, &task_dir, e))?;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| process_error(pid, &task_dir, e))?;
        let Some(tid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(t) = read_thread(root, pid, Tid(tid), facts)? {
            out.push(t);
        }
    }
    out.sort_by_key(|t| t.sample.key);
    Ok(out)
}

/// One thread, or `None` when its `stat` is missing (it has exited).
fn read_thread(
    root: &Root,
    pid: Pid,
    tid: Tid,
    facts: &HostFacts,
) -> Result<Option<ThreadInfo>, LinuxError> {
    let dir = root.task_dir(pid, tid);
    let stat_path = dir.join("stat");
    let Some(stat_text) = read_text_lossy_opt(&stat_path)? else {
        return Ok(None);
    };
    let stat = parse_stat(&stat_text, facts.ticks_per_sec)
        .map_err(|e| LinuxError::parse(&stat_path, e))?;
    let comm = parse_stat_comm(&stat_text).unwrap_or_default().to_string();
    let sched_path = dir.join("schedstat");
    let sched = match read_text_opt(&sched_path)? {
        None => None,
        Some(t) => Some(parse_schedstat(&t).map_err(|e| LinuxError::parse(&sched_path, e))?),
    };
    let status_path = dir.join("status");
    let status = match read_text_lossy_opt(&status_path)? {
        None => None,
        Some(t) => Some(parse_status(&t).map_err(|e| LinuxError::parse(&status_path, e))?),
    };
    let sched = sched.unwrap_or_default();
    let sample = Sample {
        key: ThreadKey {
            pid,
            tid,
            start_time: stat.start_time,
        },
        utime: stat.utime,
        stime: stat.stime,
        run: sched.run,
        wait: sched.wait,
        timeslices: sched.timeslices,
        voluntary: status.as_ref().and_then(|s| s.voluntary).unwrap_or(0),
        involuntary: status.as_ref().and_then(|s| s.involuntary).unwrap_or(0),
        last_cpu: stat.processor,
        state: stat.state,
        lock: None,
        migrations: None,
    };
    Ok(Some(ThreadInfo {
        comm,
        sample,
        stat,
        cpus_allowed: status.and_then(|s| s.cpus_allowed),
    }))
}

/// Like [`read_text_opt`], but a file whose bytes are not UTF-8 (a `comm` may hold any byte)
/// is read with those bytes replaced.
fn read_text_lossy_opt(path: &Path) -> Result<Option<String>, LinuxError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(match String::from_utf8(b) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(LinuxError::io(path, e)),
    }
}

/// The start time (clock ticks since boot) of thread `tid` of process `pid`, or `None` when
/// it has gone. Used to check a tid still names the same thread before touching it.
pub fn read_start_time(root: &Root, pid: Pid, tid: Tid) -> Result<Option<u64>, LinuxError> {
    let path = root.task_dir(pid, tid).join("stat");
    let Some(text) = read_text_lossy_opt(&path)? else {
        return Ok(None);
    };
    let stat = parse_stat(&text, 100).map_err(|e| LinuxError::parse(&path, e))?;
    Ok(Some(stat.start_time))
}

/// Process `pid`'s resident memory on each NUMA node, from `proc/<pid>/numa_maps`;
/// `page_size` is the base page size in bytes ([`HostFacts::page_size`]). Expensive: the
/// kernel walks every page table of the process.
pub fn read_process_memory(
    root: &Root,
    pid: Pid,
    page_size: u64,
) -> Result<ProcessMemory, LinuxError> {
    let path = root.proc_dir(pid).join("numa_maps");
    let text = match std::fs::read(&path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return Err(process_error(pid, &path, e)),
    };
    parse_numa_maps(&text, pid, page_size).map_err(|e| LinuxError::parse(&path, e))
}
