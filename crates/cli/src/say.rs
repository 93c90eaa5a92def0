//! Printing that never panics, and the one check of standard output at the end.
//!
//! `println!` and `eprintln!` panic when the stream is closed or full (`… | head -1`,
//! `>/dev/full`), which would lose the command's exit status and skip restoring masks.
//! `out!` and `outln!` never panic either: the first error writing stdout is kept
//! ([`stdout_failed`]) and the command goes on to its end, restoring what it changed.
//! `main` then flushes stdout and asks [`stdout_error`]: a closed pipe (`EPIPE`, the reader
//! went away, as in `… | head -1`) is the reader's choice and changes nothing; any other
//! error (`ENOSPC` on a full disk, `EIO`) is one line and exit status 1, since what was
//! printed is lost. What goes to stderr is dropped when it cannot be written: there is
//! nowhere left to say so.

use std::io::{self, Write as _};
use std::sync::Mutex;

/// The first error writing stdout, if any.
static STDOUT_ERROR: Mutex<Option<io::Error>> = Mutex::new(None);

/// Keeps `e`, an error writing stdout, unless one is kept already.
pub fn stdout_failed(e: io::Error) {
    let mut kept = STDOUT_ERROR.lock().unwrap_or_else(|p| p.into_inner());
    if kept.is_none() {
        *kept = Some(e);
    }
}

/// Flushes stdout, then returns the first error writing it (by `out!`, `outln!` or that
/// flush), if there was one.
pub fn stdout_error() -> Option<io::Error> {
    if let Err(e) = io::stdout().flush() {
        stdout_failed(e);
    }
    STDOUT_ERROR
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
}

/// Whether `e` is a closed pipe: the reader went away, which is not a failure of ours.
pub fn is_broken_pipe(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// `print!` to stdout; an error is kept for `say::stdout_error`.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = write!(std::io::stdout(), $($t)*) {
            $crate::say::stdout_failed(e);
        }
    }};
}

/// `println!` to stdout; an error is kept for `say::stdout_error`.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        if let Err(e) = writeln!(std::io::stdout(), $($t)*) {
            $crate::say::stdout_failed(e);
        }
    }};
}

/// `eprint!` to stderr, ignoring write errors.
macro_rules! err {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

/// `eprintln!` to stderr, ignoring write errors.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_broken_pipe_only_names_epipe() {
        assert!(is_broken_pipe(&io::Error::from_raw_os_error(32)));
        assert!(!is_broken_pipe(&io::Error::from_raw_os_error(28)));
    }
}
