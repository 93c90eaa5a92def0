//! The one error type of the simulator.

use std::path::PathBuf;

/// Why a simulation could not be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The machine name or spec is unknown or malformed.
    #[error("machine {name:?}: {why}")]
    Machine {
        /// The name or spec given.
        name: String,
        /// What was wrong.
        why: String,
    },
    /// The workload name, its parameters or its scenario are wrong.
    #[error("workload {name:?}: {why}")]
    Workload {
        /// The name given.
        name: String,
        /// What was wrong.
        why: String,
    },
    /// A scenario file could not be read or parsed.
    #[error("scenario {}: {why}", path.display())]
    Scenario {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
    /// A policy could not be built.
    #[error("policy {name:?}: {why}")]
    Policy {
        /// The name given.
        name: String,
        /// What was wrong.
        why: String,
    },
}
