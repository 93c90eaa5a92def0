//! The replay rules against a fake world: one test per rule, in the order the module docs
//! give them.

use super::*;

/// A world of processes and threads held in memory.
#[derive(Default)]
struct Fake {
    /// tid → (pid, start time, mask)
    threads: BTreeMap<i32, (i32, u64, CpuSet)>,
    /// pid → parent pid
    parent: BTreeMap<i32, i32>,
    /// tids the kernel refuses to change
    refuse: Vec<i32>,
    /// set on the first `set_affinity`: the tid is reused by another process right then
    reuse_on_set: Option<(i32, u64)>,
    writes: u32,
    /// tid → its slice (ns as the kernel reports it) and reset-on-fork flag
    slices: BTreeMap<i32, Slice>,
    /// tid → the CPUs its cpuset allows (unknown when absent)
    cpusets: BTreeMap<i32, CpuSet>,
    /// tid → how many times it moved to another CPU (unknown when absent)
    migrations: BTreeMap<i32, u64>,
    /// tid → who set its mask last, as a trace says (unknown when absent)
    setters: BTreeMap<i32, Setter>,
}

impl Fake {
    fn add(&mut self, pid: i32, tid: i32, start: u64, mask: &str) {
        self.threads.insert(tid, (pid, start, m(mask)));
    }
    fn mask(&self, tid: i32) -> String {
        self.threads[&tid].2.to_string()
    }
}

impl World for Fake {
    fn start_time(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        self.threads
            .get(&tid.0)
            .filter(|t| t.0 == pid.0)
            .map(|t| t.1)
    }
    fn affinity(&mut self, tid: Tid) -> io::Result<CpuSet> {
        self.threads
            .get(&tid.0)
            .map(|t| t.2.clone())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
    }
    fn set_affinity(&mut self, tid: Tid, mask: &CpuSet) -> io::Result<()> {
        if self.refuse.contains(&tid.0) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        self.writes += 1;
        if let Some((pid, start)) = self.reuse_on_set.take() {
            // The thread meant exits; a new process takes its tid before the write lands.
            let leader_mask = self.threads.get(&pid).map(|t| t.2.clone());
            self.threads
                .insert(tid.0, (pid, start, leader_mask.unwrap_or_default()));
        }
        let t = self
            .threads
            .get_mut(&tid.0)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))?;
        t.2 = mask.clone();
        Ok(())
    }
    fn threads(&mut self, pid: Pid) -> Vec<Tid> {
        self.threads
            .iter()
            .filter(|(_, t)| t.0 == pid.0)
            .map(|(&tid, _)| Tid(tid))
            .collect()
    }
    fn children(&mut self, pid: Pid) -> Vec<Pid> {
        self.parent
            .iter()
            .filter(|(_, p)| **p == pid.0)
            .map(|(&c, _)| Pid(c))
            .collect()
    }
    fn process_of(&mut self, tid: Tid) -> Option<Pid> {
        self.threads.get(&tid.0).map(|t| Pid(t.0))
    }
    fn parent(&mut self, pid: Pid) -> Option<Pid> {
        self.parent.get(&pid.0).map(|&p| Pid(p))
    }
    fn cpuset(&mut self, _pid: Pid, tid: Tid) -> Option<CpuSet> {
        self.cpusets.get(&tid.0).cloned()
    }
    fn migrations(&mut self, _pid: Pid, tid: Tid) -> Option<u64> {
        self.migrations.get(&tid.0).copied()
    }
    fn setter(&mut self, key: ThreadKey, _current: &CpuSet) -> Setter {
        self.setters
            .get(&key.tid.0)
            .copied()
            .unwrap_or(Setter::Unknown)
    }
    fn slice(&mut self, tid: Tid) -> io::Result<Slice> {
        self.slices
            .get(&tid.0)
            .copied()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
    }
    fn set_slice(&mut self, tid: Tid, s: Slice) -> io::Result<()> {
        if self.refuse.contains(&tid.0) {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        self.writes += 1;
        // 0 asks for the default, which the kernel then reports (3 ms here).
        let ns = if s.ns == 0 { 3_000_000 } else { s.ns };
        self.slices.insert(
            tid.0,
            Slice {
                ns,
                reset_on_fork: s.reset_on_fork,
            },
        );
        Ok(())
    }
}

