//! The papers' baselines: `none` (Linux decides; we observe), `psets` and `pbind`.

use crate::{Policy, Settings};
use threadbalance_model::{Nanos, Plan, Topology, Window};

/// How often `none` samples, to report utilization: Tumbler's longest grouping interval.
const OBSERVE_INTERVAL: Nanos = Nanos::from_millis(100);

/// `none`: moves nothing; the engine still samples so the summary can report what Linux did.
#[derive(Debug, Clone)]
pub struct Observe {
    interval: Nanos,
}

impl Observe {
    /// Observes every `settings.interval` (100 ms by default).
    pub fn new(settings: &Settings) -> Observe {
        Observe {
            interval: settings.interval.unwrap_or(OBSERVE_INTERVAL),
        }
    }
}

impl Policy for Observe {
    fn name(&self) -> &'static str {
        "none"
    }

    fn decide(&mut self, _topo: &Topology, _window: &Window) -> Plan {
        Plan::wait(self.interval)
    }
}
