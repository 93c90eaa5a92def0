//! Programs: interpreting a thread's ops (compute, locks, barriers, queues, sleeps,
//! ticket loops), joining and exiting.

use super::{Act, CpuIdx, Kernel, LockState, St, ThreadIdx, Userspace, World};
use crate::queue::EventKind;
use crate::state::{BarrierIdx, LockIdx};
use crate::workload::{Op, Wait};
use threadbalance_model::Nanos;
use threadbalance_policy::rng::Rng;

/// Where a thread's program stands after one op ([`Userspace::advance`]).
enum Step {
    /// The op is done at once: the next one follows.
    Next,
    /// The thread has an activity that takes time: its segment starts.
    Run,
    /// The thread left the CPU (it blocked, yielded or exited), or its segment began.
    Left,
}

impl Userspace {
    // ---- programs ------------------------------------------------------------------------

    /// Runs thread `t`'s program on CPU `c` from its current op until something takes time,
    /// blocks or the thread exits; then dispatches the CPU.
    pub(super) fn advance(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
    ) {
        self.cpus[c].in_advance = true;
        self.advance_program(kernel, world, c, t);
        self.cpus[c].in_advance = false;
    }

    fn advance_program(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx, t: ThreadIdx) {
        if self.is_tool(t) {
            return self.tool_step(kernel, world, c, t);
        }
        loop {
            let Some(op) = self.next_op(kernel, world, c, t) else {
                return;
            };
            let step = match op {
                Op::Compute { ns, spread, mem } => {
                    let th = &mut world.th[t];
                    let mut left = vary(&mut th.rng, ns, spread) as f64;
                    left += std::mem::take(&mut th.carry);
                    th.act = Act::Work {
                        left: left.max(1.0),
                        lock: None,
                        mem,
                    };
                    Step::Run
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
                    self.lock_or_spin(world, c, t, lock, (hold_ns, lines));
                    Step::Run
                }
                Op::Barrier { barrier, wait } => {
                    self.barrier_op(kernel, world, c, t, barrier, wait)
                }
                Op::Put { queue } => self.put_op(kernel, world, c, t, queue),
                Op::Get { queue } => self.get_op(kernel, world, c, t, queue),
                Op::Sleep { ns, spread } => {
                    let d = vary(&mut world.th[t].rng, ns, spread);
                    world.th[t].pc += 1;
                    world.q.push(world.now + Nanos(d), EventKind::Timer, t.0, 0);
                    kernel.block(world, self, c, t);
                    Step::Left
                }
            };
            match step {
                Step::Next => {}
                Step::Run => break,
                Step::Left => return,
            }
        }
        self.start_segment(kernel, world, c);
    }

    /// Thread `t`'s next op: back at the ticket dispenser when a ticket's work is done,
    /// at the program's start when its end is reached. `None`: the program has run its
    /// iterations, and the thread (on CPU `c`) exits, or joins as a main thread.
    fn next_op(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
    ) -> Option<Op> {
        let prog = world.th[t].prog;
        if let Some((start, end)) = world.th[t].ticket_loop
            && world.th[t].pc == end
        {
            // A ticket's work unit is done: back to the dispenser for the next.
            let th = &mut world.th[t];
            th.pc = start;
            th.ticket_loop = None;
        }
        if world.th[t].pc as usize >= self.progs[prog].ops.len() {
            let th = &mut world.th[t];
            th.pc = 0;
            th.iter += 1;
            if self.progs[prog].iterations.is_some_and(|n| th.iter >= n) {
                if self.main_joins(world, t) {
                    self.join(kernel, world, c, t);
                } else {
                    self.exit(kernel, world, c, t);
                }
                return None;
            }
        }
        Some(self.progs[prog].ops[world.th[t].pc as usize])
    }

    /// Thread `t` on CPU `c` at its application's lock `lock` (held `hold` = `(hold_ns,
    /// lines)`): takes it if it is free, else spins on it, up to its application's spin
    /// budget.
    fn lock_or_spin(
        &mut self,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
        lock: u16,
        hold: (u64, u32),
    ) {
        let app = world.th[t].app;
        let l = self.apps[app].lock(lock);
        if self.locks[l].holder.is_none() {
            self.acquire(world, l, t, c, hold.0, hold.1);
        } else {
            if world.th[t].wait_start.is_none() {
                world.th[t].wait_start = Some(world.now);
            }
            self.locks[l].spinners.push(t);
            world.th[t].act = Act::Spin {
                lock: l,
                until: world.now + Nanos(self.apps[app].spin_ns),
            };
        }
    }