fn m(s: &str) -> CpuSet {
    CpuSet::parse_list(s).unwrap()
}

fn key(pid: i32, tid: i32, start: u64) -> ThreadKey {
    ThreadKey {
        pid: Pid(pid),
        tid: Tid(tid),
        start_time: start,
    }
}

fn set(pid: i32, tid: i32, start: u64, original: &str, mask: &str) -> Record {
    Record::Set {
        key: key(pid, tid, start),
        original: m(original),
        mask: m(mask),
    }
}

fn ledger(records: &[Record]) -> Ledger {
    let mut text = format!("{MAGIC}\n");
    for r in records {
        text.push_str(&r.to_line());
    }
    Ledger::parse(&text).unwrap()
}

#[test]
fn record_every_kind_round_trips_through_its_line() {
    for r in [
        Record::Owner {
            pid: Pid(42),
            start: 7,
        },
        Record::Since(99),
        Record::Process {
            pid: Pid(5),
            start: 3,
            base: m("0-3,8"),
        },
        set(5, 6, 10, "0-7", "0-3"),
        Record::Release(key(5, 6, 10)),
        Record::Unset(key(5, 6, 10)),
        Record::Applied(m("2")),
        Record::Boot("5b2a-77".into()),
    ] {
        let line = r.to_line();
        assert!(line.ends_with('\n'));
        assert_eq!(Record::parse_line(line.trim_end()), Some(r), "{line}");
    }
}

#[test]
fn ledger_parse_without_magic_is_refused() {
    assert!(Ledger::parse("set 1 2 3 0 1\n").is_err());
    assert!(Ledger::parse("").is_err());
}

#[test]
fn ledger_parse_last_line_cut_short_is_ignored() {
    // A crash in the middle of a write leaves "set 5 6 10 0-7 0-" without its newline:
    // its mask would read as "0", a mask never set. It must not count.
    let text = format!("{MAGIC}\nset 5 6 10 0-7 0-3\nset 5 7 10 0-7 0-");
    let l = Ledger::parse(&text).unwrap();
    assert_eq!(l.threads.len(), 1);
    assert!(l.threads.contains_key(&key(5, 6, 10)));
}

#[test]
fn replay_thread_still_on_our_mask_gets_its_original_back() {
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!(w.mask(6), "0-7");
    assert_eq!(r.restored, 1);
}

#[test]
fn replay_killed_between_journaling_a_set_and_making_it_keeps_the_mask_before_ours() {
    // Killed after journaling the move to 4-7 but before making it: the thread still has
    // 0-3, the mask of the move before. It is still ours.
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    let l = ledger(&[set(5, 6, 10, "0-7", "0-3"), set(5, 6, 10, "0-7", "4-7")]);
    let r = replay(&l, &mut w);
    assert_eq!(w.mask(6), "0-7");
    assert_eq!(r.restored, 1);
}

#[test]
fn replay_mask_equal_to_an_earlier_but_not_last_mask_is_the_programs() {
    // See: issue 39, item 5. We set {1}, then {0}, and went on (another record follows,
    // so the set of {0} was made). The thread now shows {1}: a mask we set once, but not
    // the last one. The program pinned it there: it keeps it.
    let mut w = Fake::default();
    w.add(5, 6, 10, "1");
    w.add(5, 7, 10, "1");
    let l = ledger(&[
        set(5, 6, 10, "0-1", "1"),
        set(5, 6, 10, "0-1", "0"),
        set(5, 7, 10, "0-1", "1"),
    ]);
    let r = replay(&l, &mut w);
    assert_eq!(w.mask(6), "1");
    assert_eq!(r.kept, vec![(key(5, 6, 10), Kept::ProgramChoice(m("1")))]);
    // Thread 7 is on the last mask we set on it: ours, put back.
    assert_eq!((w.mask(7).as_str(), r.restored), ("0-1", 1));
}

