//! Install anywhere: `cargo install` into a temporary root, then the installed binary run
//! from a directory that is not the repository, with a scenario it finds by name (built in,
//! not read from `./scenarios`); the manual page and the completions.
//!
//! The install reuses the build's own target directory (`CARGO_TARGET_DIR`, the directory
//! the binary under test was built into), so it compiles only what the release profile has
//! not built yet there: a few minutes the first time on a 2-core machine, seconds after.
//! CI builds the release profile before the tests (`.ci/run`), so there it is a copy.
//!
//! The install command is the README's own line (`cargo install --locked --path
//! crates/cli`), read from the README, with only `--offline --quiet --root DIR` added: what
//! the README tells a user to run is what is tested. The minimum Rust version in
//! `Cargo.toml` is checked against the versions the locked dependencies ask for.

use crate::support::{bin, run};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target directory the binary under test was built into (`<target>/debug/threadbalance`).
fn target_dir() -> PathBuf {
    let me = bin();
    me.parent().and_then(Path::parent).unwrap().to_path_buf()
}

/// The README's install command: the first line of a ```` ```sh ```` block that starts
/// with `cargo install`, without its `# comment`.
fn readme_install_line() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    readme
        .lines()
        .map(|l| l.split(" #").next().unwrap_or(l).trim())
        .find(|l| l.starts_with("cargo install"))
        .expect("the README shows a `cargo install` line")
        .to_string()
}

#[test]
fn install_readme_line_builds_the_locked_versions() {
    // `cargo install` without `--locked` ignores Cargo.lock and builds the newest versions
    // the manifests allow: not what the tests ran against.
    let line = readme_install_line();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(words.contains(&"--locked"), "{line}: without --locked");
    assert!(
        words.windows(2).any(|w| w == ["--path", "crates/cli"]),
        "{line}"
    );
}

/// `(major, minor)` of a version such as `1.88` or `1.88.0`.
fn major_minor(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap_or(0))
}

#[test]
fn install_rust_version_is_what_the_locked_dependencies_need() {
    // The README says which Rust builds the project; it is `Cargo.toml`'s rust-version,
    // and that is no lower than any locked dependency's own (ratatui 0.30 and time 0.3.55
    // ask for 1.88 where the manifest once said 1.85).
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let manifest = std::fs::read_to_string(repo.join("Cargo.toml")).unwrap();
    let ours = manifest
        .lines()
        .find_map(|l| l.strip_prefix("rust-version = "))
        .map(|v| v.trim().trim_matches('"').to_string())
        .expect("[workspace.package] rust-version");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .unwrap();
    // The packages built for this platform (threadbalance is Linux only; the others' crates
    // need not be downloaded).
    let out = Command::new(cargo)
        .current_dir(&repo)
        .args([
            "metadata",
            "--locked",
            "--offline",
            "--format-version",
            "1",
            "--filter-platform",
            &host,
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = meta["packages"].as_array().unwrap();
    assert!(packages.len() > 50, "{}", packages.len());
    let (need, who) = packages
        .iter()
        .filter_map(|p| {
            let v = p["rust_version"].as_str()?;
            Some((major_minor(v), format!("{} {}", p["name"], p["version"])))
        })
        .max()
        .unwrap();
    assert!(
        major_minor(&ours) >= need,
        "Cargo.toml says rust-version {ours}, but {who} needs {}.{}",
        need.0,
        need.1
    );
    // The README names the same version.
    let readme = std::fs::read_to_string(repo.join("README.md")).unwrap();
    assert!(
        readme.contains(&format!("Rust {ours} or newer")),
        "the README does not say \"Rust {ours} or newer\""
    );
}

#[test]
fn install_into_a_temp_root_then_a_named_scenario_runs_from_elsewhere() {
    let root = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let line = readme_install_line();
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(words[..2], ["cargo", "install"], "{line}");
    let out = Command::new(cargo)
        .current_dir(&repo)
        .env("CARGO_TARGET_DIR", target_dir())
        .args(&words[1..])
        .args(["--offline", "--quiet", "--root"])
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
