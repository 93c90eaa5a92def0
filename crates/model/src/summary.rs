//! What a policy says it did over a run, typed: one struct per policy family, numbers as
//! numbers, the unit in the field's name.
//!
//! The same value flows to the end-of-run summary of `run` and `attach` (as text and as
//! JSON), to the simulator's results and to `compare`, which reads its children's JSON back
//! into these types. In JSON it is one object whose `kind` names the family:
//!
//! ```text
//!  {"kind": "tumbler", "regroupings": 3, "moves": 12, "last_cv": 0.028,
//!   "last_interval_ms": 800.0, "skipped_low_cv": 1, "skipped_balanced": 0}
//! ```
//!
//! A value that was never measured is `null` (Tumbler's `last_cv` before its first
//! regrouping), never a placeholder string. [`PolicySummary::lines`] gives the words a
//! person reads, in a stable order.
//!
//! ```
//! use threadbalance_model::{PolicySummary, PsetsSummary};
//! let s = PolicySummary::Psets(PsetsSummary { threads_placed: 8 });
//! assert_eq!(s.lines(), [("threads placed".to_string(), "8".to_string())]);
//! ```

use crate::Nanos;
use serde::{Deserialize, Serialize};

/// A policy's own account of a run, by family (`kind` in JSON).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PolicySummary {
    /// A policy with nothing of its own to report (`none`).
    #[default]
    #[serde(rename = "none")]
    Nothing,
    /// `psets`.
    Psets(PsetsSummary),
    /// `pbind`.
    Pbind(PbindSummary),
    /// `tumbler`.
    Tumbler(TumblerSummary),
    /// `shuffling`.
    Shuffling(ShufflingSummary),
    /// `handoff`.
    Handoff(HandoffSummary),
    /// `speed`.
    Speed(Box<SpeedSummary>),
    /// `dino`.
    Dino(DinoSummary),
    /// Every `numa-*` policy.
    Numa(NumaSummary),
}

/// `dino`: threads classed by memory intensity and dealt over the domains.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DinoSummary {
    /// Decisions on a window with rates.
    pub decisions: u64,
    /// Threads moved to another domain or confined for the first time.
    pub moves: u64,
    /// Threads whose class changed after their first reading.
    pub reclassified: u64,
    /// Super-devils (> 50 LLC misses per 1000 instructions) at the last decision.
    pub super_devils: u64,
    /// Devils (> 1.5) at the last decision.
    pub devils: u64,
    /// Turtles at the last decision.
    pub turtles: u64,
}

/// `psets`: threads put in their group once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PsetsSummary {
    /// Threads placed in a group.
    pub threads_placed: u64,
}

/// `pbind`: threads pinned one per core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PbindSummary {
    /// Threads pinned to a logical CPU.
    pub threads_pinned: u64,
    /// Physical cores holding the CPUs pinned to.
    pub cores: u64,
    /// Logical CPUs pinned to, in order (cores first, then their SMT siblings).
    #[serde(default)]
    pub cpus: u64,
}

/// `tumbler`: regroupings by utilization.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TumblerSummary {
    /// Regroupings made.
    pub regroupings: u64,
    /// Threads moved, over all regroupings.
    pub moves: u64,
    /// Coefficient of variation (σ/mean) of thread utilization at the last decision;
    /// `null` before the first.
    pub last_cv: Option<f64>,
    /// The interval chosen at the last decision, ms; `null` before the first.
    pub last_interval_ms: Option<f64>,
    /// Decisions skipped because the CV was under 0.05.
    pub skipped_low_cv: u64,
    /// Decisions skipped because the domains were already balanced.
    pub skipped_balanced: u64,
}

/// Where Shuffling's lock time came from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LockTimeSource {
    /// Not sampled yet.
    #[default]
    NotSampled,
    /// Measured exactly (the futex probe, or the simulator's lock model).
    Measured,
    /// Estimated from blocked time (no exact probe).
    Estimated,
}

