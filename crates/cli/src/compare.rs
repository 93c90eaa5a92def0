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
//!
//! Beside that, what hyperfine users expect: `--warmup N` runs, mean ± σ and a verdict line
//! per policy ([`stats`]), a warning instead of the verdict on a busy machine ([`busy`]),
//! a line per run on stderr ([`progress`]), `--show-output`, `--ignore-failure` and the
//! command's own error when it fails ([`child`]), and CSV, Markdown and JSON exports
//! ([`export`]).

pub mod busy;
pub mod child;
pub mod export;
pub mod options;
pub mod progress;
pub mod report;
pub mod stats;

use crate::error::refused;
use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result, bail};
use clap::Args;
use options::{CompareOptions, ProgressMode};
use report::Report;
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use threadbalance_model::{Level, PolicySummary};
use threadbalance_policy::PolicyKind;

/// Options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// Policies to compare (comma-separated, `none` gives the baseline; `--policies` is the
    /// same option), and the level, interval, CPU list, dry run and seed passed to every run.
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// Runs of each policy (1 to 10 000).
    #[arg(long, default_value_t = 5, value_parser = options::repeat_runs)]
    pub repeat: usize,
    /// Print the comparison as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Warm-up, output, failure, export and progress options.
    #[command(flatten)]
    pub opts: CompareOptions,
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
    /// What one of the tool's ticks cost in CPU time once every thread had been seen, µs
    /// (`run`'s `tick_cpu_us`; 0 when not measured): `bench` paces its simulation of the
    /// cell by it.
    pub tick_cpu_us: f64,
    /// Where the run read run time and wait from (`run`'s `run_time`); gathered, once per
    /// source, in [`Comparison::run_time`].
    #[serde(skip)]
    pub run_time: String,
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
    /// Where the runs read run time and wait from, each source once, in the order first
    /// met (`run time from BPF sched_switch counters`, or `run time from /proc (why)`):
    /// on many cores a policy's results differ with the source.
    pub run_time: Vec<String>,
}

/// The non-empty `lines`, each once, in the order first met: the run-time sources of a
/// comparison's runs, or of a benchmark's cells.
pub fn each_once<'a>(lines: impl Iterator<Item = &'a String>) -> Vec<String> {
    let mut once: Vec<String> = Vec::new();
    for line in lines {
        if !line.is_empty() && !once.contains(line) {
            once.push(line.clone());
        }
    }
    once
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
    if let Some(program) = command.first()
        && !executable(program)
    {
        return Err(input_error(format!(
            "cannot execute {program:?}: not an executable file here or in PATH"
        )));
    }
    let topo = settings.topology(crate::usable::read_usable()?)?;
    for &p in policies {
        settings.build(p, &topo)?;
    }
    Ok(())
}

/// Runs the comparison, calling `progress(round, policy)` before each measured run
/// (rounds count from 0), so a long caller such as `bench` can say what it is doing.
pub fn compare_with_progress(
    args: &CompareArgs,
    progress: &mut dyn FnMut(usize, &str),
) -> Result<Comparison> {
    measure(args, progress).map(|m| m.comparison)
}

/// A comparison with what its report needs beside it.
#[derive(Debug)]
pub struct Measured {
    /// The comparison.
    pub comparison: Comparison,
    /// Runs of each policy whose command failed (kept with `--ignore-failure`).
    pub failed: Vec<usize>,
    /// Whether other work disturbed the runs.
    pub busy: busy::Busy,
}

/// Whether stdout is taken by JSON (`--json`, an export to `-`), so the command's output
/// shown with `--show-output` and the table go to stderr.
fn stdout_reserved(args: &CompareArgs) -> bool {
    let o = &args.opts;
    args.json
        || [&o.export_csv, &o.export_markdown, &o.export_json]
            .iter()
            .any(|p| p.as_deref().is_some_and(crate::jsonout::is_stdout))
}

/// `run`'s options for one policy: the policy, then the shared settings (level, interval,
/// CPU list, dry run, seed) as given.
fn run_args(args: &CompareArgs, policy: PolicyKind) -> Vec<String> {
    let mut v = vec!["--policy".to_string(), policy.name().to_string()];
    v.extend(args.settings.child_args());
    if let Some(share) = args.opts.cpu_budget {
        v.extend(["--cpu-budget".to_string(), format!("{}", share * 100.0)]);
    }
    v
}

