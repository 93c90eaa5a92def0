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
mod needs;
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
pub mod tumbler;

pub use engine::{Engine, Host, TickReport};
pub use needs::Needs;
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

    /// What the policy wants its host to read for it beyond what every host reads
    /// (switch counts, stolen time, lock time, wake edges, hardware counters, fresher or
    /// staler `stat` fields). Asked once, before the first tick: a host configures its
    /// sampling from it when it opens.
    fn needs(&self) -> Needs {
        Needs::NOTHING
    }

    /// The share of one core a host that paces its ticks may spend watching (sampling
    /// and deciding) until the next tick, when this policy wants its ticks sooner than the
    /// default budget ([`threadbalance_model::pace::BUDGET`]) allows; asked after each
    /// decision. `None` (the default) keeps the default. A host never lowers its budget
    /// for it, and an operator's whole budget (`--cpu-budget`) stands. Not part of
    /// [`Needs`]: it changes with what the policy decides (a rotation over more cores
    /// buys more rounds), so it is asked at every tick, not once.
    fn watch_budget(&self) -> Option<f64> {
        None
    }
}
