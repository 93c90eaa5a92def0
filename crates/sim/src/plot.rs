//! Plots as SVG text, drawn with `plotters` into a `String` (no file, no font: the SVG
//! keeps its labels as `<text>` for the viewer to render).
//!
//! Every plot is a column of panels that share one time axis (seconds, from the same 0 to
//! the same end) and, panel kind by panel kind, one value scale, so panels compare at a
//! glance:
//!
//! ```text
//!  ┌ title ───────────────────────────────────────┬─────────┐
//!  │ panel 1: y (unit) ┤ series … over time (s)   │ ▣ legend│
//!  │ panel 2: same x range, same y range   ┆ mark │ ▣ legend│
//!  └──────────────────────────────────────────────┴─────────┘
//! ```
//!
//! Legends sit in a column of their own right of the panels, never over the data. A
//! colour means one thing in the whole plot: series are coloured by name in the order
//! the plot first meets them (`core 0` is one colour in every panel it appears in, and
//! `moves` another), and marks ([`Mark`]: the guard's hand-backs) are dashed lines in
//! black or grey, colours no series has.
//!
//! [`timeline_svg`] draws such panels (a simulated comparison, a real run);
//! [`effects_svg`] draws the papers' suite: each claim's effects, the paper's number
//! against the simulated one, with the line of equal size and the 2× band around it. Its
//! point labels are placed where they overlap no other label (tried around the point,
//! then further out, with a leader line), its legend is a row under the chart, and the
//! key under it is wrapped at word boundaries to the plot's width, never cut.

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

/// A vertical line across every panel at `x` seconds, of a kind named in the legend
/// (every mark of one kind has one style).
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Where, in seconds.
    pub x: f64,
    /// What it marks (the legend entry).
    pub kind: String,
}

/// Width of every plot, pixels.
pub const WIDTH: u32 = 900;
/// Width of the legend column right of a timeline's panels, pixels.
pub const LEGEND_WIDTH: u32 = 190;
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

/// Why plotters could not draw, as its backend describes it (`Debug`: the backend's
/// error type is generic here); the SVG says it in the plot's place.
#[derive(Debug)]
struct DrawError(String);

type DrawResult<T> = Result<T, DrawError>;

fn err<E: std::fmt::Debug>(e: E) -> DrawError {
    DrawError(format!("{e:?}"))
}

/// Panels over one time axis `0..x_end` seconds, under `title`.
pub fn timeline_svg(title: &str, x_end: f64, panels: &[Panel]) -> String {
    timeline_marked_svg(title, x_end, panels, &[])
}

/// [`timeline_svg`] with `marks` drawn across every panel.
pub fn timeline_marked_svg(title: &str, x_end: f64, panels: &[Panel], marks: &[Mark]) -> String {
    let h = TITLE_HEIGHT + PANEL_HEIGHT * panels.len().max(1) as u32;
    let mut out = String::new();
    let drawn = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, h)).into_drawing_area();
        draw_timeline(&root, title, x_end, panels, marks).and_then(|()| root.present().map_err(err))
    };
    match drawn {
        Ok(()) => out,
        Err(DrawError(e)) => failed_svg(title, &e),
    }
}

/// The colour of each series name, in the order the panels first name them.
fn colours_by_name(panels: &[Panel]) -> Vec<&str> {
    let mut names: Vec<&str> = Vec::new();
    for s in panels.iter().flat_map(|p| &p.series) {
        if !names.contains(&s.name.as_str()) {
            names.push(&s.name);
        }
    }
    names
}

/// The styles of the marks' kinds: black dashes, then grey.
const MARK_COLOURS: [RGBColor; 2] = [RGBColor(0, 0, 0), RGBColor(130, 130, 130)];

/// Draws one legend entry at `(x, y)` (pixels of `area`): a swatch then the name.
fn legend_entry<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    (x, y): (i32, i32),
    swatch: Swatch,
    name: &str,
) -> DrawResult<()> {
    match swatch {
        Swatch::Block(c) => area
            .draw(&Rectangle::new([(x, y - 5), (x + 18, y + 5)], c.filled()))
            .map_err(err)?,
        Swatch::Dashes(c) => {
            for k in 0..3 {
                area.draw(&PathElement::new(
                    vec![(x + k * 7, y), (x + k * 7 + 4, y)],
                    c.stroke_width(2),
                ))
                .map_err(err)?;
            }
        }
        Swatch::Line(c) => area
            .draw(&PathElement::new(
                vec![(x, y), (x + 18, y)],
                c.stroke_width(2),
            ))
            .map_err(err)?,
        Swatch::Dot(c) => area
            .draw(&Circle::new((x + 9, y), 5, c.filled()))
            .map_err(err)?,
    }
    area.draw_text(
        name,
        &("sans-serif", 12).into_font().color(&BLACK),
        (x + 24, y - 7),
    )
    .map_err(err)
}

