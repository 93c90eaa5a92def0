//! Live tests of `threadbalance daemon` and `threadbalance ctl` on this machine.
//!
//! Each test writes a config into a temporary directory (state directory, control socket
//! and metrics on port 0 there, so tests never share anything) whose rule matches only the
//! workload the test started, by a command line no other test uses. Every process started
//! here is stopped by pid from a guard, also when an assertion fails; every mask changed is
//! put back by the daemon (checked) or goes with the workload when it is stopped. The waits
//! are bounds, never measurements.

use crate::support::{bin, signal, wait_for, worker_masks};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The bound on every wait.
pub(crate) const LIMIT: Duration = Duration::from_secs(60);

/// A process started by a test, stopped by pid when dropped.
pub(crate) struct Started(pub(crate) Child);

impl Drop for Started {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// `threadbalance workload spmd` (three workers) whose command line ends in `--work-ms
/// {tag}`: a long run (hours of work) that only this test's rule matches.
pub(crate) fn spmd(tag: u32) -> Started {
    let child = Command::new(bin())
        .args(["workload", "spmd", "--work-ms", &tag.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawns the workload");
    let w = Started(child);
    let pid = w.0.id();
    wait_for(LIMIT, || {
        (worker_masks(pid, "spmd").len() == 3).then_some(())
    })
    .expect("the workload's three workers start");
    w
}

/// A running daemon, its stderr collected line by line; SIGTERM then wait when dropped
/// (SIGKILL after the bound).
pub(crate) struct Daemon {
    pub(crate) child: Option<Child>,
    lines: Arc<Mutex<Vec<String>>>,
    socket: PathBuf,
}

impl Daemon {
    pub(crate) fn start(config: &Path, extra: &[&str], socket: PathBuf) -> Daemon {
        let mut child = Command::new(bin())
            .arg("daemon")
            .arg("--config")
            .arg(config)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawns the daemon");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let stderr = child.stderr.take().expect("stderr piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon {
            child: Some(child),
            lines,
            socket,
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Waits for a log line containing `text`, and returns it.
    pub(crate) fn wait_line(&self, text: &str) -> String {
        wait_for(LIMIT, || {
            self.lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(text))
                .cloned()
        })
        .unwrap_or_else(|| panic!("no log line with {text:?} in {:#?}", self.log()))
    }

    pub(crate) fn log(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub(crate) fn ctl(&self, args: &[&str]) -> Output {
        Command::new(bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("runs ctl")
    }

    /// Waits until `ctl list` (exit 0) shows each pid with its rule; returns the listing.
    pub(crate) fn wait_listed(&self, want: &[(u32, &str)]) -> String {
        wait_for(LIMIT, || {
            let out = self.ctl(&["list"]);
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let all = want.iter().all(|(pid, rule)| {
                text.lines().any(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    f.first() == Some(&pid.to_string().as_str()) && f.get(2) == Some(rule)
                })
            });
            (out.status.code() == Some(0) && all).then_some(text)
        })
        .unwrap_or_else(|| panic!("ctl list never showed {want:?}; log {:#?}", self.log()))
    }

    /// SIGTERM, then the exit code.
    pub(crate) fn stop(mut self) -> i32 {
        let mut child = self.child.take().expect("running");
        signal(child.id(), libc::SIGTERM);
        crate::support::finish(&mut child, LIMIT)
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(child.id(), libc::SIGTERM);
            if wait_for(LIMIT, || child.try_wait().ok().flatten()).is_none() {
                let _ = child.kill();
            }
            let _ = child.wait();
        }
    }
}

/// A config in `dir` managing, under `speed`, the `spmd` workload tagged `tag`.
pub(crate) fn config(dir: &Path, tag: u32, metrics: &str) -> PathBuf {
    let path = dir.join("threadbalance.toml");
    std::fs::write(&path, config_text(dir, tag, metrics)).unwrap();
    path
}

pub(crate) fn config_text(dir: &Path, tag: u32, metrics: &str) -> String {
    format!(
        r#"[daemon]
metrics = "{metrics}"
control_socket = "{}/run/control.sock"
state_dir = "{}/state"
sample_ms = 200

[[rule]]
name = "test-spmd"
comm = "^threadbalance$"
cmdline = "workload spmd --work-ms {tag}$"
policy = "speed"
"#,
        dir.display(),
        dir.display()
    )
}

/// A second rule, `test-spmd-b`, under `speed` for the `spmd` workload tagged `tag`, with
/// `lines` more (such as `level = "core"\n`); appended to [`config_text`]'s.
pub(crate) fn second_rule(tag: u32, lines: &str) -> String {
    format!(
        "\n[[rule]]\nname = \"test-spmd-b\"\ncmdline = \"workload spmd --work-ms {tag}$\"\npolicy = \"speed\"\n{lines}"
    )
}

/// An `spmd` workload started by [`spmd`], its pid, and its workers' masks before any
/// daemon touched them.
pub(crate) struct Tagged {
    /// Held so that the workload is stopped when this is dropped.
    _workload: Started,
    pub(crate) pid: u32,
    pub(crate) before: Vec<(usize, String)>,
}

/// Starts the workload tagged `tag` and notes its masks.
pub(crate) fn tagged(tag: u32) -> Tagged {
    let workload = spmd(tag);
    let pid = workload.0.id();
    let before = worker_masks(pid, "spmd");
    Tagged {
        _workload: workload,
        pid,
        before,
    }
}

pub(crate) fn socket(dir: &Path) -> PathBuf {
    dir.join("run/control.sock")
}

/// Waits until some worker of `pid` has a mask other than `before`'s.
pub(crate) fn wait_changed(pid: u32, before: &[(usize, String)]) {
    wait_for(LIMIT, || {
        let now = worker_masks(pid, "spmd");
        (now.len() == before.len() && now != before).then_some(())
    })
    .unwrap_or_else(|| panic!("the daemon never changed a mask of {pid}: {before:?}"));
}

/// `GET /metrics` on `addr`, the body.
pub(crate) fn scrape(addr: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connects to the metrics port");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text
}

#[test]
fn daemon_matches_a_started_workload_lists_releases_and_restores_at_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (tag_a, tag_b) = (3_600_101, 3_600_102);
    let path = dir.path().join("threadbalance.toml");
    // Two rules: one workload to release through ctl, one for SIGTERM to restore.
    let text = config_text(dir.path(), tag_a, "127.0.0.1:0") + &second_rule(tag_b, "");
    std::fs::write(&path, text).unwrap();
    let (a, b) = (tagged(tag_a), tagged(tag_b));
    let (pa, pb) = (a.pid, b.pid);
    let (before_a, before_b) = (a.before.clone(), b.before.clone());
    let d = Daemon::start(&path, &[], socket(dir.path()));
    wait_changed(pa, &before_a);
    wait_changed(pb, &before_b);

    // `list` answers what the loop published last, which may be a moment behind the masks.
    let list = d.wait_listed(&[(pa, "test-spmd"), (pb, "test-spmd-b")]);
    assert!(list.contains("managed"), "{list}");
    let status = d.ctl(&["status"]);
    assert_eq!(status.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&status.stdout).contains("managed: 2 processes"));

    // The metrics endpoint, at the address the daemon logged.
    let line = d.wait_line("metrics on http://");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .expect("address in the line");
    let body = scrape(addr);
    assert!(body.contains("threadbalance_managed_processes 2"), "{body}");
    assert!(body.contains("threadbalance_moves_total{reason="), "{body}");
    assert!(
        body.contains("threadbalance_domain_utilization_ratio{domain="),
        "{body}"
    );

    // Released through ctl: its masks are back when the answer comes, and it stays alone.
    let released = d.ctl(&["release", &pa.to_string()]);
    assert_eq!(
        released.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&released.stderr)
    );
    assert!(String::from_utf8_lossy(&released.stdout).contains("0 could not be restored"));
    assert_eq!(worker_masks(pa, "spmd"), before_a);
    let again = d.ctl(&["release", &pa.to_string()]);
    assert_eq!(again.status.code(), Some(1), "releasing twice is refused");
    let list = d.ctl(&["list"]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&format!("{pa} ")));

