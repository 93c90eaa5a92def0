//! Reading the machine and its processes: I/O at the edge, under a [`Root`] given as a
//! parameter, so tests read fixture trees and a container can read the host's `/proc`.
//!
//! ```text
//!  Root ─┬─ sys/devices/system/cpu/online                      which CPUs exist now
//!        │  sys/devices/system/cpu/cpuN/online                  0 = offline (absent for cpu0)
//!        │  sys/devices/system/cpu/cpuN/topology/…              package, core siblings
//!        │  sys/devices/system/cpu/cpuN/cache/indexK/…          level, shared CPUs → LLC
//!        │  sys/devices/system/node/online, nodeN/              NUMA nodes
//!        │  sys/devices/system/node/nodeN/{cpumap,distance}     their CPUs and SLIT row
//!        ├─ proc/<pid>/task/<tid>/{stat,schedstat,status}       threads  → read_threads
//!        ├─ proc/<pid>/numa_maps                                memory per node
//!        └─ proc/sys/kernel/numa_balancing                      the kernel's own balancer
//! ```
//!
//! # How a topology is read
//!
//! Sysfs differs between kernels and architectures. [`read_topology`] reads it as hwloc's
//! Linux discovery does (`hwloc/topology-linux.c`: `look_sysfscpu`, `look_sysfsnode`,
//! `hwloc__read_path_as_cpumask`, `hwloc_parse_nodes_distances`), and where it differs the
//! difference is intended and said below.
//!
//! | what | rule | as hwloc? |
//! |---|---|---|
//! | any file | only regular files are opened (type checked before opening, and again on the open file, which is opened non-blocking); the value ends at the first NUL byte, blanks around it do not count | hwloc opens what it finds (a FIFO blocks it); reads C strings, so the NUL rule is its own |
//! | online CPUs | `cpu/online`; without it (older kernels) every `cpuN` directory; in both cases not those whose `cpuN/online` reads 0 (an empty file says nothing: online) | yes; hwloc reads `cpuN/online` only when `cpu/online` is missing |
//! | online CPU without a `topology` directory | error naming `topology/physical_package_id`: the tree is cut short | hwloc leaves the CPU out silently |
//! | core | lowest CPU of `core_cpus`, else `thread_siblings` (the hex mask; the `_list` file when the mask is missing), online CPUs only, keeping only the siblings whose `core_id` is the CPU's own; without any sibling file, CPUs with the same (package, `die_id`, `cluster_id`, `core_id`); without `core_id` either (the PS3), each CPU is its own core | yes, see *Bulldozer* below; the `core_id` fallback is ours (hwloc makes no core then) |
//! | package | lowest CPU of `package_cpus`, else `core_siblings` (mask, then list); without either, `physical_package_id`; `-1` there (s390, POWER, some VMs) or no such file, with no set: one package | yes: hwloc groups by the sets and takes the id only as a name, so `-1` is harmless |
//! | LLC | the highest-level data or unified cache among all `cache/indexK`: its `shared_cpu_map` (else `shared_cpu_list`), online CPUs only; an empty set (ia64) stands for the core; an index without `level` is skipped; a CPU with no cache: its package. Where no CPU lists any cache (s390, ia64, the PS3, arm64 boards, VMs) the topology has no cache information ([`Topology::has_cache_info`](threadbalance_model::Topology::has_cache_info)): the LLC level still holds each package, `topo` says there is no cache information and `--level llc` is refused | yes (hwloc looks at index0-9 only, and shows no cache where none is listed) |
//! | NUMA nodes | `node/online`, else every `nodeN` directory; a node's CPUs from `cpumap`, else `cpulist`; no `node` directory: one node 0 holding every CPU | yes |
//! | CPU in two nodes | each CPU is on the smallest node that lists it, the first of equal ones: nodes that nest (a memory-side node over the nodes of its CPUs, memory tiers) give each CPU its nearest node; a node that lists CPUs and is left with none (a buggy BIOS can give every node every CPU) is left out, its row and column of distances with it | yes: hwloc nests such nodes and keeps the first of equal ones (it then drops the whole distance matrix) |
//! | distances | `nodeN/distance` must hold one number per listed node (the kernel writes one per online node), or, where every row holds one per *possible* node (`node/possible`: a node went offline after the rows were written), one per possible node, read by node id; any other length, or a word that is not a number, is an error naming the file; a missing file means 10 to itself and 20 to others | no: hwloc drops the whole matrix when a row is short and reads the first entries of a long one; a row of the wrong length was not written for the node list read, and guessing which entry is which node puts a far node near (with node 0 offline and node 1's row `21 10`, hwloc gives node 1 a distance of 21 to itself; read by node id it is 10) |
//! | sets that cross | sets are taken as given: a package is the lowest CPU of its set even if another CPU's set crosses it | hwloc drops the later object of two that cross |
//! | die, cluster | `die_id` and `cluster_id` only tell cores apart when cores are known by `core_id` alone (`core_id` is unique per die on x86, per cluster on arm64); the model has no die or cluster level, so a die appears as the node or LLC it is | hwloc shows Die and Cluster objects |
//!
//! *Bulldozer.* On AMD families 15h and 16h (Bulldozer, Piledriver, Steamroller,
//! Excavator) Linux lists the two integer cores of a compute module as `thread_siblings`,
//! while giving each its own `core_id`. hwloc counts them as two cores; so do we. Each has
//! its own integer scheduler, registers, L1 data cache and execution units and runs a
//! thread at full speed; only the front end, the FPU and the L2 are shared. They are not
//! two hardware threads of one core, and the papers' Opteron 6272 testbed is counted as 64
//! cores. hwloc applies the rule only when `/proc/cpuinfo` names AMD family 21 or 22; we
//! apply it wherever siblings have different `core_id`s, because a `--sysfs-root` tree has
//! no `/proc/cpuinfo`, and on every other kernel the threads of one core share their
//! `core_id`, so the rule changes nothing there.
//!
//! On the 42 trees of hwloc's own Linux test suite (x86 from 2 to 96 CPUs, Opteron 6276,
//! ia64, POWER7, s390, arm64 with clusters, the PS3, memory tiers, cgroup cpusets) these
//! rules, with `topo`'s cpuset rule ([`read_cpuset`]), find the packages, nodes, LLCs, cores
//! and CPUs hwloc finds on 39; the three others are in `docs/topology.md`.
//!
//! A file that cannot be read or does not parse is an error naming it
//! ([`LinuxError::Io`], [`LinuxError::Parse`]); CPUs, caches and nodes that do not make a
//! machine together are [`LinuxError::Topology`].
//!
//! ```
//! use threadbalance_linux::{Root, read_topology};
//! let root = Root::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/topo/offline-cpu"));
//! let topo = read_topology(&root).unwrap();
//! assert_eq!(topo.online().to_string(), "0-1,3");
//! ```

