//! The built-in applications, each modelled on a benchmark of the papers (or a program of
//! this project's own): their groups of threads, the operations each repeats, and their
//! queues. [`super::builtin`] parses a `name:key=value,…` spec and calls these.

use super::*;
use crate::kit::ferret_pipeline;

pub(super) fn app(name: &str, groups: Vec<Group>, queues: Vec<QueueSpec>) -> App {
    App {
        name: name.to_string(),
        groups,
        queues,
        footprint_kb: 256,
        llc_working_set_kb: 0,
        spin_ns: 10_000,
        shared_data: false,
        memory_kb: 0,
        start_ns: 0,
        main_thread: false,
    }
}

/// `ep-barrier`: `n` threads, each `work` ns in phases of `phase` ns separated by a barrier.
pub fn ep_barrier(n: usize, phase: u64, work: u64, wait: Wait) -> App {
    let phases = (work / phase.max(1)).max(1);
    let mut a = app(
        "ep",
        vec![Group {
            name: "worker".into(),
            threads: n,
            ops: vec![
                Op::Compute {
                    ns: phase,
                    spread: 0.0,
                    mem: 0.0,
                },
                Op::Barrier { barrier: 0, wait },
            ],
            iterations: Some(phases),
        }],
        vec![],
    );
    // EP has a tiny footprint: migrations cost microseconds (speed balancing §4).
    a.footprint_kb = 16;
    a
}

/// `spinners`: `n` independent threads that compute `work` ns each.
pub fn spinners(n: usize, work: u64) -> App {
    let mut a = app(
        "spin",
        vec![Group {
            name: "spinner".into(),
            threads: n,
            ops: vec![Op::Compute {
                ns: work.max(1),
                spread: 0.0,
                mem: 0.0,
            }],
            iterations: Some(1),
        }],
        vec![],
    );
    a.footprint_kb = 16;
    a
}

/// `ferret-pipeline`: six stages; the four middle ones get `n / 4` threads each (at least 1),
/// with per-item work in the ratio of Tumbler Table I (segment 2 : extract 1 : vector 11 :
/// rank 36). Rank (similarity search over the image database) is memory-bound.
pub fn ferret(n: usize, items: u64) -> App {
    let (groups, queues) = ferret_pipeline((n / 4).max(1), items, 0.3);
    let mut a = app("ferret", groups, queues);
    a.footprint_kb = 512;
    // The image database is loaded (first touched) by the main thread and read by all.
    a.shared_data = true;
    a
}

/// `streamcluster`: `n` threads, `phases` rounds of statically partitioned work whose cost
/// depends on the data (±50 % per phase), a shared-gain update under a mutex, and a barrier.
pub fn streamcluster(n: usize, phases: u64) -> App {
    let mut a = app(
        "streamcluster",
        vec![Group {
            name: "worker".into(),
            threads: n,
            ops: vec![
                Op::Compute {
                    ns: ns(2.0 * MS),
                    spread: 0.5,
                    mem: 0.5,
                },
                Op::Lock {
                    lock: 0,
                    hold_ns: ns(2.0 * US),
                    lines: 8,
                },
                Op::Barrier {
                    barrier: 0,
                    wait: Wait::Block,
                },
            ],
            iterations: Some(phases),
        }],
        vec![],
    );
    a.footprint_kb = 1024;
    a
}

