//! Bad input: one clear line on stderr, exit status 2, nothing started or changed.

use crate::support::run;

fn assert_rejected(args: &[&str], needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: stderr {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        lines.iter().any(|l| l.contains(needle)),
        "{args:?}: expected {needle:?} in {stderr}"
    );
    assert!(
        !stderr.contains("summary"),
        "{args:?}: nothing should have run: {stderr}"
    );
}

#[test]
fn bad_input_unknown_policy_exits_2() {
    assert_rejected(
        &["run", "--policy", "bogus", "--", "true"],
        "unknown policy \"bogus\"",
    );
}

#[test]
fn bad_input_unknown_level_exits_2() {
    assert_rejected(
        &["run", "--level", "rack", "--", "true"],
        "unknown level \"rack\"",
    );
}

#[test]
fn bad_input_nonexistent_pid_exits_2() {
    // Pids above the kernel's pid_max (4194304 at most) never exist.
    assert_rejected(&["attach", "--pid", "4194305"], "4194305");
}

#[test]
fn bad_input_command_that_cannot_execute_exits_2() {
    assert_rejected(
        &["run", "--", "/nonexistent/threadbalance-test"],
        "cannot execute",
    );
}

#[test]
fn bad_input_bad_synthetic_spec_exits_2() {
    assert_rejected(&["topo", "--synthetic", "package:4 widget:2"], "widget");
}

#[test]
fn bad_input_unreadable_sysfs_root_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    assert_rejected(&["topo", "--sysfs-root", path], path);
}

#[test]
fn bad_input_zero_interval_exits_2() {
    assert_rejected(&["run", "--interval", "0", "--", "true"], "--interval");
    assert_rejected(&["sim", "--interval", "0"], "--interval");
}

#[test]
fn bad_input_process_we_may_not_touch_exits_2() {
    // Kernel threads are not user programs (and even root may not change the affinity of
    // per-CPU ones, PF_NO_SETAFFINITY): `migration/0` exists on every SMP kernel.
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim() == "migration/0")
        })
        .expect("a migration/0 kernel thread");
    let pid = pid.to_string();
    assert_rejected(
        &["attach", "--pid", &pid, "--policy", "none"],
        "is a kernel thread",
    );
}

#[test]
fn bad_input_unknown_sim_baseline_exits_2_for_a_run_and_the_suite() {
    assert_rejected(&["sim", "--baseline", "freebsd"], "linux, solaris");
    assert_rejected(
        &["sim", "--suite", "papers", "--baseline", "freebsd"],
        "unknown baseline",
    );
}

#[test]
fn bad_input_sim_tool_cpu_neither_a_mode_nor_costs_exits_2() {
    assert_rejected(&["sim", "--tool-cpu", "cheap"], "tool CPU \"cheap\"");
    assert_rejected(&["sim", "--tool-cpu", "1,x"], "tick cost \"1,x\"");
}
