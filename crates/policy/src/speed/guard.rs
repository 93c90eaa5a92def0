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
//! **Level placements need no probe.** The same holds where the rotation holds the level
//! placement because no rotation would pay (threads that never block, counts within one:
//! `rotate::count_gain`): Linux's balancer evens counts and turns nothing over, so the
//! best it can do is that placement, and a slowest thread at `LEVEL` of what its core's
//! count gives it (1/T+1 of a CPU) or more is where the counts put it. A probe there only
//! cost: 120 threads on 64 cores with 30 ms yield phases ran at Linux's pace until the
//! probe, whose 125 ms under Linux (8 phases a second where both had run 16) cost the run
//! 0.12 s (simulated, seed 1).
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

//!
//! **Progress, where it can be seen.** CPU share is not progress: a moved thread refills its
//! caches on CPU time, a spinning or yielding waiter burns CPU time, and the probe read
//! Linux as slower on a memory-bound barrier program that Linux finished 1.2–1.6 % sooner.
//! Where the host counts progress events per thread ([`Sample::progress`]: barrier rounds
//! in the simulator; futex wake-ups issued or received on Linux, one per round of a
//! blocking barrier), the guard compares those instead:
//!
//! ```text
//!  each window: events per thread (ThreadRates::progress × window) ─► the tail's count
//!  a tail's rate, per thread: (events between its first and its last window with one)
//!                             / (time between those windows' ends); the median thread's
//!  tails judged by progress when both count ≥ MIN_PHASES (2) phases; CPU share otherwise
//!  probe: hand back when Linux's rate > (1 + PROGRESS_MARGIN) × managed (2 %)
//!  tails: long enough for PROBE_PHASES (3.5) phases at the rate seen (≥ 2 counted),
//!         and for RESOLUTION_WINDOWS (100) managed windows (the rate timed to 1 %), 1 s
//!         at most; ticks under Linux as fine as managed ones while a tail is timed
//! ```
//!
//! Timing the events between the first and the last window that saw one (instead of
//! counting them over the whole tail) takes the phase boundaries' positions out of the
//! count: the rate is off by at most a tick over the span, not by a phase. Where no thread
//! ever made a progress event, the guard judges by CPU share as before, and its summary
//! says so.
//!
//! **Blocks, where no progress is counted.** A live host counts no progress for `speed`
//! (the futex probe, read at every tick, cost its rounds their pace: see "The guard" in
//! `docs/speed-rules.md`). But a thread that waits at a blocking barrier blocks there once
//! a phase: where a window has no progress and its switch counts are fresh (the BPF
//! counters: `Window::waits_late` off), each thread's voluntary switches are counted as its
//! events, and the summary says "judged by blocks". In the simulator, counting blocks
//! instead of barrier rounds left the results as they were: over the held-out grid no
//! cell more than 1 % behind Linux either way (median Linux/speed 1.166 against 1.157), and
//! over a tuning grid of 360 cells the geometric mean 1.231 against 1.230. Threads that
//! yield or spin at their barriers do not block: no signal, CPU share. Where the counts may
//! come late (`/proc`, read at most every 50 ms) they would time a boundary no better than
//! that: not counted. A host that counts progress is never mixed with blocks.

use std::collections::BTreeMap;
use threadbalance_model::{Nanos, ThreadKey, Window};

#[cfg(doc)]
use threadbalance_model::Sample;

/// A probe hands back when Linux's progress rate beats management's by more than this.
pub(super) const PROGRESS_MARGIN: f64 = 0.02;
/// A tail is judged by progress only when its median thread counted this many phases.
const MIN_PHASES: f64 = 2.0;
/// Tails are made long enough for this many phases at the phase rate seen, so that at
/// least [`MIN_PHASES`] are counted between the first and the last boundary seen (the
/// window that opens a tail counts none, and a boundary may fall just after the tail).
const PROBE_PHASES: f64 = 3.5;
/// A tail judged by progress times its boundaries to a window's length at worst: it is
/// made at least this many windows long, so that the rate is within 1 % (half the margin).
const RESOLUTION_WINDOWS: f64 = 100.0;
/// The longest tail the phases may ask for.
const LONGEST_TAIL: Nanos = Nanos::from_millis(1000);

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
    /// Progress events counted over the current stint's tail (see "Progress" above).
    tail: Option<Tail>,
    /// And over the whole stint so far, for the phase length only.
    whole: Tail,
    /// The phase rate of the median thread over the last stint that counted one.
    phase_rate: Option<f64>,
    /// The shortest window seen while managing: how finely a boundary can be timed, and
    /// the tick asked for while a tail is timed under Linux ([`Guard::tick_cap`]).
    fine: Nanos,
    /// Whether any thread ever made a progress event: a progress signal exists.
    pub(super) progress_seen: bool,
    /// Whether the host counts progress events, and whether blocks (voluntary switches)
    /// were counted instead (see "Blocks, where no progress is counted" above).
    counted: bool,
    blocks: bool,
    /// Progress rates (phases per second of the median thread) and phases counted over
    /// the last managed tail and the last unmanaged one.
    managed_progress: Option<(f64, f64)>,
    released_progress: Option<(f64, f64)>,
    /// Comparisons (probes and trials) judged by progress, and by CPU share.
    pub(super) by_progress: u32,
    pub(super) by_share: u32,
}

