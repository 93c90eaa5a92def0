//! A policy planning over the allowed part of a machine never names a CPU outside it.
//!
//! The CPUs a thread may use (its cgroup's cpuset, a mask it inherited, `--cpus`) are
//! given to a policy as the machine cut down to them ([`Topology::restricted_to`]). Every
//! target a policy can name is then inside: a domain of the cut-down machine holds only
//! allowed CPUs, and a CPU it names must be one of them. This test drives every policy
//! over windows in which threads run busy, idle, blocked and in between, some of them
//! last seen on CPUs outside the allowed set (a process attached to after it ran
//! elsewhere), at every level, and checks every move.

use threadbalance_model::testutil::{key, topo};
use threadbalance_model::{
    CpuId, CpuSet, Level, Nanos, NodeId, Pid, Plan, ProcessMemory, Sample, Snapshot, Target,
    ThreadState, Topology, WakeEdge, Window,
};
use threadbalance_policy::{PolicyKind, Settings};

/// Every CPU a move's target allows, on `t`; `None` for "back to the original mask".
fn target_cpus(t: &Topology, to: Target) -> Option<CpuSet> {
    match to {
        Target::Cpu(c) => Some(CpuSet::single(c)),
        Target::Domain { level, index } => Some(
            t.domains(level)
                .get(index)
                .map_or_else(CpuSet::new, |d| d.cpus.clone()),
        ),
        Target::Original => None,
    }
}

/// Snapshot `n` (100 ms apart) of 12 threads of two processes: thread i ran a share of
/// the interval that depends on i and on the tick, blocked on locks part of the rest, and
/// was last seen on CPU `cpus[(i + n) % len]`; each process has memory on two nodes; and
/// thread i hands its lock to thread i + 6 (of the other process) 50 times a tick, so a
/// policy reading wake edges (`handoff`) has a graph to partition.
fn snapshot(n: u64, cpus: &[u32]) -> Snapshot {
    let dt = Nanos::from_millis(100);
    let at = Nanos(dt.0 * n);
    let threads = (0..12)
        .map(|i: u64| {
            // Utilization from 0.05 to 1.0 by thread, changing with the tick.
            let util = 0.05 + 0.95 * (((i * 7 + n * 3) % 12) as f64 / 11.0);
            let run = Nanos((util * at.0 as f64) as u64);
            let pid = if i < 6 { 1 } else { 2 };
            let k = key(pid, 100 + i as i32);
            Sample {
                key: k,
                run,
                utime: run,
                wait: Nanos(at.0 / 10),
                timeslices: n * (i + 1),
                voluntary: n * i,
                involuntary: n,
                last_cpu: CpuId(cpus[((i + n) as usize) % cpus.len()]),
                state: if util > 0.5 {
                    ThreadState::Running
                } else {
                    ThreadState::Sleeping
                },
                lock: Some(Nanos(((1.0 - util) * 0.5 * at.0 as f64) as u64)),
                ..Sample::default()
            }
        })
        .collect();
    let memory = (1..=2)
        .map(|pid| ProcessMemory {
            pid: Pid(pid),
            bytes_per_node: vec![(NodeId(0), 1 << 30), (NodeId(3), (pid as u64) << 28)],
        })
        .collect();
    let mut s = Snapshot {
        at,
        threads,
        memory,
        wakes: (0..6)
            .map(|i| WakeEdge {
                waker: key(1, 100 + i),
                woken: key(2, 106 + i),
                count: 50 * n,
            })
            .collect(),
        wakes_measured: true,
        waits_late: false,
        cpu_time: None,
        pace: threadbalance_model::pace::Pace::Free,
    };
    s.sort();
    s
}

/// Runs `kind` over 40 windows on `t` and returns every plan.
fn plans(kind: PolicyKind, t: &Topology, level: Level, cpus: &[u32]) -> Vec<Plan> {
    let mut settings = Settings::new(level);
    settings.interval = Some(Nanos::from_millis(100));
    let Ok(mut p) = kind.build(&settings, t) else {
        // A policy that cannot work at this level on this machine says so when built
        // (the simulator and the CLI refuse it the same way); nothing to plan.
        return Vec::new();
    };
    let mut w = Window::default();
    let mut prev = snapshot(0, cpus);
    w.first(&prev);
    let mut out = vec![p.decide(t, &w)];
    for n in 1..40 {
        let cur = snapshot(n, cpus);
        w.update(&prev, &cur);
        out.push(p.decide(t, &w));
        prev = cur;
    }
    out
}

#[test]
fn restricted_topology_every_policy_every_level_plans_only_allowed_cpus() {
    // 2 packages × 2 nodes × 4 cores, CPUs 0-15 (node n holds CPUs 4n..4n+3). Allowed:
    // 2-5 and 9-10, across nodes 0, 1 and 2 and both packages.
    let whole = topo(2, 2, 4, 1);
    let allowed = CpuSet::parse_list("2-5,9-10").unwrap();
    let t = whole.restricted_to(&allowed).unwrap();
    assert_eq!(t.online(), &allowed);
    // Threads seen on allowed CPUs, and on CPUs outside (0, 7, 15).
    let seen = [0, 2, 3, 4, 5, 7, 9, 10, 15];
    for &kind in PolicyKind::ALL {
        let mut moves = 0;
        for level in Level::ALL {
            for plan in plans(kind, &t, level, &seen) {
                for m in &plan.moves {
                    moves += 1;
                    if let Some(cpus) = target_cpus(&t, m.to) {
                        assert!(
                            !cpus.is_empty() && cpus.is_subset(&allowed),
                            "{kind} at {level}: move of {:?} to {:?} = CPUs {cpus}, outside {allowed}",
                            m.thread,
                            m.to
                        );
                    }
                }
            }
        }
        // Every policy but `none` did plan: the check above is not vacuous.
        assert_eq!(
            moves == 0,
            kind == PolicyKind::None,
            "{kind}: {moves} moves"
        );
    }
}
