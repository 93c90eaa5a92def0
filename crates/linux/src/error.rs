//! The one error type of the Linux host. Every variant names the path, pid or tid it
//! concerns, so the CLI can print a single line that says what and where.
//!
//! A thread that vanishes while being read or moved is *not* an error: readers leave it out
//! and the actuator counts it in [`threadbalance_model::ApplyReport::vanished`].

use std::path::PathBuf;
use threadbalance_model::{ModelError, Pid};

/// What went wrong while reading `/proc` or `/sys`, or while acting on a process.
#[derive(Debug, thiserror::Error)]
pub enum LinuxError {
    /// The process does not exist (or has exited and been reaped).
    #[error("no process with pid {pid}")]
    NoSuchProcess {
        /// The process asked for.
        pid: Pid,
    },
    /// The process exists but its `/proc` entries may not be read by us.
    #[error("permission denied reading process {pid} ({path})")]
    PermissionDenied {
        /// The process asked for.
        pid: Pid,
        /// The file that could not be read.
        path: PathBuf,
    },
    /// A file or directory could not be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A file was read but its contents did not make sense. What was wrong is said in
    /// the message, and kept typed in `why` (not as a source: it would be said twice by
    /// a printer of the chain).
    #[error("parsing {path}: {why}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        why: Malformed,
    },
    /// The CPUs, caches and nodes read under a root do not make a consistent machine.
    #[error("topology under {root}: {source}")]
    Topology {
        /// The root the topology was read from.
        root: PathBuf,
        /// What the model found wrong.
        #[source]
        source: ModelError,
    },
    /// A file someone else may write was refused (a symlink, not a regular file, too
    /// large) or could not be read.
    #[error("{0}")]
    Untrusted(#[from] crate::untrusted::UntrustedError),
    /// A directory the tool writes in is not private to it (see
    /// [`crate::untrusted::check_private_dir`]).
    #[error("{0}")]
    Dir(#[from] crate::untrusted::DirError),
    /// A host fact (clock ticks per second, page size) is not a positive number.
    #[error("host fact {name} unavailable: not positive or unsupported")]
    HostFact {
        /// The `sysconf` name (`CLK_TCK`, `PAGE_SIZE`).
        name: &'static str,
    },
    /// A host fact could not be read.
    #[error("host fact {name} unavailable: {source}")]
    HostFactRead {
        /// The `sysconf` name (`CLK_TCK`, `PAGE_SIZE`).
        name: &'static str,
        /// Why.
        #[source]
        source: nix::errno::Errno,
    },
}

/// What was wrong with a file's contents ([`LinuxError::Parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// A `/proc` or `/sys` text the parsers refused.
    #[error(transparent)]
    Parse(#[from] crate::parse::ParseError),
    /// A value the model refused (a CPU list).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A journal without its first line.
    #[error(transparent)]
    Journal(#[from] crate::ledger::header::NotAJournal),
    /// What the reader found wrong, in its words.
    #[error("{0}")]
    Said(String),
}

impl From<&str> for Malformed {
    fn from(why: &str) -> Malformed {
        Malformed::Said(why.to_owned())
    }
}

impl From<String> for Malformed {
    fn from(why: String) -> Malformed {
        Malformed::Said(why)
    }
}

impl LinuxError {
    /// An I/O error on `path`.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> LinuxError {
        LinuxError::Io {
            path: path.into(),
            source,
        }
    }

    /// A parse error on `path`.
    pub(crate) fn parse(path: impl Into<PathBuf>, why: impl Into<Malformed>) -> LinuxError {
        LinuxError::Parse {
            path: path.into(),
            why: why.into(),
        }
    }
}
