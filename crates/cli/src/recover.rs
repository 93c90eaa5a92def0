//! Crash recovery in the CLI: where the state directory is, `threadbalance restore`, and
//! the replay of stale journals every instance does before it changes anything.
//!
//! ```text
//!  threadbalance restore ─► for each journal whose owner died (its flock can be taken),
//!                            in the state directory and in the daemon's per-process
//!                            subdirectories (managed.<pid>.<start>/):
//!      replay (threadbalance_linux::ledger) ─► one line per mask left or not restored
//!      exit 0 when every mask that was still ours is back, 1 when one could not be
//! ```

use crate::input_error;
use anyhow::Result;
use clap::Args;
use std::path::{Path, PathBuf};
use threadbalance_linux::Root;
use threadbalance_linux::ledger::{Kept, RestoreReport};
use threadbalance_linux::state::StateDir;

/// Options of `threadbalance restore`.
#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// Directory of journals and locks [default: /run/threadbalance for root,
    /// $XDG_RUNTIME_DIR/threadbalance otherwise, or $TMPDIR/threadbalance-UID (private,
    /// 0700) without XDG_RUNTIME_DIR].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// The state directory: `dir` when given, else the default for this user:
/// `/run/threadbalance` for root, `$XDG_RUNTIME_DIR/threadbalance`, or, where that is not
/// set (a `su` shell, cron, a container), `threadbalance-<uid>` under the temporary
/// directory, private to us (see [`private_dir`]).
pub fn state_dir(dir: Option<&PathBuf>) -> Result<StateDir> {
    if let Some(d) = dir {
        return Ok(StateDir::new(d));
    }
    let is_root = threadbalance_linux::permit::we_are_root(&Root::system());
    let runtime = std::env::var_os("XDG_RUNTIME_DIR");
    if let Some(path) = StateDir::default_path(is_root, runtime.as_deref()) {
        return Ok(StateDir::new(path));
    }
    let uid = nix::unistd::geteuid().as_raw();
    let path = std::env::temp_dir().join(format!("threadbalance-{uid}"));
    private_dir(&path, uid)?;
    Ok(StateDir::new(path))
}

/// Creates `path` with mode 0700, or checks that the one already there is a directory
/// (not a symbolic link) owned by `uid` with mode 0700: in a directory every user may
/// write, another user could have made it first, to read or plant our journals.
pub fn private_dir(path: &Path, uid: u32) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let refuse = |why: String| {
        input_error(format!(
            "state directory {}: {why}; remove it, or pass --state-dir DIR",
            path.display()
        ))
    };
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(input_error(format!(
                "state directory {}: cannot create it ({e}); pass --state-dir DIR",
                path.display()
            )));
        }
    }
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| refuse(format!("cannot read what it is ({e})")))?;
    if !meta.file_type().is_dir() {
        return Err(refuse("not a directory".into()));
    }
    if meta.uid() != uid {
        return Err(refuse(format!(
            "it belongs to uid {}, not to us (uid {uid})",
            meta.uid()
        )));
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        return Err(refuse(format!(
            "its mode is {mode:04o}, not 0700 (others could read or write it)"
        )));
    }
    Ok(())
}

/// Creates `state` if it does not exist and makes sure files can be made in it, by making
/// and removing one: a path that is not a directory, or one we may not write in, is bad
/// input (exit 2) found before any command starts, not a lock that cannot be taken once it
/// runs.
///
/// The directory must be private to us ([`StateDir::create`]: ours, not writable by group
/// or others, not a symlink); one that is not is refused here too, with exit 2.
pub fn ready_state_dir(state: &StateDir) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let bad = |e: String| input_error(format!("state directory {}: {e}", state.path().display()));
    state
        .create()
        .map_err(|e| input_error(format!("state directory: {e}")))?;
    let probe = state.path().join(format!(".probe.{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
        .map_err(|e| bad(format!("cannot create files in it: {e}")))?;
    std::fs::remove_file(&probe).map_err(|e| bad(format!("cannot remove files in it: {e}")))
}

/// Replays the journals of dead instances under `state`; prints what was done when there
/// was anything. Returns whether every mask could be handled.
pub fn restore_stale(state: &StateDir) -> Result<bool> {
    let (report, journals) = restore_tree(state, &Root::system())?;
    if journals > 0 {
        errln!(
            "threadbalance: {} journal(s) left by instances that died under {}: {}",
            journals,
            state.path().display(),
            describe(&report)
        );
    }
    print_kept(&report);
    Ok(report.failures().next().is_none() && report.unreadable.is_empty())
}

/// `threadbalance restore`.
pub fn restore(args: &RestoreArgs) -> Result<u8> {
    let state = state_dir(args.state_dir.as_ref())?;
    // A directory that does not exist holds no journal; anything else that is not a
    // directory is a wrong path (exit 2).
    match std::fs::metadata(state.path()) {
        Ok(m) if !m.is_dir() => {
            return Err(input_error(format!(
                "state directory {}: not a directory",
                state.path().display()
            )));
        }
        _ => {}
    }
    let (report, journals) = restore_tree(&state, &Root::system())?;
    errln!(
        "threadbalance: {} journal(s) replayed from {}: {}",
        journals,
        state.path().display(),
        describe(&report)
    );
    print_kept(&report);
    Ok(
        if report.failures().next().is_none() && report.unreadable.is_empty() {
            0
        } else {
            1
        },
    )
}

/// Replays the journals of dead instances in `state` and in each process subdirectory of
/// the daemon's (`managed.<pid>.<start>`), removing the subdirectories left empty.
pub fn restore_tree(state: &StateDir, root: &Root) -> Result<(RestoreReport, usize)> {
    let (mut report, mut count) = state.restore_stale(root)?;
    let subdirs = std::fs::read_dir(state.path())
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| is_managed_dir(p))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    for dir in subdirs {
        let (r, n) = StateDir::new(&dir).restore_stale(root)?;
        report.add(r);
        count += n;
        let _ = std::fs::remove_dir(&dir);
    }
    Ok((report, count))
}

fn is_managed_dir(p: &Path) -> bool {
    p.is_dir()
        && p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("managed."))
}

/// One line: how many masks were put back, were back already, had gone, were kept.
pub fn describe(r: &RestoreReport) -> String {
    let failed = r.failures().count();
    let slices = if r.slices_restored > 0 {
        format!(" ({} time slices put back too)", r.slices_restored)
    } else {
        String::new()
    };
    format!(
        "{} restored, {} already back, {} gone, {} left as the program set them, {} could not be restored{slices}",
        r.restored,
        r.already,
        r.vanished,
        r.kept.len() - failed,
        failed
    )
}

/// One line per mask not put back, with the reason.
pub fn kept_lines(r: &RestoreReport) -> Vec<String> {
    r.kept
        .iter()
        .map(|(k, why)| match why {
            Kept::ProgramChoice(m) => format!(
                "thread {} of process {}: left on {m}, the mask its program chose",
                k.tid.0, k.pid.0
            ),
            Kept::Failed(e) => format!(
                "thread {} of process {}: NOT restored: {e}",
                k.tid.0, k.pid.0
            ),
        })
        .collect()
}

fn print_kept(r: &RestoreReport) {
    for line in kept_lines(r) {
        errln!("threadbalance: {line}");
    }
    for why in &r.unreadable {
        errln!("threadbalance: journal left as it is: {why}");
    }
}
