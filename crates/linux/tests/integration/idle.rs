//! The sampler's idle back-off on a `/proc` tree, and the actuator's start-time checks
//! through kept files on this machine's own threads.

use crate::util::{stat_line, write};
use threadbalance_linux::read::alive::AliveCheck;
use threadbalance_linux::{HostFacts, Root, Sampler, SamplerConfig, read_start_time};
use threadbalance_model::{Nanos, Pid, Snapshot, Tid};

/// One process, 103, one thread, `schedstat` "1 2 3".
fn tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let stat = stat_line(103, "p", 1, 5, 1103, 0);
    write(dir.path(), "proc/103/stat", &stat);
    write(dir.path(), "proc/103/schedstat", "1 2 3\n");
    write(dir.path(), "proc/103/task/103/stat", &stat);
    write(dir.path(), "proc/103/task/103/schedstat", "1 2 3\n");
    dir
}

fn sampler(dir: &tempfile::TempDir, idle_max_age: Nanos) -> Sampler {
    let mut cfg = SamplerConfig::new(HostFacts::TYPICAL);
    cfg.memory_every = None;
    cfg.idle_max_age = idle_max_age;
    Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap()
}

/// The run time the sample at `ms` reports.
fn run_at(s: &mut Sampler, ms: u64) -> u64 {
    let mut snap = Snapshot::default();
    s.sample(Nanos::from_millis(ms), &mut snap).unwrap();
    assert_eq!(snap.threads.len(), 1, "the thread is in every sample");
    snap.threads[0].run.0
}

#[test]
fn sampler_idle_thread_is_read_at_half_its_idle_time_capped() {
    let dir = tree();
    let mut s = sampler(&dir, Nanos::from_millis(16));
    // Read at 0 (first seen: counts as having run), then every 2 ms the thread is idle.
    assert_eq!(run_at(&mut s, 0), 1);
    assert_eq!(run_at(&mut s, 2), 1); // idle 2 ms: wait 1 ms, last read 2 ms ago: read
    assert_eq!(run_at(&mut s, 4), 1); // idle 4: wait 2, last read 2 ago: read
    // It runs now, but idle 6 ms asks for a wait of 3 ms and the last read is 2 ms old:
    // not read, the last sample stands in.
    write(dir.path(), "proc/103/task/103/schedstat", "50 2 4\n");
    assert_eq!(run_at(&mut s, 6), 1);
    // At 8 ms (idle 8: wait 4, last read 4 ago) it is read, and its run is all there.
    assert_eq!(run_at(&mut s, 8), 50);
    // Having run, it is read at every sample again.
    write(dir.path(), "proc/103/task/103/schedstat", "60 2 5\n");
    assert_eq!(run_at(&mut s, 10), 60);
}

#[test]
fn sampler_idle_back_off_never_waits_longer_than_the_cap() {
    let dir = tree();
    let mut s = sampler(&dir, Nanos::from_millis(16));
    // Idle from 0; reads fall at 2, 4, 8, 16, then every 16 ms (idle/2 is capped).
    for ms in (0..=100).step_by(2) {
        run_at(&mut s, ms);
    }
    // The last read was at 96 ms (16, 32, 48, 64, 80, 96); a run at 100 is seen by 112.
    write(dir.path(), "proc/103/task/103/schedstat", "70 2 4\n");
    assert_eq!(run_at(&mut s, 110), 1);
    assert_eq!(run_at(&mut s, 112), 70);
}

#[test]
fn sampler_without_idle_back_off_reads_every_sample() {
    let dir = tree();
    let mut s = sampler(&dir, Nanos::ZERO);
    for ms in (0..=40).step_by(2) {
        assert_eq!(run_at(&mut s, ms), 1);
    }
    write(dir.path(), "proc/103/task/103/schedstat", "50 2 4\n");
    assert_eq!(run_at(&mut s, 42), 50);
}

#[test]
fn alive_check_agrees_with_a_read_by_path_and_sees_an_exit() {
    let root = Root::system();
    let pid = Pid(std::process::id() as i32);
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::spawn(move || {
        tx.send(Tid(nix::unistd::gettid().as_raw())).unwrap();
        let _ = stop_rx.recv();
    });
    let tid: Tid = rx.recv().unwrap();
    let mut check = AliveCheck::new(root.clone());
    let by_path = read_start_time(&root, pid, tid).unwrap();
    assert!(by_path.is_some());
    // The first check keeps a file; the second is answered through it.
    assert_eq!(check.start_time(pid, tid).unwrap(), by_path);
    assert_eq!(check.kept(), 1);
    assert_eq!(check.start_time(pid, tid).unwrap(), by_path);
    stop_tx.send(()).unwrap();
    worker.join().unwrap();
    // Gone: the kept file fails, it is forgotten, and the path says gone too.
    assert_eq!(check.start_time(pid, tid).unwrap(), None);
    assert_eq!(check.kept(), 0);
}
