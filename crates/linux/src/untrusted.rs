//! Files and directories someone else may write: how a tool that runs as root reads them
//! without being steered by whoever wrote them.
//!
//! A pid file, a config file, a journal in a state directory: each may be replaced by a
//! symlink to a file we must not touch, a FIFO that blocks whoever opens it, a device that
//! never ends (`/dev/zero`), or a file too big to hold. [`read_untrusted`] is the one way
//! such a file is read:
//!
//! ```text
//!   open(O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
//!     │  the last component a symlink ──► UntrustedError::Symlink     (ELOOP)
//!     │  a FIFO: the open returns at once (O_NONBLOCK), no writer needed
//!   fstat(the open file) ── not a regular file ──► UntrustedError::NotRegular
//!   read at most cap + 1 bytes ── more than cap ──► UntrustedError::TooLarge
//! ```
//!
//! The checks are made on the file that was opened (`fstat`, not `stat` then `open`), so
//! nothing can be swapped in between. Directories on the way to the file are followed as
//! usual (`/var/run` is a symlink on many systems); what guards them is who may write in
//! them, which [`check_private_dir`] checks for the directories the tool writes in.
//!
//! ```
//! use threadbalance_linux::untrusted::{UntrustedError, read_untrusted};
//! let dir = tempfile::tempdir().unwrap();
//! let pid = dir.path().join("app.pid");
//! std::fs::write(&pid, "1234\n").unwrap();
//! assert_eq!(read_untrusted(&pid, 64).unwrap(), b"1234\n");
//! let link = dir.path().join("link.pid");
//! std::os::unix::fs::symlink(&pid, &link).unwrap();
//! assert!(matches!(read_untrusted(&link, 64), Err(UntrustedError::Symlink { .. })));
//! assert!(matches!(read_untrusted(&pid, 4), Err(UntrustedError::TooLarge { .. })));
//! ```

use std::fs::{File, FileType, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why a file someone else may write was not read. Each names the path.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedError {
    /// The path is a symbolic link; it is not followed.
    #[error("{path}: is a symbolic link; not following it")]
    Symlink {
        /// The file.
        path: PathBuf,
    },
    /// The path is not a regular file (a FIFO, a device, a socket, a directory).
    #[error("{path}: is a {kind}, not a regular file")]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead (`FIFO`, `character device`, …).
        kind: &'static str,
    },
    /// The file holds more than the reader accepts.
    #[error("{path}: larger than {cap} bytes; not reading it")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The most bytes accepted.
        cap: u64,
    },
    /// The file is not UTF-8 text.
    #[error("{path}: not UTF-8 text")]
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// Opening or reading failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

