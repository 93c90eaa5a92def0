//! Defaults, accepted forms, error placement and reload. The rejections themselves are
//! fixtures, one file each (`fixtures/daemon/`, tested by the integration tests).

use super::*;

#[test]
fn config_empty_file_gives_the_defaults() {
    let c = Config::parse("t.toml", "").unwrap();
    let d = &c.daemon;
    assert_eq!(d.cpus, None);
    assert!(d.banned_cpus.is_empty());
    assert!(d.kernel_banned);
    assert_eq!(d.metrics, Some("127.0.0.1:9464".parse().unwrap()));
    assert_eq!(
        d.control_socket,
        PathBuf::from("/run/threadbalance/control.sock")
    );
    assert_eq!(d.state_dir, PathBuf::from("/run/threadbalance"));
    assert!(!d.observe);
    assert_eq!(d.sample_interval, Nanos::from_secs(1));
    assert_eq!(d.busy_thread_percent, 50.0);
    assert!(c.rules.rules.is_empty());
}

#[test]
fn config_every_daemon_key_is_read() {
    let text = r#"
[daemon]
cpus = "0-7,16"
banned_cpus = "3"
kernel_banned = false
hands_off_comm = ["sshd", "chronyd"]
hands_off_pid_files = ["/run/app.pid"]
metrics = "off"
control_socket = "/run/tb/ctl.sock"
state_dir = "/var/lib/tb"
observe = true
sample_ms = 250
busy_thread_percent = 80
"#;
    let c = Config::parse("t.toml", text).unwrap();
    let d = &c.daemon;
    assert_eq!(d.cpus.as_ref().unwrap().to_string(), "0-7,16");
    assert_eq!(d.banned_cpus.to_string(), "3");
    assert!(!d.kernel_banned && d.observe);
    assert_eq!(d.metrics, None);
    assert_eq!(d.hands_off_pid_files, [PathBuf::from("/run/app.pid")]);
    assert_eq!(d.control_socket, PathBuf::from("/run/tb/ctl.sock"));
    assert_eq!(d.state_dir, PathBuf::from("/var/lib/tb"));
    assert_eq!(d.sample_interval, Nanos::from_millis(250));
    assert_eq!(d.busy_thread_percent, 80.0);
    let comms: Vec<&str> = c.rules.hands_off_comms.iter().map(String::as_str).collect();
    assert_eq!(comms, ["chronyd", "sshd"]);
}

#[test]
fn config_every_rule_key_is_read() {
    let text = r#"
[[rule]]
name = "all-keys"
comm = "^x$"
cmdline = "--fast"
cgroup = "/a/*"
user = 1000
min_threads = 2
min_busy_threads = 1
min_cpu_percent = 50.5
policy = "shuffling"
level = "llc"
interval_ms = 200
seed = 9
lock_threshold = 0.1

[[rule]]
name = "speedy"
user = "alice"
policy = "speed"
allow_numa = true
short_slices = false
"#;
    let c = Config::parse("t.toml", text).unwrap();
    let [r, s] = &c.rules.rules[..] else {
        panic!("two rules")
    };
    assert_eq!(r.line, Some(2));
    let k = &r.conditions;
    assert!(k.comm.is_some() && k.cmdline.is_some());
    assert!(matches!(&k.cgroup, Some(CgroupPattern::Glob { text, .. }) if text == "/a/*"));
    assert_eq!(k.user, Some(UserSpec::Uid(1000)));
    assert_eq!((k.min_threads, k.min_busy_threads), (Some(2), Some(1)));
    assert_eq!(k.min_cpu_percent, Some(50.5));
    let want = Placement {
        policy: parse_policy("shuffling").unwrap(),
        level: Some(Level::Llc),
        interval: Some(Nanos::from_millis(200)),
        seed: 9,
        lock_threshold: Some(0.1),
        allow_numa: None,
        short_slices: None,
    };
    assert_eq!(r.action, Action::Manage(want));
    assert_eq!(s.line, Some(17));
    assert_eq!(s.conditions.user, Some(UserSpec::Name("alice".into())));
    assert!(matches!(&s.action, Action::Manage(p) if p.allow_numa == Some(true)));
    assert!(matches!(&s.action, Action::Manage(p) if p.short_slices == Some(false)));
    // Only `speed` takes it.
    let e = Config::parse(
        "t.toml",
        "[[rule]]\nname = \"r\"\npolicy = \"tumbler\"\nshort_slices = true\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("short_slices: applies to policy speed only, not tumbler"),
        "{e}"
    );
}

#[test]
fn config_every_registry_policy_is_accepted() {
    for name in threadbalance_policy::names() {
        let text = format!("[[rule]]\nname = \"r\"\npolicy = \"{name}\"\n");
        assert!(Config::parse("t.toml", &text).is_ok(), "{name}");
    }
}

#[test]
fn config_error_on_a_key_points_at_its_line() {
    // The bad key is on line 5, inside the second table.
    let text = "[daemon]\nobserve = true\n\n[[rule]]\nmin_threads = -1\nname = \"r\"\n";
    let e = Config::parse("t.toml", text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml:5: rule \"r\": min_threads: invalid value: integer `-1`, expected a whole number ≥ 0"
    );
}

