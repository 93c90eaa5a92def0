//! Puts the git commit the binary is built from into `--version`:
//! `threadbalance 0.1.0 (commit 1a2b3c4)`.
//!
//! Outside a git checkout (a source tarball, `cargo install` from a package), or without
//! git, the version is the bare package version, silently. The script reruns when the
//! checkout's `HEAD` or the branch it names moves, not on every build.

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git ARGS` run in this crate's folder: its trimmed output, or `None` on any failure.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

/// Asks cargo to rerun this script when the git file `name` (`HEAD`, `refs/heads/main`)
/// changes, if it exists (a missing file would make cargo rerun it on every build).
fn watch(dir: &Path, name: &str) {
    let Some(path) = git(dir, &["rev-parse", "--git-path", name]) else {
        return;
    };
    let path = dir.join(PathBuf::from(path));
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    // Only a checkout that holds this crate: not an unrelated repository around it.
    let commit = git(&dir, &["ls-files", "--error-unmatch", "Cargo.toml"])
        .and_then(|_| git(&dir, &["rev-parse", "--short", "HEAD"]))
        .filter(|c| c.chars().all(|ch| ch.is_ascii_hexdigit()));
    if commit.is_some() {
        watch(&dir, "HEAD");
        if let Some(branch) = git(&dir, &["symbolic-ref", "-q", "HEAD"]) {
            watch(&dir, &branch);
        }
        watch(&dir, "packed-refs");
    }
    let full = match commit {
        Some(c) => format!("{version} (commit {c})"),
        None => version,
    };
    println!("cargo:rustc-env=THREADBALANCE_VERSION={full}");
}
