//! Several processes behind one [`Host`], so that one policy instance balances the threads
//! of all of them (the daemon's groups: Tumbler §5.4, Shuffling §4.5).
//!
//! Each process keeps a host of its own, with its own actuator and crash journal, so one
//! of them can be restored and let go while the others stay placed. [`Joined`] borrows
//! those hosts for one tick:
//!
//! ```text
//!  engine.tick(Joined) ─► sample: every member samples, the parts are merged into one
//!                         snapshot (threads are keyed by pid and tid, so they never clash)
//!                     ─► policy.decide over the group's topology (all members' CPUs)
//!                     ─► apply: each move goes to the member whose pid it names, its target
//!                         translated to the member's topology (the machine): a domain by
//!                         its CPUs, a CPU by its id
//! ```
//!
//! A member that exits or fails to sample during the tick is left out of that snapshot and
//! reported in [`Joined::dropped`], so the others are still balanced: the tick itself never
//! fails. A move naming a process that is not a member (it was paused, or dropped) counts
//! as vanished; a domain the member's topology has no CPU of counts as denied.
//!
//! ```
//! use threadbalance_manage::joined::translate;
//! use threadbalance_model::{CpuSet, Level, Target, Topology};
//! let machine = Topology::synthetic("package:2 core:2 pu:1").unwrap(); // CPUs 0-1, 2-3
//! let group = machine.restricted_to(&CpuSet::parse_list("2-3").unwrap()).unwrap();
//! // The group's package 0 is the machine's package 1 (domains renumber from 0).
//! let t = Target::Domain { level: Level::Package, index: 0 };
//! assert_eq!(translate(t, &group, &machine),
//!            Some(Target::Domain { level: Level::Package, index: 1 }));
//! ```

use crate::Nanos;
use threadbalance_model::{ApplyReport, Move, Pid, Plan, Snapshot, Target, Topology};
use threadbalance_policy::Host;

/// One process's host inside a group.
pub trait Member: Host {
    /// The process it manages.
    fn pid(&self) -> Pid;
    /// Whether that process has exited.
    fn exited(&mut self) -> bool;
    /// Whether its next sample may leave the machine's CPU time (`Snapshot::cpu_time`)
    /// out, because another member has read it for this tick. A member that does not read
    /// it has nothing to do.
    fn machine_time_elsewhere(&mut self, _elsewhere: bool) {}
}

/// A member left out of a tick.
#[derive(Debug)]
pub enum Dropped<E> {
    /// It exited.
    Exited(Pid),
    /// Sampling it failed while it still ran.
    Failed(Pid, E),
}

/// `target`, named in the group's topology `from`, named in the member's topology `to`
/// (which holds at least the CPUs of `from` that the member may use): a domain becomes the
/// domain of `to` at the same level that holds its first CPU; a CPU keeps its id. `None`
/// when `to` has no such domain (the member may not use that part of the machine).
pub fn translate(target: Target, from: &Topology, to: &Topology) -> Option<Target> {
    match target {
        Target::Domain { level, index } => {
            let domain = from.domains(level).get(index)?;
            let index = domain
                .cpus
                .iter()
                .find_map(|cpu| to.domain_of(cpu, level))?;
            Some(Target::Domain { level, index })
        }
        Target::Cpu(c) => to.cpu(c).map(|_| Target::Cpu(c)),
        Target::Original => Some(Target::Original),
    }
}

/// The members of one group, as one [`Host`] for one tick.
pub struct Joined<'a, M: Member> {
    now: Nanos,
    members: Vec<&'a mut M>,
    group: &'a Topology,
    machine: &'a Topology,
    part: Snapshot,
    dropped: Vec<Dropped<M::Error>>,
    asked: Vec<Move>,
}