#[test]
fn replay_refused_set_is_unset_and_the_mask_before_stays_ours() {
    // {0} was set; {1} was announced and refused (`unset`); more records followed. The
    // thread is on {0}, which is again the last mask we set.
    let mut w = Fake::default();
    w.add(5, 6, 10, "0");
    let l = ledger(&[
        set(5, 6, 10, "0-1", "0"),
        set(5, 6, 10, "0-1", "1"),
        Record::Unset(key(5, 6, 10)),
        Record::Applied(m("1")),
    ]);
    assert_eq!(l.threads[&key(5, 6, 10)].masks, vec![m("0")]);
    let r = replay(&l, &mut w);
    assert_eq!((w.mask(6).as_str(), r.restored), ("0-1", 1));
}

#[test]
fn ledger_unset_of_the_only_set_forgets_the_thread() {
    let l = ledger(&[set(5, 6, 10, "0-1", "0"), Record::Unset(key(5, 6, 10))]);
    assert!(l.threads.is_empty());
}

#[test]
fn replay_mask_narrowed_by_the_cpuset_is_ours_and_gets_the_original() {
    // See: issue 39, item 6. We set {0}; the thread's cpuset shrank to {1}, so the kernel
    // shows {1} ({0} ∩ {1} is empty: the whole cpuset). Not the program's: put back.
    let mut w = Fake::default();
    w.add(5, 6, 10, "1");
    w.cpusets.insert(6, m("1"));
    // And a thread we set on {0-1} of a machine 0-3, its cpuset now {1-3}: {1}.
    w.add(5, 7, 10, "1");
    w.cpusets.insert(7, m("1-3"));
    let l = ledger(&[set(5, 6, 10, "0-1", "0"), set(5, 7, 10, "0-3", "0-1")]);
    let r = replay(&l, &mut w);
    assert_eq!((w.mask(6), w.mask(7)), ("0-1".into(), "0-3".into()));
    assert_eq!(r.restored, 2);
    assert!(r.kept.is_empty(), "{:?}", r.kept);
    assert_eq!(r.narrowed, vec![key(5, 6, 10), key(5, 7, 10)]);
}

#[test]
fn replay_thread_born_pinned_to_a_cpu_it_migrated_to_is_left_alone() {
    // See: issue 39, item 5. Thread 6 is ours on {1}. Thread 7, born after management
    // began, is on {1} too, but it moved CPU once: a thread that inherited {1} was born on
    // CPU 1 and could never have moved. Its program pinned it. Thread 8, also on {1}, never
    // moved: inherited, widened.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-1");
    w.add(5, 6, 10, "1");
    w.add(5, 7, 40, "1");
    w.migrations.insert(7, 1);
    w.add(5, 8, 40, "1");
    w.migrations.insert(8, 0);
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-1"),
        },
        set(5, 6, 10, "0-1", "1"),
    ]);
    let r = replay(&l, &mut w);
    assert_eq!(w.mask(7), "1");
    assert_eq!(r.born_pinned, vec![key(5, 7, 40)]);
    assert_eq!((w.mask(6), w.mask(8)), ("0-1".into(), "0-1".into()));
}

