//! Whether the trace of who sets masks (`crate::setbpf`) may stay attached: what it costs
//! the machine, bounded by the machine's time in the kernel.
//!
//! The trace sits on one syscall tracepoint (`sys_enter_sched_setaffinity`). Attaching any
//! syscall tracepoint puts every task of the machine on the system-call slow
//! path, not only the tasks that call `sched_setaffinity` and not only the managed
//! program: `getppid` went from 166 to 225 ns a call while a `run` held the trace, and back
//! when it let go (a C loop of 5 million calls, 2-core VM, Linux 6.18). For the daemon,
//! which holds the trace as long as it runs, that is a tax on every system call of the
//! machine for good.
//!
//! No counter says how many system calls the machine makes, but the time they take is
//! counted: `/proc/stat`'s `system` column. A call on the slow path costs at most
//! [`SLOW_PATH`] of the cheapest call's time more, so the machine's system time bounds
//! what the trace costs it:
//!
//! ```text
//!  bound = system time over a SPAN (cores) × SLOW_PATH
//!  Open ── each SPAN: bound ≤ the tool's budget ──► Open
//!                     bound > the budget        ──► Shut: let go, never attached again
//!          in the first SPAN, read every FIRST_READS: the SPAN's allowance spent ──► Shut
//! ```
//!
//! The bound is generous (calls that take longer pay a smaller share, page faults count as
//! system time too), so the trace stays only where it surely costs less than the tool's
//! own budget: on a machine that mostly computes. On a busy server it goes within the
//! first span. `Shut` is for the rest of the process: attaching the trace again would put
//! every task back on the slow path, and letting it go costs a grace period of the
//! kernel's (about 60 ms on the 2-core VM).
//!
//! A program that switches so often that its run-time counters are dropped
//! ([`crate::sampler::weigh`]) makes at least as many system calls, and lets the trace go
//! with them, sooner than a span could say so (`crate::adapter`).
//!
//! The gate is one per process ([`gate`]): the trace is shared by every host of the process
//! (the daemon's), and its cost is the machine's, not a host's.

use std::io::Read;
use std::sync::Mutex;
use threadbalance_model::Nanos;
use threadbalance_model::pace::BUDGET;

/// How much more a system call costs on the slow path, at most, as a share of the
/// cheapest call's time: `getppid`, 166 ns a call bare and 225 ns with the trace attached
/// (+0.35; 2-core VM, Linux 6.18, two sittings).
pub const SLOW_PATH: f64 = 0.35;

/// How long the machine's system time is counted before it is judged. `/proc/stat`
/// counts in clock ticks (10 ms at the usual 100 a second): at the bar (the budget over
/// [`SLOW_PATH`], 2.3 % of a core) a 2 s span holds 4.6 of them, where a quarter second
/// would hold half of one and read 0 or 4 % of a core by chance.
pub const SPAN: Nanos = Nanos::from_secs(2);

/// Whether the trace may stay attached, as the machine's system time has said so far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Gate {
    /// No span over the budget yet.
    Open,
    /// A span over it, or a `/proc/stat` that could not be read: let go, and never
    /// attached again by this process.
    Shut(Shut),
}

/// Why the gate shut.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum Shut {
    /// The bound was over the tool's budget.
    #[error(
        "the machine spent {:.1} % of a core in the kernel over {secs:.2} s: on the system-call \
         slow path its calls could cost up to {:.1} % of a core more, over the tool's budget \
         ({:.1} %)",
        system_share * 100.0,
        bound * 100.0,
        BUDGET * 100.0
    )]
    Costly {
        /// The machine's system time over the span, in cores.
        system_share: f64,
        /// What the trace could cost it, in cores ([`SLOW_PATH`] of that).
        bound: f64,
        /// The span, in seconds.
        secs: f64,
    },
    /// `/proc/stat` could not be read or parsed: nothing bounds the cost.
    #[error("/proc/stat could not be read to bound what the trace would cost")]
    Unread,
}

/// How often the machine's system time is read during the first span: a program that
/// makes system calls all the time pays the trace's cost from its first instant, and its
/// first span spends the span's allowance long before its end (a loop of one-byte `dd`
/// reads and writes, 82 % of a core in the kernel, in about 60 ms).
pub const FIRST_READS: Nanos = Nanos::from_millis(250);

/// The gate's state: the current span and the verdict.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weigh {
    /// When the current span began, and the machine's system time then (clock ticks).
    since: Option<(Nanos, u64)>,
    /// When the last reading was taken.
    read_at: Nanos,
    /// Whether a span has been judged whole.
    judged: bool,
    gate: Gate,
}

impl Default for Weigh {
    fn default() -> Weigh {
        Weigh {
            since: None,
            read_at: Nanos::ZERO,
            judged: false,
            gate: Gate::Open,
        }
    }
}

