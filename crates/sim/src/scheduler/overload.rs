//! The root domain's overload flag (`rd->overloaded`), which gates new-idle balancing.
//!
//! A CPU about to go idle balances at once only if the root domain is overloaded
//! (`sched_balance_newidle`: `if (!get_rd_overloaded(this_rq->rd) || …) goto out`). The
//! kernel keeps that flag loosely, to spare a shared cache line:
//!
//! * `add_nr_running` sets it when a CPU's queue reaches two threads;
//! * every balancing pass at the top level (`update_sd_lb_stats` with `!env->sd->parent`,
//!   periodic or new-idle) sets it to what that pass saw: whether any CPU of the
//!   machine had more than one thread (`sg_overloaded`);
//! * nothing else clears it.
//!
//! So once a phase's doubled-up cores have drained, the flag stays set until a pass looks.
//! CPUs going idle meanwhile still enter new-idle balancing, and each one's domain rolls
//! `NI_RANDOM`'s die (`newidle.rs`): a skip counts as a failed call, a try finds nothing
//! to pull, fails, and clears the flag. Those failures lower the domain's success ratio,
//! so it is tried less often when a pull would help. Without this (`Linux::sticky_overload`
//! off) the model asks whether some CPU has two threads at this very instant, and only
//! CPUs that can succeed roll the die.
//!
//! Worked example, 4 CPUs: CPU 0 runs thread A with B queued (nr_running 2: the flag
//! is set). B is pulled to CPU 1 by CPU 1's new-idle pass, which saw CPU 0 at 2 before
//! the pull: the flag stays set. CPU 2 then goes idle: no CPU holds two threads, but
//! the flag says overloaded, so CPU 2 rolls the die; if it tries, its pass sees
//! nr_running ≤ 1 everywhere, pulls nothing and clears the flag, and CPU 3 going idle
//! after it skips new-idle balancing without rolling.

use crate::state::{CpuIdx, Kernel};

impl Kernel {
    /// Whether new-idle balancing may run: the root domain's flag, or (with
    /// `Linux::sticky_overload` off) whether some CPU has two threads now.
    pub(super) fn root_overloaded(&self) -> bool {
        if self.lx.sticky_overload {
            self.overloaded
        } else {
            self.cpus.iter().any(|x| x.nr() >= 2)
        }
    }

    /// CPU `c`'s queue grew by one (`add_nr_running`): at two threads the root domain is
    /// overloaded.
    pub(super) fn queue_grew(&mut self, c: CpuIdx) {
        if self.cpus[c].nr() >= 2 {
            self.overloaded = true;
        }
    }

    /// A balancing pass at domain level `lv` gathers its statistics: at the top level
    /// it sets the flag to whether any CPU holds more than one thread.
    pub(super) fn note_overload(&mut self, lv: usize) {
        if lv + 1 == self.levels.len() {
            self.overloaded = self.cpus.iter().any(|x| x.nr() > 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::state::{CpuIdx, Sim, St, ThreadIdx};
    use crate::workload::{Workload, spinners};
    use threadbalance_model::Nanos;

    /// Four CPUs (one package, one domain level) and three spinning threads, none placed,
    /// at 50 ms; the root domain's flag kept as the kernel keeps it when `sticky`.
    fn four(sticky: bool) -> Sim {
        let m = machine("package:1 core:4 pu:1", None).unwrap();
        let w = Workload {
            name: "spin".into(),
            description: String::new(),
            apps: vec![spinners(3, 10_000_000_000)],
        };
        let mut o = RunOptions::new(1);
        o.linux.sticky_overload = sticky;
        o.linux.kernel_noise_per_s = 0.0;
        let mut sim = Sim::new(&m, &w, &o);
        sim.world.now = Nanos::from_millis(50);
        sim
    }

    /// Thread `t` runs on CPU `c`, or waits there behind the running one.
    fn put(sim: &mut Sim, t: usize, c: usize) {
        let (t, c) = (ThreadIdx::from(t), CpuIdx::from(c));
        sim.world.th[t].cpu = c;
        if sim.kernel.cpus[c].cur.is_none() {
            sim.kernel.cpus[c].cur = Some(t);
            sim.kernel.cpus[c].idle_since = None;
            sim.world.th[t].st = St::Running;
        } else {
            sim.kernel.cpus[c].rq.push(t);
            sim.world.th[t].st = St::Runnable;
        }
    }

    #[test]
    fn overload_flag_set_when_a_queue_reaches_two() {
        // CPU 0 runs thread 0; thread 1 is woken onto it: nr_running 1 → 2, so
        // add_nr_running sets the flag. A third thread on idle CPU 1 (0 → 1) would not.
        let mut sim = four(true);
        put(&mut sim, 0, 0);
        sim.kernel.queue_grew(CpuIdx(0));
        assert!(!sim.kernel.overloaded, "one thread is no overload");
        put(&mut sim, 1, 0);
        sim.kernel.queue_grew(CpuIdx(0));
        assert!(sim.kernel.overloaded);
    }

    #[test]
    fn overload_flag_stays_set_until_a_top_level_pass_looks() {
        // CPU 0 held two threads (flag set); thread 1 then moved to CPU 1: 1 + 1, no CPU
        // above one, yet the flag stays set: nothing but a balancing pass clears it. The
        // pass at the top level (level 0 of 1 here) sees max nr_running 1 and clears it;
        // a later pass that sees 2 sets it again.
        let mut sim = four(true);
        put(&mut sim, 0, 0);
        put(&mut sim, 1, 0);
        sim.kernel.queue_grew(CpuIdx(0));
        sim.kernel.cpus[0].rq.clear();
        put(&mut sim, 1, 1);
        assert!(sim.kernel.root_overloaded(), "stale until a pass looks");
        sim.kernel.note_overload(0);
        assert!(!sim.kernel.root_overloaded());
        put(&mut sim, 2, 1);
        sim.kernel.note_overload(0);
        assert!(sim.kernel.root_overloaded());
        // Without the switch the gate is the instant's state: CPU 1 holds 2 now.
        let mut sim = four(false);
        put(&mut sim, 0, 0);
        assert!(!sim.kernel.root_overloaded());
        put(&mut sim, 1, 0);
        assert!(sim.kernel.root_overloaded());
    }

    #[test]
    fn overload_stale_flag_makes_an_idle_cpu_roll_and_fail() {
        // Threads 0 and 1 run alone on CPUs 0 and 1; the flag is still set from when CPU 0
        // held both. CPU 3 goes idle: with the kernel's flag it enters new-idle
        // balancing and its domain records a call (a skip, or a try that finds nothing
        // queued and clears the flag): call 512 → 513, success stays 256. With the
        // instant's state (no CPU holds two) it does not even roll: call stays 512.
        for (sticky, calls) in [(true, 513), (false, 512)] {
            let mut sim = four(sticky);
            put(&mut sim, 0, 0);
            put(&mut sim, 1, 1);
            sim.kernel.overloaded = true;
            sim.kernel.cpus[3].idle_since = Some(sim.world.now);
            sim.kernel
                .newidle_balance(&mut sim.world, &mut sim.user, CpuIdx(3));
            let s = sim.kernel.cpus[3].newidle[0];
            assert_eq!((s.call, s.success), (calls, 256), "sticky {sticky}");
            assert!(sim.kernel.cpus[3].idle());
        }
    }
}
