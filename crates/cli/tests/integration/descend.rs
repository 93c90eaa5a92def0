//! Live: the processes a command (or an attached process) starts are managed with it, as
//! one application. See: issue 39 item 7.
//!
//! Each worker is `threadbalance workload spmd`: a main thread and N workers, which a
//! managed tree shows as N + 1 threads in one more process. `speed` is the policy: it
//! allows a thread's `stat` to be a second old, which is what hid a shell's fork when its
//! `children` file was read only with `stat`.

use crate::support::*;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// The summary JSON a finished run wrote to `path`.
fn summary(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The `spmd` workload with `threads` workers and `work_ms` of work in all, as a shell word.
fn spmd(threads: u32, work_ms: u32) -> String {
    format!(
        "{} workload spmd --threads {threads} --work-ms {work_ms} >/dev/null",
        bin().display()
    )
}

#[test]
fn live_run_manages_the_worker_a_shell_starts_after_its_first_read() {
    // The shell is read at the first tick, sleeps, then starts the worker and waits: the
    // worker's 4 threads (main and 3 workers) are managed with the shell's, in one
    // summary: at least 5 threads (shell, sleep, worker) in 2 processes or more. Before,
    // the shell's `stat` was still fresh when it forked, its `children` not read again,
    // and the run managed the shell and its sleep alone (2 threads).
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let script = format!("sleep 0.3; {}; true", spmd(3, 1200));
    let out = Command::new(bin())
        .args(["run", "--policy", "speed", "--level", "core", "--json"])
        .arg(&json)
        .args(["--state-dir", dir.path().to_str().unwrap()])
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let v = summary(&json);
    assert!(v["threads_seen"].as_u64().unwrap() >= 5, "{v}");
    assert!(v["processes_seen"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(v["unrestored"], 0, "{v}");
    let text = String::from_utf8_lossy(&out.stderr);
    let said = format!("in {} processes", v["processes_seen"]);
    assert!(text.contains(&said), "{said:?} in {text}");
}

#[test]
fn live_run_manages_an_orphan_of_its_command_and_restores_it() {
    // A subshell starts the worker and exits at once (`(worker &)`): the worker is
    // re-parented to `run`, the command's subreaper, out of the command's tree. It is
    // still managed (at least 8 threads seen: the worker's 7 and the shell's; without the
    // worker, the shell, the subshell and their sleeps are 4 at most), and its masks are back to what they were when `run` ends with
    // the command, while the worker still runs. Before, the worker was never seen.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let script = format!("(sleep 0.2; {} & echo $!); sleep 1.5", spmd(6, 8000));
    let out = Command::new(bin())
        .args(["run", "--policy", "speed", "--level", "core", "--json"])
        .arg(&json)
        .args(["--state-dir", dir.path().to_str().unwrap()])
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let worker: Option<u32> = String::from_utf8_lossy(&out.stdout).trim().parse().ok();
    let after = worker.map(masks).unwrap_or_default();
    if let Some(w) = worker {
        signal(w, libc::SIGKILL);
    }
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(worker.is_some(), "the subshell printed the worker's pid");
    assert_eq!(
        after.len(),
        7,
        "the worker still ran when run ended: {after:?}"
    );
    let online = online();
    assert!(after.iter().all(|(_, _, m)| *m == online), "{after:?}");
    let v = summary(&json);
    assert!(v["threads_seen"].as_u64().unwrap() >= 8, "{v}");
    assert!(v["processes_seen"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(v["unrestored"], 0, "{v}");
}

/// Whether process `tb` holds the `children` file of thread `pid` of process `pid` open:
/// the sampler opens it at its first read of that thread, and keeps it.
fn read_children(tb: u32, pid: u32) -> bool {
    let want = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_dir(format!("/proc/{tb}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .any(|l| l.to_string_lossy() == want)
}

#[test]
fn live_attach_manages_a_worker_the_shell_starts_later() {
    // Attached to a shell waiting for a line, which then starts the worker: the worker's
    // 4 threads are managed with the shell's, and attach ends when the shell does, with
    // every mask restored. Before, the shell was never listed again once read (6 of 6).
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let script = format!("read line; {}; true", spmd(3, 1200));
    let mut sh = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = sh.id();
    let (pid_s, json_s) = (pid.to_string(), json.to_str().unwrap().to_string());
    let mut tb = Command::new(bin())
        .args([
            "attach", "--pid", &pid_s, "--policy", "speed", "--level", "core",
        ])
        .args([
            "--json",
            &json_s,
            "--state-dir",
            dir.path().to_str().unwrap(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The line goes as soon as the shell has been sampled (its `children` listed, empty),
    // well within the second its `stat` stays fresh.
    let read = wait_for(LIMIT, || read_children(tb.id(), pid).then_some(()));
    let mut stdin = sh.stdin.take().unwrap();
    let _ = writeln!(stdin, "go");
    drop(stdin);
    let shell = finish_child(&mut sh);
    let code = finish(&mut tb, LIMIT);
    assert!(read.is_some(), "attach read the shell");
    assert_eq!(shell, Some(0));
    assert_eq!(code, 0);
    let v = summary(&json);
    assert!(v["threads_seen"].as_u64().unwrap() >= 5, "{v}");
    assert!(v["processes_seen"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(v["unrestored"], 0, "{v}");
}

/// Waits for a child this test started, killing it after [`LIMIT`]; its exit code.
fn finish_child(child: &mut std::process::Child) -> Option<i32> {
    let done = wait_for(LIMIT, || child.try_wait().ok().flatten());
    if done.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    done.and_then(|st| st.code())
}
