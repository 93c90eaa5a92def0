//! Carrying out a plan: `sched_setaffinity` per thread, and putting every mask back.
//!
//! ```text
//!  Move { thread: (pid, tid, start_time), to } ─► stat start time still the same? ── no ─► Vanished
//!                                                   │ yes
//!       current = sched_getaffinity(tid)
//!       moved before, and current is neither its original nor the LAST mask we set on
//!       it, nor that mask narrowed by its cpuset (crate::origin)?
//!           ─► the program chose it: hands off from now on (Denied), never restored over
//!       first touch: original = current (or the processes' mask, if inherited; below)
//!       want = cpus(to) ∩ original ── empty ─► Denied      want == current ─► Unchanged
//!       journal "set pid tid start original want" ── cannot write ─► Denied, nothing changed
//!       sched_setaffinity(tid, want) ── ESRCH ─► Vanished  EPERM/EINVAL ─► Denied, and
//!           journal "unset pid tid start": the mask before is still the last one ours
//!       start time re-checked: if the tid changed hands meanwhile, the stranger is given
//!       its creator's mask (ledger::set_checked) ─► Vanished
//! ```
//!
//! A thread is never given a CPU outside the mask it had before we first touched it, a tid
//! whose start time differs from the plan's is never touched on purpose, and every changed
//! mask is restored by [`Actuator::restore_all`] (which `Drop` also calls) under the
//! rules of [`crate::ledger`]: only masks still ours are put back.
//!
//! **Inherited masks.** A thread starts with its creator's mask, so a thread created by
//! a thread we confined carries a mask we chose, not one the program chose. Once told
//! when management began and what the managed processes' masks were then
//! ([`Actuator::inherit_from`]), the actuator treats a thread that started after that
//! instant, whose mask is the one we hold on some thread of its creator (its own process;
//! for a new process, its parent), as having inherited it: its original is the process's
//! mask from the start (so later moves may use every CPU the program allowed), and
//! [`Actuator::restore_all`] widens it back at the end even if no move ever named it. The
//! kernel does not say which thread created a thread, so a program that pins a new thread
//! itself to exactly a mask we hold on another of its threads is taken for inheritance,
//! unless that mask is a single CPU the thread had to migrate to, or the trace of
//! `sched_setaffinity` ([`Actuator::set_trace`]) saw its program set it: then its program
//! pinned it as it started, and it is left as it is (see [`crate::origin`]). With the
//! trace, a mask the program set after our last set is its own whatever it is.
//!
//! **Reading before writing.** The mask is read (`sched_getaffinity`) right before each
//! write and judged against the last mask we set, so a choice the program made since our
//! last write is never written over. A program that sets its mask between that read and
//! the write (microseconds; up to the rest of the plan's checks and its journal write,
//! well under a millisecond, where a plan moves many threads) is written over once; the
//! next move sees our mask, not its.
//!
//! **Reused tids.** The start time is checked before and after each write. What remains
//! is the window between the check and the system call (a few microseconds): the thread
//! must exit, be reaped, and its tid be handed to a new thread within it, which needs the
//! kernel to cycle through every other free pid (`pid_max`, 4 194 304 by default on
//! 64-bit) first. The check after the call detects it, and the stranger is given the mask
//! of its creator's leader, which is what it was most likely born with.
//!
//! **One write a plan.** The moves of a plan are checked first, each as above, and the
//! changes that pass are journaled together, in one write, before the first is made: a
//! journal line written by itself costs a system call and, where the state directory is not
//! on tmpfs, a file system update (a quarter of a move's CPU time on the development VM,
//! whose `/run` is on ext4). The rule stays: no change is made before its record is
//! written. A crash between the write and a change leaves a record of a change not made,
//! which restoring finds already as it was, as a crash between one record and its change
//! always did. A thread a plan names twice has the changes before its second move made
//! first.
//!
//! Masks of any size are supported: the fixed 1024-CPU set of the C library is used while
//! it can hold the mask, and the raw system calls with a larger buffer beyond that.

use crate::affinity::affinity_of;
use crate::ledger::{Kept, Ledger, Record, RestoreReport, World, replay, set_checked};
use crate::origin::Whose;
use crate::read::Root;
use crate::read::alive::AliveCheck;
use crate::state::{Journal, SystemWorld};
use std::collections::BTreeMap;
use std::io;
use threadbalance_model::{
    ApplyReport, CpuSet, Move, MoveOutcome, Pid, Plan, SliceChange, Target, ThreadKey, Tid,
    Topology,
};

