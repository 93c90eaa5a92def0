//! What the rules look at: facts about one process over a sampling window, made from two
//! readings of its `/proc` entries.
//!
//! A rule's thresholds are rates (CPU use, busy threads), so one look at `/proc` is not
//! enough. The shell reads each process twice ([`crate::read::read_process`]), some
//! interval apart, and [`facts_between`] turns the pair into [`ProcessFacts`]:
//!
//! ```text
//!  reading at t0                 reading at t1                  facts over t1 - t0
//!  proc stat:  utime+stime 4.0 s  proc stat: 5.5 s        ──►   cpu_percent = 1.5 s / 1 s = 150 %
//!  task 11:  2.0 s                task 11:  2.9 s         ──►   90 % of a core: busy (≥ 50 %)
//!  task 12:  2.0 s                task 12:  2.6 s         ──►   60 %: busy
//!  (no 13)                        task 13:  0.0 s         ──►   new: not busy yet
//!                                                                threads = 3, busy_threads = 2
//! ```
//!
//! The parsers here take the files' text and are pure; only [`crate::read`] opens files.

use crate::error::ParseError;
use std::collections::BTreeMap;
use threadbalance_model::{Nanos, Pid, Tid};

/// Facts about one process over one sampling window: what [`crate::match_process`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessFacts {
    /// The process id.
    pub pid: Pid,
    /// Its name (`/proc/<pid>/comm`, at most 15 bytes).
    pub comm: String,
    /// Its command line, arguments joined by single spaces (`/proc/<pid>/cmdline`).
    pub cmdline: String,
    /// Its cgroup (`/proc/<pid>/cgroup`, the v2 `0::` line), when known.
    pub cgroup: Option<String>,
    /// Its effective user id (`/proc/<pid>/status`, `Uid:`, second field).
    pub uid: u32,
    /// The name of `uid` in `/etc/passwd`, when it has one.
    pub user: Option<String>,
    /// Its threads at the end of the window (`/proc/<pid>/task/*`).
    pub threads: u32,
    /// Its threads that used at least the busy threshold of a core over the window.
    pub busy_threads: u32,
    /// Its CPU use over the window, in percent of one core (user plus system time from
    /// `/proc/<pid>/stat`, over the window's length).
    pub cpu_percent: f64,
    /// The CPU use of its busiest thread over the window, in percent of one core (what a
    /// `min_busy_threads` near miss reports against `busy_thread_percent`).
    pub busiest_percent: f64,
    /// Whether it is a kernel thread (`PF_KTHREAD` in `stat`).
    pub kernel_thread: bool,
}

impl ProcessFacts {
    /// An ordinary idle process named `comm`: pid 4242, uid 1000 (`alice`), one thread, no
    /// CPU use, cgroup `/user.slice`. Tests and examples start from it and change a field.
    pub fn example(comm: &str) -> ProcessFacts {
        ProcessFacts {
            pid: Pid(4242),
            comm: comm.to_string(),
            cmdline: comm.to_string(),
            cgroup: Some("/user.slice".to_string()),
            uid: 1000,
            user: Some("alice".to_string()),
            threads: 1,
            busy_threads: 0,
            cpu_percent: 0.0,
            busiest_percent: 0.0,
            kernel_thread: false,
        }
    }
}

/// One look at a process's `/proc` entries.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessReading {
    /// The process id.
    pub pid: Pid,
    /// When it started, in clock ticks since boot (`stat` field 22): a pid reused by a new
    /// process between two readings has a different start.
    pub start_time: u64,
    /// Its name (`comm`).
    pub comm: String,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// Its cgroup as the rules see it ([`CgroupPaths::rule_path`]), when `cgroup` names one.
    pub cgroup: Option<String>,
    /// Its cgroup in a v1 `cpuset` hierarchy, on hosts that mount one (v1-only or hybrid).
    pub cpuset_v1: Option<String>,
    /// Its effective user id.
    pub uid: u32,
    /// Whether it is a kernel thread.
    pub kernel_thread: bool,
    /// User plus system time of the whole process, threads gone included (`stat`).
    pub cpu_time: Nanos,
    /// User plus system time of each live thread (`task/<tid>/stat`).
    pub threads: BTreeMap<Tid, Nanos>,
}

