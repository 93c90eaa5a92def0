//! `dino` in the simulator: the counters it reads come from the memory model, and on
//! DINO's own experiment (memory-intensive and compute-bound programs, the former bunched
//! on one last-level cache) spreading them wins.

use threadbalance_policy::Settings;
use threadbalance_sim::{RunOptions, compare_with, machine, workload};

#[test]
fn dino_spreads_the_memory_mix_and_beats_linux() {
    // `memory-mix` on two LLCs of 4 cores: the four memory-intensive programs are
    // launched first and fill LLC 0, the compute-bound ones LLC 1. Each memory-intensive
    // program's 8 MiB working set is larger than its 2 MiB share of the LLC, so under
    // Linux each shares its cache with three memory-bound neighbours (occupancy 0.8, its
    // memory-bound part 1.4× as long); dealt two and two by DINO, with one (0.8 / 3 plus
    // the turtles' 0.02 × 2 / 3: 1.14×). Every program runs 4 s of work, the memory-bound
    // ones set the run time.
    let m = machine("package:2 core:4 pu:1", None).unwrap();
    let w = workload("memory-mix", None, None).unwrap();
    let policies = vec!["none".to_string(), "dino".to_string()];
    for seed in 1..=2 {
        let opts = RunOptions::new(seed);
        let c = compare_with(&m, &w, &policies, &Settings::default(), &opts).unwrap();
        let (none, dino) = (&c.results[0], &c.results[1]);
        assert!(none.finished && dino.finished, "{}", c.to_table());
        assert!(
            dino.runtime_s < 0.95 * none.runtime_s,
            "seed {seed}: dino {:.3} s, none {:.3} s\n{}",
            dino.runtime_s,
            none.runtime_s,
            c.to_table()
        );
    }
}

#[test]
fn dino_compute_bound_programs_alone_change_nothing() {
    // Turtles only (the compute-bound half of the mix, 2 % memory-bound): DINO deals them
    // evenly, as Linux already placed them, and nothing is contended either way.
    let m = machine("package:2 core:4 pu:1", None).unwrap();
    let w = workload("memory-mix", None, None).unwrap();
    let mut w = w.clone();
    w.apps.retain(|a| a.name.starts_with("compute"));
    let policies = vec!["none".to_string(), "dino".to_string()];
    let c = compare_with(&m, &w, &policies, &Settings::default(), &RunOptions::new(1)).unwrap();
    let (none, dino) = (&c.results[0], &c.results[1]);
    let ratio = dino.runtime_s / none.runtime_s;
    assert!((0.99..=1.01).contains(&ratio), "{ratio}\n{}", c.to_table());
}
