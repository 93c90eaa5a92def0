//! The ledger: every mask we set, written down before it is set, and the rules that put
//! them back — at a normal exit from memory, after a crash from the journal file.
//!
//! ```text
//!  journal file (one line per record, appended before the change it announces)
//!    threadbalance-journal 1
//!    owner 4242 987654              our pid and start time
//!    boot 3f1c…                     the boot it belongs to (kernel/random/boot_id)
//!    since 987650                   management began (clock ticks since boot)
//!    process 5000 912345 0-7        a managed process, its start time, its mask then
//!    set 5000 5003 912399 0-7 0-3   thread, start time, original mask, mask about to be set
//!    unset 5000 5003 912399         the set announced last on it did not happen (refused)
//!    release 5000 5003 912399       put back, or the program chose its own mask: hands off
//!    applied 0-3                    a mask we set (kept when a journal is compacted)
//!    slice 5000 5003 912399 0 0 500000   thread, start time, original slice (ns, 0 the
//!                                   default) and reset-on-fork flag, slice about to be set
//!    unslice 5000 5003 912399       its slice put back, or gone: hands off
//! ```
//!
//! Replaying (`replay`) restores a thread only when all of these hold:
//!
//! 1. its tid still has the journaled start time (the tid was not reused);
//! 2. its mask is the last mask we set on it, or that mask narrowed by the thread's cpuset
//!    (anything else is the program's own choice, or the original already, and is left
//!    alone; see [`crate::origin`]). When the journal ends right after a `set`, that set
//!    may not have reached the thread, and the mask set before it counts as ours too;
//! 3. no `release` record follows.
//!
//! Threads and processes born of managed threads after `since` start with the mask of
//! their creator, which may be ours. A thread of a managed process or of one of its
//! descendants (born after `since`) that was never moved, and whose mask is one we hold
//! now on a thread of its process or of an ancestor process, gets its managed ancestor's
//! mask back. The live actuator records such threads as it first sees them
//! (`Actuator::adopt_born`), so one whose creator moved on since is still restored. A
//! program that pins such a thread itself to exactly a mask we hold on another of its
//! threads cannot be told from inheritance (the kernel does not say which thread created
//! which), and is widened too, unless it is a single CPU the thread had to migrate to
//! (see [`crate::origin`]): a thread that inherited a single CPU never migrated.
//!
//! A slice (see [`crate::slice`]) is put back when its thread still has the journaled
//! start time and runs with a slice we set on it, and no `unslice` follows. Threads born
//! meanwhile never inherit one (the slice is set with `SCHED_FLAG_RESET_ON_FORK`).
//!
//! The rules are pure over a [`World`] (start times, masks, thread and child lists), so
//! they are tested here against a fake one; `state::SystemWorld` is the real one.

use crate::error::LinuxError;
use crate::origin::{Setter, Whose};
use crate::slice::Slice;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use threadbalance_model::{CpuSet, Pid, ThreadKey, Tid};

pub(crate) mod header;
pub use header::{MAGIC, NotAJournal};

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// The instance that writes the journal: its pid and start time.
    Owner {
        /// Its pid.
        pid: Pid,
        /// Its start time (clock ticks since boot).
        start: u64,
    },
    /// Management began at this start time (clock ticks since boot).
    Since(u64),
    /// A managed process, with its mask when management began.
    Process {
        /// The process.
        pid: Pid,
        /// Its start time.
        start: u64,
        /// Its leader's mask then: what threads born of it are given back.
        base: CpuSet,
    },
    /// A mask about to be set on a thread.
    Set {
        /// The thread.
        key: ThreadKey,
        /// Its mask before we first touched it.
        original: CpuSet,
        /// The mask about to be set.
        mask: CpuSet,
    },
    /// The set announced last on the thread did not happen (the kernel refused it): the
    /// mask set before it, or the original, is still in place.
    Unset(ThreadKey),
    /// The thread is not ours to restore any more (put back, or the program decided).
    Release(ThreadKey),
    /// A mask we set on some thread (what a compacted journal keeps of released ones).
    Applied(CpuSet),
    /// The boot the journal was written in (`/proc/sys/kernel/random/boot_id`): tids and
    /// start times mean nothing in another.
    Boot(String),
    /// A time slice about to be set on a thread.
    Slice {
        /// The thread.
        key: ThreadKey,
        /// Its slice before we first touched it.
        original: Slice,
        /// The slice about to be set, ns.
        ours: u64,
    },
    /// The thread's slice is not ours to restore any more (put back, or gone).
    Unslice(ThreadKey),
}

