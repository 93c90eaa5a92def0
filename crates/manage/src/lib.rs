//! The control loop of `threadbalance run`, `attach` and `daemon`, apart from any
//! operating system: what happens in which order, how a stop is decided, and that masks
//! are restored however the loop ends.
//!
//! ```text
//!  manage(host, …) ─► loop {
//!      host.housekeeping()                       (run: reap the command's orphans)
//!      signal?  forward: host.forward(sig)  │  otherwise: stop with it
//!      host.target_exited()? stop
//!      Ticker::tick_if_due: sample ─► window ─► policy.decide ─► host.apply
//!          ─► next = host.earliest(now + max(next_in, MIN_TICK))   (pacing) ─► on_tick
//!      host.wait_until(ticker.next())            (wakes early on exit or a signal)
//!  } ─► host.restore_all()   also after an error or a panic (caught, reported)
//! ```
//!
//! A host is the engine's [`Host`] (clock, sample, apply) plus [`LoopHost`]: whether the
//! target has exited, a wait that wakes when it does, forwarding a signal, restoring. The
//! Linux host (`threadbalance_linux::adapter::LinuxAdapter`) and the unsafe system calls it
//! needs live in the `linux` crate, which depends on this one; signals come in through a function the caller passes, so this crate does no I/O
//! of its own and its tests drive the loop with a host made of plain values.
//!
//! [`Ticker::tick`] is the one step around a tick: the simulator's loops
//! (`threadbalance_sim::run_policy`, `threadbalance_sim::apps::run_per_app`) take it too,
//! with their simulated host pacing its ticks as the Linux host paces live ones.
//!
//! The daemon manages many processes from one thread, so it does not call [`control_loop`]:
//! it keeps one [`Ticker`] per group of processes, the same step the loop takes, over a
//! [`joined::Joined`] host that makes the group's processes one.
//!
//! ```
//! use threadbalance_manage::Ticker;
//! use threadbalance_model::Nanos;
//! let t = Ticker::new(Nanos::from_secs(5));
//! // A fresh ticker is due at once: the first tick places threads from a zero-length window.
//! assert_eq!(t.next(), Nanos::from_secs(5));
//! ```

pub mod joined;

use std::fmt;
use threadbalance_model::{Nanos, Topology, Window};
use threadbalance_policy::{Engine, Host, Policy, TickReport};

/// The shortest pause between two ticks, whatever a policy asks.
pub const MIN_TICK: Nanos = Nanos::from_millis(1);

/// What the loop needs of a host beyond the engine's [`Host`].
pub trait LoopHost: Host {
    /// What restoring reports.
    type Restored;

    /// Whether the managed target has exited.
    fn target_exited(&mut self) -> bool;

    /// Sleeps until `deadline` on the host's clock, or less when the target exits or a
    /// signal arrives.
    fn wait_until(&mut self, deadline: Nanos);

    /// Sends signal `sig` to the target (`run` passes SIGINT and SIGTERM on to its command).
    fn forward(&mut self, sig: i32);

    /// Restores every mask changed.
    fn restore_all(&mut self) -> Self::Restored;

    /// Work done at every turn of the loop (`run` reaps its command's orphans).
    fn housekeeping(&mut self) {}
}

/// One policy's ticks: its engine and when it is next due.
#[derive(Debug)]
pub struct Ticker {
    engine: Engine,
    next: Nanos,
}

impl Ticker {
    /// A ticker due at `now`.
    pub fn new(now: Nanos) -> Ticker {
        Ticker {
            engine: Engine::new(),
            next: now,
        }
    }

    /// When the next tick is due.
    pub fn next(&self) -> Nanos {
        self.next
    }

    /// The window of the last tick.
    pub fn window(&self) -> &Window {
        self.engine.window()
    }

    /// The snapshot of the last tick (see [`Engine::latest`]).
    pub fn latest(&self) -> &threadbalance_model::Snapshot {
        self.engine.latest()
    }

