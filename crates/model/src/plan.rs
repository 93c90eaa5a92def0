//! What a policy wants done: moves, each with its reason, and when to look again.

use crate::{CpuId, CpuSet, Level, Nanos, NodeId, ThreadKey, Topology};
use serde::Serialize;

/// Where a thread should be allowed to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Target {
    /// Any CPU of one domain (a package, node, LLC or core), within the CPUs the thread was
    /// originally allowed.
    Domain {
        /// The level of the domain.
        level: Level,
        /// Its dense index at that level.
        index: usize,
    },
    /// Exactly one CPU.
    Cpu(CpuId),
    /// Back to the mask the thread had before we touched it.
    Original,
}

impl Target {
    /// The CPUs a thread whose mask was `original` before it was first moved may run on
    /// under this target: the domain's or the CPU's within `original`, or `original`
    /// itself. Empty when the target names no domain or CPU of `topo`, or none of
    /// `original`'s: such a move is refused. The one resolution every host applies.
    pub fn cpus(self, topo: &Topology, original: &CpuSet) -> CpuSet {
        match self {
            Target::Domain { level, index } => topo
                .domains(level)
                .get(index)
                .map_or_else(CpuSet::new, |d| d.cpus.intersection(original)),
            Target::Cpu(cpu) if topo.cpu(cpu).is_some() => {
                CpuSet::single(cpu).intersection(original)
            }
            Target::Cpu(_) => CpuSet::new(),
            Target::Original => original.clone(),
        }
    }
}

/// Why a move was decided: the core explains itself with values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Reason {
    /// Tumbler: the thread's utilization puts it in another group (Algorithm 2).
    Regroup {
        /// The group (domain) it now belongs to.
        group: usize,
        /// Its utilization over the window.
        util: f64,
        /// Coefficient of variation of thread utilization that triggered the regrouping.
        cv: f64,
    },
    /// Shuffling: the thread's lock time puts it in another group.
    Shuffle {
        /// The group it now belongs to.
        group: usize,
        /// Its lock time (fraction of the window).
        lock: f64,
    },
    /// A static baseline (`psets`) placing a thread in its group once.
    StaticGroup {
        /// The group.
        group: usize,
    },
    /// A static baseline (`pbind`) pinning a thread to one core.
    Pin,
    /// First placement of a thread (round-robin, or a thread discovered late).
    Initial,
    /// Speed balancing: the thread changes core in a rotation that gives every thread the
    /// same share of time on the less loaded cores (or levels the thread counts).
    SpeedRotate {
        /// The thread's progress lead over the mean of the program's threads, in ms of
        /// CPU time (decayed): positive when it goes to share a core with more threads.
        lead_ms: f64,
    },
    /// Speed balancing as first designed (`speed-v1`, a calibration reference): a core
    /// faster than the global speed pulled the thread from a core slower than `T_s` × it.
    SpeedPull {
        /// Speed of the pulling core.
        to_speed: f64,
        /// Speed of the core it came from.
        from_speed: f64,
        /// Global average speed.
        global: f64,
    },
    /// NUMA balancing: moved from the busiest to the idlest node.
    NumaBalance {
        /// Node it left.
        from: NodeId,
        /// Node it goes to.
        to: NodeId,
    },
    /// The policy gives the thread back to the OS.
    Release,
    /// `dino`: the thread's memory-intensity class has a slot in this domain (DINO's
    /// Distributed Intensity).
    Intensity {
        /// The group (domain) it now belongs to.
        group: usize,
        /// Its recorded LLC misses per thousand instructions (0 before its first reading).
        mpki: f64,
    },
    /// `handoff`: the thread joins the threads it hands locks to (a part of the
    /// who-wakes-whom graph's balanced partition).
    HandOff {
        /// The group (part) it now belongs to.
        group: usize,
        /// Fraction of the graph's hand-offs that crossed domains before the move.
        cut: f64,
    },
}

