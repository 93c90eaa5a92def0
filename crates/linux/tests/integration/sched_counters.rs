//! The BPF run-time counters (`schedbpf`): the committed object matches its recorded hash
//! (always), and, with the `bpf` feature, a sampler reading them and a sampler reading
//! `/proc` agree on the same busy threads. The live test needs root and tracefs (CI has
//! both); it fails, rather than passing silently, where the program cannot load.

use sha2::{Digest, Sha256};

const OBJECT: &[u8] = include_bytes!("../../bpf/sched.bpf.o");
const RECORDED: &str = include_str!("../../bpf/sched.bpf.o.sha256");

#[test]
fn sched_counters_object_matches_recorded_sha256() {
    let hex: String = Sha256::digest(OBJECT)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex,
        RECORDED.trim(),
        "bpf/sched.bpf.o does not match bpf/sched.bpf.o.sha256: rebuild with bpf/build.sh"
    );
    // An ELF object for the BPF machine (e_machine 247).
    assert_eq!(&OBJECT[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([OBJECT[18], OBJECT[19]]), 247);
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

    #[test]
    fn sched_counters_agree_with_proc_on_run_time_of_busy_threads() {
        let pid = Pid(std::process::id() as i32);
        let mut cfg = SamplerConfig::new(HostFacts::system().unwrap());
        // Switch counts too: /proc's from `status`, the counters' from the program.
        cfg.read_status = true;
        let mut proc_ = Sampler::new(Root::system(), &[pid], cfg.clone()).unwrap();
        let mut bpf = Sampler::new(Root::system(), &[pid], cfg).unwrap();
        let probe = SchedProbe::load().expect("the BPF counters load (run as root, tracefs)");
        bpf.set_counters(Box::new(probe));
        let (mut a, mut b) = (Snapshot::default(), Snapshot::default());
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
        proc_.sample(monotonic_now(), &mut a).unwrap();
        bpf.sample(monotonic_now(), &mut b).unwrap();
        let (a0, b0) = (a.clone(), b.clone());
        std::thread::sleep(Duration::from_millis(600));
        proc_.sample(monotonic_now(), &mut a).unwrap();
        bpf.sample(monotonic_now(), &mut b).unwrap();
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
            let (pa, pb) = (of(&a, tid), of(&b, tid));
            let (qa, qb) = (of(&a0, tid), of(&b0, tid));
            let run_proc = pa.run.0.saturating_sub(qa.run.0) as f64 / 1e6;
            let run_bpf = pb.run.0.saturating_sub(qb.run.0) as f64 / 1e6;
            let slices_proc = pa.timeslices - qa.timeslices;
            let slices_bpf = pb.timeslices - qb.timeslices;
            eprintln!(
                "thread {} (/proc / BPF): run {run_proc:.2} / {run_bpf:.2} ms, slices \
                 {slices_proc} / {slices_bpf}, run since start {:.2} / {:.2} ms",
                tid.0,
                pa.run.0 as f64 / 1e6,
                pb.run.0 as f64 / 1e6,
            );
            // On an idle machine each runs about 450 ms; loaded by other work, far less.
            assert!(
                run_proc > 5.0,
                "thread {} hardly ran ({run_proc} ms)",
                tid.0
            );
            // Both measure the same run time over the same 600 ms; /proc's figure of a
            // running thread stops at its last scheduler tick (≤ 4 ms at 250 Hz), at
            // either end, and the two samplers read a few µs apart: 10 % or 10 ms.
            assert!(
                (run_bpf - run_proc).abs() <= (0.10 * run_proc).max(10.0),
                "thread {}: run {run_proc:.2} ms from /proc, {run_bpf:.2} ms from BPF",
                tid.0
            );
            // Run-queue wait: the kernel's run_delay counts from the enqueue, the program
            // from the wake-up tracepoint just after it: same tolerance.
            let wait_proc = pa.wait.0.saturating_sub(qa.wait.0) as f64 / 1e6;
            let wait_bpf = pb.wait.0.saturating_sub(qb.wait.0) as f64 / 1e6;
            assert!(
                (wait_bpf - wait_proc).abs() <= (0.10 * wait_proc).max(10.0),
                "thread {}: wait {wait_proc:.2} ms from /proc, {wait_bpf:.2} ms from BPF",
                tid.0
            );
            // Timeslices: every switch-in counts once in both; the reads are apart by
            // a few µs, in which a thread switches at most a couple of times.
            assert!(
                slices_bpf.abs_diff(slices_proc) <= 2 + slices_proc / 10,
                "thread {}: {slices_proc} timeslices from /proc, {slices_bpf} from BPF",
                tid.0
            );
            // Voluntary (the 1 ms sleeps) and involuntary (preempted on a busy CPU)
            // switches: each switch-out counts once in both, as the kernel's nvcsw and
            // nivcsw do; same tolerance as timeslices, for the deltas and for the totals
            // since the thread started (seeded from `status`, or counted from birth).
            for (what, p0, p1, b0, b1) in [
                (
                    "voluntary",
                    qa.voluntary,
                    pa.voluntary,
                    qb.voluntary,
                    pb.voluntary,
                ),
                (
                    "involuntary",
                    qa.involuntary,
                    pa.involuntary,
                    qb.involuntary,
                    pb.involuntary,
                ),
            ] {
                let (dp, db) = (p1 - p0, b1 - b0);
                eprintln!("thread {}: {what} {dp} / {db}, total {p1} / {b1}", tid.0);
                assert!(
                    db.abs_diff(dp) <= 2 + dp / 10,
                    "thread {}: {dp} {what} switches from /proc, {db} from BPF",
                    tid.0
                );
                assert!(
                    b1.abs_diff(p1) <= 2 + p1 / 10,
                    "thread {}: {p1} {what} switches in all from /proc, {b1} from BPF",
                    tid.0
                );
            }
            // Each sleeps 1 ms in every 4 (less when starved): over 600 ms, many blocks.
            assert!(
                pa.voluntary - qa.voluntary > 10,
                "thread {} hardly blocked",
                tid.0
            );
        }
    }
}
