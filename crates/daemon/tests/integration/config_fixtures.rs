//! Every config rejection has a fixture file, and each gives exactly one line: the file,
//! the line, the rule or key, and what was wrong.

use crate::repo;
use threadbalance_daemon::read::read_config;
use threadbalance_daemon::{Config, ConfigError};

/// (fixture, the error after "<path>:"). Each line was read and judged to say plainly
/// what is wrong and where.
const REJECTIONS: &[(&str, &str)] = &[
    (
        "all-cpus-banned",
        "4: daemon: banned_cpus: bans every CPU of cpus = \"0-3\", leaving none to use",
    ),
    (
        "allow-numa-wrong-policy",
        "5: rule \"busy\": allow_numa: applies to policy speed only, not tumbler",
    ),
    (
        "bad-banned-cpus",
        "3: daemon: banned_cpus: bad CPU list \"two\": \"two\" is not a CPU number",
    ),
    (
        "bad-cgroup",
        "4: rule \"services\": cgroup: \"system.slice\" is not an absolute cgroup path (as /proc/<pid>/cgroup writes them: \"/system.slice\")",
    ),
    (
        "bad-cmdline-regex",
        "4: rule \"builds\": cmdline: bad regex \"make -j[0-9\": unclosed character class",
    ),
    (
        "bad-comm-regex",
        "4: rule \"encoders\": comm: bad regex \"^(ffmpeg|x264\": unclosed group",
    ),
    (
        "bad-cpus",
        "3: daemon: cpus: bad CPU list \"7-0\": range 7-0 runs backwards",
    ),
    (
        "bad-metrics",
        "3: daemon: metrics: \"localhost\" is not an address:port such as \"127.0.0.1:9464\" (or \"off\")",
    ),
    (
        "bad-rule-name",
        "3: rule \"busy programs\": name: \"busy programs\": use letters, digits, '-', '_' and '.' only",
    ),
    (
        "bad-user",
        "4: rule \"mine\": user: invalid type: boolean `true`, expected a user name or a numeric uid",
    ),
    (
        "busy-percent-range",
        "3: daemon: busy_thread_percent: 150 is not a share of one core in (0, 100]",
    ),
    (
        "duplicate-rule-names",
        "8: rule \"busy\": name: a rule named \"busy\" already exists (line 2)",
    ),
    (
        "empty-cpus",
        "3: daemon: cpus: empty CPU list (leave cpus out to use every CPU)",
    ),
    ("empty-user", "4: rule \"mine\": user: empty user name"),
    (
        "hands-off-with-policy",
        "6: rule \"databases\": policy: a hands_off rule manages nothing, so it takes no placement",
    ),
    (
        "interval-zero",
        "5: rule \"busy\": interval_ms: must be greater than 0",
    ),
    (
        "lock-threshold-range",
        "5: rule \"locky\": lock_threshold: 5 is not a fraction in [0, 1]",
    ),
    (
        "lock-threshold-wrong-policy",
        "5: rule \"busy\": lock_threshold: applies to policy shuffling only, not speed",
    ),
    (
        "long-hands-off-comm",
        "3: daemon: hands_off_comm: \"systemd-journald-audit\" can never match: a process name has 1 to 15 bytes",
    ),
    (
        "metrics-not-loopback",
        "3: daemon: metrics: 0.0.0.0:9464 is not a loopback address; set metrics_remote = true to serve metrics beyond this machine",
    ),
    (
        "negative-min-cpu",
        "4: rule \"cpu\": min_cpu_percent: -5 is not a percentage of a core ≥ 0",
    ),
    (
        "negative-min-threads",
        "4: rule \"threads\": min_threads: invalid value: integer `-2`, expected a whole number ≥ 0",
    ),
    (
        "negative-uid",
        "4: rule \"mine\": user: uid -1 is out of range",
    ),
    (
        "no-policy",
        "2: rule \"busy\": no policy (give policy = \"…\", or hands_off = true)",
    ),
    ("not-toml", "2: unclosed table, expected `]`"),
    (
        "relative-control-socket",
        "3: daemon: control_socket: \"control.sock\" is not an absolute path",
    ),
    (
        "relative-pid-file",
        "3: daemon: hands_off_pid_files: \"run/app.pid\" is not an absolute path",
    ),
    (
        "relative-state-dir",
        "3: daemon: state_dir: \"state\" is not an absolute path",
    ),
    (
        "rule-not-array",
        "2: rule: a single [rule] table: write each rule as [[rule]]",
    ),
    ("rule-without-name", "2: rule #1: missing field `name`"),
    (
        "sample-zero",
        "3: daemon: sample_ms: must be greater than 0",
    ),
    (
        "unknown-daemon-key",
        "4: daemon: cpu: unknown key `cpu`, expected one of `cpus`, `banned_cpus`, `kernel_banned`, `hands_off_comm`, `hands_off_pid_files`, `metrics`, `metrics_remote`, `control_socket`, `state_dir`, `observe`, `sample_ms`, `busy_thread_percent`",
    ),
    (
        "unknown-level",
        "5: rule \"busy\": level: unknown level \"rack\" (expected package, node, llc or core)",
    ),
    (
        "unknown-policy",
        "5: rule \"busy\": policy: unknown policy \"fastest\" (known: none, psets, pbind, tumbler, shuffling, handoff, speed, dino, numa-first-fit, numa-tm, numa-mb, numa-bce, numa-excl-base, numa-excl, numa-mb-plus)",
    ),
    (
        "unknown-rule-key",
        "4: rule \"encoders\": comn: unknown key `comn`, expected one of `name`, `comm`, `cmdline`, `cgroup`, `user`, `min_threads`, `min_busy_threads`, `min_cpu_percent`, `hands_off`, `policy`, `level`, `interval_ms`, `seed`, `lock_threshold`, `allow_numa`, `short_slices`",
    ),
    (
        "unknown-top-key",
        "2: unknown key `daemn`, expected `daemon` or `rule`",
    ),
    (
        "unreachable-rule",
        "6: rule \"busy\": can never match: rule \"everything\" before it has no conditions and matches every process",
    ),
    (
        "wrong-type",
        "3: daemon: observe: invalid type: string \"yes\", expected a boolean",
    ),
];

