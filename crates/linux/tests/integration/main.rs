//! Integration tests of threadbalance-linux, one binary:
//!
//! - `topo`: `read_topology` on every fixture tree under `fixtures/topo`, and on edge trees
//!   made in temporary directories (no node directory, no caches, malformed files);
//! - `topo_machines`: the sysfs of real kernels and architectures (issue 11): NUL-ended
//!   files, no `online` lists, `physical_package_id` -1, masks only, Bulldozer modules,
//!   dies and clusters, distance rows that do not match the node list, FIFOs;
//! - `procfs`: `read_threads`, `read_process_memory` and the sampler on `fixtures/proc`;
//! - `idle`: the sampler's idle back-off on a made tree, and start-time checks through
//!   kept files on this process's own threads;
//! - `sched_counters`: the BPF run-time counters' object matches its hash (always); with
//!   the `bpf` feature, they agree with `/proc` on the same busy threads;
//! - `setter_trace`: the trace of who sets masks, its object's hash (always) and, with
//!   the `bpf` feature, its records of this process's own sets;
//! - `live`: the sampler and the actuator on this machine's own processes. They start
//!   their own threads and child processes, stop them, and leave every mask as it was.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod futex_probe;
mod idle;
mod live;
mod procfs;
mod safety;
mod sched_counters;
mod setter_trace;
mod topo;
mod topo_machines;
mod util;
