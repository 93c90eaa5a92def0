//! What may be managed, decided before anything is changed and without writing anything.
//!
//! ```text
//!  refusal(pid):   pid 1 · ourselves · a kernel thread (PF_KTHREAD) · a zombie  ─► why
//!  may_set_affinity(pid), the kernel's own rule for sched_setaffinity, read not tried:
//!      CAP_SYS_NICE in our effective set, or our euid is the target's real or effective
//!      uid ─► and /proc/<pid>/environ opens (ptrace read access) ─► Ok
//! ```
//!
//! The check used to set the leader's mask to its current value. The kernel records any
//! `sched_setaffinity` as the user's request (`user_cpus_ptr`), so a leader whose cpuset
//! was narrowed at that instant stayed narrow after the cpuset widened again — a change
//! made by a dry run. Reading the credentials changes nothing.

use crate::LinuxError;
use crate::parse::parse_stat;
use crate::read::{Root, process_error};
use threadbalance_model::{Pid, ThreadState};

/// `CAP_SYS_NICE`: may change any process's scheduling, affinity included.
const CAP_SYS_NICE: u32 = 23;

/// Why process `pid` is not a user program we may manage, or `None` when it is one.
/// `me` is our own pid. A process that cannot be read is an error.
pub fn refusal(root: &Root, pid: Pid, me: Pid) -> Result<Option<String>, LinuxError> {
    if pid.0 == 1 {
        return Ok(Some(format!(
            "process {pid} is init: its mask is inherited by every process it starts"
        )));
    }
    if pid == me {
        return Ok(Some(format!("process {pid} is this threadbalance itself")));
    }
    let path = root.proc_dir(pid).join("stat");
    let text = std::fs::read_to_string(&path).map_err(|e| process_error(pid, &path, e))?;
    let stat = parse_stat(&text, 100).map_err(|e| LinuxError::parse(&path, e))?;
    if stat.is_kernel_thread() {
        return Ok(Some(format!("process {pid} is a kernel thread")));
    }
    if matches!(stat.state, ThreadState::Zombie | ThreadState::Dead) {
        return Ok(Some(format!(
            "process {pid} is a zombie (it has exited and waits for its parent to reap it)"
        )));
    }
    Ok(None)
}

/// Credentials of a process, from its `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Creds {
    /// Real user id.
    pub uid: u32,
    /// Effective user id.
    pub euid: u32,
    /// Effective capability set.
    pub cap_eff: u64,
}

/// The credentials in a `status` text.
pub fn parse_creds(status: &str) -> Option<Creds> {
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
    let mut uids = field("Uid:")?.split_whitespace();
    let uid = uids.next()?.parse().ok()?;
    let euid = uids.next()?.parse().ok()?;
    let cap_eff = u64::from_str_radix(field("CapEff:")?.trim(), 16).ok()?;
    Some(Creds { uid, euid, cap_eff })
}

/// Whether we run with effective uid 0, from `proc/self/status` under `root`.
pub fn we_are_root(root: &Root) -> bool {
    std::fs::read_to_string(root.join("proc/self/status"))
        .ok()
        .and_then(|t| parse_creds(&t))
        .is_some_and(|c| c.euid == 0)
}

/// Whether we hold `CAP_SYS_NICE` (root does), from `proc/self/status` under `root`: what
/// changing and restoring any thread's time slice needs (see [`crate::slice`]).
pub fn we_may_renice_any(root: &Root) -> bool {
    std::fs::read_to_string(root.join("proc/self/status"))
        .ok()
        .and_then(|t| parse_creds(&t))
        .is_some_and(|c| c.cap_eff & (1 << CAP_SYS_NICE) != 0)
}

/// The kernel's rule for `sched_setaffinity` on another process (`check_same_owner` or
/// `CAP_SYS_NICE`), applied to credentials.
pub fn may_set(ours: &Creds, theirs: &Creds) -> bool {
    ours.cap_eff & (1 << CAP_SYS_NICE) != 0 || ours.euid == theirs.uid || ours.euid == theirs.euid
}

