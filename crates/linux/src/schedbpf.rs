//! The BPF run-time counters (feature `bpf`): the program of `bpf/sched.bpf.c` on the
//! scheduler tracepoints, loaded with aya, its counters array mapped into this process and
//! read with plain loads. It stands in for `/proc/<pid>/task/<tid>/schedstat` (and, when
//! the sampler reads them, `status`'s switch counts; see [`crate::runcount`]).
//!
//! ```text
//!  SchedProbe::load()  ── root? tracefs? verifier? mmap? ── no ──► Err(ProbeUnavailable)
//!        │ yes
//!  sched:sched_switch, sched:sched_wakeup, sched:sched_wakeup_new, task:task_newtask
//!        │
//!  refresh(pids)  pids into `targets` (their new threads get counters; a system call only
//!                 when the set changes), births, deaths, spawns from the mapped header
//!  get(tid)       slot tid & (SLOTS − 1), read from memory: run = run at the last switch
//!                 + (now − on CPU since), wait, slices, switches, CPU, state
//!  seed(tid, s)   a thread first read from /proc: it claims its slot with those values
//! ```
//!
//! Why the values match `schedstat`'s: the slot of a thread the sampler finds starts
//! from what `/proc` said (`seed`), and the program adds to it exactly what the kernel
//! adds to the thread's own counters: time between switch-in and switch-out (run), time
//! between a wake-up or a preemption and the next switch-in (wait, the kernel's
//! `run_delay`), one per switch-in (timeslices, `pcount`), one per switch-out as blocked
//! or not (`nvcsw`, `nivcsw`). A thread created by a traced process starts at zero, as the
//! kernel's counters do. A thread seeded while running may keep running unseen until its
//! next switch (a spinner alone on its CPU), so until then `get` says nothing and the
//! sampler reads `/proc` for it. The differences: run time of a running thread is counted
//! up to now here, where `schedstat` stops at the last scheduler tick (up to 4 ms behind
//! at 250 Hz); run time is wall time on a CPU (`bpf_ktime_get_ns`), where the kernel's
//! leaves out time stolen by the hypervisor and, with IRQ time accounting, interrupts;
//! and the wait of a thread still queued is counted up to now too (`queued_since`), where
//! the kernel adds it only at the switch-in that ends it or when the thread moves to
//! another run queue. So every read is exact at its instant: a thread queued behind its
//! core's other thread shows its wait in the window it waited, not in a later one.
//!
//! Cost: each switch of any thread on the machine costs two array slots looked at in the
//! kernel (no hash lookup); a read costs no system call: about ten loads per thread. Two
//! managed threads whose tids share a slot (tids 16384 apart): the later one is read from
//! `/proc`.

pub mod shared;
mod slots;

use crate::bpf::{Links, Probe, ProbeUnavailable};
use crate::counted::{Counted, RunCounters};
use crate::{LinuxError, monotonic_now};
use aya::{Ebpf, include_bytes_aligned};
pub use slots::{Claim, Raw, SLOTS, Slots};
use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd};
use threadbalance_model::{CpuId, Nanos, Pid, Sample, ThreadState, Tid};

/// The compiled program (see `bpf/build.sh`).
pub static SCHED_OBJECT: &[u8] = include_bytes_aligned!("../bpf/sched.bpf.o");

/// `(program, category, tracepoint)` triples.
const ATTACH: [(&str, &str, &str); 4] = [
    ("on_switch", "sched", "sched_switch"),
    ("on_wakeup", "sched", "sched_wakeup"),
    ("on_wakeup_new", "sched", "sched_wakeup_new"),
    ("on_newtask", "task", "task_newtask"),
];

/// The loaded, attached scheduler counters.
pub struct SchedProbe {
    // `slots` is declared first: it is unmapped before the program and its maps go; the
    // links next: detached, all at once, before the program goes.
    slots: Slots,
    _links: Links,
    ebpf: Ebpf,
    tracked: HashSet<i32>,
    /// Ktime of the last refresh: a running thread's run time is counted up to it.
    now: u64,
    /// Births, deaths and spawns as of the last refresh.
    events: [u64; 3],
}

