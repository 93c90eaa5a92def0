//! A thread's CPU mask, read and set (`sched_getaffinity`, `sched_setaffinity`), with
//! masks of any size: the fixed 1024-CPU set of the C library while it can hold the mask,
//! and the raw system calls with a larger buffer beyond that. A leaf: the actuator and the
//! state directory's world both call it.

use std::io;
use threadbalance_model::{CpuId, CpuSet, Tid};

/// The CPUs thread `tid` may run on (`sched_getaffinity`).
pub fn affinity_of(tid: Tid) -> io::Result<CpuSet> {
    use nix::sched::{CpuSet as NixSet, sched_getaffinity};
    match sched_getaffinity(nix::unistd::Pid::from_raw(tid.0)) {
        Ok(set) => Ok((0..NixSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .map(|i| CpuId(i as u32))
            .collect()),
        // The kernel's masks are larger than the fixed set: ask with a larger buffer.
        Err(nix::errno::Errno::EINVAL) => raw_affinity_of(tid),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// `sched_getaffinity` with a buffer that grows until the kernel's mask fits.
fn raw_affinity_of(tid: Tid) -> io::Result<CpuSet> {
    let mut words: Vec<u64> = vec![0; 32];
    loop {
        let len = words.len() * std::mem::size_of::<u64>();
        // SAFETY: the kernel writes at most `len` bytes to the pointer, and `words` owns
        // exactly `len` writable bytes; the other arguments are plain integers.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                libc::pid_t::from(tid.0),
                len,
                words.as_mut_ptr(),
            )
        };
        if r >= 0 {
            let bytes = usize::try_from(r).unwrap_or(len).min(len);
            return Ok(CpuSet::from_words(&words[..bytes.div_ceil(8)]));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) && words.len() < (1 << 16) {
            words.resize(words.len() * 2, 0);
            continue;
        }
        return Err(e);
    }
}

/// Lets thread `tid` run only on `cpus` (`sched_setaffinity`).
pub fn set_affinity(tid: Tid, cpus: &CpuSet) -> io::Result<()> {
    use nix::sched::{CpuSet as NixSet, sched_setaffinity};
    if cpus.bound() as usize > NixSet::count() {
        return raw_set_affinity(tid, cpus);
    }
    let mut set = NixSet::new();
    for c in cpus.iter() {
        set.set(c.0 as usize).map_err(io::Error::from)?;
    }
    sched_setaffinity(nix::unistd::Pid::from_raw(tid.0), &set).map_err(io::Error::from)
}

/// `sched_setaffinity` with a mask of any size.
pub(crate) fn raw_set_affinity(tid: Tid, cpus: &CpuSet) -> io::Result<()> {
    let words = cpus.as_words();
    let len = std::mem::size_of_val(words);
    // SAFETY: the kernel reads at most `len` bytes from the pointer, and `words` holds
    // exactly `len` readable bytes; the other arguments are plain integers.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            libc::pid_t::from(tid.0),
            len,
            words.as_ptr(),
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_thread() -> Tid {
        Tid(nix::unistd::gettid().as_raw())
    }

    #[test]
    fn affinity_round_trips_on_a_thread_of_our_own() {
        // Runs on a thread of its own so no other test thread is ever touched.
        std::thread::spawn(|| {
            let tid = this_thread();
            let before = affinity_of(tid).unwrap();
            assert!(!before.is_empty());
            let first = before.first().unwrap();
            set_affinity(tid, &CpuSet::single(first)).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), CpuSet::single(first));
            set_affinity(tid, &before).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn raw_set_affinity_takes_masks_beyond_1024_cpus() {
        std::thread::spawn(|| {
            let tid = this_thread();
            let before = affinity_of(tid).unwrap();
            let first = before.first().unwrap();
            // CPU 1500 does not exist here; the kernel ignores bits beyond its CPUs, so the
            // thread ends up on `first` alone. The mask is too large for the fixed set, so
            // this goes through the raw call.
            let mut big = CpuSet::single(first);
            big.insert(CpuId(1500));
            assert!(big.bound() > 1024);
            set_affinity(tid, &big).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), CpuSet::single(first));
            assert_eq!(raw_affinity_of(tid).unwrap(), CpuSet::single(first));
            raw_set_affinity(tid, &before).unwrap();
            assert_eq!(affinity_of(tid).unwrap(), before);
        })
        .join()
        .unwrap();
    }
}
