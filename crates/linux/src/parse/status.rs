//! `/proc/<pid>/task/<tid>/status`: `Key:\tvalue` lines (proc(5)).
//!
//! ```text
//!  Name:   worker 3
//!  Tgid:   4242
//!  Pid:    4243
//!  PPid:   1
//!  Cpus_allowed_list:      0-1
//!  voluntary_ctxt_switches:        66
//!  nonvoluntary_ctxt_switches:     30
//! ```
//!
//! Reading `status` costs several times what `stat` does (the kernel formats ~50 lines), so
//! the sampler reads it only when asked, and then only for the two context-switch counters
//! ([`parse_status_switches`]).

use super::{ParseError, parse_i64, parse_u64, trim};
use threadbalance_model::{CpuSet, Pid, Tid};

/// The fields of `status` that threadbalance uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskStatus {
    /// The thread's name (`Name`), with the kernel's escapes (`\n`, `\\`) left as they are.
    pub name: String,
    /// The process it belongs to (`Tgid`).
    pub tgid: Pid,
    /// The thread's own id (`Pid`).
    pub pid: Tid,
    /// Its parent process (`PPid`), when present.
    pub ppid: Option<Pid>,
    /// Times it gave up the CPU by blocking (`voluntary_ctxt_switches`), when present.
    pub voluntary: Option<u64>,
    /// Times it was preempted (`nonvoluntary_ctxt_switches`), when present.
    pub involuntary: Option<u64>,
    /// The CPUs it may run on (`Cpus_allowed_list`), when present.
    pub cpus_allowed: Option<CpuSet>,
}

fn lines(text: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    text.split(|&b| b == b'\n').filter_map(|line| {
        let colon = line.iter().position(|&b| b == b':')?;
        Some((&line[..colon], trim(&line[colon + 1..])))
    })
}

/// Parses a `status` file. `Name`, `Tgid` and `Pid` are required; the other fields are
/// `None` when absent and an error when present but malformed.
///
/// ```
/// use threadbalance_linux::parse::parse_status;
/// let s = parse_status("Name:\tw 1\nTgid:\t7\nPid:\t8\nCpus_allowed_list:\t0-1\n").unwrap();
/// assert_eq!((s.name.as_str(), s.tgid.0, s.pid.0), ("w 1", 7, 8));
/// assert_eq!(s.cpus_allowed.unwrap().to_string(), "0-1");
/// assert_eq!(s.voluntary, None);
/// ```
pub fn parse_status(text: &str) -> Result<TaskStatus, ParseError> {
    let err = |why: String| ParseError::new("status", why);
    let id = |key: &str, v: &[u8]| {
        parse_i64(v)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| err(format!("{key} is not a number")))
    };
    let count =
        |key: &str, v: &[u8]| parse_u64(v).ok_or_else(|| err(format!("{key} is not a number")));
    let mut name = None;
    let mut tgid = None;
    let mut pid = None;
    let mut out = TaskStatus::default();
    for (key, value) in lines(text.as_bytes()) {
        match key {
            b"Name" => name = Some(String::from_utf8_lossy(value).into_owned()),
            b"Tgid" => tgid = Some(Pid(id("Tgid", value)?)),
            b"Pid" => pid = Some(Tid(id("Pid", value)?)),
            b"PPid" => out.ppid = Some(Pid(id("PPid", value)?)),
            b"voluntary_ctxt_switches" => out.voluntary = Some(count("voluntary", value)?),
            b"nonvoluntary_ctxt_switches" => {
                out.involuntary = Some(count("nonvoluntary", value)?);
            }
            b"Cpus_allowed_list" => {
                let list = std::str::from_utf8(value)
                    .map_err(|_| err("Cpus_allowed_list is not text".into()))?;
                let set = CpuSet::parse_list(list).map_err(|e| ParseError {
                    refused: Some(e),
                    ..err("Cpus_allowed_list is not a CPU list".into())
                })?;
                out.cpus_allowed = Some(set);
            }
            _ => {}
        }
    }
    out.name = name.ok_or_else(|| err("no Name line".into()))?;
    out.tgid = tgid.ok_or_else(|| err("no Tgid line".into()))?;
    out.pid = pid.ok_or_else(|| err("no Pid line".into()))?;
    Ok(out)
}

/// The voluntary and involuntary context switches of a `status` file, scanned without
/// allocating (the sampler's path).
///
/// ```
/// use threadbalance_linux::parse::parse_status_switches;
/// let text = b"Name:\tx\nvoluntary_ctxt_switches:\t66\nnonvoluntary_ctxt_switches:\t30\n";
/// assert_eq!(parse_status_switches(text).unwrap(), (66, 30));
/// ```
pub fn parse_status_switches(text: &[u8]) -> Result<(u64, u64), ParseError> {
    let mut vol = None;
    let mut invol = None;
    for (key, value) in lines(text) {
        match key {
            b"voluntary_ctxt_switches" => vol = parse_u64(value),
            b"nonvoluntary_ctxt_switches" => invol = parse_u64(value),
            _ => {}
        }
    }
    match (vol, invol) {
        (Some(v), Some(i)) => Ok((v, i)),
        _ => Err(ParseError::new(
            "status",
            "context switch counts missing or malformed",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REAL: &str = "Name:\tbash\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t4046\n\
        Ngid:\t0\nPid:\t4046\nPPid:\t4045\nTracerPid:\t0\nUid:\t0\t0\t0\t0\nThreads:\t1\n\
        Cpus_allowed:\t3\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0\n\
        voluntary_ctxt_switches:\t66\nnonvoluntary_ctxt_switches:\t30\n";

    #[test]
    fn parse_status_real_file() {
        let s = parse_status(REAL).unwrap();
        assert_eq!(s.name, "bash");
        assert_eq!(s.tgid, Pid(4046));
        assert_eq!(s.pid, Tid(4046));
        assert_eq!(s.ppid, Some(Pid(4045)));
        assert_eq!(s.voluntary, Some(66));
        assert_eq!(s.involuntary, Some(30));
        assert_eq!(s.cpus_allowed, Some(CpuSet::parse_list("0-1").unwrap()));
        assert_eq!(parse_status_switches(REAL.as_bytes()).unwrap(), (66, 30));
    }

    #[test]
    fn parse_status_names_with_colons_spaces_and_escapes() {
        let s = parse_status("Name:\ta: b\\nc\nTgid:\t1\nPid:\t2\n").unwrap();
        assert_eq!(s.name, "a: b\\nc");
    }

    #[test]
    fn parse_status_truncated_or_garbage_is_error() {
        // Every prefix that stops before the Pid value fails.
        let pid_value = REAL.find("\nPid:\t").unwrap() + "\nPid:\t".len();
        for cut in 0..=pid_value {
            assert!(parse_status(&REAL[..cut]).is_err(), "prefix of {cut} bytes");
        }
        for bad in [
            "",
            "garbage",
            "Name:\tx\nTgid:\tx\nPid:\t1\n",
            "Name:\tx\nTgid:\t1\nPid:\t1\nCpus_allowed_list:\t3-1\n",
            "Name:\tx\nTgid:\t1\nPid:\t1\nvoluntary_ctxt_switches:\t-4\n",
        ] {
            assert!(parse_status(bad).is_err(), "{bad:?}");
        }
        assert!(parse_status_switches(b"voluntary_ctxt_switches:\t1\n").is_err());
        assert!(parse_status_switches(b"\xff:\xff\n").is_err());
    }
}
