//! Two snapshots make a window: what each thread did between them, as rates.
//!
//! Over a window of length Δ, for each thread present at both ends:
//!
//! | rate | formula | source |
//! |---|---|---|
//! | `util` | run ns / Δ (falls back to (utime + stime) / Δ when schedstat is absent) | schedstat field 1 |
//! | `latency` | run-queue wait ns / Δ (Tumbler's "thread latency") | schedstat field 2 |
//! | `stolen` | util × steal ÷ busy of the machine's CPUs over Δ (0 unless measured) | `/proc/stat` |
//! | `blocked` | 1 − util − stolen − latency, at least 0 | derived |
//! | `lock` | lock-wait ns / Δ when a probe measures it, else `blocked` (an estimate) | probe or derived |
//! | `speed` | run ns / Δ: the speed balancing paper's exec time over wall time | schedstat |
//!
//! A thread seen only at the end *appeared* (its counters started at zero within the window,
//! so its rates are its counters over Δ); a thread seen only at the start *vanished*. Rates
//! are clamped to `[0, 1]` since clock ticks round.
//!
//! The window reuses its buffers, so updating it every few milliseconds does not allocate
//! once the thread count is stable.

use crate::{
    CpuId, Level, Nanos, ProcessMemory, Sample, Snapshot, ThreadKey, ThreadState, Topology,
    WakeEdge, coefficient_of_variation, mean,
};
use serde::Serialize;

/// What one thread did over a window.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ThreadRates {
    /// Which thread.
    pub key: ThreadKey,
    /// Fraction of the window it ran on a CPU.
    pub util: f64,
    /// Fraction of the window it waited on a run queue.
    pub latency: f64,
    /// Fraction of the window it was on a CPU that the hypervisor took: the run time
    /// leaves that out, and neither is it a run-queue wait. Estimated as `util` times the
    /// machine's stolen over busy time in the window ([`Snapshot::cpu_time`]); 0 when the
    /// host did not measure it. On a VM whose host is busy this is several percent of a
    /// running thread's time, which would otherwise read as blocked.
    pub stolen: f64,
    /// Fraction of the window it was neither running nor runnable (sleeping, blocked).
    pub blocked: f64,
    /// Time the counters reported in this window beyond its length, as a fraction of it:
    /// run time or run-queue wait the kernel brought up to date only now. `schedstat`
    /// advances a running thread's run time when its CPU's clock is next updated (a tick,
    /// a switch, a wake-up there) and adds a queued thread's wait only when it runs again
    /// or leaves the queue (`sched_info_arrive`, `sched_info_dequeue`). So a thread that
    /// waits behind another for a slice shows neither run time nor wait over the windows
    /// it waits, which read it as blocked, and then all of its wait at once in a window
    /// too short to hold it. Taking `late` off `blocked` (a negative value is possible)
    /// makes an average of it over windows right again; `util`, `latency` and `blocked`
    /// stay within the window.
    pub late: f64,
    /// The part of `late` that is run-queue wait: the wait beyond the room the window's
    /// run time left.
    pub late_wait: f64,
    /// Fraction of the window it waited for locks; exact when `lock_exact`, else `blocked`.
    pub lock: f64,
    /// Whether `lock` was measured (BPF futex probe, simulator) rather than estimated.
    pub lock_exact: bool,
    /// Execution time over wall time (the speed balancing paper's speed); equals `util`.
    pub speed: f64,
    /// Times it was given a CPU during the window.
    pub timeslices: u64,
    /// Voluntary context switches during the window.
    pub voluntary: u64,
    /// Involuntary context switches during the window.
    pub involuntary: u64,
    /// CPU it last ran on, at the end of the window.
    pub last_cpu: CpuId,
    /// State at the end of the window.
    pub state: ThreadState,
    /// Whether it appeared during this window.
    pub appeared: bool,
    /// Instructions per cycle over the window, when both samples read hardware counters.
    pub ipc: Option<f64>,
    /// Last-level-cache misses per thousand instructions over the window, when both samples
    /// read hardware counters.
    pub mpki: Option<f64>,
    /// Progress events per second over the window ([`crate::Sample::progress`]), when
    /// both samples count them (a thread that appeared counts from zero).
    pub progress: Option<f64>,
}