impl UntrustedError {
    /// Whether the file does not exist (for a pid file: its program is not running).
    pub fn is_not_found(&self) -> bool {
        matches!(self, UntrustedError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }

    /// The file concerned.
    pub fn path(&self) -> &Path {
        match self {
            UntrustedError::Symlink { path }
            | UntrustedError::NotRegular { path, .. }
            | UntrustedError::TooLarge { path, .. }
            | UntrustedError::NotText { path }
            | UntrustedError::Io { path, .. } => path,
        }
    }
}

/// What a file type is called in messages.
pub fn kind_of(t: &FileType) -> &'static str {
    if t.is_fifo() {
        "FIFO"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

/// Opens `path` for reading the way the module docs say: not through a symlink, never
/// blocking, and only when it is a regular file (checked on the open file).
pub fn open_untrusted(path: &Path) -> Result<File, UntrustedError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| opened(path, e))?;
    let meta = file.metadata().map_err(|source| UntrustedError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.file_type().is_file() {
        return Err(UntrustedError::NotRegular {
            path: path.to_path_buf(),
            kind: kind_of(&meta.file_type()),
        });
    }
    Ok(file)
}

/// The error of an `open` with `O_NOFOLLOW`: `ELOOP` is the symlink it refused.
pub(crate) fn opened(path: &Path, e: io::Error) -> UntrustedError {
    match e.raw_os_error() {
        Some(libc::ELOOP) => UntrustedError::Symlink {
            path: path.to_path_buf(),
        },
        _ => UntrustedError::Io {
            path: path.to_path_buf(),
            source: e,
        },
    }
}

/// The bytes of `file` (opened from `path`), at most `cap` of them: more is
/// [`UntrustedError::TooLarge`], and at most `cap + 1` bytes are ever read.
pub fn read_capped(file: &mut File, path: &Path, cap: u64) -> Result<Vec<u8>, UntrustedError> {
    let mut bytes = Vec::new();
    file.take(cap.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|source| UntrustedError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    if bytes.len() as u64 > cap {
        return Err(UntrustedError::TooLarge {
            path: path.to_path_buf(),
            cap,
        });
    }
    Ok(bytes)
}

/// The whole of the file at `path`, read as the module docs say, when it holds at most
/// `cap` bytes.
pub fn read_untrusted(path: &Path, cap: u64) -> Result<Vec<u8>, UntrustedError> {
    let mut file = open_untrusted(path)?;
    read_capped(&mut file, path, cap)
}

/// [`read_untrusted`] as UTF-8 text; bytes that are not UTF-8 are
/// [`UntrustedError::NotText`].
pub fn read_untrusted_text(path: &Path, cap: u64) -> Result<String, UntrustedError> {
    String::from_utf8(read_untrusted(path, cap)?).map_err(|_| UntrustedError::NotText {
        path: path.to_path_buf(),
    })
}

/// Why a directory the tool writes in was refused. One line each, naming the directory.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    /// Not a directory, or a symlink (not followed).
    #[error("{0}: not a directory")]
    NotDir(PathBuf),
    /// The directory belongs to another user.
    #[error("{path}: owned by uid {owner}, not by our effective uid {own}")]
    Owner {
        /// The directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        own: u32,
    },
    /// Group or others may write in it, so they could put files or links in it.
    #[error("{path}: mode {mode:o} lets others write in it (want 0700)")]
    Writable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// It could not be looked at or created.
    #[error("{path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

/// Checks that `dir` is a directory (not a symlink to one) owned by `own_uid` that group
/// and others cannot write in: the only kind the tool keeps its state or its socket in.
pub fn check_private_dir(dir: &Path, own_uid: u32) -> Result<(), DirError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| DirError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !meta.is_dir() {
        return Err(DirError::NotDir(dir.to_path_buf()));
    }
    if meta.uid() != own_uid {
        return Err(DirError::Owner {
            path: dir.to_path_buf(),
            owner: meta.uid(),
            own: own_uid,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(DirError::Writable {
            path: dir.to_path_buf(),
            mode: meta.mode() & 0o7777,
        });
    }
    Ok(())
}

/// Creates `dir` (and missing parents) mode 0700 when it does not exist, then
/// [`check_private_dir`]s it.
pub fn create_private_dir(dir: &Path, own_uid: u32) -> Result<(), DirError> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(dir)
            .map_err(|source| DirError::Io {
                path: dir.to_path_buf(),
                source,
            })?,
        _ => {}
    }
    check_private_dir(dir, own_uid)
}

/// Our effective uid.
pub fn effective_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn read_untrusted_fifo_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("app.pid");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        // No writer: a blocking open would wait here for ever.
        let e = read_untrusted(&fifo, 64).unwrap_err();
        assert!(
            matches!(e, UntrustedError::NotRegular { kind: "FIFO", .. }),
            "{e}"
        );
        assert!(e.to_string().contains("app.pid"), "{e}");
    }

    #[test]
    fn read_untrusted_symlink_to_dev_zero_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("app.pid");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = read_untrusted(&link, 64).unwrap_err();
        assert!(matches!(e, UntrustedError::Symlink { .. }), "{e}");
    }

    #[test]
    fn read_untrusted_device_refused_and_oversized_file_capped() {
        let e = read_untrusted(Path::new("/dev/zero"), 64).unwrap_err();
        assert!(
            matches!(
                e,
                UntrustedError::NotRegular {
                    kind: "character device",
                    ..
                }
            ),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'1'; 65]).unwrap();
        let e = read_untrusted(&big, 64).unwrap_err();
        assert!(matches!(e, UntrustedError::TooLarge { cap: 64, .. }), "{e}");
        std::fs::write(&big, vec![b'1'; 64]).unwrap();
        assert_eq!(read_untrusted(&big, 64).unwrap().len(), 64);
    }

    #[test]
    fn read_untrusted_text_missing_and_not_utf8_named() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        assert!(read_untrusted_text(&gone, 64).unwrap_err().is_not_found());
        let bad = dir.path().join("bad");
        std::fs::write(&bad, [0xff, 0xfe]).unwrap();
        let e = read_untrusted_text(&bad, 64).unwrap_err();
        assert!(matches!(e, UntrustedError::NotText { .. }), "{e}");
        assert_eq!(e.path(), bad);
    }

    #[test]
    fn check_private_dir_writable_or_foreign_or_symlink_refused() {
        let dir = tempfile::tempdir().unwrap();
        let me = effective_uid();
        assert!(check_private_dir(dir.path(), me).is_ok());
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_private_dir(&open, me).unwrap_err();
        assert!(matches!(e, DirError::Writable { mode: 0o777, .. }), "{e}");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(matches!(
            check_private_dir(&link, me),
            Err(DirError::NotDir(_))
        ));
        // Owned by someone else: another uid than ours is asked for, so this holds whether
        // or not the test runs as root.
        let e = check_private_dir(dir.path(), me.wrapping_add(1)).unwrap_err();
        assert!(matches!(e, DirError::Owner { .. }), "{e}");
    }

    #[test]
    fn create_private_dir_makes_a_0700_directory() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a/b");
        create_private_dir(&state, effective_uid()).unwrap();
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
    }
}
