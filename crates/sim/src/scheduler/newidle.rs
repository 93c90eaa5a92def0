//! New-idle balancing in proportion to its success ("Proportional newidle balance",
//! `NI_RANDOM`, Linux 6.18.5 and later; `sched_balance_newidle`, `update_newidle_stats`).
//!
//! A CPU that goes idle may pull a queued thread at once (`sched_balance_newidle`). Since
//! Linux 6.18.5 it no longer tries every domain every time: each domain keeps how often
//! its new-idle balancing pulled something, and a 1024-sided die decides whether to try:
//!
//! ```text
//! weight = 1 + ratio                      ratio: successes per 1024 calls
//! d = rng % 1024;  d > weight  → skip:     call += 1
//! else try;  pulled → success += (1024 + weight / 2) / weight;  call += 1
//! call ≥ 1024 → ratio = success, call /= 2, success /= 2
//! ```
//!
//! A skipped call counts as a failure, and a success is weighted up by how unlikely the try
//! was, so `ratio` stays an unbiased estimate of the success rate while the domain is
//! tried only that often. A domain starts at 50 % (`call` 512, `success` 256, `ratio` 512).
//!
//! Worked example: a domain at `ratio` 256 (one pull in four tries) is tried when the die
//! shows 0–257, with probability 258 / 1024 ≈ 25 %; a pull then adds
//! (1024 + 128) / 257 = 4 successes (integer division), as the three skipped calls in
//! between would have been worth if tried.
//!
//! Barrier programs feel it: with N > M threads and blocking barriers, a CPU whose thread
//! arrives early at the barrier goes idle while other CPUs still run two threads. Every
//! try then pulls, but most of a phase's idle moments come when no CPU has a thread
//! queued (at the barrier's end), and those failures make the domain try less often.

use crate::state::{CpuIdx, Kernel, NewidleStats, World};

/// The die's sides (`sched_rng() % 1024`).
const SIDES: u32 = 1024;

impl NewidleStats {
    /// One call's outcome (`update_newidle_stats`): `success` is 0, or the weight of a
    /// pull.
    pub(crate) fn record(&mut self, success: u32) {
        self.call += 1;
        self.success += success;
        if self.call >= SIDES {
            self.ratio = self.success;
            self.call /= 2;
            self.success /= 2;
        }
    }

    /// Whether the die `d` (0–1023) lets the domain try; `Some(weight)` of a success if
    /// so. A skip is recorded here.
    pub(crate) fn roll(&mut self, d: u32) -> Option<u32> {
        let weight = 1 + self.ratio;
        if d > weight {
            self.record(0);
            return None;
        }
        Some((SIDES + weight / 2) / weight)
    }
}

impl Kernel {
    /// Whether new-idle balancing of CPU `c` tries domain level `lv` now; the weight of a
    /// success when it does. Always `Some(1)` without `Linux::newidle_random`.
    pub(super) fn newidle_try(&mut self, world: &mut World, c: CpuIdx, lv: usize) -> Option<u32> {
        if !self.lx.newidle_random {
            return Some(1);
        }
        let d = world.rng.below(u64::from(SIDES)) as u32;
        self.cpus[c].newidle[lv].roll(d)
    }

    /// Records the outcome of a try that `newidle_try` allowed.
    pub(super) fn newidle_done(&mut self, c: CpuIdx, lv: usize, weight: u32, pulled: bool) {
        if self.lx.newidle_random {
            self.cpus[c].newidle[lv].record(if pulled { weight } else { 0 });
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::state::NewidleStats;

    #[test]
    fn newidle_stats_start_at_half_and_try_below_the_ratio() {
        // The kernel's start: ratio 512, so weight 513: the die tries on 0–513 (514 of
        // 1024 faces, 50.2 %) and skips on 514–1023.
        let mut s = NewidleStats::default();
        assert_eq!(s.roll(513), Some(2)); // (1024 + 256) / 513 = 2
        assert_eq!(
            s.call, 512,
            "a try is recorded only once its outcome is known"
        );
        assert_eq!(s.roll(514), None);
        assert_eq!(
            (s.call, s.success),
            (513, 256),
            "a skip counts as a failed call"
        );
    }

    #[test]
    fn newidle_stats_a_pull_at_one_in_four_weighs_four() {
        // ratio 256: weight 257, a pull adds (1024 + 128) / 257 = 4.
        let mut s = NewidleStats {
            call: 100,
            success: 25,
            ratio: 256,
        };
        let w = s.roll(0).unwrap();
        assert_eq!(w, 4);
        s.record(w);
        assert_eq!((s.call, s.success), (101, 29));
    }

    #[test]
    fn newidle_stats_window_halves_at_1024_calls_and_sets_the_ratio() {
        // 1023 calls with 300 successes; one more failure: ratio 300, then 512 / 150.
        let mut s = NewidleStats {
            call: 1023,
            success: 300,
            ratio: 512,
        };
        s.record(0);
        assert_eq!(s.ratio, 300);
        assert_eq!((s.call, s.success), (512, 150));
        // From then on the die tries on 0–301 only: 302 / 1024 ≈ 29.5 %.
        assert!(s.roll(301).is_some());
        assert!(s.roll(302).is_none());
    }

    #[test]
    fn newidle_stats_never_failing_domain_climbs_towards_always() {
        // Every try pulls, with the die going round all 1024 faces (389 is odd, so
        // 389 × i mod 1024 visits each face once per 1024 calls). Once ratio > 682 a pull
        // weighs (1024 + w / 2) / w = 1, so the estimate climbs only by the tries the die
        // allows: 918 after 100,000 calls (a try on 90 % of faces), where it started at
        // 512 (50 %).
        let mut s = NewidleStats::default();
        for i in 0..100_000u32 {
            if let Some(w) = s.roll(i.wrapping_mul(389) % 1024) {
                s.record(w);
            }
        }
        assert_eq!(s.ratio, 918);
    }
}