/// Runs the warm-ups and the measured runs, interleaved, and reads the machine's business
/// around them.
///
/// Long because it is one schedule (checks, warm-ups, then the runs interleaved by
/// policy, with the machine's load read around them) that reads best whole.
pub fn measure(args: &CompareArgs, progress: &mut dyn FnMut(usize, &str)) -> Result<Measured> {
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
    let cpus = crate::usable::read_usable()?
        .cpus()
        .iter()
        .map(|c| c.id.0)
        .collect();
    let probe = busy::Probe::start(&args.opts.proc_root, cpus);
    let mut shown = progress::Progress::new(args.opts.progress);
    let to_stderr = stdout_reserved(args);
    let warmup = args.opts.warmup;
    let mut runs: Vec<Vec<RunResult>> = vec![Vec::new(); policies.len()];
    let mut failed = vec![0; policies.len()];
    // Both counts are bounded as the command line is read (`options::MAX_RUNS`); `bench`
    // and `demo` fill them too, so the sum is checked all the same.
    let rounds = warmup
        .checked_add(args.repeat)
        .ok_or_else(|| input_error("--warmup plus --repeat: too many runs"))?;
    for round in 0..rounds {
        let warm = round < warmup;
        let (k, of) = if warm {
            (round, warmup)
        } else {
            (round - warmup, args.repeat)
        };
        for (i, &policy) in policies.iter().enumerate() {
            if !warm {
                progress(k, policy.name());
            }
            let run_args = run_args(args, policy);
            let launch = child::Launch {
                exe: &exe,
                run_args: &run_args,
                command: &args.command,
                env: &args.env,
            };
            let mut pass = |stream: child::Stream, bytes: &[u8]| {
                shown.clear();
                let text = String::from_utf8_lossy(bytes);
                match stream {
                    child::Stream::Stdout if !to_stderr => out!("{text}"),
                    _ => err!("{text}"),
                }
            };
            let live: Option<child::Sink<'_>> = if args.opts.show_output {
                Some(&mut pass)
            } else {
                None
            };
            let tag = format!("run-{round}-{i}");
            let out = child::run_once(&launch, dir.path(), &tag, live)?;
            let summary = out.summary.as_deref().filter(|t| !t.trim().is_empty());
            let Some(summary) = summary else {
                // `run` itself failed before the command ran: its own last line says why.
                let why = child::last_lines(&out.run_stderr, 1);
                bail!(
                    "{policy}: threadbalance run failed ({}): {}",
                    out.status,
                    why.trim()
                );
            };
            if !out.status.success() {
                if !args.opts.ignore_failure {
                    let tail = child::last_lines(&out.stderr, 5);
                    let tail = if tail.is_empty() {
                        "  (it printed nothing on stderr)".to_string()
                    } else {
                        tail
                    };
                    let what = if warm { "warm-up" } else { "run" };
                    bail!(
                        "{policy}: the command failed ({}) in {what} {}/{of}; the end of its stderr:\n{tail}\n\
                         (--ignore-failure keeps going, --show-output shows all of its output)",
                        out.status,
                        k + 1
                    );
                }
                if !warm {
                    failed[i] += 1;
                }
            }
            let summary = crate::runread::parse(summary)?;
            if summary.policy != policy {
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
            let result = RunResult {
                wall_s: summary.wall_s,
                moves: summary.applied.done,
                score_wall_s: f(&score, "wall_s"),
                fair_share_pct: f(&score, "fair_share_pct"),
                fair_share_wall_s: f(&score, "fair_share_wall_s"),
                policy_summary: summary.policy_summary,
                tick_cpu_us: summary.tick_cpu_us,
                run_time: summary.run_time,
            };
            shown.show(&progress::line(warm, k, of, policy.name(), judged(&result)));
            if !warm {
                runs[i].push(result);
            }
        }
    }
    shown.clear();
    let comparison = summarize(args, runs);
    let none_pcts: Vec<f64> = comparison
        .results
        .iter()
        .filter(|r| r.policy == "none")
        .flat_map(|r| r.runs.iter().filter_map(|x| x.fair_share_pct))
        .collect();
    let busy = probe.finish(&none_pcts);
    Ok(Measured {
        comparison,
        failed,
        busy,
    })
}

/// The wall time a run is judged by: the command's own score when it gives one (it leaves
/// out process start-up), else the whole command's.
pub(crate) fn judged(r: &RunResult) -> f64 {
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
    let results: Vec<PolicyResult> = policies
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
    let run_time = each_once(results.iter().flat_map(|p| &p.runs).map(|r| &r.run_time));
    Comparison {
        command: args.command.clone(),
        baseline: policies[base].to_string(),
        results,
        fair_share_wall_s: Spread::of(&fair).map(|s| s.median),
        run_time,
    }
}

/// Runs `compare` and prints it: the table on stdout (stderr when JSON takes stdout), then
/// the exports. Every export file is created before the first run.
pub fn run(args: &CompareArgs) -> Result<u8> {
    check(&args.settings, &args.policies(), args.repeat, &args.command)?;
    let o = &args.opts;
    let mut exports = export::Exports::open(
        o.export_csv.as_deref(),
        o.export_markdown.as_deref(),
        o.export_json.as_deref(),
        args.json,
    )?;
    let m = measure(args, &mut |_, _| {})?;
    let report = Report::new(m.comparison, o.warmup, &m.failed, m.busy);
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&crate::schema::versioned(&report))?
        );
    } else if exports.uses_stdout() {
        err!("{}", report.to_text());
    } else {
        out!("{}", report.to_text());
    }
    exports.write(&report)?;
    Ok(0)
}

