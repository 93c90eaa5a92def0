//! Exact lock time on Linux, when the binary is built with the `bpf` feature: the futex
//! probe of `crate::bpf`, started with the host and read at every sample,
//! for a policy that reads lock time or wake edges (`shuffling`, `handoff`); while it runs,
//! samples also carry progress (`Sample::progress`: a thread's sync waits and wakes). Samples are
//! taken at the policy's own interval (Shuffling's 200 ms), so that is how often the probe
//! is read. For any other policy the probe is not loaded at all: attached, it slows every
//! futex call on the machine (about 0.7 µs), and nothing would read it.
//!
//! ```text
//!  before the command starts: LockProbe::start ─► loaded? ── no ──► ProbeOff, for the summary
//!  LinuxAdapter::set_lock_probe
//!  LinuxAdapter::sample ─► host.sample(snapshot) ─► LockProbe::fill(managed pids, snapshot)
//!                              track the pids, read the maps, Sample::lock = lock-wait ns
//!  end of run ─► LockProbe::report ─► Summary: "lock time: exact (futex probe)" and one
//!                                     figure per thread, or "estimate from blocked time (why)"
//! ```
//!
//! A probe that fails after it started (a map read refused) stops; lock time is estimated
//! from then on and the summary says why. Nothing about the probe is ever an error exit.

use serde::Serialize;
use threadbalance_model::{Pid, Snapshot};

/// Why the futex probe did not run, or stopped: one line, said in the summary after
/// "estimate from blocked time". The probe's refusal is shared ([`std::sync::Arc`]): the
/// report that holds it is cloned into the summary, and aya's errors, which it keeps as
/// sources, cannot be cloned; nor compared, so this is not either.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProbeOff {
    /// The policy reads neither lock time nor wake edges: the probe was not loaded.
    #[error("not loaded: policy {policy} does not read it")]
    NotRead {
        /// The policy's name.
        policy: &'static str,
    },
    /// This binary was built without the `bpf` feature.
    #[error("built without the bpf feature")]
    NotBuilt,
    /// Loading or attaching the probe failed.
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Refused(std::sync::Arc<crate::bpf::ProbeUnavailable>),
    /// A read failed after the probe started: lock time is estimated from then on.
    #[cfg(feature = "bpf")]
    #[error("futex probe stopped: {0}")]
    Stopped(#[source] std::sync::Arc<crate::bpf::ProbeUnavailable>),
}

/// In JSON, its line.
impl Serialize for ProbeOff {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One thread's futex waits over the run, as the summary reports them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadLock {
    /// The process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Seconds waiting on futex words classified as locks.
    pub lock_s: f64,
    /// Lock waits.
    pub lock_waits: u64,
    /// Seconds in other futex waits (join, condition variables, parkers, barriers, and
    /// what could not be told apart): "sync wait".
    pub sync_s: f64,
    /// Other futex waits.
    pub sync_waits: u64,
}

/// What the probe saw over a run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LockReport {
    /// Whether the probe ran until the end.
    pub exact: bool,
    /// Why it did not, when it did not.
    pub why_not: Option<ProbeOff>,
    /// Every thread that waited on a futex, by pid and tid.
    pub threads: Vec<ThreadLock>,
    /// Wake edges `(waker tid, woken tid, wake-ups)`.
    pub edges: Vec<(i32, i32, u64)>,
    /// Futex words classified as locks, and as sync.
    pub addresses: (usize, usize),
    /// Records the probe lost because a map was full (figures are then low).
    pub dropped: u64,
}

/// The probe, or why there is none.
#[derive(Debug)]
pub struct LockProbe {
    #[cfg(feature = "bpf")]
    probe: Option<crate::bpf::FutexProbe>,
    why_not: Option<ProbeOff>,
}

impl LockProbe {
    /// No probe, and nothing to say about it (until [`LockProbe::start`] is called).
    pub fn off() -> LockProbe {
        LockProbe {
            #[cfg(feature = "bpf")]
            probe: None,
            why_not: None,
        }
    }

    /// Starts the probe if this binary has it and the machine allows it. Loading takes a
    /// few hundred milliseconds of CPU (parsing the object, the verifier).
    #[cfg(feature = "bpf")]
    pub fn start() -> LockProbe {
        match crate::bpf::FutexProbe::load() {
            Ok(p) => LockProbe {
                probe: Some(p),
                why_not: None,
            },
            Err(e) => LockProbe {
                probe: None,
                why_not: Some(ProbeOff::Refused(e.into())),
            },
        }
    }

    /// Starts the probe when `policy` reads what it measures (exact lock time or wake
    /// edges, [`threadbalance_policy::Needs::lock_probe`]); otherwise leaves it unloaded,
    /// saying so. `run` starts it before its command, before the host opens.
    pub fn start_for(policy: &dyn threadbalance_policy::Policy) -> LockProbe {
        if policy.needs().lock_probe() {
            LockProbe::start()
        } else {
            LockProbe {
                #[cfg(feature = "bpf")]
                probe: None,
                why_not: Some(ProbeOff::NotRead {
                    policy: policy.name(),
                }),
            }
        }
    }

