//! The one error type of the simulator.

use std::path::PathBuf;

/// Why a simulation could not be set up.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A machine spec the model refused.
    #[error("machine {name:?}: {source}")]
    MachineSpec {
        /// The spec given.
        name: String,
        /// Why the model refused it.
        #[source]
        source: threadbalance_model::ModelError,
    },
    /// A scenario file could not be read.
    #[error("scenario {}: {source}", path.display())]
    ScenarioRead {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// An operation's duration in a scenario given wrong.
    #[error("scenario {}: group {group}: {source}", path.display())]
    ScenarioDuration {
        /// The file.
        path: PathBuf,
        /// The group of the operation.
        group: String,
        /// What is wrong.
        #[source]
        source: crate::scenario::BadDuration,
    },
    /// A workload whose applications are not well formed.
    #[error("workload {name:?}: {source}")]
    WorkloadInvalid {
        /// The name given.
        name: String,
        /// What is wrong.
        #[source]
        source: crate::workload::Invalid,
    },
    /// A scenario whose applications are not well formed.
    #[error("scenario {}: {source}", path.display())]
    ScenarioInvalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        #[source]
        source: crate::workload::Invalid,
    },
    /// A policy the registry refused to build.
    #[error("policy {name:?}: {source}")]
    PolicyBuild {
        /// The name given.
        name: String,
        /// Why.
        #[source]
        source: threadbalance_policy::PolicyError,
    },
    /// A policy could not be built.
    #[error("policy {name:?}: {why}")]
    Policy {
        /// The name given.
        name: String,
        /// What was wrong.
        why: String,
    },
    /// A Linux baseline other than `linux` or `solaris` (`--baseline`).
    #[error("unknown baseline {name:?} (known: {})", crate::Baseline::NAMES.join(", "))]
    Baseline {
        /// The name given.
        name: String,
    },
    /// A tick cost not of the form
    /// `FIXED_US[,PER_THREAD_US[,PER_MOVE_US[,PER_PLAN_US[,PER_SLICE_US]]]]` (`--tick-cost`).
    #[error(
        "tick cost {given:?}: expected FIXED_US[,PER_THREAD_US[,PER_MOVE_US[,PER_PLAN_US[,PER_SLICE_US]]]], e.g. 20,0.07"
    )]
    TickCost {
        /// The text given.
        given: String,
    },
}

/// A broken invariant of the model (`Sim::check_invariants`): a bug in the simulator, as
/// the check found it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Violation(pub String);
