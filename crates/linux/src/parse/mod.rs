//! Pure parsers: the text of one `/proc` file in, model values out. No I/O happens here;
//! [`crate::read`] and [`crate::sampler`] read the files and hand their bytes over.
//!
//! Every parser is safe on any input: malformed, truncated or binary text gives a
//! [`ParseError`], never a panic. Numbers are scanned byte by byte with overflow checks, so
//! the hot path needs neither UTF-8 validation nor allocation.
//!
//! | file | parser | gives |
//! |---|---|---|
//! | `/proc/<pid>/task/<tid>/stat` | [`parse_stat`] | [`TaskStat`]: state, CPU times, start time, last CPU |
//! | `/proc/<pid>/task/<tid>/schedstat` | [`parse_schedstat`] | [`SchedStat`]: run and wait ns, timeslices |
//! | `/proc/<pid>/task/<tid>/status` | [`parse_status`] | [`TaskStatus`]: ids, name, context switches, allowed CPUs |
//! | `/proc/stat` (first line) | [`parse_cpu_time`] | [`threadbalance_model::CpuTime`]: the machine's busy and stolen ticks |
//! | `/proc/<pid>/numa_maps` | [`parse_numa_maps`] | [`threadbalance_model::ProcessMemory`]: bytes per node |
//! | `/sys/…/cpuN/topology/*`, `cache/indexK/*`, `nodeN/*` | [`parse_cpumask`], [`parse_sysfs_int`], [`parse_distance_row`] | CPU sets, ids, distance rows ([`sysfs_value`]: the value before the first NUL) |
//!
//! CPU lists (`0-3,8`) are parsed by [`threadbalance_model::CpuSet::parse_list`].
//!
//! ```
//! use threadbalance_linux::parse::parse_schedstat;
//! let s = parse_schedstat("1500 250 3\n").unwrap();
//! assert_eq!((s.run.0, s.wait.0, s.timeslices), (1500, 250, 3));
//! assert!(parse_schedstat("1500 25").is_err());
//! ```

mod cpu_time;
mod numa_maps;
mod schedstat;
mod stat;
mod status;
mod sysfs;

pub use cpu_time::{parse_cpu_busy, parse_cpu_time, parse_system_ticks};
pub use numa_maps::parse_numa_maps;
pub use schedstat::{SchedStat, parse_schedstat, parse_schedstat_bytes};
pub use stat::{TaskStat, parse_stat, parse_stat_bytes, parse_stat_comm};
pub use status::{TaskStatus, parse_status, parse_status_switches};
pub use sysfs::{parse_cpumask, parse_distance_row, parse_sysfs_int, sysfs_value};

/// Why a `/proc` text could not be parsed. The reader that knows the path turns it into
/// [`crate::LinuxError::Parse`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {why}{}", refused.as_ref().map_or(String::new(), |e| format!(": {e}")))]
pub struct ParseError {
    /// Which kind of file was being parsed (`stat`, `schedstat`, `status`, `numa_maps`).
    pub file: &'static str,
    /// What was wrong.
    pub why: String,
    /// The model's refusal of a value in it (a CPU list), when that was what was wrong:
    /// said after `why`.
    pub refused: Option<threadbalance_model::ModelError>,
}

impl ParseError {
    pub(crate) fn new(file: &'static str, why: impl Into<String>) -> ParseError {
        ParseError {
            file,
            why: why.into(),
            refused: None,
        }
    }
}

/// Parses an unsigned decimal number made of ASCII digits only; `None` when empty, when
/// anything but a digit appears, or on overflow.
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// Parses a signed decimal number (`-1`, `42`); `None` when malformed or out of range.
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.split_first() {
        Some((b'-', rest)) => parse_u64(rest)
            .and_then(|n| i64::try_from(n).ok())
            .map(|n| -n),
        _ => parse_u64(s).and_then(|n| i64::try_from(n).ok()),
    }
}

/// Splits on ASCII whitespace, skipping empty pieces.
pub(crate) fn words(s: &[u8]) -> impl Iterator<Item = &[u8]> {
    s.split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
}

/// Strips ASCII whitespace at both ends.
pub(crate) fn trim(s: &[u8]) -> &[u8] {
    s.trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_u64_rejects_signs_blanks_and_overflow() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"-1",
            b"+1",
            b" 1",
            b"1x",
        ] {
            assert_eq!(parse_u64(bad), None, "{bad:?}");
        }
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }
}
