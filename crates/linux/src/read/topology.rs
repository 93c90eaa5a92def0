//! `read_topology`: the rules are in the docs of [`crate::read`]; this file follows them in
//! three passes: which CPUs are online, what each online CPU's files say, and what those
//! answers make together (cores, packages, LLCs, nodes).

use super::Root;
use crate::LinuxError;
use crate::parse::{parse_cpumask, parse_distance_row, parse_sysfs_int, sysfs_value};
use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use threadbalance_model::{CoreId, Cpu, CpuId, CpuSet, LlcId, NodeId, PackageId, Topology};

/// Largest sysfs file read: a list of 8192 scattered CPUs is about 40 KiB.
const MAX_FILE: u64 = 1 << 20;

/// Reads one sysfs file: `None` when it does not exist, an error when it is anything but a
/// regular file (a FIFO would block the read forever, a device may never end), longer than
/// [`MAX_FILE`] or not UTF-8. The file type is checked before opening (following symbolic
/// links, as opening does), and again on the open file, which is opened non-blocking so
/// that a FIFO put in place between the two checks cannot block either.
pub(crate) fn read_sys_opt(path: &Path) -> Result<Option<String>, LinuxError> {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let not_regular = |ft: std::fs::FileType| {
        let kind = if ft.is_fifo() {
            "a FIFO"
        } else if ft.is_char_device() {
            "a character device"
        } else if ft.is_block_device() {
            "a block device"
        } else if ft.is_socket() {
            "a socket"
        } else if ft.is_dir() {
            "a directory"
        } else {
            "not a file"
        };
        LinuxError::io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("not a regular file but {kind}"),
            ),
        )
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if super::is_gone(&e) => return Ok(None),
        Err(e) => return Err(LinuxError::io(path, e)),
    };
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if super::is_gone(&e) => return Ok(None),
        Err(e) => return Err(LinuxError::io(path, e)),
    };
    let meta = file.metadata().map_err(|e| LinuxError::io(path, e))?;
    if !meta.file_type().is_file() {
        return Err(not_regular(meta.file_type()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| LinuxError::io(path, e))?;
    if bytes.len() as u64 > MAX_FILE {
        return Err(LinuxError::parse(
            path,
            format!("longer than {MAX_FILE} bytes"),
        ));
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| LinuxError::parse(path, "not text (bytes that are not UTF-8)"))
}

fn list_opt(path: &Path) -> Result<Option<CpuSet>, LinuxError> {
    match read_sys_opt(path)? {
        None => Ok(None),
        Some(t) => CpuSet::parse_list(sysfs_value(&t))
            .map(Some)
            .map_err(|e| LinuxError::parse(path, e)),
    }
}

fn mask_opt(path: &Path) -> Result<Option<CpuSet>, LinuxError> {
    match read_sys_opt(path)? {
        None => Ok(None),
        Some(t) => parse_cpumask(&t)
            .map(Some)
            .map_err(|e| LinuxError::parse(path, e)),
    }
}

/// The first of `names` under `dir` that exists, read as a mask (names without `_list`) or
/// a list (names ending in `_list`, and `cpulist`): `None` when none exists.
fn set_opt(dir: &Path, names: &[&str]) -> Result<Option<CpuSet>, LinuxError> {
    for name in names {
        let path = dir.join(name);
        let set = if name.ends_with("list") {
            list_opt(&path)?
        } else {
            mask_opt(&path)?
        };
        if set.is_some() {
            return Ok(set);
        }
    }
    Ok(None)
}

fn int_opt(path: &Path) -> Result<Option<i64>, LinuxError> {
    match read_sys_opt(path)? {
        None => Ok(None),
        Some(t) => parse_sysfs_int(&t)
            .map(Some)
            .map_err(|e| LinuxError::parse(path, e)),
    }
}

/// What one online CPU's `topology/` and `cache/` directories say, before it is set
/// against the other CPUs.
struct CpuFiles {
    id: CpuId,
    dir: PathBuf,
    /// `core_cpus`, else `thread_siblings` (mask first, then list), with the offline CPUs
    /// taken out.
    core_set: Option<CpuSet>,
    core_id: Option<i64>,
    package_id: i64,
    /// `package_cpus`, else `core_siblings` (mask first, then list), online CPUs only.
    package_set: Option<CpuSet>,
    die_id: Option<i64>,
    cluster_id: Option<i64>,
    /// The highest-level data or unified cache's CPUs (`shared_cpu_map`, else
    /// `shared_cpu_list`), online CPUs only.
    llc_set: Option<CpuSet>,
}

/// The machine's online CPUs, their cores, last-level caches, packages and NUMA nodes, and
/// the node distances, from `sys/devices/system/{cpu,node}` under `root`, by the rules of
/// [`crate::read`]. Offline CPUs are left out; CPU-less and memoryless nodes are kept in
/// [`Topology::nodes`]. A file that cannot be read or makes no sense is an error naming it.
pub fn read_topology(root: &Root) -> Result<Topology, LinuxError> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let online = online_cpus(&cpu_dir)?;
    let mut files = Vec::with_capacity(online.len());
    for id in online.iter() {
        files.push(read_cpu_files(&cpu_dir, id, &online)?);
    }
    let (node_of, distances) = read_nodes(root, &online)?;
    let core_ids: BTreeMap<CpuId, i64> = files
        .iter()
        .filter_map(|f| Some((f.id, f.core_id?)))
        .collect();
    // Cores found by id alone: the lowest CPU of each (package, die, cluster, core_id).
    let mut by_key: BTreeMap<(u32, Option<i64>, Option<i64>, i64), CpuId> = BTreeMap::new();
    let mut cpus = Vec::with_capacity(files.len());
    for f in &files {
        let package = match &f.package_set {
            Some(set) => set.first().map_or(f.id.0, |c| c.0),
            None => u32::try_from(f.package_id).unwrap_or(0),
        };
        let core = match (&f.core_set, f.core_id) {
            (Some(set), _) => core_of(f, set, &core_ids),
            // Nothing about cores at all: each CPU is its own (hwloc makes no core).
            (None, None) => f.id,
            (None, Some(id)) if id < 0 => {
                let path = f.dir.join("topology/core_id");
                return Err(LinuxError::parse(&path, "negative core id"));
            }
            (None, Some(id)) => *by_key
                .entry((package, f.die_id, f.cluster_id, id))
                .or_insert(f.id),
        };
        let llc = f
            .llc_set
            .as_ref()
            .and_then(CpuSet::first)
            .map_or(LlcId(u32::MAX), |c| LlcId(c.0));
        cpus.push(Cpu {
            id: f.id,
            core: CoreId(core.0),
            llc,
            package: PackageId(package),
            node: node_of.get(&f.id).copied().unwrap_or(NodeId(0)),
        });
    }
    let topo = Topology::new(cpus, distances).map_err(|source| LinuxError::Topology {
        root: root.path().to_path_buf(),
        source,
    })?;
    // No CPU lists a cache (s390, ia64, the PS3, arm64 boards and VMs): hwloc shows no
    // cache, and the LLC level, which then holds each package whole, is not a cache.
    Ok(if files.iter().all(|f| f.llc_set.is_none()) {
        topo.without_cache_info()
    } else {
        topo
    })
}

