//! `SimHost`: the simulator behind the engine's [`Host`] trait, so policies run unchanged.
//!
//! `sample` reports what `/proc` would (run and wait time, user/system time, context
//! switches, last CPU, state) plus what the BPF futex probe would (lock time as Solaris
//! `LCK` counts it; for a policy whose [`Needs`] ask for them, the wake edges: lock hand-offs from one
//! thread to another) and the migration count; `apply` changes simulated affinities: a thread running or queued on a
//! CPU it may no longer use moves at once and pays its cache refill there.
//!
//! [`run_policy`] drives a whole run: events until the next policy tick, then the loop
//! step every host takes (`threadbalance_manage::Ticker::tick` over a `SimHost`, paced by
//! a [`Budget`] when ticks cost something), then events again, until every thread
//! exited. After each tick
//! the tool's own thread is charged what the tick and its moves cost
//! (`RunOptions::tool_cpu`, on by default; see `run/tool.rs`) and runs that long on a CPU
//! of the machine.

use crate::SimError;
use crate::machine::Machine;
use crate::queue::EventKind;
use crate::report::RunResult;
use crate::run::TickCost;
use crate::run::{RunOptions, Sim, St};
use crate::state::ThreadIdx;
use crate::workload::Workload;
use std::convert::Infallible;
use threadbalance_manage::Ticker;
use threadbalance_model::pace::{self, Pace, Pacer, steady_gap_within};
use threadbalance_model::{
    ApplyReport, MoveOutcome, Nanos, NodeId, Plan, ProcessMemory, Snapshot, WakeEdge,
};
use threadbalance_policy::{Host, Needs, Settings};

/// The simulator as a [`Host`].
#[derive(Debug)]
pub struct SimHost<'a> {
    sim: &'a mut Sim,
    wakes: bool,
    pace: Pace,
    budget: Option<&'a mut Budget>,
}

/// The tool's CPU budgets over a simulated run, kept from tick to tick as the live loop's
/// pacers keep them, and the next tick held back while the tool is over either
/// ([`Pacer::hold`], through the loop step's [`Host::earliest`]):
/// - watching: each tick charged what it costs live ([`RunOptions::tick_cost`]; its moves
///   too under an operator's whole budget, [`RunOptions::cpu_budget`]); none when ticks
///   are free;
/// - the whole ([`pace::WHOLE_BUDGET`], unless an operator set one): ticks and moves, at
///   what the tool's thread is charged on the machine ([`RunOptions::tool_cpu`], else the
///   tick cost).
#[derive(Debug)]
pub struct Budget {
    /// An operator's whole budget: it charges moves, and the policy's asks do not move it.
    operator: bool,
    /// The watching pacer and what a tick costs, when ticks cost something
    /// ([`RunOptions::tick_cost`]).
    pacer: Option<(Pacer, TickCost)>,
    /// The tool's CPU time so far, as the watching pacer charges it.
    spent: Nanos,
    /// What the last tick cost, as a live host knows it at the next (`Pace`).
    last: Option<Nanos>,
    /// The whole cap, what a tick and a move cost under it, and the CPU time charged.
    whole: Option<(Pacer, TickCost, Nanos)>,
    /// Moves done and slices changed by the tick under way.
    moves: u32,
    slices: u32,
}

impl Budget {
    /// The watching budget `opts` set, or `None` when ticks cost nothing (no tick cost):
    /// the daemon's hosts, which pace nothing whole
    /// ([`run_per_app`](crate::apps::run_per_app)).
    pub fn of(opts: &RunOptions) -> Option<Budget> {
        Budget::paced(opts, None)
    }

    /// The budgets of `run`'s tool thread: watching as [`Budget::of`], and the whole cap
    /// at what the tool's thread costs the machine (`tool`; else the tick cost), unless an
    /// operator set a whole budget. `None` when the tool costs nothing.
    pub fn of_tool(opts: &RunOptions, tool: Option<TickCost>) -> Option<Budget> {
        Budget::paced(opts, tool.or(opts.tick_cost))
    }

