//! `compare` and `demo`: run a command under several policies in turn, interleaved
//! (A B A B …, so a drift in the machine's speed hits every policy alike), and report each
//! policy's wall time as min/median/max, its ratio to `none` pair by pair, moves per second
//! and the spread across runs.
//!
//! Each run is a fresh `threadbalance run --policy P --json FILE -- CMD` child process, so
//! every run starts from the masks the machine had and restores them when it ends. When the
//! command prints a score line (as `threadbalance workload` does: one JSON object with
//! `wall_s` and `fair_share_pct`), its own wall time and percentage of the fair share are
//! reported too.

use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result, bail};
use clap::Args;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write;
use std::process::{Command, Stdio};
use threadbalance_model::{Level, PolicySummary};
use threadbalance_policy::PolicyKind;

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Policies to compare (comma-separated, `none` gives the baseline; `--policies` is the
    /// same option), and the level, interval, CPU list, dry run and seed passed to every run.
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Runs of each policy.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The command and its arguments.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
    /// Environment variables set for every run of the command (`OMP_NUM_THREADS`, …); not
    /// a command-line option: callers such as `bench` fill it.
    #[arg(skip)]
    pub env: Vec<(String, String)>,
}

impl CompareArgs {
    /// The policies compared when none are given.
    pub const DEFAULT_POLICIES: [PolicyKind; 2] = [PolicyKind::None, PolicyKind::Tumbler];

    /// The policies to compare, in the order given.
    pub fn policies(&self) -> Vec<PolicyKind> {
        self.settings.policies(&Self::DEFAULT_POLICIES).0
    }
}

/// One run of one policy.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Wall time of the whole command, from `run`'s summary, seconds.
    pub wall_s: f64,
    /// Affinity changes made.
    pub moves: u64,
    /// The command's own score line, when it printed one.
    pub score_wall_s: Option<f64>,
    /// The command's percentage of its fair share, when it printed one.
    pub fair_share_pct: Option<f64>,
    /// The command's fair-share wall time, when it printed one.
    pub fair_share_wall_s: Option<f64>,
    /// The policy's own account of the run, typed as `run` writes it.
    pub policy_summary: PolicySummary,
}

/// min, median and max of some values.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `xs`; `None` when empty.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        if xs.is_empty() {
            return None;
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
        })
    }

    fn show(&self, digits: usize) -> String {
        format!(
            "{:.d$} / {:.d$} / {:.d$}",
            self.min,
            self.median,
            self.max,
            d = digits
        )
    }
}

/// What one policy did over its runs.
#[derive(Debug, Clone, Serialize)]
pub struct PolicyResult {
    /// The policy.
    pub policy: String,
    /// Every run, in order.
    pub runs: Vec<RunResult>,
    /// Wall time of the command.
    pub wall_s: Spread,
    /// Ratio of this policy's wall time to the baseline's, run by run (< 1 is faster).
    pub ratio_vs_baseline: Option<Spread>,
    /// Affinity changes per second of wall time, median.
    pub moves_per_s: f64,
    /// (max − min) / median of the wall time: how much runs varied.
    pub spread_frac: f64,
    /// The command's own percentage of its fair share, when it reports one.
    pub fair_share_pct: Option<Spread>,
}

/// A whole comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The command compared.
    pub command: Vec<String>,
    /// The policy ratios are taken against (`none` when listed, else the first).
    pub baseline: String,
    /// One entry per policy, in the order given.
    pub results: Vec<PolicyResult>,
    /// The command's fair-share wall time, when it reports one (median).
    pub fair_share_wall_s: Option<f64>,
}

/// Whether `program` names an executable file: as a path when it holds a `/`, else in
/// one of `PATH`'s directories (as `execvp` looks for it).
fn executable(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let is_exe = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return is_exe(std::path::Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| is_exe(&d.join(program))))
}

/// Rejects, before anything runs, a repeat count of 0, a command that cannot be executed,
/// a CPU list with none of the usable CPUs, or a policy that cannot be built on this
/// machine (policy names, levels, intervals of 0 and malformed CPU lists are refused while
/// the command line is read: see [`crate::settings`]).
pub fn check(
    settings: &SettingsArgs,
    policies: &[PolicyKind],
    repeat: usize,
    command: &[String],
) -> Result<()> {
    if repeat == 0 {
        return Err(input_error("--repeat must be at least 1"));
    }
    if let Some(program) = command.first() {
        if !executable(program) {
            return Err(input_error(format!(
                "cannot execute {program:?}: not an executable file here or in PATH"
            )));
        }
    }
    let topo = settings.topology(crate::usable::read_usable()?)?;
    for &p in policies {
        settings.build(p, &topo)?;
    }
    Ok(())
}