    /// Thread `t` on CPU `c` at its application's barrier `barrier`: through it if it
    /// opened since the thread arrived, or if the thread is the last to arrive (it then
    /// opens it); else it waits as `wait` says.
    fn barrier_op(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
        barrier: u16,
        wait: Wait,
    ) -> Step {
        let app = world.th[t].app;
        let b = self.apps[app].barrier(barrier);
        if let Some(arrived) = world.th[t].bar_gen {
            if self.barriers[b].generation != arrived {
                self.end_wait(world, t);
                world.th[t].bar_gen = None;
                world.th[t].rounds += 1;
                world.th[t].pc += 1;
                return Step::Next;
            }
        } else {
            self.log_arrival(world, app, t, self.barriers[b].generation);
            let bar = &mut self.barriers[b];
            bar.count += 1;
            if bar.count >= bar.parties {
                bar.count = 0;
                bar.generation += 1;
                self.log_opening(world, app);
                self.release_barrier(kernel, world, b, c);
                world.th[t].rounds += 1;
                world.th[t].pc += 1;
                return Step::Next;
            }
            world.th[t].bar_gen = Some(bar.generation);
            world.th[t].wait_start = Some(world.now);
        }
        world.th[t].act = match wait {
            Wait::Spin => Act::BarrierSpin {
                barrier: b,
                until: None,
            },
            Wait::Block => Act::BarrierSpin {
                barrier: b,
                until: Some(world.now + Nanos(self.apps[app].spin_ns)),
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
                    world.th[t].original.len(),
                );
                Act::BarrierSpin {
                    barrier: b,
                    until: Some(world.now + Nanos(spin)),
                }
            }
            Wait::Yield => {
                world.th[t].act = Act::Yield { barrier: b };
                world.th[t].debt += Nanos(kernel.lx.syscall_ns);
                self.start_segment(kernel, world, c);
                if kernel.queued_non_yielder(world, self, c) {
                    kernel.yield_cpu(world, self, c);
                }
                return Step::Left;
            }
        };
        Step::Run
    }

    /// Thread `t` on CPU `c` puts an item into its application's queue `queue`, waking a
    /// getter; or sleeps while the queue is full.
    fn put_op(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
        queue: u16,
    ) -> Step {
        let q = &mut self.queues[self.apps[world.th[t].app].queue(queue)];
        if q.items.len() >= q.capacity {
            if world.th[t].wait_start.is_none() {
                world.th[t].wait_start = Some(world.now);
            }
            q.putters.push_back(t);
            world.th[t].lck_start = Some(world.now);
            kernel.block(world, self, c, t);
            return Step::Left;
        }
        q.items.push_back(c);
        let getter = q.getters.pop_front();
        self.end_wait(world, t);
        world.th[t].debt += Nanos(kernel.lx.syscall_ns);
        world.th[t].pc += 1;
        if let Some(g) = getter {
            kernel.wake(world, self, g, Some(c));
        }
        Step::Next
    }

    /// Thread `t` on CPU `c` takes an item from its application's queue `queue` (its
    /// lines come from the CPU that put it), waking a putter; exits if the queue is empty
    /// and closed; else sleeps until an item comes.
    fn get_op(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        c: CpuIdx,
        t: ThreadIdx,
        queue: u16,
    ) -> Step {
        let q = &mut self.queues[self.apps[world.th[t].app].queue(queue)];
        if let Some(src) = q.items.pop_front() {
            let lines = f64::from(q.lines);
            let putter = q.putters.pop_front();
            let cost = lines * world.hw.line_ns(src, c) / world.hw.mlp;
            world.th[t].carry += cost;
            self.end_wait(world, t);
            world.th[t].debt += Nanos(kernel.lx.syscall_ns);
            world.th[t].pc += 1;
            if let Some(p) = putter {
                kernel.wake(world, self, p, Some(c));
            }
            Step::Next
        } else if q.closed {
            self.end_wait(world, t);
            self.exit(kernel, world, c, t);
            Step::Left
        } else {
            if world.th[t].wait_start.is_none() {
                world.th[t].wait_start = Some(world.now);
            }
            q.getters.push_back(t);
            world.th[t].lck_start = Some(world.now);
            kernel.block(world, self, c, t);
            Step::Left
        }
    }

    /// Whether thread `t` is a main thread that has yet to create its application's other
    /// threads, or is waiting for them.
    fn main_joins(&self, world: &World, t: ThreadIdx) -> bool {
        let app = &self.apps[world.th[t].app];
        app.main_thread && app.first == t && app.done + 1 < app.threads
    }

    /// Main thread `t` on CPU `c` finished its program: the first time it creates the
    /// other threads (forked from `c`, as `pthread_create` does, 20 µs apart); then it
    /// sleeps in `pthread_join` (a futex wait) until the last of them exits.
    fn join(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx, t: ThreadIdx) {
        let app = world.th[t].app;
        if !self.apps[app].joining {
            self.apps[app].joining = true;
            let others = self.apps[app].members().skip(1).map(ThreadIdx::from);
            for (k, i) in others.enumerate() {
                let at = world.now + Nanos((k as u64 + 1) * kernel.lx.spawn_gap_ns);
                world.th[i].key.start_time = 1 + at.0 / 10_000_000;
                world.q.push(at, EventKind::Spawn, i.0, 0);
            }
        }
        // Wake up past the end of the program, so the next advance exits.
        let prog = world.th[t].prog;
        let th = &mut world.th[t];
        th.pc = self.progs[prog].ops.len() as u32;
        th.iter = th.iter.saturating_sub(1);
        if th.wait_start.is_none() {
            th.wait_start = Some(world.now);
        }
        kernel.block(world, self, c, t);
    }

    /// Ends a lock/barrier/queue wait, adding it to the thread's lock time.
    fn end_wait(&mut self, world: &mut World, t: ThreadIdx) {
        let th = &mut world.th[t];
        if let Some(start) = th.wait_start.take() {
            th.lock_ns += world.now.saturating_sub(start);
        }
    }

    /// Thread `t` on CPU `c` takes free lock `l` and starts its critical section.
    fn acquire(
        &mut self,
        world: &mut World,
        l: LockIdx,
        t: ThreadIdx,
        c: CpuIdx,
        hold_ns: u64,
        lines: u32,
    ) {
        self.end_wait(world, t);
        let lock = &mut self.locks[l];
        let from = lock.last_cpu;
        let previous = lock.last_holder.replace(t);
        lock.holder = Some(t);
        lock.acquisitions += 1;
        if let Some(from) = from {
            lock.handoffs += 1;
            if world.hw.pkg[from] != world.hw.pkg[c] {
                lock.cross += 1;
            }
        }
        if let Some(p) = previous.filter(|&p| p != t) {
            *self.wakes.entry((p, t)).or_default() += 1;
        }
        // The lock's line and the protected data follow the lock.
        let line = match from {
            None => 0.0,
            Some(f) if self.flat_handoffs && f != c => world.hw.llc_ns,
            Some(f) => world.hw.line_ns(f, c),
        };
        let cost = f64::from(1 + lines) * line;
        world.th[t].act = Act::Work {
            left: hold_ns as f64 + cost,
            lock: Some(l),
            mem: 0.0,
        };
    }

    /// Holder `t` on CPU `c` releases lock `l`: the spinner that sees the line first takes
    /// it; if nobody spins, the first sleeper is woken and must race for it.
    pub(super) fn release(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        l: LockIdx,
        t: ThreadIdx,
        c: CpuIdx,
    ) {
        let lock = &mut self.locks[l];
        debug_assert_eq!(lock.holder, Some(t));
        lock.holder = None;
        lock.last_cpu = Some(c);
        let mut best: Option<(f64, usize)> = None;
        for (i, &s) in self.locks[l].spinners.iter().enumerate() {
            let sc = world.th[s].cpu;
            if world.th[s].st != St::Running || kernel.running(sc) != Some(s) {
                continue;
            }
            // Who sees the release first: line latency, plus up to 10 ns of spin-loop phase.
            let seen = world.hw.line_ns(c, sc) + 10.0 * world.rng.next_f64();
            if best.is_none_or(|(b, _)| seen < b) {
                best = Some((seen, i));
            }
        }
        if let Some((_, i)) = best {
            let s = self.locks[l].spinners.swap_remove(i);
            let sc = world.th[s].cpu;
            self.stop_segment(kernel, world, sc);
            let (hold, lines) = self.lock_op(world, s);
            self.acquire(world, l, s, sc, hold, lines);
            self.start_segment(kernel, world, sc);
        } else if let Some(w) = self.locks[l].waiters.pop_front() {
            world.th[t].debt += Nanos(kernel.lx.syscall_ns);
            kernel.wake(world, self, w, Some(c));
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

    fn lock_op(&self, world: &World, t: ThreadIdx) -> (u64, u32) {
        let th = &world.th[t];
        match self.progs[th.prog].ops[th.pc as usize] {
            Op::Lock { hold_ns, lines, .. } | Op::Ticket { hold_ns, lines, .. } => (hold_ns, lines),
            _ => (0, 0),
        }
    }

    /// Thread `t`, holding lock `l`, takes a ticket from the lock's pool of `items` per
    /// pass; whether there was one. The first thread of a later pass refills the pool; a
    /// thread of an earlier pass than the pool's finds it empty.
    pub(super) fn take_ticket(
        &mut self,
        world: &mut World,
        l: LockIdx,
        t: ThreadIdx,
        items: u32,
    ) -> bool {
        let k = world.th[t].passes;
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
    fn release_barrier(
        &mut self,
        kernel: &mut Kernel,
        world: &mut World,
        b: BarrierIdx,
        c: CpuIdx,
    ) {
        let waiters = std::mem::take(&mut self.barriers[b].waiters);
        for &w in &waiters {
            kernel.wake(world, self, w, Some(c));
        }
        self.barriers[b].waiters = waiters;
        self.barriers[b].waiters.clear();
        // Spinners and yielders still on a CPU notice when the line reaches them.
        for sc in CpuIdx::all(self.cpus.len()) {
            let Some(s) = kernel.running(sc) else {
                continue;
            };
            if sc == c {
                continue;
            }
            let waiting = match world.th[s].act {
                Act::BarrierSpin { barrier, .. } | Act::Yield { barrier } => barrier == b,
                _ => false,
            };
            if waiting {
                let at = world.now + Nanos(world.hw.line_ns(c, sc).ceil() as u64);
                let cpu = &mut self.cpus[sc];
                cpu.version = cpu.version.wrapping_add(1);
                // Re-time the segment end: the spin ends when the release is seen.
                world.q.push(at, EventKind::Cpu, sc.0, cpu.version);
                world.th[s].act = match world.th[s].act {
                    Act::BarrierSpin { barrier, .. } => Act::BarrierSpin {
                        barrier,
                        until: Some(at),
                    },
                    other => other,
                };
                if let Act::Yield { barrier } = world.th[s].act {
                    world.th[s].act = Act::BarrierSpin {
                        barrier,
                        until: Some(at),
                    };
                }
            }
        }
    }

    /// Thread `t` on CPU `c` exits.
    fn exit(&mut self, kernel: &mut Kernel, world: &mut World, c: CpuIdx, t: ThreadIdx) {
        let now = world.now;
        let th = &mut world.th[t];
        th.st = St::Done;
        th.died = now;
        th.act = Act::Idle;
        self.live -= 1;
        let app = th.app;
        let prog = th.prog;
        self.end_wait(world, t);
        self.apps[app].done += 1;
        if self.apps[app].done == self.apps[app].threads {
            self.apps[app].finished_at = Some(now);
        }
        let main = self.apps[app].first;
        if self.apps[app].joining && self.apps[app].done + 1 == self.apps[app].threads {
            // The last other thread exited: pthread_join returns in the main thread.
            kernel.wake(world, self, main, Some(c));
        }
        let puts = self.progs[prog].puts.clone();
        for qi in puts {
            let q = &mut self.queues[qi];
            q.producers = q.producers.saturating_sub(1);
            if q.producers == 0 && !q.closed {
                q.closed = true;
                let getters: Vec<ThreadIdx> = q.getters.drain(..).collect();
                for g in getters {
                    kernel.wake(world, self, g, Some(c));
                }
            }
        }
        kernel.exited(world, self, c);
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
    use crate::state::Sim;
    use threadbalance_model::Nanos;

    #[test]
    fn park_is_lifo_except_every_sixteenth_enqueue() {
        // Solaris `enqueue()` with thread_queue_fifo = 4: enqueues 1–15 go to the head,
        // the 16th to the tail. Threads 0..16 park in order: the head is the last LIFO one.
        let mut l = LockState::default();
        for t in ThreadIdx::all(16) {
            Userspace::park(&mut l, t);
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
        assert_eq!(sim.world.th[1].st, St::New, "the second is not spawned yet");
        let two: threadbalance_model::CpuSet =
            [threadbalance_model::CpuId(2)].into_iter().collect();
        sim.kernel
            .set_affinity(&mut sim.world, &mut sim.user, first, two.clone());
        sim.run_until(Nanos::from_millis(1));
        for t in ThreadIdx::all(3) {
            assert_eq!(sim.world.th[t].allowed, two, "thread {t}");
            assert_eq!(sim.world.th[t].cpu, CpuIdx(2), "thread {t}");
        }
    }

    #[test]
    fn ticket_loops_hand_out_every_ticket_once_per_loop() {
        // bodytrack with 4 workers, 2 frames: each loop takes all its tickets, plus one
        // empty take per worker that ends it.
        let mut sim = sim_of("opteron6272-4x16", crate::workload::bodytrack(4, 2));
        sim.run_until(Nanos::from_secs(120));
        assert!(sim.finished());
        assert_eq!(sim.user.locks[0].acquisitions, 2 * 12 * (60 + 4));
        assert_eq!(sim.user.locks[1].acquisitions, 2 * 5 * (1000 + 4 + 125 + 4));
        // Every worker finished 2 frames × 22 loops.
        assert!(sim.world.th[1..].iter().all(|t| t.passes == 2 * 22));
        sim.check_invariants().unwrap();
    }
}
