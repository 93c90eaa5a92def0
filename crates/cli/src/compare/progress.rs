//! One line on stderr per run, so that a comparison of a minute is not a silent minute:
//!
//! ```text
//! warm-up 1/1: none 1.98 s
//! run 3/10: speed 1.60 s
//! ```
//!
//! On a terminal each line overwrites the last (`\r` and clear-to-end-of-line) and the last
//! is cleared when the comparison ends; with `--progress always` into a file or pipe, each
//! run gets its own line.

use super::options::ProgressMode;
use std::io::IsTerminal;

/// Prints the progress lines of one comparison.
#[derive(Debug)]
pub struct Progress {
    on: bool,
    in_place: bool,
    dirty: bool,
}

/// The text of one progress line.
pub fn line(warmup: bool, round: usize, rounds: usize, policy: &str, wall_s: f64) -> String {
    let what = if warmup { "warm-up" } else { "run" };
    format!("{what} {}/{rounds}: {policy} {wall_s:.2} s", round + 1)
}

impl Progress {
    /// Progress as `mode` asks, judging `auto` by whether stderr is a terminal.
    pub fn new(mode: ProgressMode) -> Progress {
        let tty = std::io::stderr().is_terminal();
        let on = match mode {
            ProgressMode::Auto => tty,
            ProgressMode::Always => true,
            ProgressMode::Never => false,
        };
        Progress {
            on,
            in_place: on && tty,
            dirty: false,
        }
    }

    /// Shows `text`.
    pub fn show(&mut self, text: &str) {
        if !self.on {
            return;
        }
        if self.in_place {
            err!("\r\x1b[K{text}");
            self.dirty = true;
        } else {
            errln!("{text}");
        }
    }

    /// Clears a line left in place, before other output goes to the terminal.
    pub fn clear(&mut self) {
        if self.dirty {
            err!("\r\x1b[K");
            self.dirty = false;
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_counts_from_one_and_names_warm_ups() {
        assert_eq!(line(false, 2, 10, "speed", 1.6), "run 3/10: speed 1.60 s");
        assert_eq!(line(true, 0, 1, "none", 1.981), "warm-up 1/1: none 1.98 s");
    }

    #[test]
    fn progress_never_is_off_whatever_stderr_is() {
        let p = Progress::new(ProgressMode::Never);
        assert!(!p.on && !p.in_place);
    }
}
