//! Several applications at once: one policy instance over all of them, or one per
//! application, each seeing only its own threads.
//!
//! The daemon groups processes that share CPUs under one policy instance (Tumbler §5.4:
//! "Tumbler considers CPU utilization values of all the threads (belong to multiple
//! applications)"; Shuffling §4.5 ran pairs of programs, each on all four sockets). The
//! alternative is what a daemon without groups does, and what `attach` run once per
//! program does: an instance per program, blind to the other's threads. [`run_per_app`]
//! runs that alternative so the two can be compared on the same seed:
//!
//! ```text
//!  one instance  (host::run_policy) : Engine ◄── SimHost (every thread)
//!  per app       (run_per_app)      : Engine_1 ◄── view of app 1's threads ─┐ same Sim,
//!                                     Engine_2 ◄── view of app 2's threads ─┘ one sample
//! ```
//!
//! Each instance ticks at the interval its policy asks for, through the loop step every
//! host takes (`threadbalance_manage::Ticker`), paced by a CPU budget of its own when
//! ticks cost something (`RunOptions::tick_cost`, as each would be a tool of its own);
//! at each policy event the
//! simulator is sampled once and each due instance sees its application's part of it
//! (threads, memory, wake edges between its own threads), so neither sees the other's load.
//!
//! ```
//! use threadbalance_sim::{apps::run_per_app, machine, workload, RunOptions};
//! use threadbalance_policy::Settings;
//! use threadbalance_model::Level;
//! let m = machine("package:2 core:2 pu:1", None).unwrap();
//! let w = workload("ep-barrier:phase_ms=5,work_ms=40+ep-barrier:phase_ms=5,work_ms=40",
//!                  Some(2), None).unwrap();
//! let r = run_per_app(&m, &w, "tumbler", &Settings::new(Level::Package),
//!                     &RunOptions::new(1)).unwrap();
//! assert_eq!(r.policy, "tumbler per app");
//! assert!(r.finished && r.app_runtime_s.len() == 2);
//! ```

use crate::SimError;
use crate::host::{Budget, SimHost};
use crate::machine::Machine;
use crate::queue::EventKind;
use crate::report::RunResult;
use crate::run::{RunOptions, Sim};
use crate::workload::Workload;
use std::convert::Infallible;
use threadbalance_manage::Ticker;
use threadbalance_model::{ApplyReport, Nanos, Pid, Plan, Snapshot};
use threadbalance_policy::{Host, Policy, Settings};

/// One application's part of the simulator, as a [`Host`]: the threads of `pid` in the
/// sample taken at this event, and moves applied to the simulator.
struct AppView<'a, 'b> {
    sim: SimHost<'a>,
    full: &'b Snapshot,
    pid: Pid,
}

impl Host for AppView<'_, '_> {
    type Error = Infallible;

    fn now(&self) -> Nanos {
        self.sim.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), Infallible> {
        let pid = self.pid;
        into.clear();
        into.at = self.full.at;
        into.threads
            .extend(self.full.threads.iter().filter(|s| s.key.pid == pid));
        into.memory
            .extend(self.full.memory.iter().filter(|m| m.pid == pid).cloned());
        into.wakes.extend(
            self.full
                .wakes
                .iter()
                .filter(|e| e.waker.pid == pid && e.woken.pid == pid),
        );
        into.wakes_measured = self.full.wakes_measured;
        into.waits_late = self.full.waits_late;
        into.pace = self.sim.pace();
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        // A policy only knows its own application's threads, so it names no other.
        self.sim.apply(plan)
    }

    fn watch_budget(&mut self, share: Option<f64>) {
        self.sim.grant(share);
    }

    /// Each instance is a tool of its own, paced by its own budget; its tick costs what
    /// sampling its own application's threads costs.
    fn earliest(&mut self, due: Nanos) -> Nanos {
        let pid = self.pid;
        let threads = self
            .full
            .threads
            .iter()
            .filter(|s| s.key.pid == pid)
            .count();
        self.sim.earliest_over(threads, due)
    }
}

/// One policy instance of one application.
struct Instance {
    pid: Pid,
    policy: Box<dyn Policy>,
    ticker: Ticker,
    /// Its CPU budget, when ticks cost something (`RunOptions::tick_cost`).
    budget: Option<Budget>,
}

