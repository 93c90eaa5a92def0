//! The plots rendered to PNG and checked for content: series drawn inside the plot area,
//! a legend, one scale across panels. The SVG is rasterized without fonts (text is left
//! out), so the checks look at lines, points and legend markers, not at words.

use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Options, Tree};
use threadbalance_policy::Settings;
use threadbalance_sim::plot::{COLORS, PANEL_HEIGHT, WIDTH};
use threadbalance_sim::{Claim, Effect, SuiteReport, compare, machine, workload};

/// The SVG rendered and encoded as PNG, then decoded again: what a viewer would show.
fn png(svg: &str) -> Pixmap {
    let tree = Tree::from_str(svg, &Options::default()).unwrap();
    let size = tree.size().to_int_size();
    let mut pixmap = Pixmap::new(size.width(), size.height()).unwrap();
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
    let bytes = pixmap.encode_png().unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    Pixmap::decode_png(&bytes).unwrap()
}

/// Pixels of exactly `rgb` in the rectangle x0..x1, y0..y1.
fn count(p: &Pixmap, (x0, y0, x1, y1): (u32, u32, u32, u32), rgb: (u8, u8, u8)) -> usize {
    let mut n = 0;
    for y in y0..y1.min(p.height()) {
        for x in x0..x1.min(p.width()) {
            let c = p.pixel(x, y).unwrap();
            n += usize::from((c.red(), c.green(), c.blue()) == rgb);
        }
    }
    n
}

fn rgb(i: usize) -> (u8, u8, u8) {
    let c = COLORS[i];
    (c.0, c.1, c.2)
}

#[test]
fn plot_comparison_png_has_lines_in_each_panel_and_legends() {
    // 2 sockets, two policies: 2 utilization panels, then migrations and (memory-bound
    // work) remote accesses.
    let m = machine("package:2 numa:1 core:2 pu:1", None).unwrap();
    let w = workload("streamcluster", Some(6), None).unwrap();
    let c = compare(
        &m,
        &w,
        &["none".into(), "tumbler".into()],
        1,
        &Settings::new(m.topo.default_level()),
    )
    .unwrap();
    let svg = c.to_svg();
    assert!(svg.contains("\nremote accesses (%)\n"), "remote panel");
    let p = png(&svg);
    let panels = 4;
    assert_eq!(p.height(), 36 + PANEL_HEIGHT * panels);
    for k in 0..panels {
        let top = 36 + PANEL_HEIGHT * k;
        // One colour per meaning: sockets 0 and 1 in the utilization panels, the two
        // policies (two other colours) in the migration and remote-access panels.
        let colours = if k < 2 { [0, 1] } else { [2, 3] };
        // Plot area: right of the y labels, left of the legend column.
        let area = (70, top + 24, WIDTH - 220, top + PANEL_HEIGHT - 40);
        let drawn = count(&p, area, rgb(colours[0])) + count(&p, area, rgb(colours[1]));
        assert!(drawn > 50, "panel {k}: {drawn} series pixels");
        // The legend: filled markers of both series in the column right of the panel,
        // outside the plot area.
        let legend = (WIDTH - 190, top, WIDTH, top + 110);
        for s in colours {
            let n = count(&p, legend, rgb(s));
            assert!(n >= 100, "panel {k}: legend marker {s}: {n} pixels");
        }
        let other = if k < 2 { [2, 3] } else { [0, 1] };
        for s in other {
            assert_eq!(count(&p, legend, rgb(s)), 0, "panel {k}: colour {s}");
        }
    }
}

#[test]
fn plot_suite_png_has_points_by_verdict_and_a_legend() {
    let e = |paper, sim| vec![Effect::new("speedup, %", Some(paper), sim)];
    let report = SuiteReport {
        seeds: vec![1],
        claims: vec![
            Claim::calibration("row", "Linux", "s".into(), true, ""),
            Claim::paper("a", "p", "s".into(), true, e(10.0, 12.0), "", ""),
            Claim::paper("b", "p", "s".into(), true, e(54.1, 13.1), "", ""),
            Claim::paper("c", "p", "s".into(), false, e(-3.1, 27.7), "wrong way", ""),
        ],
        events: 0,
    };
    let svg = report.to_svg();
    assert!(svg.contains("\n1: a [reproduced; linux]"), "key");
    let p = png(&svg);
    // The legend, a row under the chart (never over the points); the points in the chart.
    let legend = (0, 640, WIDTH, 666);
    let chart = (0, 0, WIDTH, 640);
    // Three verdicts, three colors (reproduced green, direction only orange, not
    // reproduced red), one point each (a filled circle of radius 5: ~80 px).
    for g in [2, 3, 1] {
        let n = count(&p, chart, rgb(g));
        assert!(n >= 40, "verdict {g}: {n} pixels in the chart");
    }
    for g in [2, 3, 1] {
        assert!(count(&p, legend, rgb(g)) >= 40, "legend marker {g}");
    }
}