#[test]
fn replay_with_the_trace_the_setter_decides_what_is_put_back() {
    // See: issue 39, item 5. We set {1} then {0} on threads 6, 7 and 8. Thread 6's program
    // then set {0} itself, the very mask we set last: the masks alone take it for ours,
    // the trace says it is the program's. Thread 7 shows {1}, once ours: the trace saw no
    // one but us set it (a cpuset we cannot read moved it), so it is ours, put back. Thread
    // 8, on {0}, was set last by us: put back.
    let mut w = Fake::default();
    for tid in [6, 7, 8] {
        w.add(5, tid, 10, "0");
    }
    w.threads.get_mut(&7).unwrap().2 = m("1");
    w.setters.insert(6, Setter::Program);
    w.setters.insert(7, Setter::Tool);
    w.setters.insert(8, Setter::Tool);
    let mut records = Vec::new();
    for tid in [6, 7, 8] {
        records.push(set(5, tid, 10, "0-1", "1"));
        records.push(set(5, tid, 10, "0-1", "0"));
    }
    let r = replay(&ledger(&records), &mut w);
    assert_eq!(r.kept, vec![(key(5, 6, 10), Kept::ProgramChoice(m("0")))]);
    assert_eq!(w.mask(6), "0");
    assert_eq!((w.mask(7), w.mask(8)), ("0-1".into(), "0-1".into()));
    assert_eq!(r.restored, 2);
    assert_eq!(r.narrowed, vec![key(5, 7, 10)]);
    // Without the trace, the same world: 6 is put back over its program, 7 left.
    let mut w2 = Fake::default();
    for tid in [6, 7] {
        w2.add(5, tid, 10, "0");
    }
    w2.threads.get_mut(&7).unwrap().2 = m("1");
    // (A record after the last set: none is in flight.)
    let mut without_8 = records[..4].to_vec();
    without_8.push(Record::Applied(m("0")));
    let r = replay(&ledger(&without_8), &mut w2);
    assert_eq!(w2.mask(6), "0-1");
    assert_eq!(r.kept, vec![(key(5, 7, 10), Kept::ProgramChoice(m("1")))]);
}

#[test]
fn replay_thread_born_on_the_cpu_it_pinned_itself_to_is_left_alone_with_the_trace() {
    // See: issue 39, item 5. Thread 7, born after management began, pinned itself to {1},
    // which thread 6 holds (ours), and never had to move: inherited, by the migrations.
    // The trace saw its program set it. Thread 8, same, set by no one: widened.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-1");
    w.add(5, 6, 10, "1");
    w.add(5, 7, 40, "1");
    w.migrations.insert(7, 0);
    w.setters.insert(7, Setter::Program);
    w.add(5, 8, 40, "1");
    w.migrations.insert(8, 0);
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-1"),
        },
        set(5, 6, 10, "0-1", "1"),
    ]);
    let r = replay(&l, &mut w);
    assert_eq!(w.mask(7), "1");
    assert_eq!(r.born_pinned, vec![key(5, 7, 40)]);
    assert_eq!((w.mask(6), w.mask(8)), ("0-1".into(), "0-1".into()));
}

#[test]
fn replay_killed_before_the_first_set_changes_nothing() {
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-7");
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!(w.writes, 0);
    assert_eq!(r.already, 1);
}

#[test]
fn replay_reused_tid_is_left_alone() {
    // Tid 6 now belongs to a thread that started at tick 20, not 10.
    let mut w = Fake::default();
    w.add(5, 6, 20, "0-3");
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!(w.mask(6), "0-3");
    assert_eq!((r.vanished, w.writes), (1, 0));
}

#[test]
fn replay_program_choice_is_never_overwritten() {
    let mut w = Fake::default();
    w.add(5, 6, 10, "2");
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!(w.mask(6), "2");
    assert_eq!(r.kept, vec![(key(5, 6, 10), Kept::ProgramChoice(m("2")))]);
}

#[test]
fn replay_released_thread_is_not_touched() {
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    let l = ledger(&[set(5, 6, 10, "0-7", "0-3"), Record::Release(key(5, 6, 10))]);
    replay(&l, &mut w);
    assert_eq!((w.mask(6).as_str(), w.writes), ("0-3", 0));
}