/// How a legend entry shows its series.
#[derive(Clone, Copy)]
enum Swatch {
    Block(RGBColor),
    Line(RGBColor),
    Dashes(RGBColor),
    Dot(RGBColor),
}

fn draw_timeline<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    x_end: f64,
    panels: &[Panel],
    marks: &[Mark],
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
    let names = colours_by_name(panels);
    let mut kinds: Vec<&str> = Vec::new();
    for m in marks {
        if !kinds.contains(&m.kind.as_str()) {
            kinds.push(&m.kind);
        }
    }
    let mark_colour = |kind: &str| {
        let i = kinds.iter().position(|k| *k == kind).unwrap_or(0);
        MARK_COLOURS[i % MARK_COLOURS.len()]
    };
    for (whole, p) in body.split_evenly((panels.len(), 1)).iter().zip(panels) {
        let (area, legend) = whole.split_horizontally(WIDTH - LEGEND_WIDTH);
        let (y0, y1) = if p.y_range.1 > p.y_range.0 {
            p.y_range
        } else {
            (p.y_range.0, p.y_range.0 + 1.0)
        };
        let mut chart = ChartBuilder::on(&area)
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
        let mut row = 34;
        for s in &p.series {
            let c = color(names.iter().position(|n| *n == s.name).unwrap_or(0));
            chart
                .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
                .map_err(err)?;
            legend_entry(&legend, (8, row), Swatch::Block(c), &s.name)?;
            row += 18;
        }
        for m in marks.iter().filter(|m| m.x >= 0.0 && m.x <= x_end) {
            let c = mark_colour(&m.kind);
            chart
                .draw_series(DashedLineSeries::new(
                    [(m.x, y0), (m.x, y1)],
                    5,
                    4,
                    c.stroke_width(1),
                ))
                .map_err(err)?;
        }
        for kind in &kinds {
            // Two lines at most per kind: the column is narrow.
            let (first, rest) = split_words(kind, 24);
            legend_entry(&legend, (8, row), Swatch::Dashes(mark_colour(kind)), &first)?;
            if !rest.is_empty() {
                row += 15;
                legend
                    .draw_text(
                        &rest,
                        &("sans-serif", 12).into_font().color(&BLACK),
                        (32, row - 7),
                    )
                    .map_err(err)?;
            }
            row += 18;
        }
    }
    Ok(())
}

/// `text` cut at the last space within `width` characters: (first line, the rest).
fn split_words(text: &str, width: usize) -> (String, String) {
    if text.chars().count() <= width {
        return (text.to_string(), String::new());
    }
    let cut: String = text.chars().take(width).collect();
    match cut.rfind(' ') {
        Some(i) if i > 0 => (text[..i].to_string(), text[i + 1..].to_string()),
        _ => (cut.clone(), text[cut.len()..].to_string()),
    }
}

/// `text` wrapped at word boundaries into lines of at most `width` characters (a word
/// longer than that gets a line of its own, whole).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
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
/// Height of the suite plot's legend row, under the chart.
const LEGEND_ROW: u32 = 26;
/// Characters of a key line at 11 px that fit the plot's width: DejaVu Sans averaged 4.9
/// px a character at 11 px on the suite's key (rendered and looked at), so 150 take
/// about 735 of the 856 px a continuation line has, with room for wider words.
pub const KEY_WIDTH: usize = 150;

/// The papers' effects: x the paper's number, y the simulated one, on one scale; the line
/// y = x (the paper's size), and y = x/2 and y = 2x (the band a reproduced size lies in).
/// `key` lines are printed under the chart (what each point's label stands for), each
/// wrapped at word boundaries to [`KEY_WIDTH`].
pub fn effects_svg(title: &str, points: &[EffectPoint], key: &[String]) -> String {
    let mut out = String::new();
    let lines = key_lines(key);
    let h = EFFECTS_HEIGHT + LEGEND_ROW + KEY_LINE * lines.len() as u32 + 8;
    let drawn = {
        let root = SVGBackend::with_string(&mut out, (WIDTH, h)).into_drawing_area();
        draw_effects(&root, title, points, &lines).and_then(|()| root.present().map_err(err))
    };
    match drawn {
        Ok(()) => out,
        Err(DrawError(e)) => failed_svg(title, &e),
    }
}

