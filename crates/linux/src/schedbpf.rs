//! The BPF run-time counters (feature `bpf`): the program of `bpf/sched.bpf.c` on the
//! scheduler tracepoints, loaded with aya, read in one batch per sample. It stands in for
//! `/proc/<pid>/task/<tid>/schedstat` (see [`crate::runcount`]).
//!
//! ```text
//!  SchedProbe::load()  ── root? tracefs? verifier? ── no ──► Err(ProbeUnavailable)
//!        │ yes
//!  sched:sched_switch, sched:sched_wakeup, sched:sched_wakeup_new
//!        │
//!  refresh(pids)  pids into `targets` (their new threads get counters), then the whole
//!                 `counters` map in one BPF_MAP_LOOKUP_BATCH call (4096 entries a call)
//!  get(tid)       run = run at the last switch + (now − on CPU since), wait, slices, CPU
//!  seed(tid, s)   a thread first read from /proc: its entry starts from those values
//! ```
//!
//! Why the values match `schedstat`'s: the entry of a thread the sampler finds starts
//! from what `/proc` said (`seed`), and the program adds to it exactly what the kernel
//! adds to the thread's own counters: time between switch-in and switch-out (run), time
//! between a wake-up or a preemption and the next switch-in (wait, the kernel's
//! `run_delay`), one per switch-in (timeslices, `pcount`). A thread created by a traced
//! process starts at zero, as the kernel's counters do. A thread seeded while running may
//! keep running unseen until its next switch (a spinner alone on its CPU), so until then
//! `get` says nothing and the sampler reads `/proc` for it. The one difference: run time
//! of a running thread is counted up to now here, where `schedstat` stops at the last
//! scheduler tick (up to 4 ms behind at 250 Hz).
//!
//! Cost: each switch of any thread on the machine costs two hash lookups in the kernel
//! (most miss); a read costs one system call per 4096 threads, and one per thread that
//! left since the last read (its entry is deleted).

use crate::bpf::ProbeUnavailable;
use crate::runcount::{Counted, RunCounters};
use crate::{LinuxError, monotonic_now};
use aya::maps::{HashMap as BpfHash, MapData};
use aya::programs::TracePoint;
use aya::{Ebpf, include_bytes_aligned};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, AsRawFd};
use threadbalance_model::{CpuId, Pid, Sample, ThreadState, Tid};

/// The compiled program (see `bpf/build.sh`).
pub static SCHED_OBJECT: &[u8] = include_bytes_aligned!("../bpf/sched.bpf.o");

/// `(program, tracepoint)` pairs, all in the `sched` category.
const ATTACH: [(&str, &str); 3] = [
    ("on_switch", "sched_switch"),
    ("on_wakeup", "sched_wakeup"),
    ("on_wakeup_new", "sched_wakeup_new"),
];

/// The map's extra keys (past any tid): births and deaths of traced threads.
const KEY_BIRTHS: u64 = 1 << 32;
const KEY_DEATHS: u64 = (1 << 32) + 1;

/// A value's fields, in the order of `struct counters`.
const RUN: usize = 0;
const WAIT: usize = 1;
const SLICES: usize = 2;
const CPU: usize = 3;
const ON_SINCE: usize = 4;
const QUEUED_SINCE: usize = 5;
const STATE: usize = 6;
const SEEDED: usize = 7;

/// Entries fetched per batch call.
const BATCH: usize = 4096;

type Value = [u64; 8];

/// The loaded, attached scheduler counters.
pub struct SchedProbe {
    ebpf: Ebpf,
    /// The `counters` map's descriptor (owned by `ebpf`).
    fd: i32,
    tracked: HashSet<i32>,
    table: HashMap<i32, Counted>,
    keys: Vec<u64>,
    values: Vec<Value>,
    births: u64,
    deaths: u64,
    /// Whether the kernel takes batch lookups (Linux 5.6+); else the map is iterated.
    batch: bool,
}

impl std::fmt::Debug for SchedProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedProbe")
            .field("tracked", &self.tracked)
            .field("threads", &self.table.len())
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}

