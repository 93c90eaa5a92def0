//! What the loop answers to a change asked over the control socket: [`Done`] when it was
//! carried out, [`Refusal`] when nothing changed. Each prints as the one line `ctl` shows
//! (the `done` and `error` answers' `message`), made where the answer is written.
//!
//! ```
//! use threadbalance_daemon::control::{Done, Refusal};
//! use threadbalance_model::Pid;
//! let done = Done::Paused { pid: Pid(4242), comm: "ffmpeg".into() };
//! assert_eq!(done.to_string(), "paused 4242 (ffmpeg)");
//! assert_eq!(Refusal::NotManaged(Pid(7)).to_string(), "process 7 is not managed");
//! ```

use crate::error::ReloadError;
use threadbalance_model::Pid;

/// A change carried out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Done {
    /// `pause`: the process's threads are left where they are.
    #[error("paused {pid} ({comm})")]
    Paused {
        /// The process.
        pid: Pid,
        /// Its name.
        comm: String,
    },
    /// `resume`: the process is managed again.
    #[error("resumed {pid} ({comm})")]
    Resumed {
        /// The process.
        pid: Pid,
        /// Its name.
        comm: String,
    },
    /// `release`: every mask put back.
    #[error("released {pid} ({comm}): {restored}")]
    Released {
        /// The process.
        pid: Pid,
        /// Its name.
        comm: String,
        /// What restoring did, as the host says it (counts of masks restored, already
        /// back, gone).
        restored: String,
    },
    /// `reload`: the new config runs.
    #[error("reloaded: {summary}")]
    Reloaded {
        /// [`crate::Config::summary`] of the new config.
        summary: String,
    },
    /// The per-thread view was built and published (answered with an empty line).
    #[error("")]
    ThreadsPublished,
}

/// A change refused, or not carried out: nothing changed (but see
/// [`Refusal::ReleasedWithFailures`] and [`Refusal::NoAnswer`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum Refusal {
    /// The pid is not one the daemon manages.
    #[error("process {0} is not managed")]
    NotManaged(Pid),
    /// `pause` of a paused process.
    #[error("process {0} is already paused")]
    AlreadyPaused(Pid),
    /// `resume` of a process that is not paused.
    #[error("process {0} is not paused")]
    NotPaused(Pid),
    /// `release` let the process go, but some masks could not be put back.
    #[error("released {pid} ({comm}), but {restored}")]
    ReleasedWithFailures {
        /// The process.
        pid: Pid,
        /// Its name.
        comm: String,
        /// What restoring did, failures included.
        restored: String,
    },
    /// `reload` found the new config bad, or could not read it: the running one is kept.
    #[error("reload rejected, keeping the running config")]
    Reload(#[source] ReloadError),
    /// The loop has stopped (or dropped the request unanswered).
    #[error("the daemon is stopping")]
    Stopping,
    /// The loop did not answer in time.
    #[error(
        "the daemon did not answer within {within_ms} ms; the request may still be carried out"
    )]
    NoAnswer {
        /// How long the client's request waited, in milliseconds.
        within_ms: u128,
    },
}
