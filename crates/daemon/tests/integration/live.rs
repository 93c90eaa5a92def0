//! The readers on this machine's own `/proc` and `/sys`: the kernel's real formats, not
//! the fixtures' idea of them. They read only (this test process, the kernel's settings)
//! and change nothing.

use std::os::unix::fs::MetadataExt;
use threadbalance_daemon::read::{
    Root, cpuset_cgroup, read_comms, read_competitors, read_cpuset_effective, read_kernel_bans,
    read_process, read_users,
};
use threadbalance_daemon::{Config, Decision, match_process};
use threadbalance_linux::HostFacts;
use threadbalance_model::{Pid, Tid};

fn own_pid() -> Pid {
    Pid(i32::try_from(std::process::id()).unwrap())
}

#[test]
fn live_read_process_own_process_matches_what_the_kernel_says() {
    let root = Root::system();
    let hz = HostFacts::system().unwrap().ticks_per_sec;
    let me = read_process(&root, own_pid(), hz).unwrap().unwrap();
    let comm = std::fs::read_to_string("/proc/self/comm").unwrap();
    assert_eq!(me.comm, comm.trim_end_matches('\n'));
    // The test harness runs this binary by its path, with the test filter after it.
    assert!(me.cmdline.contains("integration"), "{}", me.cmdline);
    // /proc/<pid> belongs to the process's effective user.
    assert_eq!(me.uid, std::fs::metadata("/proc/self").unwrap().uid());
    assert!(me.threads.contains_key(&Tid(own_pid().0)));
    assert!(!me.kernel_thread);
    let users = read_users(&root).unwrap();
    if me.uid == 0 {
        assert_eq!(users.name(0), Some("root"));
    }
}

#[test]
fn live_read_comms_lists_this_process() {
    let comms = read_comms(&Root::system()).unwrap();
    assert!(comms.iter().any(|(pid, _)| *pid == own_pid()));
}

#[test]
fn live_kernel_bans_competitors_and_cpuset_read_cleanly() {
    let root = Root::system();
    let bans = read_kernel_bans(&root).unwrap();
    // `isolcpus=` CPUs isolated from the scheduler's domains (no flags means `domain`)
    // are the ones the kernel lists in `isolated`.
    let flags = &bans.cmdline.isolcpus_flags;
    if flags.is_empty() || flags.iter().any(|f| f == "domain") {
        assert!(bans.cmdline.isolcpus.is_subset(&bans.isolated), "{bans:?}");
    }
    let comms = read_comms(&root).unwrap();
    for warning in read_competitors(&root, &comms).unwrap() {
        assert!(!warning.to_string().contains('\n'), "{warning}");
    }
    let hz = HostFacts::system().unwrap().ticks_per_sec;
    let me = read_process(&root, own_pid(), hz).unwrap().unwrap();
    if let Some(cgroup) = cpuset_cgroup(&me) {
        // Read, whichever hierarchy holds it; absent is allowed (no cpuset controller).
        read_cpuset_effective(&root, &cgroup).unwrap();
    }
}

#[test]
fn live_example_rules_decide_for_every_process_without_error() {
    let root = Root::system();
    let hz = HostFacts::system().unwrap().ticks_per_sec;
    let text = std::fs::read_to_string(crate::repo("packaging/threadbalance.toml")).unwrap();
    let config = Config::parse("threadbalance.toml", &text).unwrap();
    let users = read_users(&root).unwrap();
    for (pid, _) in read_comms(&root).unwrap() {
        // A process may exit between the listing and the reading: then it is None.
        let Some(r) = read_process(&root, pid, hz).unwrap() else {
            continue;
        };
        let facts = threadbalance_daemon::process::facts_between(
            &r,
            &r,
            config.daemon.sample_interval,
            config.daemon.busy_thread_percent,
            &users,
        );
        // One reading twice: no time passed, so nothing is busy and no rule matches.
        let d = match_process(&config.rules, &facts);
        assert!(matches!(d, Decision::HandsOff(_)), "{pid}: {d}");
    }
}