/// What an error from the affinity calls means for a move.
fn outcome_of(e: &io::Error) -> MoveOutcome {
    match e.raw_os_error() {
        Some(libc::ESRCH) => MoveOutcome::Vanished,
        _ => MoveOutcome::Denied,
    }
}

/// A start time the caller already vouches for: `known(pid, tid)` is `Some(start)` when a
/// file of that very thread, kept open elsewhere (the sampler's), still reads, so the tid
/// names the thread that started then; `None` sends the check to `/proc` as usual.
pub type Known<'a> = &'a dyn Fn(Pid, Tid) -> Option<u64>;

/// Knows nothing: every check reads `/proc`.
fn unknown(_: Pid, _: Tid) -> Option<u64> {
    None
}

/// The system as [`set_checked`] sees it, with its start-time check through kept files.
struct Checked<'a> {
    world: &'a mut SystemWorld,
    alive: &'a mut AliveCheck,
    known: Known<'a>,
}

impl World for Checked<'_> {
    fn start_time(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        (self.known)(pid, tid).or_else(|| self.alive.start_time(pid, tid).ok().flatten())
    }
    fn affinity(&mut self, tid: Tid) -> io::Result<CpuSet> {
        self.world.affinity(tid)
    }
    fn set_affinity(&mut self, tid: Tid, mask: &CpuSet) -> io::Result<()> {
        self.world.set_affinity(tid, mask)
    }
    fn threads(&mut self, pid: Pid) -> Vec<Tid> {
        self.world.threads(pid)
    }
    fn children(&mut self, pid: Pid) -> Vec<Pid> {
        self.world.children(pid)
    }
    fn process_of(&mut self, tid: Tid) -> Option<Pid> {
        self.world.process_of(tid)
    }
    fn parent(&mut self, pid: Pid) -> Option<Pid> {
        self.world.parent(pid)
    }
    fn cpuset(&mut self, pid: Pid, tid: Tid) -> Option<CpuSet> {
        self.world.cpuset(pid, tid)
    }
    fn migrations(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        self.world.migrations(pid, tid)
    }
    fn setter(&mut self, key: ThreadKey, current: &CpuSet) -> crate::origin::Setter {
        self.world.setter(key, current)
    }
}

/// A move checked against its thread, whose change is to be journaled and made.
#[derive(Debug)]
struct Ready {
    key: ThreadKey,
    /// The thread's original mask, as the journal records it.
    original: CpuSet,
    /// The mask to set.
    want: CpuSet,
    /// Whether the ledger held `want` as a mask we set already (then a failed write
    /// leaves it so).
    again: bool,
    /// A move back to the original: the thread is released once it is there.
    release: bool,
}

impl Ready {
    /// Its journal record.
    fn record(&self) -> Record {
        Record::Set {
            key: self.key,
            original: self.original.clone(),
            mask: self.want.clone(),
        }
    }
}

/// Applies plans with `sched_setaffinity`, writing each change to the ledger (and the
/// journal, when there is one) before making it.
#[derive(Debug)]
pub struct Actuator {
    world: SystemWorld,
    /// Start-time checks through kept files (a pread, not an open, per check).
    alive: AliveCheck,
    ledger: Ledger,
    journal: Option<Journal>,
    /// Threads that chose a mask of their own after we moved them: hands off from then on.
    decided: BTreeMap<ThreadKey, CpuSet>,
    /// Management began at this start time (clock ticks since boot), with the managed
    /// processes allowed on this mask.
    inherit: Option<(u64, CpuSet)>,
    /// Whether time slices may be changed: we hold `CAP_SYS_NICE`, which putting one
    /// back needs (see [`crate::slice`]).
    may_slice: bool,
    /// The kernel's default slice, ns, read once (`None`: no slices on this kernel).
    default_slice: Option<u64>,
    slice_counts: SliceCounts,
    /// Masks put back to the thread's original during the run, at the policy's asking
    /// (`speed`'s guard handing the threads to Linux, a policy that lets a thread go).
    handed_back: u64,
    /// The live threads given a slice of ours, for `SliceCounts::set` (gone ones are
    /// dropped by `maintain`).
    sliced: std::collections::BTreeSet<ThreadKey>,
    /// Threads whose program set a slice of its own over ours: hands off.
    slice_decided: std::collections::BTreeSet<ThreadKey>,
    /// Threads born pinned by their program to a CPU one of ours held (see
    /// [`crate::origin`]): never ours.
    born_pinned: std::collections::BTreeSet<ThreadKey>,
    /// Threads whose mask we found narrowed by their cpuset, and kept managing.
    narrowed: std::collections::BTreeSet<ThreadKey>,
}

