//! Who set each thread's mask: what a trace of `sched_setaffinity` records per thread, and
//! what that says to [`crate::origin::judge`]. The trace itself is the BPF program of
//! `bpf/setaffinity.bpf.c` (`crate::setbpf`, feature `bpf`); this part is pure.
//!
//! ```text
//!  every sched_setaffinity on the machine (one syscall tracepoint, at the call's entry)
//!    target tid ─► SetRecord { program sets, last program set, its setter, the mask it
//!                              asked for, last set of ours }
//!                    "ours": the caller's tgid is the tool's; anyone else is "the program"
//!  SetRecord::setter(thread's start, its mask now)
//!     ─► Setter::Program  someone else set it after us, and the mask now is within what
//!                         they asked for (their call took effect)
//!        Setter::Tool     we set it last
//!        Setter::Unknown  no record since the thread started, or the program's last call
//!                         asked for a mask the thread does not have (refused, or not yet
//!                         in effect): the masks decide
//! ```
//!
//! **Whether a call took effect.** The trace sees a call enter, not return: a second
//! tracepoint, on the exit, kept every system call of the machine on the slow path for
//! another grace period when the trace was let go (`bpf/setaffinity.bpf.c`). The kernel
//! gives the thread the mask asked for, cut down to the CPUs its cpuset allows, or refuses
//! and leaves the mask as it was. So a thread whose mask now lies within the mask the
//! program asked for got it (a refused call changes nothing, and a refusal of a mask that
//! held the thread's own CPUs would have had nothing to refuse); one whose mask does not
//! was refused, or its call has not yet taken effect, and the masks decide, as without a
//! trace. Only the first 512 CPUs of a mask are kept: a thread allowed a CPU beyond them
//! is judged from its masks.
//!
//! **Since the thread started.** A record is kept per tid, and tids are reused: a set
//! made before the thread's start time (`/proc`'s, in clock ticks since boot; the trace
//! stamps its records on the same clock, `CLOCK_BOOTTIME`) belonged to an earlier thread
//! with the same tid and is not counted.
//!
//! **What the trace cannot see.** A set that names another thread by its tid from another
//! pid namespace (a container's tool setting its threads' masks, as the container numbers
//! them) cannot be attributed: the trace counts it apart ([`TraceState::foreign`]), and
//! once one has been seen it no longer vouches that a mask is ours ([`Setter::Tool`]
//! becomes [`Setter::Unknown`]: the masks decide, as without a trace). A record the trace
//! had to evict (65,536 threads) is no record: the masks decide. Two sets of the same
//! thread within microseconds of each other, by the tool and by its program, may be
//! recorded in the order their system calls entered rather than the order they took
//! effect.

use crate::origin::Setter;
use std::sync::Arc;
use threadbalance_model::{CpuSet, Pid, ThreadKey, Tid};

/// The words of a record in the trace's map: four, the length word, then the mask.
pub const RECORD_WORDS: usize = 5 + MASK_WORDS;
/// The words of the mask a record keeps (512 CPUs).
pub const MASK_WORDS: usize = 8;

/// What the trace recorded of one thread (one tid).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SetRecord {
    /// Calls by anyone but the tool (taken effect or not).
    pub program_sets: u64,
    /// When the last of them was made, ns since boot (`CLOCK_BOOTTIME`).
    pub program_ns: u64,
    /// Who made it: its process and thread.
    pub setter: (Pid, Tid),
    /// The mask it asked for, up to [`MASK_WORDS`] words (`None`: it could not be read).
    pub asked: Option<CpuSet>,
    /// When the tool's last set was made, ns since boot (0: none).
    pub ours_ns: u64,
}

impl SetRecord {
    /// The record as the trace's map holds it: `[program sets, program ns, setter as
    /// tgid << 32 | tid, ours ns, 1 + the mask's bytes read (0: unreadable), the mask's
    /// words]`.
    pub fn from_words(w: [u64; RECORD_WORDS]) -> SetRecord {
        let asked = (w[4] > 0).then(|| CpuSet::from_words(&w[5..]));
        SetRecord {
            program_sets: w[0],
            program_ns: w[1],
            setter: (Pid((w[2] >> 32) as i32), Tid((w[2] & 0xffff_ffff) as i32)),
            asked,
            ours_ns: w[3],
        }
    }