    // SIGTERM restores the other one, and the daemon exits 0, its socket gone.
    assert_eq!(d.stop(), 0);
    assert_eq!(worker_masks(pb, "spmd"), before_b);
    assert_eq!(worker_masks(pa, "spmd"), before_a);
    assert!(!socket(dir.path()).exists());
    let left: Vec<_> = std::fs::read_dir(dir.path().join("state"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "state left behind: {left:?}");
}

#[test]
fn daemon_bad_config_exits_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[daemon]\nsample_ms = 0\n").unwrap();
    let out = Command::new(bin())
        .arg("daemon")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad.toml:2") && err.contains("sample_ms"),
        "{err}"
    );
    // Nothing was created: no state directory, no socket.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn daemon_sighup_with_a_bad_file_keeps_the_running_config() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_103;
    let path = config(dir.path(), tag, "off");
    let w = spmd(tag);
    let pid = w.0.id();
    let before = worker_masks(pid, "spmd");
    let d = Daemon::start(&path, &[], socket(dir.path()));
    wait_changed(pid, &before);

    std::fs::write(
        &path,
        "[[rule]]\nname = \"x\"\npolicy = \"no-such-policy\"\n",
    )
    .unwrap();
    signal(d.pid(), libc::SIGHUP);
    let line = d.wait_line("reload rejected, keeping the running config");
    assert!(line.contains("no-such-policy"), "{line}");
    // The same through ctl: refused, exit 1, one line.
    let out = d.ctl(&["reload"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    // Still running with the old rule, still managing the workload.
    let status = String::from_utf8_lossy(&d.ctl(&["status"]).stdout).into_owned();
    assert!(status.contains("test-spmd"), "{status}");
    d.wait_listed(&[(pid, "test-spmd")]);

    assert_eq!(d.stop(), 0);
    assert_eq!(worker_masks(pid, "spmd"), before);
}

// See: issue 39, item 4: a FIFO at the config's path hung the reload, and SIGTERM with it.
#[test]
fn daemon_config_replaced_by_a_fifo_reload_rejected_and_signals_still_answered() {
    let dir = tempfile::tempdir().unwrap();
    // A rule matching no process: nothing is managed, nothing to put back.
    let path = config(dir.path(), 3_600_197, "off");
    let d = Daemon::start(&path, &[], socket(dir.path()));
    d.wait_line("started:");
    std::fs::remove_file(&path).unwrap();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    signal(d.pid(), libc::SIGHUP);
    let line = d.wait_line("reload rejected, keeping the running config");
    assert!(line.contains("FIFO"), "{line}");
    let out = d.ctl(&["reload"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("FIFO"));
    let status = String::from_utf8_lossy(&d.ctl(&["status"]).stdout).into_owned();
    assert!(status.contains("test-spmd"), "{status}");
    assert_eq!(d.stop(), 0);
}

// See: issue 39, item 2: a state directory others can write is refused at start.
#[test]
fn daemon_state_dir_others_can_write_exits_2_with_one_line() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = config(dir.path(), 3_600_198, "off");
    let state = dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = Command::new(bin())
        .arg("daemon")
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("state directory") && err.contains("lets others write in it"),
        "{err}"
    );
}

