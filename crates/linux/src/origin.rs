//! Whose mask is it? A thread's mask was set by us, by its program, or narrowed by its
//! cpuset, and only the first is ours to change or put back.
//!
//! ```text
//!  current mask of a thread we moved (read right before each move, and at restore)
//!    == its original ............................ Original  (ours to manage, nothing to undo)
//!    == the LAST mask we set on it ................ Ours
//!    == the one before, the last set in flight .... Ours      (a journal cut right after a `set`)
//!    == last ∩ cpuset (or the cpuset, when that
//!       is empty or the kernel predates 6.2) ...... Cpuset    (ours, narrowed: keep tracking,
//!                                                              put the original back at the end)
//!    == original ∩ cpuset ......................... Original
//!    anything else ................................ Program   (hands off, never put back)
//! ```
//!
//! **The last mask, not any mask.** A mask counts as ours only when it is the last one we
//! set on that thread. On two CPUs at `--level core` a thread soon has held both single
//! CPUs; a program that pins it to one of them after we moved it elsewhere made its own
//! choice, and comparing with every mask ever set would take it for ours.
//!
//! **The cpuset.** The kernel narrows every mask to the thread's cpuset: when a cgroup's
//! `cpuset.cpus` shrinks, a thread we set on `{0}` may show `{1}`, and when it widens again
//! (Linux 6.2 and later keep the mask last asked for) it shows `{0}` again. A mask that is
//! ours narrowed by the cpuset is the cpuset's doing, never the program's: the thread stays
//! ours and gets its original back at the end. The cpuset is read from
//! `/proc/<pid>/task/<tid>/cgroup`, then `cpuset.effective_cpus` of its cgroup-v1 cpuset
//! hierarchy (`/sys/fs/cgroup/cpuset`), else `cpuset.cpus.effective` of its cgroup-v2
//! group (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified` on a hybrid system), walking up to
//! the nearest group that has the file.
//!
//! **Threads born pinned.** A thread starts with its creator's mask, so a thread born after
//! we moved its creator carries a mask of ours, and is widened back at the end (see
//! [`crate::ledger`]). The kernel does not say which thread created a thread, so a thread
//! that pins itself as it starts (a pool pinning its workers, OpenMP `proc_bind`) to a
//! single CPU that one of our threads also holds looks inherited. One thing tells them
//! apart: a thread that inherited a single CPU was placed on it at birth and can never have
//! migrated, while one that pinned itself to another CPU than its creator's had to move
//! there (`se.nr_migrations` in `/proc/<pid>/task/<tid>/sched`). Such a thread, never moved
//! by us, is the program's: kept as it is, during the run and after.
//!
//! **Who set it, where it can be seen.** Where the BPF trace of `sched_setaffinity` is
//! loaded ([`crate::setters`]), each thread's last set is known to be the tool's or someone
//! else's, and that decides before any mask is compared ([`Setter`]):
//!
//! ```text
//!  the last sched_setaffinity on the thread, since it started (the trace)
//!    by someone else, after our last set ........ Program   (whatever the mask: even one
//!                                                              equal to ours, or the original)
//!    by the tool, nothing by anyone else since .. the rules above, except that a mask
//!                                                 they cannot explain is the kernel's (cpuset,
//!                                                 CPU hot-plug): Cpuset, never Program
//!    no record (no trace, set before it loaded) .. the rules above, unchanged
//! ```
//!
//! A thread never moved by us that set its own mask is the program's whatever its mask;
//! one the trace saw set by no one inherited it ([`born_pinned`]).
//!
//! **What stays ambiguous.** Without a trace of who called `sched_setaffinity`:
//! - a program that sets exactly the mask we last set on that thread, after we set it, is
//!   indistinguishable from us (and gets its original back at the end);
//! - a thread born on the very CPU it then pins itself to, that CPU held by one of our
//!   threads, looks inherited (nothing had to move);
//! - a program that sets its mask between our read and our write (a few microseconds)
//!   is overwritten by that one write; the next read sees ours.
//!
//! ```
//! use threadbalance_linux::origin::{Setter, Whose, judge};
//! use threadbalance_model::CpuSet;
//! let m = |s: &str| CpuSet::parse_list(s).unwrap();
//! // Original 0-1; we set {1}, then {0}. The thread now shows {1}: the program's.
//! let ours = [m("1"), m("0")];
//! let none = Setter::Unknown;
//! assert_eq!(judge(&m("0-1"), &ours, false, &m("1"), none, || None), Whose::Program);
//! // The same {1}, but its cpuset shrank to {1}: ours narrowed by the cpuset.
//! assert_eq!(judge(&m("0-1"), &ours, false, &m("1"), none, || Some(m("1"))), Whose::Cpuset);
//! // The program set {0} itself, the very mask we set last: the trace says it is its own.
//! assert_eq!(judge(&m("0-1"), &ours, false, &m("0"), Setter::Program, || None), Whose::Program);
//! ```

