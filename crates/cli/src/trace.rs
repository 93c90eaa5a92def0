//! `run`/`attach --report FILE.svg|FILE.png`: what the control loop saw, drawn as the
//! simulator draws its runs ([`threadbalance_sim::plot`]).
//!
//! Each tick adds one point: the time since management started, the utilization of every
//! domain at the policy's level over the tick's window (managed threads' CPU time over the
//! domain's CPUs, as the summary's `domain_util` averages it) and the moves applied. A
//! tick of `speed` is 2-7 ms, 1,600 of them in 10 s: drawn one by one they are a solid
//! comb. So the points are gathered into bins of max(the median tick, the run's length /
//! 200) before drawing: each bin's utilization is its ticks' mean weighted by their
//! windows' lengths, its moves per second its moves over its width. The plot has one panel
//! of utilization per domain, all on the 0–100 % scale, then the moves per second; the
//! guard's hand-backs to Linux and its resumptions are dashed vertical lines across every
//! panel (a tick whose plan says so in its note, see `threadbalance_policy::speed`).
//!
//! The file's extension picks the format: `.svg` the SVG as drawn, `.png` the same SVG
//! rasterized (resvg), its labels in the system's fonts (loaded once; a system without any
//! writes the PNG without labels and says so). Any other extension is refused with one
//! line and exit status 2 before anything starts.

use std::path::Path;
use threadbalance_model::{Level, Nanos, Topology, Window};
use threadbalance_policy::TickReport;
use threadbalance_sim::plot::{Mark, Panel, Series, timeline_marked_svg};

/// One tick's figures (or one bin's).
#[derive(Debug, Clone, PartialEq)]
struct Point {
    /// Seconds since management started.
    t_s: f64,
    /// The length of the tick's window, seconds.
    dt_s: f64,
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
    /// The guard's events: seconds since management started, and whether it handed the
    /// threads back (`true`) or resumed.
    marks: Vec<(f64, bool)>,
}

/// The most bins a plot draws along its time axis.
pub const MAX_BINS: f64 = 200.0;

impl RunTrace {
    /// An empty trace at `level` of `topo`, from `start`.
    pub fn new(topo: &Topology, level: Level, start: Nanos) -> RunTrace {
        RunTrace {
            start,
            level,
            domains: topo.domains(level).len(),
            points: Vec::new(),
            marks: Vec::new(),
        }
    }

    /// Adds one tick and the window it decided on (a window of no duration is skipped).
    pub fn record(&mut self, topo: &Topology, window: &Window, tick: &TickReport) {
        let t_s = tick.at.saturating_sub(self.start).as_secs_f64();
        if let Some(note) = &tick.note {
            if note.starts_with("guard: handed back") {
                self.marks.push((t_s, true));
            } else if note.starts_with("guard: managing again") {
                self.marks.push((t_s, false));
            }
        }
        if window.duration().0 == 0 {
            return;
        }
        let load = window.domain_load(topo, self.level);
        self.points.push(Point {
            t_s,
            dt_s: window.duration().as_secs_f64(),
            util: load.util,
            moves: tick.applied.done,
        });
    }

    /// The bin width: the median gap between ticks, or the run's length over
    /// [`MAX_BINS`] when that is wider.
    fn bin_width(&self) -> f64 {
        let mut gaps: Vec<f64> = self
            .points
            .windows(2)
            .map(|w| w[1].t_s - w[0].t_s)
            .collect();
        gaps.sort_by(f64::total_cmp);
        let median = gaps.get(gaps.len() / 2).copied().unwrap_or(0.0);
        let end = self.points.last().map_or(0.0, |p| p.t_s);
        median.max(end / MAX_BINS).max(1e-3)
    }

