//! The loop driven by a host made of plain values: a clock that jumps to each deadline, a
//! target that exits at a set time, sample failures on demand, and a count of restores.

use super::*;
use threadbalance_model::{ApplyReport, Plan, Snapshot};

/// A host whose clock only moves when the loop waits.
#[derive(Default)]
struct Fake {
    clock: Nanos,
    /// The target exits at this time.
    exit_at: Option<Nanos>,
    samples: u32,
    /// Fail this sample (1-based); with `true` the target exits as it fails.
    fail: Option<(u32, bool)>,
    forwarded: Vec<i32>,
    restored: u32,
    housekeeping: u32,
    /// The watching budgets the policy asked for, one per tick.
    budgets: Vec<Option<f64>>,
    /// How much later than asked its budget lets each tick come (its pacing).
    hold: Nanos,
}

/// A sample the fake host was told to fail, by its number.
#[derive(Debug, Clone, PartialEq, Eq)]
struct SampleFailed(u32);

impl std::fmt::Display for SampleFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sample {} failed", self.0)
    }
}

impl Host for Fake {
    type Error = SampleFailed;
    fn now(&self) -> Nanos {
        self.clock
    }
    fn sample(&mut self, into: &mut Snapshot) -> Result<(), SampleFailed> {
        self.samples += 1;
        if let Some((n, gone)) = self.fail
            && n == self.samples
        {
            if gone {
                self.exit_at = Some(self.clock);
            }
            return Err(SampleFailed(n));
        }
        into.at = self.clock;
        into.threads.clear();
        Ok(())
    }
    fn apply(&mut self, _plan: &Plan) -> ApplyReport {
        ApplyReport::default()
    }
    fn watch_budget(&mut self, share: Option<f64>) {
        self.budgets.push(share);
    }
    fn earliest(&mut self, due: Nanos) -> Nanos {
        due + self.hold
    }
}

impl LoopHost for Fake {
    type Restored = u32;
    fn target_exited(&mut self) -> bool {
        self.exit_at.is_some_and(|t| self.clock >= t)
    }
    fn wait_until(&mut self, deadline: Nanos) {
        self.clock = self.clock.max(deadline);
    }
    fn forward(&mut self, sig: i32) {
        self.forwarded.push(sig);
    }
    fn restore_all(&mut self) -> u32 {
        self.restored += 1;
        self.restored
    }
    fn housekeeping(&mut self) {
        self.housekeeping += 1;
    }
}

/// Decides every 100 ms, moves nothing; panics at its `panic_at`-th decision, and asks
/// for a watching budget of 2 % of one core after its `budget_from`-th.
struct Every100ms {
    decisions: u32,
    panic_at: Option<u32>,
    budget_from: Option<u32>,
}

impl Policy for Every100ms {
    fn name(&self) -> &'static str {
        "every-100ms"
    }
    fn watch_budget(&self) -> Option<f64> {
        self.budget_from
            .is_some_and(|n| self.decisions >= n)
            .then_some(0.02)
    }
    fn decide(&mut self, _topo: &Topology, _window: &Window) -> Plan {
        self.decisions += 1;
        if self.panic_at == Some(self.decisions) {
            panic!("decision {}", self.decisions);
        }
        Plan {
            next_in: Nanos::from_millis(100),
            ..Plan::default()
        }
    }
}

fn policy() -> Every100ms {
    Every100ms {
        decisions: 0,
        panic_at: None,
        budget_from: None,
    }
}

fn topo() -> Topology {
    threadbalance_model::testutil::topo(1, 1, 2, 1)
}

/// A signal source that gives `sig` at its `at`-th call.
fn signal_at(at: u32, sig: i32) -> impl FnMut() -> Option<i32> {
    let mut calls = 0;
    move || {
        calls += 1;
        (calls == at).then_some(sig)
    }
}

#[test]
fn manage_target_exiting_at_1s_with_100ms_ticks_ticks_ten_times_then_restores() {
    // Ticks at 0, 100, …, 900 ms (10); the wait after the last reaches 1000 ms, where the
    // target has exited.
    let mut host = Fake {
        exit_at: Some(Nanos::from_secs(1)),
        ..Fake::default()
    };
    let mut p = policy();
    let mut ticks = 0;
    let (restored, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| ticks += 1,
    );
    assert_eq!(ended.unwrap(), Ended::TargetExited);
    assert_eq!((ticks, p.decisions, host.samples), (10, 10, 10));
    assert_eq!(restored, 1);
    assert_eq!(
        host.housekeeping, 11,
        "once per turn, the last one included"
    );
}

