//! `lock-groups`: threads in groups, each group with its own mutex: the case where placing
//! a lock's users on one socket pays, and the positive control for `shuffling` and `handoff`.
//!
//! ```text
//!  thread i uses mutex i mod G (groups interleaved in creation order, so the kernel's
//!  fork placement does not put a group on one socket by accident)
//!
//!  loop ops times:  lock(mutex g, hold_g, lines) ── compute(outside_us ± 50 %)
//!  defaults: 64 threads, 4 groups, hold_us 1, ratio 2, lines 64, outside_us 150, ops 12000
//!
//!  hold=equal:     hold_g = hold_us for every group         lock times alike: no signal
//!  hold=distinct:  hold_g = hold_us · ratio^g (1, 2, 4, 8 µs)  lock times ordered by group
//! ```
//!
//! A group's threads hand its mutex, and the `lines` of data it protects, only to each
//! other. On the Opteron 6272 model a hand-off within a socket costs an L3 hit per line
//! (40 ns), one across sockets a remote probe (201 ns): with 64 lines and the lock's own,
//! 2.6 µs against 13 µs on top of the hold time, on the critical path of a contended mutex. Threads of one group
//! all on one socket keep every hand-off local; spread over four sockets, about three
//! hand-offs in four cross.
//!
//! With distinct hold times the groups' mutexes are contended to different degrees, so
//! their threads' lock times (Solaris `LCK`) differ by group and Shuffling's sort on lock
//! time recovers the groups. With equal hold times every thread waits about as long as any
//! other: sorting by lock time groups threads by noise, and only the who-hands-to-whom
//! graph (the `handoff` policy) tells the groups apart.
//!
//! ```
//! use threadbalance_sim::workload::builtin;
//! let w = builtin("lock-groups:hold=equal,ops=10", None).unwrap().unwrap();
//! assert_eq!(w.threads(), 64);
//! assert_eq!(w.apps[0].locks(), 4);
//! ```

use crate::SimError;
use crate::app::{App, Group, Op};
use crate::params::{Params, US, ns};

/// The hold times of `lock-groups`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Every group holds its mutex as long.
    Equal,
    /// Group `g` holds its mutex `2^g` times as long as group 0.
    Distinct,
}

/// The parameters of `lock-groups` (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockGroups {
    /// Threads; thread `i` is in group `i mod groups`.
    pub threads: usize,
    /// Groups, each with its own mutex.
    pub groups: usize,
    /// Equal or distinct hold times.
    pub hold: Hold,
    /// Group 0's hold time, ns (every group's with [`Hold::Equal`]).
    pub hold_ns: u64,
    /// With [`Hold::Distinct`], group `g` holds `hold_ns · ratio^g`.
    pub ratio: f64,
    /// Work outside the critical section per iteration, ns (± 50 %).
    pub outside_ns: u64,
    /// Protected cache lines that follow the mutex.
    pub lines: u32,
    /// Iterations per thread.
    pub ops: u64,
}

/// `lock-groups` as an application: each thread takes its group's mutex for its hold time
/// with `lines` protected lines, then computes `outside_ns`, `ops` times.
pub fn lock_groups(p: &LockGroups) -> App {
    let LockGroups {
        threads,
        groups,
        hold,
        hold_ns,
        ratio,
        outside_ns,
        lines,
        ops,
    } = *p;
    let groups = groups.clamp(1, usize::from(u16::MAX));
    let hold_of = |g: usize| match hold {
        Hold::Equal => hold_ns,
        Hold::Distinct => (hold_ns as f64 * ratio.powi(g.min(30) as i32)).round() as u64,
    };
    let program = |g: usize| Group {
        name: format!("group{g}"),
        threads: 1,
        ops: vec![
            Op::Lock {
                lock: g as u16,
                hold_ns: hold_of(g).max(1),
                lines,
            },
            Op::Compute {
                ns: outside_ns.max(1),
                spread: 0.5,
                mem: 0.0,
            },
        ],
        iterations: Some(ops),
    };
    App {
        name: "lock-groups".into(),
        groups: (0..threads).map(|i| program(i % groups)).collect(),
        queues: vec![],
        footprint_kb: 256,
        llc_working_set_kb: 0,
        spin_ns: 10_000,
        shared_data: false,
        memory_kb: 0,
        start_ns: 0,
        main_thread: false,
    }
}

/// The `lock-groups` builtin from its parameters (see [`crate::workload::BUILTINS`]).
pub(crate) fn builtin(p: &mut Params) -> Result<App, SimError> {
    let n = p.count("threads", 64)?;
    let groups = p.count("groups", 4)?;
    let hold = match p.map.remove("hold").as_deref() {
        None | Some("distinct") => Hold::Distinct,
        Some("equal") => Hold::Equal,
        Some(other) => {
            return Err(SimError::Workload {
                name: p.workload.clone(),
                why: format!("hold={other} (expected equal or distinct)"),
            });
        }
    };
    if groups > 16 {
        return Err(SimError::Workload {
            name: p.workload.clone(),
            why: format!("groups={groups}: at most 16"),
        });
    }
    let hold_us = p.num("hold_us", 1.0)?;
    let ratio = p.num("ratio", 2.0)?;
    let outside = p.num("outside_us", 150.0)?;
    let lines = p.count("lines", 64)?;
    let ops = p.count("ops", 12_000)?;
    Ok(lock_groups(&LockGroups {
        threads: n,
        groups,
        hold,
        hold_ns: ns(hold_us * US),
        ratio,
        outside_ns: ns(outside * US),
        lines: lines.min(u32::MAX as usize) as u32,
        ops: ops as u64,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_groups_interleaves_groups_and_doubles_distinct_holds() {
        let p = LockGroups {
            threads: 8,
            groups: 4,
            hold: Hold::Distinct,
            hold_ns: 1_000,
            ratio: 2.0,
            outside_ns: 50_000,
            lines: 16,
            ops: 3,
        };
        let a = lock_groups(&p);
        assert_eq!(a.threads(), 8);
        assert_eq!(a.locks(), 4);
        let lock_of = |g: &Group| match g.ops[0] {
            Op::Lock { lock, hold_ns, .. } => (lock, hold_ns),
            _ => unreachable!(),
        };
        let got: Vec<(u16, u64)> = a.groups.iter().map(lock_of).collect();
        // Threads 0..8 → mutexes 0 1 2 3 0 1 2 3; holds 1, 2, 4, 8 µs.
        assert_eq!(
            got,
            [
                (0, 1_000),
                (1, 2_000),
                (2, 4_000),
                (3, 8_000),
                (0, 1_000),
                (1, 2_000),
                (2, 4_000),
                (3, 8_000)
            ]
        );
        let eq = lock_groups(&LockGroups {
            hold: Hold::Equal,
            ..p
        });
        assert!(eq.groups.iter().all(|g| lock_of(g).1 == 1_000));
        assert!(a.validate().is_ok());
    }
}
