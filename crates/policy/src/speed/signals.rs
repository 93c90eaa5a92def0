//! The synchronization signals and the interval they call for: voluntary and involuntary
//! switches (or timeslices) per running thread-second, averaged over about τ = 0.2 s, give
//! the phase, and a round lasts a sixteenth of it, within `min_interval`…`max_interval`
//! ("The interval" in `docs/speed-rules.md`).

use super::{
    BACKOFF, IDLE, INVOL_PER_VOL, PHASE_FRACTION, PING_PONG, SIGNAL_TAU_S, SLEEPING, Speed,
    YIELD_RATE,
};
use threadbalance_model::{Nanos, Window};

impl Speed {
    /// Smooths the synchronization signals and picks the interval the signals call for.
    ///
    /// Long because each signal is smoothed in turn from the same per-thread pass, and the
    /// interval is picked from all of them at the end.
    pub(super) fn observe_signals(&mut self, w: &Window) -> Nanos {
        let dt_s = w.duration().as_secs_f64();
        // Only threads that ran and switched speak for the program's synchronization: a
        // main thread asleep in join would dilute the rates, and so would the threads that
        // have a core to themselves when a yield barrier's waiters hand the CPU over only
        // where cores are shared (65 threads on 64 cores: two of them).
        let (mut n, mut switching, mut vol, mut invol, mut slices) = (0u64, 0u64, 0, 0, 0);
        // Preemptions of threads we gave short slices on a shared core are ours, not the
        // program's: the rate that says whether the threads block leaves those threads out
        // while other threads speak for it ("Short slices" in `speed`'s docs). The yield
        // and phase rates keep them: a yield on a shared core is an involuntary switch too,
        // and a thread alone on its core yields without one.
        let (mut invol_mine, mut n_mine) = (0, 0u64);
        // CPU time of the threads that switched, and their time asleep, as fractions of the
        // window.
        let (mut run, mut asleep) = (0.0, 0.0);
        // CPU time of every busy thread, switched or not: the work between blocks.
        let mut run_busy = 0.0;
        for t in w.threads.iter().filter(|t| t.util + t.latency >= IDLE) {
            n += 1;
            run_busy += t.util;
            let switched = t.voluntary + t.involuntary + t.timeslices > 0;
            switching += u64::from(switched);
            if switched {
                run += t.util;
                asleep += super::host::observe(t).blocked;
            }
            vol += t.voluntary;
            slices += t.timeslices;
            if self.sliced_and_shared(t.key) {
                invol_mine += t.involuntary;
                n_mine += u64::from(switched);
            } else {
                invol += t.involuntary;
            }
        }
        let n_busy = n;
        if switching > 0 {
            n = switching;
        }
        // The threads left to speak for the program's own involuntary rate (all of them
        // when none is).
        let (invol_prog, n_prog) = if n_mine < n {
            (invol, n - n_mine)
        } else {
            (invol + invol_mine, n)
        };
        let invol = invol + invol_mine;
        if dt_s > 0.0 && n > 0 {
            let thread_s = dt_s * n as f64;
            // The mean over the windows seen so far until they cover τ, then exponential:
            // an average started from zero would take τ to believe the first phases, and
            // meanwhile ask for rounds far longer than the program's phases.
            self.signals_age += dt_s;
            let a = (dt_s / self.signals_age.min(SIGNAL_TAU_S)).min(1.0);
            self.counted |= vol + invol > 0;
            self.vol_rate += (vol as f64 / thread_s - self.vol_rate) * a;
            self.invol_rate += (invol as f64 / thread_s - self.invol_rate) * a;
            let prog_s = dt_s * n_prog as f64;
            self.invol_prog_rate += (invol_prog as f64 / prog_s - self.invol_prog_rate) * a;
            self.slice_rate += (slices as f64 / thread_s - self.slice_rate) * a;
            self.run_rate += (run / n as f64 - self.run_rate) * a;
            self.sleep_frac += (asleep / n as f64 - self.sleep_frac) * a;
            let busy_s = dt_s * n_busy as f64;
            self.busy_vol_rate += (vol as f64 / busy_s - self.busy_vol_rate) * a;
            self.busy_run_rate += (run_busy / n_busy as f64 - self.busy_run_rate) * a;
        }
        let (lo, hi) = (self.cfg.min_interval, self.cfg.max_interval);
        // Switches: voluntary plus involuntary when the host counts them (a sched_yield that
        // hands the CPU over counts as involuntary), else every time a thread was given a
        // CPU. Either errs on the fast side.
        let (wakeups, yields) = if self.counted {
            (self.vol_rate + self.invol_rate, self.invol_rate)
        } else {
            (self.slice_rate, self.slice_rate)
        };
        self.phase_ns = None;
        self.work_phase_ns = None;
        self.block_work_ns = None;
        // CPU time per involuntary switch: a few µs only where threads yield to threads
        // that yield straight back (`PING_PONG`).
        self.ping_pong = self.counted
            && self.invol_rate > 0.0
            && self.run_rate / self.invol_rate < PING_PONG.as_secs_f64();
        if self.ping_pong {
            self.stats.reason = "threads pass the CPU back and forth by yielding";
            hi
        } else if yields >= YIELD_RATE {
            self.stats.reason = "threads yield at synchronization points";
            lo
        } else if wakeups >= 1.0 {
            self.stats.reason = if self.counted {
                "threads block, yield or are preempted about once per phase"
            } else {
                "threads wake or are preempted about once per phase"
            };
            let phase_ns = 1e9 / wakeups;
            // The sparse-rounds rule reads a phase only from threads that block (see
            // `host::sparse`): yielding threads keep every core busy either way.
            // At least a third of the switches voluntary: threads block.
            let blocking = self.counted && INVOL_PER_VOL * self.vol_rate >= self.invol_prog_rate;
            self.phase_ns = blocking.then_some(phase_ns);
            // The work between two blocking points: CPU time per voluntary switch, of the
            // threads that switched (a part of the phase in windows shorter than it; the
            // fields' docs say which rule reads which). Unlike
            // the phase on the wall clock it does not stretch when the threads wait for a
            // CPU, so it reads the same under a slow rotation as under Linux. Threads that
            // sleep block too, however many preemptions outnumber their voluntary switches:
            // with 100 ms phases one block a phase is ~7 a second, and a core's two threads
            // preempt each other hundreds of times (the phase itself is left to the
            // switches, which is what `fine` needs).
            let sleeping = self.counted && self.sleep_frac >= SLEEPING;
            self.work_phase_ns = ((blocking || sleeping) && self.vol_rate > 0.0)
                .then(|| 1e9 * self.run_rate / self.vol_rate);
            // The same over every busy thread: the CPU time the threads that ran on
            // without a switch in the window is part of the phase too.
            self.block_work_ns = ((blocking || sleeping) && self.busy_vol_rate > 0.0)
                .then(|| 1e9 * self.busy_run_rate / self.busy_vol_rate);
            // Where threads block, a phase ends at a block: the preemptions between two
            // blocks (threads sharing a core) are not phase ends, and counted as such they
            // asked for 1 ms rounds under 80 ms phases ("The interval" in
            // `docs/speed-rules.md`).
            let basis = self.work_phase_ns.map_or(phase_ns, |w| w.max(phase_ns));
            Nanos((basis * PHASE_FRACTION) as u64).clamp(lo, hi)
        } else {
            self.stats.reason = "no synchronization seen";
            hi
        }
    }
}

/// The interval of the next round while the rotation runs: down to `wanted` at once, up
/// by at most `BACKOFF` a round. A round that saw no synchronization yet (the first ones
/// of a program whose phases have not ended) asks for `max_interval`; followed at once,
/// that would leave the doubled-up threads where they are for 100 ms.
pub(super) fn follow(interval: Nanos, wanted: Nanos) -> Nanos {
    wanted.min(Nanos((interval.0 as f64 * BACKOFF) as u64))
}
