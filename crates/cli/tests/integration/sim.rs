//! `threadbalance sim` end to end: the interval override, the counters and the tick rate,
//! the phase log, and the policies' summaries in `--json`.

use crate::support::run;

/// `sim` with `args` (which include `--json`), succeeded, its output parsed.
fn sim_json(args: &[&str]) -> serde_json::Value {
    let out = run(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `(policy_ticks, numa moves)` of `numa-excl` on one short SPLASH-2x program.
fn excl_ticks(interval: Option<&str>) -> (u64, String) {
    let mut args = vec![
        "sim",
        "--machine",
        "opteron6320-4x8",
        "--workload",
        "parsec-mix:only=splash2x.fft,scale=0.1",
        "--policy",
        "numa-excl",
        "--json",
    ];
    if let Some(ms) = interval {
        args.extend(["--interval", ms]);
    }
    let v = sim_json(&args);
    let r = &v["results"][0];
    assert_eq!(r["policy"], "numa-excl");
    assert_eq!(r["policy_summary"]["kind"], "numa");
    let moves = r["policy_summary"]["moves"].to_string();
    (r["policy_ticks"].as_u64().unwrap(), moves)
}

#[test]
fn sim_interval_overrides_the_policys_own() {
    // The balancer looks every 20 ms by default; --interval 200 makes it look a tenth as
    // often over the same run.
    let (default, _) = excl_ticks(None);
    let (slow, moves) = excl_ticks(Some("200"));
    assert!(slow > 0 && default >= 8 * slow, "{default} vs {slow}");
    assert!(moves.parse::<u64>().is_ok(), "{moves}");
}

/// `speed`'s run time and the JSON's `counters` and `hz` for 3 threads on 2 cores with
/// 10 ms yield phases, with the given extra flags.
fn speed_with(extra: &[&str]) -> (f64, serde_json::Value, serde_json::Value) {
    let mut args = vec![
        "sim",
        "--machine",
        "package:1 core:2 pu:1",
        "--workload",
        "ep-barrier:phase_ms=10,wait=yield,work_ms=300",
        "--threads",
        "3",
        "--policy",
        "speed",
        "--level",
        "core",
        "--json",
    ];
    args.extend(extra);
    let v = sim_json(&args);
    let runtime = v["results"][0]["runtime_s"].as_f64().unwrap();
    (runtime, v["counters"].clone(), v["hz"].clone())
}

#[test]
fn sim_counters_proc_reads_run_time_and_wait_as_schedstat_keeps_them() {
    let (exact, counters, hz) = speed_with(&[]);
    assert_eq!((counters.as_str(), hz.as_u64()), (Some("exact"), Some(250)));
    let (stale, counters, hz) = speed_with(&["--counters", "proc", "--hz", "1000"]);
    assert_eq!((counters.as_str(), hz.as_u64()), (Some("proc"), Some(1000)));
    // The flags reach the model: the policy reads other counters and places otherwise.
    assert_ne!(exact, stale);
    let (same, _, _) = speed_with(&["--counters", "exact"]);
    assert_eq!(exact, same);
}

#[test]
fn sim_refuses_a_tick_rate_no_kernel_has_and_model_flags_with_the_suite() {
    for (args, what) in [
        (&["sim", "--hz", "0"][..], "--hz 0"),
        (&["sim", "--hz", "999"][..], "--hz 999"),
        (
            &["sim", "--suite", "papers", "--counters", "proc"][..],
            "--counters",
        ),
        (
            &["sim", "--suite", "papers", "--phases", "x.csv"][..],
            "--phases",
        ),
        (
            &["sim", "--suite", "papers", "--tool-cpu", "free"][..],
            "--tool-cpu",
        ),
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(what), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
}

#[test]
fn sim_phases_writes_one_row_per_policy_phase_and_thread() {
    // 3 threads on 2 cores, 10 ms phases of work, 100 ms each: 10 phases, the first not
    // logged (no opening before it), so 9 rows per thread and policy.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("phases.csv");
    let out = run(&[
        "sim",
        "--machine",
        "package:1 core:2 pu:1",
        "--workload",
        "ep-barrier:phase_ms=10,wait=block,work_ms=100",
        "--threads",
        "3",
        "--policy",
        "none,speed",
        "--level",
        "core",
        "--phases",
        path.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = std::fs::read_to_string(&path).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("policy,app,phase,thread,start_ms,arrive_ms,queued_ms")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    for policy in ["none", "speed"] {
        let mine: Vec<_> = rows.iter().filter(|r| r[0] == policy).collect();
        assert_eq!(mine.len(), 9 * 3, "{policy}: {csv}");
        for r in mine {
            let ms = |i: usize| r[i].parse::<f64>().unwrap();
            // 10 ms of work: no thread arrives sooner, and what it waited for a CPU comes
            // on top of the work.
            assert!(ms(5) >= 10.0 + ms(6) - 1e-6, "{r:?}");
        }
    }
}
