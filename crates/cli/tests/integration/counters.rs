//! Hardware counters: refused in one line (exit 2, nothing started) where the machine has
//! none; IPC and MPKI per thread in the summary where it has them (here, on counters of
//! plain values: IPC 1.5, MPKI 2 at every read).

use crate::support::*;
use serde_json::Value;
use threadbalance_linux::perf::PerfSource;

/// Runs `threadbalance run ARGS -- touch F`: where the machine has no hardware counters,
/// one line starting with `threadbalance: {who}, and this machine has none: ` and the
/// library's reason, exit 2, and F never created; where it has them, the command runs.
fn refused_without_a_pmu(args: &[&str], who: &str) {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    all.extend(["--", "touch", marker.to_str().unwrap()]);
    let out = run(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match PerfSource::system() {
        Err(why) => {
            assert_eq!(out.status.code(), Some(2), "{stderr}");
            let lines: Vec<&str> = stderr.lines().collect();
            assert_eq!(lines.len(), 1, "{stderr}");
            let head = format!("threadbalance: {who}, and this machine has none: ");
            assert!(lines[0].starts_with(&head), "{stderr}");
            // The same reason as the library gives.
            let why = why.to_string();
            assert!(lines[0].contains(&why), "{stderr} / {why}");
            assert!(!marker.exists(), "the command ran");
        }
        Ok(_) => {
            assert_eq!(out.status.code(), Some(0), "{stderr}");
            assert!(marker.exists());
        }
    }
}

#[test]
fn counters_refused_in_one_line_without_a_pmu_and_nothing_started() {
    refused_without_a_pmu(&["--counters"], "--counters asks for hardware counters");
}

/// Issue 42: `run --policy dino -- CMD` where the machine has no counters: one line naming
/// the policy and why, exit 2, and the command never starts.
#[test]
fn counters_dino_refused_in_one_line_without_a_pmu_and_nothing_started() {
    refused_without_a_pmu(&["--policy", "dino"], "policy dino reads hardware counters");
}

#[test]
fn counters_fake_source_gives_ipc_and_mpki_per_thread_in_the_summary_and_json() {
    let bin = bin();
    let out = run(&[
        "run",
        "--policy",
        "none",
        "--fake-counters",
        "-v",
        "--json",
        "-",
        "--",
        bin.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "2",
        "--work-ms",
        "300",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = &stdout[stdout.find("\n{").unwrap() + 1..];
    let v: Value = serde_json::from_str(json).unwrap();
    assert_schema(&v, "run");
    assert_eq!(v["hw_counters"], "fake counters");
    let threads = v["thread_counters"].as_array().unwrap();
    assert!(threads.len() >= 2, "{threads:?}");
    for t in threads {
        assert!((t["ipc"].as_f64().unwrap() - 1.5).abs() < 1e-6, "{t}");
        assert!((t["mpki"].as_f64().unwrap() - 2.0).abs() < 1e-6, "{t}");
    }
    assert!(stderr.contains("MPKI over"), "{stderr}");
    assert!(stderr.contains(": IPC 1.50, MPKI 2.00 ("), "{stderr}");
}
