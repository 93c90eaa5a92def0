//! Custom workloads from TOML files in `scenarios/` (documented in `scenarios/README.md`).
//!
//! ```toml
//! name = "two-stage"
//! description = "a producer feeding four workers"
//!
//! [[app]]
//! name = "pipe"
//! footprint_kb = 256       # optional: cache refilled after a migration
//! spin_us = 10             # optional: mutex spin before sleeping
//! shared_data = false      # optional: memory-bound work reads data first touched by thread 0
//!
//! [[app.queue]]
//! capacity = 8
//! lines = 32
//!
//! [[app.group]]
//! name = "producer"
//! threads = 1
//! iterations = 1000
//! ops = [ { op = "compute", us = 50 }, { op = "put", queue = 0 } ]
//!
//! [[app.group]]
//! name = "worker"
//! threads = 4
//! ops = [ { op = "get", queue = 0 }, { op = "compute", us = 180, mem = 0.5, spread = 0.2 } ]
//! ```
//!
//! Durations are given in `ns`, `us` or `ms` (exactly one). Unknown keys are rejected.

use crate::SimError;
use crate::workload::{App, Group, Op, QueueSpec, Wait, Workload};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    #[serde(default)]
    description: String,
    app: Vec<RawApp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApp {
    name: String,
    #[serde(default)]
    queue: Vec<RawQueue>,
    group: Vec<RawGroup>,
    footprint_kb: Option<u32>,
    spin_us: Option<f64>,
    #[serde(default)]
    shared_data: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    capacity: usize,
    #[serde(default)]
    lines: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGroup {
    name: String,
    threads: usize,
    iterations: Option<u64>,
    ops: Vec<RawOp>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, tag = "op", rename_all = "kebab-case")]
enum RawOp {
    Compute {
        ns: Option<f64>,
        us: Option<f64>,
        ms: Option<f64>,
        #[serde(default)]
        spread: f32,
        #[serde(default)]
        mem: f32,
    },
    Lock {
        lock: u16,
        ns: Option<f64>,
        us: Option<f64>,
        ms: Option<f64>,
        #[serde(default)]
        lines: u32,
    },
    Ticket {
        lock: u16,
        items: u32,
        ns: Option<f64>,
        us: Option<f64>,
        ms: Option<f64>,
        #[serde(default)]
        lines: u32,
        #[serde(default = "one")]
        body: u16,
    },
    Barrier {
        barrier: u16,
        wait: Wait,
    },
    Put {
        queue: u16,
    },
    Get {
        queue: u16,
    },
    Sleep {
        ns: Option<f64>,
        us: Option<f64>,
        ms: Option<f64>,
        #[serde(default)]
        spread: f32,
    },
}

impl<'de> Deserialize<'de> for Wait {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Wait, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "spin" => Ok(Wait::Spin),
            "yield" => Ok(Wait::Yield),
            "block" => Ok(Wait::Block),
            other => Err(serde::de::Error::custom(format!(
                "wait = {other:?} (expected spin, yield or block)"
            ))),
        }
    }
}

fn one() -> u16 {
    1
}

fn duration(ns: Option<f64>, us: Option<f64>, ms: Option<f64>) -> Result<u64, String> {
    let v = match (ns, us, ms) {
        (Some(x), None, None) => x,
        (None, Some(x), None) => x * 1e3,
        (None, None, Some(x)) => x * 1e6,
        _ => return Err("give exactly one of ns, us, ms".into()),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(format!("duration {v} ns is not a non-negative number"));
    }
    Ok(v.round() as u64)
}

/// Parses a scenario from TOML text; `origin` names it in errors.
pub fn parse_scenario(text: &str, origin: &Path) -> Result<Workload, SimError> {
    let bad = |why: String| SimError::Scenario {
        path: origin.to_path_buf(),
        why,
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| bad(e.to_string()))?;
    let mut apps = Vec::new();
    for a in raw.app {
        let mut groups = Vec::new();
        for g in a.group {
            let mut ops = Vec::new();
            for op in g.ops {
                ops.push(match op {
                    RawOp::Compute {
                        ns,
                        us,
                        ms,
                        spread,
                        mem,
                    } => Op::Compute {
                        ns: duration(ns, us, ms)
                            .map_err(|w| bad(format!("group {}: {w}", g.name)))?,
                        spread,
                        mem,
                    },
                    RawOp::Lock {
                        lock,
                        ns,
                        us,
                        ms,
                        lines,
                    } => Op::Lock {
                        lock,
                        hold_ns: duration(ns, us, ms)
                            .map_err(|w| bad(format!("group {}: {w}", g.name)))?,
                        lines,
                    },
                    RawOp::Ticket {
                        lock,
                        items,
                        ns,
                        us,
                        ms,
                        lines,
                        body,
                    } => Op::Ticket {
                        lock,
                        items,
                        hold_ns: duration(ns, us, ms)
                            .map_err(|w| bad(format!("group {}: {w}", g.name)))?,
                        lines,
                        body,
                    },
                    RawOp::Barrier { barrier, wait } => Op::Barrier { barrier, wait },
                    RawOp::Put { queue } => Op::Put { queue },
                    RawOp::Get { queue } => Op::Get { queue },
                    RawOp::Sleep { ns, us, ms, spread } => Op::Sleep {
                        ns: duration(ns, us, ms)
                            .map_err(|w| bad(format!("group {}: {w}", g.name)))?,
                        spread,
                    },
                });
            }
            groups.push(Group {
                name: g.name,
                threads: g.threads,
                ops,
                iterations: g.iterations,
            });
        }
        let app = App {
            name: a.name,
            groups,
            queues: a
                .queue
                .into_iter()
                .map(|q| QueueSpec {
                    capacity: q.capacity,
                    lines: q.lines,
                })
                .collect(),
            footprint_kb: a.footprint_kb.unwrap_or(256),
            spin_ns: a.spin_us.map_or(10_000, |u| (u.max(0.0) * 1e3) as u64),
            shared_data: a.shared_data,
            memory_kb: 0,
            start_ns: 0,
            main_thread: false,
        };
        app.validate().map_err(bad)?;
        apps.push(app);
    }
    if apps.is_empty() {
        return Err(bad("no [[app]]".into()));
    }
    let name = raw.name.unwrap_or_else(|| {
        origin
            .file_stem()
            .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
    });
    Ok(Workload {
        name,
        description: raw.description,
        apps,
    })
}

