//! `read_topology` on the sysfs of real kernels and architectures, one fixture tree per
//! case (see each tree's FIXTURE.md). See: issue 11, "Topologies of real machines".

use crate::util::{fixture_copy, fixture_root, write};
use std::path::Path;
use threadbalance_linux::{LinuxError, Root, read_topology};
use threadbalance_model::{CpuId, Level, NodeId, Topology};

fn cpus_of(t: &Topology, level: Level) -> Vec<String> {
    t.domains(level)
        .iter()
        .map(|d| d.cpus.to_string())
        .collect()
}

fn core_of(t: &Topology, cpu: u32) -> usize {
    t.domain_of(CpuId(cpu), Level::Core).unwrap()
}

/// Removes `topology/<name>` of every CPU directory of the tree that has it.
fn remove_topology_files(root: &Path, names: &[&str]) {
    let cpu_dir = root.join("sys/devices/system/cpu");
    for entry in std::fs::read_dir(&cpu_dir).unwrap() {
        let dir = entry.unwrap().path().join("topology");
        for name in names {
            let _ = std::fs::remove_file(dir.join(name));
        }
    }
}

#[test]
fn topo_nul_terminated_files_are_read_up_to_the_nul() {
    // Every file ends "\n\0": the value ends at the NUL, as hwloc reads it.
    let t = read_topology(&fixture_root("topo/nul-terminated")).unwrap();
    assert_eq!(t.online().to_string(), "0-7");
    assert_eq!(cpus_of(&t, Level::Core)[1], "1,5");
    assert_eq!(cpus_of(&t, Level::Node), ["0-1,4-5", "2-3,6-7"]);
    assert_eq!(cpus_of(&t, Level::Llc), ["0-1,4-5", "2-3,6-7"]);
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(12));
}

#[test]
fn topo_old_kernel_without_online_files_finds_cpus_and_nodes_from_directories() {
    // No cpu/online, no node/online (before 2.6.30): the cpuN and nodeN directories, and
    // cpu5/online = 0 leaves CPU 5 out.
    let t = read_topology(&fixture_root("topo/old-kernel-no-online")).unwrap();
    assert_eq!(t.online().to_string(), "0-4,6-7");
    assert!(t.cpu(CpuId(5)).is_none());
    assert_eq!(t.nodes(), &[NodeId(0), NodeId(1)]);
    // Masks only: cores from thread_siblings, packages from core_siblings, nodes from cpumap.
    assert_eq!(cpus_of(&t, Level::Package), ["0-1,4", "2-3,6-7"]);
    assert_eq!(cpus_of(&t, Level::Node), ["0-1,4", "2-3,6-7"]);
    assert_eq!(cpus_of(&t, Level::Core), ["0,4", "1", "2,6", "3,7"]);
    assert_eq!(t.distance(NodeId(1), NodeId(0)), Some(20));
}

