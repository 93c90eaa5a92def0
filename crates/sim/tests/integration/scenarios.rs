//! Every scenario in `scenarios/` parses and runs.

use std::path::Path;
use threadbalance_policy::Settings;
use threadbalance_sim::{compare, machine, workload};

#[test]
fn scenarios_every_file_parses_and_runs_under_none() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let w = workload(&name, None, Some(&dir)).unwrap_or_else(|e| panic!("{e}"));
        let m = machine("package:2 core:4 pu:1", None).unwrap();
        let c = compare(
            &m,
            &w,
            &["none".into()],
            1,
            &Settings::new(m.topo.default_level()),
        )
        .unwrap();
        assert!(c.results[0].finished, "{name} did not finish");
        n += 1;
    }
    assert!(n >= 3, "only {n} scenarios");
}

#[test]
fn scenarios_unknown_workload_names_the_search_path() {
    let e = workload("nonesuch", None, Some(Path::new("/nowhere"))).unwrap_err();
    assert!(e.to_string().contains("/nowhere"), "{e}");
}
