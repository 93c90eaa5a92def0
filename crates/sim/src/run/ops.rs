//! Programs: interpreting a thread's ops (compute, locks, barriers, queues, sleeps,
//! ticket loops), joining and exiting.

use super::{Act, CpuIdx, LockState, Sim, St, ThreadIdx};
use crate::queue::EventKind;
use crate::state::{BarrierIdx, LockIdx};
use crate::workload::{Op, Wait};
use threadbalance_model::Nanos;
use threadbalance_policy::rng::Rng;

impl Sim {
    // ---- programs ------------------------------------------------------------------------

    /// Runs thread `t`'s program on CPU `c` from its current op until something takes time,
    /// blocks or the thread exits; then dispatches the CPU.
    pub(super) fn advance(&mut self, c: CpuIdx, t: ThreadIdx) {
        self.cpus[c].in_advance = true;
        self.advance_program(c, t);
        self.cpus[c].in_advance = false;
    }

    fn advance_program(&mut self, c: CpuIdx, t: ThreadIdx) {
        if self.is_tool(t) {
            return self.tool_step(c, t);
        }
        loop {
            let prog = self.th[t].prog;
            if let Some((start, end)) = self.th[t].ticket_loop
                && self.th[t].pc == end
            {
                // A ticket's work unit is done: back to the dispenser for the next.
                let th = &mut self.th[t];
                th.pc = start;
                th.ticket_loop = None;
            }
            if self.th[t].pc as usize >= self.progs[prog].ops.len() {
                let th = &mut self.th[t];
                th.pc = 0;
                th.iter += 1;
                if self.progs[prog].iterations.is_some_and(|n| th.iter >= n) {
                    if self.main_joins(t) {
                        return self.join(c, t);
                    }
                    self.exit(c, t);
                    return;
                }
            }
            let op = self.progs[prog].ops[self.th[t].pc as usize];
            let app = self.th[t].app;
            match op {
                Op::Compute { ns, spread, mem } => {
                    let th = &mut self.th[t];
                    let mut left = vary(&mut th.rng, ns, spread) as f64;
                    left += std::mem::take(&mut th.carry);
                    th.act = Act::Work {
                        left: left.max(1.0),
                        lock: None,
                        mem,
                    };
                    break;
                }
                Op::Lock {
                    lock,
                    hold_ns,
                    lines,
                }
                | Op::Ticket {
                    lock,
                    hold_ns,
                    lines,
                    ..
                } => {
                    let l = self.apps[app].lock(lock);
                    if self.locks[l].holder.is_none() {
                        self.acquire(l, t, c, hold_ns, lines);
                    } else {
                        if self.th[t].wait_start.is_none() {
                            self.th[t].wait_start = Some(self.now);
                        }
                        self.locks[l].spinners.push(t);
                        self.th[t].act = Act::Spin {
                            lock: l,
                            until: self.now + Nanos(self.apps[app].spin_ns),
                        };
                    }
                    break;
                }
                Op::Barrier { barrier, wait } => {
                    let b = self.apps[app].barrier(barrier);
                    if let Some(arrived) = self.th[t].bar_gen {
                        if self.barriers[b].generation != arrived {
                            self.end_wait(t);
                            self.th[t].bar_gen = None;
                            self.th[t].rounds += 1;
                            self.th[t].pc += 1;
                            continue;
                        }
                    } else {
                        self.log_arrival(app, t, self.barriers[b].generation);
                        let bar = &mut self.barriers[b];
                        bar.count += 1;
                        if bar.count >= bar.parties {
                            bar.count = 0;
                            bar.generation += 1;
                            self.log_opening(app);
                            self.release_barrier(b, c);
                            self.th[t].rounds += 1;
                            self.th[t].pc += 1;
                            continue;
                        }
                        self.th[t].bar_gen = Some(bar.generation);
                        self.th[t].wait_start = Some(self.now);
                    }
                    self.th[t].act = match wait {
                        Wait::Spin => Act::BarrierSpin {
                            barrier: b,
                            until: None,
                        },
                        Wait::Block => Act::BarrierSpin {
                            barrier: b,
                            until: Some(self.now + Nanos(self.apps[app].spin_ns)),
                        },
                        Wait::Gomp {
                            spin_ns,
                            throttled_ns,
                        } => {
                            // libgomp's do_spin: the count is chosen on every wait, by the
                            // threads it manages against the CPUs the process started with.
                            let spin = crate::gomp::spin_window(
                                spin_ns,
                                throttled_ns,
                                self.apps[app].threads,
                                self.th[t].original.len(),
                            );
                            Act::BarrierSpin {
                                barrier: b,
                                until: Some(self.now + Nanos(spin)),
                            }
                        }
                        Wait::Yield => {
                            self.th[t].act = Act::Yield { barrier: b };
                            self.th[t].debt += Nanos(self.lx.syscall_ns);
                            self.start_segment(c);
                            if self.queued_non_yielder(c) {
                                self.yield_cpu(c);
                            }
                            return;
                        }
                    };
                    break;
                }
                Op::Put { queue } => {
                    let q = &mut self.queues[self.apps[app].queue(queue)];
                    if q.items.len() >= q.capacity {
                        if self.th[t].wait_start.is_none() {
                            self.th[t].wait_start = Some(self.now);
                        }
                        q.putters.push_back(t);
                        self.th[t].lck_start = Some(self.now);
                        self.block(c, t);
                        return;
                    }
                    q.items.push_back(c);
                    let getter = q.getters.pop_front();
                    self.end_wait(t);
                    self.th[t].debt += Nanos(self.lx.syscall_ns);
                    self.th[t].pc += 1;
                    if let Some(g) = getter {
                        self.wake(g, Some(c));
                    }
                }
                Op::Get { queue } => {
                    let q = &mut self.queues[self.apps[app].queue(queue)];
                    if let Some(src) = q.items.pop_front() {
                        let lines = f64::from(q.lines);
                        let putter = q.putters.pop_front();
                        let cost = lines * self.hw.line_ns(src, c) / self.hw.mlp;
                        self.th[t].carry += cost;
                        self.end_wait(t);
                        self.th[t].debt += Nanos(self.lx.syscall_ns);
                        self.th[t].pc += 1;
                        if let Some(p) = putter {
                            self.wake(p, Some(c));
                        }
                    } else if q.closed {
                        self.end_wait(t);
                        self.exit(c, t);
                        return;
                    } else {
                        if self.th[t].wait_start.is_none() {
                            self.th[t].wait_start = Some(self.now);
                        }
                        q.getters.push_back(t);
                        self.th[t].lck_start = Some(self.now);
                        self.block(c, t);
                        return;
                    }
                }
                Op::Sleep { ns, spread } => {
                    let d = vary(&mut self.th[t].rng, ns, spread);
                    self.th[t].pc += 1;
                    self.q.push(self.now + Nanos(d), EventKind::Timer, t.0, 0);
                    self.block(c, t);
                    return;
                }
            }
        }
        self.start_segment(c);
    }

