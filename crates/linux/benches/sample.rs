//! Sampling cost per thread: the sampler's kept files re-read with `pread` against opening,
//! reading and closing the same files on every sample.
//!
//! The bench process starts 64, 256 and 1024 parked threads and samples itself; the
//! throughput is in threads, so criterion reports the time per thread per sample. Target:
//! at most 1.5 µs per thread, and at least 3× cheaper than open/read/close.
//!
//! | variant | files | `stat` |
//! |---|---|---|
//! | `pread` | kept, `pread` at 0 (the default sampler) | only for threads that ran since the last sample |
//! | `pread_idle_backoff_2ms_ticks` | kept; idle threads read at half their idle time, at most every 16 ms (`speed`'s sampler), samples 2 ms apart | as `pread` |
//! | `pread_stat_every_sample` | kept, `pread` at 0 | every sample |
//! | `open_read_close` | opened, read, closed each sample | every sample |
//! | `bpf_counters` (feature `bpf`, root) | run time from the BPF counters (read from mapped memory, no system call), files kept for `stat` | as `pread` |
//!
//! Parked threads never run, so `pread` here is the cost for idle threads (one `schedstat`
//! read each) and `pread_stat_every_sample` the cost for threads that all ran.
//!
//! ```text
//! cargo bench -p threadbalance-linux --bench sample -- --warm-up-time 1 --measurement-time 3
//! cargo bench -p threadbalance-linux --features bpf --bench sample -- bpf_counters
//! ```

// Bench code: a failed setup is a failed run.
#![allow(clippy::expect_used)]

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use threadbalance_linux::{HostFacts, Root, Sampler, SamplerConfig};
use threadbalance_model::{Nanos, Pid, Snapshot};

/// `n` threads that sleep until dropped.
struct Parked {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Parked {
    fn start(n: usize) -> Parked {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..n)
            .map(|_| {
                let stop = stop.clone();
                std::thread::Builder::new()
                    .stack_size(64 * 1024)
                    .spawn(move || {
                        while !stop.load(Ordering::Relaxed) {
                            std::thread::park();
                        }
                    })
                    .expect("spawn a parked thread")
            })
            .collect();
        Parked { stop, handles }
    }
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

fn sampler(keep_files_open: bool, stat_every_sample: bool, idle: Nanos) -> Sampler {
    let mut cfg = SamplerConfig::new(HostFacts::system().expect("host facts"));
    cfg.memory_every = None;
    cfg.keep_files_open = keep_files_open;
    cfg.stat_every_sample = stat_every_sample;
    cfg.idle_max_age = idle;
    let me = Pid(std::process::id() as i32);
    Sampler::new(Root::system(), &[me], cfg).expect("sampler of this process")
}

fn bench_sample(c: &mut Criterion) {
    let mut group = c.benchmark_group("sample");
    for n in [64usize, 256, 1024] {
        let parked = Parked::start(n);
        // The idle back-off (16 ms, as `speed` uses it) on a 2 ms tick: parked threads
        // never run, so once idle 32 ms each is read every 16 ms, one sample in eight.
        for (name, keep, every, idle) in [
            ("pread", true, false, Nanos::ZERO),
            (
                "pread_idle_backoff_2ms_ticks",
                true,
                false,
                Nanos::from_millis(16),
            ),
            ("pread_stat_every_sample", true, true, Nanos::ZERO),
            ("open_read_close", false, true, Nanos::ZERO),
        ] {
            let mut s = sampler(keep, every, idle);
            let mut snap = Snapshot::default();
            let mut now = Nanos::ZERO;
            s.sample(now, &mut snap).expect("first sample");
            // Elements are the threads actually sampled (the parked ones, the main thread
            // and criterion's own).
            group.throughput(Throughput::Elements(snap.threads.len() as u64));
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| {
                    if idle > Nanos::ZERO {
                        now += Nanos::from_millis(2);
                    }
                    s.sample(now, &mut snap).expect("sample")
                });
            });
        }
        #[cfg(feature = "bpf")]
        {
            let mut s = sampler(true, false, Nanos::ZERO);
            let probe = threadbalance_linux::schedbpf::SchedProbe::load()
                .expect("the BPF counters load (root, tracefs)");
            s.set_counters(Box::new(probe));
            let mut snap = Snapshot::default();
            // The first sample seeds every thread from /proc; from the second on the
            // parked threads are answered by the counters.
            s.sample(Nanos::ZERO, &mut snap).expect("first sample");
            s.sample(Nanos::ZERO, &mut snap).expect("second sample");
            assert!(
                s.counted_threads() >= n,
                "the counters answer for the parked threads"
            );
            group.throughput(Throughput::Elements(snap.threads.len() as u64));
            group.bench_with_input(BenchmarkId::new("bpf_counters", n), &n, |b, _| {
                b.iter(|| s.sample(Nanos::ZERO, &mut snap).expect("sample"));
            });
        }
        drop(parked);
    }
    group.finish();
}

criterion_group!(benches, bench_sample);
criterion_main!(benches);
