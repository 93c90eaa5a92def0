//! "Is this tid still the thread that started then?" for a pread instead of an open.
//!
//! Every move checks a thread's start time before and after `sched_setaffinity` (see
//! [`crate::actuate`]): a tid can be reused. Read by path, that is an open, a read of
//! `stat` (the costliest file of a task to format) and a close, about 10–15 µs, twice a
//! move; a rotation moving 700 threads a second spent most of its own CPU time there.
//!
//! A file of `/proc/<pid>/task/<tid>/` that is kept open refers to *that* task for good:
//! once the task exits, reading it fails (`ESRCH`), and a later task given the same tid
//! is never seen through it. So the first check opens the task's `schedstat` (the cheapest
//! file) and *then* reads the start time by path; when that matches, the file is kept, and
//! every later check is one `pread` of it: success means the same thread, still there.
//!
//! ```text
//!  start_time(pid, tid):  kept? ── pread ok ──► the start time read when it was kept
//!                           │          └─ fails ─► forget it, then as below
//!                           └─ no ──► open schedstat, then read stat by path ──► keep both
//! ```
//!
//! Why the order makes it exact: if the file refers to a thread that is alive at a later
//! pread, that thread was alive at the path read in between, so the start time read then
//! is its own. At most [`KEPT_TASKS`] files are kept (they come out of the descriptors the
//! sampler leaves in reserve); beyond that, checks are read by path as before.

use crate::read::{Root, read_start_time};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use threadbalance_model::{Pid, Tid};

/// How many tasks keep a file open for the checks.
pub const KEPT_TASKS: usize = 32;

/// Start-time checks through kept files; see the module docs.
#[derive(Debug)]
pub struct AliveCheck {
    root: Root,
    kept: HashMap<(Pid, Tid), (File, u64)>,
}

impl AliveCheck {
    /// Checks for the tasks under `root`'s `/proc`.
    pub fn new(root: Root) -> AliveCheck {
        AliveCheck {
            root,
            kept: HashMap::new(),
        }
    }

    /// The start time of thread `tid` of `pid`; `Ok(None)` when it has gone.
    pub fn start_time(&mut self, pid: Pid, tid: Tid) -> Result<Option<u64>, crate::LinuxError> {
        let mut buf = [0u8; 128];
        if let Some((file, start)) = self.kept.get(&(pid, tid)) {
            if file.read_at(&mut buf, 0).is_ok() {
                return Ok(Some(*start));
            }
            self.kept.remove(&(pid, tid));
        }
        let file = (self.kept.len() < KEPT_TASKS)
            .then(|| File::open(self.root.task_dir(pid, tid).join("schedstat")).ok())
            .flatten();
        let start = read_start_time(&self.root, pid, tid)?;
        if let (Some(file), Some(s)) = (file, start) {
            self.kept.insert((pid, tid), (file, s));
        }
        Ok(start)
    }

    /// Closes the files of threads that have gone, or that `keep` no longer wants.
    pub fn retain(&mut self, mut keep: impl FnMut(Pid, Tid) -> bool) {
        let mut buf = [0u8; 128];
        self.kept
            .retain(|&(pid, tid), (f, _)| keep(pid, tid) && f.read_at(&mut buf, 0).is_ok());
    }

    /// How many tasks keep a file open.
    pub fn kept(&self) -> usize {
        self.kept.len()
    }
}