impl Record {
    /// The record as one journal line, newline included.
    pub fn to_line(&self) -> String {
        let mut s = String::new();
        let _ = match self {
            Record::Owner { pid, start } => writeln!(s, "owner {} {start}", pid.0),
            Record::Since(t) => writeln!(s, "since {t}"),
            Record::Process { pid, start, base } => {
                writeln!(s, "process {} {start} {base}", pid.0)
            }
            Record::Set {
                key,
                original,
                mask,
            } => writeln!(
                s,
                "set {} {} {} {original} {mask}",
                key.pid.0, key.tid.0, key.start_time
            ),
            Record::Unset(key) => {
                writeln!(s, "unset {} {} {}", key.pid.0, key.tid.0, key.start_time)
            }
            Record::Release(key) => {
                writeln!(s, "release {} {} {}", key.pid.0, key.tid.0, key.start_time)
            }
            Record::Applied(mask) => writeln!(s, "applied {mask}"),
            Record::Boot(id) => writeln!(s, "boot {id}"),
            Record::Slice {
                key,
                original,
                ours,
            } => writeln!(
                s,
                "slice {} {} {} {} {} {ours}",
                key.pid.0,
                key.tid.0,
                key.start_time,
                original.ns,
                u8::from(original.reset_on_fork)
            ),
            Record::Unslice(key) => {
                writeln!(s, "unslice {} {} {}", key.pid.0, key.tid.0, key.start_time)
            }
        };
        s
    }

    /// Parses one line (without its newline); `None` when it is not a record.
    pub fn parse_line(line: &str) -> Option<Record> {
        let w: Vec<&str> = line.split(' ').collect();
        let int = |i: usize| w.get(i).and_then(|s| s.parse::<u64>().ok());
        let id = |i: usize| w.get(i).and_then(|s| s.parse::<i32>().ok());
        let mask = |i: usize| {
            w.get(i)
                .and_then(|s| CpuSet::parse_list(s).ok())
                .filter(|m| !m.is_empty())
        };
        let key = |i: usize| {
            Some(ThreadKey {
                pid: Pid(id(i)?),
                tid: Tid(id(i + 1)?),
                start_time: int(i + 2)?,
            })
        };
        match (w.first().copied()?, w.len()) {
            ("owner", 3) => Some(Record::Owner {
                pid: Pid(id(1)?),
                start: int(2)?,
            }),
            ("since", 2) => Some(Record::Since(int(1)?)),
            ("process", 4) => Some(Record::Process {
                pid: Pid(id(1)?),
                start: int(2)?,
                base: mask(3)?,
            }),
            ("set", 6) => Some(Record::Set {
                key: key(1)?,
                original: mask(4)?,
                mask: mask(5)?,
            }),
            ("unset", 4) => Some(Record::Unset(key(1)?)),
            ("release", 4) => Some(Record::Release(key(1)?)),
            ("applied", 2) => Some(Record::Applied(mask(1)?)),
            ("boot", 2) => Some(Record::Boot(w[1].to_string())),
            ("slice", 7) => Some(Record::Slice {
                key: key(1)?,
                original: Slice {
                    ns: int(4)?,
                    reset_on_fork: match int(5)? {
                        0 => false,
                        1 => true,
                        _ => return None,
                    },
                },
                ours: int(6).filter(|&n| n > 0)?,
            }),
            ("unslice", 4) => Some(Record::Unslice(key(1)?)),
            _ => None,
        }
    }
}

/// What the ledger knows of one thread we changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its mask before we first touched it.
    pub original: CpuSet,
    /// Every mask we set (or were about to set) on it, the latest last. Only the latest
    /// is ours now (see [`crate::origin`]); the others are kept for the inheritance rules.
    pub masks: Vec<CpuSet>,
    /// Not ours to restore any more.
    pub released: bool,
}

