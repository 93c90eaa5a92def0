//! An application as the simulator runs it: groups of threads, each running a program
//! of [`Op`]s (the table of ops is in [`crate::workload`](mod@crate::workload)), the queues between them, its
//! memory and how it waits at barriers. A leaf: the workload builders and the
//! simulation import it.

use serde::Serialize;

/// How a thread waits at a barrier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Wait {
    /// Busy-waits on the CPU until released (preempted only at slice end).
    Spin,
    /// Calls `sched_yield` in a loop: gives the CPU to any other runnable thread there.
    Yield,
    /// Spins briefly, then sleeps on a futex (pthread barrier).
    Block,
    /// libgomp's barrier wait ([`crate::gomp`]): spins `spin_ns`, or `throttled_ns` while
    /// the application has more threads than the CPUs it started with, then sleeps on the
    /// futex.
    Gomp {
        /// The spin with at most one thread per CPU (`gomp_spin_count_var` spins), ns.
        spin_ns: u64,
        /// The spin with more threads than CPUs (`gomp_throttled_spin_count_var`), ns.
        throttled_ns: u64,
    },
}

/// One operation of a thread's program.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "op")]
pub enum Op {
    /// Work for `ns` nanoseconds at full speed, varied uniformly by ±`spread` (a fraction),
    /// of which a fraction `mem` is memory-bound.
    Compute {
        /// Nominal duration in nanoseconds.
        ns: u64,
        /// Uniform variation, as a fraction of `ns` (0.2 = ±20 %).
        spread: f32,
        /// Memory-bound fraction (0 = all in cache, 1 = all memory stalls).
        mem: f32,
    },
    /// A critical section: acquire mutex `lock`, work `hold_ns`, release.
    Lock {
        /// Lock index within the application.
        lock: u16,
        /// Work inside the critical section, nanoseconds.
        hold_ns: u64,
        /// Cache lines of protected data the section touches (they follow the lock).
        lines: u32,
    },
    /// Take the next ticket of a shared work pool, as PARSEC's `TicketDispenser` does: lock
    /// mutex `lock` (spin, then block, as [`Op::Lock`]), take one of the pool's `items`
    /// tickets and unlock; with a ticket, run the next `body` ops (the work unit) and come
    /// back for another; once the pool is empty, go on after them.
    ///
    /// The pool belongs to the mutex. Each thread counts the ticket loops it has finished
    /// (found the pool empty); a thread starting loop *k* on a pool last filled for an
    /// earlier loop refills it with `items` tickets (PARSEC's rank 0 calls
    /// `resetDispenser` before the workers' `workInit` barrier). So every thread must run
    /// the same sequence of ticket loops, and a barrier should separate two loops on one
    /// pool: a thread still in loop *k* when another has refilled the pool for *k* + 1
    /// finds it empty.
    Ticket {
        /// Mutex (and pool) index within the application.
        lock: u16,
        /// Tickets in the pool at each loop.
        items: u32,
        /// Work inside the critical section (reading and advancing the counter), ns.
        hold_ns: u64,
        /// Cache lines of protected data the section touches (the counter).
        lines: u32,
        /// Ops after this one that process one ticket (at least 1, no ticket among them).
        body: u16,
    },
    /// Wait at barrier `barrier` until all its threads arrive.
    Barrier {
        /// Barrier index within the application.
        barrier: u16,
        /// How to wait.
        wait: Wait,
    },
    /// Put one item into bounded queue `queue` (blocks while full).
    Put {
        /// Queue index within the application.
        queue: u16,
    },
    /// Take one item from queue `queue` (blocks while empty; exits when closed and empty).
    Get {
        /// Queue index within the application.
        queue: u16,
    },
    /// Sleep for `ns` nanoseconds (± `spread`).
    Sleep {
        /// Nominal duration in nanoseconds.
        ns: u64,
        /// Uniform variation, as a fraction.
        spread: f32,
    },
}

/// Threads that run the same program.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// Name, for reports (`rank`, `worker`).
    pub name: String,
    /// How many threads run it.
    pub threads: usize,
    /// The program.
    pub ops: Vec<Op>,
    /// Times each thread runs the program; `None` = until a queue it reads closes.
    pub iterations: Option<u64>,
}