/// User names by uid, from `/etc/passwd` ([`parse_passwd`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Users {
    /// Name of each uid; the first line naming a uid wins, as for `getpwuid`.
    pub names: BTreeMap<u32, String>,
}

impl Users {
    /// The name of `uid`, if it has one.
    pub fn name(&self, uid: u32) -> Option<&str> {
        self.names.get(&uid).map(String::as_str)
    }
}

/// Turns two readings of one process, `elapsed` apart, into the facts rules match on.
/// A thread is busy when it ran at least `busy_thread_percent` of a core over the window;
/// a thread that appeared during the window counts, but not as busy. When the pid was
/// reused (the start times differ) or `elapsed` is zero, nothing is busy and CPU use is 0.
///
/// ```
/// use std::collections::BTreeMap;
/// use threadbalance_daemon::process::{ProcessReading, Users, facts_between};
/// use threadbalance_model::{Nanos, Pid, Tid};
/// let at = |cpu_ms, threads: &[(i32, u64)]| ProcessReading {
///     pid: Pid(7), start_time: 1, comm: "x".into(), cmdline: "x".into(), cgroup: None, cpuset_v1: None,
///     uid: 0, kernel_thread: false, cpu_time: Nanos::from_millis(cpu_ms),
///     threads: threads.iter().map(|&(t, ms)| (Tid(t), Nanos::from_millis(ms))).collect(),
/// };
/// let f = facts_between(&at(4000, &[(11, 2000), (12, 2000)]),
///                       &at(5500, &[(11, 2900), (12, 2600), (13, 0)]),
///                       Nanos::from_secs(1), 50.0, &Users::default());
/// assert_eq!((f.threads, f.busy_threads), (3, 2));
/// assert!((f.cpu_percent - 150.0).abs() < 1e-9); // 1.5 s of CPU in 1 s
/// ```
pub fn facts_between(
    before: &ProcessReading,
    after: &ProcessReading,
    elapsed: Nanos,
    busy_thread_percent: f64,
    users: &Users,
) -> ProcessFacts {
    let same = before.pid == after.pid && before.start_time == after.start_time;
    let percent = |from: Nanos, to: Nanos| {
        if !same || elapsed == Nanos::ZERO {
            return 0.0;
        }
        to.0.saturating_sub(from.0) as f64 / elapsed.0 as f64 * 100.0
    };
    let used: Vec<f64> = after
        .threads
        .iter()
        .filter_map(|(tid, &now)| before.threads.get(tid).map(|&then| percent(then, now)))
        .collect();
    let busy = used.iter().filter(|&&p| p >= busy_thread_percent).count();
    let busiest = used.iter().copied().fold(0.0, f64::max);
    ProcessFacts {
        pid: after.pid,
        comm: after.comm.clone(),
        cmdline: after.cmdline.clone(),
        cgroup: after.cgroup.clone(),
        uid: after.uid,
        user: users.name(after.uid).map(str::to_string),
        threads: u32::try_from(after.threads.len()).unwrap_or(u32::MAX),
        busy_threads: u32::try_from(busy).unwrap_or(u32::MAX),
        cpu_percent: percent(before.cpu_time, after.cpu_time),
        busiest_percent: busiest,
        kernel_thread: after.kernel_thread,
    }
}

/// Parses `/proc/<pid>/cmdline`: arguments separated (and ended) by NUL bytes, joined here
/// by single spaces. Bytes that are not UTF-8 are replaced.
///
/// ```
/// use threadbalance_daemon::process::parse_cmdline;
/// assert_eq!(parse_cmdline(b"ffmpeg\0-i\0in.mkv\0"), "ffmpeg -i in.mkv");
/// assert_eq!(parse_cmdline(b""), "");
/// ```
pub fn parse_cmdline(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let args: Vec<&str> = text.trim_end_matches('\0').split('\0').collect();
    args.join(" ")
}