    fn paced(opts: &RunOptions, whole: Option<TickCost>) -> Option<Budget> {
        let operator = opts.cpu_budget.is_some();
        // The whole cap: `WHOLE_BUDGET`; an operator's budget in its place where ticks are
        // free to watch (no tick cost: the watching pacer cannot carry it), as `run
        // --cpu-budget` holds the whole tool; none where the watching pacer carries it.
        let whole_budget = match (opts.cpu_budget, opts.tick_cost) {
            (None, _) => Some(pace::WHOLE_BUDGET),
            (Some(b), None) => Some(b),
            (Some(_), Some(_)) => None,
        };
        let whole_cost = whole.zip(whole_budget);
        if opts.tick_cost.is_none() && whole_cost.is_none() {
            return None;
        }
        Some(Budget {
            operator,
            pacer: opts.tick_cost.map(|c| {
                let budget = opts.cpu_budget.unwrap_or(pace::BUDGET);
                (Pacer::new(budget, pace::BURST), c)
            }),
            spent: Nanos::ZERO,
            last: None,
            whole: whole_cost.map(|(c, b)| (Pacer::new(b, pace::BURST), c, Nanos::ZERO)),
            moves: 0,
            slices: 0,
        })
    }

    /// The pace the next sample reports: unknown before the first tick was charged, free
    /// when only the whole cap paces (a policy compensates for watching paced, which the
    /// cap leaves at its ask wherever moves are few).
    fn pace(&self) -> Pace {
        match (&self.pacer, self.last) {
            (None, _) => Pace::Free,
            (Some(_), None) => Pace::Unknown,
            (Some((p, _)), Some(c)) => Pace::Gap(steady_gap_within(c, p.budget())),
        }
    }

    /// Charges a tick over `threads` threads, and holds the next, due at `due`, while over
    /// either budget at `now`.
    fn charge(&mut self, threads: usize, now: Nanos, due: Nanos) -> Nanos {
        let moves = std::mem::take(&mut self.moves);
        let slices = std::mem::take(&mut self.slices);
        let mut at = due;
        if let Some((pacer, cost, spent)) = self.whole.as_mut() {
            *spent += cost.of(threads) + cost.acting(moves, slices);
            at = at.max(pacer.hold(due, now, *spent));
        }
        if let Some((pacer, cost)) = self.pacer.as_mut() {
            let mut tick = cost.of(threads);
            if self.operator {
                tick += cost.acting(moves, slices);
            }
            self.last = Some(tick);
            self.spent += tick;
            at = at.max(pacer.hold(due, now, self.spent));
        }
        at
    }
}

