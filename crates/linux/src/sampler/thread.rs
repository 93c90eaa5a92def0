//! One thread's files and its read: the table entry ([`Tracked`]), the `pread` of a kept
//! file, the idle back-off test, and [`Sampler::sample_thread`], the hot path's inner step.

use super::{COUNTED_STAT_MAX_AGE, Sampler};
use crate::LinuxError;
use crate::parse::{parse_schedstat_bytes, parse_stat_bytes, parse_status_switches, words};
use crate::read::is_gone;
use std::fmt::Write as _;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use threadbalance_model::{Nanos, Pid, Sample, Snapshot, ThreadKey, Tid};

/// The open files of one thread.
#[derive(Debug)]
pub(super) struct Tracked {
    pub(super) key: ThreadKey,
    pub(super) stat: Option<File>,
    pub(super) schedstat: Option<File>,
    pub(super) status: Option<File>,
    pub(super) children: Option<File>,
    /// The sample generation it was last seen in; 0 for a thread not sampled yet.
    pub(super) seen: u64,
    /// Its last sample.
    pub(super) last: Sample,
    /// When its `stat` was last read.
    pub(super) stat_at: Nanos,
    /// When its `status` was last read (its switch counts).
    pub(super) status_at: Nanos,
    /// Whether its files stay open between samples.
    pub(super) keep: bool,
    /// When its `schedstat` was last read.
    pub(super) read_at: Nanos,
    /// When a read last showed that it had run (or it was first read).
    pub(super) ran_at: Nanos,
    /// When its `children` file was last read (following children only).
    pub(super) children_at: Nanos,
    /// Whether it ran since its `children` file was last read: only then can it have
    /// started a process that file does not list yet (following children only).
    pub(super) ran_unlisted: bool,
    /// Its hardware counters, open (kept threads only, with a counter source).
    pub(super) hw: Option<Box<dyn crate::perf::ThreadCounters>>,
    /// Whether opening its hardware counters failed (not tried again).
    pub(super) hw_failed: bool,
}

impl Tracked {
    pub(super) fn new(pid: Pid, tid: Tid) -> Tracked {
        Tracked {
            key: ThreadKey {
                pid,
                tid,
                start_time: u64::MAX,
            },
            stat: None,
            schedstat: None,
            status: None,
            children: None,
            seen: 0,
            last: Sample::default(),
            stat_at: Nanos::ZERO,
            status_at: Nanos::ZERO,
            keep: false,
            read_at: Nanos::ZERO,
            ran_at: Nanos::ZERO,
            children_at: Nanos::ZERO,
            ran_unlisted: false,
            hw: None,
            hw_failed: false,
        }
    }

    fn close_all(&mut self) {
        self.hw = None;
        self.stat = None;
        self.schedstat = None;
        self.status = None;
        self.children = None;
    }
}

/// What happened when a thread's file was read.
enum Read {
    /// This many bytes are in the buffer.
    Bytes(usize),
    /// The file or its task has gone.
    Gone,
}

/// One file of one thread: `<task_prefix><tid>/<name>`. The path is only formatted when
/// the file must be opened or an error must name it, never on the hot path.
struct TaskFile<'a> {
    prefix: &'a str,
    tid: Tid,
    name: &'static str,
}

impl TaskFile<'_> {
    /// Writes the path into `out`.
    fn write_path(&self, out: &mut String) {
        out.clear();
        let _ = write!(out, "{}{}/{}", self.prefix, self.tid.0, self.name);
    }

    /// The path, for an error message.
    fn path(&self) -> String {
        let mut s = String::new();
        self.write_path(&mut s);
        s
    }
}

/// Reads `file` (opening it first if `slot` is empty) from offset 0 into `buf`, growing
/// `buf` until the whole text fits.
fn pread_slot(
    slot: &mut Option<File>,
    file: &TaskFile<'_>,
    scratch_path: &mut String,
    buf: &mut Vec<u8>,
) -> Result<Read, LinuxError> {
    if slot.is_none() {
        file.write_path(scratch_path);
        match File::open(scratch_path.as_str()) {
            Ok(f) => *slot = Some(f),
            // Out of descriptors (something else holds more than the reserve): the thread
            // is left out of this sample and tried again in the next, never an error.
            Err(e) if is_gone(&e) || fd_short(&e) => return Ok(Read::Gone),
            Err(e) => return Err(LinuxError::io(file.path(), e)),
        }
    }
    let Some(f) = slot.as_ref() else {
        return Ok(Read::Gone);
    };
    loop {
        match f.read_at(buf, 0) {
            Ok(n) if n < buf.len() => return Ok(Read::Bytes(n)),
            Ok(_) => {
                let bigger = buf.len().max(256) * 2;
                buf.resize(bigger, 0);
            }
            Err(e) if is_gone(&e) => {
                *slot = None;
                return Ok(Read::Gone);
            }
            Err(e) => return Err(LinuxError::io(file.path(), e)),
        }
    }
}

