//! The Linux model that plays the `none` baseline: per-CPU run queues with fair time
//! slices, wake-up placement, and load balancing per scheduling domain.
//!
//! It follows `kernel/sched/fair.c` of Linux 6.x in shape, kept small:
//!
//! | mechanism | model | kernel |
//! |---|---|---|
//! | fair share | pick the least vruntime; a sleeper keeps its lag (clamped to ± one slice) | EEVDF `pick_eevdf`, `place_entity` |
//! | slices | `base_slice × (1 + log2 min(ncpu, 8))`, or a thread's own (set by a policy's `Plan::slices`, kept within 0.1–100 ms; its lag then bounded by twice it, at least a tick), checked at each tick (`HZ`); a wake-up, or an arrival moved by affinity or by the balancer, preempts only a thread past its slice | `sysctl_sched_base_slice`, `sched_attr.sched_runtime` (6.12+), `update_entity_lag`, `RUN_TO_PARITY`, `wakeup_preempt` (from `ttwu_do_activate`, `move_queued_task`, `attach_task`) |
//! | wake-up | prev CPU if idle; else towards the waker's CPU only if, with the thread's own PELT load added, it stays less loaded than prev by half the domain's `imbalance_pct` (within an LLC the model keeps a count rule: see `wake_affine`), and not when the waker and wakee flip partners a lot; then an idle CPU of **that target's LLC**: prev if idle there, the CPU used before prev (`recent_used_cpu`), else a scan of at most `llc_weight × (1 − (1.17 u)²)` CPUs for LLC utilization `u` (none above 85 %) | `select_task_rq_fair`, `wake_affine_idle`, `wake_affine_weight`, `wake_wide`, `select_idle_sibling`, `SIS_UTIL` |
//! | fork | walk the domains top-down to the group with more idle CPUs; NUMA keeps a small imbalance | `sched_balance_find_dst_group` |
//! | periodic balance | per domain every `weight` ms (× 16 when busy, doubled up to 2 × weight while balanced), by the first idle CPU of the group; busiest group by type (spare / fully busy / overloaded) then load; `imbalance_pct` 110 (SMT) / 117; task-count imbalance when the local group has spare capacity, load imbalance otherwise; a task's load is halved per failed attempt; cache-hot tasks (ran < 0.5 ms ago) stay unless attempts failed more than `cache_nice_tries`; active balance after `cache_nice_tries + 2` failures where tasks were to move (`migrate_task`), never where load was (both groups busy) | `sched_balance_rq`, `calculate_imbalance`, `detach_tasks` |
//! | idle balance | a CPU going idle pulls at once if its average idle time is at least the migration cost and some CPU is overloaded; each domain is tried with a probability that follows its success rate (`newidle.rs`) | `sched_balance_newidle`, `NI_RANDOM` (6.18.5+) |
//! | yield | the yielder hands its CPU to a queued non-yielder; with `Linux::yield_forfeit` (off) an eligible yielder's vruntime also moves to its deadline (`forfeit.rs`) | `yield_task_fair` |
//! | nohz | idle CPUs do not tick; a CPU with ≥ 2 runnable threads, or with another busy CPU in its LLC, kicks balancing on their behalf | `nohz_balancer_kick` (`nr_busy_cpus > 1`) |
//! | migration cost | a thread that changes core refetches its working set from the cache it left: an LLC hit or a sibling's L2 within an LLC, a remote probe across | (hardware) |
//! | NUMA balancing | pages follow their threads after two scans ([`crate::autonuma`]) | `task_numa_work`, `should_numa_migrate_memory` |
//! | kernel noise | 20 times a second a busy CPU runs a kernel thread for 0.5 ms (1 % of the CPU): its thread's activity ends that much later, and a queued thread may take the CPU after it | kworkers, RCU, timer softirqs, hypervisor exits |
//! | spreading | between groups with spare capacity the busiest CPU may run a lone thread; nothing can be detached, the attempt fails, and after `cache_nice_tries + 2` failures its running thread is pushed | `sched_balance_find_src_rq`, `imbalanced_active_balance`, `active_load_balance_cpu_stop` |
//!
//! Load is the number of runnable threads (every simulated thread has nice 0), not PELT's
//! decayed average; that is the main simplification. Two places weigh load otherwise:
//! wake-up placement across LLCs uses a PELT-like per-thread load (32 ms half-life), since
//! there the sleeper's own load decides; and periodic balancing between busy CPUs weighs
//! a thread as group scheduling does, `1024 / N` of its program's N runnable threads,
//! against kernel threads' decayed load at full weight (`group_load.rs`, autogroup).