/// What became of the time slices plans asked for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SliceCounts {
    /// Threads given a slice of ours (each counted once).
    pub set: u64,
    /// Slices put back (a thread whose slices were turned on and off twice counts twice).
    pub restored: u64,
    /// Slices not set: no `CAP_SYS_NICE`, a kernel without slices (before 6.12), a
    /// thread not of a fair class or of negative nice, one whose program set its own
    /// slice, or a refusal.
    pub skipped: u64,
}

impl Actuator {
    /// An actuator that checks start times under `root` (the `/proc` the threads live in:
    /// [`Root::system`] on a live system).
    pub fn new(root: Root) -> Actuator {
        Actuator {
            world: SystemWorld::new(root.clone()),
            alive: AliveCheck::new(root.clone()),
            ledger: Ledger::default(),
            journal: None,
            decided: BTreeMap::new(),
            inherit: None,
            may_slice: crate::permit::we_may_renice_any(&root),
            default_slice: crate::slice::default_ns(),
            slice_counts: SliceCounts::default(),
            handed_back: 0,
            sliced: std::collections::BTreeSet::new(),
            slice_decided: std::collections::BTreeSet::new(),
            born_pinned: std::collections::BTreeSet::new(),
            narrowed: std::collections::BTreeSet::new(),
        }
    }

    /// Asks `trace` who set each thread's mask from now on: a mask the program set is
    /// its own whatever it is, one only we set is ours (see [`crate::origin`]).
    pub fn set_trace(&mut self, trace: crate::setters::Trace) {
        self.world.set_trace(trace);
    }

    /// Stops reading the trace (its handle goes; the programs are detached with the last
    /// one): masks are judged from the masks alone from now on.
    pub fn drop_trace(&mut self) {
        self.world.drop_trace();
    }

    /// Whether a trace of who sets masks is in use.
    pub fn traced(&self) -> bool {
        self.world.traced()
    }

    /// Writes every change to `journal` before making it, so that `threadbalance restore`
    /// can put it back if we die without restoring.
    pub fn set_journal(&mut self, journal: Journal) {
        self.journal = Some(journal);
    }

    /// Writes `r` to the journal (first) and the ledger.
    fn note(&mut self, r: &Record) -> io::Result<()> {
        let redundant = self.redundant(r);
        if let (Some(j), false) = (self.journal.as_mut(), redundant) {
            j.append(r)?;
        }
        self.ledger.apply(r);
        Ok(())
    }

    /// Whether the journal holds `r` already: a set of the mask the ledger holds as the
    /// last we set on a thread still ours.
    fn redundant(&self, r: &Record) -> bool {
        match r {
            Record::Set { key, mask, .. } => {
                self.ledger.threads.get(key).is_some_and(|e| !e.released)
                    && self.ledger.set_on(key, mask)
            }
            _ => false,
        }
    }

    /// Writes `records` to the journal in one write (first), then to the ledger, each as
    /// [`Actuator::note`] would (a set the ledger already holds is not written again).
    /// On an error nothing reaches the ledger; the journal may hold some of the lines
    /// (a record of a change not made: restoring it finds the mask already as it was).
    fn note_all(&mut self, records: &[Record]) -> io::Result<()> {
        let fresh: Vec<&Record> = records.iter().filter(|r| !self.redundant(r)).collect();
        if let Some(j) = self.journal.as_mut() {
            j.append_all(&fresh)?;
        }
        for r in records {
            self.ledger.apply(r);
        }
        Ok(())
    }

    /// Declares that management began at `since` (clock ticks since boot, as thread start
    /// times are counted) with the managed processes `pids` allowed on `base`; see the
    /// module docs on inherited masks.
    pub fn inherit_from(&mut self, since: u64, base: CpuSet) {
        self.inherit = Some((since, base.clone()));
        let _ = self.note(&Record::Since(since));
    }

