//! Worked examples of matching: first match wins, thresholds at their edges, the default.

use super::*;
use crate::Config;

/// The rules of a small shared server, in the order an operator would write them.
const SERVER: &str = r#"
[daemon]
hands_off_comm = ["sshd"]

[[rule]]
name = "databases"
comm = "^(postgres|mysqld)$"
hands_off = true

[[rule]]
name = "batch"
cgroup = "/batch.slice"
user = "batch"
min_threads = 4
policy = "tumbler"
level = "node"

[[rule]]
name = "builds"
cmdline = "\\bmake\\b.* -j"
min_cpu_percent = 150
policy = "shuffling"

[[rule]]
name = "busy"
min_busy_threads = 2
policy = "speed"
"#;

fn server() -> Rules {
    Config::parse("server.toml", SERVER).unwrap().rules
}

/// The name of the rule that manages `facts`, or the hands-off reason.
fn outcome(rules: &Rules, facts: &ProcessFacts) -> String {
    match match_process(rules, facts) {
        Decision::Manage { rule, placement } => {
            format!("{} {}", rule.name, placement.policy_name())
        }
        Decision::HandsOff(HandsOff::Rule(rule)) => format!("hands off by {}", rule.name),
        Decision::HandsOff(why) => format!("hands off: {why:?}"),
    }
}

fn facts(comm: &str, edit: impl FnOnce(&mut ProcessFacts)) -> ProcessFacts {
    let mut f = ProcessFacts::example(comm);
    edit(&mut f);
    f
}

#[test]
fn match_process_busy_database_first_match_wins() {
    // postgres with 8 busy threads would match "busy", but "databases" comes first.
    let pg = facts("postgres", |f| f.busy_threads = 8);
    assert_eq!(outcome(&server(), &pg), "hands off by databases");
    // The regex is anchored: "postgres2" is not a database, so "busy" gets it.
    let pg2 = facts("postgres2", |f| f.busy_threads = 8);
    assert_eq!(outcome(&server(), &pg2), "busy speed");
}

#[test]
fn match_process_batch_rule_needs_every_condition() {
    // (cgroup, user, threads, expected): all three of cgroup, user and min_threads = 4.
    let cases = [
        ("/batch.slice/job-1.scope", "batch", 4, "batch tumbler"),
        ("/batch.slice/job-1.scope", "batch", 3, "hands off: NoRule"),
        ("/batch.slice/job-1.scope", "alice", 4, "hands off: NoRule"),
        ("/batch.slicer/job.scope", "batch", 4, "hands off: NoRule"),
        ("/batch.slice", "batch", 64, "batch tumbler"),
    ];
    for (cgroup, user, threads, want) in cases {
        let f = facts("job", |f| {
            f.cgroup = Some(cgroup.into());
            f.user = Some(user.into());
            f.threads = threads;
        });
        assert_eq!(outcome(&server(), &f), want, "{cgroup} {user} {threads}");
    }
}

#[test]
fn match_process_cpu_threshold_is_inclusive() {
    // min_cpu_percent = 150: 150 % (1.5 cores) matches, 149.9 % does not.
    let make = |cpu| {
        facts("make", |f| {
            f.cmdline = "make all -j16".into();
            f.cpu_percent = cpu;
        })
    };
    assert_eq!(outcome(&server(), &make(150.0)), "builds shuffling");
    assert_eq!(outcome(&server(), &make(149.9)), "hands off: NoRule");
}

#[test]
fn match_process_busy_threads_threshold_is_inclusive() {
    // min_busy_threads = 2: one busy thread is not enough, two are.
    let busy = |n| facts("encoder", |f| f.busy_threads = n);
    assert_eq!(outcome(&server(), &busy(1)), "hands off: NoRule");
    assert_eq!(outcome(&server(), &busy(2)), "busy speed");
}

#[test]
fn match_process_listed_and_kernel_processes_are_left_alone_before_rules() {
    let rules = {
        let mut r = server();
        r.hands_off_pids.insert(Pid(4242));
        r
    };
    let sshd = facts("sshd", |f| {
        f.pid = Pid(1);
        f.busy_threads = 4;
    });
    assert_eq!(outcome(&rules, &sshd), "hands off: ListedComm");
    let listed = facts("encoder", |f| f.busy_threads = 4); // pid 4242
    assert_eq!(outcome(&rules, &listed), "hands off: ListedPid");
    let kthread = facts("kworker/0:1", |f| {
        f.kernel_thread = true;
        f.busy_threads = 4;
    });
    assert_eq!(outcome(&rules, &kthread), "hands off: KernelThread");
}