mod balance;
mod delayed;
mod forfeit;
mod group_load;
mod newidle;
mod overload;
mod solaris;
mod wake;
#[cfg(test)]
mod worked;

use crate::queue::EventKind;
pub(crate) use crate::state::SdLevel;
use crate::state::{
    Act, CpuIdx, Hw, Kernel, KernelCpu, NewidleStats, Programs, QueueView, St, ThreadIdx, World,
};
pub use crate::state::{Baseline, Linux};
use threadbalance_model::{Level, Nanos, Topology};
use threadbalance_policy::rng::Rng;

/// How a runnable thread comes onto a CPU's queue ([`Kernel::enqueue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// It woke, or is new: on an idle CPU it pays the wake-up's cost and ends the CPU's
    /// idle period.
    Wakeup,
    /// Moved here by its affinity or by the balancer (`move_queued_task`, `attach_task`).
    Migration,
    /// Moved here by the Solaris dispatcher model, whose moves do not preempt.
    Dispatch,
}

/// Builds the domain hierarchy: SMT (if any), LLC, node or package, machine, skipping
/// levels that group the same CPUs as the level below.
pub(crate) fn build_levels(topo: &Topology, hw: &Hw) -> Vec<SdLevel> {
    let n = hw.cpu_id.len();
    let mut parts: Vec<Vec<u32>> = vec![
        hw.core.clone(),
        hw.llc.clone(),
        hw.node.clone(),
        hw.pkg.clone(),
        vec![0; n],
    ];
    let count = |p: &Vec<u32>| {
        let mut v = p.clone();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    parts.sort_by_key(|p| std::cmp::Reverse(count(p)));
    parts.dedup_by_key(|p| count(p));
    parts.retain(|p| count(p) < n || n == 1);
    let llc_size = topo
        .domains(Level::Llc)
        .first()
        .map_or(1, |d| d.cpus.len())
        .max(1);
    let mut levels = Vec::new();
    let mut prev: Vec<u32> = (0..n as u32).collect();
    let mut prev_numa = false;
    for (i, p) in parts.iter().enumerate() {
        // Dense domain ids in order of lowest CPU.
        let mut ids: Vec<u32> = Vec::new();
        let dom_of: Vec<u32> = p
            .iter()
            .map(|k| match ids.iter().position(|x| x == k) {
                Some(j) => j as u32,
                None => {
                    ids.push(*k);
                    (ids.len() - 1) as u32
                }
            })
            .collect();
        let ndom = ids.len();
        let mut groups: Vec<Vec<Vec<CpuIdx>>> = vec![Vec::new(); ndom];
        let mut group_key: Vec<Vec<u32>> = vec![Vec::new(); ndom];
        for c in 0..n {
            let d = dom_of[c] as usize;
            let g = prev[c];
            match group_key[d].iter().position(|&x| x == g) {
                Some(j) => groups[d][j].push(CpuIdx::from(c)),
                None => {
                    group_key[d].push(g);
                    groups[d].push(vec![CpuIdx::from(c)]);
                }
            }
        }
        let weight = groups
            .first()
            .map_or(1, |g| g.iter().map(Vec::len).sum::<usize>());
        let numa = (0..n).any(|c| dom_of[c] == 0 && hw.node[c] != hw.node[0]);
        let smt = i == 0
            && *p == hw.core
            && groups
                .first()
                .is_some_and(|g| g.iter().all(|x| x.len() == 1));
        let nr_llcs = (weight / llc_size).max(1);
        levels.push(SdLevel {
            dom_of,
            groups,
            numa,
            imbalance_pct: if smt { 110 } else { 117 },
            cache_nice_tries: if smt {
                0
            } else if numa {
                2
            } else {
                1
            },
            min_interval: Nanos::from_millis(weight as u64),
            max_interval: Nanos::from_millis(2 * weight as u64),
            imb_numa_nr: if nr_llcs == 1 {
                (weight >> 3).max(1)
            } else {
                nr_llcs
            },
            prefer_sibling: !prev_numa,
        });
        prev_numa = numa;
        prev = p.clone();
    }
    levels
}

#[derive(Debug, Clone, Copy, Default)]
struct GroupStats {
    nr: usize,
    idle: usize,
    ncpu: usize,
}

impl GroupStats {
    /// The counts of the group of `cpus`, each CPU's queue read by `read`.
    fn of<'a>(cpus: &[CpuIdx], read: impl Fn(CpuIdx) -> QueueView<'a>) -> GroupStats {
        let mut s = GroupStats {
            ncpu: cpus.len(),
            ..GroupStats::default()
        };
        for &c in cpus {
            let q = read(c);
            s.nr += q.nr();
            s.idle += usize::from(q.idle());
        }
        s
    }

    /// 0 has spare capacity, 1 fully busy, 2 overloaded.
    fn kind(&self) -> u8 {
        match self.nr.cmp(&self.ncpu) {
            std::cmp::Ordering::Less => 0,
            std::cmp::Ordering::Equal => 1,
            std::cmp::Ordering::Greater => 2,
        }
    }
}