    /// Whether thread `t` is a main thread that has yet to create its application's other
    /// threads, or is waiting for them.
    fn main_joins(&self, t: ThreadIdx) -> bool {
        let app = &self.apps[self.th[t].app];
        app.main_thread && app.first == t && app.done + 1 < app.threads
    }

    /// Main thread `t` on CPU `c` finished its program: the first time it creates the
    /// other threads (forked from `c`, as `pthread_create` does, 20 µs apart); then it
    /// sleeps in `pthread_join` (a futex wait) until the last of them exits.
    fn join(&mut self, c: CpuIdx, t: ThreadIdx) {
        let app = self.th[t].app;
        if !self.apps[app].joining {
            self.apps[app].joining = true;
            let others = self.apps[app].members().skip(1).map(ThreadIdx::from);
            for (k, i) in others.enumerate() {
                let at = self.now + Nanos((k as u64 + 1) * self.lx.spawn_gap_ns);
                self.th[i].key.start_time = 1 + at.0 / 10_000_000;
                self.q.push(at, EventKind::Spawn, i.0, 0);
            }
        }
        // Wake up past the end of the program, so the next advance exits.
        let prog = self.th[t].prog;
        let th = &mut self.th[t];
        th.pc = self.progs[prog].ops.len() as u32;
        th.iter = th.iter.saturating_sub(1);
        if th.wait_start.is_none() {
            th.wait_start = Some(self.now);
        }
        self.block(c, t);
    }

