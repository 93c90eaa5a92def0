//! `dino`: DINO, Distributed Intensity NUMA Online (Blagodurov, Zhuravlev, Dashti, Fedorova,
//! "A case for NUMA-aware contention management on multicore systems", USENIX ATC 2011).
//! Spreads memory-intensive threads over the memory domains (last-level caches) so that
//! each domain gets an even share of the intensity, a memory-intensive thread sharing its
//! domain with calm ones; a thread moves only when its class changes.
//!
//! ```text
//!  window ──► MPKI of every thread (LLC misses per 1000 instructions, hardware counters)
//!               │
//!               ├─► last 10 readings ──► recorded rate changes only when ≥ 5 of them left
//!               │                         its class and their mean moved > 3 MPKI
//!               │
//!               └─► class of the recorded rate: super-devil (> 50), devil (> 1.5), turtle
//!                        │
//!   slots dealt class by class, most intense first, over the domains in a snake
//!   (0, 1, …, K−1, K−1, …, 0, 0, 1, …): each domain gets an even share of each class
//!                        │
//!   a thread keeps its domain while that domain still has a slot of its class; the
//!   others take the first domain with one (or stay where they run if it has one)
//!                        │
//!   Move { to: Domain, why: Intensity } for threads whose domain changed or that are
//!   placed for the first time; Linux balances inside each domain.
//! ```
//!
//! **What this follows.** The paper describes DINO as Distributed Intensity (DI, Zhuravlev
//! et al., ASPLOS 2010: sort threads by miss rate, pair the most intensive with the least
//! across memory domains) made NUMA-aware by moving threads rarely: threads are grouped
//! into intensity classes and a thread migrates only when its class changes. The numbers
//! come from the authors' own implementation, the Clavis user-level scheduler
//! (`scheduler-algorithms.c`, `distributedIntensity`, its DINO mode; `scheduler.h`):
//!
//! - the miss rate is `10000 × misses / instructions` with `DEVIL_HORIZON` 15 and
//!   `SUPER_DEVIL_HORIZON` 500, i.e. devils above 1.5 MPKI ([`DEVIL_MPKI`]), super-devils
//!   above 50 MPKI ([`SUPER_DEVIL_MPKI`]), turtles the rest; the rate is rounded to whole
//!   MPKI before it is classed;
//! - each thread keeps its last 10 readings ([`HISTORY`]); its recorded rate is replaced
//!   by their mean only when at least 5 of them ([`PHASE_SAMPLES`]) fall outside the
//!   recorded rate's class and the mean differs from it by more than 3 MPKI
//!   ([`PHASE_JUMP_MPKI`]): DINO's hysteresis;
//! - slots are dealt class by class, super-devils first, then devils, then turtles, over
//!   the caches in a snake, so that each cache gets an even share of every class (the
//!   pairing of high with low: a cache with an extra devil gets one turtle more);
//! - a thread whose slot in the previous solution still holds its class keeps it (no
//!   migration); the others take the first free slot of their class;
//! - the scheduler runs every second (`REFRESH_PERIOD` 1 s): [`INTERVAL`].
//!
//! **Where we decided.**
//!
//! - *Domains, not cores.* Clavis binds each thread to one core; we confine it to a domain
//!   (the LLC level, [`crate::PolicyKind::default_level`]) and let Linux balance inside
//!   it, as the other grouping policies here do. A slot of a class is a place in a domain;
//!   "the previous solution still holds its class" becomes "its domain still has a slot of
//!   its class after the threads already there kept theirs".
//! - *The first reading.* Clavis starts every thread at a rate of 0 (a turtle) and lets
//!   the hysteresis raise it, which takes at least 5 intervals. A thread seen for the
//!   first time has no class to protect, so its first reading is its recorded rate; the
//!   hysteresis applies from then on.
//! - *Threads without a reading* (no instructions counted yet, or never run) count as
//!   turtles, as Clavis counts threads with no miss rate and empty slots.
//! - *A thread placed for the first time* takes a slot of its class in the domain it runs
//!   in when there is one (no migration), else the first domain with one.
//! - *Uneven domains.* The snake skips a domain that already has its share of threads
//!   (its CPUs times the threads per CPU, rounded up), which never binds on a machine of
//!   equal domains.
//! - Clavis also weighs thread priorities and migrates memory with the thread; neither is
//!   part of DINO as Tumbler and Shuffling ran it, and threadbalance moves no memory.
//!
//! ```
//! use threadbalance_model::{Level, Nanos, Topology};
//! use threadbalance_model::testutil::window;
//! use threadbalance_policy::{Policy, Settings, dino::Dino};
//! let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
//! let mut p = Dino::new(&Settings::new(Level::Package));
//! // Two devils (20 MPKI) on package 0 (CPUs 0, 1), two turtles on package 1.
//! let mut w = window(1000, &[1.0, 1.0, 1.0, 1.0], &[0, 1, 2, 3]);
//! for (t, mpki) in w.threads.iter_mut().zip([20.0, 20.0, 0.5, 0.5]) {
//!     t.mpki = Some(mpki);
//! }
//! let plan = p.decide(&topo, &w);
//! assert_eq!(plan.next_in, Nanos::from_millis(1000));
//! // One devil and one turtle change package; the other two are confined where they run.
//! assert_eq!(plan.moves.len(), 4);
//! ```

