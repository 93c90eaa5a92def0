//! Whether the faster run-time source costs the program more than `/proc` would cost the
//! tool.
//!
//! The BPF counters run a program at every context switch of the machine: the program
//! being managed pays for each of its own switches (and every other program for its, a
//! map lookup each). `/proc` costs the tool instead, a few microseconds a thread at every
//! sample. For most programs the counters are far cheaper; for one that switches hundreds
//! of thousands of times a second (threads that yield in a loop, a server passing
//! requests between threads) they are not: `sysbench threads --threads=3` ran 9.7 %
//! longer under `run --policy none` with the counters than without (median of 7 paired
//! runs on the 2-core VM, Linux 6.18), where the tool reading `/proc` added nothing
//! measurable. So each span of [`SPAN`] the sampler compares the two:
//!
//! ```text
//!  counters' cost to the program  = switches/s × TRACED_SWITCH
//!  /proc's cost to the tool       = threads × samples/s × PROC_READ
//!  counters > /proc and counters > the tool's budget (0.8 % of a core)
//!      ─► drop the counters (one way; /proc goes on from the same counts)
//! ```
//!
//! Samples come at the policy's pace, up to 100 ms apart when a run starts, and the first
//! only opens the span; so while the first span is open the host also weighs the counters
//! between samples, every [`FIRST_LOOKS`] ([`Weigh::peek`]): a program that spends the
//! allowance in 25 ms is not kept paying until the second sample.
//!
//! The budget is the floor because the counters buy the policies exact waits at every
//! sample (`Window::waits_late` off): a cost the tool would be allowed anyway is worth
//! it. Without the floor a yielding barrier on three threads (16,000 switches a second,
//! 0.4 % of a core against /proc's 0.3 %) lost its counters, and `speed` ran it 4 %
//! slower (5 paired runs on the 2-core VM); most of those switches are waiting threads'
//! yields, whose cost the program never feels.

use threadbalance_model::Nanos;
use threadbalance_model::pace::BUDGET;

/// What one traced context switch of the managed program costs it: the `sched_switch`
/// tracepoint and our program on it. Measured: `sysbench threads --threads=3
/// --events=3000` made 790,000 switches in 1.12 s and ran 9.7 % longer with the counters
/// (0.11 s on each of the 2 CPUs), about 0.28 µs a switch.
pub const TRACED_SWITCH: Nanos = Nanos(280);

/// What reading one thread from `/proc` costs the tool at a sample, beyond what the
/// counters cost it: `bench --cost`'s steady ticks, 257 µs against 38 µs for 64 threads
/// and 983 against 81 µs for 256 (docs/cost.md), about 3.5 µs a thread.
pub const PROC_READ: Nanos = Nanos(3_500);

/// How long the switches and samples are counted before the two costs are compared: a
/// few samples at the slowest pace the tool keeps (100 ms), short against the runs where
/// the cost matters (a program that switches this often pays its tenth of a core from its
/// first instant).
pub const SPAN: Nanos = Nanos::from_millis(250);

/// How often the counters are weighed between samples while their first verdict is open
/// ([`Weigh::peek`]): samples come at the policy's pace (up to 100 ms apart at a run's
/// start, the first only opening the span), so `sysbench threads --threads=3` kept them
/// 0.2–0.3 s, at about 10 % of its speed, where their allowance is spent in about 25 ms.
pub const FIRST_LOOKS: Nanos = Nanos::from_millis(25);

/// The counts of one span.
#[derive(Debug, Clone, Copy, Default)]
pub struct Weigh {
    /// When the span began (`None`: at the next sample).
    since: Option<Nanos>,
    /// Whether a span has ended (the first verdict is given).
    judged: bool,
    /// Switches of the threads the counters answered for, since.
    switches: u64,
    /// Samples since, and the threads they read, summed.
    samples: u64,
    threads: u64,
}

/// Why the counters were dropped: the two costs, per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dropped {
    /// The managed threads' switches a second.
    pub switches_per_s: f64,
    /// What counting them cost the program, in share of one core.
    pub counters_share: f64,
    /// What `/proc` would cost the tool at the same samples, in share of one core.
    pub proc_share: f64,
}

impl Dropped {
    /// What the counters must cost before they go: what `/proc` would cost the tool, and
    /// never less than the tool's budget.
    fn bar(&self) -> f64 {
        self.proc_share.max(BUDGET)
    }

    /// Whether the counters cost more than that.
    fn over(&self) -> bool {
        self.counters_share > self.bar()
    }
}

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the program switches {:.0} times a second: counting them cost it about {:.1} % \
             of a core, more than /proc costs the tool ({:.2} %) and than the tool's budget",
            self.switches_per_s,
            self.counters_share * 100.0,
            self.proc_share * 100.0
        )
    }
}

