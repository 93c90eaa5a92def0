//! A ready-made [`Control`] for a daemon whose loop runs on another thread: reads are
//! answered from the last snapshot the loop published, and changes are handed to the loop,
//! which carries them out between two windows and answers.
//!
//! ```text
//!   control thread                         the daemon's loop
//!   ChannelControl::status/list ◄─ Mutex ─ Inbox::publish(Snapshot)   (each window)
//!   ChannelControl::threads     ◄─ Mutex ─ Inbox::publish_threads(ThreadsView)
//!        (view older than 5 s) ── Threads ──► snapshots kept from now; published each
//!        (no window yet: waits for one)         half display window while watched
//!   ChannelControl::pause(pid) ── Pending ──► Inbox::wait(timeout)    (instead of sleep)
//!        waits ≤ answer_within  ◄─ answer ──  pending.answer(Ok(Done::Paused { .. }))
//! ```
//!
//! The loop waits on [`Inbox::wait`] instead of sleeping until its next window, so a
//! request is carried out at once rather than a window later.
//!
//! The per-thread view (`threads`, what `threadbalance top` shows) reads every managed
//! thread's name and mask, so the loop builds it only while somebody watches: a
//! `threads` request within the last [`WATCHED`] makes the loop publish it every window
//! ([`Inbox::threads_watched`]), and a request that finds the view older than [`FRESH`]
//! (the first one) asks the loop for it and waits. Rates need two snapshots a display
//! window apart ([`threadbalance_model::DisplayWindow`]), so a view without a window yet
//! (`window_ms` 0), or with one shorter than ¾ of the window asked for, while processes
//! are managed is waited on until the loop publishes a full one (at most the window asked
//! for and a second, within the answer's deadline): the first answer has rates, not
//! "0 threads, window 0 ms". A loop that does not answer
//! in time, or has stopped, gives the client an error line and nothing is left waiting.
//!
//! ```
//! use std::time::Duration;
//! use threadbalance_daemon::control::channel::{Command, Snapshot, channel};
//! use threadbalance_daemon::control::{Control, Done};
//! use threadbalance_model::Pid;
//! let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(5));
//! let the_loop = std::thread::spawn(move || {
//!     let pending = inbox.wait(Duration::from_secs(5)).unwrap();
//!     assert_eq!(pending.command, Command::Pause(Pid(4242)));
//!     pending.answer(Ok(Done::Paused { pid: Pid(4242), comm: "ffmpeg".into() }));
//! });
//! assert_eq!(control.pause(Pid(4242)).unwrap().to_string(), "paused 4242 (ffmpeg)");
//! the_loop.join().unwrap();
//! ```

use super::threads::DEFAULT_WINDOW_MS;
use super::threads::ThreadsView;
use super::{Candidate, Control, Done, ProcessEntry, Refusal, Status};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use threadbalance_model::Pid;

/// What `status` and `list` answer, as the loop last published it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// The answer to `status`.
    pub status: Status,
    /// The answer to `list`.
    pub processes: Vec<ProcessEntry>,
    /// The processes a rule almost matched, and why each is not managed (`list --all`).
    pub candidates: Vec<Candidate>,
}

impl Default for Status {
    fn default() -> Self {
        Status {
            daemon_pid: std::process::id().try_into().unwrap_or(0),
            uptime_s: 0,
            config: String::new(),
            observe: false,
            managed_processes: 0,
            groups: 0,
            managed_threads: 0,
            paused_processes: 0,
        }
    }
}

/// A change the loop is asked to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Stop moving the process's threads.
    Pause(Pid),
    /// Manage a paused process again.
    Resume(Pid),
    /// Restore the process's masks and leave it alone.
    Release(Pid),
    /// Re-read the config.
    Reload,
    /// Build and publish the per-thread view now (a client asked, and the last view is
    /// older than [`FRESH`]); answered with an empty line.
    Threads,
}

/// A view published longer ago than this is rebuilt when a client asks for it.
pub const FRESH: Duration = Duration::from_secs(5);
/// How often a `threads` request waiting for its first window looks again.
const THREADS_POLL: Duration = Duration::from_millis(20);
/// After a `threads` request, the loop publishes the view every window for this long.
pub const WATCHED: Duration = Duration::from_secs(10);

