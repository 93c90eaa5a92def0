//! The state directory: each running instance's journal, and one lock per managed
//! process, so that a crash leaves enough behind to put every mask back.
//!
//! ```text
//!  <state dir>/                /run/threadbalance for root, $XDG_RUNTIME_DIR/threadbalance
//!    journal.<pid>.<start>     our ledger records (see `ledger`), flock'd while we live
//!    lock.<pid>.<start time>   flock'd while an instance manages that process
//! ```
//!
//! The directory is the tool's own: [`StateDir::create`] refuses one that is not a
//! directory owned by the effective uid, or that group or others may write in (the check
//! the control socket's directory gets, [`crate::untrusted::check_private_dir`]), and so
//! does [`StateDir::restore_stale`]. Even so, nothing in it is opened through a symlink:
//! journals and locks are created with `O_CREAT | O_EXCL | O_NOFOLLOW`, an existing one is
//! opened with `O_NOFOLLOW | O_NONBLOCK` and checked with `fstat` (a regular file, ours),
//! and a journal is read with a size cap ([`MAX_JOURNAL_BYTES`]). A journal owned by
//! another user is never replayed.
//!
//! Liveness is the lock, not the pid: the kernel drops a `flock` when its holder dies,
//! however it dies, and a reused pid cannot hold a lock it never took. So a journal whose
//! lock can be taken is stale — its owner is dead — and [`StateDir::restore_stale`] replays
//! and removes it. The directory is always a parameter; only
//! [`StateDir::default_path`] knows where it lives on a real system.

use crate::LinuxError;
use crate::affinity::{affinity_of, set_affinity};
use crate::ledger::{Ledger, Record, RestoreReport, World, replay};
use crate::read::{Root, read_start_time};
use crate::untrusted::{self, UntrustedError, effective_uid};
use nix::fcntl::{Flock, FlockArg};
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use threadbalance_model::{CpuSet, Pid, Tid};

/// The most bytes of a journal that are read back: far more than compaction lets one grow
/// to (one line per thread changed), so a larger file is not ours.
pub const MAX_JOURNAL_BYTES: u64 = 64 << 20;

/// The directory of journals and locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateDir {
    path: PathBuf,
}

/// A process already managed by another live instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// The process.
    pub pid: Pid,
    /// The other instance's pid, when its lock file names it.
    pub holder: Option<Pid>,
}

impl StateDir {
    /// A state directory at `path` (created when first used).
    pub fn new(path: impl Into<PathBuf>) -> StateDir {
        StateDir { path: path.into() }
    }

    /// Where the state lives: `/run/threadbalance` for root, else `threadbalance` under
    /// `$XDG_RUNTIME_DIR` (passed in as `runtime_dir`); `None` when neither applies.
    pub fn default_path(is_root: bool, runtime_dir: Option<&OsStr>) -> Option<PathBuf> {
        if is_root {
            return Some(PathBuf::from("/run/threadbalance"));
        }
        runtime_dir
            .filter(|d| !d.is_empty())
            .map(|d| Path::new(d).join("threadbalance"))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the directory (mode 0700) if it does not exist, and refuses it unless it is
    /// a directory (not a symlink) owned by the effective uid that group and others cannot
    /// write in ([`LinuxError::Dir`]).
    pub fn create(&self) -> Result<(), LinuxError> {
        untrusted::create_private_dir(&self.path, effective_uid())?;
        Ok(())
    }

    /// Opens a fresh journal for this process, locked, with its header (the magic line
    /// and the owner) written.
    pub fn open_journal(&self, root: &Root) -> Result<Journal, LinuxError> {
        self.create()?;
        let me = Pid(std::process::id() as i32);
        let start = read_start_time(root, me, Tid(me.0))?.unwrap_or(0);
        let path = self.path.join(format!("journal.{}.{start}", me.0));
        let file = match open_journal_file(&path) {
            Ok(f) => f,
            // Left by an earlier instance of this very process (same pid and start time):
            // taken over below if nobody holds it, as long as it is a file of ours.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => owned_existing(&path, true)?,
            Err(e) => return Err(untrusted::opened(&path, e).into()),
        };
        let file = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| LinuxError::io(&path, io::Error::from(e)))?;
        let _ = file.set_len(0);
        let mut j = Journal {
            file,
            path,
            lines: 2,
        };
        let mut head = format!("{}\n", crate::ledger::MAGIC);
        head.push_str(&Record::Owner { pid: me, start }.to_line());
        if let Some(id) = boot_id(root) {
            head.push_str(&Record::Boot(id).to_line());
        }
        j.file
            .write_all(head.as_bytes())
            .map_err(|e| LinuxError::io(&j.path, e))?;
        Ok(j)
    }

