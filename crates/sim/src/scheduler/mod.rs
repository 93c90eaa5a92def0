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
use crate::state::{Act, CpuIdx, Hw, Programs, QueueView, Sim, St, ThreadIdx};
pub use crate::state::{Baseline, Linux};
use threadbalance_model::{Level, Nanos, Topology};

/// How a runnable thread comes onto a CPU's queue ([`Sim::enqueue`]).
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

impl Sim {
    pub(crate) fn slice_ns(&self) -> u64 {
        let n = self.cpus.len().clamp(1, 8) as u64;
        self.lx.base_slice_ns * (1 + u64::from(63 - n.leading_zeros()))
    }

    /// How far from `min_vruntime` thread `t` may be placed, either way: one default
    /// slice; with a slice of its own, twice that slice but at least a tick, as the
    /// kernel's `update_entity_lag` bounds it (so at HZ 250 a short slice keeps 4 ms).
    pub(crate) fn lag_limit(&self, t: ThreadIdx) -> u64 {
        match self.th[t].slice {
            None => self.slice_ns(),
            Some(_) => (2 * self.slice_of(t)).max(1_000_000_000 / u64::from(self.lx.hz.max(1))),
        }
    }

    /// Thread `t`'s slice: its own where one was set (`sched_setattr`, Linux 6.12+: the
    /// kernel keeps it within 0.1–100 ms), else the default.
    pub(crate) fn slice_of(&self, t: ThreadIdx) -> u64 {
        self.th[t]
            .slice
            .map_or_else(|| self.slice_ns(), |s| s.0.clamp(100_000, 100_000_000))
    }