impl Weigh {
    /// The verdict so far.
    pub fn gate(&self) -> Gate {
        self.gate
    }

    /// Whether a reading is wanted at `now`: the first one, every [`FIRST_READS`] during
    /// the first span, then once a span.
    pub fn wants(&self, now: Nanos) -> bool {
        match (self.gate, self.since) {
            (Gate::Shut(_), _) => false,
            (_, None) => true,
            (_, Some((at, _))) if self.judged => now.saturating_sub(at) >= SPAN,
            _ => now.saturating_sub(self.read_at) >= FIRST_READS,
        }
    }

    /// Takes the machine's system time read at `now`, in clock ticks of `ticks_per_sec`
    /// (`None`: it could not be read), and returns the gate after it. A span is judged at
    /// its end, or as soon as what the trace may have cost in it is more than the whole
    /// span allows (more system time can only add to that).
    pub fn read(&mut self, now: Nanos, system: Option<u64>, ticks_per_sec: u64) -> Gate {
        if matches!(self.gate, Gate::Shut(_)) {
            return self.gate;
        }
        let Some(ticks) = system else {
            self.gate = Gate::Shut(Shut::Unread);
            return self.gate;
        };
        self.read_at = now;
        let Some((at, before)) = self.since else {
            self.since = Some((now, ticks));
            return self.gate;
        };
        let span = now.saturating_sub(at);
        let system_secs = ticks.saturating_sub(before) as f64 / ticks_per_sec.max(1) as f64;
        let spent = system_secs * SLOW_PATH > BUDGET * SPAN.as_secs_f64();
        if span < SPAN && !spent {
            return self.gate;
        }
        let secs = span.as_secs_f64().max(f64::MIN_POSITIVE);
        let system_share = system_secs / secs;
        let bound = system_share * SLOW_PATH;
        // A whole span is judged by its rate; one cut short, by the allowance it spent.
        let costly = if span >= SPAN { bound > BUDGET } else { spent };
        self.gate = if !costly {
            Gate::Open
        } else {
            Gate::Shut(Shut::Costly {
                system_share,
                bound,
                secs,
            })
        };
        self.since = Some((now, ticks));
        self.judged = true;
        self.gate
    }
}

/// The process's gate and the instant its clock counts from.
static GATE: Mutex<Option<(std::time::Instant, Weigh)>> = Mutex::new(None);