impl LockTimeSource {
    /// How the summary words it.
    pub fn describe(self) -> &'static str {
        match self {
            LockTimeSource::NotSampled => "not sampled",
            LockTimeSource::Measured => "measured",
            LockTimeSource::Estimated => "estimated from blocked time (no exact probe)",
        }
    }
}

/// `shuffling`: shuffles by lock time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShufflingSummary {
    /// Shuffles made.
    pub shuffles: u64,
    /// Threads moved, over all shuffles.
    pub moves: u64,
    /// Lock-time checks.
    pub lock_checks: u64,
    /// Checks that found every process at or below the threshold.
    pub below_threshold: u64,
    /// The highest per-process lock time at the last check, percent of time; `null`
    /// before the first.
    pub last_lock_time_pct: Option<f64>,
    /// Where the lock time came from.
    pub lock_time_source: LockTimeSource,
}

/// `handoff`: regroupings by the who-wakes-whom graph.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffSummary {
    /// Whether wake edges were measured (the futex probe on Linux, the simulator's
    /// hand-offs); without them the policy moves nothing.
    pub wake_edges_measured: bool,
    /// Regroupings made.
    pub regroupings: u64,
    /// Threads moved, over all regroupings.
    pub moves: u64,
    /// Checks of the graph.
    pub checks: u64,
    /// Checks with too few hand-offs crossing domains to act on.
    pub quiet_checks: u64,
    /// Checks whose best partition did not cut enough hand-offs to be worth moving.
    pub kept_placement: u64,
    /// Share of hand-offs crossing domains at the last check, percent; `null` before it.
    pub last_cross_domain_pct: Option<f64>,
    /// Hand-offs per second at the last check; `null` before it.
    pub last_handoffs_per_s: Option<f64>,
}

/// Who places the threads under `speed`'s guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardMode {
    /// The policy does (rotation running).
    Managing,
    /// Linux does, for a probe.
    ProbingLinux,
    /// Linux does, because the last probe did better.
    HandedBack,
    /// The policy does again, on trial after a hand-back.
    Trial,
}

impl GuardMode {
    /// How the summary words it.
    pub fn describe(self) -> &'static str {
        match self {
            GuardMode::Managing => "managing",
            GuardMode::ProbingLinux => "probing Linux",
            GuardMode::HandedBack => "handed back to Linux",
            GuardMode::Trial => "managing on trial",
        }
    }
}

/// `speed`'s guard: probes of Linux alone, and hand-backs when Linux did better.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardSummary {
    /// Who places the threads at the end.
    pub mode: GuardMode,
    /// Probes of Linux alone.
    pub probes: u64,
    /// Probes skipped: the managed rate was at the fair share, or the threads were evenly
    /// pinned and progressed alike.
    pub skipped_probes: u64,
    /// Of those, the ones skipped only because the threads were evenly pinned (as many on
    /// every core) and progressed alike, which no placement betters.
    #[serde(default)]
    pub skipped_even: u64,
    /// Times the threads were handed back to Linux.
    pub handbacks: u64,
    /// Times management resumed after a hand-back.
    pub resumptions: u64,
    /// The last hand-back or resumption, explained.
    pub last_event: Option<String>,
    /// How Linux and management were compared: `judged by progress (…)` where the host
    /// counts progress events (barrier rounds, futex wake-ups), or `no progress signal,
    /// judged by CPU share`.
    #[serde(default)]
    pub judge: Option<String>,
}

