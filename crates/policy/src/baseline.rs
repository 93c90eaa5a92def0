//! The papers' baselines: `none` (Linux decides; we observe), `psets` and `pbind`.

use crate::grouping::Placement;
use crate::{Policy, PolicyKind, Settings};
use threadbalance_model::{
    CpuId, Level, Move, Nanos, PbindSummary, Plan, PolicySummary, PsetsSummary, Reason, Target,
    ThreadRates, Topology, Window,
};

/// How often `none` samples, to report utilization: Tumbler's longest grouping interval.
const OBSERVE_INTERVAL: Nanos = Nanos::from_millis(100);

/// How soon the static baselines look again after placing threads, and while the window
/// holds a single thread (see [`StartUp`]).
const SETTLE: Nanos = Nanos::from_millis(10);

/// The static baselines' start-up rule (`psets`, `pbind`): a thread inherits its creator's
/// CPU mask, so a mask set on a program's only thread before it starts its workers is set
/// on every worker too. Pinned to one core at the first tick, the main thread of
/// `workload spmd` took both of its workers there: they shared one core until the next
/// tick placed them, 100 ms later, and every `pbind` run on 2 cores lost about 50 ms
/// (1.054–1.072 s for 1 s of work against Linux's 1.011–1.016; 1.28 s with `--interval
/// 500`). So:
///
/// * **A window of one thread places nothing**: there is nothing to separate it from. The
///   next look comes after 10 ms, doubling up to the interval while the program stays
///   single-threaded.
/// * **After placing threads, the next look comes after 10 ms**, then at the interval:
///   threads started meanwhile by a thread just placed carry its mask, and are placed then.
///
/// With `--interval` fixed, every look comes at that interval (the user's choice); only
/// the first rule applies.
///
/// **A process's only thread is never placed** ([`placeable`]), whatever the rest of the
/// window holds: `run -- sh -c 'worker; true'` manages the shell and the worker as one
/// application, and a window of the shell's thread and the worker's main thread, before
/// the workers exist, held two threads. `psets` placed the worker's main thread in its own
/// group, and every worker it then started inherited that one CPU: 87 % of a core for a
/// program that could use 200 %. So a window starts the baselines once it holds a process
/// with two threads or more, and only such processes' threads are placed; a
/// single-threaded process (the shell, `make`, a compiler) is left to Linux, and its
/// threads are placed once it has started a second one.
#[derive(Debug, Clone)]
struct StartUp {
    interval: Nanos,
    fixed: bool,
    lone_wait: Nanos,
}

impl StartUp {
    fn new(settings: &Settings) -> StartUp {
        StartUp {
            interval: settings.interval.unwrap_or(OBSERVE_INTERVAL),
            fixed: settings.interval.is_some(),
            lone_wait: Nanos::ZERO,
        }
    }

    /// `Some(wait)` when the window holds no thread that may be placed (one thread, or
    /// only processes of one thread each): place nothing, look again then.
    fn lone(&mut self, window: &Window) -> Option<Nanos> {
        if placeable(&window.threads).any(|p| p) {
            self.lone_wait = Nanos::ZERO;
            return None;
        }
        self.lone_wait = if self.fixed {
            self.interval
        } else {
            Nanos((self.lone_wait.0 * 2).max(SETTLE.0)).min(self.interval)
        };
        Some(self.lone_wait)
    }

    /// When to look again after a tick that placed `placed` threads.
    fn next_in(&self, placed: usize) -> Nanos {
        if placed > 0 && !self.fixed {
            SETTLE.min(self.interval)
        } else {
            self.interval
        }
    }
}

/// For each thread of `threads` (sorted by key, as a window's are), whether it may be
/// placed by a static baseline: whether its process has another thread in the window. A
/// process's only thread is left where it is (see [`StartUp`]): a mask set on it now
/// would be inherited by every thread and process it starts.
fn placeable(threads: &[ThreadRates]) -> impl Iterator<Item = bool> + '_ {
    threads.iter().enumerate().map(|(i, t)| {
        let pid = t.key.pid;
        let before = i > 0 && threads[i - 1].key.pid == pid;
        let after = threads.get(i + 1).is_some_and(|n| n.key.pid == pid);
        before || after
    })
}

