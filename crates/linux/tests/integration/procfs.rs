//! Readers and the sampler on the `/proc` fixture trees.

use crate::util::{fixture_root, stat_line, write};
use threadbalance_linux::{
    HostFacts, LinuxError, Root, Sampler, SamplerConfig, read_numa_balancing, read_process_memory,
    read_threads,
};
use threadbalance_model::{CpuSet, CpuTime, Nanos, NodeId, Pid, Snapshot, ThreadState, Tid};

const FACTS: HostFacts = HostFacts::TYPICAL;

#[test]
fn procfs_weird_comms_are_read_and_statless_task_left_out() {
    let threads = read_threads(&fixture_root("proc/weird-comm"), Pid(4242), &FACTS).unwrap();
    // Task 4245 has no stat (it exited between listing and reading): left out.
    let tids: Vec<i32> = threads.iter().map(|t| t.sample.key.tid.0).collect();
    assert_eq!(tids, [4242, 4243, 4244]);
    let comms: Vec<&str> = threads.iter().map(|t| t.comm.as_str()).collect();
    assert_eq!(comms, ["server", "a) b (c", "x\ny"]);

    let leader = &threads[0].sample;
    assert!(leader.key.is_leader());
    assert_eq!(leader.key.start_time, 98765);
    // 150 and 25 ticks at 100 Hz.
    assert_eq!(leader.utime, Nanos::from_millis(1500));
    assert_eq!(leader.stime, Nanos::from_millis(250));
    // schedstat of tid t is "t*1000+500 t*10 t%97+1".
    let t = &threads[1].sample;
    assert_eq!(
        (t.run, t.wait, t.timeslices),
        (Nanos(4_243_500), Nanos(42_430), 4243 % 97 + 1)
    );
    assert_eq!(threads[2].sample.state, ThreadState::Running);
    assert_eq!(threads[2].sample.last_cpu.0, 1);
    assert_eq!((t.voluntary, t.involuntary), (10, 2));
    assert_eq!(
        threads[1].cpus_allowed,
        Some(CpuSet::parse_list("0-1").unwrap())
    );
}

#[test]
fn procfs_kernel_thread_entry() {
    let threads = read_threads(&fixture_root("proc/kthread"), Pid(2), &FACTS).unwrap();
    assert_eq!(threads.len(), 1);
    assert!(threads[0].stat.is_kernel_thread());
    assert_eq!(threads[0].stat.ppid, Pid(0));
    assert_eq!(threads[0].comm, "kthreadd");
    let mem = read_process_memory(&fixture_root("proc/kthread"), Pid(2), 4096).unwrap();
    assert_eq!(mem.total(), 0);
}

#[test]
fn procfs_missing_process_is_no_such_process() {
    let err = read_threads(&fixture_root("proc/weird-comm"), Pid(99), &FACTS).unwrap_err();
    assert!(
        matches!(err, LinuxError::NoSuchProcess { pid: Pid(99) }),
        "{err:?}"
    );
    let err = read_process_memory(&fixture_root("proc/weird-comm"), Pid(99), 4096).unwrap_err();
    assert!(
        matches!(err, LinuxError::NoSuchProcess { pid: Pid(99) }),
        "{err:?}"
    );
    let err = Sampler::new(
        fixture_root("proc/weird-comm"),
        &[Pid(99)],
        SamplerConfig::new(FACTS),
    )
    .unwrap_err();
    assert!(
        matches!(err, LinuxError::NoSuchProcess { pid: Pid(99) }),
        "{err:?}"
    );
}

#[test]
fn procfs_numa_maps_four_nodes_mixed_page_sizes() {
    let m = read_process_memory(&fixture_root("proc/numa-4n"), Pid(777), 4096).unwrap();
    // The table in fixtures/proc/numa-4n/FIXTURE.md.
    assert_eq!(
        m.bytes_per_node,
        vec![
            (NodeId(0), 4_317_184),
            (NodeId(1), 8_388_608),
            (NodeId(2), 6_291_456),
            (NodeId(3), 6_324_224),
        ]
    );
    assert_eq!(m.pid, Pid(777));
}

