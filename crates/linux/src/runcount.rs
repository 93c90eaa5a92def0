//! Where run time comes from: `/proc` (the default) or a faster source the sampler asks
//! first, and the one-line choice between them.
//!
//! The sampler's cost is the kernel formatting `task/<tid>/schedstat` for every thread on
//! every sample (about 1 µs a thread). A [`RunCounters`] source answers the same three
//! numbers (run ns, run-queue wait ns, timeslices), plus the last CPU, the state and the
//! voluntary and involuntary switch counts, for every managed thread: the sampler calls
//! [`RunCounters::refresh`] once per sample, then [`RunCounters::get`] per thread, which
//! reads memory the kernel writes (no system call). A thread the
//! source cannot vouch for (`get` is `None`) is read from `/proc` as before, and the
//! source is then told what `/proc` said ([`RunCounters::seed`]), so both speak in the
//! same cumulative counters and a thread can pass from one to the other between two
//! samples without a jump in its deltas.
//!
//! ```text
//!  choose(&mut host) ── built with `bpf`, root, tracefs, loads? ── no ──► /proc (why, one line)
//!        │ yes
//!        ▼
//!  Sampler::set_counters(SchedProbe)   sched_switch / sched_wakeup(_new) counters, a mapped array
//!  each sample:  refresh (births, deaths) ─► get(tid) per thread from memory, /proc when None
//! ```
//!
//! `stat` (start time, user and system time) is still read from `/proc`: the first time,
//! then for a thread the source answers for at most every
//! [`crate::sampler::COUNTED_STAT_MAX_AGE`] (5 s; its last CPU and state come from the
//! source, fresh, and the window reads user and system time only without `schedstat`),
//! for the others as [`crate::SamplerConfig::stat_max_age`] says. `status` (when the
//! sampler reads it, [`crate::SamplerConfig::read_status`]) is read only for threads the
//! source does not answer for: the others' switch counts come from it, continued from
//! `status`'s own (a seeded thread's values include them). The task directories are still
//! listed (only when their link count changes, or when the source saw a thread born or
//! die).

pub use crate::counted::{Counted, RunCounters};

/// The run-time source `choose` picked.
#[derive(Debug, Clone)]
pub enum RunSource {
    /// `/proc/<pid>/task/<tid>/schedstat`, with why the faster source is not used.
    Proc(WhyProc),
    /// A faster source, by name.
    Fast(&'static str),
}

impl RunSource {
    /// How [`RunSource::describe`]'s line for `/proc` begins.
    const PROC_LINE: &'static str = "run time from /proc";

    /// One line for the log or the summary.
    pub fn describe(&self) -> String {
        match self {
            RunSource::Proc(why) => format!("{} ({why})", Self::PROC_LINE),
            RunSource::Fast(name) => format!("run time from {name}"),
        }
    }

    /// Whether a line [`RunSource::describe`] wrote (a run's summary, read back) names
    /// `/proc`.
    pub fn described_proc(line: &str) -> bool {
        line.starts_with(Self::PROC_LINE)
    }
}

/// Gives `host`'s sampler the fastest run-time source this build and machine allow: the
/// BPF scheduler counters when built with the `bpf` feature and the program loads (root,
/// tracefs mounted, verifier content); `/proc` otherwise, with the reason.
pub fn choose(host: &mut crate::LinuxHost) -> RunSource {
    give_loaded(host, load())
}

/// Loads the fastest run-time source this build and machine allow, with no host yet to
/// give it to, or says why there is none ([`choose`] gives it at once; `run` loads it
/// before it starts its command, see [`Counters::Loaded`]).
pub fn load() -> Result<Box<dyn RunCounters>, NoCounters> {
    #[cfg(feature = "bpf")]
    {
        crate::schedbpf::SchedProbe::load()
            .map(|probe| Box::new(probe) as Box<dyn RunCounters>)
            .map_err(NoCounters::Refused)
    }
    #[cfg(not(feature = "bpf"))]
    {
        Err(NoCounters::NotBuilt)
    }
}

/// Why a host reads its run time from `/proc` ([`RunSource::Proc`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum WhyProc {
    /// The faster source could not be loaded for this host (shared: a source is cloned
    /// into the run's summary).
    #[error(transparent)]
    NoCounters(std::sync::Arc<NoCounters>),
    /// The daemon's shared counters, which this host would read, are off.
    #[error("the daemon's shared counters are off")]
    SharedOff,
}

impl From<NoCounters> for WhyProc {
    fn from(why: NoCounters) -> WhyProc {
        WhyProc::NoCounters(std::sync::Arc::new(why))
    }
}

/// Why the faster run-time source is not used ([`load`]); said in [`RunSource::Proc`].
#[derive(Debug, thiserror::Error)]
pub enum NoCounters {
    /// The BPF program could not be loaded or attached.
    #[cfg(feature = "bpf")]
    #[error(transparent)]
    Refused(crate::bpf::ProbeUnavailable),
    /// This build has no BPF programs.
    #[error("built without the bpf feature")]
    NotBuilt,
}

/// Gives `host`'s sampler the source [`load`] loaded, or leaves it on `/proc` with why.
fn give_loaded(
    host: &mut crate::LinuxHost,
    loaded: Result<Box<dyn RunCounters>, NoCounters>,
) -> RunSource {
    match loaded {
        Ok(counters) => {
            let name = counters.name();
            host.sampler_mut().set_counters(counters);
            RunSource::Fast(name)
        }
        Err(why) => RunSource::Proc(why.into()),
    }
}

/// Where a host's run time comes from, as whoever opens it says
/// ([`crate::LinuxAdapter::with_counters`]).
#[derive(Debug)]
pub enum Counters {
    /// The fastest this build and machine allow, loaded for this host alone and announced
    /// by it ([`announce`]): `attach`, `top`.
    Choose,
    /// What [`load`] gave before the process was there: `run` loads the counters before it
    /// starts its command, so that the first sample comes as soon as the command has
    /// started. Loading them takes 15 ms in a release build on an idle 2-core VM and 70 ms
    /// in a debug one, far more on a busy machine: a thread that lived and ended meanwhile
    /// was never seen (the command's threads are found by listing its task directory; the
    /// counters follow the ones born after that). Announced as [`Counters::Choose`] is,
    /// when given: a command that cannot be started gets its one line of error alone.
    Loaded(Result<Box<dyn RunCounters>, NoCounters>),
    /// This source (a handle on counters several hosts share: the daemon's, see
    /// [`crate::runshare`]), or `/proc` when `None`; nothing is loaded or said here, the
    /// owner of the shared counters says it once.
    Given(Option<Box<dyn RunCounters>>),
}

impl Counters {
    /// Gives `host`'s sampler its run-time source, and says which it is.
    pub fn give(self, host: &mut crate::LinuxHost) -> RunSource {
        match self {
            Counters::Choose => announce(host),
            Counters::Loaded(loaded) => say(give_loaded(host, loaded)),
            Counters::Given(Some(c)) => {
                host.sampler_mut().keep_counters();
                give_loaded(host, Ok(c))
            }
            Counters::Given(None) => RunSource::Proc(WhyProc::SharedOff),
        }
    }
}

/// [`choose`], and one line on standard error saying which source runs (or why the
/// faster one does not) when the build has the faster one. Built without it, nothing
/// is said: `/proc` is the only source there is.
pub fn announce(host: &mut crate::LinuxHost) -> RunSource {
    say(choose(host))
}

/// The line [`announce`] writes, for `source`.
fn say(source: RunSource) -> RunSource {
    if cfg!(feature = "bpf") {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), "threadbalance: {}", source.describe());
    }
    source
}