use crate::read::Root;
use std::path::{Path, PathBuf};
use threadbalance_model::{CpuSet, Pid, Tid};

/// Who the current mask of a thread we moved belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whose {
    /// The thread is on its original mask (perhaps narrowed by its cpuset).
    Original,
    /// The last mask we set.
    Ours,
    /// The last mask we set, narrowed by the thread's cpuset: still ours.
    Cpuset,
    /// Neither: the program set it. Hands off.
    Program,
}

/// Who made the last `sched_setaffinity` on a thread since it started, as the trace of
/// those calls says ([`crate::setters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setter {
    /// Not known: no trace loaded, or it holds no record of the thread (set before it
    /// loaded, or never set), or it cannot vouch for it.
    Unknown,
    /// The tool, and no one else since.
    Tool,
    /// Someone else (the program, or any task but the tool), after the tool's last set.
    Program,
}

/// What the kernel makes of mask `m` in a cpuset of `cpus`: their intersection, or the
/// whole cpuset when that is empty.
pub fn narrow(m: &CpuSet, cpus: &CpuSet) -> CpuSet {
    let both = m.intersection(cpus);
    if both.is_empty() { cpus.clone() } else { both }
}

/// Judges `current`, the mask of a thread whose mask before we touched it was `original`
/// and on which we set `ours` (the latest last). `in_flight`: the last of them may not have
/// reached the thread (a journal that ends right after announcing it). `setter`: who made
/// the thread's last `sched_setaffinity`, where a trace says ([`Setter::Program`] decides
/// alone; [`Setter::Tool`] makes a mask the rules cannot explain the kernel's). `cpuset`
/// is asked only when the mask is neither the original nor ours.
pub fn judge(
    original: &CpuSet,
    ours: &[CpuSet],
    in_flight: bool,
    current: &CpuSet,
    setter: Setter,
    cpuset: impl FnOnce() -> Option<CpuSet>,
) -> Whose {
    match (setter, by_masks(original, ours, in_flight, current, cpuset)) {
        (Setter::Program, _) => Whose::Program,
        // No one but us set it since our last set: the kernel changed it.
        (Setter::Tool, Whose::Program) => Whose::Cpuset,
        (_, whose) => whose,
    }
}

/// [`judge`] from the masks alone (see the module docs).
fn by_masks(
    original: &CpuSet,
    ours: &[CpuSet],
    in_flight: bool,
    current: &CpuSet,
    cpuset: impl FnOnce() -> Option<CpuSet>,
) -> Whose {
    if current == original {
        return Whose::Original;
    }
    let last = ours.last();
    let before = if in_flight {
        ours.len().checked_sub(2).and_then(|i| ours.get(i))
    } else {
        None
    };
    if last == Some(current) || before == Some(current) {
        return Whose::Ours;
    }
    let Some(cpus) = cpuset() else {
        return Whose::Program;
    };
    let narrowed = |m: &CpuSet| narrow(m, &cpus) == *current;
    if last.is_some_and(narrowed) || before.is_some_and(narrowed) || *current == cpus {
        return Whose::Cpuset;
    }
    if narrowed(original) {
        return Whose::Original;
    }
    Whose::Program
}

/// The cgroup path of the cpuset hierarchy in a `/proc/<pid>/cgroup` text: the path of the
/// cgroup-v1 line naming the `cpuset` controller (`true`), else that of the v2 line
/// (`0::/path`, `false`).
pub fn parse_cgroup(text: &str) -> Option<(String, bool)> {
    let mut v2 = None;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == "cpuset") {
            return Some((path.to_string(), true));
        }
        if id == "0" && controllers.is_empty() {
            v2 = Some((path.to_string(), false));
        }
    }
    v2
}

/// The CPUs the cpuset of thread `tid` of `pid` allows (see the module docs), `None` when
/// no cpuset file is found (no cgroups, or the thread has gone).
pub fn read_cpuset(root: &Root, pid: Pid, tid: Tid) -> Option<CpuSet> {
    let text = std::fs::read_to_string(root.task_dir(pid, tid).join("cgroup")).ok()?;
    let (path, v1) = parse_cgroup(&text)?;
    let rel = path.trim_start_matches('/');
    let tries: Vec<(PathBuf, &str)> = if v1 {
        vec![(root.join("sys/fs/cgroup/cpuset"), "cpuset.effective_cpus")]
    } else {
        vec![
            (root.join("sys/fs/cgroup"), "cpuset.cpus.effective"),
            (root.join("sys/fs/cgroup/unified"), "cpuset.cpus.effective"),
        ]
    };
    tries
        .iter()
        .find_map(|(mount, file)| nearest(mount, rel, file))
}

