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
use crate::gomp::{PAUSE_NS, SpinCounts, WaitPolicy};
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
    llc_working_set_kb: Option<u32>,
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

/// A barrier's `wait`: a name, or libgomp's wait with its settings as a table.
#[derive(Deserialize)]
#[serde(untagged)]
enum RawWait {
    Name(String),
    Gomp(RawGomp),
}

/// `wait = { gomp = "default", spincount = 300000, pause_ns = 26 }`: libgomp's barrier
/// wait as `OMP_WAIT_POLICY` (`gomp`) and `GOMP_SPINCOUNT` (`spincount`) set it, one spin
/// costing `pause_ns` (see [`crate::gomp`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGomp {
    gomp: String,
    spincount: Option<u64>,
    pause_ns: Option<f64>,
}

impl<'de> Deserialize<'de> for Wait {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Wait, D::Error> {
        let expected = "expected spin, yield, block, gomp, or a table such as \
                        { gomp = \"passive\", spincount = 1000, pause_ns = 26 }";
        let (policy, spincount, pause) = match RawWait::deserialize(d)
            .map_err(|_| serde::de::Error::custom(format!("wait: {expected}")))?
        {
            RawWait::Name(s) => match s.as_str() {
                "spin" => return Ok(Wait::Spin),
                "yield" => return Ok(Wait::Yield),
                "block" => return Ok(Wait::Block),
                "gomp" => ("default".to_string(), None, None),
                other => {
                    return Err(serde::de::Error::custom(format!(
                        "wait = {other:?} ({expected})"
                    )));
                }
            },
            RawWait::Gomp(g) => (g.gomp, g.spincount, g.pause_ns),
        };
        let policy = match policy.as_str() {
            "default" => WaitPolicy::Default,
            "active" => WaitPolicy::Active,
            "passive" => WaitPolicy::Passive,
            other => {
                return Err(serde::de::Error::custom(format!(
                    "wait: gomp = {other:?} (expected default, active or passive)"
                )));
            }
        };
        let pause = pause.unwrap_or(PAUSE_NS);
        if !(pause.is_finite() && pause > 0.0) {
            return Err(serde::de::Error::custom(format!(
                "wait: pause_ns = {pause} (expected a positive number of ns)"
            )));
        }
        Ok(SpinCounts::from_env(policy, spincount).wait(pause))
    }
}

/// A TOML error on one line: where (line and column of the start of the span) and what.
/// The error's own text draws the line with a caret below it, over several lines.
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let what = e.message().trim().replace('\n', "; ");
    match e.span() {
        Some(span) => {
            // Spans are byte offsets at token boundaries; one that is not a character
            // boundary (it should not happen) counts from the end of the text.
            let before = text.get(..span.start).unwrap_or(text);
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("line {line}, column {column}: {what}")
        }
        None => what,
    }
}

fn one() -> u16 {
    1
}

/// An operation's duration given wrong.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum BadDuration {
    /// None, or more than one, of `ns`, `us` and `ms`.
    #[error("give exactly one of ns, us, ms")]
    Units,
    /// Negative, or not a number.
    #[error("duration {0} ns is not a non-negative number")]
    Value(f64),
}

fn duration(ns: Option<f64>, us: Option<f64>, ms: Option<f64>) -> Result<u64, BadDuration> {
    let v = match (ns, us, ms) {
        (Some(x), None, None) => x,
        (None, Some(x), None) => x * 1e3,
        (None, None, Some(x)) => x * 1e6,
        _ => return Err(BadDuration::Units),
    };
    if !v.is_finite() || v < 0.0 {
        return Err(BadDuration::Value(v));
    }
    Ok(v.round() as u64)
}

/// One operation of a scenario, its duration in nanoseconds.
fn op(op: RawOp) -> Result<Op, BadDuration> {
    Ok(match op {
        RawOp::Compute {
            ns,
            us,
            ms,
            spread,
            mem,
        } => Op::Compute {
            ns: duration(ns, us, ms)?,
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
            hold_ns: duration(ns, us, ms)?,
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
            hold_ns: duration(ns, us, ms)?,
            lines,
            body,
        },
        RawOp::Barrier { barrier, wait } => Op::Barrier { barrier, wait },
        RawOp::Put { queue } => Op::Put { queue },
        RawOp::Get { queue } => Op::Get { queue },
        RawOp::Sleep { ns, us, ms, spread } => Op::Sleep {
            ns: duration(ns, us, ms)?,
            spread,
        },
    })
}

