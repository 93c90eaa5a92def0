//! `/proc/<pid>/task/<tid>/schedstat`: three numbers (kernel `Documentation/scheduler/sched-stats.rst`).
//!
//! ```text
//!  610559 56935 2
//!  ^run   ^wait ^timeslices
//! ```
//!
//! Run and wait are in nanoseconds; the file exists when the kernel has `CONFIG_SCHED_INFO`
//! (schedstats need not be enabled for these three).

use super::{ParseError, parse_u64, words};
use threadbalance_model::Nanos;

/// One `schedstat` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SchedStat {
    /// Time spent on a CPU, in nanoseconds (field 1).
    pub run: Nanos,
    /// Time spent runnable on a run queue, waiting for a CPU, in nanoseconds (field 2).
    pub wait: Nanos,
    /// Number of times the thread was given a CPU (field 3).
    pub timeslices: u64,
}

/// Parses a `schedstat` line.
pub fn parse_schedstat(text: &str) -> Result<SchedStat, ParseError> {
    parse_schedstat_bytes(text.as_bytes())
}

/// [`parse_schedstat`] on raw bytes.
pub fn parse_schedstat_bytes(text: &[u8]) -> Result<SchedStat, ParseError> {
    let mut w = words(text);
    let mut next = |name: &str| {
        w.next()
            .and_then(parse_u64)
            .ok_or_else(|| ParseError::new("schedstat", format!("{name} missing or not a number")))
    };
    let run = next("run time")?;
    let wait = next("wait time")?;
    let timeslices = next("timeslices")?;
    Ok(SchedStat {
        run: Nanos(run),
        wait: Nanos(wait),
        timeslices,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_schedstat_three_numbers() {
        let s = parse_schedstat("610559 56935 2\n").unwrap();
        assert_eq!(s.run, Nanos(610_559));
        assert_eq!(s.wait, Nanos(56_935));
        assert_eq!(s.timeslices, 2);
    }

    #[test]
    fn parse_schedstat_truncated_or_garbage_is_error() {
        for bad in [
            "",
            "\n",
            "1",
            "1 2",
            "1 2 x",
            "a b c",
            "-1 2 3",
            "1 2 99999999999999999999",
        ] {
            assert!(parse_schedstat(bad).is_err(), "{bad:?}");
        }
        assert!(parse_schedstat_bytes(b"\xff\xff").is_err());
    }
}
