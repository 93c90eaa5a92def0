//! The daemon's logging: `tracing` events written to stderr one line each, so that
//! journald (or any line-based collector) keeps every event whole.
//!
//! ```text
//!   tracing::debug!(…) ──► filter (--log-level "info,threadbalance_daemon=debug")
//!        ──► fmt (no colours unless stderr is a terminal; no timestamp under journald,
//!                 which stamps each line itself)
//!        ──► OneLine: a newline inside an event becomes "\n", so one event = one line
//!        ──► stderr
//! ```
//!
//! The filter has the `RUST_LOG` shape without regexes: a default level and
//! `target=level` pairs, comma-separated (`debug`, `warn,threadbalance_daemon=debug`).
//! A word that is neither is rejected with one line rather than read as a target, so
//! `--log-level verbose` is an error and not a filter that silently drops everything.
//!
//! Every move the daemon makes is one debug event with its reason ([`log_move`]):
//!
//! ```text
//! DEBUG threadbalance_daemon::log: move pid=4242 tid=4250 to=cpu3 reason=speed-rotate detail=SpeedRotate { lead_ms: 12.5 }
//! ```

use std::io::{self, IsTerminal, Write};
use std::str::FromStr;
use threadbalance_model::{Move, Target};
use tracing::Subscriber;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;

/// The filter used when none is given.
pub const DEFAULT_FILTER: &str = "info";

/// A log filter that could not be read. One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad log filter {text:?}: {what}; expected a level (error, warn, info, debug, trace, off) or target=level, comma-separated"
)]
pub struct FilterError {
    /// The filter as given.
    pub text: String,
    /// The part that was wrong.
    pub what: String,
}

const LEVELS: [&str; 6] = ["error", "warn", "info", "debug", "trace", "off"];

/// Reads a filter: `level` or `target=level` items, comma-separated.
///
/// ```
/// use threadbalance_daemon::log::parse_filter;
/// assert!(parse_filter("warn,threadbalance_daemon=debug").is_ok());
/// assert_eq!(parse_filter("verbose").unwrap_err().what, "\"verbose\" is not a level");
/// ```
pub fn parse_filter(text: &str) -> Result<Targets, FilterError> {
    let err = |what: String| FilterError {
        text: text.to_string(),
        what,
    };
    if text.trim().is_empty() {
        return Err(err("it is empty".into()));
    }
    for item in text.split(',').map(str::trim) {
        let level = match item.split_once('=') {
            Some((target, level)) => {
                if target.is_empty()
                    || !target
                        .chars()
                        .all(|c| c.is_alphanumeric() || "_:-".contains(c))
                {
                    return Err(err(format!("{target:?} is not a target (a module path)")));
                }
                level
            }
            None => item,
        };
        if !LEVELS.contains(&level.to_ascii_lowercase().as_str()) {
            return Err(err(format!("{level:?} is not a level")));
        }
    }
    Targets::from_str(text).map_err(|e| err(e.to_string()))
}

/// How to log: the filter, and the choices that depend on where stderr goes.
#[derive(Debug, Clone)]
pub struct LogSettings {
    /// Which events are written.
    pub filter: Targets,
    /// Colours (only for a terminal).
    pub ansi: bool,
    /// A timestamp at the start of each line (not under journald, which adds its own).
    pub timestamps: bool,
}

impl LogSettings {
    /// The settings for stderr: `flag` (`--log-level`) wins over `env` (the
    /// `THREADBALANCE_LOG` variable), then [`DEFAULT_FILTER`]. `terminal` is whether stderr
    /// is a terminal; `journal` whether it goes to journald (systemd sets
    /// `JOURNAL_STREAM` for a service's stderr).
    pub fn new(
        flag: Option<&str>,
        env: Option<&str>,
        terminal: bool,
        journal: bool,
    ) -> Result<LogSettings, FilterError> {
        let text = flag.or(env).unwrap_or(DEFAULT_FILTER);
        Ok(LogSettings {
            filter: parse_filter(text)?,
            ansi: terminal,
            timestamps: !journal,
        })
    }

    /// [`LogSettings::new`] for this process's stderr and environment.
    pub fn detect(flag: Option<&str>) -> Result<LogSettings, FilterError> {
        let env = std::env::var("THREADBALANCE_LOG").ok();
        LogSettings::new(
            flag,
            env.as_deref(),
            io::stderr().is_terminal(),
            std::env::var_os("JOURNAL_STREAM").is_some(),
        )
    }
}

/// A subscriber writing through `writer` as `settings` say (tests pass a buffer).
pub fn subscriber<W>(settings: &LogSettings, writer: W) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
{
    let layer = tracing_subscriber::fmt::layer()
        .with_ansi(settings.ansi)
        .with_writer(OneLine(writer));
    let registry = tracing_subscriber::registry().with(settings.filter.clone());
    if settings.timestamps {
        Box::new(registry.with(layer))
    } else {
        Box::new(registry.with(layer.without_time()))
    }
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("logging is already set up in this process")]
pub struct AlreadySet;

/// Makes the stderr subscriber the process's logger.
pub fn init(settings: &LogSettings) -> Result<(), AlreadySet> {
    tracing::subscriber::set_global_default(subscriber(settings, io::stderr))
        .map_err(|_| AlreadySet)
}

