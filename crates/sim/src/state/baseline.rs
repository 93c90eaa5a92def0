//! Which operating system's dispatcher plays the `none` baseline.
//!
//! The papers measured their systems against different kernels: speed balancing and the
//! NUMA selections against Linux, Tumbler and Shuffling against Solaris 11. The two place
//! threads differently enough to change a claim's size: Linux wakes a thread near its
//! waker inside one last-level cache and balances per scheduling domain, while Solaris'
//! dispatcher sends a woken thread to any idle CPU, and its idle CPUs steal queued threads
//! from anywhere. Shuffling §4 measured 270 moves between sockets a second for bodytrack
//! under Solaris.

use serde::Serialize;
use std::fmt;
use std::str::FromStr;

/// The kernel model a run uses for wake-up placement and load balancing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Baseline {
    /// Linux 6.x (`kernel/sched/fair.c`): see [`crate::scheduler`].
    #[default]
    Linux,
    /// A Solaris-like dispatcher: wake-up to the previous CPU if idle, else to any idle
    /// CPU of the machine, with no preference for the waker's or the previous CPU's cache
    /// or socket; idle CPUs steal queued threads from any CPU; no domain balancing.
    Solaris,
}

impl Baseline {
    /// Every baseline's name, as `FromStr` reads it.
    pub const NAMES: [&'static str; 2] = ["linux", "solaris"];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Baseline::Linux => "linux",
            Baseline::Solaris => "solaris",
        }
    }
}

impl fmt::Display for Baseline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Baseline {
    type Err = crate::SimError;

    fn from_str(s: &str) -> Result<Baseline, crate::SimError> {
        match s {
            "linux" => Ok(Baseline::Linux),
            "solaris" => Ok(Baseline::Solaris),
            other => Err(crate::SimError::Baseline { name: other.into() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Baseline;

    #[test]
    fn baseline_names_round_trip_and_unknown_names_fail() {
        for name in Baseline::NAMES {
            let b: Baseline = name.parse().unwrap();
            assert_eq!(b.to_string(), name);
        }
        assert_eq!(Baseline::default(), Baseline::Linux);
        let err = "freebsd".parse::<Baseline>().unwrap_err();
        assert!(err.to_string().contains("linux, solaris"), "{err}");
    }
}
