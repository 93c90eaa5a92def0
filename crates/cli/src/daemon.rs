//! `threadbalance daemon --config FILE.toml`: operator mode, a whole machine managed from
//! one config file (see the `threadbalance-daemon` crate for the config, the rules, the
//! control socket and the metrics).
//!
//! ```text
//!  log init ─► read config (bad: one line, exit 2) ─► replay journals of dead instances
//!  ─► bind metrics and control socket (refused: one line, exit 2) ─► the library's loop
//!  (`threadbalance_daemon::serve`) over the Linux host (`host.rs`) {
//!      every sample_ms: list processes, read each, facts over the window, match the rules
//!        matched, new ─► claimed and opened (its own journal)  ·  no longer matched ─► release
//!        groups re-formed: processes sharing CPUs under one policy and level are one
//!      each group: tick when its policy is due, over all its processes' threads
//!      publish status/list, metrics; answer ctl commands while waiting
//!      SIGHUP, ctl reload ─► a reload thread reads (capped, no FIFO wait) and parses the
//!        file; the loop goes on meanwhile (signals and ctl answered) and takes the result
//!        when ready (bad: keep the old one, one log line)
//!      SIGTERM, SIGINT, … ─► stop (also while a reload is under way)
//!  } ─► release every process (restore every mask) ─► exit 0 (1 if one could not be)
//! ```
//!
//! `--oneshot` matches once (over one window), places each matched process with one
//! policy decision and exits leaving the placement, as irqbalance's one-shot mode leaves
//! its IRQs; nothing is journaled, so nothing undoes it later. `--observe` (or
//! `observe = true`) decides and logs but changes no mask, as `--dry-run` does.

mod host;

use crate::input_error;
use anyhow::{Context, Result};
use clap::Args;
use host::{HostError, LinuxDaemon};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use threadbalance_daemon::control::channel::Snapshot;
use threadbalance_daemon::control::socket::{ControlServer, SocketError};
use threadbalance_daemon::error::Chain;
use threadbalance_daemon::log::FilterError;
use threadbalance_daemon::metrics::Metrics;
use threadbalance_daemon::metrics::exposition::{ExpositionError, Exposure, MetricsServer};
use threadbalance_daemon::serve::{Daemon, Start};
use threadbalance_daemon::{ConfigError, log, read};
use threadbalance_linux::Root;
use threadbalance_linux::signal;
use threadbalance_linux::state::StateDir;

/// Options of `threadbalance daemon`.
#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// The config file (see `packaging/threadbalance.toml`).
    #[arg(long, value_name = "FILE.toml")]
    pub config: PathBuf,
    /// Match and place once, then exit leaving the placement.
    #[arg(long)]
    pub oneshot: bool,
    /// Decide and report, change no mask (as the config's `observe = true`).
    #[arg(long)]
    pub observe: bool,
    /// Serve metrics here instead of the config's `metrics` address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// Log filter (`debug`, `warn,threadbalance_daemon=debug`) [default: $THREADBALANCE_LOG
    /// or info].
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// For tests of the setter trace: keep it whatever the machine's time in the kernel
    /// says it costs (docs/choices.md).
    #[arg(long, hide = true)]
    pub keep_trace: bool,
}

/// How long a `ctl` change may wait for the loop (inside the socket's 5 s per client).
const ANSWER_WITHIN: Duration = Duration::from_secs(4);

