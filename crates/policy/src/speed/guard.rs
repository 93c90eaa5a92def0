//! The guard: management must not cost the program progress, so it is checked against
//! Linux from time to time, and the threads go back to Linux when Linux does better.
//!
//! The program's progress rate over a stretch of time is measured as the *minimum*, over
//! the busy threads (those that wanted a CPU at least a quarter of the time), of CPU time
//! received per wall time. In a barrier
//! program the slowest thread gates every phase, so that is the program's rate; for
//! independent threads it is the fairness of the share. (Total CPU time would not do: spin
//! or yield waiting burns CPU without progress, and every core stays busy either way.)
//!
//! ```text
//!   Managed (stint D_m) ──► Probe: every thread back to Linux for (settle + L) / 2
//!      ▲                       │ compare the last L (L/2 for the probe): r_probe > (1 + δ)·r_managed?
//!      │ no: D_m ×= 2          │ yes
//!      └───────────────────────┤
//!                              ▼
//!   Trial: manage for settle + L ◄── HandedBack (stint D_r; D_r ×= 2 at every loss)
//!      │ r_trial ≥ r_released? yes: Managed, D_m reset; no: HandedBack again
//! ```
//!
//! A managed stint whose rate is already at `AT_FAIR` (90 %) of the fair share (min(1,
//! cores / threads)) or more skips its probe: Linux could do at most 11 % better there, and
//! a probe costs what management gains for its length. (At 97 %, the simulator's kernel
//! noise — a few ms per second taken from some cores — was enough to probe two pinned
//! threads per core, and the probe's own moves cost a point.)
//!
//! **Even pinning needs no probe.** When every core holds as many placed threads as every
//! other (N a multiple of M: nothing rotates) and the slowest busy thread's rate over the
//! tail is at least `LEVEL` (97 %) of their mean, the stint skips its probe too, whatever
//! the rate. Threads that progress alike on evenly loaded cores finish each phase
//! together: no core idles while another still has work, and no placement can give the
//! slowest more without taking it from another. (Their rate may still be far below the
//! fair share: libgomp's waiters sleep at every barrier, and 32 threads of the OpenMP
//! stencil on 16 cores read 82 % of it.) There the probe only cost: 125 ms under Linux,
//! which ran them at 0.72 of pinning's rate, and `speed` took 1.015–1.016× `pbind`'s time
//! with 1000 ms of work, 1.003–1.005× with 15 000 ms; now 1.000× (simulated, seeds 1–3).
//! What the probe is for still gets one: another program on one core slows the two
//! threads there, the slowest falls under 97 % of the mean, and Linux may spread them
//! better (`speed_guard_probes_even_pinning_when_one_core_runs_its_threads_slower`).
//!
//! **A probe is half as long as a managed tail** (L/8 of settling, then L/2 measured: 125
//! ms at L = 200 ms). While it lasts the program runs at Linux's rate, which is what a
//! probe that does not hand back has found worse: a probe is paid for by the program
//! whenever management is below the fair share and still ahead of Linux. In the simulator
//! (seed 1, 1000 ms of work per thread), halving it lifted `speed` on 64 cores with 10 ms
//! blocking phases from 82.4 to 85.0 % of the fair share at 65 threads and from 83.9 to
//! 86.5 % at 96, brought the OpenMP stencil on 16 cores from 1.023 / 1.036 / 1.026× to
//! 1.013 / 1.017 / 1.011× `pbind`'s wall time at 17 / 24 / 32 threads, and paced 17
//! threads with blocking phases from 65.2 to 68.2 % (BPF tick cost); every row without a
//! probe is unchanged. The managed tail stays L long: shortened as well, its rate read
//! below 90 % of the fair share on two pinned threads per core and probed where nothing
//! could be gained. A shorter probe reads Linux's rate with more noise; the rate is a
//! minimum over the threads, which noise lowers, so the noise errs towards managing.

use threadbalance_model::Nanos;

/// The probe must beat management by this fraction, and by `MIN_GAIN` of a core, to take
/// the threads back.
pub(super) const MARGIN: f64 = 0.05;
const MIN_GAIN: f64 = 0.02;
/// Only threads that wanted a CPU at least this fraction of the measured span count (busy
/// threads: a pipeline stage that mostly waits says nothing of the program's rate).
pub(super) const BUSY: f64 = 0.25;
/// A managed rate at least this fraction of the fair share needs no probe.
pub(super) const AT_FAIR: f64 = 0.9;
/// Threads progress alike when the slowest busy one's rate is at least this fraction of
/// their mean (see "Even pinning needs no probe").
pub(super) const LEVEL: f64 = 0.97;
/// First managed stint, and its longest (doubling after every probe management wins).
const FIRST_MANAGED: Nanos = Nanos::from_millis(1000);
const LONGEST_MANAGED: Nanos = Nanos::from_millis(16_000);
/// First stint handed back, and its longest (doubling at every consecutive loss).
const FIRST_HANDED_BACK: Nanos = Nanos::from_millis(1000);
const LONGEST_HANDED_BACK: Nanos = Nanos::from_millis(32_000);

/// Who places the threads now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// The policy does (rotation running).
    Managed,
    /// Linux does, for a probe.
    Probe,
    /// Linux does, because the last probe did better.
    HandedBack,
    /// The policy does again, on trial after a hand-back.
    Trial,
}

impl Mode {
    /// Whether the policy places threads in this mode.
    pub(super) fn managing(self) -> bool {
        matches!(self, Mode::Managed | Mode::Trial)
    }
}

