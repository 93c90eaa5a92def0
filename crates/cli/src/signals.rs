//! SIGINT, SIGTERM and SIGHUP set a flag; the control loop reads it. Handlers are installed
//! without `SA_RESTART`, so a sleep or poll in progress returns early with `EINTR`.

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use std::sync::atomic::{AtomicI32, Ordering};

/// The last terminating signal received, 0 if none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP.
pub fn install() -> nix::Result<()> {
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(())
}

/// Takes the pending signal, if one arrived since the last call.
pub fn take() -> Option<Signal> {
    let s = RECEIVED.swap(0, Ordering::SeqCst);
    if s == 0 {
        None
    } else {
        Signal::try_from(s).ok()
    }
}