#[test]
fn match_process_no_rules_is_hands_off() {
    let rules = Config::parse("empty.toml", "").unwrap().rules;
    let f = facts("anything", |f| f.busy_threads = 64);
    assert_eq!(outcome(&rules, &f), "hands off: NoRule");
}

#[test]
fn match_process_unknown_cgroup_or_user_name_fails_those_conditions() {
    let rules = Config::parse(
        "t.toml",
        "[[rule]]\nname = \"c\"\ncgroup = \"/\"\npolicy = \"none\"\n\n\
         [[rule]]\nname = \"u\"\nuser = \"alice\"\npolicy = \"none\"\n\n\
         [[rule]]\nname = \"uid\"\nuser = 1000\npolicy = \"none\"\n",
    )
    .unwrap()
    .rules;
    // cgroup "/" matches every known cgroup.
    assert_eq!(outcome(&rules, &ProcessFacts::example("a")), "c none");
    let no_cgroup = facts("a", |f| f.cgroup = None);
    assert_eq!(outcome(&rules, &no_cgroup), "u none");
    // uid 1000 without a passwd name: the name rule fails, the uid rule holds.
    let nameless = facts("a", |f| {
        f.cgroup = None;
        f.user = None;
    });
    assert_eq!(outcome(&rules, &nameless), "uid none");
}

#[test]
fn cgroup_pattern_forms_match_at_and_below() {
    // (pattern, path, matches?)
    let cases = [
        ("/system.slice", "/system.slice", true),
        ("/system.slice/", "/system.slice/a.service", true),
        ("/system.slice", "/system.slice2", false),
        ("/", "/anything/below", true),
        (
            "/user.slice/user-*.slice",
            "/user.slice/user-1000.slice",
            true,
        ),
        (
            "/user.slice/user-*.slice",
            "/user.slice/user-1000.slice/s.scope",
            true,
        ),
        (
            "/user.slice/user-*.slice",
            "/user.slice/x/user-1.slice",
            false,
        ),
        ("/kubepods/**/pod?", "/kubepods/burstable/x/pod7", true),
        ("/kubepods/**/pod?", "/kubepods/burstable/x/pod77", false),
        ("/a.b/*", "/aXb/c", false), // '.' is literal
    ];
    for (pattern, path, want) in cases {
        let p = CgroupPattern::parse(pattern).unwrap();
        assert_eq!(p.matches(path), want, "{pattern} vs {path}");
    }
}

#[test]
fn cgroup_pattern_relative_path_is_rejected() {
    let e = CgroupPattern::parse("system.slice")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("\"system.slice\" is not an absolute cgroup path"),
        "{e}"
    );
}

#[test]
fn placement_settings_fills_policy_settings() {
    let rules = server();
    let Action::Manage(p) = &rules.rules[1].action else {
        panic!("batch manages")
    };
    // The rule names level = "node", so the daemon's choice (package) is not used.
    let s = p.settings(Level::Package);
    assert_eq!((s.level, s.interval, s.seed), (Some(Level::Node), None, 1));
    let topo = threadbalance_model::Topology::synthetic("package:2 core:4 pu:1").unwrap();
    assert!(threadbalance_policy::build(p.policy_name(), &s, &topo).is_ok());
}

#[test]
fn decision_display_is_one_log_line_per_outcome() {
    let rules = {
        let mut r = server();
        r.hands_off_pids.insert(Pid(7));
        r
    };
    let cases = [
        (
            facts("x", |f| f.busy_threads = 2),
            "managed by rule \"busy\" (policy speed)",
        ),
        (
            facts("postgres", |_| ()),
            "left alone by rule \"databases\" (hands_off = true)",
        ),
        (facts("sshd", |_| ()), "left alone: name in hands_off_comm"),
        (
            facts("x", |f| f.pid = Pid(7)),
            "left alone: pid listed (hands_off_pid_files, or the daemon)",
        ),
        (
            facts("x", |f| f.kernel_thread = true),
            "left alone: kernel thread",
        ),
        (facts("x", |_| ()), "left alone: no rule matched"),
    ];
    for (f, want) in cases {
        assert_eq!(match_process(&rules, &f).to_string(), want);
    }
}

