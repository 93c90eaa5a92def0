//! One settings vocabulary: the policy, level, interval and CPU list mean the same and are
//! refused the same way in `run`, `attach`, `compare` and `sim` (one line, exit status 2,
//! nothing started); and `--cpus` confines placement live.

use crate::support::*;
use std::time::Duration;

/// Runs `args` and checks the refusal: exit 2, one line on stderr naming `needle`, nothing
/// on stdout.
fn assert_refused(args: &[&str], needle: &str) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line expected: {stderr}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: {needle:?} not in {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}: nothing should have run");
}

/// Each command with what it needs besides the settings; the settings go in between.
fn commands(marker: &str) -> Vec<(Vec<&str>, Vec<&str>)> {
    vec![
        (vec!["run"], vec!["--", "touch", marker]),
        // Pid 1 exists but is no user program of ours: the settings are refused first.
        (vec!["attach", "--pid", "1"], vec![]),
        (
            vec!["compare", "--repeat", "1"],
            vec!["--", "touch", marker],
        ),
        (vec!["sim"], vec![]),
    ]
}

#[test]
fn settings_every_bad_value_in_every_command_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let marker = marker.to_str().unwrap();
    let bad: [(&[&str], &str); 6] = [
        (&["--policy", "bogus"], "unknown policy \"bogus\""),
        (&["--policy", "none,bogus"], "unknown policy \"bogus\""),
        (&["--level", "rack"], "unknown level \"rack\""),
        (&["--interval", "0"], "--interval"),
        (&["--cpus", "3-1"], "bad CPU list \"3-1\""),
        (&["--cpus", "1,x"], "bad CPU list \"1,x\""),
    ];
    for (head, tail) in commands(marker) {
        for (value, needle) in &bad {
            let args: Vec<&str> = [&head[..], value, &tail[..]].concat();
            assert_refused(&args, needle);
        }
    }
    assert!(!std::path::Path::new(marker).exists(), "a command ran");
}

#[test]
fn settings_cpus_none_usable_and_a_list_for_run_are_refused() {
    // CPU 8191 is the highest the kernel can have; no test machine has it.
    assert_refused(
        &["run", "--cpus", "8191", "--", "true"],
        "none of these CPUs",
    );
    assert_refused(
        &["compare", "--cpus", "8191", "--repeat", "1", "--", "true"],
        "none of these CPUs",
    );
    assert_refused(&["sim", "--cpus", "0"], "sim takes no CPU list");
    assert_refused(
        &["run", "--policy", "none,tumbler", "--", "true"],
        "run takes one policy",
    );
}

/// The highest CPU this test may use: `--cpus` of it is a real restriction on any machine
/// of two CPUs or more.
fn last_usable_cpu() -> String {
    let mask = masks(std::process::id())
        .into_iter()
        .find(|(tid, _, _)| *tid == std::process::id() as i32)
        .map(|(_, _, m)| m)
        .unwrap();
    let last = mask.rsplit([',', '-']).next().unwrap();
    last.to_string()
}

#[test]
fn live_run_cpus_confines_the_command_and_every_move_to_the_list() {
    // `pbind` pins each of 3 threads to a core of the machine it plans over: with
    // `--cpus C` that machine is one core, so every mask it sets is {C}; the command
    // itself starts confined to C (as under `taskset -c C`).
    let cpu = last_usable_cpu();
    let bin = bin();
    let mut tb = spawn(&[
        "run",
        "--cpus",
        &cpu,
        "--level",
        "core",
        "--policy",
        "pbind",
        "--json",
        "-",
        "--",
        bin.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "3",
        "--work-ms",
        "300",
    ]);
    // Every mask seen while it runs, each thread's, the main one's included. The command
    // is the first child seen: at exit `run` forks a child of its own that closes the BPF
    // links (with the tool's mask), which is not the command.
    let mut seen = std::collections::BTreeSet::new();
    let limit = Duration::from_secs(60);
    let start = std::time::Instant::now();
    let mut command = None;
    while tb.try_wait().unwrap().is_none() && start.elapsed() < limit {
        if command.is_none() {
            command = child_of(tb.id());
        }
        if let Some(child) = command {
            for (_, _, mask) in masks(child) {
                seen.insert(mask);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let code = finish(&mut tb, limit);
    let out = tb.wait_with_output().unwrap();
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&out.stderr));
    seen.remove("");
    assert!(!seen.is_empty(), "the command's threads were seen");
    assert_eq!(
        seen.into_iter().collect::<Vec<_>>(),
        std::slice::from_ref(&cpu)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&stdout[stdout.find("\n{").unwrap() + 1..]).unwrap();
    assert_eq!(v["cpus"], cpu.as_str());
    assert_eq!(v["domains"], 1);
    // pbind planned its pins (made, or already so), and none was refused.
    assert!(v["moves_decided"].as_u64().unwrap() >= 3, "{v}");
    assert_eq!(v["applied"]["denied"], 0, "{v}");
    assert_schema(&v, "run");
}