#[test]
fn procfs_numa_balancing_flag() {
    assert_eq!(
        read_numa_balancing(&fixture_root("proc/numa-4n")),
        Some(true)
    );
    assert_eq!(read_numa_balancing(&fixture_root("proc/weird-comm")), None);
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "proc/sys/kernel/numa_balancing", "0\n");
    assert_eq!(read_numa_balancing(&Root::new(dir.path())), Some(false));
}

#[test]
fn procfs_sampler_fills_sorted_snapshot_and_memory_every_interval() {
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.read_status = true;
    let mut s = Sampler::new(fixture_root("proc/weird-comm"), &[Pid(4242)], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::from_secs(1), &mut snap).unwrap();
    assert_eq!(snap.at, Nanos::from_secs(1));
    // Run time and wait from `schedstat`: a queued thread's wait may come late.
    assert!(snap.waits_late);
    let tids: Vec<i32> = snap.threads.iter().map(|t| t.key.tid.0).collect();
    assert_eq!(tids, [4242, 4243, 4244]);
    assert_eq!(snap.threads[1].run, Nanos(4_243_500));
    assert_eq!(
        (snap.threads[1].voluntary, snap.threads[1].involuntary),
        (10, 2)
    );
    assert_eq!(s.tracked_threads(), 3);
    // Memory is due on the first sample: 4 + 256 pages of 4 KiB on node 0.
    assert_eq!(snap.memory.len(), 1);
    assert_eq!(snap.memory[0].on_node(NodeId(0)), 260 * 4096);
    // 4 s later it is not due (default every 5 s); 5 s after the first it is.
    s.sample(Nanos::from_secs(5), &mut snap).unwrap();
    assert!(snap.memory.is_empty());
    assert_eq!(snap.threads.len(), 3);
    s.sample(Nanos::from_secs(6), &mut snap).unwrap();
    assert_eq!(snap.memory.len(), 1);
}

#[test]
fn procfs_sampler_reopen_mode_gives_the_same_samples() {
    let root = fixture_root("proc/numa-4n");
    let mut kept = Sampler::new(root.clone(), &[Pid(777)], SamplerConfig::new(FACTS)).unwrap();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.keep_files_open = false;
    let mut reopened = Sampler::new(root, &[Pid(777)], cfg).unwrap();
    let (mut a, mut b) = (Snapshot::default(), Snapshot::default());
    for t in 0..3 {
        kept.sample(Nanos::from_secs(t), &mut a).unwrap();
        reopened.sample(Nanos::from_secs(t), &mut b).unwrap();
        assert_eq!(a, b);
    }
    assert_eq!(a.threads.len(), 2);
}

#[test]
fn procfs_sampler_follows_children_listed_and_drops_exited_ones() {
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.follow_children = true;
    let mut s = Sampler::new(fixture_root("proc/weird-comm"), &[Pid(4242)], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    // The leader's `children` lists 4250, which has no directory: adopted, then dropped.
    assert_eq!(s.pids(), [Pid(4242)]);
    assert_eq!(snap.threads.len(), 3);
}

/// A process tree without `children` files: 100 → 101 → 102, and 103 unrelated.
fn tree_without_children_files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (pid, ppid) in [(100, 1), (101, 100), (102, 101), (103, 1)] {
        let stat = stat_line(pid, "p", ppid, 5, 1000 + pid as u64, 0);
        write(dir.path(), &format!("proc/{pid}/stat"), &stat);
        write(dir.path(), &format!("proc/{pid}/schedstat"), "1 2 3\n");
        write(dir.path(), &format!("proc/{pid}/task/{pid}/stat"), &stat);
        write(
            dir.path(),
            &format!("proc/{pid}/task/{pid}/schedstat"),
            "1 2 3\n",
        );
    }
    write(dir.path(), "proc/self", "not a process");
    dir
}

#[test]
fn procfs_sampler_finds_descendants_by_parent_when_no_children_files() {
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.follow_children = true;
    cfg.memory_every = None;
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(100)], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(s.pids(), [Pid(100), Pid(101), Pid(102)]);
    let tids: Vec<Tid> = snap.threads.iter().map(|t| t.key.tid).collect();
    assert_eq!(tids, [Tid(100), Tid(101), Tid(102)]);

    // The child exits: it is dropped, the others stay; once all are gone, sampling fails.
    std::fs::remove_dir_all(dir.path().join("proc/101")).unwrap();
    s.sample(Nanos(1), &mut snap).unwrap();
    assert_eq!(s.pids(), [Pid(100), Pid(102)]);
    for pid in [100, 102] {
        std::fs::remove_dir_all(dir.path().join(format!("proc/{pid}"))).unwrap();
    }
    let err = s.sample(Nanos(2), &mut snap).unwrap_err();
    assert!(
        matches!(err, LinuxError::NoSuchProcess { pid: Pid(100) }),
        "{err:?}"
    );
    assert_eq!(s.tracked_threads(), 0);
}

