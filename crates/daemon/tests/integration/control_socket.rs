//! The control socket on a temporary directory with a fake daemon behind it: modes, stale
//! and foreign files at the path, peer credentials, malformed and oversized input, and the
//! client `threadbalance ctl` will use.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use threadbalance_daemon::control::socket::{ControlServer, SocketError, check_peer, request};
use threadbalance_daemon::control::threads::{ThreadInput, ThreadsView};
use threadbalance_daemon::control::{
    Control, Done, MAX_REQUEST_BYTES, ProcessEntry, Refusal, Reply, Request, Response, Status,
};
use threadbalance_daemon::{ConfigError, ReloadError};
use threadbalance_model::{Level, Pid, Topology};

/// A daemon that manages pid 100 (ffmpeg) and records what it was asked.
#[derive(Default)]
struct FakeDaemon {
    calls: Mutex<Vec<String>>,
    paused: Mutex<bool>,
}

impl FakeDaemon {
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
    fn known(&self, what: &str, pid: Pid) -> Result<(), Refusal> {
        self.calls.lock().unwrap().push(format!("{what} {pid}"));
        if pid == Pid(100) {
            Ok(())
        } else {
            Err(Refusal::NotManaged(pid))
        }
    }
}

impl Control for FakeDaemon {
    fn status(&self) -> Status {
        self.calls.lock().unwrap().push("status".into());
        Status {
            daemon_pid: std::process::id() as i32,
            uptime_s: 60,
            config: "threadbalance.toml: 1 rule".into(),
            observe: false,
            managed_processes: 1,
            groups: 1,
            managed_threads: 3,
            paused_processes: u64::from(*self.paused.lock().unwrap()),
        }
    }
    fn list(&self) -> Vec<ProcessEntry> {
        self.calls.lock().unwrap().push("list".into());
        vec![ProcessEntry {
            pid: 100,
            comm: "ffmpeg".into(),
            rule: "busy".into(),
            policy: "speed".into(),
            threads: 3,
            paused: *self.paused.lock().unwrap(),
            group: 1,
        }]
    }
    fn pause(&self, pid: Pid) -> Result<Done, Refusal> {
        self.known("pause", pid)?;
        *self.paused.lock().unwrap() = true;
        Ok(Done::Paused {
            pid,
            comm: "ffmpeg".into(),
        })
    }
    fn resume(&self, pid: Pid) -> Result<Done, Refusal> {
        self.known("resume", pid)?;
        *self.paused.lock().unwrap() = false;
        Ok(Done::Resumed {
            pid,
            comm: "ffmpeg".into(),
        })
    }
    fn release(&self, pid: Pid) -> Result<Done, Refusal> {
        self.known("release", pid)?;
        Ok(Done::Released {
            pid,
            comm: "ffmpeg".into(),
            restored: "3 masks restored".into(),
        })
    }
    fn reload(&self) -> Result<Done, Refusal> {
        self.calls.lock().unwrap().push("reload".into());
        Err(Refusal::Reload(ReloadError::Config(ConfigError {
            file: "t.toml".into(),
            line: Some(2),
            key: "rule \"x\"".into(),
            why: "nope".into(),
        })))
    }
    fn threads(&self, _window_ms: u64) -> ThreadsView {
        self.calls.lock().unwrap().push("threads".into());
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let mut t = ThreadInput::example(100, 101, 2);
        (t.util, t.speed, t.moves) = (0.8, 0.8, 3);
        ThreadsView::build(&topo, Level::Package, 1000, vec![t])
    }
}

const T: Duration = Duration::from_secs(10);

fn start(
    dir: &Path,
) -> (
    Arc<FakeDaemon>,
    threadbalance_daemon::control::socket::ServerThread,
) {
    let fake = Arc::new(FakeDaemon::default());
    let server = ControlServer::bind(&dir.join("run/control.sock")).unwrap();
    let thread = server
        .spawn(fake.clone(), |e| eprintln!("control: {e}"))
        .unwrap();
    (fake, thread)
}

/// Sends raw bytes and returns every answer line.
fn raw(path: &Path, bytes: &[u8]) -> Vec<String> {
    let mut s = UnixStream::connect(path).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    s.write_all(bytes).unwrap();
    s.shutdown(std::net::Shutdown::Write).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out.lines().map(str::to_string).collect()
}

