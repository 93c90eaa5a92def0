//! `compare` and `demo` end to end, with short settings.

use crate::support::{bin, run};

#[test]
fn compare_two_policies_prints_a_row_each_with_the_fair_share() {
    let me = bin();
    let out = run(&[
        "compare",
        "--policies",
        "none,speed",
        "--repeat",
        "2",
        "--level",
        "core",
        "--",
        me.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "3",
        "--work-ms",
        "60",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("2 runs of each policy, interleaved"),
        "{text}"
    );
    assert!(text.contains("fair-share bound"), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("none ") || l.starts_with("speed "))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
}

#[test]
fn compare_json_has_every_run_and_the_ratio_to_none() {
    let me = bin();
    let out = run(&[
        "compare",
        "--policies",
        "none,tumbler",
        "--repeat",
        "2",
        "--json",
        "--",
        me.to_str().unwrap(),
        "workload",
        "uneven",
        "--periods",
        "10",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["baseline"], "none");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    for r in results {
        assert_eq!(r["runs"].as_array().unwrap().len(), 2);
        assert!(r["ratio_vs_baseline"]["median"].as_f64().unwrap() > 0.0);
    }
    // none against itself, run by run, is exactly 1.
    assert_eq!(results[0]["ratio_vs_baseline"]["median"], 1.0);
}

#[test]
fn compare_rejects_an_unknown_policy_before_running_anything() {
    let out = run(&["compare", "--policies", "none,bogus", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn demo_with_short_settings_gives_a_verdict() {
    let out = run(&["demo", "--repeat", "1", "--work-ms", "60"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("machine: "), "{text}");
    assert!(text.contains("fair-share bound"), "{text}");
    assert!(text.contains("verdict: "), "{text}");
}

/// Each run's summary went to a predictable name in the shared temp dir
/// (`threadbalance-compare-<pid>-<round>-<i>.json`): as root, a symlink planted there made a
/// run write over its target. Now the files live in a private directory of a random name,
/// and nothing is left behind. See: issue 13 (`compare` temp files).
#[test]
fn compare_writes_only_inside_a_private_temp_dir_and_leaves_nothing() {
    let me = bin();
    let tmp = tempfile::tempdir().unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    // The names the old code used for this run's pid are unknown in advance; plant links
    // for the child pids most likely to come next, and check none was followed.
    let base = std::process::id();
    for pid in base..base + 64 {
        for (round, i) in [(0, 0), (0, 1)] {
            let name = format!("threadbalance-compare-{pid}-{round}-{i}.json");
            let _ = std::os::unix::fs::symlink(&victim, tmp.path().join(name));
        }
    }
    let planted = std::fs::read_dir(tmp.path()).unwrap().count();
    let out = std::process::Command::new(&me)
        .env("TMPDIR", tmp.path())
        .args([
            "compare",
            "--policies",
            "none,tumbler",
            "--repeat",
            "1",
            "--",
        ])
        .arg(&me)
        .args(["workload", "uneven", "--periods", "5"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    // Only what the test put there remains: the private directory is gone.
    assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), planted);
}