/// Why we may not change the affinity of a process's threads.
#[derive(Debug, thiserror::Error)]
pub enum AffinityRefused {
    /// `/proc/self/status` could not be read or parsed.
    #[error("cannot read our own credentials")]
    OwnCredentials,
    /// The process's `status` could not be read or parsed.
    #[error("process {pid}: cannot read its credentials")]
    Credentials {
        /// The process.
        pid: Pid,
    },
    /// Another user's process, and we lack `CAP_SYS_NICE`.
    #[error("process {pid} belongs to uid {uid} and we are uid {euid} without CAP_SYS_NICE")]
    NotOwner {
        /// The process.
        pid: Pid,
        /// Its owner.
        uid: u32,
        /// Our effective uid.
        euid: u32,
    },
    /// Its `environ` may not be opened by us (ptrace access mode).
    #[error("process {pid} may not be inspected by us ({source})")]
    NotInspectable {
        /// The process.
        pid: Pid,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Whether we may change the affinity of `pid`'s threads, found out without changing any:
/// `Err` says why not.
pub fn may_set_affinity(root: &Root, pid: Pid) -> Result<(), AffinityRefused> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| parse_creds(&t))
    };
    let self_status = root.join("proc/self/status");
    let ours = read(&self_status).ok_or(AffinityRefused::OwnCredentials)?;
    let theirs =
        read(&root.proc_dir(pid).join("status")).ok_or(AffinityRefused::Credentials { pid })?;
    if !may_set(&ours, &theirs) {
        return Err(AffinityRefused::NotOwner {
            pid,
            uid: theirs.uid,
            euid: ours.euid,
        });
    }
    let environ = root.proc_dir(pid).join("environ");
    std::fs::File::open(&environ)
        .map(drop)
        .map_err(|source| AffinityRefused::NotInspectable { pid, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(uid: u32, euid: u32, cap: u64) -> Creds {
        Creds {
            uid,
            euid,
            cap_eff: cap,
        }
    }

    #[test]
    fn parse_creds_reads_uids_and_effective_caps() {
        let status =
            "Name:\tx\nUid:\t1000\t1001\t1002\t1003\nCapInh:\t0\nCapEff:\t0000000000800000\n";
        assert_eq!(parse_creds(status), Some(creds(1000, 1001, 1 << 23)));
        assert_eq!(parse_creds("Name:\tx\n"), None);
    }

    #[test]
    fn may_set_same_owner_or_cap_sys_nice_only() {
        let root_caps = creds(0, 0, 0x1ff_ffff_ffff);
        assert!(may_set(&root_caps, &creds(1000, 1000, 0)));
        assert!(may_set(&creds(1000, 1000, 0), &creds(1000, 1000, 0)));
        // Their effective uid matching our euid is enough (a setuid program we started).
        assert!(may_set(&creds(1000, 1000, 0), &creds(0, 1000, 0)));
        assert!(!may_set(&creds(1000, 1000, 0), &creds(1001, 1001, 0)));
        // Root without CAP_SYS_NICE (bit 23) may still change root's own processes only.
        assert!(!may_set(&creds(0, 0, !(1 << 23)), &creds(5, 5, 0)));
    }

    #[test]
    fn refusal_pid_one_and_ourselves_without_reading() {
        let root = Root::new("/nonexistent");
        assert!(
            refusal(&root, Pid(1), Pid(9))
                .unwrap()
                .unwrap()
                .contains("init")
        );
        assert!(
            refusal(&root, Pid(9), Pid(9))
                .unwrap()
                .unwrap()
                .contains("itself")
        );
    }

    #[test]
    fn refusal_kernel_thread_and_zombie_from_stat() {
        let dir = tempfile::tempdir().unwrap();
        let put = |pid: i32, state: char, flags: u32| {
            let d = dir.path().join(format!("proc/{pid}"));
            std::fs::create_dir_all(&d).unwrap();
            let line = format!(
                "{pid} (x) {state} 0 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
            );
            std::fs::write(d.join("stat"), line).unwrap();
        };
        put(2, 'S', 0x0020_8040);
        put(3, 'Z', 0x0040_0000);
        put(4, 'S', 0x0040_0000);
        let root = Root::new(dir.path());
        let r = |p| refusal(&root, Pid(p), Pid(99)).unwrap();
        assert!(r(2).unwrap().contains("kernel thread"));
        assert!(r(3).unwrap().contains("zombie"));
        assert_eq!(r(4), None);
        assert!(refusal(&root, Pid(5), Pid(99)).is_err());
    }
}
