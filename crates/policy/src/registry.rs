//! Policy names and their settings, validated once, when a policy is built.

use crate::Policy;
use threadbalance_model::{Level, Nanos, Topology};

/// Why a policy could not be built from its settings.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// No policy has this name.
    #[error("unknown policy {name:?} (known: {known})")]
    Unknown {
        /// The name given.
        name: String,
        /// The names known, comma-separated.
        known: String,
    },
    /// A setting is out of range for this policy.
    #[error("policy {policy}: {why}")]
    Invalid {
        /// The policy.
        policy: &'static str,
        /// What was wrong.
        why: String,
    },
}

/// Settings every policy may read; each policy checks the ones it uses when built.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The level whose domains play the papers' "sockets".
    pub level: Level,
    /// Overrides the policy's own interval (Tumbler's table, Shuffling's 500 ms, speed's
    /// adaptive interval). `None` keeps the policy's choice.
    pub interval: Option<Nanos>,
    /// Seed of the policy's random generator.
    pub seed: u64,
    /// Shuffling: lock time (fraction of elapsed time) above which threads are shuffled.
    pub lock_threshold: f64,
}

impl Settings {
    /// The papers' defaults at `level`: Shuffling's 5 % lock-time threshold, seed 1.
    pub fn new(level: Level) -> Settings {
        Settings {
            level,
            interval: None,
            seed: 1,
            lock_threshold: 0.05,
        }
    }
}

/// Every policy name, in the order the docs list them.
pub fn names() -> &'static [&'static str] {
    &["none", "psets", "pbind", "tumbler", "shuffling"]
}

/// Builds the policy called `name`, checking its settings against the machine.
pub fn build(
    name: &str,
    settings: &Settings,
    topo: &Topology,
) -> Result<Box<dyn Policy>, PolicyError> {
    let _ = topo;
    match name {
        "none" => Ok(Box::new(crate::baseline::Observe::new(settings))),
        _ => Err(PolicyError::Unknown {
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}
