//! Real third-party multithreaded runtimes, not only our generator: an OpenMP program
//! (libgomp's thread pool, whose team grows and shrinks between parallel regions) under
//! the policies that move threads. It must run to completion with its own result, every
//! thread the runtime starts must be seen and placed, and nothing may be refused.

use crate::support::{build_openmp_c, run};
use std::process::Command;

#[test]
fn thirdparty_openmp_program_under_speed_and_tumbler_runs_and_is_managed() {
    // Its teams of up to 5 spinning threads load both CPUs while they run (three runs): the
    // estimate tests must not run beside it (see `alone`).
    let _alone = crate::support::alone();
    let dir = tempfile::tempdir().unwrap();
    let exe = build_openmp_c("fixtures/programs/omp_teams.c", 1, dir.path(), "omp_teams");
    let alone = Command::new(&exe).output().unwrap();
    assert!(alone.status.success());
    for policy in ["speed", "tumbler", "pbind"] {
        let json = dir.path().join(format!("{policy}.json"));
        let out = run(&[
            "run",
            "--policy",
            policy,
            "--level",
            "core",
            "--json",
            json.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{policy}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The program's own answer is unchanged by where its threads ran.
        assert_eq!(out.stdout, alone.stdout, "{policy}");
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        // Up to 5 threads in a team (the main thread and 4 from the pool).
        assert!(s["threads_seen"].as_u64().unwrap() >= 2, "{policy}: {s}");
        assert_eq!(s["applied"]["denied"], 0, "{policy}: {s}");
        let done = s["applied"]["done"].as_u64().unwrap();
        if policy == "pbind" {
            // pbind pins every thread it sees at once.
            assert!(done >= 1, "{policy}: {s}");
        }
        if policy == "speed" {
            // speed places every thread it sees at once, in its own account. It may then
            // lend them all to Linux before a move goes out: with no more busy threads than
            // cores (`few`), or with rounds too slow for the phases (`sparse`: on a loaded
            // host the 1 ms rounds stretch to 20 ms against 4 ms phases). Then nothing was
            // moved, and the summary must say which rule lent them.
            let p = &s["policy_summary"];
            assert!(
                p["initial_placements"].as_u64().unwrap() >= 2,
                "{policy}: {s}"
            );
            let lent =
                p["few_hand_backs"].as_u64().unwrap() + p["sparse_hand_backs"].as_u64().unwrap();
            assert!(done >= 1 || lent >= 1, "{policy}: {s}");
        }
    }
}
