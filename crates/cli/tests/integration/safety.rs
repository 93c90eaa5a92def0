//! Never leave a stranger pinned: every kind of stop, then the masks read back from
//! `/proc`. See: issue 11.
//!
//! The target is `threadbalance workload uneven` (four workers and a main thread) started
//! by the test; every instance under test gets a state directory of its own (a temporary
//! directory), so nothing here touches `/run/threadbalance`.

use crate::support::*;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A long-running workload whose five threads have started; killed when dropped.
struct Target {
    child: Child,
    before: Vec<(i32, String, String)>,
}

impl Target {
    fn start() -> Target {
        let child = Command::new(bin())
            .args(["workload", "uneven", "--duty", "1,1,0.5,0.25"])
            .args(["--period-ms", "10", "--periods", "100000"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        // Each worker names itself once it runs: wait for all four names, so that a name
        // set later never reads as a change.
        // The names are checked before the masks are read: read the other way round, a
        // thread could take its name in between.
        let before = wait_for(LIMIT, || {
            (worker_masks(pid, "uneven").len() == 4)
                .then(|| masks(pid))
                .filter(|m| m.len() == 5)
        })
        .expect("workload threads started");
        Target { child, before }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether some worker's mask differs from what it was at the start.
    fn changed(&self) -> bool {
        masks(self.pid()) != self.before
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn attach(pid: u32, state: &Path, extra: &[&str]) -> Child {
    let pid = pid.to_string();
    let mut args = vec![
        "attach",
        "--pid",
        &pid,
        "--policy",
        "pbind",
        "--level",
        "core",
        "--state-dir",
        state.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    spawn(&args)
}

/// Waits until the instance using `state` has journaled a change (so it is past
/// installing its signal handlers) and the target's masks show it.
fn wait_managed(t: &Target, state: &Path) -> bool {
    wait_for(LIMIT, || {
        let journaled = std::fs::read_dir(state)
            .ok()?
            .flatten()
            .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|text| text.contains("\nset ")));
        (journaled && t.changed()).then_some(())
    })
    .is_some()
}

/// Waits until an instance holds a lock under `state`.
fn wait_locked(state: &Path) -> bool {
    wait_for(LIMIT, || {
        let mut e = std::fs::read_dir(state).ok()?.flatten();
        e.any(|e| e.file_name().to_string_lossy().starts_with("lock."))
            .then_some(())
    })
    .is_some()
}

/// SIGKILLs instance `tb`, runs `restore` on `state`, and asserts it succeeded and that
/// every mask of `t` is as found (`what` names the round in the failure).
fn kill_then_restore(tb: &mut Child, t: &Target, state: &Path, what: &str) {
    signal(tb.id(), libc::SIGKILL);
    let _ = tb.wait();
    let out = restore(state);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(masks(t.pid()), t.before, "{what}: every mask restored");
}

fn restore(state: &Path) -> std::process::Output {
    run(&["restore", "--state-dir", state.to_str().unwrap()])
}

/// A small deterministic generator for the kill points (xorshift64).
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn live_sigkill_at_random_points_then_restore_leaves_no_mask_changed() {
    // 100 runs: SIGKILL anywhere from the first instant (before any journal exists) to
    // 150 ms after the instance first changes a mask (many moves made), then `restore`;
    // then 20 runs killed within 150 ms after the instance's first change. After each,
    // every mask must be as found.
    let t = Target::start();
    let dir = tempfile::tempdir().unwrap();
    // How long an instance takes to make its first change here: a build that loads BPF
    // counters first takes longer to start (tens of ms; more in a debug build on a busy
    // machine), and kill points that all fell before it would test only start-up.
    let started = std::time::Instant::now();
    let mut tb = attach(t.pid(), dir.path(), &["--interval", "1"]);
    let first_change = wait_for(LIMIT, || t.changed().then(|| started.elapsed()))
        .expect("the instance changed a mask");
    signal(tb.id(), libc::SIGKILL);
    let _ = tb.wait();
    assert_eq!(restore(dir.path()).status.code(), Some(0));
    assert_eq!(masks(t.pid()), t.before, "every mask restored");
    let window = first_change.as_millis() as u64 + 150;
    let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15);
    let mut changed_before_kill = 0;
    for round in 0..100 {
        let interval = ["1", "5", "20"][round % 3];
        let mut tb = attach(t.pid(), dir.path(), &["--interval", interval]);
        std::thread::sleep(Duration::from_millis(rng.next() % window));
        changed_before_kill += usize::from(t.changed());
        kill_then_restore(&mut tb, &t, dir.path(), &format!("round {round}"));
    }
    // Kills in the act, not only before management began: 20 more rounds, each killed
    // within 150 ms after the instance's first change. (These used to be hoped for among
    // the random points above, at least 20 of 100; but the window is the first instance's
    // start-up, and with other tests loading their BPF programs at the same time later
    // instances start slower: under two busy loops a run found too few.)
    for round in 0..20 {
        let interval = ["1", "5", "20"][round % 3];
        let mut tb = attach(t.pid(), dir.path(), &["--interval", interval]);
        let changed = wait_for(LIMIT, || t.changed().then_some(()));
        std::thread::sleep(Duration::from_millis(rng.next() % 150));
        kill_then_restore(
            &mut tb,
            &t,
            dir.path(),
            &format!("in-the-act round {round}"),
        );
        assert!(
            changed.is_some(),
            "round {round}: the instance changed no mask"
        );
    }
    eprintln!(
        "{changed_before_kill} of the 100 random kill points fell after a change \
         (first change after {first_change:?})"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "no journal left: {left:?}");
}

#[test]
fn live_sigkill_of_run_at_random_points_then_restore_leaves_no_mask_changed() {
    // `run` killed with its command still starting threads: the command lives on,
    // orphaned, and `restore` must put back its threads' masks, the ones moved and the
    // ones born of moved threads alike. Each command is killed afterwards.
    let dir = tempfile::tempdir().unwrap();
    let all = online();
    let mut rng = Xorshift(0x2545_F491_4F6C_DD1D);
    for round in 0..20 {
        let mut tb = spawn(&[
            "run",
            "--policy",
            "pbind",
            "--level",
            "core",
            "--state-dir",
            dir.path().to_str().unwrap(),
            "--",
            bin().to_str().unwrap(),
            "workload",
            "uneven",
            "--periods",
            "100000",
        ]);
        let child = wait_for(LIMIT, || child_of(tb.id())).expect("the command started");
        std::thread::sleep(Duration::from_millis(rng.next() % 100));
        signal(tb.id(), libc::SIGKILL);
        let _ = tb.wait();
        let out = restore(dir.path());
        let after = masks(child);
        signal(child, libc::SIGKILL);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let wrong: Vec<_> = after.iter().filter(|(_, _, m)| *m != all).collect();
        assert!(wrong.is_empty(), "round {round}: {wrong:?}");
    }
}

#[test]
fn live_new_instance_restores_a_stale_journal_before_it_starts() {
    let t = Target::start();
    let dir = tempfile::tempdir().unwrap();
    let mut tb = attach(t.pid(), dir.path(), &[]);
    assert!(wait_managed(&t, dir.path()));
    signal(tb.id(), libc::SIGKILL);
    let _ = tb.wait();
    assert!(t.changed(), "SIGKILL left the masks as set");
    // A dry run changes nothing itself, but first replays what the dead one left.
    let mut dry = attach(t.pid(), dir.path(), &["--dry-run"]);
    let restored = wait_for(LIMIT, || (!t.changed()).then_some(()));
    // Its lock is taken after its signal handlers are installed.
    assert!(wait_locked(dir.path()));
    signal(dry.id(), libc::SIGINT);
    assert_eq!(finish(&mut dry, LIMIT), 0);
    assert!(restored.is_some(), "the stale journal was replayed");
    assert_eq!(masks(t.pid()), t.before);
}

/// Attach, wait until masks changed, send `sig`, and expect a clean stop with every mask
/// back.
fn signal_restores(sig: i32) {
    let t = Target::start();
    let dir = tempfile::tempdir().unwrap();
    let mut tb = attach(t.pid(), dir.path(), &[]);
    let changed = wait_managed(&t, dir.path()).then_some(());
    signal(tb.id(), sig);
    let code = finish(&mut tb, LIMIT);
    assert!(changed.is_some(), "signal {sig}: masks were changed first");
    assert_eq!(code, 0, "signal {sig}: a clean stop");
    assert_eq!(
        masks(t.pid()),
        t.before,
        "signal {sig}: every mask restored"
    );
}

#[test]
fn live_every_catchable_fatal_signal_restores_like_sigterm() {
    for sig in [
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGHUP,
        libc::SIGRTMIN() + 2,
    ] {
        signal_restores(sig);
    }
}

#[test]
fn live_panic_in_the_loop_restores_every_mask() {
    let t = Target::start();
    let dir = tempfile::tempdir().unwrap();
    // pbind pins on its first tick; the panic comes on the third.
    let mut tb = attach(
        t.pid(),
        dir.path(),
        &["--interval", "50", "--fault-panic-after", "3"],
    );
    let code = finish(&mut tb, LIMIT);
    let mut stderr = String::new();
    use std::io::Read;
    tb.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("internal error (panic"), "{stderr}");
    assert_eq!(masks(t.pid()), t.before);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn live_second_instance_on_the_same_process_is_refused_with_exit_2() {
    let t = Target::start();
    let dir = tempfile::tempdir().unwrap();
    let mut first = attach(t.pid(), dir.path(), &[]);
    assert!(wait_managed(&t, dir.path()));
    let pid = t.pid().to_string();
    let out = run(&[
        "attach",
        "--pid",
        &pid,
        "--state-dir",
        dir.path().to_str().unwrap(),
    ]);
    signal(first.id(), libc::SIGINT);
    assert_eq!(finish(&mut first, LIMIT), 0);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("already managed"), "{stderr}");
    assert_eq!(masks(t.pid()), t.before);
}

fn refused(pid: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = run(&[
        "attach",
        "--pid",
        pid,
        "--state-dir",
        dir.path().to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{pid}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{pid}: {stderr}");
    stderr
}

#[test]
fn live_attach_refuses_init_kernel_threads_zombies_and_itself() {
    assert!(refused("1").contains("init"));
    // kthreadd is pid 2 on every Linux system.
    assert!(refused("2").contains("kernel thread"));
    let mut zombie = Command::new("true").spawn().unwrap();
    let zpid = zombie.id();
    assert!(
        wait_for(LIMIT, || {
            let stat = std::fs::read_to_string(format!("/proc/{zpid}/stat")).ok()?;
            stat.contains(") Z ").then_some(())
        })
        .is_some()
    );
    let text = refused(&zpid.to_string());
    let _ = zombie.wait();
    assert!(text.contains("zombie"), "{text}");
    assert!(!text.contains("% of one core"), "{text}");
    // Itself: a shell that execs threadbalance with its own pid.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} attach --pid $$ --state-dir {}",
            bin().display(),
            dir.path().display()
        ))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("itself"), "{stderr}");
}

#[test]
fn live_closed_or_full_output_never_panics_and_keeps_the_status() {
    // Closed pipes: the reading ends are dropped before the tool writes anything.
    let mut tb = Command::new(bin())
        .args([
            "run",
            "--policy",
            "tumbler",
            "--",
            "sh",
            "-c",
            "sleep 0.2; exit 7",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(tb.stdout.take());
    drop(tb.stderr.take());
    assert_eq!(finish(&mut tb, LIMIT), 7);
    // Full: every write fails with ENOSPC.
    let full = || Stdio::from(std::fs::File::create("/dev/full").unwrap());
    let out = Command::new(bin())
        .args(["run", "--policy", "tumbler", "--", "sh", "-c", "exit 5"])
        .stdout(full())
        .stderr(full())
        .status()
        .unwrap();
    assert_eq!(out.code(), Some(5));
    // Other commands too: a listing into a closed pipe.
    let mut topo = Command::new(bin())
        .args(["topo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(topo.stdout.take());
    assert_eq!(finish(&mut topo, LIMIT), 0);
}

#[test]
fn live_run_json_unwritable_is_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let out = run(&[
        "run",
        "--json",
        "/nonexistent-dir/summary.json",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--json"), "{stderr}");
    assert!(!marker.exists(), "the command never started");
}

#[test]
fn compare_bad_input_exits_2_like_run_and_sim() {
    for args in [
        &[
            "compare",
            "--policies",
            "none",
            "--",
            "/nonexistent-program",
        ][..],
        &[
            "compare",
            "--policies",
            "none",
            "--",
            "no-such-program-in-path",
        ][..],
        &["compare", "--interval", "0", "--", "true"][..],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
    }
}

#[test]
fn cpu_budget_outside_its_bounds_or_over_a_tool_that_costs_nothing_exits_2_in_one_line() {
    for args in [
        &["run", "--cpu-budget", "0", "--", "true"][..],
        &["run", "--cpu-budget", "101", "--", "true"][..],
        &["run", "--cpu-budget", "five", "--", "true"][..],
        &["attach", "--pid", "1", "--cpu-budget", "0.01"][..],
        &[
            "sim",
            "--workload",
            "ep-barrier",
            "--tool-cpu",
            "free",
            "--cpu-budget",
            "5",
        ][..],
        &[
            "sim",
            "--workload",
            "ep-barrier",
            "--tick-cost",
            "20,0.3,46",
            "--cpu-budget",
            "nan",
        ][..],
    ] {
        let out = run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains("cpu-budget"), "{args:?}: {stderr}");
    }
}

/// A cgroup-v1 cpuset holding one `sleep`; both removed when dropped.
struct Cpuset {
    dir: std::path::PathBuf,
    sleeper: Child,
}

impl Cpuset {
    fn new(cpus: &str) -> Cpuset {
        let dir =
            Path::new("/sys/fs/cgroup/cpuset").join(format!("tb-test-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("a cgroup-v1 cpuset hierarchy (this test needs root)");
        let mems = std::fs::read_to_string("/sys/fs/cgroup/cpuset/cpuset.mems").unwrap();
        std::fs::write(dir.join("cpuset.mems"), mems.trim()).unwrap();
        std::fs::write(dir.join("cpuset.cpus"), cpus).unwrap();
        let sleeper = Command::new("sleep").arg("60").spawn().unwrap();
        let set = Cpuset { dir, sleeper };
        std::fs::write(set.dir.join("cgroup.procs"), set.sleeper.id().to_string()).unwrap();
        set
    }

    fn set_cpus(&self, cpus: &str) {
        std::fs::write(self.dir.join("cpuset.cpus"), cpus).unwrap();
    }

    fn mask(&self) -> String {
        masks(self.sleeper.id())[0].2.clone()
    }
}

impl Drop for Cpuset {
    fn drop(&mut self) {
        let _ = self.sleeper.kill();
        let _ = self.sleeper.wait();
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn live_dry_run_attach_writes_no_mask_even_under_a_narrowed_cpuset() {
    // The permission check used to set the leader's mask to its current value. The kernel
    // keeps any sched_setaffinity as the user's request: a leader whose cpuset is narrow
    // at that moment stays narrow when the cpuset widens again.
    let all = online();
    assert!(all.contains('-'), "this test needs two CPUs, have {all}");
    let set = Cpuset::new(&all);
    set.set_cpus("0");
    assert_eq!(set.mask(), "0");
    let dir = tempfile::tempdir().unwrap();
    let mut tb = attach(set.sleeper.id(), dir.path(), &["--dry-run"]);
    // Past every check once the lock is taken; one more tick of the loop for good measure.
    let locked = wait_for(LIMIT, || {
        let mut e = std::fs::read_dir(dir.path()).ok()?.flatten();
        e.any(|e| e.file_name().to_string_lossy().starts_with("lock."))
            .then_some(())
    });
    std::thread::sleep(Duration::from_millis(200));
    signal(tb.id(), libc::SIGINT);
    assert_eq!(finish(&mut tb, LIMIT), 0);
    assert!(locked.is_some());
    set.set_cpus(&all);
    assert_eq!(set.mask(), all, "the leader follows its cpuset back out");
}

/// The helper process of the fd test: starts `THREADBALANCE_MANY_THREADS` sleeping threads
/// in batches of 500, 50 ms apart, prints "grown", and lives until its stdin closes.
#[test]
#[ignore = "helper process of the fd test; runs only when started by it"]
fn helper_process_growing_many_threads() {
    let Some(n) = std::env::var_os("THREADBALANCE_MANY_THREADS") else {
        return;
    };
    let n: usize = n.to_str().unwrap().parse().unwrap();
    for i in 0..n {
        std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(|| {
                loop {
                    std::thread::park();
                }
            })
            .unwrap();
        if i % 500 == 499 {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    println!("grown");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    let _ = std::io::Read::read(&mut std::io::stdin(), &mut [0u8; 1]);
}

#[test]
fn live_attach_to_a_process_growing_to_5000_threads_under_ulimit_1024() {
    let _alone = crate::support::alone();
    // Two kept files per thread used to hit EMFILE at about 500 threads: management
    // stopped with exit 1 and the restore failed. Now threads past the budget are read by
    // open/read/close, and every mask is restored.
    use std::io::BufRead;
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "safety::helper_process_growing_many_threads",
        ])
        .args(["--nocapture", "--test-threads=1"])
        .env("THREADBALANCE_MANY_THREADS", "5000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let hpid = helper.id();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let state = dir.path().join("state");
    // Attach while the helper is still small, so it grows under management.
    let mut tb = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n 1024 && exec {} attach --pid {hpid} --policy pbind --level core \
             --interval 500 --json {} --state-dir {}",
            bin().display(),
            json.display(),
            state.display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = std::io::BufReader::new(helper.stdout.take().unwrap());
    let grown = out
        .lines()
        .map_while(Result::ok)
        .any(|l| l.contains("grown"));
    // pbind places every thread it sees (a move, or a record of the mask it inherited
    // from a placed creator), each journaled first: wait until all 5000 are.
    let journaled = |min: usize| {
        let mut tids = std::collections::BTreeSet::new();
        for e in std::fs::read_dir(&state).into_iter().flatten().flatten() {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            for l in text.lines().filter(|l| l.starts_with("set ")) {
                tids.insert(l.split(' ').nth(2).unwrap_or("").to_string());
            }
        }
        (tids.len() >= min).then_some(())
    };
    let all_seen = wait_for(Duration::from_secs(180), || journaled(5000));
    signal(tb.id(), libc::SIGINT);
    let code = finish(&mut tb, Duration::from_secs(120));
    let mut stderr = String::new();
    use std::io::Read;
    tb.stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let all = online();
    let wrong = masks(hpid)
        .into_iter()
        .filter(|(_, _, m)| *m != all)
        .count();
    drop(helper.stdin.take());
    let _ = helper.kill();
    let _ = helper.wait();
    assert!(grown, "the helper started its threads");
    assert!(all_seen.is_some(), "all 5000 threads were placed");
    assert_eq!(code, 0, "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // Ten times the ~500 threads at which two kept files each exhausted 1024 fds.
    assert!(v["threads_peak"].as_u64().unwrap() > 5000, "{v}");
    assert_eq!(v["unrestored"], 0, "{v}");
    assert_eq!(wrong, 0, "every mask restored");
}

#[test]
fn live_attach_follows_children_as_run_does_unless_told_not_to() {
    // A shell whose child is the workload: attach to the shell. By default the child's
    // workers are placed (and restored); with --no-children they are never touched.
    for follow in [true, false] {
        let mut sh = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{} workload uneven --duty 1,1,0.5,0.25 --period-ms 10 --periods 100000 & wait",
                bin().display()
            ))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let work = wait_for(LIMIT, || {
            let c = child_of(sh.id())?;
            (worker_masks(c, "uneven").len() == 4).then_some(c)
        })
        .expect("the workload started");
        let before = masks(work);
        let dir = tempfile::tempdir().unwrap();
        let extra: &[&str] = if follow { &[] } else { &["--no-children"] };
        let mut tb = attach(sh.id(), dir.path(), extra);
        let moved = wait_for(Duration::from_secs(3), || {
            (masks(work) != before).then_some(())
        });
        signal(tb.id(), libc::SIGINT);
        let code = finish(&mut tb, LIMIT);
        let after = masks(work);
        signal(work, libc::SIGKILL);
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(code, 0);
        assert_eq!(moved.is_some(), follow, "follow children: {follow}");
        assert_eq!(after, before, "every mask restored");
    }
}

#[test]
fn live_run_no_children_orphan_forked_by_a_confined_thread_is_restored() {
    // The command (a shell) is confined by pbind, starts `sleep` in the background (it
    // inherits the confinement) and exits. The sleep, never managed (--no-children) and
    // orphaned, must still get the shell's original mask back when `run` ends.
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .args([
            "run",
            "--policy",
            "pbind",
            "--level",
            "core",
            "--no-children",
        ])
        .args(["--state-dir", dir.path().to_str().unwrap(), "--"])
        .args([
            "sh",
            "-c",
            "sleep 0.5; sleep 30 >/dev/null 2>&1 & echo $!; exit 0",
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let sleeper: u32 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let after = masks(sleeper);
    signal(sleeper, libc::SIGKILL);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(after.len(), 1, "{after:?}");
    assert_eq!(after[0].2, online(), "the orphan's mask restored");
}

#[test]
fn live_run_reaps_the_orphans_it_inherits_as_subreaper() {
    // Two background sleeps are orphaned at once (their subshells exit) and hang under
    // `run`; once they exit, `run` must reap them, or a long command would fill the
    // process table with zombies.
    let mut tb = spawn(&[
        "run",
        "--policy",
        "none",
        "--",
        "sh",
        "-c",
        "(sleep 0.1 &); (sleep 0.1 &); sleep 5",
    ]);
    let children = |pid: u32| -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .flat_map(|t| {
                std::fs::read_to_string(t.path().join("children"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect::<Vec<u32>>()
            })
            .collect()
    };
    let orphaned = wait_for(LIMIT, || (children(tb.id()).len() >= 2).then_some(()));
    let reaped = wait_for(LIMIT, || (children(tb.id()).len() == 1).then_some(()));
    signal(tb.id(), libc::SIGTERM);
    let code = finish(&mut tb, LIMIT);
    assert!(orphaned.is_some(), "the sleeps hung under run");
    assert!(reaped.is_some(), "only the command is left");
    assert_eq!(code, 128 + 15);
}