/// `none`: moves nothing; the engine still samples so the summary can report what Linux did.
#[derive(Debug, Clone)]
pub struct Observe {
    interval: Nanos,
}

impl Observe {
    /// Observes every `settings.interval` (100 ms by default).
    pub fn new(settings: &Settings) -> Observe {
        Observe {
            interval: settings.interval.unwrap_or(OBSERVE_INTERVAL),
        }
    }
}

impl Policy for Observe {
    fn name(&self) -> &'static str {
        "none"
    }

    fn needs(&self) -> crate::Needs {
        crate::Needs::OBSERVE
    }

    fn decide(&mut self, _topo: &Topology, _window: &Window) -> Plan {
        Plan::wait(self.interval)
    }
}

/// `psets`: the papers' processor-set baseline (Tumbler §5.2, Shuffling §4). At start
/// (the first look with a process of more than one thread: see `StartUp`), the threads
/// of such processes, in tid order, are
/// cut into one group of consecutive threads per domain — threads
/// 1–16 to domain 0, 17–32 to domain 1, … — group *i* to domain *i*, and Linux balances
/// within each domain. Groups are sized by the domains' logical CPUs (hardware threads
/// included): each domain's share of the threads is its share of the CPUs, the remainder
/// going to the domains with the largest fractions, the lowest first; equal domains get
/// groups whose sizes differ by at most one, the larger first. Groups are never
/// recomputed; a thread seen later joins the group with the fewest live threads per CPU
/// (ties to the lowest domain), once.
#[derive(Debug, Clone)]
pub struct Psets {
    /// The level set, `None` for the policy's own ([`PolicyKind::default_level`]).
    level: Option<Level>,
    start: StartUp,
    placement: Placement,
    counts: Vec<usize>,
    /// Logical CPUs of each domain.
    cpus: Vec<usize>,
    started: bool,
    placed: u64,
}

impl Psets {
    /// Groups at `settings.level`, looking for new threads every `settings.interval`
    /// (100 ms by default).
    pub fn new(settings: &Settings) -> Psets {
        Psets {
            level: settings.level,
            start: StartUp::new(settings),
            placement: Placement::new(),
            counts: Vec::new(),
            cpus: Vec::new(),
            started: false,
            placed: 0,
        }
    }
}

impl Policy for Psets {
    fn name(&self) -> &'static str {
        "psets"
    }

    fn decide(&mut self, topo: &Topology, window: &Window) -> Plan {
        self.placement.retain_alive(&window.threads);
        if !self.started
            && let Some(wait) = self.start.lone(window)
        {
            return Plan::wait(wait);
        }
        let level = self
            .level
            .unwrap_or_else(|| PolicyKind::Psets.default_level(topo));
        self.cpus.clear();
        self.cpus
            .extend(topo.domains(level).iter().map(|d| d.cpus.len()));
        let k = self.cpus.len();
        let mut moves = Vec::new();
        let place = |t: &ThreadRates, d: usize| Move {
            thread: t.key,
            to: Target::Domain { level, index: d },
            why: Reason::StaticGroup { group: d },
        };
        if !self.started {
            self.started = true;
            let n = placeable(&window.threads).filter(|&p| p).count();
            let ready = window
                .threads
                .iter()
                .zip(placeable(&window.threads))
                .filter_map(|(t, p)| p.then_some(t));
            let sizes = shares(n, &self.cpus);
            let groups = sizes
                .iter()
                .enumerate()
                .flat_map(|(d, &size)| std::iter::repeat_n(d, size));
            for (t, d) in ready.zip(groups) {
                self.placement.set(t.key, d);
                moves.push(place(t, d));
            }
        } else {
            self.counts.clear();
            self.counts.resize(k, 0);
            self.placement.count_per_domain(&mut self.counts);
            for (t, ok) in window.threads.iter().zip(placeable(&window.threads)) {
                if !ok || self.placement.get(&t.key).is_some() {
                    continue;
                }
                let d = fewest_per_cpu(&self.counts, &self.cpus);
                self.counts[d] += 1;
                self.placement.set(t.key, d);
                moves.push(place(t, d));
            }
        }
        self.placed += moves.len() as u64;
        Plan {
            slices: Vec::new(),
            next_in: self.start.next_in(moves.len()),
            moves,
            note: None,
        }
    }

    fn summary(&self) -> PolicySummary {
        PolicySummary::Psets(PsetsSummary {
            threads_placed: self.placed,
        })
    }
}