/// Whether the read of idle thread `t` can be skipped at `now`: its last read is younger
/// than half the time it has been seen idle, and than `max_age` (zero: never skipped).
fn idle_skip(now: Nanos, t: &Tracked, max_age: Nanos) -> bool {
    let idle_for = now.saturating_sub(t.ran_at);
    let wait = Nanos(idle_for.0 / 2).min(max_age);
    now.saturating_sub(t.read_at) < wait
}

/// The shortest time between two reads of one thread's `children` file while it runs
/// and sleeps in turn (a thread that keeps running waits for its `stat`'s age instead): a
/// pread of a short file, at most 20 a second per thread.
const CHILDREN_FLOOR: Nanos = Nanos::from_millis(50);

/// Whether thread `t`'s `children` file is read at `now`: at its first read, and then only
/// once it ran since the last one (a thread that did not run cannot have started a
/// process), and no sooner than `floor` after it, when one of these holds:
///
/// * it is `idle` now, having run: a shell or `make` forks and then waits, and a `stat`
///   still fresh enough to be carried over must not hide that fork for good (it did: the
///   shell, idle from then on, was never read again, and its worker never managed);
/// * the run-time counters counted a process started by a managed one (`spawned`);
/// * its last read is `max_age` old: a thread that forks and keeps running.
///
/// So a busy thread's list is read every `max_age` (as its `stat`: 10 ms by default, 5 s
/// for a thread the counters answer for), and one that runs and sleeps in turn at most
/// every `floor` ([`CHILDREN_FLOOR`], or `stat_max_age` when shorter); a process started
/// by a thread that then sleeps is found within `floor` plus the idle back-off's delay.
fn children_due(
    t: &Tracked,
    now: Nanos,
    idle: bool,
    spawned: bool,
    max_age: Nanos,
    floor: Nanos,
) -> bool {
    if t.seen == 0 {
        return true;
    }
    let age = now.saturating_sub(t.children_at);
    t.ran_unlisted && (spawned || (age >= floor && (idle || age >= max_age)))
}

/// Whether `e` says the process or the system has run out of file descriptors.
pub(super) fn fd_short(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
}

