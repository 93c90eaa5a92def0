//! `threadbalance top`: a live terminal view of managed threads, grouped by where they may
//! run (the domain of the level in use that holds their mask, or their mask when it spans
//! several), with each thread's utilization, speed, lock time and moves, and each group's
//! utilization.
//!
//! The rates are over a display window of about a second (`--window-ms`), whatever the
//! policy's tick: `speed` ticks every few milliseconds, and a thread's rate over one tick
//! reads 98 % in one frame and 0 % in the next. Both sources keep the cumulative samples
//! of each refresh and show the rates between the one about a window ago and now
//! ([`threadbalance_model::DisplayWindow`]).
//!
//! Two sources feed the same view ([`view::Screen`] over a
//! [`ThreadsView`]):
//!
//! ```text
//!  threadbalance top [--socket PATH]       every second: `threads` (window_ms) over the
//!                                          daemon's control socket ─► ThreadsView ─► draw
//!  threadbalance top --pid PID [settings]  manages PID itself with attach's loop
//!                                          (threadbalance_manage + LinuxAdapter); every half
//!                                          window (at most twice a second): the tick's
//!                                          snapshot kept ─► display window + moves ─► draw;
//!                                          q, SIGTERM, SIGINT, or PID's exit ─► restore every
//!                                          mask it changed ─► leave the screen ─► one line
//! ```
//!
//! Keys: `q` (or Esc, Ctrl-C) quits, `p` freezes the display (management goes on), ↑ ↓
//! PgUp PgDn Home End scroll. Colours are left out when `NO_COLOR` is set (and not empty).
//!
//! Without a terminal on stdin and stdout, `top` refuses with one line and exit status 2,
//! having changed nothing; `--once` is the mode for scripts: it asks the daemon once and
//! prints one plain-text frame (no terminal needed, no colour, exit 0; 1 when the daemon
//! cannot be reached).

pub mod gather;
mod own;
pub mod view;

use crate::input_error;
use crate::settings::SettingsArgs;
use anyhow::{Context, Result};
use clap::Args;
use crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use std::io::{IsTerminal, Stdout};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use threadbalance_daemon::config::DEFAULT_CONTROL_SOCKET;
use threadbalance_daemon::control::threads::{DEFAULT_WINDOW_MS, ThreadsView};
use threadbalance_daemon::control::{Reply, Request};
use view::Screen;

/// Options of `threadbalance top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Manage this process itself (as `attach` does) and show it, instead of showing what
    /// the daemon manages; every mask changed is restored on exit.
    #[arg(long, conflicts_with_all = ["socket", "once"])]
    pub pid: Option<i32>,
    /// The daemon's control socket [default: /run/threadbalance/control.sock].
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Print one plain-text frame of what the daemon manages and exit (for scripts; needs
    /// no terminal).
    #[arg(long)]
    pub once: bool,
    /// With `--pid`: policy, level, interval, CPU list, dry run, seed, as in `attach`.
    #[command(flatten)]
    pub settings: SettingsArgs,
    /// The window the rates are over, in milliseconds (1-60000), whatever the policy's
    /// tick.
    #[arg(long, value_name = "MS", default_value_t = DEFAULT_WINDOW_MS)]
    pub window_ms: u64,
    /// With `--pid`: directory of journals and locks (as in `attach`).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// With `--pid`: read the threads' hardware counters and show their IPC and MPKI (as
    /// in `attach`; refused, exit 2, on a machine without them).
    #[arg(long, requires = "pid")]
    pub counters: bool,
}

/// How often the daemon is asked, and the fastest the display follows a managed process.
const REFRESH: Duration = Duration::from_millis(1000);
/// The longest keys wait to be read.
const KEY_POLL: Duration = Duration::from_millis(100);

/// The most terminal events read in one turn of the loop. A terminal that was hung up (its
/// tmux session or ssh connection gone) reads as ready forever; without a bound the loop
/// never came back to see the SIGHUP, a SIGTERM or the target's exit, and spun a CPU.
const EVENTS_PER_CALL: usize = 64;
/// How long one request to the daemon may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);

/// `threadbalance top`.
pub fn run(args: &TopArgs) -> Result<u8> {
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    if args.pid.is_none() && settings_given(&args.settings) {
        return Err(input_error(
            "--policy, --level, --interval, --cpus and --dry-run need --pid (the daemon's \
             rules choose its settings)",
        ));
    }
    if args.pid.is_none() && args.state_dir.is_some() {
        return Err(input_error("--state-dir needs --pid"));
    }
    crate::ctl::window(args.window_ms)?;
    let terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.once && !terminal {
        return Err(input_error(
            "top draws on a terminal, and stdin or stdout is not one; \
             `threadbalance top --once` prints one plain-text frame from the daemon",
        ));
    }
    match args.pid {
        Some(pid) => own::run(args, pid, color),
        None => watch_daemon(args, color),
    }
}