/// A bounded queue between threads (a condition-variable protected ring).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueueSpec {
    /// Items it holds before producers block.
    pub capacity: usize,
    /// Cache lines of one item, moved from producer to consumer.
    pub lines: u32,
}

/// One multithreaded process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct App {
    /// Its name.
    pub name: String,
    /// Its threads, by program; created in this order.
    pub groups: Vec<Group>,
    /// Its queues.
    pub queues: Vec<QueueSpec>,
    /// Cache footprint of each thread in KiB, refilled after a migration.
    pub footprint_kb: u32,
    /// The working set each thread reuses from the last-level cache, KiB, when declared:
    /// beyond its share of the LLC, memory-bound neighbours evict it and its memory-bound
    /// work takes longer ([`crate::llc`]). 0: not declared, no such contention.
    #[serde(skip_serializing_if = "is_zero")]
    pub llc_working_set_kb: u32,
    /// How long a thread spins on a held mutex before sleeping, nanoseconds.
    pub spin_ns: u64,
    /// Whether memory-bound work reads data shared by all threads (placed by the first
    /// thread's first touch) rather than each thread's own pages. See [`App::first_touch`].
    pub shared_data: bool,
    /// Resident memory first-touched, KiB: the shared data (with `shared_data`) or each
    /// thread's own pages; what `numa_maps` reports per node. 0 = `footprint_kb` stands in.
    pub memory_kb: u32,
    /// Delay from the start of the run until the application is launched (its first thread
    /// is exec'd), nanoseconds.
    pub start_ns: u64,
    /// Whether the first group's single thread is a pthreads program's main thread: it runs
    /// its program (reading the input: the first touch of shared data), then creates the
    /// other threads and sleeps in `pthread_join` until they have exited, then exits.
    pub main_thread: bool,
}

/// Who first touches an application's memory (Chiang & Su 2021, Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirstTouch {
    /// The thread group leader allocates and initializes the shared working set: its pages
    /// sit on the node where the leader ran then (`shared_data`).
    Leader,
    /// Each thread allocates and initializes its own pages, on the node where it first runs
    /// memory-bound work.
    Thread,
}

impl App {
    /// Who first touches its memory.
    pub fn first_touch(&self) -> FirstTouch {
        if self.shared_data {
            FirstTouch::Leader
        } else {
            FirstTouch::Thread
        }
    }

    /// Threads in the application.
    pub fn threads(&self) -> usize {
        self.groups.iter().map(|g| g.threads).sum()
    }

    /// Number of locks (highest index used + 1).
    pub fn locks(&self) -> usize {
        self.max_index(|op| match op {
            Op::Lock { lock, .. } | Op::Ticket { lock, .. } => Some(*lock),
            _ => None,
        })
    }

    /// Threads taking part in each barrier.
    pub fn barrier_parties(&self) -> Vec<usize> {
        let n = self.max_index(|op| match op {
            Op::Barrier { barrier, .. } => Some(*barrier),
            _ => None,
        });
        let mut parties = vec![0; n];
        for g in &self.groups {
            let mut seen = vec![false; n];
            for op in &g.ops {
                if let Op::Barrier { barrier, .. } = op {
                    seen[usize::from(*barrier)] = true;
                }
            }
            for (p, s) in parties.iter_mut().zip(seen) {
                if s {
                    *p += g.threads;
                }
            }
        }
        parties
    }

    fn max_index(&self, f: impl Fn(&Op) -> Option<u16>) -> usize {
        self.groups
            .iter()
            .flat_map(|g| g.ops.iter())
            .filter_map(f)
            .map(|i| usize::from(i) + 1)
            .max()
            .unwrap_or(0)
    }

