//! Integration tests of the daemon's building blocks on fixture files: one config file
//! per rejection (`fixtures/daemon/`), the packaged example (`packaging/`), `/proc` trees
//! (`fixtures/proc/daemon-*`), and the readers on this machine (`live`, reading only).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod config_fixtures;
mod control_socket;
mod example;
mod live;
mod metrics_scrape;
mod packaging;
mod proc_fixtures;
mod untrusted_files;

/// The repository's root, where `fixtures/` and `packaging/` are.
pub fn repo(rel: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
}
