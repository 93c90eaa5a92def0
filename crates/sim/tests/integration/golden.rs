//! Same seed, same bytes across refactorings: a few runs' JSON and table, hashed, against
//! hashes recorded before a change that must not change what the model does (the
//! simulator's types and module shape, issue 10 item 2).
//!
//! **Updating these hashes.** A refactoring (types, module moves, renames) must leave every
//! hash as it is: if one moves, the refactoring changed the model and is wrong. A deliberate
//! model change (a new mechanism, a recalibration) moves them for a reason; then re-record
//! them with `GOLDEN_PRINT=1 cargo test -p threadbalance-sim golden -- --nocapture` and say
//! in the commit message which model change moved which case.

use threadbalance_policy::Settings;
use threadbalance_sim::suite::sixteen_core;
use threadbalance_sim::{Machine, RunOptions, compare_with, machine, workload};

/// FNV-1a, 64 bits: enough to notice one changed byte, and no dependency.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn output(m: &Machine, spec: &str, threads: Option<usize>, policies: &str, seed: u64) -> String {
    let w = workload(spec, threads, None).unwrap();
    let policies: Vec<String> = policies.split(',').map(String::from).collect();
    // Recorded before the tool's own thread was charged (issue 38): with it off the model
    // must be byte-identical to what it was, which these hashes check.
    let mut opts = RunOptions::new(seed);
    opts.tool_cpu = None;
    let c = compare_with(
        m,
        &w,
        &policies,
        &Settings::new(m.topo.default_level()),
        &opts,
    )
    .unwrap();
    serde_json::to_string_pretty(&c.to_json()).unwrap() + &c.to_table()
}

#[test]
fn golden_refactorings_leave_the_outputs_byte_identical() {
    let opteron = machine("opteron6272-4x16", None).unwrap();
    let numa = machine("opteron6320-4x8", None).unwrap();
    let two = machine("package:1 core:2 pu:1", None).unwrap();
    let sixteen = sixteen_core().unwrap();
    let cases: [(&str, String, u64); 6] = [
        (
            "bodytrack none,shuffling on opteron6272-4x16",
            output(&opteron, "bodytrack:frames=8", None, "none,shuffling", 1),
            0xbb32_ab09_ad10_ce89,
        ),
        (
            "lock-groups none,handoff on opteron6272-4x16",
            output(&opteron, "lock-groups", None, "none,handoff", 2),
            0xb442_f4a0_ba86_348a,
        ),
        (
            "ep-barrier yield 17 threads none,speed on 16 cores",
            output(
                &sixteen,
                "ep-barrier:phase_ms=10,wait=yield",
                Some(17),
                "none,speed",
                1,
            ),
            // Moved by issue 38: speed's guard summary gained `judge` ("judged by progress
            // (…)"); with the progress judge off the recorded hash comes back unchanged,
            // and the runtimes are the same with it on. Moved again: speed's summary gained
            // `held_level_rounds` (0 here: the rule holding the level placement never
            // fires at 17 threads, and nothing else changed).
            0xcb59_eb5d_2854_609b,
        ),
        (
            "ep-barrier block 3 threads none,speed on 2 cores",
            output(
                &two,
                "ep-barrier:phase_ms=10,wait=block",
                Some(3),
                "none,speed",
                3,
            ),
            // Moved by issue 38: the guard's `judge`, as above. Moved again by the rounds
            // of threads that block following their work between two blocks (not every
            // switch, preemptions included): on seed 3 one stretch of rounds came longer,
            // speed ran 4.6223 s instead of 4.6102 (Linux 5.1740), 3,571 moves instead of
            // 3,736; seeds 1 and 2 are unchanged. Moved again by `held_level_rounds` in
            // speed's summary (0 here, as above).
            0x3e3d_ed1d_8a93_319c,
        ),
        (
            "streamcluster numa-first-fit,numa-mb-plus on opteron6320-4x8",
            output(
                &numa,
                "streamcluster:phases=10",
                Some(16),
                "numa-first-fit,numa-mb-plus",
                1,
            ),
            0xa406_515a_890c_07b5,
        ),
        (
            "ferret-pipeline tumbler,pbind on opteron6320-4x8",
            output(&numa, "ferret-pipeline", None, "tumbler,pbind", 1),
            // Moved by issue 38: pbind's summary gained `cpus` (the logical CPUs pinned to);
            // on this machine without SMT the CPUs and the pins are the same as before.
            // Moved again by tumbler's hysteresis: it sorts threads by demand (run time plus
            // run-queue wait), so its one regrouping, while ferret's threads start and
            // queue, deals them differently (66 moves either way; pbind unchanged). Tumbler
            // ran 1.6334 s before, 1.6354 s after on this seed; over seeds 1–10, 1.6368 s
            // before and 1.6381 s after on average (seed to seed the runs differ by up to
            // 12 ms): the same within the seeds' spread.
            0xedff_f8b7_7cb0_1653,
        ),
    ];
    let print = std::env::var_os("GOLDEN_PRINT").is_some();
    let mut wrong = Vec::new();
    for (name, out, want) in &cases {
        let got = fnv1a(out);
        if print {
            println!("{name}: {got:#018x}");
        }
        if got != *want {
            wrong.push(format!("{name}: {got:#018x}, recorded {want:#018x}"));
        }
    }
    assert!(wrong.is_empty(), "outputs changed:\n{}", wrong.join("\n"));
}