    /// Takes the lock on process `pid` (started at `start`): `Err(Busy)` when another live
    /// instance holds it. The lock lasts as long as the returned file.
    pub fn lock_process(
        &self,
        pid: Pid,
        start: u64,
    ) -> Result<Result<ProcessLock, Busy>, LinuxError> {
        self.create()?;
        let path = self.path.join(format!("lock.{}.{start}", pid.0));
        let file = open_lock_file(&path)?;
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            // A stale lock file removed by `restore_stale` between our open and our lock:
            // the lock we hold is on a file nobody else will open. Take a fresh one.
            Ok(f) if !same_file(&f, &path) => {
                drop(f);
                self.lock_process(pid, start)
            }
            Ok(mut f) => {
                let _ = f.set_len(0);
                let _ = f.write_all(format!("{}\n", std::process::id()).as_bytes());
                Ok(Ok(ProcessLock { _file: f, path }))
            }
            Err((mut f, nix::errno::Errno::EWOULDBLOCK)) => {
                let text = untrusted::read_capped(&mut f, &path, 32).unwrap_or_default();
                let holder = String::from_utf8_lossy(&text).trim().parse().ok().map(Pid);
                Ok(Err(Busy { pid, holder }))
            }
            Err((_, e)) => Err(LinuxError::io(&path, io::Error::from(e))),
        }
    }

    /// Replays and removes every journal whose owner has died (its lock can be taken);
    /// journals of live instances are left alone, and journals that cannot be read are
    /// listed in [`RestoreReport::unreadable`] and left too. Returns what was done, and
    /// how many journals were replayed.
    pub fn restore_stale(&self, root: &Root) -> Result<(RestoreReport, usize), LinuxError> {
        let mut report = RestoreReport::default();
        let mut count = 0;
        match std::fs::symlink_metadata(&self.path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((report, 0)),
            _ => untrusted::check_private_dir(&self.path, effective_uid())?,
        }
        let entries = match std::fs::read_dir(&self.path) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((report, 0)),
            Err(e) => return Err(LinuxError::io(&self.path, e)),
        };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(OsStr::to_str)
                    .is_some_and(|n| n.starts_with("journal."))
            })
            .collect();
        paths.sort();
        self.remove_stale_locks();
        for path in paths {
            match self.restore_one(&path, root) {
                Ok(Some(r)) => {
                    report.add(r);
                    count += 1;
                }
                Ok(None) => {}
                // One unreadable journal must not keep the others, or a new instance,
                // from running: it is reported and left where it is.
                Err(e) => report.unreadable.push(e),
            }
        }
        Ok((report, count))
    }
}

impl StateDir {
    /// Replays the journal at `path` if its owner has died, and removes it when every
    /// mask was handled; `None` when it belongs to a live instance or had nothing in it.
    fn restore_one(&self, path: &Path, root: &Root) -> Result<Option<RestoreReport>, LinuxError> {
        let file = match open_existing(path) {
            Ok(f) => f,
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let meta = file.metadata().map_err(|e| LinuxError::io(path, e))?;
        if meta.uid() != effective_uid() {
            // Not written by this user's instances: never replayed, left where it is.
            return Err(LinuxError::parse(
                path,
                format!(
                    "owned by uid {}, not by our effective uid {}; ignored",
                    meta.uid(),
                    effective_uid()
                ),
            ));
        }
        let Some(mut file) = lock_unless_owned(file, path, root) else {
            return Ok(None); // its owner lives
        };
        if !same_file(&file, path) {
            // Compacted by its live owner between our open and our lock: what we hold is
            // the old, unlinked file, not a dead instance's journal.
            return Ok(None);
        }
        let bytes = untrusted::read_capped(&mut file, path, MAX_JOURNAL_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| UntrustedError::NotText {
            path: path.to_path_buf(),
        })?;
        if !text.contains('\n') {
            // Killed before its header was written whole: nothing was changed yet.
            std::fs::remove_file(path).map_err(|e| LinuxError::io(path, e))?;
            return Ok(None);
        }
        let ledger = Ledger::parse(&text).map_err(|why| LinuxError::parse(path, why))?;
        if let (Some(then), Some(now)) = (&ledger.boot, boot_id(root))
            && *then != now
        {
            // Written before a reboot (a state directory on disk): every thread it
            // names is gone, and its tids and start times may name new ones.
            std::fs::remove_file(path).map_err(|e| LinuxError::io(path, e))?;
            return Ok(None);
        }
        let r = replay(&ledger, &mut SystemWorld::new(root.clone()));
        if r.failures().next().is_none() {
            std::fs::remove_file(path).map_err(|e| LinuxError::io(path, e))?;
        }
        Ok(Some(r))
    }

    /// Removes the lock files nobody holds (left by instances that died).
    fn remove_stale_locks(&self) {
        let Ok(entries) = std::fs::read_dir(&self.path) else {
            return;
        };
        for e in entries.flatten() {
            let is_lock = e
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with("lock."));
            if !is_lock {
                continue;
            }
            if let Ok(f) = open_existing(&e.path())
                && let Ok(held) = Flock::lock(f, FlockArg::LockExclusiveNonblock)
            {
                let _ = std::fs::remove_file(e.path());
                drop(held);
            }
        }
    }
}