    /// Ends a lock/barrier/queue wait, adding it to the thread's lock time.
    fn end_wait(&mut self, t: ThreadIdx) {
        let th = &mut self.th[t];
        if let Some(start) = th.wait_start.take() {
            th.lock_ns += self.now.saturating_sub(start);
        }
    }

    /// Thread `t` on CPU `c` takes free lock `l` and starts its critical section.
    fn acquire(&mut self, l: LockIdx, t: ThreadIdx, c: CpuIdx, hold_ns: u64, lines: u32) {
        self.end_wait(t);
        let lock = &mut self.locks[l];
        let from = lock.last_cpu;
        let previous = lock.last_holder.replace(t);
        lock.holder = Some(t);
        lock.acquisitions += 1;
        if let Some(from) = from {
            lock.handoffs += 1;
            if self.hw.pkg[from] != self.hw.pkg[c] {
                lock.cross += 1;
            }
        }
        if let Some(p) = previous.filter(|&p| p != t) {
            *self.wakes.entry((p, t)).or_default() += 1;
        }
        // The lock's line and the protected data follow the lock.
        let line = match from {
            None => 0.0,
            Some(f) if self.flat_handoffs && f != c => self.hw.llc_ns,
            Some(f) => self.hw.line_ns(f, c),
        };
        let cost = f64::from(1 + lines) * line;
        self.th[t].act = Act::Work {
            left: hold_ns as f64 + cost,
            lock: Some(l),
            mem: 0.0,
        };
    }

    /// Holder `t` on CPU `c` releases lock `l`: the spinner that sees the line first takes
    /// it; if nobody spins, the first sleeper is woken and must race for it.
    pub(super) fn release(&mut self, l: LockIdx, t: ThreadIdx, c: CpuIdx) {
        let lock = &mut self.locks[l];
        debug_assert_eq!(lock.holder, Some(t));
        lock.holder = None;
        lock.last_cpu = Some(c);
        let mut best: Option<(f64, usize)> = None;
        for (i, &s) in self.locks[l].spinners.iter().enumerate() {
            let sc = self.th[s].cpu;
            if self.th[s].st != St::Running || self.running(sc) != Some(s) {
                continue;
            }
            // Who sees the release first: line latency, plus up to 10 ns of spin-loop phase.
            let seen = self.hw.line_ns(c, sc) + 10.0 * self.rng.next_f64();
            if best.is_none_or(|(b, _)| seen < b) {
                best = Some((seen, i));
            }
        }
        if let Some((_, i)) = best {
            let s = self.locks[l].spinners.swap_remove(i);
            let sc = self.th[s].cpu;
            self.stop_segment(sc);
            let (hold, lines) = self.lock_op(s);
            self.acquire(l, s, sc, hold, lines);
            self.start_segment(sc);
        } else if let Some(w) = self.locks[l].waiters.pop_front() {
            self.th[t].debt += Nanos(self.lx.syscall_ns);
            self.wake(w, Some(c));
        }
    }