/// Logs one move at debug level, with its reason's name and its values.
pub fn log_move(m: &Move) {
    let to = match m.to {
        Target::Cpu(c) => format!("cpu{c}"),
        Target::Domain { level, index } => crate::metrics::domain_label(level, index),
        Target::Original => "original".into(),
    };
    tracing::debug!(
        pid = m.thread.pid.0,
        tid = m.thread.tid.0,
        to = %to,
        reason = %crate::metrics::reason_name(&m.why),
        detail = ?m.why,
        "move"
    );
}

/// A writer that keeps each event on one line: a newline or carriage return inside it
/// becomes the two characters `\n` or `\r`; only the event's final newline stays. The fmt
/// layer writes each event with one `write_all`, so each call is one event.
#[derive(Debug, Clone)]
pub struct OneLine<M>(pub M);

/// The writer [`OneLine`] makes.
#[derive(Debug)]
pub struct OneLineWriter<W>(W);

impl<'a, M: MakeWriter<'a>> MakeWriter<'a> for OneLine<M> {
    type Writer = OneLineWriter<M::Writer>;
    fn make_writer(&'a self) -> Self::Writer {
        OneLineWriter(self.0.make_writer())
    }
}

impl<W: Write> Write for OneLineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let body = buf.strip_suffix(b"\n").unwrap_or(buf);
        let mut out = Vec::with_capacity(buf.len() + 8);
        for &b in body {
            match b {
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                _ => out.push(b),
            }
        }
        if body.len() < buf.len() {
            out.push(b'\n');
        }
        self.0.write_all(&out)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use threadbalance_model::{CpuId, Level, Pid, Reason, ThreadKey, Tid};

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    fn capture(filter: &str, ansi: bool, f: impl FnOnce()) -> String {
        let settings = LogSettings {
            filter: parse_filter(filter).unwrap(),
            ansi,
            timestamps: false,
        };
        let out = Captured::default();
        tracing::subscriber::with_default(subscriber(&settings, out.clone()), f);
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    fn a_move() -> Move {
        Move {
            thread: ThreadKey {
                pid: Pid(4242),
                tid: Tid(4250),
                start_time: 1,
            },
            to: Target::Cpu(CpuId(3)),
            why: Reason::SpeedRotate { lead_ms: 12.5 },
        }
    }

    #[test]
    fn log_move_at_debug_is_one_line_with_its_reason() {
        let text = capture("debug", false, || log_move(&a_move()));
        assert_eq!(
            text,
            "DEBUG threadbalance_daemon::log: move pid=4242 tid=4250 to=cpu3 \
             reason=speed-rotate detail=SpeedRotate { lead_ms: 12.5 }\n"
        );
    }

    #[test]
    fn log_move_domain_target_names_level_and_index() {
        let mut m = a_move();
        m.to = Target::Domain {
            level: Level::Node,
            index: 1,
        };
        m.why = Reason::Initial;
        let text = capture("debug", false, || log_move(&m));
        assert!(text.contains(" to=node1 reason=initial "), "{text}");
    }

    #[test]
    fn log_move_hidden_at_info() {
        assert_eq!(capture("info", false, || log_move(&a_move())), "");
        // A target-specific level lets the daemon's moves through alone.
        let text = capture("warn,threadbalance_daemon=debug", false, || {
            log_move(&a_move())
        });
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn subscriber_newlines_in_a_message_stay_on_one_line() {
        let text = capture("info", false, || {
            tracing::info!(file = "a\nb", "reload rejected:\nline two\r");
            tracing::warn!("second event");
        });
        assert_eq!(
            text,
            " INFO threadbalance_daemon::log::tests: reload rejected:\\nline two\\r file=\"a\\nb\"\n\
             \x20WARN threadbalance_daemon::log::tests: second event\n"
        );
    }

    #[test]
    fn subscriber_without_ansi_writes_no_escape_codes() {
        let plain = capture("info", false, || tracing::error!(pid = 3, "gone"));
        assert!(!plain.contains('\x1b'), "{plain:?}");
        // With ansi (a terminal), the level is coloured: the switch really switches.
        let coloured = capture("info", true, || tracing::error!(pid = 3, "gone"));
        assert!(coloured.contains('\x1b'), "{coloured:?}");
    }

    #[test]
    fn log_settings_flag_beats_env_and_journal_drops_timestamps() {
        let s = LogSettings::new(Some("debug"), Some("bogus"), false, true).unwrap();
        assert!(!s.ansi && !s.timestamps);
        assert_eq!(s.filter.to_string(), "debug");
        let s = LogSettings::new(None, Some("warn"), true, false).unwrap();
        assert!(s.ansi && s.timestamps);
        assert_eq!(s.filter.to_string(), "warn");
        let s = LogSettings::new(None, None, false, false).unwrap();
        assert_eq!(s.filter.to_string(), "info");
        assert!(LogSettings::new(None, Some("bogus"), false, false).is_err());
    }

    #[test]
    fn parse_filter_each_bad_filter_is_one_named_line() {
        for (text, what) in [
            ("", "it is empty"),
            ("verbose", "\"verbose\" is not a level"),
            ("info,threadbalance=loud", "\"loud\" is not a level"),
            ("=debug", "\"\" is not a target (a module path)"),
            ("a b=debug", "\"a b\" is not a target (a module path)"),
        ] {
            let e = parse_filter(text).unwrap_err();
            assert_eq!(e.what, what, "{text}");
            assert!(!e.to_string().contains('\n'));
        }
        assert!(parse_filter("TRACE").is_ok());
        assert!(parse_filter("off").is_ok());
    }
}
