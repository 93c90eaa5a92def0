//! The tool's own thread: what watching and moving cost the simulated machine.
//!
//! A live `threadbalance` is a thread of the machine it manages. Each tick it samples
//! every thread, decides and moves some; that CPU time is taken on whatever CPU the
//! kernel put it on, from the threads that would have run there. The simulator runs it
//! the same way: one more thread of the simulated Linux (a process of its own, so an
//! autogroup of its own), which the policy never sees. At each tick the host charges it
//! what the tick cost on a live machine, plus what carrying out its plan cost (once a
//! plan that changed anything, and each move and slice change), and wakes it (a
//! timer wake-up, from the CPU it last ran on); it runs that long, competing for a CPU as
//! any thread does, then sleeps until the next tick. A tick that comes while it is still
//! working on the last adds to what it owes.
//!
//! ```text
//!  Policy event ─► Engine::tick ─► charge(fixed + per thread × threads
//!                                         + per plan + per move × done + per slice × slices)
//!                                     │ asleep: wake (select_task_rq, from its last CPU)
//!                                     ▼
//!  tool thread: Work(owed) on its CPU ─► owed = 0 ─► block, no timer (the next tick wakes it)
//! ```
//!
//! What it leaves out: the decision takes effect at the tick, not once the tool has run
//! (a live tool's moves land a few tens of µs later), and the tool's memory traffic and
//! cache footprint (it is modelled as in-cache work).
//!
//! The costs, by default, are the ones `bench --cost` measured ([`MEASURED`]); `sim
//! --tool-cpu free` leaves them out (`RunOptions::tool_cpu = None`), as every table was
//! made before this thread was modelled.

use super::{Act, AppState, CpuIdx, Kernel, Prog, Sim, St, ThreadIdx, TickCost, Userspace, World};
use crate::state::{AppIdx, ProgIdx, ToolThread};
use crate::workload::Op;
use threadbalance_model::{CpuSet, Nanos, Pid, ThreadKey, Tid};

/// What the tool costs a live machine, as `bench --cost` measured it on the 2-core VM
/// (the project's development machine; kernel 6.18, BPF run-time counters):
///
/// - a tick: **19.8 µs + 0.298 µs a thread** of the managed program (the least-squares
///   line through the steady ticks' medians at 4, 64, 256 and 1024 threads, `bench
///   --cost`'s "tick cost fit"; docs/cost.md, "Where a live tick goes");
/// - a plan that changed anything: **14.0 µs**, plus **14.6 µs a move** and **6.4 µs a
///   time slice changed** (`bench --cost`'s "plan cost fit": the tool's own
///   `LinuxHost::apply` over 16 busy threads, plans of 1 to 16 moves and of 1 to 16 slice
///   changes, one a millisecond; the mean of two full runs, 16.0 + 17.5 and 11.9 + 11.7
///   µs, slices 6.6 and 6.2, above a third's 4.1 + 9.8 and 4.8; docs/cost.md, "A plan's
///   price"). A move was charged 46 µs until
///   then: what `run`'s own rounds pay a move on 2 CPUs, where a plan holds one or two
///   and its slice changes, so a 16-move round on 64 cores was charged 736 µs where the
///   tool pays about 250.
///
/// A server's system calls are likely cheaper than this VM's: these are an upper
/// estimate until measured there (`bench --cost` on that machine gives all five parts,
/// as `sim --tick-cost F,P,M,J,S`).
pub const MEASURED: TickCost = TickCost {
    fixed: Nanos(19_800),
    per_thread_ns: 298.0,
    per_move: Nanos(14_600),
    per_plan: Nanos(14_000),
    per_slice: Nanos(6_400),
};

/// The tool's pid in the simulator: above every program's (1000, 2000, …), so the
/// threads stay sorted by key.
const TOOL_PID: i32 = i32::MAX;

