//! The `threads` answer: every managed thread with its rates over the display window
//! (about a second, [`threadbalance_model::DisplayWindow`], whatever the policy's tick),
//! grouped by where it may run, as `threadbalance top` shows them.
//!
//! A shell (the daemon, or `top` managing a process itself) reads what the policy loop
//! measured ([`ThreadRates`](threadbalance_model::ThreadRates) of each managed thread over the display window) and what only `/proc`
//! knows (each thread's name and mask), counts the moves it made, and hands those to
//! [`ThreadsView::build`], which does no I/O:
//!
//! ```text
//!  Window.threads (util, speed, lock, last CPU) ─┐
//!  /proc/<pid>/task/<tid>/comm, sched_getaffinity ├─► ThreadInput ×n ─► ThreadsView::build
//!  moves carried out per thread ──────────────────┘        (topology, level)
//!        ─► ThreadsView { level, domains: [name, CPUs, util, threads], threads: [rows] }
//! ```
//!
//! | field | meaning | unit, source |
//! |---|---|---|
//! | `util` | time on a CPU over the window | fraction of the window, schedstat field 1 |
//! | `speed` | the speed balancing paper's progress rate: execution time over wall time, so the run share a thread got | fraction, schedstat |
//! | `lock` | time waiting on futexes, **only when the probe measured it** (else `None`, shown as "–") | fraction, the BPF futex probe |
//! | `moves` | moves carried out on the thread since it was first managed | count |
//! | `ipc`, `mpki` | instructions per cycle, last-level-cache misses per thousand instructions, **only when its hardware counters were read** (else `None`, shown as "–"; the columns appear when one thread has them) | ratio, `perf_event_open` |
//! | `cpu` | the CPU it last ran on | `stat` field 39 |
//! | `mask` | the CPUs it may run on now | `sched_getaffinity`, kernel list form |
//! | domain `util` | the summed `util` of the managed threads whose mask lies in the domain over its CPU count (1.0: every CPU busy with managed threads) | fraction |
//!
//! Threads are grouped by their mask, not by the CPU they last ran on (which changes from
//! one millisecond to the next under `speed`): a mask within one domain of the level puts
//! the thread under that domain; a mask over several domains puts it under a `mask`
//! group of its own, listed after the level's domains.
//!
//! ```
//! use threadbalance_daemon::control::threads::{ThreadInput, ThreadsView};
//! use threadbalance_model::{Level, Topology};
//! let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let mut t = ThreadInput::example(4242, 4243, 2);
//! t.util = 0.5;
//! let v = ThreadsView::build(&topo, Level::Package, 1000, vec![t]);
//! // Its mask, CPU 2, is in package 1 (CPUs 2-3): 0.5 busy over 2 CPUs = 0.25.
//! assert_eq!((v.threads[0].domain, v.domains[1].util), (Some(1), 0.25));
//! ```

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use threadbalance_model::{CpuId, CpuSet, Level, Move, ThreadKey, Topology, Window};

/// Moves carried out per thread, pruned to the threads still alive (a row's `moves`).
#[derive(Debug, Clone, Default)]
pub struct MoveCounts {
    counts: BTreeMap<ThreadKey, u64>,
}

impl MoveCounts {
    /// Counts each move of a plan that was carried out.
    pub fn record(&mut self, moves: &[Move]) {
        for m in moves {
            *self.counts.entry(m.thread).or_default() += 1;
        }
    }

    /// Adds `other`'s counts (a group's view is its members' counts together).
    pub fn absorb(&mut self, other: &MoveCounts) {
        for (k, n) in &other.counts {
            *self.counts.entry(*k).or_default() += n;
        }
    }

    /// Moves carried out on `key`.
    pub fn of(&self, key: &ThreadKey) -> u64 {
        self.counts.get(key).copied().unwrap_or(0)
    }

    /// Forgets the threads that are not in `window` any more (so a long run with threads
    /// that come and go does not grow).
    pub fn keep_only(&mut self, window: &Window) {
        self.counts.retain(|k, _| window.thread(k).is_some());
    }
}

/// What the shell knows about one managed thread, before grouping.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadInput {
    /// Its process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Its name (`/proc/<pid>/task/<tid>/comm`).
    pub comm: String,
    /// The CPUs it may run on, in list form (`0-3,8`).
    pub mask: String,
    /// The CPU it last ran on.
    pub cpu: CpuId,
    /// Fraction of the window it ran.
    pub util: f64,
    /// Execution time over wall time.
    pub speed: f64,
    /// Fraction of the window it waited for locks, when measured.
    pub lock: Option<f64>,
    /// Moves carried out on it.
    pub moves: u64,
    /// Instructions per cycle over the window, when its hardware counters were read.
    pub ipc: Option<f64>,
    /// Last-level-cache misses per thousand instructions, when they were read.
    pub mpki: Option<f64>,
}

