//! Mean ± σ of a policy's runs, and the verdict line that says whether a policy is faster
//! than the baseline by more than the runs' own scatter.
//!
//! **σ** is the sample standard deviation (divided by n − 1), as hyperfine gives it.
//!
//! **The ratio** is the baseline's mean over the policy's mean: 1.21 means the policy runs
//! the command in 1 / 1.21 of the baseline's time, "1.21 times faster". Its ± is the
//! first-order propagation of both σ: `r · √((σa/a)² + (σb/b)²)`.
//!
//! **Significance.** Each mean gets its 95 % confidence interval,
//! `mean ± t(0.975, n − 1) · σ / √n` (Student's t, because n is small). When the two
//! intervals overlap, the verdict is "no significant difference"; otherwise the policy is
//! faster or slower. One run per policy gives no σ, so no interval and no verdict either.
//!
//! A worked example: the baseline's runs 2.0, 2.1, 1.9 s (mean 2.0, σ 0.1) and the policy's
//! 1.6, 1.7, 1.5 s (mean 1.6, σ 0.1); t(0.975, 2) = 4.303, so the half-widths are
//! 4.303 · 0.1 / √3 = 0.248: [1.752, 2.248] and [1.352, 1.848] overlap (1.752 < 1.848), and
//! three runs are not enough to call a 25 % gain. Five runs of each with the same means and
//! σ give t(0.975, 4) · 0.1 / √5 = 2.776 · 0.0447 = 0.124: [1.876, 2.124] and
//! [1.476, 1.724] are apart, and the verdict is "1.25 ± 0.10 times faster".

use serde::Serialize;

/// Mean, σ, median, min and max of some values.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Stats {
    /// How many values.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one value.
    pub stddev: f64,
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Stats {
    /// The statistics of `xs`; `None` when empty.
    pub fn of(xs: &[f64]) -> Option<Stats> {
        let spread = super::Spread::of(xs)?;
        let n = xs.len();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        Some(Stats {
            n,
            mean,
            stddev,
            median: spread.median,
            min: spread.min,
            max: spread.max,
        })
    }

    /// The 95 % confidence interval of the mean, `None` for fewer than two values.
    pub fn interval(&self) -> Option<(f64, f64)> {
        if self.n < 2 {
            return None;
        }
        let half = t975(self.n - 1) * self.stddev / (self.n as f64).sqrt();
        Some((self.mean - half, self.mean + half))
    }
}

/// Student's t at 0.975 for `df` degrees of freedom (two-sided 95 %); 1.96 past 30.
pub fn t975(df: usize) -> f64 {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::INFINITY,
        d if d <= 30 => T[d - 1],
        _ => 1.96,
    }
}

/// How one policy compares with the baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Verdict {
    /// Its interval lies wholly below the baseline's: faster by `ratio` ± `ratio_stddev`
    /// (baseline mean / policy mean).
    Faster {
        /// Baseline mean / policy mean (> 1).
        ratio: f64,
        /// Propagated σ of the ratio.
        ratio_stddev: f64,
    },
    /// Its interval lies wholly above the baseline's: slower by `ratio` (policy mean /
    /// baseline mean, > 1).
    Slower {
        /// Policy mean / baseline mean (> 1).
        ratio: f64,
        /// Propagated σ of the ratio.
        ratio_stddev: f64,
    },
    /// The two intervals overlap.
    NoSignificantDifference {
        /// Baseline mean / policy mean.
        ratio: f64,
        /// Propagated σ of the ratio.
        ratio_stddev: f64,
    },
    /// Fewer than two runs on one side: no interval to judge by.
    TooFewRuns,
}

/// `a / b` with its propagated σ.
fn ratio(a: &Stats, b: &Stats) -> (f64, f64) {
    let r = a.mean / b.mean.max(1e-12);
    let rel = |s: &Stats| s.stddev / s.mean.max(1e-12);
    (r, r * (rel(a).powi(2) + rel(b).powi(2)).sqrt())
}

/// Judges `policy` against `baseline` (both wall times, smaller is better).
pub fn judge(baseline: &Stats, policy: &Stats) -> Verdict {
    let (Some(b), Some(p)) = (baseline.interval(), policy.interval()) else {
        return Verdict::TooFewRuns;
    };
    if p.1 < b.0 {
        let (ratio, ratio_stddev) = ratio(baseline, policy);
        Verdict::Faster {
            ratio,
            ratio_stddev,
        }
    } else if p.0 > b.1 {
        let (ratio, ratio_stddev) = ratio(policy, baseline);
        Verdict::Slower {
            ratio,
            ratio_stddev,
        }
    } else {
        let (ratio, ratio_stddev) = ratio(baseline, policy);
        Verdict::NoSignificantDifference {
            ratio,
            ratio_stddev,
        }
    }
}

