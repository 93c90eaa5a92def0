//! What `threadbalance top` draws, as pure functions of a [`Screen`]: no terminal, no
//! clock, no `/proc`. The live loop and `--once` draw through these, and the tests draw
//! into ratatui's `TestBackend` and read the cells back.
//!
//! ```text
//!  threadbalance top · pid 4242 (spmd) · speed at core · window 100 ms          title
//!    PID      TID      COMM             MASK         CPU   UTIL  SPEED  LOCK  MOVES   header
//!  core0    CPUs 0        util  98% [#########-]  1 thread                            a domain
//!    4242     4243     spmd             0              0    98%    98%     –      2   its threads
//!  core1    CPUs 1        util  49% [#####-----]  2 threads
//!    …                                                        (scrolled by ↑ ↓ PgUp PgDn)
//!  q quit  p pause  ↑↓ scroll · 3 threads                                       status
//! ```
//!
//! A domain's line gives how busy its CPUs were over the window (`busy`, from
//! `/proc/stat`, whatever ran there) when it was read, else the summed `util` of the threads
//! that may run only there now (which can pass 100 % when a policy moved threads in during
//! the window). Domains come in index order and each is followed by its threads; threads last seen on a
//! CPU outside the level's domains come under "elsewhere". Colour is used only when the
//! screen allows it (`NO_COLOR` unset); without it, the title and header are reversed and
//! the domain lines bold, so nothing depends on colour.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use threadbalance_daemon::control::threads::{ThreadRow, ThreadsView, counter_cells, percent};

/// Everything one frame shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Screen {
    /// The first line: what is shown and from where.
    pub title: String,
    /// The threads and domains.
    pub view: ThreadsView,
    /// A note for the status line (an error from the daemon, the target that exited).
    pub note: Option<String>,
    /// The display is frozen (`p`); management goes on.
    pub paused: bool,
    /// Body lines scrolled off the top.
    pub scroll: usize,
    /// Whether colours may be used (`NO_COLOR` unset).
    pub color: bool,
}

/// The column header of the thread rows.
pub const HEADER: &str =
    "  PID      TID      COMM             MASK         CPU   UTIL  SPEED  LOCK  MOVES";

/// The columns added when a thread's hardware counters were read (`--counters`, a
/// policy that reads them): "–" for a thread without.
pub const COUNTER_HEADER: &str = "   IPC   MPKI";

/// The header of `view`'s thread rows: [`HEADER`], and [`COUNTER_HEADER`] when a thread
/// has counters.
pub fn header_of(view: &ThreadsView) -> String {
    if view.counted() {
        format!("{HEADER}{COUNTER_HEADER}")
    } else {
        HEADER.to_string()
    }
}

/// Width of a domain's utilization bar, in cells.
const BAR: usize = 10;

/// One body line: a domain or one of its threads.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyLine {
    /// A domain's summary line.
    Domain(String),
    /// A thread row.
    Thread(String),
    /// A line saying there is nothing yet.
    Empty(String),
}

/// A domain's utilization as a bar of [`BAR`] cells (`0.46` → `[#####-----]`: 4.6 cells,
/// rounded).
pub fn bar(util: f64) -> String {
    let full = ((util.clamp(0.0, 1.0) * BAR as f64).round() as usize).min(BAR);
    format!("[{}{}]", "#".repeat(full), "-".repeat(BAR - full))
}

/// A thread's row, aligned under [`header_of`] (`counted`: with the counter columns).
pub fn thread_line(t: &ThreadRow, counted: bool) -> String {
    let comm: String = t.comm.chars().take(16).collect();
    let mask: String = if t.mask.chars().count() > 12 {
        t.mask.chars().take(11).chain(['…']).collect()
    } else {
        t.mask.clone()
    };
    let mut line = format!(
        "  {:<8} {:<8} {:<16} {:<12} {:>3} {:>6} {:>6} {:>5} {:>6}",
        t.pid,
        t.tid,
        comm,
        mask,
        t.cpu,
        percent(t.util),
        percent(t.speed),
        t.lock.map_or("–".to_string(), percent),
        t.moves
    );
    if counted {
        let (ipc, mpki) = counter_cells(t);
        line.push_str(&format!(" {ipc:>5} {mpki:>6}"));
    }
    line
}