impl ThreadInput {
    /// A thread of `pid` named "worker", pinned to CPU `cpu` and idle there: for examples
    /// and tests.
    pub fn example(pid: i32, tid: i32, cpu: u32) -> ThreadInput {
        ThreadInput {
            pid,
            tid,
            comm: "worker".into(),
            mask: cpu.to_string(),
            cpu: CpuId(cpu),
            util: 0.0,
            speed: 0.0,
            lock: None,
            moves: 0,
            ipc: None,
            mpki: None,
        }
    }
}

/// One domain of the level in use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DomainRow {
    /// Its name: the level and index (`package1`, `core3`).
    pub name: String,
    /// Its CPUs, in list form.
    pub cpus: String,
    /// The summed `util` of the managed threads whose mask lies in it now, over its CPU
    /// count (fraction). A thread's rate covers the whole window, so one moved in during
    /// it brings time it ran elsewhere: this can exceed 1.
    pub util: f64,
    /// How busy its CPUs were over the window, whatever ran on them (from `/proc/stat`;
    /// [`ThreadsView::with_cpu_busy`]); `None` when not measured. Never above 1: what a
    /// display shows as the group's load when present.
    #[serde(default)]
    pub busy: Option<f64>,
    /// Managed threads whose mask lies in it.
    pub threads: u32,
}

/// One managed thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadRow {
    /// Its process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Its name.
    pub comm: String,
    /// The CPUs it may run on, in list form.
    pub mask: String,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// Fraction of the window it ran.
    pub util: f64,
    /// Execution time over wall time (the run share it got).
    pub speed: f64,
    /// Fraction of the window it waited for locks, when the probe measured it.
    pub lock: Option<f64>,
    /// Moves carried out on it.
    pub moves: u64,
    /// Index into [`ThreadsView::domains`] of the group its mask puts it in (`None`: a
    /// mask unknown or outside the topology).
    pub domain: Option<usize>,
    /// Instructions per cycle over the window, when its hardware counters were read
    /// (absent from the answers of daemons that never read them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipc: Option<f64>,
    /// Last-level-cache misses per thousand instructions, when they were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpki: Option<f64>,
}

/// The managed threads grouped by domain: the answer to `threads`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadsView {
    /// The level whose domains group the threads (`package`, `core`, …).
    pub level: String,
    /// The window the rates are over, in milliseconds (the longest among the processes);
    /// 0 while the first window is being measured.
    pub window_ms: u64,
    /// The domains of the level, in index order, then one `mask` group per mask that
    /// spans several of them.
    pub domains: Vec<DomainRow>,
    /// The threads, by domain (unknown last), then pid, then tid.
    pub threads: Vec<ThreadRow>,
}

impl ThreadsView {
    /// Groups `threads` by where they may run: a thread whose mask lies within one domain
    /// at `level` of `topo` goes under that domain; threads whose mask spans several
    /// domains go under one extra group per mask (named `mask`, after the level's
    /// domains); a thread whose mask is unknown or reaches outside the topology goes
    /// nowhere ("elsewhere"). Each group's utilization is its threads' summed `util` over
    /// its CPU count. Pure.
    pub fn build(
        topo: &Topology,
        level: Level,
        window_ms: u64,
        threads: impl IntoIterator<Item = ThreadInput>,
    ) -> ThreadsView {
        let mut domains: Vec<DomainRow> = topo
            .domains(level)
            .iter()
            .map(|d| DomainRow {
                name: domain_name(level, d.index),
                cpus: d.cpus.to_string(),
                util: 0.0,
                busy: None,
                threads: 0,
            })
            .collect();
        let mut sizes: Vec<usize> = topo.domains(level).iter().map(|d| d.cpus.len()).collect();
        let mut rows: Vec<ThreadRow> = threads
            .into_iter()
            .map(|t| {
                let domain = group_of(topo, level, &t.mask).map(|g| match g {
                    Group::Domain(i) => i,
                    Group::Mask(set) => {
                        let text = set.to_string();
                        match domains
                            .iter()
                            .position(|d| d.name == MASK_GROUP && d.cpus == text)
                        {
                            Some(i) => i,
                            None => {
                                domains.push(DomainRow {
                                    name: MASK_GROUP.to_string(),
                                    cpus: text,
                                    util: 0.0,
                                    busy: None,
                                    threads: 0,
                                });
                                sizes.push(set.len());
                                domains.len() - 1
                            }
                        }
                    }
                });
                if let Some(d) = domain.and_then(|i| domains.get_mut(i)) {
                    d.util += t.util;
                    d.threads += 1;
                }
                ThreadRow {
                    pid: t.pid,
                    tid: t.tid,
                    comm: t.comm,
                    mask: t.mask,
                    cpu: t.cpu.0,
                    util: t.util,
                    speed: t.speed,
                    lock: t.lock,
                    moves: t.moves,
                    domain,
                    ipc: t.ipc,
                    mpki: t.mpki,
                }
            })
            .collect();
        for (d, size) in domains.iter_mut().zip(sizes) {
            d.util /= size.max(1) as f64;
        }
        rows.sort_by_key(|r| (r.domain.unwrap_or(usize::MAX), r.pid, r.tid));
        ThreadsView {
            level: level.name().to_string(),
            window_ms,
            domains,
            threads: rows,
        }
    }

