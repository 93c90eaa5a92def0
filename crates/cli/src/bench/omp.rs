//! The OpenMP cells' program: `bench/omp_stencil.c` (a 2-D Jacobi stencil with a barrier
//! per sweep, on libgomp), built at run time with the machine's C compiler.
//!
//! ```text
//!  source (embedded in this binary) ─► temp dir ─► cc -O2 -fopenmp ─► omp_stencil
//!  size:  OMP_NUM_THREADS=1 omp_stencil R C 50  ─► one pass's CPU time p
//!  cell:  a sweep of P passes: P = 1, or round(S / p) for sweeps of S ms (10, 100)
//!         sweeps = work_ms / (P · p), so each thread computes about as long as in `spmd`
//!         OMP_NUM_THREADS=N omp_stencil R C sweeps M P   (one JSON score line, as `workload`)
//! ```
//!
//! A pass over a thread's block takes a fraction of a millisecond (2 MiB a thread), a
//! fine-grained OpenMP loop. The cells of 10 and 100 ms sweeps are the same program with
//! more passes between two barriers (the C file's header: a block-Jacobi scheme that
//! exchanges edge rows at each barrier), so that the OpenMP program meets the matrix's
//! phase lengths without a larger grid.
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
/// Passes of the sizing run (sweeps of one pass).
const SIZING_PASSES: u32 = 50;

/// How the OpenMP cells are sized.
#[derive(Debug, Clone, Serialize)]
pub struct Sizing {
    /// Rows per thread.
    pub rows_per_thread: u32,
    /// Columns.
    pub cols: u32,
    /// One pass over one thread's rows, in ms of CPU time, measured alone.
    pub pass_ms: f64,
}

impl Sizing {
    /// Passes in a sweep of about `sweep_ms` (`None`: one pass, the program's finest
    /// grain); at least one.
    pub fn passes_for(&self, sweep_ms: Option<f64>) -> u32 {
        sweep_ms.map_or(1, |ms| {
            (ms / self.pass_ms.max(1e-6))
                .round()
                .clamp(1.0, f64::from(u32::MAX)) as u32
        })
    }

    /// One sweep of `passes` passes, in ms of one thread's CPU time.
    pub fn sweep_ms(&self, passes: u32) -> f64 {
        f64::from(passes) * self.pass_ms
    }

    /// Sweeps of `passes` passes for `work_ms` of compute per thread: at least one, and
    /// at least ten passes in all.
    pub fn sweeps(&self, work_ms: u64, passes: u32) -> u32 {
        let fewest = MIN_PASSES.div_ceil(passes.max(1)).max(1);
        sweeps_for(work_ms, self.sweep_ms(passes)).max(fewest)
    }
}

/// The program, built into a directory of its own (removed when dropped).
#[derive(Debug)]
pub struct Stencil {
    /// A private directory (mode 0700, a random name), removed when the stencil is dropped.
    dir: tempfile::TempDir,
    exe: PathBuf,
}

