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
                    (rule.name.as_str(), placement.policy_name()),
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

/// The ```toml blocks of the crate's README.
fn readme_toml_blocks(readme: &str) -> Vec<String> {
    readme
        .split("```toml\n")
        .skip(1)
        .map(|b| b.split("```").next().unwrap().to_string())
        .collect()
}

#[test]
fn readme_config_examples_parse() {
    let readme = std::fs::read_to_string(repo("crates/daemon/README.md")).unwrap();
    let blocks = readme_toml_blocks(&readme);
    assert_eq!(blocks.len(), 2);
    for block in blocks {
        let c = threadbalance_daemon::Config::parse("README.md", &block);
        assert!(c.is_ok(), "{}", c.unwrap_err());
    }
}

/// The keys the parser knows in the table `head` opens, from the list its unknown-key
/// error gives.
fn known_keys(head: &str) -> Vec<String> {
    let text = format!("{head}\nno_such_key = 1\n");
    let line = threadbalance_daemon::Config::parse("t", &text)
        .unwrap_err()
        .to_string();
    let list = line.split("expected one of ").nth(1).unwrap();
    let mut keys: Vec<String> = list
        .split(", ")
        .map(|k| k.trim_matches('`').to_string())
        .collect();
    keys.sort();
    keys
}

/// The keys documented in the README section that starts with `heading`: the first cells
/// of its tables.
fn documented_keys(readme: &str, heading: &str) -> Vec<String> {
    let section = readme.split(heading).nth(1).unwrap();
    let section = section.split("\n### ").next().unwrap();
    let mut keys: Vec<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_string))
        .collect();
    keys.sort();
    keys
}

#[test]
fn readme_documents_every_key_and_no_other() {
    let readme = std::fs::read_to_string(repo("crates/daemon/README.md")).unwrap();
    assert_eq!(
        documented_keys(&readme, "### `[daemon]`"),
        known_keys("[daemon]")
    );
    let rule_keys = known_keys("[[rule]]\nname = \"r\"");
    assert_eq!(documented_keys(&readme, "### `[[rule]]`"), rule_keys);
    assert!(rule_keys.contains(&"min_busy_threads".to_string()));
}
