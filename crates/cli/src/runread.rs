//! A `run`'s JSON summary read back typed, as `compare` reads each of its runs (and
//! `bench --cost` its management-cost runs).
//!
//! Only the fields a reader needs are declared; serde refuses a summary that lacks one or
//! holds it with another type, and [`parse`] refuses another `schema_version`, so a
//! change of the summary's shape is an error that says so, never a silent 0.

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use threadbalance_model::PolicySummary;
use threadbalance_policy::PolicyKind;

/// The part of `run`'s summary that `compare` reads.
#[derive(Debug, Clone, Deserialize)]
pub struct RunSummary {
    /// The shape's version: [`crate::schema::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The policy the run used.
    pub policy: PolicyKind,
    /// Wall time from start to end of management, seconds.
    pub wall_s: f64,
    /// Control ticks taken.
    pub ticks: u64,
    /// Ticks the cost budget pushed back later than the policy asked.
    pub ticks_paced: u64,
    /// What the host did with the policy's moves.
    pub applied: Applied,
    /// CPU time threadbalance itself used, seconds.
    pub tool_cpu_s: f64,
    /// `tool_cpu_s` over the wall time, percent of one core (0 under 0.1 s of management).
    pub tool_cpu_pct: f64,
    /// CPU time per tick once every thread had been seen, µs (0 when not measured, or
    /// written by a binary without the field).
    #[serde(default)]
    pub tick_cpu_us: f64,
    /// The tool's CPU time per move made, µs (0 when no move was made, or written by a
    /// binary without the field).
    #[serde(default)]
    pub move_cpu_us: f64,
    /// The policy's own account.
    pub policy_summary: PolicySummary,
    /// Where run time and wait came from (empty when written by a binary without the
    /// field).
    #[serde(default)]
    pub run_time: String,
}

/// Moves carried out, of `run`'s `applied`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub struct Applied {
    /// Affinity changes made.
    pub done: u64,
}

/// Reads a run's summary; another schema version or a missing field is an error.
pub fn parse(text: &str) -> Result<RunSummary> {
    let s: RunSummary = serde_json::from_str(text).context("parsing a run's summary")?;
    if s.schema_version != crate::schema::SCHEMA_VERSION {
        bail!(
            "a run's summary has schema version {}, this threadbalance reads {}",
            s.schema_version,
            crate::schema::SCHEMA_VERSION
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_reads_the_fields_typed() {
        let text = r#"{"schema_version": 1, "policy": "tumbler", "wall_s": 1.25,
            "ticks": 10, "ticks_paced": 0, "tool_cpu_s": 0.01, "tool_cpu_pct": 0.8,
            "applied": {"done": 7, "unchanged": 1},
            "policy_summary": {"kind": "tumbler", "regroupings": 2, "moves": 7,
              "last_cv": null, "last_interval_ms": 400.0, "skipped_low_cv": 0,
              "skipped_balanced": 1},
            "ended": "exit 0"}"#;
        let s = parse(text).unwrap();
        assert_eq!(s.policy, PolicyKind::Tumbler);
        assert_eq!(s.wall_s, 1.25);
        assert_eq!(s.applied.done, 7);
        assert!(matches!(s.policy_summary, PolicySummary::Tumbler(ref t) if t.regroupings == 2));
    }

    #[test]
    fn parse_refuses_a_missing_field_a_wrong_type_or_another_version() {
        // No `wall_s`: an error, not 0.
        let missing = r#"{"schema_version": 1, "policy": "none", "applied": {"done": 0},
            "ticks": 1, "ticks_paced": 0, "tool_cpu_s": 0.0, "tool_cpu_pct": 0.0,
            "policy_summary": {"kind": "none"}}"#;
        assert!(parse(missing).is_err());
        // `wall_s` as a string with a unit, as summaries once were.
        let text = r#"{"schema_version": 1, "policy": "none", "wall_s": "1.2 s",
            "ticks": 1, "ticks_paced": 0, "tool_cpu_s": 0.0, "tool_cpu_pct": 0.0, "applied": {"done": 0}, "policy_summary": {"kind": "none"}}"#;
        assert!(parse(text).is_err());
        let future = r#"{"schema_version": 99, "policy": "none", "wall_s": 1.0,
            "ticks": 1, "ticks_paced": 0, "tool_cpu_s": 0.0, "tool_cpu_pct": 0.0, "applied": {"done": 0}, "policy_summary": {"kind": "none"}}"#;
        let e = parse(future).unwrap_err().to_string();
        assert!(e.contains("schema version 99"), "{e}");
    }
}
