//! Linux's automatic NUMA balancing, the part that moves memory after its threads
//! (`kernel.numa_balancing = 1`, on by default in distribution kernels on multi-node
//! machines).
//!
//! The kernel scans each task's address space every scan period, unmapping pages so the
//! next touch faults (a NUMA hinting fault), and migrates a faulted page to the faulting
//! CPU's node once two faults in a row came from that node (the two-stage filter of
//! `should_numa_migrate_memory`). The scan period starts at
//! `numa_balancing_scan_period_min_ms` (1 s, after a 1 s delay) and grows while the task's
//! faults are local, up to `numa_balancing_scan_period_max_ms` (60 s).
//!
//! | mechanism | model | kernel |
//! |---|---|---|
//! | scan | every thread that ran since its last scan, once per scan period (1 s, × 2 after each scan that found its memory local, up to 60 s; back to 1 s when remote) | `task_numa_work`, `update_task_scan_period` |
//! | private pages | move whole to the node of the thread's CPU when two scans in a row found it there | `should_numa_migrate_memory` (two-stage filter) |
//! | shared pages (leader first touch) | move whole to the node where most of the application's CPU time ran, when two scans in a row found that node holding more than half of it | the filter on shared pages, `numa_group` |
//! | cost | each migrated page costs its copy and fault (`page_migrate_ns`), charged as system time to the thread(s) that fault | `migrate_misplaced_folio` |
//!
//! Left out: the task-placement half (`task_numa_migrate`, which moves a task towards
//! its memory: the model's `none` leaves that to its load balancer), hinting-fault cost
//! on pages that stay, partial placement (a memory region sits on one node at a time), and
//! the scan's 256 MB per pass rate limit (the workloads' memory is smaller).

use crate::queue::EventKind;
use crate::state::{SCAN_MIN_NS, Sim, St, ThreadIdx};
use threadbalance_model::Nanos;

/// How often the model looks for threads whose scan is due, ns.
const PASS_NS: Nanos = Nanos::from_millis(250);
/// `numa_balancing_scan_period_max_ms`, ns.
const SCAN_MAX_NS: Nanos = Nanos::from_secs(60);
/// Base page size.
const PAGE: u64 = 4096;

impl Sim {
    /// Whether automatic NUMA balancing runs: on, and more than one node.
    pub(crate) fn autonuma_on(&self) -> bool {
        self.kernel.lx.numa_balancing && self.world.hw.nnode > 1
    }

    /// Schedules the first pass.
    pub(crate) fn autonuma_start(&mut self) {
        if self.autonuma_on() {
            self.world.q.push(PASS_NS, EventKind::NumaScan, 0, 0);
        }
    }

    /// One pass: scans every thread (and application) whose scan is due.
    pub(crate) fn on_numa_scan(&mut self) {
        let now = self.world.now;
        for t in ThreadIdx::all(self.world.th.len()) {
            if matches!(self.world.th[t].st, St::New | St::Done) || self.world.th[t].scan.next > now
            {
                continue;
            }
            let app = self.world.th[t].app;
            let ran = self.world.th[t].run > self.world.th[t].scan.run_at_scan;
            self.world.th[t].scan.run_at_scan = self.world.th[t].run;
            if !ran {
                let s = &mut self.world.th[t].scan;
                s.next = now + s.period;
                continue;
            }
            let here = self.world.hw.node[self.world.th[t].cpu];
            let mut remote = false;
            if let Some(home) = self.world.th[t]
                .home
                .filter(|_| !self.user.apps[app].shared_data)
            {
                remote = home != here;
                if remote && self.world.th[t].scan.last_node == Some(here) {
                    self.world.th[t].home = Some(here);
                    self.charge_page_migration(&[t], self.user.apps[app].memory_bytes);
                }
            } else if self.user.apps[app].shared_data {
                let owner = self.user.apps[app].first;
                remote = self.world.th[owner].home.is_some_and(|h| h != here);
            }
            let s = &mut self.world.th[t].scan;
            s.last_node = Some(here);
            s.period = if remote {
                SCAN_MIN_NS
            } else {
                (s.period * 2).min(SCAN_MAX_NS)
            };
            s.next = now + s.period;
        }
        self.scan_shared(now);
        if self.user.live > 0 {
            self.world.q.push(now + PASS_NS, EventKind::NumaScan, 0, 0);
        }
    }

    /// Shared data of leader-first-touch applications follows the node where most of the
    /// application's CPU time ran since the last pass, when two passes in a row agree.
    fn scan_shared(&mut self, now: Nanos) {
        let nnode = self.world.hw.nnode;
        for app in 0..self.user.apps.len() {
            if !self.user.apps[app].shared_data || self.user.apps[app].scan.next > now {
                continue;
            }
            let (first, members) = (self.user.apps[app].first, self.user.apps[app].members());
            let mut per_node = vec![Nanos::ZERO; nnode];
            for th in &mut self.world.th[members.clone()] {
                if th.st == St::New {
                    continue;
                }
                let node = self.world.hw.node[th.cpu] as usize;
                per_node[node] += th.run - th.scan.run_at_shared_pass;
                th.scan.run_at_shared_pass = th.run;
            }
            let total: Nanos = per_node.iter().copied().sum();
            let (best, &most) = per_node
                .iter()
                .enumerate()
                .max_by_key(|&(i, &r)| (r, std::cmp::Reverse(i)))
                .unwrap_or((0, &Nanos::ZERO));
            let best = best as u32;
            let home = self.world.th[first].home;
            let majority = total > Nanos::ZERO && most * 2 > total;
            let s = self.user.apps[app].scan;
            let mut moved = false;
            if majority && home.is_some_and(|h| h != best) && s.last_node == Some(best) {
                self.world.th[first].home = Some(best);
                let faulting: Vec<ThreadIdx> = members
                    .map(ThreadIdx::from)
                    .filter(|&t| {
                        matches!(
                            self.world.th[t].st,
                            St::Running | St::Runnable | St::Blocked
                        ) && self.world.hw.node[self.world.th[t].cpu] == best
                    })
                    .collect();
                self.charge_page_migration(&faulting, self.user.apps[app].memory_bytes);
                moved = true;
            }
            let remote = home.is_some_and(|h| h != best);
            let s = &mut self.user.apps[app].scan;
            s.last_node = majority.then_some(best);
            s.period = if remote && !moved {
                SCAN_MIN_NS
            } else {
                (s.period * 2).min(SCAN_MAX_NS)
            };
            s.next = now + s.period;
        }
    }

