//! Live: the program's own affinity wins, and forks of confined threads are restored.
//! See: issue 11 (items 1 and 3). Each test runs against the helper process of `live`,
//! stops it, and leaves every mask it changed as it found it.

use crate::live::{Helper, allowed, facts, helper_thread, mv};
use threadbalance_linux::ledger::Kept;
use threadbalance_linux::{Actuator, LinuxHost, Root, SamplerConfig, read_topology};
use threadbalance_model::{CpuId, CpuSet, Pid, Snapshot, Target, ThreadKey, Tid};

#[test]
fn live_actuator_thread_that_sets_its_own_mask_is_left_alone_and_never_restored_over() {
    let topo = read_topology(&Root::system()).unwrap();
    assert!(topo.cpus().len() >= 2, "this test needs two CPUs");
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    let mut act = Actuator::new(Root::system());
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
    // The program now confines the thread to CPU 1 itself.
    threadbalance_linux::set_affinity(key.tid, &CpuSet::single(CpuId(1))).unwrap();
    // The next move is refused: the program decided.
    let r = act.apply(&topo, &mv(key, Target::Cpu(CpuId(0))));
    assert_eq!((r.done, r.denied), (0, 1), "{r:?}");
    assert_eq!(allowed(key.pid, key.tid), CpuSet::single(CpuId(1)));
    assert_eq!(act.decided().count(), 1);
    // At the end its choice stands, and is reported.
    let r = act.restore_all();
    assert_eq!(allowed(key.pid, key.tid), CpuSet::single(CpuId(1)));
    assert_eq!(
        r.kept,
        vec![(key, Kept::ProgramChoice(CpuSet::single(CpuId(1))))]
    );
    threadbalance_linux::set_affinity(key.tid, &before).unwrap();
    h.stop();
}

fn host_of(h: &Helper) -> (LinuxHost, Vec<ThreadKey>) {
    let topo = read_topology(&Root::system()).unwrap();
    let mut host = LinuxHost::new(
        Root::system(),
        topo,
        &[h.pid()],
        SamplerConfig::new(facts()),
    )
    .unwrap();
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    let keys = snap.threads.iter().map(|t| t.key).collect();
    (host, keys)
}

#[test]
fn live_host_thread_born_pinning_itself_to_a_mask_we_once_used_is_not_widened() {
    // Thread A goes to CPU 1 and then to CPU 0, so {1} is a mask we applied but no thread
    // of ours holds it any more. A thread then born pinning itself to {1} (an OpenMP
    // worker) made that choice itself: it must keep it after we restore.
    let mut h = Helper::start();
    let online = read_topology(&Root::system()).unwrap().online().clone();
    assert!(online.len() >= 2, "this test needs two CPUs");
    let (mut host, keys) = host_of(&h);
    let a = keys.iter().copied().find(|k| !k.is_leader()).unwrap();
    assert_eq!(host.apply(&mv(a, Target::Cpu(CpuId(1)))).done, 1);
    for &k in &keys {
        host.apply(&mv(k, Target::Cpu(CpuId(0))));
    }
    let line = h.ask("spawn-pinned 1", "pinned");
    let tid = Tid(line.rsplit(' ').next().unwrap().parse().unwrap());
    assert_eq!(allowed(h.pid(), tid), CpuSet::single(CpuId(1)));
    let r = host.restore_all();
    assert_eq!(allowed(h.pid(), tid), CpuSet::single(CpuId(1)), "{r:?}");
    for k in &keys {
        assert_eq!(allowed(k.pid, k.tid), online, "{k:?}");
    }
    h.stop();
}

#[test]
fn live_host_process_forked_by_a_confined_thread_is_restored_though_not_managed() {
    // Only the helper is managed (no children followed). Its threads are confined to
    // CPU 0, then one of them starts a process: the child inherits {0}, and must get the
    // helper's mask back at the end all the same.
    let mut h = Helper::start();
    let online = read_topology(&Root::system()).unwrap().online().clone();
    let (mut host, keys) = host_of(&h);
    for &k in &keys {
        assert_eq!(host.apply(&mv(k, Target::Cpu(CpuId(0)))).done, 1);
    }
    let line = h.ask("fork", "forked");
    let child = Pid(line.rsplit(' ').next().unwrap().parse().unwrap());
    assert_eq!(allowed(child, Tid(child.0)), CpuSet::single(CpuId(0)));
    let r = host.restore_all();
    let after = allowed(child, Tid(child.0));
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.0),
        nix::sys::signal::Signal::SIGKILL,
    );
    assert_eq!(after, online, "{r:?}");
    assert_eq!(r.restored as usize, keys.len() + 1, "{r:?}");
    h.stop();
}

