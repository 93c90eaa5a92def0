//! Rates a person can read: a [`Window`] over about a second, whatever the policy's tick.
//!
//! A policy such as `speed` ticks every 2-7 ms, and its windows are that long: a thread
//! that ran for the whole of one reads 98 % and 0 % in the next. A display keeps the
//! cumulative snapshot it saw at each of its refreshes (a few, not one per tick) and
//! computes the rates between the one about `span` ago and now:
//!
//! ```text
//!  refresh:   t0        t1        t2        t3 (now)       span = 1 s, refresh every 1 s
//!  kept:      S0        S1        S2        S3
//!  window:                        S2 ──────► S3             (the newest at least ¾ span old)
//! ```
//!
//! The base is the newest kept snapshot at least ¾ of `span` older than the latest one,
//! so refreshes that come a little early or late still give windows of about `span`; while
//! nothing is that old yet (the first second), the oldest is the base and the window is
//! shorter (its length is [`Window::duration`]). Older snapshots are dropped, so a
//! display refreshed every second keeps two or three.
//!
//! ```
//! use threadbalance_model::{DisplayWindow, Nanos, Snapshot};
//! let mut d = DisplayWindow::new(Nanos::from_millis(1000));
//! for ms in [0, 500, 1000, 1500] {
//!     d.push(Snapshot { at: Nanos::from_millis(ms), ..Snapshot::default() });
//! }
//! // The newest snapshot at least 750 ms before 1500 ms is the one at 500 ms.
//! let w = d.window().unwrap();
//! assert_eq!((w.start, w.end), (Nanos::from_millis(500), Nanos::from_millis(1500)));
//! ```

use crate::{CpuId, Nanos, Snapshot, Window};
use std::collections::{BTreeMap, VecDeque};

/// The snapshots a display keeps, and the span its rates are over.
#[derive(Debug, Clone, Default)]
pub struct DisplayWindow {
    span: Nanos,
    kept: VecDeque<Snapshot>,
    /// Readings of each CPU's busy time (when taken, and per CPU), kept by the same rule.
    cpus: VecDeque<(Nanos, Vec<(CpuId, Nanos)>)>,
}

impl DisplayWindow {
    /// A display whose rates are over about `span` (at least 1 ms).
    pub fn new(span: Nanos) -> DisplayWindow {
        DisplayWindow {
            span: span.max(Nanos::from_millis(1)),
            kept: VecDeque::new(),
            cpus: VecDeque::new(),
        }
    }

    /// The span asked for.
    pub fn span(&self) -> Nanos {
        self.span
    }

    /// When the latest snapshot kept was taken (`None`: none yet).
    pub fn latest_at(&self) -> Option<Nanos> {
        self.kept.back().map(|s| s.at)
    }

    /// Keeps `snapshot` (a cumulative reading, sorted or not) as the latest, and drops
    /// the ones no window will need. A snapshot not later than the latest is ignored.
    pub fn push(&mut self, mut snapshot: Snapshot) {
        if self.latest_at().is_some_and(|at| snapshot.at <= at) {
            return;
        }
        snapshot.sort();
        self.kept.push_back(snapshot);
        let now = self.kept.back().map_or(Nanos::ZERO, |s| s.at);
        // Keep the newest base candidate and everything after it.
        while self
            .kept
            .get(1)
            .is_some_and(|s| now.saturating_sub(s.at) >= self.base_age())
        {
            self.kept.pop_front();
        }
    }

    /// The age a base must have: ¾ of the span.
    fn base_age(&self) -> Nanos {
        Nanos(self.span.0 / 4 * 3)
    }

    /// The rates between the base and the latest snapshot; `None` until two snapshots are
    /// kept (a display shows "measuring" then).
    pub fn window(&self) -> Option<Window> {
        let latest = self.kept.back()?;
        let now = latest.at;
        let base = self
            .kept
            .iter()
            .rev()
            .skip(1)
            .find(|s| now.saturating_sub(s.at) >= self.base_age())
            .or_else(|| self.kept.front().filter(|s| s.at < now))?;
        let mut w = Window::default();
        w.update(base, latest);
        Some(w)
    }

    /// Keeps a reading of each CPU's busy time so far, taken at `at` on the snapshots'
    /// clock (`/proc/stat` on Linux), for [`DisplayWindow::cpu_busy`]. A reading not later
    /// than the latest is ignored; readings no window needs are dropped.
    pub fn push_cpu_busy(&mut self, at: Nanos, busy: Vec<(CpuId, Nanos)>) {
        if self.cpus.back().is_some_and(|(t, _)| at <= *t) {
            return;
        }
        self.cpus.push_back((at, busy));
        while self
            .cpus
            .get(1)
            .is_some_and(|(t, _)| at.saturating_sub(*t) >= self.base_age())
        {
            self.cpus.pop_front();
        }
    }

    /// How busy each CPU was over about the span, whatever ran on it: its busy time between
    /// the base reading (chosen as [`DisplayWindow::window`] chooses its base) and the latest,
    /// over the time between them, within 0..=1. CPUs missing from either reading are left
    /// out; empty until two readings are kept.
    ///
    /// A display groups threads by where they may run *now*, but a thread's rate covers the
    /// whole window: a thread a policy moved during it brings time it ran elsewhere, and the
    /// threads' sum over a one-CPU group can read 130 %. The CPUs' own busy time cannot.
    pub fn cpu_busy(&self) -> BTreeMap<CpuId, f64> {
        let Some((now, latest)) = self.cpus.back() else {
            return BTreeMap::new();
        };
        let base = self
            .cpus
            .iter()
            .rev()
            .skip(1)
            .find(|(t, _)| now.saturating_sub(*t) >= self.base_age())
            .or_else(|| self.cpus.front().filter(|(t, _)| t < now));
        let Some((then, earlier)) = base else {
            return BTreeMap::new();
        };
        let elapsed = now.saturating_sub(*then).0 as f64;
        let before: BTreeMap<CpuId, Nanos> = earlier.iter().copied().collect();
        latest
            .iter()
            .filter_map(|(cpu, busy)| {
                let b = before.get(cpu)?;
                Some((
                    *cpu,
                    (busy.saturating_sub(*b).0 as f64 / elapsed).clamp(0.0, 1.0),
                ))
            })
            .collect()
    }