    /// The points gathered into bins of [`Self::bin_width`], each at its end: utilization
    /// weighted by the windows' lengths, moves summed. Empty bins are left out.
    fn binned(&self) -> (f64, Vec<Point>) {
        let width = self.bin_width();
        let mut out: Vec<Point> = Vec::new();
        for p in &self.points {
            let end = ((p.t_s / width).ceil() * width).max(width);
            match out.last_mut() {
                Some(b) if (b.t_s - end).abs() < width / 2.0 => {
                    let total = b.dt_s + p.dt_s;
                    for (i, u) in b.util.iter_mut().enumerate() {
                        let add = p.util.get(i).copied().unwrap_or(0.0);
                        *u = if total > 0.0 {
                            (*u * b.dt_s + add * p.dt_s) / total
                        } else {
                            *u
                        };
                    }
                    b.dt_s = total;
                    b.moves += p.moves;
                }
                _ => out.push(Point {
                    t_s: end,
                    ..p.clone()
                }),
            }
        }
        (width, out)
    }

    /// The panels: utilization per domain (one scale), then moves per second, over bins.
    fn panels(&self) -> Vec<Panel> {
        let (width, points) = self.binned();
        let mut panels: Vec<Panel> = (0..self.domains)
            .map(|d| Panel {
                title: format!("{} {d}: utilization by managed threads", self.level),
                y_desc: "utilization (%)".into(),
                y_range: (0.0, 100.0),
                series: vec![Series {
                    name: format!("{} {d}", self.level),
                    points: points
                        .iter()
                        .map(|p| (p.t_s, 100.0 * p.util.get(d).copied().unwrap_or(0.0)))
                        .collect(),
                }],
            })
            .collect();
        let moves: Vec<(f64, f64)> = points
            .iter()
            .map(|p| (p.t_s, f64::from(p.moves) / width))
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

    /// The guard's events as marks across the panels.
    fn marks(&self) -> Vec<Mark> {
        self.marks
            .iter()
            .map(|&(t_s, handed_back)| Mark {
                x: t_s,
                kind: if handed_back {
                    "guard handed the threads back to Linux"
                } else {
                    "guard resumed management"
                }
                .into(),
            })
            .collect()
    }

    /// The plot, titled `title`.
    pub fn to_svg(&self, title: &str) -> String {
        let end = self.points.last().map_or(1.0, |p| p.t_s);
        timeline_marked_svg(title, end, &self.panels(), &self.marks())
    }
}

/// The formats `--report` writes, by the file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `.svg`.
    Svg,
    /// `.png`.
    Png,
}

/// The format `path` names (`.svg` or `.png`, in any case); any other extension is a
/// usage error naming it.
pub fn format_of(path: &Path) -> anyhow::Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(Format::Svg),
        Some("png") => Ok(Format::Png),
        _ => Err(crate::input_error(format!(
            "--report {}: the file name must end in .svg or .png (the format it is written in)",
            path.display()
        ))),
    }
}

/// `svg` rasterized to PNG bytes, its text in the system's fonts; also whether any font
/// was found (without one the labels are left out).
pub fn svg_to_png(svg: &str) -> anyhow::Result<(Vec<u8>, bool)> {
    use resvg::{tiny_skia, usvg};
    let mut options = usvg::Options::default();
    let db = options.fontdb_mut();
    db.load_system_fonts();
    // The plot asks for "sans-serif", which fontdb maps to Arial unless told otherwise:
    // the first of the usual free sans-serif families installed, else any family there is.
    let families: Vec<String> = db
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    let sans = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "Arial"]
        .into_iter()
        .map(str::to_string)
        .find(|f| families.contains(f))
        .or_else(|| families.first().cloned());
    let fonts = sans.is_some();
    if let Some(family) = sans {
        db.set_sans_serif_family(family);
    }
    let tree = usvg::Tree::from_str(svg, &options)?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| anyhow::anyhow!("a plot of {}×{} pixels", size.width(), size.height()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    Ok((pixmap.encode_png()?, fonts))
}

/// Refuses a `--report` path whose extension is not `.svg` or `.png`, or that cannot be
/// written, before anything starts (the file is created if missing, not truncated: it is
/// written when management ends).
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    format_of(path)?;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map(drop)
        .map_err(|e| crate::error::refused(format!("--report {}", path.display()), e))
}