/// The CPU's core: the lowest CPU of its sibling set, keeping only the siblings whose
/// `core_id` is the CPU's own (the two integer cores of an AMD Bulldozer module are listed
/// as siblings but have their own core ids: each is a core, as hwloc counts them).
fn core_of(f: &CpuFiles, set: &CpuSet, core_ids: &BTreeMap<CpuId, i64>) -> CpuId {
    let mine = f.core_id;
    set.iter()
        .filter(|s| {
            *s == f.id
                || match (mine, core_ids.get(s)) {
                    (Some(a), Some(&b)) => a == b,
                    _ => true,
                }
        })
        .chain(std::iter::once(f.id))
        .min()
        .unwrap_or(f.id)
}

/// The online CPUs: `cpu/online`, or, where the kernel has no such file, every `cpuN`
/// directory; either way without the CPUs whose own `cpuN/online` reads 0.
fn online_cpus(cpu_dir: &Path) -> Result<CpuSet, LinuxError> {
    let online_path = cpu_dir.join("online");
    let listed = match read_sys_opt(&online_path)? {
        Some(t) => {
            CpuSet::parse_list(sysfs_value(&t)).map_err(|e| LinuxError::parse(&online_path, e))?
        }
        None => {
            if !cpu_dir.is_dir() {
                // Not a sysfs tree at all: name the first file every kernel since 2.6.29
                // writes.
                return Err(LinuxError::io(
                    &online_path,
                    io::Error::from_raw_os_error(libc::ENOENT),
                ));
            }
            numbered_dirs(cpu_dir, "cpu")?
        }
    };
    let mut online = CpuSet::new();
    for id in listed.iter() {
        // An empty file says nothing: the CPU counts as online, as in hwloc.
        let path = cpu_dir.join(format!("cpu{id}/online"));
        let off = match read_sys_opt(&path)? {
            Some(t) if !sysfs_value(&t).is_empty() => {
                parse_sysfs_int(&t).map_err(|e| LinuxError::parse(&path, e))? == 0
            }
            _ => false,
        };
        if !off {
            online.insert(id);
        }
    }
    Ok(online)
}