/// Options of `demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// Runs of each policy (1 to 10 000).
    #[arg(long, default_value_t = 5, value_parser = options::repeat_runs)]
    pub repeat: usize,
    /// Total compute per thread in ms (the demo's length scales with it).
    #[arg(long, default_value_t = 1000)]
    pub work_ms: u64,
    /// Also write the comparison as JSON to FILE (`-`: stdout, the table then goes to
    /// stderr).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Print "run 3/5: speed 1.60 s" on stderr after each run.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Where to read `loadavg` and `stat` for the busy-machine check (tests use fixtures).
    #[arg(long, hide = true, value_name = "DIR", default_value = "/proc")]
    pub proc_root: PathBuf,
}

/// What `demo --json` writes.
#[derive(Debug, Serialize)]
struct DemoJson<'a> {
    /// The machine, as `topo` describes it.
    machine: String,
    /// The workload, in words.
    workload: String,
    /// The comparison, its statistics and the machine's business.
    #[serde(flatten)]
    report: &'a Report,
    /// The plain-language verdict; `None` on a busy machine.
    verdict: Option<String>,
}

/// `demo`: the embedded default. On this machine, threads that synchronize every 10 ms,
/// one more than the CPUs it may use (N = M + 1: 3 on 2 CPUs, 17 on 16), the case where
/// one doubled-up CPU gates every phase and balancing helps most; under `none` and under
/// `speed`, side by side with the fair-share bound; then the verdict, whichever way it goes
/// (or, on a busy machine, a warning instead).
pub fn demo(args: &DemoArgs) -> Result<u8> {
    let topo = crate::usable::read_usable()?;
    let cores = topo.cpus().len();
    let threads = cores + 1;
    let exe = std::env::current_exe().context("finding this program")?;
    let exe = exe.to_string_lossy().to_string();
    let json_to_stdout = args.json.as_deref().is_some_and(crate::jsonout::is_stdout);
    if let Some(path) = args
        .json
        .as_deref()
        .filter(|p| !crate::jsonout::is_stdout(p))
    {
        // Found out now, before a minute of runs, that the file cannot be written.
        std::fs::File::create(path)
            .map_err(|e| refused(format!("--json {}: cannot write it", path.display()), e))?;
    }
    let say = |text: &str| {
        if json_to_stdout {
            errln!("{text}");
        } else {
            outln!("{text}");
        }
    };
    let machine = topo.describe();
    let workload = format!(
        "spmd, {threads} threads on {cores} CPUs, barrier after every 10 ms of compute, {} ms of compute per thread",
        args.work_ms
    );
    say(&format!("machine: {machine}"));
    say(&format!("workload: {workload}"));
    let cmp = CompareArgs {
        settings: SettingsArgs {
            policy: vec![PolicyKind::None, PolicyKind::Speed],
            level: Some(Level::Core),
            ..SettingsArgs::default()
        },
        repeat: args.repeat,
        json: false,
        opts: CompareOptions {
            progress: args.progress,
            proc_root: args.proc_root.clone(),
            ..CompareOptions::default()
        },
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
    let m = measure(&cmp, &mut |_, _| {})?;
    let report = Report::new(m.comparison, 0, &m.failed, m.busy);
    let text = report.to_text();
    say(text.trim_end());
    // On a busy machine the table already ends with the warning, in place of a verdict.
    let verdict = report.quiet_machine().then(|| verdict(&report.comparison));
    if let Some(v) = &verdict {
        say(v);
    }
    if let Some(path) = &args.json {
        let json = DemoJson {
            machine,
            workload,
            report: &report,
            verdict,
        };
        crate::jsonout::write(path, &crate::schema::versioned(&json))?;
    }
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

#[cfg(test)]
mod tests {
    use super::{CompareArgs, PolicyKind, run_args};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: CompareArgs,
    }

    #[test]
    fn compare_gives_every_run_its_cpu_budget() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["compare", "--policies", "none,speed"];
            argv.extend_from_slice(extra);
            argv.extend_from_slice(&["--", "true"]);
            Cli::try_parse_from(argv).unwrap().args
        };
        let with = run_args(&parse(&["--cpu-budget", "2.5"]), PolicyKind::Speed);
        let i = with.iter().position(|a| a == "--cpu-budget").unwrap();
        assert_eq!(with[i + 1].parse::<f64>().ok(), Some(2.5));
        let without = run_args(&parse(&[]), PolicyKind::Speed);
        assert!(!without.iter().any(|a| a == "--cpu-budget"), "{without:?}");
        assert!(Cli::try_parse_from(["compare", "--cpu-budget", "0", "--", "true"]).is_err());
    }
}
