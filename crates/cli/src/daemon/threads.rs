//! The daemon's answer to `threads` (what `threadbalance top` shows): every managed
//! thread's last window (its group's), grouped by the domains of the machine's default level (the
//! level of the `domain_utilization_ratio` metric), published once a window.

use super::Daemon;
use crate::top::gather;
use threadbalance_daemon::control::threads::ThreadsView;

impl Daemon {
    /// The managed threads of every process, by domain.
    pub(super) fn threads_view(&self) -> ThreadsView {
        let groups: Vec<(&threadbalance_model::Window, gather::MoveCounts)> = self
            .groups
            .by_id
            .values()
            .map(|g| {
                let mut moved = gather::MoveCounts::default();
                for pid in &g.members {
                    if let Some(m) = self.managed.get(pid) {
                        moved.absorb(&m.moved);
                    }
                }
                (g.window(), moved)
            })
            .collect();
        gather::view_of(
            &self.machine,
            self.machine.default_level(),
            groups.iter().map(|(w, moved)| (*w, moved)),
        )
    }
}