/// `n` threads shared out over domains of `cpus` logical CPUs each, in proportion: each
/// domain gets the whole part of its quota `n · cpus / total`, and the threads left over go
/// one each to the domains with the largest remainders, the lowest index on ties. Domains
/// of equal size get `⌈n/k⌉` for the first `n mod k` and `⌊n/k⌋` for the rest.
fn shares(n: usize, cpus: &[usize]) -> Vec<usize> {
    let total: usize = cpus.iter().sum();
    if total == 0 {
        return vec![0; cpus.len()];
    }
    let mut sizes: Vec<usize> = cpus.iter().map(|&c| n * c / total).collect();
    let left = n - sizes.iter().sum::<usize>();
    let mut order: Vec<usize> = (0..cpus.len()).collect();
    // Remainders compared exactly: (n·c mod total) for each domain.
    order.sort_by_key(|&d| (std::cmp::Reverse(n * cpus[d] % total), d));
    for &d in order.iter().take(left) {
        sizes[d] += 1;
    }
    sizes
}

/// The domain with the fewest threads per logical CPU (`counts[d] / cpus[d]`, compared
/// exactly), the lowest on ties; 0 when empty.
fn fewest_per_cpu(counts: &[usize], cpus: &[usize]) -> usize {
    let mut best = 0;
    for d in 1..counts.len().min(cpus.len()) {
        if counts[d] * cpus[best] < counts[best] * cpus[d] {
            best = d;
        }
    }
    best
}

/// The index of the smallest count, the lowest on ties; 0 when empty.
fn smallest(counts: &[usize]) -> usize {
    let mut best = 0;
    for (i, &c) in counts.iter().enumerate() {
        if c < counts[best] {
            best = i;
        }
    }
    best
}

/// `pbind`: the papers' one-thread-per-processor binding (`pbind(1)`, Tumbler §5.2,
/// Shuffling §4): "we bind 64 threads to 64 cores, one thread per core. The difference
/// between PSets and PBind is that thread migrations are allowed within the groups with
/// PSets." `pbind(1)` binds to processor ids, which are logical CPUs: thread *i*, in tid
/// order, is pinned to the *i*-th logical CPU of an order that takes **cores first, then
/// their siblings**: the first hardware thread of every core, domain by domain at the level
/// (the cores of domain 0, then those of domain 1, …), then the second hardware thread of
/// every core in the same order, and so on. Consecutive threads share a domain as under
/// [`Psets`], each stays on one CPU, and no two share a core before every core has one.
/// With more threads than CPUs it wraps around; a thread seen later takes the CPU with the
/// fewest live threads, first in that order on ties. A pinned thread is never moved again.
/// It starts as `psets` does (`StartUp`): never on a process's only thread.
///
/// ```text
///  package:1 core:4 pu:2   cores 0:{0,1} 1:{2,3} 2:{4,5} 3:{6,7}
///  threads 0 1 2 3 4 5 6 7 8 …
///  CPUs    0 2 4 6 1 3 5 7 0 …
/// ```
///
/// An earlier version pinned only to the first hardware thread of each core: on 8 cores × 2,
/// 16 threads ran two to a CPU with half the CPUs idle (49 % of the fair share where Linux
/// gives 75 %, simulated), a strawman. One earlier still dealt the cores round-robin over
/// the domains, which spreads each group of consecutive threads (a pipeline stage) over
/// every package: that is a balancing placement of its own, and it is not the papers'
/// baseline, which they describe as PSets without migrations and which they found to
/// increase "the severity of load imbalance across CPUs" (Tumbler §5.2).
#[derive(Debug, Clone)]
pub struct Pbind {
    start: StartUp,
    /// The logical CPUs in the order threads are pinned to them.
    cpus: Vec<CpuId>,
    /// Physical cores among them.
    cores: usize,
    /// Slot (index into `cpus`) of each pinned thread.
    placement: Placement,
    counts: Vec<usize>,
    pinned: u64,
}