    /// Records a managed process (its start time and mask now), so that its descendants'
    /// inherited masks are restored even after a crash.
    pub fn manage_process(&mut self, pid: threadbalance_model::Pid) {
        if self.ledger.processes.contains_key(&pid) {
            return;
        }
        let Ok(Some(start)) = self.alive.start_time(pid, Tid(pid.0)) else {
            return;
        };
        // A process born after management began was born of a managed one: its base is
        // the managed processes' mask. One that already ran (a target, or a child that
        // existed when we attached) keeps its own.
        let base = match &self.inherit {
            Some((since, b)) if start >= *since => b.clone(),
            _ => match affinity_of(Tid(pid.0)) {
                Ok(m) => m,
                Err(_) => return,
            },
        };
        let _ = self.note(&Record::Process { pid, start, base });
    }

    /// The mask `key` had before we touched it: its current mask, or the processes' base
    /// mask when it started after management began with a mask we hold on a thread of its
    /// creator (its own process, or for a new process's leader, its parent).
    fn original_of(&mut self, key: ThreadKey, current: &CpuSet) -> CpuSet {
        let Some((since, base)) = self.inherit.clone() else {
            return current.clone();
        };
        if key.start_time < since || *current == base {
            return current.clone();
        }
        let mut inherited = self.ledger.holds(key.pid, current);
        if !inherited
            && key.is_leader()
            && let Some(parent) = self.world.parent(key.pid)
        {
            inherited = self.ledger.holds(parent, current);
        }
        let world = &mut self.world;
        if inherited
            && crate::origin::born_pinned(current, world.setter(key, current), || {
                world.migrations(key.pid, key.tid)
            })
        {
            // Set by its program (the trace says so, or a single CPU it had to migrate
            // to), not inherited from its creator.
            self.born_pinned.insert(key);
            return current.clone();
        }
        if inherited { base } else { current.clone() }
    }

    /// Looks at threads `keys` as they are first seen (the sampler's fresh ones): one
    /// born after management began that inherited a mask of ours is recorded (journal
    /// first) as carrying it, with the processes' mask as its original, so it is restored
    /// even if its creator moves on or we die. Costs one `sched_getaffinity` per new thread, none for others.
    pub fn adopt_born(&mut self, keys: impl Iterator<Item = ThreadKey>) {
        let Some((since, _)) = &self.inherit else {
            return;
        };
        let since = *since;
        if self.ledger.threads.is_empty() {
            return; // nothing of ours to inherit yet
        }
        for key in keys {
            if key.start_time < since || self.ledger.threads.contains_key(&key) {
                continue;
            }
            let Ok(current) = affinity_of(key.tid) else {
                continue;
            };
            let original = self.original_of(key, &current);
            if original != current {
                let _ = self.note(&Record::Set {
                    key,
                    original,
                    mask: current,
                });
            }
        }
    }

    /// Records the children of managed process `pid` that were born after management
    /// began while it held a mask of ours (a thread we moved started them, so they carry
    /// that mask), with their threads, as [`Actuator::adopt_born`] records threads: they
    /// are then restored even after `pid` exits and they hang under another parent, where
    /// no walk from `pid` finds them. For hosts that do not sample children (the daemon,
    /// `--no-children`); reads one `children` file per thread of `pid`. Returns how many
    /// children were recorded.
    pub fn adopt_children(&mut self, pid: threadbalance_model::Pid) -> usize {
        let Some((since, _)) = self.inherit.clone() else {
            return 0;
        };
        if !self.ledger.holds_any(pid) {
            return 0;
        }
        let mut adopted = 0;
        for child in self.world.children(pid) {
            if self.ledger.processes.contains_key(&child) {
                continue;
            }
            match self.world.start_time(child, Tid(child.0)) {
                Some(start) if start >= since => {}
                _ => continue,
            }
            self.manage_process(child);
            let keys: Vec<ThreadKey> = self
                .world
                .threads(child)
                .into_iter()
                .filter_map(|tid| {
                    let start_time = self.world.start_time(child, tid)?;
                    Some(ThreadKey {
                        pid: child,
                        tid,
                        start_time,
                    })
                })
                .collect();
            self.adopt_born(keys.into_iter());
            adopted += 1;
        }
        adopted
    }

    /// Carries out every move of `plan`, counting each outcome; see the module docs.
    pub fn apply(&mut self, topo: &Topology, plan: &Plan) -> ApplyReport {
        self.apply_known(topo, plan, &unknown)
    }