/// How long a journal whose owner has died may stay locked before it is left for the next
/// restore: the time a child of the owner takes to close what it inherited.
const DEAD_OWNERS_LOCK: std::time::Duration = std::time::Duration::from_secs(1);

/// Locks the journal at `path`, or `None` when a live instance holds it.
///
/// The lock can outlive its owner for a moment: an instance that lets its BPF links go
/// forks a child to close them (`crate::bpf`), and the child holds a copy of every file
/// the instance had, the journal's lock with them, until it has closed them, its first
/// act. Killed just after such a fork, the instance leaves a journal still locked when
/// `restore` runs, on a loaded machine for milliseconds. So where the journal's name says
/// its owner (`journal.<pid>.<start>`) and that process has gone, the lock is waited for,
/// up to [`DEAD_OWNERS_LOCK`].
fn lock_unless_owned(mut file: File, path: &Path, root: &Root) -> Option<Flock<File>> {
    let mut until = None;
    loop {
        file = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(locked) => return Some(locked),
            Err((file, _)) => file,
        };
        let until = match until {
            Some(until) => until,
            None if owner_lives(path, root) => return None,
            None => *until.insert(std::time::Instant::now() + DEAD_OWNERS_LOCK),
        };
        if std::time::Instant::now() >= until {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// Whether the instance a journal's name gives (`journal.<pid>.<start>`) still runs: that
/// pid with that start time. A name that says no owner counts as a live one (its lock is
/// then never waited for).
fn owner_lives(path: &Path, root: &Root) -> bool {
    let owner = path
        .file_name()
        .and_then(OsStr::to_str)
        .and_then(|n| n.strip_prefix("journal."))
        .and_then(|rest| rest.split_once('.'))
        .and_then(|(pid, start)| Some((pid.parse::<i32>().ok()?, start.parse::<u64>().ok()?)));
    let Some((pid, start)) = owner else {
        return true;
    };
    matches!(read_start_time(root, Pid(pid), Tid(pid)), Ok(Some(now)) if now == start)
}

/// This boot's id (`proc/sys/kernel/random/boot_id` under `root`).
fn boot_id(root: &Root) -> Option<String> {
    let id = std::fs::read_to_string(root.join("proc/sys/kernel/random/boot_id")).ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains(' ')).then(|| id.to_string())
}

/// Whether the open file `f` is still the file at `path`.
fn same_file(f: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (f.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The lock on one managed process; released (and its file removed) when dropped.
#[derive(Debug)]
pub struct ProcessLock {
    _file: Flock<File>,
    path: PathBuf,
}

impl Drop for ProcessLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// This instance's journal: records are appended, one `write` each, before the change
/// they announce; the file stays open (and locked) from start to finish, so writing a
/// record never needs a new file descriptor.
#[derive(Debug)]
pub struct Journal {
    file: Flock<File>,
    path: PathBuf,
    /// Lines written to the file.
    lines: usize,
}

impl Journal {
    /// Appends `r`. With `O_APPEND`, one write of a short line lands whole or not at all
    /// as far as a killed writer is concerned; a cut line is ignored when read.
    pub fn append(&mut self, r: &Record) -> io::Result<()> {
        self.file.write_all(r.to_line().as_bytes())?;
        self.lines += 1;
        Ok(())
    }

    /// Appends `records` in one write: a killed writer leaves a prefix of them, the last
    /// perhaps cut (and ignored when read).
    pub fn append_all(&mut self, records: &[&Record]) -> io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let text: String = records.iter().map(|r| r.to_line()).collect();
        self.file.write_all(text.as_bytes())?;
        self.lines += records.len();
        Ok(())
    }

    /// Lines written to the file so far.
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// Replaces the file by one holding only `records` (a ledger's
    /// [`Ledger::to_records`]), so a long run does not grow it without end. The new file
    /// is written beside the old one and locked before it is renamed over it, so the path
    /// always names a locked journal: another instance never takes us for dead.
    pub fn rewrite(&mut self, records: &[Record]) -> io::Result<()> {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = self.path.with_file_name(format!("compact.{name}"));
        let _ = std::fs::remove_file(&tmp);
        let file = open_journal_file(&tmp)?;
        let mut file = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, e)| io::Error::from(e))?;
        file.set_len(0)?;
        let mut text = format!("{}\n", crate::ledger::MAGIC);
        for r in records {
            text.push_str(&r.to_line());
        }
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        // The old file, unlinked now, is unlocked as it is dropped.
        self.file = file;
        self.lines = records.len() + 1;
        Ok(())
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the journal: everything it listed has been put back.
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }

    /// Reads the journal back from its own open file.
    pub fn read_back(&mut self) -> io::Result<String> {
        let mut f = self.file.try_clone()?;
        f.rewind()?;
        let mut s = String::new();
        f.read_to_string(&mut s)?;
        Ok(s)
    }
}

