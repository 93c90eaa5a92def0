//! What the loop counts, tick by tick, for the summary.

use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use threadbalance_model::{ApplyReport, Level, Nanos, Pid, Topology, Window};
use threadbalance_policy::TickReport;

/// How many of the policy's explanations the summary keeps (the last ones).
const NOTES_KEPT: usize = 8;

/// One thread's hardware counters over the run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadCounters {
    /// Its process.
    pub pid: i32,
    /// The thread.
    pub tid: i32,
    /// Instructions per cycle.
    pub ipc: f64,
    /// Last-level-cache misses per thousand instructions.
    pub mpki: f64,
    /// Run time over the windows counted, seconds.
    pub run_s: f64,
}

/// What a run did, accumulated tick by tick.
#[derive(Debug, Clone, PartialEq)]
pub struct Tally {
    /// Distinct threads seen.
    pub threads_seen: u64,
    /// Distinct processes whose threads were managed (see `processes_seen` in the JSON).
    processes: HashSet<Pid>,
    /// Most threads alive at once.
    pub threads_peak: usize,
    /// Control ticks taken.
    pub ticks: u64,
    /// Moves the policy decided.
    pub moves_decided: u64,
    /// What the host did with them.
    pub applied: ApplyReport,
    /// The last explanations the policy gave, with the time (seconds from start).
    pub notes: Vec<(f64, String)>,
    level: Level,
    start: Nanos,
    cpu_at_start: f64,
    busy: Vec<f64>,
    cv_weighted: f64,
    weight: f64,
    exact_lock: bool,
    /// Per thread (pid, tid): run time, run time × IPC, run time × IPC × MPKI, over the
    /// windows with hardware counters.
    hw: BTreeMap<(i32, i32), [f64; 3]>,
}

impl Tally {
    /// Nothing counted yet, at `level` of `topo`, from `start`.
    pub fn new(topo: &Topology, level: Level, start: Nanos) -> Tally {
        Tally {
            threads_seen: 0,
            processes: HashSet::new(),
            threads_peak: 0,
            ticks: 0,
            moves_decided: 0,
            applied: ApplyReport::default(),
            notes: Vec::new(),
            level,
            start,
            cpu_at_start: super::own_cpu_seconds(),
            busy: vec![0.0; topo.domains(level).len()],
            cv_weighted: 0.0,
            weight: 0.0,
            exact_lock: false,
            hw: BTreeMap::new(),
        }
    }

    /// Adds one tick and the window it decided on.
    pub fn record(&mut self, topo: &Topology, window: &Window, tick: &TickReport) {
        self.ticks += 1;
        self.threads_seen += tick.appeared as u64;
        if tick.appeared > 0 {
            // A process is new only with a thread that is.
            for t in window.threads.iter().filter(|t| t.appeared) {
                self.processes.insert(t.key.pid);
            }
        }
        self.threads_peak = self.threads_peak.max(tick.threads);
        self.moves_decided += tick.moves as u64;
        self.applied.add(&tick.applied);
        self.exact_lock |= window.lock_exact;
        if let Some(note) = &tick.note {
            if self.notes.len() == NOTES_KEPT {
                self.notes.remove(0);
            }
            self.notes.push((
                tick.at.saturating_sub(self.start).as_secs_f64(),
                note.clone(),
            ));
        }
        self.add_counters(window);
        let dt = window.duration().as_secs_f64();
        if dt > 0.0 {
            let load = window.domain_load(topo, self.level);
            for (b, u) in self.busy.iter_mut().zip(&load.util) {
                *b += u * dt;
            }
            self.cv_weighted += load.cv * dt;
            self.weight += dt;
        }
    }

    /// Adds `window`'s counted threads to the hardware-counter totals.
    fn add_counters(&mut self, window: &Window) {
        let dt = window.duration().as_secs_f64();
        for t in &window.threads {
            if let (Some(ipc), Some(mpki)) = (t.ipc, t.mpki) {
                let run = t.util * dt;
                if run > 0.0 {
                    let e = self.hw.entry((t.key.pid.0, t.key.tid.0)).or_default();
                    e[0] += run;
                    e[1] += run * ipc;
                    e[2] += run * ipc * mpki;
                }
            }
        }
    }

    /// Each counted thread's IPC and MPKI over the run, by pid and tid: IPC the windows'
    /// weighted by run time (at a steady clock, its instructions over its cycles), MPKI the
    /// windows' weighted by instructions (run time × IPC).
    pub fn thread_counters(&self) -> Vec<ThreadCounters> {
        self.hw
            .iter()
            .map(|(&(pid, tid), &[run, ipc_w, mpki_w])| ThreadCounters {
                pid,
                tid,
                ipc: ipc_w / run,
                mpki: if ipc_w > 0.0 { mpki_w / ipc_w } else { 0.0 },
                run_s: run,
            })
            .collect()
    }

    /// Distinct processes whose threads were managed: the command (or the attached
    /// process) and every descendant seen.
    pub fn processes_seen(&self) -> u64 {
        self.processes.len() as u64
    }

    /// When management started.
    pub fn start(&self) -> Nanos {
        self.start
    }

    /// This process's CPU time when management started, seconds.
    pub(super) fn cpu_at_start(&self) -> f64 {
        self.cpu_at_start
    }

    /// Whether a window's lock time was exact.
    pub(super) fn exact_lock(&self) -> bool {
        self.exact_lock
    }

    /// Each domain's utilization and the spread across them, both weighted by the
    /// windows' lengths; `None` before a window of some length.
    pub(super) fn weighted_util(&self) -> Option<(Vec<f64>, f64)> {
        (self.weight > 0.0).then(|| {
            (
                self.busy.iter().map(|b| b / self.weight).collect(),
                self.cv_weighted / self.weight,
            )
        })
    }
}