/// The per-thread view as last published, and when a client last asked for it.
#[derive(Debug, Default)]
struct Watched {
    view: ThreadsView,
    published: Option<Instant>,
    asked: Option<Instant>,
    /// The display window last asked for, in ms (0: none yet).
    window_ms: u64,
}

/// A command waiting for the loop, with the way back to the client.
#[derive(Debug)]
pub struct Pending {
    /// What is asked.
    pub command: Command,
    reply: SyncSender<Result<Done, Refusal>>,
}

impl Pending {
    /// A command with the receiving end of its answer, as the control thread makes one
    /// (for a loop driven by hand, as in tests).
    pub fn new(command: Command) -> (Pending, Receiver<Result<Done, Refusal>>) {
        let (reply, answer) = mpsc::sync_channel(1);
        (Pending { command, reply }, answer)
    }

    /// Answers the client: what was done, or why nothing was. A client that gave up
    /// waiting is not an error.
    pub fn answer(self, result: Result<Done, Refusal>) {
        let _ = self.reply.send(result);
    }
}

/// The control socket's side: implements [`Control`].
#[derive(Debug)]
pub struct ChannelControl {
    snapshot: Arc<Mutex<Snapshot>>,
    threads: Arc<Mutex<Watched>>,
    commands: Mutex<Sender<Pending>>,
    answer_within: Duration,
}

/// The loop's side: publishes snapshots, receives commands.
#[derive(Debug)]
pub struct Inbox {
    snapshot: Arc<Mutex<Snapshot>>,
    threads: Arc<Mutex<Watched>>,
    commands: Receiver<Pending>,
}

/// A connected pair. `answer_within` is how long a client's change waits for the loop
/// (keep it under the socket's per-client deadline).
pub fn channel(initial: Snapshot, answer_within: Duration) -> (ChannelControl, Inbox) {
    let snapshot = Arc::new(Mutex::new(initial));
    let threads = Arc::new(Mutex::new(Watched::default()));
    let (tx, rx) = mpsc::channel();
    (
        ChannelControl {
            snapshot: Arc::clone(&snapshot),
            threads: Arc::clone(&threads),
            commands: Mutex::new(tx),
            answer_within,
        },
        Inbox {
            snapshot,
            threads,
            commands: rx,
        },
    )
}

/// A lock that survives a panicked holder (the data is plain values, never half-written
/// in a way that matters to a status answer).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Inbox {
    /// Replaces what `status` and `list` answer.
    pub fn publish(&self, snapshot: Snapshot) {
        *lock(&self.snapshot) = snapshot;
    }

    /// Replaces what `threads` answers (once a window: it is the per-thread detail, kept
    /// apart from the status the loop publishes at every turn).
    pub fn publish_threads(&self, view: ThreadsView) {
        let mut w = lock(&self.threads);
        w.view = view;
        w.published = Some(Instant::now());
    }

    /// Whether a client asked for the per-thread view within the last [`WATCHED`]: only
    /// then is it worth building every window.
    pub fn threads_watched(&self) -> bool {
        lock(&self.threads)
            .asked
            .is_some_and(|at| at.elapsed() <= WATCHED)
    }

    /// The display window the last `threads` request asked for, in milliseconds.
    pub fn threads_window_ms(&self) -> u64 {
        match lock(&self.threads).window_ms {
            0 => DEFAULT_WINDOW_MS,
            ms => ms,
        }
    }

    /// The next command if one is waiting.
    pub fn try_next(&self) -> Option<Pending> {
        self.commands.try_recv().ok()
    }

    /// Waits up to `timeout` for a command: the loop's sleep until its next window.
    pub fn wait(&self, timeout: Duration) -> Option<Pending> {
        self.commands.recv_timeout(timeout).ok()
    }
}

