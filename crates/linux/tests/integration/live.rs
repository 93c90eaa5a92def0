//! Live tests on this machine's `/proc`: threads of the test process itself (sampler) and
//! threads of child processes it starts (actuator). Each test stops what it starts and
//! restores every mask it changes; nothing here measures time.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use threadbalance_linux::{
    Actuator, HostFacts, LinuxError, LinuxHost, Root, Sampler, SamplerConfig, read_threads,
    read_topology,
};
use threadbalance_model::{
    CpuId, CpuSet, Level, Move, Nanos, Pid, Plan, Reason, Snapshot, Target, ThreadKey, Tid,
};

/// A pid above the kernel's maximum (`pid_max` is at most 2^22).
const NO_PID: Pid = Pid(1 << 30);

pub(crate) fn facts() -> HostFacts {
    HostFacts::system().unwrap()
}

fn gettid() -> Tid {
    Tid(nix::unistd::gettid().as_raw())
}

/// `Cpus_allowed_list` of a thread, read back from its `status`.
pub(crate) fn allowed(pid: Pid, tid: Tid) -> CpuSet {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap();
    CpuSet::parse_list(line).unwrap()
}

/// Threads started in this process that spin until stopped.
struct Spinners {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
    tids: Vec<Tid>,
}

impl Spinners {
    fn start(n: usize) -> Spinners {
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let handles = (0..n)
            .map(|_| {
                let stop = stop.clone();
                let tx = tx.clone();
                std::thread::spawn(move || {
                    tx.send(gettid()).unwrap();
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        let tids = (0..n).map(|_| rx.recv().unwrap()).collect();
        Spinners {
            stop,
            handles,
            tids,
        }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.join().unwrap();
        }
    }
}

/// A child process (this test binary, running the helper below) with `HELPER_THREADS`
/// sleeping threads; killed and reaped on drop.
pub(crate) struct Helper {
    child: Child,
    out: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

pub(crate) const HELPER_THREADS: usize = 3;

impl Helper {
    pub(crate) fn start() -> Helper {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "live::live_helper_process_with_threads",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("THREADBALANCE_LIVE_HELPER", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let mut h = Helper {
            child,
            out: BufReader::new(out).lines(),
        };
        h.wait_for("helper ready");
        h
    }

    /// Reads the helper's output until a line ends with `what`.
    fn wait_for(&mut self, what: &str) -> String {
        loop {
            let line = self.out.next().expect("helper ended early").unwrap();
            if line.contains(what) {
                return line;
            }
        }
    }

    /// Sends one command line to the helper and returns its answer, the line holding
    /// `answer`.
    pub(crate) fn ask(&mut self, command: &str, answer: &str) -> String {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin.write_all(format!("{command}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        self.wait_for(answer)
    }

    /// Makes the helper's main thread start two more threads, and waits until it has.
    pub(crate) fn spawn_two(&mut self) {
        self.ask("spawn", "spawned");
    }

    pub(crate) fn pid(&self) -> Pid {
        Pid(self.child.id() as i32)
    }

    /// Stops the helper and waits for it.
    pub(crate) fn stop(mut self) {
        self.kill();
    }

    fn kill(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The helper process's body: does nothing unless started by [`Helper::start`].
#[test]
#[ignore = "helper process of the live tests; runs only when started by them"]
fn live_helper_process_with_threads() {
    if std::env::var_os("THREADBALANCE_LIVE_HELPER").is_none() {
        return;
    }
    for _ in 0..HELPER_THREADS {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(20));
            }
        });
    }
    // Never outlive the test that started us by long.
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_secs(60));
        std::process::exit(0);
    });
    println!("helper ready");
    std::io::stdout().flush().unwrap();
    // "spawn" starts two more threads from this (the main) thread; "spawn-pinned C" one
    // that confines itself to CPU C as it starts (the thread-pool pattern); "fork" a
    // child process (`sleep`) from this thread; anything else, or the end of input, ends
    // the helper.
    loop {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        if let Some(cpu) = line.trim().strip_prefix("spawn-pinned ") {
            let cpu = threadbalance_model::CpuId(cpu.parse().unwrap());
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let me = threadbalance_model::Tid(nix::unistd::gettid().as_raw());
                threadbalance_linux::set_affinity(me, &CpuSet::single(cpu)).unwrap();
                tx.send(me.0).unwrap();
                loop {
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            println!("pinned {}", rx.recv().unwrap());
            std::io::stdout().flush().unwrap();
            continue;
        }
        if line.trim() == "fork" {
            let child = Command::new("sleep").arg("60").spawn().unwrap();
            println!("forked {}", child.id());
            std::io::stdout().flush().unwrap();
            std::mem::forget(child);
            continue;
        }
        if line.trim() != "spawn" {
            std::process::exit(0);
        }
        for _ in 0..2 {
            std::thread::spawn(|| {
                loop {
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        println!("spawned");
        std::io::stdout().flush().unwrap();
    }
}

pub(crate) fn mv(key: ThreadKey, to: Target) -> Plan {
    Plan {
        moves: vec![Move {
            thread: key,
            to,
            why: Reason::Pin,
        }],
        ..Plan::default()
    }
}

/// A non-leader thread of the helper.
pub(crate) fn helper_thread(h: &Helper) -> ThreadKey {
    let threads = read_threads(&Root::system(), h.pid(), &facts()).unwrap();
    assert!(threads.len() > HELPER_THREADS, "{} threads", threads.len());
    threads
        .iter()
        .map(|t| t.sample.key)
        .find(|k| !k.is_leader())
        .unwrap()
}

#[test]
fn live_sampler_sees_own_threads_and_their_counters_grow() {
    let spin = Spinners::start(3);
    let me = Pid(std::process::id() as i32);
    let mut s = Sampler::new(Root::system(), &[me], SamplerConfig::new(facts())).unwrap();
    let (mut a, mut b) = (Snapshot::default(), Snapshot::default());
    s.sample(Nanos(1), &mut a).unwrap();
    // Wait until each spinner has run for 1 ms more CPU time (no wall-clock assertion).
    let run_of = |snap: &Snapshot, tid: Tid| {
        snap.threads
            .iter()
            .find(|t| t.key.tid == tid)
            .map(|t| t.run)
            .unwrap()
    };
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(10));
        s.sample(Nanos(2), &mut b).unwrap();
        if spin
            .tids
            .iter()
            .all(|&t| run_of(&b, t) > run_of(&a, t) + Nanos::from_millis(1))
        {
            break;
        }
    }
    for &tid in &spin.tids {
        assert!(run_of(&b, tid) > run_of(&a, tid), "{tid} did not run");
    }
    assert!(b.threads.windows(2).all(|w| w[0].key < w[1].key), "sorted");
    assert!(b.threads.iter().all(|t| t.key.pid == me));
    let tracked = s.tracked_threads();
    let gone = spin.tids.clone();
    spin.stop();
    // The spinners exited: left out, and their files closed. (`join` returns when a
    // thread's stack is released, a moment before the kernel unlists the task.)
    let listed = |b: &Snapshot| b.threads.iter().any(|t| gone.contains(&t.key.tid));
    for _ in 0..500 {
        s.sample(Nanos(3), &mut b).unwrap();
        if !listed(&b) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!listed(&b));
    assert!(s.tracked_threads() <= tracked);
}

#[test]
fn live_sampler_discovers_threads_started_and_exited_between_samples() {
    let me = Pid(std::process::id() as i32);
    let mut s = Sampler::new(Root::system(), &[me], SamplerConfig::new(facts())).unwrap();
    let mut snap = Snapshot::default();
    let has = |snap: &Snapshot, tid: Tid| snap.threads.iter().any(|t| t.key.tid == tid);
    let a = Spinners::start(1);
    s.sample(Nanos(1), &mut snap).unwrap();
    s.sample(Nanos(2), &mut snap).unwrap();
    assert!(has(&snap, a.tids[0]));
    // A thread started after the last listing is found on the next sample.
    let b = Spinners::start(1);
    s.sample(Nanos(3), &mut snap).unwrap();
    assert!(has(&snap, b.tids[0]));
    // One thread exits and another starts: the count is the same, but the exit is seen
    // (its kept files fail) and the new thread is found.
    let gone = a.tids[0];
    a.stop();
    let c = Spinners::start(1);
    let mut ok = false;
    for _ in 0..500 {
        s.sample(Nanos(4), &mut snap).unwrap();
        if !has(&snap, gone) && has(&snap, c.tids[0]) && has(&snap, b.tids[0]) {
            ok = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    b.stop();
    c.stop();
    assert!(ok, "exit and start between samples were not both seen");
}

#[test]
fn live_sampler_reads_status_and_memory_when_asked() {
    let me = Pid(std::process::id() as i32);
    let mut cfg = SamplerConfig::new(facts());
    cfg.read_status = true;
    cfg.memory_every = Some(Nanos::ZERO);
    let mut s = Sampler::new(Root::system(), &[me], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos(1), &mut snap).unwrap();
    let leader = snap.threads.iter().find(|t| t.key.is_leader()).unwrap();
    assert!(leader.voluntary + leader.involuntary > 0);
    if std::path::Path::new("/proc/self/numa_maps").exists() {
        assert_eq!(snap.memory.len(), 1);
        assert!(snap.memory[0].total() > 0);
    }
}

#[test]
fn live_sampler_follows_children_of_a_shell() {
    let mut sh = Command::new("sh")
        .args(["-c", "sleep 30 & sleep 30 & wait"])
        .spawn()
        .unwrap();
    let pid = Pid(sh.id() as i32);
    let mut cfg = SamplerConfig::new(facts());
    cfg.follow_children = true;
    let mut s = Sampler::new(Root::system(), &[pid], cfg).unwrap();
    let mut snap = Snapshot::default();
    let mut pids = Vec::new();
    for _ in 0..500 {
        s.sample(threadbalance_linux::monotonic_now(), &mut snap)
            .unwrap();
        pids = s.pids();
        if pids.len() == 3 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Stop the sleeps first (they would outlive the shell), then the shell.
    for &p in &pids {
        if p != pid {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p.0),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let _ = sh.kill();
    let _ = sh.wait();
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_eq!(pids[0], pid);
}

/// The state letter of process `pid` (`proc/<pid>/stat`'s third field), `None` once gone.
fn state_of(pid: Pid) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{}/stat", pid.0)).ok()?;
    text.rsplit_once(") ")?.1.chars().next()
}

#[test]
fn live_sampler_follows_a_child_started_once_the_shell_was_read() {
    // See: issue 39 item 7. A shell read once, which then forks a worker and waits for it:
    // its `stat` is still fresh (a policy that allows it a second, as `speed` does; the
    // run-time counters allow 5 s), and its `children` file used to be read only with
    // `stat`, so the shell, idle from then on, was never listed again and the worker never
    // managed. The samples are taken at times of our choosing, 100 ms apart.
    let mut sh = Command::new("sh")
        .args(["-c", "read line; sleep 30 & wait"])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = Pid(sh.id() as i32);
    let mut cfg = SamplerConfig::new(facts());
    cfg.follow_children = true;
    cfg.stat_max_age = Nanos::from_secs(1);
    let mut s = Sampler::new(Root::system(), &[pid], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    let first = s.pids();
    // Let the shell fork the worker, and wait until it sleeps in `wait`.
    let mut stdin = sh.stdin.take().unwrap();
    writeln!(stdin, "go").unwrap();
    let children = format!("/proc/{}/task/{}/children", pid.0, pid.0);
    let mut worker = None;
    for _ in 0..500 {
        let listed = std::fs::read_to_string(&children).unwrap_or_default();
        worker = listed
            .split_whitespace()
            .next()
            .and_then(|w| w.parse().ok());
        if worker.is_some() && state_of(pid) == Some('S') {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut pids = Vec::new();
    for k in 1..=5 {
        s.sample(Nanos::from_millis(100 * k), &mut snap).unwrap();
        pids = s.pids();
    }
    if let Some(w) = worker {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(w),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    drop(stdin);
    let _ = sh.kill();
    let _ = sh.wait();
    assert_eq!(first, [pid], "the shell alone at first");
    let worker = Pid(worker.expect("the shell started its worker"));
    assert!(pids.contains(&worker), "worker {worker} in {pids:?}");
}

#[test]
fn live_actuator_pins_child_thread_and_restores_it() {
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    let mut act = Actuator::new(Root::system());

    let r = act.apply(&topo, &mv(key, Target::Cpu(CpuId(0))));
    assert_eq!((r.done, r.vanished, r.denied), (1, 0, 0), "{r:?}");
    assert_eq!(allowed(key.pid, key.tid), CpuSet::single(CpuId(0)));
    // The same move again changes nothing.
    let r = act.apply(&topo, &mv(key, Target::Cpu(CpuId(0))));
    assert_eq!(r.unchanged, 1, "{r:?}");
    // A domain: the core of the last CPU.
    let last = topo.cpus().last().unwrap().id;
    let core = topo.domain_of(last, Level::Core).unwrap();
    let r = act.apply(
        &topo,
        &mv(
            key,
            Target::Domain {
                level: Level::Core,
                index: core,
            },
        ),
    );
    assert_eq!(r.done + r.unchanged, 1, "{r:?}");
    assert_eq!(
        allowed(key.pid, key.tid),
        topo.domains(Level::Core)[core].cpus
    );
    assert_eq!(act.changed().count(), 1);

    let r = act.restore_all();
    assert_eq!(r.restored, 1, "{r:?}");
    assert_eq!(allowed(key.pid, key.tid), before);
    assert_eq!(act.changed().count(), 0);
    h.stop();
}

#[test]
fn live_host_threads_inheriting_our_mask_may_use_every_allowed_cpu_and_are_widened_back() {
    let topo = read_topology(&Root::system()).unwrap();
    assert!(topo.cpus().len() >= 2, "this test needs two CPUs");
    let mut h = Helper::start();
    let online = topo.online().clone();
    let mut host = LinuxHost::new(
        Root::system(),
        topo.clone(),
        &[h.pid()],
        SamplerConfig::new(facts()),
    )
    .unwrap();
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    // Confine every thread to CPU 0 (the helper's body runs on a thread the test harness
    // started), then let it start two threads: they inherit {0}.
    let before: Vec<ThreadKey> = snap.threads.iter().map(|t| t.key).collect();
    for &k in &before {
        let r = host.apply(&mv(k, Target::Cpu(CpuId(0))));
        assert_eq!(r.done, 1, "{r:?}");
    }
    h.spawn_two();
    host.sample(&mut snap).unwrap();
    let born: Vec<ThreadKey> = snap
        .threads
        .iter()
        .map(|t| t.key)
        .filter(|k| !before.contains(k))
        .collect();
    assert_eq!(born.len(), 2, "{:?}", snap.threads);
    for k in &born {
        assert_eq!(allowed(k.pid, k.tid), CpuSet::single(CpuId(0)), "inherited");
    }
    // The inherited {0} is not the program's choice: a move to CPU 1 is allowed.
    let r = host.apply(&mv(born[0], Target::Cpu(CpuId(1))));
    assert_eq!((r.done, r.denied), (1, 0), "{r:?}");
    assert_eq!(allowed(born[0].pid, born[0].tid), CpuSet::single(CpuId(1)));
    // Restoring puts every thread back on the process's mask, including the new thread
    // that was never moved.
    let r = host.restore_all();
    assert_eq!(r.restored as usize, before.len() + 2, "{r:?}");
    for k in before.iter().chain(&born) {
        assert_eq!(allowed(k.pid, k.tid), online, "{k:?}");
    }
    h.stop();
}

/// An actuator journaling to a state directory of its own (kept while the first value
/// lives), and the journal's path.
fn journaled_actuator() -> (tempfile::TempDir, std::path::PathBuf, Actuator) {
    let dir = tempfile::tempdir().unwrap();
    let state = threadbalance_linux::state::StateDir::new(dir.path());
    let journal = state.open_journal(&Root::system()).unwrap();
    let path = journal.path().to_path_buf();
    let mut act = Actuator::new(Root::system());
    act.set_journal(journal);
    (dir, path, act)
}

#[test]
fn live_actuator_plan_of_several_moves_is_journaled_before_made_in_order_and_restored() {
    // Three moves on two helper threads, the first named twice: every change is made
    // (the thread named twice ends where its second move sends it), the journal holds a
    // set line for each, in the plan's order, and replaying the journal alone (what
    // `restore` does after a crash) gives both threads their masks back.
    use threadbalance_linux::ledger::{Ledger, replay};
    let topo = read_topology(&Root::system()).unwrap();
    assert!(topo.cpus().len() >= 2, "this test needs two CPUs");
    let h = Helper::start();
    let threads = read_threads(&Root::system(), h.pid(), &facts()).unwrap();
    let keys: Vec<ThreadKey> = threads
        .iter()
        .map(|t| t.sample.key)
        .filter(|k| !k.is_leader())
        .take(2)
        .collect();
    assert_eq!(keys.len(), 2, "{threads:?}");
    let (a, b) = (keys[0], keys[1]);
    let before = (allowed(a.pid, a.tid), allowed(b.pid, b.tid));
    let (_dir, path, mut act) = journaled_actuator();
    let to = |thread, cpu| Move {
        thread,
        to: Target::Cpu(CpuId(cpu)),
        why: Reason::Pin,
    };
    let plan = Plan {
        moves: vec![to(a, 0), to(b, 1), to(a, 1)],
        ..Plan::default()
    };
    let r = act.apply(&topo, &plan);
    assert_eq!((r.done, r.vanished, r.denied), (3, 0, 0), "{r:?}");
    assert_eq!(allowed(a.pid, a.tid), CpuSet::single(CpuId(1)));
    assert_eq!(allowed(b.pid, b.tid), CpuSet::single(CpuId(1)));
    let text = std::fs::read_to_string(&path).unwrap();
    let set_lines: Vec<(i32, String)> = text
        .lines()
        .filter(|l| l.starts_with("set "))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[2].parse().unwrap(), f.last().unwrap().to_string())
        })
        .collect();
    let order: Vec<i32> = set_lines.iter().map(|(t, _)| *t).collect();
    assert_eq!(order, vec![a.tid.0, b.tid.0, a.tid.0], "{text}");

    let ledger = Ledger::parse(&text).unwrap();
    let mut world = threadbalance_linux::state::SystemWorld::new(Root::system());
    let r = replay(&ledger, &mut world);
    assert_eq!(r.restored, 2, "{r:?}");
    assert_eq!((allowed(a.pid, a.tid), allowed(b.pid, b.tid)), before);
    // The actuator's own restore finds them already back.
    let _ = act.restore_all();
    assert_eq!((allowed(a.pid, a.tid), allowed(b.pid, b.tid)), before);
    h.stop();
}

#[test]
fn live_actuator_original_target_and_drop_restore() {
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    {
        let mut act = Actuator::new(Root::system());
        assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
        // Back to the original through the plan.
        assert_eq!(act.apply(&topo, &mv(key, Target::Original)).done, 1);
        assert_eq!(allowed(key.pid, key.tid), before);
        // Pin again, then drop the actuator without restoring: Drop restores.
        assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
        assert_eq!(allowed(key.pid, key.tid), CpuSet::single(CpuId(0)));
    }
    assert_eq!(allowed(key.pid, key.tid), before);
    h.stop();
}

#[test]
fn live_actuator_wrong_start_time_is_vanished_and_touches_nothing() {
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    let stranger = ThreadKey {
        start_time: key.start_time + 1,
        ..key
    };
    let mut act = Actuator::new(Root::system());
    let r = act.apply(&topo, &mv(stranger, Target::Cpu(CpuId(0))));
    assert_eq!((r.vanished, r.done), (1, 0), "{r:?}");
    assert_eq!(allowed(key.pid, key.tid), before);
    // Out-of-range targets are refused, not errors.
    let r = act.apply(&topo, &mv(key, Target::Cpu(CpuId(4000))));
    assert_eq!(r.denied, 1, "{r:?}");
    let r = act.apply(
        &topo,
        &mv(
            key,
            Target::Domain {
                level: Level::Node,
                index: 99,
            },
        ),
    );
    assert_eq!(r.denied, 1, "{r:?}");
    assert_eq!(allowed(key.pid, key.tid), before);
    assert_eq!(act.restore_all(), Default::default());
    h.stop();
}

#[test]
fn live_actuator_exited_thread_is_vanished_and_skipped_on_restore() {
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let mut act = Actuator::new(Root::system());
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
    h.stop();
    assert_eq!(
        act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).vanished,
        1
    );
    // The vanished thread was forgotten: nothing left to restore.
    assert_eq!(act.restore_all(), Default::default());

    // And a thread that exits after being moved is counted as vanished on restore.
    let h = Helper::start();
    let key = helper_thread(&h);
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
    h.stop();
    let r = act.restore_all();
    assert_eq!((r.vanished, r.restored), (1, 0), "{r:?}");
}

#[test]
fn live_actuator_never_widens_the_original_mask() {
    let topo = read_topology(&Root::system()).unwrap();
    assert!(topo.cpus().len() >= 2, "this test needs two CPUs");
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    let first = topo.cpus()[0].id;
    let second = topo.cpus()[1].id;
    // Someone (taskset) confined the thread to the first CPU before we touched it.
    threadbalance_linux::set_affinity(key.tid, &CpuSet::single(first)).unwrap();
    let mut act = Actuator::new(Root::system());
    // The second CPU is outside its original mask: refused.
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(second))).denied, 1);
    // The whole package intersected with the original mask is the first CPU: unchanged.
    let r = act.apply(
        &topo,
        &mv(
            key,
            Target::Domain {
                level: Level::Package,
                index: 0,
            },
        ),
    );
    assert_eq!(r.unchanged, 1, "{r:?}");
    threadbalance_linux::set_affinity(key.tid, &before).unwrap();
    assert_eq!(allowed(key.pid, key.tid), before);
    h.stop();
}

#[test]
fn live_nonexistent_pid_is_no_such_process() {
    let err = Sampler::new(Root::system(), &[NO_PID], SamplerConfig::new(facts())).unwrap_err();
    assert!(
        matches!(err, LinuxError::NoSuchProcess { pid } if pid == NO_PID),
        "{err:?}"
    );
    let err = read_threads(&Root::system(), NO_PID, &facts()).unwrap_err();
    assert!(matches!(err, LinuxError::NoSuchProcess { .. }), "{err:?}");
    let topo = read_topology(&Root::system()).unwrap();
    let err =
        LinuxHost::new(Root::system(), topo, &[NO_PID], SamplerConfig::new(facts())).unwrap_err();
    assert_eq!(err.to_string(), format!("no process with pid {NO_PID}"));
}

#[test]
fn live_host_samples_until_target_exits() {
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let pid = h.pid();
    let mut host =
        LinuxHost::new(Root::system(), topo, &[pid], SamplerConfig::new(facts())).unwrap();
    assert!(host.target_alive());
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    assert!(snap.threads.len() > HELPER_THREADS);
    assert!(snap.at > Nanos::ZERO);
    let t0 = host.now();
    assert!(host.now() >= t0);
    let key = snap
        .threads
        .iter()
        .find(|t| !t.key.is_leader())
        .unwrap()
        .key;
    assert_eq!(host.apply(&mv(key, Target::Cpu(CpuId(0)))).done, 1);
    assert!(host.same_thread(key.pid, key.tid, key.start_time));
    h.stop();
    assert!(!host.target_alive());
    let err = host.sample(&mut snap).unwrap_err();
    assert!(matches!(err, LinuxError::NoSuchProcess { .. }), "{err:?}");
    assert_eq!(host.restore_all().vanished, 1);
}

#[test]
fn live_sampler_kept_start_time_vouches_only_for_a_live_sampled_thread() {
    let me = Pid(std::process::id() as i32);
    let mut s = Sampler::new(Root::system(), &[me], SamplerConfig::new(facts())).unwrap();
    let mut snap = Snapshot::default();
    let a = Spinners::start(1);
    let tid = a.tids[0];
    s.sample(Nanos(1), &mut snap).unwrap();
    let key = snap.threads.iter().find(|t| t.key.tid == tid).unwrap().key;
    // Its kept file reads: the start time the sampler read, without reading `stat` again.
    assert_eq!(s.kept_start_time(me, tid), Some(key.start_time));
    // Another process's tid, or a thread never sampled, is not vouched for.
    assert_eq!(s.kept_start_time(NO_PID, tid), None);
    assert_eq!(s.kept_start_time(me, Tid(NO_PID.0)), None);
    // Once the thread has exited its kept file fails: the caller reads `/proc` instead.
    // (A join returns when the thread clears its tid, a moment before the kernel is done.)
    a.stop();
    let gone = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        s.kept_start_time(me, tid).is_none()
    });
    assert!(gone, "an exited thread is still vouched for");
}

/// A plan that gives `key` the slice `ns` (`None`: its own).
fn slice_plan(key: ThreadKey, ns: Option<u64>) -> Plan {
    Plan {
        slices: vec![threadbalance_model::SliceChange {
            thread: key,
            slice: ns.map(Nanos),
        }],
        ..Plan::default()
    }
}

#[test]
fn live_actuator_short_slice_is_journaled_set_and_put_back_by_the_journal_alone() {
    // Root (CAP_SYS_NICE) on Linux 6.12+: a helper thread runs in 0.5 ms slices with
    // reset-on-fork, the journal says so, and replaying the journal alone (what
    // `restore` does after a crash) gives the thread the kernel's default back.
    use threadbalance_linux::ledger::{Ledger, replay};
    use threadbalance_linux::slice::attr_of;
    let before_self = attr_of(Tid(0)).unwrap();
    assert!(
        before_self.runtime() > 0,
        "this kernel reports no slices (before Linux 6.12)"
    );
    assert!(
        threadbalance_linux::permit::we_may_renice_any(&Root::system()),
        "run the tests as root: slices are set only with CAP_SYS_NICE"
    );
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = attr_of(key.tid).unwrap();
    let (_dir, path, mut act) = journaled_actuator();

    // The report counts the slice changed (what `bench --cost` and the simulator price).
    assert_eq!(act.apply(&topo, &slice_plan(key, Some(500_000))).slices, 1);
    let during = attr_of(key.tid).unwrap();
    assert_eq!(during.runtime(), 500_000);
    // Asked again for the slice it has: nothing changed, nothing counted.
    assert_eq!(act.apply(&topo, &slice_plan(key, Some(500_000))).slices, 0);
    assert!(during.as_slice(None).reset_on_fork);
    assert_eq!(act.slice_counts().set, 1);
    let text = std::fs::read_to_string(&path).unwrap();
    let line = format!(
        "slice {} {} {} 0 0 500000",
        key.pid.0, key.tid.0, key.start_time
    );
    assert!(text.contains(&line), "{text}");

    // The crash path: the journal's records, replayed on the system.
    let ledger = Ledger::parse(&text).unwrap();
    let mut world = threadbalance_linux::state::SystemWorld::new(Root::system());
    let r = replay(&ledger, &mut world);
    assert_eq!(r.slices_restored, 1, "{r:?}");
    assert_eq!(attr_of(key.tid).unwrap(), before);

    // Set again, then given back by a plan: restored during the run, and an unslice line.
    act.apply(&topo, &slice_plan(key, Some(500_000)));
    assert_eq!(attr_of(key.tid).unwrap().runtime(), 500_000);
    assert_eq!(act.apply(&topo, &slice_plan(key, None)).slices, 1);
    assert_eq!(attr_of(key.tid).unwrap(), before);
    assert_eq!(act.slice_counts().restored, 1);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(&format!(
        "unslice {} {} {}",
        key.pid.0, key.tid.0, key.start_time
    )));

    // Set once more and left to the normal end: restore_all puts it back.
    act.apply(&topo, &slice_plan(key, Some(500_000)));
    let r = act.restore_all();
    assert_eq!(r.slices_restored, 1, "{r:?}");
    assert_eq!(attr_of(key.tid).unwrap(), before);
    h.stop();
}

#[test]
fn live_actuator_slice_of_a_wrong_start_time_touches_nothing() {
    use threadbalance_linux::slice::attr_of;
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = attr_of(key.tid).unwrap();
    let mut act = Actuator::new(Root::system());
    let stranger = ThreadKey {
        start_time: key.start_time + 1,
        ..key
    };
    act.apply(&topo, &slice_plan(stranger, Some(500_000)));
    assert_eq!(attr_of(key.tid).unwrap(), before);
    assert_eq!(act.slice_counts().set, 0);
    h.stop();
}

#[test]
fn live_actuator_never_sets_a_slice_over_one_the_program_chose() {
    // The helper's thread runs in 2 ms slices of "its own" (set here, as the program
    // would): a plan asking for 0.5 ms leaves them, and counts the slice as not set. Then
    // ours is set on the default, the "program" sets 2.5 ms over it, and a plan giving
    // the thread its own back leaves the 2.5 ms: hands off.
    use threadbalance_linux::slice::{Slice, attr_of, set_slice};
    let topo = read_topology(&Root::system()).unwrap();
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = attr_of(key.tid).unwrap();
    let own = |ns| Slice {
        ns,
        reset_on_fork: false,
    };
    set_slice(key.tid, own(2_000_000)).unwrap();
    let mut act = Actuator::new(Root::system());
    act.apply(&topo, &slice_plan(key, Some(500_000)));
    assert_eq!(attr_of(key.tid).unwrap().runtime(), 2_000_000);
    assert_eq!((act.slice_counts().set, act.slice_counts().skipped), (0, 1));
    set_slice(key.tid, own(0)).unwrap();
    assert_eq!(attr_of(key.tid).unwrap(), before);

    let mut act = Actuator::new(Root::system());
    act.apply(&topo, &slice_plan(key, Some(500_000)));
    assert_eq!(attr_of(key.tid).unwrap().runtime(), 500_000);
    set_slice(key.tid, own(2_500_000)).unwrap();
    act.apply(&topo, &slice_plan(key, None));
    assert_eq!(attr_of(key.tid).unwrap().runtime(), 2_500_000);
    assert_eq!(act.restore_all().slices_restored, 0);
    assert_eq!(attr_of(key.tid).unwrap().runtime(), 2_500_000);
    set_slice(key.tid, own(0)).unwrap();
    assert_eq!(attr_of(key.tid).unwrap(), before);
    h.stop();
}
