//! Stopping cleanly on every signal that would otherwise kill us: each catchable signal
//! whose default action ends the process sets a flag, which the control loop reads as it
//! reads SIGTERM, and then restores every mask before exiting.
//!
//! ```text
//!  SIGHUP SIGINT SIGQUIT SIGUSR1 SIGUSR2 SIGALRM SIGTERM SIGSTKFLT SIGXCPU SIGXFSZ
//!  SIGVTALRM SIGPROF SIGIO SIGPWR SIGRTMIN…SIGRTMAX   ──► flag ──► loop stops, restores
//!  SIGPIPE: ignored (a closed pipe is an error from write, never a death)
//!  SIGKILL, SIGSTOP: cannot be caught ──► the journal and `threadbalance restore`
//!  SIGSEGV SIGBUS SIGILL SIGFPE SIGABRT SIGSYS SIGTRAP: a bug; left to kill ──► journal
//! ```
//!
//! Handlers are installed without `SA_RESTART`, so a sleep or poll in progress returns
//! early with `EINTR`.

use std::sync::atomic::{AtomicI32, Ordering};

/// The last terminating signal received, 0 if none.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    RECEIVED.store(sig, Ordering::SeqCst);
}

/// The catchable signals whose default action terminates the process.
pub fn fatal_signals() -> Vec<i32> {
    let mut v = vec![
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGALRM,
        libc::SIGTERM,
        libc::SIGSTKFLT,
        libc::SIGXCPU,
        libc::SIGXFSZ,
        libc::SIGVTALRM,
        libc::SIGPROF,
        libc::SIGIO,
        libc::SIGPWR,
    ];
    v.extend(libc::SIGRTMIN()..=libc::SIGRTMAX());
    v
}

/// Installs the flag-setting handler for every signal of [`fatal_signals`], and ignores
/// SIGPIPE.
pub fn catch_fatal_signals() -> std::io::Result<()> {
    for sig in fatal_signals() {
        // SAFETY: `sigaction` is given a zeroed struct with a valid handler address, an
        // empty mask and no flags; the handler only stores into an atomic, which is
        // async-signal-safe.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    // SAFETY: SIG_IGN is a valid disposition for SIGPIPE; no memory is shared.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    Ok(())
}

/// Takes the pending signal number, if one arrived since the last call.
pub fn take_signal() -> Option<i32> {
    match RECEIVED.swap(0, Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// Sends signal `sig` (any number, real-time ones included) to process `pid`.
pub fn send(pid: threadbalance_model::Pid, sig: i32) -> std::io::Result<()> {
    // SAFETY: kill takes two integers and shares no memory.
    if unsafe { libc::kill(pid.0, sig) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// The signal's name (`SIGTERM`, `SIGRTMIN+3`).
pub fn signal_name(sig: i32) -> String {
    if let Ok(s) = nix::sys::signal::Signal::try_from(sig) {
        return s.as_str().to_string();
    }
    let min = libc::SIGRTMIN();
    if (min..=libc::SIGRTMAX()).contains(&sig) {
        return format!("SIGRTMIN+{}", sig - min);
    }
    format!("signal {sig}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fatal_signals_cover_the_issue_list_and_not_the_uncatchable() {
        let v = fatal_signals();
        for s in [
            libc::SIGQUIT,
            libc::SIGUSR1,
            libc::SIGUSR2,
            libc::SIGALRM,
            libc::SIGHUP,
            libc::SIGINT,
            libc::SIGTERM,
        ] {
            assert!(v.contains(&s), "{}", signal_name(s));
        }
        assert!(!v.contains(&libc::SIGKILL) && !v.contains(&libc::SIGSTOP));
        assert!(!v.contains(&libc::SIGPIPE));
    }

    #[test]
    fn signal_name_names_realtime_signals() {
        assert_eq!(signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(signal_name(libc::SIGRTMIN() + 3), "SIGRTMIN+3");
    }
}
