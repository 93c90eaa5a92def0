//! What the binary's Linux hosts (`run`, `attach`, `top`, the daemon) open beside the
//! adapter (`threadbalance_linux::adapter`): the hardware counters a policy or the operator
//! asks for, or the one line refusing to start without them.

use crate::error::bad_input;
use threadbalance_linux::perf::{CounterSource, FakeCounterSource, NoCounters, PerfSource};

/// Where the hardware counters come from, when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterAsk {
    /// Only if the policy reads them.
    Policy,
    /// Also for a policy that does not (`--counters`: IPC and MPKI in the summary).
    Always,
    /// Plain values instead of the PMU's, for tests (`--fake-counters`, hidden).
    Fake,
}

/// The plain values `--fake-counters` gives at every read of every thread: IPC 1.5,
/// MPKI 2.
pub const FAKE_STEP: threadbalance_model::HwCounters = threadbalance_model::HwCounters {
    instructions: 3_000_000,
    cycles: 2_000_000,
    llc_misses: 6_000,
};

/// The hardware counters a run needs, open: `None` when neither `policy` nor the operator
/// asks for them; an input error (exit 2, one line, before anything starts) when they do
/// and this machine has none. The one place the Linux hosts ask a policy whether it
/// reads counters.
pub fn counter_source(
    policy: &dyn threadbalance_policy::Policy,
    name: &str,
    ask: CounterAsk,
) -> anyhow::Result<Option<Box<dyn CounterSource>>> {
    if ask == CounterAsk::Fake {
        return Ok(Some(Box::new(FakeCounterSource { step: FAKE_STEP })));
    }
    let reads = policy.needs().counters;
    if !reads && ask != CounterAsk::Always {
        return Ok(None);
    }
    let who = if reads {
        format!("policy {name} reads hardware counters")
    } else {
        "--counters asks for hardware counters".to_string()
    };
    counters_or_refusal(who, PerfSource::system())
        .map(|s| Some(Box::new(s) as Box<dyn CounterSource>))
        .map_err(bad_input)
}

/// A run refused because it needs hardware counters and this machine has none: who needs
/// them, why there are none, and where to look instead, on one line.
#[derive(Debug, thiserror::Error)]
#[error(
    "{who}, and this machine has none: {why}; not started (`threadbalance doctor` says \
     what it offers; `sim` runs on simulated counters)"
)]
pub struct CountersRefused {
    /// What needs them ("policy dino reads hardware counters").
    pub who: String,
    /// Why the machine has none.
    #[source]
    pub why: NoCounters,
}

/// The source when there is one, else the refusal: `who` needs counters, and `available`
/// says why there are none.
pub fn counters_or_refusal<S>(
    who: String,
    available: Result<S, NoCounters>,
) -> Result<S, CountersRefused> {
    available.map_err(|why| CountersRefused { who, why })
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::Topology;
    use threadbalance_policy::{Policy, PolicyKind};

    #[test]
    fn counters_or_refusal_passes_a_source_and_refuses_in_one_line_without() {
        assert_eq!(
            counters_or_refusal("policy x".into(), Ok::<u8, NoCounters>(7)).unwrap(),
            7
        );
        let e = counters_or_refusal::<u8>(
            "policy dino reads hardware counters".into(),
            Err(NoCounters::NoPmu),
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "policy dino reads hardware counters, and this machine has none: no CPU PMU in \
             /sys/bus/event_source/devices (a virtual machine without PMU passthrough?); \
             not started (`threadbalance doctor` says what it offers; `sim` runs on \
             simulated counters)"
        );
        // Printed as main prints it: the reason, and its errno, said once.
        let e = anyhow::Error::new(
            counters_or_refusal::<u8>(
                "--counters asks for hardware counters".into(),
                Err(NoCounters::Open {
                    source: std::io::Error::from_raw_os_error(13),
                }),
            )
            .unwrap_err(),
        );
        let line = crate::error::one_line(&e);
        assert_eq!(line, e.to_string());
        assert!(
            line.contains(
                ": perf_event_open: not allowed (perf_event_paranoid, or a seccomp \
                 filter) (Permission denied (os error 13)); not started"
            ),
            "{line}"
        );
        assert_eq!(e.chain().count(), 3, "refusal, reason, errno");
    }

    /// A policy that reads counters and decides nothing (what `dino` asks of a host).
    struct Counting;

    impl Policy for Counting {
        fn name(&self) -> &'static str {
            "counting"
        }
        fn decide(
            &mut self,
            _topo: &Topology,
            _window: &threadbalance_model::Window,
        ) -> threadbalance_model::Plan {
            threadbalance_model::Plan::default()
        }
        fn needs(&self) -> threadbalance_policy::Needs {
            threadbalance_policy::Needs {
                counters: true,
                ..threadbalance_policy::Needs::NOTHING
            }
        }
    }

    #[test]
    fn counter_source_refuses_a_policy_that_reads_counters_where_there_are_none() {
        let offered = PerfSource::system();
        match (
            counter_source(&Counting, "counting", CounterAsk::Policy),
            offered,
        ) {
            (Ok(s), Ok(_)) => assert_eq!(s.map(|s| s.name()), Some("perf_event")),
            (Err(e), Err(why)) => {
                assert!(e.downcast_ref::<crate::InputError>().is_some());
                let line = e.to_string();
                assert!(
                    line.starts_with(
                        "policy counting reads hardware counters, and this machine has none: "
                    ),
                    "{line}"
                );
                assert!(line.contains(&why.to_string()), "{line} / {why}");
                assert_eq!(crate::error::one_line(&e), line);
            }
            (got, offered) => panic!("{:?} against {offered:?}", got.map(|s| s.is_some())),
        }
        // Told to use plain values instead, it starts anywhere.
        let fake = counter_source(&Counting, "counting", CounterAsk::Fake).unwrap();
        assert!(fake.is_some());
    }

    #[test]
    fn counter_source_opens_nothing_unless_asked() {
        let topo = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        let policy: Box<dyn Policy> = PolicyKind::Tumbler
            .build(&threadbalance_policy::Settings::default(), &topo)
            .unwrap();
        assert!(!policy.needs().counters);
        let none = counter_source(policy.as_ref(), "tumbler", CounterAsk::Policy).unwrap();
        assert!(none.is_none());
        let fake = counter_source(policy.as_ref(), "tumbler", CounterAsk::Fake).unwrap();
        assert_eq!(fake.map(|s| s.name()), Some("fake counters"));
        // Asked for on a machine with or without them: a source, or one line, exit 2.
        match counter_source(policy.as_ref(), "tumbler", CounterAsk::Always) {
            Ok(s) => assert_eq!(s.map(|s| s.name()), Some("perf_event")),
            Err(e) => {
                assert!(e.downcast_ref::<crate::InputError>().is_some());
                assert!(e.to_string().starts_with("--counters asks"), "{e}");
            }
        }
    }
}