#[test]
fn control_socket_bind_makes_0700_dir_and_0600_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run/control.sock");
    let server = ControlServer::bind(&path).unwrap();
    let dir_mode = std::fs::metadata(tmp.path().join("run"))
        .unwrap()
        .permissions()
        .mode();
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(dir_mode & 0o7777, 0o700);
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
    assert!(meta.file_type().is_socket());
    drop(server);
    assert!(!path.exists(), "the socket is removed when the server goes");
}

#[test]
fn control_socket_every_request_answered_through_client() {
    let tmp = tempfile::tempdir().unwrap();
    let (fake, server) = start(tmp.path());
    let path = tmp.path().join("run/control.sock");
    let status = request(&path, &Request::Status, T).unwrap();
    let Reply::Status(s) = status.reply else {
        panic!("{status:?}")
    };
    assert_eq!((s.managed_processes, s.managed_threads), (1, 3));
    let r = request(&path, &Request::Pause { pid: Pid(100) }, T).unwrap();
    assert_eq!(
        r.reply,
        Reply::Done {
            message: "paused 100 (ffmpeg)".into()
        }
    );
    let Reply::List { processes, .. } = request(&path, &Request::List { all: false }, T)
        .unwrap()
        .reply
    else {
        panic!()
    };
    assert!(processes[0].paused);
    let r = request(&path, &Request::Release { pid: Pid(7) }, T).unwrap();
    assert_eq!(
        r.reply,
        Reply::Error {
            message: "process 7 is not managed".into()
        }
    );
    request(&path, &Request::Resume { pid: Pid(100) }, T).unwrap();
    let r = request(&path, &Request::Reload, T).unwrap();
    assert_eq!(
        r.reply,
        Reply::Error {
            message: "reload rejected, keeping the running config: t.toml:2: rule \"x\": nope"
                .into()
        }
    );
    let Reply::Threads(view) = request(&path, &Request::Threads { window_ms: 1000 }, T)
        .unwrap()
        .reply
    else {
        panic!()
    };
    // Thread 101 last ran on CPU 2, in package 1 (CPUs 2-3): 0.8 / 2 CPUs = 0.4.
    assert_eq!(view.threads[0].domain, Some(1));
    assert_eq!(view.domains[1].util, 0.4);
    assert_eq!(view.threads[0].moves, 3);
    server.stop();
    assert_eq!(
        fake.calls(),
        [
            "status",
            "pause 100",
            "list",
            "release 7",
            "resume 100",
            "reload",
            "threads"
        ]
    );
    assert!(!path.exists());
}

#[test]
fn control_socket_malformed_lines_get_errors_and_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (fake, server) = start(tmp.path());
    let path = tmp.path().join("run/control.sock");
    // Three lines on one connection: garbage, a bad pid, then a good request.
    let answers = raw(
        &path,
        b"\x00\xffgarbage\n{\"version\":1,\"request\":\"pause\",\"pid\":0}\n{\"version\":1,\"request\":\"list\"}\n",
    );
    assert_eq!(answers.len(), 3, "{answers:?}");
    let parsed: Vec<Response> = answers
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(parsed[0], Response::error("bad request: not UTF-8"));
    assert_eq!(
        parsed[1],
        Response::error("bad request: pid 0 is not a process id (1 or more)")
    );
    assert!(matches!(parsed[2].reply, Reply::List { .. }));
    server.stop();
    assert_eq!(fake.calls(), ["list"]);
}

#[test]
fn control_socket_oversized_line_one_error_then_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let (fake, server) = start(tmp.path());
    let path = tmp.path().join("run/control.sock");
    let mut big = vec![b'x'; MAX_REQUEST_BYTES + 10];
    big.extend_from_slice(b"\n{\"version\":1,\"request\":\"reload\"}\n");
    let answers = raw(&path, &big);
    assert_eq!(
        answers,
        [Response::error("bad request: longer than 4096 bytes").to_line()]
    );
    server.stop();
    assert!(
        fake.calls().is_empty(),
        "the reload after it was never read"
    );
}

