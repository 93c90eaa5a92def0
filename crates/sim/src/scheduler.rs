//! The Linux model that plays the `none` baseline: per-CPU run queues with fair time
//! slices, wake-up placement, and load balancing per scheduling domain.
//!
//! It follows `kernel/sched/fair.c` of Linux 6.x in shape, kept small:
//!
//! | mechanism | model | kernel |
//! |---|---|---|
//! | fair share | pick the least vruntime; a sleeper keeps its lag (clamped to ± one slice) | EEVDF `pick_eevdf`, `place_entity` |
//! | slices | `base_slice × (1 + log2 min(ncpu, 8))`, checked at each tick (`HZ`); a wake-up preempts only a thread past its slice | `sysctl_sched_base_slice`, `RUN_TO_PARITY` |
//! | wake-up | prev CPU if idle; else towards the waker's CPU only if, with the thread's own PELT load added, it stays less loaded than prev by half the domain's `imbalance_pct` (within an LLC the model keeps a count rule: see `wake_affine`), and not when the waker and wakee flip partners a lot; then an idle CPU of **that target's LLC**: prev if idle there, the CPU used before prev (`recent_used_cpu`), else a scan | `select_task_rq_fair`, `wake_affine_idle`, `wake_affine_weight`, `wake_wide`, `select_idle_sibling` |
//! | fork | walk the domains top-down to the group with more idle CPUs; NUMA keeps a small imbalance | `sched_balance_find_dst_group` |
//! | periodic balance | per domain every `weight` ms (× 16 when busy, doubled up to 2 × weight while balanced), by the first idle CPU of the group; busiest group by type (spare / fully busy / overloaded) then load; `imbalance_pct` 110 (SMT) / 117; task-count imbalance when the local group has spare capacity, load imbalance otherwise; a task's load is halved per failed attempt; cache-hot tasks (ran < 0.5 ms ago) stay unless attempts failed more than `cache_nice_tries`; active balance after `cache_nice_tries + 2` failures | `sched_balance_rq`, `calculate_imbalance`, `detach_tasks` |
//! | idle balance | a CPU going idle pulls at once if its average idle time is at least the migration cost and some CPU is overloaded | `sched_balance_newidle` |
//! | nohz | idle CPUs do not tick; a CPU with ≥ 2 runnable threads, or with another busy CPU in its LLC, kicks balancing on their behalf | `nohz_balancer_kick` (`nr_busy_cpus > 1`) |
//! | spreading | between groups with spare capacity the busiest CPU may run a lone thread; nothing can be detached, the attempt fails, and after `cache_nice_tries + 2` failures its running thread is pushed | `sched_balance_find_src_rq`, `imbalanced_active_balance`, `active_load_balance_cpu_stop` |
//!
//! Load is the number of runnable threads (every simulated thread has nice 0), not PELT's
//! decayed average; that is the main simplification. Only wake-up placement across LLCs
//! uses a PELT-like per-thread load (32 ms half-life), since there the sleeper's own load
//! decides.

use crate::queue::EventKind;
use crate::run::{Act, NEVER, NONE, Sim, St};
use serde::Serialize;
use threadbalance_model::{Level, Topology};

/// PELT's half-life (`LOAD_AVG_PERIOD`: 32 periods of 1024 µs), ns.
const PELT_HALF_LIFE_NS: f64 = 32.0 * 1_024_000.0;

/// Parameters of the Linux model (defaults: Linux 6.x, `HZ=250`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Linux {
    /// Scheduler ticks per second.
    pub hz: u32,
    /// `sysctl_sched_base_slice` before scaling by `1 + log2(min(ncpu, 8))`, ns.
    pub base_slice_ns: u64,
    /// `sysctl_sched_migration_cost`: a task that ran this recently is cache-hot, ns.
    pub migration_cost_ns: u64,
    /// Balance interval multiplier for busy CPUs (`busy_factor`).
    pub busy_factor: u64,
    /// Cost of a context switch, charged as system time, ns.
    pub switch_ns: u64,
    /// Cost of a futex or yield system call, ns.
    pub syscall_ns: u64,
    /// Extra delay for waking an idle CPU (IPI, idle exit), ns.
    pub wake_idle_ns: u64,
    /// Time between two thread creations, ns.
    pub spawn_gap_ns: u64,
    /// Kernel threads (kworkers, RCU, timers) that briefly preempt a busy CPU, per second.
    /// They break the lock-step of perfectly periodic ticks, as on a real machine.
    pub kernel_noise_per_s: f64,
}

impl Default for Linux {
    fn default() -> Linux {
        Linux {
            hz: 250,
            base_slice_ns: 750_000,
            migration_cost_ns: 500_000,
            busy_factor: 16,
            switch_ns: 1_500,
            syscall_ns: 500,
            wake_idle_ns: 4_000,
            spawn_gap_ns: 20_000,
            kernel_noise_per_s: 20.0,
        }
    }
}