pub mod alive;
mod cpuset;
mod topology;

pub use cpuset::{Cpuset, read_cpuset};
pub use topology::read_topology;

use crate::LinuxError;
use crate::parse::{
    TaskStat, parse_numa_maps, parse_schedstat, parse_stat, parse_stat_comm, parse_status,
};
use std::io;
use std::path::{Path, PathBuf};
use threadbalance_model::{CpuId, CpuSet, Nanos, Pid, ProcessMemory, Sample, ThreadKey, Tid};

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
                Ok(_) => Err(LinuxError::HostFact { name }),
                Err(source) => Err(LinuxError::HostFactRead { name, source }),
            }
        };
        Ok(HostFacts {
            ticks_per_sec: get("CLK_TCK", SysconfVar::CLK_TCK)?,
            page_size: get("PAGE_SIZE", SysconfVar::PAGE_SIZE)?,
        })
    }
}

/// Each online CPU's busy time so far (`/proc/stat`'s `cpuN` lines: user + nice + system +
/// irq + softirq), converted from clock ticks. A display divides the difference of two
/// readings by the time between them: how busy each CPU was, whatever ran on it.
pub fn read_cpu_busy(root: &Root, facts: HostFacts) -> Result<Vec<(CpuId, Nanos)>, LinuxError> {
    let path = root.join("proc/stat");
    let text = std::fs::read(&path).map_err(|e| LinuxError::io(&path, e))?;
    let per_tick = 1_000_000_000 / facts.ticks_per_sec.max(1);
    Ok(crate::parse::parse_cpu_busy(&text)
        .map_err(|e| LinuxError::parse(&path, e))?
        .into_iter()
        .map(|(cpu, ticks)| (cpu, Nanos(ticks.saturating_mul(per_tick))))
        .collect())
}

/// Whether an I/O error means the thing read has gone: the file does not exist (`ENOENT`) or
/// the task behind a `/proc` file has exited (`ESRCH`).
pub(crate) fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH)
}

/// Reads a whole text file, `None` when it does not exist (or its task has gone).
fn read_text_opt(path: &Path) -> Result<Option<String>, LinuxError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if is_gone(&e) => Ok(None),
        Err(e) => Err(LinuxError::io(path, e)),
    }
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
        counters: None,
        progress: None,
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
