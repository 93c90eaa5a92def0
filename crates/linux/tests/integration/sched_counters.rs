//! The BPF run-time counters (`schedbpf`): the committed object matches its recorded hash
//! (always), and, with the `bpf` feature, a sampler reading them and a sampler reading
//! `/proc` agree on the same busy threads. The live test needs root and tracefs (CI has
//! both); it fails, rather than passing silently, where the program cannot load.

const OBJECT: &[u8] = include_bytes!("../../bpf/sched.bpf.o");
const RECORDED: &str = include_str!("../../bpf/sched.bpf.o.sha256");

#[test]
fn sched_counters_object_matches_recorded_sha256() {
    crate::util::assert_bpf_object("sched.bpf.o", OBJECT, RECORDED);
}

#[cfg(feature = "bpf")]
mod live {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    use threadbalance_linux::schedbpf::SchedProbe;
    use threadbalance_linux::{HostFacts, Root, Sampler, SamplerConfig, monotonic_now};
    use threadbalance_model::{Pid, Sample, Snapshot, Tid};

    /// Three threads that spin 3 ms and sleep 1 ms until told to stop: on two cores they
    /// run, wait on the run queue and sleep, so all three counters move.
    fn busy(stop: &Arc<AtomicBool>) -> (Vec<std::thread::JoinHandle<()>>, Vec<Tid>) {
        let (tx, rx) = std::sync::mpsc::channel();
        let handles = (0..3)
            .map(|_| {
                let (stop, tx) = (stop.clone(), tx.clone());
                std::thread::spawn(move || {
                    let _ = tx.send(Tid(nix::unistd::gettid().as_raw()));
                    while !stop.load(Ordering::Relaxed) {
                        let t = Instant::now();
                        while t.elapsed() < Duration::from_millis(3) {
                            std::hint::spin_loop();
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                })
            })
            .collect();
        let tids = (0..3).map(|_| rx.recv().unwrap()).collect();
        (handles, tids)
    }

    /// Sleeping threads besides the busy ones: the counters answer for them too.
    const SLEEPERS: usize = 48;

    fn of(snap: &Snapshot, tid: Tid) -> Sample {
        *snap
            .threads
            .iter()
            .find(|s| s.key.tid == tid)
            .unwrap_or_else(|| panic!("thread {tid:?} not sampled"))
    }

    /// The machine's steal time so far, ns: the 8th value of `/proc/stat`'s `cpu` line
    /// (the sum over CPUs), in USER_HZ ticks.
    fn steal_ns() -> u64 {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        let cpu = stat.lines().next().unwrap();
        assert!(cpu.starts_with("cpu "), "unexpected /proc/stat: {cpu}");
        let ticks: u64 = cpu.split_whitespace().nth(8).unwrap().parse().unwrap();
        let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .unwrap()
            .unwrap() as u64;
        ticks * (1_000_000_000 / hz)
    }

    /// The slack a run-time count may take, above `/proc`'s, for the hypervisor's steal:
    /// the program counts a thread's time on a CPU from switch to switch, wall time, where
    /// the kernel's `sum_exec_runtime` (`/proc`'s) leaves out what the hypervisor stole
    /// meanwhile (`update_curr` runs on the queue's `clock_task`, which subtracts steal). A
    /// thread can lose at most what all CPUs lost together over the span, `stolen`; the
    /// kernel keeps steal in ns and `/proc/stat` truncates the sum to a tick at either read,
    /// so one tick more. A machine that never stole (`machine_steals` false: no steal
    /// accounting, or bare metal) gets none.
    fn steal_slack(stolen: u64, tick: u64, machine_steals: bool) -> u64 {
        if machine_steals { stolen + tick } else { 0 }
    }

    /// Whether `/proc`'s delta `p` lies between the BPF deltas over the inner and the outer
    /// bracket, `tol` either way, and `slack` more below (the counters may count more: see
    /// [`steal_slack`]).
    fn bracketed(p: u64, inner: u64, outer: u64, tol: u64, slack: u64) -> bool {
        inner.saturating_sub(tol + slack) <= p && p <= outer + tol
    }

    #[test]
    fn steal_slack_worked_example() {
        // 30 ms stolen over the span, ticks of 10 ms: 40 ms more may be counted by BPF.
        let slack = steal_slack(30_000_000, 10_000_000, true);
        assert_eq!(slack, 40_000_000);
        // /proc 450 ms; BPF 480..500 ms; tolerance 45 ms (10 %): 480 − 85 ≤ 450 ≤ 545.
        assert!(bracketed(
            450_000_000,
            480_000_000,
            500_000_000,
            45_000_000,
            slack
        ));
        // BPF 540 ms over the inner bracket is 90 ms more than /proc: beyond 45 + 40.
        assert!(!bracketed(
            450_000_000,
            540_000_000,
            560_000_000,
            45_000_000,
            slack
        ));
        // The slack is one-sided: /proc above the outer bracket by more than the
        // tolerance still fails, stolen time or not (450 > 400 + 45).
        assert!(!bracketed(
            450_000_000,
            380_000_000,
            400_000_000,
            45_000_000,
            slack
        ));
        // No steal accounting: no slack.
        assert_eq!(steal_slack(30_000_000, 10_000_000, false), 0);
    }

    #[test]
    fn sched_counters_agree_with_proc_on_run_time_of_busy_threads() {
        let pid = Pid(std::process::id() as i32);
        // Steal before any thread starts (the totals since each thread started) and over
        // the measured span (the deltas).
        let steal_at_start = steal_ns();
        let mut cfg = SamplerConfig::new(HostFacts::system().unwrap());
        // Switch counts too: /proc's from `status`, the counters' from the program.
        cfg.read_status = true;
        let mut proc_ = Sampler::new(Root::system(), &[pid], cfg.clone()).unwrap();
        let mut bpf = Sampler::new(Root::system(), &[pid], cfg).unwrap();
        let probe = SchedProbe::load().expect("the BPF counters load (run as root, tracefs)");
        bpf.set_counters(Box::new(probe));
        let mut b = Snapshot::default();
        let stop = Arc::new(AtomicBool::new(false));
        // Sleepers, which the counters answer for as well (seeded, then hardly switching).
        let parked: Vec<_> = (0..SLEEPERS)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::park();
                    }
                })
            })
            .collect();
        // Three threads started before the counters track this process (their entries
        // are seeded from /proc), then three started after (counted from birth).
        let (mut handles, mut tids) = busy(&stop);
        bpf.sample(monotonic_now(), &mut b).unwrap();
        let (h2, t2) = busy(&stop);
        handles.extend(h2);
        tids.extend(t2);
        std::thread::sleep(Duration::from_millis(100));
        // Each /proc sample is bracketed by two BPF samples: on a loaded machine this
        // thread may be preempted between reads, and the counters move meanwhile.
        let bracket = |proc_: &mut Sampler, bpf: &mut Sampler| {
            let (mut lo, mut p, mut hi) = Default::default();
            bpf.sample(monotonic_now(), &mut lo).unwrap();
            proc_.sample(monotonic_now(), &mut p).unwrap();
            bpf.sample(monotonic_now(), &mut hi).unwrap();
            (lo, p, hi)
        };
        let steal_before = steal_ns();
        let start = bracket(&mut proc_, &mut bpf);
        std::thread::sleep(Duration::from_millis(600));
        let end = bracket(&mut proc_, &mut bpf);
        let steal_after = steal_ns();
        // The counters answer for most threads, so their waits are exact at the read;
        // `/proc`'s may come late.
        assert!(!end.0.waits_late && !end.2.waits_late && end.1.waits_late);
        let tick = 1_000_000_000
            / nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
                .unwrap()
                .unwrap() as u64;
        let steals = steal_after > 0;
        let span_slack = steal_slack(steal_after - steal_before, tick, steals);
        let total_slack = steal_slack(steal_after - steal_at_start, tick, steals);
        eprintln!(
            "steal: {:.1} ms over the span, {:.1} ms since the start (slack {:.1} / {:.1} ms)",
            (steal_after - steal_before) as f64 / 1e6,
            (steal_after - steal_at_start) as f64 / 1e6,
            span_slack as f64 / 1e6,
            total_slack as f64 / 1e6,
        );
        b = end.2.clone();
        let counted = bpf.counted_threads();
        stop.store(true, Ordering::Relaxed);
        for h in handles {
            h.join().unwrap();
        }
        for p in parked {
            p.thread().unpark();
            p.join().unwrap();
        }
        // A process this one starts is counted as a spawn (threads are not).
        let spawns = bpf.counted_spawns().expect("the counters count spawns");
        std::process::Command::new("true").status().unwrap();
        // Every thread that exited is seen to have gone: the counters count deaths, so the
        // sampler lists the task directory again although it no longer checks its links.
        let mut after = Snapshot::default();
        bpf.sample(monotonic_now(), &mut after).unwrap();
        let left: Vec<_> = after
            .threads
            .iter()
            .filter(|s| tids.contains(&s.key.tid))
            .collect();
        assert!(left.is_empty(), "exited threads still sampled: {left:?}");
        // At least: other tests of this binary may start processes meanwhile.
        assert!(bpf.counted_spawns().is_some_and(|n| n > spawns));
        assert!(
            after.threads.len() + 6 + SLEEPERS <= b.threads.len(),
            "{} threads before the exits, {} after",
            b.threads.len(),
            after.threads.len()
        );
        assert_eq!(bpf.counters_name(), Some("BPF sched_switch counters"));
        assert!(
            counted >= 6 + SLEEPERS,
            "only {counted} threads answered by the counters"
        );
        for tid in tids {
            let at = |snaps: &(Snapshot, Snapshot, Snapshot)| {
                (of(&snaps.0, tid), of(&snaps.1, tid), of(&snaps.2, tid))
            };
            let ((lo0, p0, hi0), (lo1, p1, hi1)) = (at(&start), at(&end));
            let ms = |ns: u64| ns as f64 / 1e6;
            eprintln!(
                "thread {} (/proc; BPF before and after it): run {:.2}; {:.2} {:.2} ms, \
                 wait {:.2}; {:.2} {:.2} ms, slices {}; {} {}, run since start {:.2}; {:.2} ms",
                tid.0,
                ms(p1.run.0 - p0.run.0),
                ms(lo1.run.0 - hi0.run.0),
                ms(hi1.run.0 - lo0.run.0),
                ms(p1.wait.0 - p0.wait.0),
                ms(lo1.wait.0 - hi0.wait.0),
                ms(hi1.wait.0 - lo0.wait.0),
                p1.timeslices - p0.timeslices,
                lo1.timeslices - hi0.timeslices,
                hi1.timeslices - lo0.timeslices,
                ms(p1.run.0),
                ms(lo1.run.0),
            );
            // On an idle machine each runs about 450 ms; loaded by other work, far less.
            let run_proc = ms(p1.run.0 - p0.run.0);
            assert!(
                run_proc > 5.0,
                "thread {} hardly ran ({run_proc} ms)",
                tid.0
            );
            // Counters only grow, so /proc's delta lies between the BPF deltas over the
            // inner and the outer brackets, up to a tolerance: /proc's run time of a
            // running thread stops at its last scheduler tick (≤ 4 ms at 250 Hz) at
            // either end, and the kernel's run_delay counts from the enqueue where the
            // program counts from the wake-up tracepoint just after it: 10 % or 10 ms.
            // Run time only: the counters may count the steal the kernel leaves out
            // (`steal_slack`). Not the wait: both clocks the wait is counted on (the
            // kernel's `sched_clock`, the program's `bpf_ktime_get_ns`) run through steal.
            let within = |what: &str, get: fn(&Sample) -> u64, ns: bool, steal: bool| {
                let p = get(&p1) - get(&p0);
                let inner = get(&lo1).saturating_sub(get(&hi0));
                let outer = get(&hi1).saturating_sub(get(&lo0));
                let tol = if ns {
                    (p / 10).max(10_000_000)
                } else {
                    2 + p / 10
                };
                let (span, total) = if steal {
                    (span_slack, total_slack)
                } else {
                    (0, 0)
                };
                assert!(
                    bracketed(p, inner, outer, tol, span),
                    "thread {}: {what} {p} from /proc, {inner}..{outer} from BPF (steal slack {span})",
                    tid.0
                );
                // The totals since the thread started, too (seeded from /proc, or counted
                // from birth): /proc's lies between the BPF reads around it. The wait as
                // well: the counters count a queued thread's wait up to each read, so
                // /proc's (added at the switch-in, or so far when the thread moves to
                // another run queue) is never ahead of the later read, and behind the
                // earlier one by at most a wait still open at /proc's read.
                let (p, lo, hi) = (get(&p1), get(&lo1), get(&hi1));
                assert!(
                    bracketed(p, lo, hi, tol, total),
                    "thread {}: {what} {p} in all from /proc, {lo}..{hi} from BPF (steal slack {total})",
                    tid.0
                );
            };
            within("run ns", |s| s.run.0, true, true);
            within("wait ns", |s| s.wait.0, true, false);
            // Every switch-in counts once in both; voluntary (the 1 ms sleeps) and
            // involuntary (preempted) switch-outs as the kernel's nvcsw and nivcsw do.
            within("timeslices", |s| s.timeslices, false, false);
            within("voluntary switches", |s| s.voluntary, false, false);
            within("involuntary switches", |s| s.involuntary, false, false);
            // Each sleeps 1 ms in every 4 (less when starved): over 600 ms, many blocks.
            assert!(
                p1.voluntary - p0.voluntary > 10,
                "thread {} hardly blocked",
                tid.0
            );
        }
    }

    #[test]
    fn sched_counters_weighed_between_samples_count_threads_born_since_the_last() {
        // A program that starts threads after the first sample (sysbench starts its
        // workers about a tenth of a second in): a look between samples must count them,
        // so that their switches weigh on the counters' first verdict. It used to list the
        // task directories only when a new *process* was counted, and counted none.
        let mut h = crate::live::Helper::start();
        let mut bpf = Sampler::new(
            Root::system(),
            &[h.pid()],
            SamplerConfig::new(HostFacts::system().unwrap()),
        )
        .unwrap();
        let probe = SchedProbe::load().expect("the BPF counters load (run as root, tracefs)");
        bpf.set_counters(Box::new(probe));
        let mut snap = Snapshot::default();
        bpf.sample(monotonic_now(), &mut snap).unwrap();
        assert!(
            bpf.weigh_between_due(monotonic_now()).is_some(),
            "first span open"
        );
        assert_eq!(bpf.weigh_between(monotonic_now()), 0, "no thread born yet");
        h.spawn_two();
        let born = bpf.weigh_between(monotonic_now());
        h.stop();
        assert_eq!(
            born, 2,
            "threads born since the first sample, counted by the look"
        );
    }
}