/// The key wrapped: each entry's lines, the continuation lines marked (`true`) to be
/// drawn indented.
fn key_lines(key: &[String]) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    for entry in key {
        for (i, line) in wrap(entry, KEY_WIDTH).into_iter().enumerate() {
            out.push((i > 0, line));
        }
    }
    out
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

/// A label's box in pixels: left, top, right, bottom.
type LabelBox = (i32, i32, i32, i32);

/// Width in pixels of a label of `chars` characters at 11 px (generous, so that boxes
/// that do not overlap here do not overlap drawn).
fn label_width(chars: usize) -> i32 {
    7 * chars as i32 + 2
}

fn overlaps(a: LabelBox, b: LabelBox) -> bool {
    a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3
}

/// Where to draw each label (top-left pixels), given its point's pixel and its width:
/// the first of the places around the point, then further out, whose box overlaps no
/// label placed before and no point's dot and stays within `bounds`. Pure.
pub fn place_labels(at: &[(i32, i32)], widths: &[i32], bounds: LabelBox) -> Vec<(i32, i32)> {
    const H: i32 = 12;
    let dots: Vec<LabelBox> = at
        .iter()
        .map(|&(x, y)| (x - 5, y - 5, x + 5, y + 5))
        .collect();
    let mut placed: Vec<LabelBox> = Vec::new();
    let mut out = Vec::new();
    for (&(x, y), &w) in at.iter().zip(widths) {
        let mut spots = Vec::new();
        for ring in 0..8 {
            let d = 7 + ring * 12;
            spots.extend([
                (x + d, y - H / 2),
                (x - d - w, y - H / 2),
                (x - w / 2, y - d - H),
                (x - w / 2, y + d),
                (x + d, y - d - H / 2),
                (x + d, y + d - H / 2),
                (x - d - w, y - d - H / 2),
                (x - d - w, y + d - H / 2),
            ]);
        }
        let fits = |&(l, t): &(i32, i32)| {
            let b = (l, t, l + w, t + H);
            b.0 >= bounds.0
                && b.2 <= bounds.2
                && b.1 >= bounds.1
                && b.3 <= bounds.3
                && !placed.iter().any(|p| overlaps(*p, b))
                && !dots.iter().any(|p| overlaps(*p, b))
        };
        let spot = spots
            .iter()
            .copied()
            .find(fits)
            .unwrap_or((x + 7, y - H / 2));
        placed.push((spot.0, spot.1, spot.0 + w, spot.1 + H));
        out.push(spot);
    }
    out
}

fn draw_effects<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    points: &[EffectPoint],
    key: &[(bool, String)],
) -> DrawResult<()> {
    root.fill(&WHITE).map_err(err)?;
    let (plot, below) = root.split_vertically(EFFECTS_HEIGHT);
    let (legend, keys) = below.split_vertically(LEGEND_ROW);
    draw_key(&keys, key)?;
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
        .map_err(err)?;
    for k in [0.5, 2.0] {
        chart
            .draw_series(DashedLineSeries::new(line(k), 6, 4, grey.stroke_width(1)))
            .map_err(err)?;
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
            .map_err(err)?;
    }
    // Labels where they overlap nothing, within the plotting area; a label pushed away
    // from its point gets a thin leader line.
    let (xs, ys) = chart.plotting_area().get_pixel_range();
    let at: Vec<(i32, i32)> = points
        .iter()
        .map(|p| chart.backend_coord(&(p.paper, p.simulated)))
        .collect();
    let widths: Vec<i32> = points
        .iter()
        .map(|p| label_width(p.label.chars().count()))
        .collect();
    let spots = place_labels(&at, &widths, (xs.start, ys.start, xs.end, ys.end));
    for ((p, &(px, py)), (&(lx, ly), &w)) in points.iter().zip(&at).zip(spots.iter().zip(&widths)) {
        let (cx, cy) = (lx + w / 2, ly + 6);
        if (cx - px).abs() > w / 2 + 12 || (cy - py).abs() > 16 {
            let end = (cx.clamp(lx, lx + w), if cy < py { ly + 12 } else { ly });
            root.draw(&PathElement::new(vec![(px, py), end], grey.stroke_width(1)))
                .map_err(err)?;
        }
        root.draw_text(
            &p.label,
            &("sans-serif", 11).into_font().color(&BLACK),
            (lx, ly),
        )
        .map_err(err)?;
    }
    effects_legend(&legend, &groups, grey)
}

