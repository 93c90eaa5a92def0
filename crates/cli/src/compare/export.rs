//! `--export-csv`, `--export-markdown` and `--export-json`, as hyperfine names them.
//!
//! - **CSV**: a header and one row per policy:
//!   `policy,runs,failed_runs,mean_s,stddev_s,median_s,min_s,max_s,relative,relative_stddev,moves_per_s,fair_share_pct`.
//!   `relative` is the policy's mean over the baseline's (< 1 is faster; exactly 1 for the
//!   baseline), `relative_stddev` its propagated σ; an unknown value is an empty field.
//! - **Markdown**: the same as a table to paste into an issue or a README.
//! - **JSON**: the whole [`Report`], every run included (as `--json` prints it).
//!
//! Every target is opened before the first run, so a path that cannot be written is bad
//! input (exit 2) and nothing runs; `-` means stdout, and at most one output may take it.

use super::report::Report;
use crate::error::refused;
use crate::input_error;
use anyhow::{Context, Result};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Where one export goes.
#[derive(Debug)]
pub enum Target {
    /// Standard output.
    Stdout,
    /// A file, created (and truncated) before the first run.
    File(PathBuf, File),
}

impl Target {
    /// Opens `path` for writing (`-`: stdout); a file that cannot be created is bad input.
    pub fn open(flag: &str, path: &Path) -> Result<Target> {
        if crate::jsonout::is_stdout(path) {
            return Ok(Target::Stdout);
        }
        let file = File::create(path)
            .map_err(|e| refused(format!("{flag} {}: cannot write it", path.display()), e))?;
        Ok(Target::File(path.to_path_buf(), file))
    }

    /// Writes `text` to the target.
    pub fn write(&mut self, text: &str) -> Result<()> {
        match self {
            Target::Stdout => {
                let mut out = std::io::stdout().lock();
                out.write_all(text.as_bytes())
                    .and_then(|()| out.flush())
                    .context("writing to stdout")
            }
            Target::File(path, file) => file
                .write_all(text.as_bytes())
                .with_context(|| format!("writing {}", path.display())),
        }
    }
}

/// The opened exports of one comparison.
#[derive(Debug, Default)]
pub struct Exports {
    csv: Option<Target>,
    markdown: Option<Target>,
    json: Option<Target>,
}

impl Exports {
    /// Opens every export given; `stdout_taken` says whether another output (`--json`)
    /// already prints to stdout.
    pub fn open(
        csv: Option<&Path>,
        markdown: Option<&Path>,
        json: Option<&Path>,
        stdout_taken: bool,
    ) -> Result<Exports> {
        let dashes = [csv, markdown, json]
            .iter()
            .flatten()
            .filter(|p| crate::jsonout::is_stdout(p))
            .count()
            + usize::from(stdout_taken);
        if dashes > 1 {
            return Err(input_error(
                "only one of --json, --export-csv -, --export-markdown -, --export-json - may write to stdout",
            ));
        }
        let open = |flag: &str, p: Option<&Path>| p.map(|p| Target::open(flag, p)).transpose();
        Ok(Exports {
            csv: open("--export-csv", csv)?,
            markdown: open("--export-markdown", markdown)?,
            json: open("--export-json", json)?,
        })
    }

    /// Whether one of them writes to stdout (the table then goes to stderr).
    pub fn uses_stdout(&self) -> bool {
        [&self.csv, &self.markdown, &self.json]
            .iter()
            .any(|t| matches!(t, Some(Target::Stdout)))
    }

    /// Writes every export of `report`.
    pub fn write(&mut self, report: &Report) -> Result<()> {
        if let Some(t) = &mut self.csv {
            t.write(&to_csv(report))?;
        }
        if let Some(t) = &mut self.markdown {
            t.write(&to_markdown(report))?;
        }
        if let Some(t) = &mut self.json {
            t.write(&(serde_json::to_string_pretty(&crate::schema::versioned(report))? + "\n"))?;
        }
        Ok(())
    }
}

/// `mean / baseline mean` and its propagated σ, for each policy in order.
fn relatives(report: &Report) -> Vec<(f64, f64)> {
    let base = report
        .stats
        .iter()
        .find(|s| s.policy == report.comparison.baseline)
        .or(report.stats.first())
        .map(|s| s.wall_s);
    report
        .stats
        .iter()
        .map(|s| match base {
            Some(_) if s.policy == report.comparison.baseline => (1.0, 0.0),
            Some(b) => {
                let r = s.wall_s.mean / b.mean.max(1e-12);
                let rel = |m: f64, sd: f64| sd / m.max(1e-12);
                let sd = r
                    * (rel(s.wall_s.mean, s.wall_s.stddev).powi(2) + rel(b.mean, b.stddev).powi(2))
                        .sqrt();
                (r, sd)
            }
            None => (f64::NAN, f64::NAN),
        })
        .collect()
}

/// A CSV field: quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// The CSV export.
pub fn to_csv(report: &Report) -> String {
    let mut s = String::from(
        "policy,runs,failed_runs,mean_s,stddev_s,median_s,min_s,max_s,relative,relative_stddev,moves_per_s,fair_share_pct\n",
    );
    for ((st, r), (rel, rel_sd)) in report
        .stats
        .iter()
        .zip(&report.comparison.results)
        .zip(relatives(report))
    {
        let w = st.wall_s;
        let pct = r
            .fair_share_pct
            .map_or_else(String::new, |p| format!("{:.3}", p.median));
        s.push_str(&format!(
            "{},{},{},{:.6},{:.6},{:.6},{:.6},{:.6},{rel:.6},{rel_sd:.6},{:.3},{pct}\n",
            field(&st.policy),
            w.n,
            st.failed_runs,
            w.mean,
            w.stddev,
            w.median,
            w.min,
            w.max,
            r.moves_per_s,
        ));
    }
    s
}

/// The Markdown export.
pub fn to_markdown(report: &Report) -> String {
    let base = &report.comparison.baseline;
    let mut s = format!(
        "| Policy | Mean ± σ [s] | Min [s] | Median [s] | Max [s] | Relative to {base} |\n|:---|---:|---:|---:|---:|---:|\n"
    );
    for (st, (rel, rel_sd)) in report.stats.iter().zip(relatives(report)) {
        let w = st.wall_s;
        s.push_str(&format!(
            "| `{}` | {:.3} ± {:.3} | {:.3} | {:.3} | {:.3} | {rel:.2} ± {rel_sd:.2} |\n",
            st.policy.replace('|', "\\|"),
            w.mean,
            w.stddev,
            w.min,
            w.median,
            w.max
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_quotes_only_what_needs_it() {
        assert_eq!(field("speed"), "speed");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    #[test]
    fn exports_two_on_stdout_are_refused() {
        let dash = Path::new("-");
        let e = Exports::open(Some(dash), None, Some(dash), false).unwrap_err();
        assert!(e.to_string().contains("only one of"), "{e}");
        let e = Exports::open(None, None, Some(dash), true).unwrap_err();
        assert!(e.to_string().contains("only one of"), "{e}");
        assert!(
            Exports::open(None, Some(dash), None, false)
                .unwrap()
                .uses_stdout()
        );
    }
}