/// Utilization of each domain at one level over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DomainLoad {
    /// The level.
    pub level: Level,
    /// For each domain, the summed `util` of threads whose last CPU is in it, divided by its
    /// CPU count: 1.0 means every CPU of the domain was busy with managed threads.
    pub util: Vec<f64>,
    /// For each domain, the number of managed threads whose last CPU is in it.
    pub threads: Vec<u32>,
    /// Mean of `util`.
    pub mean: f64,
    /// Coefficient of variation of `util` (σ/μ).
    pub cv: f64,
}

/// The machine's stolen time over its busy time between two snapshots; 0 when either did
/// not measure it, or no busy time passed (a counter that went down counts as nothing).
fn steal_per_busy(prev: &Snapshot, cur: &Snapshot) -> f64 {
    let (Some(a), Some(b)) = (prev.cpu_time, cur.cpu_time) else {
        return 0.0;
    };
    let busy = b.busy.saturating_sub(a.busy);
    let steal = b.steal.saturating_sub(a.steal);
    if busy == 0 {
        0.0
    } else {
        steal as f64 / busy as f64
    }
}

/// What every managed thread did between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Window {
    /// When the window opened (the earlier snapshot).
    pub start: Nanos,
    /// When it closed (the later snapshot).
    pub end: Nanos,
    /// One entry per thread alive at the end, sorted by key.
    pub threads: Vec<ThreadRates>,
    /// Threads present at the start but not at the end.
    pub vanished: Vec<ThreadKey>,
    /// The latest per-node memory of each process (carried over between the rare samples).
    pub memory: Vec<ProcessMemory>,
    /// Whether any thread's lock time was measured rather than estimated.
    pub lock_exact: bool,
    /// Wake edges counted within the window (sorted by waker then woken; edges with no
    /// wake-up in it are left out), when both snapshots measured them.
    pub wakes: Vec<WakeEdge>,
    /// Whether both snapshots measured wake edges (so `wakes` is the graph, maybe empty).
    pub wakes_measured: bool,
    /// Whether either snapshot's waits may be reported late ([`Snapshot::waits_late`]).
    pub waits_late: bool,
    /// How the host paces its ticks, as of the later snapshot ([`Snapshot::pace`]).
    #[serde(skip)]
    pub pace: crate::pace::Pace,
}

impl Window {
    /// The window's length.
    pub fn duration(&self) -> Nanos {
        self.end.saturating_sub(self.start)
    }

    /// A window that opens and closes at `cur`: every thread has appeared, with zero rates.
    /// Policies that place threads at once (baselines, `speed`) act on it; the others wait.
    pub fn first(&mut self, cur: &Snapshot) {
        self.start = cur.at;
        self.end = cur.at;
        self.threads.clear();
        self.vanished.clear();
        self.lock_exact = false;
        self.wakes.clear();
        self.wakes_measured = false;
        self.waits_late = cur.waits_late;
        self.pace = cur.pace;
        for s in &cur.threads {
            self.threads.push(Self::rates(None, s, Nanos::ZERO, 0.0));
        }
        if !cur.memory.is_empty() {
            self.memory.clone_from(&cur.memory);
        }
    }

    /// Recomputes the window from two snapshots, reusing its buffers. Both snapshots must be
    /// sorted by key ([`Snapshot::sort`]).
    pub fn update(&mut self, prev: &Snapshot, cur: &Snapshot) {
        self.start = prev.at;
        self.end = cur.at;
        self.threads.clear();
        self.vanished.clear();
        self.lock_exact = false;
        self.waits_late = prev.waits_late || cur.waits_late;
        self.pace = cur.pace;
        let dt = cur.at.saturating_sub(prev.at);
        let steal = steal_per_busy(prev, cur);
        let (mut i, mut j) = (0, 0);
        let (a, b) = (&prev.threads, &cur.threads);
        while i < a.len() || j < b.len() {
            match (a.get(i), b.get(j)) {
                (Some(p), Some(c)) if p.key == c.key => {
                    self.push(Some(p), c, dt, steal);
                    i += 1;
                    j += 1;
                }
                (Some(p), Some(c)) if p.key < c.key => {
                    self.vanished.push(p.key);
                    i += 1;
                }
                (Some(p), None) => {
                    self.vanished.push(p.key);
                    i += 1;
                }
                (_, Some(c)) => {
                    self.push(None, c, dt, steal);
                    j += 1;
                }
                (None, None) => break,
            }
        }
        if !cur.memory.is_empty() {
            self.memory.clone_from(&cur.memory);
        }
        self.wake_deltas(prev, cur);
    }