/// `speed`: rotation of threads over unevenly loaded cores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpeedSummary {
    /// The balance interval at the end, ms.
    pub balance_interval_ms: f64,
    /// Why that interval.
    pub interval_reason: String,
    /// Shortest interval used, ms; `null` before the first round.
    pub interval_min_ms: Option<f64>,
    /// Longest interval used, ms; `null` before the first round.
    pub interval_max_ms: Option<f64>,
    /// Mean interval over the rounds, ms.
    pub interval_mean_ms: f64,
    /// Voluntary context switches per thread-second (decayed).
    pub voluntary_switches_per_thread_s: f64,
    /// Involuntary context switches per thread-second (decayed).
    pub involuntary_switches_per_thread_s: f64,
    /// Whether switches were counted (the host reports them).
    pub switches_counted: bool,
    /// Timeslices per thread-second (decayed).
    pub timeslices_per_thread_s: f64,
    /// Balancing rounds.
    pub rounds: u64,
    /// Of those, rounds that rotated threads.
    pub rotating_rounds: u64,
    /// Swaps made by the rotation.
    pub rotation_swaps: u64,
    /// Moves that levelled thread counts.
    pub levelling_moves: u64,
    /// Rounds that held the level placement without rotating: the threads never block and
    /// evening the CPUs out would lift the slowest by less than the paper's `T_s` allows.
    #[serde(default)]
    pub held_level_rounds: u64,
    /// Rotations backed off (moves that did not speed up).
    pub backoffs: u64,
    /// First placements.
    pub initial_placements: u64,
    /// Threads released to Linux (mostly sleeping).
    pub released_to_linux: u64,
    /// Times every thread was handed to Linux because the threads are not CPU-bound peers:
    /// their duty cycles differ, or they pass the CPU back and forth by yielding.
    pub peer_hand_backs: u64,
    /// Whether the threads are with Linux for that reason now.
    pub peers_apart_now: bool,
    /// Times every busy thread was lent to Linux because they were no more than the cores.
    #[serde(default)]
    pub few_hand_backs: u64,
    /// Whether they are with Linux for that reason now.
    #[serde(default)]
    pub few_now: bool,
    /// Times every busy thread was lent to Linux because the host held the rounds back
    /// too long for the program's phases (a paced live tick).
    #[serde(default)]
    pub sparse_hand_backs: u64,
    /// Whether they are with Linux for that reason now.
    #[serde(default)]
    pub sparse_now: bool,
    /// The last lending or placing again for that reason, explained.
    #[serde(default)]
    pub sparse_last: Option<String>,
    /// Times such a lending was measured on trial and taken back, Linux having run the
    /// program slower than the rotation had.
    #[serde(default)]
    pub sparse_trials_lost: u64,
    /// Ticks after which the policy asked a pacing host to watch within
    /// `rounds_budget_pct` % of one core instead of its default, for the rotation's rounds.
    #[serde(default)]
    pub rounds_budget_ticks: u64,
    /// That budget, % of one core.
    #[serde(default)]
    pub rounds_budget_pct: f64,
    /// The guard, `null` when off.
    pub guard: Option<GuardSummary>,
}

/// `numa-*`: moves between NUMA nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumaSummary {
    /// Threads adopted: confined to the node they ran on when first seen.
    pub threads_adopted: u64,
    /// Ticks on which nodes were imbalanced.
    pub imbalanced_ticks: u64,
    /// Threads moved between nodes.
    pub moves: u64,
    /// Moves whose thread's leader already ran on the destination.
    pub moves_leader_on_destination: u64,
    /// Selections that found no movable thread.
    pub selections_nothing_movable: u64,
    /// Moves forced after refusals.
    pub moves_forced: u64,
    /// Candidates examined.
    pub candidates_examined: u64,
    /// Evaluations of the load metric.
    pub metric_evaluations: u64,
}

/// `"-"` for a value not measured yet, else `show(value)`.
fn or_dash<T>(v: Option<T>, show: impl Fn(T) -> String) -> String {
    v.map_or_else(|| "-".to_string(), show)
}

/// A duration in ms as [`Nanos`] shows it (`800.000ms`).
fn ms_text(ms: f64) -> String {
    Nanos((ms * 1e6).round().max(0.0) as u64).to_string()
}

