//! `speed`'s credits in paced rounds: while the host holds the rounds back (a live loop's
//! CPU budget), a thread's credit forgets within two gaps between rounds instead of 20 ms,
//! so the rotation pairs by what the last round or two did. 16 cores, HZ 1000, paced with
//! the BPF counters' tick on the 2-core VM (19.8 µs + 0.298 µs a thread: a round every
//! ~3 ms at 20–24 threads), seed 1. With the 20 ms credits these rows read 89.4–90.7 % of
//! the fair share; with the paced ones 91.1–91.7 %.

use threadbalance_policy::Settings;
use threadbalance_sim::{Comparison, RunOptions, compare_with, machine, workload};

const SIXTEEN: &str = "package:1 core:16 pu:1";
const BPF_FIT: &str = "19.8,0.298";

fn paced(threads: usize, phase_ms: u32, wait: &str, work_ms: u32) -> Comparison {
    let w = workload(
        &format!("ep-barrier:phase_ms={phase_ms},wait={wait},work_ms={work_ms}"),
        Some(threads),
        None,
    )
    .unwrap();
    let m = machine(SIXTEEN, None).unwrap();
    let mut opts = RunOptions::new(1);
    opts.linux.hz = 1000;
    opts.tick_cost = Some(BPF_FIT.parse().unwrap());
    // The credits' logic, with a tool that costs the machine nothing: with its own CPU
    // charged (issue 38, `RunOptions::tool_cpu`) these rows miss their marks (20 and 24
    // threads at 10 ms under 90.8 %, 24 at 100 ms more than 1 % behind Linux; the figures
    // are in docs/cost.md, "The tool's own CPU on the simulated machine").
    opts.tool_cpu = None;
    let mut settings = Settings::new(threadbalance_model::Level::Core);
    settings.speed.rounds_budget = false;
    let p = ["none".to_string(), "speed".to_string()];
    compare_with(&m, &w, &p, &settings, &opts).unwrap()
}

#[test]
fn speed_credits_paced_ten_ms_phases_pass_ninety_percent_of_the_fair_share() {
    for threads in [20, 24] {
        for wait in ["yield", "block"] {
            let c = paced(threads, 10, wait, 1000);
            let (none, speed) = (&c.results[0], &c.results[1]);
            assert!(none.finished && speed.finished);
            // The fair share: 1 s of work a thread, 16 cores.
            let fair = threads as f64 / 16.0;
            assert!(
                fair / speed.runtime_s >= 0.908,
                "{threads} {wait}:\n{}",
                c.to_table()
            );
            assert!(speed.runtime_s < none.runtime_s, "{}", c.to_table());
        }
    }
}

#[test]
fn speed_credits_paced_stay_within_one_percent_of_linux_where_linux_reaches_97_percent() {
    // 24 threads, 100 ms blocking phases: the CPUs that go idle at each phase's end pull
    // one thread of each doubled-up pair, and Linux alone comes within 3 % of the fair
    // share. The paced credits cost the rotation 0.3 points here (seeds 1–3).
    let c = paced(24, 100, "block", 2000);
    let (none, speed) = (&c.results[0], &c.results[1]);
    assert!(none.finished && speed.finished);
    assert!(speed.runtime_s <= 1.01 * none.runtime_s, "{}", c.to_table());
}