    /// Without the `bpf` feature there is no probe.
    #[cfg(not(feature = "bpf"))]
    pub fn start() -> LockProbe {
        LockProbe {
            why_not: Some(ProbeOff::NotBuilt),
        }
    }

    /// Traces `pids` from now on, before the first sample does: `run` calls it the moment
    /// it has started the program, so that the program's first lock waits are counted
    /// (the first sample comes only once the run-time counters have loaded, tens of ms
    /// later). A failure is left for the first sample to find and say.
    #[cfg(feature = "bpf")]
    pub fn track(&mut self, pids: &[Pid]) {
        if let Some(p) = self.probe.as_mut() {
            let _ = p.track(pids);
        }
    }

    /// Without the probe there is nothing to trace.
    #[cfg(not(feature = "bpf"))]
    pub fn track(&mut self, _pids: &[Pid]) {}

    /// Traces `pids` and sets each sample's exact lock time, while the probe runs.
    #[cfg(feature = "bpf")]
    pub fn fill(&mut self, pids: &[Pid], snap: &mut Snapshot) {
        let Some(p) = self.probe.as_mut() else {
            return;
        };
        let read = p.track(pids).and_then(|()| p.read().map(|t| t.fill(snap)));
        if let Err(e) = read {
            self.why_not = Some(ProbeOff::Stopped(e.into()));
            self.probe = None;
            for s in &mut snap.threads {
                s.lock = None;
                s.progress = None;
            }
        }
    }

    /// Without the probe, samples keep no lock time.
    #[cfg(not(feature = "bpf"))]
    pub fn fill(&mut self, _pids: &[Pid], _snap: &mut Snapshot) {}

    /// What the probe saw, read one last time (the threads may be gone; their counters are
    /// not).
    pub fn report(&mut self) -> LockReport {
        #[cfg(feature = "bpf")]
        if let Some(p) = self.probe.as_mut() {
            let totals = match p.read() {
                Ok(t) => t.clone(),
                Err(_) => p.totals().clone(),
            };
            return LockReport {
                exact: true,
                why_not: None,
                threads: totals
                    .threads
                    .iter()
                    .map(|t| ThreadLock {
                        pid: t.thread.0.0,
                        tid: t.thread.1.0,
                        lock_s: t.lock_ns as f64 / 1e9,
                        lock_waits: t.lock_waits,
                        sync_s: t.sync_ns as f64 / 1e9,
                        sync_waits: t.sync_waits,
                    })
                    .collect(),
                edges: totals
                    .edges
                    .iter()
                    .map(|&(a, b, n)| (a.1.0, b.1.0, n))
                    .collect(),
                addresses: (totals.lock_addresses, totals.sync_addresses),
                dropped: p.dropped(),
            };
        }
        LockReport {
            exact: false,
            why_not: self.why_not.clone(),
            ..LockReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_off_says_each_reason_in_one_line() {
        let cases = [
            (
                ProbeOff::NotRead { policy: "tumbler" },
                "not loaded: policy tumbler does not read it",
            ),
            (ProbeOff::NotBuilt, "built without the bpf feature"),
        ];
        #[cfg(feature = "bpf")]
        let cases = cases.into_iter().chain([
            (
                ProbeOff::Refused(
                    crate::bpf::ProbeUnavailable::NotRoot {
                        probe: crate::bpf::Probe::Futex,
                    }
                    .into(),
                ),
                "not root (the futex probe needs CAP_BPF and CAP_PERFMON)",
            ),
            (
                ProbeOff::Stopped(crate::bpf::ProbeUnavailable::Lacks { what: "waits" }.into()),
                "futex probe stopped: BPF object lacks waits",
            ),
        ]);
        for (why, line) in cases {
            assert_eq!(why.to_string(), line);
        }
    }

    #[test]
    fn probe_not_loaded_for_a_policy_that_does_not_read_it() {
        struct Still;
        impl threadbalance_policy::Policy for Still {
            fn name(&self) -> &'static str {
                "still"
            }
            fn decide(
                &mut self,
                _topo: &threadbalance_model::Topology,
                _window: &threadbalance_model::Window,
            ) -> threadbalance_model::Plan {
                threadbalance_model::Plan::default()
            }
        }
        let mut probe = LockProbe::start_for(&Still);
        let report = probe.report();
        assert!(!report.exact);
        assert!(
            matches!(report.why_not, Some(ProbeOff::NotRead { policy: "still" })),
            "{:?}",
            report.why_not
        );
        #[cfg(not(feature = "bpf"))]
        assert!(matches!(
            LockProbe::start().report().why_not,
            Some(ProbeOff::NotBuilt)
        ));
    }
}