/// The state a switch-out recorded (`prev_state & 0xff`: one bit per state letter,
/// 0 for runnable) as a [`ThreadState`].
pub fn state_of(bits: u64) -> ThreadState {
    match bits {
        0 => ThreadState::Running,
        b if b & 0x20 != 0 => ThreadState::Zombie,
        b if b & 0x10 != 0 => ThreadState::Dead,
        b if b & 0x01 != 0 => ThreadState::Sleeping,
        b if b & 0x02 != 0 => ThreadState::DiskSleep,
        b if b & 0x0c != 0 => ThreadState::Stopped,
        b if b & 0x80 != 0 => ThreadState::Idle,
        _ => ThreadState::Other,
    }
}

/// The bits `state_of` reads, for a state read from `/proc`.
fn bits_of(state: ThreadState) -> u64 {
    match state {
        ThreadState::Running => 0,
        ThreadState::Sleeping => 0x01,
        ThreadState::DiskSleep => 0x02,
        ThreadState::Stopped => 0x04,
        ThreadState::Dead => 0x10,
        ThreadState::Zombie => 0x20,
        ThreadState::Idle => 0x80,
        ThreadState::Other => 0x40,
    }
}

/// One entry as the sampler sees it at `now` (ktime ns), or `None` when it cannot vouch
/// for it: seeded as running and not switched since, or exited.
pub fn counted(v: &Value, now: u64) -> Option<Counted> {
    let on_since = v[ON_SINCE];
    if v[SEEDED] != 0 && on_since != 0 {
        return None;
    }
    let state = state_of(v[STATE]);
    if matches!(state, ThreadState::Zombie | ThreadState::Dead) {
        return None;
    }
    let running = if on_since != 0 {
        now.saturating_sub(on_since)
    } else {
        0
    };
    Some(Counted {
        sched: crate::parse::SchedStat {
            run: threadbalance_model::Nanos(v[RUN] + running),
            wait: threadbalance_model::Nanos(v[WAIT]),
            timeslices: v[SLICES],
        },
        last_cpu: CpuId(u32::try_from(v[CPU]).unwrap_or(0)),
        state: if on_since != 0 || v[QUEUED_SINCE] != 0 {
            ThreadState::Running
        } else {
            state
        },
    })
}

/// The value a thread read from `/proc` starts from, at `now` (ktime ns): a thread `stat`
/// says is running is taken as on a CPU since now.
pub fn seeded(s: &Sample, now: u64) -> Value {
    let running = s.state == ThreadState::Running;
    [
        s.run.0,
        s.wait.0,
        s.timeslices,
        u64::from(s.last_cpu.0),
        if running { now } else { 0 },
        0,
        bits_of(s.state),
        1,
    ]
}

impl SchedProbe {
    /// Loads and attaches the program, or says why it cannot.
    pub fn load() -> Result<SchedProbe, ProbeUnavailable> {
        if !nix::unistd::geteuid().is_root() {
            return Err(ProbeUnavailable(
                "not root (the BPF counters need CAP_BPF and CAP_PERFMON)".into(),
            ));
        }
        let have = |tp: &str| {
            [
                "/sys/kernel/tracing/events/sched",
                "/sys/kernel/debug/tracing/events/sched",
            ]
            .iter()
            .any(|e| std::path::Path::new(e).join(tp).is_dir())
        };
        if !have("sched_switch") {
            return Err(ProbeUnavailable(
                "tracefs not mounted (mount -t tracefs tracefs /sys/kernel/tracing)".into(),
            ));
        }
        // The program reads only its tracepoint records (no CO-RE relocations), so the
        // kernel's BTF, 5 MB that take tens of milliseconds to parse, is not loaded.
        let mut ebpf = aya::EbpfLoader::new()
            .btf(None)
            .load(SCHED_OBJECT)
            .map_err(|e| ProbeUnavailable(format!("BPF object refused: {e}")))?;
        for (name, tracepoint) in ATTACH {
            let prog: &mut TracePoint = ebpf
                .program_mut(name)
                .ok_or_else(|| ProbeUnavailable(format!("BPF object lacks {name}")))?
                .try_into()
                .map_err(|e| ProbeUnavailable(format!("{name}: {e}")))?;
            prog.load()
                .map_err(|e| ProbeUnavailable(format!("verifier refused {name}: {e}")))?;
            prog.attach("sched", tracepoint)
                .map_err(|e| ProbeUnavailable(format!("cannot attach to {tracepoint}: {e}")))?;
        }
        let fd = match ebpf.map("counters") {
            Some(aya::maps::Map::HashMap(data)) => data.fd().as_fd().as_raw_fd(),
            _ => return Err(ProbeUnavailable("BPF object lacks counters".into())),
        };
        Ok(SchedProbe {
            ebpf,
            fd,
            tracked: HashSet::new(),
            table: HashMap::new(),
            keys: vec![0; BATCH],
            values: vec![[0; 8]; BATCH],
            births: 0,
            deaths: 0,
            batch: true,
        })
    }