/// Whether any setting that only `--pid` uses was given.
fn settings_given(s: &SettingsArgs) -> bool {
    !s.policy.is_empty()
        || s.level.is_some()
        || s.interval.is_some()
        || s.cpus.is_some()
        || s.dry_run
}

/// Why the daemon's threads could not be had.
#[derive(Debug, thiserror::Error)]
enum AskError {
    /// The socket could not be reached, or its answer read.
    #[error(transparent)]
    Socket(#[from] threadbalance_daemon::control::socket::ClientError),
    /// The daemon answered with an error, in its words.
    #[error("{0}")]
    Daemon(String),
    /// The daemon answered something else.
    #[error("unexpected answer: {0:?}")]
    Unexpected(Box<Reply>),
}

/// Asks the daemon at `path` for its threads, with rates over `window_ms`.
fn ask(path: &std::path::Path, window_ms: u64) -> Result<ThreadsView, AskError> {
    let response = threadbalance_daemon::control::socket::request(
        path,
        &Request::Threads { window_ms },
        ASK_TIMEOUT,
    )?;
    match response.reply {
        Reply::Threads(view) => Ok(view),
        Reply::Error { message } => Err(AskError::Daemon(message)),
        other => Err(AskError::Unexpected(Box::new(other))),
    }
}

/// The title of a view of the daemon.
fn daemon_title(path: &std::path::Path, view: &ThreadsView) -> String {
    format!(
        "threadbalance top · daemon {} · level {} · window {} ms",
        path.display(),
        if view.level.is_empty() {
            "?"
        } else {
            &view.level
        },
        view.window_ms
    )
}

/// Shows what the daemon manages, asking it every [`REFRESH`].
fn watch_daemon(args: &TopArgs, color: bool) -> Result<u8> {
    let path = args
        .socket
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONTROL_SOCKET));
    let first = ask(&path, args.window_ms).context("top")?;
    let mut screen = Screen {
        title: daemon_title(&path, &first),
        view: first,
        color,
        ..Screen::default()
    };
    if args.once {
        out!("{}", view::frame_text(&screen, 100));
        return Ok(0);
    }
    threadbalance_linux::signal::catch_fatal_signals().context("installing signal handlers")?;
    let mut ui = Ui::enter(std::mem::take(&mut screen))?;
    let mut next = Instant::now() + REFRESH;
    ui.draw();
    while !ui.quit && threadbalance_linux::signal::take_signal().is_none() {
        if Instant::now() >= next {
            if !ui.screen.paused {
                match ask(&path, args.window_ms) {
                    Ok(v) => {
                        ui.screen.title = daemon_title(&path, &v);
                        ui.screen.view = v;
                        ui.screen.note = None;
                    }
                    Err(e) => ui.screen.note = Some(format!("daemon: {e}")),
                }
            }
            next = Instant::now() + REFRESH;
            ui.draw();
        }
        ui.keys(next.saturating_duration_since(Instant::now()).min(KEY_POLL));
    }
    Ok(0)
}

/// What a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave (restoring first when managing).
    Quit,
    /// Something on the screen changed: draw again.
    Redraw,
    /// Nothing.
    Nothing,
}

/// Applies `key` to `screen`, whose body has `rows` rows on the terminal. Pure.
pub fn on_key(screen: &mut Screen, key: KeyEvent, rows: usize) -> Action {
    if key.kind == KeyEventKind::Release {
        return Action::Nothing;
    }
    let page = rows.max(1);
    let last = view::max_scroll(screen, rows);
    let scroll = |s: &mut Screen, to: usize| {
        s.scroll = to.min(last);
        Action::Redraw
    };
    match key.code {
        KeyCode::Char('q' | 'Q') | KeyCode::Esc => Action::Quit,
        KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => Action::Quit,
        KeyCode::Char('p' | 'P') => {
            screen.paused = !screen.paused;
            Action::Redraw
        }
        KeyCode::Up => scroll(screen, screen.scroll.min(last).saturating_sub(1)),
        KeyCode::Down => scroll(screen, screen.scroll + 1),
        KeyCode::PageUp => scroll(screen, screen.scroll.min(last).saturating_sub(page)),
        KeyCode::PageDown => scroll(screen, screen.scroll + page),
        KeyCode::Home => scroll(screen, 0),
        KeyCode::End => scroll(screen, last),
        _ => Action::Nothing,
    }
}

/// The terminal in raw mode on the alternate screen, and what it shows. Dropping it puts
/// the terminal back as it was.
pub struct Ui {
    term: Terminal<CrosstermBackend<Stdout>>,
    /// What is shown.
    pub screen: Screen,
    /// A quit key was pressed.
    pub quit: bool,
}

impl Ui {
    /// Takes the terminal over.
    pub fn enter(screen: Screen) -> Result<Ui> {
        use crossterm::{cursor, execute, terminal};
        terminal::enable_raw_mode().context("putting the terminal in raw mode")?;
        let mut out = std::io::stdout();
        if let Err(e) = execute!(out, terminal::EnterAlternateScreen, cursor::Hide) {
            let _ = terminal::disable_raw_mode();
            return Err(e).context("entering the alternate screen");
        }
        let term = match Terminal::new(CrosstermBackend::new(out)) {
            Ok(t) => t,
            Err(e) => {
                leave();
                return Err(e).context("opening the terminal");
            }
        };
        Ok(Ui {
            term,
            screen,
            quit: false,
        })
    }