/// `file` of the group `rel` under `mount`, or of its nearest ancestor that has one.
fn nearest(mount: &Path, rel: &str, file: &str) -> Option<CpuSet> {
    let mut dir = mount.join(rel);
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join(file))
            && let Ok(cpus) = CpuSet::parse_list(text.trim())
            && !cpus.is_empty()
        {
            return Some(cpus);
        }
        if dir == mount || !dir.pop() || !dir.starts_with(mount) {
            return None;
        }
    }
}

/// `se.nr_migrations` of a `/proc/<pid>/task/<tid>/sched` text: how many times the thread
/// moved to another CPU since it started.
pub fn parse_migrations(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("se.nr_migrations")?;
        rest.trim_start().strip_prefix(':')?.trim().parse().ok()
    })
}

/// [`parse_migrations`] of thread `tid` of `pid`; `None` when the file is missing (a
/// kernel built without it) or the thread has gone.
pub fn read_migrations(root: &Root, pid: Pid, tid: Tid) -> Option<u64> {
    let text = std::fs::read_to_string(root.task_dir(pid, tid).join("sched")).ok()?;
    parse_migrations(&text)
}

/// Whether a thread never moved by us, born with `current` while one of our threads
/// holds it, pinned itself there (see the module docs): a single CPU it had to migrate to.
pub fn pinned_itself(current: &CpuSet, migrations: Option<u64>) -> bool {
    current.len() == 1 && migrations.is_some_and(|n| n > 0)
}

