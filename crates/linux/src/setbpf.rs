//! The trace of who sets masks (feature `bpf`): the BPF program of `bpf/setaffinity.bpf.c`
//! on the `sched_setaffinity` syscall tracepoints, loaded with aya as the futex probe is
//! ([`crate::bpf`]), read through [`crate::setters::TraceState`].
//!
//! ```text
//!  shared()  ── loaded already in this process? ── yes ──► the same trace (the daemon's
//!     │ no                                                  hosts share one)
//!     ▼
//!  SetterProbe::load(tool = our pid) ── root? tracefs? verifier? ── no ──► Err(why)
//!     config = { tool tgid, our pid namespace's device and inode }
//!     1 tracepoint: syscalls:sys_enter_sched_setaffinity (the call and its mask)
//!  record(tid)   one map lookup (a system call), at each judgement of a thread's mask
//! ```
//!
//! Every `sched_setaffinity` on the machine costs a tracepoint hit, a few map operations
//! and a copy of the mask asked for; programs call it rarely (at thread start, when a pool
//! pins its workers).
//! The tool's own sets are recorded too, so that each record says which came last. But a
//! syscall tracepoint puts every task of the machine on the system-call slow path for
//! every call, which is what the trace really costs: `crate::tracegate` bounds it, and the
//! hosts let the trace go where it could cost more than the tool's budget.

use crate::bpf::{Links, Probe, ProbeUnavailable, attach_tracepoint};
use crate::setters::{RECORD_WORDS, SetRecord, TraceState};
use aya::maps::{Array, HashMap, MapData};
use aya::{Ebpf, include_bytes_aligned};
use std::os::unix::fs::MetadataExt;
use std::sync::{Arc, Mutex, Weak};
use threadbalance_model::Tid;

/// The compiled program (see `bpf/build.sh`).
pub static SETAFFINITY_OBJECT: &[u8] = include_bytes_aligned!("../bpf/setaffinity.bpf.o");

/// `(program, tracepoint)` pairs.
/// One: a second, on the exit, would keep every system call of the machine slow for
/// another grace period when the trace is let go (see `bpf/setaffinity.bpf.c`).
const ATTACH: [(&str, &str); 1] = [("setaffinity_enter", "sys_enter_sched_setaffinity")];

/// The loaded, attached trace.
pub struct SetterProbe {
    // Declared first: detached before the programs and maps go.
    _links: Links,
    ebpf: Mutex<Ebpf>,
}

impl std::fmt::Debug for SetterProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetterProbe").finish_non_exhaustive()
    }
}

/// The trace this process loaded, while some host still holds it.
static SHARED: Mutex<Weak<SetterProbe>> = Mutex::new(Weak::new());

/// The trace of this process: the one already loaded if a host still holds it, else a new
/// one ([`SetterProbe::load`]). Dropped with its last holder.
pub fn shared() -> Result<Arc<SetterProbe>, ProbeUnavailable> {
    let mut slot = SHARED.lock().map_err(|_| ProbeUnavailable::Poisoned {
        what: "the trace's lock",
    })?;
    if let Some(probe) = slot.upgrade() {
        return Ok(probe);
    }
    let probe = Arc::new(SetterProbe::load(std::process::id())?);
    *slot = Arc::downgrade(&probe);
    Ok(probe)
}

/// The device (as the kernel numbers it) and inode of our pid namespace; `(0, 0)` when
/// it cannot be read (every caller is then taken to share it).
fn our_pid_namespace() -> (u64, u64) {
    match std::fs::metadata("/proc/self/ns/pid") {
        Ok(m) => {
            let dev = m.dev();
            let (major, minor) = (u64::from(libc::major(dev)), u64::from(libc::minor(dev)));
            ((major << 20) | minor, m.ino())
        }
        Err(_) => (0, 0),
    }
}

impl SetterProbe {
    /// Loads and attaches the program, the calls of process `tool` counted as the tool's,
    /// or says why it cannot.
    pub fn load(tool: u32) -> Result<SetterProbe, ProbeUnavailable> {
        if !nix::unistd::geteuid().is_root() {
            return Err(ProbeUnavailable::NotRoot {
                probe: Probe::Setters,
            });
        }
        let have = |base: &str| {
            std::path::Path::new(base)
                .join("syscalls")
                .join(ATTACH[0].1)
                .is_dir()
        };
        if !have("/sys/kernel/tracing/events") && !have("/sys/kernel/debug/tracing/events") {
            return Err(ProbeUnavailable::NoTracepoint {
                name: "sched_setaffinity",
            });
        }
        let mut ebpf = crate::bpf::load_object(SETAFFINITY_OBJECT)?;
        {
            let map = ebpf
                .map_mut("config")
                .ok_or(ProbeUnavailable::Lacks { what: "config" })?;
            let mut config: Array<&mut MapData, u64> =
                Array::try_from(map).map_err(|source| ProbeUnavailable::MapKind {
                    map: "config",
                    source,
                })?;
            let (dev, ino) = our_pid_namespace();
            for (i, v) in [u64::from(tool), dev, ino].into_iter().enumerate() {
                config
                    .set(i as u32, v, 0)
                    .map_err(|source| ProbeUnavailable::MapWrite {
                        map: "config",
                        source,
                    })?;
            }
        }
        let mut links = Links::default();
        for (name, tracepoint) in ATTACH {
            attach_tracepoint(&mut ebpf, name, "syscalls", tracepoint, &mut links)?;
        }
        Ok(SetterProbe {
            _links: links,
            ebpf: Mutex::new(ebpf),
        })
    }
}

impl TraceState for SetterProbe {
    fn record(&self, tid: Tid) -> Option<SetRecord> {
        let ebpf = self.ebpf.lock().ok()?;
        let sets: HashMap<&MapData, u64, [u64; RECORD_WORDS]> =
            HashMap::try_from(ebpf.map("sets")?).ok()?;
        let key = u64::try_from(tid.0).ok()?;
        sets.get(&key, 0).ok().map(SetRecord::from_words)
    }

    fn foreign(&self) -> u64 {
        let Ok(ebpf) = self.ebpf.lock() else {
            // Unreadable: vouch for nothing.
            return u64::MAX;
        };
        ebpf.map("foreign")
            .and_then(|m| Array::<&MapData, u64>::try_from(m).ok())
            .and_then(|a| a.get(&0, 0).ok())
            .unwrap_or(u64::MAX)
    }
}
