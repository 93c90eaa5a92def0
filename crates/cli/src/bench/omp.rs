//! The OpenMP cells' program: `bench/omp_stencil.c` (a 2-D Jacobi stencil with a barrier
//! per sweep, on libgomp), built at run time with the machine's C compiler.
//!
//! ```text
//!  source (embedded in this binary) ─► temp dir ─► cc -O2 -fopenmp ─► omp_stencil
//!  size:  OMP_NUM_THREADS=1 omp_stencil R C 50  ─► one sweep's CPU time s
//!         sweeps = work_ms / s, so each thread computes about as long as in `spmd`
//!  cell:  OMP_NUM_THREADS=N omp_stencil R C sweeps M   (one JSON score line, as `workload`)
//! ```
//!
//! The program's fair share is `max(busiest thread's work, all work / M)`, the work being
//! each thread's measured CPU time inside its sweeps (barrier waits left out); the C
//! file's header explains why.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::PathBuf;
use std::process::Command;

/// The program's source, kept in the repository at `bench/omp_stencil.c`.
const SOURCE: &str = include_str!("../../../../bench/omp_stencil.c");

/// Rows each thread updates per sweep: with 1024 columns and two grids, 2 MiB per thread,
/// about one core's private cache on today's servers.
pub const ROWS_PER_THREAD: u32 = 128;
/// Columns of the grid.
pub const COLS: u32 = 1024;
/// Sweeps of the sizing run.
const SIZING_SWEEPS: u32 = 50;

/// How the OpenMP cells are sized.
#[derive(Debug, Clone, Serialize)]
pub struct Sizing {
    /// Rows per thread.
    pub rows_per_thread: u32,
    /// Columns.
    pub cols: u32,
    /// Sweeps of every run.
    pub sweeps: u32,
    /// One sweep of one thread's rows, in ms of CPU time, measured alone.
    pub sweep_ms: f64,
}

/// The program, built into a directory of its own (removed when dropped).
#[derive(Debug)]
pub struct Stencil {
    /// A private directory (mode 0700, a random name), removed when the stencil is dropped.
    dir: tempfile::TempDir,
    exe: PathBuf,
}

impl Stencil {
    /// Writes the source to a fresh temporary directory and compiles it with
    /// `cc -O2 -fopenmp`; `Err` says why it could not (no compiler, no OpenMP).
    pub fn build() -> Result<Stencil, String> {
        let dir = tempfile::Builder::new()
            .prefix("threadbalance-bench-")
            .tempdir()
            .map_err(|e| format!("creating a temporary directory: {e}"))?;
        let stencil = Stencil {
            exe: dir.path().join("omp_stencil"),
            dir,
        };
        let src = stencil.dir.path().join("omp_stencil.c");
        std::fs::write(&src, SOURCE).map_err(|e| format!("writing {}: {e}", src.display()))?;
        let out = Command::new("cc")
            .args(["-O2", "-fopenmp"])
            .arg(&src)
            .arg("-o")
            .arg(&stencil.exe)
            .output()
            .map_err(|e| format!("no C compiler (cc): {e}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(format!("cc -fopenmp failed: {last}"));
        }
        Ok(stencil)
    }

    /// Measures one sweep alone and sizes the runs so that each thread computes about
    /// `work_ms`.
    pub fn size(&self, work_ms: u64) -> Result<Sizing> {
        let out = Command::new(&self.exe)
            .env("OMP_NUM_THREADS", "1")
            .args([
                ROWS_PER_THREAD.to_string(),
                COLS.to_string(),
                SIZING_SWEEPS.to_string(),
            ])
            .output()
            .context("running the OpenMP program alone")?;
        if !out.status.success() {
            bail!("the OpenMP program failed alone ({})", out.status);
        }
        let work_s = score_field(&String::from_utf8_lossy(&out.stdout), "work_s")
            .context("reading the OpenMP program's score")?;
        let sweep_ms = (work_s * 1e3 / f64::from(SIZING_SWEEPS)).max(1e-3);
        Ok(Sizing {
            rows_per_thread: ROWS_PER_THREAD,
            cols: COLS,
            sweeps: sweeps_for(work_ms, sweep_ms),
            sweep_ms,
        })
    }

    /// The command of one run on `cores` CPUs (threads come from `OMP_NUM_THREADS`).
    pub fn command(&self, s: &Sizing, cores: usize) -> Vec<String> {
        vec![
            self.exe.to_string_lossy().to_string(),
            s.rows_per_thread.to_string(),
            s.cols.to_string(),
            s.sweeps.to_string(),
            cores.to_string(),
        ]
    }
}

/// Sweeps for `work_ms` of compute per thread when one sweep costs `sweep_ms`: at least 10.
fn sweeps_for(work_ms: u64, sweep_ms: f64) -> u32 {
    ((work_ms as f64 / sweep_ms).round() as u32).max(10)
}

/// A number field of the last JSON line of `stdout`.
fn score_field(stdout: &str, key: &str) -> Option<f64> {
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| v.get(key).and_then(serde_json::Value::as_f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweeps_cover_the_work_and_never_fall_below_ten() {
        // 1000 ms of work at 0.25 ms a sweep: 4000 sweeps.
        assert_eq!(sweeps_for(1000, 0.25), 4000);
        // 1 ms of work at 0.25 ms a sweep would be 4 sweeps: at least 10.
        assert_eq!(sweeps_for(1, 0.25), 10);
    }

    #[test]
    fn score_field_reads_the_last_json_line() {
        let out = "warming up\n{\"wall_s\":1.5,\"work_s\":2.0}\n";
        assert_eq!(score_field(out, "work_s"), Some(2.0));
        assert_eq!(score_field(out, "missing"), None);
        assert_eq!(score_field("no json", "work_s"), None);
    }
}
