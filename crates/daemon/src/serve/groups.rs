//! The daemon's groups: one policy instance over the threads of every managed process that
//! shares CPUs with another under the same policy and level (Tumbler §5.4, Shuffling §4.5;
//! the decision is [`crate::group::form`], pure).
//!
//! ```text
//!  every window, and after each release ─► form(managed processes) ─► for each group:
//!     same members, leader and CPUs as a running group ─► kept (its policy's state too)
//!     otherwise ─► a new policy over the members' CPUs, from the leader's rule
//!  tick a group when due ─► Joined(its unpaused members' hosts) ─► engine ─► moves, each
//!     to its own process's actuator and journal
//! ```
//!
//! A group is only the policy: masks, journals and locks stay with each process, so a
//! process that leaves a group (exits, is released, stops matching) has its own threads
//! restored and no one else's, and the group re-forms without it, leaving the others'
//! threads where they are until the new policy instance moves them.

use super::managed::{Managed, ProcessHost, Unmatched, Why};
use crate::group::{Member, form};
use crate::metrics::{Metrics, reason_name};
use std::collections::{BTreeMap, BTreeSet};
use threadbalance_manage::Ticker;
use threadbalance_manage::joined::{Dropped, Joined};
use threadbalance_model::{CpuSet, Nanos, Pid, Topology, Window};
use threadbalance_policy::{Policy, PolicyError};

/// Processes under one policy instance.
pub struct Group {
    /// Its number, unique over the daemon's life (what `ctl list` shows).
    pub id: u64,
    /// Its members, by pid.
    pub members: Vec<Pid>,
    /// The member whose rule's policy and settings it runs.
    pub leader: Pid,
    /// The CPUs its policy places on: every member's.
    pub cpus: CpuSet,
    /// The policy's name.
    pub policy_name: String,
    policy: Box<dyn Policy>,
    ticker: Ticker,
    topo: Topology,
}

/// Why a group could not be formed (logged; its members stay managed, unbalanced).
#[derive(Debug, thiserror::Error)]
pub enum GroupError {
    /// The leader is not among the managed processes (a bug).
    #[error("group leader {0} is not managed")]
    NoLeader(Pid),
    /// The machine could not be cut down to the members' CPUs.
    #[error(transparent)]
    Cpus(threadbalance_model::ModelError),
    /// The leader's rule's policy did not build over them.
    #[error("policy {name}")]
    Policy {
        /// The policy's name.
        name: String,
        /// Why it did not build.
        #[source]
        source: PolicyError,
    },
}

/// What a tick of a group did: the members that exited or failed, with why, to release.
#[derive(Default)]
pub struct Ticked {
    /// The members to release.
    pub gone: Vec<(Pid, Why)>,
}

/// The union of the CPUs of `members`.
fn cpus_of<P>(members: &[Pid], managed: &BTreeMap<Pid, Managed<P>>) -> CpuSet {
    members
        .iter()
        .filter_map(|p| managed.get(p))
        .fold(CpuSet::new(), |acc, m| acc.union(&m.cpus))
}

impl Group {
    /// When the group wants its next tick.
    pub fn next(&self) -> Nanos {
        self.ticker.next()
    }

    /// The snapshot of its last tick (cumulative counters of all its members' threads).
    pub fn latest(&self) -> &threadbalance_model::Snapshot {
        self.ticker.latest()
    }

    /// The last window its engine measured (the threads of all its members).
    pub fn window(&self) -> &Window {
        self.ticker.window()
    }

    /// The policy over `members` (all in `managed`), from `leader`'s rule, over their
    /// CPUs of `machine`.
    fn build<P>(
        id: u64,
        members: Vec<Pid>,
        leader: Pid,
        managed: &BTreeMap<Pid, Managed<P>>,
        machine: &Topology,
        now: Nanos,
    ) -> Result<Group, GroupError> {
        let lead = managed.get(&leader).ok_or(GroupError::NoLeader(leader))?;
        let cpus = cpus_of(&members, managed);
        let topo = machine.restricted_to(&cpus).map_err(GroupError::Cpus)?;
        let a = &lead.assignment;
        let policy =
            threadbalance_policy::build(&a.policy, &a.settings, &topo).map_err(|source| {
                GroupError::Policy {
                    name: a.policy.clone(),
                    source,
                }
            })?;
        Ok(Group {
            id,
            members,
            leader,
            cpus,
            policy_name: a.policy.clone(),
            policy,
            ticker: Ticker::new(now),
            topo,
        })
    }

