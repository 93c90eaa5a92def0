//! Files others may write, read by a daemon that runs as root: pid files and the config.
//! Each must be read without following a symlink, without blocking on a FIFO, and with a
//! size cap; one bad pid file never takes the others with it. See: issue 39, items 1 and 4.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;
use threadbalance_daemon::read::{
    MAX_CONFIG_BYTES, MAX_PID_FILE_BYTES, Root, read_config, read_pid_files,
};
use threadbalance_model::Pid;

fn mkfifo(path: &Path) {
    nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
}

/// Runs `read` on a thread of its own and gives its answer, or fails the test when it has
/// not answered in 5 s. A reader stuck in `open` on the FIFO `fifo` is let go first (by
/// opening the FIFO's other end), so no thread outlives the test.
fn within_5s<T: Send + 'static>(fifo: &Path, read: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::spawn(move || {
        let _ = tx.send(read());
    });
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(v) => {
            handle.join().unwrap();
            v
        }
        Err(_) => {
            let _writer = std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
                .open(fifo);
            drop(_writer);
            let _ = handle.join();
            panic!("the read blocked on the FIFO {}", fifo.display());
        }
    }
}

/// A root holding `run/good.pid` (pid 4242) and `run/bad.pid` made by `bad`.
fn two_pid_files(bad: impl FnOnce(&Path)) -> (tempfile::TempDir, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("run")).unwrap();
    std::fs::write(dir.path().join("run/good.pid"), "4242\n").unwrap();
    bad(&dir.path().join("run/bad.pid"));
    let files = vec![
        PathBuf::from("/run/bad.pid"),
        PathBuf::from("/run/good.pid"),
    ];
    (dir, files)
}

#[test]
fn read_pid_files_junk_in_one_the_other_still_honoured_and_the_bad_one_named() {
    let (dir, files) = two_pid_files(|p| std::fs::write(p, "hello\n").unwrap());
    let read = read_pid_files(&Root::new(dir.path()), &files);
    assert_eq!(read.pids.into_iter().collect::<Vec<_>>(), [Pid(4242)]);
    assert_eq!(read.bad.len(), 1);
    let line = read.bad[0].to_string();
    assert!(
        line.contains("bad.pid") && line.contains("is not a pid"),
        "{line}"
    );
}

#[test]
fn read_pid_files_fifo_refused_without_blocking() {
    let (dir, files) = two_pid_files(mkfifo);
    let root = Root::new(dir.path());
    let fifo = dir.path().join("run/bad.pid");
    let read = within_5s(&fifo, move || read_pid_files(&root, &files));
    assert_eq!(read.pids.into_iter().collect::<Vec<_>>(), [Pid(4242)]);
    let line = read.bad[0].to_string();
    assert!(line.contains("bad.pid") && line.contains("FIFO"), "{line}");
}

#[test]
fn read_pid_files_symlink_to_dev_zero_not_followed() {
    let (dir, files) = two_pid_files(|p| std::os::unix::fs::symlink("/dev/zero", p).unwrap());
    let read = read_pid_files(&Root::new(dir.path()), &files);
    assert_eq!(read.pids.into_iter().collect::<Vec<_>>(), [Pid(4242)]);
    let line = read.bad[0].to_string();
    assert!(line.contains("symbolic link"), "{line}");
}

#[test]
fn read_pid_files_oversized_file_refused_unread() {
    let (dir, files) = two_pid_files(|p| {
        let mut big = b"17\n".to_vec();
        big.resize(MAX_PID_FILE_BYTES as usize + 1, b'\n');
        std::fs::write(p, big).unwrap();
    });
    let read = read_pid_files(&Root::new(dir.path()), &files);
    // Its first line is a pid, but a file that size is not a pid file: refused whole.
    assert_eq!(read.pids.into_iter().collect::<Vec<_>>(), [Pid(4242)]);
    assert!(
        read.bad[0].to_string().contains("larger than"),
        "{:?}",
        read.bad
    );
}

#[test]
fn read_config_fifo_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("threadbalance.toml");
    mkfifo(&fifo);
    let path = fifo.clone();
    let e = within_5s(&fifo, move || read_config(&path).unwrap_err());
    assert_eq!(
        e.to_string(),
        format!(
            "{}: cannot read: is a FIFO, not a regular file",
            fifo.display()
        )
    );
}

#[test]
fn read_config_dev_zero_link_or_oversized_refused() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("threadbalance.toml");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let e = read_config(&link).unwrap_err().to_string();
    assert!(
        e.ends_with("cannot read: is a symbolic link; not following it"),
        "{e}"
    );
    // The device itself, named directly, is no regular file.
    let e = read_config(Path::new("/dev/zero")).unwrap_err().to_string();
    assert!(
        e.ends_with("is a character device, not a regular file"),
        "{e}"
    );
    let big = dir.path().join("big.toml");
    let mut text = b"# padding\n".repeat(MAX_CONFIG_BYTES as usize / 10);
    text.extend_from_slice(b"# one line too many\n");
    std::fs::write(&big, text).unwrap();
    let e = read_config(&big).unwrap_err().to_string();
    assert!(e.contains("larger than"), "{e}");
}
