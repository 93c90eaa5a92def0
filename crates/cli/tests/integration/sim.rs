//! `threadbalance sim` end to end: the interval override and the policies' summaries in
//! `--json`.

use crate::support::run;

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
    let out = run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