#[test]
fn control_socket_silent_client_is_dropped_at_its_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    let fake = Arc::new(FakeDaemon::default());
    let path = tmp.path().join("run/control.sock");
    let server = ControlServer::bind(&path)
        .unwrap()
        .with_deadline(Duration::from_millis(200));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let thread = server
        .spawn(fake.clone(), move |e| {
            seen.lock().unwrap().push(e.to_string())
        })
        .unwrap();
    // A client that connects and says nothing: the server closes it, then serves the next.
    let mut silent = UnixStream::connect(&path).unwrap();
    silent.set_read_timeout(Some(T)).unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        silent.read_to_end(&mut buf).unwrap(),
        0,
        "closed without an answer"
    );
    let r = request(&path, &Request::Status, T).unwrap();
    assert!(matches!(r.reply, Reply::Status(_)));
    thread.stop();
    let errors = errors.lock().unwrap();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("control socket "), "{errors:?}");
}

#[test]
fn check_peer_other_uid_refused_root_and_own_allowed() {
    // A fabricated peer: uid 1000 against a daemon running as uid 998.
    let e = check_peer(1000, 998).unwrap_err();
    assert!(matches!(
        e,
        SocketError::Refused {
            uid: 1000,
            own: 998
        }
    ));
    assert_eq!(
        e.to_string(),
        "control socket: refused uid 1000: only root and the daemon's uid 998 may control it"
    );
    check_peer(0, 998).unwrap();
    check_peer(998, 998).unwrap();
    check_peer(0, 0).unwrap();
    assert!(
        check_peer(65534, 0).is_err(),
        "nobody against a root daemon"
    );
}

#[test]
fn control_socket_bind_refuses_a_regular_file_and_keeps_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("control.sock");
    std::fs::write(&path, "precious").unwrap();
    let e = ControlServer::bind(&path).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "control socket {}: something that is not a socket is there; not removing it",
            path.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
}

#[test]
fn control_socket_bind_refuses_a_symlink_and_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = dir.join("link.sock");
    std::os::unix::fs::symlink(tmp.path().join("elsewhere"), &link).unwrap();
    assert!(matches!(
        ControlServer::bind(&link).unwrap_err(),
        SocketError::NotSocket(_)
    ));
    assert!(
        std::fs::symlink_metadata(&link).is_ok(),
        "the symlink is kept"
    );
    let sub = dir.join("sub.sock");
    std::fs::create_dir(&sub).unwrap();
    assert!(matches!(
        ControlServer::bind(&sub).unwrap_err(),
        SocketError::NotSocket(_)
    ));
}

#[test]
fn control_socket_bind_replaces_a_stale_socket_but_not_a_live_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = dir.join("control.sock");
    // Live: a listener is still there.
    let live = UnixListener::bind(&path).unwrap();
    assert!(matches!(
        ControlServer::bind(&path).unwrap_err(),
        SocketError::InUse(_)
    ));
    // Stale: the listener is gone but its file stays, as after a crash.
    drop(live);
    assert!(path.exists());
    let server = ControlServer::bind(&path).unwrap();
    let fake = Arc::new(FakeDaemon::default());
    let t = server.spawn(fake, |_| {}).unwrap();
    assert!(request(&path, &Request::Status, T).is_ok());
    t.stop();
}

#[test]
fn control_socket_bind_refuses_a_dir_others_can_write() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("run");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = ControlServer::bind(&dir.join("control.sock")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "control socket directory {}: mode 777 lets others write in it (want 0700)",
            dir.display()
        )
    );
    assert!(!dir.join("control.sock").exists());
}

#[test]
fn client_no_daemon_is_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("none.sock");
    let e = request(&path, &Request::Status, T).unwrap_err().to_string();
    assert!(e.starts_with(&format!("cannot reach the daemon at {}: ", path.display())));
    assert!(!e.contains('\n'));
}

#[test]
fn client_answer_of_another_version_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("v2.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let peer = std::thread::spawn(move || {
        let (s, _) = listener.accept().unwrap();
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line).unwrap();
        writeln!(&s, r#"{{"version":2,"response":"done","message":"ok"}}"#).unwrap();
        line
    });
    let e = request(&path, &Request::Reload, T).unwrap_err().to_string();
    assert_eq!(
        e,
        "the daemon's answer is not understood: the daemon speaks version 2, this client 1"
    );
    assert_eq!(
        peer.join().unwrap(),
        "{\"version\":1,\"request\":\"reload\"}\n"
    );
}

