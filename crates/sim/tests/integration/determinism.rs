//! Same seed → byte-identical output; another seed → another run.

use threadbalance_policy::Settings;
use threadbalance_sim::{compare, machine, workload};

fn json(seed: u64) -> String {
    let m = machine("opteron6320-4x8", None).unwrap();
    let w = workload("bodytrack:frames=8", Some(32), None).unwrap();
    let policies: Vec<String> = ["none", "tumbler", "shuffling", "pbind"]
        .iter()
        .filter(|p| threadbalance_policy::names().contains(p))
        .map(|p| p.to_string())
        .collect();
    let c = compare(
        &m,
        &w,
        &policies,
        seed,
        &Settings::new(m.topo.default_level()),
    )
    .unwrap();
    serde_json::to_string_pretty(&c.to_json()).unwrap() + &c.to_table() + &c.to_svg()
}

#[test]
fn determinism_same_seed_gives_byte_identical_json_table_and_svg() {
    let a = json(7);
    let b = json(7);
    assert_eq!(a, b);
    assert_ne!(a, json(8));
}

#[test]
fn determinism_json_has_the_documented_fields() {
    let m = machine("barcelona-4x4", None).unwrap();
    let w = workload("streamcluster:phases=10", Some(16), None).unwrap();
    let c = compare(
        &m,
        &w,
        &["none".into()],
        1,
        &Settings::new(m.topo.default_level()),
    )
    .unwrap();
    let v = c.to_json();
    let r = &v["results"][0];
    for k in [
        "policy",
        "runtime_s",
        "speedup_vs_none",
        "socket_util_cv",
        "cross_socket_handoff_frac",
        "lock_time_frac",
        "remote_access_frac",
        "migrations",
    ] {
        assert!(!r[k].is_null(), "missing {k} in {r}");
    }
    assert_eq!(r["speedup_vs_none"], 1.0);
    assert!(c.to_svg().starts_with("<svg"));
}