    /// The wake edges counted between `prev` and `cur` (both sorted): a merge of the two
    /// cumulative lists. An edge new in `cur` counts whole; a count that went down (the
    /// host lost and restarted its counter) counts as what `cur` shows.
    fn wake_deltas(&mut self, prev: &Snapshot, cur: &Snapshot) {
        self.wakes.clear();
        self.wakes_measured = prev.wakes_measured && cur.wakes_measured;
        if !self.wakes_measured {
            return;
        }
        let mut j = 0;
        for e in &cur.wakes {
            let id = (e.waker, e.woken);
            while j < prev.wakes.len() && (prev.wakes[j].waker, prev.wakes[j].woken) < id {
                j += 1;
            }
            let before = prev
                .wakes
                .get(j)
                .filter(|p| (p.waker, p.woken) == id)
                .map_or(0, |p| p.count);
            let count = if e.count >= before {
                e.count - before
            } else {
                e.count
            };
            if count > 0 {
                self.wakes.push(WakeEdge { count, ..*e });
            }
        }
    }

    fn push(&mut self, prev: Option<&Sample>, cur: &Sample, dt: Nanos, steal: f64) {
        let r = Self::rates(prev, cur, dt, steal);
        self.lock_exact |= r.lock_exact;
        self.threads.push(r);
    }

    fn rates(prev: Option<&Sample>, cur: &Sample, dt: Nanos, steal: f64) -> ThreadRates {
        let zero = Sample {
            key: cur.key,
            lock: cur.lock.map(|_| Nanos::ZERO),
            counters: cur.counters.map(|_| crate::HwCounters::default()),
            progress: cur.progress.map(|_| 0),
            ..Sample::default()
        };
        let p = prev.unwrap_or(&zero);
        let frac = |d: Nanos| {
            if dt.0 == 0 {
                0.0
            } else {
                (d.0 as f64 / dt.0 as f64).clamp(0.0, 1.0)
            }
        };
        let run = cur.run.saturating_sub(p.run);
        let cpu_time = if cur.run.0 == 0 {
            (cur.utime + cur.stime).saturating_sub(p.utime + p.stime)
        } else {
            run
        };
        let waited = cur.wait.saturating_sub(p.wait);
        let util = frac(cpu_time);
        let latency = frac(waited);
        let stolen = (util * steal).clamp(0.0, 1.0);
        let (blocked, late, late_wait) = if dt.0 == 0 {
            (0.0, 0.0, 0.0)
        } else {
            let (ran, waited) = (
                cpu_time.0 as f64 / dt.0 as f64,
                waited.0 as f64 / dt.0 as f64,
            );
            (
                (1.0 - util - stolen - latency).max(0.0),
                (ran + waited + stolen - 1.0).max(0.0),
                (waited - (1.0 - util - stolen).max(0.0)).max(0.0),
            )
        };
        let (lock, lock_exact) = match (p.lock, cur.lock) {
            (Some(a), Some(b)) => (frac(b.saturating_sub(a)), true),
            _ => (blocked, false),
        };
        let counted = match (p.counters, cur.counters) {
            (Some(a), Some(b)) => Some(b.since(&a)),
            _ => None,
        };
        ThreadRates {
            key: cur.key,
            util,
            latency,
            stolen,
            blocked,
            late,
            late_wait,
            lock,
            lock_exact,
            speed: util,
            timeslices: cur.timeslices.saturating_sub(p.timeslices),
            voluntary: cur.voluntary.saturating_sub(p.voluntary),
            involuntary: cur.involuntary.saturating_sub(p.involuntary),
            last_cpu: cur.last_cpu,
            state: cur.state,
            appeared: prev.is_none(),
            ipc: counted.and_then(|c| c.ipc()),
            mpki: counted.and_then(|c| c.mpki()),
            progress: match (p.progress, cur.progress) {
                (Some(a), Some(b)) if dt.0 > 0 => {
                    Some(b.saturating_sub(a) as f64 / dt.as_secs_f64())
                }
                _ => None,
            },
        }
    }

