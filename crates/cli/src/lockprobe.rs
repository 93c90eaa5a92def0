//! The futex probe, now in the `linux` crate (`threadbalance_linux::adapter::lockprobe`),
//! re-exported under the path the binary has always used.

pub use threadbalance_linux::adapter::lockprobe::{LockProbe, LockReport};
