//! The daemon's loop driven by a host made of plain values: a clock that moves only when
//! the loop waits or sleeps, processes that use a set share of a CPU per thread, signals
//! and `ctl` commands at set times, and a record of every process claimed, opened,
//! released or left placed.

use super::managed::{ProcessHost, Restored};
use super::*;
use crate::control::channel::Command;
use crate::control::{Done, Refusal};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::rc::Rc;
use std::sync::mpsc::Receiver;
use threadbalance_manage::joined::Member;
use threadbalance_model::{ApplyReport, Plan, Snapshot as Sample, Tid};
use threadbalance_policy::Host;

/// What the host saw happen.
#[derive(Debug, Default)]
struct Record {
    /// The clock, shared with every process handle.
    now: Nanos,
    /// Pids claimed, in order.
    claimed: Vec<Pid>,
    /// Pids opened, with whether a journal was asked for.
    opened: Vec<(Pid, bool)>,
    /// Pids whose masks were handed back, in order.
    released: Vec<Pid>,
    /// Pids whose placement was left (`--oneshot`).
    kept: Vec<Pid>,
    /// The last snapshot published for `ctl status` and `ctl list`.
    published: Option<Snapshot>,
}

/// One process of the plain-value machine: `threads` threads each using `busy` of a CPU.
#[derive(Debug, Clone)]
struct Proc {
    comm: String,
    start: u64,
    threads: u32,
    busy: f64,
    /// CPU time of each thread so far.
    used: Nanos,
}

impl Proc {
    fn new(comm: &str, threads: u32, busy: f64) -> Proc {
        Proc {
            comm: comm.into(),
            start: 1,
            threads,
            busy,
            used: Nanos::ZERO,
        }
    }
}

/// The plain-value machine.
struct Plain {
    record: Rc<RefCell<Record>>,
    procs: BTreeMap<Pid, Proc>,
    /// Processes the permission check refuses, with why.
    not_ours: BTreeMap<Pid, String>,
    /// Signals, each at its time.
    signals: VecDeque<(Nanos, Signal)>,
    /// `ctl` commands, each at its time.
    commands: VecDeque<(Nanos, Pending)>,
    /// The text the next reload reads.
    reload_text: Option<String>,
    /// The reload under way (its result is there at once).
    reloading: Option<Result<Config, ReloadError>>,
    /// The cgroup cpuset of each process that has one.
    cpusets: BTreeMap<Pid, CpuSet>,
    /// `list_processes` panics from this time on.
    panic_at: Option<Nanos>,
    machine: Topology,
}

impl Plain {
    fn new(procs: &[(i32, Proc)]) -> Plain {
        Plain {
            record: Rc::default(),
            procs: procs.iter().map(|(p, pr)| (Pid(*p), pr.clone())).collect(),
            not_ours: BTreeMap::new(),
            cpusets: BTreeMap::new(),
            signals: VecDeque::new(),
            commands: VecDeque::new(),
            reload_text: None,
            reloading: None,
            panic_at: None,
            machine: threadbalance_model::testutil::topo(1, 1, 4, 1),
        }
    }

    fn now(&self) -> Nanos {
        self.record.borrow().now
    }

    /// Moves the clock on by `span`, the processes using their CPU meanwhile.
    fn advance(&mut self, span: Nanos) {
        for p in self.procs.values_mut() {
            p.used += Nanos((span.0 as f64 * p.busy) as u64);
        }
        self.record.borrow_mut().now = self.now() + span;
    }

    /// A `ctl` command at `at`; its answer arrives on the receiver.
    fn ctl(&mut self, at: Nanos, command: Command) -> Receiver<Result<Done, Refusal>> {
        let (pending, answer) = Pending::new(command);
        self.commands.push_back((at, pending));
        answer
    }
}

/// A process handle of the plain-value machine.
struct PlainProcess {
    pid: Pid,
    record: Rc<RefCell<Record>>,
}

/// The plain-value host's failure.
#[derive(Debug, thiserror::Error)]
#[error("plain failure")]
struct PlainError;

/// How many processes were released together, and how many of them had a mask that could
/// not be put back (none here).
#[derive(Debug, Default, PartialEq)]
struct Count(u64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} released", self.0)
    }
}