impl Kernel {
    /// The kernel of a machine of `topo` (with hardware `hw`) before any thread: its
    /// domains, every CPU idle, `lx` its parameters; `seed` draws its tie-breaks.
    pub(crate) fn new(topo: &Topology, hw: &Hw, lx: Linux, seed: u64) -> Kernel {
        let levels = build_levels(topo, hw);
        let nlv = levels.len();
        let cpus = (0..hw.cpu_id.len())
            .map(|_| KernelCpu {
                cur: None,
                rq: Vec::with_capacity(8),
                delayed: Vec::new(),
                min_vruntime: Nanos::ZERO,
                tick_armed: false,
                idle_since: Some(Nanos::ZERO),
                avg_idle: Nanos(2 * lx.migration_cost_ns),
                last_balance: vec![Nanos::ZERO; nlv],
                interval: levels.iter().map(|l| l.min_interval).collect(),
                failed: vec![0; nlv],
                newidle: vec![NewidleStats::default(); nlv],
                noise_load: 0.0,
                noise_at: Nanos::ZERO,
            })
            .collect();
        Kernel {
            lx,
            levels,
            llc_scan: vec![None; hw.llc_cpus.len()],
            nohz_next: Nanos::ZERO,
            seen: None,
            tie: Rng::new(seed ^ 0x0071_E50F_7AC4),
            overloaded: false,
            cpus,
        }
    }

    pub(crate) fn slice_ns(&self) -> u64 {
        let n = self.cpus.len().clamp(1, 8) as u64;
        self.lx.base_slice_ns * (1 + u64::from(63 - n.leading_zeros()))
    }

    /// How far from `min_vruntime` thread `t` may be placed, either way: one default
    /// slice; with a slice of its own, twice that slice but at least a tick, as the
    /// kernel's `update_entity_lag` bounds it (so at HZ 250 a short slice keeps 4 ms).
    pub(crate) fn lag_limit(&self, world: &World, t: ThreadIdx) -> u64 {
        match world.th[t].slice {
            None => self.slice_ns(),
            Some(_) => {
                (2 * self.slice_of(world, t)).max(1_000_000_000 / u64::from(self.lx.hz.max(1)))
            }
        }
    }

    /// Thread `t`'s slice: its own where one was set (`sched_setattr`, Linux 6.12+: the
    /// kernel keeps it within 0.1–100 ms), else the default.
    pub(crate) fn slice_of(&self, world: &World, t: ThreadIdx) -> u64 {
        world.th[t]
            .slice
            .map_or_else(|| self.slice_ns(), |s| s.0.clamp(100_000, 100_000_000))
    }

