//! The futex probe's cost (feature `bpf`; run as root with tracefs mounted).
//!
//! | bench | what one iteration is |
//! |---|---|
//! | `wait/untraced` | a `FUTEX_WAIT` that returns at once (`EAGAIN`: the word is not the expected value), the probe attached but this process not tracked: one hash lookup per tracepoint hit |
//! | `wait/traced` | the same wait with this process tracked: entry and exit recorded, the wait counted |
//! | `read/N` | one `FutexProbe::read` (every map walked, classified) with N threads' waits and wakes recorded: the cost per control tick |
//!
//! The probe's cost per traced wait is `wait/traced − wait/untraced` (a real wait sleeps for
//! microseconds to milliseconds, so this is what the probe adds to it). Before loading,
//! `wait/no-probe` gives the bare system call.
//!
//! ```text
//! cargo bench -p threadbalance-linux --features bpf --bench futex_probe -- --warm-up-time 1 --measurement-time 3
//! ```

// Bench code: a failed setup is a failed run.
#![allow(clippy::expect_used)]

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::sync::atomic::AtomicU32;
use threadbalance_linux::bpf::FutexProbe;
use threadbalance_model::Pid;

/// A `FUTEX_WAIT_PRIVATE` on `word` expecting a value it does not hold: returns `EAGAIN`
/// at once, passing through both tracepoints.
fn wait_eagain(word: &AtomicU32) {
    // SAFETY: the futex syscall reads the 32-bit word at the address (valid and aligned,
    // borrowed for the call) and returns; the null timeout is allowed.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            1u32,
            std::ptr::null::<libc::timespec>(),
        );
    }
}

/// A `FUTEX_WAKE_PRIVATE` of one waiter on `word` (there is none).
fn wake(word: &AtomicU32) {
    // SAFETY: as above; a wake only hashes the address.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            1u32,
        );
    }
}

fn bench(c: &mut Criterion) {
    let word = AtomicU32::new(0);
    let mut g = c.benchmark_group("wait");
    g.bench_function("no-probe", |b| b.iter(|| wait_eagain(&word)));
    let mut probe = FutexProbe::load().expect("the futex probe loads (run as root)");
    probe.track(&[]).expect("tracks");
    g.bench_function("untraced", |b| b.iter(|| wait_eagain(&word)));
    let me = Pid(std::process::id() as i32);
    probe.track(&[me]).expect("tracks");
    g.bench_function("traced", |b| b.iter(|| wait_eagain(&word)));
    g.finish();

    let mut g = c.benchmark_group("read");
    for n in [16usize, 256] {
        // n threads, each waiting on its own word and waking a shared one.
        let shared = AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..n {
                s.spawn(|| {
                    let own = AtomicU32::new(0);
                    wait_eagain(&own);
                    wake(&shared);
                });
            }
        });
        g.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| {
            b.iter(|| probe.read().expect("reads").threads.len())
        });
    }
    g.finish();
    probe.track(&[]).expect("untracks");
}

criterion_group!(benches, bench);
criterion_main!(benches);