/// The body: each domain, then its threads; then those elsewhere.
pub fn body(view: &ThreadsView) -> Vec<BodyLine> {
    let mut out = Vec::new();
    let counted = view.counted();
    for (i, d) in view.domains.iter().enumerate() {
        let plural = if d.threads == 1 { "" } else { "s" };
        // How busy the CPUs were when measured (never above 100 %); else the threads' sum.
        let (label, load) = d.busy.map_or(("util", d.util), |b| ("busy", b));
        out.push(BodyLine::Domain(format!(
            "{:<8} CPUs {:<8} {label} {:>4} {}  {} thread{plural}",
            d.name,
            d.cpus,
            percent(load),
            bar(load),
            d.threads
        )));
        out.extend(
            view.threads_of(Some(i))
                .map(|t| BodyLine::Thread(thread_line(t, counted))),
        );
    }
    let mut elsewhere = view.threads_of(None).peekable();
    if elsewhere.peek().is_some() {
        out.push(BodyLine::Domain(
            "elsewhere (a CPU outside the level's domains)".into(),
        ));
        out.extend(elsewhere.map(|t| BodyLine::Thread(thread_line(t, counted))));
    }
    if view.threads.is_empty() {
        out.push(BodyLine::Empty("no managed threads yet".into()));
    }
    out
}

/// The status line.
pub fn status_line(screen: &Screen) -> String {
    let mut line = String::from("q quit  p pause  ↑↓ PgUp PgDn scroll");
    line.push_str(&format!(" · {} threads", screen.view.threads.len()));
    if screen.paused {
        line.push_str(" · PAUSED (display frozen)");
    }
    if let Some(note) = &screen.note {
        line.push_str(" · ");
        line.push_str(note);
    }
    line
}

/// The most lines the body can be scrolled by with `rows` rows for it.
pub fn max_scroll(screen: &Screen, rows: usize) -> usize {
    body(&screen.view).len().saturating_sub(rows)
}

/// Draws `screen` on the whole frame: title, header, body (scrolled), status line.
pub fn draw(frame: &mut Frame, screen: &Screen) {
    let [title, header, main, status] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(frame.area());
    let bar_style = if screen.color {
        Style::new().fg(Color::Black).bg(Color::Cyan)
    } else {
        Style::new().add_modifier(Modifier::REVERSED)
    };
    frame.render_widget(
        Paragraph::new(screen.title.as_str()).style(bar_style),
        title,
    );
    frame.render_widget(
        Paragraph::new(header_of(&screen.view)).style(Style::new().add_modifier(Modifier::BOLD)),
        header,
    );
    let domain_style = if screen.color {
        Style::new().fg(Color::Yellow).add_modifier(Modifier::BOLD)
    } else {
        Style::new().add_modifier(Modifier::BOLD)
    };
    let lines: Vec<Line> = body(&screen.view)
        .into_iter()
        .skip(screen.scroll.min(max_scroll(screen, main.height as usize)))
        .take(main.height as usize)
        .map(|l| match l {
            BodyLine::Domain(s) => Line::styled(s, domain_style),
            BodyLine::Thread(s) | BodyLine::Empty(s) => Line::raw(s),
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), main);
    frame.render_widget(Paragraph::new(status_line(screen)).style(bar_style), status);
}

