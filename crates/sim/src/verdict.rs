//! How a claim of the papers is judged, and how the suite's report prints.
//!
//! A paper claim has a *direction* (Tumbler is faster than Linux on ferret) and, when the
//! paper gives numbers, *sizes* (10.5 % faster). The simulation reproduces the claim when
//! the direction holds and each size is within 2× of the paper's: the ratio simulated /
//! paper lies in [0.5, 2]. A worked example: the paper's +10.7 % against a simulated
//! +2.9 % is a ratio of 2.9 / 10.7 = 0.27, outside the band, so the claim is
//! "direction only"; +16 % would be 1.5 and "reproduced"; −3 % is the wrong sign and
//! "not reproduced". A claim the paper states without a number can at best be
//! "direction only": nothing is invented to compare with.
//!
//! Calibration rows are our own Linux measurements, held to a tolerance; they are counted
//! apart from the paper claims.

use crate::state::Baseline;
use serde::Serialize;
use std::fmt::Write as _;

/// A row of calibration (our own measurements of Linux, held to a tolerance) or a claim of
/// one of the papers (judged by direction and size).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A calibration row: Linux 6.18 measured on real machines.
    Calibration,
    /// A claim of one of the papers.
    Paper,
}

/// The outcome of a row or claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Calibration row within its tolerance.
    WithinTolerance,
    /// Calibration row outside its tolerance.
    OutsideTolerance,
    /// Paper claim: direction holds and every numeric effect is within 2× of the paper's.
    Reproduced,
    /// Paper claim: direction holds, but a size is outside 2× of the paper's, or the paper
    /// gives no number to compare with.
    DirectionOnly,
    /// Paper claim: the direction does not hold.
    NotReproduced,
}

impl Verdict {
    /// The words the table prints.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::WithinTolerance => "within tolerance",
            Verdict::OutsideTolerance => "outside tolerance",
            Verdict::Reproduced => "reproduced",
            Verdict::DirectionOnly => "direction only",
            Verdict::NotReproduced => "not reproduced",
        }
    }
}

/// The band of simulated / paper ratios that counts as the paper's size: within 2×.
pub const SIZE_BAND: (f64, f64) = (0.5, 2.0);

/// Judges a paper claim: not reproduced when its direction fails; otherwise reproduced
/// when every ratio (simulated / paper effect) lies in [`SIZE_BAND`], and direction only
/// when one does not or when the paper gives no number (`ratios` has a `None`, or is empty).
pub fn verdict(direction_holds: bool, ratios: &[Option<f64>]) -> Verdict {
    if !direction_holds {
        return Verdict::NotReproduced;
    }
    let sized = !ratios.is_empty()
        && ratios
            .iter()
            .all(|r| r.is_some_and(|r| (SIZE_BAND.0..=SIZE_BAND.1).contains(&r)));
    if sized {
        Verdict::Reproduced
    } else {
        Verdict::DirectionOnly
    }
}

/// One measured effect of a claim: the paper's number (when it gives one), the
/// simulation's, and their ratio.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effect {
    /// What is measured, with its unit (e.g. "excl speedup over first-fit, %").
    pub what: String,
    /// The paper's number; `None` when the paper states the effect without a number.
    pub paper_effect: Option<f64>,
    /// The simulation's, averaged over the seeds.
    pub simulated_effect: f64,
    /// simulated / paper, when the paper gives a non-zero number.
    pub ratio: Option<f64>,
}

impl Effect {
    /// An effect; the ratio follows from the two numbers.
    pub fn new(what: &str, paper_effect: Option<f64>, simulated_effect: f64) -> Effect {
        let ratio = paper_effect
            .filter(|p| *p != 0.0)
            .map(|p| simulated_effect / p);
        Effect {
            what: what.into(),
            paper_effect,
            simulated_effect,
            ratio,
        }
    }

    /// Whether the ratio lies in [`SIZE_BAND`] (false without a paper number).
    pub fn in_band(&self) -> bool {
        self.ratio
            .is_some_and(|r| (SIZE_BAND.0..=SIZE_BAND.1).contains(&r))
    }
}

/// One claim: what the paper says, what the simulation gives, and whether it agrees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// Short name.
    pub claim: String,
    /// Calibration row or paper claim.
    pub kind: Kind,
    /// The paper's (or the calibration file's) number or direction.
    pub paper: String,
    /// The simulation's, averaged over the seeds.
    pub simulated: String,
    /// The deciding effect's paper number (the first outside the size band, else the first).
    pub paper_effect: Option<f64>,
    /// The deciding effect's simulated number.
    pub simulated_effect: Option<f64>,
    /// The deciding effect's ratio, simulated / paper.
    pub ratio: Option<f64>,
    /// Every effect of a paper claim (empty for calibration rows).
    pub effects: Vec<Effect>,
    /// The outcome.
    pub verdict: Verdict,
    /// Why, when it is not reproduced or within tolerance; or a caveat.
    pub why: String,
    /// The kernel model the claim's runs used as `none` and under the policies.
    pub baseline: Baseline,
    /// The kernel the paper (or the calibration file) measured against.
    pub paper_baseline: Baseline,
}

