//! `/proc/<pid>/task/<tid>/stat`: one line of space-separated fields (proc(5)).
//!
//! ```text
//!  4243 (a) b (c) S 1 4242 4242 0 -1 4194368 … 17 3 0 0 …
//!  ^pid ^comm────^ ^3 ^4 …                         ^39 processor
//! ```
//!
//! `comm` (field 2) is the thread's name in parentheses and may hold spaces, parentheses
//! and even newlines, so the fields after it are found from the **last** `)` of the text:
//! no field after `comm` can contain one. Field numbers below are proc(5)'s, from 1.

use super::{ParseError, parse_i64, parse_u64};
use threadbalance_model::{CpuId, Nanos, Pid, ThreadState, Tid};

/// What the sampler needs from one `stat` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TaskStat {
    /// The thread's id (field 1).
    pub tid: Tid,
    /// Its scheduler state (field 3).
    pub state: ThreadState,
    /// The parent process (field 4; 0 for the kernel's first threads).
    pub ppid: Pid,
    /// The kernel's `PF_*` flags (field 9); see [`TaskStat::is_kernel_thread`].
    pub flags: u32,
    /// Time in user mode (field 14, `utime`, converted from clock ticks).
    pub utime: Nanos,
    /// Time in kernel mode (field 15, `stime`, converted from clock ticks).
    pub stime: Nanos,
    /// When the thread started, in clock ticks since boot (field 22, `starttime`). Kept in
    /// ticks: it identifies the thread in [`threadbalance_model::ThreadKey`].
    pub start_time: u64,
    /// The CPU it last ran on (field 39, `processor`).
    pub processor: CpuId,
}

/// The kernel's `PF_KTHREAD` flag: the task is a kernel thread.
const PF_KTHREAD: u32 = 0x0020_0000;

impl TaskStat {
    /// Whether this is a kernel thread (`PF_KTHREAD` in field 9).
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }
}

/// Converts clock ticks to nanoseconds, saturating; `ticks_per_sec` of 0 is taken as 1.
pub(crate) fn ticks_to_nanos(ticks: u64, ticks_per_sec: u64) -> Nanos {
    let tps = u128::from(ticks_per_sec.max(1));
    let ns = u128::from(ticks) * 1_000_000_000 / tps;
    Nanos(u64::try_from(ns).unwrap_or(u64::MAX))
}

/// Parses a `stat` line; `ticks_per_sec` is the host's `sysconf(_SC_CLK_TCK)` (usually 100).
///
/// ```
/// use threadbalance_linux::parse::parse_stat;
/// use threadbalance_model::{CpuId, Nanos, ThreadState, Tid};
/// //          1    2          3 4  …                        14  15        22
/// let line = "4243 (a) b (c) R 1 4242 4242 0 -1 4194368 0 0 0 0 150 25 0 0 20 0 3 0 98765 \
///             0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
/// //          23 … 37                       38 39
/// let s = parse_stat(line, 100).unwrap();
/// assert_eq!(s.tid, Tid(4243));
/// assert_eq!(s.state, ThreadState::Running);
/// assert_eq!(s.utime, Nanos::from_millis(1500)); // 150 ticks at 100 Hz
/// assert_eq!(s.start_time, 98765);
/// assert_eq!(s.processor, CpuId(1));
/// ```
pub fn parse_stat(text: &str, ticks_per_sec: u64) -> Result<TaskStat, ParseError> {
    parse_stat_bytes(text.as_bytes(), ticks_per_sec)
}

/// [`parse_stat`] on raw bytes, as read from the file (no UTF-8 validation: `comm` may hold
/// any byte).
pub fn parse_stat_bytes(text: &[u8], ticks_per_sec: u64) -> Result<TaskStat, ParseError> {
    let err = |why: &str| ParseError::new("stat", why);
    let open = text
        .iter()
        .position(|&b| b == b'(')
        .ok_or_else(|| err("no '(' before comm"))?;
    let close = text
        .iter()
        .rposition(|&b| b == b')')
        .ok_or_else(|| err("no ')' after comm"))?;
    if close < open {
        return Err(err("')' before '('"));
    }
    let tid = parse_i64(text[..open].trim_ascii())
        .and_then(|n| i32::try_from(n).ok())
        .ok_or_else(|| err("field 1 (pid) is not a number"))?;
    // Fields 3.. follow ") ", separated by single spaces; field k is at index k - 3.
    let mut fields = text[close + 1..]
        .split(|&b| b == b' ' || b == b'\n')
        .filter(|f| !f.is_empty());
    let mut state = ThreadState::Other;
    let mut ppid = 0i32;
    let mut flags = 0u32;
    let mut utime = 0u64;
    let mut stime = 0u64;
    let mut start_time = 0u64;
    let mut processor = None;
    for field in 3..=39u32 {
        let f = fields.next().ok_or_else(|| {
            ParseError::new("stat", format!("truncated: field {field} is missing"))
        })?;
        let num = || {
            parse_u64(f)
                .ok_or_else(|| ParseError::new("stat", format!("field {field} is not a number")))
        };
        match field {
            3 => {
                if f.len() != 1 {
                    return Err(err("field 3 (state) is not one letter"));
                }
                state = ThreadState::from_letter(char::from(f[0]));
            }
            4 => {
                ppid = parse_i64(f)
                    .and_then(|n| i32::try_from(n).ok())
                    .ok_or_else(|| err("field 4 (ppid) is not a number"))?;
            }
            9 => flags = u32::try_from(num()?).map_err(|_| err("field 9 (flags) is too large"))?,
            14 => utime = num()?,
            15 => stime = num()?,
            22 => start_time = num()?,
            39 => {
                let p = u32::try_from(num()?).map_err(|_| err("field 39 is too large"))?;
                processor = Some(CpuId(p));
            }
            _ => {}
        }
    }
    Ok(TaskStat {
        tid: Tid(tid),
        state,
        ppid: Pid(ppid),
        flags,
        utime: ticks_to_nanos(utime, ticks_per_sec),
        stime: ticks_to_nanos(stime, ticks_per_sec),
        start_time,
        processor: processor.unwrap_or_default(),
    })
}