use crate::{Needs, Policy, PolicyKind, Settings};

/// What DINO reads: each thread's hardware counters (its MPKI), nothing else beyond what
/// every host reads.
pub const NEEDS: Needs = Needs {
    counters: true,
    ..Needs::NOTHING
};
use std::collections::{BTreeMap, VecDeque};
use threadbalance_model::{
    DinoSummary, Level, Move, Nanos, Plan, PolicySummary, Reason, Target, ThreadKey, ThreadRates,
    Topology, Window,
};

/// How often DINO looks (Clavis's `REFRESH_PERIOD`, one second).
pub const INTERVAL: Nanos = Nanos::from_millis(1000);

/// A thread above this many LLC misses per 1000 instructions is a devil (Clavis's
/// `DEVIL_HORIZON`, 15 misses per 10 000 instructions).
pub const DEVIL_MPKI: f64 = 1.5;

/// A thread above this many LLC misses per 1000 instructions is a super-devil (Clavis's
/// `SUPER_DEVIL_HORIZON`, 500 misses per 10 000 instructions).
pub const SUPER_DEVIL_MPKI: f64 = 50.0;

/// Readings of a thread's MPKI kept for the hysteresis (one an interval).
pub const HISTORY: usize = 10;

/// Readings of the last [`HISTORY`] outside the recorded class that make a phase change.
pub const PHASE_SAMPLES: usize = 5;

/// How far (MPKI) the mean of the readings must be from the recorded rate to replace it.
pub const PHASE_JUMP_MPKI: f64 = 3.0;

/// DINO's intensity classes, most intense first (the order slots are dealt in).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Class {
    /// Above [`SUPER_DEVIL_MPKI`].
    SuperDevil,
    /// Above [`DEVIL_MPKI`].
    Devil,
    /// The rest, and threads without a reading.
    Turtle,
}

