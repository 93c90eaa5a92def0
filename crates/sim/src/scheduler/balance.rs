//! Tick and load balancing: slice expiry, kernel noise, nohz kicks, periodic, new-idle
//! and active balancing per scheduling domain, and affinity changes.
//!
//! **Passes at one tick.** Every CPU's tick comes at the same jiffy (the kernel aligns
//! them unless booted with `skew_tick=1`), and a busy CPU whose balance is due balances in
//! its own softirq right after it, at the same time as the others that are due. Each
//! reads the domain's loads (`update_sd_lb_stats`) before any of them has moved a
//! thread, so all see the same busiest group, and only the first to lock that queue
//! finds a thread to detach; the others find it gone, move nothing and count a failure.
//! The model runs the passes of one instant one after another, so it gives them the
//! queues as they were at the instant's first pass ([`Kernel::see_queues`]); what a pass
//! detaches it takes from the queue as it is. Read one after another, each pass saw the
//! previous one's move and pulled from another CPU, and periodic balancing between busy
//! CPUs moved several threads a tick where the kernel moves one: 24 always-runnable
//! threads on 16 CPUs took turns alone too evenly (the CPU seconds' min/max 0.66 over
//! seeds 1–3, 0.60 now; measured 0.56). Groups equally loaded rank by a draw made at the
//! tick, the same for every pass of it: the kernel's loads are PELT averages that differ
//! in their last digits, and the largest is the one every pass picks. A CPU's passes
//! at several levels in one tick read the same queues, though the kernel's higher level
//! reads them after the lower levels' moves: those stay inside one group of the higher
//! level, so its groups' loads and counts are the same either way, and only which CPU of
//! the busiest group is picked can differ. (Tried side by side: a CPU whose pass moved a
//! thread reading the queues as they are in its later passes of the tick gave the papers
//! suite byte for byte and moved one `none` run of 18 on multi-level machines, by
//! 1.7 %.) New-idle passes, and those the CPU kicked by nohz runs for the idle CPUs one
//! after another, read the queues as they are.
//!
//! A busy CPU's period is `busy_factor` × `balance_interval` less one jiffy
//! (`get_sd_balance_interval`), so that periods drift apart instead of meeting on
//! multiples of each other.

use super::{Entry, GroupStats};
use crate::queue::EventKind;
use crate::state::{
    Act, Baseline, CpuIdx, Kernel, Programs, QueueView, SeenQueue, St, ThreadIdx, World,
};
use threadbalance_model::Nanos;

/// A balancing pass's domain as `update_sd_lb_stats` reads it: the local group's counts
/// and load, the domain's, and the busiest other group (its position, counts and load).
struct DomainStats {
    local: GroupStats,
    local_load: f64,
    total: GroupStats,
    total_load: f64,
    busiest: Option<(usize, GroupStats, f64)>,
}

/// What a pass is to move (`calculate_imbalance`): `tasks` threads, or (`load`) threads
/// until that much load moved; `spread`: between groups with spare capacity, where a
/// lone running thread may be pushed (`migrate_task`, `imbalanced_active_balance`).
struct Imbalance {
    tasks: usize,
    load: Option<f64>,
    spread: bool,
}

/// One pass: CPU `c` balancing at level `lv` from CPU `src`, its attempts there having
/// failed `failed` times.
struct Pass {
    c: CpuIdx,
    src: CpuIdx,
    lv: usize,
    kind: Kind,
    failed: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Busy,
    Idle,
    NewIdle,
}

impl Kernel {
    // ---- tick and balancing --------------------------------------------------------------