    /// Sets each group's [`DomainRow::busy`] to the mean of its CPUs' busy fractions
    /// (`busy`, e.g. [`threadbalance_model::DisplayWindow::cpu_busy`]), for the groups
    /// all of whose CPUs were read; the others keep `None`. Pure.
    pub fn with_cpu_busy(mut self, busy: &BTreeMap<CpuId, f64>) -> ThreadsView {
        if busy.is_empty() {
            return self;
        }
        for d in &mut self.domains {
            let Ok(cpus) = CpuSet::parse_list(&d.cpus) else {
                continue;
            };
            let read: Option<Vec<f64>> = cpus.iter().map(|c| busy.get(&c).copied()).collect();
            d.busy = read
                .filter(|r| !r.is_empty())
                .map(|r| r.iter().sum::<f64>() / r.len() as f64);
        }
        self
    }

    /// The threads of domain `index` (`None`: those on no known domain).
    pub fn threads_of(&self, index: Option<usize>) -> impl Iterator<Item = &ThreadRow> {
        self.threads.iter().filter(move |t| t.domain == index)
    }

    /// A plain table, one line per domain followed by its threads (what `ctl threads`
    /// prints).
    ///
    /// ```
    /// use threadbalance_daemon::control::threads::{ThreadInput, ThreadsView};
    /// use threadbalance_model::{Level, Topology};
    /// let topo = Topology::synthetic("package:1 core:2 pu:1").unwrap();
    /// let mut t = ThreadInput::example(7, 8, 1);
    /// (t.util, t.speed, t.moves) = (0.5, 0.5, 2);
    /// let v = ThreadsView::build(&topo, Level::Core, 500, vec![t]);
    /// assert_eq!(v.to_text(),
    ///     "level core, window 500 ms\n\
    ///      core0    CPUs 0        util   0%  0 threads\n\
    ///      core1    CPUs 1        util  50%  1 threads\n\
    ///      \x20 PID      TID      COMM             MASK         CPU   UTIL  SPEED  LOCK  MOVES\n\
    ///      \x20 7        8        worker           1              1    50%    50%     –      2\n");
    /// ```
    pub fn to_text(&self) -> String {
        let counted = self.counted();
        let mut out = format!("level {}, window {} ms\n", self.level, self.window_ms);
        let mut groups: Vec<(String, Option<usize>)> = self
            .domains
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (
                    format!(
                        "{:<8} CPUs {:<8} util {:>3.0}%{}  {} threads",
                        d.name,
                        d.cpus,
                        d.util * 100.0,
                        d.busy
                            .map_or(String::new(), |b| format!("  busy {:>3.0}%", b * 100.0)),
                        d.threads
                    ),
                    Some(i),
                )
            })
            .collect();
        if self.threads_of(None).next().is_some() {
            groups.push(("elsewhere".to_string(), None));
        }
        for (line, index) in groups {
            out.push_str(&line);
            out.push('\n');
            let mut header = true;
            for t in self.threads_of(index) {
                if header {
                    out.push_str(&format!(
                        "  {:<8} {:<8} {:<16} {:<12} {:>3} {:>6} {:>6} {:>5} {:>6}",
                        "PID", "TID", "COMM", "MASK", "CPU", "UTIL", "SPEED", "LOCK", "MOVES"
                    ));
                    if counted {
                        out.push_str(&format!(" {:>5} {:>6}", "IPC", "MPKI"));
                    }
                    out.push('\n');
                    header = false;
                }
                out.push_str(&format!(
                    "  {:<8} {:<8} {:<16} {:<12} {:>3} {:>6} {:>6} {:>5} {:>6}",
                    t.pid,
                    t.tid,
                    super::one_line(&t.comm),
                    t.mask,
                    t.cpu,
                    percent(t.util),
                    percent(t.speed),
                    t.lock.map_or("–".to_string(), percent),
                    t.moves
                ));
                if counted {
                    let (ipc, mpki) = counter_cells(t);
                    out.push_str(&format!(" {ipc:>5} {mpki:>6}"));
                }
                out.push('\n');
            }
        }
        out
    }
}

