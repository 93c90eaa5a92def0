//! Calibrated compute: "S ms of work" is S ms of the calling thread's own CPU time
//! (`CLOCK_THREAD_CPUTIME_ID`), so a unit of work costs the same whether the thread had a
//! core to itself or shared one. Wall-clock time therefore measures placement alone.

use nix::time::{ClockId, clock_gettime};
use std::hint::black_box;
use std::time::Instant;

/// Iterations of the arithmetic kernel between two reads of the CPU clock: a few
/// microseconds, so the clock read (a system call) costs a few percent at most.
const CHUNK: u32 = 1_000;

/// The calling thread's CPU time in nanoseconds; falls back to a process-local monotonic
/// clock if the kernel refuses (it does not on Linux).
pub fn thread_cpu_ns() -> u64 {
    match clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID) {
        Ok(ts) => (ts.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec() as u64),
        Err(_) => monotonic_ns(),
    }
}

/// Nanoseconds on a monotonic clock since the first call in this process.
pub fn monotonic_ns() -> u64 {
    use std::sync::OnceLock;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Spins until the calling thread has used `ns` more nanoseconds of CPU time; returns a
/// value derived from the computation so the optimizer keeps it.
pub fn burn_cpu_ns(ns: u64) -> u64 {
    let until = thread_cpu_ns().saturating_add(ns);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ ns;
    loop {
        for _ in 0..CHUNK {
            // xorshift64: cheap, data-dependent, cannot be folded away.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        x = black_box(x);
        if thread_cpu_ns() >= until {
            return x;
        }
    }
}