/// `bodytrack`: PARSEC bodytrack's pthreads version (Shuffling §2, Fig. 3) with `n` workers
/// in a persistent pool and the main thread that drives it, `frames` frames.
///
/// Every parallel kernel is one command the main thread sends to the pool
/// (`WorkerGroup::SendCmd`): the workers wake from the command's condition variable
/// (barrier 0, with the main thread), take tickets of work units from a
/// `TicketDispenser` (a mutex-protected counter) until the dispenser runs dry, and meet
/// the main thread again at the pool's done barrier (barrier 1). Work is therefore
/// distributed dynamically: a thread that wins the mutex more often evaluates more work
/// units. A frame (native input: 4 cameras of 640 × 480, 4000 particles, 5 annealing
/// layers) runs
///
/// | command | dispenser | tickets | work unit | per ticket (assumed) | mem |
/// |---|---|---|---|---|---|
/// | edge maps: gradient, row filter, column filter, × 4 cameras | `loopTickets` (mutex 0) | 60 (480 rows / 8) | 8 image rows | 30 µs ± 20 % | 0.3 |
/// | per layer (× 5): particle weights | `particleTickets` (mutex 1) | 1000 (4000 / 4) | 4 particles' likelihoods | 120 µs ± 50 % | 0.2 |
/// | per layer (× 5): new particles | `particleTickets` (mutex 1) | 125 (4000 / 32) | 32 resampled particles | 40 µs ± 20 % | 0.2 |
///
/// and the main thread's serial work between commands: 0.35 ms after each layer's weights
/// (normalizing 4000 weights, resampling bins) and 0.2 ms per frame (the pose estimate).
///
/// Sources and assumptions. The ticket counts and work-unit sizes are the source's
/// (`WORKUNIT_SIZE_GRADIENT`/`FILTERROW`/`FILTERCOLUMN` = 8 rows,
/// `WORKUNIT_SIZE_PARTICLEWEIGHTS` = 4, `WORKUNIT_SIZE_NEWPARTICLES` = 32) and PARSEC's
/// native input. The critical section is `getTicket()`: read the counter, add the step
/// (0.1 µs), one line of protected data (the counter next to the mutex). The per-ticket
/// costs are assumptions: about 30 µs per likelihood evaluation at 2.1 GHz (a sequential
/// native run of the order of 10² s over 261 × 5 × 4000 evaluations); ±50 % because
/// particles that violate the model's joint limits return early and the others project a
/// different number of body parts into the images; an edge-kernel row of 640 pixels at a
/// few µs. Memory-bound fractions are assumptions consistent with BT's moderate LLC miss
/// rate (3.3 MPKI, Shuffling Fig. 1b; the edge and foreground maps, about 2.4 MB, fit the
/// 16 MB L3), higher for the filters, which stream image rows. The main thread's serial
/// work is an assumption (loops over 4000 particles). Nothing differs between workers:
/// which thread takes how many tickets, and so each thread's lock time, comes out of the
/// mutex (spin, then the mostly-LIFO sleep queue) and the scheduler.
pub fn bodytrack(n: usize, frames: u64) -> App {
    let (start, done) = (
        Op::Barrier {
            barrier: 0,
            wait: Wait::Block,
        },
        Op::Barrier {
            barrier: 1,
            wait: Wait::Block,
        },
    );
    let ticket = |lock: u16, items: u32| Op::Ticket {
        lock,
        items,
        hold_ns: ns(0.1 * US),
        lines: 1,
        body: 1,
    };
    let work = |us: f64, spread: f32, mem: f32| Op::Compute {
        ns: ns(us * US),
        spread,
        mem,
    };
    let serial = |us: f64| work(us, 0.1, 0.2);
    let mut main = Vec::new();
    let mut worker = Vec::new();
    // Edge maps of the 4 cameras: gradient, then the separable blur's row and column pass.
    for _ in 0..4 * 3 {
        main.extend([start, done]);
        worker.extend([start, ticket(0, 60), work(30.0, 0.2, 0.3), done]);
    }
    // The particle filter's annealing layers.
    for _ in 0..5 {
        main.extend([start, done, serial(350.0), start, done]);
        worker.extend([start, ticket(1, 1000), work(120.0, 0.5, 0.2), done]);
        worker.extend([start, ticket(1, 125), work(40.0, 0.2, 0.2), done]);
    }
    main.push(serial(200.0));
    let groups = vec![
        Group {
            name: "main".into(),
            threads: 1,
            ops: main,
            iterations: Some(frames),
        },
        Group {
            name: "worker".into(),
            threads: n,
            ops: worker,
            iterations: Some(frames),
        },
    ];
    let mut a = app("bodytrack", groups, vec![]);
    a.footprint_kb = 256;
    // The main thread reads the images and builds the edge and foreground maps' buffers.
    a.shared_data = true;
    a
}

/// `memcached-like`: `clients` threads send `requests` in total through one queue to
/// `servers` threads, which look the key up under the cache lock and serve it.
pub fn memcached(clients: usize, servers: usize, requests: u64) -> App {
    let per_client = (requests / clients as u64).max(1);
    let groups = vec![
        Group {
            name: "server".into(),
            threads: servers,
            ops: vec![
                Op::Get { queue: 0 },
                Op::Lock {
                    lock: 0,
                    hold_ns: ns(1.0 * US),
                    lines: 8,
                },
                Op::Compute {
                    ns: ns(25.0 * US),
                    spread: 0.3,
                    mem: 0.5,
                },
            ],
            iterations: None,
        },
        Group {
            name: "client".into(),
            threads: clients,
            ops: vec![
                Op::Compute {
                    ns: ns(15.0 * US),
                    spread: 0.3,
                    mem: 0.1,
                },
                Op::Put { queue: 0 },
                Op::Sleep {
                    ns: ns(150.0 * US),
                    spread: 0.3,
                },
            ],
            iterations: Some(per_client),
        },
    ];
    let mut a = app(
        "memcached",
        groups,
        vec![QueueSpec {
            capacity: 2 * servers,
            lines: 8,
        }],
    );
    a.shared_data = true;
    a
}