/// The lines of `/proc/<pid>/cgroup` the daemon uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CgroupPaths {
    /// The cgroup v2 path (`0::/path`), when the host mounts v2 (alone or hybrid).
    pub unified: Option<String>,
    /// The path in the v1 `cpuset` hierarchy, when the host mounts one.
    pub cpuset_v1: Option<String>,
}

impl CgroupPaths {
    /// The path rules compare: the v2 one, else (v1-only host) the `cpuset` hierarchy's.
    pub fn rule_path(&self) -> Option<&str> {
        self.unified.as_deref().or(self.cpuset_v1.as_deref())
    }
}

/// Parses `/proc/<pid>/cgroup` (`hierarchy-id:controllers:path` lines). A line without two
/// colons, anywhere, is an error naming its number.
///
/// ```
/// use threadbalance_daemon::process::parse_cgroup;
/// let v2 = parse_cgroup("0::/system.slice/nginx.service\n").unwrap();
/// assert_eq!(v2.rule_path(), Some("/system.slice/nginx.service"));
/// // A hybrid host: v2 for the rules, the v1 cpuset hierarchy for the CPUs.
/// let hybrid = parse_cgroup("4:cpu,cpuacct:/a\n3:cpuset:/b\n0::/c\n").unwrap();
/// assert_eq!((hybrid.rule_path(), hybrid.cpuset_v1.as_deref()), (Some("/c"), Some("/b")));
/// assert!(parse_cgroup("garbage\n").is_err());
/// ```
pub fn parse_cgroup(text: &str) -> Result<CgroupPaths, ParseError> {
    let (mut v2, mut cpuset) = (None, None);
    for (i, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(ParseError::CgroupLine {
                line: i + 1,
                text: line.to_string(),
            });
        };
        if id == "0" && controllers.is_empty() {
            v2 = Some(path.to_string());
        } else if controllers.split(',').any(|c| c == "cpuset") {
            cpuset = Some(path.to_string());
        }
    }
    Ok(CgroupPaths {
        unified: v2,
        cpuset_v1: cpuset,
    })
}

/// Parses the effective user id from `/proc/<pid>/status` (`Uid:` real, effective, saved,
/// filesystem).
///
/// ```
/// use threadbalance_daemon::process::parse_uid;
/// assert_eq!(parse_uid("Name:\tx\nUid:\t1000\t0\t0\t0\n").unwrap(), 0);
/// assert!(parse_uid("Name:\tx\n").is_err());
/// assert!(parse_uid("Uid:\tme\n").is_err());
/// ```
pub fn parse_uid(status: &str) -> Result<u32, ParseError> {
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .ok_or(ParseError::NoUid)?;
    let mut ids = line.split_whitespace();
    let effective = ids
        .nth(1)
        .ok_or_else(|| ParseError::UidShort(line.to_string()))?;
    effective
        .parse()
        .map_err(|_| ParseError::NotUid(effective.to_string()))
}