impl Claim {
    /// A calibration row: within its tolerance or not; `why` is kept only when not.
    pub fn calibration(
        claim: &str,
        paper: &str,
        simulated: String,
        within: bool,
        why: &str,
    ) -> Claim {
        Claim {
            claim: claim.into(),
            kind: Kind::Calibration,
            paper: paper.into(),
            simulated,
            paper_effect: None,
            simulated_effect: None,
            ratio: None,
            effects: Vec::new(),
            verdict: if within {
                Verdict::WithinTolerance
            } else {
                Verdict::OutsideTolerance
            },
            why: if within { String::new() } else { why.into() },
            baseline: Baseline::Linux,
            paper_baseline: Baseline::Linux,
        }
    }

    /// Which kernel model ran, and whether it is the one the paper measured against:
    /// "solaris, as the paper" or "linux (the paper measured against solaris)".
    pub fn baseline_text(&self) -> String {
        if self.baseline == self.paper_baseline {
            format!("{}, as the paper", self.baseline)
        } else {
            format!(
                "{} (the paper measured against {})",
                self.baseline, self.paper_baseline
            )
        }
    }

    /// A paper claim judged by [`verdict`]: `why_not` says why when the direction fails;
    /// when it holds but a size is off, the reason names each effect outside the band (and
    /// adds `why_size` unless empty). The claim's own `paper_effect`, `simulated_effect`
    /// and `ratio` are those of the deciding effect: the first outside the band, else the
    /// first.
    pub fn paper(
        claim: &str,
        paper: &str,
        simulated: String,
        direction: bool,
        effects: Vec<Effect>,
        why_not: &str,
        why_size: &str,
    ) -> Claim {
        let ratios: Vec<Option<f64>> = effects.iter().map(|e| e.ratio).collect();
        let v = verdict(direction, &ratios);
        let deciding = effects
            .iter()
            .find(|e| !e.in_band())
            .or_else(|| effects.first());
        let why = match v {
            Verdict::NotReproduced => why_not.to_string(),
            Verdict::DirectionOnly => {
                let mut parts: Vec<String> = effects
                    .iter()
                    .filter(|e| !e.in_band())
                    .map(|e| match e.ratio {
                        Some(r) => format!("{} is {r:.2}× the paper's, outside [0.5, 2]", e.what),
                        None => format!(
                            "the paper gives no number for {}: judged on direction only",
                            e.what
                        ),
                    })
                    .collect();
                if effects.is_empty() {
                    parts.push("the paper gives no number: judged on direction only".into());
                }
                if !why_size.is_empty() {
                    parts.push(why_size.to_string());
                }
                format!("direction holds; {}", parts.join("; "))
            }
            _ => String::new(),
        };
        Claim {
            claim: claim.into(),
            kind: Kind::Paper,
            paper: paper.into(),
            simulated,
            paper_effect: deciding.and_then(|e| e.paper_effect),
            simulated_effect: deciding.map(|e| e.simulated_effect),
            ratio: deciding.and_then(|e| e.ratio),
            effects,
            verdict: v,
            why,
            baseline: Baseline::Linux,
            paper_baseline: Baseline::Linux,
        }
    }
}

/// Every claim of `--suite papers`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteReport {
    /// Seeds each claim ran with.
    pub seeds: Vec<u64>,
    /// The claims.
    pub claims: Vec<Claim>,
    /// Events handled over the whole suite.
    pub events: u64,
}

/// How many rows and claims came out each way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Counts {
    /// Calibration rows within tolerance.
    pub calibration_within: usize,
    /// Calibration rows.
    pub calibration_rows: usize,
    /// Paper claims reproduced.
    pub reproduced: usize,
    /// Paper claims whose direction holds but not their size.
    pub direction_only: usize,
    /// Paper claims not reproduced.
    pub not_reproduced: usize,
}

impl Counts {
    /// "calibration: 15 of 23 rows within tolerance; paper claims: 3 reproduced, …".
    pub fn line(&self) -> String {
        format!(
            "calibration: {} of {} rows within tolerance; paper claims: {} reproduced, {} direction only, {} not reproduced",
            self.calibration_within,
            self.calibration_rows,
            self.reproduced,
            self.direction_only,
            self.not_reproduced
        )
    }
}

