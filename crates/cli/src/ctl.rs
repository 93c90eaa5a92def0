//! `threadbalance ctl`: asks the running daemon over its control socket.
//!
//! ```text
//!  ctl list ─► {"version":1,"request":"list"} ─► socket ─► daemon ─► one JSON answer
//!           ◄─ the answer rendered for a person, exit 0 (answered) or 1 (refused)
//! ```
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
use threadbalance_daemon::control::Request;
use threadbalance_model::Pid;

/// How long `ctl` waits for an answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Options of `threadbalance ctl`.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The daemon's control socket [default: /run/threadbalance/control.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
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
    List,
    /// Every managed thread by domain: utilization, speed, lock time, moves (what `top`
    /// shows).
    Threads,
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

/// `threadbalance ctl`.
pub fn run(args: &CtlArgs) -> Result<u8> {
    let request = match args.request {
        CtlRequest::Status => Request::Status,
        CtlRequest::List => Request::List,
        CtlRequest::Threads => Request::Threads,
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
    if code == 0 {
        out!("{text}");
    } else {
        err!("threadbalance: {text}");
    }
    Ok(code.clamp(0, 255) as u8)
}
