//! The exact lock-wait probe (feature `bpf`): the BPF program of `bpf/futex.bpf.c` on the
//! futex syscall tracepoints, loaded with aya (pure Rust, no libbpf, no C compiler: the
//! compiled object is committed next to its source and checked against its recorded
//! SHA-256 by a test).
//!
//! ```text
//!  FutexProbe::load()  ── root? tracefs? verifier? ── no ──► Err(ProbeUnavailable): one
//!        │ yes                                              line in the summary, no error
//!        ▼
//!  7 tracepoints: syscalls:sys_{enter,exit}_futex{,_wait,_waitv}, sys_enter_futex_wake
//!        │
//!  track(pids)   the managed processes into the `targets` map (others cost one lookup)
//!  read()        waits, wakes, edges maps ──► futex::Classifier ──► FutexTotals
//!  totals.fill(snapshot)   Sample::lock = cumulative lock-wait ns, so Window::lock is exact
//! ```
//!
//! A traced wait costs two tracepoint hits and a few map operations in the kernel; an
//! untraced process's futex calls cost one hash lookup per hit, and attached syscall
//! tracepoints slow every futex call of the machine a little. A read costs two system
//! calls per map entry (next key, lookup). Measured by `benches/futex_probe.rs` on a loaded
//! 2-core machine (Linux 6.18): +0.74 µs per untraced futex call, +0.64 µs more per traced
//! wait, 0.35 ms per read with 16 threads and 2.5 ms with 256.
//!
//! Why loading can fail, as the summary words it: not root (no `CAP_BPF` and
//! `CAP_PERFMON`); tracefs not mounted (`mount -t tracefs tracefs /sys/kernel/tracing`);
//! the kernel has no such tracepoint (before Linux 6.7 there is no `futex_wait`, which is
//! then skipped); the verifier refused the program.

use crate::futex::{Classifier, FutexThread, FutexTotals, WaitOp, WaitRecord, WakeRecord};
use aya::maps::{Array, HashMap, MapData};
use aya::programs::TracePoint;
use aya::programs::trace_point::TracePointLink;
use aya::{Ebpf, include_bytes_aligned};
use std::collections::HashSet;
use threadbalance_model::{Pid, Tid};

/// The compiled program (see `bpf/build.sh`).
pub static FUTEX_OBJECT: &[u8] = include_bytes_aligned!("../bpf/futex.bpf.o");

/// `(program, tracepoint)` pairs; the ones marked optional may be missing on older kernels.
const ATTACH: [(&str, &str, bool); 7] = [
    ("futex_enter", "sys_enter_futex", false),
    ("futex_exit", "sys_exit_futex", false),
    ("futex_wait_enter", "sys_enter_futex_wait", true),
    ("futex_wait_exit", "sys_exit_futex_wait", true),
    ("futex_waitv_enter", "sys_enter_futex_waitv", true),
    ("futex_waitv_exit", "sys_exit_futex_waitv", true),
    ("futex_wake_enter", "sys_enter_futex_wake", true),
];

/// Which probe a refusal is about, as its "not root" line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The futex probe (this module).
    Futex,
    /// The run-time counters ([`crate::schedbpf`]).
    Counters,
    /// The trace of who sets masks ([`crate::setbpf`]).
    Setters,
}

impl Probe {
    /// The probe and its verb, as the "not root" line says them.
    fn needs(self) -> &'static str {
        match self {
            Probe::Futex => "the futex probe needs",
            Probe::Counters => "the BPF counters need",
            Probe::Setters => "the trace needs",
        }
    }
}

