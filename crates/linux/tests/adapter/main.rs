//! The shared control loop (`threadbalance_manage::manage`) on the real Linux adapter, with
//! no command to start: the test process manages itself. It starts worker threads, attaches
//! a [`LinuxAdapter`] to its own pid, and runs the loop with a small policy that pins each
//! worker to a CPU and rotates them every tick; the loop is stopped by a signal the test
//! hands it (as Ctrl-C stops `attach`). Then every thread of the process must be on the
//! mask it had before.
//!
//! ```text
//!  workers (W threads: a little work, then a 2 ms sleep, until told to stop)
//!  LinuxAdapter::new(topo, Target::Attached { pid: own pid }, …)
//!  manage(adapter, topo, Rotate, OnSignal::Stop, take_signal, on_tick) ─► restore_all
//!     tick k: worker i ─► CPU (i + k) mod n          after K ticks: take_signal = SIGTERM
//!  every thread's mask now == its mask before
//! ```
//!
//! This is a test binary of its own: the loop samples every thread of the process, so no
//! other test may run threads in it meanwhile; the tests here take [`SERIAL`] for the same
//! reason. Nothing here measures time.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use threadbalance_linux::adapter::{LinuxAdapter, Target};
use threadbalance_linux::{Root, affinity_of, read_topology};
use threadbalance_manage::{Ended, LoopError, OnSignal};
use threadbalance_model::{
    CpuId, CpuSet, Move, Nanos, Pid, Plan, Reason, Target as To, Tid, Topology, Window,
};
use threadbalance_policy::Policy;

/// One test at a time: each manages the whole process.
static SERIAL: Mutex<()> = Mutex::new(());

const SIGTERM: i32 = 15;

fn own_pid() -> Pid {
    Pid(std::process::id() as i32)
}

/// Every thread of this process with its mask.
fn masks() -> BTreeMap<Tid, CpuSet> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|tid| Some((Tid(tid), affinity_of(Tid(tid)).ok()?)))
        .collect()
}

/// The machine cut down to the CPUs this process may use (what `attach` does).
/// The adapter attached to this test process, not following children.
fn attach_own(topo: &Topology, dry_run: bool) -> LinuxAdapter {
    LinuxAdapter::new(
        topo,
        Target::Attached {
            pid: own_pid(),
            follow_children: false,
        },
        dry_run,
        threadbalance_policy::Needs::NOTHING,
        None,
    )
    .unwrap()
}

fn usable_topology() -> Topology {
    let topo = read_topology(&Root::system()).unwrap();
    let mine = affinity_of(Tid(own_pid().0)).unwrap();
    topo.restricted_to(&mine.intersection(topo.online()))
        .unwrap()
}

/// Threads that do a little work, sleep 2 ms, and again, until stopped.
struct Workers {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
    tids: Arc<Mutex<BTreeSet<Tid>>>,
}

impl Workers {
    fn new() -> Workers {
        Workers {
            stop: Arc::new(AtomicBool::new(false)),
            handles: Vec::new(),
            tids: Arc::new(Mutex::new(BTreeSet::new())),
        }
    }

    /// Starts one worker that runs until stopped, or for `rounds` rounds when given.
    fn start(&mut self, rounds: Option<u32>) -> Tid {
        let (tx, rx) = std::sync::mpsc::channel();
        let stop = self.stop.clone();
        self.handles.push(std::thread::spawn(move || {
            tx.send(Tid(nix::unistd::gettid().as_raw())).unwrap();
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) && rounds.is_none_or(|r| n < r) {
                let mut x = 0u64;
                for i in 0..1_000u64 {
                    x = x.wrapping_add(std::hint::black_box(i));
                }
                std::hint::black_box(x);
                std::thread::sleep(Duration::from_millis(2));
                n += 1;
            }
        }));
        let tid = rx.recv().unwrap();
        self.tids.lock().unwrap().insert(tid);
        tid
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles {
            h.join().unwrap();
        }
    }
}

/// The test policy: pins each worker (and only workers) to one CPU, rotating by one CPU a
/// tick, and looks again after 20 ms.
struct Rotate {
    cpus: Vec<CpuId>,
    workers: Arc<Mutex<BTreeSet<Tid>>>,
    ticks: usize,
}