#[test]
fn replay_refused_write_is_reported_with_its_reason() {
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    w.refuse.push(6);
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    let failures: Vec<_> = r.failures().collect();
    assert_eq!(failures.len(), 1);
    let RestoreFailed::Affinity(e) = failures[0].1 else {
        panic!("{failures:?}")
    };
    assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{failures:?}");
    assert!(
        failures[0].1.to_string().contains("not permitted"),
        "{failures:?}"
    );
}

#[test]
fn replay_tid_reused_by_a_thread_during_the_write_gives_it_its_leaders_mask() {
    // Thread 6 exits and a new thread of process 60 (whose leader is on 4-5) takes tid 6
    // between the check and the write. The write lands on the stranger; the check after
    // it sees start time 30, not 10, and the stranger gets its leader's mask.
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    w.add(60, 60, 25, "4-5");
    w.reuse_on_set = Some((60, 30));
    let r = replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!((r.vanished, r.restored), (1, 0));
    assert_eq!(w.threads[&6], (60, 30, m("4-5")));
}

#[test]
fn replay_tid_reused_by_a_new_process_during_the_write_gives_it_its_parents_mask() {
    // This time tid 6 becomes a new process (pid 6) forked by process 60 on 4-5.
    let mut w = Fake::default();
    w.add(5, 6, 10, "0-3");
    w.add(60, 60, 25, "4-5");
    w.parent.insert(6, 60);
    w.reuse_on_set = Some((6, 30));
    replay(&ledger(&[set(5, 6, 10, "0-7", "0-3")]), &mut w);
    assert_eq!(w.threads[&6], (6, 30, m("4-5")));
}

#[test]
fn replay_thread_born_after_since_with_our_mask_is_widened() {
    // Process 5 was on 0-7; we moved thread 6 to 0-3; thread 7, born at tick 40 (after
    // management began at 30), inherited 0-3 and was never moved.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-7");
    w.add(5, 6, 10, "0-3");
    w.add(5, 7, 40, "0-3");
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-7"),
        },
        set(5, 6, 10, "0-7", "0-3"),
    ]);
    let r = replay(&l, &mut w);
    assert_eq!((w.mask(6), w.mask(7)), ("0-7".into(), "0-7".into()));
    assert_eq!(r.restored, 2);
}

#[test]
fn replay_old_thread_with_our_mask_by_chance_is_left_alone() {
    // Thread 8 started at tick 2, before management: its 0-3 is its own.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-7");
    w.add(5, 6, 10, "0-3");
    w.add(5, 8, 2, "0-3");
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-7"),
        },
        set(5, 6, 10, "0-7", "0-3"),
    ]);
    replay(&l, &mut w);
    assert_eq!(w.mask(8), "0-3");
}

#[test]
fn replay_forked_grandchild_with_our_mask_is_widened() {
    // 5 forks 50 (tick 40) which forks 500 (tick 50); both inherited 0-3 from thread 6.
    // 51 is a child born before management (tick 3): never ours, nor its children.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-7");
    w.add(5, 6, 10, "0-3");
    w.add(50, 50, 40, "0-3");
    w.add(500, 500, 50, "0-3");
    w.add(51, 51, 3, "0-3");
    w.parent.insert(50, 5);
    w.parent.insert(500, 50);
    w.parent.insert(51, 5);
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-7"),
        },
        set(5, 6, 10, "0-7", "0-3"),
    ]);
    replay(&l, &mut w);
    assert_eq!(w.mask(50), "0-7");
    assert_eq!(w.mask(500), "0-7");
    assert_eq!(w.mask(51), "0-3");
}

#[test]
fn replay_thread_born_with_a_mask_we_no_longer_hold_is_the_programs() {
    // Thread 6 went to 4-7, then to 0-3: we hold only 0-3 now. Thread 7, born at tick 40,
    // is on 4-7: no thread of ours had 4-7 when it was born, so it pinned itself.
    let mut w = Fake::default();
    w.add(5, 5, 1, "0-7");
    w.add(5, 6, 10, "0-3");
    w.add(5, 7, 40, "4-7");
    let l = ledger(&[
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-7"),
        },
        set(5, 6, 10, "0-7", "4-7"),
        set(5, 6, 10, "0-7", "0-3"),
    ]);
    replay(&l, &mut w);
    assert_eq!(w.mask(7), "4-7");
    assert_eq!(w.mask(6), "0-7");
}