    pub(crate) fn allowed(&self, world: &World, t: ThreadIdx, c: CpuIdx) -> bool {
        world.th[t].allowed.contains(world.hw.cpu_id[c])
    }

    /// Moves thread `t`'s CPU to `c`, counting the migration and its cache refill.
    ///
    /// The refill fetches the working set from where it is, the cache of the CPU left
    /// behind: within an LLC a line costs an LLC hit or a probe of the sibling's private
    /// cache (cache to cache), across sockets a remote probe (`Hw::line_ns`). Within an
    /// LLC only what the old core held privately is lost (at most `Hw::private_lines`):
    /// the rest of the footprint is in the shared LLC, or in memory, for either core.
    /// Across LLCs what is lost is at most the private caches and the thread's share of
    /// the LLC it left (`llc_share`); the rest came from memory on either side.
    pub(crate) fn set_cpu(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        c: CpuIdx,
    ) {
        let old = world.th[t].cpu;
        if old == c {
            return;
        }
        let same_core = world.hw.core[old] == world.hw.core[c];
        let refill = if same_core {
            0.0
        } else {
            let lines = programs.footprint_lines(world, t);
            let lost = if world.hw.llc[old] == world.hw.llc[c] {
                lines.min(world.hw.private_lines)
            } else if lines > world.hw.private_lines {
                lines.min(world.hw.private_lines + self.llc_share(world, programs, t, old, lines))
            } else {
                lines
            };
            lost * world.hw.line_ns(old, c) / world.hw.mlp
        };
        let th = &mut world.th[t];
        th.cpu = c;
        th.migrations += 1;
        th.debt += Nanos(refill as u64);
        world.stats.migrations += 1;
        if world.hw.pkg[old] != world.hw.pkg[c] {
            world.stats.cross_migrations += 1;
        }
    }

    /// Lines of the LLC of CPU `c` that thread `t` (footprint `lines`) holds: the LLC split
    /// over the threads that live behind it in proportion to their footprints, as
    /// competing working sets share a cache that holds none of them whole.
    fn llc_share(
        &self,
        world: &World,
        programs: &dyn Programs,
        t: ThreadIdx,
        c: CpuIdx,
        lines: f64,
    ) -> f64 {
        let llc = world.hw.llc[c];
        let behind: f64 = (0..world.th.len())
            .map(ThreadIdx::from)
            .filter(|&u| {
                u != t
                    && !matches!(world.th[u].st, St::New | St::Done)
                    && world.hw.llc[world.th[u].cpu] == llc
            })
            .map(|u| programs.footprint_lines(world, u))
            .sum();
        world.hw.llc_lines[llc as usize] * lines / (lines + behind)
    }

    /// The thread CPU `c` runs, if any: how the programs part learns it (the run queues
    /// are the kernel's).
    pub(crate) fn running(&self, c: CpuIdx) -> Option<ThreadIdx> {
        self.cpus[c].cur
    }

    /// New thread `t` enters the kernel, runnable on CPU `c` (`wake_up_new_task`): it
    /// starts with a full load (`init_entity_runnable_average`) and the queue's
    /// `min_vruntime`, and is queued.
    pub(crate) fn wake_up_new(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        c: CpuIdx,
    ) {
        let th = &mut world.th[t];
        th.load_avg = 1.0;
        th.load_at = world.now;
        th.cpu = c;
        th.st = St::Runnable;
        th.lag = 0; // `enqueue` places it at the queue's `min_vruntime`
        self.enqueue(world, programs, t, c, Entry::Wakeup);
    }

    /// The thread running on CPU `c` has exited (`do_exit`): the CPU forgets it and
    /// picks its next thread.
    pub(crate) fn exited(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        self.cpus[c].cur = None;
        self.schedule(world, programs, c);
    }

