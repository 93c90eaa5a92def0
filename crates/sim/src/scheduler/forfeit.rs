//! `sched_yield` under EEVDF: the yielder forfeits the rest of its slice.
//!
//! Under CFS a yielding task was only skipped once (`skip` buddy); under EEVDF (Linux 6.6
//! and later) `yield_task_fair` moves an *eligible* yielder's vruntime to its deadline and
//! gives it a new deadline one slice later:
//!
//! ```c
//! if (entity_eligible(cfs_rq, se)) {
//!         se->vruntime = se->deadline;
//!         se->deadline += calc_delta_fair(se->slice, se);
//! }
//! ```
//!
//! So a thread that waits at a barrier with `sched_yield` queues behind the threads that
//! still work on its CPU, and is not picked again at the next switch merely because its
//! vruntime stayed low. The model keeps no deadline; it is the vruntime at the thread's
//! last pick plus one slice (`update_deadline` gives a thread past its deadline a new one,
//! one slice on from where it is), and eligibility is vruntime at most the CPU's average
//! (`avg_vruntime` of the running and queued threads, all of weight 1024).
//!
//! Worked example, slice 3 ms: a yielder picked at vruntime 100 ms runs 0.2 ms and yields
//! (vruntime 100.2 ms) next to a worker at 101 ms: the average is 100.6 ms, the yielder is
//! eligible, its deadline 103 ms becomes its vruntime, and the worker (101 ms) runs first
//! for the next 2 ms of its own before the yielder's turn comes again.

use crate::state::{CpuIdx, Kernel, ThreadIdx, World};
use threadbalance_model::Nanos;

impl Kernel {
    /// Thread `t`, queued on CPU `c` after yielding, forfeits its slice if it is eligible.
    pub(super) fn forfeit_slice(&mut self, world: &mut World, c: CpuIdx, t: ThreadIdx) {
        if !self.lx.yield_forfeit {
            return;
        }
        let cpu = &self.cpus[c];
        let n = cpu.rq.len() + usize::from(cpu.cur.is_some());
        if n < 2 {
            return; // alone: `nr_running == 1`, sched_yield returns at once
        }
        let sum: u128 = cpu
            .cur
            .into_iter()
            .chain(cpu.rq.iter().copied())
            .map(|x| u128::from(world.th[x].vruntime.0))
            .sum();
        let v = world.th[t].vruntime.0;
        if u128::from(v) * n as u128 > sum {
            return; // not eligible: nothing changes
        }
        let slice = self.slice_of(world, t);
        let ran = world.now.0.saturating_sub(world.th[t].picked_at.0);
        let deadline = v.saturating_sub(ran) + slice;
        let deadline = if deadline > v { deadline } else { v + slice };
        world.th[t].vruntime = Nanos(deadline);
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::state::{CpuIdx, Sim, St, ThreadIdx};
    use crate::workload::{Workload, spinners};
    use threadbalance_model::Nanos;

    fn two_queued(forfeit: bool) -> Sim {
        let m = machine("package:1 core:1 pu:1", None).unwrap();
        let w = Workload {
            name: "spin".into(),
            description: String::new(),
            apps: vec![spinners(2, 10_000_000_000)],
        };
        let mut opts = RunOptions::new(1);
        opts.linux.yield_forfeit = forfeit;
        let mut sim = Sim::new(&m, &w, &opts);
        // Both threads queued on CPU 0 (slice 0.75 ms × (1 + log2 1) = 0.75 ms).
        for t in 0..2 {
            sim.world.th[t].st = St::Runnable;
            sim.kernel.cpus[0].rq.push(ThreadIdx::from(t));
        }
        sim
    }

    #[test]
    fn forfeit_eligible_yielder_moves_to_its_deadline() {
        // Slice 0.75 ms. Yielder 0 picked at vruntime 100 ms, ran 0.2 ms: 100.2 ms; the
        // worker at 101 ms. Average 100.6 ms ≥ 100.2 ms: eligible; deadline
        // 100 + 0.75 = 100.75 ms.
        let mut sim = two_queued(true);
        assert_eq!(sim.kernel.slice_ns(), 750_000);
        sim.world.now = Nanos(50_000_000);
        sim.world.th[0].picked_at = Nanos(49_800_000);
        sim.world.th[0].vruntime = Nanos(100_200_000);
        sim.world.th[1].vruntime = Nanos(101_000_000);
        sim.kernel
            .forfeit_slice(&mut sim.world, CpuIdx(0), ThreadIdx(0));
        assert_eq!(sim.world.th[0].vruntime, Nanos(100_750_000));
        // It is now the later of the two: the worker is picked first.
        assert!(sim.world.th[0].vruntime > Nanos(100_600_000));
    }

    #[test]
    fn forfeit_past_its_deadline_takes_one_more_slice() {
        // Picked at 100 ms, ran 1 ms (past the 0.75 ms deadline): vruntime 101 ms, the
        // worker at 102 ms, average 101.5: eligible; new deadline 101 + 0.75 = 101.75 ms.
        let mut sim = two_queued(true);
        sim.world.now = Nanos(50_000_000);
        sim.world.th[0].picked_at = Nanos(49_000_000);
        sim.world.th[0].vruntime = Nanos(101_000_000);
        sim.world.th[1].vruntime = Nanos(102_000_000);
        sim.kernel
            .forfeit_slice(&mut sim.world, CpuIdx(0), ThreadIdx(0));
        assert_eq!(sim.world.th[0].vruntime, Nanos(101_750_000));
    }

    #[test]
    fn forfeit_ineligible_yielder_or_switch_off_changes_nothing() {
        // Yielder at 103 ms against a worker at 101 ms: average 102 < 103, not eligible.
        let mut sim = two_queued(true);
        sim.world.th[0].vruntime = Nanos(103_000_000);
        sim.world.th[1].vruntime = Nanos(101_000_000);
        sim.kernel
            .forfeit_slice(&mut sim.world, CpuIdx(0), ThreadIdx(0));
        assert_eq!(sim.world.th[0].vruntime, Nanos(103_000_000));
        // Eligible, but forfeiting is off (CFS-like yield).
        let mut sim = two_queued(false);
        sim.world.th[0].vruntime = Nanos(100_000_000);
        sim.world.th[1].vruntime = Nanos(101_000_000);
        sim.kernel
            .forfeit_slice(&mut sim.world, CpuIdx(0), ThreadIdx(0));
        assert_eq!(sim.world.th[0].vruntime, Nanos(100_000_000));
    }
}