/// The `N` of every directory entry `<prefix>N` of `dir` (`cpu0`, `node3`), at most 8191.
fn numbered_dirs(dir: &Path, prefix: &str) -> Result<CpuSet, LinuxError> {
    let mut set = CpuSet::new();
    let entries = std::fs::read_dir(dir).map_err(|e| LinuxError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LinuxError::io(dir, e))?;
        let name = entry.file_name();
        let Some(n) = name
            .to_str()
            .and_then(|s| s.strip_prefix(prefix))
            .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if n > 8191 {
            return Err(LinuxError::parse(entry.path(), "number above 8191"));
        }
        set.insert(CpuId(n));
    }
    Ok(set)
}

/// Reads what CPU `id`'s files say.
fn read_cpu_files(cpu_dir: &Path, id: CpuId, online: &CpuSet) -> Result<CpuFiles, LinuxError> {
    let dir = cpu_dir.join(format!("cpu{id}"));
    let topo = dir.join("topology");
    // An online CPU without a topology directory is a tree cut short: name the first file
    // every kernel with that directory writes (hwloc leaves such a CPU out silently).
    let package_path = topo.join("physical_package_id");
    if !topo.is_dir() {
        return Err(LinuxError::io(
            &package_path,
            io::Error::from_raw_os_error(libc::ENOENT),
        ));
    }
    // The PS3's kernel writes no physical_package_id: -1, unknown.
    let package_id = int_opt(&package_path)?.unwrap_or(-1);
    let online_only = |s: Option<CpuSet>| s.map(|s| s.intersection(online));
    let core_set = online_only(set_opt(
        &topo,
        &[
            "core_cpus",
            "core_cpus_list",
            "thread_siblings",
            "thread_siblings_list",
        ],
    )?)
    .filter(|s| !s.is_empty());
    let package_set = online_only(set_opt(
        &topo,
        &[
            "package_cpus",
            "package_cpus_list",
            "core_siblings",
            "core_siblings_list",
        ],
    )?)
    .filter(|s| !s.is_empty());
    let llc_set = read_llc(&dir.join("cache"), core_set.as_ref())?.map(|s| s.intersection(online));
    Ok(CpuFiles {
        id,
        core_set,
        core_id: int_opt(&topo.join("core_id"))?,
        package_id,
        package_set,
        die_id: int_opt(&topo.join("die_id"))?,
        cluster_id: int_opt(&topo.join("cluster_id"))?,
        llc_set: llc_set.filter(|s| !s.is_empty()),
        dir,
    })
}

