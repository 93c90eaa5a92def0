//! `run`/`attach --report FILE.svg`: what the control loop saw, tick by tick, drawn as
//! the simulator draws its runs ([`threadbalance_sim::plot`]).
//!
//! Each tick adds one point: the time since management started, the utilization of every
//! domain at the policy's level over the tick's window (managed threads' CPU time over the
//! domain's CPUs, as the summary's `domain_util` averages it) and the moves applied. The
//! plot has one panel of utilization per domain, all on the 0–100 % scale, then the moves
//! per second.

use crate::ManageArgs;
use crate::summary::Summary;
use std::path::Path;
use threadbalance_model::{Level, Nanos, Topology, Window};
use threadbalance_policy::TickReport;
use threadbalance_sim::plot::{Panel, Series, timeline_svg};

/// One tick's figures.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    /// Seconds since management started.
    t_s: f64,
    /// Utilization of each domain over the tick's window, 0–1.
    util: Vec<f64>,
    /// Moves whose affinity changed.
    moves: u32,
}

/// The samples of a managed run, for its plot.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTrace {
    start: Nanos,
    level: Level,
    domains: usize,
    points: Vec<Point>,
}

impl RunTrace {
    /// An empty trace at `level` of `topo`, from `start`.
    pub fn new(topo: &Topology, level: Level, start: Nanos) -> RunTrace {
        RunTrace {
            start,
            level,
            domains: topo.domains(level).len(),
            points: Vec::new(),
        }
    }

    /// Adds one tick and the window it decided on (a window of no duration is skipped).
    pub fn record(&mut self, topo: &Topology, window: &Window, tick: &TickReport) {
        if window.duration().0 == 0 {
            return;
        }
        let load = window.domain_load(topo, self.level);
        self.points.push(Point {
            t_s: tick.at.saturating_sub(self.start).as_secs_f64(),
            util: load.util,
            moves: tick.applied.done,
        });
    }

    /// The panels: utilization per domain (one scale), then moves per second.
    fn panels(&self) -> Vec<Panel> {
        let mut panels: Vec<Panel> = (0..self.domains)
            .map(|d| Panel {
                title: format!("{} {d}: utilization by managed threads", self.level),
                y_desc: "utilization (%)".into(),
                y_range: (0.0, 100.0),
                series: vec![Series {
                    name: format!("{} {d}", self.level),
                    points: self
                        .points
                        .iter()
                        .map(|p| (p.t_s, 100.0 * p.util.get(d).copied().unwrap_or(0.0)))
                        .collect(),
                }],
            })
            .collect();
        let mut prev = 0.0;
        let moves: Vec<(f64, f64)> = self
            .points
            .iter()
            .map(|p| {
                let dt = (p.t_s - prev).max(1e-3);
                prev = p.t_s;
                (p.t_s, f64::from(p.moves) / dt)
            })
            .collect();
        let top = moves.iter().map(|p| p.1).fold(1.0, f64::max);
        panels.push(Panel {
            title: "threads moved (affinity changed)".into(),
            y_desc: "moves (per s)".into(),
            y_range: (0.0, top * 1.05),
            series: vec![Series {
                name: "moves".into(),
                points: moves,
            }],
        });
        panels
    }

    /// The plot, titled `title`.
    pub fn to_svg(&self, title: &str) -> String {
        let end = self.points.last().map_or(1.0, |p| p.t_s);
        timeline_svg(title, end, &self.panels())
    }
}

/// Refuses a `--report` path that cannot be written, before anything starts (the file is
/// created if missing, not truncated: it is written when management ends).
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
        .map_err(|e| crate::input_error(format!("--report {}: {e}", path.display())))
}

/// Writes the plot of a finished run to its `--report` file; a failure is reported and
/// the command's status kept.
pub fn write_report(summary: &Summary, args: &ManageArgs) {
    let (Some(path), Some(trace)) = (&args.report, &summary.trace) else {
        return;
    };
    let title = format!(
        "policy {} at level {}: {} ticks, {} moves applied",
        summary.policy, summary.level, summary.ticks, summary.applied.done
    );
    if let Err(e) = std::fs::write(path, trace.to_svg(&title)) {
        errln!("threadbalance: writing {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_model::testutil::window;
    use threadbalance_model::{ApplyReport, Topology};

    fn tick(at_ms: u64, done: u32) -> TickReport {
        TickReport {
            at: Nanos::from_millis(at_ms),
            threads: 2,
            appeared: 0,
            vanished: 0,
            moves: done as usize,
            applied: ApplyReport {
                done,
                ..ApplyReport::default()
            },
            next_in: Nanos::from_millis(100),
            note: None,
        }
    }

    #[test]
    fn trace_record_keeps_domain_utilization_and_moves_per_tick() {
        // Two packages of two CPUs; threads at 100 % on CPU 0 and 50 % on CPU 2: package 0
        // is (1.0 + 0) / 2 = 50 % busy, package 1 (0.5 + 0) / 2 = 25 %.
        let topo = Topology::synthetic("package:2 core:2 pu:1").unwrap();
        let mut t = RunTrace::new(&topo, Level::Package, Nanos::ZERO);
        let w = window(100, &[1.0, 0.5], &[0, 2]);
        t.record(&topo, &w, &tick(100, 3));
        t.record(&topo, &w, &tick(300, 0));
        assert_eq!(t.points.len(), 2);
        assert_eq!(t.points[0].util, vec![0.5, 0.25]);
        assert_eq!(t.points[1].t_s, 0.3);
        // Moves per second: 3 in the first 0.1 s = 30/s, none in the next 0.2 s.
        let panels = t.panels();
        assert_eq!(panels.len(), 3);
        assert_eq!(panels[2].series[0].points, vec![(0.1, 30.0), (0.3, 0.0)]);
        assert_eq!(panels[0].y_range, panels[1].y_range, "one scale");
        let svg = t.to_svg("run");
        assert!(svg.contains("\nmoves (per s)\n") && svg.contains("\npackage 1\n"));
    }
}
