//! Integration tests of the simulator: calibration against Linux, invariants, determinism,
//! the papers' claims in direction, and the scenario files.
//! (Helpers outside `#[test]` functions unwrap too: a failure is a test failure.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod apps;
mod calibration;
mod calibration16;
mod claims;
mod determinism;
mod dino;
mod golden;
mod handoff;
mod invariants;
mod omp;
mod plots;
mod scenarios;
mod speed_credits;
mod speed_guard;
mod speed_llc;
mod speed_many;
mod speed_peers;
mod speed_slices;
mod speed_smt;
mod speed_sparse;
mod speed_v1;
