//! A thread's time slice: `sched_getattr` and `sched_setattr` on fair-class threads.
//!
//! Since Linux 6.12 a `SCHED_OTHER` or `SCHED_BATCH` thread may carry a slice of its own,
//! `sched_attr.sched_runtime` (the kernel keeps it within 0.1–100 ms; 0 asks for the
//! default again), and `sched_getattr` reports the slice a thread runs with, its own or
//! the default. Older kernels ignore the field for these classes and report 0, so a slice
//! read as 0 says "not supported here" and nothing is changed.
//!
//! ```text
//!  set:     getattr(tid) ─► fair class, nice ≥ 0, runtime > 0? ── no ─► left alone
//!           setattr(tid, same policy and nice, runtime = slice, RESET_ON_FORK)
//!  restore: setattr(tid, same policy and nice, runtime = original, original RESET_ON_FORK)
//! ```
//!
//! `SCHED_FLAG_RESET_ON_FORK` is set with the slice, so threads the program creates
//! meanwhile start with the default slice instead of inheriting ours (for a fair thread of
//! nice ≥ 0 the flag changes nothing else: it resets only negative nice values and real-time
//! classes), and is taken off again when the slice is restored. Taking it off needs
//! `CAP_SYS_NICE`, so slices are changed only by an instance that holds it
//! ([`crate::permit::we_may_renice_any`]).

use std::io;
use threadbalance_model::Tid;

/// `sched_attr` as the kernel reads it (`SCHED_ATTR_SIZE_VER1`, with the utilization
/// clamps, which are left untouched: no `SCHED_FLAG_UTIL_CLAMP_*` flag is passed).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct RawAttr {
    size: u32,
    policy: u32,
    flags: u64,
    nice: i32,
    priority: u32,
    runtime: u64,
    deadline: u64,
    period: u64,
    util_min: u32,
    util_max: u32,
}

const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;
const SCHED_FLAG_RESET_ON_FORK: u64 = 0x01;

/// A thread's slice as we keep it: the slice in ns (0: the kernel's default), and whether
/// its children reset to the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slice {
    /// The slice, ns; 0 for the kernel's default.
    pub ns: u64,
    /// `SCHED_FLAG_RESET_ON_FORK`.
    pub reset_on_fork: bool,
}

/// What `sched_getattr` says of a thread, as far as slices go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    raw: RawAttr,
}

impl Attr {
    /// The slice it runs with, ns (its own or the default; 0 where the kernel does not
    /// report one).
    pub fn runtime(&self) -> u64 {
        self.raw.runtime
    }

    /// Whether a slice of ours may be set on it: a fair class, nice ≥ 0 (the flag we add
    /// would reset a negative nice in its children), on a kernel that reports slices.
    pub fn sliceable(&self) -> bool {
        matches!(self.raw.policy, SCHED_OTHER | SCHED_BATCH)
            && self.raw.nice >= 0
            && self.raw.runtime > 0
    }

    /// Its slice as we would restore it, given the kernel's default: 0 when it runs with
    /// the default.
    pub fn as_slice(&self, default_ns: Option<u64>) -> Slice {
        Slice {
            ns: if Some(self.raw.runtime) == default_ns {
                0
            } else {
                self.raw.runtime
            },
            reset_on_fork: self.raw.flags & SCHED_FLAG_RESET_ON_FORK != 0,
        }
    }
}

/// `sched_getattr(tid)`; `tid` 0 is the calling thread.
pub fn attr_of(tid: Tid) -> io::Result<Attr> {
    let mut raw = RawAttr::default();
    let size = std::mem::size_of::<RawAttr>() as libc::c_uint;
    // SAFETY: `raw` is a writable `sched_attr` of `size` bytes, as the call requires.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_getattr,
            tid.0 as libc::pid_t,
            &mut raw as *mut RawAttr,
            size,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Attr { raw })
}

/// Gives `tid`, whose attributes are `current`, the slice `s`: its policy and nice stay.
pub fn set(tid: Tid, current: &Attr, s: Slice) -> io::Result<()> {
    let raw = RawAttr {
        size: std::mem::size_of::<RawAttr>() as u32,
        policy: current.raw.policy,
        flags: if s.reset_on_fork {
            SCHED_FLAG_RESET_ON_FORK
        } else {
            0
        },
        nice: current.raw.nice,
        priority: 0,
        runtime: s.ns,
        deadline: 0,
        period: 0,
        util_min: 0,
        util_max: 0,
    };
    // SAFETY: `raw` is a readable `sched_attr` whose `size` field gives its length.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_sched_setattr,
            tid.0 as libc::pid_t,
            &raw as *const RawAttr,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads `tid`'s attributes and gives it the slice `s`.
pub fn set_slice(tid: Tid, s: Slice) -> io::Result<()> {
    let current = attr_of(tid)?;
    set(tid, &current, s)
}

/// The kernel's default slice, ns: the slice of a thread of ours that was never given one
/// (this process's main thread). `None` where the kernel reports none.
pub fn default_ns() -> Option<u64> {
    let pid = std::process::id();
    let a = attr_of(Tid(pid as i32)).ok()?;
    (a.raw.runtime > 0).then_some(a.raw.runtime)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_thread() -> Tid {
        Tid(nix::unistd::gettid().as_raw())
    }

    #[test]
    fn a_slice_round_trips_on_a_thread_of_our_own_and_the_default_comes_back() {
        // On a spawned thread, so the test thread's attributes are never touched.
        std::thread::spawn(|| {
            let me = this_thread();
            let before = attr_of(me).unwrap();
            if before.runtime() == 0 {
                // A kernel older than 6.12 reports no slice: nothing may be set.
                assert!(!before.sliceable());
                return;
            }
            let default = before.runtime();
            assert_eq!(before.as_slice(Some(default)).ns, 0);
            set(
                me,
                &before,
                Slice {
                    ns: 500_000,
                    reset_on_fork: true,
                },
            )
            .unwrap();
            let after = attr_of(me).unwrap();
            assert_eq!(after.runtime(), 500_000);
            assert!(after.as_slice(Some(default)).reset_on_fork);
            set_slice(me, before.as_slice(Some(default))).unwrap();
            let back = attr_of(me).unwrap();
            assert_eq!(back.runtime(), default);
            assert_eq!(back, before);
        })
        .join()
        .unwrap();
    }
}