    /// [`Actuator::apply`], with the start-time checks answered by `known` where it can
    /// (a `pread` of a file the sampler keeps, instead of reading `stat` by path).
    pub fn apply_known(&mut self, topo: &Topology, plan: &Plan, known: Known<'_>) -> ApplyReport {
        let mut report = ApplyReport::default();
        // Each move is checked first; the changes that pass are journaled together, in
        // one write, and then made (see "One write a plan" in the module docs). A thread
        // named twice has the changes before it made first.
        let mut ready: Vec<Ready> = Vec::new();
        for mv in &plan.moves {
            if ready.iter().any(|r| r.key == mv.thread) {
                self.make_all(&mut ready, known, &mut report);
            }
            match self.check_move(topo, mv, known) {
                Ok(r) => ready.push(r),
                Err(outcome) => report.count(outcome),
            }
        }
        self.make_all(&mut ready, known, &mut report);
        for s in &plan.slices {
            if self.slice_one(*s, known) {
                report.slices += 1;
            }
        }
        report
    }

    /// Carries out one slice change: journaled before it is made, as masks are. A thread
    /// whose program chose its own mask, or its own slice (before we came, or over ours
    /// since), is left alone from then on. Whether the thread's slice was changed.
    fn slice_one(&mut self, s: SliceChange, known: Known<'_>) -> bool {
        let key = s.thread;
        let ours = self.ledger.slices.get(&key).cloned();
        match self.same_thread(key, known) {
            Some(true) => {}
            Some(false) => {
                if ours.is_some() {
                    let _ = self.note(&Record::Unslice(key));
                }
                return false;
            }
            None => return false,
        }
        let Ok(current) = crate::slice::attr_of(key.tid) else {
            return false;
        };
        if let Some((original, set)) = &ours {
            let was = match original.ns {
                0 => self.default_slice,
                ns => Some(ns),
            };
            if !set.contains(&current.runtime()) && Some(current.runtime()) != was {
                // Neither its original nor ours: the program set a slice of its own since.
                self.slice_decided.insert(key);
                let _ = self.note(&Record::Unslice(key));
                return false;
            }
        }
        match (s.slice, ours) {
            (Some(ns), ours) => {
                let fresh = ours.is_none();
                if !fresh && current.runtime() == ns.0 {
                    return false;
                }
                let original = match ours {
                    Some((original, _)) => original,
                    None if self.may_slice
                        && current.sliceable()
                        && current.as_slice(self.default_slice).ns == 0
                        && !self.decided.contains_key(&key)
                        && !self.slice_decided.contains(&key) =>
                    {
                        current.as_slice(self.default_slice)
                    }
                    None => {
                        self.slice_counts.skipped += 1;
                        return false;
                    }
                };
                let rec = Record::Slice {
                    key,
                    original,
                    ours: ns.0,
                };
                if self.note(&rec).is_err() {
                    self.slice_counts.skipped += 1;
                    return false;
                }
                let want = crate::slice::Slice {
                    ns: ns.0,
                    reset_on_fork: true,
                };
                match crate::slice::set(key.tid, &current, want) {
                    Ok(()) => {
                        if self.sliced.insert(key) {
                            self.slice_counts.set += 1;
                        }
                        true
                    }
                    Err(_) => {
                        let _ = self.note(&Record::Unslice(key));
                        self.slice_counts.skipped += 1;
                        false
                    }
                }
            }
            (None, Some((original, _))) => {
                let restored = crate::slice::set(key.tid, &current, original).is_ok();
                if restored {
                    self.slice_counts.restored += 1;
                }
                let _ = self.note(&Record::Unslice(key));
                restored
            }
            (None, None) => false,
        }
    }

    /// What became of the time slices asked for so far.
    pub fn slice_counts(&self) -> SliceCounts {
        self.slice_counts
    }

    /// Masks put back to their thread's original during the run, at the policy's asking
    /// (moves to [`Target::Original`] that changed the mask): what the restore at the end
    /// no longer has to do.
    pub fn handed_back(&self) -> u64 {
        self.handed_back
    }

    /// Carries out one move.
    pub fn apply_move(&mut self, topo: &Topology, mv: &Move) -> MoveOutcome {
        self.move_one(topo, mv, &unknown)
    }