/// Whether [`hold_open`] was called.
static HELD_OPEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Keeps this process's gate open whatever the machine's time in the kernel (the hidden
/// `--keep-trace`): for tests of the trace's own logic, which a test machine busy with
/// other tests would otherwise let go.
pub fn hold_open() {
    HELD_OPEN.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The process's gate now: `/proc/stat` is read when a span has passed since the last
/// reading (at most every [`SPAN`], whichever host asks), with `ticks_per_sec` clock ticks
/// a second.
pub fn gate(ticks_per_sec: u64) -> Gate {
    if HELD_OPEN.load(std::sync::atomic::Ordering::Relaxed) {
        return Gate::Open;
    }
    let Ok(mut slot) = GATE.lock() else {
        // A host panicked while it held the gate: nothing bounds the cost.
        return Gate::Shut(Shut::Unread);
    };
    let (epoch, weigh) = slot.get_or_insert_with(|| (std::time::Instant::now(), Weigh::default()));
    let now = Nanos(u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX));
    if weigh.wants(now) {
        weigh.read(now, system_ticks(), ticks_per_sec);
    }
    weigh.gate()
}

/// Whether [`shut_news`] has given the verdict out.
static TOLD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The verdict that shut this process's gate, the first time it is asked for after the
/// gate shut, `None` before and after: the daemon logs it once, whichever host saw it.
pub fn shut_news() -> Option<Shut> {
    let shut = match GATE.lock().ok()?.as_ref()?.1.gate() {
        Gate::Shut(why) => why,
        Gate::Open => return None,
    };
    (!TOLD.swap(true, std::sync::atomic::Ordering::Relaxed)).then_some(shut)
}

/// The machine's system time, in clock ticks, from the first line of `/proc/stat`.
fn system_ticks() -> Option<u64> {
    // The `cpu` line comes first: ten numbers of at most 20 digits, under 256 bytes.
    let mut buf = [0u8; 512];
    let n = std::fs::File::open("/proc/stat")
        .and_then(|mut f| f.read(&mut buf))
        .ok()?;
    crate::parse::parse_system_ticks(&buf[..n]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HZ: u64 = 100;

    /// Readings every 100 ms of a machine spending `share` of a core in the kernel, from
    /// `from` ms to `to` ms (whole clock ticks, as `/proc/stat` counts); the gate after each.
    fn feed(w: &mut Weigh, share: f64, from: u64, to: u64, ticks: &mut f64) -> Vec<Gate> {
        (from..=to)
            .step_by(100)
            .map(|ms| {
                let g = w.read(Nanos::from_millis(ms), Some(ticks.floor() as u64), HZ);
                *ticks += share * HZ as f64 * 0.1;
                g
            })
            .collect()
    }

    #[test]
    fn a_machine_that_mostly_computes_keeps_it() {
        // 1 % of a core in the kernel (the idle 2-core VM): bound 0.35 %, within 0.8 %.
        let mut w = Weigh::default();
        let mut ticks = 1_000.0;
        let gates = feed(&mut w, 0.01, 0, 10_000, &mut ticks);
        assert!(gates.iter().all(|g| *g == Gate::Open), "{gates:?}");
        // Read once a span.
        assert!(!w.wants(Nanos::from_millis(10_100)));
        assert!(w.wants(Nanos::from_millis(12_000)));
    }

    #[test]
    fn system_calls_that_could_cost_more_than_the_budget_shut_it_for_good() {
        // Threads yielding in a loop: a whole core in the kernel.
        let mut w = Weigh::default();
        let mut ticks = 0.0;
        let gates = feed(&mut w, 1.0, 0, 2_000, &mut ticks);
        // Its allowance (16 ms of cost over a span) is spent within the first 100 ms.
        assert_eq!(gates[0], Gate::Open);
        let Gate::Shut(Shut::Costly {
            system_share,
            bound,
            secs,
        }) = gates[1]
        else {
            panic!("{gates:?}");
        };
        assert!((system_share - 1.0).abs() < 0.01, "{system_share}");
        assert!((bound - 0.35).abs() < 0.01, "{bound}");
        // Quiet again: still shut, and nothing more is read.
        assert!(!w.wants(Nanos::from_secs(10)));
        let later = feed(&mut w, 0.0, 2_100, 9_000, &mut ticks);
        assert!(
            later.iter().all(|g| matches!(g, Gate::Shut(_))),
            "{later:?}"
        );
        let line = Shut::Costly {
            system_share,
            bound,
            secs,
        }
        .to_string();
        assert!(
            line.starts_with("the machine spent 100.0 % of a core in the kernel over 0.10 s"),
            "{line}"
        );
        assert!(line.ends_with("over the tool's budget (0.8 %)"), "{line}");
    }

    #[test]
    fn a_first_span_that_spends_its_allowance_is_judged_at_once() {
        // One-byte `dd` reads and writes: 82 % of a core in the kernel. Read every 250 ms
        // in the first span: shut at the first reading after the start, not at 2 s.
        let mut w = Weigh::default();
        assert!(w.wants(Nanos::ZERO));
        assert_eq!(w.read(Nanos::ZERO, Some(0), HZ), Gate::Open);
        assert!(!w.wants(Nanos::from_millis(249)));
        assert!(w.wants(Nanos::from_millis(250)));
        let gate = w.read(Nanos::from_millis(250), Some(20), HZ);
        let Gate::Shut(Shut::Costly { system_share, .. }) = gate else {
            panic!("{gate:?}");
        };
        assert!((system_share - 0.8).abs() < 0.01, "{system_share}");
        // 4 ticks (40 ms of system time, 14 ms of tax at most) in the first 250 ms are
        // within the span's allowance (16 ms): not judged yet.
        let mut w = Weigh::default();
        w.read(Nanos::ZERO, Some(0), HZ);
        assert_eq!(w.read(Nanos::from_millis(250), Some(4), HZ), Gate::Open);
        assert!(
            w.wants(Nanos::from_millis(500)),
            "still reading every 250 ms"
        );
    }

    #[test]
    fn the_bar_is_the_budget_over_the_slow_path_share() {
        // 2 % of a core: bound 0.7 %, kept; 3 %: 1.05 %, let go.
        let mut w = Weigh::default();
        let mut ticks = 0.0;
        let gates = feed(&mut w, 0.02, 0, 6_000, &mut ticks);
        assert!(gates.iter().all(|g| *g == Gate::Open), "{gates:?}");
        let gates = feed(&mut w, 0.03, 6_100, 12_000, &mut ticks);
        assert!(
            matches!(gates.last(), Some(Gate::Shut(Shut::Costly { .. }))),
            "{gates:?}"
        );
    }

    #[test]
    fn an_unreadable_stat_shuts_it() {
        let mut w = Weigh::default();
        assert_eq!(w.read(Nanos::ZERO, None, HZ), Gate::Shut(Shut::Unread));
        assert_eq!(
            w.read(Nanos::from_secs(3), Some(5), HZ),
            Gate::Shut(Shut::Unread)
        );
    }

    #[test]
    fn this_machine_is_read() {
        assert!(system_ticks().is_some());
        // The process's gate (other tests of this binary may have read it first).
        assert_ne!(gate(HZ), Gate::Shut(Shut::Unread));
    }
}
