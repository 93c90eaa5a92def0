//! Policy names and their settings, validated once, when a policy is built.
//!
//! [`PolicyKind`] is the one list of policies: the command line's choices (a clap
//! `ValueEnum` with the `clap` feature), the names in JSON and the registry's `build` all
//! come from its table.

use crate::{Needs, Policy};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
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
    /// The level whose domains play the papers' "sockets"; `None` (what a user who names
    /// no level gets) for each policy's own, [`PolicyKind::default_level`], resolved when
    /// the policy is built ([`Settings::level_for`]).
    pub level: Option<Level>,
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

impl Default for Settings {
    /// The papers' defaults at each policy's own level ([`PolicyKind::default_level`]).
    fn default() -> Settings {
        Settings {
            level: None,
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

impl Settings {
    /// The papers' defaults at `level`: Shuffling's 5 % lock-time threshold, seed 1.
    pub fn new(level: Level) -> Settings {
        Settings {
            level: Some(level),
            ..Settings::default()
        }
    }

    /// The level `kind` runs at on `topo`: the one set, or the policy's own default.
    ///
    /// ```
    /// use threadbalance_model::{Level, Topology};
    /// use threadbalance_policy::{PolicyKind, Settings};
    /// let topo = Topology::synthetic("package:2 core:8 pu:2").unwrap();
    /// let unset = Settings::default();
    /// assert_eq!(unset.level_for(PolicyKind::Speed, &topo), Level::Cpu);
    /// assert_eq!(unset.level_for(PolicyKind::Tumbler, &topo), Level::Package);
    /// let set = Settings::new(Level::Core);
    /// assert_eq!(set.level_for(PolicyKind::Speed, &topo), Level::Core);
    /// ```
    pub fn level_for(&self, kind: PolicyKind, topo: &Topology) -> Level {
        self.level.unwrap_or_else(|| kind.default_level(topo))
    }

    /// These settings with the level `kind` runs at on `topo` filled in.
    pub fn resolved(&self, kind: PolicyKind, topo: &Topology) -> Settings {
        Settings {
            level: Some(self.level_for(kind, topo)),
            ..self.clone()
        }
    }
}

/// Declares [`PolicyKind`] from one table: variant, name, one line of help. Adding a policy
/// is one line here and one arm in [`PolicyKind::build`] (the compiler asks for it).
macro_rules! policy_kinds {
    ($($variant:ident => $name:literal, $about:literal;)+) => {
        /// Every policy, by the name the command line, the JSON and the logs use.
        ///
        /// ```
        /// use threadbalance_policy::PolicyKind;
        /// let k: PolicyKind = "numa-tm".parse().unwrap();
        /// assert_eq!(k, PolicyKind::NumaTm);
        /// assert_eq!(k.to_string(), "numa-tm");
        /// assert!("nonesuch".parse::<PolicyKind>().is_err());
        /// ```
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum PolicyKind {
            $(
                #[doc = $about]
                #[serde(rename = $name)]
                $variant,
            )+
        }

        impl PolicyKind {
            /// Every policy, in the order the docs list them.
            pub const ALL: &'static [PolicyKind] = &[$(PolicyKind::$variant),+];

            /// The name used in config, CLI, JSON and logs (`"tumbler"`).
            pub fn name(self) -> &'static str {
                match self {
                    $(PolicyKind::$variant => $name,)+
                }
            }

            /// One line saying what the policy does.
            pub fn about(self) -> &'static str {
                match self {
                    $(PolicyKind::$variant => $about,)+
                }
            }
        }
    };
}

policy_kinds! {
    None => "none", "Linux alone: observe and report, move nothing.";
    Psets => "psets", "Processor sets: threads split evenly into one group per domain, once.";
    Pbind => "pbind", "One thread per logical CPU, pinned: cores first, then their SMT siblings.";
    Tumbler => "tumbler", "Tumbler: regroups threads by utilization so domains are evenly loaded.";
    Shuffling => "shuffling", "Shuffling: regroups threads by lock time so lock holders share a domain.";
    Handoff => "handoff", "Hand-off graph: partitions who wakes whom so lock hand-offs stay inside a domain.";
    Speed => "speed", "Speed balancing: rotates threads over unevenly loaded CPUs.";
    Dino => "dino", "DINO: spreads memory-intensive threads (LLC misses per instruction) evenly over the last-level caches.";
    NumaFirstFit => "numa-first-fit", "NUMA balancing between nodes, moving the first movable thread (Linux's choice).";
    NumaTm => "numa-tm", "NUMA balancing, moving the thread whose process has the least memory (Total Min).";
    NumaMb => "numa-mb", "NUMA balancing, moving the thread with the most memory on the destination beyond the source (Most Benefit).";
    NumaBce => "numa-bce", "NUMA balancing, Most Benefit over the memory left on the source (Best Cost-Effectiveness).";
    NumaExclBase => "numa-excl-base", "NUMA balancing, moving the least exclusive group, every thread evaluated (Excl base).";
    NumaExcl => "numa-excl", "NUMA balancing, the least exclusive group, never moving a leader (Excl).";
    NumaMbPlus => "numa-mb-plus", "NUMA balancing, Most Benefit, never moving a leader (MB+).";
}

impl PolicyKind {
    /// The policy used when none is named (`run`, `attach`).
    pub const DEFAULT: PolicyKind = PolicyKind::Tumbler;

