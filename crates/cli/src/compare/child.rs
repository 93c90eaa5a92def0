//! One run of a comparison: `threadbalance run --policy P --json FILE -- sh -c … CMD`, with
//! the command's own stdout and stderr kept apart from `run`'s.
//!
//! `run` prints its summary on stderr, the stream the command inherits. To keep the two
//! apart, the command is started through `/bin/sh -c 'exec "$@" >OUT 2>ERR'`: the shell
//! sends the command's streams to two files in the comparison's private directory and then
//! *becomes* the command (`exec`, same pid), so `run` manages the very process it started
//! and the command's wall time gains only the shell's start-up (the same in every run of
//! every policy). `run`'s own stderr goes to a third file, for when `run` itself fails.
//! With `--show-output` the two files are read as they grow and passed through while the
//! command runs.

use anyhow::{Context, Result};
use std::io::Read;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};

/// The shell script that redirects the command's streams and becomes the command.
const WRAPPER: &str = r#"o=$1; e=$2; shift 2; exec "$@" >"$o" 2>"$e""#;

/// What one run left behind.
#[derive(Debug)]
pub struct RunOutput {
    /// `run`'s exit status (the command's, when the command ran).
    pub status: ExitStatus,
    /// `run`'s JSON summary, when it wrote one (it does once the command has run).
    pub summary: Option<String>,
    /// The command's stdout.
    pub stdout: Vec<u8>,
    /// The command's stderr.
    pub stderr: Vec<u8>,
    /// `run`'s own stderr (its summary, its errors).
    pub run_stderr: Vec<u8>,
}

/// What to start: this program's `run` with these arguments before `--`.
#[derive(Debug)]
pub struct Launch<'a> {
    /// This program.
    pub exe: &'a Path,
    /// `run`'s options (`--policy P`, `--level L`, …), without `--json`.
    pub run_args: &'a [String],
    /// The command and its arguments.
    pub command: &'a [String],
    /// Environment set for the command.
    pub env: &'a [(String, String)],
}

/// Which of the command's streams some bytes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Its stdout.
    Stdout,
    /// Its stderr.
    Stderr,
}

/// Where `--show-output` sends what the command writes, as it comes.
pub type Sink<'a> = &'a mut dyn FnMut(Stream, &[u8]);

/// Runs `launch` once, its files named `tag` in the private directory `dir` (removed
/// again before returning). With `live`, what the command writes is handed to it as it
/// comes (the files are read every 20 ms while the run lasts), for `--show-output`.
pub fn run_once(
    launch: &Launch<'_>,
    dir: &Path,
    tag: &str,
    mut live: Option<Sink<'_>>,
) -> Result<RunOutput> {
    let json = dir.join(format!("{tag}.json"));
    let out = dir.join(format!("{tag}.out"));
    let err = dir.join(format!("{tag}.err"));
    let run_err = dir.join(format!("{tag}.run-err"));
    let run_err_file = std::fs::File::create(&run_err).context("creating a run's log")?;
    let mut child = Command::new(launch.exe)
        .arg("run")
        .args(launch.run_args)
        .arg("--json")
        .arg(&json)
        .arg("--")
        .arg("/bin/sh")
        .arg("-c")
        .arg(WRAPPER)
        .arg("threadbalance-compare")
        .arg(&out)
        .arg(&err)
        .args(launch.command)
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(run_err_file))
        .spawn()
        .context("starting a run")?;
    // Each file, once the shell has created it, read on from where the last look stopped.
    let mut open: [Option<std::fs::File>; 2] = [None, None];
    let mut pass = |live: &mut dyn FnMut(Stream, &[u8])| {
        for (k, (path, stream)) in [(&out, Stream::Stdout), (&err, Stream::Stderr)]
            .into_iter()
            .enumerate()
        {
            if open[k].is_none() {
                open[k] = std::fs::File::open(path).ok();
            }
            let mut bytes = Vec::new();
            if let Some(f) = &mut open[k] {
                let _ = f.read_to_end(&mut bytes);
            }
            if !bytes.is_empty() {
                live(stream, &bytes);
            }
        }
    };
    let status = loop {
        match &mut live {
            Some(live) => {
                if let Some(status) = child.try_wait().context("waiting for a run")? {
                    pass(&mut **live);
                    break status;
                }
                pass(&mut **live);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            None => break child.wait().context("waiting for a run")?,
        }
    };
    let taken = |p: &Path| {
        let v = std::fs::read(p).ok();
        let _ = std::fs::remove_file(p);
        v
    };
    Ok(RunOutput {
        status,
        summary: taken(&json).map(|b| String::from_utf8_lossy(&b).into_owned()),
        stdout: taken(&out).unwrap_or_default(),
        stderr: taken(&err).unwrap_or_default(),
        run_stderr: taken(&run_err).unwrap_or_default(),
    })
}

/// The last `n` non-empty lines of `bytes`, each indented by two spaces.
pub fn last_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let from = lines.len().saturating_sub(n);
    lines[from..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_keeps_the_tail_without_blank_lines() {
        let text = b"one\n\ntwo\nthree\n\n";
        assert_eq!(last_lines(text, 2), "  two\n  three");
        assert_eq!(last_lines(text, 9), "  one\n  two\n  three");
        assert_eq!(last_lines(b"", 3), "");
    }
}