/// Why the OpenMP program could not be built (the benchmark then leaves it out).
#[derive(Debug, thiserror::Error)]
pub enum StencilError {
    /// No private temporary directory.
    #[error("creating a temporary directory: {0}")]
    TempDir(#[source] std::io::Error),
    /// The source could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The source file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `cc` could not be run.
    #[error("no C compiler (cc): {0}")]
    NoCompiler(#[source] std::io::Error),
    /// `cc -fopenmp` failed: its first line on stderr.
    #[error("cc -fopenmp failed: {0}")]
    Compile(String),
}

impl Stencil {
    /// Writes the source to a fresh temporary directory and compiles it with
    /// `cc -O2 -fopenmp`; `Err` says why it could not (no compiler, no OpenMP).
    pub fn build() -> Result<Stencil, StencilError> {
        let dir = tempfile::Builder::new()
            .prefix("threadbalance-bench-")
            .tempdir()
            .map_err(StencilError::TempDir)?;
        let stencil = Stencil {
            exe: dir.path().join("omp_stencil"),
            dir,
        };
        let src = stencil.dir.path().join("omp_stencil.c");
        std::fs::write(&src, SOURCE).map_err(|source| StencilError::Write {
            path: src.clone(),
            source,
        })?;
        let out = Command::new("cc")
            .args(["-O2", "-fopenmp"])
            .arg(&src)
            .arg("-o")
            .arg(&stencil.exe)
            .output()
            .map_err(StencilError::NoCompiler)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            return Err(StencilError::Compile(last.to_string()));
        }
        Ok(stencil)
    }

    /// Measures one pass alone.
    pub fn size(&self) -> Result<Sizing> {
        let out = Command::new(&self.exe)
            .env("OMP_NUM_THREADS", "1")
            .args([
                ROWS_PER_THREAD.to_string(),
                COLS.to_string(),
                SIZING_PASSES.to_string(),
            ])
            .output()
            .context("running the OpenMP program alone")?;
        if !out.status.success() {
            bail!("the OpenMP program failed alone ({})", out.status);
        }
        let work_s = score_field(&String::from_utf8_lossy(&out.stdout), "work_s")
            .context("reading the OpenMP program's score")?;
        let pass_ms = (work_s * 1e3 / f64::from(SIZING_PASSES)).max(1e-3);
        Ok(Sizing {
            rows_per_thread: ROWS_PER_THREAD,
            cols: COLS,
            pass_ms,
        })
    }

    /// The command of one run on `cores` CPUs, sweeps of `passes` passes and `work_ms` of
    /// compute per thread (threads come from `OMP_NUM_THREADS`).
    pub fn command(&self, s: &Sizing, cores: usize, passes: u32, work_ms: u64) -> Vec<String> {
        vec![
            self.exe.to_string_lossy().to_string(),
            s.rows_per_thread.to_string(),
            s.cols.to_string(),
            s.sweeps(work_ms, passes).to_string(),
            cores.to_string(),
            passes.to_string(),
        ]
    }
}

/// The fewest passes a run makes, however little work it is given.
const MIN_PASSES: u32 = 10;

/// Sweeps for `work_ms` of compute per thread when one sweep costs `sweep_ms`, rounded.
fn sweeps_for(work_ms: u64, sweep_ms: f64) -> u32 {
    (work_ms as f64 / sweep_ms).round() as u32
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
    fn passes_make_a_sweep_of_the_asked_length_and_sweeps_the_work() {
        let s = Sizing {
            rows_per_thread: ROWS_PER_THREAD,
            cols: COLS,
            pass_ms: 0.13,
        };
        // One pass, or as many as make 10 ms (76.9 → 77) and 100 ms (769.2 → 769).
        assert_eq!(s.passes_for(None), 1);
        assert_eq!(s.passes_for(Some(10.0)), 77);
        assert_eq!(s.passes_for(Some(100.0)), 769);
        // A sweep shorter than a pass is still one pass.
        assert_eq!(s.passes_for(Some(0.01)), 1);
        assert!((s.sweep_ms(77) - 10.01).abs() < 1e-9);
        // 1000 ms of work: 7692 sweeps of one pass, 100 of 77 (999.7 ms), 10 of 769.
        assert_eq!(s.sweeps(1000, 1), 7692);
        assert_eq!(s.sweeps(1000, 77), 100);
        assert_eq!(s.sweeps(1000, 769), 10);
        // Too little work for ten passes: ten passes, in as few sweeps as hold them.
        assert_eq!(s.sweeps(1, 1), 10);
        assert_eq!(s.sweeps(1, 4), 3);
        // 40 ms of work in 100 ms sweeps: one sweep (769 passes), as `spmd` makes one
        // phase of 100 ms.
        assert_eq!(s.sweeps(40, 769), 1);
    }

    #[test]
    fn score_field_reads_the_last_json_line() {
        let out = "warming up\n{\"wall_s\":1.5,\"work_s\":2.0}\n";
        assert_eq!(score_field(out, "work_s"), Some(2.0));
        assert_eq!(score_field(out, "missing"), None);
        assert_eq!(score_field("no json", "work_s"), None);
    }
}