    /// Ticks when due: samples the unpaused members as one, decides, applies (observing:
    /// decides only). Every move is logged at debug level and counted by reason when
    /// carried out; each member's thread count is updated.
    pub fn tick_if_due<P: ProcessHost>(
        &mut self,
        now: Nanos,
        managed: &mut BTreeMap<Pid, Managed<P>>,
        machine: &Topology,
        metrics: &Metrics,
        observe: bool,
    ) -> Ticked {
        let mut ticked = Ticked::default();
        if now < self.ticker.next() {
            return ticked;
        }
        let mut hosts: Vec<&mut Managed<P>> = Vec::new();
        for m in managed.values_mut() {
            if !self.members.contains(&m.pid) || m.paused {
                continue;
            }
            if threadbalance_manage::joined::Member::exited(m) {
                ticked.gone.push((m.pid, Why::Unmatched(Unmatched::Exited)));
            } else {
                hosts.push(m);
            }
        }
        if hosts.is_empty() {
            return ticked;
        }
        let mut joined = Joined::new(now, hosts, &self.topo, machine);
        let Ok(tick) = self
            .ticker
            .tick_if_due(&mut joined, &self.topo, self.policy.as_mut(), now);
        let asked = joined.asked().to_vec();
        for d in joined.dropped() {
            ticked.gone.push(match d {
                Dropped::Exited(pid) => (pid, Why::Unmatched(Unmatched::Exited)),
                Dropped::Failed(pid, e) => (pid, Why::Failed(Box::new(e))),
            });
        }
        drop(joined);
        let Some(tick) = tick else {
            return ticked;
        };
        metrics.record_decision(&self.policy_name);
        for m in &asked {
            crate::log::log_move(m);
            if !observe {
                metrics.record_move(&reason_name(&m.why));
            }
        }
        if !observe {
            for m in &asked {
                if let Some(owner) = managed.get_mut(&m.thread.pid) {
                    owner.moved.record(std::slice::from_ref(m));
                }
            }
        }
        if let Some(note) = &tick.note {
            tracing::debug!("group {} ({}): {note}", self.id, self.policy_name);
        }
        self.count_threads(managed, tick.vanished > 0);
        ticked
    }

    /// Sets each unpaused member's thread count from the last window; with threads
    /// `vanished`, forgets their move counts.
    fn count_threads<P>(&self, managed: &mut BTreeMap<Pid, Managed<P>>, vanished: bool) {
        let mut per_pid: BTreeMap<Pid, usize> = BTreeMap::new();
        for t in &self.ticker.window().threads {
            *per_pid.entry(t.key.pid).or_default() += 1;
        }
        for pid in &self.members {
            if let Some(m) = managed.get_mut(pid) {
                if !m.paused {
                    m.threads = per_pid.get(pid).copied().unwrap_or(0);
                }
                if vanished {
                    m.moved.keep_only(self.ticker.window());
                }
            }
        }
    }
}

/// The groups of the managed processes, kept in step with them.
#[derive(Default)]
pub struct Groups {
    /// The running groups, by id.
    pub by_id: BTreeMap<u64, Group>,
    next_id: u64,
    /// Pairs already warned about (sharing CPUs under different policies or levels).
    warned: BTreeSet<(Pid, Pid)>,
}

impl Groups {
    /// The group `pid` is in.
    pub fn of(&self, pid: Pid) -> Option<&Group> {
        self.by_id.values().find(|g| g.members.contains(&pid))
    }

    /// Re-forms the groups after the managed processes changed: groups whose members,
    /// leader and CPUs are unchanged keep their policy; the others get a new one. Logs
    /// each group formed, and once per pair the processes that share CPUs apart.
    pub fn regroup<P>(
        &mut self,
        managed: &BTreeMap<Pid, Managed<P>>,
        machine: &Topology,
        now: Nanos,
    ) {
        let members: Vec<Member> = managed
            .values()
            .map(|m| Member {
                pid: m.pid,
                policy: m.assignment.policy.clone(),
                // Assignments carry the level resolved for their policy (the daemon's
                // `default_level`); the machine's widest only for one that would not.
                level: m
                    .assignment
                    .settings
                    .level
                    .unwrap_or_else(|| machine.default_level()),
                cpus: m.cpus.clone(),
                since: m.since,
            })
            .collect();
        let grouping = form(&members);
        for a in &grouping.apart {
            if self.warned.insert((a.a, a.b)) {
                tracing::warn!("{a}");
            }
        }
        self.warned
            .retain(|(a, b)| managed.contains_key(a) && managed.contains_key(b));
        let mut old = std::mem::take(&mut self.by_id);
        for g in grouping.groups {
            let cpus = cpus_of(&g.members, managed);
            let same = old
                .iter()
                .find(|(_, o)| o.members == g.members && o.leader == g.leader && o.cpus == cpus)
                .map(|(id, _)| *id);
            if let Some(group) = same.and_then(|id| old.remove(&id)) {
                self.by_id.insert(group.id, group);
                continue;
            }
            self.next_id += 1;
            match Group::build(
                self.next_id,
                g.members.clone(),
                g.leader,
                managed,
                machine,
                now,
            ) {
                Ok(group) => {
                    if group.members.len() > 1 {
                        let names: Vec<String> =
                            group.members.iter().map(|p| p.to_string()).collect();
                        tracing::info!(
                            "group {}: processes {} balanced together by one {} (CPUs {})",
                            group.id,
                            names.join(", "),
                            group.policy_name,
                            group.cpus
                        );
                    }
                    self.by_id.insert(group.id, group);
                }
                Err(e) => tracing::warn!(
                    "group of {:?}: not balanced: {}",
                    g.members,
                    crate::error::Chain(&e)
                ),
            }
        }
    }
}