    pub(crate) fn on_tick(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        self.cpus[c].tick_armed = false;
        if self.cpus[c].cur.is_none() {
            return; // nohz: an idle CPU stops ticking
        }
        let tick = self.lx.tick_ns();
        let now = world.now;
        self.cpus[c].tick_armed = true;
        world.q.push(now + Nanos(tick), EventKind::Tick, c.0, 0);
        let linux = self.lx.baseline == Baseline::Linux;
        if linux {
            self.rebalance(world, programs, c);
        } else {
            self.solaris_tick(world, programs, c);
        }
        // A delayed sleeper is still queued (`nr_queued`): the slice's end picks again.
        let queued = !self.cpus[c].rq.is_empty() || !self.cpus[c].delayed.is_empty();
        if queued {
            world.q.push(now, EventKind::Resched, c.0, 0);
        }
        if queued || self.lx.kernel_noise_ns > 0 {
            let p = self.lx.kernel_noise_per_s * tick as f64 / 1e9;
            if world.rng.next_f64() < p {
                let at = now + Nanos(world.rng.below(tick));
                world.q.push(at, EventKind::Noise, c.0, 0);
            }
        }
        if linux
            && now >= self.nohz_next
            && (self.cpus[c].nr() >= 2 || self.llc_busy_peer(world, c))
        {
            self.nohz_next = now + Nanos(tick);
            for i in CpuIdx::all(self.cpus.len()) {
                if self.cpus[i].idle() {
                    self.rebalance(world, programs, i);
                }
            }
        }
    }

    /// Whether another CPU of `c`'s LLC is busy too (`nr_busy_cpus > 1`): then
    /// `nohz_balancer_kick` gets the idle CPUs balancing, as the LLC may hold load that
    /// another LLC could take.
    fn llc_busy_peer(&self, world: &World, c: CpuIdx) -> bool {
        world.hw.llc_cpus[world.hw.llc[c] as usize]
            .iter()
            .any(|&x| x != c && self.cpus[x].cur.is_some())
    }

    pub(crate) fn on_resched(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        let Some(cur) = self.cpus[c].cur else {
            return;
        };
        let k = &self.cpus[c];
        if (k.rq.is_empty() && k.delayed.is_empty()) || programs.mid_operation(c) {
            return;
        }
        if matches!(world.th[cur].act, Act::Yield { .. }) {
            self.yield_cpu(world, programs, c);
        } else if world.now.saturating_sub(world.th[cur].picked_at)
            >= Nanos(self.slice_of(world, cur))
        {
            self.preempt(world, programs, c);
        }
    }

    /// A kernel thread runs briefly: for `kernel_noise_ns` the CPU's thread does not run
    /// (its activity ends that much later), and when the kernel thread is done the fairest
    /// queued thread runs.
    pub(crate) fn on_noise(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        let Some(cur) = self.cpus[c].cur else {
            return;
        };
        if programs.mid_operation(c) {
            return;
        }
        if self.lx.kernel_noise_ns > 0 {
            programs.end_segment(self, world, c);
            world.th[cur].debt += Nanos(self.lx.kernel_noise_ns);
            self.add_noise_load(world, c, self.lx.kernel_noise_ns);
            programs.begin_segment(self, world, c);
        }
        if self.cpus[c].rq.is_empty() {
            return;
        }
        if programs.yield_waiting(world, cur) {
            self.yield_cpu(world, programs, c);
        } else {
            self.preempt(world, programs, c);
        }
    }

    /// Periodic balancing of CPU `c` at every level whose interval has passed.
    pub(super) fn rebalance(&mut self, world: &mut World, programs: &mut dyn Programs, c: CpuIdx) {
        let now = world.now;
        let max = Nanos::from_millis(100 * self.cpus.len() as u64);
        for lv in 0..self.levels.len() {
            let busy = self.cpus[c].cur.is_some();
            let mut interval = self.cpus[c].interval[lv];
            if busy {
                // `get_sd_balance_interval`: one jiffy less, so that the levels' busy
                // periods are not multiples of each other.
                let tick = self.lx.tick_ns();
                interval = Nanos(
                    (interval.0 * self.lx.busy_factor)
                        .saturating_sub(tick)
                        .max(tick),
                );
            }
            if now < self.cpus[c].last_balance[lv] + interval.min(max) {
                continue;
            }
            let kind = if busy { Kind::Busy } else { Kind::Idle };
            self.load_balance(world, programs, c, lv, kind);
            self.cpus[c].last_balance[lv] = now;
        }
    }

