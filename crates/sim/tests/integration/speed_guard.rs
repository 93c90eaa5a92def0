//! `speed`'s guard judged by progress (issue 38): where the program's progress can be seen
//! (barrier rounds in the simulator), the guard compares progress, not CPU share.

use threadbalance_policy::Settings;
use threadbalance_sim::{RunOptions, compare_with, machine, workload};

const SIXTEEN: &str = "package:1 core:16 pu:1";

#[test]
fn speed_guard_hands_back_where_linux_makes_more_progress_with_less_cpu_share() {
    // 20 threads on 16 cores, 15 ms memory-bound phases with 32 MiB each (the scenario
    // beside this file): the rotation's moves refill caches on CPU time. Paced as a live
    // loop would be (`--tick-cost 20,1.9`), Linux finishes about 3 % sooner (seed 1). The
    // probe sees Linux's slowest thread get less CPU than managed (a CPU-share judge
    // kept managing here) and make more progress: the guard hands back.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/integration/memory-bound-short-phases.toml"
    );
    let m = machine(SIXTEEN, None).unwrap();
    let w = workload(path, None, None).unwrap();
    let mut o = RunOptions::new(1);
    o.tick_cost = Some("20,1.9".parse().unwrap());
    // The tool's thread charged 46 µs a move, as when this case was recorded. At the plan
    // price `bench --cost` measures now (`MEASURED`) Linux still finishes 3.2 % sooner, but
    // the probe reads 13.3 phases a second under Linux against 13.2 managed, inside the
    // guard's 2 % margin, and nothing is handed back (docs/speed-rules.md, "The guard").
    o.tool_cpu = Some("19.8,0.298,46".parse().unwrap());
    let p = vec!["none".to_string(), "speed".to_string()];
    let c = compare_with(
        &m,
        &w,
        &p,
        &Settings::new(threadbalance_model::Level::Core),
        &o,
    )
    .unwrap();
    let (none, speed) = (&c.results[0], &c.results[1]);
    assert!(none.finished && speed.finished, "{}", c.to_table());
    assert!(none.runtime_s < speed.runtime_s, "{}", c.to_table());
    let threadbalance_model::PolicySummary::Speed(s) = &speed.policy_summary else {
        panic!("not speed's summary");
    };
    let g = s.guard.as_ref().unwrap();
    assert!(g.handbacks >= 1, "{g:?}");
    let judge = g.judge.as_deref().unwrap_or_default();
    assert!(judge.starts_with("judged by progress"), "{judge}");
    // The hand-back, in its words: more phases a second under Linux, less CPU.
    let last = g.last_event.as_deref().unwrap_or_default();
    let nums: Vec<f64> = last
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .filter_map(|w| w.parse().ok())
        .collect();
    // [at, Linux phases/s, managed phases/s, Linux % of a core, managed %]
    assert_eq!(nums.len(), 5, "{last}");
    assert!(nums[1] > nums[2] * 1.02, "{last}");
    assert!(nums[3] < nums[4], "{last}");
}

#[test]
fn speed_guard_without_barriers_says_it_judges_by_cpu_share() {
    // Spinners never pass a barrier: no progress signal, and the summary says so.
    let m = machine(SIXTEEN, None).unwrap();
    let w = workload("spinners", Some(20), None).unwrap();
    let o = RunOptions::new(1);
    let p = vec!["speed".to_string()];
    let c = compare_with(
        &m,
        &w,
        &p,
        &Settings::new(threadbalance_model::Level::Core),
        &o,
    )
    .unwrap();
    let threadbalance_model::PolicySummary::Speed(s) = &c.results[0].policy_summary else {
        panic!("not speed's summary");
    };
    let judge = s.guard.as_ref().and_then(|g| g.judge.clone());
    assert_eq!(
        judge.as_deref(),
        Some("no progress signal, judged by CPU share")
    );
}