    /// Whether it balances between NUMA nodes (and so competes with the kernel's own NUMA
    /// balancing).
    pub fn is_numa(self) -> bool {
        self.name().starts_with("numa-")
    }

    /// The level the policy runs at when none is set (`--level` left out), on `topo`:
    ///
    /// | policy | default level | why |
    /// |---|---|---|
    /// | `speed` | [`Level::Cpu`] | it balances the kernel's run queues: one a logical CPU, sockets and SMT included |
    /// | `tumbler`, `shuffling`, `handoff`, `psets`, `pbind`, `none` | [`Topology::default_level`] | the papers' "socket": the widest level with more than one domain |
    /// | `numa-*` | [`Level::Node`] | they balance between NUMA nodes |
    /// | `dino` | [`Level::Llc`] where the machine has cache information and more than one LLC, else [`Level::Package`] (else [`Topology::default_level`]) | it separates threads that compete for a last-level cache and its memory controller |
    ///
    /// `pbind` pins to logical CPUs whatever the level; the level only orders them (the
    /// CPUs of one domain, then the next). `none` moves nothing; its level is the one its
    /// report's per-domain utilization is given at.
    ///
    /// ```
    /// use threadbalance_model::{Level, Topology};
    /// use threadbalance_policy::PolicyKind;
    /// let smt = Topology::synthetic("package:1 core:8 pu:2").unwrap();
    /// assert_eq!(PolicyKind::Speed.default_level(&smt), Level::Cpu);
    /// assert_eq!(PolicyKind::Tumbler.default_level(&smt), Level::Core);
    /// assert_eq!(PolicyKind::NumaTm.default_level(&smt), Level::Node);
    /// ```
    pub fn default_level(self, topo: &Topology) -> Level {
        match self {
            PolicyKind::Speed => Level::Cpu,
            PolicyKind::Dino => {
                if topo.has_cache_info() && topo.domains(Level::Llc).len() > 1 {
                    Level::Llc
                } else if topo.domains(Level::Package).len() > 1 {
                    Level::Package
                } else {
                    topo.default_level()
                }
            }
            PolicyKind::None
            | PolicyKind::Psets
            | PolicyKind::Pbind
            | PolicyKind::Tumbler
            | PolicyKind::Shuffling
            | PolicyKind::Handoff => topo.default_level(),
            PolicyKind::NumaFirstFit
            | PolicyKind::NumaTm
            | PolicyKind::NumaMb
            | PolicyKind::NumaBce
            | PolicyKind::NumaExclBase
            | PolicyKind::NumaExcl
            | PolicyKind::NumaMbPlus => Level::Node,
        }
    }

    /// What the policy wants its host to read ([`crate::Policy::needs`]), without building
    /// it: the same constant the policy returns.
    pub fn needs(self) -> Needs {
        match self {
            PolicyKind::Speed => crate::speed::NEEDS,
            PolicyKind::Shuffling => crate::shuffling::NEEDS,
            PolicyKind::Handoff => crate::handoff::NEEDS,
            PolicyKind::Dino => crate::dino::NEEDS,
            PolicyKind::None => Needs::OBSERVE,
            PolicyKind::Psets
            | PolicyKind::Pbind
            | PolicyKind::Tumbler
            | PolicyKind::NumaFirstFit
            | PolicyKind::NumaTm
            | PolicyKind::NumaMb
            | PolicyKind::NumaBce
            | PolicyKind::NumaExclBase
            | PolicyKind::NumaExcl
            | PolicyKind::NumaMbPlus => Needs::NOTHING,
        }
    }