/// The real system as the replay rules see it: `/proc` under a root, and the affinity
/// system calls.
#[derive(Debug, Clone)]
pub struct SystemWorld {
    root: Root,
    /// Who set each mask, where a trace is loaded (see [`crate::setters`]).
    trace: Option<crate::setters::Trace>,
}

impl SystemWorld {
    /// The system whose `/proc` is under `root`.
    pub fn new(root: Root) -> SystemWorld {
        SystemWorld { root, trace: None }
    }

    /// Asks `trace` who set each mask from now on ([`World::setter`]).
    pub fn set_trace(&mut self, trace: crate::setters::Trace) {
        self.trace = Some(trace);
    }

    /// Stops reading the trace: masks are judged from the masks alone from now on.
    pub fn drop_trace(&mut self) {
        self.trace = None;
    }

    /// Whether a trace of who sets masks is in use.
    pub fn traced(&self) -> bool {
        self.trace.is_some()
    }

    fn stat_field(&self, pid: Pid, field: &str) -> Option<i32> {
        let text = std::fs::read_to_string(self.root.proc_dir(pid).join("status")).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.trim().parse().ok())
    }
}

impl World for SystemWorld {
    fn start_time(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        read_start_time(&self.root, pid, tid).ok().flatten()
    }
    fn affinity(&mut self, tid: Tid) -> io::Result<CpuSet> {
        affinity_of(tid)
    }
    fn set_affinity(&mut self, tid: Tid, mask: &CpuSet) -> io::Result<()> {
        set_affinity(tid, mask)
    }
    fn cpuset(&mut self, pid: Pid, tid: Tid) -> Option<CpuSet> {
        crate::origin::read_cpuset(&self.root, pid, tid)
    }
    fn migrations(&mut self, pid: Pid, tid: Tid) -> Option<u64> {
        crate::origin::read_migrations(&self.root, pid, tid)
    }
    fn setter(
        &mut self,
        key: threadbalance_model::ThreadKey,
        current: &CpuSet,
    ) -> crate::origin::Setter {
        self.trace
            .as_ref()
            .map_or(crate::origin::Setter::Unknown, |t| t.setter(key, current))
    }
    fn slice(&mut self, tid: Tid) -> io::Result<crate::slice::Slice> {
        crate::slice::attr_of(tid).map(|a| a.as_slice(None))
    }
    fn set_slice(&mut self, tid: Tid, s: crate::slice::Slice) -> io::Result<()> {
        crate::slice::set_slice(tid, s)
    }
    fn threads(&mut self, pid: Pid) -> Vec<Tid> {
        let dir = self.root.proc_dir(pid).join("task");
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok().map(Tid))
            .collect()
    }
    fn children(&mut self, pid: Pid) -> Vec<Pid> {
        let mut out = Vec::new();
        let tids = self.threads(pid);
        let mut had_file = false;
        // One `children` file per thread, each an open, a read or two and a close into one
        // buffer (no size query, no path or text allocated per thread): the host reads
        // every thread's file every 100 ms when children are not sampled.
        let mut path = self
            .root
            .proc_dir(pid)
            .join("task")
            .to_string_lossy()
            .into_owned();
        let base = path.len();
        let mut buf = Vec::with_capacity(256);
        for tid in tids {
            path.truncate(base);
            let _ = write!(path, "/{}/children", tid.0);
            buf.clear();
            if read_small(Path::new(&path), &mut buf).is_ok() {
                had_file = true;
                out.extend(
                    crate::parse::words(&buf)
                        .filter_map(crate::parse::parse_u64)
                        .filter_map(|n| i32::try_from(n).ok())
                        .map(Pid),
                );
            }
        }
        if !had_file {
            // No `children` files (CONFIG_PROC_CHILDREN off): every process's parent.
            let procs = std::fs::read_dir(self.root.join("proc"))
                .into_iter()
                .flatten();
            for e in procs.flatten() {
                if let Some(p) = e.file_name().to_str().and_then(|n| n.parse().ok())
                    && self.parent(Pid(p)) == Some(pid)
                {
                    out.push(Pid(p));
                }
            }
        }
        out
    }
    fn process_of(&mut self, tid: Tid) -> Option<Pid> {
        // `proc/<tid>` exists for every thread, though only leaders are listed.
        self.stat_field(Pid(tid.0), "Tgid:").map(Pid)
    }
    fn parent(&mut self, pid: Pid) -> Option<Pid> {
        self.stat_field(pid, "PPid:").map(Pid)
    }
}

