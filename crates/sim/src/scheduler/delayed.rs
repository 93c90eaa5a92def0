//! Delayed dequeue (`DELAY_DEQUEUE`, Linux 6.12 and later; `dequeue_entity`,
//! `ttwu_runnable`, `can_migrate_task`).
//!
//! Under EEVDF a thread that goes to sleep while it is not *eligible* (its vruntime is
//! above its queue's average: it has had more than its share) is not taken off its run
//! queue. It stays there, `sched_delayed`, so that it still pays back what it owes when
//! it wakes soon. Three things follow, and the model does all three:
//!
//! 1. **It leaves when it would be picked.** A pick that lands on a delayed thread
//!    finishes its dequeue (`pick_next_entity` → `dequeue_entities(DEQUEUE_DELAYED)`),
//!    its lag set to zero (`DELAY_ZERO`), and picks again. The model picks the least
//!    vruntime, so a delayed thread leaves once every runnable thread of its CPU has
//!    caught up with it, or when its CPU would otherwise go idle. A CPU with only delayed
//!    threads left is never idle-looking for long: they all leave at that pick.
//! 2. **A wake-up requeues it where it is.** `try_to_wake_up` finds it still queued
//!    (`ttwu_runnable`) and requeues it on the same CPU (`ENQUEUE_DELAYED`) without
//!    `select_task_rq`: no `wake_affine`, no idle-CPU search, even if other CPUs idle.
//! 3. **Load balancing counts it but cannot pull it.** It stays in `rq->nr_running`, so
//!    its CPU may be the busiest, overloaded one; but it is not in `h_nr_runnable`, and
//!    `can_migrate_task` refuses a delayed thread unless the balancer moves load (two
//!    busy groups). A pull from a CPU whose second thread is delayed finds nothing to
//!    detach and fails, which new-idle balancing's success rate (`newidle.rs`) remembers.
//!    After `cache_nice_tries + 2` failed periodic attempts active balance runs; its
//!    `detach_one_task` takes the least recently run thread (`cfs_tasks` from the tail,
//!    delayed ones allowed since it moves load), which is the delayed one when nothing
//!    else is queued: it moves, asleep, to the idle CPU and leaves the queue there.
//!
//! Worked example (one CPU): threads A at vruntime 12 ms (running) and B at 10 ms
//! (queued) share it; A blocks. The average is (12 + 10) / 2 = 11 ms and A is above it,
//! so A stays queued, delayed: the CPU's `nr_running` stays 2, its `h_nr_runnable` is 1,
//! B runs. At a pick with B at 11 ms, A's 12 is not below B's: B goes on; with B at 13 ms
//! the pick reaches A first (12 < 13), and A leaves the queue with lag 0. Had A blocked
//! at 10 ms (10 ≤ (10 + 10) / 2) it would have slept at once.
//!
//! Off by default (`Linux::delay_dequeue`): at 16 cores it makes the model kinder to
//! Linux at N = 2M with blocking barriers (87.1 → 89.8 %, Linux 72–80 %; see the
//! simulator's `docs/sixteen-core-mechanisms.md`, "Delayed dequeue").

use super::Entry;
use crate::state::{CpuIdx, Kernel, Programs, ThreadIdx, World};
use threadbalance_model::Nanos;

impl Kernel {
    /// Running thread `t` of CPU `c` (its segment stopped) goes to sleep: whether it stays
    /// queued as a delayed thread (`dequeue_entity` with `DELAY_DEQUEUE` and
    /// `!entity_eligible`). Alone on its CPU it is its queue's average, so eligible.
    pub(super) fn delay_on_block(&mut self, world: &mut World, c: CpuIdx, t: ThreadIdx) -> bool {
        if !self.lx.delay_dequeue || self.lx.baseline != crate::state::Baseline::Linux {
            return false;
        }
        let cpu = &self.cpus[c];
        if cpu.rq.is_empty() {
            // Only delayed threads, if any, would share its queue: the pick that follows
            // takes them all off, so it would leave at once too.
            return false;
        }
        let v = world.th[t].vruntime.0;
        let others: Vec<ThreadIdx> = cpu.rq.iter().chain(&cpu.delayed).copied().collect();
        if !self.above_average(world, v, &others) {
            return false;
        }
        self.cpus[c].delayed.push(t);
        world.stats.delayed_dequeues += 1;
        true
    }

