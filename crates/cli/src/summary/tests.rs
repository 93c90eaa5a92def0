use super::*;
use threadbalance_linux::ledger::RestoreReport;
use threadbalance_linux::runcount::WhyProc;

/// What a host reports when it did nothing: no mask restored, run time from /proc.
fn quiet_host() -> HostReport {
    HostReport {
        restore: Restore::default(),
        handed_back: 0,
        slices: SliceCounts::default(),
        ticks_paced: 0,
        budget: Budget::default(),
        steady: None,
        acting: Nanos::ZERO,
        run_time: RunTime {
            source: RunSource::Proc(WhyProc::SharedOff),
            stopped: None,
        },
        lock_probe: LockReport::default(),
        choices: "judged from the masks alone (a test)".into(),
        hw_counters: None,
    }
}

/// The summary of `kind` at the core level of a one-socket, two-core machine, managed
/// from `start` to `end`, the host reporting `host`.
fn on_two_cores_from(
    kind: PolicyKind,
    default: bool,
    host: HostReport,
    (start, end): (Nanos, Nanos),
    policy: PolicySummary,
    ended: Ended,
) -> Summary {
    let topo = threadbalance_model::testutil::topo(1, 1, 2, 1);
    let setup = Setup::new(kind, default, &topo, Level::Core, false);
    let tally = Tally::new(&topo, Level::Core, start);
    Summary::new(setup, tally, host, ended, policy, end)
}

/// The summary of `kind` on two cores over one second, ended by `exit 0`.
fn on_two_cores(kind: PolicyKind, host: HostReport) -> Summary {
    on_two_cores_from(
        kind,
        false,
        host,
        (Nanos(0), Nanos::from_secs(1)),
        PolicySummary::Nothing,
        Ended::Exit(0),
    )
}

/// A host that restored `restored`, had `already` back and `vanished` gone.
fn restoring(restored: u32, already: u32, vanished: u32) -> HostReport {
    HostReport {
        restore: Restore::from(&RestoreReport {
            restored,
            already,
            vanished,
            ..RestoreReport::default()
        }),
        ..quiet_host()
    }
}

#[test]
fn summary_finish_right_after_start_reports_no_cpu_share() {
    // Attaching to a process that had already exited used to print "70086 % of one
    // core": start-up CPU time (topology reading) over a wall time of microseconds.
    let s = on_two_cores_from(
        PolicyKind::None,
        false,
        quiet_host(),
        (Nanos(1_000), Nanos(21_000)),
        PolicySummary::Nothing,
        Ended::ProcessExited(Pid(7)),
    );
    assert_eq!(s.own_cpu.pct, None);
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["tool_cpu_pct"], 0.0);
    assert_eq!(v["tool_cpu_pct_known"], false);
    assert_eq!(v["ended"], "process 7 exited");
    let text = s.to_text(false);
    assert!(!text.contains("% of one core"), "{text}");
    assert!(text.contains("no share of one core: under 0.1 s"), "{text}");
}

#[test]
fn summary_finish_after_50_ms_still_reports_no_cpu_share() {
    // 50 ms of management is under the 0.1 s floor: a few milliseconds of start-up
    // and restore CPU time over it would read as a large share of a core.
    let s = on_two_cores_from(
        PolicyKind::None,
        false,
        quiet_host(),
        (Nanos(0), Nanos::from_millis(50)),
        PolicySummary::Nothing,
        Ended::Exit(0),
    );
    assert_eq!(s.own_cpu.pct, None);
}

#[test]
fn summary_finish_after_a_second_reports_the_share() {
    let s = on_two_cores(PolicyKind::None, quiet_host());
    // The share is tool_cpu_s / 1 s, in percent.
    let pct = s.own_cpu.pct.unwrap();
    assert!((pct - 100.0 * s.own_cpu.seconds).abs() < 1e-9);
    assert!(s.to_text(false).contains("% of one core"));
    assert_eq!(
        serde_json::to_value(&s).unwrap()["tool_cpu_pct_known"],
        true
    );
}

