//! Scratch exploration (to be deleted).
#![allow(missing_docs, clippy::unwrap_used)]
use threadbalance_model::{Level, Topology};
use threadbalance_policy::Settings;
use threadbalance_sim::*;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let what = args.get(1).map(String::as_str).unwrap_or("cal");
    let local = Topology::synthetic("package:1 core:2 pu:1").unwrap();
    if what == "cal" {
        let m = machine("local", Some(local.clone())).unwrap();
        for s in [1, 10, 100] {
            for wait in ["yield", "block"] {
                let w = workload(
                    &format!("ep-barrier:phase_ms={s},wait={wait}"),
                    Some(3),
                    None,
                )
                .unwrap();
                let t0 = std::time::Instant::now();
                let r = run_policy(
                    &m,
                    &w,
                    "none",
                    &Settings::new(Level::Core),
                    &RunOptions::new(1),
                )
                .unwrap();
                let speed = 3.0 / r.runtime_s;
                println!(
                    "S={s:3} {wait:5} wall {:.3} speed {:.3} ({:.0}% of ideal) migr {} events {} ({:.1} Mev/s)",
                    r.runtime_s,
                    speed,
                    speed / (2.0 / 3.0) * 100.0,
                    r.migrations,
                    r.events,
                    r.events as f64 / t0.elapsed().as_secs_f64() / 1e6
                );
            }
        }
        for n in [3, 5] {
            let w = workload("spinners", Some(n), None).unwrap();
            let mut o = RunOptions::new(1);
            o.horizon = threadbalance_model::Nanos::from_secs(6);
            let r = run_policy(&m, &w, "none", &Settings::new(Level::Core), &o).unwrap();
            println!(
                "spinners N={n}: cpu {:?} migr {:?}",
                r.thread_cpu_s
                    .iter()
                    .map(|x| (x * 100.0).round() / 100.0)
                    .collect::<Vec<_>>(),
                r.thread_migrations
            );
        }
        return;
    }
    let (mname, wname) = (args[2].as_str(), args[3].as_str());
    let pols: Vec<String> = args[4].split(',').map(String::from).collect();
    let seed: u64 = args.get(5).map_or(1, |s| s.parse().unwrap());
    let m = machine(mname, None).unwrap();
    let w = workload(wname, None, None).unwrap();
    let t0 = std::time::Instant::now();
    let c = compare(&m, &w, &pols, seed, &Settings::new(m.topo.default_level())).unwrap();
    let ev: u64 = c.results.iter().map(|r| r.events).sum::<u64>()
        + if pols.iter().any(|p| p == "none") {
            0
        } else {
            c.baseline.events
        };
    println!("{}", c.to_table());
    for r in &c.results {
        println!(
            "{} util {:?} xmigr {} summary {:?}",
            r.policy,
            r.socket_util
                .iter()
                .map(|x| (x * 1000.0).round() / 10.0)
                .collect::<Vec<_>>(),
            r.cross_socket_migrations,
            r.policy_summary
        );
    }
    println!(
        "{:.2}s, {:.1} Mev/s",
        t0.elapsed().as_secs_f64(),
        ev as f64 / t0.elapsed().as_secs_f64() / 1e6
    );
}
