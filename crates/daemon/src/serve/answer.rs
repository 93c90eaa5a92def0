//! The loop's answers to `ctl`: pause, resume and release carried out at once, a reload
//! started on the host and answered when it is done.
//!
//! ```text
//!  ctl pause/resume/release ─► carry_out ─► Done | Refusal (nothing changed)
//!  ctl reload, SIGHUP ─► host.start_reload ─► … loop goes on … ─► host.reload_done
//!     ─► new config valid: it runs, CPUs re-read ─► Done::Reloaded to every waiting ctl
//!     ─► bad: the running one kept, one log line ─► Refusal::Reload
//! ```

use super::managed::{Restored, Why};
use super::{Daemon, DaemonHost};
use crate::Config;
use crate::control::channel::{Command, Pending};
use crate::control::{Done, Refusal};
use crate::error::{Chain, ReloadError};
use threadbalance_model::Pid;

impl<H: DaemonHost> Daemon<H> {
    /// Carries out a `ctl` change and answers it.
    pub(super) fn carry_out(&mut self, p: Pending) {
        let result = match p.command {
            Command::Reload => {
                // Answered when the reload is done (see `finish_reload`).
                self.start_reload(Some(p));
                return;
            }
            Command::Pause(pid) => self.pause(pid, true),
            Command::Resume(pid) => self.pause(pid, false),
            Command::Release(pid) => self.release_by_ctl(pid),
            Command::Threads => {
                self.publish_threads();
                Ok(Done::ThreadsPublished)
            }
        };
        p.answer(result);
    }

    /// `ctl pause` (`pause`) or `ctl resume`.
    fn pause(&mut self, pid: Pid, pause: bool) -> Result<Done, Refusal> {
        let m = self.managed.get_mut(&pid).ok_or(Refusal::NotManaged(pid))?;
        match (pause, m.paused) {
            (true, true) => Err(Refusal::AlreadyPaused(pid)),
            (false, false) => Err(Refusal::NotPaused(pid)),
            (true, false) => {
                m.paused = true;
                tracing::info!("pid {pid} ({}) paused", m.comm);
                Ok(Done::Paused {
                    pid,
                    comm: m.comm.clone(),
                })
            }
            (false, true) => {
                m.paused = false;
                tracing::info!("pid {pid} ({}) resumed", m.comm);
                Ok(Done::Resumed {
                    pid,
                    comm: m.comm.clone(),
                })
            }
        }
    }

    /// `ctl release`: restores the process's masks and leaves it alone from now on.
    fn release_by_ctl(&mut self, pid: Pid) -> Result<Done, Refusal> {
        let m = self.managed.get(&pid).ok_or(Refusal::NotManaged(pid))?;
        let (start, comm) = (m.start, m.comm.clone());
        self.released.insert((pid, start));
        let report = self
            .release(pid, Why::Ctl)
            .ok_or(Refusal::NotManaged(pid))?;
        let restored = report.to_string();
        if report.failures() > 0 {
            Err(Refusal::ReleasedWithFailures {
                pid,
                comm,
                restored,
            })
        } else {
            Ok(Done::Released {
                pid,
                comm,
                restored,
            })
        }
    }

    /// SIGHUP and `ctl reload` (`answer`): has the host start reading the file; a reload
    /// already under way answers this one too.
    pub(super) fn start_reload(&mut self, answer: Option<Pending>) {
        if let Some(waiting) = &mut self.reloading {
            waiting.extend(answer);
            return;
        }
        let waiting: Vec<Pending> = answer.into_iter().collect();
        match self.host.start_reload(&self.config) {
            Ok(()) => self.reloading = Some(waiting),
            Err(e) => {
                let refusal = Refusal::Reload(e);
                tracing::warn!("{}", Chain(&refusal));
                for p in waiting {
                    p.answer(Err(refusal.clone()));
                }
            }
        }
    }

    /// Takes the result of the reload under way when it is ready, and answers the `ctl
    /// reload`s that wait for it.
    pub(super) fn finish_reload(&mut self) {
        if self.reloading.is_none() {
            return;
        }
        let Some(parsed) = self.host.reload_done() else {
            return;
        };
        let waiting = self.reloading.take().unwrap_or_default();
        match self.reload(parsed) {
            Ok(summary) => {
                for p in waiting {
                    p.answer(Ok(Done::Reloaded {
                        summary: summary.clone(),
                    }));
                }
            }
            Err(refusal) => {
                for p in waiting {
                    p.answer(Err(refusal.clone()));
                }
            }
        }
    }

    /// The new config replaces the running one only if valid (`parsed` is the host's
    /// result); returns its summary.
    fn reload(&mut self, parsed: Result<Config, ReloadError>) -> Result<String, Refusal> {
        let (socket, metrics) = (
            self.config.daemon.control_socket.clone(),
            self.config.daemon.metrics,
        );
        let new = match parsed {
            Ok(new) => new,
            Err(e) => {
                let refusal = Refusal::Reload(e);
                tracing::warn!("{}", Chain(&refusal));
                return Err(refusal);
            }
        };
        if new.daemon.control_socket != socket || new.daemon.metrics != metrics {
            tracing::info!("control_socket and metrics changes take effect at restart");
        }
        self.config = new;
        match self.host.usable_cpus(&self.config) {
            Ok(usable) => {
                self.usable = usable;
                self.metrics.clear_domains();
            }
            Err(e) => tracing::warn!(
                "after reload: {}; keeping CPUs {}",
                Chain(&e),
                self.usable.cpus
            ),
        }
        let summary = self.config.summary();
        tracing::info!("reloaded: {summary}");
        Ok(summary)
    }
}