#[test]
fn summary_restored_says_n_of_m_and_what_became_of_the_rest() {
    // 3 put back + 1 already back + 2 gone = 6 masks changed.
    let s = on_two_cores(PolicyKind::Pbind, restoring(3, 1, 2));
    assert_eq!(s.host.restore.total, 6);
    let text = s.to_text(false);
    assert!(
        text.contains("restored 3 of 6 (1 already back, 2 gone with their thread)"),
        "{text}"
    );
    // All put back: no parenthesis.
    let s = on_two_cores(PolicyKind::Pbind, restoring(4, 0, 0));
    assert!(
        s.to_text(false).contains("restored 4 of 4\n"),
        "{}",
        s.to_text(false)
    );
}

#[test]
fn summary_program_choices_are_counted_apart_from_what_was_restored() {
    // See: issue 39. 3 masks put back, one of them found narrowed by its cpuset; one
    // thread pinned itself after we moved it, one was born pinned.
    use threadbalance_linux::ledger::Kept;
    use threadbalance_model::{CpuId, CpuSet, ThreadKey, Tid};
    let k = |tid| ThreadKey {
        pid: Pid(5),
        tid: Tid(tid),
        start_time: 1,
    };
    let r = RestoreReport {
        restored: 3,
        kept: vec![(k(7), Kept::ProgramChoice(CpuSet::single(CpuId(1))))],
        narrowed: vec![k(6)],
        born_pinned: vec![k(8)],
        ..RestoreReport::default()
    };
    let host = HostReport {
        restore: Restore::from(&r),
        ..quiet_host()
    };
    let s = on_two_cores(PolicyKind::Tumbler, host);
    let restore = &s.host.restore;
    assert_eq!((restore.restored, restore.total), (3, 4));
    assert_eq!((restore.program_chose, restore.program_born_pinned), (1, 1));
    assert_eq!(restore.cpuset_narrowed, 1);
    let text = s.to_text(true);
    assert!(
        text.contains("restored 3 of 4 (1 left (below)); 1 found narrowed by their cpuset"),
        "{text}"
    );
    assert!(
        text.contains(
            "2    left as their program set them (1 pinned as they started), 0 NOT restored"
        ),
        "{text}"
    );
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["program_born_pinned"], 1);
    assert_eq!(v["cpuset_narrowed"], 1);
}

#[test]
fn summary_default_policy_is_named_as_the_default() {
    let given = on_two_cores(PolicyKind::Tumbler, quiet_host());
    assert!(
        given
            .to_text(false)
            .contains("policy tumbler at level core")
    );
    let default = on_two_cores_from(
        PolicyKind::Tumbler,
        true,
        quiet_host(),
        (Nanos(0), Nanos::from_secs(1)),
        PolicySummary::Nothing,
        Ended::Exit(0),
    );
    assert!(
        default
            .to_text(false)
            .contains("policy tumbler (default) at level core")
    );
}

#[test]
fn summary_estimated_lock_time_shown_only_to_a_policy_that_reads_it() {
    for (policy, shown) in [
        (PolicyKind::Tumbler, false),
        (PolicyKind::None, false),
        (PolicyKind::Shuffling, true),
    ] {
        let s = on_two_cores(policy, quiet_host());
        assert!(!s.host.lock_probe.exact);
        assert_eq!(s.to_text(true).contains("lock time:"), shown, "{policy}");
        // The JSON keeps it either way.
        let v = serde_json::to_value(&s).unwrap();
        assert!(
            v["lock_time"]
                .as_str()
                .unwrap()
                .starts_with("estimate from blocked time")
        );
    }
    // Measured exactly, it is shown whatever the policy.
    let mut host = quiet_host();
    host.lock_probe.exact = true;
    let s = on_two_cores(PolicyKind::Tumbler, host);
    assert!(s.to_text(true).contains("lock time: exact (futex probe)"));
}

#[test]
fn summary_cv_is_explained_where_printed() {
    // Two cores, one busy 90 % and one 30 % of a one-second window: mean .6, σ .3,
    // CV = .3 / .6 = .5.
    let mut s = on_two_cores(PolicyKind::None, quiet_host());
    s.util = Utilization {
        per_domain: vec![0.9, 0.3],
        mean: 0.6,
        cv: 0.5,
    };
    let text = s.to_text(true);
    assert!(
        text.contains(
            "0.500    CV of core utilization: its spread across the cores (σ / mean; 0 = evenly loaded)"
        ),
        "{text}"
    );
    assert!(
        text.contains("mean core utilization  [core0=90.0% core1=30.0%]"),
        "{text}"
    );
}

