//! The deployment files under `packaging/`: the systemd unit and the Kubernetes DaemonSet
//! say what the issue asks (capabilities, hardening, state directory, metrics port), and
//! agree with the daemon's config defaults and with each other. `systemd-analyze verify`
//! of the unit runs in CI (`packaging/verify-unit.sh`).

use crate::repo;
use serde_yaml::Value;
use std::collections::BTreeMap;
use threadbalance_daemon::Config;

/// The unit's `[Service]` keys; a key given twice keeps every value in order.
fn unit_service() -> BTreeMap<String, Vec<String>> {
    let text = std::fs::read_to_string(repo("packaging/threadbalance.service")).unwrap();
    let mut section = String::new();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if line.starts_with('[') {
            section = line.to_string();
            continue;
        }
        let (k, v) = line.split_once('=').unwrap();
        if section == "[Service]" {
            out.entry(k.to_string()).or_default().push(v.to_string());
        }
    }
    out
}

fn one<'a>(unit: &'a BTreeMap<String, Vec<String>>, key: &str) -> &'a str {
    let v = unit.get(key).unwrap_or_else(|| panic!("{key} missing"));
    assert_eq!(v.len(), 1, "{key} given more than once");
    &v[0]
}

#[test]
fn unit_runs_the_daemon_with_cap_sys_nice_only_and_hardening() {
    let unit = unit_service();
    assert_eq!(
        one(&unit, "ExecStart"),
        "/usr/local/bin/threadbalance daemon --config /etc/threadbalance/threadbalance.toml"
    );
    assert_eq!(one(&unit, "ExecReload"), "/bin/kill -HUP $MAINPID");
    assert_eq!(one(&unit, "CapabilityBoundingSet"), "CAP_SYS_NICE");
    assert_eq!(one(&unit, "AmbientCapabilities"), "CAP_SYS_NICE");
    for (key, value) in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("Restart", "on-failure"),
        ("RuntimeDirectory", "threadbalance"),
        ("RuntimeDirectoryMode", "0700"),
        ("ReadWritePaths", "/run/threadbalance"),
    ] {
        assert_eq!(one(&unit, key), value, "{key}");
    }
}

#[test]
fn unit_probe_capabilities_documented_in_a_comment() {
    let text = std::fs::read_to_string(repo("packaging/threadbalance.service")).unwrap();
    assert!(text.contains("#   CapabilityBoundingSet=CAP_SYS_NICE CAP_BPF CAP_PERFMON\n"));
    assert!(text.contains("#   AmbientCapabilities=CAP_SYS_NICE CAP_BPF CAP_PERFMON\n"));
}

#[test]
fn unit_runtime_directory_holds_the_configs_default_socket_and_state() {
    // The example config and the defaults both keep state and the control socket in the
    // directory systemd creates (0700) and leaves writable.
    let defaults = Config::parse("t.toml", "").unwrap().daemon;
    let example = threadbalance_daemon::read::read_config(&repo("packaging/threadbalance.toml"))
        .unwrap()
        .daemon;
    for d in [defaults, example] {
        assert_eq!(d.state_dir, std::path::Path::new("/run/threadbalance"));
        assert!(d.control_socket.starts_with("/run/threadbalance"));
        assert!(
            d.metrics.unwrap().ip().is_loopback(),
            "the unit allows loopback only"
        );
    }
}

/// Every document of the manifest, by kind.
fn manifest() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(repo("packaging/kubernetes/daemonset.yaml")).unwrap();
    let mut out = BTreeMap::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v = Value::deserialize(doc).unwrap();
        let kind = v["kind"].as_str().unwrap().to_string();
        assert!(out.insert(kind.clone(), v).is_none(), "two {kind}s");
    }
    out
}

use serde::Deserialize;

fn strs(v: &Value) -> Vec<&str> {
    v.as_sequence()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn daemonset_host_pid_sys_nice_metrics_port_and_state() {
    let m = manifest();
    let ds = &m["DaemonSet"];
    assert_eq!(ds["apiVersion"].as_str(), Some("apps/v1"));
    let spec = &ds["spec"]["template"]["spec"];
    assert_eq!(spec["hostPID"].as_bool(), Some(true));
    assert_eq!(
        spec["hostNetwork"],
        Value::Null,
        "its own network: metrics on the pod IP"
    );
    let containers = spec["containers"].as_sequence().unwrap();
    assert_eq!(containers.len(), 1);
    let c = &containers[0];
    assert_eq!(
        strs(&c["command"]),
        [
            "/usr/local/bin/threadbalance",
            "daemon",
            "--config",
            "/etc/threadbalance/threadbalance.toml"
        ]
    );
    let sc = &c["securityContext"];
    assert_eq!(strs(&sc["capabilities"]["drop"]), ["ALL"]);
    assert_eq!(strs(&sc["capabilities"]["add"]), ["SYS_NICE"]);
    assert_eq!(sc["privileged"].as_bool(), Some(false));
    assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
    let port = &c["ports"][0];
    assert_eq!(port["name"].as_str(), Some("metrics"));
    assert_eq!(port["containerPort"].as_u64(), Some(9464));
    let annotations = &ds["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(annotations["prometheus.io/port"].as_str(), Some("9464"));
    // The selector selects the template's pods.
    assert_eq!(
        ds["spec"]["selector"]["matchLabels"],
        ds["spec"]["template"]["metadata"]["labels"]
    );
    // Volumes: the config from the ConfigMap, the state on the node's /run.
    let mounts: BTreeMap<&str, &str> = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["mountPath"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(mounts["config"], "/etc/threadbalance");
    assert_eq!(mounts["state"], "/run/threadbalance");
    let volumes: BTreeMap<&str, &Value> = spec["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| (v["name"].as_str().unwrap(), v))
        .collect();
    assert_eq!(
        volumes["config"]["configMap"]["name"],
        m["ConfigMap"]["metadata"]["name"]
    );
    assert_eq!(
        volumes["state"]["hostPath"]["path"].as_str(),
        Some("/run/threadbalance")
    );
    for kind in ["DaemonSet", "ConfigMap"] {
        assert_eq!(
            m[kind]["metadata"]["namespace"], m["Namespace"]["metadata"]["name"],
            "{kind}"
        );
    }
}

#[test]
fn daemonset_config_map_is_a_valid_config_serving_the_container_port() {
    let m = manifest();
    let text = m["ConfigMap"]["data"]["threadbalance.toml"]
        .as_str()
        .unwrap();
    let config = Config::parse("threadbalance.toml", text).unwrap();
    let d = &config.daemon;
    let port =
        m["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"]
            .as_u64()
            .unwrap();
    let metrics = d.metrics.unwrap();
    assert_eq!(u64::from(metrics.port()), port);
    assert!(
        metrics.ip().is_unspecified(),
        "the pod's address, for the cluster"
    );
    assert!(d.metrics_remote);
    assert!(d.control_socket.starts_with(&d.state_dir));
    assert_eq!(d.state_dir, std::path::Path::new("/run/threadbalance"));
    // The same rule as the packaged example: two busy threads → speed.
    let example =
        threadbalance_daemon::read::read_config(&repo("packaging/threadbalance.toml")).unwrap();
    // (Rules hold compiled regexes, so they are compared through their Debug text, and
    // without the line each was found on.)
    let text = |rules: &[threadbalance_daemon::rule::Rule]| {
        rules
            .iter()
            .map(|r| {
                let mut r = r.clone();
                r.line = None;
                format!("{r:?}")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(text(&config.rules.rules), text(&example.rules.rules));
}
