//! The simulator's Linux model in layers, checked: the parts `run/` (programs and the
//! event loop), `scheduler/` (the kernel), `autonuma.rs` (NUMA balancing) and `state/`
//! (the data they share) must not import each other in a cycle.
//!
//! The test reads each part's source (without its tests and comments), collects every
//! `crate::<part>` path it names (in `use` lines and inline), builds the graph "part A
//! names part B" and fails on any cycle, printing it. Today's graph is
//!
//! ```text
//!   run ──► scheduler ──► state
//!    │                      ▲
//!    └──► autonuma ─────────┘
//! ```
//!
//! (`run` also names `state` directly).

/// The parts whose imports must form no cycle.
const PARTS: [&str; 4] = ["run", "scheduler", "autonuma", "state"];

/// The non-test code of a source file, comments and docs left out.
fn code(src: &str) -> String {
    let body = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The parts `src` names through `crate::<part>` paths, `from` itself left out. A
/// grouped import `use crate::{a, b::c}` names `a` and `b`.
fn named(from: &str, src: &str) -> Vec<&'static str> {
    let code = code(src);
    let mut out = Vec::new();
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let heads: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            group[..end]
                .split(',')
                .map(|s| s.trim().split("::").next().unwrap_or(""))
                .collect()
        } else {
            vec![
                rest.split(|ch: char| !(ch.is_alphanumeric() || ch == '_'))
                    .next()
                    .unwrap_or(""),
            ]
        };
        for head in heads {
            if let Some(&p) = PARTS.iter().find(|&&p| p == head)
                && p != from
                && !out.contains(&p)
            {
                out.push(p);
            }
        }
    }
    out
}

/// A cycle in the graph `edges` (`(from, to)`), as the list of its parts, if any.
fn cycle(edges: &[(&'static str, &'static str)]) -> Option<Vec<&'static str>> {
    fn visit(
        at: &'static str,
        edges: &[(&'static str, &'static str)],
        path: &mut Vec<&'static str>,
        done: &mut Vec<&'static str>,
    ) -> Option<Vec<&'static str>> {
        if let Some(i) = path.iter().position(|&p| p == at) {
            let mut c = path[i..].to_vec();
            c.push(at);
            return Some(c);
        }
        if done.contains(&at) {
            return None;
        }
        path.push(at);
        for &(_, to) in edges.iter().filter(|(from, _)| *from == at) {
            if let Some(c) = visit(to, edges, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(at);
        None
    }
    let mut done = Vec::new();
    PARTS
        .iter()
        .find_map(|&p| visit(p, edges, &mut Vec::new(), &mut done))
}

/// Every part's source files.
fn sources() -> Vec<(&'static str, &'static str)> {
    vec![
        ("run", include_str!("run/mod.rs")),
        ("run", include_str!("run/ops.rs")),
        ("run", include_str!("run/segment.rs")),
        ("scheduler", include_str!("scheduler/mod.rs")),
        ("scheduler", include_str!("scheduler/wake.rs")),
        ("scheduler", include_str!("scheduler/balance.rs")),
        ("scheduler", include_str!("scheduler/group_load.rs")),
        ("scheduler", include_str!("scheduler/solaris.rs")),
        ("autonuma", include_str!("autonuma.rs")),
        ("state", include_str!("state/mod.rs")),
        ("state", include_str!("state/baseline.rs")),
        ("state", include_str!("state/data.rs")),
        ("state", include_str!("state/hw.rs")),
        ("state", include_str!("state/idx.rs")),
        ("state", include_str!("state/kernel.rs")),
        ("state", include_str!("state/numa.rs")),
    ]
}

/// The graph "part A names part B" of the crate's sources.
fn graph() -> Vec<(&'static str, &'static str)> {
    let mut edges = Vec::new();
    for (part, src) in sources() {
        for to in named(part, src) {
            if !edges.contains(&(part, to)) {
                edges.push((part, to));
            }
        }
    }
    edges
}

#[test]
fn layers_run_scheduler_autonuma_state_import_no_cycle() {
    let edges = graph();
    assert_eq!(cycle(&edges), None, "import graph {edges:?}");
    // The graph the module docs draw: the programs part on top, the data at the bottom.
    for edge in [
        ("run", "scheduler"),
        ("scheduler", "state"),
        ("autonuma", "state"),
    ] {
        assert!(edges.contains(&edge), "{edge:?} missing from {edges:?}");
    }
}

#[test]
fn layers_named_reads_use_lines_groups_and_inline_paths() {
    let src = "use crate::state::{Sim, St};\nuse crate::{run::X, queue::Q};\n\
               // use crate::autonuma::Y;\nfn f() { crate::scheduler::g() }\n\
               #[cfg(test)]\nmod tests { use crate::autonuma::Z; }";
    assert_eq!(named("state", src), ["run", "scheduler"]);
    assert_eq!(named("run", src), ["state", "scheduler"]);
}

#[test]
fn layers_cycle_finds_a_three_part_cycle_and_none_in_a_chain() {
    let chain = [
        ("run", "scheduler"),
        ("scheduler", "state"),
        ("autonuma", "state"),
    ];
    assert_eq!(cycle(&chain), None);
    let looped = [
        ("run", "scheduler"),
        ("scheduler", "autonuma"),
        ("autonuma", "run"),
    ];
    assert_eq!(
        cycle(&looped),
        Some(vec!["run", "scheduler", "autonuma", "run"])
    );
}
