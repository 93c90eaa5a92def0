//! The packaged example config: it parses, and it manages any program with at least two
//! busy threads under `speed`, leaving everything else alone.

use crate::repo;
use threadbalance_daemon::read::read_config;
use threadbalance_daemon::{Decision, HandsOff, ProcessFacts, match_process};

#[test]
fn example_config_parses_with_loopback_metrics() {
    let c = read_config(&repo("packaging/threadbalance.toml")).unwrap();
    assert!(c.daemon.metrics.unwrap().ip().is_loopback());
    assert!(!c.daemon.observe);
    assert_eq!(c.rules.rules.len(), 1);
}

#[test]
fn example_config_manages_two_busy_threads_under_speed() {
    let c = read_config(&repo("packaging/threadbalance.toml")).unwrap();
    // (busy threads, threads, cpu %, managed?): busy threads decide, not the thread count
    // or the total CPU use (one thread at 100 % is one busy thread).
    let cases = [
        (2, 2, 100.0, true),
        (8, 64, 800.0, true),
        (1, 64, 100.0, false),
        (0, 1, 0.0, false),
    ];
    for (busy, threads, cpu, managed) in cases {
        let mut f = ProcessFacts::example("encoder");
        (f.busy_threads, f.threads, f.cpu_percent) = (busy, threads, cpu);
        match match_process(&c.rules, &f) {
            Decision::Manage { rule, placement } => {
                assert!(managed, "{busy} busy threads managed");
                assert_eq!(
                    (rule.name.as_str(), placement.policy.as_str()),
                    ("busy", "speed")
                );
            }
            Decision::HandsOff(why) => {
                assert!(!managed, "{busy} busy threads left alone");
                assert!(matches!(why, HandsOff::NoRule));
            }
        }
    }
}

#[test]
fn example_config_leaves_sshd_alone_however_busy() {
    let c = read_config(&repo("packaging/threadbalance.toml")).unwrap();
    let mut f = ProcessFacts::example("sshd");
    f.busy_threads = 4;
    assert!(matches!(
        match_process(&c.rules, &f),
        Decision::HandsOff(HandsOff::ListedComm)
    ));
}