/// One frame as plain text, `width` columns wide, tall enough for the whole body, without
/// the status line (what `--once` prints). Trailing blanks are cut from each line.
pub fn frame_text(screen: &Screen, width: u16) -> String {
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    let plain = Screen {
        color: false,
        scroll: 0,
        ..screen.clone()
    };
    // Title, header, body; the status row is drawn and dropped.
    let rows = body(&plain.view).len() + 3;
    let height = u16::try_from(rows).unwrap_or(u16::MAX);
    // The test backend cannot fail (its error type is `Infallible`).
    let Ok(mut terminal) = Terminal::new(TestBackend::new(width, height));
    let Ok(_) = terminal.draw(|f| draw(f, &plain));
    let mut out = String::new();
    for line in buffer_lines(terminal.backend().buffer())
        .iter()
        .take(rows - 1)
    {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The buffer's rows as strings.
pub fn buffer_lines(buffer: &ratatui::buffer::Buffer) -> Vec<String> {
    let width = buffer.area.width.max(1) as usize;
    buffer
        .content
        .chunks(width)
        .map(|row| row.iter().map(|c| c.symbol()).collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use threadbalance_daemon::control::threads::ThreadInput;
    use threadbalance_model::{Level, Topology};

    /// Two cores; a speed-managed spmd of three threads: one alone on core 0, two sharing
    /// core 1, one of them with a measured lock time.
    fn screen() -> Screen {
        let topo = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        let mut a = ThreadInput::example(4242, 4243, 0);
        (a.comm, a.mask, a.util, a.speed, a.moves) = ("spmd".into(), "0".into(), 0.98, 0.98, 2);
        let mut b = ThreadInput::example(4242, 4244, 1);
        (b.comm, b.mask, b.util, b.speed) = ("spmd".into(), "1".into(), 0.5, 0.5);
        let mut c = ThreadInput::example(4242, 4245, 1);
        (c.comm, c.mask, c.util, c.speed) = ("spmd".into(), "1".into(), 0.48, 0.48);
        c.lock = Some(0.125);
        Screen {
            title: "threadbalance top · pid 4242 (spmd) · speed at core".into(),
            view: ThreadsView::build(&topo, Level::Core, 100, vec![a, b, c]),
            ..Screen::default()
        }
    }

    fn draw_lines(screen: &Screen, width: u16, height: u16) -> Vec<String> {
        let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
        t.draw(|f| draw(f, screen)).unwrap();
        buffer_lines(t.backend().buffer())
            .into_iter()
            .map(|l| l.trim_end().to_string())
            .collect()
    }

    #[test]
    fn draw_two_cores_worked_example() {
        let lines = draw_lines(&screen(), 90, 9);
        // Core 0: 0.98 / 1 CPU = 98%, 9.8 cells → 10. Core 1: (0.5 + 0.48) / 1 = 98% too.
        // Thread 4245: lock 0.125 → "12%" (Rust rounds 12.5 to even); the others have no
        // measured lock time: "–".
        assert_eq!(
            lines,
            [
                "threadbalance top · pid 4242 (spmd) · speed at core",
                HEADER,
                "core0    CPUs 0        util  98% [##########]  1 thread",
                "  4242     4243     spmd             0              0    98%    98%     –      2",
                "core1    CPUs 1        util  98% [##########]  2 threads",
                "  4242     4244     spmd             1              1    50%    50%     –      0",
                "  4242     4245     spmd             1              1    48%    48%   12%      0",
                "",
                "q quit  p pause  ↑↓ PgUp PgDn scroll · 3 threads",
            ]
        );
    }

    #[test]
    fn draw_scrolled_body_keeps_title_header_and_status() {
        let mut s = screen();
        s.scroll = 2;
        s.paused = true;
        // 6 rows: title, header, 3 body rows, status. Body has 5 lines: at most 2 scrolled.
        let lines = draw_lines(&s, 90, 6);
        assert_eq!(lines[1], HEADER);
        assert!(lines[2].starts_with("core1 "), "{lines:?}");
        assert!(lines[4].contains("4245"), "{lines:?}");
        assert!(
            lines[5].ends_with("3 threads · PAUSED (display frozen)"),
            "{lines:?}"
        );
        // Scrolling past the end stops at the last full page.
        s.scroll = 99;
        assert_eq!(draw_lines(&s, 90, 6), lines);
        assert_eq!(max_scroll(&s, 3), 2);
    }

    #[test]
    fn draw_without_colour_uses_no_colour_and_with_colour_does() {
        let mut s = screen();
        let colours = |s: &Screen| {
            let mut t = Terminal::new(TestBackend::new(90, 9)).unwrap();
            t.draw(|f| draw(f, s)).unwrap();
            t.backend()
                .buffer()
                .content
                .iter()
                .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
                .count()
        };
        assert_eq!(colours(&s), 0);
        s.color = true;
        assert!(colours(&s) > 0);
    }

    #[test]
    fn body_empty_view_says_so_and_elsewhere_groups_unknown_cpus() {
        let empty = ThreadsView::default();
        assert_eq!(
            body(&empty),
            [BodyLine::Empty("no managed threads yet".into())]
        );
        let topo = Topology::synthetic("package:1 core:1 pu:1").unwrap();
        let v = ThreadsView::build(&topo, Level::Core, 1, vec![ThreadInput::example(1, 2, 7)]);
        let b = body(&v);
        assert_eq!(b.len(), 3);
        assert!(matches!(&b[1], BodyLine::Domain(s) if s.starts_with("elsewhere")));
    }

    #[test]
    fn bar_rounds_to_cells() {
        // 0.46 × 10 = 4.6 → 5 cells; over 1 is full; under 0 empty.
        assert_eq!(bar(0.46), "[#####-----]");
        assert_eq!(bar(1.7), "[##########]");
        assert_eq!(bar(-0.1), "[----------]");
    }

    #[test]
    fn thread_line_long_names_and_masks_are_cut() {
        let mut t = ThreadsView::build(
            &Topology::synthetic("package:1 core:1 pu:1").unwrap(),
            Level::Core,
            1,
            vec![ThreadInput::example(1, 2, 0)],
        )
        .threads[0]
            .clone();
        t.comm = "a-very-long-thread-name".into();
        t.mask = "0,2,4,6,8,10,12".into();
        let line = thread_line(&t, false);
        // 16 characters of the name, 11 of the mask and an ellipsis.
        assert!(line.contains(" a-very-long-thre 0,2,4,6,8,1… "), "{line}");
        assert_eq!(line.chars().count(), HEADER.chars().count());
    }

    #[test]
    fn counter_columns_appear_when_a_thread_has_counters_with_a_dash_for_the_others() {
        let topo = Topology::synthetic("package:1 core:2 pu:1").unwrap();
        let mut a = ThreadInput::example(1, 2, 0);
        (a.ipc, a.mpki) = (Some(1.456), Some(12.34));
        let b = ThreadInput::example(1, 3, 1);
        let view = ThreadsView::build(&topo, Level::Core, 1000, vec![a, b.clone()]);
        assert_eq!(header_of(&view), format!("{HEADER}   IPC   MPKI"));
        let lines: Vec<String> = body(&view)
            .into_iter()
            .filter_map(|l| match l {
                BodyLine::Thread(s) => Some(s),
                _ => None,
            })
            .collect();
        assert!(lines[0].ends_with("  1.46   12.3"), "{lines:?}");
        assert!(lines[1].ends_with("     –      –"), "{lines:?}");
        for l in &lines {
            assert_eq!(l.chars().count(), header_of(&view).chars().count(), "{l}");
        }
        // No thread counted: the columns are not shown.
        let plain = ThreadsView::build(&topo, Level::Core, 1000, vec![b]);
        assert_eq!(header_of(&plain), HEADER);
        // `ctl threads` has the same columns.
        let text = view.to_text();
        assert!(text.contains("MOVES   IPC   MPKI\n"), "{text}");
        assert!(text.contains("  1.46   12.3\n"), "{text}");
    }

    #[test]
    fn frame_text_is_the_frame_without_status_or_trailing_blanks() {
        let text = frame_text(&screen(), 100);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 7);
        assert_eq!(
            lines[0],
            "threadbalance top · pid 4242 (spmd) · speed at core"
        );
        assert_eq!(lines[1], HEADER);
        assert!(lines[6].ends_with("12%      0"));
        assert!(!text.contains("q quit"));
    }
}