/// Runs `workload` on `machine` with one instance of `policy` per application, each over
/// its own threads only, until every thread exits (or the horizon); the result is named
/// `"<policy> per app"`. Compare with [`crate::run_policy`]: one instance over all.
pub fn run_per_app(
    machine: &Machine,
    workload: &Workload,
    policy: &str,
    settings: &Settings,
    opts: &RunOptions,
) -> Result<RunResult, SimError> {
    let mut sim = Sim::new(machine, workload, opts);
    let topo = machine.topo.clone();
    let mut instances = Vec::new();
    for app in &sim.user.apps {
        let built = threadbalance_policy::build(policy, settings, &topo).map_err(|e| {
            SimError::PolicyBuild {
                name: policy.to_string(),
                source: e,
            }
        })?;
        instances.push(Instance {
            pid: sim.world.th[app.first].key.pid,
            policy: built,
            ticker: Ticker::new(Nanos(0)),
            budget: Budget::of(opts),
        });
    }
    // One policy, so one set of needs: every instance's is the first's.
    let needs = instances
        .first()
        .map(|i| i.policy.needs())
        .unwrap_or_default();
    // The daemon attaches once the programs have started their threads (as run_policy).
    let first = Nanos(sim.kernel.lx.spawn_gap_ns * sim.world.th.len() as u64 + 1_000_000);
    for i in &mut instances {
        i.ticker = Ticker::new(first);
    }
    sim.world.q.push(first, EventKind::Policy, 0, 0);
    let horizon = sim.horizon;
    let mut ticks = 0u64;
    let mut full = Snapshot::default();
    while let Some(_tick) = sim.run_until(horizon) {
        let now = sim.world.now;
        let Ok(()) = SimHost::new(&mut sim, &needs).sample(&mut full);
        for i in instances.iter_mut().filter(|i| i.ticker.next() <= now) {
            let mut view = AppView {
                sim: SimHost::new(&mut sim, &needs).paced(i.budget.as_mut()),
                full: &full,
                pid: i.pid,
            };
            let Ok(_) = i.ticker.tick(&mut view, &topo, i.policy.as_mut(), now);
            ticks += 1;
        }
        if let Some(at) = instances.iter().map(|i| i.ticker.next()).min() {
            sim.world.q.push(at, EventKind::Policy, 0, 0);
        }
    }
    let summary = instances
        .first()
        .map(|i| i.policy.summary())
        .unwrap_or_default();
    Ok(RunResult::measure(
        &sim,
        &format!("{policy} per app"),
        opts.seed,
        ticks,
        summary,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{machine, workload};
    use threadbalance_model::Level;

    #[test]
    fn run_per_app_each_instance_sees_only_its_own_threads() {
        // Two programs of 2 workers (plus no main thread): each view holds 2 threads of
        // one pid, and the two views together hold all 4.
        let m = machine("package:2 core:2 pu:1", None).unwrap();
        let w = workload(
            "ep-barrier:phase_ms=5,work_ms=40+ep-barrier:phase_ms=5,work_ms=40",
            Some(2),
            None,
        )
        .unwrap();
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.run_until(Nanos::from_millis(5));
        let mut full = Snapshot::default();
        let Ok(()) =
            SimHost::new(&mut sim, &threadbalance_policy::Needs::NOTHING).sample(&mut full);
        let pids: Vec<Pid> = sim
            .user
            .apps
            .iter()
            .map(|a| sim.world.th[a.first].key.pid)
            .collect();
        assert_eq!(pids.len(), 2);
        let mut seen = 0;
        for pid in pids {
            let mut view = AppView {
                sim: SimHost::new(&mut sim, &threadbalance_policy::Needs::NOTHING),
                full: &full,
                pid,
            };
            let mut part = Snapshot::default();
            let Ok(()) = view.sample(&mut part);
            assert!(part.threads.iter().all(|s| s.key.pid == pid));
            seen += part.threads.len();
        }
        assert_eq!(seen, full.threads.len());
        assert_eq!(seen, 4);
    }

    #[test]
    fn run_per_app_paces_each_instance_as_run_policy_paces_its_one() {
        // A tick that costs 1.6 ms of the tool's CPU time comes at most every 200 ms under
        // the 0.8 % budget: far fewer ticks than speed asks for when ticks are free.
        let m = machine("package:2 core:2 pu:1", None).unwrap();
        let w = workload(
            "ep-barrier:phase_ms=5,work_ms=300+ep-barrier:phase_ms=2,work_ms=300",
            Some(3),
            None,
        )
        .unwrap();
        let s = Settings::new(Level::Package);
        let mut opts = RunOptions::new(7);
        let free = run_per_app(&m, &w, "speed", &s, &opts).unwrap();
        opts.tick_cost = Some("1600,0".parse().unwrap());
        let paced = run_per_app(&m, &w, "speed", &s, &opts).unwrap();
        assert!(
            paced.policy_ticks * 4 < free.policy_ticks,
            "{} paced, {} free",
            paced.policy_ticks,
            free.policy_ticks
        );
        // Two instances, each at most every 200 ms once over budget, over about 0.6 s.
        assert!(paced.policy_ticks <= 2 * 8, "{}", paced.policy_ticks);
    }

    #[test]
    fn run_per_app_of_one_application_is_run_policy() {
        // With one application, one instance per application is one instance: the same
        // run, tick for tick, on the same seed.
        let m = machine("package:2 core:2 pu:1", None).unwrap();
        let w = workload("ep-barrier:phase_ms=5,work_ms=60", Some(3), None).unwrap();
        let s = Settings::new(Level::Package);
        let mut opts = RunOptions::new(3);
        // About the instances' logic: `run_per_app` runs no tool thread, so neither does
        // the single instance it is compared with.
        opts.tool_cpu = None;
        let one = crate::run_policy(&m, &w, "tumbler", &s, &opts).unwrap();
        let per = run_per_app(&m, &w, "tumbler", &s, &opts).unwrap();
        assert_eq!(one.runtime_s, per.runtime_s);
        assert_eq!(one.policy_ticks, per.policy_ticks);
        assert_eq!(one.migrations, per.migrations);
    }
}
