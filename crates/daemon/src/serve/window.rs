//! One sampling window of the loop: every process read and matched against the rules,
//! the near misses explained, the matched taken on, the others let go, the groups
//! re-formed and the metrics set.

use super::managed::{Assignment, Managed, ProcessHost, Verdict, Why, after_window};
use super::{Daemon, DaemonHost, NotOurs, Open, Refused, TakeOnError};
use crate::allowed::Allowed;
use crate::control::Candidate;
use crate::control::threads::MoveCounts;
use crate::error::Chain;
use crate::process::facts_between;
use crate::rule::near_miss;
use crate::{Decision, HandsOff};
use std::collections::{BTreeMap, BTreeSet};
use threadbalance_model::{CpuSet, Level, Pid};
use threadbalance_policy::PolicyKind;

/// A process a rule manages: its pid, its name and what the rule said.
pub(super) type Matched = (Pid, String, Assignment);

impl<H: DaemonHost> Daemon<H> {
    /// One window: match, take on the new, release those no longer matched.
    pub(super) fn window(&mut self) {
        let matched = self.sample();
        let wanted: BTreeMap<Pid, &Assignment> =
            matched.iter().map(|(pid, _, a)| (*pid, a)).collect();
        let mut stale = Vec::new();
        for (pid, m) in &mut self.managed {
            let verdict = after_window(
                &m.assignment.rule,
                wanted.get(pid).map(|a| a.rule.as_str()),
                self.no_rule.contains(pid),
                self.readings.get(pid).map(|r| r.start_time) == Some(m.start),
                m.misses,
            );
            match verdict {
                Verdict::Keep { misses } => m.misses = misses,
                Verdict::Release(why) => stale.push((*pid, why)),
            }
        }
        for (pid, why) in stale {
            self.release_only(pid, Why::Unmatched(why));
        }
        self.watch_allowed();
        for (pid, comm, assignment) in matched {
            self.take_on_new(pid, comm, assignment);
        }
        self.regroup();
        let live: BTreeSet<Pid> = self.readings.keys().copied().collect();
        self.refused.retain(|(pid, _)| live.contains(pid));
        self.released.retain(|(pid, _)| live.contains(pid));
        self.window_metrics();
    }

    /// Takes `pid` on under `assignment` unless it is managed already or was refused
    /// before (as the same process); says what happened, once.
    fn take_on_new(&mut self, pid: Pid, comm: String, assignment: Assignment) {
        if self.managed.contains_key(&pid) {
            return;
        }
        let start = self.readings.get(&pid).map_or(0, |r| r.start_time);
        if self.refused.contains(&(pid, start)) {
            return;
        }
        let rule = assignment.rule.clone();
        let policy = assignment.policy.clone();
        match self.take_on(pid, &comm, assignment, true) {
            Ok(m) => {
                tracing::info!("pid {pid} ({comm}): managed by rule {rule:?} (policy {policy})");
                self.managed.insert(pid, m);
            }
            Err(Refused::NotOurs(why)) => {
                tracing::info!("pid {pid} ({comm}) left alone: {why}");
                self.refused.insert((pid, start));
            }
            Err(Refused::Failed(e)) => {
                tracing::warn!("pid {pid} ({comm}): not managed: {}", Chain(&e));
                self.refused.insert((pid, start));
            }
        }
    }

