//! `--report FILE.svg` end to end: a real run drawn, rasterized to PNG and checked for
//! content; a report path that cannot be written is refused before anything starts.

use crate::support::{bin, run};
use resvg::tiny_skia::{Pixmap, Transform};
use resvg::usvg::{Options, Tree};
use threadbalance_sim::plot::{COLORS, PANEL_HEIGHT, WIDTH};

/// The SVG rendered (no fonts: text is left out), encoded as PNG and decoded again.
fn png(svg: &str) -> Pixmap {
    let tree = Tree::from_str(svg, &Options::default()).unwrap();
    let size = tree.size().to_int_size();
    let mut pixmap = Pixmap::new(size.width(), size.height()).unwrap();
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(&tree, Transform::default(), &mut pixmap.as_mut());
    Pixmap::decode_png(&pixmap.encode_png().unwrap()).unwrap()
}

/// Pixels of series color 0 in the rectangle x0..x1, y0..y1.
fn series_pixels(p: &Pixmap, (x0, y0, x1, y1): (u32, u32, u32, u32)) -> usize {
    let c0 = COLORS[0];
    let mut n = 0;
    for y in y0..y1.min(p.height()) {
        for x in x0..x1.min(p.width()) {
            let c = p.pixel(x, y).unwrap();
            n += usize::from((c.red(), c.green(), c.blue()) == (c0.0, c0.1, c0.2));
        }
    }
    n
}

#[test]
fn run_report_draws_utilization_per_domain_and_moves() {
    let dir = tempfile::tempdir().unwrap();
    let svg_path = dir.path().join("run.svg");
    let exe = bin();
    let out = run(&[
        "run",
        "--policy",
        "tumbler",
        "--level",
        "core",
        "--interval",
        "20",
        "--report",
        svg_path.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "2",
        "--work-ms",
        "300",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    for text in [
        "\ntime (s)\n",
        "\nutilization (%)\n",
        "\nmoves (per s)\n",
        "\ncore 0\n",
    ] {
        assert!(svg.contains(text), "{text:?} missing");
    }
    let p = png(&svg);
    // One panel per core of this machine's allowed CPUs, then moves: at least 2 + 1.
    let panels = (p.height() - 36) / PANEL_HEIGHT;
    assert!(panels >= 3, "{panels} panels");
    // The first domain's panel: a utilization line in the plot area, a legend marker in
    // the upper right corner.
    let area = (70, 36 + 24, WIDTH - 220, 36 + PANEL_HEIGHT - 40);
    let line = series_pixels(&p, area);
    assert!(line > 50, "{line} line pixels");
    let legend = series_pixels(&p, (WIDTH - 220, 36, WIDTH, 36 + 110));
    assert!(legend >= 100, "{legend} legend pixels");
}

#[test]
fn run_report_to_an_unwritable_path_is_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = run(&[
        "run",
        "--report",
        "/nonexistent-dir/run.svg",
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--report"), "{err}");
    assert!(!marker.exists(), "the command ran");
}

// See: issue 40, item 4: `--report x.png` wrote SVG into x.png.
#[test]
fn run_report_other_extension_is_refused_before_the_command_starts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let report = dir.path().join("run.pdf");
    let out = run(&[
        "run",
        "--report",
        report.to_str().unwrap(),
        "--",
        "touch",
        marker.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("must end in .svg or .png"), "{err}");
    assert!(!marker.exists(), "the command ran");
    assert!(!report.exists(), "a file was made");
}

#[test]
fn run_report_png_writes_a_png() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.png");
    let exe = bin();
    let out = run(&[
        "run",
        "--policy",
        "tumbler",
        "--interval",
        "20",
        "--report",
        path.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "workload",
        "spmd",
        "--threads",
        "2",
        "--work-ms",
        "200",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "PNG signature");
    let p = Pixmap::decode_png(&bytes).unwrap();
    assert_eq!(p.width(), WIDTH);
    assert!(series_pixels(&p, (0, 0, WIDTH, p.height())) > 100, "drawn");
}