impl Restored for Count {
    fn failures(&self) -> u64 {
        0
    }
    fn kept(&self) -> Vec<String> {
        Vec::new()
    }
    fn add(&mut self, other: Count) {
        self.0 += other.0;
    }
}

impl Host for PlainProcess {
    type Error = PlainError;
    fn now(&self) -> Nanos {
        self.record.borrow().now
    }
    fn sample(&mut self, into: &mut Sample) -> Result<(), PlainError> {
        into.at = self.now();
        into.threads.clear();
        Ok(())
    }
    fn apply(&mut self, _plan: &Plan) -> ApplyReport {
        ApplyReport::default()
    }
}

impl Member for PlainProcess {
    fn pid(&self) -> Pid {
        self.pid
    }
    fn exited(&mut self) -> bool {
        false
    }
}

impl ProcessHost for PlainProcess {
    type Failure = PlainError;
    type Restored = Count;
    fn mask_of(&self, _tid: Tid) -> Option<CpuSet> {
        None
    }
    fn thread_masks(&self) -> Vec<CpuSet> {
        Vec::new()
    }
    fn release(self) -> Count {
        self.record.borrow_mut().released.push(self.pid);
        Count(1)
    }
    fn keep_placement(self) {
        self.record.borrow_mut().kept.push(self.pid);
    }
}

impl DaemonHost for Plain {
    type Process = PlainProcess;
    type Lock = ();
    type Error = PlainError;

    fn now(&self) -> Nanos {
        Plain::now(self)
    }
    fn sleep(&mut self, span: Nanos) {
        self.advance(span);
    }
    fn take_signal(&mut self) -> Option<Signal> {
        match self.signals.front() {
            Some((at, _)) if *at <= self.now() => self.signals.pop_front().map(|(_, s)| s),
            _ => None,
        }
    }
    fn wait(&mut self, timeout: Nanos) -> Option<Pending> {
        let until = self.now() + timeout;
        match self.commands.front() {
            Some((at, _)) if *at <= until => {
                let at = *at;
                self.advance(at.saturating_sub(self.now()));
                self.commands.pop_front().map(|(_, p)| p)
            }
            _ => {
                self.advance(timeout);
                None
            }
        }
    }
    fn publish(&mut self, snapshot: Snapshot) {
        self.record.borrow_mut().published = Some(snapshot);
    }
    fn threads_watched(&self) -> bool {
        false
    }
    fn threads_window_ms(&self) -> u64 {
        1000
    }
    fn publish_threads(&mut self, _view: ThreadsView) {}
    fn threads_view(&self, _: &Topology, _: &[(Window, MoveCounts)]) -> ThreadsView {
        ThreadsView::default()
    }
    fn cpu_busy(&self) -> Option<(Nanos, Vec<(CpuId, Nanos)>)> {
        None
    }
    fn list_processes(&mut self) -> Result<Vec<(Pid, String)>, ReadError> {
        if self.panic_at.is_some_and(|at| self.now() >= at) {
            panic!("listing blew up");
        }
        Ok(self
            .procs
            .iter()
            .map(|(pid, p)| (*pid, p.comm.clone()))
            .collect())
    }
    fn read_process(&mut self, pid: Pid) -> Result<Option<ProcessReading>, ReadError> {
        Ok(self.procs.get(&pid).map(|p| ProcessReading {
            pid,
            start_time: p.start,
            comm: p.comm.clone(),
            cmdline: p.comm.clone(),
            cgroup: None,
            cpuset_v1: None,
            uid: 1000,
            kernel_thread: false,
            cpu_time: Nanos(p.used.0 * u64::from(p.threads)),
            threads: (0..p.threads)
                .map(|t| (Tid(pid.0 + t as i32), p.used))
                .collect(),
        }))
    }
    fn read_pid_files(&mut self, _files: &[std::path::PathBuf]) -> PidFiles {
        PidFiles::default()
    }
    fn competitors(&mut self, _comms: &[(Pid, String)]) -> Result<Vec<Competitor>, ReadError> {
        Ok(Vec::new())
    }
    fn cpuset_of(&mut self, reading: &ProcessReading) -> Option<CpuSet> {
        self.cpusets.get(&reading.pid).cloned()
    }
    fn own_pid(&self) -> Pid {
        Pid(999)
    }
    fn own_cpu_seconds(&self) -> Option<f64> {
        None
    }
    fn usable_cpus(&mut self, _config: &Config) -> Result<Usable, PlainError> {
        Ok(Usable {
            cpus: self.machine.online().clone(),
            machine: self.machine.clone(),
        })
    }
    fn claim(&mut self, pid: Pid) -> Result<Claimed<()>, Refused<PlainError>> {
        self.record.borrow_mut().claimed.push(pid);
        if let Some(why) = self.not_ours.get(&pid) {
            return Err(Refused::NotOurs(NotOurs::Refused(why.clone())));
        }
        let p = self
            .procs
            .get(&pid)
            .ok_or(Refused::NotOurs(NotOurs::Exited))?;
        Ok(Claimed {
            start: p.start,
            program: self.machine.online().clone(),
            lock: (),
        })
    }
    fn open(&mut self, _lock: (), how: Open<'_>) -> Result<PlainProcess, TakeOnError<PlainError>> {
        self.record.borrow_mut().opened.push((how.pid, how.journal));
        Ok(PlainProcess {
            pid: how.pid,
            record: Rc::clone(&self.record),
        })
    }
    fn start_reload(&mut self, old: &Config) -> Result<(), ReloadError> {
        let text = self.reload_text.take().ok_or(ReloadError::Lost)?;
        self.reloading = Some(Config::parse(&old.file, &text).map_err(ReloadError::from));
        Ok(())
    }
    fn reload_done(&mut self) -> Option<Result<Config, ReloadError>> {
        self.reloading.take()
    }
}

