//! The Linux host of the control loop, now in the `linux` crate
//! (`threadbalance_linux::adapter`), shared by `run`, `attach` and the daemon. Re-exported
//! here under the paths the binary has always used.

pub use threadbalance_linux::adapter::{LinuxAdapter, Target, pace};

use threadbalance_linux::LinuxError;

/// The adapter's error as the binary reports it: a missing or forbidden pid is bad input
/// (exit 2, nothing has changed yet); anything else is a failure.
pub fn adapter_error(e: LinuxError) -> anyhow::Error {
    match e {
        LinuxError::NoSuchProcess { .. } | LinuxError::PermissionDenied { .. } => {
            crate::error::bad_input(e)
        }
        other => other.into(),
    }
}

/// Tells `host` to read what `policy` asks for beyond the usual counters: switch counts
/// (`Policy::reads_switches`) and the machine's stolen time (`Policy::reads_steal`).
pub fn read_what_it_asks(host: &mut LinuxAdapter, policy: &dyn threadbalance_policy::Policy) {
    if let Some(age) = policy.reads_switches() {
        host.read_switches(age);
    }
    if policy.reads_steal() {
        host.read_steal();
    }
}
