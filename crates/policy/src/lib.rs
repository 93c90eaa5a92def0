//! Placement policies and the one control loop step every host shares.
//!
//! ```text
//!   Host::sample ──► Snapshot ──► Window ──► Policy::decide ──► Plan ──► Host::apply
//!        ▲                                                                  │
//!        └──────────────────── wait Plan::next_in ◄─────────────────────────┘
//! ```
//!
//! A [`Policy`] is pure: it never opens a file, reads a clock, sleeps or changes an
//! affinity; randomness comes from a seeded generator. A [`Host`] is the shell that does:
//! the Linux host reads `/proc` and calls `sched_setaffinity`, the simulator's host reads
//! and changes its model. [`Engine::tick`] sequences them identically for both.
//!
//! ```
//! use threadbalance_model::{Level, Topology};
//! use threadbalance_policy::{build, Settings};
//! let topo = Topology::synthetic("package:4 core:16 pu:1").unwrap();
//! let policy = build("tumbler", &Settings::new(Level::Package), &topo).unwrap();
//! assert_eq!(policy.name(), "tumbler");
//! assert!(build("nonesuch", &Settings::new(Level::Package), &topo).is_err());
//! ```
#![forbid(unsafe_code)]

mod engine;
mod registry;
pub mod rng;

pub mod baseline;
pub mod dino;
pub mod grouping;
pub mod handoff;
pub mod handoff_partition;
pub mod numa_select;
pub mod shuffling;
pub mod speed;
pub mod speed_v1;
pub mod tumbler;

pub use engine::{Engine, Host, TickReport};
pub use registry::{PolicyError, PolicyKind, Settings, build, names};

use threadbalance_model::{Plan, PolicySummary, Topology, Window};

/// A placement policy. Pure: no I/O, no clock, no global state; randomness is seeded from
/// its settings.
pub trait Policy {
    /// Kebab-case name used in config, CLI and logs (`"tumbler"`).
    fn name(&self) -> &'static str;

    /// Decides what to move after a window. The first window of a run has zero length and
    /// every thread in it has appeared; policies that need rates wait for the next.
    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan;

    /// What the policy did over the run, typed (numbers as numbers, units in field
    /// names); [`PolicySummary::lines`] words it for a person.
    fn summary(&self) -> PolicySummary {
        PolicySummary::Nothing
    }

    /// How stale a thread's slow-changing fields (last CPU, state, user and system time)
    /// may be when this policy decides; `None` keeps the host's default (10 ms on Linux,
    /// where re-reading them is the costliest part of a sample). A policy that places every
    /// thread itself and reads only run time and run-queue wait can allow much more.
    fn stat_max_age(&self) -> Option<threadbalance_model::Nanos> {
        None
    }

    /// How fresh the context-switch counts (`Sample::voluntary`, `Sample::involuntary`)
    /// must be for this policy; `None` (the default) when it does not read them. A host
    /// that pays for them (Linux's `status` file) reads them only for policies that ask,
    /// no staler than this; the counts are cumulative, so a policy that averages them over
    /// longer loses nothing.
    fn reads_switches(&self) -> Option<threadbalance_model::Nanos> {
        None
    }

    /// Whether the policy reads the machine's stolen time (`Snapshot::cpu_time`, which makes
    /// `ThreadRates::stolen`): a host that pays for it (Linux reads `/proc/stat`, whose
    /// size grows with the CPUs and interrupts) reads it only for policies that ask. A
    /// policy that estimates lock time from blocked time asks, since stolen time would
    /// otherwise read as blocked.
    fn reads_steal(&self) -> bool {
        false
    }

    /// Whether the policy reads exact lock time (`Sample::lock`): a host loads and reads
    /// its lock probe (the BPF futex probe on Linux) only for policies that do.
    fn reads_lock_time(&self) -> bool {
        false
    }

    /// Whether the policy reads the who-wakes-whom graph (`Snapshot::wakes`): a host
    /// gathers wake edges only for policies that do.
    fn reads_wake_edges(&self) -> bool {
        false
    }

    /// Whether the policy reads hardware counters (`Sample::counters`: instructions, cycles,
    /// last-level-cache misses): a host opens them only for policies that do, and a live
    /// host without them refuses such a policy.
    fn reads_counters(&self) -> bool {
        false
    }

    /// The share of one core a host that paces its ticks may spend watching (sampling
    /// and deciding) until the next tick, when this policy wants its ticks sooner than the
    /// default budget ([`threadbalance_model::pace::BUDGET`]) allows; asked after each
    /// decision. `None` (the default) keeps the default. A host never lowers its budget
    /// for it, and an operator's whole budget (`--cpu-budget`) stands.
    fn watch_budget(&self) -> Option<f64> {
        None
    }
}