#[test]
fn config_each_rejection_fixture_gives_its_one_line() {
    for (name, want) in REJECTIONS {
        let path = repo(&format!("fixtures/daemon/{name}.toml"));
        let e = read_config(&path).unwrap_err();
        let line = e.to_string();
        assert!(!line.contains('\n'), "{name}: more than one line: {line}");
        assert_eq!(line, format!("{}:{want}", path.display()), "{name}");
    }
}

#[test]
fn config_every_rejection_fixture_is_tested_and_says_what_it_rejects() {
    let dir = repo("fixtures/daemon");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let tested: Vec<String> = REJECTIONS
        .iter()
        .map(|(n, _)| format!("{n}.toml"))
        .collect();
    assert_eq!(
        files, tested,
        "a fixture without a test, or a test without a fixture"
    );
    for file in files {
        let text = std::fs::read_to_string(dir.join(&file)).unwrap();
        assert!(
            text.starts_with("# Rejected: "),
            "{file} does not say what it rejects"
        );
    }
}

#[test]
fn config_reload_with_each_rejection_fixture_keeps_the_running_config() {
    let example = std::fs::read_to_string(repo("packaging/threadbalance.toml")).unwrap();
    for (name, want) in REJECTIONS {
        let old = Config::parse("threadbalance.toml", &example).unwrap();
        let text = std::fs::read_to_string(repo(&format!("fixtures/daemon/{name}.toml"))).unwrap();
        let (kept, line) = Config::reload(old, &text).unwrap_err();
        assert_eq!(kept.rules.rules[0].name, "busy", "{name}");
        assert_eq!(
            line,
            format!("reload rejected, keeping the running config: threadbalance.toml:{want}")
        );
    }
}

#[test]
fn config_unreadable_file_is_one_line_naming_it() {
    let path = repo("fixtures/daemon/no-such-file.toml");
    let e = read_config(&path).unwrap_err();
    let line = e.to_string();
    assert!(
        line.starts_with(&format!("{}: cannot read: ", path.display())),
        "{line}"
    );
    assert!(!line.contains('\n'));
    assert_eq!(ConfigError::EXIT_STATUS, 2);
}
