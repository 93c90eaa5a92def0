//! `topo` on bad trees and bad specs: one line naming what was wrong, exit status 2, and
//! never a hang or a panic.

use crate::support::{bin, run};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs `topo` with `args`, killing it if it has not finished within 20 s (a blocked read
/// shows up as a failed assertion, not a hung test). Returns (status, stdout, stderr).
fn topo_bounded(args: &[&str]) -> (Option<i32>, String, String) {
    let child = Command::new(bin())
        .arg("topo")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    // The output is collected on another thread so that a full pipe cannot stall the child.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let Ok(out) = rx.recv_timeout(Duration::from_secs(20)) else {
        crate::support::signal(pid, libc::SIGKILL);
        panic!("topo {args:?} did not finish within 20 s");
    };
    let out = out.unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

fn fixture_copy(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/topo")
        .join(name);
    copy_tree(&from, dir.path());
    dir
}

#[test]
fn topo_synthetic_huge_counts_exit_2_with_one_line() {
    // See: issue 11, item 10. The product of these counts overflows 64 bits; it used to
    // panic (exit 101).
    for spec in [
        "package:4294967295 core:4294967295 pu:4294967295",
        "package:65536 numa:65536 l3:65536 core:65536 pu:65536",
        "numa:2048 pu:1",
    ] {
        let out = run(&["topo", "--synthetic", spec]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{spec}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{spec}: {stderr}");
        assert!(stderr.contains("more than"), "{spec}: {stderr}");
        assert!(out.stdout.is_empty(), "{spec}");
    }
}

#[test]
fn topo_synthetic_largest_machine_prints_every_node() {
    // See: issue 11, item 10: 1024 nodes of 8 PUs each, the largest machine accepted.
    let (code, stdout, stderr) = topo_bounded(&["--synthetic", "numa:1024 core:8 pu:1"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.starts_with("1 package, 1024 nodes, 1024 LLCs, 8192 cores, 8192 CPUs"));
    assert_eq!(stdout.matches("\n  node ").count(), 1024);
    assert!(
        stdout.contains("  node 1023 (CPUs 8184-8191)"),
        "{stdout:.400}"
    );
}

#[test]
fn topo_fifo_or_device_in_sysfs_root_exits_2_without_blocking() {
    // See: issue 11, item 11. Opening a FIFO for reading blocks until a writer comes;
    // reading a device file may block forever or never end.
    for (file, kind) in [
        ("sys/devices/system/cpu/online", "fifo"),
        ("sys/devices/system/node/node0/distance", "fifo"),
        (
            "sys/devices/system/cpu/cpu1/topology/core_cpus_list",
            "device",
        ),
    ] {
        let dir = fixture_copy("offline-cpu");
        let path = dir.path().join(file);
        std::fs::remove_file(&path).unwrap();
        if kind == "fifo" {
            let st = Command::new("mkfifo").arg(&path).status().unwrap();
            assert!(st.success());
        } else {
            // A character device stand-in that needs no privilege: a symlink to one.
            std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
        }
        let root = dir.path().to_str().unwrap();
        let (code, stdout, stderr) = topo_bounded(&["--sysfs-root", root]);
        assert_eq!(code, Some(2), "{file}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{file}: {stderr}");
        assert!(stderr.contains(file), "{file}: {stderr}");
        assert!(stderr.contains("not a regular file"), "{file}: {stderr}");
        assert!(stdout.is_empty(), "{file}");
    }
}

#[test]
fn topo_unreadable_real_machine_tree_exits_2_naming_the_file() {
    // See: issue 11, "Topologies of real machines": node1/distance holds 3 distances for
    // 2 nodes.
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/topo/distance-mismatch"
    );
    let (code, stdout, stderr) = topo_bounded(&["--sysfs-root", root]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("node1/distance"), "{stderr}");
    assert!(stderr.contains("3 distances for 2 nodes"), "{stderr}");
    assert!(stdout.is_empty());
}

#[test]
fn topo_power7_tree_shows_nodes_above_their_packages() {
    // physical_package_id -1 and no online lists: read as hwloc reads it.
    let root = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/topo/power7-lpar"
    );
    let (code, stdout, stderr) = topo_bounded(&["--sysfs-root", root]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.starts_with("4 packages, 2 nodes, 4 LLCs, 4 cores, 16 CPUs\ndefault level: node\n"),
        "{stdout}"
    );
    // Each node holds two packages, so the tree shows nodes above packages (the package →
    // node order used to hide every node, and everything below, on this machine).
    assert!(
        stdout.contains("\nnode 4 (CPUs 8-15)\n  package 2 (CPUs 8-11)\n    llc 2 (CPUs 8-11)\n"),
        "{stdout}"
    );
}

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn topo_tree_without_caches_says_so_and_gives_no_llc() {
    // See: issue 39, "no LLC when sysfs has no cache information". The s390 tree lists no
    // cache: hwloc shows none, and the package used to be shown as the LLC.
    let dir = fixture_copy("s390-books");
    let root = dir.path().to_str().unwrap();
    let (status, out, err) = topo_bounded(&["--sysfs-root", root]);
    assert_eq!(status, Some(0), "{err}");
    assert!(
        out.lines().next().unwrap().contains("no cache information"),
        "{out}"
    );
    assert!(!out.contains("llc "), "{out}");
    let (status, out, err) = topo_bounded(&["--sysfs-root", root, "--json"]);
    assert_eq!(status, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["caches"], false);
    assert!(
        v["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["llc"].is_null())
    );
    assert_eq!(v["levels"]["llc"].as_array().unwrap().len(), 0);
}

#[test]
fn topo_shows_only_the_cpus_of_its_cpuset_as_lstopo_does() {
    // See: issue 39, "Real sysfs trees": a process in a cgroup whose cpuset allows CPUs
    // 0-1 and 16-17 of 64 sees those 4 (hwloc's `32amd64-4s2n4c-cgroup2` tree); --whole-system shows all.
    let dir = fixture_copy("2s-4n-32c-smt2");
    let r = dir.path();
    write(r, "sys/fs/cgroup/cpuset.cpus.effective", "0-63\n");
    write(
        r,
        "sys/fs/cgroup/job/step/cpuset.cpus.effective",
        "0-1,16-17\n",
    );
    write(r, "proc/self/cgroup", "0::/job/step\n");
    let root = r.to_str().unwrap();
    let (status, out, err) = topo_bounded(&["--sysfs-root", root, "--json"]);
    assert_eq!(status, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["online"], "0-1,16-17");
    assert_eq!(v["cpuset"]["name"], "/job/step");
    assert_eq!(v["cpuset"]["hidden"], "2-15,18-63");
    let (status, out, _) = topo_bounded(&["--sysfs-root", root]);
    assert_eq!(status, Some(0));
    assert!(
        out.contains("cpuset /job/step: CPUs 2-15,18-63 not shown"),
        "{out}"
    );
    let (status, out, err) = topo_bounded(&["--sysfs-root", root, "--whole-system", "--json"]);
    assert_eq!(status, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["online"], "0-63");
    assert!(v.get("cpuset").is_none());
}

#[test]
fn topo_smt_machine_shows_the_cpu_level_and_each_policys_level() {
    // See: issue 38. 4 cores × 2 hardware threads: the CPU level (one domain a logical
    // CPU), its SMT width, and the level each policy runs at without --level.
    let (code, stdout, stderr) = topo_bounded(&["--synthetic", "package:1 core:4 pu:2"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stdout.contains("\ncpu level: 8 logical CPUs, 2 hardware threads a core"),
        "{stdout}"
    );
    assert!(stdout.contains("speed cpu"), "{stdout}");
    assert!(
        stdout.contains("tumbler, shuffling, handoff, dino core"),
        "{stdout}"
    );
    let (code, stdout, stderr) = topo_bounded(&["--synthetic", "package:1 core:4 pu:2", "--json"]);
    assert_eq!(code, Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["levels"]["cpu"].as_array().unwrap().len(), 8);
    assert_eq!(v["levels"]["cpu"][5]["cpus"], "5");
    assert_eq!(v["smt_width"], 2);
    assert_eq!(v["default_levels"]["speed"], "cpu");
    assert_eq!(v["default_levels"]["numa-tm"], "node");
    assert_eq!(v["default_levels"]["tumbler"], "core");
}