    /// Charges the copy and fault of `bytes` of pages to the threads that fault on them,
    /// in equal parts, as system time.
    fn charge_page_migration(&mut self, threads: &[ThreadIdx], bytes: u64) {
        if threads.is_empty() {
            return;
        }
        let pages = bytes.div_ceil(PAGE);
        self.world.stats.page_migrations += pages;
        let cost = pages * self.kernel.lx.page_migrate_ns / threads.len() as u64;
        for &t in threads {
            self.world.th[t].debt += Nanos(cost);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::machine;
    use crate::run::RunOptions;
    use crate::state::{Sim, ThreadIdx};
    use threadbalance_model::{CpuId, CpuSet, Nanos};

    /// Streamcluster's threads (own pages, first touch) on a 4-node machine, after one
    /// thread is moved to another node: its pages follow within a few scan periods with
    /// NUMA balancing on, and never without.
    fn moved_thread_home(numa_balancing: bool) -> (u32, Option<u32>, u64) {
        let m = machine("opteron6272-4x16", None).unwrap();
        let w = crate::workload("streamcluster:phases=2000", Some(8), None).unwrap();
        let mut opts = RunOptions::new(1);
        opts.linux.numa_balancing = numa_balancing;
        let mut sim = Sim::new(&m, &w, &opts);
        sim.run_until(Nanos::from_millis(500));
        let t = ThreadIdx::from(sim.world.th.len() - 1);
        let home = sim.world.th[t].home.expect("first touch happened");
        // Confine it to a node other than its home.
        let other = (home + 1) % 4;
        let mut cpus = CpuSet::new();
        for c in other * 16..other * 16 + 16 {
            cpus.insert(CpuId(c));
        }
        sim.kernel
            .set_affinity(&mut sim.world, &mut sim.user, t, cpus);
        sim.run_until(Nanos::from_millis(4500));
        (other, sim.world.th[t].home, sim.world.stats.page_migrations)
    }

    #[test]
    fn shared_pages_follow_the_node_that_runs_most_of_the_application() {
        // Streamcluster's 8 threads reading data first touched by the first thread; all
        // are then confined to one other node: the shared data follows, once, and its
        // copy is charged to the threads there.
        let m = machine("opteron6272-4x16", None).unwrap();
        let w = crate::workload("streamcluster:phases=2000", Some(8), None).unwrap();
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        sim.user.apps[0].shared_data = true;
        sim.run_until(Nanos::from_millis(500));
        let home = sim.world.th[0].home.expect("first touch happened");
        let other = (home + 1) % 4;
        let mut cpus = CpuSet::new();
        for c in other * 16..other * 16 + 16 {
            cpus.insert(CpuId(c));
        }
        for t in ThreadIdx::all(sim.world.th.len()) {
            sim.kernel
                .set_affinity(&mut sim.world, &mut sim.user, t, cpus.clone());
        }
        sim.run_until(Nanos::from_millis(4500));
        assert_eq!(sim.world.th[0].home, Some(other));
        let pages = sim.user.apps[0].memory_bytes.div_ceil(4096);
        assert_eq!(sim.world.stats.page_migrations, pages);
    }

    #[test]
    fn a_page_copy_is_charged_to_the_faulting_threads_in_equal_parts() {
        let m = machine("opteron6272-4x16", None).unwrap();
        let w = crate::workload("streamcluster", Some(4), None).unwrap();
        let mut sim = Sim::new(&m, &w, &RunOptions::new(1));
        let before: Vec<Nanos> = sim.world.th.iter().map(|t| t.debt).collect();
        // 1 MiB = 256 pages × 2 µs, split between threads 1 and 3.
        sim.charge_page_migration(&[ThreadIdx(1), ThreadIdx(3)], 1 << 20);
        let added: Vec<u64> = sim
            .world
            .th
            .iter()
            .zip(&before)
            .map(|(t, &b)| (t.debt - b).0)
            .collect();
        assert_eq!(added, [0, 256_000, 0, 256_000]);
        assert_eq!(sim.world.stats.page_migrations, 256);
    }

    #[test]
    fn private_pages_follow_a_moved_thread_only_with_numa_balancing() {
        let (other, home, pages) = moved_thread_home(true);
        assert_eq!(home, Some(other));
        assert!(pages > 0);
        let (other, home, pages) = moved_thread_home(false);
        assert_ne!(home, Some(other));
        assert_eq!(pages, 0);
    }
}