#[test]
fn procfs_sampler_new_start_time_is_a_new_thread() {
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(snap.threads[0].key.start_time, 1103);
    // The tid is reused by a thread that started later, with counters of its own; pread on
    // the kept fd of a regular file sees the new text, as /proc would show the new thread
    // after reopening.
    write(
        dir.path(),
        "proc/103/task/103/stat",
        &stat_line(103, "p", 1, 0, 5000, 0),
    );
    write(dir.path(), "proc/103/task/103/schedstat", "0 0 0\n");
    s.sample(Nanos::from_millis(20), &mut snap).unwrap();
    assert_eq!(snap.threads[0].key.start_time, 5000);
    assert_eq!(snap.threads[0].utime, Nanos::ZERO);
}

#[test]
fn procfs_sampler_malformed_stat_names_the_file() {
    let dir = tree_without_children_files();
    write(dir.path(), "proc/103/task/103/stat", "103 (p) S 1 2");
    let mut s = Sampler::new(
        Root::new(dir.path()),
        &[Pid(103)],
        SamplerConfig::new(FACTS),
    )
    .unwrap();
    let err = s.sample(Nanos::ZERO, &mut Snapshot::default()).unwrap_err();
    assert!(matches!(err, LinuxError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("proc/103/task/103/stat"), "{err}");
}

#[test]
fn procfs_sampler_reads_machine_cpu_time_only_when_asked_and_drops_a_bad_file() {
    let dir = tree_without_children_files();
    write(
        dir.path(),
        "proc/stat",
        "cpu  100 5 50 900 1 2 3 40 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n",
    );
    let mut s = Sampler::new(
        Root::new(dir.path()),
        &[Pid(103)],
        SamplerConfig::new(FACTS),
    )
    .unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(snap.cpu_time, None);
    s.read_steal();
    s.sample(Nanos(1), &mut snap).unwrap();
    assert_eq!(
        snap.cpu_time,
        Some(CpuTime {
            busy: 100 + 5 + 50 + 2 + 3,
            steal: 40
        })
    );
    // The kept file is read again from the start: the new counts show.
    write(dir.path(), "proc/stat", "cpu  200 5 50 900 1 2 3 41 0 0\n");
    s.sample(Nanos(2), &mut snap).unwrap();
    assert_eq!(snap.cpu_time.map(|c| (c.busy, c.steal)), Some((260, 41)));
    // Another sampler reads it for this tick (a daemon group's first member): left out,
    // and read again once that is no longer so.
    s.machine_time_elsewhere(true);
    s.sample(Nanos(2), &mut snap).unwrap();
    assert_eq!((snap.cpu_time, snap.threads.len()), (None, 1));
    s.machine_time_elsewhere(false);
    s.sample(Nanos(2), &mut snap).unwrap();
    assert_eq!(snap.cpu_time.map(|c| c.busy), Some(260));
    // A malformed file is no error: the threads are still sampled, without CPU time.
    write(dir.path(), "proc/stat", "cpu  200 x\n");
    s.sample(Nanos(3), &mut snap).unwrap();
    assert_eq!((snap.cpu_time, snap.threads.len()), (None, 1));
}

#[test]
fn procfs_sampler_carries_stat_of_threads_that_did_not_run() {
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    let mut lazy = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg.clone()).unwrap();
    cfg.stat_every_sample = true;
    let mut eager = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap();
    let (mut a, mut b) = (Snapshot::default(), Snapshot::default());
    lazy.sample(Nanos::ZERO, &mut a).unwrap();
    eager.sample(Nanos::ZERO, &mut b).unwrap();
    assert_eq!(a.threads[0].last_cpu.0, 0);
    // stat now says CPU 1 but schedstat ("1 2 3") did not move: by default the thread did
    // not run, so its last CPU is carried over; the eager sampler reads it.
    write(
        dir.path(),
        "proc/103/task/103/stat",
        &stat_line(103, "p", 1, 5, 1103, 1),
    );
    lazy.sample(Nanos::from_millis(20), &mut a).unwrap();
    eager.sample(Nanos::from_millis(20), &mut b).unwrap();
    assert_eq!(a.threads[0].last_cpu.0, 0);
    assert_eq!(b.threads[0].last_cpu.0, 1);
    // Once it has run (one more timeslice), stat is read again.
    write(dir.path(), "proc/103/task/103/schedstat", "9 2 4\n");
    lazy.sample(Nanos::from_millis(40), &mut a).unwrap();
    assert_eq!(a.threads[0].last_cpu.0, 1);
    assert_eq!((a.threads[0].run, a.threads[0].timeslices), (Nanos(9), 4));
}