impl Pbind {
    /// Orders the logical CPUs of `topo`, cores first, then their siblings, domain by
    /// domain at the level of `settings` (the policy's own by default); looks for new
    /// threads every `settings.interval` (100 ms by default).
    pub fn new(settings: &Settings, topo: &Topology) -> Pbind {
        let level = settings.level_for(PolicyKind::Pbind, topo);
        // (rank of the CPU within its core, domain at the level, CPU id) for each CPU.
        let mut ranked: Vec<(usize, usize, CpuId)> = Vec::with_capacity(topo.cpus().len());
        for core in topo.domains(Level::Core) {
            for (rank, cpu) in core.cpus.iter().enumerate() {
                if let Some(d) = topo.domain_of(cpu, level) {
                    ranked.push((rank, d, cpu));
                }
            }
        }
        ranked.sort_unstable();
        Pbind {
            start: StartUp::new(settings),
            cpus: ranked.into_iter().map(|(_, _, cpu)| cpu).collect(),
            cores: topo.domains(Level::Core).len(),
            placement: Placement::new(),
            counts: Vec::new(),
            pinned: 0,
        }
    }

    /// The logical CPUs in the order threads are pinned to them.
    pub fn cpu_order(&self) -> &[CpuId] {
        &self.cpus
    }
}

