//! The processes this process forked to let its BPF links go (`crate::bpf`'s detaching
//! child): children of the tool that are not the managed program's orphans, however the
//! tool's children are listed (`run` is its command's subreaper, and adopts the children
//! it finds under itself as the command's orphans). A leaf: the sampler reads it, the BPF
//! host writes it.

use std::sync::Mutex;

/// The pids of the detaching children not yet reaped.
static OURS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Notes `pid`, a detaching child just forked.
pub fn note(pid: i32) {
    if let Ok(mut ours) = OURS.lock() {
        ours.push(pid);
    }
}

/// Whether `pid` is a detaching child of this process.
pub fn is_ours(pid: i32) -> bool {
    OURS.lock().is_ok_and(|ours| ours.contains(&pid))
}

/// Forgets `pid` once it has been reaped (its pid may then name another process).
pub fn forget(pid: i32) {
    if let Ok(mut ours) = OURS.lock() {
        ours.retain(|&p| p != pid);
    }
}

/// Reaps the detaching children that have exited, and forgets them: `attach` and the
/// daemon reap no other child, and each would stay a zombie until the tool exits.
pub fn reap() {
    let Ok(mut ours) = OURS.lock() else {
        return;
    };
    ours.retain(|&pid| {
        use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
        !matches!(
            waitpid(nix::unistd::Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
            Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(_)
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // The child is reaped by `reap`, which is what this checks.
    #[allow(clippy::zombie_processes)]
    fn an_exited_child_is_reaped_and_forgotten() {
        let child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        note(pid);
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while is_ours(pid) && std::time::Instant::now() < until {
            reap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!is_ours(pid), "still noted: not reaped");
        // Reaped: no zombie is left under this process.
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        assert!(stat.is_err(), "{stat:?}");
    }

    #[test]
    fn a_noted_pid_is_ours_until_forgotten() {
        // Pids no process of a test machine has: beyond the default pid_max.
        assert!(!is_ours(2_000_000_001));
        note(2_000_000_001);
        note(2_000_000_002);
        assert!(is_ours(2_000_000_001) && is_ours(2_000_000_002));
        forget(2_000_000_001);
        assert!(!is_ours(2_000_000_001) && is_ours(2_000_000_002));
        forget(2_000_000_002);
    }
}