impl<'a> SimHost<'a> {
    /// A host view of `sim` sampling what a policy with `needs` reads: the one place the
    /// simulator reads [`Needs`]. Its samples carry the wake edges (`Snapshot::wakes`,
    /// every lock hand-off from one thread to another so far) only when the policy reads
    /// them, since building them costs a pass over the graph per sample. Everything else
    /// the simulator knows is sampled fresh at every tick whatever the needs: staleness,
    /// switch counts, stolen time and lock time cost it nothing.
    pub fn new(sim: &'a mut Sim, needs: &Needs) -> SimHost<'a> {
        SimHost {
            sim,
            wakes: needs.wake_edges,
            pace: Pace::Free,
            budget: None,
        }
    }

    /// The same host, its ticks paced by `budget` (none: free), and its samples saying so
    /// (`Snapshot::pace`).
    pub fn paced(self, budget: Option<&'a mut Budget>) -> SimHost<'a> {
        let pace = budget.as_deref().map_or(Pace::Free, Budget::pace);
        SimHost {
            pace,
            budget,
            ..self
        }
    }

    /// The pace its samples report.
    pub(crate) fn pace(&self) -> Pace {
        self.pace
    }

    /// [`Host::earliest`] for a tick over `threads` threads (those its policy manages).
    pub(crate) fn earliest_over(&mut self, threads: usize, due: Nanos) -> Nanos {
        let now = self.sim.now();
        match self.budget.as_deref_mut() {
            Some(b) => b.charge(threads, now, due),
            None => due,
        }
    }

    /// [`Host::watch_budget`]: the policy's ask moves the budget, unless an operator set it.
    pub(crate) fn grant(&mut self, share: Option<f64>) {
        if let Some(b) = self.budget.as_deref_mut()
            && !b.operator
            && let Some((pacer, _)) = b.pacer.as_mut()
        {
            pacer.set_budget(pace::watch_share(share));
        }
    }

    fn sample_wakes(&self, into: &mut Snapshot) {
        into.wakes_measured = true;
        let th = &self.sim.world.th;
        into.wakes
            .extend(self.sim.user.wakes.iter().filter_map(|(&(a, b), &count)| {
                let (a, b) = (th.get(a.ix())?, th.get(b.ix())?);
                let live = |t: &crate::run::Thread| !matches!(t.st, St::New | St::Done);
                (live(a) && live(b)).then_some(WakeEdge {
                    waker: a.key,
                    woken: b.key,
                    count,
                })
            }));
    }
}

impl Host for SimHost<'_> {
    type Error = Infallible;

    fn now(&self) -> Nanos {
        self.sim.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), Infallible> {
        into.clear();
        into.at = self.sim.now();
        self.sim.sample_threads(&mut into.threads);
        into.waits_late = self.sim.kernel.lx.schedstat_at_ticks;
        into.pace = self.pace;
        if self.wakes {
            self.sample_wakes(into);
        }
        // Per-node memory, like `numa_maps`, only every `memory_every`; policies keep the
        // last sample in between.
        let now = self.sim.world.now;
        let due = self
            .sim
            .memory_at
            .is_none_or(|at| now >= at + self.sim.memory_every);
        if !due {
            into.sort();
            return Ok(());
        }
        self.sim.memory_at = Some(now);
        // Resident memory per node: each live thread's pages on its home node, where they
        // were first touched or where automatic NUMA balancing has moved them since
        // (`autonuma.rs`).
        for app in &self.sim.user.apps[..self.sim.program_apps()] {
            let mut per_node = vec![0u64; self.sim.world.hw.nnode];
            let bytes = app.memory_bytes;
            for th in &self.sim.world.th[app.members()] {
                if let Some(home) = th.home.filter(|_| th.st != St::Done) {
                    per_node[home as usize] += bytes;
                }
            }
            if per_node.iter().all(|&b| b == 0) {
                continue; // not started, or exited: no numa_maps to read
            }
            let nodes = self.sim.topo.nodes();
            let pid = self.sim.world.th[app.first].key.pid;
            into.memory.push(ProcessMemory {
                pid,
                bytes_per_node: per_node
                    .iter()
                    .enumerate()
                    .filter(|(_, b)| **b > 0)
                    .map(|(i, &b)| (nodes.get(i).copied().unwrap_or(NodeId(0)), b))
                    .collect(),
            });
        }
        into.sort();
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let mut report = ApplyReport::default();
        for mv in &plan.moves {
            let outcome = match self
                .sim
                .world
                .th
                .binary_search_by(|t| t.key.cmp(&mv.thread))
            {
                Err(_) => MoveOutcome::Vanished,
                Ok(t) if matches!(self.sim.world.th[t].st, St::Done | St::New) => {
                    MoveOutcome::Vanished
                }
                Ok(t) => {
                    let set = mv.to.cpus(&self.sim.topo, &self.sim.world.th[t].original);
                    if set.is_empty() {
                        MoveOutcome::Denied
                    } else if set == self.sim.world.th[t].allowed {
                        MoveOutcome::Unchanged
                    } else {
                        self.sim.set_affinity(ThreadIdx::from(t), set);
                        MoveOutcome::Done
                    }
                }
            };
            report.count(outcome);
        }
        for s in &plan.slices {
            if let Ok(t) = self.sim.world.th.binary_search_by(|t| t.key.cmp(&s.thread))
                && !matches!(self.sim.world.th[t].st, St::Done | St::New)
                && self.sim.world.th[t].slice != s.slice
            {
                self.sim.world.th[ThreadIdx::from(t)].slice = s.slice;
                report.slices += 1;
            }
        }
        if let Some(b) = self.budget.as_deref_mut() {
            b.moves = report.done;
            b.slices = report.slices;
        }
        report
    }

    fn watch_budget(&mut self, share: Option<f64>) {
        self.grant(share);
    }

    fn earliest(&mut self, due: Nanos) -> Nanos {
        let alive = self.sim.world.th[..self.sim.program_threads()]
            .iter()
            .filter(|t| !matches!(t.st, St::Done | St::New))
            .count();
        self.earliest_over(alive, due)
    }
}

/// Runs `workload` on `machine` under policy `policy` until every thread exits (or the
/// horizon), and measures it.
pub fn run_policy(
    machine: &Machine,
    workload: &Workload,
    policy: &str,
    settings: &Settings,
    opts: &RunOptions,
) -> Result<RunResult, SimError> {
    let p = threadbalance_policy::build(policy, settings, &machine.topo).map_err(|e| {
        SimError::PolicyBuild {
            name: policy.to_string(),
            source: e,
        }
    })?;
    run_built(machine, workload, policy, p, opts)
}

/// [`run_policy`] with a policy built by the caller (one the registry does not name, such
/// as a test's reference policy); `policy` names it in the result, and `"none"` runs no
/// tool.
pub fn run_built(
    machine: &Machine,
    workload: &Workload,
    policy: &str,
    mut p: Box<dyn threadbalance_policy::Policy>,
    opts: &RunOptions,
) -> Result<RunResult, SimError> {
    let mut sim = Sim::new(machine, workload, opts);
    // The tool's own thread, charged at each tick (`RunOptions::tool_cpu`); under `none`
    // no tool runs.
    let tool_cost = opts.tool_cpu.filter(|_| policy != "none");
    if tool_cost.is_some() {
        sim.add_tool();
    }
    let topo = machine.topo.clone();
    let needs = p.needs();
    // The daemon attaches once the program has started its threads.
    let first = Nanos(sim.kernel.lx.spawn_gap_ns * sim.world.th.len() as u64 + 1_000_000);
    let mut ticker = Ticker::new(first);
    sim.world.q.push(first, EventKind::Policy, 0, 0);
    let horizon = sim.horizon;
    let mut ticks = 0u64;
    // The live loop's budgets: watching, when ticks cost something (see
    // `RunOptions::tick_cost`), and the tool's whole CPU (`pace::WHOLE_BUDGET`).
    let mut budget = Budget::of_tool(opts, tool_cost);
    while let Some(_tick) = sim.run_until(horizon) {
        let now = sim.world.now;
        let mut host = SimHost::new(&mut sim, &needs).paced(budget.as_mut());
        let Ok(report) = ticker.tick(&mut host, &topo, p.as_mut(), now);
        ticks += 1;
        if let Some(c) = tool_cost {
            let alive = sim.world.th[..sim.program_threads()]
                .iter()
                .filter(|t| !matches!(t.st, St::Done | St::New))
                .count();
            sim.charge_tool(c.of(alive) + c.acting(report.applied.done, report.applied.slices));
        }
        sim.world.q.push(ticker.next(), EventKind::Policy, 0, 0);
    }
    Ok(RunResult::measure(
        &sim,
        policy,
        opts.seed,
        ticks,
        p.summary(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::machine;
    use crate::workload::{Wait, ep_barrier};
    use threadbalance_model::{Level, Target};

    #[test]
    fn the_host_gathers_wake_edges_only_when_the_policy_needs_them() {
        let m = machine("package:2 core:2 pu:1", None).unwrap();
        let w = crate::workload("ep-barrier:phase_ms=5,work_ms=40", Some(2), None).unwrap();
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.run_until(Nanos::from_millis(5));
        let mut snap = Snapshot::default();
        let Ok(()) = SimHost::new(&mut sim, &Needs::NOTHING).sample(&mut snap);
        assert!(!snap.wakes_measured);
        let needs = threadbalance_policy::PolicyKind::Handoff.needs();
        let Ok(()) = SimHost::new(&mut sim, &needs).sample(&mut snap);
        assert!(snap.wakes_measured);
        assert!(!snap.threads.is_empty());
    }

    #[test]
    fn host_memory_sits_where_the_leader_or_each_thread_first_touched() {
        // Two programs of a main thread (100 ms of reading input) and 3 workers: leader
        // first touch (600 MB shared) and thread first touch (40 MB per thread).
        let m = machine("opteron6320-4x8", None).unwrap();
        let prog = |name: &str, leader: bool, mb: u32| {
            let mut a = crate::workload::App {
                name: name.into(),
                groups: vec![
                    crate::workload::Group {
                        name: "main".into(),
                        threads: 1,
                        ops: vec![crate::workload::Op::Compute {
                            ns: 100_000_000,
                            spread: 0.0,
                            mem: 1.0,
                        }],
                        iterations: Some(1),
                    },
                    crate::workload::Group {
                        name: "worker".into(),
                        threads: 3,
                        ops: vec![crate::workload::Op::Compute {
                            ns: 10_000_000,
                            spread: 0.0,
                            mem: 0.5,
                        }],
                        iterations: Some(300),
                    },
                ],
                ..ep_barrier(1, 1, 1, Wait::Block)
            };
            a.shared_data = leader;
            a.memory_kb = mb * 1024;
            a.main_thread = true;
            a
        };
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            apps: vec![prog("leader", true, 600), prog("thread", false, 40)],
        };
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        // During the setup only the main threads exist.
        sim.run_until(Nanos::from_millis(50));
        let mut host = SimHost::new(&mut sim, &Needs::NOTHING);
        let mut snap = Snapshot::default();
        host.sample(&mut snap).unwrap();
        assert_eq!(snap.threads.len(), 2);
        // Later: the workers run, the main threads sleep in pthread_join; no new memory
        // sample within `memory_every` (2 s).
        sim.run_until(Nanos::from_millis(300));
        let mut host = SimHost::new(&mut sim, &Needs::NOTHING);
        host.sample(&mut snap).unwrap();
        assert_eq!(snap.threads.len(), 8);
        assert!(snap.memory.is_empty());
        let leaders: Vec<_> = snap.threads.iter().filter(|s| s.key.is_leader()).collect();
        assert_eq!(leaders.len(), 2);
        assert!(
            leaders
                .iter()
                .all(|s| s.state == threadbalance_model::ThreadState::Sleeping)
        );
        sim.run_until(Nanos::from_millis(2_100));
        let mut host = SimHost::new(&mut sim, &Needs::NOTHING);
        host.sample(&mut snap).unwrap();
        assert_eq!(snap.memory.len(), 2);
        // Leader first touch: 600 MB on one node. Thread first touch: 4 × 40 MB in all.
        assert_eq!(snap.memory[0].bytes_per_node.len(), 1);
        assert_eq!(snap.memory[0].total(), 600 << 20);
        assert_eq!(snap.memory[1].total(), 4 * (40 << 20));
        // Main threads exit last, once their workers are done.
        sim.run_until(Nanos::from_secs(10));
        assert!(sim.finished());
        assert!(sim.check_invariants().is_ok());
    }

    /// Two threads of blocking 1 ms phases on machine `spec`, 2 ms in.
    fn two_threads_on(spec: &str) -> Sim {
        let m = machine(spec, None).unwrap();
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            apps: vec![ep_barrier(2, 1_000_000, 10_000_000, Wait::Block)],
        };
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.run_until(Nanos::from_millis(2));
        sim
    }

    #[test]
    fn host_apply_pins_and_reports_outcomes() {
        let mut sim = two_threads_on("package:2 core:2 pu:1");
        let key = sim.world.th[0].key;
        let mut host = SimHost::new(&mut sim, &Needs::NOTHING);
        let mut snap = Snapshot::default();
        host.sample(&mut snap).unwrap();
        assert_eq!(snap.threads.len(), 2);
        let mv = |to| threadbalance_model::Move {
            thread: key,
            to,
            why: threadbalance_model::Reason::Pin,
        };
        let plan = Plan {
            moves: vec![
                mv(Target::Domain {
                    level: Level::Package,
                    index: 1,
                }),
                mv(Target::Domain {
                    level: Level::Package,
                    index: 1,
                }),
                mv(Target::Domain {
                    level: Level::Package,
                    index: 7,
                }),
            ],
            ..Plan::default()
        };
        let r = host.apply(&plan);
        assert_eq!((r.done, r.unchanged, r.denied), (1, 1, 1));
        let c = sim.world.th[0].cpu.ix();
        assert!(c >= 2, "thread 0 moved to package 1, is on CPU {c}");
    }

    #[test]
    fn host_apply_counts_the_slices_it_changed() {
        // What the tool pays for a plan counts each slice changed, as the live actuator
        // counts them: a slice asked for that the thread has already is not a change.
        let mut sim = two_threads_on("package:1 core:2 pu:1");
        let keys = [sim.world.th[0].key, sim.world.th[1].key];
        let mut host = SimHost::new(&mut sim, &Needs::NOTHING);
        let slices = |slice: Option<Nanos>| Plan {
            slices: keys
                .iter()
                .map(|&thread| threadbalance_model::SliceChange { thread, slice })
                .collect(),
            ..Plan::default()
        };
        let short = Some(Nanos::from_micros(500));
        assert_eq!(host.apply(&slices(short)).slices, 2);
        assert_eq!(host.apply(&slices(short)).slices, 0);
        let back = host.apply(&slices(None));
        assert_eq!((back.slices, back.done), (2, 0));
    }

    #[test]
    fn tick_cost_parses_microseconds_and_rejects_bad_input() {
        let c: crate::TickCost = "20,0.07".parse().unwrap();
        // 20 µs + 17 threads × 70 ns = 21.19 µs.
        assert_eq!(c.of(17), Nanos(21_190));
        assert_eq!(c.per_move, Nanos::ZERO);
        let c: crate::TickCost = "8".parse().unwrap();
        assert_eq!(c.of(1000), Nanos::from_micros(8));
        let c: crate::TickCost = "20,0.07,46".parse().unwrap();
        assert_eq!(
            (c.of(17), c.per_move),
            (Nanos(21_190), Nanos::from_micros(46))
        );
        // A plan's parts: once a plan that changed anything, each move, each slice.
        let c: crate::TickCost = "20,0.07,10,5,4.5".parse().unwrap();
        assert_eq!(c.acting(0, 0), Nanos::ZERO);
        assert_eq!(c.acting(3, 0), Nanos::from_micros(35));
        assert_eq!(c.acting(0, 2), Nanos::from_micros(14));
        assert_eq!(c.acting(2, 2), Nanos::from_micros(34));
        // Parts left out are 0: a move alone, as before plans were priced.
        let c: crate::TickCost = "20,0.07,46".parse().unwrap();
        assert_eq!(c.acting(2, 5), Nanos::from_micros(92));
        for bad in [
            "",
            "x",
            "-1",
            "1,2,3,4,5,6",
            "1,2,-3",
            "1,2,3,4,-5",
            "nan",
            "1e9",
        ] {
            let e = bad.parse::<crate::TickCost>().unwrap_err();
            assert!(e.to_string().contains("FIXED_US"), "{bad:?}: {e}");
        }
    }

    /// 3 threads of 10 ms yield phases (600 ms of work each) on 2 cores, placed by core.
    fn three_threads_on_two_cores() -> (Machine, Workload, Settings) {
        let m = machine("package:1 core:2 pu:1", None).unwrap();
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            apps: vec![ep_barrier(3, 10_000_000, 600_000_000, Wait::Yield)],
        };
        (m, w, Settings::new(Level::Core))
    }

    #[test]
    fn host_tool_thread_takes_what_its_ticks_cost_from_the_machine() {
        // See: issue 38, item 4. 3 threads on 2 cores, always busy: `speed` ticks about
        // once a millisecond (free ticks). A tool charged 500 µs a tick takes half a core
        // of the two from the program, so the run is well over 10 % longer; it ran what
        // its ticks were charged (all but the last, cut short by the program's end; and
        // at most 5 µs a tick more, the kernel's part of its wake-ups), and under `none`
        // no tool runs.
        let (m, w, s) = three_threads_on_two_cores();
        let run = |policy: &str, tool: Option<&str>| {
            let mut opts = RunOptions::new(1);
            opts.tool_cpu = tool.map(|c| c.parse().unwrap());
            // An operator's whole budget of a core: the cap on the tool's CPU
            // (`pace::WHOLE_BUDGET`, 25 %) does not space these ticks.
            opts.cpu_budget = Some(1.0);
            run_policy(&m, &w, policy, &s, &opts).unwrap()
        };
        let free = run("speed", None);
        let charged = run("speed", Some("500,0,0"));
        assert_eq!(free.tool_cpu_s, 0.0);
        assert!(
            charged.runtime_s > free.runtime_s * 1.1,
            "charged {} s, free {} s",
            charged.runtime_s,
            free.runtime_s
        );
        let ticks = charged.policy_ticks as f64;
        assert!(
            charged.tool_cpu_s <= ticks * 505e-6 && charged.tool_cpu_s >= (ticks - 1.0) * 500e-6,
            "{} s for {ticks} ticks",
            charged.tool_cpu_s
        );
        assert_eq!(charged.thread_cpu_s.len(), 3);
        let none = run("none", Some("500,0,0"));
        assert_eq!(none.tool_cpu_s, 0.0);
    }

    #[test]
    fn host_paced_policy_ticks_within_the_live_budget() {
        // 3 threads on 2 cores, 10 ms yield phases: `speed` asks for 1 ms rounds. Free,
        // it ticks about once a millisecond. With each tick costing 100 µs, the 0.8 %
        // budget allows one tick per 100 µs / 0.008 = 12.5 ms: over a run of R seconds at
        // most R / 12.5 ms ticks, plus the burst (1 ms = 10 ticks) and the first one.
        let (m, w, s) = three_threads_on_two_cores();
        let free = run_policy(&m, &w, "speed", &s, &RunOptions::new(1)).unwrap();
        let mut opts = RunOptions::new(1);
        opts.tick_cost = Some("100".parse().unwrap());
        let paced = run_policy(&m, &w, "speed", &s, &opts).unwrap();
        let allowed = |r: &RunResult| (r.runtime_s / 0.0125).floor() as u64 + 11;
        assert!(
            free.policy_ticks > allowed(&free),
            "free {} ticks in {} s",
            free.policy_ticks,
            free.runtime_s
        );
        assert!(
            paced.policy_ticks <= allowed(&paced),
            "paced {} ticks in {} s",
            paced.policy_ticks,
            paced.runtime_s
        );
    }

    #[test]
    fn host_tool_thread_whole_cpu_is_capped_with_its_moves_counted() {
        // 3 threads on 2 cores, yielding at 10 ms barriers: `speed` asks for a round every
        // 1 ms and swaps a pair in about a third of them. With free ticks of 20 µs and
        // moves of 1 ms the tool would take about 32 % of a core; under
        // `pace::WHOLE_BUDGET` (25 %) its rounds are spaced. Moves that cost nothing leave
        // the 1 ms rounds alone, and so does an operator's whole budget, which stands in
        // for the cap.
        let (m, w, s) = three_threads_on_two_cores();
        let run = |tool: &str, budget: Option<f64>| {
            let mut opts = RunOptions::new(1);
            opts.tool_cpu = Some(tool.parse().unwrap());
            opts.tick_cost = budget.map(|_| "20,0,1000".parse().unwrap());
            opts.cpu_budget = budget;
            let r = run_policy(&m, &w, "speed", &s, &opts).unwrap();
            (
                r.policy_ticks as f64 / r.runtime_s,
                r.tool_cpu_s / r.runtime_s,
            )
        };
        let (capped, capped_share) = run("20,0,1000", None);
        let (cheap, _) = run("20,0,0", None);
        let (operator, operator_share) = run("20,0,1000", Some(1.0));
        assert!(
            capped < 850.0 && capped_share <= pace::WHOLE_BUDGET + 0.01,
            "capped: {capped:.0} ticks/s, the tool at {:.1} % of a core",
            capped_share * 100.0
        );
        assert!(cheap > 800.0, "cheap moves: {cheap:.0} ticks/s");
        assert!(
            operator > capped * 1.5 && operator_share > pace::WHOLE_BUDGET + 0.05,
            "an operator's 100 %: {operator:.0} ticks/s and {:.1} % of a core, against \
             {capped:.0} capped",
            operator_share * 100.0
        );
    }

    #[test]
    fn host_whole_budget_charges_moves_and_a_larger_one_allows_more_ticks() {
        // The same 3 threads on 2 cores, ticks of 20 µs. Under the default budget moves are
        // free: a tick comes every 2.5 ms at the most. Under a whole budget of 0.8 % with
        // each move costing 200 µs, a round of two moves costs 420 µs and its ticks come
        // every 52.5 ms: far fewer ticks and moves. A whole budget of 20 % makes the same
        // round cost 2.1 ms of wall time: more ticks than the default's again.
        let (m, w, s) = three_threads_on_two_cores();
        let run = |budget: Option<f64>| {
            let mut opts = RunOptions::new(1);
            opts.tick_cost = Some("20,0,200".parse().unwrap());
            opts.cpu_budget = budget;
            run_policy(&m, &w, "speed", &s, &opts).unwrap()
        };
        let (free, tight, wide) = (run(None), run(Some(0.008)), run(Some(0.2)));
        let rate = |r: &RunResult| (r.policy_ticks as f64 / r.runtime_s, r.migrations);
        let ((f_ticks, f_moves), (t_ticks, t_moves), (w_ticks, _)) =
            (rate(&free), rate(&tight), rate(&wide));
        assert!(
            t_ticks * 5.0 < f_ticks && t_moves * 5 < f_moves,
            "moves charged: {t_ticks:.0} ticks/s and {t_moves} moves; free: {f_ticks:.0} and {f_moves}"
        );
        assert!(
            w_ticks > f_ticks,
            "a 20 % budget: {w_ticks:.0} ticks/s; the default's: {f_ticks:.0}"
        );
    }
}
