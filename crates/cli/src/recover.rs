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

use crate::error::bad_input;
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

/// A state directory refused: bad input (exit 2), found before anything changes.
#[derive(Debug, thiserror::Error)]
pub enum StateDirError {
    /// The default directory under the temporary directory could not be made.
    #[error("state directory {}: cannot create it ({source}); pass --state-dir DIR", path.display())]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// What is at the path could not be told.
    #[error("state directory {}: cannot read what it is ({source}); remove it, or pass --state-dir DIR", path.display())]
    Stat {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is there, but not private to us.
    #[error("state directory {}: {why}; remove it, or pass --state-dir DIR", path.display())]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: NotPrivate,
    },
    /// `restore --state-dir` given a path that is not a directory.
    #[error("state directory {}: not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// The directory could not be made private, or made at all.
    #[error("state directory: {0}")]
    Unusable(#[source] threadbalance_linux::LinuxError),
    /// Files cannot be made, or removed, in it.
    #[error("state directory {}: cannot {what} files in it: {source}", path.display())]
    Files {
        /// The directory.
        path: PathBuf,
        /// `create` or `remove`.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Why a directory is not private to us.
#[derive(Debug, thiserror::Error)]
pub enum NotPrivate {
    /// A file, a symbolic link.
    #[error("not a directory")]
    NotADirectory,
    /// Someone else's.
    #[error("it belongs to uid {owner}, not to us (uid {ours})")]
    Owner {
        /// Its owner.
        owner: u32,
        /// Us.
        ours: u32,
    },
    /// Others may read or write it.
    #[error("its mode is {0:04o}, not 0700 (others could read or write it)")]
    Mode(u32),
}

/// Creates `path` with mode 0700, or checks that the one already there is a directory
/// (not a symbolic link) owned by `uid` with mode 0700: in a directory every user may
/// write, another user could have made it first, to read or plant our journals.
pub fn private_dir(path: &Path, uid: u32) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let path_buf = || path.to_path_buf();
    let refuse = |why: NotPrivate| {
        bad_input(StateDirError::NotPrivate {
            path: path_buf(),
            why,
        })
    };
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(bad_input(StateDirError::Create {
                path: path_buf(),
                source,
            }));
        }
    }
    let meta = std::fs::symlink_metadata(path).map_err(|source| {
        bad_input(StateDirError::Stat {
            path: path_buf(),
            source,
        })
    })?;
    if !meta.file_type().is_dir() {
        return Err(refuse(NotPrivate::NotADirectory));
    }
    if meta.uid() != uid {
        return Err(refuse(NotPrivate::Owner {
            owner: meta.uid(),
            ours: uid,
        }));
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        return Err(refuse(NotPrivate::Mode(mode)));
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
    let files = |what| {
        move |source| {
            bad_input(StateDirError::Files {
                path: state.path().to_path_buf(),
                what,
                source,
            })
        }
    };
    state
        .create()
        .map_err(|e| bad_input(StateDirError::Unusable(e)))?;
    let probe = state.path().join(format!(".probe.{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&probe)
        .map_err(files("create"))?;
    std::fs::remove_file(&probe).map_err(files("remove"))
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
            return Err(bad_input(StateDirError::NotADirectory {
                path: state.path().to_path_buf(),
            }));
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
