//! Install anywhere: `cargo install` into a temporary root, then the installed binary run
//! from a directory that is not the repository, with a scenario it finds by name (built in,
//! not read from `./scenarios`); the manual page and the completions.
//!
//! The install reuses the build's own target directory (`CARGO_TARGET_DIR`, the directory
//! the binary under test was built into), so it compiles only what the release profile has
//! not built yet there: a few minutes the first time on a 2-core machine, seconds after.
//! CI builds the release profile before the tests (`.ci/run`), so there it is a copy.

use crate::support::{bin, run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target directory the binary under test was built into (`<target>/debug/threadbalance`).
fn target_dir() -> PathBuf {
    let me = bin();
    me.parent().and_then(Path::parent).unwrap().to_path_buf()
}

#[test]
fn install_into_a_temp_root_then_a_named_scenario_runs_from_elsewhere() {
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .current_dir(&repo)
        .env("CARGO_TARGET_DIR", target_dir())
        .args([
            "install",
            "--locked",
            "--offline",
            "--quiet",
            "--path",
            "crates/cli",
            "--root",
        ])
        .arg(root.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo install failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = root.path().join("bin/threadbalance");
    assert!(installed.is_file());
    // No `scenarios/` folder here: the scenario comes from inside the binary.
    assert!(!elsewhere.path().join("scenarios").exists());
    let out = Command::new(&installed)
        .current_dir(elsewhere.path())
        .args([
            "sim",
            "--machine",
            "tigerton-4x4",
            "--workload",
            "two-apps",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.to_string().contains("two-apps"), "{v}");
    // The installed binary carries its manual page too.
    let man = Command::new(&installed).arg("man").output().unwrap();
    assert!(String::from_utf8_lossy(&man.stdout).contains(".TH threadbalance 1"));
}

#[test]
fn sim_a_scenario_file_in_the_folder_given_wins_over_the_built_in_one() {
    let dir = tempfile::tempdir().unwrap();
    // A `two-apps` of one group of one thread: not the built-in scenario of that name.
    std::fs::write(
        dir.path().join("two-apps.toml"),
        "name = \"my-two-apps\"\n[[app]]\nname = \"a\"\n[[app.group]]\nname = \"g\"\nthreads = 1\niterations = 10\nops = [ { op = \"compute\", us = 50 } ]\n",
    )
    .unwrap();
    let out = run(&[
        "sim",
        "--machine",
        "tigerton-4x4",
        "--workload",
        "two-apps",
        "--scenarios",
        dir.path().to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("my-two-apps"));
}

#[test]
fn man_prints_a_roff_page_naming_every_command() {
    let out = run(&["man"]);
    assert_eq!(out.status.code(), Some(0));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH threadbalance 1"), "{page}");
    for cmd in [
        "run",
        "attach",
        "compare",
        "demo",
        "sim",
        "completions",
        "top",
    ] {
        assert!(
            page.contains(&format!("threadbalance\\-{cmd}")),
            "{cmd}: {page}"
        );
    }
}

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    for (shell, marker) in [
        ("bash", "_threadbalance()"),
        ("zsh", "#compdef threadbalance"),
        ("fish", "complete -c threadbalance"),
    ] {
        let out = run(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = String::from_utf8_lossy(&out.stdout);
        assert!(script.contains(marker), "{shell}: {script}");
        assert!(script.contains("compare"), "{shell}");
        // `top` and its options.
        assert!(script.contains("top") && script.contains("once"), "{shell}");
    }
    let out = run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}