#[test]
fn daemon_oneshot_places_once_and_exits() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_104;
    let path = config(dir.path(), tag, "off");
    let w = spmd(tag);
    let pid = w.0.id();
    let before = worker_masks(pid, "spmd");
    let out = Command::new(bin())
        .arg("daemon")
        .arg("--config")
        .arg(&path)
        .arg("--oneshot")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("one-shot: 1 process(es) placed"), "{err}");
    // The placement stays after the daemon has gone (as irqbalance --oneshot leaves its
    // IRQs); the workload, and its masks with it, end when the guard stops it.
    let after = worker_masks(pid, "spmd");
    assert_eq!(after.len(), before.len());
    assert_ne!(after, before, "a one-shot placement changed no mask");
    assert!(
        !socket(dir.path()).exists(),
        "a one-shot run opens no socket"
    );
    drop(w);
}

#[test]
fn daemon_observe_decides_but_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_105;
    let path = config(dir.path(), tag, "off");
    let w = spmd(tag);
    let pid = w.0.id();
    let before = worker_masks(pid, "spmd");
    let d = Daemon::start(
        &path,
        &["--observe", "--log-level", "debug"],
        socket(dir.path()),
    );
    d.wait_line(&format!("pid {pid} (threadbalance): managed by rule"));
    // Moves were decided (logged at debug level) …
    d.wait_line(&format!("move pid={pid}"));
    let status = String::from_utf8_lossy(&d.ctl(&["status"]).stdout).into_owned();
    assert!(status.contains("observing (changes nothing)"), "{status}");
    // … and none was made.
    assert_eq!(worker_masks(pid, "spmd"), before);
    assert_eq!(d.stop(), 0);
    assert_eq!(worker_masks(pid, "spmd"), before);
}

