use super::*;
use std::collections::BTreeMap;

/// The samples of an exposition text: `name{labels}` → value, with every line checked
/// against the format (a comment, a sample of a declared family, or the final `# EOF`).
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut families = Vec::new();
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "ends with # EOF");
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge"].contains(&kind), "{line}");
            families.push(name.to_string());
        } else if line.starts_with("# HELP ") || line.starts_with("# UNIT ") {
        } else {
            let (key, value) = line.rsplit_once(' ').unwrap();
            let name = key.split('{').next().unwrap();
            assert!(
                families
                    .iter()
                    .any(|f| name == f || name == format!("{f}_total")),
                "{name} has no # TYPE before it"
            );
            out.insert(key.to_string(), value.parse::<f64>().unwrap());
        }
    }
    out
}

#[test]
fn encode_fresh_metrics_unlabelled_families_at_zero() {
    let text = Metrics::new().encode().unwrap();
    let s = samples(&text);
    for (name, kind) in [
        ("threadbalance_managed_processes", "gauge"),
        ("threadbalance_managed_threads", "gauge"),
        ("threadbalance_cpu_seconds", "counter"),
        ("threadbalance_restore_failures", "counter"),
    ] {
        assert!(text.contains(&format!("# TYPE {name} {kind}\n")), "{name}");
    }
    // Families with labels are not written until a first sample is recorded (there is no
    // label value to write); the others start at 0.
    assert!(!text.contains("threadbalance_moves"));
    assert_eq!(s["threadbalance_managed_processes"], 0.0);
    assert_eq!(s["threadbalance_cpu_seconds_total"], 0.0);
    assert_eq!(s["threadbalance_restore_failures_total"], 0.0);
    assert!(!s.keys().any(|k| k.starts_with("threadbalance_moves")));
}

#[test]
fn encode_after_a_window_samples_match_what_was_recorded() {
    let m = Metrics::new();
    m.set_managed(2, 7);
    for _ in 0..3 {
        m.record_move("speed-rotate");
    }
    m.record_move("initial");
    m.set_domain_utilization("node0", 0.5);
    m.set_domain_utilization("node1", 1.7); // clamped to 1
    m.record_decision("speed");
    m.record_decision("speed");
    m.set_own_cpu_seconds(1.25);
    m.set_own_cpu_seconds(1.0); // a counter never goes back
    m.record_restore_failures(2);
    let s = samples(&m.encode().unwrap());
    let want = [
        ("threadbalance_managed_processes", 2.0),
        ("threadbalance_managed_threads", 7.0),
        // No group set in this window: the unlabelled gauge is written at 0.
        ("threadbalance_managed_groups", 0.0),
        ("threadbalance_moves_total{reason=\"speed-rotate\"}", 3.0),
        ("threadbalance_moves_total{reason=\"initial\"}", 1.0),
        (
            "threadbalance_domain_utilization_ratio{domain=\"node0\"}",
            0.5,
        ),
        (
            "threadbalance_domain_utilization_ratio{domain=\"node1\"}",
            1.0,
        ),
        (
            "threadbalance_policy_decisions_total{policy=\"speed\"}",
            2.0,
        ),
        ("threadbalance_cpu_seconds_total", 1.25),
        ("threadbalance_restore_failures_total", 2.0),
    ];
    for (k, v) in want {
        assert_eq!(s.get(k), Some(&v), "{k}");
    }
    assert_eq!(s.len(), want.len(), "{s:?}");
}

#[test]
fn clear_domains_after_reload_old_domains_gone() {
    let m = Metrics::new();
    m.set_domain_utilization("node3", 0.2);
    m.clear_domains();
    m.set_domain_utilization("llc0", f64::NAN); // NaN is reported as 0
    let s = samples(&m.encode().unwrap());
    assert_eq!(
        s.get("threadbalance_domain_utilization_ratio{domain=\"llc0\"}"),
        Some(&0.0)
    );
    assert!(!s.keys().any(|k| k.contains("node3")));
}

#[test]
fn reason_name_every_reason_kind() {
    use threadbalance_model::NodeId;
    let cases = [
        (
            Reason::Regroup {
                group: 1,
                util: 0.5,
                cv: 0.3,
            },
            "regroup",
        ),
        (
            Reason::Shuffle {
                group: 0,
                lock: 0.2,
            },
            "shuffle",
        ),
        (Reason::StaticGroup { group: 2 }, "static-group"),
        (Reason::Pin, "pin"),
        (Reason::Initial, "initial"),
        (Reason::SpeedRotate { lead_ms: -1.0 }, "speed-rotate"),
        (
            Reason::NumaBalance {
                from: NodeId(0),
                to: NodeId(1),
            },
            "numa-balance",
        ),
        (Reason::Release, "release"),
    ];
    for (r, want) in cases {
        assert_eq!(reason_name(&r), want);
    }
}

#[test]
fn own_cpu_seconds_grows_with_work_and_feeds_the_counter() {
    let before = own_cpu_seconds().unwrap();
    // Spin until the kernel has charged at least 20 ms more CPU time to this process.
    let mut x = 0u64;
    while own_cpu_seconds().unwrap() < before + 0.02 {
        x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    let after = own_cpu_seconds().unwrap();
    assert!(after >= before + 0.02);
    let m = Metrics::new();
    m.set_own_cpu_seconds(after);
    let s = samples(&m.encode().unwrap());
    assert_eq!(s["threadbalance_cpu_seconds_total"], after);
}

#[test]
fn set_groups_counts_groups_and_drops_those_gone() {
    // Window 1: group 1 (speed, 2 processes) and group 2 (tumbler, 1). Window 2: group 2
    // is gone and group 3 formed: only groups 1 and 3 are left, 2 groups in all.
    let m = Metrics::new();
    m.set_groups([(1, "speed", 2), (2, "tumbler", 1)].into_iter());
    let s = samples(&m.encode().unwrap());
    assert_eq!(s["threadbalance_managed_groups"], 2.0);
    assert_eq!(
        s["threadbalance_group_processes{group=\"1\",policy=\"speed\"}"],
        2.0
    );
    m.set_groups([(1, "speed", 2), (3, "speed", 1)].into_iter());
    let s = samples(&m.encode().unwrap());
    assert_eq!(s["threadbalance_managed_groups"], 2.0);
    assert!(!s.contains_key("threadbalance_group_processes{group=\"2\",policy=\"tumbler\"}"));
    assert_eq!(
        s["threadbalance_group_processes{group=\"3\",policy=\"speed\"}"],
        1.0
    );
    m.set_groups(std::iter::empty());
    let s = samples(&m.encode().unwrap());
    assert_eq!(s["threadbalance_managed_groups"], 0.0);
    assert!(
        !s.keys()
            .any(|k| k.starts_with("threadbalance_group_processes"))
    );
}