impl Entry {
    /// Whose `current` is, for a thread with this entry; `in_flight`: the journal ended
    /// right after announcing its last set; `setter`: who set it last, where a trace says;
    /// `cpuset` asked only when needed (see [`crate::origin::judge`]).
    pub fn judge(
        &self,
        current: &CpuSet,
        in_flight: bool,
        setter: crate::origin::Setter,
        cpuset: impl FnOnce() -> Option<CpuSet>,
    ) -> crate::origin::Whose {
        crate::origin::judge(
            &self.original,
            &self.masks,
            in_flight,
            current,
            setter,
            cpuset,
        )
    }
}

/// Everything a journal says, folded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    /// The instance that wrote it: pid and start time.
    pub owner: Option<(Pid, u64)>,
    /// When management began (clock ticks since boot).
    pub since: Option<u64>,
    /// Managed processes: start time and base mask.
    pub processes: BTreeMap<Pid, (u64, CpuSet)>,
    /// Threads we changed.
    pub threads: BTreeMap<ThreadKey, Entry>,
    /// Every distinct mask we set, on any thread, released or not.
    pub applied: Vec<CpuSet>,
    /// The boot it was written in.
    pub boot: Option<String>,
    /// Threads whose slice we changed and have not put back: the original, and every
    /// slice we set (or were about to set) on it.
    pub slices: BTreeMap<ThreadKey, (Slice, Vec<u64>)>,
    /// The thread of the journal's last record, when that record is a `set`: the instance
    /// may have died before the mask reached the thread. Only [`Ledger::parse`] sets it.
    pub in_flight: Option<ThreadKey>,
}

impl Ledger {
    /// Folds one record in.
    pub fn apply(&mut self, r: &Record) {
        match r {
            Record::Owner { pid, start } => self.owner = Some((*pid, *start)),
            Record::Since(t) => self.since = Some(*t),
            Record::Process { pid, start, base } => {
                self.processes.insert(*pid, (*start, base.clone()));
            }
            Record::Set {
                key,
                original,
                mask,
            } => {
                let e = self.threads.entry(*key).or_insert_with(|| Entry {
                    original: original.clone(),
                    masks: Vec::new(),
                    released: false,
                });
                e.released = false;
                e.masks.retain(|m| m != mask);
                e.masks.push(mask.clone());
                if !self.applied.contains(mask) {
                    self.applied.push(mask.clone());
                }
            }
            Record::Unset(key) => {
                if let Some(e) = self.threads.get_mut(key) {
                    e.masks.pop();
                    if e.masks.is_empty() {
                        self.threads.remove(key);
                    }
                }
            }
            Record::Release(key) => {
                if let Some(e) = self.threads.get_mut(key) {
                    e.released = true;
                }
            }
            Record::Applied(mask) => {
                if !self.applied.contains(mask) {
                    self.applied.push(mask.clone());
                }
            }
            Record::Boot(id) => self.boot = Some(id.clone()),
            Record::Slice {
                key,
                original,
                ours,
            } => {
                let e = self
                    .slices
                    .entry(*key)
                    .or_insert_with(|| (*original, Vec::new()));
                if !e.1.contains(ours) {
                    e.1.push(*ours);
                }
            }
            Record::Unslice(key) => {
                self.slices.remove(key);
            }
        }
    }

    /// Reads a journal's text. Lines that are not records are skipped (a last line cut
    /// short by a crash among them); a text without the magic first line is refused.
    pub fn parse(text: &str) -> Result<Ledger, NotAJournal> {
        let mut lines = text.split_inclusive('\n');
        if lines.next().map(str::trim_end) != Some(MAGIC) {
            return Err(NotAJournal);
        }
        let mut ledger = Ledger::default();
        for line in lines {
            // A line without its newline was cut short: never trust it.
            let Some(line) = line.strip_suffix('\n') else {
                break;
            };
            if let Some(r) = Record::parse_line(line) {
                ledger.apply(&r);
                ledger.in_flight = match r {
                    Record::Set { key, .. } => Some(key),
                    _ => None,
                };
            }
        }
        Ok(ledger)
    }

