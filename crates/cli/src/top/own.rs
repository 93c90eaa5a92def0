//! `top --pid PID`: manages PID itself, with the loop and adapter `attach` uses, and shows
//! it.
//!
//! ```text
//!  checks as attach (policy, level, pid, permission, lock; journals of dead instances
//!  replayed) ─► take the terminal ─► threadbalance_manage::manage(TopShell) {
//!      tick: sample (every half display window, the snapshot kept), decide, apply
//!            (moves counted per thread) ─► a snapshot kept: view over the display
//!            window, drawn (≤ 2/s)
//!      wait_until(deadline): the adapter's wait in slices of 100 ms, keys read between
//!      q / SIGTERM / SIGINT ─► stop    PID exits ─► stop
//!  } ─► restore every mask changed ─► give the terminal back ─► one line: what was restored
//! ```
//!
//! Exit status: 0 once everything is restored (after `q`, a signal, or the process's
//! exit), 1 if a mask could not be restored or the loop failed, 2 for bad input (nothing
//! changed).

use super::gather::{MoveCounts, view_of};
use super::{KEY_POLL, TopArgs, Ui};
use crate::ManageArgs;
use crate::{input_error, manage};
use anyhow::Result;
use std::cell::RefCell;
use std::time::{Duration, Instant};
use threadbalance_linux::LinuxAdapter;
use threadbalance_linux::signal;
use threadbalance_manage::{Ended, LoopError, LoopHost, OnSignal};
use threadbalance_model::{
    ApplyReport, DisplayWindow, Level, Nanos, Pid, Plan, Snapshot, Topology, Window,
};
use threadbalance_policy::Host;

/// The fastest the display follows the ticks.
const DRAW_EVERY: Duration = Duration::from_millis(500);

/// How often a snapshot is kept for a display window of `window_ms`: every half window
/// (so one about a window old is always kept), but no faster than 20 a second and no
/// slower than [`DRAW_EVERY`].
fn keep_every(window_ms: u64) -> Nanos {
    Nanos::from_millis((window_ms / 2).clamp(50, DRAW_EVERY.as_millis() as u64))
}

/// What the loop's parts share: the terminal, the moves, and a signal seen while waiting.
struct Shared {
    ui: Ui,
    moves: MoveCounts,
    signal: Option<i32>,
    drawn: Option<Instant>,
    /// The snapshots kept for the display window.
    display: DisplayWindow,
    /// How often a snapshot is kept.
    keep_every: Nanos,
    /// A snapshot was kept since the last draw.
    kept: bool,
    title: String,
    topo: Topology,
    level: Level,
}

impl Shared {
    /// Keeps `snapshot` for the display window when one is due.
    fn keep(&mut self, snapshot: &Snapshot) {
        let due = self
            .display
            .latest_at()
            .is_none_or(|at| snapshot.at.saturating_sub(at) >= self.keep_every);
        if due {
            self.display.push(snapshot.clone());
            if let Some((at, busy)) = super::gather::cpu_reading() {
                self.display.push_cpu_busy(at, busy);
            }
            self.kept = true;
        }
    }

    /// After a tick: the view over the display window, drawn when a snapshot was kept
    /// since the last draw, unless the display is frozen or was drawn less than
    /// [`DRAW_EVERY`] ago.
    fn after_tick(&mut self, window: &Window, vanished: bool) {
        if vanished {
            self.moves.keep_only(window);
        }
        if !self.kept
            || self.ui.screen.paused
            || self.drawn.is_some_and(|t| t.elapsed() < DRAW_EVERY)
        {
            return;
        }
        self.kept = false;
        let shown = self.display.window().unwrap_or_default();
        let view = view_of(&self.topo, self.level, [(&shown, &self.moves)])
            .with_cpu_busy(&self.display.cpu_busy());
        self.ui.screen.title = if view.window_ms == 0 {
            format!("{} · measuring the first window", self.title)
        } else {
            format!("{} · window {} ms", self.title, view.window_ms)
        };
        self.ui.screen.view = view;
        self.ui.draw();
        self.drawn = Some(Instant::now());
    }
}

