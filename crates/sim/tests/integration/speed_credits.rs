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

/// % of the fair share `speed` reaches on `threads` threads of 10 ms `wait` phases, 1 s of
/// work each, on 16 cores at HZ 1000 paced by the BPF tick, with the tool's own CPU
/// charged at what `bench --cost` measured (`MEASURED`: a plan's price as the tool pays
/// it), the mean of seeds 1–3, and whether each seed beat Linux.
fn charged_pct(threads: usize, wait: &str) -> (f64, bool) {
    let w = workload(
        &format!("ep-barrier:phase_ms=10,wait={wait},work_ms=1000"),
        Some(threads),
        None,
    )
    .unwrap();
    let m = machine(SIXTEEN, None).unwrap();
    let mut sum = 0.0;
    let mut ahead = true;
    for seed in 1..=3 {
        let mut opts = RunOptions::new(seed);
        opts.linux.hz = 1000;
        opts.tick_cost = Some(BPF_FIT.parse().unwrap());
        assert_eq!(opts.tool_cpu, Some(threadbalance_sim::MEASURED));
        let settings = Settings::new(threadbalance_model::Level::Core);
        let p = ["none".to_string(), "speed".to_string()];
        let c = compare_with(&m, &w, &p, &settings, &opts).unwrap();
        let (none, speed) = (&c.results[0], &c.results[1]);
        assert!(none.finished && speed.finished);
        ahead &= speed.runtime_s < none.runtime_s;
        sum += 100.0 * threads as f64 / 16.0 / speed.runtime_s;
    }
    (sum / 3.0, ahead)
}

#[test]
fn speed_credits_paced_and_charged_a_plans_price_keep_the_sixteen_core_rows() {
    // The 16-core calibration rows at 10 ms (issue 38: at least 91.7 % of the fair share,
    // paced), with the tool's moves charged as carrying out a plan costs it: once a plan,
    // and each move and slice change (`bench --cost`'s plan rows). Charged 46 µs a move,
    // the price of a move in a 2-CPU machine's plans of one or two, these four read
    // 90.1–91.7 % (seeds 1–3); now 92.0–92.9 %. (17 threads with blocking barriers, whose
    // rounds move one thread a plan, read 91.4–91.5 %: docs/cost.md.)
    for threads in [20, 24] {
        for wait in ["yield", "block"] {
            let (pct, ahead) = charged_pct(threads, wait);
            assert!(pct >= 91.7, "{threads} {wait}: {pct:.1} %");
            assert!(ahead, "{threads} {wait}: slower than Linux on a seed");
        }
    }
}