/// Parses `/etc/passwd` (`name:password:uid:…` lines) into user names by uid. Comments,
/// NIS `+`/`-` lines and lines without a numeric uid are skipped: the file is the
/// administrator's, and a line the daemon cannot use only means a name it cannot match.
///
/// ```
/// use threadbalance_daemon::process::parse_passwd;
/// let users = parse_passwd("root:x:0:0::/root:/bin/sh\n# c\n+nis\npg:x:999:999::/:/bin/false\n");
/// assert_eq!((users.name(0), users.name(999), users.name(5)), (Some("root"), Some("pg"), None));
/// ```
pub fn parse_passwd(text: &str) -> Users {
    let mut users = Users::default();
    for line in text.lines() {
        if line.starts_with(['#', '+', '-']) {
            continue;
        }
        let mut fields = line.split(':');
        let (Some(name), Some(_), Some(uid)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        if let Ok(uid) = uid.parse() {
            users.names.entry(uid).or_insert_with(|| name.to_string());
        }
    }
    users
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(start: u64, cpu_ms: u64, threads: &[(i32, u64)]) -> ProcessReading {
        ProcessReading {
            pid: Pid(7),
            start_time: start,
            comm: "app".into(),
            cmdline: "app --fast".into(),
            cgroup: Some("/app.slice".into()),
            cpuset_v1: None,
            uid: 999,
            kernel_thread: false,
            cpu_time: Nanos::from_millis(cpu_ms),
            threads: threads
                .iter()
                .map(|&(t, ms)| (Tid(t), Nanos::from_millis(ms)))
                .collect(),
        }
    }

    #[test]
    fn facts_between_two_second_window_counts_busy_threads_at_threshold() {
        // Window 2 s, threshold 50 % of a core = 1 s of CPU per thread.
        // tid 1: 1000 ms → busy (exactly 50 %); tid 2: 999 ms → not; tid 3 gone; tid 4 new.
        let before = reading(5, 0, &[(1, 0), (2, 1), (3, 0)]);
        let after = reading(5, 3000, &[(1, 1000), (2, 1000), (4, 500)]);
        let users = parse_passwd("pg:x:999:999::/:/bin/false\n");
        let f = facts_between(&before, &after, Nanos::from_secs(2), 50.0, &users);
        assert_eq!((f.threads, f.busy_threads), (3, 1));
        // 3 s of CPU in 2 s = 150 % of a core.
        assert!((f.cpu_percent - 150.0).abs() < 1e-9);
        assert_eq!(f.user.as_deref(), Some("pg"));
        assert_eq!(f.cgroup.as_deref(), Some("/app.slice"));
    }

    #[test]
    fn facts_between_reused_pid_counts_no_cpu() {
        // Same pid, new start time: the 9 s of CPU belong to another process's life.
        let before = reading(5, 0, &[(1, 0)]);
        let after = reading(6, 9000, &[(1, 9000)]);
        let f = facts_between(
            &before,
            &after,
            Nanos::from_secs(1),
            50.0,
            &Users::default(),
        );
        assert_eq!((f.busy_threads, f.cpu_percent), (0, 0.0));
        assert_eq!(f.user, None);
    }

    #[test]
    fn facts_between_zero_window_counts_no_cpu() {
        let r = reading(5, 100, &[(1, 100)]);
        let f = facts_between(&r, &r, Nanos::ZERO, 50.0, &Users::default());
        assert_eq!((f.busy_threads, f.cpu_percent), (0, 0.0));
    }

    #[test]
    fn parse_cgroup_v2_line_wins_over_v1_cpuset() {
        let text = "3:cpuset:/v1\n0::/v2/x.scope\n";
        let paths = parse_cgroup(text).unwrap();
        assert_eq!(paths.rule_path(), Some("/v2/x.scope"));
        assert_eq!(paths.cpuset_v1.as_deref(), Some("/v1"));
    }

    #[test]
    fn parse_cgroup_without_v2_or_cpuset_is_none() {
        assert_eq!(
            parse_cgroup("4:cpu,cpuacct:/a\n").unwrap().rule_path(),
            None
        );
        assert_eq!(parse_cgroup("").unwrap(), CgroupPaths::default());
    }

    #[test]
    fn parse_cgroup_malformed_second_line_names_it() {
        let e = parse_cgroup("0::/a\n").and(parse_cgroup("1:cpu:/a\nbad line\n"));
        assert_eq!(
            e.unwrap_err().to_string(),
            "line 2: \"bad line\" is not hierarchy-id:controllers:path"
        );
    }

    #[test]
    fn parse_cmdline_keeps_empty_arguments_in_the_middle() {
        // `sh -c ''` has an empty third argument.
        assert_eq!(parse_cmdline(b"sh\0-c\0\0"), "sh -c");
        assert_eq!(parse_cmdline(b"a\0\0b\0"), "a  b");
    }

    #[test]
    fn parse_uid_short_line_is_an_error() {
        assert_eq!(
            parse_uid("Uid:\t1000\n").unwrap_err().to_string(),
            "Uid:\t1000 has fewer than two ids"
        );
    }

    #[test]
    fn parse_passwd_first_line_for_a_uid_wins() {
        let users = parse_passwd("root:x:0:0::/:/bin/sh\ntoor:x:0:0::/:/bin/sh\nbad\nx:y:z\n");
        assert_eq!(users.name(0), Some("root"));
        assert_eq!(users.names.len(), 1);
    }
}