impl Sampler {
    /// Reads one thread's files; pushes its sample and returns `true` unless it vanished.
    ///
    /// `schedstat` is read first: it is cheap, and when its timeslice count and run time
    /// have not moved since the last sample the thread has not run, so its `stat` fields
    /// (times, last CPU, state) are carried over instead of read again. Kept files make
    /// this safe: they refer to the thread itself, never to a later owner of its tid.
    ///
    /// Long because it is the sampler's hot path, one thread's files in their order
    /// (counters or `schedstat`, `stat`, `status`, `children`), each read deciding whether
    /// the next is due from what the previous found, all on one borrowed thread entry and
    /// the sampler's scratch buffer; a split would hand the same dozen locals and borrows
    /// to every part.
    pub(super) fn sample_thread(
        &mut self,
        i: usize,
        tid: Tid,
        into: &mut Snapshot,
    ) -> Result<bool, LinuxError> {
        let proc_ = &self.procs[i];
        let pid = proc_.pid;
        let generation = self.generation;
        let tps = self.cfg.facts.ticks_per_sec;
        let has_schedstat = self.has_schedstat;
        // With a cap on `status` reads a sample, a thread's turn comes every `stride`
        // samples, by tid.
        let stride = self
            .cfg
            .status_per_sample
            .map_or(1, |k| self.threads.len().div_ceil(k.max(1)).max(1) as u64);
        let scratch = &mut self.scratch;
        let t = self
            .threads
            .entry(tid)
            .or_insert_with(|| Tracked::new(pid, tid));
        if t.key.pid != pid {
            // The tid now belongs to another process: a different thread.
            *t = Tracked::new(pid, tid);
        }
        if t.seen == 0 {
            // A thread seen for the first time keeps its files only while the budget of
            // descriptors allows; past it, it is read by open/read/close.
            t.keep = self.cfg.keep_files_open && self.kept < self.keep_budget;
            self.kept += usize::from(t.keep);
        }
        let keep = t.keep;
        let carry_idle = keep && has_schedstat && !self.cfg.stat_every_sample;
        // A thread the source counted from its birth needs no `schedstat` read even the
        // first time (its `stat` is still read, for its start time).
        let counted = self.counters.as_ref().and_then(|c| c.get(tid));
        if counted.is_none()
            && carry_idle
            && t.seen != 0
            && idle_skip(self.now, t, self.cfg.idle_max_age)
        {
            t.seen = generation;
            into.threads.push(t.last);
            return Ok(true);
        }
        let file = |name: &'static str| TaskFile {
            prefix: &proc_.task_prefix,
            tid,
            name,
        };
        // A read that fails on a kept file means its thread exited; the tid may have been
        // reused already, so the files are reopened once before the thread counts as gone.
        let mut sched = counted.map(|c| c.sched);
        if has_schedstat && sched.is_none() {
            for attempt in 0..2 {
                let f = file("schedstat");
                match pread_slot(&mut t.schedstat, &f, &mut scratch.path, &mut scratch.buf)? {
                    Read::Bytes(n) => {
                        let s = parse_schedstat_bytes(&scratch.buf[..n])
                            .map_err(|e| LinuxError::parse(f.path(), e))?;
                        sched = Some(s);
                        break;
                    }
                    Read::Gone if attempt == 0 && t.seen != 0 => *t = Tracked::new(pid, tid),
                    Read::Gone => break,
                }
            }
            if sched.is_none() {
                self.threads.remove(&tid);
                return Ok(false);
            }
        }
        let sched = sched.unwrap_or_default();
        let idle = sched.timeslices == t.last.timeslices && sched.run == t.last.run;
        t.read_at = self.now;
        if !idle || t.seen == 0 {
            t.ran_at = self.now;
        }
        // A thread the counters answer for has its last CPU and state from them, fresh;
        // `stat` then adds only user and system time, which the window reads only without
        // `schedstat`: it is read again at most every `COUNTED_STAT_MAX_AGE`.
        let max_age = if counted.is_some() {
            self.cfg.stat_max_age.max(COUNTED_STAT_MAX_AGE)
        } else {
            self.cfg.stat_max_age
        };
        let fresh = self.now.saturating_sub(t.stat_at) < max_age;
        let reuse_stat = carry_idle && t.seen != 0 && (idle || fresh);
        let mut sample = if reuse_stat {
            t.last
        } else {
            let mut stat = None;
            for attempt in 0..2 {
                let f = file("stat");
                match pread_slot(&mut t.stat, &f, &mut scratch.path, &mut scratch.buf)? {
                    Read::Bytes(n) => {
                        let s = parse_stat_bytes(&scratch.buf[..n], tps)
                            .map_err(|e| LinuxError::parse(f.path(), e))?;
                        stat = Some(s);
                        break;
                    }
                    // Without schedstat, stat is the first read: same reopening rule.
                    Read::Gone if attempt == 0 && t.seen != 0 && !has_schedstat => {
                        *t = Tracked::new(pid, tid);
                    }
                    Read::Gone => break,
                }
            }
            let Some(stat) = stat else {
                self.threads.remove(&tid);
                return Ok(false);
            };
            t.stat_at = self.now;
            if stat.start_time != t.key.start_time {
                // A new thread, or a reused tid (only visible here when files are not
                // kept): its key changes and its status and children files are its own.
                t.status = None;
                t.children = None;
                t.key.start_time = stat.start_time;
            }
            Sample {
                key: t.key,
                utime: stat.utime,
                stime: stat.stime,
                last_cpu: stat.processor,
                state: stat.state,
                ..Sample::default()
            }
        };
        sample.run = sched.run;
        sample.wait = sched.wait;
        sample.timeslices = sched.timeslices;
        if let Some(c) = counted {
            // Fresher than `stat`'s: as of this sample.
            self.counted += 1;
            sample.last_cpu = c.last_cpu;
            sample.state = c.state;
            if self.cfg.read_status {
                sample.voluntary = c.voluntary;
                sample.involuntary = c.involuntary;
            }
        }
        if keep && let Some(src) = self.hw.as_mut() {
            // Opened once, for a thread that keeps its files (so within the descriptor
            // budget); out of descriptors, tried again at its next read.
            if t.hw.is_none() && !t.hw_failed {
                match src.open(tid) {
                    Ok(c) => t.hw = Some(c),
                    Err(e) if fd_short(&e) => {}
                    Err(_) => t.hw_failed = true,
                }
            }
            sample.counters = t.hw.as_mut().and_then(|c| c.read().ok());
        }
        let mut gone = false;
        // Switch counts change only while a thread runs: one that did not run since the
        // last read, or whose counts are younger than `status_max_age`, keeps them.
        let turn = (tid.0 as u64)
            .wrapping_add(generation)
            .is_multiple_of(stride);
        let status_due = t.seen == 0
            || (!idle && turn && self.now.saturating_sub(t.status_at) >= self.cfg.status_max_age);
        if self.cfg.read_status && counted.is_none() && !status_due {
            sample.voluntary = t.last.voluntary;
            sample.involuntary = t.last.involuntary;
        } else if self.cfg.read_status && counted.is_none() {
            t.status_at = self.now;
            let f = file("status");
            match pread_slot(&mut t.status, &f, &mut scratch.path, &mut scratch.buf)? {
                Read::Bytes(n) => {
                    let (v, inv) = parse_status_switches(&scratch.buf[..n])
                        .map_err(|e| LinuxError::parse(f.path(), e))?;
                    sample.voluntary = v;
                    sample.involuntary = inv;
                }
                Read::Gone => gone = true,
            }
        }
        // A thread that started a process has run since its children were last listed
        // (see `children_due`).
        let follow = self.cfg.follow_children && self.has_children_files;
        t.ran_unlisted |= follow && !idle;
        let floor = self.cfg.stat_max_age.min(CHILDREN_FLOOR);
        if !gone && follow && children_due(t, self.now, idle, self.spawned, max_age, floor) {
            t.children_at = self.now;
            t.ran_unlisted = false;
            let f = file("children");
            let read = pread_slot(&mut t.children, &f, &mut scratch.path, &mut scratch.buf)?;
            if let Read::Bytes(n) = read {
                for w in words(&scratch.buf[..n]) {
                    if let Some(child) =
                        crate::parse::parse_u64(w).and_then(|c| i32::try_from(c).ok())
                    {
                        scratch.found.push(Pid(child));
                    }
                }
            }
        }
        // First read from /proc: the source counts on from these values (with `status`'s
        // switch counts when they were read).
        if let (None, Some(c)) = (counted, self.counters.as_mut())
            && t.seen == 0
            && has_schedstat
            && !gone
        {
            c.seed(tid, &sample);
        }
        if !keep {
            t.close_all();
        }
        if gone {
            self.threads.remove(&tid);
            return Ok(false);
        }
        if t.seen == 0 {
            self.fresh.push(sample.key);
        }
        if counted.is_some() && t.seen != 0 {
            // The switches the faster source counted for it since the last sample.
            self.switches += sample.timeslices.saturating_sub(t.last.timeslices);
        }
        t.seen = generation;
        t.last = sample;
        into.threads.push(sample);
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A thread seen before, its `children` last read at 0 ms; `ran`: it ran since.
    fn tracked(ran: bool) -> Tracked {
        let mut t = Tracked::new(Pid(1), Tid(1));
        t.seen = 1;
        t.ran_unlisted = ran;
        t
    }

