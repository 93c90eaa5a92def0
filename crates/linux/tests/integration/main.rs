//! Integration tests of threadbalance-linux, one binary:
//!
//! - `topo`: `read_topology` on every fixture tree under `fixtures/topo`, and on edge trees
//!   made in temporary directories (no node directory, no caches, malformed files);
//! - `procfs`: `read_threads`, `read_process_memory` and the sampler on `fixtures/proc`;
//! - `live`: the sampler and the actuator on this machine's own processes. They start
//!   their own threads and child processes, stop them, and leave every mask as it was.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod futex_probe;
mod live;
mod procfs;
mod topo;
mod util;