/// Appends the whole of a small `/proc` file to `buf` with open, read, close: no `statx`
/// for a size hint (what `std::fs::read` adds, and `/proc` cannot give), and no read that
/// only finds the end. A read shorter than asked is the end of the text, as for the
/// sampler's `pread`s (the kernel formats such a file in one go, a page at a time).
fn read_small(path: &Path, buf: &mut Vec<u8>) -> io::Result<()> {
    let mut f = File::open(path)?;
    let mut chunk = [0u8; 512];
    loop {
        let n = f.read(&mut chunk)?;
        buf.extend_from_slice(&chunk[..n]);
        if n < chunk.len() {
            return Ok(());
        }
    }
}

/// Creates a journal file (mode 0600, close-on-exec) for reading and appending: a new
/// file only (`O_EXCL`), never through a symlink.
fn open_journal_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .create_new(true)
        .append(true)
        .read(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path)
}

/// Opens an existing journal or lock for reading and writing: not through a symlink,
/// without blocking, and only a regular file (checked on the open file).
fn open_existing(path: &Path) -> Result<File, UntrustedError> {
    open_existing_as(path, false)
}

/// [`open_existing`], with `O_APPEND` when `append` (a journal taken over).
fn open_existing_as(path: &Path, append: bool) -> Result<File, UntrustedError> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .append(append)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| untrusted::opened(path, e))?;
    let meta = file.metadata().map_err(|source| UntrustedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(UntrustedError::NotRegular {
            path: path.to_path_buf(),
            kind: untrusted::kind_of(&meta.file_type()),
        });
    }
    Ok(file)
}

/// The lock file at `path`: created new (`O_EXCL | O_NOFOLLOW`, mode 0600), or, when one
/// is there, opened as [`open_existing`] does and taken only if it is ours.
fn open_lock_file(path: &Path) -> Result<File, LinuxError> {
    let created = OpenOptions::new()
        .create_new(true)
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
        .open(path);
    match created {
        Ok(f) => Ok(f),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => owned_existing(path, false),
        Err(e) => Err(untrusted::opened(path, e).into()),
    }
}