impl std::fmt::Debug for SchedProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedProbe")
            .field("tracked", &self.tracked)
            .field("slots", &self.slots)
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
fn bits_of(state: ThreadState) -> u32 {
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

/// One slot as the sampler sees it at `now` (ktime ns), or `None` when it cannot vouch
/// for it: seeded as running and not switched since, or exited.
pub fn counted(v: &Raw, now: u64) -> Option<Counted> {
    if v.seeded != 0 && v.on_since != 0 {
        return None;
    }
    let state = state_of(u64::from(v.state));
    if matches!(state, ThreadState::Zombie | ThreadState::Dead) {
        return None;
    }
    // Run time and wait are both counted up to now. `schedstat` stops a running thread's
    // run time at the last scheduler tick and adds a queued thread's wait only at the
    // switch-in that ends it, so over a window of a few ms a thread queued behind its
    // core's other thread reads as neither running nor waiting (as if asleep), and its
    // whole wait arrives later at once. A balancer judges who was held back from exactly
    // that wait; see `speed`'s "Counters reported late".
    let running = if v.on_since != 0 {
        now.saturating_sub(v.on_since)
    } else {
        0
    };
    let queued = if v.on_since == 0 && v.queued_since != 0 {
        now.saturating_sub(v.queued_since)
    } else {
        0
    };
    Some(Counted {
        sched: crate::parse::SchedStat {
            run: Nanos(v.run + running),
            wait: Nanos(v.wait + queued),
            timeslices: v.slices,
        },
        last_cpu: CpuId(v.cpu),
        state: if v.on_since != 0 || v.queued_since != 0 {
            ThreadState::Running
        } else {
            state
        },
        voluntary: v.voluntary,
        involuntary: v.involuntary,
    })
}

/// The slot a thread read from `/proc` starts from, at `now` (ktime ns): a thread `stat`
/// says is running is taken as on a CPU since now.
pub fn seeded(s: &Sample, now: u64) -> Raw {
    let running = s.state == ThreadState::Running;
    Raw {
        run: s.run.0,
        wait: s.wait.0,
        slices: s.timeslices,
        cpu: s.last_cpu.0,
        state: bits_of(s.state),
        on_since: if running { now } else { 0 },
        queued_since: 0,
        voluntary: s.voluntary,
        involuntary: s.involuntary,
        seeded: 1,
    }
}

/// Loads the program, maps its counters and attaches it to the tracepoints (shared by
/// [`SchedProbe::load`] and the daemon's [`shared::SharedProbe::load`]), or says why it
/// cannot.
pub(crate) fn open() -> Result<(Ebpf, Slots, Links), ProbeUnavailable> {
    if !nix::unistd::geteuid().is_root() {
        return Err(ProbeUnavailable::NotRoot {
            probe: Probe::Counters,
        });
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
        return Err(ProbeUnavailable::NoTracefs);
    }
    // The program reads only its tracepoint records (no CO-RE relocations).
    let mut ebpf = crate::bpf::load_object(SCHED_OBJECT)?;
    let slots = match ebpf.map("counters") {
        Some(aya::maps::Map::Array(data)) => {
            Slots::map(data.fd().as_fd().as_raw_fd()).map_err(ProbeUnavailable::MapCounters)?
        }
        _ => return Err(ProbeUnavailable::Lacks { what: "counters" }),
    };
    let mut links = Links::default();
    for (name, category, tracepoint) in ATTACH {
        crate::bpf::attach_tracepoint(&mut ebpf, name, category, tracepoint, &mut links)?;
    }
    Ok((ebpf, slots, links))
}

/// Letting the counters go (the run ended, or they cost the program too much:
/// [`crate::sampler::weigh`]) takes the kernel a grace period per tracepoint, one after
/// the other (about 60 ms each on the 2-core VM), and the program runs at every switch
/// meanwhile. So first it is given nothing to count ([`RunCounters::quiesce`]).
impl Drop for SchedProbe {
    fn drop(&mut self) {
        self.quiesce();
    }
}

impl SchedProbe {
    /// Loads and attaches the program, or says why it cannot.
    pub fn load() -> Result<SchedProbe, ProbeUnavailable> {
        let (ebpf, slots, links) = open()?;
        let events = slots.events();
        Ok(SchedProbe {
            slots,
            _links: links,
            ebpf,
            tracked: HashSet::new(),
            now: 0,
            events,
        })
    }

    /// Counts the threads of exactly the processes `pids` from now on.
    fn track(&mut self, pids: &[Pid]) -> Result<(), ProbeUnavailable> {
        if pids.len() == self.tracked.len() && pids.iter().all(|p| self.tracked.contains(&p.0)) {
            return Ok(());
        }
        crate::bpf::track_targets(&mut self.ebpf, &mut self.tracked, pids)
    }

    /// The mapped counters (for tests and benchmarks).
    pub fn slots(&self) -> &Slots {
        &self.slots
    }
}

impl RunCounters for SchedProbe {
    /// No target process (births, deaths and spawns go uncounted) and no slot (every
    /// switch finds none: one array lookup and a compare).
    fn quiesce(&mut self) {
        let _ = self.track(&[]);
        self.slots.free_all();
    }

    fn name(&self) -> &'static str {
        "BPF sched_switch counters"
    }

    fn refresh(&mut self, pids: &[Pid]) -> Result<bool, LinuxError> {
        self.track(pids)
            .map_err(|e| LinuxError::io("bpf counters", std::io::Error::other(e)))?;
        self.now = monotonic_now().0;
        let events = self.slots.events();
        let changed = events[..2] != self.events[..2];
        self.events = events;
        Ok(changed)
    }

    fn get(&self, tid: Tid) -> Option<Counted> {
        counted(&self.slots.read(tid.0)?, self.now)
    }

    fn seed(&mut self, tid: Tid, sample: &Sample) {
        // A thread the program already counts keeps its counts; a slot another live
        // thread holds leaves this one to /proc.
        let _ = self.slots.claim(tid.0, &seeded(sample, monotonic_now().0));
    }

    fn forget(&mut self, tid: Tid) {
        self.slots.free(tid.0);
    }

    fn births(&self) -> Option<u64> {
        Some(self.events[0])
    }

    fn births_now(&self) -> Option<u64> {
        Some(self.slots.events()[0])
    }

    fn spawns(&self) -> Option<u64> {
        Some(self.events[2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(run: u64, wait: u64, slices: u64, on_since: u64, state: u32, seeded: u64) -> Raw {
        Raw {
            run,
            wait,
            slices,
            cpu: 1,
            state,
            on_since,
            seeded,
            ..Raw::default()
        }
    }

    #[test]
    fn counted_running_thread_adds_the_time_since_its_switch_in() {
        // Ran 5 ms up to its last switch, on a CPU since t = 1000 ns; read at t = 4000:
        // run = 5_000_000 + (4000 − 1000) = 5_003_000.
        let v = raw(5_000_000, 700, 3, 1000, 0, 0);
        let c = counted(&v, 4000).unwrap();
        assert_eq!(c.sched.run, Nanos(5_003_000));
        assert_eq!(c.sched.wait, Nanos(700));
        assert_eq!(c.sched.timeslices, 3);
        assert_eq!(c.last_cpu, CpuId(1));
        assert_eq!(c.state, ThreadState::Running);
    }

    #[test]
    fn counted_queued_thread_adds_the_wait_since_it_was_queued() {
        // Waited 700 ns up to its last switch-in, preempted at t = 3000 and still queued
        // at t = 4500: wait = 700 + (4500 − 3000) = 2200, where the kernel's run_delay
        // would still read 700 until the thread runs again.
        let v = Raw {
            queued_since: 3000,
            ..raw(5_000_000, 700, 3, 0, 0, 0)
        };
        let c = counted(&v, 4500).unwrap();
        assert_eq!(c.sched.wait, Nanos(2200));
        assert_eq!(c.sched.run, Nanos(5_000_000));
        assert_eq!(c.state, ThreadState::Running);
        // Read again after its switch-in at t = 5000 (the program added the 2000 ns and
        // cleared `queued_since`): the wait does not go back.
        let v = raw(5_000_000, 2700, 4, 5000, 0, 0);
        let c = counted(&v, 6000).unwrap();
        assert_eq!(c.sched.wait, Nanos(2700));
        assert_eq!(c.sched.run, Nanos(5_001_000));
    }

    #[test]
    fn counted_running_thread_adds_no_wait_whatever_queued_since_says() {
        // On a CPU since t = 1000: the time since then is run time, never wait.
        let v = Raw {
            queued_since: 500,
            ..raw(5_000_000, 700, 3, 1000, 0, 0)
        };
        let c = counted(&v, 4000).unwrap();
        assert_eq!(c.sched.wait, Nanos(700));
        assert_eq!(c.sched.run, Nanos(5_003_000));
    }

    #[test]
    fn counted_seeded_running_thread_is_left_to_proc() {
        // Seeded while `stat` said R, and no switch since: it may be spinning unseen.
        let v = raw(5_000_000, 0, 3, 1000, 0, 1);
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
            voluntary: 3,
            involuntary: 1,
            ..Sample::default()
        };
        let c = counted(&seeded(&s, 100), 10_000).unwrap();
        assert_eq!(
            (c.sched.run, c.sched.wait, c.sched.timeslices),
            (Nanos(9), Nanos(2), 4)
        );
        assert_eq!((c.voluntary, c.involuntary), (3, 1));
        assert_eq!(c.state, ThreadState::Sleeping);
    }

    #[test]
    fn counted_exited_thread_is_left_to_proc() {
        let v = raw(1, 0, 1, 0, 0x20, 0);
        assert_eq!(counted(&v, 10), None);
    }

    #[test]
    fn slot_of_wraps_tids_16384_apart_onto_one_slot() {
        // 16384 slots: tid 5 and tid 5 + 16384 share slot 5; tid 16383 is the last slot.
        assert_eq!(Slots::slot_of(5), 5);
        assert_eq!(Slots::slot_of(5 + 16384), 5);
        assert_eq!(Slots::slot_of(16383), 16383);
        assert_eq!(SLOTS, 16384);
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
            assert_eq!(state_of(u64::from(bits_of(s))), s);
        }
    }
}
