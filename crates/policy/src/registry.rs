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
    /// Shuffling: how often lock times are sampled (the paper's 200 ms, §3.2.1).
    pub lock_sample_interval: Nanos,
    /// Shuffling: how often threads are regrouped by the lock time accumulated since the
    /// last regrouping (the paper's 500 ms, §3.2.2). `interval`, when set, overrides it.
    pub shuffle_interval: Nanos,
    /// `numa-*`: load metric, imbalance thresholds and moves per tick.
    pub numa: crate::numa_select::NumaSettings,
    /// `speed`: `T_s`, NUMA crossings, the adaptive interval's range, the speed measure.
    pub speed: crate::speed::SpeedSettings,
}

impl Settings {
    /// The papers' defaults at `level`: Shuffling's 5 % lock-time threshold, seed 1.
    pub fn new(level: Level) -> Settings {
        Settings {
            level,
            interval: None,
            seed: 1,
            lock_threshold: 0.05,
            lock_sample_interval: Nanos::from_millis(200),
            shuffle_interval: Nanos::from_millis(500),
            numa: crate::numa_select::NumaSettings::default(),
            speed: crate::speed::SpeedSettings::default(),
        }
    }
}

/// Every policy name, in the order the docs list them.
pub fn names() -> &'static [&'static str] {
    &[
        "none",
        "psets",
        "pbind",
        "tumbler",
        "shuffling",
        "handoff",
        "speed",
        "numa-first-fit",
        "numa-tm",
        "numa-mb",
        "numa-bce",
        "numa-excl-base",
        "numa-excl",
        "numa-mb-plus",
    ]
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
        "psets" => {
            check_interval("psets", settings)?;
            Ok(Box::new(crate::baseline::Psets::new(settings)))
        }
        "pbind" => {
            check_interval("pbind", settings)?;
            Ok(Box::new(crate::baseline::Pbind::new(settings, topo)))
        }
        "tumbler" => {
            check_interval("tumbler", settings)?;
            Ok(Box::new(crate::tumbler::Tumbler::new(settings)))
        }
        "shuffling" => {
            check_shuffling(settings)?;
            Ok(Box::new(crate::shuffling::Shuffling::new(settings)))
        }
        "handoff" => {
            check_interval("handoff", settings)?;
            Ok(Box::new(crate::handoff::Handoff::new(settings)))
        }
        "speed" => Ok(Box::new(crate::speed::Speed::new(settings, topo)?)),
        "numa-first-fit" | "numa-tm" | "numa-mb" | "numa-bce" | "numa-excl-base" | "numa-excl"
        | "numa-mb-plus" => crate::numa_select::build(name, settings, topo),
        _ => Err(PolicyError::Unknown {
            name: name.to_string(),
            known: names().join(", "),
        }),
    }
}

/// Rejects a zero `interval` (a policy that looks again at once would spin).
fn check_interval(policy: &'static str, settings: &Settings) -> Result<(), PolicyError> {
    if settings.interval == Some(Nanos::ZERO) {
        return Err(PolicyError::Invalid {
            policy,
            why: "interval must be greater than 0".into(),
        });
    }
    Ok(())
}

/// Shuffling's threshold is a fraction of time, its intervals positive.
fn check_shuffling(settings: &Settings) -> Result<(), PolicyError> {
    let policy = "shuffling";
    check_interval(policy, settings)?;
    let t = settings.lock_threshold;
    if !(0.0..=1.0).contains(&t) {
        return Err(PolicyError::Invalid {
            policy,
            why: format!("lock threshold {t} is not a fraction in [0, 1]"),
        });
    }
    for (what, v) in [
        ("lock sample interval", settings.lock_sample_interval),
        ("shuffle interval", settings.shuffle_interval),
    ] {
        if v == Nanos::ZERO {
            return Err(PolicyError::Invalid {
                policy,
                why: format!("{what} must be greater than 0"),
            });
        }
    }
    Ok(())
}