/// The CPUs sharing this CPU's highest-level data or unified cache, or `None` when it lists
/// no cache. Every `indexK` entry is looked at; one without a `level` file is skipped. An
/// empty set (ia64 writes empty L3 masks) stands for the CPU's core, as in hwloc.
fn read_llc(cache_dir: &Path, core: Option<&CpuSet>) -> Result<Option<CpuSet>, LinuxError> {
    let indexes = match std::fs::read_dir(cache_dir) {
        Ok(entries) => {
            let mut ks = Vec::new();
            for entry in entries {
                let entry = entry.map_err(|e| LinuxError::io(cache_dir, e))?;
                let name = entry.file_name();
                if let Some(k) = name
                    .to_str()
                    .and_then(|s| s.strip_prefix("index"))
                    .and_then(|s| s.parse::<u32>().ok())
                {
                    ks.push(k);
                }
            }
            ks.sort_unstable();
            ks
        }
        Err(e) if super::is_gone(&e) => return Ok(None),
        Err(e) => return Err(LinuxError::io(cache_dir, e)),
    };
    let mut best: Option<(i64, CpuSet)> = None;
    for k in indexes {
        let index = cache_dir.join(format!("index{k}"));
        let Some(level) = int_opt(&index.join("level"))? else {
            continue;
        };
        if let Some(kind) = read_sys_opt(&index.join("type"))?
            && sysfs_value(&kind) == "Instruction"
        {
            continue;
        }
        let Some(mut shared) = set_opt(&index, &["shared_cpu_map", "shared_cpu_list"])? else {
            continue;
        };
        if shared.is_empty() {
            match core {
                Some(core) => shared = core.clone(),
                None => continue,
            }
        }
        if best.as_ref().is_none_or(|(l, _)| level > *l) {
            best = Some((level, shared));
        }
    }
    Ok(best.map(|(_, set)| set))
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
    let list_path = node_dir.join("online");
    let nodes = match read_sys_opt(&list_path)? {
        Some(t) => {
            CpuSet::parse_list(sysfs_value(&t)).map_err(|e| LinuxError::parse(&list_path, e))?
        }
        None => numbered_dirs(&node_dir, "node")?,
    };
    // (node, its CPUs, its distance file and text), in node order.
    let mut listed = Vec::with_capacity(nodes.len());
    for n in nodes.iter() {
        let node = NodeId(
            u16::try_from(n.0).map_err(|_| LinuxError::parse(&list_path, "node id too large"))?,
        );
        let dir = node_dir.join(format!("node{n}"));
        let cpus = set_opt(&dir, &["cpumap", "cpulist"])?.unwrap_or_default();
        let path = dir.join("distance");
        let text = read_sys_opt(&path)?;
        listed.push((node, cpus, path, text));
    }
    let row_nodes = distance_columns(&node_dir, &nodes, &listed)?;
    // Each CPU is on the smallest node that lists it, the first of equal ones: nodes
    // whose CPU sets nest (a memory-side node over the nodes of its CPUs, as on machines
    // with memory tiers) give each CPU its nearest node, as hwloc nests them; a buggy BIOS
    // that gives several nodes the same CPUs gives them to the first. A node that lists
    // CPUs and is left with none is no node, its row and column of distances with it (a
    // node that lists none, memory alone, stays).
    let mut home: BTreeMap<CpuId, (usize, usize)> = BTreeMap::new();
    for (i, (_, cpus, _, _)) in listed.iter().enumerate() {
        for cpu in cpus.iter() {
            let best = home.entry(cpu).or_insert((cpus.len(), i));
            if cpus.len() < best.0 {
                *best = (cpus.len(), i);
            }
        }
    }
    let mut kept: Vec<(usize, NodeId, Vec<u32>)> = Vec::with_capacity(listed.len());
    for (i, (node, cpus, path, text)) in listed.into_iter().enumerate() {
        let row = match text {
            None => Vec::new(),
            Some(text) => parse_distance_row(&text, row_nodes.len())
                .map_err(|e| LinuxError::parse(&path, e.why))?,
        };
        let mine: Vec<CpuId> = cpus
            .iter()
            .filter(|c| home.get(c).is_some_and(|&(_, h)| h == i))
            .collect();
        if mine.is_empty() && !cpus.is_empty() {
            continue;
        }
        for cpu in mine {
            node_of.insert(cpu, node);
        }
        let column = row_nodes
            .iter()
            .position(|n| n.0 == u32::from(node.0))
            .unwrap_or(0);
        kept.push((column, node, row));
    }
    // Each row has one entry per node of `row_nodes`; keep those of the nodes kept.
    for (_, node, row) in &kept {
        let row = if row.is_empty() {
            Vec::new()
        } else {
            kept.iter().map(|&(j, _, _)| row[j]).collect()
        };
        distances.insert(*node, row);
    }
    Ok((node_of, distances))
}

/// The nodes whose distances the rows list, in column order: the online nodes, as the
/// kernel writes them; or, where every row holds one entry per *possible* node instead (a
/// node went offline after the rows were written: hwloc's `offline-cpu0-node0` tree, node
/// 0 offline, node 1's row `21 10`), the possible ones, so that node 1's own distance is
/// the 10 in its own column. Any other length is an error naming the first row that does
/// not fit (`nodes` is the online list, `listed` each node's distance file and text).
fn distance_columns(
    node_dir: &Path,
    nodes: &CpuSet,
    listed: &[(NodeId, CpuSet, PathBuf, Option<String>)],
) -> Result<CpuSet, LinuxError> {
    let fits = |columns: usize| {
        listed.iter().all(|(_, _, _, text)| {
            text.as_deref()
                .is_none_or(|t| parse_distance_row(t, columns).is_ok())
        })
    };
    if fits(nodes.len()) {
        return Ok(nodes.clone());
    }
    let possible_path = node_dir.join("possible");
    if let Some(t) = read_sys_opt(&possible_path)? {
        let possible = CpuSet::parse_list(sysfs_value(&t))
            .map_err(|e| LinuxError::parse(&possible_path, e))?;
        if nodes.is_subset(&possible) && fits(possible.len()) {
            return Ok(possible);
        }
    }
    // Name the first row that does not fit the online nodes.
    for (_, _, path, text) in listed {
        if let Some(text) = text
            && let Err(e) = parse_distance_row(text, nodes.len())
        {
            return Err(LinuxError::parse(path, e.why));
        }
    }
    Ok(nodes.clone())
}