#[test]
fn topo_old_kernel_cpu_online_file_missing_and_cpu_directory_missing_names_online() {
    // Not a sysfs tree at all: the error names cpu/online, the first file looked for.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sys/devices/system")).unwrap();
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(matches!(err, LinuxError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains("cpu/online"), "{err}");
}

#[test]
fn topo_power7_package_id_minus_one_takes_packages_from_core_siblings() {
    // physical_package_id is -1 everywhere and core_siblings is the core, as on POWER7:
    // hwloc makes each core a package; it used to be one package for all.
    let t = read_topology(&fixture_root("topo/power7-lpar")).unwrap();
    assert_eq!(cpus_of(&t, Level::Package), ["0-3", "4-7", "8-11", "12-15"]);
    // Sparse node ids 0 and 4, from the directories; CPUs from cpumap alone.
    assert_eq!(t.nodes(), &[NodeId(0), NodeId(4)]);
    assert_eq!(cpus_of(&t, Level::Node), ["0-7", "8-15"]);
    assert_eq!(t.distance(NodeId(0), NodeId(4)), Some(20));
    assert_eq!(t.distance(NodeId(4), NodeId(4)), Some(10));
    // The L3 is per core, from shared_cpu_map alone.
    assert_eq!(cpus_of(&t, Level::Llc), ["0-3", "4-7", "8-11", "12-15"]);
    assert_eq!(t.smt_width(), 4);
    // Nodes hold packages here: the node is the widest level, and the default.
    assert_eq!(t.default_level(), Level::Node);
}

#[test]
fn topo_s390_package_id_minus_one_takes_packages_from_core_siblings() {
    let t = read_topology(&fixture_root("topo/s390-books")).unwrap();
    assert_eq!(cpus_of(&t, Level::Package), ["0-2", "3-6", "7-8", "9-11"]);
    // All CPUs of a socket share one core_id, but each is its own thread_siblings: 12 cores.
    assert_eq!(t.domains(Level::Core).len(), 12);
    assert_ne!(core_of(&t, 0), core_of(&t, 1));
    // No caches: each package is its own LLC. No node directory: one node.
    assert_eq!(cpus_of(&t, Level::Llc), cpus_of(&t, Level::Package));
    assert_eq!(t.nodes(), &[NodeId(0)]);
    // And the topology says the LLCs are not known (hwloc shows no cache at all).
    assert!(!t.has_cache_info());
    assert!(
        t.describe().contains("no cache information"),
        "{}",
        t.describe()
    );
}

#[test]
fn topo_any_cache_listed_means_the_llcs_are_known() {
    // The same tree with one L2 listed for CPU 0 (see: issue 39, "no LLC when sysfs has
    // no cache information"): the caches are known, as on every x86 machine.
    let dir = fixture_copy("topo/s390-books");
    let index = "sys/devices/system/cpu/cpu0/cache/index0";
    write(dir.path(), &format!("{index}/level"), "2\n");
    write(dir.path(), &format!("{index}/type"), "Unified\n");
    write(dir.path(), &format!("{index}/shared_cpu_list"), "0\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert!(t.has_cache_info());
    assert!(
        read_topology(&fixture_root("topo/this-machine"))
            .unwrap()
            .has_cache_info()
    );
}

#[test]
fn topo_rows_written_for_the_possible_nodes_are_read_by_node_id() {
    // hwloc's `offline-cpu0-node0` tree: node 0 went offline, node/online reads 1, but node
    // 1's row still holds one distance per possible node, "21 10". It used to be refused
    // ("2 distances for 1 nodes"); its own distance is the 10 of its own column (hwloc
    // reads the 21, the first entry). See: issue 39, "Real sysfs trees".
    let dir = fixture_copy("topo/distance-mismatch");
    let node = "sys/devices/system/node";
    write(dir.path(), &format!("{node}/online"), "1\n");
    write(dir.path(), &format!("{node}/possible"), "0-1\n");
    write(dir.path(), &format!("{node}/node1/distance"), "21 10\n");
    write(dir.path(), &format!("{node}/node1/cpulist"), "0-3\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.nodes(), &[NodeId(1)]);
    assert_eq!(t.distance(NodeId(1), NodeId(1)), Some(10));
    // A row that fits neither the online nor the possible nodes is still refused.
    write(dir.path(), &format!("{node}/node1/distance"), "21 10 20\n");
    let err = read_topology(&Root::new(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(err.contains("3 distances for 1 nodes"), "{err}");
}

#[test]
fn topo_package_id_minus_one_without_sibling_sets_is_one_package() {
    // Nothing but the -1: nothing tells packages apart, so there is one (hwloc shows none).
    let dir = fixture_copy("topo/s390-books");
    remove_topology_files(dir.path(), &["core_siblings", "core_siblings_list"]);
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.domains(Level::Package).len(), 1);
    assert_eq!(t.domains(Level::Core).len(), 12);
}

#[test]
fn topo_maps_only_nodes_and_caches_are_read_from_their_masks() {
    // Nodes give only cpumap and caches only shared_cpu_map: before, every CPU fell into
    // node 0 and the LLC silently became the package (1 LLC instead of 2).
    let t = read_topology(&fixture_root("topo/maps-only")).unwrap();
    assert_eq!(cpus_of(&t, Level::Node), ["0-3,8-11", "4-7,12-15"]);
    assert_eq!(cpus_of(&t, Level::Llc), ["0-3,8-11", "4-7,12-15"]);
    assert_eq!(t.cpu(CpuId(12)).unwrap().node, NodeId(1));
}

#[test]
fn topo_empty_cache_mask_stands_for_the_core() {
    // ia64 writes empty L3 masks; hwloc takes the core's CPUs instead.
    let dir = fixture_copy("topo/maps-only");
    for cpu in 0..16 {
        let f = format!("sys/devices/system/cpu/cpu{cpu}/cache/index3/shared_cpu_map");
        write(dir.path(), &f, "00000000,00000000\n");
    }
    let t = read_topology(&Root::new(dir.path())).unwrap();
    // The highest cache with CPUs is now the L3 of each core: 8 LLCs of 2 CPUs.
    assert_eq!(t.domains(Level::Llc).len(), 8);
    assert_eq!(cpus_of(&t, Level::Llc)[3], "3,11");
}

#[test]
fn topo_opteron6272_bulldozer_module_is_two_cores() {
    // thread_siblings lists the two integer cores of a module (CPUs 2m, 2m+1), each with its
    // own core_id: two cores, as hwloc counts them; before, 32 cores with 2 threads each.
    let t = read_topology(&fixture_root("topo/opteron6272-4x16")).unwrap();
    assert_eq!(t.domains(Level::Core).len(), 64);
    assert_eq!(t.smt_width(), 1);
    assert_ne!(core_of(&t, 0), core_of(&t, 1));
    assert_ne!(core_of(&t, 8), core_of(&t, 9));
    // core_id repeats per die (CPU 8 has core_id 0, as CPU 0): still different cores.
    assert_ne!(core_of(&t, 0), core_of(&t, 8));
    // The L3 (index3, 8 CPUs per die) is the LLC, not the module's L2 (index2).
    assert_eq!(cpus_of(&t, Level::Llc)[1], "8-15");
    assert_eq!(cpus_of(&t, Level::Package)[3], "48-63");
}

#[test]
fn topo_siblings_with_one_core_id_stay_one_core() {
    // The same tree with both integer cores given one core_id is what SMT looks like:
    // one core of two threads (the rule only splits siblings whose core_ids differ).
    let dir = fixture_copy("topo/opteron6272-4x16");
    for cpu in (1..64).step_by(2) {
        let f = format!("sys/devices/system/cpu/cpu{cpu}/topology/core_id");
        write(dir.path(), &f, &format!("{}\n", (cpu - 1) % 8));
    }
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.domains(Level::Core).len(), 32);
    assert_eq!(t.smt_width(), 2);
}

#[test]
fn topo_die_and_cluster_files_keep_cores_apart() {
    let t = read_topology(&fixture_root("topo/die-cluster")).unwrap();
    assert_eq!(cpus_of(&t, Level::Node), ["0-3", "4-7"]);
    assert_eq!(cpus_of(&t, Level::Llc), ["0-3", "4-7"]);
    assert_eq!(t.domains(Level::Core).len(), 8);

    // Without sibling files, cores are known by core_id, which repeats per die (0-3 in
    // each): (package, die_id, cluster_id, core_id) keeps them apart. Before, CPU 0 and
    // CPU 4 (both core_id 0) were one core spanning two nodes, and the tree was refused.
    let dir = fixture_copy("topo/die-cluster");
    let siblings = [
        "thread_siblings",
        "thread_siblings_list",
        "core_cpus",
        "core_cpus_list",
    ];
    remove_topology_files(dir.path(), &siblings);
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.domains(Level::Core).len(), 8);
    assert_ne!(core_of(&t, 0), core_of(&t, 4));

    // The cluster alone also tells them apart (core_id is per cluster on arm64 trees).
    remove_topology_files(dir.path(), &["die_id"]);
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.domains(Level::Core).len(), 8);

    // With neither, CPU 0 and CPU 4 share (package 0, core_id 0): one core across two
    // nodes, which is no machine.
    remove_topology_files(dir.path(), &["cluster_id"]);
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(matches!(err, LinuxError::Topology { .. }), "{err:?}");
    assert!(
        err.to_string().contains("spans two caches or nodes"),
        "{err}"
    );
}

#[test]
fn topo_distance_row_that_does_not_match_the_node_list_is_an_error() {
    // node1/distance holds 3 distances for 2 online nodes.
    let err = read_topology(&fixture_root("topo/distance-mismatch")).unwrap_err();
    assert!(matches!(err, LinuxError::Parse { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("node1/distance"), "{msg}");
    assert!(msg.contains("3 distances for 2 nodes"), "{msg}");

    // (row, what the message must say)
    let cases = [
        ("20\n", "1 distances for 2 nodes"),
        ("20 10 x\n", "\"x\" is not a distance"),
        ("20 -10\n", "\"-10\" is not a distance"),
        ("\n", "0 distances for 2 nodes"),
    ];
    for (row, needle) in cases {
        let dir = fixture_copy("topo/distance-mismatch");
        write(dir.path(), "sys/devices/system/node/node1/distance", row);
        let err = read_topology(&Root::new(dir.path())).unwrap_err();
        assert!(err.to_string().contains("node1/distance"), "{row:?}: {err}");
        assert!(err.to_string().contains(needle), "{row:?}: {err}");
    }

    // Repaired, the tree reads.
    let dir = fixture_copy("topo/distance-mismatch");
    write(
        dir.path(),
        "sys/devices/system/node/node1/distance",
        "20 10\n",
    );
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.distance(NodeId(1), NodeId(0)), Some(20));
    assert_eq!(t.domains(Level::Node).len(), 2);
}

#[test]
fn topo_nested_nodes_give_each_cpu_its_smallest_node() {
    // Node 1 lists CPUs 1-3, inside node 0's 0-3: nodes that nest (a memory-side node
    // over the nodes of its CPUs, as on machines with memory tiers; hwloc's
    // `fakeheterocpunuma` tree) give each CPU the smallest node that lists it, as hwloc
    // nests them. It used to leave node 1 out as overlapping an earlier node.
    let dir = fixture_copy("topo/distance-mismatch");
    write(
        dir.path(),
        "sys/devices/system/node/node1/distance",
        "20 10\n",
    );
    write(dir.path(), "sys/devices/system/node/node0/cpulist", "0-3\n");
    write(dir.path(), "sys/devices/system/node/node1/cpulist", "1-3\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.nodes(), &[NodeId(0), NodeId(1)]);
    assert_eq!(cpus_of(&t, Level::Node), ["0", "1-3"]);
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(20));
}

#[test]
fn topo_node_listing_the_same_cpus_as_an_earlier_node_is_left_out() {
    // A buggy BIOS can give several nodes the same CPUs: the first keeps them, and a node
    // left with none of the CPUs it lists is no node, its distances with it.
    let dir = fixture_copy("topo/distance-mismatch");
    write(
        dir.path(),
        "sys/devices/system/node/node1/distance",
        "20 10\n",
    );
    write(dir.path(), "sys/devices/system/node/node0/cpulist", "0-3\n");
    write(dir.path(), "sys/devices/system/node/node1/cpulist", "0-3\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.nodes(), &[NodeId(0)]);
    assert_eq!(cpus_of(&t, Level::Node), ["0-3"]);
    assert_eq!(t.distance(NodeId(0), NodeId(0)), Some(10));
    assert_eq!(t.distance(NodeId(0), NodeId(1)), None);
}

#[test]
fn topo_overlapping_nodes_keep_the_distances_of_the_others() {
    // Three nodes, the last a copy of the first: nodes 0 and 1 keep their distances (10,
    // 21), read from the first two columns of three.
    let dir = fixture_copy("topo/distance-mismatch");
    let node = "sys/devices/system/node";
    write(dir.path(), &format!("{node}/online"), "0-2\n");
    write(dir.path(), &format!("{node}/node0/distance"), "10 21 10\n");
    write(dir.path(), &format!("{node}/node1/distance"), "21 10 21\n");
    write(dir.path(), &format!("{node}/node2/distance"), "10 21 10\n");
    write(dir.path(), &format!("{node}/node2/cpulist"), "0-1\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.nodes(), &[NodeId(0), NodeId(1)]);
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(21));
    assert_eq!(t.distance(NodeId(1), NodeId(1)), Some(10));
}

#[test]
fn topo_sparse_kernels_files_are_optional_as_in_hwloc() {
    // The PS3's kernel writes no physical_package_id and no core_id; some ia64 dumps have
    // empty cpuN/online files. Each CPU is then online, in one package, its own core
    // unless thread_siblings says otherwise.
    let dir = fixture_copy("topo/old-kernel-no-online");
    remove_topology_files(
        dir.path(),
        &["physical_package_id", "core_siblings", "core_id"],
    );
    write(dir.path(), "sys/devices/system/cpu/cpu1/online", "");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert!(t.cpu(CpuId(1)).is_some());
    assert!(t.cpu(CpuId(5)).is_none());
    assert_eq!(t.domains(Level::Package).len(), 1);
    assert_eq!(cpus_of(&t, Level::Core)[0], "0,4");
}

#[test]
fn topo_fifo_or_device_is_refused_before_it_is_opened() {
    // See: issue 11, item 11. A FIFO would block the open (until a writer comes) and a
    // device the read; neither is a sysfs value.
    let dir = fixture_copy("topo/maps-only");
    let rel = "sys/devices/system/cpu/cpu3/cache/index3/shared_cpu_map";
    std::fs::remove_file(dir.path().join(rel)).unwrap();
    let st = std::process::Command::new("mkfifo")
        .arg(dir.path().join(rel))
        .status()
        .unwrap();
    assert!(st.success());
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(matches!(err, LinuxError::Io { .. }), "{err:?}");
    assert!(err.to_string().contains(rel), "{err}");
    assert!(
        err.to_string().contains("not a regular file but a FIFO"),
        "{err}"
    );

    let dir = fixture_copy("topo/maps-only");
    let rel = "sys/devices/system/node/node0/cpumap";
    std::fs::remove_file(dir.path().join(rel)).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(rel)).unwrap();
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(err.to_string().contains("a character device"), "{err}");

    // A directory where a file belongs.
    let dir = fixture_copy("topo/maps-only");
    let rel = "sys/devices/system/cpu/online";
    std::fs::remove_file(dir.path().join(rel)).unwrap();
    std::fs::create_dir(dir.path().join(rel)).unwrap();
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(err.to_string().contains("a directory"), "{err}");
}
