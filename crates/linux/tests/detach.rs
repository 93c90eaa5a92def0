//! The BPF probes give back every tracepoint attachment when dropped: their links are
//! closed on threads of their own, all at once (`threadbalance_linux::bpf`'s `Links`), and
//! none may be left open or closed twice. Counted in this process's open files: a BPF link
//! per attached tracepoint, `anon_inode:bpf_link`.
//!
//! A test binary of its own: no other test may open or close perf events in the process
//! while it counts. Needs root and tracefs (CI has both); where the probes cannot load, it
//! fails and says why.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use threadbalance_linux::bpf::FutexProbe;
use threadbalance_linux::schedbpf::SchedProbe;

/// This process's open BPF links.
fn links() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| l.to_string_lossy() == "anon_inode:bpf_link")
        })
        .count()
}

#[test]
fn dropping_the_probes_closes_every_tracepoint_they_attached() {
    let before = links();
    let sched = SchedProbe::load().expect("the BPF counters load (root, tracefs mounted)");
    let futex = FutexProbe::load().expect("the futex probe loads (root, tracefs mounted)");
    let attached = links() - before;
    // The counters' four tracepoints and at least the futex probe's two required ones.
    assert!(attached >= 4 + 2, "{attached} links opened");
    assert_eq!(attached, 4 + futex.attached().len());
    drop(sched);
    assert_eq!(links(), before + futex.attached().len());
    drop(futex);
    assert_eq!(links(), before);
    // And again: a second load attaches and detaches as cleanly as the first.
    let sched = SchedProbe::load().unwrap();
    assert_eq!(links(), before + 4);
    drop(sched);
    assert_eq!(links(), before);
}
