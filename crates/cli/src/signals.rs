//! Every catchable signal that would kill us sets a flag the control loop reads (see
//! `threadbalance_linux::signal`): `run` forwards it to the command and restores once the
//! command has gone, `attach` stops, restores, and exits.

pub use threadbalance_linux::signal::{signal_name, take_signal as take};

/// Installs the handlers.
pub fn install() -> std::io::Result<()> {
    threadbalance_linux::signal::catch_fatal_signals()
}