impl PolicySummary {
    /// The summary as `(what, value)` lines for a person, in a stable order.
    pub fn lines(&self) -> Vec<(String, String)> {
        let l = |k: &str, v: String| (k.to_string(), v);
        match self {
            PolicySummary::Nothing => Vec::new(),
            PolicySummary::Psets(s) => vec![l("threads placed", s.threads_placed.to_string())],
            PolicySummary::Dino(s) => vec![
                l("decisions", s.decisions.to_string()),
                l("moves", s.moves.to_string()),
                l("reclassified", s.reclassified.to_string()),
                l(
                    "last classes (super-devils, devils, turtles)",
                    format!("{}, {}, {}", s.super_devils, s.devils, s.turtles),
                ),
            ],
            PolicySummary::Pbind(s) => vec![
                l("threads pinned", s.threads_pinned.to_string()),
                l("cores", s.cores.to_string()),
                l("CPUs", s.cpus.to_string()),
            ],
            PolicySummary::Tumbler(s) => vec![
                l("regroupings", s.regroupings.to_string()),
                l("moves", s.moves.to_string()),
                l(
                    "last CV of thread utilization (σ / mean)",
                    or_dash(s.last_cv, |cv| format!("{cv:.3}")),
                ),
                l("last interval", or_dash(s.last_interval_ms, ms_text)),
                l("skipped (CV < 0.05)", s.skipped_low_cv.to_string()),
                l("skipped (domains balanced)", s.skipped_balanced.to_string()),
            ],
            PolicySummary::Shuffling(s) => vec![
                l("shuffles", s.shuffles.to_string()),
                l("moves", s.moves.to_string()),
                l("lock checks", s.lock_checks.to_string()),
                l("below threshold", s.below_threshold.to_string()),
                l(
                    "last lock time",
                    or_dash(s.last_lock_time_pct, |p| format!("{p:.1} %")),
                ),
                l("lock time", s.lock_time_source.describe().to_string()),
            ],
            PolicySummary::Handoff(s) => vec![
                l(
                    "wake edges",
                    if s.wake_edges_measured {
                        "measured"
                    } else {
                        "not measured"
                    }
                    .to_string(),
                ),
                l("regroupings", s.regroupings.to_string()),
                l("moves", s.moves.to_string()),
                l("checks", s.checks.to_string()),
                l("quiet checks", s.quiet_checks.to_string()),
                l("kept placement", s.kept_placement.to_string()),
                l(
                    "last cross-domain hand-offs",
                    or_dash(s.last_cross_domain_pct, |p| format!("{p:.1} %")),
                ),
                l(
                    "last hand-off rate",
                    or_dash(s.last_handoffs_per_s, |r| format!("{r:.0}/s")),
                ),
            ],
            PolicySummary::Speed(s) => speed_lines(s),
            PolicySummary::Numa(s) => vec![
                l("numa threads adopted", s.threads_adopted.to_string()),
                l("numa imbalanced ticks", s.imbalanced_ticks.to_string()),
                l("numa moves", s.moves.to_string()),
                l(
                    "numa moves with leader on destination",
                    s.moves_leader_on_destination.to_string(),
                ),
                l(
                    "numa selections without a movable thread",
                    s.selections_nothing_movable.to_string(),
                ),
                l(
                    "numa moves forced after refusals",
                    s.moves_forced.to_string(),
                ),
                l(
                    "numa candidates examined",
                    s.candidates_examined.to_string(),
                ),
                l("numa metric evaluations", s.metric_evaluations.to_string()),
            ],
        }
    }
}

