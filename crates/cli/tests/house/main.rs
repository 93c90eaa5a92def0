//! Checks on the workspace's source as a whole: no import circle inside a crate, and no
//! long production function without a reason in its doc.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod circles;
mod long_fns;
mod source;
