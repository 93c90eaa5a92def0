//! `read_topology` on the fixture trees and on edge trees built from them.

use crate::util::{fixture_copy, fixture_root, write};
use threadbalance_linux::{LinuxError, Root, read_topology};
use threadbalance_model::{CoreId, CpuId, Level, NodeId, PackageId, Topology};

/// Domain counts at each level, then CPUs: (packages, nodes, LLCs, cores, CPUs).
fn counts(t: &Topology) -> (usize, usize, usize, usize, usize) {
    (
        t.domains(Level::Package).len(),
        t.domains(Level::Node).len(),
        t.domains(Level::Llc).len(),
        t.domains(Level::Core).len(),
        t.cpus().len(),
    )
}

fn cpus_of(t: &Topology, level: Level, index: usize) -> String {
    t.domains(level)[index].cpus.to_string()
}

#[test]
fn topo_fixtures_have_expected_shapes() {
    // (tree, packages, nodes, LLCs, cores, CPUs, SMT width)
    let table = [
        ("this-machine", 1, 1, 1, 2, 2, 1),
        ("opteron6272-4x16", 4, 8, 8, 64, 64, 1),
        ("2s-4n-32c-smt2", 2, 4, 4, 32, 64, 2),
        ("offline-cpu", 1, 1, 1, 3, 3, 1),
        ("nul-terminated", 1, 2, 2, 4, 8, 2),
        ("old-kernel-no-online", 2, 2, 2, 4, 7, 2),
        ("power7-lpar", 4, 2, 4, 4, 16, 4),
        ("s390-books", 4, 1, 4, 12, 12, 1),
        ("maps-only", 1, 2, 2, 8, 16, 2),
        ("die-cluster", 1, 2, 2, 8, 8, 1),
    ];
    for (name, p, n, l, c, cpus, smt) in table {
        let t = read_topology(&fixture_root(&format!("topo/{name}")))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(counts(&t), (p, n, l, c, cpus), "{name}: {}", t.describe());
        assert_eq!(t.smt_width(), smt, "{name}");
    }
}

#[test]
fn topo_opteron6272_nodes_llcs_and_slit_distances() {
    let t = read_topology(&fixture_root("topo/opteron6272-4x16")).unwrap();
    // Package p holds CPUs 16p..16p+15; node n (a die) holds 8n..8n+7, and so does its L3.
    assert_eq!(cpus_of(&t, Level::Package, 1), "16-31");
    assert_eq!(cpus_of(&t, Level::Node, 3), "24-31");
    assert_eq!(cpus_of(&t, Level::Llc, 3), "24-31");
    assert_eq!(t.nodes().len(), 8);
    // 10 local, 16 to the other die of the package, 22 across packages.
    assert_eq!(t.distance(NodeId(0), NodeId(0)), Some(10));
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(16));
    assert_eq!(t.distance(NodeId(0), NodeId(2)), Some(22));
    assert_eq!(t.distance(NodeId(7), NodeId(6)), Some(16));
    assert_eq!(t.default_level(), Level::Package);
    let c = t.cpu(CpuId(21)).unwrap();
    assert_eq!((c.package, c.node), (PackageId(1), NodeId(2)));
}

#[test]
fn topo_two_socket_smt_siblings_share_a_core() {
    let t = read_topology(&fixture_root("topo/2s-4n-32c-smt2")).unwrap();
    // CPU c and c+32 are the two threads of core c.
    assert_eq!(
        t.cpu(CpuId(8)).unwrap().core,
        t.cpu(CpuId(40)).unwrap().core
    );
    assert_eq!(t.cpu(CpuId(40)).unwrap().core, CoreId(8));
    assert_ne!(t.cpu(CpuId(8)).unwrap().core, t.cpu(CpuId(9)).unwrap().core);
    assert_eq!(cpus_of(&t, Level::Node, 1), "8-15,40-47");
    assert_eq!(cpus_of(&t, Level::Package, 1), "16-31,48-63");
    assert_eq!(cpus_of(&t, Level::Core, 8), "8,40");
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(11));
    assert_eq!(t.distance(NodeId(1), NodeId(2)), Some(21));
}

#[test]
fn topo_offline_cpu_is_left_out_and_cpuless_node_kept() {
    let t = read_topology(&fixture_root("topo/offline-cpu")).unwrap();
    assert_eq!(t.online().to_string(), "0-1,3");
    assert!(t.cpu(CpuId(2)).is_none());
    assert_eq!(t.domain_of(CpuId(2), Level::Core), None);
    // Node 1 has memory but no CPU: it is a node, with its distances, and no domain.
    assert_eq!(t.nodes(), &[NodeId(0), NodeId(1)]);
    assert_eq!(t.distance(NodeId(0), NodeId(1)), Some(20));
    assert_eq!(t.domains(Level::Node).len(), 1);
}

