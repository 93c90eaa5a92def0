//! Bad input and failed output as issue 39 item 8 found them: every count bounded before
//! anything starts, stdout checked, each cause said once, every bad path or value exit 2
//! before the command starts, config errors naming file, line and key, and scenario files
//! that are missing or not files said to be so. One line on stderr each.

use crate::support::{bin, run};
use std::process::{Command, Stdio};

/// Exit status 2, one line on stderr, containing every one of `needles`.
fn assert_one_line_2(out: &std::process::Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected {n:?} in {stderr}");
    }
}

/// Runs the binary with stdout on `/dev/full` (every write: ENOSPC).
fn to_dev_full(args: &[&str]) -> std::process::Output {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    Command::new(bin())
        .args(args)
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .expect("runs")
}

// See: issue 39, item 8 (`workload spmd --threads 100000` aborted with status 134 when the
// process ran out of memory mappings for the threads' signal stacks).
#[test]
fn workload_threads_beyond_what_the_kernel_allows_exits_2_before_starting_any() {
    // Above the kernel's PID_MAX_LIMIT (4 194 304): no machine runs that many threads.
    let out = run(&["workload", "spmd", "--threads", "4194305", "--work-ms", "1"]);
    assert_one_line_2(&out, &["4194305 threads", "at most"]);
    let out = run(&["workload", "uneven", "--duty", "0.5", "--periods", "1"]);
    assert_eq!(out.status.code(), Some(0), "a small count still runs");
}

// See: issue 39, item 8 (`sim` with 10^8 threads aborted allocating 7.6 GB).
#[test]
fn sim_threads_beyond_the_simulators_cap_exits_2_from_the_flag_and_from_a_scenario() {
    let out = run(&["sim", "--threads", "100000000"]);
    assert_one_line_2(&out, &["100000002 threads", "at most 65536"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("big.toml");
    std::fs::write(
        &file,
        "[[app]]\nname = \"a\"\n[[app.group]]\nname = \"g\"\nthreads = 100000000\n\
         iterations = 1\nops = [ { op = \"compute\", us = 1 } ]\n",
    )
    .unwrap();
    let out = run(&["sim", "--workload", file.to_str().unwrap()]);
    assert_one_line_2(&out, &["big.toml", "100000000 threads"]);
    // Two applications, each under the cap, together over it.
    let out = run(&[
        "sim",
        "--workload",
        "spinners+spinners",
        "--threads",
        "40000",
    ]);
    assert_one_line_2(&out, &["80000 threads"]);
}

// See: issue 39, item 8 (`topo` and `sim` to /dev/full exited 0, their output lost).
#[test]
fn topo_and_sim_writing_to_a_full_device_exit_1_with_one_line() {
    for args in [
        &["topo"][..],
        &["topo", "--json"][..],
        &[
            "sim",
            "--machine",
            "tigerton-4x4",
            "--workload",
            "ep-barrier:work_ms=20",
            "--policy",
            "none",
        ][..],
    ] {
        let out = to_dev_full(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("No space left on device"), "{stderr}");
    }
}

#[test]
fn sim_into_a_pipe_closed_by_its_reader_exits_0_quietly() {
    let mut child = Command::new(bin())
        .args([
            "sim",
            "--machine",
            "tigerton-4x4",
            "--workload",
            "ep-barrier:work_ms=20",
            "--policy",
            "none",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before anything is printed (`… | head -0`).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.is_empty(), "{stderr}");
}

// See: issue 39, item 8 ("Permission denied (os error 13): Permission denied (os error
// 13)": a library error that prints its source, and the source printed again).
#[test]
fn an_error_and_its_cause_are_said_once() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("none.sock");
    let out = run(&["ctl", "--socket", socket.to_str().unwrap(), "status"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.matches("(os error 2)").count(), 1, "{stderr}");
}

// See: issue 39, item 8 (a state directory we cannot write in was found when the command
// had started, which was then killed: exit 1).
#[test]
fn run_state_dir_we_cannot_write_in_exits_2_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    // A directory that exists and where no one may create a file, root included.
    let out = run(&[
        "run",
        "--policy",
        "none",
        "--state-dir",
        "/proc/1",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_one_line_2(&out, &["state directory /proc/1", "cannot create files"]);
    assert!(!marker.exists(), "the command never started");
    let out = run(&["restore", "--state-dir", "/etc/passwd"]);
    assert_one_line_2(&out, &["/etc/passwd", "not a directory"]);
}

// See: issue 39, item 8 (`interval_ms = 18446744073709551615` said "u64 value was too
// large" and nothing of where).
#[test]
fn daemon_config_value_the_toml_parser_refuses_names_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tb.toml");
    let text = "[daemon]\nobserve = true\n\n[[rule]]\nname = \"a\"\ncomm = \"x\"\n\
                interval_ms = 18446744073709551615\n";
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();
    let out = run(&["daemon", "--config", path, "--oneshot", "--observe"]);
    assert_one_line_2(
        &out,
        &[&format!("{path}:7: rule #1: interval_ms: too large")],
    );
    std::fs::write(&file, "[daemon]\nsample_ms = 18446744073709551615\n").unwrap();
    let out = run(&["daemon", "--config", path, "--oneshot", "--observe"]);
    assert_one_line_2(&out, &[&format!("{path}:2: daemon: sample_ms: too large")]);
}

// See: issue 39, item 8 (`compare --warmup 18446744073709551615` wrapped to 0 runs and
// exited 0).
#[test]
fn compare_run_counts_that_would_wrap_exit_2() {
    let out = run(&["compare", "--warmup", "18446744073709551615", "--", "true"]);
    assert_one_line_2(&out, &["--warmup", "0 to 10000"]);
    let out = run(&["compare", "--repeat", "10001", "--", "true"]);
    assert_one_line_2(&out, &["--repeat", "1 to 10000"]);
    let out = run(&["compare", "--repeat", "0", "--", "true"]);
    assert_one_line_2(&out, &["--repeat"]);
}

// See: issue 39, item 8 (a missing or FIFO `.toml` was "an unknown workload").
#[test]
fn sim_scenario_file_missing_or_not_a_file_is_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.toml");
    let out = run(&["sim", "--workload", missing.to_str().unwrap()]);
    assert_one_line_2(&out, &["missing.toml", "no such file"]);
    let fifo = dir.path().join("fifo.toml");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let out = run(&["sim", "--workload", fifo.to_str().unwrap()]);
    assert_one_line_2(&out, &["fifo.toml", "not a regular file"]);
    let out = run(&["sim", "--workload", dir.path().to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a directory without .toml: unknown"
    );
}