fn speed_lines(s: &SpeedSummary) -> Vec<(String, String)> {
    let l = |k: &str, v: String| (k.to_string(), v);
    let range = match (s.interval_min_ms, s.interval_max_ms) {
        (Some(a), Some(b)) => format!("{} – {}", ms_text(a), ms_text(b)),
        _ => "-".into(),
    };
    vec![
        l(
            "balance interval",
            format!("{} ({})", ms_text(s.balance_interval_ms), s.interval_reason),
        ),
        l("interval range", range),
        l("interval mean (ms)", format!("{:.2}", s.interval_mean_ms)),
        l(
            "sync signals (per thread-s)",
            format!(
                "{:.0} voluntary, {:.0} involuntary switches{}, {:.0} timeslices",
                s.voluntary_switches_per_thread_s,
                s.involuntary_switches_per_thread_s,
                if s.switches_counted {
                    ""
                } else {
                    " (not counted)"
                },
                s.timeslices_per_thread_s
            ),
        ),
        l("rounds (rotating)", rounds_text(s)),
        l("rotation swaps", s.rotation_swaps.to_string()),
        l("levelling moves", s.levelling_moves.to_string()),
        l(
            "rounds held level (a rotation would gain under 1/T_s)",
            s.held_level_rounds.to_string(),
        ),
        l(
            "rotation back-offs (moves that did not speed up)",
            s.backoffs.to_string(),
        ),
        l("initial placements", s.initial_placements.to_string()),
        l(
            "threads released to Linux (mostly sleeping)",
            s.released_to_linux.to_string(),
        ),
        l(
            "handed to Linux: not CPU-bound peers (duty cycles differ, or yields for work)",
            if s.peers_apart_now {
                format!("{} times, apart now", s.peer_hand_backs)
            } else {
                format!("{} times", s.peer_hand_backs)
            },
        ),
        l(
            "handed to Linux: no more busy threads than cores",
            if s.few_now {
                format!("{} times, with Linux now", s.few_hand_backs)
            } else {
                format!("{} times", s.few_hand_backs)
            },
        ),
        l(
            "handed to Linux: rounds too sparse for the phases",
            sparse_text(s),
        ),
        l("guard", s.guard.as_ref().map_or("off".into(), guard_text)),
    ]
}

fn rounds_text(s: &SpeedSummary) -> String {
    let mut t = format!("{} ({})", s.rounds, s.rotating_rounds);
    if s.rounds_budget_ticks > 0 {
        t.push_str(&format!(
            "; watching within {:.1} % of one core after {} ticks, for the rounds",
            s.rounds_budget_pct, s.rounds_budget_ticks
        ));
    }
    t
}

fn sparse_text(s: &SpeedSummary) -> String {
    let mut t = format!("{} times", s.sparse_hand_backs);
    if s.sparse_trials_lost > 0 {
        t.push_str(&format!(
            " ({} taken back: Linux ran slower)",
            s.sparse_trials_lost
        ));
    }
    if s.sparse_now {
        t.push_str(", with Linux now");
    }
    if let Some(last) = &s.sparse_last {
        t.push_str("; ");
        t.push_str(last);
    }
    t
}