impl Weigh {
    /// A new span, from `now`.
    fn restart(&mut self, now: Nanos) {
        *self = Weigh {
            since: Some(now),
            judged: self.judged,
            ..Weigh::default()
        };
    }

    /// Whether the first span is open: begun at a sample, not yet judged. Only then are
    /// the counters weighed between samples ([`Weigh::peek`], every [`FIRST_LOOKS`]).
    pub fn first_open(&self) -> bool {
        self.since.is_some() && !self.judged
    }

    /// The verdict between two samples at `now`, with `extra` switches counted since the
    /// last sample, when the span has already spent its whole allowance (as
    /// [`Weigh::sample`] would find at the next sample, which only adds to it); the span's
    /// counts are left as they are, for that sample.
    pub fn peek(&self, now: Nanos, extra: u64) -> Option<Dropped> {
        let secs = now.saturating_sub(self.since?).as_secs_f64();
        if secs <= 0.0 {
            return None;
        }
        let (costs, spent) = self.costs(secs, self.switches + extra);
        (spent && costs.over()).then_some(costs)
    }

    /// What `switches` counted over `secs` of the span cost, the counters against `/proc`
    /// at the span's samples, and whether they have spent the span's whole allowance.
    fn costs(&self, secs: f64, switches: u64) -> (Dropped, bool) {
        let switches_per_s = switches as f64 / secs;
        let counters_share = switches_per_s * TRACED_SWITCH.as_secs_f64();
        // Threads read a second: samples a second times threads a sample.
        let proc_share = self.threads as f64 / secs * PROC_READ.as_secs_f64();
        let costs = Dropped {
            switches_per_s,
            counters_share,
            proc_share,
        };
        let spent = switches as f64 * TRACED_SWITCH.as_secs_f64();
        let allowance_spent = spent > costs.bar() * SPAN.as_secs_f64();
        (costs, allowance_spent)
    }