    fn move_one(&mut self, topo: &Topology, mv: &Move, known: Known<'_>) -> MoveOutcome {
        let ready = match self.check_move(topo, mv, known) {
            Ok(r) => r,
            Err(outcome) => return outcome,
        };
        if self.note(&ready.record()).is_err() {
            // Not journaled, not changed: a change we could not put back after a crash is
            // one we do not make.
            return MoveOutcome::Denied;
        }
        self.make(ready, known)
    }

    /// Journals every change in `ready` in one write, then makes each, counting their
    /// outcomes in `report`; `ready` is left empty. A journal that cannot be written
    /// denies them all, nothing changed.
    fn make_all(&mut self, ready: &mut Vec<Ready>, known: Known<'_>, report: &mut ApplyReport) {
        if ready.is_empty() {
            return;
        }
        let records: Vec<Record> = ready.iter().map(Ready::record).collect();
        if self.note_all(&records).is_err() {
            for _ in ready.drain(..) {
                report.count(MoveOutcome::Denied);
            }
            return;
        }
        for r in ready.drain(..) {
            report.count(self.make(r, known));
        }
    }

    /// Checks move `mv` against the thread as it is now: `Ok` with the change to make,
    /// or the outcome when there is none to make (gone, its program's choice, a target
    /// outside its original mask, already there).
    fn check_move(
        &mut self,
        topo: &Topology,
        mv: &Move,
        known: Known<'_>,
    ) -> Result<Ready, MoveOutcome> {
        let key = mv.thread;
        if self.decided.contains_key(&key) {
            return Err(MoveOutcome::Denied);
        }
        match self.same_thread(key, known) {
            Some(true) => {}
            Some(false) => {
                // Gone: nothing of it to restore any more.
                if self.ledger.threads.contains_key(&key) {
                    let _ = self.note(&Record::Release(key));
                }
                return Err(MoveOutcome::Vanished);
            }
            None => return Err(MoveOutcome::Denied),
        }
        let current = affinity_of(key.tid).map_err(|e| outcome_of(&e))?;
        let entry = self
            .ledger
            .threads
            .get(&key)
            .filter(|e| !e.released)
            .cloned();
        let original = match &entry {
            Some(e) => {
                let world = &mut self.world;
                let setter = world.setter(key, &current);
                match e.judge(&current, false, setter, || world.cpuset(key.pid, key.tid)) {
                    Whose::Program => {
                        // Neither its original nor the last mask we set, nor that mask
                        // narrowed by its cpuset: the program chose it.
                        self.decided.insert(key, current);
                        let _ = self.note(&Record::Release(key));
                        return Err(MoveOutcome::Denied);
                    }
                    Whose::Cpuset => {
                        self.narrowed.insert(key);
                    }
                    Whose::Original | Whose::Ours => {}
                }
                e.original.clone()
            }
            None => self.original_of(key, &current),
        };
        let want = mv.to.cpus(topo, &original);
        if want.is_empty() {
            return Err(MoveOutcome::Denied);
        }
        if want == current {
            if mv.to == Target::Original && entry.is_some() {
                let _ = self.note(&Record::Release(key));
            }
            return Err(MoveOutcome::Unchanged);
        }
        Ok(Ready {
            key,
            again: self.ledger.set_on(&key, &want),
            original,
            want,
            release: mv.to == Target::Original,
        })
    }

    /// Makes the change `r`, its record journaled already.
    fn make(&mut self, r: Ready, known: Known<'_>) -> MoveOutcome {
        let mut world = Checked {
            world: &mut self.world,
            alive: &mut self.alive,
            known,
        };
        match set_checked(&mut world, r.key, &r.want) {
            Ok(true) => {}
            Ok(false) => return MoveOutcome::Vanished,
            Err(e) => {
                // Not set: what was there before is still ours (or the original), and the
                // mask we announced must not count as the last one we set.
                if !r.again {
                    let _ = self.note(&Record::Unset(r.key));
                }
                return outcome_of(&e);
            }
        }
        if r.release {
            let _ = self.note(&Record::Release(r.key));
            self.handed_back += 1;
        }
        MoveOutcome::Done
    }

    /// Whether `key`'s tid still names the thread that started at `key.start_time`:
    /// `Some(false)` when it has gone or been reused, `None` when its `stat` cannot be read.
    fn same_thread(&mut self, key: ThreadKey, known: Known<'_>) -> Option<bool> {
        if known(key.pid, key.tid) == Some(key.start_time) {
            return Some(true);
        }
        match self.alive.start_time(key.pid, key.tid) {
            Ok(Some(start)) => Some(start == key.start_time),
            Ok(None) => Some(false),
            Err(_) => None,
        }
    }

