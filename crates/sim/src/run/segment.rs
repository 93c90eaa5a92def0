//! Segments: starting a running thread's activity, its speed factor, and accounting the
//! time it ran when the segment stops.

use super::{Act, CpuIdx, Kernel, ThreadIdx, Userspace, World};
use crate::queue::EventKind;
use crate::workload::Op;
use threadbalance_model::Nanos;

impl Userspace {
    // ---- segments ------------------------------------------------------------------------

    /// Starts (or restarts) the running thread's activity on CPU `c` at `now`.
    pub(super) fn start_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx) {
        let Some(t) = kernel.running(c) else { return };
        let now = world.now;
        let (factor, stream, node, home) = self.speed_factor(kernel, world, c, t);
        let th = &world.th[t];
        let base = now + th.debt;
        // When the activity ends (`None`: a pure spin or a yield loop ends only when
        // something else happens).
        let end = match th.act {
            Act::Work { left, .. } => Some(base + Nanos((left * factor).ceil() as u64)),
            Act::Spin { until, .. } => Some(base.max(until)),
            Act::BarrierSpin { until, .. } => until.map(|u| base.max(u)),
            Act::Yield { .. } => None,
            Act::Idle => Some(base),
        };
        let cpu = &mut self.cpus[c];
        cpu.version = cpu.version.wrapping_add(1);
        cpu.seg_start = now;
        cpu.seg_factor = factor;
        cpu.seg_stream = stream;
        cpu.seg_node = node;
        cpu.seg_home = home;
        cpu.seg_debt = th.debt;
        if stream > 0.0 {
            self.mem.add(node as usize, home as usize, stream);
        }
        if let Some(end) = end {
            world.q.push(end, EventKind::Cpu, c.0, self.cpus[c].version);
        }
    }

    /// The speed factor of the running thread's work on CPU `c`, its memory-bound
    /// weight, the node issuing it and the node whose pages serve it.
    fn speed_factor(
        &mut self,
        kernel: &Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
    ) -> (f64, f64, u32, u32) {
        let mut f = 1.0;
        let mut stream = 0.0;
        let (mut node, mut home) = (0, 0);
        if let Act::Work { mem, .. } = world.th[t].act {
            let m = f64::from(mem);
            if m > 0.0 {
                let h = self.home_of(world, t, c) as usize;
                let here = world.hw.node[c] as usize;
                let latency = world.hw.node_mem[here * world.hw.nnode + h];
                // The issuing node's LLC, the home node's channels and the link between
                // them are shared with the other memory-bound streams (crate::memory).
                let cap = crate::memory::Capacity {
                    node_streams: world.hw.node_streams,
                    link_streams: world.hw.link_streams,
                };
                f = self.mem.factor(cap, here, h, m, latency);
                f = self.llc_contended(kernel, world, (c, t), m, f);
                stream = m;
                node = here as u32;
                home = h as u32;
            }
        }
        if world.hw.smt_factor != 1.0
            && world.hw.siblings[c]
                .iter()
                .any(|&s| s != c && kernel.running(s).is_some())
        {
            f *= world.hw.smt_factor;
        }
        (f, stream, node, home)
    }

    /// The node holding the pages thread `t` works on, placing them by first touch from CPU
    /// `c` if nobody touched them yet: the thread's own pages, or the application's shared
    /// data (first touched by its first thread).
    fn home_of(&mut self, world: &mut World, t: ThreadIdx, c: CpuIdx) -> u32 {
        let app = world.th[t].app;
        let owner = if self.apps[app].shared_data {
            self.apps[app].first
        } else {
            t
        };
        if let Some(home) = world.th[owner].home {
            return home;
        }
        let cpu = if owner == t { c } else { world.th[owner].cpu };
        let home = world.hw.node[cpu];
        world.th[owner].home = Some(home);
        home
    }

    /// Stops the running thread's segment on CPU `c` at `now` and accounts it.
    pub(super) fn stop_segment(&mut self, kernel: &Kernel, world: &mut World, c: CpuIdx) {
        let Some(t) = kernel.running(c) else { return };
        let now = world.now;
        let cpu = &mut self.cpus[c];
        let elapsed = now.saturating_sub(cpu.seg_start);
        cpu.busy_ns += elapsed;
        cpu.version = cpu.version.wrapping_add(1);
        let (factor, stream, node, seg_home, debt) = (
            cpu.seg_factor,
            cpu.seg_stream,
            cpu.seg_node,
            cpu.seg_home,
            cpu.seg_debt,
        );
        cpu.seg_start = now;
        if stream > 0.0 {
            self.mem.remove(node as usize, seg_home as usize, stream);
        }
        let home = {
            let app = world.th[t].app;
            if self.apps[app].shared_data {
                world.th[self.apps[app].first].home
            } else {
                world.th[t].home
            }
        };
        let th = &mut world.th[t];
        th.run += elapsed;
        th.vruntime += elapsed;
        let sys = elapsed.min(debt).min(th.debt);
        th.debt -= sys;
        th.stime += sys;
        let user = elapsed - sys;
        th.utime += user;
        let mut done_work = 0.0;
        if let Act::Work { left, mem, .. } = &mut th.act {
            let done = (user.0 as f64 / factor).min(*left);
            done_work = done;
            *left -= done;
            if *left < 0.5 {
                *left = 0.0;
            }
            if *mem > 0.0 {
                let m = done * f64::from(*mem);
                world.stats.mem_total += m;
                if home != Some(world.hw.node[c]) {
                    world.stats.mem_remote += m;
                }
            }
        }
        th.last_ran = now;
        self.count_segment(world, c, t, user, done_work);
    }

    /// The CPU's activity reached its end.
    pub(super) fn on_activity_end(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx) {
        let Some(t) = kernel.running(c) else { return };
        self.stop_segment(kernel, world, c);
        if world.th[t].debt > Nanos::ZERO {
            // Only possible when the end was computed before extra debt was added.
            self.start_segment(kernel, world, c);
            return;
        }
        match world.th[t].act {
            Act::Work { lock, .. } => {
                world.th[t].act = Act::Idle;
                if let Some(lock) = lock {
                    let (prog, pc) = (world.th[t].prog, world.th[t].pc);
                    if let Op::Ticket { items, body, .. } = self.progs[prog].ops[pc as usize] {
                        // Still holding the mutex: take a ticket, then unlock.
                        let got = self.take_ticket(world, lock, t, items);
                        let th = &mut world.th[t];
                        if got {
                            th.ticket_loop = Some((pc, pc + 1 + u32::from(body)));
                            th.pc = pc + 1;
                        } else {
                            th.passes += 1;
                            th.pc = pc + 1 + u32::from(body);
                        }
                    } else {
                        world.th[t].pc += 1;
                    }
                    // Still mid-operation: a sleeper woken onto this CPU waits in its
                    // queue instead of preempting a thread that is about to go on.
                    self.cpus[c].in_advance = true;
                    self.release(kernel, world, lock, t, c);
                    self.cpus[c].in_advance = false;
                } else {
                    world.th[t].pc += 1;
                }
            }
            Act::Spin { lock, .. } => {
                // Spin budget spent: park on the lock's sleep queue.
                let l = &mut self.locks[lock];
                l.spinners.retain(|&x| x != t);
                Self::park(l, t);
                world.th[t].act = Act::Idle;
                world.th[t].lck_start = Some(world.now);
                kernel.block(world, self, c, t);
                return;
            }
            Act::BarrierSpin { barrier, .. } => {
                let passed = Some(self.barriers[barrier].generation) != world.th[t].bar_gen;
                world.th[t].act = Act::Idle;
                if !passed {
                    self.barriers[barrier].waiters.push(t);
                    world.th[t].lck_start = Some(world.now);
                    kernel.block(world, self, c, t);
                    return;
                }
            }
            Act::Yield { .. } | Act::Idle => world.th[t].act = Act::Idle,
        }
        self.advance(kernel, world, c, t);
    }
}