    /// Counts, per thread, the run queues it is on (running or queued) into `seen`; the
    /// first running thread that is not `Running` there, or queued thread that is not
    /// `Runnable` there (the run-queue half of `Sim::check_invariants`).
    pub(crate) fn count_queued(
        &self,
        world: &World,
        seen: &mut [u32],
    ) -> Result<(), crate::Violation> {
        for (c, cpu) in self.cpus.iter().enumerate() {
            let c = CpuIdx::from(c);
            if let Some(t) = cpu.cur {
                seen[t.ix()] += 1;
                if world.th[t].st != St::Running || world.th[t].cpu != c {
                    return Err(crate::Violation(format!(
                        "CPU {c} runs thread {t} which is not running there"
                    )));
                }
            }
            for &t in &cpu.rq {
                seen[t.ix()] += 1;
                if world.th[t].st != St::Runnable || world.th[t].cpu != c {
                    return Err(crate::Violation(format!(
                        "thread {t} queued on CPU {c} but not runnable there"
                    )));
                }
            }
            for &t in &cpu.delayed {
                if world.th[t].st != St::Blocked || world.th[t].cpu != c || cpu.cur.is_none() {
                    return Err(crate::Violation(format!(
                        "thread {t} delayed on CPU {c} but not asleep there, or the CPU idles"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Puts runnable thread `t` on CPU `c` (its `cpu` must already be `c`).
    ///
    /// On a busy CPU the running thread gives way at once if it has run its slice since
    /// it was picked (`check_preempt_wakeup_fair` under `RUN_TO_PARITY`), for a thread
    /// that woke and for one moved here alike: the kernel's `move_queued_task` (a move by
    /// `sched_setaffinity`) and `attach_task` (the balancer's) call `wakeup_preempt` as
    /// `ttwu_do_activate` does. Only the Solaris dispatcher's moves do not preempt.
    pub(crate) fn enqueue(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        c: CpuIdx,
        entry: Entry,
    ) {
        let wakeup = entry == Entry::Wakeup;
        let slice = self.lag_limit(world, t) as i64;
        let now = world.now;
        let min_vr = self.min_vruntime_now(world, programs, c).0 as i64;
        let th = &mut world.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        th.vruntime = Nanos((min_vr + th.lag.clamp(-slice, slice)).max(0) as u64);
        if self.cpus[c].idle() {
            if wakeup {
                world.th[t].debt += Nanos(self.lx.wake_idle_ns);
                // A wake-up ends an idle period: fold it into avg_idle (update_avg, 1/8).
                let cpu = &mut self.cpus[c];
                if let Some(since) = cpu.idle_since {
                    let d = now.saturating_sub(since).0 as i64;
                    let avg = cpu.avg_idle.0 as i64;
                    let cap = 2 * self.lx.migration_cost_ns as i64;
                    cpu.avg_idle = Nanos((avg + (d - avg) / 8).clamp(0, cap) as u64);
                }
            }
            self.switch_in(world, programs, c, t);
            return;
        }
        self.cpus[c].rq.push(t);
        self.queue_grew(c);
        let Some(cur) = self.cpus[c].cur else {
            self.schedule(world, programs, c);
            return;
        };
        if programs.mid_operation(c) {
            return; // the running thread is mid-operation; the next tick decides
        }
        if matches!(world.th[cur].act, Act::Yield { .. }) {
            if self.queued_non_yielder(world, programs, c) {
                self.yield_cpu(world, programs, c);
            }
        } else if entry != Entry::Dispatch
            && now.saturating_sub(world.th[cur].picked_at) >= Nanos(self.slice_of(world, cur))
        {
            self.preempt(world, programs, c);
        }
    }

    /// CPU `c`'s `min_vruntime` brought up to now (`update_min_vruntime`, called from
    /// `update_curr`): it follows the least of the running thread's vruntime, with the
    /// time it has run since its segment began, and the queued threads', and never goes
    /// back. A thread placed on the CPU (`enqueue`) starts from it, and a thread that
    /// leaves keeps its distance from it as lag.
    ///
    /// Without the running thread's part, a thread that had run alone for 100 ms left the
    /// value where it was when that thread was picked, and the next thread woken there was
    /// placed 100 ms below it: it ran for 100 ms while the first waited, where Linux would
    /// have them take turns.
    pub(crate) fn min_vruntime_now(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
    ) -> Nanos {
        let cur = self.cpus[c]
            .cur
            .map(|t| world.th[t].vruntime + world.now.saturating_sub(programs.segment_start(c)));
        let queued = self.cpus[c].rq.iter().map(|&t| world.th[t].vruntime).min();
        let least = match (cur, queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let k = &mut self.cpus[c];
        if let Some(v) = least {
            k.min_vruntime = k.min_vruntime.max(v);
        }
        k.min_vruntime
    }

    /// Gives idle CPU `c` to thread `t`.
    fn switch_in(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
        t: ThreadIdx,
    ) {
        let now = world.now;
        let cpu = &mut self.cpus[c];
        debug_assert_eq!(cpu.cur, None);
        cpu.idle_since = None;
        cpu.cur = Some(t);
        let th = &mut world.th[t];
        th.st = St::Running;
        th.wait += now.saturating_sub(th.runnable_since);
        th.timeslices += 1;
        th.picked_at = now;
        th.debt += Nanos(self.lx.switch_ns);
        if !self.cpus[c].tick_armed {
            let tick = Nanos(self.lx.tick_ns());
            self.cpus[c].tick_armed = true;
            world
                .q
                .push((now / tick + 1) * tick, EventKind::Tick, c.0, 0);
        }
        let act = world.th[t].act;
        match act {
            Act::Idle => programs.run_program(self, world, c, t),
            _ if programs.wait_over(world, t) => {
                world.th[t].act = Act::Idle;
                programs.run_program(self, world, c, t);
            }
            Act::Yield { .. } if self.queued_non_yielder(world, programs, c) => {
                programs.begin_segment(self, world, c);
                self.yield_cpu(world, programs, c);
            }
            _ => programs.begin_segment(self, world, c),
        }
    }

    /// Whether a thread that is not itself yield-waiting is queued on CPU `c`.
    pub(crate) fn queued_non_yielder(
        &self,
        world: &World,
        programs: &dyn Programs,
        c: CpuIdx,
    ) -> bool {
        self.cpus[c]
            .rq
            .iter()
            .any(|&t| !programs.yield_waiting(world, t))
    }

    /// [`Kernel::schedule`] for CPU `c`, whose running thread was moved away, unless a thread
    /// runs there again already: the move's arrival may have preempted a thread whose
    /// slice ended with its operation (a compute step done, a barrier released), and a
    /// thread woken by that may have been placed on `c`, idle meanwhile.
    pub(crate) fn schedule_if_idle(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
    ) {
        if self.cpus[c].cur.is_none() {
            self.schedule(world, programs, c);
        }
    }

    /// Chooses the next thread for CPU `c`, whose current thread left; idles (and tries to
    /// pull work) when its queue is empty.
    pub(crate) fn schedule(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        debug_assert_eq!(self.cpus[c].cur, None);
        if let Some(t) = self.pick(world, c) {
            self.switch_in(world, programs, c, t);
            return;
        }
        self.cpus[c].idle_since = Some(world.now);
        match self.lx.baseline {
            Baseline::Linux => self.newidle_balance(world, programs, c),
            Baseline::Solaris => {
                self.solaris_steal(world, programs, c);
            }
        }
    }

    /// Removes and returns the queued thread with the least vruntime. A delayed sleeper
    /// the pick reaches first leaves the queue instead, and the pick goes on (`delayed.rs`).
    fn pick(&mut self, world: &mut World, c: CpuIdx) -> Option<ThreadIdx> {
        let cpu = &self.cpus[c];
        let mut best: Option<(Nanos, usize)> = None;
        for (i, &t) in cpu.rq.iter().enumerate() {
            let v = world.th[t].vruntime;
            if best.is_none_or(|(b, _)| v < b) {
                best = Some((v, i));
            }
        }
        while let Some(d) = self.delayed_below(world, c, best.map(|(v, _)| v)) {
            self.finish_delayed(world, c, d);
        }
        let (v, i) = best?;
        let t = self.cpus[c].rq.remove(i);
        let k = &mut self.cpus[c];
        k.min_vruntime = k.min_vruntime.max(v);
        Some(t)
    }

    fn requeue_current(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
    ) -> Option<ThreadIdx> {
        programs.end_segment(self, world, c);
        let t = self.cpus[c].cur.take()?;
        let now = world.now;
        let th = &mut world.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        self.cpus[c].rq.push(t);
        Some(t)
    }

    /// The running thread's slice is over (or a waking thread is due): run the fairest.
    fn preempt(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        let Some(t) = self.requeue_current(world, programs, c) else {
            return;
        };
        let next = self.pick(world, c).unwrap_or(t);
        if next != t {
            world.th[t].involuntary += 1;
        } else {
            world.th[t].timeslices = world.th[t].timeslices.saturating_sub(1);
            world.th[t].debt = world.th[t].debt.saturating_sub(Nanos(self.lx.switch_ns));
        }
        self.switch_in(world, programs, c, next);
    }

    /// The running thread yields: any other queued thread runs first.
    pub(crate) fn yield_cpu(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        if !self.queued_non_yielder(world, programs, c) {
            return; // only other yielders: sched_yield returns at once, the loop spins on
        }
        let Some(t) = self.requeue_current(world, programs, c) else {
            return;
        };
        self.forfeit_slice(world, c, t);
        let pick = {
            let cpu = &self.cpus[c];
            let mut best: Option<(Nanos, usize)> = None;
            for (i, &x) in cpu.rq.iter().enumerate() {
                if programs.yield_waiting(world, x) {
                    continue;
                }
                let v = world.th[x].vruntime;
                if best.is_none_or(|(b, _)| v < b) {
                    best = Some((v, i));
                }
            }
            best.map(|(_, i)| i)
        };
        let picked = pick.map(|i| {
            let x = self.cpus[c].rq.remove(i);
            let k = &mut self.cpus[c];
            k.min_vruntime = k.min_vruntime.max(world.th[x].vruntime);
            x
        });
        match picked {
            Some(next) => {
                world.th[t].involuntary += 1;
                self.switch_in(world, programs, c, next);
            }
            None => {
                self.cpus[c].rq.retain(|&x| x != t);
                world.th[t].timeslices = world.th[t].timeslices.saturating_sub(1);
                world.th[t].debt = world.th[t].debt.saturating_sub(Nanos(self.lx.switch_ns));
                self.switch_in(world, programs, c, t);
            }
        }
    }

    /// Running thread `t` on CPU `c` goes to sleep (its segment is already stopped).
    pub(crate) fn block(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
        t: ThreadIdx,
    ) {
        self.pelt_sync(world, t);
        let delayed = self.delay_on_block(world, c, t);
        let min_vr = self.min_vruntime_now(world, programs, c).0 as i64;
        let th = &mut world.th[t];
        th.st = St::Blocked;
        th.voluntary += 1;
        if !delayed {
            th.lag = th.vruntime.0 as i64 - min_vr;
        }
        th.debt += Nanos(self.lx.syscall_ns);
        self.cpus[c].cur = None;
        self.schedule(world, programs, c);
    }

    /// Wakes sleeping thread `t`; `waker` is the waking CPU (`None` for a timer).
    pub(crate) fn wake(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        waker: Option<CpuIdx>,
    ) {
        if world.th[t].st != St::Blocked {
            return;
        }
        // Asleep on a lock or condition variable (`LCK`) until now; runnable from here.
        if let Some(start) = world.th[t].lck_start.take() {
            world.th[t].lck_ns += world.now.saturating_sub(start);
        }
        self.pelt_sync(world, t);
        if self.requeue_delayed(world, programs, t) {
            return; // still queued, delayed: woken where it is (`ttwu_runnable`)
        }
        let target = match self.lx.baseline {
            Baseline::Linux => self.select_wake_cpu(world, t, waker),
            Baseline::Solaris => self.solaris_wake_cpu(world, t),
        };
        self.set_cpu(world, programs, t, target);
        self.enqueue(world, programs, t, target, Entry::Wakeup);
    }

    fn group_stats(&self, cpus: &[CpuIdx]) -> GroupStats {
        GroupStats::of(cpus, |c| self.cpus[c].view())
    }
}