#[test]
fn procfs_sampler_rereads_stat_of_a_running_thread_only_once_it_is_stat_max_age_old() {
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    cfg.stat_max_age = Nanos::from_millis(10);
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap();
    let mut snap = Snapshot::default();
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(snap.threads[0].last_cpu.0, 0);
    // It ran (schedstat moved) and now last ran on CPU 1.
    write(
        dir.path(),
        "proc/103/task/103/stat",
        &stat_line(103, "p", 1, 5, 1103, 1),
    );
    write(dir.path(), "proc/103/task/103/schedstat", "9 2 4\n");
    // 2 ms later (a fast balancer's tick): schedstat is fresh, stat is carried over.
    s.sample(Nanos::from_millis(2), &mut snap).unwrap();
    assert_eq!(
        (snap.threads[0].run, snap.threads[0].last_cpu.0),
        (Nanos(9), 0)
    );
    // 10 ms after the last stat read, it is read again.
    write(dir.path(), "proc/103/task/103/schedstat", "19 2 5\n");
    s.sample(Nanos::from_millis(10), &mut snap).unwrap();
    assert_eq!(
        (snap.threads[0].run, snap.threads[0].last_cpu.0),
        (Nanos(19), 1)
    );
}

#[test]
fn procfs_sampler_reads_switch_counts_no_staler_than_status_max_age_and_only_after_a_run() {
    let dir = tree_without_children_files();
    let status = |v: u64, inv: u64| {
        format!("Name:\tp\nvoluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t{inv}\n")
    };
    write(dir.path(), "proc/103/task/103/status", &status(10, 2));
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap();
    s.read_switches(Nanos::from_millis(10));
    let mut snap = Snapshot::default();
    let counts = |snap: &Snapshot| (snap.threads[0].voluntary, snap.threads[0].involuntary);
    // First sight: read.
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(counts(&snap), (10, 2));
    // It ran and switched; 2 ms later its counts are younger than 10 ms: carried.
    write(dir.path(), "proc/103/task/103/schedstat", "9 2 4\n");
    write(dir.path(), "proc/103/task/103/status", &status(15, 3));
    s.sample(Nanos::from_millis(2), &mut snap).unwrap();
    assert_eq!(counts(&snap), (10, 2));
    // 10 ms after the last read, and it ran since: read again.
    write(dir.path(), "proc/103/task/103/schedstat", "19 2 5\n");
    s.sample(Nanos::from_millis(10), &mut snap).unwrap();
    assert_eq!(counts(&snap), (15, 3));
    // 20 ms later, but it has not run since (schedstat unchanged): nothing to read, and
    // the counts it had are kept (a thread that does not run cannot switch).
    write(dir.path(), "proc/103/task/103/status", &status(99, 99));
    s.sample(Nanos::from_millis(30), &mut snap).unwrap();
    assert_eq!(counts(&snap), (15, 3));
    // Once it runs again, the file is read.
    write(dir.path(), "proc/103/task/103/schedstat", "29 2 6\n");
    s.sample(Nanos::from_millis(31), &mut snap).unwrap();
    assert_eq!(counts(&snap), (99, 99));
}