#[test]
fn control_socket_other_uid_refused_by_the_server() {
    assert!(
        nix::unistd::geteuid().is_root(),
        "this test runs as root (as CI does): it connects as uid 65534 to see the server refuse it"
    );
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = tmp.path().join("run/control.sock");
    let fake = Arc::new(FakeDaemon::default());
    let errors = Arc::new(Mutex::new(Vec::new()));
    let seen = errors.clone();
    let server = ControlServer::bind(&path)
        .unwrap()
        .spawn(fake.clone(), move |e| {
            seen.lock().unwrap().push(e.to_string())
        })
        .unwrap();
    // Loosen the directory and the socket by hand, as a misconfigured host might, so that
    // only the peer-credential check stands between another user and the daemon.
    std::fs::set_permissions(
        tmp.path().join("run"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
    // The client is this test binary again, run as nobody (uid 65534) with a filter that
    // selects only `peer_helper_sends_status`.
    let helper = tmp.path().join("helper");
    std::fs::copy(std::env::current_exe().unwrap(), &helper).unwrap();
    std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = std::os::unix::process::CommandExt::uid(
        std::process::Command::new(&helper)
            .args([
                "--exact",
                "control_socket::peer_helper_sends_status",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("THREADBALANCE_TEST_PEER_SOCKET", &path)
            .current_dir(tmp.path()),
        65534,
    )
    .output()
    .unwrap();
    server.stop();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = stdout
        .lines()
        .find_map(|l| l.split_once("ANSWER ").map(|(_, a)| a))
        .unwrap_or_else(|| panic!("the helper printed no answer:\n{stdout}"));
    assert_eq!(
        answer,
        Response::error(
            "control socket: refused uid 65534: only root and the daemon's uid 0 may control it"
        )
        .to_line()
    );
    assert!(fake.calls().is_empty(), "the daemon was never asked");
    assert_eq!(
        *errors.lock().unwrap(),
        ["control socket: refused uid 65534: only root and the daemon's uid 0 may control it"]
    );
}

/// The client side of `control_socket_other_uid_refused_by_the_server`, which runs it as
/// another user; on its own (no socket named) it does nothing.
#[test]
#[ignore = "run by control_socket_other_uid_refused_by_the_server as another user"]
fn peer_helper_sends_status() {
    let Some(path) = std::env::var_os("THREADBALANCE_TEST_PEER_SOCKET") else {
        return;
    };
    let r = request(Path::new(&path), &Request::Status, T).unwrap();
    println!("ANSWER {}", r.to_line());
}

#[test]
fn control_socket_with_channel_control_the_loop_answers_changes() {
    use threadbalance_daemon::control::channel::{Command, Snapshot, channel};
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("run/control.sock");
    let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(4));
    let mut snapshot = Snapshot::default();
    snapshot.status.managed_threads = 5;
    inbox.publish(snapshot);
    let server = ControlServer::bind(&path)
        .unwrap()
        .spawn(Arc::new(control), |e| eprintln!("control: {e}"))
        .unwrap();
    // The daemon's loop: waits for a command instead of sleeping, carries it out, answers.
    let the_loop = std::thread::spawn(move || {
        let pending = inbox.wait(T).unwrap();
        let command = pending.command;
        pending.answer(Ok(Done::Released {
            pid: Pid(4242),
            comm: "ffmpeg".into(),
            restored: "3 masks restored".into(),
        }));
        command
    });
    let Reply::Status(s) = request(&path, &Request::Status, T).unwrap().reply else {
        panic!()
    };
    assert_eq!(s.managed_threads, 5);
    let r = request(&path, &Request::Release { pid: Pid(4242) }, T).unwrap();
    assert_eq!(r.render().0, "released 4242 (ffmpeg): 3 masks restored\n");
    assert_eq!(the_loop.join().unwrap(), Command::Release(Pid(4242)));
    server.stop();
}