    /// Takes `pid` on under `assignment`, placing its threads only on the usable CPUs its
    /// threads may use. `journal` is false for `--oneshot`, whose placement is meant to
    /// stay (and observing changes nothing, so keeps none either).
    pub(super) fn take_on(
        &mut self,
        pid: Pid,
        comm: &str,
        assignment: Assignment,
        journal: bool,
    ) -> Result<Managed<H::Process>, Refused<H::Error>> {
        self.taken += 1;
        let cpuset = self.cpuset_of(pid);
        let claimed = self.host.claim(pid)?;
        let allowed = Allowed {
            cpuset,
            program: claimed.program,
        };
        let machine = &self.usable.machine;
        let cpus = allowed.cpus(machine.online());
        if cpus.is_empty() {
            return Err(Refused::NotOurs(NotOurs::NoCpus(machine.online().clone())));
        }
        // The group's policy is built over the CPUs of all its members; this one only
        // checks that the rule's policy builds, and tells the host what it reads.
        let topo = machine
            .restricted_to(&cpus)
            .map_err(|e| Refused::Failed(TakeOnError::Cpus(e)))?;
        let policy = threadbalance_policy::build(&assignment.policy, &assignment.settings, &topo)
            .map_err(|source| {
            Refused::Failed(TakeOnError::Policy {
                name: assignment.policy.clone(),
                source,
            })
        })?;
        let how = Open {
            pid,
            start: claimed.start,
            machine,
            observe: self.observe,
            journal: journal && !self.observe,
            policy: policy.as_ref(),
        };
        let host = self.host.open(claimed.lock, how).map_err(Refused::Failed)?;
        Ok(Managed {
            pid,
            start: claimed.start,
            comm: comm.to_string(),
            assignment,
            paused: false,
            threads: 0,
            misses: 0,
            moved: MoveCounts::default(),
            cpus,
            since: self.taken,
            allowed,
            ours: Vec::new(),
            host,
        })
    }

    /// The metrics a window sets: processes and threads managed, the groups, each
    /// domain's utilization, the daemon's own CPU time.
    fn window_metrics(&mut self) {
        let threads: usize = self.managed.values().map(|m| m.threads).sum();
        self.metrics
            .set_managed(self.managed.len() as u64, threads as u64);
        self.metrics.set_groups(
            self.groups
                .by_id
                .values()
                .map(|g| (g.id, g.policy_name.as_str(), g.members.len() as u64)),
        );
        self.domain_metrics();
        if let Some(cpu) = self.host.own_cpu_seconds() {
            self.metrics.set_own_cpu_seconds(cpu);
        }
    }

