//! A user's first hour without root: the refusal that matters is said first and once, the
//! state directory falls back to a private one when `XDG_RUNTIME_DIR` is not set, the
//! daemon says it needs root, and attaching to our own shell is warned about.
//!
//! The unprivileged runs go through `setpriv` (util-linux) as uid 65534, so these tests
//! run as root, as CI runs them.

use crate::support::bin;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

const NOBODY: u32 = 65534;

/// Runs the binary as uid 65534 with `args`, without `XDG_RUNTIME_DIR` (as in a `su`
/// shell or a cron job) and with `TMPDIR` at `tmp`.
fn as_nobody(tmp: &Path, args: &[&str]) -> Output {
    Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(bin())
        .args(args)
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", tmp)
        .output()
        .expect("setpriv runs (util-linux)")
}

/// A temporary directory every user may write, as /tmp is.
fn shared_tmp() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn attach_unprivileged_to_another_users_process_says_that_first_and_once() {
    let tmp = shared_tmp();
    // A process of root's: not ours to change.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let out = as_nobody(tmp.path(), &["attach", "--pid", &pid]);
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains(&format!("process {pid} belongs to uid 0")),
        "{lines:?}"
    );
    // Nothing about where the journal would have gone, and nothing created there.
    assert!(!lines[0].contains("XDG_RUNTIME_DIR"), "{lines:?}");
    assert!(!tmp.path().join(format!("threadbalance-{NOBODY}")).exists());
}

#[test]
fn run_unprivileged_without_xdg_runtime_dir_uses_a_private_temp_dir() {
    let tmp = shared_tmp();
    let out = as_nobody(tmp.path(), &["run", "--policy", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let dir = tmp.path().join(format!("threadbalance-{NOBODY}"));
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(meta.uid(), NOBODY);
    assert_eq!(meta.mode() & 0o7777, 0o700);
    // A second run finds it and uses it.
    let out = as_nobody(tmp.path(), &["run", "--policy", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

#[test]
fn run_unprivileged_refuses_a_temp_state_dir_not_private_to_it() {
    let tmp = shared_tmp();
    let dir = tmp.path().join(format!("threadbalance-{NOBODY}"));
    // Made by another user first (root here), private to them.
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = as_nobody(tmp.path(), &["run", "--policy", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("belongs to uid 0, not to us"),
        "{lines:?}"
    );
    // Ours, but others may read it.
    std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = as_nobody(tmp.path(), &["run", "--policy", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("its mode is 0755, not 0700"),
        "{out:?}"
    );
    // A symbolic link in its place is refused too.
    std::fs::remove_dir(&dir).unwrap();
    std::os::unix::fs::symlink(tmp.path(), &dir).unwrap();
    let out = as_nobody(tmp.path(), &["run", "--policy", "none", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a directory"),
        "{out:?}"
    );
}

#[test]
fn daemon_unprivileged_says_it_needs_root_and_exits_2() {
    let tmp = shared_tmp();
    let config = tmp.path().join("threadbalance.toml");
    std::fs::write(&config, "").unwrap();
    let out = as_nobody(
        tmp.path(),
        &["daemon", "--config", config.to_str().unwrap(), "--oneshot"],
    );
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("daemon needs root"), "{lines:?}");
}

#[test]
fn attach_to_the_shell_that_started_it_warns() {
    // `sh` starts threadbalance, which attaches to that same `sh` (its parent), dry run;
    // the shell then interrupts it.
    let script = r#""$0" attach --dry-run --pid $$ & tb=$!; sleep 0.5; kill -INT $tb; wait $tb"#;
    let out = Command::new("sh")
        .args(["-c", script])
        .arg(bin())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: process")
            && err.contains("the shell or program that started this threadbalance"),
        "{err}"
    );
    // A process that is not an ancestor gets no such warning.
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let script = format!(
        r#""$0" attach --dry-run --pid {} & tb=$!; sleep 0.5; kill -INT $tb; wait $tb"#,
        sleeper.id()
    );
    let out = Command::new("sh")
        .args(["-c", &script])
        .arg(bin())
        .output()
        .unwrap();
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("warning: process"), "{err}");
    assert!(err.contains("threadbalance summary"), "{err}");
}
