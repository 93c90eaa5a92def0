//! What a policy wants its host to read for it: one value, asked once.
//!
//! Every host reads run time, run-queue wait, last CPU and state for every thread. What
//! costs more (re-reading `stat` often, `status` for switch counts, `/proc/stat` for
//! stolen time, a lock probe, the wake graph, hardware counters) a host reads only when
//! the policy says so in its [`Needs`] ([`crate::Policy::needs`]), and each host reads it
//! in one place: the Linux adapter's constructor, the simulator host's.
//!
//! [`crate::PolicyKind::needs`] gives the same value without building the policy, from
//! the same constants the policies return.

use threadbalance_model::Nanos;

/// What a policy wants its host to read for it, beyond what every host reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    /// How stale a thread's slow-changing fields (last CPU, state, user and system time)
    /// may be when this policy decides; `None` keeps the host's default (10 ms on Linux,
    /// where re-reading them is the costliest part of a sample). A policy that places every
    /// thread itself and reads only run time and run-queue wait can allow much more.
    pub stat_max_age: Option<Nanos>,
    /// How fresh the context-switch counts (`Sample::voluntary`, `Sample::involuntary`)
    /// must be; `None` when the policy does not read them. A host that pays for them
    /// (Linux's `status` file) reads them only for policies that ask, no staler than this;
    /// the counts are cumulative, so a policy that averages them over longer loses nothing.
    pub switches: Option<Nanos>,
    /// Whether the policy reads the machine's stolen time (`Snapshot::cpu_time`, which makes
    /// `ThreadRates::stolen`): a host that pays for it (Linux reads `/proc/stat`, whose
    /// size grows with the CPUs and interrupts) reads it only for policies that ask. A
    /// policy that estimates lock time from blocked time asks, since stolen time would
    /// otherwise read as blocked.
    pub steal: bool,
    /// Whether the policy reads exact lock time (`Sample::lock`).
    pub lock_time: bool,
    /// Whether the policy reads the who-wakes-whom graph (`Snapshot::wakes`): a host
    /// gathers wake edges only for policies that do.
    pub wake_edges: bool,
    /// Whether the policy reads hardware counters (`Sample::counters`: instructions,
    /// cycles, last-level-cache misses): a host opens them only for policies that do, and a
    /// live host without them refuses such a policy.
    pub counters: bool,
    /// Whether the policy never moves a thread (it observes): a host that pays to tell the
    /// program's own masks from the tool's (Linux's trace of `sched_setaffinity`, which
    /// puts every system call of the machine on the slow path) need not, since every mask
    /// is then the program's.
    pub moves_nothing: bool,
}

impl Needs {
    /// Nothing beyond what every host reads.
    pub const NOTHING: Needs = Needs {
        stat_max_age: None,
        switches: None,
        steal: false,
        lock_time: false,
        wake_edges: false,
        counters: false,
        moves_nothing: false,
    };

    /// What a policy that only observes needs: nothing, and no telling masks apart.
    pub const OBSERVE: Needs = Needs {
        moves_nothing: true,
        ..Needs::NOTHING
    };

    /// Whether the host's lock probe has to run: for exact lock time, or for the wake
    /// edges, which the same probe measures (the BPF futex probe on Linux).
    pub fn lock_probe(&self) -> bool {
        self.lock_time || self.wake_edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_probe_runs_for_lock_time_or_wake_edges_only() {
        assert!(!Needs::NOTHING.lock_probe());
        assert_eq!(Needs::default(), Needs::NOTHING);
        let lock = Needs {
            lock_time: true,
            ..Needs::NOTHING
        };
        let wakes = Needs {
            wake_edges: true,
            ..Needs::NOTHING
        };
        assert!(lock.lock_probe() && wakes.lock_probe());
        let steal = Needs {
            steal: true,
            switches: Some(Nanos::from_millis(5)),
            ..Needs::NOTHING
        };
        assert!(!steal.lock_probe());
    }
}