    /// Reads every process, and returns those a rule manages, with its assignment.
    pub(super) fn sample(&mut self) -> Vec<Matched> {
        let now = self.host.now();
        let elapsed = now.saturating_sub(self.last_sample);
        self.last_sample = now;
        let comms = match self.host.list_processes() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("listing processes: {e}");
                return Vec::new();
            }
        };
        if self.windows.is_multiple_of(super::COMPETITORS_EVERY) {
            self.competitors(&comms);
        }
        self.windows += 1;
        self.hands_off_pids();
        let busy = self.config.daemon.busy_thread_percent;
        let mut readings = BTreeMap::new();
        let mut matched = Vec::new();
        let mut no_rule = BTreeSet::new();
        let mut candidates = Vec::new();
        for (pid, _) in comms {
            let reading = match self.host.read_process(pid) {
                Ok(Some(r)) => r,
                Ok(None) => continue,
                Err(e) => {
                    tracing::debug!("pid {pid}: {e}");
                    continue;
                }
            };
            let before = self.readings.get(&pid).unwrap_or(&reading);
            let facts = facts_between(before, &reading, elapsed, busy, &self.users);
            let decision = crate::match_process(&self.config.rules, &facts);
            if matches!(decision, Decision::HandsOff(HandsOff::NoRule)) {
                no_rule.insert(pid);
                if let Some(miss) = near_miss(&self.config.rules, &facts, busy) {
                    candidates.push((
                        reading.start_time,
                        Candidate {
                            pid: pid.0,
                            comm: reading.comm.clone(),
                            rule: miss.rule.name.clone(),
                            why: miss.why,
                        },
                    ));
                }
            }
            if let Decision::Manage { rule, placement } = decision
                && !self.released.contains(&(pid, reading.start_time))
            {
                let level = placement
                    .level
                    .unwrap_or_else(|| self.default_level(placement.policy_name()));
                matched.push((
                    pid,
                    reading.comm.clone(),
                    Assignment {
                        rule: rule.name.clone(),
                        policy: placement.policy_name().to_string(),
                        settings: placement.settings(level),
                    },
                ));
            }
            readings.insert(pid, reading);
        }
        self.readings = readings;
        self.no_rule = no_rule;
        self.explain(candidates);
        matched
    }

    /// Refreshes the pids always left alone: those of the hands-off pid files, and the
    /// daemon's own. Each unusable file is logged when it turns bad.
    fn hands_off_pids(&mut self) {
        let read = self
            .host
            .read_pid_files(&self.config.daemon.hands_off_pid_files);
        // The lines as logged: a file is logged again only when what is wrong changes.
        let bad: BTreeSet<String> = read.bad.iter().map(|e| format!("{e}")).collect();
        for line in bad.difference(&self.bad_pid_files) {
            tracing::warn!("hands-off pid file skipped, the others still count: {line}");
        }
        self.bad_pid_files = bad;
        let mut pids = read.pids;
        pids.insert(self.host.own_pid());
        self.config.rules.hands_off_pids = pids;
    }

    /// Logs why each process a rule almost matched is not managed (at most once per
    /// [`super::EXPLAIN_EVERY`] for each), and keeps them for `ctl list --all`.
    fn explain(&mut self, candidates: Vec<(u64, Candidate)>) {
        let alive: BTreeSet<(Pid, u64)> = self
            .readings
            .iter()
            .map(|(pid, r)| (*pid, r.start_time))
            .collect();
        self.explained.retain(|k, _| alive.contains(k));
        self.candidates.clear();
        let now = self.host.now();
        for (start, c) in candidates {
            let key = (Pid(c.pid), start);
            if self
                .explained
                .get(&key)
                .is_none_or(|at| now.saturating_sub(*at) >= super::EXPLAIN_EVERY)
            {
                tracing::info!(
                    "pid {} ({}) not managed: rule {:?} almost matched: {}",
                    c.pid,
                    c.comm,
                    c.rule,
                    c.why
                );
                self.explained.insert(key, now);
            }
            self.candidates.push(c);
        }
    }

    /// The level a rule without one balances at: its policy's own
    /// ([`PolicyKind::default_level`]; the machine's widest level with more than one domain
    /// for a name that is not a policy kind).
    fn default_level(&self, policy: &str) -> Level {
        let machine = &self.usable.machine;
        policy.parse::<PolicyKind>().map_or_else(
            |_| machine.default_level(),
            |kind| kind.default_level(machine),
        )
    }

    /// Sets each domain's utilization (default level) from the managed threads' last
    /// windows: busy managed-thread time over the domain's CPU time.
    fn domain_metrics(&self) {
        let machine = &self.usable.machine;
        let level = machine.default_level();
        let mut util = vec![0.0; machine.domains(level).len()];
        for g in self.groups.by_id.values() {
            let load = g.window().domain_load(machine, level);
            for (u, add) in util.iter_mut().zip(&load.util) {
                *u += add;
            }
        }
        for (i, u) in util.iter().enumerate() {
            self.metrics
                .set_domain_utilization(&crate::metrics::domain_label(level, i), *u);
        }
    }

    /// Logs each competitor the first time it is seen.
    fn competitors(&mut self, comms: &[(Pid, String)]) {
        match self.host.competitors(comms) {
            Ok(found) => {
                for c in found {
                    let line = c.to_string();
                    if self.warned.insert(line.clone()) {
                        tracing::warn!("{line}");
                    }
                }
            }
            Err(e) => tracing::debug!("competitors: {e}"),
        }
    }

    /// The `cpuset.cpus.effective` of `pid`'s cgroup, from this window's reading; `None`
    /// without a cpuset controller (or a reading).
    fn cpuset_of(&mut self, pid: Pid) -> Option<CpuSet> {
        let reading = self.readings.get(&pid)?;
        self.host.cpuset_of(reading)
    }

    /// Looks at the CPUs of each managed process: when its cgroup's cpuset or masks set
    /// outside the daemon changed them, one warning, and its group is re-planned on the
    /// new set at the next regrouping (none left: it is released).
    fn watch_allowed(&mut self) {
        let mut empty = Vec::new();
        let pids: Vec<Pid> = self.managed.keys().copied().collect();
        for pid in pids {
            let cpuset = self.cpuset_of(pid);
            let Some(m) = self.managed.get_mut(&pid) else {
                continue;
            };
            let program = crate::allowed::program_cpus(&m.host.thread_masks(), &m.ours);
            let (now, change) =
                crate::allowed::observe(pid, &m.allowed, cpuset, program, &self.usable.cpus);
            m.allowed = now;
            if let Some(c) = change {
                tracing::warn!("{c}");
                if c.after.is_empty() {
                    empty.push(pid);
                } else {
                    m.cpus = c.after;
                }
            }
        }
        for pid in empty {
            self.release_only(pid, Why::NoCpus);
        }
    }
}