/// Whether a thread never moved by us, born with `current` while one of our threads
/// holds it, set that mask itself: the trace says so where it can ([`Setter::Program`]:
/// yes, [`Setter::Tool`]: no), else [`pinned_itself`] with its `migrations`, asked only then.
pub fn born_pinned(
    current: &CpuSet,
    setter: Setter,
    migrations: impl FnOnce() -> Option<u64>,
) -> bool {
    match setter {
        Setter::Program => true,
        Setter::Tool => false,
        Setter::Unknown => pinned_itself(current, migrations()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> CpuSet {
        CpuSet::parse_list(s).unwrap()
    }

    /// (original, ours, in flight, current, cpuset, verdict)
    type Case = (
        &'static str,
        &'static [&'static str],
        bool,
        &'static str,
        Option<&'static str>,
        Whose,
    );

    #[test]
    fn judge_table_of_cases() {
        let cases: [Case; 11] = [
            ("0-3", &["0"], false, "0-3", None, Whose::Original),
            ("0-3", &["0"], false, "0", None, Whose::Ours),
            // {1} was ours once, {0} is ours now: {1} is the program's.
            ("0-3", &["1", "0"], false, "1", None, Whose::Program),
            ("0-3", &["1", "0"], false, "1", Some("0-3"), Whose::Program),
            // The journal ends right after announcing {0}: {1} may still be in place.
            ("0-3", &["1", "0"], true, "1", None, Whose::Ours),
            // {0-1} ∩ cpuset {1-3} = {1}.
            ("0-3", &["0-1"], false, "1", Some("1-3"), Whose::Cpuset),
            // {0} ∩ cpuset {1} is empty: the kernel gives the whole cpuset.
            ("0-1", &["1", "0"], false, "1", Some("1"), Whose::Cpuset),
            // The original narrowed by the cpuset: {0-1} ∩ {1-3} = {1}; ours, {0}, would
            // have become the whole cpuset {1-3}.
            ("0-1", &["1", "0"], false, "1", Some("1-3"), Whose::Original),
            // Neither ours narrowed nor the original narrowed.
            ("0-3", &["0"], false, "2", Some("1-3"), Whose::Program),
            ("0-3", &["0"], false, "2", Some("0-3"), Whose::Program),
            ("0-3", &[], false, "2", None, Whose::Program),
        ];
        for (i, (orig, ours, flight, cur, cpuset, want)) in cases.into_iter().enumerate() {
            let ours: Vec<CpuSet> = ours.iter().map(|s| m(s)).collect();
            let got = judge(&m(orig), &ours, flight, &m(cur), Setter::Unknown, || {
                cpuset.map(m)
            });
            assert_eq!(got, want, "case {i}");
        }
    }

    #[test]
    fn judge_with_the_trace_the_setter_decides_before_the_masks() {
        let ours = [m("1"), m("0")];
        let judge_as = |cur: &str, setter, cpuset: Option<&str>| {
            judge(&m("0-1"), &ours, false, &m(cur), setter, || cpuset.map(m))
        };
        // The program set {0}, the very mask we set last: the masks alone say ours.
        assert_eq!(judge_as("0", Setter::Unknown, None), Whose::Ours);
        assert_eq!(judge_as("0", Setter::Program, None), Whose::Program);
        // ...and the original, or a mask we once set: the program's all the same.
        assert_eq!(judge_as("0-1", Setter::Program, None), Whose::Program);
        assert_eq!(judge_as("1", Setter::Program, Some("1")), Whose::Program);
        // No one but us set it: {1} (once ours, not the last) is the kernel's doing (a
        // cpuset we cannot read), not the program's as the masks alone would say.
        assert_eq!(judge_as("1", Setter::Unknown, None), Whose::Program);
        assert_eq!(judge_as("1", Setter::Tool, None), Whose::Cpuset);
        // The trace agrees with the masks otherwise.
        assert_eq!(judge_as("0", Setter::Tool, None), Whose::Ours);
        assert_eq!(judge_as("0-1", Setter::Tool, None), Whose::Original);
        assert_eq!(judge_as("1", Setter::Tool, Some("1")), Whose::Cpuset);
    }

    #[test]
    fn born_pinned_trusts_the_trace_then_the_migrations() {
        let asked = std::cell::Cell::new(false);
        let migrations = |n| {
            asked.set(true);
            Some(n)
        };
        // Born on the CPU it then pinned itself to: never migrated, yet the program's.
        assert!(born_pinned(&m("1"), Setter::Program, || migrations(0)));
        assert!(!asked.get());
        // Any mask the program set, not only a single CPU.
        assert!(born_pinned(&m("0-1"), Setter::Program, || None));
        assert!(!born_pinned(&m("1"), Setter::Tool, || migrations(5)));
        // Without the trace: the migrations decide, as before.
        assert!(!born_pinned(&m("1"), Setter::Unknown, || migrations(0)));
        assert!(asked.get());
        assert!(born_pinned(&m("1"), Setter::Unknown, || migrations(3)));
    }

    #[test]
    fn parse_cgroup_prefers_the_v1_cpuset_line_then_v2() {
        let hybrid = "9:name=systemd:/\n3:cpuset:/tb\n0::/user.slice\n";
        assert_eq!(parse_cgroup(hybrid), Some(("/tb".into(), true)));
        let joined = "4:cpu,cpuset,cpuacct:/a/b\n";
        assert_eq!(parse_cgroup(joined), Some(("/a/b".into(), true)));
        assert_eq!(
            parse_cgroup("0::/system.slice/x.service\n"),
            Some(("/system.slice/x.service".into(), false))
        );
        assert_eq!(parse_cgroup("4:memory:/m\n"), None);
        assert_eq!(parse_cgroup(""), None);
    }

    #[test]
    fn parse_migrations_reads_the_count_from_a_sched_file() {
        let text = "sleep (4242, #threads: 1)\n---\nse.exec_start   :   1.5\n\
                    se.nr_migrations                             :                    7\n\
                    nr_switches   :   3\n";
        assert_eq!(parse_migrations(text), Some(7));
        assert_eq!(parse_migrations("nr_switches : 3\n"), None);
    }

    #[test]
    fn read_cpuset_walks_up_to_the_nearest_group_with_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = Root::new(dir.path());
        let task = root.task_dir(Pid(5), Tid(6));
        std::fs::create_dir_all(&task).unwrap();
        // cgroup v2: the thread's group has no cpuset file, its parent has.
        std::fs::write(task.join("cgroup"), "0::/a/b\n").unwrap();
        let a = root.join("sys/fs/cgroup/a");
        std::fs::create_dir_all(a.join("b")).unwrap();
        std::fs::write(a.join("cpuset.cpus.effective"), "2-3\n").unwrap();
        assert_eq!(read_cpuset(&root, Pid(5), Tid(6)), Some(m("2-3")));
        // cgroup v1: the cpuset hierarchy wins.
        std::fs::write(task.join("cgroup"), "3:cpuset:/c\n0::/a/b\n").unwrap();
        let c = root.join("sys/fs/cgroup/cpuset/c");
        std::fs::create_dir_all(&c).unwrap();
        std::fs::write(c.join("cpuset.effective_cpus"), "1\n").unwrap();
        assert_eq!(read_cpuset(&root, Pid(5), Tid(6)), Some(m("1")));
        // No file anywhere up to the mount: unknown.
        std::fs::write(task.join("cgroup"), "0::/z\n").unwrap();
        std::fs::remove_file(a.join("cpuset.cpus.effective")).unwrap();
        assert_eq!(read_cpuset(&root, Pid(5), Tid(6)), None);
    }
}