#[test]
fn procfs_sampler_spreads_status_reads_over_samples_when_capped() {
    // One process, 16 threads (tids 300–315), at most 8 `status` reads a sample: a stride
    // of ⌈16 / 8⌉ = 2, so a thread's turn comes when (tid + sample generation) is even.
    let dir = tempfile::tempdir().unwrap();
    let status = |v: u64| {
        format!("Name:\tp\nvoluntary_ctxt_switches:\t{v}\nnonvoluntary_ctxt_switches:\t0\n")
    };
    let stat = stat_line(300, "p", 1, 5, 1300, 0);
    write(dir.path(), "proc/300/stat", &stat);
    write(dir.path(), "proc/300/schedstat", "1 2 3\n");
    for tid in 300..316 {
        let stat = stat_line(tid, "p", 1, 5, 1000 + tid as u64, 0);
        write(dir.path(), &format!("proc/300/task/{tid}/stat"), &stat);
        write(
            dir.path(),
            &format!("proc/300/task/{tid}/schedstat"),
            "1 2 3\n",
        );
        write(
            dir.path(),
            &format!("proc/300/task/{tid}/status"),
            &status(1),
        );
    }
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    cfg.read_status = true;
    cfg.status_per_sample = Some(8);
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(300)], cfg).unwrap();
    let mut snap = Snapshot::default();
    let updated = |snap: &Snapshot, v: u64| {
        snap.threads
            .iter()
            .filter(|t| t.voluntary == v)
            .map(|t| t.key.tid.0)
            .collect::<Vec<_>>()
    };
    // First sight: every thread read.
    s.sample(Nanos::ZERO, &mut snap).unwrap();
    assert_eq!(updated(&snap, 1).len(), 16);
    // Every thread ran and switched; each of the next two samples reads half of them,
    // the other half the next time, and none twice.
    for (i, run) in [(1, 9), (2, 19)] {
        for tid in 300..316 {
            write(
                dir.path(),
                &format!("proc/300/task/{tid}/schedstat"),
                &format!("{run} 2 {}\n", 3 + i),
            );
            write(
                dir.path(),
                &format!("proc/300/task/{tid}/status"),
                &status(1 + i),
            );
        }
        s.sample(Nanos::from_millis(i), &mut snap).unwrap();
        let read = updated(&snap, 1 + i);
        assert_eq!(read.len(), 8, "sample {i}: {read:?}");
        let parity = read[0] % 2;
        assert!(read.iter().all(|t| t % 2 == parity), "sample {i}: {read:?}");
    }
    // After both, every thread has been read once since the first sight: the ones read
    // at sample 1 show 2 (not read at 2), the others 3.
    assert_eq!(updated(&snap, 2).len() + updated(&snap, 3).len(), 16);
}

#[test]
fn procfs_sampler_lists_again_when_the_task_count_changes() {
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    let mut s = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg).unwrap();
    let mut snap = Snapshot::default();
    let tids = |snap: &Snapshot| snap.threads.iter().map(|t| t.key.tid.0).collect::<Vec<_>>();
    s.sample(Nanos(0), &mut snap).unwrap();
    s.sample(Nanos(1), &mut snap).unwrap();
    assert_eq!(tids(&snap), [103]);
    // A new task directory changes the directory's link count: listed at once.
    write(
        dir.path(),
        "proc/103/task/104/stat",
        &stat_line(104, "p", 1, 0, 2000, 0),
    );
    write(dir.path(), "proc/103/task/104/schedstat", "5 0 1\n");
    s.sample(Nanos(2), &mut snap).unwrap();
    assert_eq!(tids(&snap), [103, 104]);
    std::fs::remove_dir_all(dir.path().join("proc/103/task/104")).unwrap();
    s.sample(Nanos(3), &mut snap).unwrap();
    assert_eq!(tids(&snap), [103]);
    assert_eq!(s.tracked_threads(), 1);
}

/// A run-time source that answers for every thread, with the same counts each time.
#[derive(Debug)]
struct AnswersAll;

impl threadbalance_linux::runcount::RunCounters for AnswersAll {
    fn name(&self) -> &'static str {
        "answers for all"
    }
    fn refresh(&mut self, _pids: &[Pid]) -> Result<bool, LinuxError> {
        Ok(false)
    }
    fn get(&self, _tid: Tid) -> Option<threadbalance_linux::runcount::Counted> {
        Some(threadbalance_linux::runcount::Counted {
            sched: threadbalance_linux::parse::SchedStat {
                run: Nanos(7),
                wait: Nanos(1),
                timeslices: 2,
            },
            last_cpu: threadbalance_model::CpuId(0),
            state: ThreadState::Running,
            voluntary: 0,
            involuntary: 0,
        })
    }
    fn seed(&mut self, _tid: Tid, _sample: &threadbalance_model::Sample) {}
    fn forget(&mut self, _tid: Tid) {}
}