/// `threadbalance top --pid PID`.
pub fn run(args: &TopArgs, pid: i32, color: bool) -> Result<u8> {
    if pid <= 0 {
        return Err(input_error(format!("--pid {pid}: not a process id")));
    }
    let pid = Pid(pid);
    let manage_args = ManageArgs {
        settings: args.settings.clone(),
        json: None,
        report: None,
        verbose: false,
        cpu_budget: None,
        state_dir: args.state_dir.clone(),
        counters: args.counters,
        fake_counters: false,
        keep_trace: false,
        fault_panic_after: None,
    };
    let (mut p, _lock, mut host) = manage::open_attached(&manage_args, "top", pid, true)?;
    let dry_run = args.settings.dry_run;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let title = format!(
        "threadbalance top · pid {pid} ({}) · {} at {}{}",
        comm.trim_end(),
        p.kind,
        p.level,
        if dry_run { " · dry run" } else { "" }
    );
    let screen = super::Screen {
        title: title.clone(),
        color,
        ..super::Screen::default()
    };
    // Nothing has been changed yet: a terminal that cannot be taken is an error, and the
    // adapter restores nothing.
    let ui = Ui::enter(screen)?;
    let shared = RefCell::new(Shared {
        ui,
        moves: MoveCounts::default(),
        signal: None,
        drawn: None,
        display: DisplayWindow::new(Nanos::from_millis(args.window_ms)),
        keep_every: keep_every(args.window_ms),
        kept: false,
        title,
        topo: p.topo.clone(),
        level: p.level,
    });
    shared.borrow_mut().ui.draw();
    let (restored, looped) = {
        let mut shell = TopShell {
            host: &mut host,
            shared: &shared,
            dry_run,
        };
        let mut take = || {
            let mut s = shared.borrow_mut();
            signal::take_signal()
                .or(s.signal.take())
                .or(s.ui.quit.then_some(QUIT))
        };
        threadbalance_manage::manage(
            &mut shell,
            &p.topo,
            p.policy.as_mut(),
            OnSignal::Stop,
            &mut take,
            &mut |window, tick| shared.borrow_mut().after_tick(window, tick.vanished > 0),
        )
    };
    // The screen goes first, so that what follows is read on the terminal as it was.
    drop(shared);
    let ended = match &looped {
        Ok(Ended::Signal(QUIT)) => "quit".to_string(),
        Ok(Ended::Signal(sig)) => format!("interrupted by {}", signal::signal_name(*sig)),
        Ok(Ended::TargetExited) => format!("process {pid} exited"),
        Err(e) => format!("stopped: {e}"),
    };
    errln!(
        "threadbalance top: pid {pid}: {ended}; {}",
        crate::recover::describe(&restored)
    );
    for line in crate::recover::kept_lines(&restored) {
        errln!("threadbalance top: {line}");
    }
    if restored.failures().next().is_some() {
        return Ok(1);
    }
    match looped {
        Ok(_) => Ok(0),
        Err(LoopError::Host(e)) => Err(e.into()),
        Err(e @ LoopError::Panic(_)) => Err(e.into()),
    }
}

/// The "signal" a quit key stands for: no real signal is 0.
const QUIT: i32 = 0;

/// The adapter as the shared loop drives it, with the keys read while it waits and the
/// moves counted per thread.
struct TopShell<'a> {
    host: &'a mut LinuxAdapter,
    shared: &'a RefCell<Shared>,
    dry_run: bool,
}

impl Host for TopShell<'_> {
    type Error = threadbalance_linux::LinuxError;

    fn now(&self) -> Nanos {
        self.host.now()
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), Self::Error> {
        self.host.sample(into)?;
        self.shared.borrow_mut().keep(into);
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        let report = self.host.apply(plan);
        if !self.dry_run {
            self.shared.borrow_mut().moves.record(&plan.moves);
        }
        report
    }

    /// The adapter's pacing: `top` keeps to the CPU budget as `attach` does.
    fn earliest(&mut self, due: Nanos) -> Nanos {
        self.host.earliest(due)
    }
}

impl LoopHost for TopShell<'_> {
    type Restored = threadbalance_linux::ledger::RestoreReport;

    fn target_exited(&mut self) -> bool {
        self.host.target_exited()
    }

    /// The adapter's wait, in slices of at most [`KEY_POLL`], reading keys between them;
    /// returns early on a quit key, a signal or the target's exit.
    fn wait_until(&mut self, deadline: Nanos) {
        let slice = Nanos(KEY_POLL.as_nanos() as u64);
        loop {
            let now = self.host.now();
            self.host.wait_until(deadline.min(now + slice));
            let mut s = self.shared.borrow_mut();
            s.ui.keys(Duration::ZERO);
            if s.signal.is_none() {
                s.signal = signal::take_signal();
            }
            if s.ui.quit
                || s.signal.is_some()
                || self.host.target_exited()
                || self.host.now() >= deadline
            {
                return;
            }
        }
    }

    fn forward(&mut self, sig: i32) {
        self.host.forward(sig);
    }

    fn restore_all(&mut self) -> Self::Restored {
        self.host.restore_all()
    }
}