/// The key under the effects chart: one line each, indented when it goes on the line
/// before.
fn draw_key<DB: DrawingBackend>(
    keys: &DrawingArea<DB, Shift>,
    key: &[(bool, String)],
) -> DrawResult<()> {
    for (i, (more, line)) in key.iter().enumerate() {
        keys.draw_text(
            line,
            &("sans-serif", 11).into_font().color(&BLACK),
            (if *more { 30 } else { 14 }, (KEY_LINE * i as u32) as i32),
        )
        .map_err(err)?;
    }
    Ok(())
}

/// The effects chart's legend: the diagonal, the ½× and 2× lines (`grey`) and each group
/// of claims in its color.
fn effects_legend<DB: DrawingBackend>(
    legend: &DrawingArea<DB, Shift>,
    groups: &[(&str, usize)],
    grey: RGBColor,
) -> DrawResult<()> {
    // The legend: a row under the chart, outside the data.
    let mut x = 14;
    let mut entries: Vec<(Swatch, String)> = vec![
        (Swatch::Line(BLACK), "simulated = paper".to_string()),
        (
            Swatch::Dashes(grey),
            "½× and 2× (reproduced between)".to_string(),
        ),
    ];
    entries.extend(
        groups
            .iter()
            .map(|(g, ci)| (Swatch::Dot(color(*ci)), (*g).to_string())),
    );
    for (swatch, name) in entries {
        legend_entry(legend, (x, 12), swatch, &name)?;
        x += 24 + label_width(name.chars().count()) + 18;
    }
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

    // See: issue 40, item 4: footnotes cut mid-word, labels over each other.
    #[test]
    fn wrap_breaks_at_words_and_never_cuts_one() {
        assert_eq!(wrap("one two three four", 9), ["one two", "three", "four"]);
        assert_eq!(
            wrap("a averyveryverylongword b", 5),
            ["a", "averyveryverylongword", "b"]
        );
        let long = "1: threads that spin at barriers lose time when they share a core [reproduced; \
                    none] — wall time at 16 threads; wall time at 32 threads; CV of the cores' load";
        let lines = key_lines(&[long.repeat(2)]);
        assert!(lines.len() > 1 && lines.iter().all(|(_, l)| l.chars().count() <= KEY_WIDTH));
        assert!(!lines[0].0 && lines[1..].iter().all(|(more, _)| *more));
        // Nothing lost: the words joined again are the entry.
        let joined: Vec<&str> = lines
            .iter()
            .flat_map(|(_, l)| l.split_whitespace())
            .collect();
        let long = long.repeat(2);
        assert_eq!(joined, long.split_whitespace().collect::<Vec<_>>());
    }

    #[test]
    fn place_labels_five_points_at_one_spot_get_five_boxes_apart() {
        let at = vec![(300, 300); 5];
        let widths = vec![20; 5];
        let spots = place_labels(&at, &widths, (0, 0, 800, 600));
        let boxes: Vec<LabelBox> = spots.iter().map(|&(l, t)| (l, t, l + 20, t + 12)).collect();
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                assert!(!overlaps(*a, *b), "{a:?} {b:?}");
            }
            // And none over the dot.
            assert!(!overlaps(*a, (295, 295, 305, 305)), "{a:?}");
        }
        // A lone point keeps its label just right of it.
        assert_eq!(
            place_labels(&[(100, 100)], &[20], (0, 0, 800, 600)),
            [(107, 94)]
        );
    }

    #[test]
    fn timeline_one_colour_per_series_name_and_legends_outside_the_panels() {
        // "core 1" is the second panel's only series: it gets the second colour, not the
        // first ("core 0"'s).
        let panel = |name: &str| Panel {
            title: name.into(),
            y_desc: "utilization (%)".into(),
            y_range: (0.0, 100.0),
            series: vec![Series {
                name: name.into(),
                points: vec![(0.0, 10.0), (1.0, 90.0)],
            }],
        };
        let panels = [panel("core 0"), panel("core 1"), panel("moves")];
        assert_eq!(colours_by_name(&panels), ["core 0", "core 1", "moves"]);
        let svg = timeline_marked_svg(
            "run",
            1.0,
            &panels,
            &[Mark {
                x: 0.5,
                kind: "guard handed the threads back to Linux".into(),
            }],
        );
        let hex = |c: RGBColor| format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2);
        for c in &COLORS[..3] {
            assert!(svg.contains(&hex(*c)), "{} missing", hex(*c));
        }
        // The mark's legend, on two lines in the narrow legend column.
        assert!(
            svg.contains("guard handed the") && svg.contains("threads back to Linux"),
            "the mark's legend"
        );
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