    /// The records that rebuild this ledger, released threads left out: what a
    /// compacted journal holds.
    pub fn to_records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        if let Some((pid, start)) = self.owner {
            out.push(Record::Owner { pid, start });
        }
        if let Some(id) = &self.boot {
            out.push(Record::Boot(id.clone()));
        }
        if let Some(t) = self.since {
            out.push(Record::Since(t));
        }
        for (&pid, (start, base)) in &self.processes {
            out.push(Record::Process {
                pid,
                start: *start,
                base: base.clone(),
            });
        }
        for (key, e) in self.threads.iter().filter(|(_, e)| !e.released) {
            for mask in &e.masks {
                out.push(Record::Set {
                    key: *key,
                    original: e.original.clone(),
                    mask: mask.clone(),
                });
            }
        }
        // After the sets (each set adds its mask to `applied`): a compacted journal never
        // ends with a `set`, which would read as one still in flight.
        for mask in &self.applied {
            out.push(Record::Applied(mask.clone()));
        }
        for (key, (original, ours)) in &self.slices {
            for &ns in ours {
                out.push(Record::Slice {
                    key: *key,
                    original: *original,
                    ours: ns,
                });
            }
        }
        out
    }

    /// The masks we hold now on threads of process `pid` (the latest set on each, not
    /// released).
    pub fn held(&self, pid: Pid) -> Vec<CpuSet> {
        let mut v: Vec<CpuSet> = self
            .threads
            .iter()
            .filter(|(k, e)| k.pid == pid && !e.released)
            .filter_map(|(_, e)| e.masks.last().cloned())
            .collect();
        v.sort_by(|a, b| a.as_words().cmp(b.as_words()));
        v.dedup();
        v
    }

    /// Whether a thread of process `pid` holds `mask` now (the latest set on it, not
    /// released): `held(pid).contains(mask)`, without collecting. It looks only at the
    /// threads of `pid` (the table is ordered by pid first) and stops at the first match;
    /// a thread born of a moved one usually inherits its leader's mask, which comes first.
    pub fn holds(&self, pid: Pid, mask: &CpuSet) -> bool {
        self.held_by(pid).any(|m| m == mask)
    }

    /// Whether any thread of process `pid` holds a mask of ours now: `!held(pid).is_empty()`.
    pub fn holds_any(&self, pid: Pid) -> bool {
        self.held_by(pid).next().is_some()
    }

    /// The latest mask of each thread of `pid` we hold, in key order, repeats included.
    fn held_by(&self, pid: Pid) -> impl Iterator<Item = &CpuSet> + '_ {
        let first = ThreadKey {
            pid,
            tid: Tid(i32::MIN),
            start_time: 0,
        };
        let last = ThreadKey {
            pid,
            tid: Tid(i32::MAX),
            start_time: u64::MAX,
        };
        self.threads
            .range(first..=last)
            .filter(|(_, e)| !e.released)
            .filter_map(|(_, e)| e.masks.last())
    }

    /// Whether `mask` is the last mask we set on thread `key`.
    pub fn set_on(&self, key: &ThreadKey, mask: &CpuSet) -> bool {
        self.threads
            .get(key)
            .is_some_and(|e| e.masks.last() == Some(mask))
    }
}

