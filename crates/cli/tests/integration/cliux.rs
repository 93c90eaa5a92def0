//! The command line as a user meets it: `--json -` on stdout, the summary's wording, and
//! `--version`.

use crate::support::bin;
use std::process::{Command, Stdio};

/// Runs the binary in `dir` (so that a file named `-` would land there).
fn run_in(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .current_dir(dir)
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn run_json_dash_writes_the_summary_to_stdout_after_the_commands_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(
        dir.path(),
        &[
            "run",
            "--policy",
            "none",
            "--json",
            "-",
            "--",
            "sh",
            "-c",
            "echo from-the-command",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // The command's own line comes first, whole; the JSON follows it, alone.
    let (first, rest) = stdout.split_once('\n').unwrap();
    assert_eq!(first, "from-the-command", "{stdout}");
    let v: serde_json::Value = serde_json::from_str(rest).unwrap();
    assert_eq!(v["policy"], "none");
    assert_eq!(v["ended"], "exit 0");
    // The human summary stays on stderr, and no file named `-` was made.
    assert!(stderr.contains("threadbalance summary"), "{stderr}");
    assert!(!stderr.contains("\"policy\""), "{stderr}");
    assert!(!dir.path().join("-").exists());
}

#[test]
fn run_json_unwritable_file_is_still_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let bad = dir.path().join("no-such-dir/out.json");
    let out = run_in(
        dir.path(),
        &[
            "run",
            "--json",
            bad.to_str().unwrap(),
            "--",
            "touch",
            marker.to_str().unwrap(),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--json"), "{stderr}");
    assert!(!marker.exists(), "the command never started");
}

#[test]
fn attach_json_dash_writes_the_summary_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let mut target = Command::new("sleep").arg("1").spawn().unwrap();
    let pid = target.id().to_string();
    let state = dir.path().join("state");
    let child = Command::new(bin())
        .current_dir(dir.path())
        .args(["attach", "--pid", &pid, "--policy", "none", "--json", "-"])
        .arg("--state-dir")
        .arg(&state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = target.wait();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["policy"], "none");
    assert!(stderr.contains("threadbalance summary"), "{stderr}");
    assert!(!dir.path().join("-").exists());
}

#[test]
fn bench_cost_json_dash_puts_the_json_on_stdout_and_the_table_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), &["bench", "--cost", "--quick", "--json", "-"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(
        v["management"].as_array().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert!(stderr.contains("tool CPU % of one core"), "{stderr}");
    assert!(!dir.path().join("-").exists());
}