    /// Counts a sample at `now` that read `threads` threads, whose counters saw
    /// `switches` switches since the last. At a span's end, the verdict: `Some` when the
    /// counters cost more; a new span begins either way.
    ///
    /// A span whose counters have already cost more than the whole span may is judged at
    /// once: its switches can only add to that, so the verdict at its end would be the
    /// same, and a program that switches this often pays for each sample waited. (Threads
    /// yielding in a loop spend the 250 ms allowance in about 25 ms.)
    pub fn sample(&mut self, now: Nanos, threads: usize, switches: u64) -> Option<Dropped> {
        let Some(since) = self.since else {
            // The first sample only starts the span: its switches are since no sample.
            self.restart(now);
            return None;
        };
        self.switches += switches;
        self.samples += 1;
        self.threads += threads as u64;
        let span = now.saturating_sub(since);
        if span == Nanos::ZERO {
            return None;
        }
        let (costs, allowance_spent) = self.costs(span.as_secs_f64(), self.switches);
        if span < SPAN && !allowance_spent {
            return None;
        }
        self.judged = true;
        self.restart(now);
        costs.over().then_some(costs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples every `every` for `span`, each of `threads` threads switching `rate` times a
    /// second; the first verdict.
    fn weigh(every: Nanos, span: Nanos, threads: usize, rate: u64) -> Option<Dropped> {
        let mut w = Weigh::default();
        let mut now = Nanos::ZERO;
        let per = rate * threads as u64 * every.0 / 1_000_000_000;
        while now <= span {
            if let Some(d) = w.sample(now, threads, per) {
                return Some(d);
            }
            now += every;
        }
        None
    }

    #[test]
    fn peek_between_samples_judges_a_spent_allowance_and_leaves_the_span_alone() {
        // Samples 100 ms apart; between them, sysbench's 690,000 switches a second: by
        // 25 ms after the first sample the counted switches (17,250 × 0.28 µs = 4.8 ms)
        // have spent the span's allowance (0.8 % of 250 ms = 2 ms): dropped there, not at
        // the next sample. Before the first sample nothing is open; a quiet program's
        // peek finds nothing; and a peek changes nothing the next sample counts.
        let mut w = Weigh::default();
        assert!(!w.first_open());
        assert!(w.peek(Nanos::from_millis(25), 1_000_000).is_none());
        assert!(w.sample(Nanos::ZERO, 3, 0).is_none());
        assert!(w.first_open());
        let d = w.peek(Nanos::from_millis(25), 17_250).expect("spent");
        assert!((d.switches_per_s - 690_000.0).abs() < 1.0, "{d:?}");
        assert!(w.peek(Nanos::from_millis(25), 1_000).is_none());
        let before = (w.since, w.switches, w.samples);
        let _ = w.peek(Nanos::from_millis(50), 40_000);
        assert_eq!((w.since, w.switches, w.samples), before);
        // The first verdict closes it: later spans are weighed at samples only.
        assert!(w.sample(Nanos::from_millis(100), 3, 69_000).is_some());
        assert!(!w.first_open());
    }

    #[test]
    fn threads_that_yield_in_a_loop_cost_more_counted_than_read() {
        // sysbench threads: 3 threads, 230,000 switches a second each, 1 ms samples.
        let d = weigh(Nanos::from_millis(1), Nanos::from_secs(2), 3, 230_000)
            .expect("dropped within the first span or two");
        assert!((d.switches_per_s - 690_000.0).abs() < 1_000.0, "{d:?}");
        assert!((d.counters_share - 0.193).abs() < 0.001, "{d:?}");
        assert!((d.proc_share - 0.0105).abs() < 0.0002, "{d:?}");
        let line = d.to_string();
        assert!(
            line.starts_with("the program switches 690000 times a second"),
            "{line}"
        );
        assert!(
            line.contains("19.3 %") && line.contains("(1.05 %)"),
            "{line}"
        );
    }

    #[test]
    fn barrier_phases_and_many_threads_keep_the_counters() {
        // A yielding barrier on 3 threads, 2 cores: 16,000 switches a second, paced to a
        // sample every 4 ms (the counters cost more than /proc would, 0.45 % against
        // 0.26 %, but less than the tool's budget).
        assert_eq!(
            weigh(Nanos::from_millis(4), Nanos::from_secs(5), 3, 5_333),
            None
        );
        // 16 threads at 1 ms barrier phases (two switches a phase each), 1 ms samples.
        assert_eq!(
            weigh(Nanos::from_millis(1), Nanos::from_secs(5), 16, 2_000),
            None
        );
        // 1024 threads switching 50 times a second, paced to a sample every 100 ms.
        assert_eq!(
            weigh(Nanos::from_millis(100), Nanos::from_secs(5), 1024, 50),
            None
        );
    }

    #[test]
    fn within_its_allowance_nothing_is_judged_before_a_whole_span() {
        let mut w = Weigh::default();
        assert_eq!(w.sample(Nanos::ZERO, 3, 0), None);
        // The bar is the budget here (0.8 % of a core: 28,571 switches a second, so 7,143
        // in a span). Switching at twice that for 40 % of a span spends 80 % of the
        // allowance: not judged yet.
        let allowance = 7_143;
        assert_eq!(w.sample(Nanos(SPAN.0 * 2 / 5), 3, allowance * 4 / 5), None);
        // The rest of the span brings the whole to 1.5 allowances: judged at its end.
        assert_eq!(w.sample(Nanos(SPAN.0 - 1), 3, 0), None);
        assert!(w.sample(SPAN, 3, allowance * 7 / 10).is_some());
        // A new span began at the verdict: quiet now, kept.
        assert_eq!(w.sample(SPAN + SPAN, 3, 0), None);
        assert_eq!(w.sample(SPAN + SPAN + SPAN, 3, 0), None);
    }

    #[test]
    fn a_span_whose_allowance_is_spent_is_judged_at_once() {
        // sysbench threads: 300,000 switches a second, samples every 100 ms (policy
        // `none`): the first span's allowance (7,143 switches) is gone by the second
        // sample, long before 250 ms.
        let mut w = Weigh::default();
        assert_eq!(w.sample(Nanos::ZERO, 3, 0), None);
        let d = w
            .sample(Nanos::from_millis(100), 3, 30_000)
            .expect("judged at the first sample after the allowance is spent");
        assert!((d.switches_per_s - 300_000.0).abs() < 1.0, "{d:?}");
        // Every 1 ms (speed): reading 3 threads a millisecond from /proc would cost 1.05 %
        // of a core, so that is the bar, and its allowance (9,375 switches) is spent at
        // 31.25 ms: judged at the next sample, not before.
        let mut w = Weigh::default();
        let mut judged = None;
        for ms in 0..250u64 {
            if let Some(d) = w.sample(Nanos::from_millis(ms), 3, if ms == 0 { 0 } else { 300 }) {
                judged = Some((ms, d));
                break;
            }
        }
        let (ms, _) = judged.expect("dropped");
        assert_eq!(ms, 32, "judged at {ms} ms");
    }
}