#[test]
fn ctl_without_a_daemon_exits_1_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .arg("ctl")
        .arg("--socket")
        .arg(dir.path().join("none.sock"))
        .arg("status")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot reach the daemon"), "{err}");
    let out = Command::new(bin())
        .args(["ctl", "pause", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "pid 0 is a bad argument");
}

/// Starts the workload tagged `tag` and a daemon managing it from a config in `dir`,
/// waits until the daemon changed a mask, and kills the daemon with SIGKILL (so it restores
/// nothing). Returns the workload and what is left of the daemon.
fn killed_after_a_change(dir: &Path, tag: u32) -> (Tagged, Daemon) {
    let path = config(dir, tag, "off");
    let w = tagged(tag);
    let mut d = Daemon::start(&path, &[], socket(dir));
    wait_changed(w.pid, &w.before);
    let mut child = d.child.take().expect("running");
    signal(child.id(), libc::SIGKILL);
    let _ = child.wait();
    (w, d)
}

#[test]
fn daemon_killed_leaves_journals_that_restore_puts_back() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_106;
    // SIGKILL: nothing is restored by the daemon; its per-process journal stays behind.
    let (w, _d) = killed_after_a_change(dir.path(), tag);
    let (pid, before) = (w.pid, w.before.clone());
    let journals: Vec<_> = std::fs::read_dir(dir.path().join("state"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("managed."))
        .collect();
    assert_eq!(
        journals.len(),
        1,
        "one journal directory per managed process"
    );
    let out = Command::new(bin())
        .arg("restore")
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 journal(s) replayed"), "{err}");
    assert_eq!(worker_masks(pid, "spmd"), before);
    assert!(
        !journals[0].path().exists(),
        "the replayed journal's directory is removed"
    );
}

#[test]
fn daemon_killed_then_restarted_replays_the_journals_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_107;
    let (w, d) = killed_after_a_change(dir.path(), tag);
    let (pid, before) = (w.pid, w.before.clone());
    let path = dir.path().join("threadbalance.toml");
    drop(d);
    // The restarted daemon's rule matches nothing (another tag), so what it does to the
    // workload is only the replay at start.
    std::fs::write(&path, config_text(dir.path(), tag + 1000, "off")).unwrap();
    let again = Daemon::start(&path, &[], socket(dir.path()));
    let line = again.wait_line("journal(s) left by instances that died");
    assert!(line.contains("0 could not be restored"), "{line}");
    again.wait_line("started:");
    assert_eq!(worker_masks(pid, "spmd"), before);
    assert_eq!(again.stop(), 0);
}

