//! End-to-end tests of the `threadbalance` binary: live on this machine (real threads, real
//! affinities, read back from `/proc`), plus bad input. Every test stops what it starts and
//! leaves affinities as it found them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod bad_input;
mod bench;
mod choices;
mod cliux;
mod compare;
mod counters;
mod daemon;
mod daemon_bpf;
mod daemon_groups;
mod descend;
mod doctor;
mod errors;
mod handoff;
mod install;
mod live;
mod locktime;
mod numa;
mod readme;
mod report;
mod safety;
mod schema;
mod settings;
mod sim;
mod soak;
mod support;
mod thirdparty;
mod top;
mod topo;
mod unprivileged;