impl SuiteReport {
    /// The counts of the closing line.
    pub fn counts(&self) -> Counts {
        let mut c = Counts::default();
        for claim in &self.claims {
            match claim.verdict {
                Verdict::WithinTolerance => c.calibration_within += 1,
                Verdict::OutsideTolerance => {}
                Verdict::Reproduced => c.reproduced += 1,
                Verdict::DirectionOnly => c.direction_only += 1,
                Verdict::NotReproduced => c.not_reproduced += 1,
            }
            if claim.kind == Kind::Calibration {
                c.calibration_rows += 1;
            }
        }
        c
    }

    /// A table: verdict, claim, paper, simulated, effects with ratios, why; then the counts.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "papers suite, seeds {:?}; a paper claim is reproduced when its direction holds and its size is within 2× of the paper's (simulated / paper in [0.5, 2])\n",
            self.seeds
        );
        for c in &self.claims {
            let _ = writeln!(
                out,
                "[{}] {}\n      baseline:  {}\n      paper:     {}\n      simulated: {}",
                c.verdict.label(),
                c.claim,
                c.baseline_text(),
                c.paper,
                c.simulated
            );
            for e in &c.effects {
                let effect = match (e.paper_effect, e.ratio) {
                    (Some(p), Some(r)) => format!(
                        "paper {}, simulated {}, ratio {r:.2}",
                        num(p),
                        num(e.simulated_effect)
                    ),
                    (Some(p), None) => format!(
                        "paper {}, simulated {}, no ratio",
                        num(p),
                        num(e.simulated_effect)
                    ),
                    (None, _) => format!(
                        "paper gives no number (qualitative), simulated {}",
                        num(e.simulated_effect)
                    ),
                };
                let _ = writeln!(out, "      effect:    {}: {effect}", e.what);
            }
            if !c.why.is_empty() {
                let _ = writeln!(out, "      why:       {}", c.why);
            }
        }
        let _ = writeln!(out, "\n{}", self.counts().line());
        out
    }

    /// Every paper claim's effects with a paper number, the paper's against the
    /// simulation's, colored by verdict (see [`crate::plot::effects_svg`]); points are
    /// labelled by claim number (1, 2, … over the paper claims) and effect letter, and the
    /// key under the chart names the claims.
    pub fn to_svg(&self) -> String {
        use crate::plot::{EffectPoint, effects_svg};
        let mut points = Vec::new();
        let mut key = Vec::new();
        for (n, c) in self
            .claims
            .iter()
            .filter(|c| c.kind == Kind::Paper)
            .enumerate()
        {
            let numbered: Vec<&Effect> = c
                .effects
                .iter()
                .filter(|e| e.paper_effect.is_some())
                .collect();
            for (k, e) in numbered.iter().enumerate() {
                let Some(paper) = e.paper_effect else {
                    continue;
                };
                let letter = if numbered.len() > 1 {
                    char::from(b'a' + (k as u8 % 26)).to_string()
                } else {
                    String::new()
                };
                points.push(EffectPoint {
                    label: format!("{}{letter}", n + 1),
                    paper,
                    simulated: e.simulated_effect,
                    group: c.verdict.label().to_string(),
                    // Green reproduced, orange direction only, red not reproduced.
                    color: match c.verdict {
                        Verdict::Reproduced => 2,
                        Verdict::DirectionOnly => 3,
                        _ => 1,
                    },
                });
            }
            let effects: Vec<&str> = numbered.iter().map(|e| e.what.as_str()).collect();
            // The whole claim: the plot wraps the key at word boundaries.
            key.push(format!(
                "{}: {} [{}; {}]{}",
                n + 1,
                c.claim,
                c.verdict.label(),
                c.baseline,
                if effects.is_empty() {
                    " (no paper number)".to_string()
                } else {
                    format!(" — {}", effects.join("; "))
                }
            ));
        }
        effects_svg(
            &format!(
                "papers suite, seeds {:?}: each effect, paper against simulation",
                self.seeds
            ),
            &points,
            &key,
        )
    }

    /// The report as JSON (with the counts).
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let (Some(o), Ok(c)) = (v.as_object_mut(), serde_json::to_value(self.counts())) {
            o.insert("counts".into(), c);
        }
        v
    }
}

/// A signed number with one decimal, or two below 1 (a CV of 0.24, not +0.2).
fn num(x: f64) -> String {
    if x.abs() < 1.0 {
        format!("{x:+.2}")
    } else {
        format!("{x:+.1}")
    }
}