/// The display window `top` and `ctl threads` ask for unless told otherwise: rates over
/// about a second read steadily, whatever the policy's tick.
pub const DEFAULT_WINDOW_MS: u64 = 1000;

/// The name of a group of threads whose mask spans several domains of the level.
pub const MASK_GROUP: &str = "mask";

/// Where a thread may run, as the view groups it.
enum Group {
    /// Within this domain of the level.
    Domain(usize),
    /// Over these CPUs, which span several domains.
    Mask(CpuSet),
}

/// The group of a thread whose mask is `mask` (list form): `None` when the mask is empty,
/// not a CPU list, or names a CPU outside `topo`.
fn group_of(topo: &Topology, level: Level, mask: &str) -> Option<Group> {
    let set = CpuSet::parse_list(mask).ok()?;
    let mut cpus = set.iter();
    let first = topo.domain_of(cpus.next()?, level)?;
    let mut one = true;
    for cpu in cpus {
        let d = topo.domain_of(cpu, level)?;
        one &= d == first;
    }
    Some(if one {
        Group::Domain(first)
    } else {
        Group::Mask(set)
    })
}

impl ThreadsView {
    /// Whether a thread has hardware counters: the IPC and MPKI columns are shown then.
    pub fn counted(&self) -> bool {
        self.threads
            .iter()
            .any(|t| t.ipc.is_some() || t.mpki.is_some())
    }
}

/// A thread's IPC (two decimals) and MPKI (one) as table cells, "–" where not measured.
pub fn counter_cells(t: &ThreadRow) -> (String, String) {
    (
        t.ipc.map_or("–".to_string(), |v| format!("{v:.2}")),
        t.mpki.map_or("–".to_string(), |v| format!("{v:.1}")),
    )
}