    /// Who set the mask of a thread that started at `start_ns` (ns since boot) last,
    /// counting only the sets made since it started; `current` is its mask now (see
    /// "Whether a call took effect" in the module docs).
    pub fn setter(&self, start_ns: u64, current: &CpuSet) -> Setter {
        let program = self.program_sets > 0 && self.program_ns >= start_ns;
        let ours = self.ours_ns > 0 && self.ours_ns >= start_ns;
        if program && (!ours || self.program_ns > self.ours_ns) {
            // A mask that could not be read cannot say the call was refused: it counts.
            let took = self.asked.as_ref().is_none_or(|a| current.is_subset(a));
            return if took {
                Setter::Program
            } else {
                Setter::Unknown
            };
        }
        if ours { Setter::Tool } else { Setter::Unknown }
    }
}

/// What the trace holds now: a record per tid, and how many sets it could not attribute.
pub trait TraceState: std::fmt::Debug + Send + Sync {
    /// The record of `tid`, `None` when there is none (never set since the trace loaded,
    /// or evicted).
    fn record(&self, tid: Tid) -> Option<SetRecord>;
    /// Sets naming another thread from another pid namespace (never attributed).
    fn foreign(&self) -> u64;
}

/// A trace of who sets masks, shared by every actuator of the process (the daemon's
/// hosts): read-only lookups, one system call each.
#[derive(Debug, Clone)]
pub struct Trace {
    state: Arc<dyn TraceState>,
    /// Clock ticks per second of `/proc`'s start times.
    ticks_per_sec: u64,
}

impl Trace {
    /// A trace reading `state`, with thread start times counted in `ticks_per_sec`.
    pub fn new(state: Arc<dyn TraceState>, ticks_per_sec: u64) -> Trace {
        Trace {
            state,
            ticks_per_sec: ticks_per_sec.max(1),
        }
    }

    /// Who set the mask of thread `key` last since it started, `current` being its mask
    /// now (see the module docs).
    pub fn setter(&self, key: ThreadKey, current: &CpuSet) -> Setter {
        let Some(record) = self.state.record(key.tid) else {
            return Setter::Unknown;
        };
        let start_ns = u128::from(key.start_time) * 1_000_000_000 / u128::from(self.ticks_per_sec);
        let start_ns = u64::try_from(start_ns).unwrap_or(u64::MAX);
        match record.setter(start_ns, current) {
            Setter::Tool if self.state.foreign() > 0 => Setter::Unknown,
            s => s,
        }
    }
}

/// [`crate::LinuxAdapter::choices_source`] when the trace runs.
pub const TRACED: &str = "masks set by the program traced (sched_setaffinity)";