impl Linux {
    fn tick_ns(&self) -> u64 {
        1_000_000_000 / u64::from(self.hz.max(1))
    }
}

/// One level of scheduling domains.
#[derive(Debug, Clone)]
pub(crate) struct SdLevel {
    /// Domain index of each CPU.
    pub dom_of: Vec<u32>,
    /// For each domain, its groups, each a list of CPUs.
    pub groups: Vec<Vec<Vec<u32>>>,
    pub numa: bool,
    pub imbalance_pct: u64,
    pub cache_nice_tries: u32,
    pub min_interval: u64,
    pub max_interval: u64,
    pub imb_numa_nr: usize,
    pub prefer_sibling: bool,
}

/// Builds the domain hierarchy: SMT (if any), LLC, node or package, machine, skipping
/// levels that group the same CPUs as the level below.
pub(crate) fn build_levels(topo: &Topology, hw: &crate::run::Hw) -> Vec<SdLevel> {
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
        let mut groups: Vec<Vec<Vec<u32>>> = vec![Vec::new(); ndom];
        let mut group_key: Vec<Vec<u32>> = vec![Vec::new(); ndom];
        for c in 0..n {
            let d = dom_of[c] as usize;
            let g = prev[c];
            match group_key[d].iter().position(|&x| x == g) {
                Some(j) => groups[d][j].push(c as u32),
                None => {
                    group_key[d].push(g);
                    groups[d].push(vec![c as u32]);
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
            min_interval: weight as u64 * 1_000_000,
            max_interval: 2 * weight as u64 * 1_000_000,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Busy,
    Idle,
    NewIdle,
}

#[derive(Debug, Clone, Copy, Default)]
struct GroupStats {
    nr: usize,
    idle: usize,
    ncpu: usize,
}

impl GroupStats {
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

    pub(crate) fn allowed(&self, t: usize, c: usize) -> bool {
        self.th[t].allowed.contains(self.hw.cpu_id[c])
    }

    /// Moves thread `t`'s CPU to `c`, counting the migration and its cache refill.
    pub(crate) fn set_cpu(&mut self, t: usize, c: u32) {
        let old = self.th[t].cpu;
        if old == c {
            return;
        }
        let same_core = self.hw.core[old as usize] == self.hw.core[c as usize];
        let refill = if same_core {
            0.0
        } else {
            let app = self.th[t].app as usize;
            self.apps[app].footprint_lines * self.hw.mem_ns(old, c) / self.hw.mlp
        };
        let th = &mut self.th[t];
        th.cpu = c;
        th.migrations += 1;
        th.debt += refill as u64;
        self.stats.migrations += 1;
        if self.hw.pkg[old as usize] != self.hw.pkg[c as usize] {
            self.stats.cross_migrations += 1;
        }
    }

    /// Puts runnable thread `t` on CPU `c` (its `cpu` must already be `c`).
    pub(crate) fn enqueue(&mut self, t: usize, c: usize, wakeup: bool) {
        let slice = self.slice_ns() as i64;
        let now = self.now;
        let min_vr = self.cpus[c].min_vruntime as i64;
        let th = &mut self.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        th.vruntime = (min_vr + th.lag.clamp(-slice, slice)).max(0) as u64;
        if self.cpus[c].idle() {
            if wakeup {
                self.th[t].debt += self.lx.wake_idle_ns;
                // A wake-up ends an idle period: fold it into avg_idle (update_avg, 1/8).
                let cpu = &mut self.cpus[c];
                if cpu.idle_since != NEVER {
                    let d = now.saturating_sub(cpu.idle_since) as i64;
                    let avg = cpu.avg_idle as i64;
                    let cap = 2 * self.lx.migration_cost_ns as i64;
                    cpu.avg_idle = (avg + (d - avg) / 8).clamp(0, cap) as u64;
                }
            }
            self.switch_in(c, t);
            return;
        }
        self.cpus[c].rq.push(t as u32);
        let cur = self.cpus[c].cur;
        if cur == NONE {
            self.schedule(c);
            return;
        }
        if self.cpus[c].in_advance {
            return; // the running thread is mid-operation; the next tick decides
        }
        let cur = cur as usize;
        if matches!(self.th[cur].act, Act::Yield { .. }) {
            if self.queued_non_yielder(c) {
                self.yield_cpu(c);
            }
        } else if wakeup && now.saturating_sub(self.th[cur].picked_at) >= self.slice_ns() {
            self.preempt(c);
        }
    }

    /// Gives idle CPU `c` to thread `t`.
    fn switch_in(&mut self, c: usize, t: usize) {
        let now = self.now;
        let cpu = &mut self.cpus[c];
        debug_assert_eq!(cpu.cur, NONE);
        cpu.idle_since = NEVER;
        cpu.cur = t as u32;
        let th = &mut self.th[t];
        th.st = St::Running;
        th.wait += now.saturating_sub(th.runnable_since);
        th.timeslices += 1;
        th.picked_at = now;
        th.debt += self.lx.switch_ns;
        if !self.cpus[c].tick_armed {
            let tick = self.lx.tick_ns();
            self.cpus[c].tick_armed = true;
            self.q
                .push((now / tick + 1) * tick, EventKind::Tick, c as u32, 0);
        }
        match self.th[t].act {
            Act::Idle => self.advance(c, t),
            Act::Spin { lock, .. } if self.locks[lock as usize].holder == NONE => {
                let l = lock as usize;
                self.locks[l].spinners.retain(|&x| x as usize != t);
                self.th[t].act = Act::Idle;
                self.advance(c, t);
            }
            Act::BarrierSpin { barrier, .. } | Act::Yield { barrier }
                if self.barriers[barrier as usize].generation != self.th[t].bar_gen =>
            {
                self.th[t].act = Act::Idle;
                self.advance(c, t);
            }
            Act::Yield { .. } if self.queued_non_yielder(c) => {
                self.start_segment(c);
                self.yield_cpu(c);
            }
            _ => self.start_segment(c),
        }
    }

    /// Whether a thread that is not itself yield-waiting is queued on CPU `c`.
    pub(crate) fn queued_non_yielder(&self, c: usize) -> bool {
        self.cpus[c]
            .rq
            .iter()
            .any(|&t| !self.yield_waiting(t as usize))
    }

    /// Whether thread `t` is in a yield loop at a barrier that has not opened yet.
    pub(crate) fn yield_waiting(&self, t: usize) -> bool {
        match self.th[t].act {
            Act::Yield { barrier } => {
                self.barriers[barrier as usize].generation == self.th[t].bar_gen
            }
            _ => false,
        }
    }

    /// Chooses the next thread for CPU `c`, whose current thread left; idles (and tries to
    /// pull work) when its queue is empty.
    pub(crate) fn schedule(&mut self, c: usize) {
        debug_assert_eq!(self.cpus[c].cur, NONE);
        if let Some(t) = self.pick(c, NONE) {
            self.switch_in(c, t);
            return;
        }
        self.cpus[c].idle_since = self.now;
        self.newidle_balance(c);
    }

    /// Removes and returns the queued thread with the least vruntime (not `skip`).
    fn pick(&mut self, c: usize, skip: u32) -> Option<usize> {
        let cpu = &self.cpus[c];
        let mut best: Option<(u64, usize)> = None;
        for (i, &t) in cpu.rq.iter().enumerate() {
            if t == skip {
                continue;
            }
            let v = self.th[t as usize].vruntime;
            if best.is_none_or(|(b, _)| v < b) {
                best = Some((v, i));
            }
        }
        let (v, i) = best?;
        let cpu = &mut self.cpus[c];
        let t = cpu.rq.remove(i) as usize;
        cpu.min_vruntime = cpu.min_vruntime.max(v);
        Some(t)
    }

    fn requeue_current(&mut self, c: usize) -> usize {
        self.stop_segment(c);
        let t = self.cpus[c].cur as usize;
        self.cpus[c].cur = NONE;
        let now = self.now;
        let th = &mut self.th[t];
        th.st = St::Runnable;
        th.runnable_since = now;
        self.cpus[c].rq.push(t as u32);
        t
    }

    /// The running thread's slice is over (or a waking thread is due): run the fairest.
    fn preempt(&mut self, c: usize) {
        let t = self.requeue_current(c);
        let next = self.pick(c, NONE).unwrap_or(t);
        if next != t {
            self.th[t].involuntary += 1;
        } else {
            self.th[t].timeslices = self.th[t].timeslices.saturating_sub(1);
            self.th[t].debt = self.th[t].debt.saturating_sub(self.lx.switch_ns);
        }
        self.switch_in(c, next);
    }

    /// The running thread yields: any other queued thread runs first.
    pub(crate) fn yield_cpu(&mut self, c: usize) {
        if !self.queued_non_yielder(c) {
            return; // only other yielders: sched_yield returns at once, the loop spins on
        }
        let t = self.requeue_current(c);
        let pick = {
            let cpu = &self.cpus[c];
            let mut best: Option<(u64, usize)> = None;
            for (i, &x) in cpu.rq.iter().enumerate() {
                if self.yield_waiting(x as usize) {
                    continue;
                }
                let v = self.th[x as usize].vruntime;
                if best.is_none_or(|(b, _)| v < b) {
                    best = Some((v, i));
                }
            }
            best.map(|(_, i)| i)
        };
        let picked = pick.map(|i| {
            let cpu = &mut self.cpus[c];
            let x = cpu.rq.remove(i) as usize;
            cpu.min_vruntime = cpu.min_vruntime.max(self.th[x].vruntime);
            x
        });
        match picked {
            Some(next) => {
                self.th[t].involuntary += 1;
                self.switch_in(c, next);
            }
            None => {
                self.cpus[c].rq.retain(|&x| x as usize != t);
                self.th[t].timeslices = self.th[t].timeslices.saturating_sub(1);
                self.th[t].debt = self.th[t].debt.saturating_sub(self.lx.switch_ns);
                self.switch_in(c, t);
            }
        }
    }

    /// Running thread `t` on CPU `c` goes to sleep (its segment is already stopped).
    pub(crate) fn block(&mut self, c: usize, t: usize) {
        self.pelt_sync(t);
        let min_vr = self.cpus[c].min_vruntime as i64;
        let th = &mut self.th[t];
        th.st = St::Blocked;
        th.voluntary += 1;
        th.lag = th.vruntime as i64 - min_vr;
        th.debt += self.lx.syscall_ns;
        self.cpus[c].cur = NONE;
        self.schedule(c);
    }

    /// Wakes sleeping thread `t`; `waker` is the waking CPU (`NONE` for a timer).
    pub(crate) fn wake(&mut self, t: usize, waker: u32) {
        if self.th[t].st != St::Blocked {
            return;
        }
        self.pelt_sync(t);
        let target = self.select_wake_cpu(t, waker);
        self.set_cpu(t, target);
        self.enqueue(t, target as usize, true);
    }

    /// Thread `t`'s load now (0–1 task): its runnable average, decayed with PELT's 32 ms
    /// half-life (`LOAD_AVG_PERIOD`) towards 1 while it is runnable, towards 0 while it
    /// sleeps (`__update_load_avg_se`).
    pub(crate) fn pelt_load(&self, t: usize) -> f64 {
        let th = &self.th[t];
        let dt = self.now.saturating_sub(th.load_at) as f64;
        let keep = (-dt * (std::f64::consts::LN_2 / PELT_HALF_LIFE_NS)).exp();
        if matches!(th.st, St::Running | St::Runnable) {
            1.0 - (1.0 - th.load_avg) * keep
        } else {
            th.load_avg * keep
        }
    }

    /// Brings thread `t`'s load up to date before it changes between runnable and
    /// sleeping.
    fn pelt_sync(&mut self, t: usize) {
        let l = self.pelt_load(t);
        let th = &mut self.th[t];
        th.load_avg = l;
        th.load_at = self.now;
    }

    /// Load of CPU `c` (`cpu_load`): the loads of its running and queued threads. The
    /// blocked load of threads that slept there is left out.
    fn cpu_load(&self, c: usize) -> f64 {
        let cpu = &self.cpus[c];
        let cur = if cpu.cur == NONE {
            0.0
        } else {
            self.pelt_load(cpu.cur as usize)
        };
        cur + cpu
            .rq
            .iter()
            .map(|&x| self.pelt_load(x as usize))
            .sum::<f64>()
    }

    /// `wake_affine`: whether sleeping thread `t` should move from `prev` towards the
    /// waking CPU `this` (which shares the level `lv` domain with `prev`) rather than stay
    /// near `prev`.
    ///
    /// Within one LLC the model keeps its calibrated count rule (the waking CPU wins
    /// unless it runs more threads): the choice there only decides which busy CPU of the
    /// LLC a thread queues on, and the kernel's weights (the sleeper's own load added to
    /// the waking side) move the 2-core calibration's 10 ms block row from +9 % to +16 %,
    /// for a reason the model does not capture (blocked and delayed-dequeue load are not
    /// modeled).
    fn wake_affine(&self, t: usize, this: u32, prev: u32, lv: usize) -> bool {
        let (this, prev) = (this as usize, prev as usize);
        if self.hw.llc[this] == self.hw.llc[prev] {
            let (tl, pl) = (self.cpus[this].nr(), self.cpus[prev].nr());
            return !self.cpus[prev].idle() && tl * 100 < pl * (100 + (117 - 100) / 2);
        }
        // wake_affine_idle: an idle waking CPU (an interrupt) attracts only within the
        // cache; an idle previous CPU keeps the thread.
        if self.cpus[this].idle() && self.hw.llc[this] == self.hw.llc[prev] {
            return !self.cpus[prev].idle();
        }
        if self.cpus[prev].idle() {
            return false;
        }
        // wake_affine_weight (WA_BIAS, no WF_SYNC: futex wake-ups are not sync): the
        // waking CPU must stay less loaded with the thread added than the previous CPU
        // without it, by half the domain's imbalance_pct.
        let task = self.pelt_load(t);
        let this_eff = (self.cpu_load(this) + task) * 100.0;
        let pct = self.levels[lv].imbalance_pct as f64;
        let prev_eff = self.cpu_load(prev) * (100.0 + ((pct - 100.0) / 2.0).floor());
        this_eff < prev_eff
    }

    fn decay_flips(&mut self, t: usize) {
        let now = self.now;
        let th = &mut self.th[t];
        while now > th.flip_decay + 1_000_000_000 {
            th.wakee_flips >>= 1;
            th.flip_decay += 1_000_000_000;
            if th.wakee_flips == 0 {
                th.flip_decay = now;
            }
        }
    }

    fn select_wake_cpu(&mut self, t: usize, waker: u32) -> u32 {
        let prev = self.th[t].cpu;
        let mut target = prev;
        let waker_th = if waker == NONE {
            NONE
        } else {
            self.cpus[waker as usize].cur
        };
        let mut want_affine = waker != NONE && self.allowed(t, waker as usize);
        if waker_th != NONE {
            let w = waker_th as usize;
            self.decay_flips(w);
            self.decay_flips(t);
            if self.th[w].last_wakee != t as u32 {
                self.th[w].last_wakee = t as u32;
                self.th[w].wakee_flips += 1;
            }
            // wake_wide: a waker with many partners spreads its wakees.
            let factor = self.hw.llc_cpus[self.hw.llc[waker as usize] as usize].len() as u32;
            let (mut master, mut slave) = (self.th[w].wakee_flips, self.th[t].wakee_flips);
            if master < slave {
                std::mem::swap(&mut master, &mut slave);
            }
            if slave >= factor && master >= slave.saturating_mul(factor) {
                want_affine = false;
            }
        }
        if want_affine && waker != prev {
            // The lowest domain that spans both CPUs (SD_WAKE_AFFINE at every level).
            let (w, p) = (waker as usize, prev as usize);
            let lv = self
                .levels
                .iter()
                .position(|l| l.dom_of[w] == l.dom_of[p])
                .unwrap_or(self.levels.len().saturating_sub(1));
            if lv < self.levels.len() && self.wake_affine(t, waker, prev, lv) {
                target = waker;
            }
        }
        // select_idle_sibling: the target if idle; prev if idle and sharing the target's
        // cache; the CPU the thread used before prev (recent_used_cpu) if idle there; else
        // an idle CPU of the target's LLC.
        let idle_ok = |c: u32| self.allowed(t, c as usize) && self.cpus[c as usize].idle();
        let same_llc = |a: u32, b: u32| self.hw.llc[a as usize] == self.hw.llc[b as usize];
        let mut used = false;
        let chosen = if idle_ok(target) {
            target
        } else if prev != target && same_llc(prev, target) && idle_ok(prev) {
            prev
        } else {
            used = true;
            let recent = self.th[t].recent_cpu;
            if recent != NONE
                && recent != prev
                && recent != target
                && same_llc(recent, target)
                && idle_ok(recent)
            {
                recent
            } else {
                self.select_idle_sibling(t, prev, target)
            }
        };
        if used {
            self.th[t].recent_cpu = prev;
        }
        if self.allowed(t, chosen as usize) {
            chosen
        } else {
            self.fallback_cpu(t)
        }
    }

    fn select_idle_sibling(&self, t: usize, prev: u32, target: u32) -> u32 {
        let ok = |c: u32| self.allowed(t, c as usize) && self.cpus[c as usize].idle();
        if ok(target) {
            return target;
        }
        if prev != target && self.hw.llc[prev as usize] == self.hw.llc[target as usize] && ok(prev)
        {
            return prev;
        }
        let llc = &self.hw.llc_cpus[self.hw.llc[target as usize] as usize];
        let start = llc.iter().position(|&c| c == target).unwrap_or(0);
        let order = llc[start + 1..].iter().chain(&llc[..=start]);
        if self.hw.smt_factor != 1.0 && self.hw.siblings[target as usize].len() > 1 {
            for &c in order.clone() {
                if ok(c)
                    && self.hw.siblings[c as usize]
                        .iter()
                        .all(|&s| self.cpus[s as usize].idle())
                {
                    return c;
                }
            }
        }
        for &c in order {
            if ok(c) {
                return c;
            }
        }
        target
    }

    /// An allowed CPU for a thread whose CPU is no longer allowed: an idle one, else the
    /// least loaded.
    pub(crate) fn fallback_cpu(&self, t: usize) -> u32 {
        let n = self.cpus.len();
        let start = self.th[t].cpu as usize;
        let mut best: Option<(usize, u32)> = None;
        for k in 0..n {
            let c = (start + k) % n;
            if !self.allowed(t, c) {
                continue;
            }
            let load = self.cpus[c].nr();
            if best.is_none_or(|(b, _)| load < b) {
                best = Some((load, c as u32));
            }
            if load == 0 {
                break;
            }
        }
        best.map_or(self.th[t].cpu, |(_, c)| c)
    }

    fn group_stats(&self, cpus: &[u32]) -> GroupStats {
        let mut s = GroupStats {
            ncpu: cpus.len(),
            ..GroupStats::default()
        };
        for &c in cpus {
            let cpu = &self.cpus[c as usize];
            s.nr += cpu.nr();
            s.idle += usize::from(cpu.idle());
        }
        s
    }

    /// Placement of a new thread: down the domains towards the group with more idle CPUs.
    pub(crate) fn fork_cpu(&self, t: usize, parent: u32) -> u32 {
        if parent == NONE {
            return self.fallback_cpu(t);
        }
        let mut cpu = parent as usize;
        for lv in self.levels.iter().rev() {
            let groups = &lv.groups[lv.dom_of[cpu] as usize];
            let local = groups
                .iter()
                .position(|g| g.contains(&(cpu as u32)))
                .unwrap_or(0);
            let ls = self.group_stats(&groups[local]);
            let mut best = local;
            let mut bs = ls;
            for (i, g) in groups.iter().enumerate() {
                if !g.iter().any(|&c| self.allowed(t, c as usize)) {
                    continue;
                }
                let s = self.group_stats(g);
                if s.idle > bs.idle || (s.idle == bs.idle && s.nr < bs.nr && ls.kind() > 0) {
                    best = i;
                    bs = s;
                }
            }
            if best != local && lv.numa && ls.kind() == 0 {
                // Keep a small NUMA imbalance close to the parent.
                let imbalance = bs.idle.saturating_sub(ls.idle);
                if ls.nr < lv.imb_numa_nr && imbalance <= 2 {
                    best = local;
                }
            }
            if best != local {
                let g = &groups[best];
                cpu = g
                    .iter()
                    .copied()
                    .filter(|&c| self.allowed(t, c as usize))
                    .min_by_key(|&c| (self.cpus[c as usize].nr(), c))
                    .unwrap_or(g[0]) as usize;
            }
        }
        if self.allowed(t, cpu) && self.cpus[cpu].idle() {
            return cpu as u32;
        }
        // Within the last group: an idle CPU, else the least loaded.
        let c = self.select_idle_sibling(t, cpu as u32, cpu as u32);
        if self.allowed(t, c as usize) {
            c
        } else {
            self.fallback_cpu(t)
        }
    }

    // ---- tick and balancing --------------------------------------------------------------

    pub(crate) fn on_tick(&mut self, c: usize) {
        self.cpus[c].tick_armed = false;
        if self.cpus[c].cur == NONE {
            return; // nohz: an idle CPU stops ticking
        }
        let tick = self.lx.tick_ns();
        let now = self.now;
        self.cpus[c].tick_armed = true;
        self.q.push(now + tick, EventKind::Tick, c as u32, 0);
        self.rebalance(c);
        if !self.cpus[c].rq.is_empty() {
            self.q.push(now, EventKind::Resched, c as u32, 0);
            let p = self.lx.kernel_noise_per_s * tick as f64 / 1e9;
            if self.rng.next_f64() < p {
                let at = now + self.rng.below(tick);
                self.q.push(at, EventKind::Noise, c as u32, 0);
            }
        }
        if now >= self.nohz_next && (self.cpus[c].nr() >= 2 || self.llc_busy_peer(c)) {
            self.nohz_next = now + tick;
            for i in 0..self.cpus.len() {
                if self.cpus[i].idle() {
                    self.rebalance(i);
                }
            }
        }
    }

    /// Whether another CPU of `c`'s LLC is busy too (`nr_busy_cpus > 1`): then
    /// `nohz_balancer_kick` gets the idle CPUs balancing, as the LLC may hold load that
    /// another LLC could take.
    fn llc_busy_peer(&self, c: usize) -> bool {
        self.hw.llc_cpus[self.hw.llc[c] as usize]
            .iter()
            .any(|&x| x as usize != c && self.cpus[x as usize].cur != NONE)
    }

    pub(crate) fn on_resched(&mut self, c: usize) {
        let cur = self.cpus[c].cur;
        if cur == NONE || self.cpus[c].rq.is_empty() || self.cpus[c].in_advance {
            return;
        }
        let cur = cur as usize;
        if matches!(self.th[cur].act, Act::Yield { .. }) {
            self.yield_cpu(c);
        } else if self.now.saturating_sub(self.th[cur].picked_at) >= self.slice_ns() {
            self.preempt(c);
        }
    }

    /// A kernel thread runs briefly: the current thread is switched out and, when it is
    /// done, the fairest queued thread runs.
    pub(crate) fn on_noise(&mut self, c: usize) {
        let cur = self.cpus[c].cur;
        if cur == NONE || self.cpus[c].rq.is_empty() || self.cpus[c].in_advance {
            return;
        }
        if self.yield_waiting(cur as usize) {
            self.yield_cpu(c);
        } else {
            self.preempt(c);
        }
    }

    /// Periodic balancing of CPU `c` at every level whose interval has passed.
    fn rebalance(&mut self, c: usize) {
        let now = self.now;
        let max = 100_000_000 * self.cpus.len() as u64;
        for lv in 0..self.levels.len() {
            let busy = self.cpus[c].cur != NONE;
            let mut interval = self.cpus[c].interval[lv];
            if busy {
                interval *= self.lx.busy_factor;
            }
            if now < self.cpus[c].last_balance[lv] + interval.min(max) {
                continue;
            }
            let kind = if busy { Kind::Busy } else { Kind::Idle };
            self.load_balance(c, lv, kind);
            self.cpus[c].last_balance[lv] = now;
        }
    }

    fn newidle_balance(&mut self, c: usize) {
        if self.cpus[c].avg_idle < self.lx.migration_cost_ns {
            return;
        }
        if !self.cpus.iter().any(|x| x.nr() >= 2) {
            return;
        }
        for lv in 0..self.levels.len() {
            if self.load_balance(c, lv, Kind::NewIdle) || !self.cpus[c].idle() {
                return;
            }
        }
    }

    /// One `sched_balance_rq` of CPU `c` at level `lv`; whether it pulled anything.
    fn load_balance(&mut self, c: usize, lv: usize, kind: Kind) -> bool {
        let level = &self.levels[lv];
        let groups = &level.groups[level.dom_of[c] as usize];
        let Some(local_ix) = groups.iter().position(|g| g.contains(&(c as u32))) else {
            return false;
        };
        if kind != Kind::NewIdle {
            // should_we_balance: the first idle CPU of the group, else its first CPU.
            let g = &groups[local_ix];
            let first = g
                .iter()
                .copied()
                .find(|&x| self.cpus[x as usize].idle())
                .unwrap_or(g[0]);
            if first as usize != c {
                return false;
            }
        }
        let local = self.group_stats(&groups[local_ix]);
        let mut busiest: Option<(usize, GroupStats)> = None;
        let mut total = GroupStats::default();
        for (i, g) in groups.iter().enumerate() {
            let s = self.group_stats(g);
            total.nr += s.nr;
            total.ncpu += s.ncpu;
            if i == local_ix || s.nr == 0 {
                continue;
            }
            let better = match busiest {
                None => true,
                Some((_, b)) => {
                    if s.kind() != b.kind() {
                        s.kind() > b.kind()
                    } else if s.kind() == 0 {
                        s.idle < b.idle || (s.idle == b.idle && s.nr > b.nr)
                    } else {
                        s.nr * b.ncpu > b.nr * s.ncpu
                    }
                }
            };
            if better {
                busiest = Some((i, s));
            }
        }
        let (pct, numa, imb_numa_nr, prefer_sibling, tries) = (
            level.imbalance_pct,
            level.numa,
            level.imb_numa_nr,
            level.prefer_sibling,
            level.cache_nice_tries,
        );
        // (tasks to move, load to move in 1024ths of a task when balancing load)
        let mut tasks = 0usize;
        let mut load: Option<u64> = None;
        let mut bix = usize::MAX;
        // migrate_task between groups with spare capacity: spread running threads, one of
        // which may have to be pushed (imbalanced_active_balance).
        let mut spread = false;
        if let Some((bi, b)) = busiest {
            bix = bi;
            if b.kind() == 2 && local.kind() == 0 {
                tasks = local.idle.min(b.nr - b.ncpu).max(1);
            } else if b.kind() == 2 {
                // Both groups busy: balance average load.
                let (bl, ll) = (b.nr * local.ncpu, local.nr * b.ncpu);
                if bl > ll && (b.nr * 100 * local.ncpu) as u64 > pct * (local.nr * b.ncpu) as u64 {
                    let avg = |n: usize, k: usize| n as f64 / k as f64;
                    let sd = avg(total.nr, total.ncpu);
                    let x = ((avg(b.nr, b.ncpu) - sd) * b.ncpu as f64)
                        .min((sd - avg(local.nr, local.ncpu)) * local.ncpu as f64);
                    if x > 0.0 {
                        load = Some((x * 1024.0) as u64);
                        tasks = usize::MAX;
                    }
                }
            } else if local.kind() == 0 {
                spread = true;
                if b.ncpu == 1 || prefer_sibling {
                    tasks = b.nr.saturating_sub(local.nr) / 2;
                    if tasks == 0 && local.nr == 0 && b.nr > 1 {
                        tasks = 1;
                    }
                } else {
                    tasks = local.idle.saturating_sub(b.idle) / 2;
                }
                if numa && local.nr < imb_numa_nr && tasks <= 2 {
                    tasks = 0; // adjust_numa_imbalance: keep small imbalances local
                }
            }
        }
        if tasks == 0 {
            if kind != Kind::NewIdle {
                self.cpus[c].failed[lv] = 0;
                let lvl = &self.levels[lv];
                let iv = &mut self.cpus[c].interval[lv];
                *iv = (*iv * 2).min(lvl.max_interval);
            }
            return false;
        }
        // The busiest CPU of the busiest group (sched_balance_find_src_rq): most runnable
        // threads, with one queued; when spreading, a CPU whose one thread runs will do
        // (nothing can be detached from it, so the attempt fails and counts towards
        // active balance).
        let src = self.levels[lv].groups[self.levels[lv].dom_of[c] as usize][bix]
            .iter()
            .copied()
            .filter(|&x| {
                let cpu = &self.cpus[x as usize];
                !cpu.rq.is_empty() || (spread && cpu.cur != NONE)
            })
            .max_by_key(|&x| (self.cpus[x as usize].nr(), std::cmp::Reverse(x)));
        let failed = self.cpus[c].failed[lv];
        let mut moved = 0usize;
        if let Some(src) = src {
            let now = self.now;
            let mut cands: Vec<u32> = self.cpus[src as usize].rq.clone();
            cands.sort_by_key(|&t| (self.th[t as usize].last_ran, t));
            let mut budget = load.unwrap_or(0);
            for t in cands {
                let t = t as usize;
                if !self.allowed(t, c) {
                    continue;
                }
                let hot = now.saturating_sub(self.th[t].last_ran) < self.lx.migration_cost_ns;
                if hot && failed <= tries {
                    continue;
                }
                if load.is_some() {
                    let l = 1024u64 >> failed.min(10);
                    if l > budget {
                        continue;
                    }
                    budget -= l;
                }
                self.pull(t, src as usize, c);
                moved += 1;
                if moved >= tasks || (load.is_some() && budget == 0) {
                    break;
                }
                if kind == Kind::NewIdle {
                    break;
                }
            }
            if moved == 0 && kind != Kind::NewIdle && failed + 1 > tries + 2 {
                // Active balance: push the running thread of the busiest CPU here (when
                // spreading, even its only one: active_load_balance_cpu_stop).
                let cur = self.cpus[src as usize].cur;
                if cur != NONE
                    && (self.cpus[src as usize].nr() >= 2 || spread)
                    && self.allowed(cur as usize, c)
                {
                    let t = cur as usize;
                    self.stop_segment(src as usize);
                    self.cpus[src as usize].cur = NONE;
                    self.th[t].involuntary += 1;
                    self.th[t].lag =
                        self.th[t].vruntime as i64 - self.cpus[src as usize].min_vruntime as i64;
                    self.set_cpu(t, c as u32);
                    self.enqueue(t, c, false);
                    self.schedule(src as usize);
                    self.cpus[c].failed[lv] = tries + 1;
                    return true;
                }
            }
        }
        if kind != Kind::NewIdle {
            if moved == 0 {
                self.cpus[c].failed[lv] += 1;
            } else {
                self.cpus[c].failed[lv] = 0;
                self.cpus[c].interval[lv] = self.levels[lv].min_interval;
            }
        }
        moved > 0
    }

    /// Moves queued thread `t` from CPU `src` to CPU `dst`.
    fn pull(&mut self, t: usize, src: usize, dst: usize) {
        self.cpus[src].rq.retain(|&x| x as usize != t);
        let th = &mut self.th[t];
        th.lag = th.vruntime as i64 - self.cpus[src].min_vruntime as i64;
        let waited = self.now.saturating_sub(th.runnable_since);
        th.wait += waited;
        self.set_cpu(t, dst as u32);
        self.enqueue(t, dst, false);
    }

    /// Changes thread `t`'s affinity; a thread on a CPU no longer allowed moves at once.
    pub(crate) fn set_affinity(&mut self, t: usize, allowed: threadbalance_model::CpuSet) {
        self.th[t].allowed = allowed;
        let c = self.th[t].cpu as usize;
        if self.allowed(t, c) {
            return;
        }
        match self.th[t].st {
            St::Running => {
                self.stop_segment(c);
                self.cpus[c].cur = NONE;
                self.th[t].lag = self.th[t].vruntime as i64 - self.cpus[c].min_vruntime as i64;
                self.th[t].involuntary += 1;
                let dst = self.fallback_cpu(t);
                self.set_cpu(t, dst);
                self.enqueue(t, dst as usize, false);
                self.schedule(c);
            }
            St::Runnable => {
                let dst = self.fallback_cpu(t);
                self.pull(t, c, dst as usize);
            }
            St::New | St::Blocked | St::Done => {}
        }
    }
}
