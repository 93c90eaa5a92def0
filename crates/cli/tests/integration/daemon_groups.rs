//! Live tests of the daemon's groups: processes that share CPUs under one policy and level
//! are balanced by one policy instance, and leave it one by one (see `daemon.rs` for the
//! helpers; each test's rules match only the workloads it started).

use crate::daemon::{
    Daemon, LIMIT, config_text, scrape, second_rule, socket, spmd, tagged, wait_changed,
};
use crate::support::{online, wait_for, worker_masks};
use std::collections::BTreeSet;

/// The CPUs of a list such as `0-1,4`.
fn cpus(list: &str) -> BTreeSet<u32> {
    let mut out = BTreeSet::new();
    for part in list.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => {
                out.insert(part.parse().unwrap());
            }
        }
    }
    out
}

/// `ctl list`'s row of `pid`, split in columns (PID COMM RULE POLICY THREADS STATE GROUP).
fn row(list: &str, pid: u32) -> Option<Vec<String>> {
    list.lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .find(|f| f.first().map(String::as_str) == Some(pid.to_string().as_str()))
}

#[test]
fn daemon_two_workloads_one_policy_at_core_level_form_one_group_and_leave_it_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let (tag_a, tag_b) = (3_600_201, 3_600_202);
    let path = dir.path().join("threadbalance.toml");
    // Two rules, the same policy and level: one group over both workloads' threads.
    let text = config_text(dir.path(), tag_a, "127.0.0.1:0").replace(
        "policy = \"speed\"\n",
        "policy = \"speed\"\nlevel = \"core\"\n",
    ) + &second_rule(tag_b, "level = \"core\"\n");
    std::fs::write(&path, text).unwrap();
    let (a, b) = (tagged(tag_a), tagged(tag_b));
    let (pa, pb) = (a.pid, b.pid);
    let (before_a, before_b) = (a.before.clone(), b.before.clone());
    let d = Daemon::start(&path, &[], socket(dir.path()));

    // One group with both, as the log and `ctl list` say.
    let line = d.wait_line("balanced together by one speed");
    assert!(
        line.contains(&format!("processes {}, {}", pa.min(pb), pa.max(pb))),
        "{line}"
    );
    let list = d.wait_listed(&[(pa, "test-spmd"), (pb, "test-spmd-b")]);
    let (ra, rb) = (row(&list, pa).unwrap(), row(&list, pb).unwrap());
    assert_eq!(ra.len(), 7, "{list}");
    assert_ne!(ra[6], "0", "{list}");
    assert_eq!(ra[6], rb[6], "one group for both: {list}");
    let status = String::from_utf8_lossy(&d.ctl(&["status"]).stdout).into_owned();
    assert!(
        status.contains("managed: 2 processes in 1 group(s)"),
        "{status}"
    );
    let line = d.wait_line("metrics on http://");
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.strip_suffix("/metrics"))
        .expect("address in the line");
    let body = scrape(addr);
    assert!(body.contains("threadbalance_managed_groups 1"), "{body}");
    assert!(
        body.contains(&format!(
            "threadbalance_group_processes{{group=\"{}\",policy=\"speed\"}} 2",
            ra[6]
        )),
        "{body}"
    );

    // The group's policy moves both workloads' threads, only ever within the usable CPUs.
    wait_changed(pa, &before_a);
    wait_changed(pb, &before_b);
    let usable = cpus(&online());
    for pid in [pa, pb] {
        for (i, mask) in worker_masks(pid, "spmd") {
            assert!(
                cpus(&mask).is_subset(&usable),
                "worker {i} of {pid} on {mask}, outside {usable:?}"
            );
        }
    }

    // Releasing A restores A's masks only; B stays managed, now in a group of its own.
    let out = d.ctl(&["release", &pa.to_string()]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(worker_masks(pa, "spmd"), before_a);
    let list = wait_for(LIMIT, || {
        let text = String::from_utf8_lossy(&d.ctl(&["list"]).stdout).into_owned();
        (row(&text, pa).is_none() && row(&text, pb).is_some()).then_some(text)
    })
    .expect("A gone from the list, B still in it");
    let rb2 = row(&list, pb).unwrap();
    assert_eq!(rb2[5], "managed", "{list}");
    assert_ne!(rb2[6], "0", "{list}");
    assert_ne!(rb2[6], rb[6], "B's group re-formed without A: {list}");
    // B is still placed (by its new group) while A's masks stay as they were.
    wait_changed(pb, &before_b);
    assert_eq!(worker_masks(pa, "spmd"), before_a);

    // SIGTERM restores B, and A is untouched.
    assert_eq!(d.stop(), 0);
    assert_eq!(worker_masks(pb, "spmd"), before_b);
    assert_eq!(worker_masks(pa, "spmd"), before_a);
    drop((a, b));
}

#[test]
fn daemon_masks_set_outside_it_are_one_warning_and_left_as_set() {
    let dir = tempfile::tempdir().unwrap();
    let tag = 3_600_203;
    let path = dir.path().join("threadbalance.toml");
    // At package level (one package here) the policy moves nothing, so every mask the
    // threads carry is the program's, and a change to them is someone else's.
    let text = config_text(dir.path(), tag, "off").replace(
        "policy = \"speed\"\n",
        "policy = \"speed\"\nlevel = \"package\"\n",
    );
    std::fs::write(&path, text).unwrap();
    let w = spmd(tag);
    let pid = w.0.id();
    let first = online().split([',', '-']).next().unwrap().to_string();
    let d = Daemon::start(&path, &[], socket(dir.path()));
    d.wait_listed(&[(pid, "test-spmd")]);
    // `taskset -a -p -c FIRST PID`: every thread of the workload on one CPU, from outside.
    let out = std::process::Command::new("taskset")
        .args(["-a", "-p", "-c", &first, &pid.to_string()])
        .output()
        .expect("runs taskset");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = d.wait_line(&format!("the CPUs of process {pid} changed from"));
    assert!(
        line.contains(&format!(
            "to {first} (its threads' masks were set outside the daemon"
        )),
        "{line}"
    );
    // One warning, not one per window.
    std::thread::sleep(std::time::Duration::from_millis(600));
    let warnings = d
        .log()
        .iter()
        .filter(|l| l.contains(&format!("the CPUs of process {pid} changed")))
        .count();
    assert_eq!(warnings, 1, "{:#?}", d.log());
    // Still managed, and at SIGTERM the program's own masks stay as set.
    d.wait_listed(&[(pid, "test-spmd")]);
    assert_eq!(d.stop(), 0);
    let masks = worker_masks(pid, "spmd");
    assert_eq!(masks.len(), 3);
    assert!(masks.iter().all(|(_, m)| *m == first), "{masks:?}");
    drop(w);
}
