//! The command line as a user meets it: `--json -` on stdout, the summary's wording, and
//! `--version`.

use crate::support::{assert_schema, bin};
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
    assert_schema(&v, "run");
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
    assert_schema(&v, "bench");
    assert!(stderr.contains("tool CPU % of one core"), "{stderr}");
    assert!(!dir.path().join("-").exists());
}

/// The summary of a `run` as text (stderr) and JSON (stdout, through `--json -`).
fn summary_of(args: &[&str]) -> (String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = run_in(dir.path(), args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The workload prints its score line first; the summary is the rest.
    let json = &stdout[stdout.find("\n{").map_or(0, |i| i + 1)..];
    (stderr, serde_json::from_str(json).unwrap())
}

#[test]
fn run_summary_names_the_default_policy_only_when_none_was_given() {
    let exe = bin();
    let exe = exe.to_str().unwrap();
    let cmd = [exe, "workload", "spmd", "--threads", "2", "--work-ms", "20"];
    let (text, v) = summary_of(&[&["run", "--json", "-", "--"][..], &cmd].concat());
    assert!(text.contains("policy tumbler (default) at level"), "{text}");
    assert_eq!(v["policy"], "tumbler");
    assert_eq!(v["policy_default"], true);
    let (text, v) = summary_of(
        &[
            &["run", "--policy", "tumbler", "--json", "-", "--"][..],
            &cmd,
        ]
        .concat(),
    );
    assert!(text.contains("policy tumbler at level"), "{text}");
    assert_eq!(v["policy_default"], false);
}

#[test]
fn run_summary_says_restored_n_of_m_as_the_json_counts_them() {
    let exe = bin();
    let (text, v) = summary_of(&[
        "run",
        "--policy",
        "pbind",
        "--level",
        "core",
        "--json",
        "-",
        "--",
        exe.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "2",
        "--work-ms",
        "40",
    ]);
    let restored = v["restored"].as_u64().unwrap();
    let total = v["restore_total"].as_u64().unwrap();
    assert!(restored <= total, "{v}");
    if v["applied"]["done"].as_u64().unwrap() > 0 {
        assert!(total > 0, "a mask was changed, so one was dealt with: {v}");
    }
    // Every mask changed is accounted for: put back, already back, gone or left.
    let kept = total
        - restored
        - v["restore_already"].as_u64().unwrap()
        - v["restore_vanished"].as_u64().unwrap();
    assert_eq!(
        kept,
        v["program_chose"].as_u64().unwrap() + v["unrestored"].as_u64().unwrap()
    );
    // The text counts the masks handed back during the run too; the JSON keeps them apart.
    let handed = v["handed_back"].as_u64().unwrap();
    assert!(
        text.contains(&format!(
            "restored {} of {}",
            restored + handed,
            total + handed
        )),
        "{text}"
    );
    assert!(!text.contains(&format!("), {restored} restored")), "{text}");
}

#[test]
fn run_summary_of_a_very_short_run_gives_no_cpu_share_and_no_idle_lock_line() {
    // `-v`: whether the lock-time line is there is one of the summary's details.
    let (text, v) = summary_of(&["run", "-v", "--policy", "none", "--json", "-", "--", "true"]);
    let wall = v["wall_s"].as_f64().unwrap();
    if wall < 0.1 {
        assert!(!text.contains("% of one core"), "{text}");
        assert!(text.contains("no share of one core"), "{text}");
        assert_eq!(v["tool_cpu_pct_known"], false);
    } else {
        assert!(text.contains("% of one core"), "{text}");
    }
    // `none` does not read lock time: an estimate of it is not shown (JSON keeps it).
    assert_eq!(
        text.contains("lock time:"),
        v["lock_probe"]["exact"] == true,
        "{text}"
    );
    assert!(v["lock_time"].as_str().is_some(), "{v}");
    let source = v["run_time"].as_str().unwrap();
    if cfg!(feature = "bpf") {
        assert!(source.starts_with("run time from "), "{v}");
    } else {
        assert_eq!(
            source,
            "run time from /proc (built without the bpf feature)"
        );
    }
}

#[test]
fn version_names_the_commit_built_from_inside_a_git_checkout() {
    let out = crate::support::run(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    let line = String::from_utf8(out.stdout).unwrap();
    let line = line.trim_end();
    let bare = format!("threadbalance {}", env!("CARGO_PKG_VERSION"));
    assert!(line.starts_with("threadbalance "), "{line}");
    // The commit git sees now: the binary was rebuilt for this test run, and its build
    // script reruns whenever HEAD or its branch moves.
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(commit) => {
            assert!(commit.chars().all(|c| c.is_ascii_hexdigit()), "{commit}");
            assert_eq!(line, format!("{bare} (commit {commit})"));
        }
        // A source tarball, or no git: the bare version, silently.
        None => assert_eq!(line, bare),
    }
}