/// Seconds on the plain clock.
fn secs(s: u64) -> Nanos {
    Nanos::from_secs(s)
}

/// A daemon over `host` with the config `text` (a 1 s window).
fn daemon(host: Plain, text: &str) -> Daemon<Plain> {
    let config = Config::parse("t.toml", text).unwrap();
    let usable = Usable {
        cpus: host.machine.online().clone(),
        machine: host.machine.clone(),
    };
    Daemon::new(
        host,
        Start {
            config,
            observe: false,
            usable,
            users: Users::default(),
            metrics: Arc::new(Metrics::new()),
        },
    )
}

/// Encoders by name; everything busy at half a CPU or more per thread.
const RULES: &str = r#"
[[rule]]
name = "encoders"
comm = "^ffmpeg$"
policy = "speed"

[[rule]]
name = "busy"
min_cpu_percent = 150
policy = "tumbler"
"#;

fn record(d: &Daemon<Plain>) -> std::cell::Ref<'_, Record> {
    d.host().record.borrow()
}

#[test]
fn run_takes_on_what_the_rules_match_and_hands_everything_back_at_the_stop_signal() {
    let mut host = Plain::new(&[
        (100, Proc::new("ffmpeg", 4, 0.9)),
        (200, Proc::new("bash", 1, 0.0)),
        // 2 threads at 90 %: 180 % of a CPU, over the `busy` rule's 150.
        (300, Proc::new("make", 2, 0.9)),
    ]);
    host.signals.push_back((secs(5), Signal::Stop(15)));
    let mut d = daemon(host, RULES);
    let (released, stopped) = d.run();
    assert_eq!(stopped.unwrap(), 15);
    let r = record(&d);
    // ffmpeg by name at the first window; make only once a window measured its CPU use.
    assert_eq!(r.claimed, [Pid(100), Pid(300)]);
    assert_eq!(r.opened, [(Pid(100), true), (Pid(300), true)]);
    // Both handed back at the stop, nothing else; the loop manages none now.
    assert_eq!(r.released, [Pid(100), Pid(300)]);
    assert_eq!(released, Count(2));
    assert_eq!(d.managed().count(), 0);
    let list = &r.published.as_ref().unwrap().processes;
    let rules: Vec<(i32, &str, &str)> = list
        .iter()
        .map(|p| (p.pid, p.rule.as_str(), p.policy.as_str()))
        .collect();
    assert_eq!(
        rules,
        [(100, "encoders", "speed"), (300, "busy", "tumbler")]
    );
}

#[test]
fn run_panicking_loop_still_hands_every_process_back() {
    let mut host = Plain::new(&[(100, Proc::new("ffmpeg", 2, 0.5))]);
    host.panic_at = Some(secs(3));
    let mut d = daemon(host, RULES);
    let (released, stopped) = d.run();
    assert_eq!(stopped.unwrap_err().0, "listing blew up");
    assert_eq!(released, Count(1));
    assert_eq!(record(&d).released, [Pid(100)]);
}