/// The `comm` of a `stat` line: the text between the first `(` and the last `)`.
///
/// ```
/// use threadbalance_linux::parse::parse_stat_comm;
/// assert_eq!(parse_stat_comm("7 (a) b (c) S 1"), Some("a) b (c"));
/// assert_eq!(parse_stat_comm("7 a"), None);
/// ```
pub fn parse_stat_comm(text: &str) -> Option<&str> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    text.get(open + 1..close)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line (from a `bash` thread), fields 3 onwards, for splicing after a comm.
    const REST: &str = "S 4045 4046 4046 34816 4046 4194560 1330 12057 0 3 \
        7 2 21 6 20 0 1 0 27581 5124096 1017 18446744073709551615 1 1 0 0 0 0 \
        65536 4 1266777851 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    fn line(comm: &str) -> String {
        format!("4046 ({comm}) {REST}")
    }

    #[test]
    fn parse_stat_real_line_extracts_fields() {
        let s = parse_stat(&line("bash"), 100).unwrap();
        assert_eq!(s.tid, Tid(4046));
        assert_eq!(s.state, ThreadState::Sleeping);
        assert_eq!(s.ppid, Pid(4045));
        assert_eq!(s.flags, 4_194_560);
        assert!(!s.is_kernel_thread());
        // utime 7 ticks, stime 2 ticks at 100 Hz: 70 ms and 20 ms.
        assert_eq!(s.utime, Nanos::from_millis(70));
        assert_eq!(s.stime, Nanos::from_millis(20));
        assert_eq!(s.start_time, 27581);
        assert_eq!(s.processor, CpuId(1));
    }

    #[test]
    fn parse_stat_weird_comms_use_last_paren() {
        for comm in ["a) b (c", "x\ny", ") (", "((", "))", " ", "", "S 1 2 3)"] {
            let text = line(comm);
            let s = parse_stat(&text, 100).unwrap_or_else(|e| panic!("{comm:?}: {e}"));
            assert_eq!(s.start_time, 27581, "{comm:?}");
            assert_eq!(s.processor, CpuId(1), "{comm:?}");
            assert_eq!(parse_stat_comm(&text), Some(comm));
        }
    }

    #[test]
    fn parse_stat_ticks_per_second_scales_times() {
        // 7 ticks at 250 Hz = 28 ms; at 1000 Hz = 7 ms.
        assert_eq!(
            parse_stat(&line("x"), 250).unwrap().utime,
            Nanos::from_millis(28)
        );
        assert_eq!(
            parse_stat(&line("x"), 1000).unwrap().utime,
            Nanos::from_millis(7)
        );
        // 0 Hz is nonsense; it is read as 1 Hz rather than dividing by zero.
        assert_eq!(
            parse_stat(&line("x"), 0).unwrap().utime,
            Nanos::from_secs(7)
        );
    }

    #[test]
    fn parse_stat_kernel_thread_flag() {
        let text = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 3 0 0 20 0 1 0 2 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0";
        let s = parse_stat(text, 100).unwrap();
        assert!(s.is_kernel_thread());
        assert_eq!(s.ppid, Pid(0));
        assert_eq!(s.processor, CpuId(0));
    }

    #[test]
    fn parse_stat_truncated_lines_are_errors() {
        let full = line("bash");
        // Every prefix that stops before field 39 is complete must fail, none may panic.
        let end39 = full.find(" 17 1 0").unwrap() + " 17 1".len();
        for cut in 0..end39 {
            if let Some(prefix) = full.get(..cut) {
                assert!(parse_stat(prefix, 100).is_err(), "prefix of {cut} bytes");
            }
        }
        assert!(parse_stat(&full[..end39], 100).is_ok());
    }

    #[test]
    fn parse_stat_garbage_is_an_error_not_a_panic() {
        let cases: &[&[u8]] = &[
            b"",
            b"\n",
            b")",
            b"(",
            b") x (",
            b"abc (x) S",
            b"1 (x) SS 1 2 3",
            b"99999999999 (x) S 1",
            b"\xff\xfe (\xff) \xff",
            b"1 (x) S -1 1 1 1 1 1 1 1 1 1 x 1 1 1 1 1 1 1 1",
        ];
        for c in cases {
            assert!(parse_stat_bytes(c, 100).is_err(), "{c:?}");
        }
        // Any byte soup: no panic.
        let mut x: u32 = 12345;
        for n in 0..2000 {
            let bytes: Vec<u8> = (0..(n % 300))
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                    b" ()0123456789SR-\n\xff"[(x >> 16) as usize % 17]
                })
                .collect();
            let _ = parse_stat_bytes(&bytes, 100);
        }
    }
}
