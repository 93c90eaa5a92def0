//! `threadbalance ctl`: asks the running daemon over its control socket.
//!
//! ```text
//!  ctl list ─► {"version":1,"request":"list"} ─► socket ─► daemon ─► one JSON answer
//!           ◄─ the answer rendered for a person, exit 0 (answered) or 1 (refused)
//! ```
//!
//! `--json` prints the daemon's answer as it came over the socket (one line of JSON, the
//! `control_response` shape of the schema) instead of the table, for every subcommand.
//!
//! Exit status: 0 when the daemon answered and did what was asked, 1 when it refused (a
//! process it does not manage, a bad config on reload) or could not be reached, 2 for a
//! bad argument.

use crate::input_error;
use anyhow::Result;
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::time::Duration;
use threadbalance_daemon::config::DEFAULT_CONTROL_SOCKET;
use threadbalance_daemon::control::threads::DEFAULT_WINDOW_MS;
use threadbalance_daemon::control::{MAX_WINDOW_MS, Request};
use threadbalance_model::Pid;

/// How long `ctl` waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `threadbalance ctl`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The daemon's control socket [default: /run/threadbalance/control.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print the daemon's answer as one line of JSON (as the socket gives it) instead of
    /// a table.
    #[arg(long, global = true)]
    pub json: bool,
    /// What to ask.
    #[command(subcommand)]
    pub request: CtlRequest,
}

/// What `ctl` asks the daemon.
#[derive(Debug, Subcommand)]
pub enum CtlRequest {
    /// The daemon's state: pid, uptime, config, processes managed.
    Status,
    /// The processes it manages, with their rule and policy.
    List {
        /// Also the processes a rule almost matched, and why each is not managed.
        #[arg(long)]
        all: bool,
    },
    /// Every managed thread by where it may run: utilization, speed, lock time, moves over
    /// the display window (what `top` shows); the first answer waits for one window.
    Threads {
        /// The window the rates are over, in milliseconds (1-60000).
        #[arg(long, value_name = "MS", default_value_t = DEFAULT_WINDOW_MS)]
        window_ms: u64,
    },
    /// Stop moving a process's threads (they stay where they are).
    Pause {
        /// The process.
        pid: i32,
    },
    /// Manage a paused process again.
    Resume {
        /// The process.
        pid: i32,
    },
    /// Restore a process's masks and leave it alone from now on.
    Release {
        /// The process.
        pid: i32,
    },
    /// Re-read the config file; a bad one is refused and the running one kept.
    Reload,
}

fn pid(p: i32) -> Result<Pid> {
    if p < 1 {
        return Err(input_error(format!("{p}: not a process id")));
    }
    Ok(Pid(p))
}

/// A display window given on the command line, checked.
pub fn window(ms: u64) -> Result<u64> {
    if !(1..=MAX_WINDOW_MS).contains(&ms) {
        return Err(input_error(format!(
            "--window-ms {ms}: must be within 1-{MAX_WINDOW_MS}"
        )));
    }
    Ok(ms)
}

/// `threadbalance ctl`.
pub fn run(args: &CtlArgs) -> Result<u8> {
    let request = match args.request {
        CtlRequest::Status => Request::Status,
        CtlRequest::List { all } => Request::List { all },
        CtlRequest::Threads { window_ms } => Request::Threads {
            window_ms: window(window_ms)?,
        },
        CtlRequest::Pause { pid: p } => Request::Pause { pid: pid(p)? },
        CtlRequest::Resume { pid: p } => Request::Resume { pid: pid(p)? },
        CtlRequest::Release { pid: p } => Request::Release { pid: pid(p)? },
        CtlRequest::Reload => Request::Reload,
    };
    let path = args
        .socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_SOCKET));
    let response = threadbalance_daemon::control::socket::request(&path, &request, TIMEOUT)?;
    let (text, code) = response.render();
    if args.json {
        out!("{}\n", response.to_line());
    } else if code == 0 {
        out!("{text}");
    } else {
        err!("threadbalance: {text}");
    }
    Ok(code.clamp(0, 255) as u8)
}