    /// Puts thread `t` on lock `l`'s sleep queue the way the papers' Solaris libc does
    /// (`enqueue()` in `synch.c`, `thread_queue_fifo` = 4): at the head (LIFO) except every
    /// 16th enqueue, which goes to the tail (FIFO); a release wakes the head. LIFO "is unfair
    /// and can lead to starvation, but it gives better performance for heavily contended
    /// locks": the threads that parked last, and are still warm, get the lock again while
    /// the others sleep on, so waiting is spread unevenly over the threads.
    pub(super) fn park(l: &mut LockState, t: ThreadIdx) {
        l.enqueues = l.enqueues.wrapping_add(1);
        if l.enqueues.wrapping_shl(4) == 0 {
            l.waiters.push_back(t);
        } else {
            l.waiters.push_front(t);
        }
    }

    fn lock_op(&self, t: ThreadIdx) -> (u64, u32) {
        let th = &self.th[t];
        match self.progs[th.prog].ops[th.pc as usize] {
            Op::Lock { hold_ns, lines, .. } | Op::Ticket { hold_ns, lines, .. } => (hold_ns, lines),
            _ => (0, 0),
        }
    }

    /// Thread `t`, holding lock `l`, takes a ticket from the lock's pool of `items` per
    /// pass; whether there was one. The first thread of a later pass refills the pool; a
    /// thread of an earlier pass than the pool's finds it empty.
    pub(super) fn take_ticket(&mut self, l: LockIdx, t: ThreadIdx, items: u32) -> bool {
        let k = self.th[t].passes;
        let pool = &mut self.locks[l];
        if pool.pass.is_none_or(|p| p < k) {
            pool.pass = Some(k);
            pool.taken = 0;
        }
        if pool.pass == Some(k) && pool.taken < items {
            pool.taken += 1;
            true
        } else {
            false
        }
    }

    /// The last thread arrived at barrier `b` (from CPU `c`): everyone else goes on.
    fn release_barrier(&mut self, b: BarrierIdx, c: CpuIdx) {
        let waiters = std::mem::take(&mut self.barriers[b].waiters);
        for &w in &waiters {
            self.wake(w, Some(c));
        }
        self.barriers[b].waiters = waiters;
        self.barriers[b].waiters.clear();
        // Spinners and yielders still on a CPU notice when the line reaches them.
        for sc in CpuIdx::all(self.cpus.len()) {
            let Some(s) = self.running(sc) else { continue };
            if sc == c {
                continue;
            }
            let waiting = match self.th[s].act {
                Act::BarrierSpin { barrier, .. } | Act::Yield { barrier } => barrier == b,
                _ => false,
            };
            if waiting {
                let at = self.now + Nanos(self.hw.line_ns(c, sc).ceil() as u64);
                let cpu = &mut self.cpus[sc];
                cpu.version = cpu.version.wrapping_add(1);
                // Re-time the segment end: the spin ends when the release is seen.
                self.q.push(at, EventKind::Cpu, sc.0, cpu.version);
                self.th[s].act = match self.th[s].act {
                    Act::BarrierSpin { barrier, .. } => Act::BarrierSpin {
                        barrier,
                        until: Some(at),
                    },
                    other => other,
                };
                if let Act::Yield { barrier } = self.th[s].act {
                    self.th[s].act = Act::BarrierSpin {
                        barrier,
                        until: Some(at),
                    };
                }
            }
        }
    }

    /// Thread `t` on CPU `c` exits.
    fn exit(&mut self, c: CpuIdx, t: ThreadIdx) {
        let now = self.now;
        let th = &mut self.th[t];
        th.st = St::Done;
        th.died = now;
        th.act = Act::Idle;
        self.live -= 1;
        let app = th.app;
        let prog = th.prog;
        self.end_wait(t);
        self.apps[app].done += 1;
        if self.apps[app].done == self.apps[app].threads {
            self.apps[app].finished_at = Some(now);
        }
        let main = self.apps[app].first;
        if self.apps[app].joining && self.apps[app].done + 1 == self.apps[app].threads {
            // The last other thread exited: pthread_join returns in the main thread.
            self.wake(main, Some(c));
        }
        let puts = self.progs[prog].puts.clone();
        for qi in puts {
            let q = &mut self.queues[qi];
            q.producers = q.producers.saturating_sub(1);
            if q.producers == 0 && !q.closed {
                q.closed = true;
                let getters: Vec<ThreadIdx> = q.getters.drain(..).collect();
                for g in getters {
                    self.wake(g, Some(c));
                }
            }
        }
        self.exited(c);
    }
}

