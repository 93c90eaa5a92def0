//! Segments: starting a running thread's activity, its speed factor, and accounting the
//! time it ran when the segment stops.

use super::{Act, CpuIdx, Sim, ThreadIdx};
use crate::queue::EventKind;
use crate::workload::Op;
use threadbalance_model::Nanos;

impl Sim {
    // ---- segments ------------------------------------------------------------------------

    /// Starts (or restarts) the running thread's activity on CPU `c` at `now`.
    pub(super) fn start_segment(&mut self, c: CpuIdx) {
        let Some(t) = self.running(c) else { return };
        let now = self.now;
        let (factor, stream, node, home) = self.speed_factor(c, t);
        let th = &self.th[t];
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
            self.q.push(end, EventKind::Cpu, c.0, self.cpus[c].version);
        }
    }

    /// The speed factor of the running thread's work on CPU `c`, its memory-bound
    /// weight, the node issuing it and the node whose pages serve it.
    fn speed_factor(&mut self, c: CpuIdx, t: ThreadIdx) -> (f64, f64, u32, u32) {
        let mut f = 1.0;
        let mut stream = 0.0;
        let (mut node, mut home) = (0, 0);
        if let Act::Work { mem, .. } = self.th[t].act {
            let m = f64::from(mem);
            if m > 0.0 {
                let h = self.home_of(t, c) as usize;
                let here = self.hw.node[c] as usize;
                let latency = self.hw.node_mem[here * self.hw.nnode + h];
                // The issuing node's LLC, the home node's channels and the link between
                // them are shared with the other memory-bound streams (crate::memory).
                let cap = crate::memory::Capacity {
                    node_streams: self.hw.node_streams,
                    link_streams: self.hw.link_streams,
                };
                f = self.mem.factor(cap, here, h, m, latency);
                f = self.llc_contended(c, t, m, f);
                stream = m;
                node = here as u32;
                home = h as u32;
            }
        }
        if self.hw.smt_factor != 1.0
            && self.hw.siblings[c]
                .iter()
                .any(|&s| s != c && self.running(s).is_some())
        {
            f *= self.hw.smt_factor;
        }
        (f, stream, node, home)
    }

    /// The node holding the pages thread `t` works on, placing them by first touch from CPU
    /// `c` if nobody touched them yet: the thread's own pages, or the application's shared
    /// data (first touched by its first thread).
    fn home_of(&mut self, t: ThreadIdx, c: CpuIdx) -> u32 {
        let app = self.th[t].app;
        let owner = if self.apps[app].shared_data {
            self.apps[app].first
        } else {
            t
        };
        if let Some(home) = self.th[owner].home {
            return home;
        }
        let cpu = if owner == t { c } else { self.th[owner].cpu };
        let home = self.hw.node[cpu];
        self.th[owner].home = Some(home);
        home
    }

    /// Stops the running thread's segment on CPU `c` at `now` and accounts it.
    pub(super) fn stop_segment(&mut self, c: CpuIdx) {
        let Some(t) = self.running(c) else { return };
        let now = self.now;
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
            let app = self.th[t].app;
            if self.apps[app].shared_data {
                self.th[self.apps[app].first].home
            } else {
                self.th[t].home
            }
        };
        let th = &mut self.th[t];
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
                self.stats.mem_total += m;
                if home != Some(self.hw.node[c]) {
                    self.stats.mem_remote += m;
                }
            }
        }
        th.last_ran = now;
        self.count_segment(c, t, user, done_work);
    }

    /// The CPU's activity reached its end.
    pub(super) fn on_activity_end(&mut self, c: CpuIdx) {
        let Some(t) = self.running(c) else { return };
        self.stop_segment(c);
        if self.th[t].debt > Nanos::ZERO {
            // Only possible when the end was computed before extra debt was added.
            self.start_segment(c);
            return;
        }
        match self.th[t].act {
            Act::Work { lock, .. } => {
                self.th[t].act = Act::Idle;
                if let Some(lock) = lock {
                    let (prog, pc) = (self.th[t].prog, self.th[t].pc);
                    if let Op::Ticket { items, body, .. } = self.progs[prog].ops[pc as usize] {
                        // Still holding the mutex: take a ticket, then unlock.
                        let got = self.take_ticket(lock, t, items);
                        let th = &mut self.th[t];
                        if got {
                            th.ticket_loop = Some((pc, pc + 1 + u32::from(body)));
                            th.pc = pc + 1;
                        } else {
                            th.passes += 1;
                            th.pc = pc + 1 + u32::from(body);
                        }
                    } else {
                        self.th[t].pc += 1;
                    }
                    // Still mid-operation: a sleeper woken onto this CPU waits in its
                    // queue instead of preempting a thread that is about to go on.
                    self.cpus[c].in_advance = true;
                    self.release(lock, t, c);
                    self.cpus[c].in_advance = false;
                } else {
                    self.th[t].pc += 1;
                }
            }
            Act::Spin { lock, .. } => {
                // Spin budget spent: park on the lock's sleep queue.
                let l = &mut self.locks[lock];
                l.spinners.retain(|&x| x != t);
                Self::park(l, t);
                self.th[t].act = Act::Idle;
                self.th[t].lck_start = Some(self.now);
                self.block(c, t);
                return;
            }
            Act::BarrierSpin { barrier, .. } => {
                let passed = Some(self.barriers[barrier].generation) != self.th[t].bar_gen;
                self.th[t].act = Act::Idle;
                if !passed {
                    self.barriers[barrier].waiters.push(t);
                    self.th[t].lck_start = Some(self.now);
                    self.block(c, t);
                    return;
                }
            }
            Act::Yield { .. } | Act::Idle => self.th[t].act = Act::Idle,
        }
        self.advance(c, t);
    }
}
