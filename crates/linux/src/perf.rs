//! Per-thread hardware counters: instructions, cycles and last-level-cache read misses,
//! one `perf_event_open` group per thread, read with one `read` a sample.
//!
//! ```text
//!  PerfSource::system() ── CPU PMU in /sys/bus/event_source/devices? ── no ──► NoCounters::NoPmu
//!        │ yes           perf_event_paranoid allows it (or root)?  ── no ──► NoCounters::Paranoid
//!        │ yes           a group opens on this very thread?        ── no ──► NoCounters::Open (errno)
//!        ▼
//!  Sampler::set_hw_counters(source)
//!  each sample, per kept thread: first time ─► open (cycles leads; instructions, LLC misses)
//!                                every time ─► read() ─► scaled as `perf stat` scales
//!  thread gone ─► its table entry dropped ─► the three descriptors closed
//! ```
//!
//! **Why the system call and not a crate.** `perf-event2` (a fork of `perf-event`, last
//! released in May 2024) covers groups and multiplexing times, but brings its generated
//! bindings crate and thousands of lines for one system call, a 64-byte structure and a
//! read of `3 + n` words; `perf-event-open` generates its bindings at build time with
//! bindgen (libclang on every build machine). What this module needs is the stable part
//! of the ABI (`PERF_ATTR_SIZE_VER0`, the first 64 bytes, accepted by every kernel since
//! 2.6.31), through `libc`, which the crate already uses; no new dependency, nothing for
//! the lock file to carry.
//!
//! Counting is of user space only (`exclude_kernel`, `exclude_hv`): a non-root user may
//! count its own threads so at `perf_event_paranoid` 2 (the usual default), and DINO's
//! memory intensity is the program's. Multiplexing (more events than the PMU has
//! counters, shared with other users of the PMU) is scaled as `perf stat` scales it:
//! `value * time_enabled / time_running`; a group not scheduled yet reads zero.
//!
//! The source is a trait ([`CounterSource`], [`ThreadCounters`]): [`FakeCounterSource`]
//! gives plain values for tests, on machines without a PMU (such as most virtual ones).

use crate::Root;
use std::fmt::Debug;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use threadbalance_model::{HwCounters, Tid};

/// Where per-thread hardware counters come from.
pub trait CounterSource: Debug + Send {
    /// What it is, for the summary ("perf_event").
    fn name(&self) -> &'static str;
    /// Starts counting thread `tid`. An error leaves the thread uncounted (`None`
    /// counters), never stops the sampler.
    fn open(&mut self, tid: Tid) -> io::Result<Box<dyn ThreadCounters>>;
    /// How many file descriptors one counted thread holds.
    fn fds_per_thread(&self) -> u64;
}

/// The counters of one thread, open: dropped, they are closed.
pub trait ThreadCounters: Debug + Send {
    /// Its counts since it was opened, scaled for multiplexing.
    fn read(&mut self) -> io::Result<HwCounters>;
}

/// The counters, as `perf_event_open` gives them.
#[derive(Debug, Default)]
pub struct PerfSource;

/// `struct perf_event_attr` up to `config1` (`PERF_ATTR_SIZE_VER0`, 64 bytes).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