impl ChannelControl {
    fn ask(&self, command: Command) -> Result<Done, Refusal> {
        let (pending, answer) = Pending::new(command);
        lock(&self.commands)
            .send(pending)
            .map_err(|_| Refusal::Stopping)?;
        match answer.recv_timeout(self.answer_within) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => Err(Refusal::NoAnswer {
                within_ms: self.answer_within.as_millis(),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(Refusal::Stopping),
        }
    }
}

impl Control for ChannelControl {
    fn status(&self) -> Status {
        lock(&self.snapshot).status.clone()
    }
    fn list(&self) -> Vec<ProcessEntry> {
        lock(&self.snapshot).processes.clone()
    }
    fn pause(&self, pid: Pid) -> Result<Done, Refusal> {
        self.ask(Command::Pause(pid))
    }
    fn resume(&self, pid: Pid) -> Result<Done, Refusal> {
        self.ask(Command::Resume(pid))
    }
    fn release(&self, pid: Pid) -> Result<Done, Refusal> {
        self.ask(Command::Release(pid))
    }
    fn reload(&self) -> Result<Done, Refusal> {
        self.ask(Command::Reload)
    }
    fn candidates(&self) -> Vec<Candidate> {
        lock(&self.snapshot).candidates.clone()
    }
    fn threads(&self, window_ms: u64) -> ThreadsView {
        let asked = Instant::now();
        let stale = {
            let mut w = lock(&self.threads);
            w.asked = Some(asked);
            let before = if w.window_ms == 0 {
                DEFAULT_WINDOW_MS
            } else {
                w.window_ms
            };
            let changed = before != window_ms;
            w.window_ms = window_ms;
            changed || w.published.is_none_or(|at| at.elapsed() > FRESH)
        };
        if stale {
            // Built by the loop between two windows; if it does not answer in time, the
            // client gets the last view there is.
            let _ = self.ask(Command::Threads);
        }
        // No window of about the span yet while something is managed: wait for one (the
        // loop's second refresh, half a window later, has one only half as long).
        let deadline = asked
            + (Duration::from_millis(window_ms) + Duration::from_secs(1)).min(self.answer_within);
        loop {
            let view = lock(&self.threads).view.clone();
            let managed = lock(&self.snapshot).status.managed_processes;
            let measured = view.window_ms > 0 && view.window_ms >= window_ms / 4 * 3;
            if measured || managed == 0 || Instant::now() >= deadline {
                return view;
            }
            std::thread::sleep(THREADS_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The answer as the lines `ctl` shows (a refusal is not comparable: it may hold an
    /// I/O error).
    fn said(r: Result<Done, Refusal>) -> Result<String, String> {
        r.map(|d| d.to_string()).map_err(|e| e.to_string())
    }

    fn entry(pid: i32) -> ProcessEntry {
        ProcessEntry {
            pid,
            comm: "ffmpeg".into(),
            rule: "busy".into(),
            policy: "speed".into(),
            threads: 3,
            paused: false,
            group: 1,
        }
    }

    #[test]
    fn status_and_list_answer_the_last_published_snapshot() {
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(1));
        assert_eq!(control.list(), []);
        let mut s = Snapshot::default();
        s.status.managed_processes = 1;
        s.processes.push(entry(4242));
        inbox.publish(s.clone());
        assert_eq!(control.status(), s.status);
        assert_eq!(control.list(), s.processes);
        // The threads are published apart, and a status publish leaves them alone.
        let view = ThreadsView {
            level: "core".into(),
            window_ms: 1000,
            ..ThreadsView::default()
        };
        inbox.publish_threads(view.clone());
        inbox.publish(s);
        assert_eq!(control.threads(1000), view);
    }

    #[test]
    fn threads_first_request_waits_for_a_window_while_processes_are_managed() {
        // See: issue 40, item 5 ("0 threads, window 0 ms" on the first call).
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(4));
        let mut s = Snapshot::default();
        s.status.managed_processes = 1;
        inbox.publish(s);
        let measured = ThreadsView {
            level: "core".into(),
            window_ms: 500,
            ..ThreadsView::default()
        };
        let later = measured.clone();
        let the_loop = std::thread::spawn(move || {
            let p = inbox.wait(Duration::from_secs(4)).unwrap();
            assert_eq!(p.command, Command::Threads);
            assert_eq!(inbox.threads_window_ms(), 500);
            // The loop has kept its first snapshot: no window yet.
            inbox.publish_threads(ThreadsView::default());
            p.answer(Ok(Done::ThreadsPublished));
            // Half a window later: a window too short to show yet.
            std::thread::sleep(Duration::from_millis(250));
            inbox.publish_threads(ThreadsView {
                window_ms: 250,
                ..ThreadsView::default()
            });
            std::thread::sleep(Duration::from_millis(250));
            inbox.publish_threads(later);
        });
        assert_eq!(control.threads(500), measured);
        the_loop.join().unwrap();
    }

    #[test]
    fn threads_view_is_built_when_asked_and_published_only_while_watched() {
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(10));
        // Nobody asked yet: the loop need not build the view.
        assert!(!inbox.threads_watched());
        let view = ThreadsView {
            level: "core".into(),
            window_ms: 1000,
            ..ThreadsView::default()
        };
        // The first request finds no view: it asks the loop, which builds one at once.
        let built = view.clone();
        let the_loop = std::thread::spawn(move || {
            let p = inbox.wait(Duration::from_secs(10)).unwrap();
            assert_eq!(p.command, Command::Threads);
            inbox.publish_threads(built);
            p.answer(Ok(Done::ThreadsPublished));
            inbox
        });
        assert_eq!(control.threads(1000), view);
        let inbox = the_loop.join().unwrap();
        // Now watched: the loop publishes every window. A fresh view is answered without
        // asking the loop (nobody would answer here: a wait would take the 10 s).
        assert!(inbox.threads_watched());
        let newer = ThreadsView {
            window_ms: 2000,
            ..view
        };
        inbox.publish_threads(newer.clone());
        assert_eq!(control.threads(1000), newer);
        assert!(inbox.try_next().is_none());
    }

    #[test]
    fn each_change_reaches_the_loop_and_its_answer_comes_back() {
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(10));
        let the_loop = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while let Some(p) = inbox.wait(Duration::from_secs(10)) {
                seen.push(p.command);
                let r = match p.command {
                    Command::Release(pid) => Err(Refusal::NotManaged(pid)),
                    Command::Pause(pid) => Ok(Done::Paused {
                        pid,
                        comm: "a".into(),
                    }),
                    Command::Resume(pid) => Ok(Done::Resumed {
                        pid,
                        comm: "a".into(),
                    }),
                    _ => Ok(Done::Reloaded {
                        summary: "s".into(),
                    }),
                };
                p.answer(r);
                if seen.len() == 4 {
                    break;
                }
            }
            seen
        });
        assert_eq!(said(control.pause(Pid(1))), Ok("paused 1 (a)".into()));
        assert_eq!(said(control.resume(Pid(1))), Ok("resumed 1 (a)".into()));
        assert_eq!(
            said(control.release(Pid(7))),
            Err("process 7 is not managed".into())
        );
        assert_eq!(said(control.reload()), Ok("reloaded: s".into()));
        assert_eq!(
            the_loop.join().unwrap(),
            [
                Command::Pause(Pid(1)),
                Command::Resume(Pid(1)),
                Command::Release(Pid(7)),
                Command::Reload
            ]
        );
    }

    #[test]
    fn a_loop_that_does_not_answer_gives_an_error_in_time() {
        let (control, inbox) = channel(Snapshot::default(), Duration::from_millis(50));
        let r = control.reload();
        assert_eq!(
            said(r),
            Err(
                "the daemon did not answer within 50 ms; the request may still be carried out"
                    .into()
            )
        );
        // The request is still there for the loop, which may answer late, harmlessly.
        let late = inbox.try_next().unwrap();
        assert_eq!(late.command, Command::Reload);
        late.answer(Ok(Done::Reloaded {
            summary: "late".into(),
        }));
    }

    #[test]
    fn a_stopped_loop_means_stopping() {
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(1));
        drop(inbox);
        assert_eq!(
            said(control.pause(Pid(3))),
            Err("the daemon is stopping".into())
        );
        // A loop that drops a pending command without answering: same line.
        let (control, inbox) = channel(Snapshot::default(), Duration::from_secs(10));
        let dropper = std::thread::spawn(move || drop(inbox.wait(Duration::from_secs(10))));
        assert_eq!(said(control.reload()), Err("the daemon is stopping".into()));
        dropper.join().unwrap();
    }
}