/// What replaying needs to know of the system and may change in it.
pub trait World {
    /// The start time of thread `tid` of `pid`, `None` when it has gone.
    fn start_time(&mut self, pid: Pid, tid: Tid) -> Option<u64>;
    /// The mask of thread `tid`.
    fn affinity(&mut self, tid: Tid) -> io::Result<CpuSet>;
    /// Sets the mask of thread `tid`.
    fn set_affinity(&mut self, tid: Tid, mask: &CpuSet) -> io::Result<()>;
    /// The threads of process `pid` (empty when it has gone).
    fn threads(&mut self, pid: Pid) -> Vec<Tid>;
    /// The processes whose parent is `pid`.
    fn children(&mut self, pid: Pid) -> Vec<Pid>;
    /// The process thread `tid` belongs to now, `None` when it has gone.
    fn process_of(&mut self, tid: Tid) -> Option<Pid>;
    /// The parent of process `pid`.
    fn parent(&mut self, pid: Pid) -> Option<Pid>;
    /// The CPUs the cpuset of thread `tid` of `pid` allows; `None` when unknown (see
    /// [`crate::origin`]).
    fn cpuset(&mut self, pid: Pid, tid: Tid) -> Option<CpuSet> {
        let _ = (pid, tid);
        None
    }
    /// How many times thread `tid` of `pid` moved to another CPU since it started;
    /// `None` when unknown.
    fn migrations(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        let _ = (pid, tid);
        None
    }
    /// Who made the last `sched_setaffinity` on thread `key` since it started, where a
    /// trace of those calls says ([`crate::setters`]), `current` being its mask now;
    /// [`Setter::Unknown`] otherwise.
    fn setter(&mut self, key: ThreadKey, current: &CpuSet) -> Setter {
        let _ = (key, current);
        Setter::Unknown
    }
    /// The slice thread `tid` runs with, ns, and its reset-on-fork flag (see
    /// [`crate::slice`]). Unsupported unless the world has slices.
    fn slice(&mut self, tid: Tid) -> io::Result<Slice> {
        let _ = tid;
        Err(io::ErrorKind::Unsupported.into())
    }
    /// Gives thread `tid` the slice `s` (ns 0: the default), its policy and nice kept.
    fn set_slice(&mut self, tid: Tid, s: Slice) -> io::Result<()> {
        let _ = (tid, s);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Why a mask was not put back.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// The thread had set a mask of its own choosing: left as the program wants it.
    ProgramChoice(CpuSet),
    /// The kernel refused.
    Failed(RestoreFailed),
}

/// What the kernel refused to put back on a thread, and its error. The message is the
/// error's, after what it was about ("time slice: …") when it was not the mask.
#[derive(Debug, thiserror::Error)]
pub enum RestoreFailed {
    /// `sched_setaffinity` (or reading the mask first) failed.
    #[error("{0}")]
    Affinity(#[source] io::Error),
    /// Putting the time slice back failed.
    #[error("time slice: {0}")]
    Slice(#[source] io::Error),
}

impl RestoreFailed {
    /// The operating system's error.
    pub fn io(&self) -> &io::Error {
        match self {
            RestoreFailed::Affinity(e) | RestoreFailed::Slice(e) => e,
        }
    }
}

/// Two refusals are the same when they are of the same thing, with the same errno (or,
/// without one, the same kind of error).
impl PartialEq for RestoreFailed {
    fn eq(&self, other: &RestoreFailed) -> bool {
        let (a, b) = (self.io(), other.io());
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && a.raw_os_error() == b.raw_os_error()
            && a.kind() == b.kind()
    }
}

impl Eq for RestoreFailed {}

/// What a replay did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Masks put back.
    pub restored: u32,
    /// Threads already back on their original mask.
    pub already: u32,
    /// Threads gone (or their tid reused) before they could be restored.
    pub vanished: u32,
    /// Threads left as they are, with the reason.
    pub kept: Vec<(ThreadKey, Kept)>,
    /// Journals that could not be read (why, with the path), left where they are.
    pub unreadable: Vec<LinuxError>,
    /// Time slices put back.
    pub slices_restored: u32,
    /// Threads whose mask was found narrowed by their cpuset (ours all the same: kept
    /// managed, and put back); the live actuator adds those it found during the run.
    pub narrowed: Vec<ThreadKey>,
    /// Threads born pinned by their program to a CPU one of ours held, left as they are
    /// (see [`crate::origin`]); not among the masks we changed.
    pub born_pinned: Vec<ThreadKey>,
}

/// Two reports are the same when they count the same, list the same threads with the same
/// reasons, and say the same of the same unreadable journals (an error is compared by its
/// message: it carries no equality of its own).
impl PartialEq for RestoreReport {
    fn eq(&self, other: &RestoreReport) -> bool {
        let RestoreReport {
            restored,
            already,
            vanished,
            kept,
            unreadable,
            slices_restored,
            narrowed,
            born_pinned,
        } = self;
        let said = |v: &[LinuxError]| v.iter().map(ToString::to_string).collect::<Vec<_>>();
        (restored, already, vanished, slices_restored)
            == (
                &other.restored,
                &other.already,
                &other.vanished,
                &other.slices_restored,
            )
            && *kept == other.kept
            && *narrowed == other.narrowed
            && *born_pinned == other.born_pinned
            && said(unreadable) == said(&other.unreadable)
    }
}

impl Eq for RestoreReport {}

impl RestoreReport {
    /// Masks that could not be restored because the kernel refused.
    pub fn failures(&self) -> impl Iterator<Item = (&ThreadKey, &RestoreFailed)> {
        self.kept.iter().filter_map(|(k, why)| match why {
            Kept::Failed(e) => Some((k, e)),
            Kept::ProgramChoice(_) => None,
        })
    }