#[test]
fn procfs_sampler_vouches_for_a_counted_thread_by_its_kept_schedstat() {
    // A move checks twice that the tid still names the thread it sampled. For a thread the
    // counters answer for, `schedstat` is never read for its counts; before its moves it is
    // opened (`keep_schedstat`), so that those checks read it rather than `stat`.
    let dir = tree_without_children_files();
    let mut cfg = SamplerConfig::new(FACTS);
    cfg.memory_every = None;
    let sampler = |cfg: &SamplerConfig| {
        let mut s = Sampler::new(Root::new(dir.path()), &[Pid(103)], cfg.clone()).unwrap();
        s.set_counters(Box::new(AnswersAll));
        let mut snap = Snapshot::default();
        s.sample(Nanos::ZERO, &mut snap).unwrap();
        assert_eq!(s.counted_threads(), 1);
        // The counts are the counters', not `schedstat`'s ("1 2 3").
        assert_eq!(
            (snap.threads[0].run, snap.threads[0].timeslices),
            (Nanos(7), 2)
        );
        (s, snap.threads[0].key.start_time)
    };
    let (mut s, start) = sampler(&cfg);
    let (mut late, _) = sampler(&cfg);
    assert_eq!(s.kept_start_time(Pid(103), Tid(103)), Some(start));
    s.keep_schedstat(Pid(103), Tid(103));
    // `stat` now reads empty: the kept `schedstat` still vouches for the thread.
    write(dir.path(), "proc/103/task/103/stat", "");
    assert_eq!(s.kept_start_time(Pid(103), Tid(103)), Some(start));
    // Opened only now, while the kept `stat` does not read, `schedstat` is not kept: it
    // cannot be shown to name the thread sampled.
    late.keep_schedstat(Pid(103), Tid(103));
    assert_eq!(late.kept_start_time(Pid(103), Tid(103)), None);
    // With `schedstat` empty too, nothing vouches: the caller reads `/proc` by path.
    write(dir.path(), "proc/103/task/103/schedstat", "");
    assert_eq!(s.kept_start_time(Pid(103), Tid(103)), None);
}

#[test]
fn procfs_sampler_reads_hardware_counters_only_when_given_a_source() {
    use threadbalance_linux::perf::FakeCounterSource;
    use threadbalance_model::{HwCounters, Window};
    let dir = tree_without_children_files();
    let mut s = Sampler::new(
        Root::new(dir.path()),
        &[Pid(103)],
        SamplerConfig::new(FACTS),
    )
    .unwrap();
    let mut prev = Snapshot::default();
    s.sample(Nanos::ZERO, &mut prev).unwrap();
    assert_eq!(prev.threads[0].counters, None);
    assert_eq!(s.hw_counters_name(), None);
    // 3000 instructions, 2000 cycles and 6 LLC misses at every read: IPC 1.5, MPKI 2.
    s.set_hw_counters(Box::new(FakeCounterSource {
        step: HwCounters {
            instructions: 3000,
            cycles: 2000,
            llc_misses: 6,
        },
    }));
    s.sample(Nanos::from_millis(10), &mut prev).unwrap();
    assert_eq!(prev.threads[0].counters.map(|c| c.cycles), Some(2000));
    assert_eq!(s.hw_counted_threads(), 1);
    let mut cur = Snapshot::default();
    s.sample(Nanos::from_millis(20), &mut cur).unwrap();
    assert_eq!(cur.threads[0].counters.map(|c| c.cycles), Some(4000));
    let mut w = Window::default();
    w.update(&prev, &cur);
    let t = &w.threads[0];
    assert_eq!((t.ipc, t.mpki), (Some(1.5), Some(2.0)));
    // Without counters in the earlier sample of the thread, the window has none.
    prev.threads[0].counters = None;
    w.update(&prev, &cur);
    assert_eq!((w.threads[0].ipc, w.threads[0].mpki), (None, None));
}