/// One thread to move.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Move {
    /// The thread, with its start time so a reused tid is never touched.
    pub thread: ThreadKey,
    /// Where it should be allowed to run.
    pub to: Target,
    /// Why.
    pub why: Reason,
}

/// A thread's time slice to set: how long the kernel lets it run before a thread waiting
/// on the same CPU gets its turn (for fair-class threads, `sched_setattr`'s
/// `sched_runtime`, honoured since Linux 6.12).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SliceChange {
    /// The thread.
    pub thread: ThreadKey,
    /// The slice to give it; `None`: its own, the one it had before we touched it.
    pub slice: Option<Nanos>,
}

/// A policy's decision for one tick.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Plan {
    /// Threads to move, in order.
    pub moves: Vec<Move>,
    /// Time slices to change, applied after the moves.
    pub slices: Vec<SliceChange>,
    /// When to sample and decide again, from now.
    pub next_in: Nanos,
    /// A short explanation when the decision is worth reporting ("CV 0.42 ≥ 0.40: regrouped,
    /// next in 50 ms"); `None` on routine ticks.
    pub note: Option<String>,
}

impl Plan {
    /// A plan that moves nothing and looks again after `next_in`.
    pub fn wait(next_in: Nanos) -> Plan {
        Plan {
            moves: Vec::new(),
            slices: Vec::new(),
            next_in,
            note: None,
        }
    }
}

/// What happened to one move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MoveOutcome {
    /// The affinity was changed.
    Done,
    /// The thread was already allowed exactly there; nothing was changed.
    Unchanged,
    /// The thread had exited (or its tid now names another thread); nothing was changed.
    Vanished,
    /// The OS refused (permission), or the target shares no CPU with the thread's original mask.
    Denied,
}

/// What a host did with a plan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ApplyReport {
    /// Moves whose affinity was changed.
    pub done: u32,
    /// Moves that needed no change.
    pub unchanged: u32,
    /// Moves of threads that had gone.
    pub vanished: u32,
    /// Moves the OS refused or that had no allowed CPU.
    pub denied: u32,
    /// Time slices changed (a slice asked for that the thread already had is not one).
    pub slices: u32,
}

impl ApplyReport {
    /// Counts one outcome.
    pub fn count(&mut self, o: MoveOutcome) {
        match o {
            MoveOutcome::Done => self.done += 1,
            MoveOutcome::Unchanged => self.unchanged += 1,
            MoveOutcome::Vanished => self.vanished += 1,
            MoveOutcome::Denied => self.denied += 1,
        }
    }

    /// Adds another report's counts.
    pub fn add(&mut self, other: &ApplyReport) {
        self.done += other.done;
        self.unchanged += other.unchanged;
        self.vanished += other.vanished;
        self.denied += other.denied;
        self.slices += other.slices;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_resolves_within_the_original_mask_and_is_empty_when_unknown() {
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let all: CpuSet = topo.cpus().iter().map(|c| c.id).collect();
        let first_two: CpuSet = [CpuId(0), CpuId(1)].into_iter().collect();
        let package = |index| Target::Domain {
            level: Level::Package,
            index,
        };
        assert_eq!(
            package(1).cpus(&topo, &all),
            [CpuId(2), CpuId(3)].into_iter().collect()
        );
        // Never beyond the mask the thread had: package 1 holds none of CPUs 0 and 1.
        assert!(package(1).cpus(&topo, &first_two).is_empty());
        assert!(package(2).cpus(&topo, &all).is_empty(), "no such package");
        assert_eq!(
            Target::Cpu(CpuId(1)).cpus(&topo, &all),
            CpuSet::single(CpuId(1))
        );
        assert!(
            Target::Cpu(CpuId(9)).cpus(&topo, &all).is_empty(),
            "no such CPU"
        );
        assert_eq!(Target::Original.cpus(&topo, &first_two), first_two);
    }
}