/// What the policy must do after [`Guard::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Nothing changes hands.
    Keep,
    /// Give every placed thread back to Linux.
    Release,
    /// Place every thread again where the policy keeps it.
    Resume,
}

/// The guard's state machine; pure: times and rates come in, actions go out.
#[derive(Debug, Clone)]
pub(super) struct Guard {
    pub(super) mode: Mode,
    /// When the current stint ends.
    pub(super) until: Nanos,
    /// Length of the measured tail of every stint (L), and of the settling before it in a
    /// trial; a probe's are half these ([`Guard::probe_measure`]).
    measure: Nanos,
    settle: Nanos,
    managed_len: Nanos,
    handed_len: Nanos,
    /// Rate over the last managed stint's tail and the last unmanaged one's.
    managed_rate: Option<f64>,
    released_rate: Option<f64>,
    pub(super) probes: u32,
    pub(super) skipped: u32,
    /// Of those, skipped only because the threads were evenly pinned and alike.
    pub(super) skipped_even: u32,
    pub(super) handbacks: u32,
    pub(super) resumes: u32,
    /// The last hand-back or resumption, explained.
    pub(super) last: Option<String>,
    /// When the guard started: the times it reports are counted from here (a live host's
    /// clock is the machine's monotonic clock, not the program's age).
    start: Nanos,
}

impl Guard {
    /// A guard whose first managed stint starts at `now`; `measure` is L.
    pub(super) fn new(now: Nanos, measure: Nanos) -> Guard {
        Guard {
            mode: Mode::Managed,
            until: now + FIRST_MANAGED,
            measure,
            settle: Nanos(measure.0 / 4),
            managed_len: FIRST_MANAGED,
            handed_len: FIRST_HANDED_BACK,
            managed_rate: None,
            released_rate: None,
            probes: 0,
            skipped: 0,
            skipped_even: 0,
            handbacks: 0,
            resumes: 0,
            last: None,
            start: now,
        }
    }

    /// When the measured tail of the current stint starts.
    pub(super) fn measure_from(&self) -> Nanos {
        let tail = if self.mode == Mode::Probe {
            self.probe_measure()
        } else {
            self.measure
        };
        self.until.saturating_sub(tail)
    }

    /// A probe's measured tail, L/2 (see "A probe is half as long" in the module docs).
    fn probe_measure(&self) -> Nanos {
        Nanos(self.measure.0 / 2)
    }

    /// Ends the current stint at `now` with the program's `rate` over its tail (`None`
    /// when no thread wanted a CPU) and `fair`, the fair-share rate; `even`: the threads
    /// were held evenly pinned and progressed alike over it. Returns what to do.
    pub(super) fn advance(
        &mut self,
        now: Nanos,
        rate: Option<f64>,
        fair: f64,
        even: bool,
    ) -> Action {
        let at = now.saturating_sub(self.start).as_secs_f64();
        match self.mode {
            Mode::Managed => {
                self.managed_rate = rate;
                let at_fair = rate.is_none_or(|r| r >= AT_FAIR * fair);
                if at_fair || even {
                    self.skipped += 1;
                    if !at_fair {
                        self.skipped_even += 1;
                    }
                    self.managed_len = (self.managed_len + self.managed_len).min(LONGEST_MANAGED);
                    self.until = now + self.managed_len;
                    return Action::Keep;
                }
                self.probes += 1;
                self.mode = Mode::Probe;
                self.until = now + Nanos(self.settle.0 / 2) + self.probe_measure();
                Action::Release
            }
            Mode::Probe => {
                self.released_rate = rate;
                match (self.managed_rate, rate) {
                    (Some(m), Some(r)) if r > (1.0 + MARGIN) * m && r - m >= MIN_GAIN => {
                        self.handbacks += 1;
                        self.last = Some(format!(
                            "handed back at {at:.2} s: slowest thread {:.0} % of a core under Linux, {:.0} % managed",
                            r * 100.0,
                            m * 100.0
                        ));
                        self.mode = Mode::HandedBack;
                        self.until = now + self.handed_len;
                        Action::Keep
                    }
                    _ => {
                        self.mode = Mode::Managed;
                        self.managed_len =
                            (self.managed_len + self.managed_len).min(LONGEST_MANAGED);
                        self.until = now + self.managed_len;
                        Action::Resume
                    }
                }
            }
            Mode::HandedBack => {
                self.released_rate = rate;
                self.mode = Mode::Trial;
                self.until = now + self.settle + self.measure;
                Action::Resume
            }
            Mode::Trial => {
                self.managed_rate = rate;
                match (rate, self.released_rate) {
                    (Some(m), Some(r)) if m < r => {
                        self.handed_len =
                            (self.handed_len + self.handed_len).min(LONGEST_HANDED_BACK);
                        self.mode = Mode::HandedBack;
                        self.until = now + self.handed_len;
                        Action::Release
                    }
                    _ => {
                        self.resumes += 1;
                        self.last = Some(format!(
                            "managing again since {at:.2} s: slowest thread {:.0} % of a core managed, {:.0} % under Linux",
                            rate.unwrap_or(0.0) * 100.0,
                            self.released_rate.unwrap_or(0.0) * 100.0
                        ));
                        self.handed_len = FIRST_HANDED_BACK;
                        self.managed_len = FIRST_MANAGED;
                        self.mode = Mode::Managed;
                        self.until = now + self.managed_len;
                        Action::Keep
                    }
                }
            }
        }
    }
}