impl Class {
    /// The class of a recorded rate: rounded to whole MPKI first, as Clavis rounds it.
    ///
    /// ```
    /// use threadbalance_policy::dino::Class;
    /// assert_eq!(Class::of(1.4), Class::Turtle);
    /// assert_eq!(Class::of(1.6), Class::Devil); // rounds to 2
    /// assert_eq!(Class::of(50.4), Class::Devil); // rounds to 50
    /// assert_eq!(Class::of(50.6), Class::SuperDevil);
    /// ```
    pub fn of(mpki: f64) -> Class {
        let r = mpki.round();
        if r > SUPER_DEVIL_MPKI {
            Class::SuperDevil
        } else if r > DEVIL_MPKI {
            Class::Devil
        } else {
            Class::Turtle
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// Whether a reading lies outside the band of the (unrounded) recorded rate `rate`,
    /// Clavis's test for a phase change.
    fn left(rate: f64, reading: f64) -> bool {
        if rate > DEVIL_MPKI && rate < SUPER_DEVIL_MPKI {
            !(DEVIL_MPKI..=SUPER_DEVIL_MPKI).contains(&reading)
        } else if rate >= SUPER_DEVIL_MPKI {
            reading < SUPER_DEVIL_MPKI
        } else {
            reading > DEVIL_MPKI
        }
    }
}

/// What DINO knows of one thread.
#[derive(Debug, Clone, Default, PartialEq)]
struct Tracked {
    /// The last readings, newest first.
    readings: VecDeque<f64>,
    /// The recorded rate (MPKI), once read.
    rate: Option<f64>,
    /// The domain it was confined to.
    domain: Option<usize>,
}

impl Tracked {
    /// Takes one reading and applies the hysteresis; true when the recorded rate changed.
    fn read(&mut self, mpki: f64) -> bool {
        self.readings.push_front(mpki);
        self.readings.truncate(HISTORY);
        let Some(rate) = self.rate else {
            self.rate = Some(mpki);
            return true;
        };
        let left = self
            .readings
            .iter()
            .filter(|&&x| Class::left(rate, x))
            .count();
        let mean = self.readings.iter().sum::<f64>() / self.readings.len() as f64;
        if left >= PHASE_SAMPLES && (mean - rate).abs() > PHASE_JUMP_MPKI {
            self.rate = Some(mean);
            return true;
        }
        false
    }

    fn class(&self) -> Class {
        self.rate.map_or(Class::Turtle, Class::of)
    }
}

/// What DINO did over a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DinoStats {
    /// Decisions on a window with rates.
    pub decisions: u64,
    /// Threads moved to another domain or confined for the first time.
    pub moves: u64,
    /// Threads whose class changed after their first reading (the hysteresis let it).
    pub reclassified: u64,
    /// Threads in each class at the last decision: super-devils, devils, turtles.
    pub last_classes: [usize; 3],
}

/// The DINO policy.
#[derive(Debug, Clone)]
pub struct Dino {
    /// The level set, `None` for the policy's own ([`PolicyKind::default_level`]).
    level: Option<Level>,
    interval: Nanos,
    threads: BTreeMap<ThreadKey, Tracked>,
    stats: DinoStats,
}

impl Dino {
    /// DINO at `settings.level`, every `settings.interval` (default [`INTERVAL`]).
    pub fn new(settings: &Settings) -> Dino {
        Dino {
            level: settings.level,
            interval: settings.interval.unwrap_or(INTERVAL),
            threads: BTreeMap::new(),
            stats: DinoStats::default(),
        }
    }

    /// What it did so far.
    pub fn stats(&self) -> &DinoStats {
        &self.stats
    }

    /// The class DINO holds `key` in now (turtle for a thread it never read).
    pub fn class_of(&self, key: &ThreadKey) -> Class {
        self.threads.get(key).map_or(Class::Turtle, Tracked::class)
    }
}

/// How many slots of each class each of `cap.len()` domains gets: `counts[c]` threads of
/// class `c` dealt most intense first over the domains in a snake (0, 1, …, K−1, K−1, …,
/// 0, 0, …), skipping a domain once it holds `cap[d]` threads.
fn deal(counts: [usize; 3], cap: &[usize]) -> Vec<[usize; 3]> {
    let k = cap.len();
    let mut quota = vec![[0usize; 3]; k];
    let mut held = vec![0usize; k];
    if k == 0 {
        return quota;
    }
    let (mut d, mut up) = (0usize, true);
    for (c, &n) in counts.iter().enumerate() {
        for _ in 0..n {
            // At most 2k steps find a domain with room (the caps sum to at least the
            // threads); past that, the least held takes it.
            let mut steps = 0;
            while held[d] >= cap[d] && steps < 2 * k {
                (d, up) = snake_next(d, up, k);
                steps += 1;
            }
            if held[d] >= cap[d] {
                d = (0..k).min_by_key(|&i| held[i]).unwrap_or(0);
            }
            quota[d][c] += 1;
            held[d] += 1;
            (d, up) = snake_next(d, up, k);
        }
    }
    quota
}

/// The next domain of the snake 0, 1, …, k−1, k−1, …, 0, 0, 1, …
fn snake_next(d: usize, up: bool, k: usize) -> (usize, bool) {
    if up {
        if d + 1 == k {
            (d, false)
        } else {
            (d + 1, true)
        }
    } else if d == 0 {
        (0, true)
    } else {
        (d - 1, false)
    }
}

impl Policy for Dino {
    fn name(&self) -> &'static str {
        "dino"
    }

    fn needs(&self) -> Needs {
        NEEDS
    }

    fn summary(&self) -> PolicySummary {
        let s = &self.stats;
        PolicySummary::Dino(DinoSummary {
            decisions: s.decisions,
            moves: s.moves,
            reclassified: s.reclassified,
            super_devils: s.last_classes[0] as u64,
            devils: s.last_classes[1] as u64,
            turtles: s.last_classes[2] as u64,
        })
    }

