//! The control socket's protocol: typed JSON requests and responses, one per line, and the
//! [`Control`] trait the daemon's loop implements to answer them.
//!
//! An operator (or `threadbalance ctl`) talks to a running daemon over a Unix socket that
//! only root and the daemon's own user can open (see [`socket`]). Each request is one line
//! of JSON with the protocol version and the request's name; each answer is one line too:
//!
//! ```text
//!   ctl ──► {"version":1,"request":"pause","pid":4242}\n
//!       ◄── {"version":1,"response":"done","message":"paused 4242 (ffmpeg)"}\n
//!   ctl ──► {"version":1,"request":"jump"}\n
//!       ◄── {"version":1,"response":"error","message":"bad request: unknown variant `jump`, …"}\n
//! ```
//!
//! | request | fields | what the daemon does | answer |
//! |---|---|---|---|
//! | `status` | | nothing | `status` |
//! | `list` | `all` (optional, false) | nothing | `list`: the managed processes, each with its group; with `all`, also `candidates`: processes a rule almost matched, with why each is not managed |
//! | `pause` | `pid` | stops moving the process's threads, leaves them where they are | `done` |
//! | `resume` | `pid` | manages a paused process again | `done` |
//! | `release` | `pid` | restores the process's masks and leaves it alone from now on | `done` |
//! | `reload` | | re-reads the config (a bad one is refused, the old one kept) | `done` |
//! | `threads` | `window_ms` (optional, 1000; 1-60000) | nothing | `threads`: every managed thread by where it may run, rates over about `window_ms` ([`threads`]) |
//!
//! Anything else gets one `error` line and changes nothing: text over
//! [`MAX_REQUEST_BYTES`], bytes that are not UTF-8, text that is not JSON, JSON that is not
//! an object, a missing or other `version`, an unknown request, a missing, extra or
//! ill-typed field, a pid that is not a positive process id. [`parse_request`] is the one
//! place that turns bytes into a [`Request`]; a randomized test feeds it arbitrary bytes.
//!
//! ```
//! use threadbalance_daemon::control::{parse_request, Request};
//! use threadbalance_model::Pid;
//! let r = parse_request(br#"{"version":1,"request":"pause","pid":4242}"#).unwrap();
//! assert_eq!(r, Request::Pause { pid: Pid(4242) });
//! let e = parse_request(br#"{"version":1,"request":"pause","pid":-1}"#).unwrap_err();
//! assert_eq!(e.to_string(), "bad request: pid -1 is not a process id (1 or more)");
//! ```

pub mod channel;
mod outcome;
pub mod socket;
pub mod threads;

pub use outcome::{Done, Refusal};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use threadbalance_model::Pid;
use threads::ThreadsView;

/// The longest display window `threads` accepts, in milliseconds.
pub const MAX_WINDOW_MS: u64 = 60_000;

/// The protocol's version: requests must carry it, responses carry it.
pub const PROTOCOL_VERSION: u64 = 1;

/// The longest request line accepted, in bytes (without its newline). Real requests are
/// under 100 bytes; anything longer is refused before it is parsed.
pub const MAX_REQUEST_BYTES: usize = 4096;

/// A request, once parsed and checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// The daemon's state in one answer.
    Status,
    /// The processes it manages; with `all`, also those a rule almost matched and why
    /// they are not managed.
    List {
        /// Whether to add the candidates that are not managed.
        all: bool,
    },
    /// Stop moving a process's threads, and leave them where they are.
    Pause {
        /// The process.
        pid: Pid,
    },
    /// Manage a paused process again.
    Resume {
        /// The process.
        pid: Pid,
    },
    /// Restore a process's masks and leave it alone from now on.
    Release {
        /// The process.
        pid: Pid,
    },
    /// Re-read the config; a bad one is refused and the running one kept.
    Reload,
    /// Every managed thread with its rates over about `window_ms`, grouped by where it may
    /// run (`threadbalance top`). The first request waits for one window.
    Threads {
        /// The display window asked for, in milliseconds
        /// ([`threads::DEFAULT_WINDOW_MS`] when the request has none).
        window_ms: u64,
    },
}

/// The request as it travels, without the version (checked before).
#[derive(Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case", deny_unknown_fields)]
enum WireRequest {
    // Empty struct variants rather than unit ones: serde lets a unit variant of an
    // internally tagged enum ignore extra fields, and `deny_unknown_fields` must hold.
    Status {},
    List {
        #[serde(default)]
        all: bool,
    },
    Pause {
        pid: i64,
    },
    Resume {
        pid: i64,
    },
    Release {
        pid: i64,
    },
    Reload {},
    Threads {
        #[serde(default)]
        window_ms: Option<i64>,
    },
}