    #[test]
    fn children_due_after_a_run_then_idle_not_only_with_a_stale_stat() {
        // max_age 1 s (speed's `stat` age), floor 50 ms. See: issue 39 item 7: a shell
        // that forked within its `stat`'s second and then waited was never listed again.
        let (max_age, floor) = (Nanos::from_secs(1), CHILDREN_FLOOR);
        let ms = Nanos::from_millis;
        // (ran since the last read, now, idle now, spawns counted, due)
        let cases = [
            (false, ms(2000), true, true, false), // did not run: nothing new to list
            (true, ms(100), true, false, true),   // ran, now waits: listed
            (true, ms(20), true, false, false),   // …no sooner than the floor
            (true, ms(100), false, false, false), // still running: waits for max_age
            (true, ms(1000), false, false, true), // …reached
            (true, ms(1), false, true, true),     // a spawn counted: at once
        ];
        for (ran, now, idle, spawned, due) in cases {
            let t = tracked(ran);
            assert_eq!(
                children_due(&t, now, idle, spawned, max_age, floor),
                due,
                "ran {ran}, now {now:?}, idle {idle}, spawned {spawned}"
            );
        }
        // A thread never read is always listed.
        let fresh = Tracked::new(Pid(1), Tid(1));
        assert!(children_due(&fresh, ms(0), true, false, max_age, floor));
    }
}
