//! The options `compare` shares with hyperfine: warm-up runs, the command's output, failures,
//! exports and progress. `bench` and `demo` fill them with [`CompareOptions::default`] and
//! change what they need.

use crate::error::ValueError;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// When to print a line per run on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum ProgressMode {
    /// When stderr is a terminal (the line is then rewritten in place).
    #[default]
    Auto,
    /// Always, one line per run.
    Always,
    /// Never.
    Never,
}

/// Warm-up, output, failure, export and progress options of `compare`.
#[derive(Debug, Clone, Args)]
pub struct CompareOptions {
    /// Runs of each policy before the measured ones, interleaved too, then discarded
    /// (to fill caches and settle the CPU frequency).
    #[arg(long, value_name = "N", default_value_t = 0, value_parser = warmup_runs)]
    pub warmup: usize,
    /// Pass the command's stdout and stderr through as it runs (stdout to stderr when JSON
    /// takes stdout); without it they are kept only to show the end of stderr when a run
    /// fails.
    #[arg(long)]
    pub show_output: bool,
    /// Keep going when the command exits non-zero: the run counts, and the table says how
    /// many failed. Without it the first failure stops the comparison with the command's
    /// own last lines of stderr.
    #[arg(long)]
    pub ignore_failure: bool,
    /// Write the per-policy results as CSV to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// Write the per-policy results as a Markdown table to FILE (`-`: stdout).
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Write the whole comparison as JSON to FILE (`-`: stdout), every run included.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Print "run 3/10: speed 1.60 s" on stderr after each run.
    #[arg(long, value_enum, default_value_t = ProgressMode::Auto)]
    pub progress: ProgressMode,
    /// Give every run `--cpu-budget PCT`: the tool's whole CPU time, moves included, held
    /// to PCT % of one core (0.1–100).
    #[arg(long, value_name = "PCT", value_parser = crate::cpu_budget)]
    pub cpu_budget: Option<f64>,
    /// Where to read `loadavg` and `stat` for the busy-machine check (tests use fixtures).
    #[arg(long, hide = true, value_name = "DIR", default_value = "/proc")]
    pub proc_root: PathBuf,
}

/// The most runs of each policy `--repeat` or `--warmup` takes: 10 000.
///
/// Each run is a whole run of the command under `threadbalance run`, a few tens of
/// milliseconds at the least: 10 000 rounds of three policies are hours already, and
/// every measured run is kept in memory for the statistics. A larger count is a typo
/// (or `-1` read as 18446744073709551615, which once wrapped to 0 runs); it is refused as
/// the command line is read, so `warmup + repeat` cannot overflow either.
pub const MAX_RUNS: usize = 10_000;

/// A count of runs from 0 to [`MAX_RUNS`].
fn runs(s: &str, least: usize) -> Result<usize, ValueError> {
    match s.trim().parse::<usize>() {
        Ok(n) if (least..=MAX_RUNS).contains(&n) => Ok(n),
        _ => Err(ValueError::NotA {
            given: s.into(),
            expected: format!("a whole number from {least} to {MAX_RUNS}"),
        }),
    }
}

/// `--warmup N`: 0 to [`MAX_RUNS`].
pub fn warmup_runs(s: &str) -> Result<usize, ValueError> {
    runs(s, 0)
}

/// `--repeat N`: 1 to [`MAX_RUNS`].
pub fn repeat_runs(s: &str) -> Result<usize, ValueError> {
    runs(s, 1)
}

impl Default for CompareOptions {
    fn default() -> CompareOptions {
        CompareOptions {
            warmup: 0,
            show_output: false,
            ignore_failure: false,
            export_csv: None,
            export_markdown: None,
            export_json: None,
            progress: ProgressMode::Auto,
            cpu_budget: None,
            proc_root: PathBuf::from("/proc"),
        }
    }
}

impl CompareOptions {
    /// The defaults, with no progress lines (for callers that print their own).
    pub fn quiet() -> CompareOptions {
        CompareOptions {
            progress: ProgressMode::Never,
            ..CompareOptions::default()
        }
    }
}