impl Policy for Rotate {
    fn name(&self) -> &'static str {
        "rotate"
    }

    fn decide(&mut self, _topo: &Topology, window: &Window) -> Plan {
        let workers = self.workers.lock().unwrap();
        let moves = window
            .threads
            .iter()
            .filter(|t| workers.contains(&t.key.tid))
            .enumerate()
            .map(|(i, t)| Move {
                thread: t.key,
                to: To::Cpu(self.cpus[(i + self.ticks) % self.cpus.len()]),
                why: Reason::Pin,
            })
            .collect();
        self.ticks += 1;
        Plan {
            slices: Vec::new(),
            moves,
            next_in: Nanos::from_millis(20),
            note: None,
        }
    }
}

#[test]
fn manage_own_threads_rotated_then_stopped_restores_every_mask() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = usable_topology();
    let cpus: Vec<CpuId> = topo.cpus().iter().map(|c| c.id).collect();
    // Pinning to one CPU changes a mask only where the process may use two or more.
    assert!(cpus.len() >= 2, "this test needs two usable CPUs: {cpus:?}");
    let mut workers = Workers::new();
    let steady: Vec<Tid> = (0..3).map(|_| workers.start(None)).collect();
    // One worker ends by itself after ~10 rounds (~20 ms), while it is managed.
    workers.start(Some(10));
    let before = masks();
    let mut policy = Rotate {
        cpus: cpus.clone(),
        workers: workers.tids.clone(),
        ticks: 0,
    };
    let mut host = attach_own(&topo, false);
    let ticks = Cell::new(0usize);
    let pinned_seen = Cell::new(0usize);
    let born: Cell<Option<Tid>> = Cell::new(None);
    let mut take = || (ticks.get() >= 8).then_some(SIGTERM);
    let (restored, ended) = threadbalance_manage::manage(
        &mut host,
        &topo,
        &mut policy,
        OnSignal::Stop,
        &mut take,
        &mut |_window, tick| {
            ticks.set(ticks.get() + 1);
            // After a tick that moved the steady workers, each runs on exactly one CPU.
            if tick.applied.done > 0
                && steady
                    .iter()
                    .all(|&t| affinity_of(t).is_ok_and(|m| m.len() == 1))
            {
                pinned_seen.set(pinned_seen.get() + 1);
            }
            // A thread born while the process is managed is picked up and moved too.
            if ticks.get() == 3 {
                born.set(Some(workers.start(None)));
            }
        },
    );
    let after = masks();
    workers.stop();
    assert_eq!(ended.unwrap(), Ended::Signal(SIGTERM));
    assert_eq!(ticks.get(), 8);
    assert!(
        pinned_seen.get() >= 2,
        "pinned after {} ticks",
        pinned_seen.get()
    );
    assert!(born.get().is_some());
    assert_eq!(restored.failures().count(), 0, "{restored:?}");
    assert!(restored.unreadable.is_empty());
    // 3 steady workers and the one born later were moved at least once each.
    assert!(restored.restored >= 4, "{restored:?}");
    // Every thread alive before and after is back on its mask, and the one born while
    // managed has its parent's (the main thread's, never moved).
    for (tid, mask) in &before {
        if let Some(now) = after.get(tid) {
            assert_eq!(now, mask, "thread {tid}");
        }
    }
    let main_mask = &before[&Tid(nix::unistd::gettid().as_raw())];
    assert_eq!(&after[&born.get().unwrap()], main_mask);
    for t in &steady {
        assert_eq!(after.get(t), before.get(t), "worker {t}");
    }
}

#[test]
fn manage_own_threads_in_dry_run_changes_no_mask() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = usable_topology();
    let cpus: Vec<CpuId> = topo.cpus().iter().map(|c| c.id).collect();
    let mut workers = Workers::new();
    let tids: Vec<Tid> = (0..2).map(|_| workers.start(None)).collect();
    let before = masks();
    let mut policy = Rotate {
        cpus,
        workers: workers.tids.clone(),
        ticks: 0,
    };
    let mut host = attach_own(&topo, true);
    let ticks = Cell::new(0usize);
    let changed = Cell::new(false);
    let mut take = || (ticks.get() >= 4).then_some(SIGTERM);
    let (restored, ended) = threadbalance_manage::manage(
        &mut host,
        &topo,
        &mut policy,
        OnSignal::Stop,
        &mut take,
        &mut |_window, tick| {
            ticks.set(ticks.get() + 1);
            // The policy asked for moves (2 workers a tick); the adapter made none.
            assert_eq!(tick.moves, 2);
            changed
                .set(changed.get() || tids.iter().any(|&t| affinity_of(t).unwrap() != before[&t]));
        },
    );
    workers.stop();
    assert_eq!(ended.unwrap(), Ended::Signal(SIGTERM));
    assert!(!changed.get());
    assert_eq!(restored.restored, 0);
}