/// Why a probe is not running: one line for the summary (and `doctor`), made here once
/// from what refused and, where there is one, the underlying error kept as its source.
#[derive(Debug, thiserror::Error)]
pub enum ProbeUnavailable {
    /// Not root: loading BPF needs `CAP_BPF` and `CAP_PERFMON`.
    #[error("not root ({} CAP_BPF and CAP_PERFMON)", probe.needs())]
    NotRoot {
        /// The probe refused.
        probe: Probe,
    },
    /// tracefs' events are found under neither `/sys/kernel/tracing` nor
    /// `/sys/kernel/debug/tracing`.
    #[error("tracefs not mounted (mount -t tracefs tracefs /sys/kernel/tracing)")]
    NoTracefs,
    /// The tracepoint the probe needs first is not there (tracefs perhaps not mounted).
    #[error("no {name} tracepoint (tracefs not mounted?)")]
    NoTracepoint {
        /// The system call or event traced.
        name: &'static str,
    },
    /// The loader's lock, or the trace's, was poisoned by a thread that panicked holding it.
    #[error("{what} was poisoned")]
    Poisoned {
        /// The lock.
        what: &'static str,
    },
    /// The loader refused the object (maps not made, programs not parsed).
    #[error("BPF object refused: {0}")]
    ObjectRefused(#[source] aya::EbpfError),
    /// The object has no program or map of that name.
    #[error("BPF object lacks {what}")]
    Lacks {
        /// The program or map.
        what: &'static str,
    },
    /// The program is not a tracepoint program.
    #[error("{program}: {source}")]
    NotTracepoint {
        /// The program.
        program: &'static str,
        /// aya's error.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// The kernel's verifier refused the program.
    #[error("verifier refused {program}: {source}")]
    Verifier {
        /// The program.
        program: &'static str,
        /// aya's error, with the verifier's log.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// The program could not be attached to its tracepoint.
    #[error("cannot attach to {tracepoint}: {source}")]
    Attach {
        /// The tracepoint.
        tracepoint: &'static str,
        /// aya's error.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// The link of an attached program could not be taken over.
    #[error("{tracepoint}: {source}")]
    Link {
        /// The tracepoint.
        tracepoint: &'static str,
        /// aya's error.
        #[source]
        source: aya::programs::ProgramError,
    },
    /// A map is not of the kind expected; aya's line alone is said.
    #[error("{source}")]
    MapKind {
        /// The map.
        map: &'static str,
        /// aya's error.
        #[source]
        source: aya::maps::MapError,
    },
    /// A process could not be added to the `targets` map.
    #[error("tracking {pid}: {source}")]
    Track {
        /// The process.
        pid: Pid,
        /// aya's error.
        #[source]
        source: aya::maps::MapError,
    },
    /// A value could not be written to a map.
    #[error("{map}: {source}")]
    MapWrite {
        /// The map.
        map: &'static str,
        /// aya's error.
        #[source]
        source: aya::maps::MapError,
    },
    /// The run-time counters' array could not be mapped into this process.
    #[error("cannot map the counters: {0}")]
    MapCounters(#[source] std::io::Error),
}

/// The loaded, attached futex probe.
pub struct FutexProbe {
    // Declared first: detached (all at once) before the programs and maps go.
    _links: Links,
    ebpf: Ebpf,
    tracked: HashSet<i32>,
    classifier: Classifier,
    waits: Vec<WaitRecord>,
    wakes: Vec<WakeRecord>,
    edges: Vec<(FutexThread, FutexThread, u64)>,
    attached: Vec<&'static str>,
}

impl std::fmt::Debug for FutexProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FutexProbe")
            .field("tracked", &self.tracked)
            .field("attached", &self.attached)
            .finish_non_exhaustive()
    }
}

fn thread_of(key: u64) -> FutexThread {
    (Pid((key >> 32) as i32), Tid((key & 0xffff_ffff) as i32))
}

impl FutexProbe {
    /// Loads and attaches the program, or says why it cannot.
    pub fn load() -> Result<FutexProbe, ProbeUnavailable> {
        if !nix::unistd::geteuid().is_root() {
            return Err(ProbeUnavailable::NotRoot {
                probe: Probe::Futex,
            });
        }
        let events = [
            "/sys/kernel/tracing/events",
            "/sys/kernel/debug/tracing/events",
        ];
        if !events
            .iter()
            .any(|e| std::path::Path::new(e).join("syscalls").is_dir())
        {
            return Err(ProbeUnavailable::NoTracefs);
        }
        // No CO-RE relocations (the program reads its syscall arguments only).
        let mut ebpf = load_object(FUTEX_OBJECT)?;
        let mut attached = Vec::new();
        let mut links = Links::default();
        for (name, tracepoint, optional) in ATTACH {
            let have = std::path::Path::new(events[0])
                .join("syscalls")
                .join(tracepoint)
                .is_dir()
                || std::path::Path::new(events[1])
                    .join("syscalls")
                    .join(tracepoint)
                    .is_dir();
            if !have && optional {
                continue;
            }
            attach_tracepoint(&mut ebpf, name, "syscalls", tracepoint, &mut links)?;
            attached.push(tracepoint);
        }
        Ok(FutexProbe {
            _links: links,
            ebpf,
            tracked: HashSet::new(),
            classifier: Classifier::default(),
            waits: Vec::new(),
            wakes: Vec::new(),
            edges: Vec::new(),
            attached,
        })
    }

    /// The tracepoints attached.
    pub fn attached(&self) -> &[&'static str] {
        &self.attached
    }

    /// Traces exactly the processes `pids` from now on (their threads' futex calls).
    pub fn track(&mut self, pids: &[Pid]) -> Result<(), ProbeUnavailable> {
        track_targets(&mut self.ebpf, &mut self.tracked, pids)
    }

    /// Reads the counters and classifies them.
    pub fn read(&mut self) -> Result<&FutexTotals, ProbeUnavailable> {
        let kind = |map: &'static str| {
            move |source: aya::maps::MapError| ProbeUnavailable::MapKind { map, source }
        };
        let map = |name: &'static str| {
            self.ebpf
                .map(name)
                .ok_or(ProbeUnavailable::Lacks { what: name })
        };
        self.waits.clear();
        let waits: HashMap<&MapData, [u64; 3], [u64; 2]> =
            HashMap::try_from(map("waits")?).map_err(kind("waits"))?;
        for entry in waits.iter().flatten() {
            let ([thread, uaddr, class], [ns, count]) = entry;
            if let Some(op) = WaitOp::from_class(class) {
                self.waits.push(WaitRecord {
                    thread: thread_of(thread),
                    uaddr,
                    op,
                    ns,
                    count,
                });
            }
        }
        self.wakes.clear();
        let wakes: HashMap<&MapData, [u64; 3], u64> =
            HashMap::try_from(map("wakes")?).map_err(kind("wakes"))?;
        for ([thread, uaddr, many], count) in wakes.iter().flatten() {
            self.wakes.push(WakeRecord {
                thread: thread_of(thread),
                uaddr,
                many: many != 0,
                count,
            });
        }
        self.edges.clear();
        let edges: HashMap<&MapData, [u64; 2], u64> =
            HashMap::try_from(map("edges")?).map_err(kind("edges"))?;
        for ([waker, woken], count) in edges.iter().flatten() {
            self.edges.push((thread_of(waker), thread_of(woken), count));
        }
        Ok(self
            .classifier
            .update(&self.waits, &self.wakes, &self.edges))
    }

    /// Updates the program could not record because a map was full.
    pub fn dropped(&self) -> u64 {
        self.ebpf
            .map("dropped")
            .and_then(|m| Array::<&MapData, u64>::try_from(m).ok())
            .and_then(|a| a.get(&0, 0).ok())
            .unwrap_or(0)
    }

    /// The totals of the last read.
    pub fn totals(&self) -> &FutexTotals {
        self.classifier.totals()
    }
}

/// A probe's attached tracepoints, detached when dropped without the caller waiting.
///
/// Detaching a BPF program from a tracepoint waits for a grace period (`close` of the link
/// took 14–83 ms each on the 2-core VM, Linux 6.18, more when it is busy): one after the
/// other, the run-time counters' four tracepoints held `run` up for about 0.2–0.3 s after
/// its program had exited, and the futex probe's seven for about 0.5 s more. Closing them
/// on threads of their own and joining those overlapped the waits only in part, and a
/// process that exits without closing them waits all the same: the kernel closes its
/// files, and so waits for the grace periods, before the parent is told it has exited.
///
/// So the last references are handed to a process of their own: [`Drop`] forks a child
/// that closes every other file it inherited (its stdin, stdout and stderr first, so that
/// whoever reads our output sees its end; the locks and journals, so that nothing stays
/// held), hands each link to a grandchild of its own that closes it once the child has
/// closed its copies, and exits. Ours are then not the last references: closing them
/// returns at once and the caller goes on. The kernel still detaches one tracepoint at a
/// time (its lock for trace events is held through each grace period: six links let go
/// at once were gone after 59, 87, 151, 187, 219 and 251 ms), so a host lets go first the
/// links that cost most while they stay (see `crate::sampler`'s retired counters). The
/// programs stay attached for those grace periods, counting nothing (the process they
/// trace has gone, or the host let them go: see `crate::sampler::weigh`). Where no child
/// can be made (`fork` refused), the links are closed here, each on a thread of its own,
/// waited for.
#[derive(Default)]
pub(crate) struct Links(Vec<TracePointLink>);

impl Drop for Links {
    fn drop(&mut self) {
        let links = std::mem::take(&mut self.0);
        if links.is_empty() {
            return;
        }
        if detach_in_a_child() {
            // Our references only: returns at once.
            drop(links);
            return;
        }
        std::thread::scope(|scope| {
            for link in links {
                // On failure the closure, and the link with it, is dropped here.
                let _ = std::thread::Builder::new()
                    .name("tb-detach".into())
                    .spawn_scoped(scope, move || drop(link));
            }
        });
    }
}

/// The BPF links and perf events among this process's open files (`/proc/self/fd`), and
/// the highest file descriptor open.
fn bpf_attachment_fds() -> Option<(Vec<i32>, i32)> {
    let mut links = Vec::new();
    let mut highest = 2;
    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        highest = highest.max(fd);
        let target = std::fs::read_link(entry.path()).unwrap_or_default();
        let target = target.to_string_lossy();
        if matches!(
            target.as_ref(),
            "anon_inode:bpf_link" | "anon_inode:bpf-link" | "anon_inode:[perf_event]"
        ) {
            links.push(fd);
        }
    }
    Some((links, highest))
}