fn guard_text(g: &GuardSummary) -> String {
    let why = match g.skipped_even {
        0 => "managed rate at the fair share".to_string(),
        n if n == g.skipped_probes => "threads evenly pinned and progressing alike".to_string(),
        n => format!(
            "{} at the fair share, {n} evenly pinned and progressing alike",
            g.skipped_probes.saturating_sub(n)
        ),
    };
    let mut s = format!(
        "{}; {} probes ({} skipped: {why}), {} hand-backs, {} resumptions",
        g.mode.describe(),
        g.probes,
        g.skipped_probes,
        g.handbacks,
        g.resumptions
    );
    if let Some(last) = &g.last_event {
        s.push_str("; ");
        s.push_str(last);
    }
    if let Some(judge) = &g.judge {
        s.push_str("; ");
        s.push_str(judge);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_summary_tumbler_json_is_numbers_with_units_in_names() {
        let s = PolicySummary::Tumbler(TumblerSummary {
            regroupings: 3,
            moves: 12,
            last_cv: Some(0.028),
            last_interval_ms: Some(800.0),
            skipped_low_cv: 1,
            skipped_balanced: 0,
        });
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["kind"], "tumbler");
        assert_eq!(v["regroupings"], 3);
        assert_eq!(v["last_interval_ms"], 800.0);
        // Read back as written.
        let back: PolicySummary = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        // 800 ms shows as Nanos does.
        assert_eq!(s.lines()[3], ("last interval".into(), "800.000ms".into()));
    }

    #[test]
    fn policy_summary_unmeasured_values_are_null_and_dashes() {
        let s = PolicySummary::Shuffling(ShufflingSummary::default());
        let v = serde_json::to_value(&s).unwrap();
        assert!(v["last_lock_time_pct"].is_null());
        assert_eq!(v["lock_time_source"], "not-sampled");
        assert_eq!(s.lines()[4].1, "-");
        assert_eq!(s.lines()[5].1, "not sampled");
    }

    #[test]
    fn policy_summary_nothing_is_kind_none_and_no_lines() {
        let v = serde_json::to_value(PolicySummary::Nothing).unwrap();
        assert_eq!(v, serde_json::json!({"kind": "none"}));
        assert!(PolicySummary::Nothing.lines().is_empty());
    }

    #[test]
    fn policy_summary_speed_says_when_a_sparse_lending_was_taken_back() {
        let mut s = SpeedSummary {
            sparse_hand_backs: 2,
            sparse_now: true,
            sparse_last: Some("lent at 3.10 s".into()),
            ..SpeedSummary::default()
        };
        let line = |s: &SpeedSummary| {
            PolicySummary::Speed(Box::new(s.clone())).lines()[13]
                .1
                .clone()
        };
        assert_eq!(line(&s), "2 times, with Linux now; lent at 3.10 s");
        s.sparse_trials_lost = 1;
        assert_eq!(
            line(&s),
            "2 times (1 taken back: Linux ran slower), with Linux now; lent at 3.10 s"
        );
        let v = serde_json::to_value(PolicySummary::Speed(Box::new(s))).unwrap();
        assert_eq!(v["sparse_trials_lost"], 1);
    }

    #[test]
    fn policy_summary_speed_says_when_it_asked_for_a_larger_watching_budget() {
        let mut s = SpeedSummary {
            rounds: 40,
            rotating_rounds: 30,
            ..SpeedSummary::default()
        };
        let line = |s: &SpeedSummary| PolicySummary::Speed(Box::new(s.clone())).lines()[4].clone();
        assert_eq!(line(&s), ("rounds (rotating)".into(), "40 (30)".into()));
        s.rounds_budget_ticks = 35;
        s.rounds_budget_pct = 2.5;
        assert_eq!(
            line(&s).1,
            "40 (30); watching within 2.5 % of one core after 35 ticks, for the rounds"
        );
        let v = serde_json::to_value(PolicySummary::Speed(Box::new(s))).unwrap();
        assert_eq!(v["rounds_budget_ticks"], 35);
        assert_eq!(v["rounds_budget_pct"], 2.5);
    }

    #[test]
    fn policy_summary_speed_guard_off_and_on() {
        let mut s = SpeedSummary {
            balance_interval_ms: 20.0,
            interval_reason: "no synchronization seen".into(),
            ..SpeedSummary::default()
        };
        let text = |s: &SpeedSummary| PolicySummary::Speed(Box::new(s.clone())).lines();
        assert_eq!(text(&s)[0].1, "20.000ms (no synchronization seen)");
        assert_eq!(text(&s)[11].1, "0 times");
        assert_eq!(text(&s)[12].1, "0 times");
        assert_eq!(text(&s)[13].1, "0 times");
        assert_eq!(text(&s)[14], ("guard".into(), "off".into()));
        s.guard = Some(GuardSummary {
            mode: GuardMode::HandedBack,
            probes: 2,
            skipped_probes: 1,
            skipped_even: 0,
            handbacks: 1,
            resumptions: 0,
            last_event: Some("handed back at 1.25 s".into()),
            judge: None,
        });
        assert_eq!(
            text(&s)[14].1,
            "handed back to Linux; 2 probes (1 skipped: managed rate at the fair share), \
             1 hand-backs, 0 resumptions; handed back at 1.25 s"
        );
        let mut g = s.guard.clone().unwrap();
        (
            g.mode,
            g.probes,
            g.skipped_probes,
            g.skipped_even,
            g.last_event,
        ) = (GuardMode::Managing, 0, 3, 2, None);
        s.guard = Some(g.clone());
        assert_eq!(
            text(&s)[14].1,
            "managing; 0 probes (3 skipped: 1 at the fair share, 2 evenly pinned and \
             progressing alike), 1 hand-backs, 0 resumptions"
        );
        g.skipped_even = 3;
        s.guard = Some(g);
        assert!(
            text(&s)[14]
                .1
                .contains("(3 skipped: threads evenly pinned and progressing alike)")
        );
    }
}
