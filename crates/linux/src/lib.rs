//! The Linux host of threadbalance: what the machine looks like (`/sys`), what each thread
//! did (`/proc`), and where threads may run (`sched_setaffinity`).
//!
//! ```text
//!   parse/   &str → model, pure and panic-free     stat, schedstat, status, numa_maps, sysfs
//!   read     Root → model, I/O at the edge         read_topology, read_threads, …
//!   sampler  the hot path                          pread on kept fds, Snapshot reuse; BPF counters weighed against /proc
//!   affinity a thread's mask, read and set           affinity_of, set_affinity (any size)
//!   actuate  sched_setaffinity, restore            Actuator (start-time checked)
//!   ledger   journal records, replay rules     what to put back, after any stop
//!   origin   whose mask is it?                 ours (the last set), the cpuset's, the program's
//!   setters  who set each mask (pure)           a trace's records → origin::Setter
//!   setbpf   that trace (feature `bpf`)          BPF on the sched_setaffinity tracepoints
//!   tracegate may it be attached? (one a process)  its cost bounded by the machine's system time
//!   state    journals and locks on disk      StateDir, Journal, SystemWorld
//!   untrusted files others may write         read_untrusted (no links, no FIFOs, capped), private dirs
//!   perf     hardware counters per thread     perf_event_open groups, or why none
//!   permit   may we manage it? (no writes)    refusal, may_set_affinity
//!   signal   every catchable fatal signal    a flag the control loop reads
//!   host     LinuxHost = Sampler + Actuator + Topology + CLOCK_MONOTONIC
//!   adapter  LinuxAdapter = LinuxHost + pidfd wait + signals + cost budget + lock probe:
//!            the host of the shared control loop (threadbalance_manage::LoopHost)
//!   futex    futex probe records → lock / sync wait per thread (pure)
//!   bpf      the futex probe itself (feature `bpf`): BPF on the futex tracepoints
//!   counted  what a faster run-time source answers  RunCounters, Counted (a leaf)
//!   detached the children that let BPF links go       never taken for the program's orphans (a leaf)
//!   holders  the shared counters' bookkeeping      Holders, ShareStats (pure, a leaf)
//!   runcount where run time comes from: /proc, or a faster source chosen by `choose`
//!   runshare one set of counters shared by many hosts (the daemon's), handed out per host
//!   schedbpf the faster source (feature `bpf`): BPF on sched_switch, read from mapped memory
//! ```
//!
//! The filesystem root and host facts (clock ticks per second, page size) are always
//! parameters, so every reader runs on the fixture trees under `fixtures/` as on `/`.
//!
//! ```
//! use threadbalance_linux::{Root, read_topology};
//! use threadbalance_model::Level;
//! let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/topo");
//! let topo = read_topology(&Root::new(format!("{fixtures}/2s-4n-32c-smt2"))).unwrap();
//! assert_eq!(topo.domains(Level::Package).len(), 2);
//! assert_eq!(topo.domains(Level::Node).len(), 4);
//! assert_eq!(topo.cpus().len(), 64);
//! ```

pub mod actuate;
pub mod adapter;
pub mod affinity;
#[cfg(feature = "bpf")]
pub mod bpf;
pub mod counted;
pub mod detached;
mod error;
pub mod futex;
pub mod holders;
pub mod host;
pub mod ledger;
pub mod origin;
pub mod parse;
pub mod perf;
pub mod permit;
pub mod read;
pub mod runcount;
pub mod runshare;
pub mod sampler;
#[cfg(feature = "bpf")]
pub mod schedbpf;
#[cfg(feature = "bpf")]
pub mod setbpf;
pub mod setters;
pub mod signal;
pub mod slice;
pub mod state;
pub mod tracegate;
pub mod untrusted;

pub use actuate::Actuator;
pub use adapter::LinuxAdapter;
pub use affinity::{affinity_of, set_affinity};
pub use error::{LinuxError, Malformed};
pub use host::{LinuxHost, monotonic_now};
pub use read::{
    Cpuset, HostFacts, Root, ThreadInfo, read_cpuset, read_numa_balancing, read_process_memory,
    read_start_time, read_threads, read_topology,
};
pub use sampler::{Sampler, SamplerConfig};
