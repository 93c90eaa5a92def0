//! The JSON contract: every command's JSON output follows
//! `schema/threadbalance.schema.json` (one definition per command), with `schema_version`.
//! `bench` (the matrix and `--cost`) and `attach` are checked where their tests already
//! run them (`bench.rs`, `cliux.rs`).

use crate::support::*;
use serde_json::{Value, json};
use threadbalance_policy::PolicyKind;

fn stdout_json(args: &[&str]) -> Value {
    let out = run(args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn schema_policy_names_are_the_policy_kinds() {
    let s = schema();
    let listed: Vec<&str> = s["$defs"]["policy"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let kinds: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(listed, kinds);
}

#[test]
fn schema_refuses_numbers_written_as_strings_and_unknown_summary_fields() {
    // The contract has teeth: the old shape (a value with its unit, as a string) and a
    // field the policy's summary does not have are both errors.
    let summary = |v: Value| json!({"kind": "pbind", "threads_pinned": v, "cores": 2});
    let wrap = |s: Value| json!({"wall_s": 1.0, "moves": 0, "policy_summary": s});
    let cmp = |run: Value| {
        json!({"schema_version": 1, "command": ["true"], "baseline": "none",
               "results": [{"policy": "pbind", "runs": [run],
                            "wall_s": {"min": 1.0, "median": 1.0, "max": 1.0},
                            "moves_per_s": 0.0}],
               "warmup": 0, "stats": [],
               "busy": {"load_before": null, "cpus": 2, "steal_share": null, "warnings": []}})
    };
    assert!(schema_errors(&cmp(wrap(summary(json!(8)))), "compare").is_empty());
    assert!(!schema_errors(&cmp(wrap(summary(json!("8")))), "compare").is_empty());
    let mut extra = summary(json!(8));
    extra["threads placed"] = json!("8");
    assert!(!schema_errors(&cmp(wrap(extra)), "compare").is_empty());
    // No schema_version: an error.
    let mut unversioned = cmp(wrap(summary(json!(8))));
    unversioned
        .as_object_mut()
        .unwrap()
        .remove("schema_version");
    assert!(!schema_errors(&unversioned, "compare").is_empty());
}

/// `run --policy speed` over 3 threads of barrier phases, with `extra` options: its JSON
/// summary, checked against the schema.
fn speed_run_summary(extra: &[&str]) -> Value {
    let bin = bin();
    let mut args = vec!["run", "--policy", "speed", "--level", "core"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", "-", "--", bin.to_str().unwrap()]);
    args.extend_from_slice(&["workload", "spmd", "--threads", "3", "--work-ms", "100"]);
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The workload's score line, then the summary.
    let json = &stdout[stdout.find("\n{").unwrap() + 1..];
    let v: Value = serde_json::from_str(json).unwrap();
    assert_schema(&v, "run");
    v
}

#[test]
fn schema_run_json_follows_the_schema() {
    // Speed on 3 threads of barrier phases: its summary has every kind of field (numbers,
    // nulls or not, a nested guard).
    let v = speed_run_summary(&[]);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["policy_summary"]["kind"], "speed");
    // The default budget: 0.8 % of one core for the ticks, moves not charged.
    assert_eq!(
        (v["cpu_budget_pct"].as_f64(), v["moves_charged"].as_bool()),
        (Some(0.8), Some(false))
    );
}

#[test]
fn schema_sim_json_of_a_paced_run_says_what_was_charged() {
    let paced_at = |tick: &str, extra: &[&str]| {
        let mut args = vec![
            "sim",
            "--machine",
            "package:1 core:2 pu:1",
            "--workload",
            "ep-barrier:work_ms=200",
            "--threads",
            "3",
            "--policy",
            "speed",
            "--tick-cost",
            tick,
            "--json",
        ];
        args.extend_from_slice(extra);
        let v = stdout_json(&args);
        assert_schema(&v, "sim");
        v
    };
    let paced = |extra: &[&str]| paced_at("20,0.3,46", extra);
    let free = paced(&[]);
    assert_eq!(free["tick_cost_us"]["per_move"].as_f64(), Some(46.0));
    // A move's price given, the plan's other parts left out are 0.
    assert_eq!(free["tick_cost_us"]["per_plan"].as_f64(), Some(0.0));
    assert_eq!(free["tick_cost_us"]["per_slice"].as_f64(), Some(0.0));
    // The tool's thread is charged the tick given, by default (`--tool-cpu measured`),
    // and the plan's parts given with it.
    assert_eq!(free["tool_cpu_us"]["fixed"].as_f64(), Some(20.0));
    assert_eq!(free["tool_cpu_us"]["per_move"].as_f64(), Some(46.0));
    assert_eq!(free["tool_cpu_us"]["per_plan"].as_f64(), Some(0.0));
    // A tick alone: the tool's thread pays the measured plan's parts.
    let tick_alone = paced_at("20,0.3", &[]);
    let t = &tick_alone["tool_cpu_us"];
    assert_eq!(t["fixed"].as_f64(), Some(20.0));
    assert_eq!(
        (
            t["per_move"].as_f64(),
            t["per_plan"].as_f64(),
            t["per_slice"].as_f64()
        ),
        (Some(14.6), Some(14.0), Some(6.4))
    );
    assert_eq!(
        paced(&["--tool-cpu", "free"])["tool_cpu_us"],
        serde_json::Value::Null
    );
    assert_eq!(
        (
            free["cpu_budget_pct"].as_f64(),
            free["moves_charged"].as_bool()
        ),
        (Some(0.8), Some(false))
    );
    let whole = paced(&["--cpu-budget", "2.5"]);
    assert_eq!(
        (
            whole["cpu_budget_pct"].as_f64(),
            whole["moves_charged"].as_bool()
        ),
        (Some(2.5), Some(true))
    );
}

#[test]
fn schema_sim_json_of_an_operator_budget_without_a_tick_cost_holds_the_tool_thread() {
    // No tick cost: ticks are free to watch, and the operator's whole budget holds what
    // the tool's thread is charged on the machine (ticks and moves, the measured costs),
    // as `run --cpu-budget` holds the live tool. 5 threads on 4 cores with 10 ms yield
    // phases rotate every millisecond: at 25 % (the default cap) the tool takes more of a
    // core than at 2 %, and at 2 % about that (the pacers' burst lets a 0.4 s run go a
    // little over: 2.2 %).
    let sim = |budget: Option<&str>| {
        let mut args = vec![
            "sim",
            "--machine",
            "package:1 core:4 pu:1",
            "--workload",
            "ep-barrier:phase_ms=10,wait=yield,work_ms=300",
            "--threads",
            "5",
            "--policy",
            "speed",
            "--json",
        ];
        if let Some(b) = budget {
            args.extend_from_slice(&["--cpu-budget", b]);
        }
        let v = stdout_json(&args);
        assert_schema(&v, "sim");
        v
    };
    let share = |v: &Value| {
        let r = &v["results"][0];
        r["tool_cpu_s"].as_f64().unwrap() / r["runtime_s"].as_f64().unwrap()
    };
    let (default, tight) = (sim(None), sim(Some("2")));
    assert_eq!(default["cpu_budget_pct"], Value::Null);
    assert_eq!(
        (
            tight["cpu_budget_pct"].as_f64(),
            tight["moves_charged"].as_bool()
        ),
        (Some(2.0), Some(true))
    );
    assert!(share(&tight) < 0.025, "{:.4}", share(&tight));
    assert!(
        share(&default) > 2.0 * share(&tight),
        "{:.4}",
        share(&default)
    );
}

#[test]
fn schema_run_json_says_a_whole_budget_charges_moves() {
    let v = speed_run_summary(&["--cpu-budget", "5"]);
    assert_eq!(
        (v["cpu_budget_pct"].as_f64(), v["moves_charged"].as_bool()),
        (Some(5.0), Some(true))
    );
}

#[test]
fn schema_compare_json_follows_the_schema() {
    let bin = bin();
    let v = stdout_json(&[
        "compare",
        "--policy",
        "none,tumbler",
        "--repeat",
        "1",
        "--level",
        "core",
        "--json",
        "--",
        bin.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "3",
        "--work-ms",
        "30",
    ]);
    assert_eq!(
        v["results"][1]["runs"][0]["policy_summary"]["kind"],
        "tumbler"
    );
    assert_schema(&v, "compare");
}

#[test]
fn schema_sim_json_of_every_policy_follows_the_schema() {
    // Every policy on a small simulated machine with two nodes per package: every kind of
    // policy summary appears.
    let all: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
    let v = stdout_json(&[
        "sim",
        "--machine",
        "package:2 numa:2 core:2 pu:1",
        "--workload",
        "ep-barrier:work_ms=200",
        "--threads",
        "10",
        "--policy",
        &all.join(","),
        "--json",
    ]);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), all.len());
    for (r, name) in results.iter().zip(&all) {
        let family = if name.starts_with("numa-") {
            "numa"
        } else {
            name
        };
        assert_eq!(r["policy_summary"]["kind"], family, "{r}");
    }
    assert_schema(&v, "sim");
}

#[test]
fn schema_topo_json_follows_the_schema() {
    assert_schema(&stdout_json(&["topo", "--json"]), "topo");
    let v = stdout_json(&[
        "topo",
        "--synthetic",
        "package:2 numa:2 core:4 pu:2",
        "--json",
    ]);
    assert_schema(&v, "topo");
}

#[test]
fn schema_sim_suite_json_of_each_kind_of_claim_follows_the_schema() {
    let _alone = crate::support::alone();
    // The suite's JSON as `sim --suite papers --json` writes it (the report's JSON with
    // the version added), for a report of one claim of each kind and verdict, without
    // running the suite's simulations.
    use threadbalance_sim::{Claim, Effect, SuiteReport};
    let claims = vec![
        Claim::calibration("row within", "paper 0.52", "sim 0.50".into(), true, ""),
        Claim::calibration(
            "row outside",
            "paper 0.52",
            "sim 0.90".into(),
            false,
            "too fast",
        ),
        Claim::paper(
            "reproduced",
            "+10.7 %",
            "+9.0 %".into(),
            true,
            vec![Effect::new("speedup, %", Some(10.7), 9.0)],
            "",
            "",
        ),
        Claim::paper(
            "no number",
            "faster",
            "+26 %".into(),
            true,
            vec![Effect::new("speedup, %", None, 26.0)],
            "",
            "",
        ),
        Claim::paper(
            "wrong way",
            "faster",
            "-3 %".into(),
            false,
            Vec::new(),
            "slower",
            "",
        ),
    ];
    let report = SuiteReport {
        seeds: vec![1, 2],
        claims,
        events: 1000,
    };
    let mut v = report.to_json();
    v["schema_version"] = json!(1);
    assert_schema(&v, "sim_suite");
}

/// The real suite (about 90 s of CPU in a debug build, one seed): its JSON follows the
/// schema, and it is not silent while it runs (a line per group of claims on stderr).
#[test]
fn schema_sim_suite_json_follows_the_schema_and_reports_progress() {
    let _alone = crate::support::alone();
    let args = [
        "sim",
        "--suite",
        "papers",
        "--seeds",
        "1",
        "--json",
        "--progress",
        "always",
    ];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_schema(&v, "sim_suite");
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("suite ")).collect();
    assert_eq!(lines.len(), 10, "{err}");
    assert_eq!(lines[0], "suite 1/10: 2-core calibration");
    assert_eq!(lines[8], "suite 9/10: NUMA task selection");
    assert_eq!(lines[9], "suite 10/10: DINO, the papers' baseline");
}