    /// Checks indices and sizes; called by every constructor.
    pub fn validate(&self) -> Result<(), Invalid> {
        let threads = self
            .groups
            .iter()
            .try_fold(0usize, |n, g| n.checked_add(g.threads));
        if self.groups.is_empty() || threads == Some(0) {
            return Err(Invalid::NoThread(self.name.clone()));
        }
        check_threads(threads.unwrap_or(usize::MAX))?;
        for g in &self.groups {
            if g.ops.is_empty() {
                return Err(Invalid::NoOperation(g.name.clone()));
            }
            let reads = g.ops.iter().any(|o| matches!(o, Op::Get { .. }));
            if g.iterations.is_none() && !reads {
                return Err(Invalid::NeverEnds(g.name.clone()));
            }
            for (i, op) in g.ops.iter().enumerate() {
                match *op {
                    Op::Ticket { body, items, .. } => {
                        let end = i + 1 + usize::from(body);
                        let nested = g.ops[i + 1..end.min(g.ops.len())]
                            .iter()
                            .any(|o| matches!(o, Op::Ticket { .. }));
                        if body == 0 || end > g.ops.len() || nested || items == 0 {
                            return Err(Invalid::Ticket(g.name.clone()));
                        }
                    }
                    Op::Put { queue } | Op::Get { queue }
                        if usize::from(queue) >= self.queues.len() =>
                    {
                        return Err(Invalid::Queue {
                            group: g.name.clone(),
                            queue,
                        });
                    }
                    Op::Compute { spread, mem, .. }
                        if !(0.0..=1.0).contains(&spread) || !(0.0..=1.0).contains(&mem) =>
                    {
                        return Err(Invalid::SpreadMem(g.name.clone()));
                    }
                    Op::Sleep { spread, .. } if !(0.0..=1.0).contains(&spread) => {
                        return Err(Invalid::Spread(g.name.clone()));
                    }
                    _ => {}
                }
            }
        }
        if self.main_thread {
            let main = &self.groups[0];
            let sync = main
                .ops
                .iter()
                .any(|o| !matches!(o, Op::Compute { .. } | Op::Sleep { .. }));
            if main.threads != 1 || main.iterations.is_none() || sync {
                return Err(Invalid::MainThread(self.name.clone()));
            }
        }
        if self.queues.iter().any(|q| q.capacity == 0) {
            return Err(Invalid::EmptyQueue(self.name.clone()));
        }
        Ok(())
    }
}

/// The most threads one simulation holds, all applications together: 65 536.
///
/// Twice the kernel's default `pid_max` (32 768; a real machine with that default cannot
/// run more threads at once) and 4 times the roughly 16 000 threads one process reaches
/// with the default `vm.max_map_count` (see the `workload` crate's `thread_limit`), so no
/// program the simulator models is refused. Above it the simulator's own state is the
/// bound: every thread has its slots in the run queues, the samples and the report
/// from the start (10⁸ threads asked for 7.6 GB at once and aborted), and a run of
/// seconds of simulated time takes hours. A scenario or `--threads` above it is refused,
/// one line naming the count, before anything is built.
pub const MAX_THREADS: usize = 65_536;

/// `Err` naming `threads` when it is above [`MAX_THREADS`].
pub fn check_threads(threads: usize) -> Result<(), Invalid> {
    if threads > MAX_THREADS {
        return Err(Invalid::TooManyThreads(threads));
    }
    Ok(())
}

/// What is wrong with an application as given (a built-in's parameters, a scenario).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Invalid {
    /// An application without a thread.
    #[error("application {0:?} has no thread")]
    NoThread(String),
    /// More threads than the simulator holds ([`MAX_THREADS`]).
    #[error("{0} threads: the simulator holds at most {MAX_THREADS} (all applications together)")]
    TooManyThreads(usize),
    /// A group without an operation.
    #[error("group {0:?} has no operation")]
    NoOperation(String),
    /// A group that would loop forever.
    #[error("group {0:?} has no iteration count and reads no queue: it would never end")]
    NeverEnds(String),
    /// A ticket op without items or a body.
    #[error(
        "group {0:?}: a ticket op needs items ≥ 1 and a body of 1 or more following ops \
         without another ticket op"
    )]
    Ticket(String),
    /// A queue used and not declared.
    #[error("group {group:?} uses queue {queue}, not declared")]
    Queue {
        /// The group.
        group: String,
        /// The queue's index.
        queue: u16,
    },
    /// A compute op's spread or memory share out of 0..1.
    #[error("group {0:?}: spread and mem must be within 0..1")]
    SpreadMem(String),
    /// A sleep op's spread out of 0..1.
    #[error("group {0:?}: spread must be within 0..1")]
    Spread(String),
    /// A main thread's group that is not one thread computing and sleeping.
    #[error(
        "application {0:?}: the main thread's group must have one thread, an iteration \
         count and only compute and sleep operations"
    )]
    MainThread(String),
    /// A queue that holds nothing.
    #[error("application {0:?} has a queue of capacity 0")]
    EmptyQueue(String),
}

fn is_zero(x: &u32) -> bool {
    *x == 0
}