    fn counters(&mut self) -> Result<BpfHash<&mut MapData, u64, Value>, ProbeUnavailable> {
        let map = self
            .ebpf
            .map_mut("counters")
            .ok_or_else(|| ProbeUnavailable("BPF object lacks counters".into()))?;
        BpfHash::try_from(map).map_err(|e| ProbeUnavailable(e.to_string()))
    }

    /// Counts the threads of exactly the processes `pids` from now on.
    fn track(&mut self, pids: &[Pid]) -> Result<(), ProbeUnavailable> {
        crate::bpf::track_targets(&mut self.ebpf, &mut self.tracked, pids)
    }

    /// Fills `keys`/`values` with the whole map; returns how many entries.
    fn read_all(&mut self) -> Result<usize, ProbeUnavailable> {
        if self.batch {
            match lookup_batch(self.fd, &mut self.keys, &mut self.values) {
                Ok(n) => return Ok(n),
                // Kernels before 5.6 have no batch operations: iterate from then on.
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => self.batch = false,
                Err(e) => return Err(ProbeUnavailable(format!("reading counters: {e}"))),
            }
        }
        let mut keys = std::mem::take(&mut self.keys);
        let mut values = std::mem::take(&mut self.values);
        keys.clear();
        values.clear();
        let read = self.counters().map(|map| {
            for (k, v) in map.iter().flatten() {
                keys.push(k);
                values.push(v);
            }
        });
        let n = keys.len();
        keys.resize(n.max(BATCH), 0);
        values.resize(n.max(BATCH), [0; 8]);
        self.keys = keys;
        self.values = values;
        read.map(|()| n)
    }
}

/// The `bpf(2)` attribute of the batch commands (`union bpf_attr`, `batch` member).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

/// `BPF_MAP_LOOKUP_BATCH`.
const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// Reads every entry of hash map `fd` into `keys`/`values` (growing them as needed), a
/// batch of `keys.len()` entries per call; returns how many.
fn lookup_batch(fd: i32, keys: &mut Vec<u64>, values: &mut Vec<Value>) -> std::io::Result<usize> {
    let mut n = 0usize;
    let mut token: u64 = 0;
    let mut first = true;
    loop {
        if keys.len() - n < BATCH {
            keys.resize(n + BATCH, 0);
            values.resize(n + BATCH, [0; 8]);
        }
        let mut next: u64 = 0;
        let mut attr = BatchAttr {
            in_batch: if first { 0 } else { &raw const token as u64 },
            out_batch: &raw mut next as u64,
            keys: keys[n..].as_mut_ptr() as u64,
            values: values[n..].as_mut_ptr() as u64,
            count: BATCH as u32,
            map_fd: fd as u32,
            ..BatchAttr::default()
        };
        // SAFETY: `attr` is a valid `bpf_attr` prefix for BPF_MAP_LOOKUP_BATCH; the key and
        // value buffers have room for `count` (BATCH) entries of the map's key size (8) and
        // value size (64) past index `n` (resized above); the batch tokens are 8-byte
        // locals that outlive the call (the hash map's token is 4 bytes).
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                &raw mut attr,
                std::mem::size_of::<BatchAttr>(),
            )
        };
        let err = (rc < 0).then(std::io::Error::last_os_error);
        n += attr.count as usize;
        match err {
            None => {}
            Some(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(n),
            Some(e) => return Err(e),
        }
        token = next;
        first = false;
    }
}