/// Forks the child that closes the BPF links for us (see [`Links`]); whether it runs.
fn detach_in_a_child() -> bool {
    let Some((links, highest)) = bpf_attachment_fds() else {
        return false;
    };
    if links.is_empty() {
        return false;
    }
    // SAFETY: after `fork` the child calls only async-signal-safe functions (`close`,
    // `close_range` through `syscall`, `_exit`) and reads `links`, a vector made before
    // the fork and not changed after it: it allocates nothing, takes no lock, and never
    // returns into Rust code that could.
    match unsafe { libc::fork() } {
        0 => {
            for fd in 0..=highest {
                if !links.contains(&fd) {
                    // SAFETY: closing a descriptor of the child's own table.
                    unsafe { libc::close(fd) };
                }
            }
            // SAFETY: as above, for any descriptor opened after the list was made.
            unsafe {
                libc::syscall(
                    libc::SYS_close_range,
                    (highest + 1) as libc::c_uint,
                    libc::c_uint::MAX,
                    0 as libc::c_uint,
                )
            };
            // One grandchild a link, holding that link alone, so that the grace periods
            // run side by side (one after the other, six links kept the programs attached,
            // and every switch and system call paying for them, for a few tenths of a
            // second after they were let go). A grandchild closes its link only once this
            // child has closed its own copies (the end of a pipe it holds): else this
            // child's closes would be the last references, and wait in turn (five links
            // 64-112 ms each, 0.4 s in all, 2-core VM). Where a grandchild or the pipe
            // cannot be made, the link is closed here, in turn.
            let mut gate = [-1 as libc::c_int; 2];
            // SAFETY: `pipe` writes two descriptors into the array it is given.
            let piped = unsafe { libc::pipe(gate.as_mut_ptr()) } == 0;
            if piped {
                for &fd in &links {
                    // SAFETY: as above; the grandchild closes descriptors, reads, exits.
                    if unsafe { libc::fork() } == 0 {
                        for &other in &links {
                            if other != fd {
                                // SAFETY: a descriptor of the grandchild's own table.
                                unsafe { libc::close(other) };
                            }
                        }
                        // SAFETY: its copy of the write end; then read until every
                        // copy is closed (this child's, when it has let its links go).
                        unsafe { libc::close(gate[1]) };
                        let mut byte = 0u8;
                        // SAFETY: reads at most one byte into `byte`; EOF or an error
                        // ends the wait alike.
                        while unsafe { libc::read(gate[0], (&raw mut byte).cast(), 1) } > 0 {}
                        // SAFETY: the last reference to this link: this waits for the
                        // kernel.
                        unsafe { libc::close(fd) };
                        // SAFETY: as below.
                        unsafe { libc::_exit(0) }
                    }
                }
            }
            for &fd in &links {
                // SAFETY: the child's references; the grandchildren hold the last ones.
                unsafe { libc::close(fd) };
            }
            if piped {
                // SAFETY: the pipe's ends in the child's own table: the grandchildren
                // see EOF and close their links.
                unsafe {
                    libc::close(gate[1]);
                    libc::close(gate[0]);
                }
            }
            // Waits for the grandchildren: orphaned, they would be handed to `run` (its
            // command's subreaper), which takes the children it finds for the command's
            // orphans; this child, the one it knows of (`crate::detached`), it skips.
            // SAFETY: `waitpid` on this child's own children; -1 (none left) ends it.
            while unsafe { libc::waitpid(-1, std::ptr::null_mut(), 0) } > 0 {}
            // SAFETY: ends the child without running the parent's exit handlers.
            unsafe { libc::_exit(0) }
        }
        pid if pid > 0 => {
            crate::detached::note(pid);
            true
        }
        _ => false,
    }
}