#[test]
fn topo_cpu_marked_offline_in_its_own_file_is_left_out() {
    let dir = fixture_copy("topo/opteron6272-4x16");
    write(dir.path(), "sys/devices/system/cpu/cpu5/online", "0\n");
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.cpus().len(), 63);
    assert!(t.cpu(CpuId(5)).is_none());
}

#[test]
fn topo_without_node_directory_is_one_node() {
    let dir = fixture_copy("topo/2s-4n-32c-smt2");
    std::fs::remove_dir_all(dir.path().join("sys/devices/system/node")).unwrap();
    let t = read_topology(&Root::new(dir.path())).unwrap();
    assert_eq!(t.nodes(), &[NodeId(0)]);
    assert_eq!(counts(&t), (2, 1, 4, 32, 64));
}

#[test]
fn topo_without_caches_uses_packages_as_llcs() {
    let dir = fixture_copy("topo/opteron6272-4x16");
    for cpu in 0..64 {
        let cache = dir
            .path()
            .join(format!("sys/devices/system/cpu/cpu{cpu}/cache"));
        std::fs::remove_dir_all(cache).unwrap();
    }
    let t = read_topology(&Root::new(dir.path())).unwrap();
    // Without caches the LLC is the package: 4 LLCs, although there are 8 nodes.
    assert_eq!(counts(&t), (4, 8, 4, 64, 64));
}

#[test]
fn topo_without_sibling_lists_uses_core_ids_per_package() {
    let dir = fixture_copy("topo/2s-4n-32c-smt2");
    for cpu in 0..64 {
        for f in ["core_cpus_list", "thread_siblings_list"] {
            let p = format!("sys/devices/system/cpu/cpu{cpu}/topology/{f}");
            std::fs::remove_file(dir.path().join(p)).unwrap();
        }
    }
    let t = read_topology(&Root::new(dir.path())).unwrap();
    // core_id repeats 0-15 in each package; cores are told apart by their package.
    assert_eq!(counts(&t), (2, 4, 4, 32, 64));
    assert_eq!(t.smt_width(), 2);
}

#[test]
fn topo_unreadable_or_malformed_roots_name_the_path() {
    let err = read_topology(&Root::new("/nonexistent-threadbalance-root")).unwrap_err();
    assert!(matches!(err, LinuxError::Io { .. }), "{err:?}");
    assert!(
        err.to_string()
            .contains("/nonexistent-threadbalance-root/sys/devices/system/cpu/online"),
        "{err}"
    );

    // (file, bad content, what the message must contain)
    let cases = [
        ("sys/devices/system/cpu/online", "0-x\n", "cpu/online"),
        (
            "sys/devices/system/cpu/cpu1/topology/physical_package_id",
            "zero\n",
            "cpu1/topology/physical_package_id",
        ),
        (
            "sys/devices/system/cpu/cpu3/cache/index3/shared_cpu_list",
            "3-1\n",
            "cpu3/cache/index3/shared_cpu_list",
        ),
        (
            "sys/devices/system/node/node0/distance",
            "10 far\n",
            "node0/distance",
        ),
        ("sys/devices/system/node/online", "\u{1}\n", "node/online"),
    ];
    for (file, bad, needle) in cases {
        let dir = fixture_copy("topo/offline-cpu");
        write(dir.path(), file, bad);
        let err = read_topology(&Root::new(dir.path())).unwrap_err();
        assert!(matches!(err, LinuxError::Parse { .. }), "{file}: {err:?}");
        assert!(err.to_string().contains(needle), "{file}: {err}");
    }

    // A CPU listed online whose topology directory is missing.
    let dir = fixture_copy("topo/offline-cpu");
    std::fs::remove_dir_all(dir.path().join("sys/devices/system/cpu/cpu3/topology")).unwrap();
    let err = read_topology(&Root::new(dir.path())).unwrap_err();
    assert!(
        err.to_string()
            .contains("cpu3/topology/physical_package_id"),
        "{err}"
    );
}

#[test]
fn topo_live_machine_reads_and_matches_online_cpus() {
    let t = read_topology(&Root::system()).unwrap();
    let online = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    assert_eq!(t.online().to_string(), online.trim());
    assert!(!t.nodes().is_empty());
}