impl Sim {
    /// Adds the tool's thread, not started, after every program's thread (and its
    /// application after theirs), so that the programs' indices are unchanged.
    pub(crate) fn add_tool(&mut self) {
        let all = self.topo.online().clone();
        self.user.add_tool(&mut self.world, all);
    }

    /// Charges the tool `cost` of CPU time (a tick and its moves) and wakes its thread:
    /// started on the first charge (exec'd onto the idlest CPU), woken as by a timer
    /// afterwards; a thread still at work takes it on when done.
    pub fn charge_tool(&mut self, cost: Nanos) {
        self.user
            .charge_tool(&mut self.kernel, &mut self.world, cost);
    }

    /// The CPU time charged to the tool so far, and how much of it it has run.
    pub fn tool_cpu(&self) -> (Nanos, Nanos) {
        self.user.tool_cpu(&self.world)
    }
}

impl Userspace {
    /// Adds the tool's thread, not started, after every program's thread (and its
    /// application after theirs), so that the programs' indices are unchanged.
    fn add_tool(&mut self, world: &mut World, all: CpuSet) {
        let t = ThreadIdx::from(world.th.len());
        let app = AppIdx::from(self.apps.len());
        let Some(template) = world.th.first().cloned() else {
            return;
        };
        let prog = ProgIdx::from(self.progs.len());
        self.progs.push(Prog {
            ops: vec![Op::Compute {
                ns: 0,
                spread: 0.0,
                mem: 0.0,
            }],
            iterations: None,
            puts: Vec::new(),
        });
        let mut th = template;
        th.key = ThreadKey {
            pid: Pid(TOOL_PID),
            tid: Tid(TOOL_PID),
            start_time: 1,
        };
        th.app = app;
        th.prog = prog;
        th.pc = 0;
        th.iter = 0;
        th.st = St::New;
        th.allowed = all.clone();
        th.original = all;
        th.act = Act::Idle;
        th.home = None;
        world.th.push(th);
        let base = self
            .apps
            .last()
            .map(|a| (a.lock_base, a.barrier_base, a.queue_base));
        let Some((lock_base, barrier_base, queue_base)) = base else {
            world.th.pop();
            self.progs.pop();
            return;
        };
        self.apps.push(AppState {
            name: "threadbalance".into(),
            first: t,
            threads: 1,
            done: 0,
            finished_at: None,
            lock_base,
            barrier_base,
            queue_base,
            // Its own data: a few KiB of samples and plans (64 lines).
            footprint_lines: 64.0,
            spin_ns: 0,
            shared_data: false,
            memory_bytes: 0,
            main_thread: false,
            joining: false,
            scan: crate::state::SharedScan::new(Nanos::ZERO),
        });
        self.tool = Some(ToolThread {
            thread: t,
            app,
            owed: Nanos::ZERO,
            charged: Nanos::ZERO,
        });
    }

    /// Charges the tool `cost` of CPU time (a tick and its moves) and wakes its thread:
    /// started on the first charge (exec'd onto the idlest CPU), woken as by a timer
    /// afterwards; a thread still at work takes it on when done.
    fn charge_tool(&mut self, kernel: &mut Kernel, world: &mut World, cost: Nanos) {
        let Some(tool) = self.tool.as_mut() else {
            return;
        };
        tool.owed += cost;
        tool.charged += cost;
        let t = tool.thread;
        match world.th[t].st {
            St::New => {
                let c = kernel.fork_cpu(world, t, None);
                let th = &mut world.th[t];
                th.born = world.now;
                th.key.start_time = 1 + world.now.0 / 10_000_000;
                th.scan = crate::state::Scan::new(world.now);
                kernel.wake_up_new(world, self, t, c);
            }
            St::Blocked => kernel.wake(world, self, t, None),
            _ => {}
        }
    }