#[test]
fn ledger_to_records_rebuilds_it_without_released_threads() {
    let l = ledger(&[
        Record::Owner {
            pid: Pid(9),
            start: 1,
        },
        Record::Boot("b".into()),
        Record::Since(30),
        Record::Process {
            pid: Pid(5),
            start: 1,
            base: m("0-7"),
        },
        set(5, 6, 10, "0-7", "4-7"),
        set(5, 6, 10, "0-7", "0-3"),
        set(5, 7, 11, "0-7", "0-3"),
        Record::Release(key(5, 7, 11)),
    ]);
    let again = ledger(&l.to_records());
    let mut expected = l.clone();
    expected.threads.remove(&key(5, 7, 11));
    assert_eq!(again, expected);
    // Both masks of thread 6 survive, in order: the last is the one that is ours; the
    // earlier ones are kept for the inheritance rules. None reads as in flight.
    assert_eq!(again.in_flight, None);
    assert_eq!(
        again.threads[&key(5, 6, 10)].masks,
        vec![m("4-7"), m("0-3")]
    );
}

#[test]
fn replay_orphan_under_the_owner_gets_the_base_and_the_owner_is_untouched() {
    // `run` (pid 9, a subreaper) ran command 5; 5 forked 50 from confined thread 6 and
    // exited, so 50 now hangs under 9. Our own thread 9 happens to be on 0-3 too: never
    // touched.
    let mut w = Fake::default();
    w.add(9, 9, 29, "0-3");
    w.add(50, 50, 40, "0-3");
    w.parent.insert(50, 9);
    let l = ledger(&[
        Record::Owner {
            pid: Pid(9),
            start: 29,
        },
        Record::Since(29),
        Record::Process {
            pid: Pid(9),
            start: 29,
            base: m("0-7"),
        },
        Record::Process {
            pid: Pid(5),
            start: 31,
            base: m("0-7"),
        },
        set(5, 6, 35, "0-7", "0-3"),
        // Thread 6 was released when it exited: its mask still counts for orphans.
        Record::Release(key(5, 6, 35)),
    ]);
    replay(&l, &mut w);
    assert_eq!(w.mask(50), "0-7");
    assert_eq!(w.mask(9), "0-3");
}

#[test]
fn ledger_holds_answers_as_held_does_for_each_process() {
    // Process 5: thread 5 holds "0" (set twice: "1" then "0"), thread 6 holds "1" and is
    // then released; process 9 (keys sort after 5's) holds "1" on thread 9. Process 7 holds
    // nothing.
    let mut records = vec![
        set(5, 5, 10, "0-1", "1"),
        set(5, 5, 10, "0-1", "0"),
        set(5, 6, 11, "0-1", "1"),
        Record::Release(key(5, 6, 11)),
        set(9, 9, 12, "0-1", "1"),
    ];
    let l = ledger(&records);
    assert_eq!(l.held(Pid(5)), vec![m("0")]);
    assert!(l.holds(Pid(5), &m("0")));
    // "1" is held only by a released thread of 5, and by process 9: not 5's.
    assert!(!l.holds(Pid(5), &m("1")));
    assert!(l.holds(Pid(9), &m("1")));
    assert!(l.holds_any(Pid(5)) && l.holds_any(Pid(9)));
    assert!(!l.holds_any(Pid(7)));
    // Thread 6 set again: 5 holds "0" and "1".
    records.push(set(5, 6, 11, "0-1", "1"));
    let l = ledger(&records);
    assert_eq!(l.held(Pid(5)), vec![m("0"), m("1")]);
    assert!(l.holds(Pid(5), &m("1")) && l.holds(Pid(5), &m("0")));
}

