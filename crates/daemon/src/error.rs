//! The crate's error types: a config that was rejected, a file under `/proc` or `/sys`
//! that could not be read or made no sense, and a reload that kept the running config.
//!
//! Each prints as **one line** that names the file, then what was wrong, so the daemon can
//! log them as they are and the command line can print them and exit with status
//! [`ConfigError::EXIT_STATUS`]. An error that wraps another keeps it as its
//! [`std::error::Error::source`] and says only its own part; [`Chain`] prints the whole
//! line where it is printed.

use std::fmt;
use std::path::PathBuf;

/// Why a config file was rejected. Prints as one line:
///
/// ```text
/// threadbalance.toml:14: rule "busy": comm: bad regex "(": unclosed group
/// ^file              ^line ^where      ^key  ^what was wrong
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file, as the user named it.
    pub file: String,
    /// The 1-based line the problem is on, when known.
    pub line: Option<usize>,
    /// Where in the file: `rule "busy": comm`, `daemon: cpus`, or empty when the whole
    /// file is at fault (not TOML at all).
    pub key: String,
    /// What was wrong, one line. Text, not a source: most are this crate's own checks,
    /// and a TOML or regex error is rewritten here into the key and line it is about
    /// (its own message names a byte offset or a table path), so its first form is not
    /// what the user should read.
    pub why: String,
}

impl ConfigError {
    /// The exit status of a command that stops on a rejected config (bad input).
    pub const EXIT_STATUS: i32 = 2;

    pub(crate) fn new(
        file: &str,
        line: Option<usize>,
        key: impl Into<String>,
        why: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: file.to_string(),
            line,
            key: key.into(),
            why: one_line(&why.into()),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": {}", self.key)?;
        }
        write!(f, ": {}", self.why)
    }
}

impl std::error::Error for ConfigError {}

/// Why a file under the root could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file or directory could not be read (other than a process that vanished, which
    /// readers report as `Ok(None)`).
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but a line in it made no sense.
    #[error("parsing {path}: {}", one_line(&why.to_string()))]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was wrong (boxed: it is large, and rare).
        #[source]
        why: Box<ParseError>,
    },
    /// A file someone else may write was refused unread (a symlink, a FIFO or device, too
    /// large); the error names the file.
    #[error("reading {0}")]
    Refused(#[from] threadbalance_linux::untrusted::UntrustedError),
}

/// Why the text of a file under `/proc` or `/sys` made no sense (each parser's own
/// words; [`ReadError::Parse`] adds the file).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// A `/proc/<pid>/cgroup` line (1-based) that is not `hierarchy-id:controllers:path`.
    #[error("line {line}: {text:?} is not hierarchy-id:controllers:path")]
    CgroupLine {
        /// Its number.
        line: usize,
        /// The line.
        text: String,
    },
    /// `/proc/<pid>/status` has no `Uid:` line.
    #[error("no Uid: line")]
    NoUid,
    /// Its `Uid:` line has fewer than two ids (the line after `Uid:`).
    #[error("Uid:{0} has fewer than two ids")]
    UidShort(String),
    /// Its effective uid is not a number.
    #[error("Uid: {0:?} is not a user id")]
    NotUid(String),
    /// `isolcpus=` with a flag not followed by a CPU list.
    #[error("isolcpus={value}: flag {flag:?} is not followed by a CPU list")]
    IsolcpusFlag {
        /// The parameter's value.
        value: String,
        /// The flag and what follows it.
        flag: String,
    },
    /// A kernel parameter whose CPU list is not one.
    #[error("{param}={value}: {source}")]
    ParamCpus {
        /// `isolcpus` or `nohz_full`.
        param: &'static str,
        /// Its value.
        value: String,
        /// Why the list is not one.
        #[source]
        source: threadbalance_model::ModelError,
    },
    /// A file that should hold a CPU list does not.
    #[error(transparent)]
    Cpus(threadbalance_model::ModelError),
    /// `/proc/sys/kernel/numa_balancing` holds no mode.
    #[error("{0:?} is not a numa_balancing mode")]
    NumaBalancing(String),
    /// A pid file whose first line is not a pid.
    #[error("{0:?} is not a pid")]
    NotPid(String),
    /// A `stat` file the linux crate's parser refused (its words).
    #[error("{}", .0.why)]
    Stat(threadbalance_linux::parse::ParseError),
}

/// Why a reload kept the running config (the file could not be read, or was not a valid
/// config).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReloadError {
    /// The file could not be read, or its text was rejected.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The thread that reads the file could not be started.
    #[error(transparent)]
    Spawn(std::sync::Arc<std::io::Error>),
    /// The thread that reads the file ended without a result.
    #[error("the reload failed")]
    Lost,
}

/// An error and its sources on one line, joined by ": " (the form `anyhow` prints with
/// `{:#}`), each said once: a source whose text the line already ends with (an error
/// that quotes its source) is not repeated. What the daemon logs and answers.
///
/// ```
/// use threadbalance_daemon::control::Refusal;
/// use threadbalance_daemon::error::{Chain, ReloadError};
/// let r = Refusal::Reload(ReloadError::Lost);
/// assert_eq!(Chain(&r).to_string(), "reload rejected, keeping the running config: the reload failed");
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Chain<'a>(pub &'a (dyn std::error::Error + 'a));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut line = self.0.to_string();
        let mut source = self.0.source();
        while let Some(s) = source {
            let text = s.to_string();
            if line.is_empty() {
                line = text;
            } else if !text.is_empty() && !line.ends_with(&text) {
                line.push_str(": ");
                line.push_str(&text);
            }
            source = s.source();
        }
        f.write_str(&line)
    }
}

/// Folds a message that may span lines (a regex or TOML error with a caret diagram) into
/// one: the diagram is dropped and the remaining lines are joined with "; ".
pub(crate) fn one_line(text: &str) -> String {
    // regex's syntax errors end with a line "error: <what>" under the diagram; that line
    // says it all.
    if let Some(what) = text.lines().find_map(|l| l.trim().strip_prefix("error: ")) {
        return what.trim().to_string();
    }
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^' || c == ' ' || c == '~'))
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_error_with_line_and_key_prints_file_line_key_why() {
        let e = ConfigError::new("t.toml", Some(3), "rule \"a\": comm", "bad regex");
        assert_eq!(e.to_string(), "t.toml:3: rule \"a\": comm: bad regex");
    }

    #[test]
    fn config_error_without_line_or_key_prints_file_and_why() {
        let e = ConfigError::new("t.toml", None, "", "not TOML");
        assert_eq!(e.to_string(), "t.toml: not TOML");
    }

    #[test]
    fn one_line_regex_diagram_keeps_the_error_line() {
        let text = "regex parse error:\n    (\n    ^\nerror: unclosed group";
        assert_eq!(one_line(text), "unclosed group");
    }

    #[test]
    fn chain_a_source_its_error_quotes_is_said_once() {
        let io = std::io::Error::other("disk gone");
        let e = ReadError::Io {
            path: PathBuf::from("/proc/1/stat"),
            source: io,
        };
        assert_eq!(Chain(&e).to_string(), "reading /proc/1/stat: disk gone");
    }

    #[test]
    fn one_line_plain_lines_are_joined() {
        assert_eq!(one_line("a\n\n  b  \n"), "a; b");
    }
}
