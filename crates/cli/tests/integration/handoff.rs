//! Live: `handoff` on `workload locks` with mutex groups (2 groups of 2 threads, one mutex
//! each), at core level. Built with the futex probe and run as root, the windows carry wake
//! edges and the policy reads them; without it, it says the edges were not measured and moves
//! nothing. Either way the run ends as the command did and every mask it changed is put
//! back. No timing is asserted.
//!
//! The workload runs about 0.4 s, less than the policy's own 500 ms interval, so the test
//! decides every 100 ms: with the default the program could end before the first window
//! was read, and the summary would rightly say no edges were measured.

use crate::support::*;

#[test]
fn live_handoff_runs_on_mutex_groups_and_restores_every_mask() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("summary.json");
    let bin = bin();
    let out = run(&[
        "run",
        "--policy",
        "handoff",
        "--level",
        "core",
        "--interval",
        "100",
        "--json",
        path.to_str().unwrap(),
        "--",
        bin.to_str().unwrap(),
        "workload",
        "locks",
        "--threads",
        "4",
        "--mutexes",
        "2",
        "--groups",
        "2",
        "--cs-us",
        "20",
        "--outside-us",
        "40",
        "--ops",
        "3000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(v["unrestored"].as_u64(), Some(0), "{v}");
    let summary = &v["policy_summary"];
    assert_eq!(summary["kind"], "handoff", "{summary}");
    let probe = v["lock_probe"]["exact"].as_bool() == Some(true);
    assert_eq!(
        summary["wake_edges_measured"].as_bool(),
        Some(probe),
        "{summary}"
    );
    if probe {
        assert!(summary["checks"].as_u64() >= Some(1), "{summary}");
    } else {
        assert_eq!(summary["moves"].as_u64(), Some(0), "{summary}");
    }
    // The workload's own score: four workers, all done.
    let score: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(score["threads"].as_u64(), Some(4), "{score}");
}
