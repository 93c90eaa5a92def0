//! The daemon's answer to `threads` (what `threadbalance top` shows): every managed
//! thread's rates over the display window asked for (about a second; see
//! [`DisplayWindow`]), grouped by where it may run at the machine's default level (the
//! level of the `domain_utilization_ratio` metric).
//!
//! ```text
//!  while watched, every half display window: each group's latest snapshot ─► its
//!  DisplayWindow ─► window over ~window_ms ─► host.threads_view ─► published
//! ```
//!
//! The snapshots are the groups' own (the policy samples anyway); nothing is read for the
//! display but each thread's name and mask (by the host), and nothing is kept while
//! nobody watches.

use super::{Daemon, DaemonHost};
use crate::control::threads::MoveCounts;
use threadbalance_model::{DisplayWindow, Nanos, Window};

impl<H: DaemonHost> Daemon<H> {
    /// Keeps each group's latest snapshot for a display window of `window_ms`, and
    /// forgets the groups that are gone.
    fn refresh_display(&mut self, window_ms: u64) {
        let span = Nanos::from_millis(window_ms);
        let groups = &self.groups.by_id;
        self.display.retain(|id, _| groups.contains_key(id));
        for (id, g) in groups {
            let d = self
                .display
                .entry(*id)
                .or_insert_with(|| DisplayWindow::new(span));
            if d.span() != span {
                *d = DisplayWindow::new(span);
            }
            d.push(g.latest().clone());
        }
        if let Some((at, busy)) = self.host.cpu_busy() {
            for d in self.display.values_mut() {
                d.push_cpu_busy(at, busy.clone());
            }
        }
    }

    /// Refreshes the display windows and publishes the view; returns when to do it next
    /// (every half window, so a base about one window old is always kept).
    pub(super) fn publish_threads(&mut self) -> Nanos {
        let window_ms = self.host.threads_window_ms();
        self.refresh_display(window_ms);
        // Every display holds the same readings of the CPUs: the first that has a rate.
        let busy = self
            .display
            .values()
            .map(|d| d.cpu_busy())
            .find(|b| !b.is_empty())
            .unwrap_or_default();
        let view = self
            .host
            .threads_view(&self.usable.machine, &self.windows_shown())
            .with_cpu_busy(&busy);
        self.host.publish_threads(view);
        self.host.now() + Nanos::from_millis((window_ms / 2).max(50))
    }

    /// Each group's display window with its members' moves.
    fn windows_shown(&self) -> Vec<(Window, MoveCounts)> {
        self.groups
            .by_id
            .iter()
            .filter_map(|(id, g)| {
                let window = self.display.get(id)?.window()?;
                let mut moved = MoveCounts::default();
                for pid in &g.members {
                    if let Some(m) = self.managed.get(pid) {
                        moved.absorb(&m.moved);
                    }
                }
                Some((window, moved))
            })
            .collect()
    }
}
