//! Load as periodic balancing sees it under group scheduling (`CONFIG_FAIR_GROUP_SCHED`
//! with autogroup, on by default in distribution kernels: a program started from a shell
//! is one task group).
//!
//! A task group's weight (`tg->shares`, 1024 at nice 0) is split over the CPUs in
//! proportion to its load on each (`calc_group_shares`): a program with N runnable
//! threads puts `1024 × n / N` on a CPU that runs n of them, and each of its threads
//! weighs `1024 / N` there (`task_h_load`). Everything outside the group (kernel threads,
//! daemons) weighs as a whole nice-0 task. So the more threads a program has, the more
//! the same kernel noise weighs against it. Worked example, 16 CPUs:
//!
//! | program | per CPU (n threads) | one kernel-thread burst (0.5 ms, PELT) | ratio |
//! |---|---|---|---|
//! | 3 threads on 2 CPUs | 683 (2) / 341 (1) | +11 | 1.02–1.03 |
//! | 32 threads on 16 CPUs | 64 (2) | +11 | 1.17: `imbalance_pct` |
//!
//! A burst of `d` ns adds `1024 × (1 − 2^(−d / 32.8 ms))` to its CPU's load, which then
//! halves every 32.8 ms (PELT's `LOAD_AVG_PERIOD` of 1024 µs periods).

use crate::state::{CpuIdx, Kernel, Programs, St, ThreadIdx, World};

/// PELT's half-life (`LOAD_AVG_PERIOD`: 32 periods of 1024 µs), ns.
const HALF_LIFE_NS: f64 = 32.0 * 1_024_000.0;

/// A nice-0 task's weight, and a task group's default `shares`.
pub(super) const NICE_0: f64 = 1024.0;

impl Kernel {
    /// The decayed load kernel threads left on CPU `c` (`cpu_load` outside the program's
    /// groups).
    pub(super) fn noise_load(&self, world: &World, c: CpuIdx) -> f64 {
        let k = &self.cpus[c];
        let dt = world.now.saturating_sub(k.noise_at).0 as f64;
        k.noise_load * (-dt * (std::f64::consts::LN_2 / HALF_LIFE_NS)).exp()
    }

    /// A kernel thread ran `ns` on CPU `c`: its PELT load joins the CPU's.
    pub(super) fn add_noise_load(&mut self, world: &mut World, c: CpuIdx, ns: u64) {
        let l = self.noise_load(world, c);
        let add = NICE_0 * (1.0 - (-(ns as f64) * (std::f64::consts::LN_2 / HALF_LIFE_NS)).exp());
        let k = &mut self.cpus[c];
        k.noise_load = l + add;
        k.noise_at = world.now;
    }

    /// Runnable (running or queued) threads of each application: its group's load.
    pub(super) fn runnable_per_app(&self, world: &World, programs: &dyn Programs) -> Vec<usize> {
        let mut n = vec![0usize; programs.apps()];
        for th in &world.th {
            if matches!(th.st, St::Running | St::Runnable) {
                n[th.app] += 1;
            }
        }
        // Delayed sleepers are still queued: their load stays in their group's.
        for cpu in &self.cpus {
            for &t in &cpu.delayed {
                n[world.th[t].app] += 1;
            }
        }
        n
    }

    /// Thread `t`'s load as the balancer weighs it (`task_h_load`): a nice-0 task's
    /// weight, divided among its group's runnable threads when groups are on.
    pub(super) fn task_h_load(&self, world: &World, t: ThreadIdx, per_app: &[usize]) -> f64 {
        if !self.lx.autogroup {
            return NICE_0;
        }
        (NICE_0 / per_app[world.th[t].app.ix()].max(1) as f64).floor()
    }

    /// CPU `c`'s load (`cpu_load`): its runnable threads' `task_h_load`, plus the kernel
    /// threads' decayed load when groups are on (without groups a burst's 11 against a
    /// thread's 1024 is lost in the count, which is what the model then uses).
    #[cfg(test)]
    pub(super) fn group_cpu_load(&self, world: &World, c: CpuIdx, per_app: &[usize]) -> f64 {
        self.queue_load(world, c, self.cpus[c].view().threads(), per_app)
    }

    /// CPU `c`'s load with threads `on` on its queue (as a balancing pass read it).
    pub(super) fn queue_load(
        &self,
        world: &World,
        c: CpuIdx,
        on: impl Iterator<Item = ThreadIdx>,
        per_app: &[usize],
    ) -> f64 {
        let threads: f64 = on.map(|t| self.task_h_load(world, t, per_app)).sum();
        if self.lx.autogroup {
            threads + self.noise_load(world, c).floor()
        } else {
            threads
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::state::{CpuIdx, Sim, ThreadIdx};
    use crate::workload::{Workload, spinners};
    use threadbalance_model::Nanos;

    fn spinning(n: usize, autogroup: bool) -> Sim {
        let m = machine("package:1 core:16 pu:1", None).unwrap();
        let w = Workload {
            name: "spin".into(),
            description: String::new(),
            apps: vec![spinners(n, 10_000_000_000)],
        };
        let mut opts = RunOptions::new(1);
        opts.linux.autogroup = autogroup;
        opts.linux.kernel_noise_per_s = 0.0;
        Sim::new(&m, &w, &opts)
    }

    #[test]
    fn group_load_thirty_two_threads_weigh_a_thirty_second_each() {
        // 32 spinners on 16 CPUs: the group's 1024 over 32 runnable threads is 32 each,
        // 64 on a CPU that runs two.
        let mut sim = spinning(32, true);
        sim.run_until(Nanos::from_millis(50));
        let per_app = sim.kernel.runnable_per_app(&sim.world, &sim.user);
        assert_eq!(per_app, vec![32]);
        assert_eq!(
            sim.kernel.task_h_load(&sim.world, ThreadIdx(0), &per_app),
            32.0
        );
        let c = sim.world.th[0].cpu;
        assert_eq!(sim.kernel.cpus[c].nr(), 2);
        assert_eq!(sim.kernel.group_cpu_load(&sim.world, c, &per_app), 64.0);
        // Without groups a thread weighs a whole task.
        let sim = spinning(32, false);
        assert_eq!(
            sim.kernel.task_h_load(&sim.world, ThreadIdx(0), &[32]),
            1024.0
        );
    }

    #[test]
    fn group_load_a_kernel_burst_reaches_imbalance_pct_of_a_doubled_core() {
        // A 0.5 ms burst: 1024 × (1 − 2^(−0.5 / 32.768)) = 10.77; 64 + 10.77 = 74.77, just
        // under 64 × 1.17 = 74.88 (floored, 74); a second burst on the same CPU is over.
        let mut sim = spinning(32, true);
        let c = CpuIdx(3);
        sim.kernel.add_noise_load(&mut sim.world, c, 500_000);
        let l = sim.kernel.noise_load(&sim.world, c);
        assert!((l - 10.77).abs() < 0.01, "{l}");
        // Half of it 32.768 ms later.
        sim.world.now += Nanos(32_768_000);
        assert!((sim.kernel.noise_load(&sim.world, c) - l / 2.0).abs() < 1e-9);
    }
}