    /// One DINO interval: each thread's MPKI through the hysteresis, the classes dealt over
    /// the domains, and a move for each thread whose class changed.
    ///
    /// Long because it is DINO's pass in the order its scheduler runs it; split, the
    /// classes and the placement would pass the same tables back and forth.
    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan {
        let level = self
            .level
            .unwrap_or_else(|| PolicyKind::Dino.default_level(topo));
        self.threads
            .retain(|k, _| window.threads.binary_search_by(|t| t.key.cmp(k)).is_ok());
        if window.duration() == Nanos::ZERO || window.threads.is_empty() {
            return Plan::wait(self.interval);
        }
        self.stats.decisions += 1;
        for t in &window.threads {
            let tracked = self.threads.entry(t.key).or_default();
            let first = tracked.rate.is_none();
            if let Some(mpki) = t.mpki.filter(|x| x.is_finite() && *x >= 0.0) {
                let before = tracked.class();
                if tracked.read(mpki) && !first && tracked.class() != before {
                    self.stats.reclassified += 1;
                }
            }
        }
        let domains = topo.domains(level);
        let k = domains.len();
        if k == 0 {
            return Plan::wait(self.interval);
        }
        let classes: Vec<Class> = window
            .threads
            .iter()
            .map(|t| self.class_of(&t.key))
            .collect();
        let mut counts = [0usize; 3];
        for c in &classes {
            counts[c.index()] += 1;
        }
        self.stats.last_classes = counts;
        let n = window.threads.len();
        let cpus: usize = domains.iter().map(|d| d.cpus.len()).sum();
        let per_cpu = n.div_ceil(cpus.max(1));
        let cap: Vec<usize> = domains
            .iter()
            .map(|d| (d.cpus.len() * per_cpu).max(1))
            .collect();
        let mut quota = deal(counts, &cap);
        let mut to: Vec<Option<usize>> = vec![None; n];
        // Threads keep the domain they were confined to while it has a slot of their class.
        for (i, t) in window.threads.iter().enumerate() {
            let c = classes[i].index();
            if let Some(d) = self.threads.get(&t.key).and_then(|x| x.domain)
                && d < k
                && quota[d][c] > 0
            {
                quota[d][c] -= 1;
                to[i] = Some(d);
            }
        }
        // Then threads placed for the first time stay where they run if they can.
        for (i, t) in window.threads.iter().enumerate() {
            let c = classes[i].index();
            let placed = self.threads.get(&t.key).and_then(|x| x.domain).is_some();
            if to[i].is_none()
                && !placed
                && let Some(d) = topo.domain_of(t.last_cpu, level)
                && quota[d][c] > 0
            {
                quota[d][c] -= 1;
                to[i] = Some(d);
            }
        }
        // The rest take the first domain with a slot of their class.
        for (i, slot) in to.iter_mut().enumerate() {
            if slot.is_none() {
                let c = classes[i].index();
                if let Some(d) = (0..k).find(|&d| quota[d][c] > 0) {
                    quota[d][c] -= 1;
                    *slot = Some(d);
                }
            }
        }
        let mut moves = Vec::new();
        for (i, t) in window.threads.iter().enumerate() {
            let Some(d) = to[i] else { continue };
            let Some(tracked) = self.threads.get_mut(&t.key) else {
                continue;
            };
            if tracked.domain == Some(d) {
                continue;
            }
            tracked.domain = Some(d);
            moves.push(intensity_move(t, level, d, tracked.rate));
        }
        self.stats.moves += moves.len() as u64;
        let note = (!moves.is_empty()).then(|| {
            format!(
                "{} super-devils, {} devils, {} turtles over {k} domains: moved {}, next in {}",
                counts[0],
                counts[1],
                counts[2],
                moves.len(),
                self.interval
            )
        });
        Plan {
            moves,
            slices: Vec::new(),
            next_in: self.interval,
            note,
        }
    }
}

