//! Plots as SVG text, drawn with `plotters` into a `String` (no file, no font: the SVG
//! keeps its labels as `<text>` for the viewer to render).
//!
//! Every plot is a column of panels that share one time axis (seconds, from the same 0 to
//! the same end) and, panel kind by panel kind, one value scale, so panels compare at a
//! glance:
//!
//! ```text
//!  ┌ title ───────────────────────────────────────┐
//!  │ panel 1: y (unit) ┤ series … over time (s)  ▣ legend
//!  │ panel 2: same x range, same y range          ▣ legend
//!  └──────────────────────────────────────────────┘
//! ```
//!
//! [`timeline_svg`] draws such panels (a simulated comparison, a real run);
//! [`effects_svg`] draws the papers' suite: each claim's effects, the paper's number
//! against the simulated one, with the line of equal size and the 2× band around it.

use plotters::coord::Shift;
use plotters::prelude::*;
use std::ops::Range;

/// One line of a panel: a name for the legend and its (x, y) points.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend entry.
    pub name: String,
    /// Points, x in seconds.
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title, the y axis's description (with its unit) and range, its lines.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    /// Shown above the panel.
    pub title: String,
    /// The y axis, with its unit: "utilization (%)".
    pub y_desc: String,
    /// The y range: panels of one kind get the same range.
    pub y_range: (f64, f64),
    /// The lines.
    pub series: Vec<Series>,
}

/// Width of every plot, pixels.
pub const WIDTH: u32 = 900;
/// Height of one timeline panel, pixels.
pub const PANEL_HEIGHT: u32 = 230;
const TITLE_HEIGHT: u32 = 36;

/// The colors of series 0, 1, …: distinct, dark enough on white.
pub const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

type DrawResult<T> = Result<T, String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Panels over one time axis `0..x_end` seconds, under `title`.
pub fn timeline_svg(title: &str, x_end: f64, panels: &[Panel]) -> String {
    let h = TITLE_HEIGHT + PANEL_HEIGHT * panels.len().max(1) as u32;
    let mut out = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, h)).into_drawing_area();
        draw_timeline(&root, title, x_end, panels).and_then(|()| root.present().map_err(err))
    };
    match drawn {
        Ok(()) => out,
        Err(e) => failed_svg(title, &e),
    }
}

fn draw_timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_end: f64,
    panels: &[Panel],
) -> DrawResult<()> {
    root.fill(&WHITE).map_err(err)?;
    let (top, body) = root.split_vertically(TITLE_HEIGHT);
    top.draw_text(
        title,
        &("sans-serif", 18).into_font().color(&BLACK),
        (12, 10),
    )
    .map_err(err)?;
    if panels.is_empty() {
        return Ok(());
    }
    let x_end = if x_end > 0.0 { x_end } else { 1.0 };
    for (area, p) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let (y0, y1) = if p.y_range.1 > p.y_range.0 {
            p.y_range
        } else {
            (p.y_range.0, p.y_range.0 + 1.0)
        };
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 14))
            .margin(8)
            .margin_right(16)
            .x_label_area_size(34)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..x_end, y0..y1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("time (s)")
            .y_desc(&p.y_desc)
            .x_labels(10)
            .y_labels(5)
            .x_label_formatter(&|x| trim(*x))
            .y_label_formatter(&|y| trim(*y))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        for (i, s) in p.series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(err)?
                .label(&s.name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 16, y + 4)], c.filled()));
        }
        if !p.series.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperRight)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .draw()
                .map_err(err)?;
        }
    }
    Ok(())
}

/// A tick label: at most two decimals, no trailing zeros ("0.5", "12", "0.25").
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" { "0".into() } else { s.into() }
}

/// One effect of the papers' suite, for [`effects_svg`].
#[derive(Debug, Clone, PartialEq)]
pub struct EffectPoint {
    /// A short label drawn next to the point ("3a": claim 3, first effect).
    pub label: String,
    /// The paper's number.
    pub paper: f64,
    /// The simulated number.
    pub simulated: f64,
    /// Legend group (the verdict): points of one group share a color.
    pub group: String,
    /// Index into [`COLORS`] of the group's color.
    pub color: usize,
}

/// Height of the suite plot's chart, pixels.
pub const EFFECTS_HEIGHT: u32 = 640;
const KEY_LINE: u32 = 15;

/// The papers' effects: x the paper's number, y the simulated one, on one scale; the line
/// y = x (the paper's size), and y = x/2 and y = 2x (the band a reproduced size lies in).
/// `key` lines are printed under the chart (what each point's label stands for).
pub fn effects_svg(title: &str, points: &[EffectPoint], key: &[String]) -> String {
    let mut out = String::new();
    let h = EFFECTS_HEIGHT + KEY_LINE * key.len() as u32 + 8;
    let drawn = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, h)).into_drawing_area();
        draw_effects(&root, title, points, key).and_then(|()| root.present().map_err(err))
    };
    match drawn {
        Ok(()) => out,
        Err(e) => failed_svg(title, &e),
    }
}

fn effects_range(points: &[EffectPoint]) -> Range<f64> {
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for p in points {
        lo = lo.min(p.paper).min(p.simulated);
        hi = hi.max(p.paper).max(p.simulated);
    }
    let pad = (hi - lo) * 0.06;
    (lo - pad)..(hi + pad)
}

