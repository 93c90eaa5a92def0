//! The binary's errors at the border: what the user gave, refused (exit status 2), and
//! the values clap's parsers refuse. Anything else is a library's own error, carried in
//! an [`anyhow::Error`] with its causes as sources, and exits 1.
//!
//! The message is made once, where it is printed: `main` writes the error and its
//! causes on one line, each cause once ([`one_line`]; so does every other line that
//! reports an error and goes on). An input error
//! keeps the error that refused the input as its source, never its text.

use std::error::Error;

/// A library's error, boxed.
type Cause = Box<dyn Error + Send + Sync + 'static>;

/// An error in what the user gave (exit status 2); anything else exits 1.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// What was wrong, in the binary's words, with no cause below it.
    #[error("{0}")]
    Said(String),
    /// What was refused, in the binary's words (`--json out.json: cannot write it`), and
    /// the error that refused it.
    #[error("{what}")]
    Refused {
        /// What the user gave, and what could not be done with it.
        what: String,
        /// Why.
        #[source]
        source: Cause,
    },
    /// A library's error that is about the input: its own message, its own causes.
    #[error(transparent)]
    Of(Cause),
}

/// An input error the binary words itself.
pub fn input_error(msg: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(InputError::Said(msg.into()))
}

/// A library's error that is about the input (a bad spec, a missing pid): exit 2, its
/// message and causes as they are.
pub fn bad_input(e: impl Error + Send + Sync + 'static) -> anyhow::Error {
    anyhow::Error::new(InputError::Of(Box::new(e)))
}

/// `what` the user gave, refused because of `source` (said after it).
pub fn refused(
    what: impl Into<String>,
    source: impl Error + Send + Sync + 'static,
) -> anyhow::Error {
    anyhow::Error::new(InputError::Refused {
        what: what.into(),
        source: Box::new(source),
    })
}

/// A value given on the command line that its parser refused; clap prints it after the
/// option's name, on one line (its Display is the whole message).
#[derive(Debug, thiserror::Error)]
pub enum ValueError {
    /// Not a number of the kind the option takes.
    #[error("{given:?}: expected {expected}")]
    NotA {
        /// The text given.
        given: String,
        /// What the option takes.
        expected: String,
    },
    /// `--interval 0`.
    #[error("must be at least 1 ms")]
    ZeroInterval,
    /// `--interval` not a whole number.
    #[error("{0:?} is not a whole number of milliseconds")]
    Interval(String),
    /// `--cpus ""`, or a list naming no CPU.
    #[error("an empty CPU list (expected e.g. 0-3,8)")]
    EmptyCpuList,
    /// `--tool-cpu` neither a word it knows nor three costs.
    #[error(
        "tool CPU {0:?}: expected measured, free or FIXED_US,PER_THREAD_US,PER_MOVE_US[,PER_PLAN_US[,PER_SLICE_US]]"
    )]
    ToolCpu(String),
    /// A value the model refused (a CPU list).
    #[error(transparent)]
    Model(#[from] threadbalance_model::ModelError),
    /// A CPU budget out of bounds.
    #[error(transparent)]
    Budget(#[from] threadbalance_model::pace::BudgetError),
    /// A value the simulator refused (a tick cost).
    #[error(transparent)]
    Sim(#[from] threadbalance_sim::SimError),
}

/// The error and its causes on one line, `what: why: why…`, each cause once: a cause
/// whose text the line already holds (a library error that prints its source,
/// `reading F: Permission denied (os error 13)`, over that io error, or one that says it
/// in parentheses) is not repeated. This is where an error's message is made.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_source_its_context_prints_is_said_once() {
        // What a library error whose message ends with its source gives under `{:#}`.
        #[derive(Debug)]
        struct Reading(std::io::Error);
        impl std::fmt::Display for Reading {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "reading /x/lock.1: {}", self.0)
            }
        }
        impl std::error::Error for Reading {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let denied = || std::io::Error::from_raw_os_error(13);
        let e = anyhow::Error::new(Reading(denied())).context("claiming the process");
        assert_eq!(
            one_line(&e),
            "claiming the process: reading /x/lock.1: Permission denied (os error 13)"
        );
        // A context that does not repeat its source keeps it.
        let e = anyhow::Error::new(denied()).context("writing out.json");
        assert_eq!(
            one_line(&e),
            "writing out.json: Permission denied (os error 13)"
        );
    }

    /// Whether `e` exits 2, as `main` decides it.
    fn is_input(e: &anyhow::Error) -> bool {
        e.chain().any(|c| c.downcast_ref::<InputError>().is_some())
    }

    #[test]
    fn refused_input_says_what_then_why_and_exits_2() {
        let denied = std::io::Error::from_raw_os_error(13);
        let e = refused("--json out.json: cannot write it", denied);
        assert_eq!(
            one_line(&e),
            "--json out.json: cannot write it: Permission denied (os error 13)"
        );
        assert!(is_input(&e));
        // The cause is kept as the error it was, not as its text.
        let cause = e.chain().nth(1).unwrap();
        assert!(cause.downcast_ref::<std::io::Error>().is_some());
        assert!(!is_input(&anyhow::Error::new(
            std::io::Error::from_raw_os_error(13)
        )));
    }

    #[test]
    fn bad_input_keeps_a_library_error_and_its_causes() {
        let e = bad_input(
            threadbalance_linux::permit::AffinityRefused::NotInspectable {
                pid: threadbalance_model::Pid(7),
                source: std::io::Error::from_raw_os_error(13),
            },
        );
        assert!(is_input(&e));
        // A cause the message already gives, in parentheses, is said once.
        assert_eq!(
            one_line(&e),
            "process 7 may not be inspected by us (Permission denied (os error 13))"
        );
        assert_eq!(e.chain().count(), 2, "the io error is the source");
    }
}