const PERF_ATTR_SIZE_VER0: u32 = 64;
const PERF_TYPE_HARDWARE: u32 = 0;
const PERF_TYPE_HW_CACHE: u32 = 3;
const PERF_COUNT_HW_CPU_CYCLES: u64 = 0;
const PERF_COUNT_HW_INSTRUCTIONS: u64 = 1;
const PERF_COUNT_HW_CACHE_LL: u64 = 2;
const PERF_COUNT_HW_CACHE_OP_READ: u64 = 0;
const PERF_COUNT_HW_CACHE_RESULT_MISS: u64 = 1;
/// The cache event's config: cache, operation, result, a byte each.
const LLC_READ_MISS: u64 = PERF_COUNT_HW_CACHE_LL
    | (PERF_COUNT_HW_CACHE_OP_READ << 8)
    | (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
const PERF_FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const PERF_FORMAT_TOTAL_TIME_RUNNING: u64 = 2;
const PERF_FORMAT_GROUP: u64 = 8;
/// `exclude_kernel` (bit 5) and `exclude_hv` (bit 6) of the flags' bit field.
const EXCLUDE_KERNEL_HV: u64 = (1 << 5) | (1 << 6);
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The group's events, leader first: cycles, instructions, LLC read misses.
const EVENTS: [(u32, u64); 3] = [
    (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    (PERF_TYPE_HW_CACHE, LLC_READ_MISS),
];

/// One event of thread `tid` (`group`: the leader's descriptor, `-1` for the leader).
fn open_event(tid: Tid, kind: u32, config: u64, group: libc::c_int) -> io::Result<OwnedFd> {
    let attr = PerfEventAttr {
        kind,
        size: PERF_ATTR_SIZE_VER0,
        config,
        read_format: PERF_FORMAT_GROUP
            | PERF_FORMAT_TOTAL_TIME_ENABLED
            | PERF_FORMAT_TOTAL_TIME_RUNNING,
        flags: EXCLUDE_KERNEL_HV,
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a valid, initialized `perf_event_attr` of the size it declares,
    // alive for the call; the other arguments are plain integers (pid = tid, any CPU).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &attr as *const PerfEventAttr,
            tid.0 as libc::pid_t,
            -1 as libc::c_int,
            group,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the system call returned a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

/// One thread's group: the leader (read) and its members (kept open).
#[derive(Debug)]
struct PerfGroup {
    leader: File,
    _members: [OwnedFd; 2],
}

impl ThreadCounters for PerfGroup {
    fn read(&mut self) -> io::Result<HwCounters> {
        // nr, time_enabled, time_running, then one value per event (no ids asked for).
        let mut words = [0u8; 8 * 6];
        let n = self.leader.read(&mut words)?;
        let mut w = [0u64; 6];
        for (i, chunk) in words[..n].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(chunk);
            w[i] = u64::from_ne_bytes(b);
        }
        parse_group(&w[..n / 8])
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "short group read"))
    }
}

/// A group read (`nr, time_enabled, time_running, cycles, instructions, llc_misses`) as
/// counters scaled as `perf stat` scales them; `None` when it is not whole.
pub fn parse_group(words: &[u64]) -> Option<HwCounters> {
    let [nr, enabled, running, cycles, instructions, llc_misses, ..] = *words else {
        return None;
    };
    if nr != 3 {
        return None;
    }
    Some(HwCounters {
        instructions: scaled(instructions, enabled, running),
        cycles: scaled(cycles, enabled, running),
        llc_misses: scaled(llc_misses, enabled, running),
    })
}

/// `value * enabled / running`, as `perf stat` scales a multiplexed count; zero for a
/// count never scheduled onto the PMU.
pub fn scaled(value: u64, enabled: u64, running: u64) -> u64 {
    if running == 0 {
        return 0;
    }
    if enabled <= running {
        return value;
    }
    let v = u128::from(value) * u128::from(enabled) / u128::from(running);
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl CounterSource for PerfSource {
    fn name(&self) -> &'static str {
        "perf_event"
    }

    fn open(&mut self, tid: Tid) -> io::Result<Box<dyn ThreadCounters>> {
        let [(k0, c0), (k1, c1), (k2, c2)] = EVENTS;
        let leader = open_event(tid, k0, c0, -1)?;
        let fd = leader.as_raw_fd();
        let instructions = open_event(tid, k1, c1, fd)?;
        let misses = open_event(tid, k2, c2, fd)?;
        Ok(Box::new(PerfGroup {
            leader: File::from(leader),
            _members: [instructions, misses],
        }))
    }

    fn fds_per_thread(&self) -> u64 {
        3
    }
}

impl PerfSource {
    /// The counters of this machine, or why there are none: no CPU PMU,
    /// `perf_event_paranoid` forbidding it to a user without privilege, or a group that
    /// does not open on this very thread.
    pub fn system() -> Result<PerfSource, NoCounters> {
        preconditions(&Root::system(), nix::unistd::geteuid().is_root())?;
        let me = Tid(nix::unistd::gettid().as_raw());
        let mut source = PerfSource;
        source
            .open(me)
            .map(|_| source)
            .map_err(|source| NoCounters::Open { source })
    }
}

/// Why this machine has no hardware counters for us. Its message is the reason alone, on
/// one line, said after what needs the counters ("…, and this machine has none: "), or
/// after "no hardware counters: ".
#[derive(Debug, thiserror::Error)]
pub enum NoCounters {
    /// `sys/bus/event_source/devices` lists no PMU that counts CPU events.
    #[error(
        "no CPU PMU in /sys/bus/event_source/devices (a virtual machine without PMU \
         passthrough?)"
    )]
    NoPmu,
    /// `sys/bus/event_source/devices` could not be listed.
    #[error("/sys/bus/event_source/devices: {source}")]
    Devices {
        /// Why it could not.
        #[source]
        source: io::Error,
    },
    /// `perf_event_paranoid` forbids counting to a user who is not root.
    #[error(
        "perf_event_paranoid is {level}, which forbids them without root or CAP_PERFMON \
         (`sysctl kernel.perf_event_paranoid=2` allows a user's own threads)"
    )]
    Paranoid {
        /// The level read from `/proc/sys/kernel/perf_event_paranoid`.
        level: i64,
    },
    /// `/proc/sys/kernel/perf_event_paranoid` is absent or unreadable (for a user who is
    /// not root).
    #[error("/proc/sys/kernel/perf_event_paranoid is missing (a kernel without perf events?)")]
    NoParanoid,
    /// The group did not open on the calling thread: what its errno means, then the
    /// errno.
    #[error("perf_event_open: {} ({source})", open_meaning(source))]
    Open {
        /// The system call's error.
        #[source]
        source: io::Error,
    },
}