/// `ns` varied uniformly by ±`spread`.
pub(crate) fn vary(rng: &mut Rng, ns: u64, spread: f32) -> u64 {
    if spread <= 0.0 {
        return ns;
    }
    let f = 1.0 + f64::from(spread) * (2.0 * rng.next_f64() - 1.0);
    (ns as f64 * f).round().max(1.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::RunOptions;
    use threadbalance_model::Nanos;

    #[test]
    fn park_is_lifo_except_every_sixteenth_enqueue() {
        // Solaris `enqueue()` with thread_queue_fifo = 4: enqueues 1–15 go to the head,
        // the 16th to the tail. Threads 0..16 park in order: the head is the last LIFO one.
        let mut l = LockState::default();
        for t in ThreadIdx::all(16) {
            Sim::park(&mut l, t);
        }
        let order: Vec<u32> = l.waiters.iter().map(|t| t.0).collect();
        let mut want: Vec<u32> = (0..15).rev().collect();
        want.push(15);
        assert_eq!(order, want);
    }

    /// A simulation (seed 1) of `app` alone on the machine `spec`.
    fn sim_of(spec: &str, app: crate::workload::App) -> Sim {
        let m = crate::machine::machine(spec, None).unwrap();
        let w = crate::workload::Workload {
            name: app.name.clone(),
            description: String::new(),
            apps: vec![app],
        };
        Sim::new(&m, &w, &RunOptions::new(1))
    }

    #[test]
    fn spawned_threads_start_with_the_first_threads_mask() {
        // Three spinners on 4 CPUs, spawned 20 µs apart. The first is confined to CPU 2
        // before the others exist: they start with its mask, on CPU 2 (`clone` copies
        // `cpus_mask`), as a program's workers do on Linux.
        let mut sim = sim_of(
            "package:1 core:4 pu:1",
            crate::workload::spinners(3, 10_000_000),
        );
        sim.run_until(Nanos(10_000));
        let first = ThreadIdx(0);
        assert_eq!(sim.th[1].st, St::New, "the second is not spawned yet");
        let two: threadbalance_model::CpuSet =
            [threadbalance_model::CpuId(2)].into_iter().collect();
        sim.set_affinity(first, two.clone());
        sim.run_until(Nanos::from_millis(1));
        for t in ThreadIdx::all(3) {
            assert_eq!(sim.th[t].allowed, two, "thread {t}");
            assert_eq!(sim.th[t].cpu, CpuIdx(2), "thread {t}");
        }
    }

    #[test]
    fn ticket_loops_hand_out_every_ticket_once_per_loop() {
        // bodytrack with 4 workers, 2 frames: each loop takes all its tickets, plus one
        // empty take per worker that ends it.
        let mut sim = sim_of("opteron6272-4x16", crate::workload::bodytrack(4, 2));
        sim.run_until(Nanos::from_secs(120));
        assert!(sim.finished());
        assert_eq!(sim.locks[0].acquisitions, 2 * 12 * (60 + 4));
        assert_eq!(sim.locks[1].acquisitions, 2 * 5 * (1000 + 4 + 125 + 4));
        // Every worker finished 2 frames × 22 loops.
        assert!(sim.th[1..].iter().all(|t| t.passes == 2 * 22));
        sim.check_invariants().unwrap();
    }
}
