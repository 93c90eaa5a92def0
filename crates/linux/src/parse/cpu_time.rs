//! `/proc/stat`'s first line: the machine's CPU time in clock ticks, summed over its CPUs
//! (kernel `Documentation/filesystems/proc.rst`, "Miscellaneous kernel statistics").
//!
//! ```text
//! cpu  770 0 819 32759 400 0 13 9 0 0
//!      ^user ^nice ^system ^idle ^iowait ^irq ^softirq ^steal ^guest ^guest_nice
//! ```
//!
//! Guest time is already inside user and nice, so busy time is user + nice + system + irq +
//! softirq. Kernels before 2.6.11 have no steal column: it then counts as 0.

use super::{ParseError, parse_u64, words};
use threadbalance_model::{CpuId, CpuTime};

/// Parses the `cpuN` lines of `/proc/stat`: each CPU's busy time (user + nice + system +
/// irq + softirq) in clock ticks, in the order the kernel lists them (online CPUs only).
/// The total line and the lines after the CPUs are ignored; a `cpuN` line whose busy
/// columns are not numbers is an error naming it.
pub fn parse_cpu_busy(text: &[u8]) -> Result<Vec<(CpuId, u64)>, ParseError> {
    let mut out = Vec::new();
    for line in text.split(|&b| b == b'\n') {
        let mut w = words(line);
        let Some(name) = w.next() else { continue };
        let Some(id) = name.strip_prefix(b"cpu").filter(|id| !id.is_empty()) else {
            continue;
        };
        let Some(id) = parse_u64(id).and_then(|id| u32::try_from(id).ok()) else {
            continue;
        };
        let mut v = [0u64; 7];
        let mut n = 0;
        for word in w.take(7) {
            v[n] = parse_u64(word).ok_or_else(|| {
                ParseError::new(
                    "stat",
                    format!("`cpu{id}` column {} is not a number", n + 1),
                )
            })?;
            n += 1;
        }
        if n < 7 {
            return Err(ParseError::new(
                "stat",
                format!("`cpu{id}` line has {n} columns, fewer than 7"),
            ));
        }
        let [user, nice, system, _idle, _iowait, irq, softirq] = v;
        let busy = [user, nice, system, irq, softirq]
            .iter()
            .fold(0u64, |s, &x| s.saturating_add(x));
        out.push((CpuId(id), busy));
    }
    Ok(out)
}

/// Parses the `cpu` line at the start of `/proc/stat` (what follows it is ignored).
pub fn parse_cpu_time(text: &[u8]) -> Result<CpuTime, ParseError> {
    let [user, nice, system, _idle, _iowait, irq, softirq, steal] = cpu_columns(text)?;
    let busy = [user, nice, system, irq, softirq]
        .iter()
        .try_fold(0u64, |s, &x| s.checked_add(x))
        .ok_or_else(|| ParseError::new("stat", "`cpu` busy time overflows"))?;
    Ok(CpuTime { busy, steal })
}

/// The machine's time in the kernel on behalf of tasks (the `cpu` line's `system` column:
/// system calls, page faults; not interrupts), in clock ticks summed over its CPUs.
pub fn parse_system_ticks(text: &[u8]) -> Result<u64, ParseError> {
    Ok(cpu_columns(text)?[2])
}

/// The first eight columns of the `cpu` line at the start of `/proc/stat` (a missing
/// eighth, steal, reads 0).
fn cpu_columns(text: &[u8]) -> Result<[u64; 8], ParseError> {
    let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
    let mut w = words(line);
    if w.next() != Some(b"cpu".as_slice()) {
        return Err(ParseError::new("stat", "first line is not the `cpu` total"));
    }
    let mut v = [0u64; 8];
    let mut n = 0;
    for word in w.take(8) {
        v[n] = parse_u64(word).ok_or_else(|| {
            ParseError::new("stat", format!("`cpu` column {} is not a number", n + 1))
        })?;
        n += 1;
    }
    if n < 7 {
        return Err(ParseError::new(
            "stat",
            format!("`cpu` line has {n} columns, fewer than 7"),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_cpu_busy_reads_each_cpu_line_and_skips_the_total_and_the_rest() {
        let text = b"cpu  9 9 9 9 9 9 9 9 0 0\ncpu0 1 2 3 100 5 6 7 8 0 0\ncpu3 10 0 0 4 0 0 1\nintr 5 6\nctxt 9\n";
        assert_eq!(
            parse_cpu_busy(text).unwrap(),
            vec![(CpuId(0), 1 + 2 + 3 + 6 + 7), (CpuId(3), 11)]
        );
        let err = parse_cpu_busy(b"cpu1 1 2 x 4 5 6 7\n").unwrap_err();
        assert!(err.to_string().contains("`cpu1` column 3"), "{err}");
        let err = parse_cpu_busy(b"cpu1 1 2 3\n").unwrap_err();
        assert!(err.to_string().contains("fewer than 7"), "{err}");
    }

    #[test]
    fn parse_cpu_time_sums_busy_columns_and_reads_steal() {
        let t = parse_cpu_time(b"cpu  770 1 819 32759 400 2 13 9 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")
            .unwrap();
        assert_eq!(
            t,
            CpuTime {
                busy: 770 + 1 + 819 + 2 + 13,
                steal: 9
            }
        );
        // An old kernel without the steal column.
        let t = parse_cpu_time(b"cpu 1 2 3 4 5 6 7\n").unwrap();
        assert_eq!(
            t,
            CpuTime {
                busy: 1 + 2 + 3 + 6 + 7,
                steal: 0
            }
        );
    }

    #[test]
    fn parse_system_ticks_reads_the_system_column_alone() {
        assert_eq!(
            parse_system_ticks(b"cpu  770 1 819 32759 400 2 13 9 0 0\ncpu0 1 2 3\n").unwrap(),
            819
        );
        assert!(parse_system_ticks(b"cpu 1 2 x 4 5 6 7\n").is_err());
        assert!(parse_system_ticks(b"cpu0 1 2 3 4 5 6 7\n").is_err());
    }

    #[test]
    fn parse_cpu_time_rejects_malformed_lines() {
        for bad in [
            &b""[..],
            b"cpu0 1 2 3 4 5 6 7 8\n",
            b"intr 1 2 3\ncpu 1 2 3 4 5 6 7 8\n",
            b"cpu 1 2 x 4 5 6 7 8\n",
            b"cpu 1 2 3 4 5 6\n",
            b"cpu 18446744073709551615 1 0 0 0 0 0 0\n",
        ] {
            assert!(
                parse_cpu_time(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
