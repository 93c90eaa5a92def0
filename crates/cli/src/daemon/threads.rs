//! The daemon's answer to `threads` (what `threadbalance top` shows): every managed
//! thread's last window, grouped by the domains of the machine's default level (the
//! level of the `domain_utilization_ratio` metric), published once a window.

use super::Daemon;
use crate::top::gather;
use threadbalance_daemon::control::threads::ThreadsView;

impl Daemon {
    /// The managed threads of every process, by domain.
    pub(super) fn threads_view(&self) -> ThreadsView {
        gather::view_of(
            &self.machine,
            self.machine.default_level(),
            self.managed.values().map(|m| (m.window(), &m.moved)),
        )
    }
}