#[test]
fn manage_hands_the_host_the_policys_watching_budget_after_each_decision() {
    // Ticks at 0, 100 and 200 ms; the policy asks for 2 % from its second decision on.
    let mut host = Fake {
        exit_at: Some(Nanos::from_millis(300)),
        ..Fake::default()
    };
    let mut p = Every100ms {
        budget_from: Some(2),
        ..policy()
    };
    let (_, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| {},
    );
    assert_eq!(ended.unwrap(), Ended::TargetExited);
    assert_eq!(host.budgets, [None, Some(0.02), Some(0.02)]);
}

#[test]
fn manage_stop_signal_on_the_fourth_turn_ends_after_three_ticks() {
    let mut host = Fake::default();
    let mut p = policy();
    let (restored, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut signal_at(4, 15),
        &mut |_, _| {},
    );
    assert_eq!(ended.unwrap(), Ended::Signal(15));
    assert_eq!(p.decisions, 3);
    assert_eq!(restored, 1);
    assert!(host.forwarded.is_empty());
}

#[test]
fn manage_forwarded_signal_goes_to_the_target_and_the_loop_goes_on() {
    let mut host = Fake {
        exit_at: Some(Nanos::from_secs(1)),
        ..Fake::default()
    };
    let mut p = policy();
    let (_, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Forward,
        &mut signal_at(4, 2),
        &mut |_, _| {},
    );
    assert_eq!(ended.unwrap(), Ended::TargetExited);
    assert_eq!(host.forwarded, vec![2]);
    assert_eq!(p.decisions, 10);
}

#[test]
fn manage_host_error_while_the_target_runs_is_an_error_and_still_restores() {
    let mut host = Fake {
        fail: Some((3, false)),
        ..Fake::default()
    };
    let mut p = policy();
    let (restored, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| {},
    );
    match ended {
        Err(LoopError::Host(e)) => assert_eq!(e.to_string(), "sample 3 failed"),
        other => panic!("{other:?}"),
    }
    assert_eq!((p.decisions, restored), (2, 1));
}

#[test]
fn manage_host_error_because_the_target_exited_is_its_end() {
    let mut host = Fake {
        fail: Some((3, true)),
        ..Fake::default()
    };
    let mut p = policy();
    let (_, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| {},
    );
    assert_eq!(ended.unwrap(), Ended::TargetExited);
}

#[test]
fn manage_panic_in_the_policy_is_caught_and_masks_are_restored() {
    let mut host = Fake::default();
    let mut p = Every100ms {
        panic_at: Some(3),
        ..policy()
    };
    let (restored, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| {},
    );
    match ended {
        Err(e @ LoopError::Panic(_)) => {
            assert_eq!(e.to_string(), "internal error (panic: decision 3)");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(restored, 1);
}

#[test]
fn manage_panic_in_on_tick_is_caught_too() {
    let mut host = Fake::default();
    let mut p = policy();
    let (restored, ended) = manage(
        &mut host,
        &topo(),
        &mut p,
        OnSignal::Stop,
        &mut || None,
        &mut |_, _| panic!("--fault-panic-after"),
    );
    assert!(matches!(ended, Err(LoopError::Panic(ref w)) if w == "--fault-panic-after"));
    assert_eq!(restored, 1);
}

#[test]
fn ticker_not_due_does_not_sample_and_a_zero_interval_waits_min_tick() {
    struct Zero;
    impl Policy for Zero {
        fn name(&self) -> &'static str {
            "zero"
        }
        fn decide(&mut self, _: &Topology, _: &Window) -> Plan {
            Plan::default()
        }
    }
    let mut host = Fake::default();
    let mut t = Ticker::new(Nanos::from_millis(5));
    // Due at 5 ms: at 4 ms nothing happens.
    let r = t.tick_if_due(&mut host, &topo(), &mut Zero, Nanos::from_millis(4));
    assert_eq!(r, Ok(None));
    assert_eq!(host.samples, 0);
    // At 5 ms it ticks; a plan asking for 0 ms is due again 1 ms later (MIN_TICK).
    let r = t.tick_if_due(&mut host, &topo(), &mut Zero, Nanos::from_millis(5));
    assert!(matches!(r, Ok(Some(_))));
    assert_eq!(t.next(), Nanos::from_millis(6));
}

#[test]
fn ticker_step_waits_what_the_policy_asks_then_what_the_hosts_pacing_adds() {
    // 100 ms asked, 30 ms more held by the host's budget: ticks at 0, 130, 260 ms.
    let mut host = Fake {
        hold: Nanos::from_millis(30),
        ..Fake::default()
    };
    let mut p = policy();
    let mut t = Ticker::new(Nanos::ZERO);
    let mut at = Vec::new();
    while at.len() < 3 {
        let now = host.clock;
        if t.tick_if_due(&mut host, &topo(), &mut p, now)
            .unwrap()
            .is_some()
        {
            at.push(now);
        }
        host.clock = t.next();
    }
    assert_eq!(at, [0, 130, 260].map(Nanos::from_millis));
    assert_eq!(host.samples, 3);
}