/// Parses a scenario from TOML text; `origin` names it in errors.
pub fn parse_scenario(text: &str, origin: &Path) -> Result<Workload, SimError> {
    let bad = |why: String| SimError::Scenario {
        path: origin.to_path_buf(),
        why,
    };
    let raw: RawScenario = toml::from_str(text).map_err(|e| bad(one_line(text, &e)))?;
    let mut apps = Vec::new();
    for a in raw.app {
        let mut groups = Vec::new();
        for g in a.group {
            let ops = g
                .ops
                .into_iter()
                .map(op)
                .collect::<Result<Vec<Op>, BadDuration>>()
                .map_err(|source| SimError::ScenarioDuration {
                    path: origin.to_path_buf(),
                    group: g.name.clone(),
                    source,
                })?;
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
            llc_working_set_kb: a.llc_working_set_kb.unwrap_or(0),
            spin_ns: a.spin_us.map_or(10_000, |u| (u.max(0.0) * 1e3) as u64),
            shared_data: a.shared_data,
            memory_kb: 0,
            start_ns: 0,
            main_thread: false,
        };
        app.validate().map_err(|source| SimError::ScenarioInvalid {
            path: origin.to_path_buf(),
            source,
        })?;
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
        "memory-bound-barrier",
        include_str!("../../../scenarios/memory-bound-barrier.toml"),
    ),
    (
        "memory-mix",
        include_str!("../../../scenarios/memory-mix.toml"),
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
///
/// `Ok(None)` when `dir` has no scenario of that name (a built-in or embedded one may
/// still answer to it). A `.toml` path that does not exist is an error saying so, not an
/// unknown workload, and so is anything that is not a regular file (a FIFO, a device, a
/// directory): reading one could block forever or never end, so it is refused before it
/// is opened.
pub fn read_scenario(name: &str, dir: &Path) -> Result<Option<Workload>, SimError> {
    let named = name.ends_with(".toml");
    let path = if named {
        Path::new(name).to_path_buf()
    } else {
        dir.join(format!("{name}.toml"))
    };
    let refuse = |why: String| SimError::Scenario {
        path: path.clone(),
        why,
    };
    match std::fs::metadata(&path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return Err(refuse("not a regular file".into())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !named => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(refuse("no such file".into()));
        }
        Err(e) => {
            return Err(SimError::ScenarioRead {
                path,
                source: e.into(),
            });
        }
    }
    let text = std::fs::read_to_string(&path).map_err(|e| SimError::ScenarioRead {
        path: path.clone(),
        source: e.into(),
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
    fn scenario_barrier_waits_as_libgomp_waits() {
        let wait_of = |wait: &str| {
            let text = format!(
                "[[app]]\nname = \"a\"\n[[app.group]]\nname = \"g\"\nthreads = 2\niterations = 1\n\
                 ops = [ {{ op = \"barrier\", barrier = 0, wait = {wait} }} ]\n"
            );
            let w = parse_scenario(&text, Path::new("x.toml")).unwrap();
            match w.apps[0].groups[0].ops[0] {
                Op::Barrier { wait, .. } => wait,
                other => panic!("{other:?}"),
            }
        };
        // libgomp's defaults: 300 000 spins (100 with more threads than CPUs) × 26 ns.
        let gomp = |spin_ns, throttled_ns| Wait::Gomp {
            spin_ns,
            throttled_ns,
        };
        assert_eq!(wait_of("\"gomp\""), gomp(7_800_000, 2_600));
        assert_eq!(wait_of("{ gomp = \"default\" }"), gomp(7_800_000, 2_600));
        // OMP_WAIT_POLICY=passive: sleep at once; GOMP_SPINCOUNT=1000 at 10 ns a spin.
        assert_eq!(wait_of("{ gomp = \"passive\" }"), gomp(0, 0));
        assert_eq!(
            wait_of("{ gomp = \"default\", spincount = 1000, pause_ns = 10 }"),
            gomp(10_000, 1_000)
        );
        assert_eq!(wait_of("\"yield\""), Wait::Yield);
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
            "{ op = \"barrier\", barrier = 0, wait = { gomp = \"lazy\" } }",
            "{ op = \"barrier\", barrier = 0, wait = { gomp = \"active\", pause_ns = 0 } }",
            "{ op = \"barrier\", barrier = 0, wait = { gomp = \"active\", spins = 5 } }",
            "{ op = \"barrier\", barrier = 0, wait = { spincount = 5 } }",
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
        // The error is one line that says where and what.
        let e = parse_scenario(
            &base("{ op = \"barrier\", barrier = 0, wait = \"nap\" }"),
            Path::new("x.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("line 7, column 7: wait = \"nap\""), "{e}");
        assert!(parse_scenario(&base("{ op = \"compute\", us = 1 }"), Path::new("x.toml")).is_ok());
        let ticket = "{ op = \"ticket\", lock = 0, items = 8, ns = 100, lines = 1 }, { op = \"compute\", us = 5 }";
        assert!(parse_scenario(&base(ticket), Path::new("x.toml")).is_ok());
    }
}