/// What a failed `perf_event_open` means.
fn open_meaning(e: &io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::EINVAL) => {
            "the PMU does not offer instructions, cycles and LLC misses"
        }
        Some(libc::EACCES | libc::EPERM) => {
            "not allowed (perf_event_paranoid, or a seccomp filter)"
        }
        Some(libc::EMFILE | libc::ENFILE) => "out of file descriptors",
        Some(libc::ENOSYS) => "the kernel has no perf_event_open",
        _ => "it failed",
    }
}

/// The PMUs under `root`'s `/sys/bus/event_source/devices` that count CPU events:
/// `cpu`, or `cpu_core` and `cpu_atom` on hybrid x86 processors, `armv8_pmuv3*` and the
/// like on ARM.
pub fn cpu_pmus(root: &Root) -> io::Result<Vec<String>> {
    let mut found: Vec<String> = std::fs::read_dir(root.join("sys/bus/event_source/devices"))?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with("cpu") || n.starts_with("armv") || n.contains("pmu"))
        .collect();
    found.sort();
    Ok(found)
}

/// `/proc/sys/kernel/perf_event_paranoid` under `root`; `None` when absent or unreadable.
pub fn paranoid(root: &Root) -> Option<i64> {
    std::fs::read_to_string(root.join("proc/sys/kernel/perf_event_paranoid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// What `paranoid` means for counting one's own threads' user space without privilege.
pub fn paranoid_allows(level: i64) -> bool {
    // Above 2 (Debian and Android's 3): no perf_event_open without CAP_PERFMON.
    level <= 2
}

/// Why this machine (`root`) cannot count, before trying: no CPU PMU, or a
/// `perf_event_paranoid` that forbids it to a user who is not `root`.
pub fn preconditions(root: &Root, is_root: bool) -> Result<(), NoCounters> {
    let pmus = cpu_pmus(root).map_err(|source| NoCounters::Devices { source })?;
    if pmus.is_empty() {
        return Err(NoCounters::NoPmu);
    }
    match paranoid(root) {
        Some(level) if !is_root && !paranoid_allows(level) => Err(NoCounters::Paranoid { level }),
        None if !is_root => Err(NoCounters::NoParanoid),
        _ => Ok(()),
    }
}

/// A counter source of plain values: each read of a thread adds `step` to its counts.
/// For tests and examples on machines without a PMU.
#[derive(Debug, Clone, Copy, Default)]
pub struct FakeCounterSource {
    /// What every read of every thread adds.
    pub step: HwCounters,
}

#[derive(Debug)]
struct FakeThread {
    step: HwCounters,
    total: HwCounters,
}

impl ThreadCounters for FakeThread {
    fn read(&mut self) -> io::Result<HwCounters> {
        self.total.instructions += self.step.instructions;
        self.total.cycles += self.step.cycles;
        self.total.llc_misses += self.step.llc_misses;
        Ok(self.total)
    }
}

impl CounterSource for FakeCounterSource {
    fn name(&self) -> &'static str {
        "fake counters"
    }

    fn open(&mut self, _tid: Tid) -> io::Result<Box<dyn ThreadCounters>> {
        Ok(Box::new(FakeThread {
            step: self.step,
            total: HwCounters::default(),
        }))
    }

    fn fds_per_thread(&self) -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_is_the_64_bytes_of_ver0() {
        assert_eq!(std::mem::size_of::<PerfEventAttr>(), 64);
        assert_eq!(LLC_READ_MISS, 0x10002);
    }

    #[test]
    fn scaled_as_perf_stat_scales() {
        assert_eq!(scaled(1000, 10, 10), 1000);
        // Counted half the time it was enabled: twice the count.
        assert_eq!(scaled(1000, 10, 5), 2000);
        assert_eq!(scaled(1000, 10, 0), 0);
        assert_eq!(scaled(u64::MAX, 4, 1), u64::MAX);
    }

    #[test]
    fn parse_group_reads_three_events_in_order() {
        let c = parse_group(&[3, 200, 100, 50, 80, 4]).unwrap();
        assert_eq!(
            c,
            HwCounters {
                cycles: 100,
                instructions: 160,
                llc_misses: 8
            }
        );
        assert_eq!(parse_group(&[3, 1, 1, 1]), None);
        assert_eq!(parse_group(&[2, 1, 1, 1, 1, 1]), None);
    }

    fn tree(pmus: &[&str], paranoid: Option<&str>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let devices = d.path().join("sys/bus/event_source/devices");
        std::fs::create_dir_all(devices.join("software")).unwrap();
        for p in pmus {
            std::fs::create_dir_all(devices.join(p)).unwrap();
        }
        if let Some(level) = paranoid {
            let k = d.path().join("proc/sys/kernel");
            std::fs::create_dir_all(&k).unwrap();
            std::fs::write(k.join("perf_event_paranoid"), level).unwrap();
        }
        d
    }

    #[test]
    fn preconditions_name_the_missing_pmu_and_the_paranoid_level() {
        let none = tree(&[], Some("2\n"));
        let e = preconditions(&Root::new(none.path()), true).unwrap_err();
        assert!(matches!(e, NoCounters::NoPmu), "{e}");
        let strict = tree(&["cpu"], Some("3\n"));
        let e = preconditions(&Root::new(strict.path()), false).unwrap_err();
        assert!(matches!(e, NoCounters::Paranoid { level: 3 }), "{e}");
        // Root may, whatever the level.
        assert!(preconditions(&Root::new(strict.path()), true).is_ok());
        let usual = tree(&["cpu_core", "cpu_atom"], Some("2\n"));
        assert!(preconditions(&Root::new(usual.path()), false).is_ok());
        assert_eq!(
            cpu_pmus(&Root::new(usual.path())).unwrap(),
            ["cpu_atom", "cpu_core"]
        );
        // No perf_event_paranoid: a user cannot tell, root may.
        let bare = tree(&["cpu"], None);
        let e = preconditions(&Root::new(bare.path()), false).unwrap_err();
        assert!(matches!(e, NoCounters::NoParanoid), "{e}");
        assert!(preconditions(&Root::new(bare.path()), true).is_ok());
        // No devices directory at all: its io error is the source.
        let empty = tempfile::tempdir().unwrap();
        let e = preconditions(&Root::new(empty.path()), true).unwrap_err();
        let NoCounters::Devices { source } = &e else {
            panic!("{e:?}")
        };
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn no_counters_says_each_reason_in_one_line() {
        let errno = io::Error::from_raw_os_error;
        for (e, line) in [
            (
                NoCounters::NoPmu,
                "no CPU PMU in /sys/bus/event_source/devices (a virtual machine without PMU \
                 passthrough?)"
                    .to_string(),
            ),
            (
                NoCounters::Devices {
                    source: errno(libc::EACCES),
                },
                format!("/sys/bus/event_source/devices: {}", errno(libc::EACCES)),
            ),
            (
                NoCounters::Paranoid { level: 3 },
                "perf_event_paranoid is 3, which forbids them without root or CAP_PERFMON \
                 (`sysctl kernel.perf_event_paranoid=2` allows a user's own threads)"
                    .to_string(),
            ),
            (
                NoCounters::NoParanoid,
                "/proc/sys/kernel/perf_event_paranoid is missing (a kernel without perf \
                 events?)"
                    .to_string(),
            ),
            (
                NoCounters::Open {
                    source: errno(libc::ENOENT),
                },
                format!(
                    "perf_event_open: the PMU does not offer instructions, cycles and LLC \
                     misses ({})",
                    errno(libc::ENOENT)
                ),
            ),
            (
                NoCounters::Open {
                    source: errno(libc::EACCES),
                },
                format!(
                    "perf_event_open: not allowed (perf_event_paranoid, or a seccomp \
                     filter) ({})",
                    errno(libc::EACCES)
                ),
            ),
            (
                NoCounters::Open {
                    source: errno(libc::EMFILE),
                },
                format!(
                    "perf_event_open: out of file descriptors ({})",
                    errno(libc::EMFILE)
                ),
            ),
            (
                NoCounters::Open {
                    source: errno(libc::ENOSYS),
                },
                format!(
                    "perf_event_open: the kernel has no perf_event_open ({})",
                    errno(libc::ENOSYS)
                ),
            ),
            (
                NoCounters::Open {
                    source: errno(libc::EBUSY),
                },
                format!("perf_event_open: it failed ({})", errno(libc::EBUSY)),
            ),
        ] {
            assert_eq!(e.to_string(), line);
            assert!(!line.contains('\n'));
        }
    }

    #[test]
    fn the_fake_adds_its_step_at_every_read() {
        let mut src = FakeCounterSource {
            step: HwCounters {
                instructions: 2000,
                cycles: 1000,
                llc_misses: 10,
            },
        };
        let mut t = src.open(Tid(1)).unwrap();
        t.read().unwrap();
        let c = t.read().unwrap();
        assert_eq!(c.instructions, 4000);
        assert_eq!(c.ipc(), Some(2.0));
        assert_eq!(c.mpki(), Some(5.0));
    }

    #[test]
    fn this_machine_says_whether_it_counts_in_one_line() {
        // Either a group opens on this thread, or one line says why not.
        match PerfSource::system() {
            Ok(mut s) => {
                let me = Tid(nix::unistd::gettid().as_raw());
                let mut g = s.open(me).unwrap();
                let mut x = 0u64;
                for i in 0..100_000u64 {
                    x = std::hint::black_box(x.wrapping_add(i));
                }
                assert!(g.read().unwrap().instructions > 0);
            }
            Err(why) => {
                assert!(!why.to_string().is_empty());
                assert!(!why.to_string().contains('\n'), "{why}");
            }
        }
    }
}