#[test]
fn config_error_in_a_rule_without_name_numbers_it() {
    let text = "[[rule]]\nname = \"a\"\npolicy = \"none\"\n\n[[rule]]\npolicy = \"none\"\n";
    let e = Config::parse("t.toml", text).unwrap_err();
    assert_eq!(e.to_string(), "t.toml:5: rule #2: missing field `name`");
}

#[test]
fn config_reload_good_text_replaces_the_config() {
    let old = Config::parse("t.toml", "[daemon]\nobserve = true\n").unwrap();
    let new = Config::reload(old, "[[rule]]\nname = \"r\"\npolicy = \"speed\"\n").unwrap();
    assert!(!new.daemon.observe);
    assert_eq!(new.rules.rules.len(), 1);
    assert_eq!(new.file, "t.toml");
}

#[test]
fn config_reload_bad_text_keeps_the_old_config_and_gives_one_line() {
    let old = Config::parse("t.toml", "[[rule]]\nname = \"r\"\npolicy = \"speed\"\n").unwrap();
    // The new file is valid TOML; its second rule's regex is not.
    let bad = "[[rule]]\nname = \"r\"\ncomm = \"^r$\"\npolicy = \"none\"\n\n[[rule]]\nname = \"s\"\ncomm = \"(\"\npolicy = \"speed\"\n";
    let (kept, line) = Config::reload(old, bad).unwrap_err();
    // Nothing of the new file leaked in: still one rule, still speed.
    assert_eq!(kept.rules.rules.len(), 1);
    assert!(matches!(&kept.rules.rules[0].action, Action::Manage(p) if p.policy_name() == "speed"));
    assert_eq!(
        line,
        "reload rejected, keeping the running config: t.toml:8: rule \"s\": comm: \
         bad regex \"(\": unclosed group"
    );
}

#[test]
fn parse_policy_is_the_registry_list() {
    assert!(parse_policy("tumbler").is_ok());
    assert!(parse_policy("Tumbler").is_err());
    assert!(parse_policy("").is_err());
}

#[test]
fn config_summary_names_rules_and_settings() {
    let none = Config::parse("a.toml", "").unwrap();
    assert_eq!(
        none.summary(),
        "a.toml: no rules (every process left alone), cpus all, banned config none + kernel's, \
         manage, metrics 127.0.0.1:9464"
    );
    let text = "[daemon]\ncpus = \"0-7\"\nbanned_cpus = \"0\"\nkernel_banned = false\n\n\
                [[rule]]\nname = \"a\"\ncomm = \"a\"\npolicy = \"none\"\n\n\
                [[rule]]\nname = \"b\"\npolicy = \"speed\"\n";
    let two = Config::parse("b.toml", text).unwrap();
    assert_eq!(
        two.summary(),
        "b.toml: 2 rules (a, b), cpus 0-7, banned config 0 only, manage, metrics 127.0.0.1:9464"
    );
}

/// A config of `n` rules, each with a condition, the last one named `last_name`.
fn many_rules(n: usize, last_name: &str) -> String {
    let mut text = String::from("[daemon]\nobserve = true\n");
    for i in 0..n {
        let name = if i + 1 == n {
            last_name.to_string()
        } else {
            format!("r{i}")
        };
        text.push_str(&format!(
            "\n[[rule]]\nname = \"{name}\"\nmin_threads = {}\npolicy = \"tumbler\"\n",
            i + 1
        ));
    }
    text
}

// See: issue 39, item 4: 40,000 rules took 80 s, each rule searching all before it.
#[test]
fn config_forty_thousand_rules_each_rule_at_its_line_and_duplicates_named() {
    let n = 40_000;
    let c = Config::parse("t.toml", &many_rules(n, "last")).unwrap();
    assert_eq!(c.rules.rules.len(), n);
    // Two header lines, then 5 lines per rule (blank, header, three keys).
    for (i, r) in c.rules.rules.iter().enumerate().step_by(997) {
        assert_eq!(r.line, Some(4 + 5 * i), "{}", r.name);
    }
    assert_eq!(c.rules.rules[n - 1].line, Some(4 + 5 * (n - 1)));
    // The last rule repeating the first's name is found, and names where the first is.
    let e = Config::parse("t.toml", &many_rules(n, "r0")).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "t.toml:{}: rule \"r0\": name: a rule named \"r0\" already exists (line 4)",
            4 + 5 * (n - 1) + 1
        )
    );
}

#[test]
fn line_counter_counts_each_byte_once_and_agrees_with_line_of() {
    let text = many_rules(500, "last");
    let offsets: Vec<usize> = text.match_indices("[[rule]]").map(|(at, _)| at).collect();
    let mut lines = LineCounter::new(&text);
    for &at in &offsets {
        assert_eq!(lines.line_of(at), line_of(&text, at));
    }
    // Linear: all the rules' lines together cost one pass over the text, not one per rule.
    assert!(
        lines.scanned <= text.len(),
        "{} > {}",
        lines.scanned,
        text.len()
    );
    // An offset before the last one starts again from the top and is still right.
    assert_eq!(lines.line_of(offsets[0]), line_of(&text, offsets[0]));
}
