//! The control-loop step shared by the Linux host and the simulator.

use crate::Policy;
use threadbalance_model::{ApplyReport, Nanos, Plan, Snapshot, Topology, Window};

/// What a shell provides: a clock, samples and actuation. `LinuxHost` and `SimHost` are the
/// two adapters.
pub trait Host {
    /// Why sampling failed (the target process is gone, `/proc` unreadable, …).
    type Error;

    /// Now, on the host's monotonic clock.
    fn now(&self) -> Nanos;

    /// Fills `into` with one sample per live managed thread, sorted by key, reusing its
    /// buffers. Threads that vanish while being read are left out, not errors.
    fn sample(&mut self, into: &mut Snapshot) -> Result<(), Self::Error>;

    /// Carries out a plan's moves; each outcome is counted, none is an error.
    fn apply(&mut self, plan: &Plan) -> ApplyReport;

    /// Takes the share of one core the policy would have the host spend watching until
    /// the next tick ([`Policy::watch_budget`]; `None`: the host's default). A host that
    /// does not pace its ticks, or holds an operator's whole budget, ignores it.
    fn watch_budget(&mut self, _share: Option<f64>) {}

    /// The earliest the next tick may start, when the policy wants it at `due`: `due`
    /// itself, or later while the ticks so far have cost more CPU time than the host's
    /// budget allows (never more than [`threadbalance_model::pace::MAX_DELAY`] later, see
    /// [`threadbalance_model::pace::Pacer::hold`]). Asked once a tick, after it. A host
    /// that does not pace its ticks (the default) returns `due`.
    fn earliest(&mut self, due: Nanos) -> Nanos {
        due
    }
}

/// What one tick did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TickReport {
    /// When the tick sampled.
    pub at: Nanos,
    /// Threads alive at the tick.
    pub threads: usize,
    /// Threads that appeared since the last tick.
    pub appeared: usize,
    /// Threads that vanished since the last tick.
    pub vanished: usize,
    /// Moves the policy asked for.
    pub moves: usize,
    /// What the host did with them.
    pub applied: ApplyReport,
    /// When to tick again, from `at`.
    pub next_in: Nanos,
    /// The policy's explanation, when it gave one.
    pub note: Option<String>,
}

/// Sample → window → decide → apply, with buffers kept between ticks.
#[derive(Debug, Default)]
pub struct Engine {
    prev: Snapshot,
    cur: Snapshot,
    window: Window,
    primed: bool,
}

impl Engine {
    /// A fresh engine; the first tick places threads from a zero-length window.
    pub fn new() -> Engine {
        Engine::default()
    }

    /// One control period.
    pub fn tick<H: Host>(
        &mut self,
        host: &mut H,
        topo: &Topology,
        policy: &mut dyn Policy,
    ) -> Result<TickReport, H::Error> {
        host.sample(&mut self.cur)?;
        if self.primed {
            self.window.update(&self.prev, &self.cur);
        } else {
            self.window.first(&self.cur);
            self.primed = true;
        }
        let appeared = self.window.threads.iter().filter(|t| t.appeared).count();
        let plan = policy.decide(topo, &self.window);
        host.watch_budget(policy.watch_budget());
        // A plan of slices alone is applied too: a policy that stops rotating gives its
        // threads back the kernel's slice in a round without moves.
        let applied = if plan.moves.is_empty() && plan.slices.is_empty() {
            ApplyReport::default()
        } else {
            host.apply(&plan)
        };
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(TickReport {
            at: self.prev.at,
            threads: self.window.threads.len(),
            appeared,
            vanished: self.window.vanished.len(),
            moves: plan.moves.len(),
            applied,
            next_in: plan.next_in,
            note: plan.note,
        })
    }

    /// The latest window.
    pub fn window(&self) -> &Window {
        &self.window
    }

    /// The latest snapshot (cumulative counters as sampled at the last tick): what a
    /// display keeps to show rates over a longer span than a tick
    /// ([`threadbalance_model::DisplayWindow`]).
    pub fn latest(&self) -> &Snapshot {
        &self.prev
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::{Nanos, Pid, SliceChange, ThreadKey, Tid, testutil::topo};

    /// A host that records the plans it was asked to apply.
    #[derive(Default)]
    struct Recorder {
        applied: Vec<Plan>,
    }

    impl Host for Recorder {
        type Error = std::convert::Infallible;

        fn now(&self) -> Nanos {
            Nanos::ZERO
        }

        fn sample(&mut self, into: &mut Snapshot) -> Result<(), Self::Error> {
            into.clear();
            Ok(())
        }

        fn apply(&mut self, plan: &Plan) -> ApplyReport {
            self.applied.push(plan.clone());
            ApplyReport::default()
        }
    }

    /// A policy whose plans change slices and move nothing: the first gives a thread
    /// 0.5 ms, the second gives it back its own, the third does nothing.
    struct SlicesOnly {
        round: u32,
    }

    impl Policy for SlicesOnly {
        fn name(&self) -> &'static str {
            "slices-only"
        }

        fn decide(&mut self, _topo: &Topology, _window: &Window) -> Plan {
            self.round += 1;
            let thread = ThreadKey {
                pid: Pid(1),
                tid: Tid(1),
                start_time: 1,
            };
            let mut plan = Plan::wait(Nanos::from_millis(1));
            match self.round {
                1 => plan.slices.push(SliceChange {
                    thread,
                    slice: Some(Nanos::from_micros(500)),
                }),
                2 => plan.slices.push(SliceChange {
                    thread,
                    slice: None,
                }),
                _ => {}
            }
            plan
        }
    }

    #[test]
    fn engine_plan_of_slices_alone_reaches_the_host() {
        // See: issue 38, item 5. The slice given and the one given back both reach the
        // host; a plan with neither moves nor slices does not.
        let (mut host, mut engine) = (Recorder::default(), Engine::new());
        let mut policy = SlicesOnly { round: 0 };
        let t = topo(1, 1, 2, 1);
        for _ in 0..3 {
            let Ok(report) = engine.tick(&mut host, &t, &mut policy);
            assert_eq!(report.moves, 0);
        }
        let slices: Vec<_> = host.applied.iter().map(|p| p.slices.clone()).collect();
        assert_eq!(slices.len(), 2, "{slices:?}");
        assert_eq!(slices[0][0].slice, Some(Nanos::from_micros(500)));
        assert_eq!(slices[1][0].slice, None);
    }
}