fn draw_effects<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[EffectPoint],
    key: &[String],
) -> DrawResult<()> {
    root.fill(&WHITE).map_err(err)?;
    let (plot, below) = root.split_vertically(EFFECTS_HEIGHT);
    for (i, line) in key.iter().enumerate() {
        below
            .draw_text(
                line,
                &("sans-serif", 11).into_font().color(&BLACK),
                (14, (KEY_LINE * i as u32) as i32),
            )
            .map_err(err)?;
    }
    let r = effects_range(points);
    let mut chart = ChartBuilder::on(&plot)
        .caption(title, ("sans-serif", 16))
        .margin(12)
        .margin_right(24)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(r.clone(), r.clone())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("paper's effect (% or points; CV as a fraction)")
        .y_desc("simulated effect (same unit)")
        .x_label_formatter(&|x| trim(*x))
        .y_label_formatter(&|y| trim(*y))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    // y = k·x (k > 0) inside the square range: x where k·x stays in range too (plotters
    // leaves out a segment whose ends both lie outside).
    let line = |k: f64| {
        let x0 = r.start.max(r.start / k);
        let x1 = r.end.min(r.end / k);
        vec![(x0, k * x0), (x1, k * x1)]
    };
    let grey = RGBColor(120, 120, 120);
    chart
        .draw_series(LineSeries::new(line(1.0), BLACK.stroke_width(1)))
        .map_err(err)?
        .label("simulated = paper")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(2)));
    for (k, name) in [(0.5, "½× and 2× (reproduced between)"), (2.0, "")] {
        let s = chart
            .draw_series(DashedLineSeries::new(line(k), 6, 4, grey.stroke_width(1)))
            .map_err(err)?;
        if !name.is_empty() {
            s.label(name).legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 16, y)], grey.stroke_width(2))
            });
        }
    }
    let mut groups: Vec<(&str, usize)> = Vec::new();
    for p in points {
        if !groups.iter().any(|(g, _)| *g == p.group) {
            groups.push((&p.group, p.color));
        }
    }
    for (g, ci) in &groups {
        let c = color(*ci);
        chart
            .draw_series(
                points
                    .iter()
                    .filter(|p| p.group == *g)
                    .map(|p| Circle::new((p.paper, p.simulated), 5, c.filled())),
            )
            .map_err(err)?
            .label(*g)
            .legend(move |(x, y)| Circle::new((x + 8, y), 5, c.filled()));
        chart
            .draw_series(points.iter().filter(|p| p.group == *g).map(|p| {
                Text::new(
                    p.label.clone(),
                    (p.paper, p.simulated),
                    ("sans-serif", 11).into_font().color(&BLACK),
                )
            }))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// An SVG that says the plot could not be drawn (never expected: drawing into a string
/// fails only on a bug).
fn failed_svg(title: &str, why: &str) -> String {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"60\"><text x=\"10\" y=\"30\">{}: could not draw ({})</text></svg>\n",
        esc(title),
        esc(why)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trim_keeps_at_most_two_decimals_without_trailing_zeros() {
        assert_eq!(trim(0.5), "0.5");
        assert_eq!(trim(12.0), "12");
        assert_eq!(trim(0.254), "0.25");
        assert_eq!(trim(-0.001), "0");
    }

    #[test]
    fn timeline_svg_has_axes_units_and_a_legend_per_panel() {
        let s = |name: &str, k: f64| Series {
            name: name.into(),
            points: (0..20).map(|i| (i as f64 * 0.1, k * i as f64)).collect(),
        };
        let panel = |t: &str| Panel {
            title: t.into(),
            y_desc: "utilization (%)".into(),
            y_range: (0.0, 100.0),
            series: vec![s("socket 0", 2.0), s("socket 1", 3.0)],
        };
        let svg = timeline_svg("demo", 2.0, &[panel("none"), panel("tumbler")]);
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        assert_eq!(
            svg.matches("\ntime (s)\n").count(),
            2,
            "one x axis per panel"
        );
        assert_eq!(svg.matches("\nutilization (%)\n").count(), 2);
        assert_eq!(svg.matches("\nsocket 1\n").count(), 2, "a legend per panel");
        // Time ticks: 0 … 2 s.
        assert!(svg.contains("\n0\n") && svg.contains("\n2\n"), "ticks");
    }

    #[test]
    fn effects_svg_labels_points_and_draws_the_band() {
        let pts = vec![
            EffectPoint {
                label: "1".into(),
                paper: 10.5,
                simulated: 2.0,
                group: "direction only".into(),
                color: 3,
            },
            EffectPoint {
                label: "2".into(),
                paper: -23.6,
                simulated: -38.0,
                group: "reproduced".into(),
                color: 2,
            },
        ];
        let svg = effects_svg("papers", &pts, &["1: ferret".to_string()]);
        assert!(svg.contains("\nreproduced\n") && svg.contains("\ndirection only\n"));
        assert!(svg.contains("\nsimulated = paper\n"));
        assert!(svg.contains("<circle"), "points are circles");
        assert!(svg.contains("\n1: ferret\n"), "the key");
        // The range covers both points: −38 … 10.5 padded.
        let r = effects_range(&pts);
        assert!(r.start < -38.0 && r.end > 10.5, "{r:?}");
    }
}