fn intensity_move(t: &ThreadRates, level: Level, d: usize, rate: Option<f64>) -> Move {
    Move {
        thread: t.key,
        to: Target::Domain { level, index: d },
        why: Reason::Intensity {
            group: d,
            mpki: rate.unwrap_or(0.0),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{topo, window};

    /// A window of 1 s in which thread `i` (tid 100 + i) read `mpki[i]` and last ran on
    /// CPU `cpus[i]`.
    fn read(mpki: &[Option<f64>], cpus: &[u32]) -> Window {
        let mut w = window(1000, &vec![1.0; mpki.len()], cpus);
        for (t, m) in w.threads.iter_mut().zip(mpki) {
            t.mpki = *m;
        }
        w
    }

    /// The domain each thread was moved to, by tid.
    fn moved(plan: &Plan) -> Vec<(i32, usize)> {
        plan.moves
            .iter()
            .map(|m| match m.to {
                Target::Domain { index, .. } => (m.thread.tid.0, index),
                other => panic!("unexpected target {other:?}"),
            })
            .collect()
    }

    /// The classes held in each domain after `p` decided on `w`.
    fn per_domain(p: &Dino, w: &Window, k: usize) -> Vec<[usize; 3]> {
        let mut out = vec![[0; 3]; k];
        for t in &w.threads {
            let d = p.threads[&t.key].domain.unwrap();
            out[d][p.class_of(&t.key).index()] += 1;
        }
        out
    }

    #[test]
    fn dino_classes_follow_clavis_horizons() {
        assert_eq!(Class::of(0.0), Class::Turtle);
        assert_eq!(Class::of(1.49), Class::Turtle);
        assert_eq!(Class::of(2.0), Class::Devil);
        assert_eq!(Class::of(50.0), Class::Devil);
        assert_eq!(Class::of(51.0), Class::SuperDevil);
    }

    #[test]
    fn dino_snake_deals_each_class_evenly_pairing_high_with_low() {
        // 1 super-devil, 3 devils, 4 turtles over 2 domains of 4: the snake 0,1,1,0,0,1,1,0
        // gives domain 0 the super-devil, 1 devil and 2 turtles; domain 1 2 devils and 2
        // turtles.
        assert_eq!(deal([1, 3, 4], &[4, 4]), vec![[1, 1, 2], [0, 2, 2]]);
        // 6 devils and 2 turtles over 4 domains: the snake 0,1,2,3,3,2 gives domains 2 and
        // 3 two devils, and turns back (1, 0) so the two with one devil get the turtles.
        assert_eq!(
            deal([0, 6, 2], &[2, 2, 2, 2]),
            vec![[0, 1, 1], [0, 1, 1], [0, 2, 0], [0, 2, 0]]
        );
        // A full domain is skipped.
        assert_eq!(deal([0, 3, 0], &[1, 4]), vec![[0, 1, 0], [0, 2, 0]]);
    }

    #[test]
    fn dino_spreads_devils_bunched_on_one_package() {
        // 2 packages of 4 CPUs: 4 devils on package 0, 4 turtles on package 1.
        let t = topo(2, 1, 4, 1);
        let mut p = Dino::new(&Settings::new(Level::Package));
        let d = Some(20.0);
        let c = Some(0.2);
        let w = read(&[d, d, d, d, c, c, c, c], &[0, 1, 2, 3, 4, 5, 6, 7]);
        let plan = p.decide(&t, &w);
        assert_eq!(plan.next_in, INTERVAL);
        // Each package ends with 2 devils and 2 turtles.
        assert_eq!(per_domain(&p, &w, 2), vec![[0, 2, 2], [0, 2, 2]]);
        // Two devils and two turtles change package; the others are confined in place.
        let crossing: Vec<_> = moved(&plan)
            .into_iter()
            .filter(|&(tid, d)| (tid - 100 < 4) != (d == 0))
            .collect();
        assert_eq!(crossing.len(), 4, "{:?}", moved(&plan));
        assert_eq!(plan.moves.len(), 8);
        assert!(
            plan.moves
                .iter()
                .all(|m| matches!(m.why, Reason::Intensity { .. }))
        );
        // The same readings again: nothing moves.
        assert!(p.decide(&t, &w).moves.is_empty());
        assert_eq!(p.stats().last_classes, [0, 4, 4]);
    }

    #[test]
    fn dino_hysteresis_needs_five_of_ten_readings_and_a_3_mpki_jump() {
        let mut th = Tracked::default();
        assert!(th.read(0.5)); // first reading: recorded
        assert_eq!(th.class(), Class::Turtle);
        // Four spikes to 20 MPKI among turtle readings: not a phase change.
        for x in [20.0, 20.0, 0.5, 20.0, 20.0] {
            assert!(!th.read(x));
        }
        assert_eq!(th.class(), Class::Turtle);
        // The fifth spike in the last ten: mean (5 × 20 + 2 × 0.5) / 7 ≈ 14.4 > 0.5 + 3.
        assert!(th.read(20.0));
        assert_eq!(th.class(), Class::Devil);
        let rate = th.rate.unwrap();
        assert!((rate - 101.0 / 7.0).abs() < 1e-9, "{rate}");
        // A devil whose readings wander within the devil band never changes its rate.
        for x in [3.0, 40.0, 2.0, 30.0, 10.0, 45.0, 4.0, 25.0, 8.0, 35.0] {
            assert!(!th.read(x));
        }
        assert_eq!(th.rate, Some(rate));
    }

    #[test]
    fn dino_small_jump_within_the_band_keeps_the_rate() {
        // Five readings outside the band but a mean within 3 MPKI: no change.
        let mut th = Tracked::default();
        th.read(2.5);
        for _ in 0..5 {
            assert!(!th.read(1.0));
        }
        assert_eq!(th.rate, Some(2.5));
        assert_eq!(th.class(), Class::Devil);
    }

    #[test]
    fn dino_moves_a_thread_only_when_its_class_changes() {
        let t = topo(2, 1, 2, 1);
        let mut p = Dino::new(&Settings::new(Level::Package));
        let (d, c) = (Some(20.0), Some(0.2));
        // Devils 100 and 102 on different packages, turtles 101 and 103: balanced.
        let w = read(&[d, c, d, c], &[0, 1, 2, 3]);
        let plan = p.decide(&t, &w);
        // Confined in place, nobody crosses.
        assert_eq!(moved(&plan), vec![(100, 0), (101, 0), (102, 1), (103, 1)]);
        // Readings wander inside their classes (a devil at 3, a turtle at 1): no move.
        let w = read(&[Some(3.0), Some(1.0), Some(45.0), c], &[0, 1, 2, 3]);
        assert!(p.decide(&t, &w).moves.is_empty());
        // Turtle 101 turns devil: after one reading nothing moves (hysteresis) ...
        let w = read(&[d, d, d, c], &[0, 1, 2, 3]);
        assert!(p.decide(&t, &w).moves.is_empty());
        // ... and once its class changed (5 readings of 10 above 1.5 MPKI, mean far from
        // 0.2) package 0 holds two devils: one devil and the remaining turtle swap.
        let mut last = Plan::default();
        for _ in 0..4 {
            last = p.decide(&t, &w);
        }
        assert_eq!(
            p.class_of(&threadbalance_model::testutil::key(1, 101)),
            Class::Devil
        );
        assert_eq!(p.stats().reclassified, 1);
        // 3 devils and 1 turtle over 2 packages: snake 0,1,1,0 gives package 0 one devil
        // and the turtle, package 1 two devils.
        assert_eq!(per_domain(&p, &w, 2), vec![[0, 1, 1], [0, 2, 0]]);
        assert_eq!(last.moves.len(), 2, "{:?}", moved(&last));
    }

    #[test]
    fn dino_threads_without_readings_are_turtles_and_the_first_window_waits() {
        let t = topo(2, 1, 2, 1);
        let mut p = Dino::new(&Settings::new(Level::Package));
        let mut w = read(&[None, None], &[0, 1]);
        w.end = w.start;
        assert_eq!(p.decide(&t, &w), Plan::wait(INTERVAL));
        let w = read(&[None, None], &[0, 1]);
        let plan = p.decide(&t, &w);
        // Two turtles over two packages: one each.
        assert_eq!(per_domain(&p, &w, 2), vec![[0, 0, 1], [0, 0, 1]]);
        assert_eq!(plan.moves.len(), 2);
        assert!(p.needs().counters);
    }

    #[test]
    fn dino_forgets_vanished_threads_and_keeps_an_interval_set() {
        let t = topo(2, 1, 2, 1);
        let s = Settings {
            interval: Some(Nanos::from_millis(250)),
            ..Settings::new(Level::Package)
        };
        let mut p = Dino::new(&s);
        let w = read(&[Some(20.0), Some(0.1), Some(30.0)], &[0, 1, 2]);
        assert_eq!(p.decide(&t, &w).next_in, Nanos::from_millis(250));
        assert_eq!(p.threads.len(), 3);
        let w = read(&[Some(20.0)], &[0]);
        p.decide(&t, &w);
        assert_eq!(p.threads.len(), 1);
    }
}
