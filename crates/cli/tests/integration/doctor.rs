//! `doctor`: one line per check on this machine, the same as JSON (schema `doctor`), and
//! every file read under the root it is given.

use crate::support::*;
use serde_json::Value;

#[test]
fn doctor_names_every_check_on_this_machine_in_lines_and_json() {
    let out = run(&["doctor"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 11, "{stdout}");
    for name in ["schedstat", "hardware counters", "kernel HZ", "competitors"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(name) && l.contains(" — ")),
            "{name}: {stdout}"
        );
    }
    let out = run(&["doctor", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&v, "doctor");
    let checks = v["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 11);
    // The hardware counters' answer agrees with what `run --counters` would find.
    let hw = checks
        .iter()
        .find(|c| c["name"] == "hardware counters")
        .unwrap();
    let offered = threadbalance_linux::perf::PerfSource::system().is_ok();
    assert_eq!(hw["answer"], if offered { "yes" } else { "no" }, "{hw}");
}

#[test]
fn doctor_reads_under_the_root_it_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let w = |rel: &str, text: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    w("proc/sys/kernel/numa_balancing", "1\n");
    w("proc/31/comm", "numad\n");
    w("sys/devices/system/cpu/smt/active", "1\n");
    let out = run(&["doctor", "--json", "--root", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&v, "doctor");
    let answer = |name: &str| {
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["answer"]
            .clone()
    };
    assert_eq!(answer("numa balancing"), "yes");
    assert_eq!(answer("competitors"), "yes");
    assert_eq!(answer("smt"), "yes");
    assert_eq!(answer("hardware counters"), "no");
    assert_eq!(answer("kernel HZ"), "unknown");
    // A root that is not a directory: one line, exit 2.
    let out = run(&["doctor", "--root", "/nonexistent/root"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}