/// The loader every BPF object of this process goes through ([`load_object`]).
static LOADER: std::sync::Mutex<Option<aya::EbpfLoader<'static>>> = std::sync::Mutex::new(None);

/// Loads one of our BPF objects (maps made, programs parsed; each program is loaded into
/// the kernel when attached, [`attach_tracepoint`]), or says why not. Every probe of the
/// process (run-time counters, setter trace, futex probe) goes through one loader, made
/// the first time ([`loader_without_btf`]).
pub(crate) fn load_object(object: &[u8]) -> Result<Ebpf, ProbeUnavailable> {
    let mut slot = LOADER.lock().map_err(|_| ProbeUnavailable::Poisoned {
        what: "the BPF loader's lock",
    })?;
    let loader = slot.get_or_insert_with(loader_without_btf);
    loader.load(object).map_err(ProbeUnavailable::ObjectRefused)
}

/// Where the kernel publishes its BTF.
const KERNEL_BTF: &str = "/sys/kernel/btf/vmlinux";

/// A loader that will not use the kernel's BTF, made without reading it where this
/// process may.
///
/// None of our programs has CO-RE relocations (they read their tracepoint records, laid
/// out as tracefs' `format` files give them), so the kernel's BTF is not used. aya 0.13's
/// `EbpfLoader::new` reads and parses it all the same (about 5 MB) before `btf(None)`
/// drops it: 15-20 ms of CPU in a release build on the 2-core VM, 70 ms in a debug one,
/// the largest part of what `run` added to a command's start, and its API offers no way
/// around it. So the loader is made on a thread of its own that first takes a mount
/// namespace of its own (a copy of ours, every mount in it made private so that nothing
/// propagates back) with `/dev/null` bound over [`KERNEL_BTF`]: aya finds an empty file,
/// gives up at once, and the loader is handed back; the namespace goes with the thread.
/// This needs `CAP_SYS_ADMIN`, which loading BPF as root comes with; where any step is
/// refused (a container, seccomp) the loader reads the BTF as before.
fn loader_without_btf() -> aya::EbpfLoader<'static> {
    let made = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("tb-bpf-loader".into())
            .spawn_scoped(scope, || {
                let _ = hide_kernel_btf();
                loader_told_no_btf()
            })
            .ok()
            .and_then(|thread| thread.join().ok())
    });
    made.unwrap_or_else(loader_told_no_btf)
}