    pub(super) fn newidle_balance(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
    ) {
        if self.cpus[c].avg_idle < Nanos(self.lx.migration_cost_ns) {
            return;
        }
        if !self.root_overloaded() {
            return;
        }
        for lv in 0..self.levels.len() {
            // NI_RANDOM: try this domain as often as it succeeds (`newidle.rs`).
            let Some(weight) = self.newidle_try(world, c, lv) else {
                continue;
            };
            let pulled = self.load_balance(world, programs, c, lv, Kind::NewIdle);
            self.newidle_done(c, lv, weight, pulled);
            if pulled || !self.cpus[c].idle() {
                return;
            }
        }
    }

    /// The queues as this instant's periodic passes read them: taken at the first pass of
    /// the instant (see "Passes at one tick" above).
    fn see_queues(&mut self, world: &mut World) {
        if self.seen.as_ref().is_some_and(|(at, _)| *at == world.now) {
            return;
        }
        let tie = &mut self.tie;
        let queues = self
            .cpus
            .iter()
            .map(|k| SeenQueue {
                cur: k.cur,
                rq: k.rq.clone(),
                delayed: k.delayed.clone(),
                rank: tie.next_u64(),
            })
            .collect();
        self.seen = Some((world.now, queues));
    }

    /// CPU `x`'s queue as a pass reads it: as this instant's periodic passes saw it when
    /// `at_tick` (and [`Kernel::see_queues`] ran at this instant), else as it is.
    fn read_queue(&self, world: &World, x: CpuIdx, at_tick: bool) -> QueueView<'_> {
        match &self.seen {
            Some((at, seen)) if at_tick && *at == world.now => seen[x.ix()].view(),
            _ => self.cpus[x].view(),
        }
    }

    /// A group's rank among equally loaded ones at this tick: its first CPU's.
    fn tie_rank(&self, g: &[CpuIdx]) -> u64 {
        match (&self.seen, g.first()) {
            (Some((_, seen)), Some(&x)) => seen[x.ix()].rank,
            _ => 0,
        }
    }

    /// One `sched_balance_rq` of CPU `c` at level `lv`; whether it pulled anything.
    pub(super) fn load_balance(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        c: CpuIdx,
        lv: usize,
        kind: Kind,
    ) -> bool {
        // Passes at one tick read the queues as they were before any of them moved a
        // thread; a new-idle pass, or the idle CPUs' passes run one after another by the
        // CPU that nohz kicked, read them as they are.
        let at_tick = kind == Kind::Busy;
        if at_tick {
            self.see_queues(world);
        }
        let Some(local_ix) = self.should_balance(world, c, lv, kind) else {
            return false;
        };
        // update_sd_lb_stats at the root domain refreshes `rd->overloaded`.
        self.note_overload(lv);
        let per_app = self.runnable_per_app(world, programs);
        let sd = self.domain_stats(world, c, lv, local_ix, at_tick, &per_app);
        let imb = self.imbalance(lv, &sd);
        let bix = match sd.busiest {
            Some((bix, ..)) if imb.tasks > 0 || imb.load.is_some() => bix,
            _ => {
                if kind != Kind::NewIdle {
                    self.cpus[c].failed[lv] = 0;
                    let lvl = &self.levels[lv];
                    let iv = &mut self.cpus[c].interval[lv];
                    *iv = Nanos(iv.0 * 2).min(lvl.max_interval);
                }
                return false;
            }
        };
        let mut moved = 0usize;
        if let Some(src) = self.find_src(world, c, lv, bix, imb.spread, at_tick) {
            let pass = Pass {
                c,
                src,
                lv,
                kind,
                failed: self.cpus[c].failed[lv],
            };
            moved = self.detach_tasks(world, programs, &pass, &imb, &per_app);
            // need_active_balance: after `cache_nice_tries + 2` failures, but only where
            // tasks were to move (`imbalanced_active_balance`, `migrate_task`); where load
            // was (`migrate_load`: both groups busy), the kernel keeps failing until a
            // queued thread's halved load fits the imbalance, and never pushes a running
            // one.
            let tries = self.levels[lv].cache_nice_tries;
            let active = moved == 0
                && kind != Kind::NewIdle
                && pass.failed + 1 > tries + 2
                && imb.load.is_none();
            if active && self.active_balance(world, programs, &pass, imb.spread) {
                self.cpus[c].failed[lv] = tries + 1;
                return true;
            }
        }
        if kind != Kind::NewIdle {
            if moved == 0 {
                self.cpus[c].failed[lv] += 1;
            } else {
                self.cpus[c].failed[lv] = 0;
            }
            // Unbalanced, moved or not: back to the shortest interval (`sched_balance_rq`
            // resets `balance_interval` whenever it found an imbalance).
            self.cpus[c].interval[lv] = self.levels[lv].min_interval;
        }
        moved > 0
    }

    /// Whether CPU `c` balances its domain at level `lv` for a pass of `kind`
    /// (`should_we_balance`: the first idle CPU of its group, else the group's first CPU;
    /// any CPU going idle): the position of its group among the domain's, if it does.
    fn should_balance(&self, world: &World, c: CpuIdx, lv: usize, kind: Kind) -> Option<usize> {
        let level = &self.levels[lv];
        let groups = &level.groups[level.dom_of[c] as usize];
        let local_ix = groups.iter().position(|g| g.contains(&c))?;
        if kind != Kind::NewIdle {
            let at_tick = kind == Kind::Busy;
            let g = &groups[local_ix];
            let first = g
                .iter()
                .copied()
                .find(|&x| self.read_queue(world, x, at_tick).idle())
                .unwrap_or(g[0]);
            if first != c {
                return None;
            }
        }
        Some(local_ix)
    }

    /// The counts and loads of CPU `c`'s domain at level `lv` (its group the
    /// `local_ix`th) and its busiest other group (`update_sd_lb_stats`,
    /// `update_sd_pick_busiest`): by group type, then (spare capacity) fewer idle CPUs
    /// and more threads, else load per CPU; equal loads at a tick by their draw.
    fn domain_stats(
        &self,
        world: &World,
        c: CpuIdx,
        lv: usize,
        local_ix: usize,
        at_tick: bool,
        per_app: &[usize],
    ) -> DomainStats {
        let level = &self.levels[lv];
        let groups = &level.groups[level.dom_of[c] as usize];
        let stats = |g: &[CpuIdx]| GroupStats::of(g, |x| self.read_queue(world, x, at_tick));
        // Group loads (`sgs->group_load`): threads weighed by `task_h_load`, kernel
        // threads' decayed load (see `group_load`).
        let group_load = |g: &[CpuIdx]| -> f64 {
            g.iter()
                .map(|&x| {
                    self.queue_load(
                        world,
                        x,
                        self.read_queue(world, x, at_tick).threads(),
                        per_app,
                    )
                })
                .sum()
        };
        let mut sd = DomainStats {
            local: stats(&groups[local_ix]),
            local_load: group_load(&groups[local_ix]),
            total: GroupStats::default(),
            total_load: 0.0,
            busiest: None,
        };
        for (i, g) in groups.iter().enumerate() {
            let s = stats(g);
            let l = group_load(g);
            sd.total.nr += s.nr;
            sd.total.ncpu += s.ncpu;
            sd.total_load += l;
            if i == local_ix || s.nr == 0 {
                continue;
            }
            let better = match sd.busiest {
                None => true,
                Some((bi, b, bl)) => {
                    if s.kind() != b.kind() {
                        s.kind() > b.kind()
                    } else if s.kind() == 0 {
                        s.idle < b.idle || (s.idle == b.idle && s.nr > b.nr)
                    } else {
                        // avg_load: load per CPU of the group.
                        let (mine, theirs) = (l * b.ncpu as f64, bl * s.ncpu as f64);
                        mine > theirs
                            || (at_tick
                                && mine == theirs
                                && self.tie_rank(g) > self.tie_rank(&groups[bi]))
                    }
                }
            };
            if better {
                sd.busiest = Some((i, s, l));
            }
        }
        sd
    }

    /// What a pass at level `lv` is to move, from its domain's stats (`calculate_imbalance`).
    fn imbalance(&self, lv: usize, sd: &DomainStats) -> Imbalance {
        let level = &self.levels[lv];
        let local = sd.local;
        let mut imb = Imbalance {
            tasks: 0,
            load: None,
            spread: false,
        };
        let Some((_, b, b_load)) = sd.busiest else {
            return imb;
        };
        if b.kind() == 2 && local.kind() == 0 {
            imb.tasks = local.idle.min(b.nr - b.ncpu).max(1);
        } else if b.kind() == 2 {
            // Both groups busy: balance average load (avg_load per CPU; the busiest
            // must exceed the local group by imbalance_pct), moving at most
            // min(busiest above the domain's average, local below it).
            let avg_b = b_load / b.ncpu as f64;
            let avg_l = sd.local_load / local.ncpu as f64;
            let avg = (sd.total_load / sd.total.ncpu.max(1) as f64).floor();
            if avg_b > avg_l && avg_b * 100.0 > level.imbalance_pct as f64 * avg_l && avg_l < avg {
                let x = ((avg_b - avg) * b.ncpu as f64).min((avg - avg_l) * local.ncpu as f64);
                if x > 0.0 {
                    imb.load = Some(x);
                }
            }
        } else if local.kind() == 0 {
            imb.spread = true;
            if b.ncpu == 1 || level.prefer_sibling {
                imb.tasks = b.nr.saturating_sub(local.nr) / 2;
                if imb.tasks == 0 && local.nr == 0 && b.nr > 1 {
                    imb.tasks = 1;
                }
            } else {
                imb.tasks = local.idle.saturating_sub(b.idle) / 2;
            }
            if level.numa && local.nr < level.imb_numa_nr && imb.tasks <= 2 {
                imb.tasks = 0; // adjust_numa_imbalance: keep small imbalances local
            }
        }
        imb
    }

    /// The busiest CPU of the busiest group, the `bix`th of CPU `c`'s domain at level `lv`
    /// (`sched_balance_find_src_rq`): most runnable threads, with one queued; when
    /// `spread`ing, a CPU whose one thread runs will do (nothing can be detached from it,
    /// so the attempt fails and counts towards active balance).
    fn find_src(
        &self,
        world: &World,
        c: CpuIdx,
        lv: usize,
        bix: usize,
        spread: bool,
        at_tick: bool,
    ) -> Option<CpuIdx> {
        self.levels[lv].groups[self.levels[lv].dom_of[c] as usize][bix]
            .iter()
            .copied()
            .filter(|&x| {
                // A CPU whose other threads are all delayed counts as busiest
                // (`nr_running`), though nothing on it can be detached.
                let q = self.read_queue(world, x, at_tick);
                !q.rq.is_empty() || (q.cur.is_some() && (spread || !q.delayed.is_empty()))
            })
            .max_by_key(|&x| {
                (
                    self.read_queue(world, x, at_tick).runnable(),
                    std::cmp::Reverse(x),
                )
            })
    }

    /// Pulls queued threads of `pass.src` to `pass.c` (`detach_tasks`), least recently
    /// run first, skipping those its affinity forbids and, until attempts failed more
    /// than `cache_nice_tries`, cache-hot ones; as many as `imb` says (a new-idle pass:
    /// one). How many it moved.
    fn detach_tasks(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        pass: &Pass,
        imb: &Imbalance,
        per_app: &[usize],
    ) -> usize {
        let Pass { c, src, failed, .. } = *pass;
        let tries = self.levels[pass.lv].cache_nice_tries;
        let now = world.now;
        let mut cands: Vec<ThreadIdx> = self.cpus[src].rq.clone();
        cands.sort_by_key(|&t| (world.th[t].last_ran, t));
        let mut budget = imb.load.unwrap_or(0.0);
        let mut moved = 0usize;
        for t in cands {
            // Still queued there: a pull onto an idle CPU runs the thread at once, and
            // if it blocks at once the CPU's new-idle balancing may already have
            // pulled another candidate (the kernel detaches every thread it moves
            // before attaching any; the model moves them one by one).
            if !self.cpus[src].rq.contains(&t) || !self.allowed(world, t, c) {
                continue;
            }
            let hot = now.saturating_sub(world.th[t].last_ran) < Nanos(self.lx.migration_cost_ns);
            if hot && failed <= tries {
                continue;
            }
            if imb.load.is_some() {
                // shr_bound(task_h_load, nr_balance_failed) must fit the imbalance.
                let l = (self.task_h_load(world, t, per_app) / f64::from(1u32 << failed.min(10)))
                    .floor();
                if l > budget {
                    continue;
                }
                budget -= l;
            }
            self.pull(world, programs, t, src, c);
            moved += 1;
            if imb.load.map_or(moved >= imb.tasks, |_| budget <= 0.0) {
                break;
            }
            if pass.kind == Kind::NewIdle {
                break;
            }
        }
        moved
    }

    /// Active balance of `pass.c` from `pass.src`, nothing having been pulled: a delayed
    /// sleeper moves asleep, else the running thread is pushed here (when `spread`ing,
    /// even the CPU's only one: `active_load_balance_cpu_stop`). Whether one moved.
    fn active_balance(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        pass: &Pass,
        spread: bool,
    ) -> bool {
        let (c, src) = (pass.c, pass.src);
        if self.active_move_delayed(world, programs, src, c) {
            return true;
        }
        let Some(t) = self.cpus[src].cur else {
            return false;
        };
        if !((self.cpus[src].nr() >= 2 || spread) && self.allowed(world, t, c)) {
            return false;
        }
        programs.end_segment(self, world, src);
        let min_vr = self.min_vruntime_now(world, programs, src).0 as i64;
        self.cpus[src].cur = None;
        world.th[t].involuntary += 1;
        world.th[t].lag = world.th[t].vruntime.0 as i64 - min_vr;
        self.set_cpu(world, programs, t, c);
        self.enqueue(world, programs, t, c, Entry::Migration);
        self.schedule_if_idle(world, programs, src);
        true
    }

    /// Moves queued thread `t` from CPU `src` to CPU `dst`.
    fn pull(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        src: CpuIdx,
        dst: CpuIdx,
    ) {
        let min_vr = self.min_vruntime_now(world, programs, src).0 as i64;
        self.cpus[src].rq.retain(|&x| x != t);
        let th = &mut world.th[t];
        th.lag = th.vruntime.0 as i64 - min_vr;
        let waited = world.now.saturating_sub(th.runnable_since);
        th.wait += waited;
        self.set_cpu(world, programs, t, dst);
        self.enqueue(world, programs, t, dst, Entry::Migration);
    }

    /// Changes thread `t`'s affinity; a thread on a CPU no longer allowed moves at once.
    pub(crate) fn set_affinity(
        &mut self,
        world: &mut World,
        programs: &mut dyn Programs,
        t: ThreadIdx,
        allowed: threadbalance_model::CpuSet,
    ) {
        world.th[t].allowed = allowed;
        let c = world.th[t].cpu;
        if self.allowed(world, t, c) {
            return;
        }
        match world.th[t].st {
            St::Running => {
                programs.end_segment(self, world, c);
                let min_vr = self.min_vruntime_now(world, programs, c).0 as i64;
                self.cpus[c].cur = None;
                world.th[t].lag = world.th[t].vruntime.0 as i64 - min_vr;
                world.th[t].involuntary += 1;
                let dst = self.fallback_cpu(world, t);
                self.set_cpu(world, programs, t, dst);
                self.enqueue(world, programs, t, dst, Entry::Migration);
                self.schedule_if_idle(world, programs, c);
            }
            St::Runnable => {
                let dst = self.fallback_cpu(world, t);
                self.pull(world, programs, t, c, dst);
            }
            St::Blocked => self.drop_delayed(world, t),
            St::New | St::Done => {}
        }
    }
}
