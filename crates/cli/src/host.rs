//! The Linux host of the control loop, now in the `linux` crate
//! (`threadbalance_linux::adapter`), shared by `run`, `attach` and the daemon. Re-exported
//! here under the paths the binary has always used.

pub use threadbalance_linux::adapter::{LinuxAdapter, Target, pace};

use crate::input_error;
use threadbalance_linux::LinuxError;

/// The adapter's error as the binary reports it: a missing or forbidden pid is bad input
/// (exit 2, nothing has changed yet); anything else is a failure.
pub fn adapter_error(e: LinuxError) -> anyhow::Error {
    match e {
        LinuxError::NoSuchProcess { .. } | LinuxError::PermissionDenied { .. } => {
            input_error(e.to_string())
        }
        other => other.into(),
    }
}
