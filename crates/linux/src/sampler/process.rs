//! The managed processes: each one's task directory (kept open, listed again only when
//! its link count moves), the children found in `children` files or by scanning every
//! process's parent, and `numa_maps`.

use super::Sampler;
use crate::LinuxError;
use crate::parse::parse_stat_bytes;
use crate::read::{Root, read_process_memory};
use nix::dir::Dir;
use nix::fcntl::OFlag;
use nix::sys::stat::{Mode, fstat};
use std::io;
use std::os::unix::ffi::OsStrExt;
use threadbalance_model::{Pid, Snapshot, Tid};

/// A managed process.
#[derive(Debug)]
pub(super) struct Process {
    pub(super) pid: Pid,
    /// `<root>/proc/<pid>/task/`, with the trailing slash, for appending `<tid>/stat`.
    pub(super) task_prefix: String,
    /// Its task directory, kept open and rewound for each listing. The open directory pins
    /// the process: once it exits, listing fails with `ENOENT` even if its pid is reused.
    pub(super) dir: Option<Dir>,
    /// The tids of the last listing, in listing order.
    pub(super) tids: Vec<Tid>,
    /// The task directory's link count just before the last listing.
    pub(super) nlink: Option<libc::nlink_t>,
    /// Whether it was listed in the last sample (its task directory could be read).
    pub(super) alive: bool,
    /// Whether the faster run-time source was told of it ([`Sampler::refresh_counters`]),
    /// so that it counts the threads it creates from then on.
    pub(super) counted: bool,
    /// Whether it was counted already when its task directory was last listed: only
    /// then does "no thread born" from the source say that listing is still whole. A
    /// process adopted in a sample is told to the source at the next: threads it creates
    /// meanwhile are not counted, and were never listed (its workers went unseen).
    pub(super) listed_counted: bool,
}

impl Sampler {
    /// Adds the processes found in `children` files to the managed list.
    pub(super) fn adopt_found(&mut self) {
        let mut found = std::mem::take(&mut self.scratch.found);
        for pid in found.drain(..) {
            if self.procs.iter().all(|p| p.pid != pid) {
                self.procs.push(Process::new(&self.root, pid));
            }
        }
        self.scratch.found = found;
    }

    /// Whether the orphanage's children are looked for in this sample (see
    /// [`Sampler::adopt_orphans_of`]): the first time, every [`super::ORPHANS_EVERY`], and
    /// when a managed process exited in this sample (its children were orphaned then).
    pub(super) fn orphans_due(&mut self) -> bool {
        let now = self.now;
        let exited = self.procs.iter().any(|p| !p.alive);
        let Some((_, looked)) = self.orphanage.as_mut() else {
            return false;
        };
        let due = exited || looked.is_none_or(|at| now.saturating_sub(at) >= super::ORPHANS_EVERY);
        if due {
            *looked = Some(now);
        }
        due
    }

    /// Lists the children of every thread of the orphanage into `scratch.found`, leaving
    /// out the targets (the command itself, which may be a zombie by now) and the
    /// processes the tool forked to let its BPF links go ([`crate::detached`]). A file
    /// that cannot be read is skipped: the next look tries again.
    pub(super) fn find_orphans(&mut self) {
        let Some((pid, _)) = self.orphanage else {
            return;
        };
        let task_dir = self.root.proc_dir(pid).join("task");
        let Ok(tasks) = std::fs::read_dir(&task_dir) else {
            return;
        };
        for task in tasks.flatten() {
            let Ok(text) = std::fs::read(task.path().join("children")) else {
                continue;
            };
            for w in crate::parse::words(&text) {
                if let Some(child) = crate::parse::parse_u64(w).and_then(|c| i32::try_from(c).ok())
                    && !self.targets.contains(&Pid(child))
                    && !crate::detached::is_ours(child)
                {
                    self.scratch.found.push(Pid(child));
                }
            }
        }
    }