/// A loader told not to use the kernel's BTF (made on the calling thread: it reads the BTF
/// if this thread can see it).
fn loader_told_no_btf() -> aya::EbpfLoader<'static> {
    let mut loader = aya::EbpfLoader::new();
    loader.btf(None);
    loader
}

/// For the calling thread alone, hides [`KERNEL_BTF`] behind an empty file (see
/// [`loader_without_btf`]); whether it did.
fn hide_kernel_btf() -> bool {
    use nix::mount::{MsFlags, mount};
    use nix::sched::{CloneFlags, unshare};
    let none: Option<&str> = None;
    unshare(CloneFlags::CLONE_NEWNS).is_ok()
        && mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none).is_ok()
        && mount(Some("/dev/null"), KERNEL_BTF, none, MsFlags::MS_BIND, none).is_ok()
}

/// Loads the object's program `program` (a tracepoint program) into the kernel and attaches
/// it to `category:tracepoint`, each failure one line naming what refused; the link goes
/// to `links`. Shared by the futex probe and the run-time counters (`crate::schedbpf`).
pub(crate) fn attach_tracepoint(
    ebpf: &mut Ebpf,
    program: &'static str,
    category: &str,
    tracepoint: &'static str,
    links: &mut Links,
) -> Result<(), ProbeUnavailable> {
    let prog: &mut TracePoint = ebpf
        .program_mut(program)
        .ok_or(ProbeUnavailable::Lacks { what: program })?
        .try_into()
        .map_err(|source| ProbeUnavailable::NotTracepoint { program, source })?;
    prog.load()
        .map_err(|source| ProbeUnavailable::Verifier { program, source })?;
    let id = prog
        .attach(category, tracepoint)
        .map_err(|source| ProbeUnavailable::Attach { tracepoint, source })?;
    let link = prog
        .take_link(id)
        .map_err(|source| ProbeUnavailable::Link { tracepoint, source })?;
    links.0.push(link);
    Ok(())
}

