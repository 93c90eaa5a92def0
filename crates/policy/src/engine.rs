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

/// Totals over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineTotals {
    /// Ticks taken.
    pub ticks: u64,
    /// Distinct threads seen (by key).
    pub threads_seen: u64,
    /// Moves asked for.
    pub moves: u64,
    /// What the host did with them.
    pub applied: ApplyReport,
}

/// Sample → window → decide → apply, with buffers kept between ticks.
#[derive(Debug, Default)]
pub struct Engine {
    prev: Snapshot,
    cur: Snapshot,
    window: Window,
    primed: bool,
    totals: EngineTotals,
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
        let applied = if plan.moves.is_empty() {
            ApplyReport::default()
        } else {
            host.apply(&plan)
        };
        self.totals.ticks += 1;
        self.totals.threads_seen += appeared as u64;
        self.totals.moves += plan.moves.len() as u64;
        self.totals.applied.add(&applied);
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

    /// Totals since the engine was made.
    pub fn totals(&self) -> &EngineTotals {
        &self.totals
    }
}
