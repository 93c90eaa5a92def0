//! The vocabulary of threadbalance: what a machine looks like, what a thread did, and what a
//! policy wants done. This crate does no I/O, reads no clock and holds no global state, so
//! the same values flow through the Linux host and the simulator.
//!
//! ```text
//!  Topology ──► domains at each Level (package | node | llc | core), each a CpuSet
//!  Snapshot (cumulative Samples at time t) ─┐
//!  Snapshot (cumulative Samples at time t') ┴─► Window: per-thread util/latency/blocked/speed
//!                                                       per-domain utilization, mean, CV
//!  Policy::decide(&Topology, &Window) ──► Plan { moves: [Move { thread, to, why }], next_in }
//! ```
//!
//! ```
//! use threadbalance_model::{Level, Topology};
//! let topo = Topology::synthetic("package:2 core:4 pu:2").unwrap();
//! assert_eq!(topo.cpus().len(), 16);
//! assert_eq!(topo.domains(Level::Package).len(), 2);
//! assert_eq!(topo.default_level(), Level::Package);
//! ```
#![forbid(unsafe_code)]

mod cpuset;
mod display;
mod error;
mod id;
pub mod pace;
mod plan;
mod restrict;
mod sample;
mod stats;
mod summary;
mod topology;
mod window;

#[cfg(any(test, feature = "testutil"))]
pub mod testutil;

pub use cpuset::CpuSet;
pub use display::DisplayWindow;
pub use error::ModelError;
pub use id::{CoreId, CpuId, LlcId, Nanos, NodeId, PackageId, Pid, Tid};
pub use plan::{ApplyReport, Move, MoveOutcome, Plan, Reason, SliceChange, Target};
pub use sample::{
    CpuTime, HwCounters, ProcessMemory, Sample, Snapshot, ThreadKey, ThreadState, WakeEdge,
};
pub use stats::{coefficient_of_variation, mean};
pub use summary::{
    DinoSummary, GuardMode, GuardSummary, HandoffSummary, LockTimeSource, NumaSummary,
    PbindSummary, PolicySummary, PsetsSummary, ShufflingSummary, SpeedSummary, TumblerSummary,
};
pub use topology::{Cpu, Domain, Level, Topology};
pub use window::{DomainLoad, ThreadRates, Window};