#[test]
fn summary_restored_counts_the_masks_handed_back_during_the_run() {
    // 310 moves, every mask handed back by the policy before the end (speed's guard
    // giving the threads to Linux): the restore at the end found nothing left to do,
    // and the summary must not read "restored 0 of 0".
    let host = HostReport {
        handed_back: 310,
        ..restoring(0, 0, 0)
    };
    let mut s = on_two_cores(PolicyKind::Speed, host);
    s.tally.applied.done = 310;
    let text = s.to_text(false);
    assert!(
        text.contains("310    moves made, restored 310 of 310 (310 handed back during the run)"),
        "{text}"
    );
    // Some handed back, the rest put back at the end.
    let host = HostReport {
        handed_back: 300,
        ..restoring(8, 2, 0)
    };
    let s = on_two_cores(PolicyKind::Speed, host);
    let text = s.to_text(true);
    assert!(
        text.contains("restored 308 of 310 (300 handed back during the run, 2 already back)"),
        "{text}"
    );
    // The JSON keeps the restore at the end apart.
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(
        (&v["restored"], &v["restore_total"], &v["handed_back"]),
        (&8.into(), &10.into(), &300.into())
    );
}

#[test]
fn summary_short_by_default_the_details_with_verbose() {
    let mut s = on_two_cores_from(
        PolicyKind::Tumbler,
        false,
        restoring(4, 0, 0),
        (Nanos(0), Nanos::from_secs(2)),
        PolicySummary::Tumbler(Default::default()),
        Ended::Exit(0),
    );
    s.tally.applied.done = 12;
    let short = s.to_text(false);
    let lines: Vec<&str> = short.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 6, "{short}");
    for want in [
        "threadbalance summary: policy tumbler at level core",
        "s  wall time (exit 0), 0 threads in 0 processes",
        "12    moves made, restored 4 of 4",
        "threadbalance's own CPU time (",
        "regroupings: 0",
        "-v for the rest",
    ] {
        assert!(short.contains(want), "{want:?} in {short}");
    }
    for detail in ["threads seen", "CV of core utilization", "last interval"] {
        assert!(!short.contains(detail), "{detail:?} in {short}");
    }
    let long = s.to_text(true);
    for detail in [
        "threads seen",
        "12    moves made (0 decided",
        "CV of core utilization",
        "last interval",
    ] {
        assert!(long.contains(detail), "{detail:?} in {long}");
    }
    assert!(!long.contains("-v for the rest"), "{long}");
}

#[test]
fn summary_ended_and_run_time_read_as_they_always_have() {
    let said = |e: Ended| e.to_string();
    assert_eq!(said(Ended::Exit(3)), "exit 3");
    assert_eq!(said(Ended::Killed(9)), "killed by signal 9");
    assert_eq!(said(Ended::Unknown), "ended");
    assert_eq!(said(Ended::ProcessExited(Pid(42))), "process 42 exited");
    assert_eq!(said(Ended::Stopped("a: b".into())), "stopped: a: b");
    assert_eq!(said(Ended::Interrupted(2)), "interrupted by SIGINT");
    let stopped = RunTime {
        source: RunSource::Fast("BPF sched_switch counters"),
        stopped: Some(CountersStopped::Failed(std::sync::Arc::new(
            threadbalance_linux::LinuxError::Io {
                path: "counters".into(),
                source: std::io::Error::other("a map read failed"),
            },
        ))),
    };
    assert_eq!(
        stopped.to_string(),
        "run time from BPF sched_switch counters, then /proc (the counters stopped: reading counters: a map read failed)"
    );
    assert!(RunSource::described_proc(
        &quiet_host().run_time.to_string()
    ));
}