/// Makes the object's `targets` map (tgid → 1, read by its programs to filter events)
/// hold exactly `pids`, given that it holds `tracked` now: removes the processes gone,
/// inserts the new ones, and leaves the map alone when nothing changed. Shared by the
/// futex probe and the run-time counters (`crate::schedbpf`), whose objects both filter
/// on such a map.
pub(crate) fn track_targets(
    ebpf: &mut Ebpf,
    tracked: &mut HashSet<i32>,
    pids: &[Pid],
) -> Result<(), ProbeUnavailable> {
    let want: HashSet<i32> = pids.iter().map(|p| p.0).collect();
    if want == *tracked {
        return Ok(());
    }
    let map = ebpf
        .map_mut("targets")
        .ok_or(ProbeUnavailable::Lacks { what: "targets" })?;
    let mut targets: HashMap<&mut MapData, u64, u64> =
        HashMap::try_from(map).map_err(|source| ProbeUnavailable::MapKind {
            map: "targets",
            source,
        })?;
    for gone in tracked.difference(&want) {
        let _ = targets.remove(&(*gone as u64));
    }
    for new in want.difference(tracked) {
        targets
            .insert(*new as u64, 1, 0)
            .map_err(|source| ProbeUnavailable::Track {
                pid: Pid(*new),
                source,
            })?;
    }
    *tracked = want;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{Probe, ProbeUnavailable};
    use aya::maps::MapError;
    use aya::programs::ProgramError;
    use threadbalance_model::Pid;

    /// The kernel's BTF as this thread sees it: its size, or `None` when unreadable.
    fn btf_size() -> Option<usize> {
        std::fs::read(super::KERNEL_BTF).ok().map(|b| b.len())
    }

    #[test]
    fn the_kernel_btf_is_hidden_from_the_loader_thread_alone() {
        let ours = btf_size();
        let (hidden, theirs) = std::thread::spawn(|| (super::hide_kernel_btf(), btf_size()))
            .join()
            .unwrap();
        // Hidden where this process may (root, as the BPF probes need): the thread read an
        // empty file; the rest of the process, and the machine, still read the kernel's.
        let root = nix::unistd::geteuid().is_root();
        if root && ours.is_some_and(|n| n > 0) {
            assert!(hidden, "root could not hide the BTF");
            assert_eq!(theirs, Some(0));
        } else {
            assert!(!hidden || theirs == Some(0), "{hidden} {theirs:?}");
        }
        assert_eq!(btf_size(), ours, "the process's own view changed");
        // A loader made that way loads our objects.
        assert!(super::load_object(super::FUTEX_OBJECT).is_ok() || !root);
    }

    /// Each refusal in the one line the summary and `doctor` print.
    #[test]
    fn probe_unavailable_says_each_refusal_in_one_line() {
        let cases = [
            (
                ProbeUnavailable::NotRoot {
                    probe: Probe::Futex,
                },
                "not root (the futex probe needs CAP_BPF and CAP_PERFMON)",
            ),
            (
                ProbeUnavailable::NotRoot {
                    probe: Probe::Counters,
                },
                "not root (the BPF counters need CAP_BPF and CAP_PERFMON)",
            ),
            (
                ProbeUnavailable::NotRoot {
                    probe: Probe::Setters,
                },
                "not root (the trace needs CAP_BPF and CAP_PERFMON)",
            ),
            (
                ProbeUnavailable::NoTracefs,
                "tracefs not mounted (mount -t tracefs tracefs /sys/kernel/tracing)",
            ),
            (
                ProbeUnavailable::NoTracepoint {
                    name: "sched_setaffinity",
                },
                "no sched_setaffinity tracepoint (tracefs not mounted?)",
            ),
            (
                ProbeUnavailable::Poisoned {
                    what: "the BPF loader's lock",
                },
                "the BPF loader's lock was poisoned",
            ),
            (
                ProbeUnavailable::ObjectRefused(aya::EbpfError::NoBTF),
                "BPF object refused: no BTF parsed for object",
            ),
            (
                ProbeUnavailable::Lacks { what: "targets" },
                "BPF object lacks targets",
            ),
            (
                ProbeUnavailable::NotTracepoint {
                    program: "futex_enter",
                    source: ProgramError::UnexpectedProgramType,
                },
                "futex_enter: unexpected program type",
            ),
            (
                ProbeUnavailable::Verifier {
                    program: "on_switch",
                    source: ProgramError::AlreadyLoaded,
                },
                "verifier refused on_switch: the program is already loaded",
            ),
            (
                ProbeUnavailable::Attach {
                    tracepoint: "sched_switch",
                    source: ProgramError::NotLoaded,
                },
                "cannot attach to sched_switch: the program is not loaded",
            ),
            (
                ProbeUnavailable::Link {
                    tracepoint: "sys_enter_futex",
                    source: ProgramError::NotAttached,
                },
                "sys_enter_futex: the program is not attached",
            ),
            (
                ProbeUnavailable::MapKind {
                    map: "waits",
                    source: MapError::InvalidMapType { map_type: 2 },
                },
                "invalid map type 2",
            ),
            (
                ProbeUnavailable::Track {
                    pid: Pid(4321),
                    source: MapError::KeyNotFound,
                },
                "tracking 4321: key not found",
            ),
            (
                ProbeUnavailable::MapWrite {
                    map: "config",
                    source: MapError::OutOfBounds {
                        index: 3,
                        max_entries: 3,
                    },
                },
                "config: the index is 3 but `max_entries` is 3",
            ),
            (
                ProbeUnavailable::MapCounters(std::io::Error::from_raw_os_error(libc::ENOMEM)),
                "cannot map the counters: Cannot allocate memory (os error 12)",
            ),
        ];
        for (why, line) in cases {
            assert_eq!(why.to_string(), line, "{why:?}");
        }
    }

    /// The underlying error stays reachable as the source, where there is one.
    #[test]
    fn probe_unavailable_keeps_the_underlying_error_as_its_source() {
        use std::error::Error;
        let verifier = ProbeUnavailable::Verifier {
            program: "on_switch",
            source: ProgramError::AlreadyLoaded,
        };
        let source = verifier.source().map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("the program is already loaded"));
        assert!(ProbeUnavailable::NoTracefs.source().is_none());
        assert!(
            ProbeUnavailable::Lacks { what: "counters" }
                .source()
                .is_none()
        );
    }

    /// Refusals cross threads: the sampler's error (`std::io::Error::other`) and the
    /// daemon's hosts carry them.
    #[test]
    fn probe_unavailable_is_send_and_sync() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<ProbeUnavailable>();
        send_sync::<crate::adapter::lockprobe::ProbeOff>();
    }
}