/// The values of `ctl --json ARGS`: one line of JSON on stdout, with its exit code.
fn ctl_json(d: &Daemon, args: &[&str]) -> (serde_json::Value, Option<i32>) {
    let out = d.ctl(&[&["--json"], args].concat());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(text.lines().count(), 1, "ctl --json {args:?}: {text:?}");
    let value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("ctl --json {args:?} is not JSON ({e}): {text}"));
    crate::support::assert_schema(&value, "control_response");
    (value, out.status.code())
}

// See: issue 40, item 5: the first `ctl threads` has rates over a window, `ctl --json`
// answers every subcommand as JSON, and what a rule almost matched is explained.
#[test]
fn daemon_explains_near_misses_ctl_threads_waits_for_a_window_and_ctl_speaks_json() {
    let dir = tempfile::tempdir().unwrap();
    let (tag, near_tag) = (3_600_111, 3_600_112);
    let path = dir.path().join("threadbalance.toml");
    // The near workload (a main thread and three workers: 4 threads) meets half of
    // min_threads = 8: almost matched, not managed.
    let near = format!(
        "\n[[rule]]\nname = \"test-near\"\ncmdline = \"workload spmd --work-ms {near_tag}$\"\nmin_threads = 8\npolicy = \"speed\"\n"
    );
    std::fs::write(&path, config_text(dir.path(), tag, "127.0.0.1:0") + &near).unwrap();
    let (a, n) = (tagged(tag), tagged(near_tag));
    let d = Daemon::start(&path, &[], socket(dir.path()));
    d.wait_listed(&[(a.pid, "test-spmd")]);

    // The first `threads` waits for a window of about the second asked for.
    let out = d.ctl(&["threads"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let window: u64 = text
        .lines()
        .next()
        .and_then(|l| l.split("window ").nth(1))
        .and_then(|r| r.strip_suffix(" ms"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no window in {text}"));
    assert!(window >= 750, "{text}");
    assert!(text.contains(&format!("\n  {} ", a.pid)), "{text}");

    // The near miss: one info line, and `list --all` says why.
    let line = d.wait_line(&format!("pid {} (threadbalance) not managed", n.pid));
    assert!(
        line.ends_with("rule \"test-near\" almost matched: 4 threads, the rule needs 8"),
        "{line}"
    );
    let all = d.ctl(&["list", "--all"]);
    let all = String::from_utf8_lossy(&all.stdout).into_owned();
    assert!(all.contains("not managed ("), "{all}");
    assert!(
        all.lines().any(
            |l| l.starts_with(&n.pid.to_string()) && l.ends_with("4 threads, the rule needs 8")
        ),
        "{all}"
    );

    // `--json` for every subcommand.
    let (v, code) = ctl_json(&d, &["status"]);
    assert_eq!(
        (v["response"].as_str(), code),
        (Some("status"), Some(0)),
        "{v}"
    );
    let (v, _) = ctl_json(&d, &["list"]);
    assert!(
        v["processes"].is_array() && v.get("candidates").is_none(),
        "{v}"
    );
    let (v, _) = ctl_json(&d, &["list", "--all"]);
    assert!(
        v["candidates"].as_array().is_some_and(|c| !c.is_empty()),
        "{v}"
    );
    let (v, _) = ctl_json(&d, &["threads", "--window-ms", "500"]);
    assert!(
        v["threads"].is_array() && v["window_ms"].as_u64().is_some(),
        "{v}"
    );
    let pid = a.pid.to_string();
    for (args, response, code) in [
        (vec!["pause", pid.as_str()], "done", 0),
        (vec!["resume", pid.as_str()], "done", 0),
        (vec!["resume", pid.as_str()], "error", 1),
        (vec!["reload"], "done", 0),
        (vec!["release", pid.as_str()], "done", 0),
    ] {
        let (v, got) = ctl_json(&d, &args);
        assert_eq!(
            (v["response"].as_str(), got),
            (Some(response), Some(code)),
            "{args:?}: {v}"
        );
    }
    assert_eq!(d.stop(), 0);
    assert_eq!(worker_masks(a.pid, "spmd"), a.before);
}