#[test]
fn window_process_that_stops_matching_is_released_on_the_third_window_without_a_rule() {
    let mut host = Plain::new(&[(300, Proc::new("make", 2, 0.9))]);
    host.signals.push_back((secs(20), Signal::Stop(2)));
    let mut d = daemon(host, RULES);
    // Windows at 0, 1, 2 … s: taken on at 1 s (the first window that measured it).
    for _ in 0..3 {
        d.window();
        d.host_mut().advance(secs(1));
    }
    assert_eq!(record(&d).opened, [(Pid(300), true)]);
    // Idle from now: windows 3 and 4 keep it (misses 1, 2), window 5 lets it go.
    d.host_mut().procs.get_mut(&Pid(300)).unwrap().busy = 0.0;
    for expect_released in [false, false, true] {
        d.host_mut().advance(secs(1));
        d.window();
        assert_eq!(!record(&d).released.is_empty(), expect_released);
    }
    assert_eq!(d.managed().count(), 0);
}

#[test]
fn window_refused_process_is_claimed_once_and_the_daemon_itself_never() {
    let mut host = Plain::new(&[
        (100, Proc::new("ffmpeg", 2, 0.5)),
        // The daemon's own pid, matched by name: hands-off all the same.
        (999, Proc::new("ffmpeg", 2, 0.5)),
    ]);
    host.not_ours
        .insert(Pid(100), "already managed by another threadbalance".into());
    let mut d = daemon(host, RULES);
    for _ in 0..4 {
        d.window();
        d.host_mut().advance(secs(1));
    }
    let r = record(&d);
    assert_eq!(r.claimed, [Pid(100)]);
    assert!(r.opened.is_empty());
}

#[test]
fn window_near_miss_is_a_candidate_with_the_numbers() {
    // 2 threads at 50 %: 100 % of a CPU, under the `busy` rule's 150.
    let host = Plain::new(&[(300, Proc::new("make", 2, 0.5))]);
    let mut d = daemon(host, RULES);
    d.window();
    d.host_mut().advance(secs(1));
    d.window();
    d.publish();
    let r = record(&d);
    let candidates = &r.published.as_ref().unwrap().candidates;
    assert_eq!(candidates.len(), 1, "{candidates:?}");
    assert_eq!(
        (candidates[0].pid, candidates[0].rule.as_str()),
        (300, "busy")
    );
    assert!(candidates[0].why.contains("150"), "{}", candidates[0].why);
    assert!(r.opened.is_empty());
}

#[test]
fn ctl_pause_resume_release_answer_and_a_released_process_is_not_taken_back() {
    let mut host = Plain::new(&[(100, Proc::new("ffmpeg", 2, 0.5))]);
    let said = |r: &Receiver<Result<Done, Refusal>>| match r.try_recv().unwrap() {
        Ok(d) => d.to_string(),
        Err(e) => format!("refused: {e}"),
    };
    let answers = [
        host.ctl(secs(2), Command::Pause(Pid(100))),
        host.ctl(secs(2), Command::Pause(Pid(100))),
        host.ctl(secs(3), Command::Resume(Pid(100))),
        host.ctl(secs(3), Command::Pause(Pid(7))),
        host.ctl(secs(4), Command::Release(Pid(100))),
    ];
    host.signals.push_back((secs(8), Signal::Stop(15)));
    let mut d = daemon(host, RULES);
    let (released, _) = d.run();
    let lines: Vec<String> = answers.iter().map(said).collect();
    assert_eq!(
        lines,
        [
            "paused 100 (ffmpeg)",
            "refused: process 100 is already paused",
            "resumed 100 (ffmpeg)",
            "refused: process 7 is not managed",
            "released 100 (ffmpeg): 1 released",
        ]
    );
    // Released by ctl once, and left alone by the windows after (still matching).
    let r = record(&d);
    assert_eq!(r.opened.len(), 1);
    assert_eq!(r.released, [Pid(100)]);
    assert_eq!(released, Count(0));
}