    /// Ticks if due at `now` ([`Ticker::tick`]); `Ok(None)` when not due.
    pub fn tick_if_due<H: Host>(
        &mut self,
        host: &mut H,
        topo: &Topology,
        policy: &mut dyn Policy,
        now: Nanos,
    ) -> Result<Option<TickReport>, H::Error> {
        if now < self.next {
            return Ok(None);
        }
        self.tick(host, topo, policy, now).map(Some)
    }

    /// The one step of every loop around a tick, live or simulated: samples, decides and
    /// applies at `now` ([`Engine::tick`]), then sets the next due time to what the policy
    /// asked, at least [`MIN_TICK`] later, and later still while the host's CPU budget
    /// holds it back ([`Host::earliest`]: the pacing).
    pub fn tick<H: Host>(
        &mut self,
        host: &mut H,
        topo: &Topology,
        policy: &mut dyn Policy,
        now: Nanos,
    ) -> Result<TickReport, H::Error> {
        let tick = self.engine.tick(host, topo, policy)?;
        self.next = host.earliest(now + tick.next_in.max(MIN_TICK));
        Ok(tick)
    }
}

/// Why the loop ended without an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The target exited.
    TargetExited,
    /// A signal arrived that stops the loop (it was not forwarded).
    Signal(i32),
}

/// Why the loop ended with an error.
#[derive(Debug)]
pub enum LoopError<E> {
    /// The host failed while the target was still running.
    Host(E),
    /// The loop panicked (a bug): the message.
    Panic(String),
}

impl<E: fmt::Display> fmt::Display for LoopError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoopError::Host(e) => write!(f, "{e}"),
            LoopError::Panic(what) => write!(f, "internal error (panic: {what})"),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for LoopError<E> {}

/// How signals are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// Pass them to the target and go on (`run`: the command decides, the loop ends when it
    /// exits).
    Forward,
    /// Stop (`attach`).
    Stop,
}

/// Ticks until the target exits or, with [`OnSignal::Stop`], a signal arrives.
/// `take_signal` returns the signal received since the last call, if any; `on_tick` sees
/// each tick with its window (summaries, verbose notes). A host error once the target has
/// exited is the end of the target, not an error.
pub fn control_loop<H: LoopHost>(
    host: &mut H,
    topo: &Topology,
    policy: &mut dyn Policy,
    on_signal: OnSignal,
    take_signal: &mut dyn FnMut() -> Option<i32>,
    on_tick: &mut dyn FnMut(&Window, &TickReport),
) -> Result<Ended, LoopError<H::Error>> {
    let mut ticker = Ticker::new(host.now());
    loop {
        host.housekeeping();
        if let Some(sig) = take_signal() {
            match on_signal {
                OnSignal::Forward => host.forward(sig),
                OnSignal::Stop => return Ok(Ended::Signal(sig)),
            }
        }
        if host.target_exited() {
            return Ok(Ended::TargetExited);
        }
        let now = host.now();
        match ticker.tick_if_due(host, topo, policy, now) {
            Ok(Some(tick)) => on_tick(ticker.window(), &tick),
            Ok(None) => {}
            Err(_) if host.target_exited() => return Ok(Ended::TargetExited),
            Err(e) => return Err(LoopError::Host(e)),
        }
        host.wait_until(ticker.next());
    }
}

/// [`control_loop`], then [`LoopHost::restore_all`] whatever happened: an error, or a
/// panic in the loop or in `on_tick` (caught and returned as [`LoopError::Panic`]), never
/// leaves a thread pinned.
pub fn manage<H: LoopHost>(
    host: &mut H,
    topo: &Topology,
    policy: &mut dyn Policy,
    on_signal: OnSignal,
    take_signal: &mut dyn FnMut() -> Option<i32>,
    on_tick: &mut dyn FnMut(&Window, &TickReport),
) -> (H::Restored, Result<Ended, LoopError<H::Error>>) {
    let looped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        control_loop(host, topo, policy, on_signal, take_signal, on_tick)
    }))
    .unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(LoopError::Panic(what))
    });
    (host.restore_all(), looped)
}

#[cfg(test)]
mod tests;