#[test]
fn manage_own_threads_panic_in_the_loop_still_restores_every_mask() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = usable_topology();
    let cpus: Vec<CpuId> = topo.cpus().iter().map(|c| c.id).collect();
    assert!(cpus.len() >= 2, "this test needs two usable CPUs: {cpus:?}");
    let mut workers = Workers::new();
    let tids: Vec<Tid> = (0..2).map(|_| workers.start(None)).collect();
    let before = masks();
    let mut policy = Rotate {
        cpus,
        workers: workers.tids.clone(),
        ticks: 0,
    };
    let mut host = attach_own(&topo, false);
    let ticks = Cell::new(0usize);
    let mut never = || None;
    let (restored, ended) = threadbalance_manage::manage(
        &mut host,
        &topo,
        &mut policy,
        OnSignal::Stop,
        &mut never,
        &mut |_window, _tick| {
            ticks.set(ticks.get() + 1);
            if ticks.get() == 3 {
                panic!("on purpose after 3 ticks");
            }
        },
    );
    let after: Vec<CpuSet> = tids.iter().map(|&t| affinity_of(t).unwrap()).collect();
    workers.stop();
    match ended {
        Err(LoopError::Panic(what)) => assert!(what.contains("on purpose"), "{what}"),
        other => panic!("expected a panic, got {other:?}"),
    }
    // Both workers were pinned by ticks 1–3 and are back on their masks.
    assert!(restored.restored >= 2, "{restored:?}");
    assert_eq!(restored.failures().count(), 0);
    for (t, now) in tids.iter().zip(&after) {
        assert_eq!(now, &before[t], "worker {t}");
    }
}

#[test]
fn adapter_takes_a_policys_watching_budget_but_never_lowers_it_or_overrides_the_operators() {
    // No thread is moved (a dry run): only the pacer's share of one core is read back.
    use threadbalance_model::pace::BUDGET;
    use threadbalance_policy::Host;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = usable_topology();
    let attached = || attach_own(&topo, true);
    let mut host = attached();
    assert_eq!(host.cpu_budget(), (BUDGET, false));
    host.watch_budget(Some(0.025));
    assert_eq!(host.cpu_budget(), (0.025, false));
    // Under the default: the default; and back to it when the policy no longer asks.
    host.watch_budget(Some(0.001));
    assert_eq!(host.cpu_budget().0, BUDGET);
    host.watch_budget(None);
    assert_eq!(host.cpu_budget().0, BUDGET);
    assert_eq!(host.watch_budget_max(), 0.025);
    // An operator's whole budget (`--cpu-budget 5`) stands.
    let mut host = attached();
    host.set_cpu_budget(0.05);
    host.watch_budget(Some(0.5));
    assert_eq!(host.cpu_budget(), (0.05, true));
    assert_eq!(host.watch_budget_max(), 0.05);
}

#[test]
fn adapter_plan_of_slices_alone_is_applied() {
    // See: issue 38, item 5. A round that stops a rotation may give the threads back the
    // kernel's slice and move nothing: the adapter must apply such a plan. On a kernel
    // or a process that cannot set slices the change is counted skipped; either way it
    // is counted, and no mask changes.
    use threadbalance_model::{SliceChange, Snapshot};
    use threadbalance_policy::Host;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let topo = usable_topology();
    let mut workers = Workers::new();
    let tid = workers.start(None);
    let before = masks();
    let mut host = attach_own(&topo, false);
    let mut snap = Snapshot::default();
    host.sample(&mut snap).unwrap();
    let key = snap.threads.iter().find(|s| s.key.tid == tid).unwrap().key;
    let slices_only = |slice| Plan {
        slices: vec![SliceChange { thread: key, slice }],
        ..Plan::default()
    };
    let report = host.apply(&slices_only(Some(Nanos::from_micros(500))));
    assert_eq!(report.done + report.unchanged + report.denied, 0);
    let given = host.slice_counts();
    assert_eq!(given.set + given.skipped, 1, "{given:?}");
    host.apply(&slices_only(None));
    let back = host.slice_counts();
    assert_eq!(back.restored, given.set, "{back:?}");
    let restored = host.restore_all();
    assert_eq!(restored.failures().count(), 0);
    workers.stop();
    let after = masks();
    assert_eq!(after.get(&tid), None, "the worker has exited");
    for (t, mask) in &after {
        assert_eq!(Some(mask), before.get(t), "thread {t}");
    }
}