impl Policy for Pbind {
    fn name(&self) -> &'static str {
        "pbind"
    }

    fn decide(&mut self, _topo: &Topology, window: &Window) -> Plan {
        self.placement.retain_alive(&window.threads);
        let mut moves = Vec::new();
        if self.cpus.is_empty() {
            return Plan::wait(self.start.interval);
        }
        if self.pinned == 0
            && let Some(wait) = self.start.lone(window)
        {
            return Plan::wait(wait);
        }
        self.counts.clear();
        self.counts.resize(self.cpus.len(), 0);
        self.placement.count_per_domain(&mut self.counts);
        for (t, ok) in window.threads.iter().zip(placeable(&window.threads)) {
            if !ok || self.placement.get(&t.key).is_some() {
                continue;
            }
            let slot = smallest(&self.counts);
            self.counts[slot] += 1;
            self.placement.set(t.key, slot);
            moves.push(Move {
                thread: t.key,
                to: Target::Cpu(self.cpus[slot]),
                why: Reason::Pin,
            });
        }
        self.pinned += moves.len() as u64;
        Plan {
            slices: Vec::new(),
            next_in: self.start.next_in(moves.len()),
            moves,
            note: None,
        }
    }

    fn summary(&self) -> PolicySummary {
        PolicySummary::Pbind(PbindSummary {
            threads_pinned: self.pinned,
            cores: self.cores as u64,
            cpus: self.cpus.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::{key, topo, window, window_of};

    fn domains(plan: &Plan) -> Vec<usize> {
        plan.moves
            .iter()
            .map(|m| match m.to {
                Target::Domain { index, .. } => index,
                other => panic!("unexpected target {other:?}"),
            })
            .collect()
    }

    fn cpus(plan: &Plan) -> Vec<u32> {
        plan.moves
            .iter()
            .map(|m| match m.to {
                Target::Cpu(c) => c.0,
                other => panic!("unexpected target {other:?}"),
            })
            .collect()
    }

    #[test]
    fn observe_moves_nothing() {
        let t = topo(2, 1, 2, 1);
        let mut p = Observe::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &window(100, &[0.9, 0.1], &[0, 0]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, OBSERVE_INTERVAL);
    }

    #[test]
    fn psets_64_threads_on_4_packages_in_runs_of_16() {
        // Threads 1–16 → package 0, 17–32 → 1, 33–48 → 2, 49–64 → 3 (Tumbler §5.2).
        let t = topo(4, 1, 16, 1);
        let mut p = Psets::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &window(0, &[0.0; 64], &[0; 64]));
        let want: Vec<usize> = (0..64).map(|i| i / 16).collect();
        assert_eq!(domains(&plan), want);
        assert!(matches!(
            plan.moves[20].why,
            Reason::StaticGroup { group: 1 }
        ));
        // Never regrouped: the next window moves nobody, whatever the load.
        let plan = p.decide(&t, &window(100, &[1.0; 64], &[0; 64]));
        assert!(plan.moves.is_empty());
    }

    #[test]
    fn psets_late_thread_joins_smallest_group() {
        // 6 threads on 4 packages: groups of 2, 2, 1, 1 (threads 0 1 | 2 3 | 4 | 5).
        let t = topo(4, 1, 2, 1);
        let mut p = Psets::new(&Settings::new(Level::Package));
        let six: Vec<_> = (1..=6).map(|i| (key(1, i), 0.5, 0)).collect();
        assert_eq!(
            domains(&p.decide(&t, &window_of(0, &six))),
            [0, 0, 1, 1, 2, 3]
        );
        // Thread 1 exits (group 0 now 1 thread) and thread 7 starts: groups 1, 2, 1, 1 →
        // the smallest with the lowest index is 0.
        let mut later: Vec<_> = six[1..].to_vec();
        later.push((key(1, 7), 0.5, 0));
        let mut w = window_of(100, &later);
        w.vanished.push(key(1, 1));
        assert_eq!(domains(&p.decide(&t, &w)), [0]);
        // Thread 8: counts 2, 2, 1, 1 → package 2.
        later.push((key(1, 8), 0.5, 0));
        assert_eq!(domains(&p.decide(&t, &window_of(100, &later))), [2]);
        assert_eq!(p.summary().lines()[0].1, "8");
    }

    #[test]
    fn pbind_pins_cores_first_then_siblings_package_by_package_and_wraps() {
        // 2 packages × 2 cores × 2 PUs: cores' first CPUs are 0, 2 (package 0) and 4, 6
        // (package 1), taken package by package; then their siblings 1, 3 and 5, 7.
        let t = topo(2, 1, 2, 2);
        let mut p = Pbind::new(&Settings::new(Level::Package), &t);
        let order: Vec<u32> = p.cpu_order().iter().map(|c| c.0).collect();
        assert_eq!(order, [0, 2, 4, 6, 1, 3, 5, 7]);
        // Ten threads: the ninth and tenth wrap to CPUs 0 and 2.
        let plan = p.decide(&t, &window(0, &[0.0; 10], &[0; 10]));
        assert_eq!(cpus(&plan), [0, 2, 4, 6, 1, 3, 5, 7, 0, 2]);
        assert!(plan.moves.iter().all(|m| m.why == Reason::Pin));
        // Never moved again.
        assert!(
            p.decide(&t, &window(100, &[1.0; 10], &[1; 10]))
                .moves
                .is_empty()
        );
        assert_eq!(p.summary().lines()[1].1, "4");
        assert_eq!(p.summary().lines()[2].1, "8");
    }

    #[test]
    fn pbind_on_smt_pins_one_thread_per_logical_cpu_cores_first() {
        // See: issue 38. 4 cores × 2 hardware threads, the policy's own level: threads 0–3
        // go to the first CPU of cores 0–3 (CPUs 0 2 4 6), threads 4–7 to their siblings
        // (1 3 5 7). Pinned only to the cores' first CPUs, 8 threads ran two a CPU with
        // four CPUs idle.
        let t = Topology::synthetic("package:1 core:4 pu:2").unwrap();
        let mut p = Pbind::new(&Settings::default(), &t);
        let plan = p.decide(&t, &window(0, &[0.0; 8], &[0; 8]));
        assert_eq!(cpus(&plan), [0, 2, 4, 6, 1, 3, 5, 7]);
        // Four threads: one a core, no two on siblings.
        let mut p = Pbind::new(&Settings::default(), &t);
        let plan = p.decide(&t, &window(0, &[0.0; 4], &[0; 4]));
        assert_eq!(cpus(&plan), [0, 2, 4, 6]);
    }

    #[test]
    fn pbind_late_thread_takes_a_freed_core() {
        // 4 cores in order 0, 2, 4, 6 hold threads 1–4; thread 3 (on CPU 4) exits and
        // thread 5 starts: the only core without a thread is CPU 4's.
        let t = topo(2, 1, 2, 2);
        let mut p = Pbind::new(&Settings::new(Level::Package), &t);
        let four: Vec<_> = (1..=4).map(|i| (key(1, i), 0.5, 0)).collect();
        assert_eq!(cpus(&p.decide(&t, &window_of(0, &four))), [0, 2, 4, 6]);
        let w = window_of(
            100,
            &[
                (key(1, 1), 0.5, 0),
                (key(1, 2), 0.5, 2),
                (key(1, 4), 0.5, 6),
                (key(1, 5), 0.5, 0),
            ],
        );
        assert_eq!(cpus(&p.decide(&t, &w)), [4]);
    }

    #[test]
    fn pbind_leaves_a_lone_main_thread_and_looks_again_soon_after_pinning() {
        // A program's main thread alone: pinning it would pin every worker it starts.
        // Nothing is placed; the next looks come after 10, 20, 40, 80 ms, then 100.
        let t = topo(1, 1, 2, 1);
        let mut p = Pbind::new(&Settings::new(Level::Core), &t);
        let main = [(key(1, 1), 0.1, 0)];
        for wait in [10, 20, 40, 80, 100, 100] {
            let plan = p.decide(&t, &window_of(0, &main));
            assert!(plan.moves.is_empty());
            assert_eq!(plan.next_in, Nanos::from_millis(wait));
        }
        // Its two workers have started: all three are pinned (main and the second worker
        // share core 0) and the next look comes 10 ms later, for threads started meanwhile
        // with a pinned thread's mask.
        let three = [
            (key(1, 1), 0.0, 0),
            (key(1, 2), 1.0, 0),
            (key(1, 3), 1.0, 1),
        ];
        let plan = p.decide(&t, &window_of(100, &three));
        assert_eq!(cpus(&plan), [0, 1, 0]);
        assert_eq!(plan.next_in, Nanos::from_millis(10));
        // A fourth, started by the first with its mask, is placed at that look; then the
        // looks return to the interval.
        let mut four = three.to_vec();
        four.push((key(1, 4), 1.0, 0));
        let plan = p.decide(&t, &window_of(10, &four));
        assert_eq!(cpus(&plan), [1]);
        assert_eq!(plan.next_in, Nanos::from_millis(10));
        let plan = p.decide(&t, &window_of(10, &four));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(100));
        // Its workers gone, the main thread alone is not a start: nothing to place.
        let plan = p.decide(&t, &window_of(100, &main));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(100));
    }

    #[test]
    fn static_baselines_keep_a_fixed_interval() {
        // `--interval 50`: a lone thread waits 50 ms, and so does the look after pinning.
        let t = topo(1, 1, 2, 1);
        let mut settings = Settings::new(Level::Core);
        settings.interval = Some(Nanos::from_millis(50));
        let mut p = Pbind::new(&settings, &t);
        let plan = p.decide(&t, &window_of(0, &[(key(1, 1), 0.1, 0)]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(50));
        let two = [(key(1, 1), 1.0, 0), (key(1, 2), 1.0, 0)];
        let plan = p.decide(&t, &window_of(50, &two));
        assert_eq!(cpus(&plan), [0, 1]);
        assert_eq!(plan.next_in, Nanos::from_millis(50));
    }

    #[test]
    fn psets_process_tree_leaves_single_threaded_processes_alone() {
        // See: issue 39 item 7. `run -- sh -c 'worker; true'`: the shell (pid 1) and the
        // worker's main thread (pid 2) before its workers exist. Two threads, but each
        // alone in its process: grouping the worker's main thread then put every worker it
        // started on that one core. Nothing is placed; the next look comes 10 ms later.
        let t = topo(1, 1, 2, 1);
        let mut p = Psets::new(&Settings::new(Level::Core));
        let shell = (key(1, 1), 0.0, 0);
        let plan = p.decide(&t, &window_of(0, &[shell, (key(2, 2), 0.1, 0)]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(10));
        // The worker has started its two workers: its three threads are cut into the two
        // cores (2 | 3 4); the shell, alone in its process, is left to Linux.
        let tree = [
            shell,
            (key(2, 2), 0.0, 0),
            (key(2, 3), 1.0, 0),
            (key(2, 4), 1.0, 0),
        ];
        let plan = p.decide(&t, &window_of(10, &tree));
        let moved: Vec<_> = plan.moves.iter().map(|m| m.thread).collect();
        assert_eq!(moved, [key(2, 2), key(2, 3), key(2, 4)]);
        assert_eq!(domains(&plan), [0, 0, 1]);
        // A second single-threaded child of the shell is left alone too, later as well.
        let mut more = tree.to_vec();
        more.push((key(5, 5), 1.0, 1));
        assert!(p.decide(&t, &window_of(10, &more)).moves.is_empty());
    }

    #[test]
    fn pbind_process_tree_pins_no_lone_thread() {
        // See: issue 39 item 7. The same tree under `pbind`: the shell's and the worker's
        // only threads are not pinned; once the worker has a second thread, its two are.
        let t = topo(1, 1, 2, 1);
        let mut p = Pbind::new(&Settings::new(Level::Core), &t);
        let shell = (key(1, 1), 0.0, 0);
        let plan = p.decide(&t, &window_of(0, &[shell, (key(2, 2), 0.1, 0)]));
        assert!(plan.moves.is_empty());
        let tree = [shell, (key(2, 2), 0.0, 0), (key(2, 3), 1.0, 0)];
        let plan = p.decide(&t, &window_of(10, &tree));
        let moved: Vec<_> = plan.moves.iter().map(|m| m.thread).collect();
        assert_eq!(moved, [key(2, 2), key(2, 3)]);
        assert_eq!(cpus(&plan), [0, 1]);
    }

    #[test]
    fn psets_sizes_groups_by_the_domains_cpus() {
        // See: issue 38. Two packages of 4 cores, cut to CPUs 0-5 (`--cpus`): package 0
        // keeps 4 CPUs, package 1 two. Six threads split 4 | 2 (by CPUs), not 3 | 3.
        let t = Topology::synthetic("package:2 core:4 pu:1")
            .unwrap()
            .restricted_to(&threadbalance_model::CpuSet::parse_list("0-5").unwrap())
            .unwrap();
        let mut p = Psets::new(&Settings::new(Level::Package));
        let six: Vec<_> = (1..=6).map(|i| (key(1, i), 0.5, 0)).collect();
        assert_eq!(
            domains(&p.decide(&t, &window_of(0, &six))),
            [0, 0, 0, 0, 1, 1]
        );
        // A seventh thread: 4 threads on 4 CPUs against 2 on 2, a tie → package 0; an
        // eighth: 5/4 against 2/2 → package 1.
        let mut more = six.clone();
        more.push((key(1, 7), 0.5, 0));
        assert_eq!(domains(&p.decide(&t, &window_of(100, &more))), [0]);
        more.push((key(1, 8), 0.5, 0));
        assert_eq!(domains(&p.decide(&t, &window_of(100, &more))), [1]);
        // Shares: the remainder goes to the largest fractions, the lowest first.
        assert_eq!(shares(7, &[4, 2]), [5, 2]);
        assert_eq!(shares(6, &[2, 2, 2, 2]), [2, 2, 1, 1]);
        assert_eq!(shares(3, &[1, 2]), [1, 2]);
        assert_eq!(shares(0, &[]), Vec::<usize>::new());
    }

    #[test]
    fn psets_groups_from_the_first_window_with_more_than_one_thread() {
        // The main thread alone is left where it is, and the groups are cut in tid order
        // once the workers are there: 1 2 | 3 4 on two packages.
        let t = topo(2, 1, 2, 1);
        let mut p = Psets::new(&Settings::new(Level::Package));
        let plan = p.decide(&t, &window_of(0, &[(key(1, 1), 0.1, 0)]));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(10));
        let four: Vec<_> = (1..=4).map(|i| (key(1, i), 0.5, 0)).collect();
        let plan = p.decide(&t, &window_of(10, &four));
        assert_eq!(domains(&plan), [0, 0, 1, 1]);
        assert_eq!(plan.next_in, Nanos::from_millis(10));
        let plan = p.decide(&t, &window_of(10, &four));
        assert!(plan.moves.is_empty());
        assert_eq!(plan.next_in, Nanos::from_millis(100));
    }
}
