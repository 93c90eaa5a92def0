//! `bench` end to end with a tiny matrix, the OpenMP stencil on its own, and `run` confined
//! by `taskset` as the benchmark's Figure 3 cells are. No timing is asserted: only the
//! shape of what is printed and written, and that every mask is as it was.

use crate::support::{assert_schema, bin, build_openmp_c, run};
use std::process::Command;

/// The CPU list this test process may use (`Cpus_allowed_list` of its main thread); the
/// benchmark it starts inherits it.
fn own_cpu_list() -> String {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim()
        .to_string()
}

/// The number of CPUs in a kernel CPU list such as `0-3,8`.
fn count(list: &str) -> usize {
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

/// `bench --quick --work-ms 40 --policies POLICIES` with `extra` arguments and `--json`:
/// it exits 0, and its JSON follows the schema. Returns stdout, stderr and the JSON.
fn quick_bench(policies: &str, extra: &[&str]) -> (String, String, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let mut args = vec![
        "bench",
        "--quick",
        "--work-ms",
        "40",
        "--policies",
        policies,
    ];
    args.extend_from_slice(extra);
    args.extend(["--json", json.to_str().unwrap()]);
    let out = run(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_schema(&v, "bench");
    (text, err, v)
}

#[test]
fn bench_quick_tiny_matrix_prints_a_row_per_cell_writes_json_and_restores_the_mask() {
    let before = own_cpu_list();
    let m = count(&before);
    let (text, err, v) = quick_bench("none,pbind", &[]);
    // Progress on stderr, numbered.
    assert!(err.contains("cell 1/"), "{err}");
    assert_eq!(v["cpus"], m);
    assert_eq!(v["repeat"], 1);
    assert_eq!(v["quick"], true);
    // The benchmark narrowed its own mask for the Figure 3 cells and put it back.
    assert_eq!(v["affinity_before"], before.as_str());
    assert_eq!(v["affinity_after"], before.as_str());
    assert_eq!(own_cpu_list(), before);
    let cells = v["cells"].as_array().unwrap();
    let group = |g: &'static str| cells.iter().filter(move |c| c["cell"]["group"] == g);
    // Quick: N ∈ {M, M+1} × {yield, block} at 10 ms.
    let matrix: Vec<(u64, String)> = group("matrix")
        .map(|c| {
            assert_eq!(c["cell"]["phase_ms"], 10.0);
            (
                c["cell"]["threads"].as_u64().unwrap(),
                c["cell"]["barrier"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let m64 = m as u64;
    assert_eq!(
        matrix,
        vec![
            (m64, "yield".to_string()),
            (m64, "block".to_string()),
            (m64 + 1, "yield".to_string()),
            (m64 + 1, "block".to_string()),
        ]
    );
    // The OpenMP program at M + 1 (.ci/run installs the compiler it needs): sweeps of one
    // pass, then of as many passes as make 10 ms.
    assert!(v["openmp_left_out"].is_null(), "{}", v["openmp_left_out"]);
    let omp: Vec<_> = group("openmp").collect();
    assert_eq!(omp.len(), 2);
    let pass_ms = v["openmp"]["pass_ms"].as_f64().unwrap();
    assert!(pass_ms > 0.0, "{}", v["openmp"]);
    for (c, asked) in omp.iter().zip([None, Some(10.0)]) {
        assert_eq!(c["cell"]["threads"], m64 + 1);
        let passes = c["cell"]["passes"].as_u64().unwrap();
        let sweep = c["cell"]["phase_ms"].as_f64().unwrap();
        assert!((sweep - passes as f64 * pass_ms).abs() < 1e-9, "{c}");
        match asked {
            None => assert_eq!(passes, 1),
            // Within half a pass of 10 ms.
            Some(ms) => assert!((sweep - ms).abs() <= pass_ms / 2.0 + 1e-9, "{c}"),
        }
    }
    // Figure 3: a fixed T on the smallest and the largest k (one cell if they coincide).
    let (t, ks) = if m >= 16 {
        (16, vec![9, 16])
    } else {
        (m64 + 1, if m == 1 { vec![1] } else { vec![1, m64] })
    };
    let fig3: Vec<u64> = group("figure3")
        .map(|c| {
            assert_eq!(c["cell"]["threads"], t);
            c["cell"]["cpus"].as_u64().unwrap()
        })
        .collect();
    assert_eq!(fig3, ks);
    // Every cell: both policies, one run each, each run with its % of the fair share.
    for c in cells {
        let cmp = &c["comparison"];
        assert_eq!(cmp["baseline"], "none");
        let results = cmp["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "{c}");
        for r in results {
            let runs = r["runs"].as_array().unwrap();
            assert_eq!(runs.len(), 1);
            assert!(runs[0]["fair_share_pct"].as_f64().unwrap() > 0.0, "{c}");
        }
        assert_eq!(results[0]["ratio_vs_baseline"]["median"], 1.0);
        // The same cell simulated on this machine's topology, both policies, one seed.
        assert!(c["not_simulated"].is_null(), "{c}");
        let sims = c["simulated"].as_array().unwrap();
        let names: Vec<&str> = sims.iter().map(|x| x["policy"].as_str().unwrap()).collect();
        assert_eq!(names, ["none", "pbind"], "{c}");
        for x in sims {
            let pct = &x["fair_share_pct"];
            assert_eq!(pct["min"], pct["max"], "{c}");
            let pct = pct["median"].as_f64().unwrap();
            assert!(pct > 10.0 && pct <= 101.0, "{c}");
        }
        // `none` is simulated with free ticks, pbind paced by its run's measured tick.
        assert!(sims[0]["tick_cost_us"].is_null(), "{c}");
        let tick = runs_tick(&results[1]);
        assert_eq!(sims[1]["tick_cost_us"].as_f64(), tick, "{c}");
    }
    assert!(
        v["kernel_hz"]["hz"].as_u64().unwrap() >= 100,
        "{}",
        v["kernel_hz"]
    );
    // The simulator's table: a row per cell and a line of how many agree.
    let sim = text
        .split("the simulator beside it")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"));
    let sim_rows = sim
        .lines()
        .filter(|l| l.starts_with("spmd ") || l.starts_with("omp-stencil "))
        .count();
    assert_eq!(sim_rows, cells.len(), "{text}");
    let n = cells.len();
    assert!(
        sim.lines().any(|l| l.starts_with("cells within 10 points")
            && l.contains(&format!("of {n}, pbind"))
            && l.ends_with(&format!("of {n}"))),
        "{text}"
    );
    // One table: a header naming each policy, then one row per cell.
    let header = text
        .lines()
        .find(|l| l.starts_with("program"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        header.contains("none %") && header.contains("pbind %"),
        "{text}"
    );
    assert!(header.contains("ratio min/med/max") && header.contains("moves/s"));
    let main = text.split("the simulator beside it").next().unwrap();
    let rows = main
        .lines()
        .filter(|l| l.starts_with("spmd ") || l.starts_with("omp-stencil "))
        .count();
    assert_eq!(rows, cells.len(), "{text}");
}

/// The median `tick_cpu_us` of a policy's runs that measured one (`None` if none did), as
/// `bench` paces its simulation of the cell.
fn runs_tick(result: &serde_json::Value) -> Option<f64> {
    let mut ticks: Vec<f64> = result["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tick_cpu_us"].as_f64().unwrap())
        .filter(|&us| us > 0.0)
        .collect();
    ticks.sort_by(f64::total_cmp);
    match ticks.len() {
        0 => None,
        n if n % 2 == 1 => Some(ticks[n / 2]),
        n => Some((ticks[n / 2 - 1] + ticks[n / 2]) / 2.0),
    }
}

#[test]
fn bench_no_sim_leaves_the_simulator_out() {
    let (text, _, v) = quick_bench("none", &["--no-sim"]);
    assert!(!text.contains("the simulator beside it"), "{text}");
    assert!(v["kernel_hz"].is_null());
    for c in v["cells"].as_array().unwrap() {
        assert_eq!(c["simulated"].as_array().unwrap().len(), 0, "{c}");
        assert!(c["not_simulated"].is_null(), "{c}");
    }
}

#[test]
fn bench_rejects_an_unknown_policy_and_zero_work_before_running() {
    let out = run(&["bench", "--quick", "--policies", "none,bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let out = run(&["bench", "--quick", "--work-ms", "0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["bench", "--quick", "--repeat", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

fn score(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

#[test]
fn bench_omp_stencil_builds_and_prints_the_score_compare_reads() {
    let dir = tempfile::tempdir().unwrap();
    let exe = build_openmp_c("bench/omp_stencil.c", 2, dir.path(), "omp_stencil");
    // 3 threads of 8 rows × 64 columns, 20 sweeps, judged on 2 CPUs.
    let out = Command::new(&exe)
        .env("OMP_NUM_THREADS", "3")
        .args(["8", "64", "20", "2"])
        .output()
        .unwrap();
    let s = score(&out);
    assert_eq!(s["scenario"], "omp-stencil");
    assert_eq!(s["threads"], 3);
    assert_eq!(s["cores"], 2);
    assert_eq!(s["sweeps"], 20);
    assert_eq!(s["passes"], 1);
    let (wall, work, fair, pct) = (
        s["wall_s"].as_f64().unwrap(),
        s["work_s"].as_f64().unwrap(),
        s["fair_share_wall_s"].as_f64().unwrap(),
        s["fair_share_pct"].as_f64().unwrap(),
    );
    assert!(wall > 0.0 && work > 0.0);
    // fair = max(busiest thread's work, all work / 2 CPUs) ≥ work / 2, and ≤ work (the
    // busiest thread did no more than all of it).
    assert!(fair >= work / 2.0 - 1e-6 && fair <= work + 1e-6, "{s}");
    // pct = 100 · fair / wall, printed to 3 decimals from times printed to the nanosecond.
    assert!(
        (pct - 100.0 * fair / wall).abs() < 0.01 * pct.max(1.0),
        "{s}"
    );
    // The answer does not depend on where the threads ran: the same under `run`.
    let managed = |args: &[&str]| {
        let mut argv = vec![
            "run",
            "--policy",
            "speed",
            "--level",
            "core",
            "--",
            "env",
            "OMP_NUM_THREADS=3",
            exe.to_str().unwrap(),
        ];
        argv.extend_from_slice(args);
        score(&run(&argv))
    };
    assert_eq!(managed(&["8", "64", "20", "2"])["checksum"], s["checksum"]);
    // Sweeps of several passes exchange edge rows at each barrier (block Jacobi): one
    // thread has no neighbours, so 4 sweeps of 5 passes are 20 passes of plain Jacobi.
    let one = |threads: &str, args: &[&str]| {
        score(
            &Command::new(&exe)
                .env("OMP_NUM_THREADS", threads)
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let plain = one("1", &["8", "64", "20", "2"]);
    let blocked = one("1", &["8", "64", "4", "2", "5"]);
    assert_eq!(blocked["passes"], 5);
    assert_eq!(blocked["checksum"], plain["checksum"]);
    // With three threads the halos are a sweep old: another answer, the same wherever the
    // threads ran.
    let three = one("3", &["8", "64", "4", "2", "5"]);
    assert_ne!(three["checksum"], s["checksum"]);
    assert_eq!(
        managed(&["8", "64", "4", "2", "5"])["checksum"],
        three["checksum"]
    );
    // A bad argument: one line, exit 2.
    let bad = Command::new(&exe).arg("zero").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&bad.stderr).lines().count(), 1);
}

#[test]
fn bench_run_under_taskset_balances_only_over_the_cpus_it_may_use() {
    // As a Figure 3 cell runs: confined to one CPU, `run` sees one core, so `pbind` has
    // nowhere else to put a thread and asks for nothing the kernel would refuse.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let first = own_cpu_list().split([',', '-']).next().unwrap().to_string();
    let out = Command::new("taskset")
        .args(["-c", &first])
        .arg(bin())
        .args(["run", "--policy", "pbind", "--level", "core", "--json"])
        .arg(&json)
        .arg("--")
        .arg(bin())
        .args(["workload", "spmd", "--threads", "2", "--work-ms", "40"])
        .args(["--cores", "1"])
        .output()
        .expect("taskset (util-linux)");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["domains"], 1, "{s}");
    assert_eq!(s["applied"]["denied"], 0, "{s}");
    // The workload judged itself against that one CPU: 2 threads × 40 ms on 1 CPU.
    let score = score(&out);
    assert_eq!(score["cores"], 1);
    assert!((score["fair_share_wall_s"].as_f64().unwrap() - 0.08).abs() < 1e-9);
}

#[test]
fn bench_cost_quick_reports_each_thread_count_and_each_working_set() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("cost.json");
    let m = count(&own_cpu_list());
    let out = run(&[
        "bench",
        "--cost",
        "--quick",
        "--json",
        json.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("tool CPU % of one core"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["cpus"], m);
    // What run adds to `true`: a row per policy, min ≤ median ≤ max (timings themselves
    // are the benchmark's to report, not this test's to hold).
    assert!(text.contains("what run adds to a command"), "{text}");
    let adds = v["run_adds"].as_array().unwrap();
    let policies: Vec<&str> = adds.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["none", "speed"]);
    for r in adds {
        let a = &r["added_ms"];
        let (lo, mid, hi) = (
            a["min"].as_f64().unwrap(),
            a["median"].as_f64().unwrap(),
            a["max"].as_f64().unwrap(),
        );
        assert!(lo <= mid && mid <= hi, "{r}");
        assert!(r["bare_ms"].as_f64().unwrap() > 0.0, "{r}");
    }
    let rows = v["management"].as_array().unwrap();
    let threads: Vec<u64> = rows
        .iter()
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, vec![64, 256, 1024]);
    for r in rows {
        // One run each (--quick): min = median = max, and the tool did tick.
        let p = &r["tool_cpu_pct"];
        assert_eq!(p["min"], p["max"]);
        assert!(r["ticks_per_s"].as_f64().unwrap() > 0.0, "{r}");
        // Half of the M CPUs busy: T · duty = M / 2 (duty printed to 6 decimals).
        let busy = r["threads"].as_f64().unwrap() * r["duty"].as_f64().unwrap();
        assert!((busy - (m as f64 / 2.0).min(r["threads"].as_f64().unwrap())).abs() < 0.01);
    }
    // The tick-cost fit: a line over the small run and the rows with a steady tick, with
    // the simulator's argument made of its two parts. A quick run (20 periods) may see no
    // steady tick at 256 and 1024 threads, and on a slow day none at 64 either (a tick of
    // 118 µs gave 64 ticks a second): then there are too few points, and the report says
    // so instead of fitting.
    let steady_rows = rows
        .iter()
        .filter(|r| r["steady_us_per_tick"].as_f64().unwrap() > 0.0)
        .count();
    let fit = &v["tick_cost"];
    if fit.is_null() {
        assert!(
            steady_rows <= 1,
            "{steady_rows} rows with a steady tick, no fit\n{text}"
        );
        assert!(
            text.contains("tick cost fit: not enough runs with a steady tick"),
            "{text}"
        );
    } else {
        let (a, b) = (
            fit["fixed_us"].as_f64().unwrap(),
            fit["per_thread_us"].as_f64().unwrap(),
        );
        assert!(a >= 0.0 && b >= 0.0 && a + b > 0.0, "{fit}");
        assert_eq!(
            fit["sim_tick_cost"].as_str().unwrap(),
            format!("{a:.1},{b:.3}")
        );
        assert!(fit["points"].as_array().unwrap().len() >= 2, "{fit}");
        assert!(text.contains("--tick-cost"), "{text}");
    }
    // One move to the tool: on more than one CPU the M + 1 threads rotate, so some run
    // made moves, each costing the tool some CPU time; the simulator's argument then has
    // three parts when the tick was fitted.
    let mv = &v["move_cost"];
    if m > 1 {
        assert_eq!(mv["threads"].as_u64(), Some(m as u64 + 1), "{mv}");
        assert!(mv["moves"].as_f64().unwrap() > 0.0, "{mv}");
        let u = &mv["us_per_move"];
        let (lo, mid, hi) = (
            u["min"].as_f64().unwrap(),
            u["median"].as_f64().unwrap(),
            u["max"].as_f64().unwrap(),
        );
        assert!(0.0 < lo && lo <= mid && mid <= hi, "{mv}");
        assert!(text.contains("µs of the tool's CPU a move"), "{text}");
        // Plans of 1, 2, 4, 8 and 16 moves, and of as many slice changes, carried out by
        // the tool's own apply: every move done (each changes a mask), a plan's price
        // positive and ordered, and a fit whose parts the simulator's argument carries.
        for kind in ["moves", "slices"] {
            let rows = v["plans"][kind].as_array().unwrap();
            let ks: Vec<u64> = rows.iter().map(|r| r["moves"].as_u64().unwrap()).collect();
            assert_eq!(ks, vec![1, 2, 4, 8, 16], "{kind}");
            for r in rows {
                let u = &r["us_per_plan"];
                let (lo, mid, hi) = (
                    u["min"].as_f64().unwrap(),
                    u["median"].as_f64().unwrap(),
                    u["max"].as_f64().unwrap(),
                );
                assert!(lo <= mid && mid <= hi, "{r}");
                if kind == "moves" {
                    assert_eq!(r["done"], r["moves"].as_f64().unwrap(), "{r}");
                    assert!(lo > 0.0, "{r}");
                }
            }
        }
        let pf = &v["plan_fit"];
        for part in ["per_plan_us", "per_move_us", "per_slice_us"] {
            assert!(pf[part].as_f64().unwrap() >= 0.0, "{pf}");
        }
        assert!(pf["per_move_us"].as_f64().unwrap() > 0.0, "{pf}");
        assert!(text.contains("µs a plan +"), "{text}");
        if !fit.is_null() {
            let five = v["sim_tool_cost"].as_str().unwrap();
            assert_eq!(five.split(',').count(), 5, "{five}");
            assert!(
                five.starts_with(fit["sim_tick_cost"].as_str().unwrap()),
                "{five}"
            );
        }
    } else {
        assert!(mv.is_null(), "{mv}");
        assert!(v["plans"]["moves"].as_array().unwrap().is_empty());
        assert!(v["plan_fit"].is_null());
    }
    let sets: Vec<u64> = v["migration"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["working_set"].as_u64().unwrap())
        .collect();
    if m >= 2 {
        assert_eq!(sets, vec![64 << 10, 1 << 20, 8 << 20]);
    } else {
        assert!(sets.is_empty());
    }
}