    /// Adds another report.
    pub fn add(&mut self, other: RestoreReport) {
        self.restored += other.restored;
        self.already += other.already;
        self.vanished += other.vanished;
        self.kept.extend(other.kept);
        self.unreadable.extend(other.unreadable);
        self.slices_restored += other.slices_restored;
        self.narrowed.extend(other.narrowed);
        self.born_pinned.extend(other.born_pinned);
    }
}

/// Sets `want` on `key` and checks afterwards that the tid still names the same thread.
/// When it does not (the thread exited and its tid was reused between the check and the
/// call), the stranger is given what it most likely had: the mask of its creator's
/// leader, read now. Returns whether the write reached the thread meant.
pub fn set_checked<W: World + ?Sized>(
    w: &mut W,
    key: ThreadKey,
    want: &CpuSet,
) -> io::Result<bool> {
    w.set_affinity(key.tid, want)?;
    if w.start_time(key.pid, key.tid) == Some(key.start_time) {
        return Ok(true);
    }
    // The tid now names another thread (or nothing). It was born with its creator's
    // mask: a thread's creator is usually its process's leader, a new process's its parent.
    let Some(pid) = w.process_of(key.tid) else {
        return Ok(false);
    };
    let donor = if pid.0 != key.tid.0 {
        Some(pid)
    } else {
        w.parent(pid)
    };
    if let Some(m) = donor.and_then(|d| w.affinity(Tid(d.0)).ok()) {
        let _ = w.set_affinity(key.tid, &m);
    }
    Ok(false)
}

/// Puts back every mask the ledger says we set and that is still ours; see the module docs.
pub fn replay<W: World + ?Sized>(ledger: &Ledger, w: &mut W) -> RestoreReport {
    let mut report = RestoreReport::default();
    for (key, e) in &ledger.threads {
        if e.released {
            continue;
        }
        if w.start_time(key.pid, key.tid) != Some(key.start_time) {
            report.vanished += 1;
            continue;
        }
        let cur = match w.affinity(key.tid) {
            Ok(cur) => cur,
            Err(err) => {
                gone_or_failed(&mut report, *key, err);
                continue;
            }
        };
        let in_flight = ledger.in_flight == Some(*key);
        let setter = w.setter(*key, &cur);
        match e.judge(&cur, in_flight, setter, || w.cpuset(key.pid, key.tid)) {
            Whose::Original => report.already += 1,
            whose @ (Whose::Ours | Whose::Cpuset) => match set_checked(w, *key, &e.original) {
                Ok(true) => {
                    report.restored += 1;
                    if whose == Whose::Cpuset {
                        report.narrowed.push(*key);
                    }
                }
                Ok(false) => report.vanished += 1,
                Err(err) => gone_or_failed(&mut report, *key, err),
            },
            Whose::Program => report.kept.push((*key, Kept::ProgramChoice(cur))),
        }
    }
    replay_inherited(ledger, w, &mut report);
    replay_slices(ledger, w, &mut report);
    report
}

/// Puts back every slice the ledger says we set and that the thread still runs with. A
/// thread that has gone, or whose slice is not one of ours (the program set its own), is
/// left alone; a refusal is listed as a failure.
fn replay_slices<W: World + ?Sized>(ledger: &Ledger, w: &mut W, report: &mut RestoreReport) {
    for (key, (original, ours)) in &ledger.slices {
        if w.start_time(key.pid, key.tid) != Some(key.start_time) {
            continue;
        }
        let Ok(now) = w.slice(key.tid) else {
            continue;
        };
        if !ours.contains(&now.ns) {
            continue;
        }
        match w.set_slice(key.tid, *original) {
            Ok(()) => report.slices_restored += 1,
            Err(err) if err.raw_os_error() == Some(libc::ESRCH) => {}
            Err(err) => report
                .kept
                .push((*key, Kept::Failed(RestoreFailed::Slice(err)))),
        }
    }
}

fn gone_or_failed(report: &mut RestoreReport, key: ThreadKey, err: io::Error) {
    if err.raw_os_error() == Some(libc::ESRCH) {
        report.vanished += 1;
    } else {
        report
            .kept
            .push((key, Kept::Failed(RestoreFailed::Affinity(err))));
    }
}

/// Widens back the threads born after `since` of managed processes and their descendants
/// that carry a mask of ours without ever having been moved.
fn replay_inherited<W: World + ?Sized>(ledger: &Ledger, w: &mut W, report: &mut RestoreReport) {
    let Some(since) = ledger.since else {
        return;
    };
    // (process, the base to give back, the masks its creator may have passed on)
    let mut queue: Vec<(Pid, CpuSet, Vec<CpuSet>)> = Vec::new();
    // A managed process born after `since` was born of a managed thread, of some
    // process: it may carry any mask we hold now. An orphan found under us, its parent
    // gone, may carry any mask we ever set.
    let mut held_now: Vec<CpuSet> = Vec::new();
    for m in ledger.threads.values().filter(|e| !e.released) {
        if let Some(last) = m.masks.last()
            && !held_now.contains(last)
        {
            held_now.push(last.clone());
        }
    }
    let owner = ledger.owner.map(|(pid, _)| pid);
    for (&pid, (start, base)) in &ledger.processes {
        if w.start_time(pid, Tid(pid.0)) == Some(*start) {
            let held = if Some(pid) == owner {
                ledger.applied.clone()
            } else if *start >= since {
                held_now.clone()
            } else {
                ledger.held(pid)
            };
            queue.push((pid, base.clone(), held));
        }
    }
    let mut seen: Vec<Pid> = queue.iter().map(|q| q.0).collect();
    while let Some((pid, base, held)) = queue.pop() {
        let mut held = held;
        for m in ledger.held(pid) {
            if !held.contains(&m) {
                held.push(m);
            }
        }
        // Our own process is listed (by `run`, a subreaper) only for its children: the
        // orphans of the command. Its own threads are never ours to change.
        let threads = if Some(pid) == owner {
            Vec::new()
        } else {
            w.threads(pid)
        };
        for tid in threads {
            let Some(start) = w.start_time(pid, tid) else {
                continue;
            };
            let key = ThreadKey {
                pid,
                tid,
                start_time: start,
            };
            if start < since || ledger.threads.contains_key(&key) {
                continue;
            }
            let Ok(cur) = w.affinity(tid) else {
                continue;
            };
            let ours = held.contains(&cur);
            if !ours || cur == base {
                continue;
            }
            let setter = w.setter(key, &cur);
            if crate::origin::born_pinned(&cur, setter, || w.migrations(pid, tid)) {
                report.born_pinned.push(key);
                continue;
            }
            match set_checked(w, key, &base) {
                Ok(true) => report.restored += 1,
                Ok(false) => report.vanished += 1,
                Err(err) => gone_or_failed(report, key, err),
            }
        }
        for child in w.children(pid) {
            if seen.contains(&child) {
                continue;
            }
            // Only processes born after management began can carry a mask of ours.
            if w.start_time(child, Tid(child.0))
                .is_some_and(|s| s >= since)
            {
                seen.push(child);
                queue.push((child, base.clone(), held.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