/// Runs the comparison.
pub fn compare(args: &CompareArgs) -> Result<Comparison> {
    compare_with_progress(args, &mut |_, _| {})
}

/// Runs the comparison, calling `progress(round, policy)` before each run (rounds count
/// from 0), so a long caller such as `bench` can say what it is doing.
pub fn compare_with_progress(
    args: &CompareArgs,
    progress: &mut dyn FnMut(usize, &str),
) -> Result<Comparison> {
    let policies = args.policies();
    check(&args.settings, &policies, args.repeat, &args.command)?;
    let exe = std::env::current_exe().context("finding this program")?;
    // Each run's summary goes to a file in a private directory (mode 0700, a random name),
    // never to a predictable name in the shared temp dir, where a planted symlink could
    // make a run as root write over another file.
    let dir = tempfile::Builder::new()
        .prefix("threadbalance-compare-")
        .tempdir()
        .context("creating a temporary directory")?;
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); policies.len()];
    for round in 0..args.repeat {
        for (i, policy) in policies.iter().enumerate() {
            progress(round, policy.name());
            let json = dir.path().join(format!("run-{round}-{i}.json"));
            let mut cmd = Command::new(&exe);
            cmd.arg("run").arg("--policy").arg(policy.name());
            cmd.args(args.settings.child_args());
            cmd.arg("--json").arg(&json).arg("--").args(&args.command);
            cmd.envs(args.env.iter().map(|(k, v)| (k, v)));
            let out = cmd
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output()
                .context("starting a run")?;
            let summary = std::fs::read_to_string(&json);
            let _ = std::fs::remove_file(&json);
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                let last = stderr
                    .lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .unwrap_or("");
                bail!("{policy}: the command failed ({}): {last}", out.status);
            }
            let summary = crate::runread::parse(&summary.context("reading a run's summary")?)?;
            if summary.policy != *policy {
                bail!("a run of {policy} reports policy {}", summary.policy);
            }
            let score = String::from_utf8_lossy(&out.stdout)
                .lines()
                .rev()
                .find_map(|l| {
                    serde_json::from_str::<Value>(l)
                        .ok()
                        .filter(|v| v.get("wall_s").is_some())
                });
            let f = |v: &Option<Value>, k: &str| {
                v.as_ref().and_then(|v| v.get(k)).and_then(Value::as_f64)
            };
            runs[i].push(RunResult {
                wall_s: summary.wall_s,
                moves: summary.applied.done,
                score_wall_s: f(&score, "wall_s"),
                fair_share_pct: f(&score, "fair_share_pct"),
                fair_share_wall_s: f(&score, "fair_share_wall_s"),
                policy_summary: summary.policy_summary,
            });
        }
    }
    Ok(summarize(args, runs))
}

/// The wall time a run is judged by: the command's own score when it gives one (it leaves
/// out process start-up), else the whole command's.
fn judged(r: &RunResult) -> f64 {
    r.score_wall_s.unwrap_or(r.wall_s)
}

fn summarize(args: &CompareArgs, runs: Vec<Vec<RunResult>>) -> Comparison {
    let policies = args.policies();
    let base = policies
        .iter()
        .position(|&p| p == PolicyKind::None)
        .unwrap_or(0);
    let base_walls: Vec<f64> = runs[base].iter().map(judged).collect();
    let fair: Vec<f64> = runs
        .iter()
        .flatten()
        .filter_map(|r| r.fair_share_wall_s)
        .collect();
    let results = policies
        .iter()
        .zip(runs)
        .map(|(policy, runs)| {
            let walls: Vec<f64> = runs.iter().map(judged).collect();
            let ratios: Vec<f64> = walls
                .iter()
                .zip(&base_walls)
                .map(|(w, b)| w / b.max(1e-9))
                .collect();
            let rates: Vec<f64> = runs
                .iter()
                .map(|r| r.moves as f64 / r.wall_s.max(1e-9))
                .collect();
            let pct: Vec<f64> = runs.iter().filter_map(|r| r.fair_share_pct).collect();
            let wall = Spread::of(&walls).unwrap_or(Spread {
                min: 0.0,
                median: 0.0,
                max: 0.0,
            });
            PolicyResult {
                policy: policy.to_string(),
                spread_frac: (wall.max - wall.min) / wall.median.max(1e-9),
                wall_s: wall,
                ratio_vs_baseline: Spread::of(&ratios),
                moves_per_s: Spread::of(&rates).map_or(0.0, |s| s.median),
                fair_share_pct: Spread::of(&pct),
                runs,
            }
        })
        .collect();
    Comparison {
        command: args.command.clone(),
        baseline: policies[base].to_string(),
        results,
        fair_share_wall_s: Spread::of(&fair).map(|s| s.median),
    }
}

