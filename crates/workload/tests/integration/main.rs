//! Tiny runs of every scenario: each produces a sane score. No timing is asserted; timings
//! belong in benchmark reports.

mod scenarios;