/// Writes the plot of a finished run, titled `title`, to its `--report` file `path`; a
/// failure is reported and the command's status kept.
pub fn write_report(trace: &RunTrace, title: &str, path: &Path) {
    let svg = trace.to_svg(title);
    let bytes = match format_of(path) {
        Ok(Format::Png) => match svg_to_png(&svg) {
            Ok((png, fonts)) => {
                if !fonts {
                    errln!(
                        "threadbalance: no system font found: {} has no labels (a .svg keeps them)",
                        path.display()
                    );
                }
                png
            }
            Err(e) => {
                errln!(
                    "threadbalance: drawing {}: {}",
                    path.display(),
                    crate::error::one_line(&e)
                );
                return;
            }
        },
        _ => svg.into_bytes(),
    };
    if let Err(e) = std::fs::write(path, bytes) {
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
        // Bins of the one gap (0.2 s; 0.3 s / 200 is less): ticks at 0.1 and 0.3 s end
        // bins at 0.2 and 0.4 s. Moves per second: 3 in the first 0.2 s = 15/s.
        let panels = t.panels();
        assert_eq!(panels.len(), 3);
        let moves = &panels[2].series[0].points;
        assert_eq!(moves.len(), 2);
        assert!((moves[0].0 - 0.2).abs() < 1e-9 && (moves[0].1 - 15.0).abs() < 1e-9);
        assert!((moves[1].0 - 0.4).abs() < 1e-9 && moves[1].1 == 0.0);
        assert_eq!(panels[0].y_range, panels[1].y_range, "one scale");
        let svg = t.to_svg("run");
        assert!(svg.contains("\nmoves (per s)\n") && svg.contains("\npackage 1\n"));
    }

    fn noted(at_ms: u64, note: &str) -> TickReport {
        TickReport {
            note: Some(note.into()),
            ..tick(at_ms, 0)
        }
    }

    // See: issue 40, item 4 ("a solid comb", hand-backs not marked).
    #[test]
    fn trace_ticks_of_5_ms_over_10_s_draw_200_bins_and_mark_the_guard() {
        let topo = Topology::synthetic("package:2 core:1 pu:1").unwrap();
        let mut t = RunTrace::new(&topo, Level::Package, Nanos::ZERO);
        // 2,000 ticks of 5 ms; package 0 alternates 100 % and 0 %, one move every tick.
        for i in 1..=2000u64 {
            let util = if i % 2 == 0 { 1.0 } else { 0.0 };
            let w = window(5, &[util], &[0]);
            let tick = match i {
                600 => noted(i * 5, "guard: handed back at 3.00 s: slowest thread …"),
                1400 => noted(i * 5, "guard: managing again since 7.00 s: …"),
                _ => tick(i * 5, 1),
            };
            t.record(&topo, &w, &tick);
        }
        assert_eq!(t.points.len(), 2000);
        // 10 s / 200 = 50 ms bins (wider than the 5 ms tick): 200 points per line.
        let panels = t.panels();
        let util = &panels[0].series[0].points;
        assert_eq!(util.len(), 200);
        // Each bin holds 10 ticks, half of them at 100 %: 50 %, not a comb of 0 and 100.
        assert!(util.iter().all(|p| (p.1 - 50.0).abs() < 1e-6), "{util:?}");
        // 10 moves per 50 ms bin = 200 per second (the bins with a guard tick: 9).
        // Panels: package 0, package 1, moves.
        let moves = &panels[2].series[0].points;
        assert!((moves[0].1 - 200.0).abs() < 1e-6, "{:?}", moves[0]);
        assert_eq!(
            t.marks,
            vec![(3.0, true), (7.0, false)],
            "the guard's hand-back and resumption"
        );
        let svg = t.to_svg("run");
        assert!(svg.contains("\nguard handed the\n") && svg.contains("\nthreads back to Linux\n"));
        assert!(svg.contains("\nguard resumed management\n"), "{svg}");
    }

    #[test]
    fn format_of_svg_or_png_else_a_usage_error() {
        assert_eq!(format_of(Path::new("a/run.svg")).unwrap(), Format::Svg);
        assert_eq!(format_of(Path::new("run.PNG")).unwrap(), Format::Png);
        for bad in ["run.pdf", "run", "run.svg.txt"] {
            let e = format_of(Path::new(bad)).unwrap_err();
            assert!(e.to_string().contains("must end in .svg or .png"), "{e}");
        }
    }
}
