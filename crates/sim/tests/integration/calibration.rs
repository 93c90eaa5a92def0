//! The Linux model (`none`) against `calibration/linux-6.18-2core.md`: 3 threads on the
//! 2-core machine, phases of S ms, Linux 6.18 measured speed (work / wall, fair share 2/3).

use threadbalance_model::Nanos;
use threadbalance_policy::Settings;
use threadbalance_sim::suite::{CALIBRATION_ROWS, two_core};
use threadbalance_sim::{
    RunOptions, Wait, Workload, run_policy, workload::ep_barrier, workload::spinners,
};

fn ep(s_ms: u64, wait: Wait) -> Workload {
    Workload {
        name: "ep".into(),
        description: String::new(),
        apps: vec![ep_barrier(3, s_ms * 1_000_000, 3_000_000_000, wait)],
    }
}

#[test]
fn calibration_ep_barrier_speeds_within_ten_percent_of_linux() {
    let m = two_core().unwrap();
    let mut table = String::from("S ms  barrier  measured  simulated  error\n");
    let mut worst: f64 = 0.0;
    for (s, wait, measured) in CALIBRATION_ROWS {
        let r = run_policy(
            &m,
            &ep(s, wait),
            "none",
            &Settings::new(m.topo.default_level()),
            &RunOptions::new(1),
        )
        .unwrap();
        assert!(r.finished);
        // 3 s of work per thread; speed = 3 / wall.
        let speed = 3.0 / r.runtime_s;
        let err = speed / measured - 1.0;
        worst = worst.max(err.abs());
        table += &format!(
            "{s:>4}  {wait:?}  {measured:.3}  {speed:.3}  {:+.1} %\n",
            err * 100.0
        );
    }
    println!("{table}");
    assert!(worst <= 0.10, "worst error {:.1} %\n{table}", worst * 100.0);
}

#[test]
fn calibration_fine_phases_stay_near_the_static_split_and_coarse_block_near_fair_share() {
    let m = two_core().unwrap();
    let speed = |s, w| {
        let r = run_policy(
            &m,
            &ep(s, w),
            "none",
            &Settings::new(m.topo.default_level()),
            &RunOptions::new(2),
        )
        .unwrap();
        3.0 / r.runtime_s
    };
    // Static split: the doubled-up core runs at 1/2. Fair share: 2/3.
    let fine = speed(1, Wait::Block);
    assert!((0.47..0.56).contains(&fine), "{fine}");
    let coarse = speed(100, Wait::Block);
    assert!(coarse > 0.6, "{coarse}");
    assert!(coarse > fine);
}

#[test]
fn calibration_three_spinners_get_time_averaged_fair_share() {
    // Measured: 3.64–4.20 CPU seconds each of 6 s on 2 cores (fair 4.0), 8–25 migrations.
    let m = two_core().unwrap();
    let w = Workload {
        name: "spinners".into(),
        description: String::new(),
        apps: vec![spinners(3, 100_000_000_000)],
    };
    let mut o = RunOptions::new(1);
    o.horizon = Nanos::from_secs(6);
    let r = run_policy(&m, &w, "none", &Settings::new(m.topo.default_level()), &o).unwrap();
    let total: f64 = r.thread_cpu_s.iter().sum();
    assert!(
        (total - 12.0).abs() < 0.05,
        "2 cores × 6 s = 12 CPU s, got {total}"
    );
    for &c in &r.thread_cpu_s {
        assert!((3.3..4.7).contains(&c), "{:?}", r.thread_cpu_s);
    }
    assert!(
        r.thread_migrations.iter().all(|&m| m >= 3),
        "{:?}",
        r.thread_migrations
    );
}
