//! `compare` and `demo` end to end, with short settings.

use crate::support::{assert_schema, bin, run};

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
    // Where the runs read run time from, once above the table: a default build knows
    // only `/proc`.
    let source = text
        .lines()
        .filter(|l| l.starts_with("run time from "))
        .count();
    assert_eq!(source, 1, "{text}");
    if !cfg!(feature = "bpf") {
        assert!(
            text.contains("run time from /proc (built without the bpf feature)"),
            "{text}"
        );
    }
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
    // The four runs' run-time source, gathered once.
    let sources = v["run_time"].as_array().unwrap();
    assert_eq!(sources.len(), 1, "{v}");
    assert!(
        sources[0].as_str().unwrap().starts_with("run time from "),
        "{v}"
    );
}

#[test]
fn compare_rejects_an_unknown_policy_before_running_anything() {
    let out = run(&["compare", "--policies", "none,bogus", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn demo_with_short_settings_gives_a_verdict() {
    // An idle `/proc` fixture: on a busy machine a warning takes the verdict's place.
    let proc = idle_proc();
    let out = run(&[
        "demo",
        "--repeat",
        "1",
        "--work-ms",
        "60",
        "--proc-root",
        proc.path().to_str().unwrap(),
    ]);
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

/// A `/proc` with an idle load average (fixed `stat`, so no steal either): the busy-machine
/// check passes, whatever else runs on the test machine.
fn idle_proc() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("loadavg"), "0.10 0.10 0.10 1/100 42\n").unwrap();
    let stat: String = (0..1024)
        .map(|i| format!("cpu{i} 100 0 50 500 0 0 0 0 0 0\n"))
        .collect();
    std::fs::write(dir.path().join("stat"), stat).unwrap();
    dir
}

/// The same with a load average of 64, above any CPU count this test runs on.
fn busy_proc() -> tempfile::TempDir {
    let dir = idle_proc();
    std::fs::write(dir.path().join("loadavg"), "64.00 64.00 64.00 70/100 42\n").unwrap();
    dir
}

#[test]
fn compare_a_failing_command_quotes_its_own_stderr_and_exits_1() {
    let out = run(&[
        "compare",
        "--policies",
        "none,tumbler",
        "--repeat",
        "2",
        "--",
        "sh",
        "-c",
        "echo 'cannot open input.dat' >&2; echo 'giving up' >&2; exit 3",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("none: the command failed (exit status: 3) in run 1/2"),
        "{err}"
    );
    assert!(
        err.contains("  cannot open input.dat\n  giving up"),
        "{err}"
    );
    // Not the last line of our own summary.
    assert!(!err.contains("restored"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn compare_ignore_failure_keeps_the_runs_and_counts_them() {
    let proc = idle_proc();
    let out = run(&[
        "compare",
        "--policies",
        "none,tumbler",
        "--repeat",
        "2",
        "--ignore-failure",
        "--proc-root",
        proc.path().to_str().unwrap(),
        "--json",
        "--",
        "sh",
        "-c",
        "exit 4",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for s in v["stats"].as_array().unwrap() {
        assert_eq!(s["failed_runs"], 2, "{s}");
        assert_eq!(s["wall_s"]["n"], 2, "{s}");
    }
}

#[test]
fn compare_show_output_passes_the_commands_streams_through() {
    let proc = idle_proc();
    let out = run(&[
        "compare",
        "--policies",
        "none,tumbler",
        "--repeat",
        "2",
        "--warmup",
        "1",
        "--show-output",
        "--proc-root",
        proc.path().to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo to-stdout; echo to-stderr >&2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // 2 policies × (1 warm-up + 2 runs) = 6 runs, each printing once on each stream.
    assert_eq!(text.matches("to-stdout").count(), 6, "{text}");
    assert_eq!(err.matches("to-stderr").count(), 6, "{err}");
    // Our summary of each run stays out of the way.
    assert!(!err.contains("restored"), "{err}");
    assert!(
        text.contains("2 runs of each policy (after 1 warm-up)"),
        "{text}"
    );
}

#[test]
fn compare_without_show_output_keeps_the_commands_output_to_itself() {
    let out = run(&[
        "compare",
        "--policies",
        "none",
        "--repeat",
        "1",
        "--",
        "sh",
        "-c",
        "echo to-stdout; echo to-stderr >&2",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let all = [out.stdout, out.stderr].concat();
    assert!(!String::from_utf8_lossy(&all).contains("to-std"));
}

#[test]
fn compare_exports_parse_back_with_the_same_numbers() {
    let me = bin();
    let proc = idle_proc();
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("out.md");
    let js = dir.path().join("out.json");
    let out = run(&[
        "compare",
        "--policies",
        "none,speed",
        "--repeat",
        "3",
        "--level",
        "core",
        "--progress",
        "always",
        "--proc-root",
        proc.path().to_str().unwrap(),
        "--export-csv",
        "-",
        "--export-markdown",
        md.to_str().unwrap(),
        "--export-json",
        js.to_str().unwrap(),
        "--",
        me.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "3",
        "--work-ms",
        "40",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // Progress: one line per run, counted per policy.
    assert!(err.contains("run 3/3: speed "), "{err}");
    // The table went to stderr, since the CSV took stdout.
    assert!(err.contains("3 runs of each policy"), "{err}");

    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&js).unwrap()).unwrap();
    assert_schema(&json, "compare");
    let stats = json["stats"].as_array().unwrap();
    assert_eq!(stats.len(), 2);

    // CSV: a header and one row per policy, the numbers those of the JSON.
    let csv = String::from_utf8(out.stdout).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "policy",
            "runs",
            "failed_runs",
            "mean_s",
            "stddev_s",
            "median_s",
            "min_s",
            "max_s",
            "relative",
            "relative_stddev",
            "moves_per_s",
            "fair_share_pct"
        ]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2, "{csv}");
    for (row, s) in rows.iter().zip(stats) {
        assert_eq!(row.len(), header.len(), "{row:?}");
        assert_eq!(row[0], s["policy"].as_str().unwrap());
        assert_eq!(row[1], "3");
        let mean: f64 = row[3].parse().unwrap();
        assert!((mean - s["wall_s"]["mean"].as_f64().unwrap()).abs() < 1e-6);
        let (min, max): (f64, f64) = (row[6].parse().unwrap(), row[7].parse().unwrap());
        assert!(min <= mean && mean <= max, "{row:?}");
        // The workload reports its share of the fair-share bound.
        assert!(row[11].parse::<f64>().unwrap() > 0.0, "{row:?}");
    }
    // The baseline against itself is exactly 1.
    assert_eq!(rows[0][8], "1.000000");

    // Markdown: header, alignment row, one row per policy with as many cells.
    let md = std::fs::read_to_string(&md).unwrap();
    let table: Vec<Vec<&str>> = md
        .lines()
        .map(|l| l.trim_matches('|').split('|').map(str::trim).collect())
        .collect();
    assert_eq!(table.len(), 4, "{md}");
    assert_eq!(table[0][0], "Policy");
    assert_eq!(table[0][5], "Relative to none");
    assert!(
        table[1].iter().all(|c| c.ends_with("--:") || *c == ":---"),
        "{md}"
    );
    assert_eq!(table[2][0], "`none`");
    assert_eq!(table[3][0], "`speed`");
    let mean_sd: Vec<f64> = table[3][1]
        .split(" ± ")
        .map(|x| x.parse().unwrap())
        .collect();
    assert!((mean_sd[0] - stats[1]["wall_s"]["mean"].as_f64().unwrap()).abs() < 5e-4);

    // JSON: the verdict is one of the defined kinds, and its line is printed (idle fixture).
    let verdict = &stats[1]["verdict"];
    assert!(
        ["faster", "slower", "no_significant_difference"]
            .contains(&verdict["kind"].as_str().unwrap()),
        "{verdict}"
    );
    // The idle fixture gives no load or steal warning. Rule 3 (a `none` run far from the
    // other `none` runs) reads the real runs, so a loaded machine can still raise it; then
    // the warning takes the verdict's place on stderr.
    let warnings = json["busy"]["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .all(|w| w.as_str().unwrap().starts_with("none reached")),
        "{warnings:?}"
    );
    let line = stats[1]["verdict_line"].as_str().unwrap();
    assert_eq!(err.contains(line), warnings.is_empty(), "{err}");
}

#[test]
fn compare_on_a_busy_machine_warns_instead_of_a_verdict() {
    let proc = busy_proc();
    let out = run(&[
        "compare",
        "--policies",
        "none,tumbler",
        "--repeat",
        "2",
        "--proc-root",
        proc.path().to_str().unwrap(),
        "--",
        "true",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text.contains(
            "warning: the machine was busy with other work, so no verdict: load average 64.00"
        ),
        "{text}"
    );
    assert!(
        !text.contains("times faster") && !text.contains("no significant"),
        "{text}"
    );
}

#[test]
fn compare_two_outputs_on_stdout_are_refused_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = run(&[
        "compare",
        "--json",
        "--export-csv",
        "-",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!marker.exists());
}

#[test]
fn compare_an_unwritable_export_exits_2_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let bad = dir.path().join("no-such-dir").join("x.md");
    let out = run(&[
        "compare",
        "--export-markdown",
        bad.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--export-markdown"), "{err}");
    assert!(!marker.exists());
}

#[test]
fn compare_interval_0_exits_2() {
    let out = run(&["compare", "--interval", "0", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval"));
}

#[test]
fn demo_json_to_stdout_is_the_comparison_with_a_verdict() {
    let proc = idle_proc();
    let out = run(&[
        "demo",
        "--repeat",
        "1",
        "--work-ms",
        "40",
        "--proc-root",
        proc.path().to_str().unwrap(),
        "--progress",
        "always",
        "--json",
        "-",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&v, "demo");
    assert!(v["machine"].as_str().unwrap().contains("CPUs"));
    assert_eq!(v["results"].as_array().unwrap().len(), 2);
    // Idle fixture: the plain-language verdict is given, here and on stderr.
    let verdict = v["verdict"].as_str().unwrap();
    assert!(verdict.starts_with("verdict: "), "{verdict}");
    assert!(err.contains(verdict), "{err}");
    // No longer silent while it runs: a line per run on stderr.
    assert!(err.contains("run 1/1: none "), "{err}");
    assert!(err.contains("run 1/1: speed "), "{err}");
}

/// `--show-output` passes the output through while the command runs, not after: the
/// command prints `ready`, then waits for a file that the test creates only once it has
/// read `ready` from compare's stdout. Had the output waited for the run's end, `ready`
/// would not arrive within the bound and the test would fail (the file is created then
/// anyway, so nothing is left running).
#[test]
fn compare_show_output_passes_output_through_while_the_command_runs() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("go");
    let script = format!(
        "echo ready; while [ ! -e '{}' ]; do sleep 0.02; done; echo finished",
        flag.display()
    );
    let mut child = std::process::Command::new(bin())
        .args([
            "compare",
            "--policies",
            "none",
            "--repeat",
            "1",
            "--show-output",
            "--progress",
            "never",
            "--",
            "sh",
            "-c",
            &script,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let first = rx.recv_timeout(std::time::Duration::from_secs(60));
    std::fs::write(&flag, "").unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert_eq!(first.as_deref(), Ok("ready"), "{rest:?}");
    assert!(status.success());
    assert_eq!(
        rest.first().map(String::as_str),
        Some("finished"),
        "{rest:?}"
    );
}