    /// Draws the screen (a terminal that cannot be drawn on is left as it is).
    pub fn draw(&mut self) {
        let screen = &self.screen;
        let _ = self.term.draw(|f| view::draw(f, screen));
    }

    /// Rows the body has on the terminal (title, header and status take three).
    fn body_rows(&self) -> usize {
        self.term
            .size()
            .map_or(0, |s| usize::from(s.height).saturating_sub(3))
    }

    /// Reads the keys pressed within `timeout` (at least one wait), acting on each, at
    /// most [`EVENTS_PER_CALL`] of them.
    pub fn keys(&mut self, timeout: Duration) {
        if hung_up() {
            // Nobody can see the screen or press `q` any more: stop, as on SIGHUP.
            self.quit = true;
            return;
        }
        let mut wait = timeout;
        for _ in 0..EVENTS_PER_CALL {
            let Ok(true) = event::poll(wait) else { return };
            wait = Duration::ZERO;
            let Ok(ev) = event::read() else { break };
            let action = match ev {
                Event::Key(key) => {
                    let rows = self.body_rows();
                    on_key(&mut self.screen, key, rows)
                }
                Event::Resize(..) => Action::Redraw,
                _ => Action::Nothing,
            };
            match action {
                Action::Quit => {
                    self.quit = true;
                    return;
                }
                Action::Redraw => self.draw(),
                Action::Nothing => {}
            }
        }
    }
}

/// Whether the terminal on stdin was hung up (its tmux session or ssh connection gone).
/// crossterm's `poll` then reads end-of-file over and over without returning, so this is
/// asked first, with a `poll` of our own that does not wait.
fn hung_up() -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0].revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL)
        })
}

/// Puts the terminal back: cursor shown, main screen, cooked mode.
fn leave() {
    use crossterm::{cursor, execute, terminal};
    let _ = execute!(
        std::io::stdout(),
        cursor::Show,
        terminal::LeaveAlternateScreen
    );
    let _ = terminal::disable_raw_mode();
}

impl Drop for Ui {
    fn drop(&mut self) {
        leave();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use threadbalance_daemon::control::threads::ThreadInput;
    use threadbalance_model::{Level, Topology};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    /// Eight cores with one thread each: a body of 16 lines.
    fn screen() -> Screen {
        let topo = Topology::synthetic("package:1 core:8 pu:1").unwrap();
        let threads = (0..8).map(|i| ThreadInput::example(1, 10 + i, i as u32));
        Screen {
            view: ThreadsView::build(&topo, Level::Core, 1, threads),
            ..Screen::default()
        }
    }

    #[test]
    fn on_key_quit_keys_quit() {
        let mut s = screen();
        for k in [key(KeyCode::Char('q')), key(KeyCode::Esc)] {
            assert_eq!(on_key(&mut s, k, 5), Action::Quit);
        }
        let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
        assert_eq!(on_key(&mut s, ctrl_c, 5), Action::Quit);
        assert_eq!(on_key(&mut s, key(KeyCode::Char('c')), 5), Action::Nothing);
    }

    #[test]
    fn on_key_scrolling_stays_within_the_body() {
        // 16 body lines on 5 rows: the last page starts at line 11.
        let mut s = screen();
        assert_eq!(on_key(&mut s, key(KeyCode::Up), 5), Action::Redraw);
        assert_eq!(s.scroll, 0);
        on_key(&mut s, key(KeyCode::Down), 5);
        on_key(&mut s, key(KeyCode::PageDown), 5);
        assert_eq!(s.scroll, 6);
        on_key(&mut s, key(KeyCode::PageDown), 5);
        assert_eq!(s.scroll, 11);
        on_key(&mut s, key(KeyCode::Down), 5);
        assert_eq!(s.scroll, 11);
        on_key(&mut s, key(KeyCode::PageUp), 5);
        assert_eq!(s.scroll, 6);
        on_key(&mut s, key(KeyCode::Home), 5);
        assert_eq!(s.scroll, 0);
        on_key(&mut s, key(KeyCode::End), 5);
        assert_eq!(s.scroll, 11);
    }

    #[test]
    fn on_key_p_toggles_the_frozen_display() {
        let mut s = screen();
        on_key(&mut s, key(KeyCode::Char('p')), 5);
        assert!(s.paused);
        on_key(&mut s, key(KeyCode::Char('p')), 5);
        assert!(!s.paused);
    }

    #[test]
    fn settings_given_only_for_settings_that_need_pid() {
        assert!(!settings_given(&SettingsArgs::default()));
        let s = SettingsArgs {
            dry_run: true,
            ..SettingsArgs::default()
        };
        assert!(settings_given(&s));
    }
}