/// What stops the daemon before its loop starts, each the operator's to fix (exit 2).
#[derive(Debug, thiserror::Error)]
enum StartError {
    /// `--log-level` is not a filter.
    #[error("--log-level")]
    LogLevel(#[source] FilterError),
    /// The config file was rejected.
    #[error(transparent)]
    Config(ConfigError),
    /// The CPUs to use could not be worked out, or none are left.
    #[error(transparent)]
    Cpus(HostError),
    /// The metrics endpoint could not be served.
    #[error("metrics")]
    Metrics(#[source] ExpositionError),
    /// The control socket could not be served.
    #[error("control socket")]
    Control(#[source] SocketError),
}

impl StartError {
    /// The error as the binary reports it: bad input, said once (exit 2); a failure of
    /// the machine's, not the operator's, when reading its CPUs failed (exit 1).
    fn reported(self) -> anyhow::Error {
        match self {
            StartError::Cpus(e) if !e.is_input() => anyhow::Error::new(e),
            e => input_error(Chain(&e).to_string()),
        }
    }
}

/// `threadbalance daemon`.
pub fn run(args: &DaemonArgs) -> Result<u8> {
    if args.keep_trace {
        threadbalance_linux::tracegate::hold_open();
    }
    // Said first, as such: without it every later step fails on a permission of its own.
    // Root, or CAP_SYS_NICE as the packaged unit gives it.
    let system = Root::system();
    if !threadbalance_linux::permit::we_are_root(&system)
        && !threadbalance_linux::permit::we_may_renice_any(&system)
    {
        return Err(input_error(
            "daemon needs root (or CAP_SYS_NICE): it changes every user's threads and keeps \
             its journal and socket under /run; run it as root, or manage your own program \
             with `threadbalance run -- CMD` or `threadbalance attach --pid PID`",
        ));
    }
    let settings = log::LogSettings::detect(args.log_level.as_deref())
        .map_err(|e| StartError::LogLevel(e).reported())?;
    let config = read::read_config(&args.config).map_err(|e| StartError::Config(e).reported())?;
    let _ = log::init(&settings);
    let observe = args.observe || config.daemon.observe;
    let root = Root::system();
    let state = StateDir::new(&config.daemon.state_dir);
    crate::recover::ready_state_dir(&state)?;
    let (report, journals) = crate::recover::restore_tree(&state, &root)?;
    if journals > 0 {
        tracing::warn!(
            "{journals} journal(s) left by instances that died under {}: {}",
            state.path().display(),
            crate::recover::describe(&report)
        );
    }
    let usable = host::usable_cpus(&root, &config).map_err(|e| StartError::Cpus(e).reported())?;
    let ticks_per_sec = threadbalance_linux::HostFacts::system()?.ticks_per_sec;
    let metrics = Arc::new(Metrics::new());
    let host = LinuxDaemon::new(args.config.clone(), state, ticks_per_sec);
    let start = Start {
        users: read::read_users(&root).unwrap_or_default(),
        config,
        observe,
        usable,
        metrics: Arc::clone(&metrics),
    };
    let mut d = Daemon::new(host, start);
    signal::catch_fatal_signals().context("installing signal handlers")?;
    if args.oneshot {
        d.oneshot();
        return Ok(0);
    }
    serve(d, args.metrics, metrics)
}

/// Serves metrics and the control socket, runs the loop until a signal stops it, and
/// releases every process.
fn serve(
    mut d: Daemon<LinuxDaemon>,
    metrics_at: Option<SocketAddr>,
    metrics: Arc<Metrics>,
) -> Result<u8> {
    let daemon = &d.config().daemon;
    let exposition = match metrics_at.or(daemon.metrics) {
        Some(addr) => {
            let server = MetricsServer::bind(addr, Exposure::of(daemon))
                .map_err(|e| StartError::Metrics(e).reported())?;
            Some(
                server
                    .spawn(metrics, |e| tracing::warn!("metrics: {e}"))
                    .map_err(|e| StartError::Metrics(e).reported())?,
            )
        }
        None => None,
    };
    let (control, inbox) =
        threadbalance_daemon::control::channel::channel(Snapshot::default(), ANSWER_WITHIN);
    let server = ControlServer::bind(&daemon.control_socket)
        .map_err(|e| StartError::Control(e).reported())?
        .spawn(Arc::new(control), |e| tracing::warn!("control: {e}"))
        .map_err(|e| StartError::Control(e).reported())?;
    d.host_mut().serve_control(inbox);
    if let Some(e) = &exposition {
        tracing::info!("metrics on http://{}/metrics", e.local_addr());
    }
    let config = d.config();
    tracing::info!("control socket {}", config.daemon.control_socket.display());
    tracing::info!(
        "started: {}; {}; CPUs {}{}",
        config.file,
        config.summary(),
        d.usable().cpus,
        if d.observe() {
            "; observing, changing nothing"
        } else {
            ""
        }
    );
    let (released, looped) = d.run();
    server.stop();
    if let Some(e) = exposition {
        e.stop();
    }
    let failed = released.report.failures().count();
    let said = crate::recover::describe(&released.report);
    match &looped {
        Ok(sig) => tracing::info!("stopped by {}: {said}", signal::signal_name(*sig)),
        Err(e) => tracing::error!("stopped: {e}; {said}"),
    }
    looped?;
    Ok(if failed > 0 { 1 } else { 0 })
}
