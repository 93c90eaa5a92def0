//! The shell's half of a [`ThreadsView`]: what `/proc` and the kernel say of each managed
//! thread (its name, its mask) next to what the loop measured ([`ThreadRates`]) and the
//! moves carried out on it. Used by `top --pid` and by the daemon's `threads` answer.

pub use threadbalance_daemon::control::threads::MoveCounts;
use threadbalance_daemon::control::threads::{ThreadInput, ThreadsView};
use threadbalance_model::{CpuId, Level, Nanos, ThreadRates, Topology, Window};

/// The input row of one thread: its rates, its moves, and its name and mask read now. A
/// thread that has just exited keeps an empty name and mask.
pub fn thread_input(rates: &ThreadRates, moves: u64) -> ThreadInput {
    let comm = std::fs::read_to_string(format!(
        "/proc/{}/task/{}/comm",
        rates.key.pid.0, rates.key.tid.0
    ))
    .map(|s| s.trim_end_matches('\n').to_string())
    .unwrap_or_default();
    let mask = threadbalance_linux::affinity_of(rates.key.tid)
        .map(|m| m.to_string())
        .unwrap_or_default();
    ThreadInput {
        pid: rates.key.pid.0,
        tid: rates.key.tid.0,
        comm,
        mask,
        cpu: rates.last_cpu,
        util: rates.util,
        speed: rates.speed,
        lock: rates.lock_exact.then_some(rates.lock),
        moves,
        ipc: rates.ipc,
        mpki: rates.mpki,
    }
}

/// Each online CPU's busy time so far, for a display's [`threadbalance_model::DisplayWindow::push_cpu_busy`],
/// stamped on the hosts' monotonic clock; `None` when `/proc/stat` cannot be read (the
/// display then shows the threads' own sums).
pub fn cpu_reading() -> Option<(Nanos, Vec<(CpuId, Nanos)>)> {
    let facts = threadbalance_linux::read::HostFacts::system().ok()?;
    let busy =
        threadbalance_linux::read::read_cpu_busy(&threadbalance_linux::read::Root::system(), facts)
            .ok()?;
    Some((threadbalance_linux::host::monotonic_now(), busy))
}

/// The view of the threads of several windows (one per managed process) on `topo` at
/// `level`.
pub fn view_of<'a>(
    topo: &Topology,
    level: Level,
    windows: impl IntoIterator<Item = (&'a Window, &'a MoveCounts)>,
) -> ThreadsView {
    let mut longest = 0;
    let mut inputs = Vec::new();
    for (window, moves) in windows {
        longest = longest.max(window.duration().0 / 1_000_000);
        inputs.extend(
            window
                .threads
                .iter()
                .map(|t| thread_input(t, moves.of(&t.key))),
        );
    }
    ThreadsView::build(topo, level, longest, inputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::{
        CpuId, Move, Nanos, Pid, Reason, Target, ThreadKey, ThreadState, Tid,
    };

    fn key(tid: i32) -> ThreadKey {
        ThreadKey {
            pid: Pid(1),
            tid: Tid(tid),
            start_time: 5,
        }
    }

    fn rates(tid: i32) -> ThreadRates {
        ThreadRates {
            key: key(tid),
            util: 0.5,
            latency: 0.0,
            stolen: 0.0,
            blocked: 0.5,
            late: 0.0,
            late_wait: 0.0,
            lock: 0.5,
            lock_exact: false,
            speed: 0.5,
            timeslices: 1,
            voluntary: 0,
            involuntary: 0,
            last_cpu: CpuId(0),
            state: ThreadState::Running,
            appeared: false,
            ipc: None,
            mpki: None,
            progress: None,
        }
    }

    fn moved(tid: i32) -> Move {
        Move {
            thread: key(tid),
            to: Target::Cpu(CpuId(1)),
            why: Reason::Initial,
        }
    }

    #[test]
    fn move_counts_count_per_thread_and_forget_the_vanished() {
        let mut c = MoveCounts::default();
        // Thread 2 moved twice, thread 3 once; thread 4 never.
        c.record(&[moved(2), moved(3)]);
        c.record(&[moved(2)]);
        assert_eq!((c.of(&key(2)), c.of(&key(3)), c.of(&key(4))), (2, 1, 0));
        // Thread 3 is gone from the window: its count goes.
        let window = Window {
            end: Nanos::from_millis(100),
            threads: vec![rates(2)],
            ..Window::default()
        };
        c.keep_only(&window);
        assert_eq!((c.of(&key(2)), c.of(&key(3))), (2, 0));
    }

    #[test]
    fn thread_input_lock_only_when_measured() {
        // The estimate (`blocked`) is not shown as a lock time; a measured one is.
        let estimated = thread_input(&rates(2), 0);
        assert_eq!(estimated.lock, None);
        let mut r = rates(2);
        r.lock_exact = true;
        r.lock = 0.25;
        assert_eq!(thread_input(&r, 3).lock, Some(0.25));
        assert_eq!(thread_input(&r, 3).moves, 3);
    }

    #[test]
    fn thread_input_carries_ipc_and_mpki_when_counted() {
        let plain = thread_input(&rates(2), 0);
        assert_eq!((plain.ipc, plain.mpki), (None, None));
        let mut r = rates(2);
        (r.ipc, r.mpki) = (Some(1.5), Some(2.0));
        let counted = thread_input(&r, 0);
        assert_eq!((counted.ipc, counted.mpki), (Some(1.5), Some(2.0)));
    }
}