// See: issue 40, item 5: the daemon says why it does not manage what a rule almost matched.
#[test]
fn near_miss_packaged_rule_explains_pbzip2_and_stress_ng() {
    let rules = Config::parse(
        "t.toml",
        "[[rule]]\nname = \"busy\"\nmin_busy_threads = 2\npolicy = \"speed\"\n",
    )
    .unwrap()
    .rules;
    // pbzip2 on a loaded machine: 6 threads at 18 % each, none busy at 50 %.
    let pbzip2 = facts("pbzip2", |f| {
        (f.threads, f.busy_threads, f.cpu_percent, f.busiest_percent) = (6, 0, 108.0, 18.0)
    });
    let miss = near_miss(&rules, &pbzip2, 50.0).unwrap();
    assert_eq!(miss.rule.name, "busy");
    assert_eq!(
        miss.why,
        "0 busy threads (using 50 % of a core or more; its busiest used 18 %), the rule needs 2 \
         (6 threads using 108 % of a core in all)"
    );
    // A stress-ng worker: one thread at 100 %, a process of its own.
    let worker = facts("stress-ng-cpu", |f| {
        (f.threads, f.busy_threads, f.cpu_percent, f.busiest_percent) = (1, 1, 100.0, 100.0)
    });
    let why = near_miss(&rules, &worker, 50.0).unwrap().why;
    assert!(why.starts_with("1 busy thread (using 50 %"), "{why}");
    assert!(
        why.ends_with("forked workers are processes of one thread each"),
        "{why}"
    );
}

#[test]
fn near_miss_far_matched_or_left_alone_on_purpose_is_none() {
    let rules = server();
    // An idle shell: far from every threshold.
    assert!(near_miss(&rules, &facts("bash", |_| {}), 50.0).is_none());
    // Just under half of 2 busy threads' worth (0.5 × 2 × 50 % = 50 %).
    let under = facts("x", |f| (f.threads, f.cpu_percent) = (4, 49.0));
    assert!(near_miss(&rules, &under, 50.0).is_none());
    let at = facts("x", |f| (f.threads, f.cpu_percent) = (4, 50.0));
    assert_eq!(near_miss(&rules, &at, 50.0).unwrap().rule.name, "busy");
    // Managed: no miss. A database is left alone on purpose, and sshd is listed.
    let managed = facts("x", |f| f.busy_threads = 2);
    assert!(near_miss(&rules, &managed, 50.0).is_none());
    let pg = facts("postgres", |f| (f.threads, f.cpu_percent) = (4, 90.0));
    assert!(near_miss(&rules, &pg, 50.0).is_none());
    let sshd = facts("sshd", |f| (f.threads, f.cpu_percent) = (4, 90.0));
    assert!(near_miss(&rules, &sshd, 50.0).is_none());
}

#[test]
fn near_miss_other_conditions_must_hold_and_each_failure_is_named() {
    let rules = server();
    // make -j at 100 % of a core: "builds" needs 150 %; its cmdline holds, so it is the
    // near miss (it comes before "busy").
    let make = facts("make", |f| {
        (f.cmdline, f.threads, f.cpu_percent) = ("make -j8".into(), 1, 100.0)
    });
    let miss = near_miss(&rules, &make, 50.0).unwrap();
    assert_eq!(miss.rule.name, "builds");
    assert_eq!(miss.why, "100 % of a core, the rule needs 150 %");
    // The batch rule needs its cgroup and user: 3 threads in another cgroup are not close
    // to it (min_threads 4), and with no CPU use not close to "busy" either.
    let elsewhere = facts("job", |f| (f.user, f.threads) = (Some("batch".into()), 3));
    assert!(near_miss(&rules, &elsewhere, 50.0).is_none());
    let batch = facts("job", |f| {
        (f.user, f.cgroup, f.threads) = (Some("batch".into()), Some("/batch.slice/a".into()), 3)
    });
    assert_eq!(
        near_miss(&rules, &batch, 50.0).unwrap().why,
        "3 threads, the rule needs 4"
    );
}