    /// The CPU time charged to the tool so far, and how much of it it has run.
    fn tool_cpu(&self, world: &World) -> (Nanos, Nanos) {
        self.tool
            .as_ref()
            .map_or((Nanos::ZERO, Nanos::ZERO), |tool| {
                let th = &world.th[tool.thread];
                let open = if th.st == St::Running {
                    world.now.saturating_sub(self.cpus[th.cpu].seg_start)
                } else {
                    Nanos::ZERO
                };
                (tool.charged, th.run + open)
            })
    }

    /// Whether thread `t` is the tool's.
    pub(crate) fn is_tool(&self, t: ThreadIdx) -> bool {
        self.tool.as_ref().is_some_and(|tool| tool.thread == t)
    }

    /// How many of `World::th` are the programs' (the tool's thread comes after them).
    pub(crate) fn program_threads(&self, world: &World) -> usize {
        self.tool
            .as_ref()
            .map_or(world.th.len(), |tool| tool.thread.ix())
    }

    /// How many of `Userspace::apps` are the programs' (the tool's comes after them).
    pub(crate) fn program_apps(&self) -> usize {
        self.tool
            .as_ref()
            .map_or(self.apps.len(), |tool| tool.app.ix())
    }

    /// The tool's thread got CPU `c`: it runs what it owes, or sleeps until the next
    /// tick.
    pub(super) fn tool_step(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
    ) {
        let owed = self
            .tool
            .as_mut()
            .map_or(Nanos::ZERO, |tool| std::mem::take(&mut tool.owed));
        world.th[t].pc = 0;
        if owed > Nanos::ZERO {
            world.th[t].act = Act::Work {
                left: owed.0 as f64,
                lock: None,
                mem: 0.0,
            };
            self.start_segment(kernel, world, c);
        } else {
            world.th[t].act = Act::Idle;
            kernel.block(world, self, c, t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::workload::{Wait, Workload, ep_barrier};

    fn one_core_sim(tool: bool) -> Sim {
        // 1 thread of a 10 ms barrier program on a machine of one core.
        let m = machine("package:1 core:1 pu:1", None).unwrap();
        let w = Workload {
            name: "t".into(),
            description: String::new(),
            apps: vec![ep_barrier(1, 10_000_000, 100_000_000, Wait::Block)],
        };
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        if tool {
            sim.add_tool();
        }
        sim
    }

    #[test]
    fn tool_charged_time_is_taken_from_the_program_on_its_cpu() {
        // One core, one thread always at work: 10 charges of 1 ms each take 10 ms from it,
        // so its 100 ms of work end 10 ms later, and the tool ran what it was charged;
        // the policy's samples never see it.
        let mut free = one_core_sim(false);
        free.run_until(Nanos::from_secs(1));
        assert!(free.finished());
        let end_free = free.world.th[0].died;
        let mut sim = one_core_sim(true);
        for k in 1..=10u64 {
            sim.run_until(Nanos::from_millis(5 * k));
            sim.charge_tool(Nanos::from_millis(1));
            let mut samples = Vec::new();
            sim.sample_threads(&mut samples);
            assert_eq!(samples.len(), 1);
        }
        sim.run_until(Nanos::from_secs(1));
        assert!(sim.finished(), "the tool does not keep the run alive");
        assert!(sim.check_invariants().is_ok());
        let end = sim.world.th[0].died;
        let (charged, ran) = sim.tool_cpu();
        assert_eq!(charged, Nanos::from_millis(10));
        // What it was charged, and the kernel's part of its wake-ups and sleeps (a few µs
        // each: the system calls, and its cache refilled after a migration).
        let kernel = ran.saturating_sub(charged);
        assert!(ran >= charged && kernel < Nanos::from_micros(50), "{ran:?}");
        let late = end.saturating_sub(end_free);
        assert!(
            late >= Nanos::from_millis(10) && late < Nanos::from_millis(12),
            "{late:?} later"
        );
        assert_eq!(sim.world.th[sim.program_threads()].st, St::Blocked);
    }
}