/// A fraction as a whole percentage (`0.456` → `46%`).
pub fn percent(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// A domain's name: its level and index (`package1`), as the metrics label it.
pub fn domain_name(level: Level, index: usize) -> String {
    crate::metrics::domain_label(level, index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_cpu_busy_gives_each_group_its_cpus_mean_busy_where_every_cpu_was_read() {
        let topo = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        // Two threads on CPU 0 that each ran 65 % of the window: one was moved there
        // during it, so their sum (130 %) is more than the CPU could run.
        let mut a = ThreadInput::example(1, 2, 0);
        let mut b = ThreadInput::example(1, 3, 0);
        let mut c = ThreadInput::example(1, 4, 0);
        (a.util, b.util) = (0.65, 0.65);
        c.mask = "0-1".into();
        let v = ThreadsView::build(&topo, Level::Core, 1000, vec![a, b, c]);
        assert!((v.domains[0].util - 1.3).abs() < 1e-9);
        assert_eq!(v.domains[0].busy, None);
        let unread = v.clone().with_cpu_busy(&BTreeMap::new());
        assert_eq!(unread, v);
        let busy = v.with_cpu_busy(&BTreeMap::from([(CpuId(0), 1.0)]));
        assert_eq!(busy.domains[0].busy, Some(1.0));
        assert_eq!(busy.domains[1].busy, None, "CPU 1 was not read");
        assert_eq!(busy.domains[2].name, MASK_GROUP);
        assert_eq!(
            busy.domains[2].busy, None,
            "a mask group needs every CPU read"
        );
        let both = busy.with_cpu_busy(&BTreeMap::from([(CpuId(0), 1.0), (CpuId(1), 0.5)]));
        assert_eq!(both.domains[2].busy, Some(0.75));
        assert!(
            both.to_text().contains("util 130%  busy 100%  2 threads"),
            "{}",
            both.to_text()
        );
    }

    #[test]
    fn build_two_packages_groups_by_pinned_mask_and_sums_utilization() {
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        // Package 0 = CPUs 0-1, package 1 = CPUs 2-3.
        let mut a = ThreadInput::example(10, 12, 3);
        a.util = 0.9;
        let mut b = ThreadInput::example(10, 11, 0);
        b.util = 0.6;
        let mut c = ThreadInput::example(9, 9, 1);
        c.util = 0.2;
        c.lock = Some(0.3);
        let mut lost = ThreadInput::example(9, 20, 40);
        lost.util = 1.0;
        let v = ThreadsView::build(&topo, Level::Package, 250, vec![a, b, c, lost]);
        assert_eq!(v.level, "package");
        assert_eq!(v.domains.len(), 2);
        // Package 0: (0.6 + 0.2) / 2 CPUs = 0.4; package 1: 0.9 / 2 = 0.45.
        assert!((v.domains[0].util - 0.4).abs() < 1e-9);
        assert!((v.domains[1].util - 0.45).abs() < 1e-9);
        assert_eq!((v.domains[0].threads, v.domains[1].threads), (2, 1));
        assert_eq!(
            (v.domains[0].name.as_str(), v.domains[0].cpus.as_str()),
            ("package0", "0-1")
        );
        // Sorted by domain, then pid, then tid; mask 40 is on no domain and comes last,
        // counted nowhere.
        let order: Vec<(i32, Option<usize>)> =
            v.threads.iter().map(|t| (t.tid, t.domain)).collect();
        assert_eq!(
            order,
            [(9, Some(0)), (11, Some(0)), (12, Some(1)), (20, None)]
        );
        assert_eq!(v.threads_of(None).count(), 1);
        assert_eq!(v.threads[0].lock, Some(0.3));
    }

    #[test]
    fn build_groups_by_mask_not_by_the_last_cpu() {
        // See: issue 40, item 4. Package 0 = CPUs 0-1, package 1 = CPUs 2-3.
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        // Last ran on CPU 3, may run on 0-1: package 0.
        let mut a = ThreadInput::example(1, 2, 3);
        (a.mask, a.util) = ("0-1".into(), 0.5);
        // May run anywhere: a group of its own, over its 4 CPUs.
        let mut b = ThreadInput::example(1, 3, 0);
        (b.mask, b.util) = ("0-3".into(), 1.0);
        let mut c = ThreadInput::example(1, 4, 2);
        (c.mask, c.util) = ("0-3".into(), 1.0);
        let v = ThreadsView::build(&topo, Level::Package, 1000, vec![a, b, c]);
        let order: Vec<(i32, Option<usize>)> =
            v.threads.iter().map(|t| (t.tid, t.domain)).collect();
        assert_eq!(order, [(2, Some(0)), (3, Some(2)), (4, Some(2))]);
        // Package 0: 0.5 over 2 CPUs; package 1: nothing; mask 0-3: 2.0 over 4 CPUs.
        let groups: Vec<(&str, &str, f64, u32)> = v
            .domains
            .iter()
            .map(|d| (d.name.as_str(), d.cpus.as_str(), d.util, d.threads))
            .collect();
        assert_eq!(
            groups,
            [
                ("package0", "0-1", 0.25, 1),
                ("package1", "2-3", 0.0, 0),
                ("mask", "0-3", 0.5, 2)
            ]
        );
        assert!(
            v.to_text()
                .contains("mask     CPUs 0-3      util  50%  2 threads\n"),
            "{}",
            v.to_text()
        );
    }

    #[test]
    fn to_text_unknown_domain_gets_its_own_group() {
        let topo = Topology::synthetic("package:1 core:1 pu:1").unwrap();
        let v = ThreadsView::build(&topo, Level::Core, 100, vec![ThreadInput::example(1, 2, 9)]);
        let text = v.to_text();
        assert!(
            text.contains("core0    CPUs 0        util   0%  0 threads\nelsewhere\n"),
            "{text}"
        );
        assert!(
            text.ends_with(
                "  1        2        worker           9              9     0%     0%     –      0\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn view_serializes_and_parses_back() {
        let topo = Topology::synthetic("package:2 core:1 pu:1").unwrap();
        let mut t = ThreadInput::example(1, 2, 1);
        t.lock = Some(0.25);
        let v = ThreadsView::build(
            &topo,
            Level::Package,
            100,
            vec![t, ThreadInput::example(1, 3, 0)],
        );
        let json = serde_json::to_string(&v).unwrap();
        assert_eq!(serde_json::from_str::<ThreadsView>(&json).unwrap(), v);
    }
}