impl Verdict {
    /// The verdict as one line: "speed is 1.21 ± 0.03 times faster than none".
    pub fn line(&self, policy: &str, baseline: &str) -> String {
        match self {
            Verdict::Faster {
                ratio,
                ratio_stddev,
            } => format!("{policy} is {ratio:.2} ± {ratio_stddev:.2} times faster than {baseline}"),
            Verdict::Slower {
                ratio,
                ratio_stddev,
            } => format!("{policy} is {ratio:.2} ± {ratio_stddev:.2} times slower than {baseline}"),
            Verdict::NoSignificantDifference {
                ratio,
                ratio_stddev,
            } => format!(
                "{policy}: no significant difference from {baseline} ({baseline} / {policy} = {ratio:.2} ± {ratio_stddev:.2}; the 95 % intervals of the means overlap)"
            ),
            Verdict::TooFewRuns => {
                format!("{policy}: one run only, no spread to judge it against {baseline} by")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-3
    }

    #[test]
    fn stats_of_three_values_gives_the_sample_sigma() {
        // mean (2.0 + 2.1 + 1.9) / 3 = 2.0; squares 0 + 0.01 + 0.01 = 0.02; / (3 − 1) = 0.01;
        // √ = 0.1.
        let s = Stats::of(&[2.0, 2.1, 1.9]).unwrap();
        assert!(close(s.mean, 2.0) && close(s.stddev, 0.1), "{s:?}");
        assert_eq!((s.min, s.median, s.max), (1.9, 2.0, 2.1));
    }

    #[test]
    fn stats_of_one_value_has_no_interval() {
        let s = Stats::of(&[1.5]).unwrap();
        assert_eq!(s.stddev, 0.0);
        assert_eq!(s.interval(), None);
        assert_eq!(Stats::of(&[]), None);
    }

    #[test]
    fn judge_three_runs_with_a_25_percent_gain_overlap() {
        // The module doc's example: half-widths 4.303 · 0.1 / √3 = 0.248 overlap.
        let base = Stats::of(&[2.0, 2.1, 1.9]).unwrap();
        let pol = Stats::of(&[1.6, 1.7, 1.5]).unwrap();
        let v = judge(&base, &pol);
        assert!(
            matches!(v, Verdict::NoSignificantDifference { ratio, .. } if close(ratio, 1.25)),
            "{v:?}"
        );
        assert!(
            v.line("speed", "none")
                .contains("no significant difference")
        );
    }

    #[test]
    fn judge_five_runs_with_a_25_percent_gain_is_faster() {
        // Same means, σ = 0.1 each (values mean ± 0.1·√(4/4) spread: ±0.1, ±0.1, 0 → σ² =
        // 4·0.01/4 = 0.01). Half-widths 2.776 · 0.1 / √5 = 0.124: apart.
        let base = Stats::of(&[1.9, 2.1, 1.9, 2.1, 2.0]).unwrap();
        let pol = Stats::of(&[1.5, 1.7, 1.5, 1.7, 1.6]).unwrap();
        assert!(close(base.stddev, 0.1) && close(pol.stddev, 0.1));
        let v = judge(&base, &pol);
        // ratio 2.0 / 1.6 = 1.25; σ = 1.25 · √((0.1/2)² + (0.1/1.6)²) = 1.25 · 0.0800 = 0.100.
        match v {
            Verdict::Faster {
                ratio,
                ratio_stddev,
            } => assert!(close(ratio, 1.25) && close(ratio_stddev, 0.100), "{v:?}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            v.line("speed", "none"),
            "speed is 1.25 ± 0.10 times faster than none"
        );
    }

    #[test]
    fn judge_a_slower_policy_says_slower_with_the_ratio_above_one() {
        let base = Stats::of(&[1.0, 1.01, 0.99, 1.0]).unwrap();
        let pol = Stats::of(&[1.5, 1.51, 1.49, 1.5]).unwrap();
        let v = judge(&base, &pol);
        assert!(
            matches!(v, Verdict::Slower { ratio, .. } if close(ratio, 1.5)),
            "{v:?}"
        );
        assert!(v.line("pbind", "none").starts_with("pbind is 1.50 ± "));
    }

    #[test]
    fn judge_with_one_run_says_too_few() {
        let base = Stats::of(&[1.0]).unwrap();
        let pol = Stats::of(&[0.5, 0.6]).unwrap();
        assert_eq!(judge(&base, &pol), Verdict::TooFewRuns);
    }

    #[test]
    fn t975_follows_the_table_and_the_normal_limit() {
        assert_eq!(t975(1), 12.706);
        assert_eq!(t975(4), 2.776);
        assert_eq!(t975(30), 2.042);
        assert_eq!(t975(100), 1.96);
    }
}