    pub(crate) fn allowed(&self, t: ThreadIdx, c: CpuIdx) -> bool {
        self.th[t].allowed.contains(self.hw.cpu_id[c])
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
    pub(crate) fn set_cpu(&mut self, t: ThreadIdx, c: CpuIdx) {
        let old = self.th[t].cpu;
        if old == c {
            return;
        }
        let same_core = self.hw.core[old] == self.hw.core[c];
        let refill = if same_core {
            0.0
        } else {
            let lines = self.footprint_lines(t);
            let lost = if self.hw.llc[old] == self.hw.llc[c] {
                lines.min(self.hw.private_lines)
            } else if lines > self.hw.private_lines {
                lines.min(self.hw.private_lines + self.llc_share(t, old, lines))
            } else {
                lines
            };
            lost * self.hw.line_ns(old, c) / self.hw.mlp
        };
        let th = &mut self.th[t];
        th.cpu = c;
        th.migrations += 1;
        th.debt += Nanos(refill as u64);
        self.stats.migrations += 1;
        if self.hw.pkg[old] != self.hw.pkg[c] {
            self.stats.cross_migrations += 1;
        }
    }

    /// Lines of the LLC of CPU `c` that thread `t` (footprint `lines`) holds: the LLC split
    /// over the threads that live behind it in proportion to their footprints, as
    /// competing working sets share a cache that holds none of them whole.
    fn llc_share(&self, t: ThreadIdx, c: CpuIdx, lines: f64) -> f64 {
        let llc = self.hw.llc[c];
        let behind: f64 = (0..self.th.len())
            .map(ThreadIdx::from)
            .filter(|&u| {
                u != t
                    && !matches!(self.th[u].st, St::New | St::Done)
                    && self.hw.llc[self.th[u].cpu] == llc
            })
            .map(|u| self.footprint_lines(u))
            .sum();
        self.hw.llc_lines[llc as usize] * lines / (lines + behind)
    }

    /// The thread CPU `c` runs, if any: how the programs part learns it (the run queues
    /// are the kernel's).
    pub(crate) fn running(&self, c: CpuIdx) -> Option<ThreadIdx> {
        self.kernel.cpus[c].cur
    }

    /// New thread `t` enters the kernel, runnable on CPU `c` (`wake_up_new_task`): it
    /// starts with a full load (`init_entity_runnable_average`) and the queue's
    /// `min_vruntime`, and is queued.
    pub(crate) fn wake_up_new(&mut self, t: ThreadIdx, c: CpuIdx) {
        let th = &mut self.th[t];
        th.load_avg = 1.0;
        th.load_at = self.now;
        th.cpu = c;
        th.st = St::Runnable;
        th.lag = 0; // `enqueue` places it at the queue's `min_vruntime`
        self.enqueue(t, c, Entry::Wakeup);
    }

    /// The thread running on CPU `c` has exited (`do_exit`): the CPU forgets it and
    /// picks its next thread.
    pub(crate) fn exited(&mut self, c: CpuIdx) {
        self.kernel.cpus[c].cur = None;
        self.schedule(c);
    }

    /// Counts, per thread, the run queues it is on (running or queued) into `seen`; the
    /// first running thread that is not `Running` there, or queued thread that is not
    /// `Runnable` there (the run-queue half of `Sim::check_invariants`).
    pub(crate) fn count_queued(&self, seen: &mut [u32]) -> Result<(), crate::Violation> {
        for (c, cpu) in self.kernel.cpus.iter().enumerate() {
            let c = CpuIdx::from(c);
            if let Some(t) = cpu.cur {
                seen[t.ix()] += 1;
                if self.th[t].st != St::Running || self.th[t].cpu != c {
                    return Err(crate::Violation(format!(
                        "CPU {c} runs thread {t} which is not running there"
                    )));
                }
            }
            for &t in &cpu.rq {
                seen[t.ix()] += 1;
                if self.th[t].st != St::Runnable || self.th[t].cpu != c {
                    return Err(crate::Violation(format!(
                        "thread {t} queued on CPU {c} but not runnable there"
                    )));
                }
            }
            for &t in &cpu.delayed {
                if self.th[t].st != St::Blocked || self.th[t].cpu != c || cpu.cur.is_none() {
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
    pub(crate) fn enqueue(&mut self, t: ThreadIdx, c: CpuIdx, entry: Entry) {
        let wakeup = entry == Entry::Wakeup;
        let slice = self.lag_limit(t) as i64;
        let now = self.now;
        let min_vr = self.min_vruntime_now(c).0 as i64;
        let th = &mut self.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        th.vruntime = Nanos((min_vr + th.lag.clamp(-slice, slice)).max(0) as u64);
        if self.kernel.cpus[c].idle() {
            if wakeup {
                self.th[t].debt += Nanos(self.lx.wake_idle_ns);
                // A wake-up ends an idle period: fold it into avg_idle (update_avg, 1/8).
                let cpu = &mut self.kernel.cpus[c];
                if let Some(since) = cpu.idle_since {
                    let d = now.saturating_sub(since).0 as i64;
                    let avg = cpu.avg_idle.0 as i64;
                    let cap = 2 * self.lx.migration_cost_ns as i64;
                    cpu.avg_idle = Nanos((avg + (d - avg) / 8).clamp(0, cap) as u64);
                }
            }
            self.switch_in(c, t);
            return;
        }
        self.kernel.cpus[c].rq.push(t);
        self.queue_grew(c);
        let Some(cur) = self.kernel.cpus[c].cur else {
            self.schedule(c);
            return;
        };
        if self.cpus[c].in_advance {
            return; // the running thread is mid-operation; the next tick decides
        }
        if matches!(self.th[cur].act, Act::Yield { .. }) {
            if self.queued_non_yielder(c) {
                self.yield_cpu(c);
            }
        } else if entry != Entry::Dispatch
            && now.saturating_sub(self.th[cur].picked_at) >= Nanos(self.slice_of(cur))
        {
            self.preempt(c);
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
    pub(crate) fn min_vruntime_now(&mut self, c: CpuIdx) -> Nanos {
        let cur = self.kernel.cpus[c]
            .cur
            .map(|t| self.th[t].vruntime + self.now.saturating_sub(self.cpus[c].seg_start));
        let queued = self.kernel.cpus[c]
            .rq
            .iter()
            .map(|&t| self.th[t].vruntime)
            .min();
        let least = match (cur, queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let k = &mut self.kernel.cpus[c];
        if let Some(v) = least {
            k.min_vruntime = k.min_vruntime.max(v);
        }
        k.min_vruntime
    }

    /// Gives idle CPU `c` to thread `t`.
    fn switch_in(&mut self, c: CpuIdx, t: ThreadIdx) {
        let now = self.now;
        let cpu = &mut self.kernel.cpus[c];
        debug_assert_eq!(cpu.cur, None);
        cpu.idle_since = None;
        cpu.cur = Some(t);
        let th = &mut self.th[t];
        th.st = St::Running;
        th.wait += now.saturating_sub(th.runnable_since);
        th.timeslices += 1;
        th.picked_at = now;
        th.debt += Nanos(self.lx.switch_ns);
        if !self.kernel.cpus[c].tick_armed {
            let tick = Nanos(self.lx.tick_ns());
            self.kernel.cpus[c].tick_armed = true;
            self.q
                .push((now / tick + 1) * tick, EventKind::Tick, c.0, 0);
        }
        let act = self.th[t].act;
        match act {
            Act::Idle => self.run_program(c, t),
            _ if self.wait_over(t) => {
                self.th[t].act = Act::Idle;
                self.run_program(c, t);
            }
            Act::Yield { .. } if self.queued_non_yielder(c) => {
                self.begin_segment(c);
                self.yield_cpu(c);
            }
            _ => self.begin_segment(c),
        }
    }

    /// Whether a thread that is not itself yield-waiting is queued on CPU `c`.
    pub(crate) fn queued_non_yielder(&self, c: CpuIdx) -> bool {
        self.kernel.cpus[c]
            .rq
            .iter()
            .any(|&t| !self.yield_waiting(t))
    }

    /// [`Sim::schedule`] for CPU `c`, whose running thread was moved away, unless a thread
    /// runs there again already: the move's arrival may have preempted a thread whose
    /// slice ended with its operation (a compute step done, a barrier released), and a
    /// thread woken by that may have been placed on `c`, idle meanwhile.
    pub(crate) fn schedule_if_idle(&mut self, c: CpuIdx) {
        if self.kernel.cpus[c].cur.is_none() {
            self.schedule(c);
        }
    }

    /// Chooses the next thread for CPU `c`, whose current thread left; idles (and tries to
    /// pull work) when its queue is empty.
    pub(crate) fn schedule(&mut self, c: CpuIdx) {
        debug_assert_eq!(self.kernel.cpus[c].cur, None);
        if let Some(t) = self.pick(c) {
            self.switch_in(c, t);
            return;
        }
        self.kernel.cpus[c].idle_since = Some(self.now);
        match self.lx.baseline {
            Baseline::Linux => self.newidle_balance(c),
            Baseline::Solaris => {
                self.solaris_steal(c);
            }
        }
    }

    /// Removes and returns the queued thread with the least vruntime. A delayed sleeper
    /// the pick reaches first leaves the queue instead, and the pick goes on (`delayed.rs`).
    fn pick(&mut self, c: CpuIdx) -> Option<ThreadIdx> {
        let cpu = &self.kernel.cpus[c];
        let mut best: Option<(Nanos, usize)> = None;
        for (i, &t) in cpu.rq.iter().enumerate() {
            let v = self.th[t].vruntime;
            if best.is_none_or(|(b, _)| v < b) {
                best = Some((v, i));
            }
        }
        while let Some(d) = self.delayed_below(c, best.map(|(v, _)| v)) {
            self.finish_delayed(c, d);
        }
        let (v, i) = best?;
        let t = self.kernel.cpus[c].rq.remove(i);
        let k = &mut self.kernel.cpus[c];
        k.min_vruntime = k.min_vruntime.max(v);
        Some(t)
    }

    fn requeue_current(&mut self, c: CpuIdx) -> Option<ThreadIdx> {
        self.end_segment(c);
        let t = self.kernel.cpus[c].cur.take()?;
        let now = self.now;
        let th = &mut self.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        self.kernel.cpus[c].rq.push(t);
        Some(t)
    }

    /// The running thread's slice is over (or a waking thread is due): run the fairest.
    fn preempt(&mut self, c: CpuIdx) {
        let Some(t) = self.requeue_current(c) else {
            return;
        };
        let next = self.pick(c).unwrap_or(t);
        if next != t {
            self.th[t].involuntary += 1;
        } else {
            self.th[t].timeslices = self.th[t].timeslices.saturating_sub(1);
            self.th[t].debt = self.th[t].debt.saturating_sub(Nanos(self.lx.switch_ns));
        }
        self.switch_in(c, next);
    }

    /// The running thread yields: any other queued thread runs first.
    pub(crate) fn yield_cpu(&mut self, c: CpuIdx) {
        if !self.queued_non_yielder(c) {
            return; // only other yielders: sched_yield returns at once, the loop spins on
        }
        let Some(t) = self.requeue_current(c) else {
            return;
        };
        self.forfeit_slice(c, t);
        let pick = {
            let cpu = &self.kernel.cpus[c];
            let mut best: Option<(Nanos, usize)> = None;
            for (i, &x) in cpu.rq.iter().enumerate() {
                if self.yield_waiting(x) {
                    continue;
                }
                let v = self.th[x].vruntime;
                if best.is_none_or(|(b, _)| v < b) {
                    best = Some((v, i));
                }
            }
            best.map(|(_, i)| i)
        };
        let picked = pick.map(|i| {
            let x = self.kernel.cpus[c].rq.remove(i);
            let k = &mut self.kernel.cpus[c];
            k.min_vruntime = k.min_vruntime.max(self.th[x].vruntime);
            x
        });
        match picked {
            Some(next) => {
                self.th[t].involuntary += 1;
                self.switch_in(c, next);
            }
            None => {
                self.kernel.cpus[c].rq.retain(|&x| x != t);
                self.th[t].timeslices = self.th[t].timeslices.saturating_sub(1);
                self.th[t].debt = self.th[t].debt.saturating_sub(Nanos(self.lx.switch_ns));
                self.switch_in(c, t);
            }
        }
    }

    /// Running thread `t` on CPU `c` goes to sleep (its segment is already stopped).
    pub(crate) fn block(&mut self, c: CpuIdx, t: ThreadIdx) {
        self.pelt_sync(t);
        let delayed = self.delay_on_block(c, t);
        let min_vr = self.min_vruntime_now(c).0 as i64;
        let th = &mut self.th[t];
        th.st = St::Blocked;
        th.voluntary += 1;
        if !delayed {
            th.lag = th.vruntime.0 as i64 - min_vr;
        }
        th.debt += Nanos(self.lx.syscall_ns);
        self.kernel.cpus[c].cur = None;
        self.schedule(c);
    }

    /// Wakes sleeping thread `t`; `waker` is the waking CPU (`None` for a timer).
    pub(crate) fn wake(&mut self, t: ThreadIdx, waker: Option<CpuIdx>) {
        if self.th[t].st != St::Blocked {
            return;
        }
        // Asleep on a lock or condition variable (`LCK`) until now; runnable from here.
        if let Some(start) = self.th[t].lck_start.take() {
            self.th[t].lck_ns += self.now.saturating_sub(start);
        }
        self.pelt_sync(t);
        if self.requeue_delayed(t) {
            return; // still queued, delayed: woken where it is (`ttwu_runnable`)
        }
        let target = match self.lx.baseline {
            Baseline::Linux => self.select_wake_cpu(t, waker),
            Baseline::Solaris => self.solaris_wake_cpu(t),
        };
        self.set_cpu(t, target);
        self.enqueue(t, target, Entry::Wakeup);
    }

    fn group_stats(&self, cpus: &[CpuIdx]) -> GroupStats {
        GroupStats::of(cpus, |c| self.kernel.cpus[c].view())
    }
}
