//! The journal's first line, and the error of a text without it: a leaf the error type
//! ([`crate::Malformed::Journal`]) names without depending on the ledger.

/// The first line of every journal.
pub const MAGIC: &str = "threadbalance-journal 1";

/// A text that is not a journal: its first line is not the magic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a journal (the first line is not {MAGIC:?})")]
pub struct NotAJournal;