impl RunCounters for SchedProbe {
    fn name(&self) -> &'static str {
        "BPF sched_switch counters"
    }

    fn refresh(&mut self, pids: &[Pid], threads: usize) -> Result<bool, LinuxError> {
        let fail = |e: ProbeUnavailable| LinuxError::io("bpf counters", std::io::Error::other(e.0));
        self.track(pids).map_err(fail)?;
        if threads < crate::runcount::FAST_FROM_THREADS {
            self.table.clear();
            return Ok(false);
        }
        let n = self.read_all().map_err(fail)?;
        let now = monotonic_now().0;
        self.table.clear();
        let (mut births, mut deaths) = (self.births, self.deaths);
        for (key, v) in self.keys[..n].iter().zip(&self.values[..n]) {
            match *key {
                KEY_BIRTHS => births = v[RUN],
                KEY_DEATHS => deaths = v[RUN],
                k => {
                    if let (Ok(tid), Some(c)) = (i32::try_from(k), counted(v, now)) {
                        self.table.insert(tid, c);
                    }
                }
            }
        }
        let changed = births != self.births || deaths != self.deaths;
        self.births = births;
        self.deaths = deaths;
        Ok(changed)
    }

    fn get(&self, tid: Tid) -> Option<Counted> {
        self.table.get(&tid.0).copied()
    }

    fn seed(&mut self, tid: Tid, sample: &Sample) {
        let value = seeded(sample, monotonic_now().0);
        if let Ok(mut map) = self.counters() {
            // BPF_NOEXIST: a thread the program already counts keeps its counts. A full
            // map leaves the thread to /proc.
            let _ = map.insert(tid.0 as u64, value, 1);
        }
    }

    fn forget(&mut self, tid: Tid) {
        self.table.remove(&tid.0);
        if let Ok(mut map) = self.counters() {
            let _ = map.remove(&(tid.0 as u64));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::Nanos;

    #[test]
    fn counted_running_thread_adds_the_time_since_its_switch_in() {
        // Ran 5 ms up to its last switch, on a CPU since t = 1000 ns; read at t = 4000:
        // run = 5_000_000 + (4000 − 1000) = 5_003_000.
        let v = [5_000_000, 700, 3, 1, 1000, 0, 0, 0];
        let c = counted(&v, 4000).unwrap();
        assert_eq!(c.sched.run, Nanos(5_003_000));
        assert_eq!(c.sched.wait, Nanos(700));
        assert_eq!(c.sched.timeslices, 3);
        assert_eq!(c.last_cpu, CpuId(1));
        assert_eq!(c.state, ThreadState::Running);
    }

    #[test]
    fn counted_seeded_running_thread_is_left_to_proc() {
        // Seeded while `stat` said R, and no switch since: it may be spinning unseen.
        let v = [5_000_000, 0, 3, 1, 1000, 0, 0, 1];
        assert_eq!(counted(&v, 4000), None);
    }

    #[test]
    fn counted_seeded_sleeper_stands_as_seeded() {
        let s = Sample {
            run: Nanos(9),
            wait: Nanos(2),
            timeslices: 4,
            last_cpu: CpuId(1),
            state: ThreadState::Sleeping,
            ..Sample::default()
        };
        let c = counted(&seeded(&s, 100), 10_000).unwrap();
        assert_eq!(
            (c.sched.run, c.sched.wait, c.sched.timeslices),
            (Nanos(9), Nanos(2), 4)
        );
        assert_eq!(c.state, ThreadState::Sleeping);
    }

    #[test]
    fn counted_exited_thread_is_left_to_proc() {
        let v = [1, 0, 1, 0, 0, 0, 0x20, 0];
        assert_eq!(counted(&v, 10), None);
    }

    #[test]
    fn state_of_maps_the_tracepoint_bits() {
        assert_eq!(state_of(0), ThreadState::Running);
        assert_eq!(state_of(1), ThreadState::Sleeping);
        assert_eq!(state_of(2), ThreadState::DiskSleep);
        assert_eq!(state_of(0x80), ThreadState::Idle);
        for s in [
            ThreadState::Running,
            ThreadState::Sleeping,
            ThreadState::DiskSleep,
            ThreadState::Stopped,
            ThreadState::Zombie,
            ThreadState::Dead,
            ThreadState::Idle,
        ] {
            assert_eq!(state_of(bits_of(s)), s);
        }
    }
}