    /// Utilization of each domain at `level`, attributing each thread to the domain of its
    /// last CPU. Threads on CPUs outside the topology are left out.
    pub fn domain_load(&self, topo: &Topology, level: Level) -> DomainLoad {
        let domains = topo.domains(level);
        let mut busy = vec![0.0; domains.len()];
        let mut threads = vec![0u32; domains.len()];
        for t in &self.threads {
            if let Some(d) = topo.domain_of(t.last_cpu, level) {
                busy[d] += t.util;
                threads[d] += 1;
            }
        }
        let util: Vec<f64> = busy
            .iter()
            .zip(domains)
            .map(|(b, d)| b / d.cpus.len().max(1) as f64)
            .collect();
        DomainLoad {
            level,
            mean: mean(&util),
            cv: coefficient_of_variation(&util),
            util,
            threads,
        }
    }

    /// The rates of one thread, if it is alive at the end of the window.
    pub fn thread(&self, key: &ThreadKey) -> Option<&ThreadRates> {
        self.threads
            .binary_search_by(|t| t.key.cmp(key))
            .ok()
            .map(|i| &self.threads[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CpuTime, Pid, Tid};

    fn key(tid: i32) -> ThreadKey {
        ThreadKey {
            pid: Pid(1),
            tid: Tid(tid),
            start_time: 100,
        }
    }

    fn sample(tid: i32, run_ms: u64, wait_ms: u64, cpu: u32) -> Sample {
        Sample {
            key: key(tid),
            run: Nanos::from_millis(run_ms),
            wait: Nanos::from_millis(wait_ms),
            last_cpu: CpuId(cpu),
            ..Sample::default()
        }
    }

    fn snap(at_ms: u64, threads: Vec<Sample>) -> Snapshot {
        let mut s = Snapshot {
            at: Nanos::from_millis(at_ms),
            threads,
            ..Snapshot::default()
        };
        s.sort();
        s
    }

    #[test]
    fn window_rates_over_100ms_with_appear_and_vanish() {
        // Thread 1 ran 50 of 100 ms and waited 20: util .5, latency .2, blocked .3.
        // Thread 2 vanished; thread 3 appeared with 30 ms run: util .3.
        let prev = snap(0, vec![sample(1, 10, 0, 0), sample(2, 5, 0, 1)]);
        let cur = snap(100, vec![sample(1, 60, 20, 1), sample(3, 30, 0, 0)]);
        let mut w = Window::default();
        w.update(&prev, &cur);
        assert_eq!(w.duration(), Nanos::from_millis(100));
        assert_eq!(w.vanished, vec![key(2)]);
        let t1 = w.thread(&key(1)).unwrap();
        assert!((t1.util - 0.5).abs() < 1e-9);
        assert!((t1.latency - 0.2).abs() < 1e-9);
        assert!((t1.blocked - 0.3).abs() < 1e-9);
        assert!(!t1.lock_exact && (t1.lock - 0.3).abs() < 1e-9);
        assert!(!t1.appeared);
        let t3 = w.thread(&key(3)).unwrap();
        assert!(t3.appeared && (t3.util - 0.3).abs() < 1e-9);
    }

    #[test]
    fn window_time_stolen_while_running_is_not_blocked() {
        // Thread 1 ran 80 of 100 ms and waited 0. The machine's CPUs ran 180 ticks and the
        // hypervisor took 18 (a tenth of busy time): of the 20 ms unaccounted for, 8 are
        // stolen (.8 × .1), 12 blocked. Without the machine's times all 20 are blocked.
        let mut prev = snap(0, vec![sample(1, 0, 0, 0)]);
        let mut cur = snap(100, vec![sample(1, 80, 0, 0)]);
        let mut w = Window::default();
        w.update(&prev, &cur);
        let t = w.threads[0];
        assert_eq!(t.stolen, 0.0);
        assert!((t.blocked - 0.2).abs() < 1e-9 && (t.lock - 0.2).abs() < 1e-9);
        prev.cpu_time = Some(CpuTime {
            busy: 1000,
            steal: 50,
        });
        cur.cpu_time = Some(CpuTime {
            busy: 1180,
            steal: 68,
        });
        w.update(&prev, &cur);
        let t = w.threads[0];
        assert!((t.stolen - 0.08).abs() < 1e-9, "{t:?}");
        assert!((t.blocked - 0.12).abs() < 1e-9 && (t.lock - 0.12).abs() < 1e-9);
        // Only one end measured, or no busy time passed: nothing counts as stolen.
        prev.cpu_time = None;
        w.update(&prev, &cur);
        assert_eq!(w.threads[0].stolen, 0.0);
        prev.cpu_time = cur.cpu_time;
        w.update(&prev, &cur);
        assert_eq!(w.threads[0].stolen, 0.0);
    }

    #[test]
    fn window_wait_reported_late_is_taken_off_blocked_over_the_windows() {
        // A thread shares its core and waits 5 ms behind the other one, then runs 1 ms;
        // `schedstat` adds the wait only when it runs. Over 1 ms windows it shows nothing
        // for five windows (blocked 1 each), then 1 ms of run and 5 of wait in the sixth:
        // latency clamped to 1, blocked 0, and 5 ms late, all of it wait. Blocked less late,
        // summed over the six windows, is 0: it never slept.
        let counters = [(0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (0, 0), (1, 5)];
        let mut w = Window::default();
        let mut sum = 0.0;
        for (i, pair) in counters.windows(2).enumerate() {
            let (a, b) = (pair[0], pair[1]);
            let prev = snap(i as u64, vec![sample(1, a.0, a.1, 0)]);
            let cur = snap(i as u64 + 1, vec![sample(1, b.0, b.1, 0)]);
            w.update(&prev, &cur);
            let t = w.threads[0];
            sum += t.blocked - t.late;
            if i < 5 {
                assert_eq!(
                    (t.blocked, t.late, t.late_wait),
                    (1.0, 0.0, 0.0),
                    "{i}: {t:?}"
                );
            } else {
                assert_eq!((t.util, t.latency, t.blocked), (1.0, 1.0, 0.0), "{t:?}");
                assert!((t.late - 5.0).abs() < 1e-9 && (t.late_wait - 5.0).abs() < 1e-9);
            }
        }
        assert!(sum.abs() < 1e-9, "{sum}");
        // Run time brought up to date at a tick (3 ms in a 1 ms window) is late too, but
        // not wait: 2 ms late, none of it wait. A window with room for what it reports has
        // nothing late.
        let prev = snap(0, vec![sample(1, 0, 0, 0)]);
        w.update(&prev, &snap(1, vec![sample(1, 3, 0, 0)]));
        let t = w.threads[0];
        assert!((t.late - 2.0).abs() < 1e-9 && t.late_wait == 0.0, "{t:?}");
        w.update(&prev, &snap(10, vec![sample(1, 3, 5, 0)]));
        assert_eq!((w.threads[0].late, w.threads[0].late_wait), (0.0, 0.0));
    }

    #[test]
    fn window_reused_tid_is_a_different_thread() {
        let prev = snap(0, vec![sample(7, 10, 0, 0)]);
        let mut reborn = sample(7, 1, 0, 0);
        reborn.key.start_time = 999;
        let cur = snap(10, vec![reborn]);
        let mut w = Window::default();
        w.update(&prev, &cur);
        assert_eq!(w.vanished.len(), 1);
        assert!(w.threads[0].appeared);
    }

    #[test]
    fn window_falls_back_to_utime_stime_without_schedstat() {
        let mut a = sample(1, 0, 0, 0);
        a.utime = Nanos::from_millis(10);
        let mut b = a;
        b.utime = Nanos::from_millis(40);
        b.stime = Nanos::from_millis(10);
        let mut w = Window::default();
        w.update(&snap(0, vec![a]), &snap(100, vec![b]));
        // (30 + 10) / 100
        assert!((w.threads[0].util - 0.4).abs() < 1e-9);
    }

    #[test]
    fn window_exact_lock_time_when_measured() {
        let mut a = sample(1, 0, 0, 0);
        a.lock = Some(Nanos::from_millis(5));
        let mut b = a;
        b.lock = Some(Nanos::from_millis(25));
        let mut w = Window::default();
        w.update(&snap(0, vec![a]), &snap(100, vec![b]));
        assert!(w.lock_exact);
        assert!((w.threads[0].lock - 0.2).abs() < 1e-9);
    }

    #[test]
    fn domain_load_mean_and_cv_per_package() {
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        // Package 0 (CPUs 0,1): threads at .8 and .4 → 1.2/2 = .6; package 1 (CPUs 2,3): .2/2 = .1
        let prev = snap(
            0,
            vec![sample(1, 0, 0, 0), sample(2, 0, 0, 1), sample(3, 0, 0, 2)],
        );
        let cur = snap(
            100,
            vec![
                sample(1, 80, 0, 0),
                sample(2, 40, 0, 1),
                sample(3, 20, 0, 3),
            ],
        );
        let mut w = Window::default();
        w.update(&prev, &cur);
        let l = w.domain_load(&topo, Level::Package);
        assert!((l.util[0] - 0.6).abs() < 1e-9 && (l.util[1] - 0.1).abs() < 1e-9);
        assert_eq!(l.threads, vec![2, 1]);
        // mean .35, σ .25 → CV ≈ .714
        assert!((l.mean - 0.35).abs() < 1e-9);
        assert!((l.cv - 0.25 / 0.35).abs() < 1e-9);
    }

    #[test]
    fn window_pace_is_the_later_snapshots() {
        use crate::pace::Pace;
        let mut prev = snap(0, vec![sample(1, 0, 0, 0)]);
        let mut cur = snap(100, vec![sample(1, 10, 0, 0)]);
        prev.pace = Pace::Unknown;
        cur.pace = Pace::Gap(Nanos::from_millis(169));
        let mut w = Window::default();
        w.first(&prev);
        assert_eq!(w.pace, Pace::Unknown);
        w.update(&prev, &cur);
        assert_eq!(w.pace, Pace::Gap(Nanos::from_millis(169)));
        cur.clear();
        assert_eq!(cur.pace, Pace::Free);
    }

    #[test]
    fn window_waits_are_late_when_either_snapshot_read_them_late() {
        let mut prev = snap(0, vec![sample(1, 0, 0, 0)]);
        let mut cur = snap(100, vec![sample(1, 10, 0, 0)]);
        let mut w = Window::default();
        w.update(&prev, &cur);
        assert!(!w.waits_late);
        prev.waits_late = true;
        w.update(&prev, &cur);
        assert!(w.waits_late);
        prev.waits_late = false;
        cur.waits_late = true;
        w.update(&prev, &cur);
        assert!(w.waits_late);
        w.first(&prev);
        assert!(!w.waits_late);
        w.first(&cur);
        assert!(w.waits_late);
    }

    #[test]
    fn window_wake_edges_are_counts_within_the_window() {
        // 1→2 went 5 → 12 (7 in the window), 2→1 stayed at 3 (left out), 2→3 is new with 4.
        let edge = |a, b, count| WakeEdge {
            waker: key(a),
            woken: key(b),
            count,
        };
        let mut prev = snap(0, vec![sample(1, 0, 0, 0)]);
        prev.wakes = vec![edge(1, 2, 5), edge(2, 1, 3)];
        prev.wakes_measured = true;
        let mut cur = snap(100, vec![sample(1, 10, 0, 0)]);
        cur.wakes = vec![edge(2, 3, 4), edge(1, 2, 12), edge(2, 1, 3)];
        cur.wakes_measured = true;
        cur.sort();
        let mut w = Window::default();
        w.update(&prev, &cur);
        assert!(w.wakes_measured);
        assert_eq!(w.wakes, [edge(1, 2, 7), edge(2, 3, 4)]);
        // Unmeasured at either end: no graph.
        prev.wakes_measured = false;
        w.update(&prev, &cur);
        assert!(!w.wakes_measured);
        assert!(w.wakes.is_empty());
    }
}