#[test]
fn summary_json_gives_the_tools_cpu_per_move_made() {
    // 92 µs carrying out plans that made 2 moves: 46 µs a move; no move, no figure.
    let host = HostReport {
        acting: Nanos(92_000),
        ..quiet_host()
    };
    let mut s = on_two_cores(PolicyKind::Speed, host);
    assert_eq!(serde_json::to_value(&s).unwrap()["move_cpu_us"], 0.0);
    s.tally.applied.done = 2;
    let v = serde_json::to_value(&s).unwrap();
    assert!(
        (v["move_cpu_us"].as_f64().unwrap() - 46.0).abs() < 1e-9,
        "{v}"
    );
}

#[test]
fn summary_json_has_every_field_of_the_schema_in_order() {
    let s = on_two_cores(PolicyKind::Tumbler, quiet_host());
    let text = serde_json::to_string(&s).unwrap();
    let keys: Vec<String> = serde_json::from_str::<serde_json::Value>(&text)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 49, "{keys:?}");
    assert!(text.starts_with("{\"schema_version\":"), "{text}");
    assert!(
        text.ends_with("\"ended\":\"exit 0\",\"hw_counters\":null,\"thread_counters\":[]}"),
        "{text}"
    );
}

/// The summary of two 1 s windows on two cores: thread 100 runs all of both, at IPC 2 then
/// 1 and MPKI 1 then 4; thread 101 runs half of each, counted (IPC 0.5, MPKI 20) only in
/// the first. The host names `source` as its counters.
fn counted(source: Option<&str>) -> Summary {
    use threadbalance_model::testutil;
    let topo = testutil::topo(1, 1, 2, 1);
    let setup = Setup::new(PolicyKind::None, false, &topo, Level::Core, false);
    let mut tally = Tally::new(&topo, Level::Core, Nanos(0));
    for (ipc, mpki, counted) in [(2.0, 1.0, true), (1.0, 4.0, false)] {
        let mut w = testutil::window(1000, &[1.0, 0.5], &[0, 1]);
        w.threads[0].ipc = Some(ipc);
        w.threads[0].mpki = Some(mpki);
        if counted {
            w.threads[1].ipc = Some(0.5);
            w.threads[1].mpki = Some(20.0);
        }
        tally.record(&topo, &w, &threadbalance_policy::TickReport::default());
    }
    let host = HostReport {
        hw_counters: source.map(String::from),
        ..quiet_host()
    };
    Summary::new(
        setup,
        tally,
        host,
        Ended::Exit(0),
        PolicySummary::Nothing,
        Nanos::from_secs(2),
    )
}

#[test]
fn summary_gives_ipc_and_mpki_per_thread_weighted_as_the_counts() {
    // At a steady clock thread 100 retired 2c + 1c instructions in 2c cycles (IPC 1.5) and
    // missed (2c·1 + 1c·4) / 3c per thousand (MPKI 2).
    let s = counted(Some("fake counters"));
    let t = s.tally.thread_counters();
    assert_eq!(t.len(), 2);
    assert_eq!((t[0].pid, t[0].tid), (1, 100));
    assert!((t[0].ipc - 1.5).abs() < 1e-9, "{t:?}");
    assert!((t[0].mpki - 2.0).abs() < 1e-9, "{t:?}");
    assert!((t[1].ipc - 0.5).abs() < 1e-9 && (t[1].mpki - 20.0).abs() < 1e-9);
    assert!((t[1].run_s - 0.5).abs() < 1e-9);
    let short = s.to_text(false);
    assert!(
        short.contains("IPC, ") && short.contains("MPKI over 2 threads"),
        "{short}"
    );
    assert!(short.contains("-v: per thread") && !short.contains("thread 1/100"));
    let long = s.to_text(true);
    assert!(
        long.contains("thread 1/100: IPC 1.50, MPKI 2.00 (2.000 s run)"),
        "{long}"
    );
    assert!(
        long.contains("thread 1/101: IPC 0.50, MPKI 20.00 (0.500 s run)"),
        "{long}"
    );
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["hw_counters"], "fake counters");
    assert_eq!(json["thread_counters"][1]["tid"], 101);
}

#[test]
fn summary_without_a_counter_source_says_nothing_of_them() {
    let s = counted(None);
    assert!(!s.to_text(true).contains("MPKI"), "{}", s.to_text(true));
    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["hw_counters"], serde_json::Value::Null);
}