impl<'a, M: Member> Joined<'a, M> {
    /// `members` (their hosts place on `machine`) balanced as one over `group`, at `now`.
    pub fn new(
        now: Nanos,
        members: Vec<&'a mut M>,
        group: &'a Topology,
        machine: &'a Topology,
    ) -> Joined<'a, M> {
        Joined {
            now,
            members,
            group,
            machine,
            part: Snapshot::default(),
            dropped: Vec::new(),
            asked: Vec::new(),
        }
    }

    /// The members left out of this tick (exited, or their sampling failed).
    pub fn dropped(&mut self) -> Vec<Dropped<M::Error>> {
        std::mem::take(&mut self.dropped)
    }

    /// The moves the policy asked for in this tick (for the log and the metrics).
    pub fn asked(&self) -> &[Move] {
        &self.asked
    }
}

impl<M: Member> Host for Joined<'_, M> {
    /// Never fails: a member that cannot be sampled is dropped from the tick instead.
    type Error = std::convert::Infallible;

    fn now(&self) -> Nanos {
        self.now
    }

    fn sample(&mut self, into: &mut Snapshot) -> Result<(), Self::Error> {
        into.clear();
        into.at = self.now;
        let mut measured = !self.members.is_empty();
        let mut i = 0;
        while i < self.members.len() {
            let m = &mut self.members[i];
            // The machine's CPU time is the same for every member: read once a tick, by
            // the first member that gives it.
            m.machine_time_elsewhere(into.cpu_time.is_some());
            match m.sample(&mut self.part) {
                Ok(()) => {
                    into.at = into.at.max(self.part.at);
                    into.threads.extend_from_slice(&self.part.threads);
                    into.memory.append(&mut self.part.memory);
                    into.wakes.extend_from_slice(&self.part.wakes);
                    measured &= self.part.wakes_measured;
                    into.cpu_time = into.cpu_time.or(self.part.cpu_time);
                    // One member read from `schedstat` makes the group's waits late.
                    into.waits_late |= self.part.waits_late;
                    i += 1;
                }
                Err(e) => {
                    let pid = m.pid();
                    let gone = if m.exited() {
                        Dropped::Exited(pid)
                    } else {
                        Dropped::Failed(pid, e)
                    };
                    self.dropped.push(gone);
                    self.members.remove(i);
                }
            }
        }
        into.wakes_measured = measured;
        into.sort();
        Ok(())
    }

    fn apply(&mut self, plan: &Plan) -> ApplyReport {
        self.asked.extend_from_slice(&plan.moves);
        let mut report = ApplyReport::default();
        let mut denied = 0;
        for m in self.members.iter_mut() {
            let pid = m.pid();
            let moves: Vec<Move> = plan
                .moves
                .iter()
                .filter(|mv| mv.thread.pid == pid)
                .filter_map(|mv| match translate(mv.to, self.group, self.machine) {
                    Some(to) => Some(Move { to, ..*mv }),
                    None => {
                        denied += 1;
                        None
                    }
                })
                .collect();
            let slices: Vec<_> = plan
                .slices
                .iter()
                .filter(|s| s.thread.pid == pid)
                .copied()
                .collect();
            if !moves.is_empty() || !slices.is_empty() {
                report.add(&m.apply(&Plan {
                    slices,
                    moves,
                    next_in: plan.next_in,
                    note: None,
                }));
            }
        }
        let members: Vec<Pid> = self.members.iter().map(|m| m.pid()).collect();
        let strangers = plan
            .moves
            .iter()
            .filter(|mv| !members.contains(&mv.thread.pid))
            .count();
        report.denied += denied;
        report.vanished += strangers as u32;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::{CpuId, CpuSet, CpuTime, Level, Reason, Sample, ThreadKey, Tid};

    /// A process with `threads` threads, whose sampling fails when `fail` is set. With
    /// `machine_time` it reads the machine's CPU time (its pid as the busy time) unless
    /// told another member does; `told` keeps what it was told at each sample.
    struct Proc {
        pid: Pid,
        threads: Vec<i32>,
        fail: bool,
        gone: bool,
        applied: Vec<Move>,
        machine_time: bool,
        elsewhere: bool,
        told: Vec<bool>,
        /// Its waits are read from `schedstat` (`Snapshot::waits_late`).
        late: bool,
    }

    fn proc(pid: i32, threads: &[i32]) -> Proc {
        Proc {
            pid: Pid(pid),
            threads: threads.to_vec(),
            fail: false,
            gone: false,
            applied: Vec::new(),
            machine_time: false,
            elsewhere: false,
            told: Vec::new(),
            late: false,
        }
    }

    fn key(pid: i32, tid: i32) -> ThreadKey {
        ThreadKey {
            pid: Pid(pid),
            tid: Tid(tid),
            start_time: 1,
        }
    }

    /// A process the fake host could not read.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Unreadable(Pid);

    impl std::fmt::Display for Unreadable {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "cannot read {}", self.0)
        }
    }

    impl Host for Proc {
        type Error = Unreadable;
        fn now(&self) -> Nanos {
            Nanos(0)
        }
        fn sample(&mut self, into: &mut Snapshot) -> Result<(), Unreadable> {
            if self.fail {
                return Err(Unreadable(self.pid));
            }
            into.clear();
            into.at = Nanos(u64::from(self.pid.0 as u32));
            for &t in &self.threads {
                into.threads.push(Sample {
                    key: key(self.pid.0, t),
                    ..Sample::default()
                });
            }
            into.wakes_measured = true;
            into.waits_late = self.late;
            if self.machine_time && !self.elsewhere {
                into.cpu_time = Some(CpuTime {
                    busy: self.pid.0 as u64,
                    steal: 0,
                });
            }
            Ok(())
        }
        fn apply(&mut self, plan: &Plan) -> ApplyReport {
            self.applied.extend(plan.moves.iter().cloned());
            ApplyReport {
                done: plan.moves.len() as u32,
                ..ApplyReport::default()
            }
        }
    }

    impl Member for Proc {
        fn pid(&self) -> Pid {
            self.pid
        }
        fn exited(&mut self) -> bool {
            self.gone
        }
        fn machine_time_elsewhere(&mut self, elsewhere: bool) {
            self.elsewhere = elsewhere;
            self.told.push(elsewhere);
        }
    }

    fn mv(pid: i32, tid: i32, to: Target) -> Move {
        Move {
            thread: key(pid, tid),
            to,
            why: Reason::Pin,
        }
    }

    #[test]
    fn joined_sample_merges_two_processes_sorted_by_key() {
        // Process 20 (threads 20, 21) and 10 (10, 11, 12): one snapshot of 5 threads,
        // process 10's first, taken at the later of the two instants (20 ns).
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let (mut a, mut b) = (proc(20, &[20, 21]), proc(10, &[10, 11, 12]));
        let mut j = Joined::new(Nanos(5), vec![&mut a, &mut b], &topo, &topo);
        let mut snap = Snapshot::default();
        j.sample(&mut snap).unwrap();
        let tids: Vec<i32> = snap.threads.iter().map(|s| s.key.tid.0).collect();
        assert_eq!(tids, vec![10, 11, 12, 20, 21]);
        assert_eq!(snap.at, Nanos(20));
        assert!(snap.wakes_measured);
        assert!(!snap.waits_late);
        assert!(j.dropped().is_empty());
    }

    #[test]
    fn joined_sample_waits_are_late_when_any_member_reads_them_late() {
        // Two members on the BPF counters (exact) and one whose counters stopped, read from
        // `schedstat` now: the group's policy must take its waits as late (the sparse-rounds
        // rule lends from one phase then, and credits take the late wait off).
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let (mut a, mut b, mut c) = (proc(1, &[1]), proc(2, &[2]), proc(3, &[3]));
        b.late = true;
        let mut snap = Snapshot::default();
        Joined::new(Nanos(5), vec![&mut a, &mut c], &topo, &topo)
            .sample(&mut snap)
            .unwrap();
        assert!(!snap.waits_late);
        Joined::new(Nanos(5), vec![&mut a, &mut b, &mut c], &topo, &topo)
            .sample(&mut snap)
            .unwrap();
        assert!(snap.waits_late);
    }

    #[test]
    fn joined_sample_reads_the_machine_time_once_a_tick() {
        // Three members that read the machine's CPU time (`proc/stat`, formatted whole at
        // every read): the first one that gives it reads it, the others are told to leave
        // it out. Member 1 fails, so member 2 reads; member 3 does not.
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let (mut a, mut b, mut c) = (proc(1, &[1]), proc(2, &[2]), proc(3, &[3]));
        for p in [&mut a, &mut b, &mut c] {
            p.machine_time = true;
        }
        a.fail = true;
        let mut j = Joined::new(Nanos(0), vec![&mut a, &mut b, &mut c], &topo, &topo);
        let mut snap = Snapshot::default();
        j.sample(&mut snap).unwrap();
        assert_eq!(snap.cpu_time.map(|t| t.busy), Some(2));
        drop(j);
        assert_eq!(
            (a.told, b.told, c.told),
            (vec![false], vec![false], vec![true])
        );
    }

    #[test]
    fn joined_sample_drops_an_exited_or_failing_member_and_keeps_the_others() {
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let (mut a, mut b, mut c) = (proc(1, &[1]), proc(2, &[2]), proc(3, &[3, 4]));
        a.fail = true;
        a.gone = true; // exited: its read failed because it is gone
        b.fail = true; // still there: a real failure
        let mut j = Joined::new(Nanos(0), vec![&mut a, &mut b, &mut c], &topo, &topo);
        let mut snap = Snapshot::default();
        j.sample(&mut snap).unwrap();
        assert_eq!(snap.threads.len(), 2);
        let dropped = j.dropped();
        assert!(matches!(dropped[0], Dropped::Exited(Pid(1))));
        assert!(
            matches!(&dropped[1], Dropped::Failed(Pid(2), e) if e.to_string() == "cannot read 2")
        );
        // A move for a dropped member's thread is not carried out: it counts as vanished.
        let r = j.apply(&Plan {
            moves: vec![
                mv(2, 2, Target::Cpu(CpuId(0))),
                mv(3, 4, Target::Cpu(CpuId(1))),
            ],
            ..Plan::default()
        });
        assert_eq!((r.done, r.vanished), (1, 1));
    }

    #[test]
    fn joined_apply_sends_each_move_to_its_process_translated() {
        // Machine: packages {0,1} and {2,3}. The group may use CPUs 1-3 only, so its
        // package 0 is {1} (machine package 0) and its package 1 is {2,3} (machine 1);
        // its core 0 is CPU 1, the machine's core 1.
        let machine = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let group = machine
            .restricted_to(&CpuSet::parse_list("1-3").unwrap())
            .unwrap();
        let (mut a, mut b) = (proc(10, &[10, 11]), proc(20, &[20]));
        let mut j = Joined::new(Nanos(0), vec![&mut a, &mut b], &group, &machine);
        let pkg = |index| Target::Domain {
            level: Level::Package,
            index,
        };
        let core = |index| Target::Domain {
            level: Level::Core,
            index,
        };
        let plan = Plan {
            moves: vec![
                mv(10, 10, pkg(1)),
                mv(20, 20, pkg(0)),
                mv(10, 11, core(0)),
                mv(30, 30, pkg(0)), // not a member
            ],
            ..Plan::default()
        };
        let r = j.apply(&plan);
        assert_eq!((r.done, r.vanished, r.denied), (3, 1, 0));
        assert_eq!(j.asked().len(), 4);
        drop(j);
        assert_eq!(a.applied.len(), 2);
        assert_eq!(a.applied[0].to, pkg(1));
        assert_eq!(a.applied[1].to, core(1));
        assert_eq!(b.applied[0].to, pkg(0));
    }

    #[test]
    fn translate_a_domain_or_cpu_the_member_cannot_use_is_none() {
        // The member's topology holds CPUs 0-1 only (package 0); the group's package 1
        // (CPUs 2-3) and CPU 3 have no counterpart there.
        let group = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let member = group
            .restricted_to(&CpuSet::parse_list("0-1").unwrap())
            .unwrap();
        let pkg1 = Target::Domain {
            level: Level::Package,
            index: 1,
        };
        assert_eq!(translate(pkg1, &group, &member), None);
        assert_eq!(translate(Target::Cpu(CpuId(3)), &group, &member), None);
        assert_eq!(
            translate(Target::Cpu(CpuId(1)), &group, &member),
            Some(Target::Cpu(CpuId(1)))
        );
        assert_eq!(
            translate(Target::Original, &group, &member),
            Some(Target::Original)
        );
    }
}