/// [`crate::LinuxAdapter::choices_source`] when it does not, and `why`.
pub fn judged(why: impl std::fmt::Display) -> String {
    format!("program's masks judged from the masks alone ({why})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    #[derive(Debug, Default)]
    struct Fake {
        records: Mutex<BTreeMap<i32, SetRecord>>,
        foreign: Mutex<u64>,
    }

    impl TraceState for Fake {
        fn record(&self, tid: Tid) -> Option<SetRecord> {
            self.records.lock().unwrap().get(&tid.0).cloned()
        }
        fn foreign(&self) -> u64 {
            *self.foreign.lock().unwrap()
        }
    }

    fn rec(program_sets: u64, program_ns: u64, ours_ns: u64) -> SetRecord {
        SetRecord {
            program_sets,
            program_ns,
            setter: (Pid(5), Tid(6)),
            asked: None,
            ours_ns,
        }
    }

    fn cpus(list: &str) -> CpuSet {
        CpuSet::parse_list(list).unwrap()
    }

    #[test]
    fn record_words_and_order_of_sets_decide_the_setter() {
        let mut words = [0u64; RECORD_WORDS];
        words[..5].copy_from_slice(&[2, 900, (5u64 << 32) | 6, 500, 0]);
        let r = SetRecord::from_words(words);
        assert_eq!(r, rec(2, 900, 500));
        let any = cpus("0-3");
        // The program after us, us after the program, us alone, the program alone.
        assert_eq!(rec(2, 900, 500).setter(0, &any), Setter::Program);
        assert_eq!(rec(2, 400, 500).setter(0, &any), Setter::Tool);
        assert_eq!(rec(0, 0, 500).setter(0, &any), Setter::Tool);
        assert_eq!(rec(1, 400, 0).setter(0, &any), Setter::Program);
        assert_eq!(rec(0, 0, 0).setter(0, &any), Setter::Unknown);
        // Sets before the thread started were an earlier thread's with the same tid.
        assert_eq!(rec(2, 900, 500).setter(1000, &any), Setter::Unknown);
        assert_eq!(rec(2, 900, 500).setter(600, &any), Setter::Program);
        assert_eq!(rec(2, 400, 500).setter(450, &any), Setter::Tool);
    }

    #[test]
    fn a_program_set_counts_only_where_the_thread_has_a_mask_within_what_it_asked() {
        // CPUs 1 and 3 asked for (the words as the trace keeps them: 1 + 8 bytes read).
        let mut words = [0u64; RECORD_WORDS];
        words[..6].copy_from_slice(&[1, 900, (5u64 << 32) | 6, 500, 9, 0b1010]);
        let r = SetRecord::from_words(words);
        assert_eq!(r.asked, Some(cpus("1,3")));
        // Taken effect: the mask asked for, or that cut down by a cpuset.
        assert_eq!(r.setter(0, &cpus("1,3")), Setter::Program);
        assert_eq!(r.setter(0, &cpus("3")), Setter::Program);
        // Refused or not yet in effect (the thread still has our mask): the masks decide,
        // and our set, made before the call, no longer says the mask is ours.
        assert_eq!(r.setter(0, &cpus("0")), Setter::Unknown);
        assert_eq!(r.setter(0, &cpus("1-3")), Setter::Unknown);
        // An empty mask asked for (1 + 0 bytes read) was refused whatever the thread has.
        let mut empty = [0u64; RECORD_WORDS];
        empty[..5].copy_from_slice(&[1, 900, (5u64 << 32) | 6, 0, 1]);
        let r = SetRecord::from_words(empty);
        assert_eq!(r.asked, Some(CpuSet::new()));
        assert_eq!(r.setter(0, &cpus("0")), Setter::Unknown);
        // Our set after the program's call decides, whatever the program asked for.
        let mut later = words;
        later[3] = 1000;
        assert_eq!(
            SetRecord::from_words(later).setter(0, &cpus("0")),
            Setter::Tool
        );
    }

    #[test]
    fn trace_converts_start_ticks_and_distrusts_ours_after_a_foreign_set() {
        let fake = Arc::new(Fake::default());
        let trace = Trace::new(fake.clone(), 100);
        let key = |tid, start_time| ThreadKey {
            pid: Pid(5),
            tid: Tid(tid),
            start_time,
        };
        let any = cpus("0-3");
        assert_eq!(trace.setter(key(6, 0), &any), Setter::Unknown);
        // Thread 6 started at tick 2 (20 ms): we set it at 30 ms, the program at 40 ms.
        fake.records
            .lock()
            .unwrap()
            .insert(6, rec(1, 40_000_000, 30_000_000));
        assert_eq!(trace.setter(key(6, 2), &any), Setter::Program);
        // A thread 6 that started at tick 5 (50 ms): those sets were another thread's.
        assert_eq!(trace.setter(key(6, 5), &any), Setter::Unknown);
        fake.records
            .lock()
            .unwrap()
            .insert(7, rec(0, 0, 30_000_000));
        assert_eq!(trace.setter(key(7, 2), &any), Setter::Tool);
        // Once a set from another pid namespace was seen, ours is no longer vouched for.
        *fake.foreign.lock().unwrap() = 1;
        assert_eq!(trace.setter(key(7, 2), &any), Setter::Unknown);
        assert_eq!(trace.setter(key(6, 2), &any), Setter::Program);
    }
}