impl Comparison {
    /// The comparison as a table.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let runs = self.results.first().map_or(0, |r| r.runs.len());
        let _ = writeln!(
            s,
            "{} runs of each policy, interleaved; ratio = policy / {} run by run (< 1 is faster)",
            runs, self.baseline
        );
        if let Some(f) = self.fair_share_wall_s {
            let _ = writeln!(s, "fair-share bound: {f:.3} s");
        }
        let _ = writeln!(
            s,
            "{:<16} {:>26} {:>26} {:>9} {:>8} {:>22}",
            "policy",
            "wall s min / med / max",
            "ratio min / med / max",
            "moves/s",
            "spread",
            "% of fair share (med)"
        );
        for r in &self.results {
            let ratio = r
                .ratio_vs_baseline
                .map_or_else(|| "-".to_string(), |x| x.show(3));
            let pct = r
                .fair_share_pct
                .map_or_else(|| "-".to_string(), |p| format!("{:.1}", p.median));
            let _ = writeln!(
                s,
                "{:<16} {:>26} {:>26} {:>9.1} {:>7.1}% {:>22}",
                r.policy,
                r.wall_s.show(3),
                ratio,
                r.moves_per_s,
                r.spread_frac * 100.0,
                pct
            );
        }
        s
    }
}

/// Runs `compare` and prints it.
pub fn run(args: &CompareArgs) -> Result<u8> {
    let c = compare(args)?;
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&crate::schema::versioned(&c))?
        );
    } else {
        out!("{}", c.to_table());
    }
    Ok(0)
}

/// Options of `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Runs of each policy.
    #[arg(long, default_value_t = 5)]
    pub repeat: usize,
    /// Total compute per thread in ms (the demo's length scales with it).
    #[arg(long, default_value_t = 1000)]
    pub work_ms: u64,
}

/// `demo`: the embedded default. On this machine, threads that synchronize every 10 ms,
/// one more than the CPUs it may use (N = M + 1: 3 on 2 CPUs, 17 on 16), the case where
/// one doubled-up CPU gates every phase and balancing helps most; under `none` and under
/// `speed`, side by side with the fair-share bound; then the verdict, whichever way it goes.
pub fn demo(args: &DemoArgs) -> Result<u8> {
    let topo = crate::usable::read_usable()?;
    let cores = topo.cpus().len();
    let threads = cores + 1;
    let exe = std::env::current_exe().context("finding this program")?;
    let exe = exe.to_string_lossy().to_string();
    outln!("machine: {}", topo.describe());
    outln!(
        "workload: spmd, {threads} threads on {cores} CPUs, barrier after every 10 ms of compute, {} ms of compute per thread",
        args.work_ms
    );
    let cmp = CompareArgs {
        settings: SettingsArgs {
            policy: vec![PolicyKind::None, PolicyKind::Speed],
            level: Some(Level::Core),
            ..SettingsArgs::default()
        },
        repeat: args.repeat,
        json: false,
        command: vec![
            exe,
            "workload".into(),
            "spmd".into(),
            "--threads".into(),
            threads.to_string(),
            "--phase-ms".into(),
            "10".into(),
            "--work-ms".into(),
            args.work_ms.to_string(),
            "--barrier".into(),
            "yield".into(),
            "--cores".into(),
            cores.to_string(),
        ],
        env: Vec::new(),
    };
    let c = compare(&cmp)?;
    out!("{}", c.to_table());
    outln!("{}", verdict(&c));
    Ok(0)
}

/// One line saying whether balancing helped, by how much, and whether the difference is
/// larger than the runs' own spread.
fn verdict(c: &Comparison) -> String {
    let (Some(base), Some(other)) = (c.results.first(), c.results.get(1)) else {
        return "nothing to compare".into();
    };
    let Some(ratio) = other.ratio_vs_baseline else {
        return "nothing to compare".into();
    };
    let gain = (1.0 / ratio.median - 1.0) * 100.0;
    let pct = |r: &PolicyResult| r.fair_share_pct.map_or(0.0, |p| p.median);
    if ratio.max < 1.0 {
        format!(
            "verdict: {} helps here: {:.1} % of the fair share against {:.1} % under Linux alone ({gain:+.1} % throughput, faster in every pair)",
            other.policy,
            pct(other),
            pct(base)
        )
    } else if ratio.min > 1.0 {
        format!(
            "verdict: {} hurts here: {:.1} % of the fair share against {:.1} % under Linux alone; leave this program to Linux",
            other.policy,
            pct(other),
            pct(base)
        )
    } else {
        format!(
            "verdict: no clear difference on this machine ({} median ratio {:.3}, pairs on both sides of 1): Linux alone is as good here",
            other.policy, ratio.median
        )
    }
}
