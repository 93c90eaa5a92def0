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

#[cfg(test)]
mod tests {
    use super::*;

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
