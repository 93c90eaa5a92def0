//! The one error type of the model: malformed input turned into model values.

/// What was wrong with input given to the model (a CPU list, a synthetic spec, a topology).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// A CPU list such as `0-3,8` could not be parsed.
    #[error("bad CPU list {text:?}: {why}")]
    CpuList {
        /// The text as given.
        text: String,
        /// What was wrong with it.
        why: String,
    },
    /// An hwloc-style synthetic topology such as `package:4 core:16 pu:1` could not be parsed.
    #[error("bad synthetic topology {spec:?}: {why}")]
    Synthetic {
        /// The spec as given.
        spec: String,
        /// What was wrong with it.
        why: String,
    },
    /// CPUs and their ids do not make a consistent machine.
    #[error("inconsistent topology: {0}")]
    Topology(String),
    /// A level name other than `package`, `node`, `llc` or `core`.
    #[error("unknown level {0:?} (expected package, node, llc or core)")]
    Level(String),
}