#[test]
fn live_sampler_fresh_lists_threads_only_on_their_first_sample() {
    let mut h = Helper::start();
    let mut s =
        threadbalance_linux::Sampler::new(Root::system(), &[h.pid()], SamplerConfig::new(facts()))
            .unwrap();
    let mut snap = Snapshot::default();
    s.sample(threadbalance_model::Nanos(1), &mut snap).unwrap();
    assert_eq!(s.fresh().len(), snap.threads.len());
    s.sample(threadbalance_model::Nanos(2), &mut snap).unwrap();
    assert!(s.fresh().is_empty(), "{:?}", s.fresh());
    h.spawn_two();
    s.sample(threadbalance_model::Nanos(3), &mut snap).unwrap();
    assert_eq!(s.fresh().len(), 2);
    h.stop();
}

#[test]
fn live_host_maintain_forgets_gone_threads_and_compacts_the_journal() {
    // 80 threads are started and moved (80 `set` lines), then all exit. Maintenance
    // forgets them and rewrites the journal down to its header and managed process.
    let dir = tempfile::tempdir().unwrap();
    let state = threadbalance_linux::state::StateDir::new(dir.path());
    let mut journal = state.open_journal(&Root::system()).unwrap();
    let mut h = Helper::start();
    let topo = read_topology(&Root::system()).unwrap();
    for _ in 0..40 {
        h.spawn_two();
    }
    let threads = threadbalance_linux::read_threads(&Root::system(), h.pid(), &facts()).unwrap();
    let mut act = Actuator::new(Root::system());
    // The journal is read back through a second handle: the actuator owns the first.
    let path = journal.path().to_path_buf();
    journal
        .append(&threadbalance_linux::ledger::Record::Since(0))
        .unwrap();
    act.set_journal(journal);
    let mut moved = 0;
    for t in &threads {
        let r = act.apply(&topo, &mv(t.sample.key, Target::Cpu(CpuId(0))));
        moved += r.done;
    }
    assert!(moved >= 80, "{moved}");
    let lines = std::fs::read_to_string(&path).unwrap().lines().count();
    assert!(lines as u32 >= moved + 2, "{lines}");
    h.stop();
    act.maintain();
    assert_eq!(act.changed().count(), 0);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.lines().count() <= 3, "{text}");
    assert!(!text.contains("\nset "), "{text}");
    // Still the journal of a live instance: its lock is held.
    assert_eq!(state.restore_stale(&Root::system()).unwrap().1, 0);
}

#[test]
fn live_host_inherited_thread_is_restored_after_its_creator_moved_on() {
    // Every thread goes to CPU 0; two threads are born there (inheriting {0}) and are
    // sampled; then every old thread moves to CPU 1, so no thread of ours holds {0} any
    // more. The two were recorded as inheriting when first seen, and are widened back.
    let mut h = Helper::start();
    let online = read_topology(&Root::system()).unwrap().online().clone();
    assert!(online.len() >= 2, "this test needs two CPUs");
    let (mut host, keys) = host_of(&h);
    for &k in &keys {
        assert_eq!(host.apply(&mv(k, Target::Cpu(CpuId(0)))).done, 1);
    }
    h.spawn_two();
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    let born: Vec<ThreadKey> = snap
        .threads
        .iter()
        .map(|t| t.key)
        .filter(|k| !keys.contains(k))
        .collect();
    assert_eq!(born.len(), 2);
    for &k in &keys {
        assert_eq!(host.apply(&mv(k, Target::Cpu(CpuId(1)))).done, 1);
    }
    for k in &born {
        assert_eq!(allowed(k.pid, k.tid), CpuSet::single(CpuId(0)));
    }
    host.restore_all();
    for k in keys.iter().chain(&born) {
        assert_eq!(allowed(k.pid, k.tid), online, "{k:?}");
    }
    h.stop();
}

#[test]
fn live_actuator_thread_pinning_itself_to_an_earlier_mask_of_ours_is_left_alone() {
    // See: issue 39, item 5. We move the thread to CPU 1, then to CPU 0; the program then
    // pins it to CPU 1 itself: a mask we set once, not the last one. Its choice wins, now
    // and after we stop.
    let topo = read_topology(&Root::system()).unwrap();
    assert!(topo.cpus().len() >= 2, "this test needs two CPUs");
    let h = Helper::start();
    let key = helper_thread(&h);
    let before = allowed(key.pid, key.tid);
    let mut act = Actuator::new(Root::system());
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(1)))).done, 1);
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
    threadbalance_linux::set_affinity(key.tid, &CpuSet::single(CpuId(1))).unwrap();
    let r = act.apply(&topo, &mv(key, Target::Cpu(CpuId(0))));
    let during = allowed(key.pid, key.tid);
    let report = act.restore_all();
    let after = allowed(key.pid, key.tid);
    threadbalance_linux::set_affinity(key.tid, &before).unwrap();
    h.stop();
    assert_eq!((r.done, r.denied), (0, 1), "{r:?}");
    assert_eq!(during, CpuSet::single(CpuId(1)));
    assert_eq!(after, CpuSet::single(CpuId(1)), "{report:?}");
    assert_eq!(
        report.kept,
        vec![(key, Kept::ProgramChoice(CpuSet::single(CpuId(1))))]
    );
    assert_eq!(report.restored, 0);
}