/// [`open_existing_as`], and only a file owned by our effective uid.
fn owned_existing(path: &Path, append: bool) -> Result<File, LinuxError> {
    let f = open_existing_as(path, append)?;
    let meta = f.metadata().map_err(|e| LinuxError::io(path, e))?;
    if meta.uid() != effective_uid() {
        return Err(LinuxError::parse(
            path,
            format!("owned by uid {}, not by us; not using it", meta.uid()),
        ));
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_path_root_uses_run_and_users_their_runtime_dir() {
        assert_eq!(
            StateDir::default_path(true, Some(OsStr::new("/x"))),
            Some(PathBuf::from("/run/threadbalance"))
        );
        assert_eq!(
            StateDir::default_path(false, Some(OsStr::new("/run/user/1000"))),
            Some(PathBuf::from("/run/user/1000/threadbalance"))
        );
        assert_eq!(StateDir::default_path(false, None), None);
        assert_eq!(StateDir::default_path(false, Some(OsStr::new(""))), None);
    }

    /// A directory under `parent` owned by `nobody` (uid 65534), mode 0700: another user's.
    /// The tests run as root, which may give a directory away.
    fn nobodys_dir(parent: &Path) -> PathBuf {
        let dir = parent.join("nobodys");
        std::fs::create_dir(&dir).unwrap();
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        nix::unistd::chown(&dir, nobody, None).unwrap();
        dir
    }

    // See: issue 39, item 2.
    #[test]
    fn create_world_writable_or_foreign_dir_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = StateDir::new(&open).create().unwrap_err();
        assert!(e.to_string().contains("lets others write in it"), "{e}");
        assert!(StateDir::new(&open).lock_process(Pid(77), 5).is_err());
        let theirs = nobodys_dir(tmp.path());
        let e = StateDir::new(&theirs).create().unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        assert!(
            StateDir::new(&theirs)
                .open_journal(&Root::system())
                .is_err()
        );
        // A symlink to a directory of ours is not followed either.
        let link = tmp.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        assert!(StateDir::new(&link).create().is_err());
        assert!(StateDir::new(tmp.path().join("fresh")).create().is_ok());
    }

    // See: issue 39, item 2: a forged journal in a directory another user can write.
    #[test]
    fn restore_stale_foreign_dir_refused_and_foreign_journal_ignored() {
        let tmp = tempfile::tempdir().unwrap();
        let forged = format!("{}\nset 999999999 999999999 1 0 0\n", crate::ledger::MAGIC);
        let theirs = nobodys_dir(tmp.path());
        std::fs::write(theirs.join("journal.999999999.1"), &forged).unwrap();
        let e = StateDir::new(&theirs)
            .restore_stale(&Root::system())
            .unwrap_err();
        assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        assert!(theirs.join("journal.999999999.1").exists());
        // In our own directory, a journal another user owns is not replayed (a replay
        // would count the thread it names as vanished) and is left where it is.
        let ours = tmp.path().join("ours");
        StateDir::new(&ours).create().unwrap();
        let journal = ours.join("journal.999999999.1");
        std::fs::write(&journal, &forged).unwrap();
        let nobody = Some(nix::unistd::Uid::from_raw(65534));
        nix::unistd::chown(&journal, nobody, None).unwrap();
        let (report, count) = StateDir::new(&ours).restore_stale(&Root::system()).unwrap();
        assert_eq!((count, report.vanished), (0, 0), "{report:?}");
        assert_eq!(report.unreadable.len(), 1, "{report:?}");
        let LinuxError::Parse { path, .. } = &report.unreadable[0] else {
            panic!("{report:?}")
        };
        assert_eq!(path, &journal);
        assert!(
            report.unreadable[0]
                .to_string()
                .contains("owned by uid 65534"),
            "{report:?}"
        );
        assert!(journal.exists());
    }

    // See: issue 39, item 2: a symlink race on a lock or journal path.
    #[test]
    fn lock_and_journal_symlink_at_path_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let state = StateDir::new(tmp.path().join("state"));
        state.create().unwrap();
        let target = tmp.path().join("root-only");
        std::fs::write(&target, "secret\n").unwrap();
        std::os::unix::fs::symlink(&target, state.path().join("lock.77.5")).unwrap();
        let e = state.lock_process(Pid(77), 5).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let me = std::process::id() as i32;
        let start = read_start_time(&Root::system(), Pid(me), Tid(me))
            .unwrap()
            .unwrap();
        let journal = state.path().join(format!("journal.{me}.{start}"));
        std::os::unix::fs::symlink(&target, &journal).unwrap();
        let e = state.open_journal(&Root::system()).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "secret\n");
        // A FIFO among the journals is reported, and does not hold up the restore.
        std::fs::remove_file(&journal).unwrap();
        let fifo = state.path().join("journal.999999996.1");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let (report, _) = state.restore_stale(&Root::system()).unwrap();
        assert_eq!(report.unreadable.len(), 1, "{report:?}");
        assert!(
            matches!(report.unreadable[0], LinuxError::Untrusted(_)),
            "{report:?}"
        );
        assert!(
            report.unreadable[0].to_string().contains("FIFO"),
            "{report:?}"
        );
    }

    #[test]
    fn lock_process_second_taker_is_told_who_holds_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let first = state.lock_process(Pid(77), 5).unwrap().unwrap();
        // flock locks belong to the open file, so a second open in this same process
        // conflicts exactly as another instance's would.
        let busy = state.lock_process(Pid(77), 5).unwrap().unwrap_err();
        assert_eq!(busy.pid, Pid(77));
        assert_eq!(busy.holder, Some(Pid(std::process::id() as i32)));
        drop(first);
        assert!(state.lock_process(Pid(77), 5).unwrap().is_ok());
    }

    #[test]
    fn restore_stale_waits_for_a_dead_owners_journal_a_child_still_holds() {
        // An instance killed just after forking the child that lets its BPF links go: the
        // child holds the journal's lock until it has closed what it inherited. Its owner
        // (the pid in its name) has gone, so the restore waits for the lock and replays it.
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let journal = dir.path().join("journal.999999995.1");
        std::fs::write(
            &journal,
            format!("{}\nset 999999999 999999999 1 0 0\n", crate::ledger::MAGIC),
        )
        .unwrap();
        let held = Flock::lock(
            File::open(&journal).unwrap(),
            FlockArg::LockExclusiveNonblock,
        )
        .unwrap();
        let child = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            drop(held);
        });
        let (report, count) = state.restore_stale(&Root::system()).unwrap();
        child.join().unwrap();
        assert_eq!((count, report.vanished), (1, 1), "{report:?}");
        assert!(!journal.exists());
    }

    #[test]
    fn restore_stale_skips_a_live_journal_and_replays_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::new(dir.path());
        let root = Root::system();
        let mut live = state.open_journal(&root).unwrap();
        live.append(&Record::Since(0)).unwrap();
        // A journal nobody holds: its owner died. It names a thread that does not exist.
        let dead = dir.path().join("journal.999999999");
        std::fs::write(
            &dead,
            format!("{}\nset 999999999 999999999 1 0 0\n", crate::ledger::MAGIC),
        )
        .unwrap();
        // One killed before its header was written whole: nothing to replay, removed.
        let cut = dir.path().join("journal.999999998.1");
        std::fs::write(&cut, "threadbalance-jour").unwrap();
        // Compacting keeps the path locked and the contents given.
        live.rewrite(&[Record::Since(7)]).unwrap();
        assert_eq!(live.lines(), 2);
        // One from an earlier boot, naming a thread that exists now (ourselves, tid and
        // start time alike): removed unreplayed. (Its original is the current mask, so
        // even a wrong replay would change nothing; it would count as `already`.)
        let me = std::process::id() as i32;
        let my_start = read_start_time(&root, Pid(me), Tid(me)).unwrap().unwrap();
        let my_mask = affinity_of(Tid(me)).unwrap();
        let old = dir.path().join("journal.999999997.1");
        std::fs::write(
            &old,
            format!(
                "{}\nboot 00000000-0000-0000-0000-000000000000\nset {me} {me} {my_start} {my_mask} {my_mask}\n",
                crate::ledger::MAGIC
            ),
        )
        .unwrap();
        // And one that is not a journal at all: reported, left alone, the others replayed.
        let junk = dir.path().join("journal.junk");
        std::fs::write(&junk, "hello\nworld\n").unwrap();
        let (report, count) = state.restore_stale(&root).unwrap();
        assert_eq!(report.unreadable.len(), 1, "{report:?}");
        assert!(
            matches!(
                &report.unreadable[0],
                LinuxError::Parse { path, why: crate::Malformed::Journal(_) } if *path == junk
            ),
            "{report:?}"
        );
        assert!(
            report.unreadable[0].to_string().contains("not a journal"),
            "{report:?}"
        );
        assert!(junk.exists());
        assert!(!cut.exists());
        assert!(!old.exists());
        assert_eq!(report.already, 0, "never replayed: {report:?}");
        assert_eq!(count, 1);
        assert_eq!(report.vanished, 1);
        assert!(!dead.exists());
        assert!(live.path().exists());
        assert_eq!(
            live.read_back().unwrap(),
            format!("{}\nsince 7\n", crate::ledger::MAGIC)
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
