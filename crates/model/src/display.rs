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

use crate::{Nanos, Snapshot, Window};
use std::collections::VecDeque;

/// The snapshots a display keeps, and the span its rates are over.
#[derive(Debug, Clone, Default)]
pub struct DisplayWindow {
    span: Nanos,
    kept: VecDeque<Snapshot>,
}

impl DisplayWindow {
    /// A display whose rates are over about `span` (at least 1 ms).
    pub fn new(span: Nanos) -> DisplayWindow {
        DisplayWindow {
            span: span.max(Nanos::from_millis(1)),
            kept: VecDeque::new(),
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

    /// Forgets every snapshot (a display nobody watches keeps nothing).
    pub fn clear(&mut self) {
        self.kept.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