impl Request {
    /// The request as one line of JSON, without the newline, as a client sends it.
    ///
    /// ```
    /// use threadbalance_daemon::control::Request;
    /// use threadbalance_model::Pid;
    /// assert_eq!(Request::Release { pid: Pid(7) }.to_line(),
    ///            r#"{"version":1,"request":"release","pid":7}"#);
    /// ```
    pub fn to_line(&self) -> String {
        let (name, field) = match *self {
            Request::Status => ("status", None),
            Request::List { all: false } => ("list", None),
            Request::List { all: true } => ("list", Some(r#""all":true"#.to_string())),
            Request::Pause { pid } => ("pause", Some(format!(r#""pid":{pid}"#))),
            Request::Resume { pid } => ("resume", Some(format!(r#""pid":{pid}"#))),
            Request::Release { pid } => ("release", Some(format!(r#""pid":{pid}"#))),
            Request::Reload => ("reload", None),
            Request::Threads { window_ms } => {
                ("threads", Some(format!(r#""window_ms":{window_ms}"#)))
            }
        };
        match field {
            Some(field) => {
                format!(r#"{{"version":{PROTOCOL_VERSION},"request":"{name}",{field}}}"#)
            }
            None => format!(r#"{{"version":{PROTOCOL_VERSION},"request":"{name}"}}"#),
        }
    }
}

/// Why a request was refused. Prints as one line, which is also the `error` answer's
/// message.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The line was longer than [`MAX_REQUEST_BYTES`].
    #[error("bad request: longer than {MAX_REQUEST_BYTES} bytes")]
    TooLong,
    /// The line was empty.
    #[error("bad request: empty line")]
    Empty,
    /// The bytes were not UTF-8.
    #[error("bad request: not UTF-8")]
    NotUtf8,
    /// The text was not JSON (serde's error kept; its message is one line).
    #[error("bad request: not JSON")]
    NotJson(#[source] serde_json::Error),
    /// The JSON was not an object.
    #[error("bad request: not a JSON object")]
    NotObject,
    /// The object had no `version`.
    #[error("bad request: no \"version\" (this daemon speaks version {PROTOCOL_VERSION})")]
    NoVersion,
    /// The `version` was not this daemon's.
    #[error("bad request: version {0} (this daemon speaks version {PROTOCOL_VERSION})")]
    Version(String),
    /// The request's name or fields were wrong (serde's error kept: it names the field or
    /// the request).
    #[error("bad request")]
    Fields(#[source] serde_json::Error),
    /// The pid was 0, negative or beyond what a pid can be.
    #[error("bad request: pid {0} is not a process id (1 or more)")]
    Pid(i64),
    /// The display window was outside 1-60000 ms.
    #[error("bad request: window_ms {0} is not within 1-{MAX_WINDOW_MS}")]
    Window(i64),
}

/// Turns one request line (without its newline) into a [`Request`], or says in one line
/// why not. Never panics, whatever the bytes.
pub fn parse_request(line: &[u8]) -> Result<Request, RequestError> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err(RequestError::TooLong);
    }
    let text = std::str::from_utf8(line).map_err(|_| RequestError::NotUtf8)?;
    if text.trim().is_empty() {
        return Err(RequestError::Empty);
    }
    let value: Value = serde_json::from_str(text).map_err(RequestError::NotJson)?;
    let Value::Object(mut object) = value else {
        return Err(RequestError::NotObject);
    };
    match object.remove("version") {
        None => return Err(RequestError::NoVersion),
        Some(Value::Number(n)) if n.as_u64() == Some(PROTOCOL_VERSION) => {}
        Some(other) => return Err(RequestError::Version(one_line(&other.to_string()))),
    }
    let wire: WireRequest =
        serde_json::from_value(Value::Object(object)).map_err(RequestError::Fields)?;
    let pid = |raw: i64| match i32::try_from(raw) {
        Ok(p) if p > 0 => Ok(Pid(p)),
        _ => Err(RequestError::Pid(raw)),
    };
    Ok(match wire {
        WireRequest::Status {} => Request::Status,
        WireRequest::List { all } => Request::List { all },
        WireRequest::Pause { pid: p } => Request::Pause { pid: pid(p)? },
        WireRequest::Resume { pid: p } => Request::Resume { pid: pid(p)? },
        WireRequest::Release { pid: p } => Request::Release { pid: pid(p)? },
        WireRequest::Reload {} => Request::Reload,
        WireRequest::Threads { window_ms } => Request::Threads {
            window_ms: match window_ms {
                None => threads::DEFAULT_WINDOW_MS,
                Some(ms) if (1..=MAX_WINDOW_MS as i64).contains(&ms) => ms as u64,
                Some(ms) => return Err(RequestError::Window(ms)),
            },
        },
    })
}

/// Text made into one line of at most 300 characters: control characters (newlines
/// included) become spaces, so a message quoting the client's bytes stays one log line.
pub(crate) fn one_line(text: &str) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(300)
        .collect();
    if text.chars().count() > 300 {
        out.push('…');
    }
    out
}

/// The daemon's state, as `status` answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// The daemon's pid.
    pub daemon_pid: i32,
    /// Seconds since it started.
    pub uptime_s: u64,
    /// [`crate::Config::summary`] of the running config.
    pub config: String,
    /// Whether it only observes (changes no affinity).
    pub observe: bool,
    /// Processes it manages (paused ones included).
    pub managed_processes: u64,
    /// The policy instances over them: processes that share CPUs under one policy and
    /// level are one group (see [`crate::group`]).
    #[serde(default)]
    pub groups: u64,
    /// Their threads.
    pub managed_threads: u64,
    /// Managed processes that are paused.
    pub paused_processes: u64,
}

/// One managed process, as `list` answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessEntry {
    /// Its pid.
    pub pid: i32,
    /// Its name.
    pub comm: String,
    /// The rule that matched it.
    pub rule: String,
    /// The policy it runs under.
    pub policy: String,
    /// Its threads.
    pub threads: u64,
    /// Whether it is paused.
    pub paused: bool,
    /// The group whose policy instance balances it (with every other process that shares
    /// its CPUs under the same policy and level); 0 when none.
    #[serde(default)]
    pub group: u64,
}

/// A process a rule almost matched, and why it is not managed (`ctl list --all`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// Its pid.
    pub pid: i32,
    /// Its name.
    pub comm: String,
    /// The rule it came closest to.
    pub rule: String,
    /// Why that rule did not match it, one line with the numbers
    /// ([`crate::rule::near_miss`]).
    pub why: String,
}

/// An answer, as it travels: `{"version":1,"response":…, …}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// [`PROTOCOL_VERSION`] of the daemon that answered.
    pub version: u64,
    /// What it said.
    #[serde(flatten)]
    pub reply: Reply,
}

/// What the daemon said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "response", rename_all = "snake_case")]
pub enum Reply {
    /// The answer to `status`.
    Status(Status),
    /// The answer to `list`.
    List {
        /// The managed processes.
        processes: Vec<ProcessEntry>,
        /// With `all`: the processes a rule almost matched, and why each is not managed
        /// (absent otherwise).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        candidates: Option<Vec<Candidate>>,
    },
    /// The answer to `threads`.
    Threads(ThreadsView),
    /// A request that changes something was carried out.
    Done {
        /// What was done, one line.
        message: String,
    },
    /// The request was refused, and nothing changed.
    Error {
        /// Why, one line.
        message: String,
    },
}

impl Response {
    /// An answer of this daemon's version.
    pub fn new(reply: Reply) -> Response {
        Response {
            version: PROTOCOL_VERSION,
            reply,
        }
    }

    /// An `error` answer.
    pub fn error(message: impl AsRef<str>) -> Response {
        Response::new(Reply::Error {
            message: one_line(message.as_ref()),
        })
    }

    /// What `threadbalance ctl` prints for this answer, and its exit status: 0 for an
    /// answer, 1 when the daemon refused the request.
    ///
    /// ```
    /// use threadbalance_daemon::control::{ProcessEntry, Reply, Response};
    /// let list = Response::new(Reply::List { processes: vec![ProcessEntry {
    ///     pid: 4242, comm: "ffmpeg".into(), rule: "busy".into(), policy: "speed".into(),
    ///     threads: 3, paused: true, group: 2 }], candidates: None });
    /// assert_eq!(list.render(), ("PID      COMM             RULE             POLICY           THREADS  STATE    GROUP\n\
    ///                             4242     ffmpeg           busy             speed            3        paused   2\n".into(), 0));
    /// assert_eq!(Response::error("4 is not managed").render(), ("error: 4 is not managed\n".into(), 1));
    /// ```
    pub fn render(&self) -> (String, i32) {
        match &self.reply {
            Reply::Status(s) => {
                let (h, m, sec) = (s.uptime_s / 3600, s.uptime_s / 60 % 60, s.uptime_s % 60);
                let mode = if s.observe {
                    "observing (changes nothing)"
                } else {
                    "managing"
                };
                (
                    format!(
                        "daemon pid {}, up {h}h {m}m {sec}s, {mode}\nconfig: {}\nmanaged: {} processes in {} group(s), {} threads, {} paused\n",
                        s.daemon_pid,
                        s.config,
                        s.managed_processes,
                        s.groups,
                        s.managed_threads,
                        s.paused_processes
                    ),
                    0,
                )
            }
            Reply::List {
                processes,
                candidates,
            } => {
                let mut out = format!(
                    "{:<8} {:<16} {:<16} {:<16} {:<8} {:<8} GROUP\n",
                    "PID", "COMM", "RULE", "POLICY", "THREADS", "STATE"
                );
                for p in processes {
                    let state = if p.paused { "paused" } else { "managed" };
                    out.push_str(&format!(
                        "{:<8} {:<16} {:<16} {:<16} {:<8} {state:<8} {}\n",
                        p.pid,
                        one_line(&p.comm),
                        p.rule,
                        p.policy,
                        p.threads,
                        p.group
                    ));
                }
                if let Some(candidates) = candidates {
                    out.push_str(&format!(
                        "\nnot managed ({}):\n{:<8} {:<16} {:<16} WHY\n",
                        candidates.len(),
                        "PID",
                        "COMM",
                        "RULE"
                    ));
                    for c in candidates {
                        out.push_str(&format!(
                            "{:<8} {:<16} {:<16} {}\n",
                            c.pid,
                            one_line(&c.comm),
                            c.rule,
                            one_line(&c.why)
                        ));
                    }
                }
                (out, 0)
            }
            Reply::Threads(view) => (view.to_text(), 0),
            Reply::Done { message } => (format!("{}\n", one_line(message)), 0),
            Reply::Error { message } => (format!("error: {}\n", one_line(message)), 1),
        }
    }

    /// The answer as one line of JSON, without the newline. JSON escapes every control
    /// character inside strings, so the line never breaks.
    pub fn to_line(&self) -> String {
        // Serializing these plain structs cannot fail; the fallback keeps the protocol.
        serde_json::to_string(self).unwrap_or_else(|_| {
            format!(r#"{{"version":{PROTOCOL_VERSION},"response":"error","message":"internal"}}"#)
        })
    }
}

/// What the daemon's loop does for the control socket. The server calls these from its own
/// thread, one request at a time; each [`Done`] and [`Refusal`] is one line for the
/// operator (a refusal means nothing changed).
pub trait Control: Send + Sync {
    /// The daemon's state.
    fn status(&self) -> Status;
    /// The managed processes.
    fn list(&self) -> Vec<ProcessEntry>;
    /// The processes a rule almost matched, with why each is not managed (none unless the
    /// daemon explains).
    fn candidates(&self) -> Vec<Candidate> {
        Vec::new()
    }
    /// Stop moving `pid`'s threads.
    fn pause(&self, pid: Pid) -> Result<Done, Refusal>;
    /// Manage a paused `pid` again.
    fn resume(&self, pid: Pid) -> Result<Done, Refusal>;
    /// Restore `pid`'s masks and leave it alone.
    fn release(&self, pid: Pid) -> Result<Done, Refusal>;
    /// Re-read the config (validate first; keep the running one if the new one is bad).
    fn reload(&self) -> Result<Done, Refusal>;
    /// The managed threads, by where they may run, with rates over about `window_ms`.
    fn threads(&self, window_ms: u64) -> ThreadsView;
}

/// Answers one request through `control`.
pub fn dispatch(control: &dyn Control, request: Request) -> Response {
    let done = |r: Result<Done, Refusal>| match r {
        Ok(done) => Response::new(Reply::Done {
            message: one_line(&done.to_string()),
        }),
        Err(refusal) => Response::error(crate::error::Chain(&refusal).to_string()),
    };
    match request {
        Request::Status => Response::new(Reply::Status(control.status())),
        Request::List { all } => Response::new(Reply::List {
            processes: control.list(),
            candidates: all.then(|| control.candidates()),
        }),
        Request::Pause { pid } => done(control.pause(pid)),
        Request::Resume { pid } => done(control.resume(pid)),
        Request::Release { pid } => done(control.release(pid)),
        Request::Reload => done(control.reload()),
        Request::Threads { window_ms } => Response::new(Reply::Threads(control.threads(window_ms))),
    }
}

/// Answers one request line: parsed by [`parse_request`] and dispatched, or an `error`
/// answer that names what was wrong (and `control` is not called).
pub fn answer(control: &dyn Control, line: &[u8]) -> Response {
    match parse_request(line) {
        Ok(request) => dispatch(control, request),
        Err(e) => Response::error(crate::error::Chain(&e).to_string()),
    }
}

#[cfg(test)]
#[path = "protocol_tests.rs"]
mod tests;