#[test]
fn live_host_thread_born_pinning_itself_to_a_cpu_one_of_ours_holds_is_left_alone() {
    // See: issue 39, item 5. One sleeping thread is on CPU 1, every other thread (the
    // creator among them) on CPU 0. A thread born of the creator inherits {0} and pins
    // itself to {1} as it starts (a pool pinning its workers): {1} is a mask we hold, but
    // the thread had to migrate to it, so its program chose it. It keeps it after we
    // restore.
    let mut h = Helper::start();
    let online = read_topology(&Root::system()).unwrap().online().clone();
    assert!(online.len() >= 2, "this test needs two CPUs");
    let (mut host, keys) = host_of(&h);
    // The helper's threads were started by the thread that reads its commands (libtest's
    // thread for the helper test), so the youngest is a sleeper, never the creator.
    let a = keys.iter().copied().max_by_key(|k| k.tid).unwrap();
    for &k in &keys {
        let cpu = if k == a { CpuId(1) } else { CpuId(0) };
        assert_eq!(host.apply(&mv(k, Target::Cpu(cpu))).done, 1);
    }
    let line = h.ask("spawn-pinned 1", "pinned");
    let tid = Tid(line.rsplit(' ').next().unwrap().parse().unwrap());
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    assert!(snap.threads.iter().any(|t| t.key.tid == tid));
    let r = host.restore_all();
    let after = allowed(h.pid(), tid);
    let widened: Vec<bool> = keys
        .iter()
        .map(|k| allowed(k.pid, k.tid) == online)
        .collect();
    h.stop();
    assert_eq!(after, CpuSet::single(CpuId(1)), "{r:?}");
    assert_eq!(r.born_pinned.len(), 1, "{r:?}");
    assert_eq!(r.born_pinned[0].tid, tid);
    assert!(widened.iter().all(|&w| w), "{widened:?}");
}

/// A cgroup-v1 cpuset (a child of the root one) holding one thread; the thread goes back
/// to the root cpuset and the cpuset is removed when dropped.
struct Cpuset {
    dir: std::path::PathBuf,
    tid: Tid,
}

impl Cpuset {
    const ROOT: &str = "/sys/fs/cgroup/cpuset";

    fn new(name: &str, cpus: &str, tid: Tid) -> Cpuset {
        let dir = std::path::Path::new(Self::ROOT).join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).expect("a cgroup-v1 cpuset hierarchy (this test needs root)");
        let mems = std::fs::read_to_string(format!("{}/cpuset.mems", Self::ROOT)).unwrap();
        std::fs::write(dir.join("cpuset.mems"), mems.trim()).unwrap();
        let set = Cpuset { dir, tid };
        set.set_cpus(cpus);
        std::fs::write(set.dir.join("tasks"), tid.0.to_string()).unwrap();
        set
    }

    fn set_cpus(&self, cpus: &str) {
        std::fs::write(self.dir.join("cpuset.cpus"), cpus).unwrap();
    }
}

impl Drop for Cpuset {
    fn drop(&mut self) {
        let _ = std::fs::write(format!("{}/tasks", Self::ROOT), self.tid.0.to_string());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[test]
fn live_actuator_mask_narrowed_by_the_cpuset_is_never_taken_for_the_programs() {
    // See: issue 39, item 6. We set {0}; the thread's cpuset narrows to {1} (the kernel
    // shows {1}); the next move must not take that for the program's choice. When the
    // cpuset widens again the kernel gives back {0}, ours, which we put back at the end.
    let topo = read_topology(&Root::system()).unwrap();
    let online = topo.online().clone();
    assert!(online.len() >= 2, "this test needs two CPUs");
    let h = Helper::start();
    let key = helper_thread(&h);
    let all = online.to_string();
    let set = Cpuset::new("tb-choice", &all, key.tid);
    let before = allowed(key.pid, key.tid);
    let mut act = Actuator::new(Root::system());
    assert_eq!(act.apply(&topo, &mv(key, Target::Cpu(CpuId(0)))).done, 1);
    set.set_cpus("1");
    let narrowed = allowed(key.pid, key.tid);
    // {0} ∩ {1} is empty: the kernel refuses, and the thread stays ours.
    act.apply(&topo, &mv(key, Target::Cpu(CpuId(0))));
    let decided = act.decided().count();
    set.set_cpus(&all);
    let widened = allowed(key.pid, key.tid);
    let report = act.restore_all();
    let after = allowed(key.pid, key.tid);
    threadbalance_linux::set_affinity(key.tid, &before).unwrap();
    drop(set);
    h.stop();
    assert_eq!(narrowed, CpuSet::single(CpuId(1)));
    assert_eq!(decided, 0, "the cpuset's doing was taken for the program's");
    assert_eq!(
        widened,
        CpuSet::single(CpuId(0)),
        "the kernel kept our mask"
    );
    assert_eq!(after, before, "{report:?}");
    assert!(report.kept.is_empty(), "{report:?}");
    assert_eq!(report.narrowed, vec![key], "{report:?}");
}