    /// Without `children` files: reads every `proc/<pid>/stat` for its parent and adopts the
    /// descendants of managed processes.
    pub(super) fn scan_children(&mut self) -> Result<(), LinuxError> {
        let proc_dir = self.root.join("proc");
        let entries = std::fs::read_dir(&proc_dir).map_err(|e| LinuxError::io(&proc_dir, e))?;
        let mut parent_of: Vec<(Pid, Pid)> = Vec::new();
        for entry in entries.flatten() {
            let Some(pid) = crate::parse::parse_u64(entry.file_name().as_bytes())
                .and_then(|n| i32::try_from(n).ok())
            else {
                continue;
            };
            let Ok(text) = std::fs::read(entry.path().join("stat")) else {
                continue; // exited meanwhile, or not readable
            };
            if let Ok(stat) = parse_stat_bytes(&text, self.cfg.facts.ticks_per_sec) {
                parent_of.push((Pid(pid), stat.ppid));
            }
        }
        // Adopt until nothing changes: a grandchild may be listed before its parent joins.
        // The orphanage's children count as managed ones' (see `adopt_orphans_of`).
        let orphanage = self.orphanage.map(|(pid, _)| pid);
        loop {
            let before = self.procs.len();
            for &(pid, ppid) in &parent_of {
                let managed = |p: Pid| self.procs.iter().any(|x| x.pid == p);
                let parent = managed(ppid) || Some(ppid) == orphanage;
                if parent
                    && !managed(pid)
                    && !self.targets.contains(&pid)
                    && !crate::detached::is_ours(pid.0)
                {
                    self.procs.push(Process::new(&self.root, pid));
                }
            }
            if self.procs.len() == before {
                return Ok(());
            }
        }
    }

    /// Reads `numa_maps` of every managed process into `into.memory`.
    pub(super) fn sample_memory(&mut self, into: &mut Snapshot) -> Result<(), LinuxError> {
        for p in &self.procs {
            match read_process_memory(&self.root, p.pid, self.cfg.facts.page_size) {
                Ok(m) => into.memory.push(m),
                // Gone, or not ours to read: memory is optional.
                Err(LinuxError::NoSuchProcess { .. } | LinuxError::PermissionDenied { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

impl Process {
    pub(super) fn new(root: &Root, pid: Pid) -> Process {
        let mut task_prefix = root
            .proc_dir(pid)
            .join("task")
            .to_string_lossy()
            .into_owned();
        task_prefix.push('/');
        Process {
            pid,
            task_prefix,
            dir: None,
            tids: Vec::new(),
            nlink: None,
            alive: true,
            counted: false,
            listed_counted: false,
        }
    }

    /// Appends the tids listed in the task directory to `out`. With `keep` the directory
    /// stays open between calls (listing it again rewinds it).
    pub(super) fn list_tids(&mut self, keep: bool, out: &mut Vec<Tid>) -> io::Result<()> {
        if self.dir.is_none() {
            let dir = Dir::open(
                self.task_prefix.as_str(),
                OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
                Mode::empty(),
            )?;
            self.dir = Some(dir);
        }
        let Some(dir) = self.dir.as_mut() else {
            return Ok(());
        };
        // The link count before the listing: a thread created meanwhile makes the next
        // count differ, so it is listed next time at the latest.
        self.nlink = if keep {
            fstat(&*dir).ok().map(|st| st.st_nlink)
        } else {
            None
        };
        let mut result = Ok(());
        for entry in dir.iter() {
            match entry {
                Ok(entry) => {
                    if let Some(tid) = crate::parse::parse_u64(entry.file_name().to_bytes())
                        .and_then(|n| i32::try_from(n).ok())
                    {
                        out.push(Tid(tid));
                    }
                }
                Err(e) => {
                    result = Err(io::Error::from(e));
                    break;
                }
            }
        }
        if !keep || result.is_err() {
            self.dir = None;
        }
        result
    }
}