fn sl(ns: u64, reset_on_fork: bool) -> Slice {
    Slice { ns, reset_on_fork }
}

#[test]
fn slice_records_round_trip_through_journal_lines_and_compaction() {
    let r = Record::Slice {
        key: key(5, 6, 10),
        original: sl(0, false),
        ours: 500_000,
    };
    assert_eq!(r.to_line(), "slice 5 6 10 0 0 500000\n");
    assert_eq!(
        Record::parse_line("slice 5 6 10 0 0 500000"),
        Some(r.clone())
    );
    let u = Record::Unslice(key(5, 6, 10));
    assert_eq!(u.to_line(), "unslice 5 6 10\n");
    assert_eq!(Record::parse_line("unslice 5 6 10"), Some(u.clone()));
    // A flag other than 0 or 1, or no slice of ours, is not a record.
    assert_eq!(Record::parse_line("slice 5 6 10 0 2 500000"), None);
    assert_eq!(Record::parse_line("slice 5 6 10 0 0 0"), None);
    let l = ledger(&[
        r.clone(),
        Record::Slice {
            key: key(5, 7, 11),
            original: sl(2_000_000, true),
            ours: 500_000,
        },
        u,
    ]);
    assert_eq!(l.slices.len(), 1);
    assert_eq!(
        l.slices[&key(5, 7, 11)],
        (sl(2_000_000, true), vec![500_000])
    );
    assert_eq!(ledger(&l.to_records()), l);
}

#[test]
fn replay_puts_back_only_slices_still_ours_on_the_same_thread() {
    let mut w = Fake::default();
    // 6 runs in our slice: back to the default. 7 set its own since: left. 8's tid was
    // reused (another start time): left. 9 refuses: listed as a failure.
    for (tid, start) in [(6, 10), (7, 11), (8, 99), (9, 13)] {
        w.add(5, tid, start, "0-3");
    }
    w.slices.insert(6, sl(500_000, true));
    w.slices.insert(7, sl(1_000_000, false));
    w.slices.insert(8, sl(500_000, true));
    w.slices.insert(9, sl(500_000, true));
    w.refuse.push(9);
    let rec = |tid: i32, start: u64| Record::Slice {
        key: key(5, tid, start),
        original: sl(0, false),
        ours: 500_000,
    };
    let l = ledger(&[rec(6, 10), rec(7, 11), rec(8, 12), rec(9, 13)]);
    let r = replay(&l, &mut w);
    assert_eq!(r.slices_restored, 1, "{r:?}");
    assert_eq!(w.slices[&6], sl(3_000_000, false));
    assert_eq!(w.slices[&7], sl(1_000_000, false));
    assert_eq!(w.slices[&8], sl(500_000, true));
    assert_eq!(r.failures().count(), 1);
    assert_eq!(r.failures().next().map(|(k, _)| *k), Some(key(5, 9, 13)));
}

#[test]
fn restore_failed_says_what_was_refused_then_the_error() {
    let denied = || io::Error::from_raw_os_error(libc::EPERM);
    let mask = RestoreFailed::Affinity(denied());
    let slice = RestoreFailed::Slice(denied());
    assert_eq!(mask.to_string(), denied().to_string());
    assert_eq!(slice.to_string(), format!("time slice: {}", denied()));
    // The io error is kept as the source, for a printer of the chain.
    let source = std::error::Error::source(&slice).unwrap();
    assert_eq!(source.to_string(), denied().to_string());
    assert_eq!(slice.io().raw_os_error(), Some(libc::EPERM));
    // The same refusal is of the same thing with the same errno.
    assert_eq!(mask, RestoreFailed::Affinity(denied()));
    assert_ne!(mask, slice);
    assert_ne!(
        mask,
        RestoreFailed::Affinity(io::Error::from_raw_os_error(libc::EINVAL))
    );
}