    /// Puts back every mask we set that is still ours, and widens the threads and
    /// processes born of managed threads that inherited one (see [`crate::ledger`]), then
    /// forgets them all. Threads whose program chose its own mask meanwhile are left as
    /// they are and listed in the report; so are masks the kernel refused to restore,
    /// with the reason. When everything was put back the journal is removed.
    pub fn restore_all(&mut self) -> RestoreReport {
        let mut report = replay(&self.ledger, &mut self.world);
        for (key, mask) in std::mem::take(&mut self.decided) {
            // Its mask now, if it still has the start time we know (the program may have
            // changed it again since it decided).
            let now = match self.world.start_time(key.pid, key.tid) {
                Some(s) if s == key.start_time => affinity_of(key.tid).ok(),
                _ => None,
            };
            report
                .kept
                .push((key, Kept::ProgramChoice(now.unwrap_or(mask))));
        }
        report.born_pinned.extend(self.born_pinned.iter().copied());
        report.born_pinned.sort();
        report.born_pinned.dedup();
        report.narrowed.extend(self.narrowed.iter().copied());
        report.narrowed.sort();
        report.narrowed.dedup();
        report.kept.sort_by_key(|(k, _)| *k);
        report.kept.dedup_by_key(|(k, _)| *k);
        self.slice_counts.restored += u64::from(report.slices_restored);
        self.ledger.threads.clear();
        self.ledger.slices.clear();
        if report.failures().next().is_none()
            && let Some(j) = self.journal.take()
        {
            j.remove();
        }
        report
    }

    /// Forgets the threads that have gone (their tid no longer names them), and compacts
    /// the journal once it holds more than twice what is still to be restored. Call now
    /// and then (the host does every few seconds): it reads one `stat` per thread changed.
    pub fn maintain(&mut self) {
        self.maintain_known(&unknown);
    }

    /// [`Actuator::maintain`], with the checks answered by `known` where it can.
    pub fn maintain_known(&mut self, known: Known<'_>) {
        let keys: Vec<ThreadKey> = self
            .ledger
            .threads
            .keys()
            .chain(self.decided.keys())
            .copied()
            .collect();
        let gone: Vec<ThreadKey> = keys
            .into_iter()
            .filter(|&k| self.same_thread(k, known) == Some(false))
            .collect();
        for k in &gone {
            self.ledger.threads.remove(k);
            self.decided.remove(k);
        }
        // Threads born pinned that have gone are no longer left anywhere.
        let pinned: Vec<ThreadKey> = self.born_pinned.iter().copied().collect();
        for k in pinned {
            if self.same_thread(k, known) == Some(false) {
                self.born_pinned.remove(&k);
            }
        }
        let sliced: Vec<ThreadKey> = self.sliced.iter().copied().collect();
        for k in sliced {
            if self.same_thread(k, known) == Some(false) {
                self.ledger.slices.remove(&k);
                self.sliced.remove(&k);
                self.slice_decided.remove(&k);
            }
        }
        self.ledger.threads.retain(|_, e| !e.released);
        let ledger = &self.ledger;
        self.alive.retain(|pid, tid| {
            ledger
                .threads
                .keys()
                .chain(ledger.slices.keys())
                .any(|k| k.pid == pid && k.tid == tid)
        });
        if let Some(j) = self.journal.as_mut() {
            let records = self.ledger.to_records();
            if j.lines() > 2 * records.len() + 64 {
                let _ = j.rewrite(&records);
            }
        }
    }

    /// The threads whose masks are changed now, with their original masks.
    pub fn changed(&self) -> impl Iterator<Item = (ThreadKey, &CpuSet)> {
        self.ledger
            .threads
            .iter()
            .filter(|(_, e)| !e.released)
            .map(|(k, e)| (*k, &e.original))
    }

    /// Threads that set a mask of their own after we moved them, with that mask.
    pub fn decided(&self) -> impl Iterator<Item = (&ThreadKey, &CpuSet)> {
        self.decided.iter()
    }
}

impl Drop for Actuator {
    /// Restores every changed mask, so an early return or a panic never leaves threads pinned.
    fn drop(&mut self) {
        if self.changed().next().is_some() || !self.ledger.slices.is_empty() {
            let _ = self.restore_all();
        }
    }
}