/// The scenarios of the repository's `scenarios/` folder, built into the program (name,
/// text), so that `--workload two-apps` works from any directory after an install. A file of
/// the same name in the scenarios folder given (or `./scenarios`) is read instead.
pub const EMBEDDED: &[(&str, &str)] = &[
    (
        "lock-convoy",
        include_str!("../../../scenarios/lock-convoy.toml"),
    ),
    (
        "oversubscribed-barrier",
        include_str!("../../../scenarios/oversubscribed-barrier.toml"),
    ),
    ("two-apps", include_str!("../../../scenarios/two-apps.toml")),
    (
        "two-stage-pipeline",
        include_str!("../../../scenarios/two-stage-pipeline.toml"),
    ),
];

/// The embedded scenario `name`, parsed; `None` when there is none of that name.
pub fn embedded_scenario(name: &str) -> Result<Option<Workload>, SimError> {
    EMBEDDED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| parse_scenario(text, Path::new(&format!("<embedded>/{n}.toml"))))
        .transpose()
}

/// Reads `dir/<name>.toml`, or `name` itself if it is a path to a `.toml` file.
pub fn read_scenario(name: &str, dir: &Path) -> Result<Option<Workload>, SimError> {
    let path = if name.ends_with(".toml") {
        Path::new(name).to_path_buf()
    } else {
        dir.join(format!("{name}.toml"))
    };
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|e| SimError::Scenario {
        path: path.clone(),
        why: e.to_string(),
    })?;
    parse_scenario(&text, &path).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_holds_every_scenario_of_the_folder_verbatim() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut on_disk: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                let name = p.file_name()?.to_str()?.strip_suffix(".toml")?.to_string();
                Some((name, std::fs::read_to_string(&p).unwrap()))
            })
            .collect();
        on_disk.sort();
        let embedded: Vec<(String, String)> = EMBEDDED
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        assert_eq!(embedded, on_disk, "add the new scenario to EMBEDDED");
        for (name, _) in EMBEDDED {
            assert!(embedded_scenario(name).unwrap().is_some(), "{name}");
        }
        assert!(embedded_scenario("no-such").unwrap().is_none());
    }

    #[test]
    fn scenario_module_example_parses() {
        let text = r#"
name = "two-stage"
[[app]]
name = "pipe"
[[app.queue]]
capacity = 8
lines = 32
[[app.group]]
name = "producer"
threads = 1
iterations = 1000
ops = [ { op = "compute", us = 50 }, { op = "put", queue = 0 } ]
[[app.group]]
name = "worker"
threads = 4
ops = [ { op = "get", queue = 0 }, { op = "compute", us = 180, mem = 0.5, spread = 0.2 } ]
"#;
        let w = parse_scenario(text, Path::new("x.toml")).unwrap();
        assert_eq!(w.threads(), 5);
        assert_eq!(
            w.apps[0].groups[1].ops[1],
            Op::Compute {
                ns: 180_000,
                spread: 0.2,
                mem: 0.5
            }
        );
    }

    #[test]
    fn scenario_rejects_unknown_keys_and_bad_values() {
        let base = |ops: &str| {
            format!(
                "[[app]]\nname = \"a\"\n[[app.group]]\nname = \"g\"\nthreads = 1\niterations = 1\nops = [ {ops} ]\n"
            )
        };
        for ops in [
            "{ op = \"compute\", us = 1, colour = 3 }",
            "{ op = \"compute\", us = 1, ms = 1 }",
            "{ op = \"compute\" }",
            "{ op = \"teleport\" }",
            "{ op = \"barrier\", barrier = 0, wait = \"nap\" }",
            "{ op = \"put\", queue = 3 }",
            "{ op = \"compute\", us = 1, mem = 2.0 }",
            "{ op = \"ticket\", lock = 0, items = 8, ns = 100 }",
            "{ op = \"ticket\", lock = 0, items = 8, ns = 100, body = 0 }, { op = \"compute\", us = 1 }",
        ] {
            assert!(
                parse_scenario(&base(ops), Path::new("x.toml")).is_err(),
                "{ops}"
            );
        }
        assert!(parse_scenario(&base("{ op = \"compute\", us = 1 }"), Path::new("x.toml")).is_ok());
        let ticket = "{ op = \"ticket\", lock = 0, items = 8, ns = 100, lines = 1 }, { op = \"compute\", us = 5 }";
        assert!(parse_scenario(&base(ticket), Path::new("x.toml")).is_ok());
    }
}