    /// Whether vruntime `v` is above the average of `v` and the vruntimes of `others`
    /// (`!entity_eligible`: every simulated thread weighs 1024).
    fn above_average(&self, world: &World, v: u64, others: &[ThreadIdx]) -> bool {
        let n = others.len() as u128 + 1;
        let sum: u128 = u128::from(v)
            + others
                .iter()
                .map(|&x| u128::from(world.th[x].vruntime.0))
                .sum::<u128>();
        u128::from(v) * n > sum
    }

    /// The delayed thread at position `i` of CPU `c`'s delayed list leaves the queue (a
    /// pick reached it, its CPU goes idle, or it may no longer run there): asleep, lag
    /// zero (`DELAY_ZERO`).
    pub(super) fn finish_delayed(&mut self, world: &mut World, c: CpuIdx, i: usize) -> ThreadIdx {
        let t = self.cpus[c].delayed.remove(i);
        world.th[t].lag = 0;
        t
    }

    /// The delayed thread on CPU `c` with a vruntime below `below` (`None`: any), the
    /// least such, as a position in the delayed list: what a pick would reach first.
    pub(super) fn delayed_below(
        &self,
        world: &World,
        c: CpuIdx,
        below: Option<Nanos>,
    ) -> Option<usize> {
        let mut best: Option<(Nanos, usize)> = None;
        for (i, &t) in self.cpus[c].delayed.iter().enumerate() {
            let v = world.th[t].vruntime;
            if below.is_some_and(|b| v >= b) {
                continue;
            }
            if best.is_none_or(|(b, _)| v < b) {
                best = Some((v, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// Wakes sleeping thread `t` if it is still queued, delayed: it is requeued on its
    /// CPU (`ttwu_runnable`, `ENQUEUE_DELAYED`) with no placement; a lag that turned
    /// into credit is dropped (`requeue_delayed_entity` under `DELAY_ZERO`). Whether it
    /// was delayed.
    pub(super) fn requeue_delayed(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
    ) -> bool {
        let c = world.th[t].cpu;

        let Some(i) = self.cpus[c].delayed.iter().position(|&x| x == t) else {
            return false;
        };
        self.cpus[c].delayed.remove(i);
        let min_vr = self.min_vruntime_now(world, programs, c).0 as i64;
        let th = &mut world.th[t];
        th.lag = (th.vruntime.0 as i64 - min_vr).max(0);
        self.enqueue(world, programs, t, c, Entry::Wakeup);
        true
    }

    /// Active balance from CPU `src`, whose only other threads are delayed, to idle CPU
    /// `dst`: `detach_one_task` takes the least recently run, the delayed thread that
    /// blocked first; it moves asleep and leaves the queue at `dst`. Whether one moved.
    pub(super) fn active_move_delayed(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        src: CpuIdx,
        dst: CpuIdx,
    ) -> bool {
        if !self.cpus[src].rq.is_empty() {
            return false;
        }
        let pos = self.cpus[src]
            .delayed
            .iter()
            .position(|&t| self.allowed(world, t, dst));
        let Some(i) = pos else {
            return false;
        };
        let t = self.finish_delayed(world, src, i);
        self.set_cpu(world, programs, t, dst);
        true
    }

    /// Thread `t` may no longer run on its CPU: if it is delayed there it leaves the
    /// queue (it will be placed afresh when it wakes).
    pub(crate) fn drop_delayed(&mut self, world: &mut World, t: ThreadIdx) {
        let c = world.th[t].cpu;
        if let Some(i) = self.cpus[c].delayed.iter().position(|&x| x == t) {
            self.finish_delayed(world, c, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::balance::Kind;
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::state::{CpuIdx, Sim, St, ThreadIdx};
    use crate::workload::{Workload, spinners};
    use threadbalance_model::Nanos;

    /// A kernel of `ncpu` CPUs (one package) with two spinning threads at time 50 ms:
    /// thread 0 runs on CPU 0 at vruntime `v0` ms, thread 1 waits in CPU 0's queue at
    /// `v1` ms (`min_vruntime` 10 ms). The other CPUs idle.
    fn pair(ncpu: usize, v0: u64, v1: u64, delay: bool) -> Sim {
        let m = machine(&format!("package:1 core:{ncpu} pu:1"), None).unwrap();
        let w = Workload {
            name: "spin".into(),
            description: String::new(),
            apps: vec![spinners(2, 10_000_000_000)],
        };
        let mut opts = RunOptions::new(1);
        opts.linux.delay_dequeue = delay;
        opts.linux.kernel_noise_per_s = 0.0;
        let mut sim = Sim::new(&m, &w, &opts);
        sim.world.now = Nanos::from_millis(50);
        for t in 0..2 {
            sim.world.th[t].cpu = CpuIdx(0);
            sim.world.th[t].load_at = sim.world.now;
            sim.world.th[t].load_avg = 1.0;
        }
        sim.world.th[0].st = St::Running;
        sim.world.th[0].vruntime = Nanos::from_millis(v0);
        sim.world.th[1].st = St::Runnable;
        sim.world.th[1].vruntime = Nanos::from_millis(v1);
        sim.world.th[1].last_ran = Nanos::from_millis(40);
        let k = &mut sim.kernel.cpus[0];
        k.cur = Some(ThreadIdx(0));
        k.rq.push(ThreadIdx(1));
        k.min_vruntime = Nanos::from_millis(10);
        k.idle_since = None;
        sim
    }

    #[test]
    fn delayed_block_above_the_average_stays_queued() {
        // Thread 0 at 12 ms blocks next to thread 1 at 10 ms: the average is
        // (12 + 10) / 2 = 11 ms < 12 ms, so thread 0 is not eligible and stays queued,
        // delayed. CPU 0 runs thread 1, and still counts two threads (nr_running) of
        // which one is runnable (h_nr_runnable).
        let mut sim = pair(1, 12, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        let k = &sim.kernel.cpus[0];
        assert_eq!(k.delayed, vec![ThreadIdx(0)]);
        assert_eq!(k.cur, Some(ThreadIdx(1)));
        assert_eq!((k.nr(), k.view().runnable()), (2, 1));
        assert_eq!(sim.world.th[0].st, St::Blocked);
        assert!(!k.idle());
    }

    #[test]
    fn delayed_block_at_or_below_the_average_or_switch_off_sleeps_at_once() {
        // 10 ms next to 10 ms: the average is 10, 10 ≤ 10: eligible, a normal sleep with
        // its lag kept (10 − min_vruntime 10 = 0).
        let mut sim = pair(1, 10, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        assert!(sim.kernel.cpus[0].delayed.is_empty());
        assert_eq!(sim.kernel.cpus[0].nr(), 1);
        // 12 ms next to 10 ms with the switch off: no delay, lag 12 − 10 = 2 ms.
        let mut sim = pair(1, 12, 10, false);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        assert!(sim.kernel.cpus[0].delayed.is_empty());
        assert_eq!(sim.world.th[0].lag, 2_000_000);
    }

    #[test]
    fn delayed_wake_requeues_in_place_though_a_cpu_idles() {
        // Two CPUs. Thread 0 (12 ms) blocks delayed on CPU 0 behind thread 1 (10 ms);
        // CPU 1 idles. Woken (by a timer), a normal sleeper would go to an idle CPU
        // (select_idle_sibling); a delayed one is requeued on CPU 0 (ttwu_runnable) and
        // waits there behind thread 1, its lag max(12 − 10, 0) = 2 ms.
        let mut sim = pair(2, 12, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        sim.kernel
            .wake(&mut sim.world, &mut sim.user, ThreadIdx(0), None);
        assert_eq!(sim.world.th[0].cpu, CpuIdx(0));
        assert_eq!(sim.world.th[0].st, St::Runnable);
        assert_eq!(sim.kernel.cpus[0].rq, vec![ThreadIdx(0)]);
        assert!(sim.kernel.cpus[0].delayed.is_empty());
        assert!(sim.kernel.cpus[1].idle());
        assert_eq!(sim.world.th[0].migrations, 0);
        // Without the switch it sleeps at once and wakes on the idle CPU 1.
        let mut sim = pair(2, 12, 10, false);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        sim.kernel
            .wake(&mut sim.world, &mut sim.user, ThreadIdx(0), None);
        assert_eq!(sim.world.th[0].cpu, CpuIdx(1));
    }

    #[test]
    fn delayed_thread_leaves_when_the_pick_reaches_it() {
        // Thread 0 delayed at 12 ms; thread 1 runs on. At 11 ms a pick still prefers
        // thread 1 (11 < 12); once thread 1 is at 13 ms the pick reaches thread 0 first
        // (12 < 13): it leaves the queue, lag 0 (DELAY_ZERO), and thread 1 runs again.
        let mut sim = pair(1, 12, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        sim.world.th[1].vruntime = Nanos::from_millis(11);
        assert_eq!(
            sim.kernel
                .delayed_below(&sim.world, CpuIdx(0), Some(Nanos::from_millis(11))),
            None
        );
        sim.world.th[1].vruntime = Nanos::from_millis(13);
        assert_eq!(
            sim.kernel
                .delayed_below(&sim.world, CpuIdx(0), Some(Nanos::from_millis(13))),
            Some(0)
        );
        sim.world.th[1].picked_at = Nanos::ZERO; // its slice is over
        sim.kernel
            .on_resched(&mut sim.world, &mut sim.user, CpuIdx(0));
        let k = &sim.kernel.cpus[0];
        assert!(k.delayed.is_empty());
        assert_eq!(k.cur, Some(ThreadIdx(1)));
        assert_eq!(sim.world.th[0].lag, 0);
        assert_eq!(sim.world.th[0].st, St::Blocked);
    }

    #[test]
    fn delayed_thread_counts_as_load_but_cannot_be_pulled() {
        // CPU 0: thread 1 runs, thread 0 delayed: nr_running 2 > 1 CPU, an overloaded
        // group. Idle CPU 1's new-idle balance picks CPU 0 as busiest, finds nothing to
        // detach (the running thread cannot move, the delayed one only when moving load)
        // and fails.
        let mut sim = pair(2, 12, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        let g = sim.kernel.group_stats(&[CpuIdx(0)]);
        assert_eq!((g.nr, g.kind()), (2, 2));
        assert!(!sim.kernel.load_balance(
            &mut sim.world,
            &mut sim.user,
            CpuIdx(1),
            0,
            Kind::NewIdle
        ));
        assert_eq!(sim.kernel.cpus[0].delayed, vec![ThreadIdx(0)]);
        assert!(sim.kernel.cpus[1].idle());
    }

    #[test]
    fn delayed_thread_moves_asleep_by_active_balance() {
        // The same two CPUs, but CPU 1's periodic balance has failed cache_nice_tries + 2
        // = 1 + 2 = 3 times: the fourth failure runs active balance, whose
        // detach_one_task takes the least recently run thread, the delayed thread 0. It
        // moves to CPU 1 asleep and leaves the queue there; thread 1 keeps running.
        let mut sim = pair(2, 12, 10, true);
        sim.kernel
            .block(&mut sim.world, &mut sim.user, CpuIdx(0), ThreadIdx(0));
        sim.kernel.cpus[1].failed[0] = 3;
        assert!(
            sim.kernel
                .load_balance(&mut sim.world, &mut sim.user, CpuIdx(1), 0, Kind::Idle)
        );
        assert_eq!(sim.world.th[0].cpu, CpuIdx(1));
        assert_eq!(sim.world.th[0].st, St::Blocked);
        assert!(sim.kernel.cpus[0].delayed.is_empty());
        assert_eq!(sim.kernel.cpus[0].cur, Some(ThreadIdx(1)));
        assert!(sim.kernel.cpus[1].idle());
    }
}