    /// Forgets every snapshot and reading (a display nobody watches keeps nothing).
    pub fn clear(&mut self) {
        self.kept.clear();
        self.cpus.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_busy_is_each_cpus_busy_time_over_about_the_span() {
        let mut d = DisplayWindow::new(Nanos::from_millis(1000));
        assert!(d.cpu_busy().is_empty());
        let ms = Nanos::from_millis;
        d.push_cpu_busy(ms(0), vec![(CpuId(0), ms(0)), (CpuId(1), ms(0))]);
        assert!(d.cpu_busy().is_empty(), "one reading is no rate");
        d.push_cpu_busy(ms(500), vec![(CpuId(0), ms(500)), (CpuId(1), ms(100))]);
        // The first second: the oldest reading is the base.
        assert_eq!(d.cpu_busy()[&CpuId(1)], 0.2);
        // A later reading at 1500 ms: the base is the one at 500 ms (at least 750 ms old);
        // CPU 0 reports more than the time passed (ticks are coarse): held at 1.
        d.push_cpu_busy(
            ms(1500),
            vec![(CpuId(0), ms(1600)), (CpuId(1), ms(600)), (CpuId(2), ms(9))],
        );
        let busy = d.cpu_busy();
        assert_eq!(busy[&CpuId(0)], 1.0);
        assert_eq!(busy[&CpuId(1)], 0.5);
        assert!(!busy.contains_key(&CpuId(2)), "CPU 2 was not in the base");
        // Out of order is ignored; clear forgets.
        d.push_cpu_busy(ms(1400), vec![(CpuId(0), ms(0))]);
        assert_eq!(d.cpu_busy()[&CpuId(1)], 0.5);
        d.clear();
        assert!(d.cpu_busy().is_empty());
    }
    use crate::{CpuId, Pid, Sample, ThreadKey, Tid};

    fn key(tid: i32) -> ThreadKey {
        ThreadKey {
            pid: Pid(1),
            tid: Tid(tid),
            start_time: 1,
        }
    }

    /// Thread 2's cumulative run time is `run_ms` at `at_ms`.
    fn snap(at_ms: u64, run_ms: u64) -> Snapshot {
        Snapshot {
            at: Nanos::from_millis(at_ms),
            threads: vec![Sample {
                key: key(2),
                run: Nanos::from_millis(run_ms),
                last_cpu: CpuId(1),
                ..Sample::default()
            }],
            ..Snapshot::default()
        }
    }

    #[test]
    fn window_ticks_of_a_few_ms_read_as_the_second_s_rate() {
        // A thread that runs a whole tick of 5 ms, then none of the next, and so on: each
        // policy window reads 100 % or 0 %, the display's second reads 50 %.
        let mut d = DisplayWindow::new(Nanos::from_millis(1000));
        let mut run = 0;
        for tick in 0..=400u64 {
            if tick % 2 == 1 {
                run += 5;
            }
            // Refreshes every 500 ms: ticks 0, 100, 200, 300, 400.
            if tick % 100 == 0 {
                d.push(snap(tick * 5, run));
            }
        }
        let w = d.window().unwrap();
        // Base: the snapshot at 1000 ms (run 500), latest at 2000 ms (run 1000).
        assert_eq!(
            (w.start, w.end),
            (Nanos::from_millis(1000), Nanos::from_millis(2000))
        );
        assert!(
            (w.threads[0].util - 0.5).abs() < 1e-9,
            "{}",
            w.threads[0].util
        );
        // Kept: 1000, 1500, 2000 ms.
        assert_eq!(d.kept.len(), 3);
    }

    #[test]
    fn window_before_a_span_is_shorter_and_none_with_one_snapshot() {
        let mut d = DisplayWindow::new(Nanos::from_millis(1000));
        assert!(d.window().is_none());
        d.push(snap(0, 0));
        assert!(d.window().is_none());
        d.push(snap(400, 100));
        // Nothing is 750 ms old: the oldest is the base, the window 400 ms long.
        let w = d.window().unwrap();
        assert_eq!(w.duration(), Nanos::from_millis(400));
        assert!((w.threads[0].util - 0.25).abs() < 1e-9);
        // A snapshot that is not later is ignored.
        d.push(snap(400, 300));
        assert_eq!(d.window().unwrap().threads[0].util, 0.25);
    }

    #[test]
    fn window_late_refresh_still_takes_the_previous_one() {
        // Refreshes at 0 and 990 ms and 1980 ms (a little early each time): the base is
        // 990 ms (990 ms old), not 0.
        let mut d = DisplayWindow::new(Nanos::from_millis(1000));
        d.push(snap(0, 0));
        d.push(snap(990, 990));
        d.push(snap(1980, 990));
        let w = d.window().unwrap();
        assert_eq!(w.start, Nanos::from_millis(990));
        assert_eq!(w.threads[0].util, 0.0);
    }
}