    /// Every name, comma-separated, for messages.
    pub fn known() -> String {
        names().join(", ")
    }

    /// Builds the policy, checking its settings against the machine; an unset level is
    /// the policy's own ([`PolicyKind::default_level`]).
    pub fn build(
        self,
        settings: &Settings,
        topo: &Topology,
    ) -> Result<Box<dyn Policy>, PolicyError> {
        let settings = &settings.resolved(self, topo);
        match self {
            PolicyKind::None => Ok(Box::new(crate::baseline::Observe::new(settings))),
            PolicyKind::Psets => {
                check_interval("psets", settings)?;
                Ok(Box::new(crate::baseline::Psets::new(settings)))
            }
            PolicyKind::Pbind => {
                check_interval("pbind", settings)?;
                Ok(Box::new(crate::baseline::Pbind::new(settings, topo)))
            }
            PolicyKind::Tumbler => {
                check_interval("tumbler", settings)?;
                Ok(Box::new(crate::tumbler::Tumbler::new(settings)))
            }
            PolicyKind::Shuffling => {
                check_shuffling(settings)?;
                Ok(Box::new(crate::shuffling::Shuffling::new(settings)))
            }
            PolicyKind::Handoff => {
                check_interval("handoff", settings)?;
                Ok(Box::new(crate::handoff::Handoff::new(settings)))
            }
            PolicyKind::Speed => Ok(Box::new(crate::speed::Speed::new(settings, topo)?)),
            PolicyKind::Dino => {
                check_interval("dino", settings)?;
                Ok(Box::new(crate::dino::Dino::new(settings)))
            }
            PolicyKind::NumaFirstFit
            | PolicyKind::NumaTm
            | PolicyKind::NumaMb
            | PolicyKind::NumaBce
            | PolicyKind::NumaExclBase
            | PolicyKind::NumaExcl
            | PolicyKind::NumaMbPlus => crate::numa_select::build(self.name(), settings),
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PolicyKind {
    type Err = PolicyError;
    fn from_str(name: &str) -> Result<PolicyKind, PolicyError> {
        PolicyKind::ALL
            .iter()
            .copied()
            .find(|k| k.name() == name)
            .ok_or_else(|| PolicyError::Unknown {
                name: name.to_string(),
                known: PolicyKind::known(),
            })
    }
}

/// Each policy with its one line of help, for command lines (`--policy`).
#[cfg(feature = "clap")]
impl clap::ValueEnum for PolicyKind {
    fn value_variants<'a>() -> &'a [PolicyKind] {
        PolicyKind::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.about()))
    }
}

/// Every policy name, in the order the docs list them.
pub fn names() -> Vec<&'static str> {
    PolicyKind::ALL.iter().map(|k| k.name()).collect()
}

/// Builds the policy called `name`, checking its settings against the machine.
pub fn build(
    name: &str,
    settings: &Settings,
    topo: &Topology,
) -> Result<Box<dyn Policy>, PolicyError> {
    // `speed` with the kernel's own slices: the reference its short slices are measured
    // against (see "Short slices" in `speed`'s module docs).
    if name == "speed-long-slices" {
        let mut s = settings.resolved(PolicyKind::Speed, topo);
        s.speed.short_slices = false;
        return Ok(Box::new(crate::speed::Speed::new(&s, topo)?));
    }
    name.parse::<PolicyKind>()?.build(settings, topo)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_needs_what_its_policy_says_it_needs() {
        // Two packages of two nodes: every policy builds here, the NUMA ones included.
        let topo = Topology::synthetic("package:2 numa:2 core:4 pu:2").unwrap();
        let mut lock_probe = Vec::new();
        for &kind in PolicyKind::ALL {
            // No level: each policy's own (the NUMA ones balance between nodes).
            let mut settings = Settings::new(Level::Package);
            settings.level = None;
            let policy = kind.build(&settings, &topo).unwrap();
            assert_eq!(kind.needs(), policy.needs(), "{}", kind.name());
            if kind.needs().lock_probe() {
                lock_probe.push(kind.name());
            }
        }
        // The disagreement this replaced: handoff reads wake edges, not lock time, and the
        // one probe measures both.
        assert_eq!(lock_probe, ["shuffling", "handoff"]);
        assert!(!PolicyKind::Handoff.needs().lock_time);
        assert!(PolicyKind::Speed.needs().switches.is_some());
    }
}