#[test]
fn reload_bad_text_keeps_the_running_config_and_a_good_one_moves_processes_to_their_new_rule() {
    let mut host = Plain::new(&[(100, Proc::new("ffmpeg", 2, 0.5))]);
    host.reload_text = Some("[[rule]]\nname = \"x\"\npolicy = \"fastest\"\n".into());
    let bad = host.ctl(secs(2), Command::Reload);
    let mut d = daemon(host, RULES);
    let serve_until = |d: &mut Daemon<Plain>, at: u64| {
        d.host_mut().signals.push_back((secs(at), Signal::Stop(15)));
        d.serve()
    };
    serve_until(&mut d, 3);
    let refusal = bad.try_recv().unwrap().unwrap_err();
    let line = Chain(&refusal).to_string();
    assert!(
        line.starts_with(
            "reload rejected, keeping the running config: t.toml:3: rule \"x\": policy: \
             unknown policy \"fastest\" (known: "
        ),
        "{line}"
    );
    assert_eq!(d.config().rules.rules.len(), 2);
    // Now a good file whose one rule takes ffmpeg under another name: released from the
    // old rule, taken on again under the new one.
    d.host_mut().reload_text =
        Some("[[rule]]\nname = \"video\"\ncomm = \"^ffmpeg$\"\npolicy = \"tumbler\"\n".into());
    let good = d.host_mut().ctl(secs(4), Command::Reload);
    serve_until(&mut d, 7);
    assert_eq!(
        good.try_recv().unwrap().unwrap().to_string(),
        format!("reloaded: {}", d.config().summary())
    );
    let r = record(&d);
    assert_eq!(r.released, [Pid(100)]);
    assert_eq!(r.opened.len(), 2);
    let list = &r.published.as_ref().unwrap().processes;
    assert_eq!(
        (list[0].rule.as_str(), list[0].policy.as_str()),
        ("video", "tumbler")
    );
}

#[test]
fn oneshot_places_each_matched_process_once_and_leaves_the_placement() {
    let host = Plain::new(&[
        (100, Proc::new("ffmpeg", 2, 0.5)),
        (200, Proc::new("bash", 1, 0.0)),
    ]);
    let mut d = daemon(host, RULES);
    assert_eq!(d.oneshot(), 1);
    let r = record(&d);
    // No journal: the placement is meant to stay.
    assert_eq!(r.opened, [(Pid(100), false)]);
    assert_eq!(r.kept, [Pid(100)]);
    assert!(r.released.is_empty());
}

#[test]
fn window_two_processes_on_the_same_cpus_under_one_policy_are_one_group_until_one_goes() {
    let mut host = Plain::new(&[
        (100, Proc::new("ffmpeg", 2, 0.5)),
        (101, Proc::new("ffmpeg", 2, 0.5)),
    ]);
    let release = host.ctl(secs(2), Command::Release(Pid(100)));
    host.signals.push_back((secs(4), Signal::Stop(15)));
    let mut d = daemon(host, RULES);
    d.window();
    d.publish();
    let groups: Vec<u64> = record(&d)
        .published
        .as_ref()
        .unwrap()
        .processes
        .iter()
        .map(|p| p.group)
        .collect();
    assert_eq!(groups.len(), 2);
    assert!(groups[0] > 0 && groups[0] == groups[1], "{groups:?}");
    d.serve();
    assert!(release.try_recv().unwrap().is_ok());
    // The one left is balanced alone, by a group of its own.
    let r = record(&d);
    let list = &r.published.as_ref().unwrap().processes;
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].pid, 101);
    assert!(list[0].group > groups[0], "{list:?}");
}

#[test]
fn window_process_whose_cpuset_leaves_it_none_of_the_daemons_cpus_is_released() {
    let mut host = Plain::new(&[(100, Proc::new("ffmpeg", 2, 0.5))]);
    // The machine's CPUs are 0-3; its cgroup gives it 2-3, then 6-7 (none of ours).
    host.cpusets
        .insert(Pid(100), CpuSet::parse_list("2-3").unwrap());
    let mut d = daemon(host, RULES);
    d.window();
    assert_eq!(record(&d).opened.len(), 1);
    d.host_mut()
        .cpusets
        .insert(Pid(100), CpuSet::parse_list("6-7").unwrap());
    d.host_mut().advance(secs(1));
    d.window();
    assert_eq!(record(&d).released, [Pid(100)]);
    // Still matched by its rule, it is refused from now on (its threads may use none of
    // the CPUs), not taken on again.
    d.host_mut().advance(secs(1));
    d.window();
    assert_eq!(record(&d).opened.len(), 1);
}