/// One thread's progress over a tail: its events, and the count and time at the end of the
/// first and the last window in which it made one.
#[derive(Debug, Clone, Copy, Default)]
struct Ticks {
    count: f64,
    first: Option<(Nanos, f64)>,
    last: Option<(Nanos, f64)>,
}

/// Progress events over a measured tail, per thread.
#[derive(Debug, Clone, Default)]
struct Tail {
    threads: BTreeMap<ThreadKey, Ticks>,
}

impl Tail {
    /// Counts `events` of thread `key` in the window that ended at `end`.
    fn count(&mut self, key: ThreadKey, end: Nanos, events: f64) {
        let ticks = self.threads.entry(key).or_default();
        ticks.count += events;
        ticks.first.get_or_insert((end, ticks.count));
        ticks.last = Some((end, ticks.count));
    }

    /// The median thread's rate (phases per second between its first and last boundary
    /// seen) and its phases counted there; `None` when no thread saw two boundaries.
    fn rate(&self) -> Option<(f64, f64)> {
        let mut each: Vec<(f64, f64)> = self
            .threads
            .values()
            .filter_map(|t| {
                let ((t0, c0), (t1, c1)) = (t.first?, t.last?);
                let secs = t1.saturating_sub(t0).as_secs_f64();
                (c1 > c0 && secs > 0.0).then(|| ((c1 - c0) / secs, c1 - c0))
            })
            .collect();
        if each.is_empty() {
            return None;
        }
        each.sort_by(|a, b| a.0.total_cmp(&b.0));
        Some(each[each.len() / 2])
    }
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
            tail: None,
            whole: Tail::default(),
            phase_rate: None,
            fine: Nanos::ZERO,
            progress_seen: false,
            counted: false,
            blocks: false,
            managed_progress: None,
            released_progress: None,
            by_progress: 0,
            by_share: 0,
        }
    }

    /// Counts the progress events of window `w` (see "Progress" above): opens the tail's
    /// count when the measured tail starts, and adds every thread's events to it.
    pub(super) fn observe(&mut self, w: &Window) {
        let secs = w.end.saturating_sub(w.start).as_secs_f64();
        let len = w.end.saturating_sub(w.start);
        if self.mode.managing()
            && len > Nanos::ZERO
            && (self.fine == Nanos::ZERO || len < self.fine)
        {
            self.fine = len;
        }
        let open = self.tail.is_some();
        for t in &w.threads {
            let events = match t.progress {
                Some(rate) => {
                    self.counted = true;
                    (rate * secs).round()
                }
                // Fresh switch counts: a thread that blocks at a barrier blocks once a
                // phase (see "Blocks, where no progress is counted").
                None if !w.waits_late && !self.counted => {
                    self.blocks = true;
                    t.voluntary as f64
                }
                None => continue,
            };
            if events < 1.0 {
                continue;
            }
            self.progress_seen = true;
            self.whole.count(t.key, w.end, events);
            if let Some(tail) = self.tail.as_mut() {
                tail.count(t.key, w.end, events);
            }
        }
        if !open && w.end >= self.measure_from() {
            self.tail = Some(Tail::default());
        }
    }

    /// The measured tail of a stint of this mode: L (L/2 for a probe), made long enough
    /// for [`PROBE_PHASES`] phases at the phase rate seen over this stint so far, else
    /// over the last one.
    fn tail_len(&self, mode: Mode) -> Nanos {
        let base = if mode == Mode::Probe {
            self.probe_measure()
        } else {
            self.measure
        };
        let rate = self.whole.rate().map(|r| r.0).or(self.phase_rate);
        match rate {
            Some(rate) if rate > 0.0 => {
                let phases = PROBE_PHASES / rate * 1e9;
                let windows = self.fine.0 as f64 * RESOLUTION_WINDOWS;
                base.max(Nanos(phases.max(windows) as u64).min(LONGEST_TAIL))
            }
            _ => base,
        }
    }

    /// The longest tick wanted at `now`: while a tail is timed by progress under Linux (a
    /// probe, a hand-back's last stretch), the ticks come as often as while managing, so
    /// that its boundaries are timed as finely as the managed tail's (the rounds, which
    /// rotate nothing then, back off to 40–100 ms). `None`: no wish.
    pub(super) fn tick_cap(&self, now: Nanos) -> Option<Nanos> {
        let timed = self.whole.rate().is_some() || self.phase_rate.is_some();
        let linux = matches!(self.mode, Mode::Probe | Mode::HandedBack);
        (timed && linux && self.fine > Nanos::ZERO && now + self.fine >= self.measure_from())
            .then_some(self.fine)
    }

    /// Whether Linux did better: by progress when both tails counted enough phases, else
    /// by CPU share (`by_share`, which says whether it did by that measure).
    fn linux_better(
        &mut self,
        managed: Option<(f64, f64)>,
        linux: Option<(f64, f64)>,
        by_share: bool,
    ) -> bool {
        match (managed, linux) {
            (Some((m, pm)), Some((r, pr))) if pm >= MIN_PHASES && pr >= MIN_PHASES => {
                self.by_progress += 1;
                r > (1.0 + PROGRESS_MARGIN) * m
            }
            _ => {
                self.by_share += 1;
                by_share
            }
        }
    }

    /// How the guard judged, for its summary line.
    pub(super) fn judge_text(&self) -> String {
        if !self.progress_seen {
            return "no progress signal, judged by CPU share".into();
        }
        let rate = |p: Option<(f64, f64)>| p.map_or("-".to_string(), |(r, _)| format!("{r:.1}"));
        let (what, unit) = if self.blocks {
            (
                "blocks (voluntary switches: one a phase at a blocking barrier)",
                "blocks",
            )
        } else {
            ("progress", "phases")
        };
        format!(
            "judged by {what} ({} comparisons by {unit}, {} by CPU share; {} {unit}/s managed, {} under Linux, last measured)",
            self.by_progress,
            self.by_share,
            rate(self.managed_progress),
            rate(self.released_progress)
        )
    }

    /// What the events counted are, per second, for the guard's lines.
    fn unit(&self) -> &'static str {
        if self.blocks { "blocks/s" } else { "phases/s" }
    }

    /// When the measured tail of the current stint starts.
    pub(super) fn measure_from(&self) -> Nanos {
        self.until.saturating_sub(self.tail_len(self.mode))
    }

    /// A probe's measured tail, L/2 (see "A probe is half as long" in the module docs).
    fn probe_measure(&self) -> Nanos {
        Nanos(self.measure.0 / 2)
    }

    /// Ends the current stint at `now` with the program's `rate` over its tail (`None`
    /// when no thread wanted a CPU) and `fair`, the fair-share rate; `even`: the threads
    /// were held evenly pinned and progressed alike over it. Returns what to do.
    ///
    /// Long because it is the guard's state machine: one arm per mode (managing, probing
    /// Linux, trying management again), each judging the tail it measured.
    pub(super) fn advance(
        &mut self,
        now: Nanos,
        rate: Option<f64>,
        fair: f64,
        even: bool,
    ) -> Action {
        let at = now.saturating_sub(self.start).as_secs_f64();
        let progress = self.tail.take().and_then(|t| t.rate());
        if let Some((rate, _)) = std::mem::take(&mut self.whole).rate().or(progress) {
            self.phase_rate = Some(rate);
        }
        match self.mode {
            Mode::Managed => {
                self.managed_rate = rate;
                self.managed_progress = progress;
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
                self.until = now + Nanos(self.settle.0 / 2) + self.tail_len(Mode::Probe);
                Action::Release
            }
            Mode::Probe => {
                self.released_rate = rate;
                self.released_progress = progress;
                let by_share = matches!((self.managed_rate, rate),
                    (Some(m), Some(r)) if r > (1.0 + MARGIN) * m && r - m >= MIN_GAIN);
                let judged_by_progress = self.by_progress;
                let better = self.linux_better(self.managed_progress, progress, by_share);
                match (self.managed_rate, rate) {
                    (m, r) if better => {
                        self.handbacks += 1;
                        self.last = Some(if self.by_progress > judged_by_progress {
                            let (lp, mp) = (
                                progress.map_or(0.0, |p| p.0),
                                self.managed_progress.map_or(0.0, |p| p.0),
                            );
                            format!(
                                "handed back at {at:.2} s: {lp:.2} {} under Linux, {mp:.2} managed (slowest thread {:.0} % of a core under Linux, {:.0} % managed)",
                                self.unit(),
                                r.unwrap_or(0.0) * 100.0,
                                m.unwrap_or(0.0) * 100.0
                            )
                        } else {
                            format!(
                                "handed back at {at:.2} s: slowest thread {:.0} % of a core under Linux, {:.0} % managed",
                                r.unwrap_or(0.0) * 100.0,
                                m.unwrap_or(0.0) * 100.0
                            )
                        });
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
                self.released_progress = progress;
                self.mode = Mode::Trial;
                self.until = now + self.settle + self.tail_len(Mode::Trial);
                Action::Resume
            }
            Mode::Trial => {
                self.managed_rate = rate;
                let by_share = matches!((rate, self.released_rate), (Some(m), Some(r)) if m < r);
                // Linux kept the threads unless the trial does at least as well: no margin.
                let (managed, linux) = (progress, self.released_progress);
                let worse = match (managed, linux) {
                    (Some((m, pm)), Some((r, pr))) if pm >= MIN_PHASES && pr >= MIN_PHASES => {
                        self.by_progress += 1;
                        m < r
                    }
                    _ => {
                        self.by_share += 1;
                        by_share
                    }
                };
                self.managed_progress = progress;
                match (rate, self.released_rate) {
                    _ if worse => {
                        self.handed_len =
                            (self.handed_len + self.handed_len).min(LONGEST_HANDED_BACK);
                        self.mode = Mode::HandedBack;
                        self.until = now + self.handed_len;
                        Action::Release
                    }
                    _ => {
                        self.resumes += 1;
                        self.last = Some(match (progress, self.released_progress) {
                            (Some((m, pm)), Some((r, pr)))
                                if pm >= MIN_PHASES && pr >= MIN_PHASES =>
                            {
                                format!(
                                    "managing again since {at:.2} s: {m:.2} {} managed, {r:.2} under Linux",
                                    self.unit()
                                )
                            }
                            _ => format!(
                                "managing again since {at:.2} s: slowest thread {:.0} % of a core managed, {:.0} % under Linux",
                                rate.unwrap_or(0.0) * 100.0,
                                self.released_rate.unwrap_or(0.0) * 100.0
                            ),
                        });
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

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::key;
    use threadbalance_model::{CpuId, ThreadRates, ThreadState};

    const L: Nanos = Nanos::from_millis(200);
    const TICK_MS: u64 = 2;

    /// A window of two threads from `start` to `end` ms; each passes a phase boundary at
    /// every multiple of `phase_ms` (`None`: no progress signal).
    fn window(start: u64, end: u64, phase_ms: Option<f64>) -> Window {
        let threads = (1..=2)
            .map(|tid| {
                let progress = phase_ms.map(|p| {
                    let n = (end as f64 / p).floor() - (start as f64 / p).floor();
                    n / ((end - start) as f64 / 1e3)
                });
                ThreadRates {
                    key: key(1, tid),
                    util: 0.5,
                    latency: 0.5,
                    stolen: 0.0,
                    blocked: 0.0,
                    late: 0.0,
                    late_wait: 0.0,
                    lock: 0.0,
                    lock_exact: false,
                    speed: 0.5,
                    timeslices: 0,
                    voluntary: 0,
                    involuntary: 0,
                    last_cpu: CpuId(0),
                    state: ThreadState::Running,
                    appeared: false,
                    ipc: None,
                    mpki: None,
                    progress,
                }
            })
            .collect();
        Window {
            start: Nanos::from_millis(start),
            end: Nanos::from_millis(end),
            threads,
            ..Window::default()
        }
    }

    /// Feeds the guard windows of `TICK_MS` from `from` ms until its stint ends, then ends
    /// it with the slowest thread's CPU share `share` (fair share 1); the end, in ms, and
    /// what to do.
    fn stint(g: &mut Guard, from: u64, phase_ms: Option<f64>, share: f64) -> (u64, Action) {
        let mut t = from;
        while Nanos::from_millis(t) < g.until {
            g.observe(&window(t, t + TICK_MS, phase_ms));
            t += TICK_MS;
        }
        (t, g.advance(Nanos::from_millis(t), Some(share), 1.0, false))
    }

    /// Manages for the first stint at 100 ms phases and half a core, then probes Linux at
    /// `linux_phase_ms` and `linux_share`; the guard after the probe.
    fn probe(
        managed_phase_ms: Option<f64>,
        linux_phase_ms: Option<f64>,
        linux_share: f64,
    ) -> Guard {
        probe_until(managed_phase_ms, linux_phase_ms, linux_share).0
    }

    /// [`probe`], and when it ended, ms.
    fn probe_until(
        managed_phase_ms: Option<f64>,
        linux_phase_ms: Option<f64>,
        linux_share: f64,
    ) -> (Guard, u64) {
        let mut g = Guard::new(Nanos::ZERO, L);
        let (t, action) = stint(&mut g, 0, managed_phase_ms, 0.5);
        assert_eq!((action, g.mode), (Action::Release, Mode::Probe));
        if managed_phase_ms == Some(100.0) {
            // The probe measures at least two phases (here 3.5, at 100 ms).
            let tail = g.until.saturating_sub(g.measure_from());
            assert_eq!(tail, Nanos::from_millis(350));
        }
        let (t, _) = stint(&mut g, t, linux_phase_ms, linux_share);
        (g, t)
    }

    #[test]
    fn guard_by_progress_hands_back_when_linux_makes_more_progress_with_less_cpu_share() {
        // Linux: 95 ms phases (5 % more progress) for 45 % of a core against 50 % managed.
        let g = probe(Some(100.0), Some(95.0), 0.45);
        assert_eq!(g.mode, Mode::HandedBack, "{:?}", g.last);
        assert_eq!((g.by_progress, g.by_share), (1, 0));
        assert!(g.last.as_deref().unwrap().contains("phases/s under Linux"));
        assert!(
            g.judge_text()
                .starts_with("judged by progress (1 comparisons by phases")
        );
    }

    #[test]
    fn guard_by_progress_keeps_managing_within_the_margin_whatever_the_cpu_share() {
        // Linux: 1 % more progress (99 ms phases) for 60 % of a core: CPU share would
        // hand back (20 % and 10 points better), progress does not (margin 2 %).
        let g = probe(Some(100.0), Some(99.0), 0.6);
        assert_eq!(g.mode, Mode::Managed);
        assert_eq!((g.by_progress, g.handbacks), (1, 0));
        // Linux 3 % ahead: handed back.
        let g = probe(Some(100.0), Some(97.0), 0.5);
        assert_eq!((g.mode, g.handbacks), (Mode::HandedBack, 1));
    }

    #[test]
    fn guard_without_progress_judges_by_cpu_share_and_says_so() {
        let g = probe(None, None, 0.6);
        assert_eq!(g.mode, Mode::HandedBack);
        assert_eq!((g.by_progress, g.by_share), (0, 1));
        assert!(
            g.last
                .as_deref()
                .unwrap()
                .contains("% of a core under Linux")
        );
        assert_eq!(g.judge_text(), "no progress signal, judged by CPU share");
        // Within CPU share's margin (5 %): kept.
        let g = probe(None, None, 0.51);
        assert_eq!(g.mode, Mode::Managed);
        // No probe tail longer than L/2 without phases.
        let mut g = Guard::new(Nanos::ZERO, L);
        stint(&mut g, 0, None, 0.5);
        assert_eq!(g.until.saturating_sub(g.measure_from()), L / 2);
        // Progress timed by 5 ms windows: a tail of 100 windows (500 ms), for 1 %; and
        // while it is timed under Linux, ticks as fine as that.
        let mut g = Guard::new(Nanos::ZERO, L);
        g.observe(&window(0, 5, Some(100.0)));
        g.phase_rate = Some(10.0);
        assert_eq!(
            g.until.saturating_sub(g.measure_from()),
            Nanos::from_millis(500)
        );
        assert_eq!(g.tick_cap(Nanos::from_millis(600)), None);
        g.mode = Mode::Probe;
        g.until = Nanos::from_millis(2000);
        assert_eq!(g.tick_cap(Nanos::from_millis(1000)), None);
        assert_eq!(
            g.tick_cap(Nanos::from_millis(1600)),
            Some(Nanos::from_millis(5))
        );
    }

    #[test]
    fn guard_by_progress_too_few_phases_falls_back_to_cpu_share() {
        // 1 s phases: the longest tail (1 s) cannot hold two of them, so the first probe is
        // judged by CPU share.
        let g = probe(Some(1000.0), Some(500.0), 0.45);
        assert_eq!((g.by_progress, g.by_share), (0, 1));
        assert_eq!(g.mode, Mode::Managed);
        assert!(g.progress_seen);
    }

    #[test]
    fn guard_trial_by_progress_goes_back_to_linux_when_management_makes_less() {
        let (mut g, t) = probe_until(Some(100.0), Some(95.0), 0.45);
        assert_eq!(g.mode, Mode::HandedBack);
        // The hand-back stint under Linux at 95 ms phases, then a trial managed at 100 ms
        // with more CPU share: back to Linux.
        let (t, action) = stint(&mut g, t, Some(95.0), 0.45);
        assert_eq!((action, g.mode), (Action::Resume, Mode::Trial));
        let (_, action) = stint(&mut g, t, Some(100.0), 0.6);
        assert_eq!((action, g.mode), (Action::Release, Mode::HandedBack));
        assert_eq!(g.by_progress, 2);
    }

    /// [`window`] as a host that counts no progress reports it: each phase boundary a
    /// voluntary switch (a block at the barrier), its switch counts fresh unless `late`.
    fn blocks(start: u64, end: u64, phase_ms: f64, late: bool) -> Window {
        let mut w = window(start, end, Some(phase_ms));
        let secs = (end - start) as f64 / 1e3;
        for t in &mut w.threads {
            t.voluntary = (t.progress.take().unwrap_or(0.0) * secs).round() as u64;
        }
        w.waits_late = late;
        w
    }

    /// A managed stint at 100 ms phases and half a core, then a probe under Linux at
    /// `linux_phase_ms` and `linux_share`, both seen as blocks; the guard after it.
    fn probe_by_blocks(linux_phase_ms: f64, linux_share: f64, late: bool) -> Guard {
        let mut g = Guard::new(Nanos::ZERO, L);
        let mut t = 0;
        for (phase_ms, share) in [(100.0, 0.5), (linux_phase_ms, linux_share)] {
            while Nanos::from_millis(t) < g.until {
                g.observe(&blocks(t, t + TICK_MS, phase_ms, late));
                t += TICK_MS;
            }
            g.advance(Nanos::from_millis(t), Some(share), 1.0, false);
        }
        g
    }

    #[test]
    fn guard_without_progress_counts_blocks_where_switch_counts_are_fresh() {
        // Linux: 95 ms phases for 45 % of a core against 100 ms and 50 % managed. Seen as
        // blocks (one a phase at a blocking barrier), Linux makes 5 % more: handed back.
        let g = probe_by_blocks(95.0, 0.45, false);
        assert_eq!(
            (g.mode, g.by_progress, g.by_share),
            (Mode::HandedBack, 1, 0)
        );
        assert!(g.last.as_deref().unwrap().contains("blocks/s under Linux"));
        assert!(
            g.judge_text().starts_with(
                "judged by blocks (voluntary switches: one a phase at a blocking barrier) (1 comparisons by blocks"
            ),
            "{}",
            g.judge_text()
        );
        // 1 % more blocks under Linux: within the margin, kept whatever the CPU share.
        let g = probe_by_blocks(99.0, 0.6, false);
        assert_eq!((g.mode, g.by_progress), (Mode::Managed, 1));
        // Switch counts that may come late (read from `/proc`): no signal, CPU share.
        let g = probe_by_blocks(95.0, 0.45, true);
        assert_eq!((g.mode, g.by_progress, g.by_share), (Mode::Managed, 0, 1));
        assert_eq!(g.judge_text(), "no progress signal, judged by CPU share");
    }

    #[test]
    fn guard_prefers_the_hosts_progress_to_blocks() {
        // Progress counted by the host: blocks are never mixed in, even in a window
        // without progress.
        let mut g = Guard::new(Nanos::ZERO, L);
        g.observe(&window(0, 200, Some(100.0)));
        g.observe(&blocks(200, 400, 50.0, false));
        assert!(g.progress_seen && !g.blocks);
        assert!(g.judge_text().starts_with("judged by progress"));
    }
}
