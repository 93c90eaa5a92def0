//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use threadbalance_linux::Root;

/// `fixtures/<rel>` of the workspace.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(rel)
}

/// The root of fixture tree `fixtures/<rel>`.
pub fn fixture_root(rel: &str) -> Root {
    Root::new(fixture(rel))
}

/// Copies the directory tree `from` into `to` (created).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// A temporary copy of fixture tree `fixtures/<rel>`.
pub fn fixture_copy(rel: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&fixture(rel), dir.path());
    dir
}

/// Writes `text` to `root/rel`, creating directories.
pub fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A `stat` line with fields 1-52 as Linux 6.x prints them.
pub fn stat_line(tid: i32, comm: &str, ppid: i32, utime: u64, start: u64, cpu: u32) -> String {
    format!(
        "{tid} ({comm}) S {ppid} {tid} {tid} 0 -1 4194368 120 0 0 0 {utime} 0 0 0 20 0 1 0 \
         {start} 10485760 512 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 {cpu} 0 0 0 0 \
         0 0 0 0 0 0 0 0 0\n"
    )
}

/// Checks a committed BPF object against its recorded SHA-256 and that it is an ELF object
/// for the BPF machine (e_machine 247); `name` is its file under `bpf/` (`futex.bpf.o`).
pub fn assert_bpf_object(name: &str, object: &[u8], recorded: &str) {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(object)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        hex,
        recorded.trim(),
        "bpf/{name} does not match bpf/{name}.sha256: rebuild with bpf/build.sh"
    );
    assert_eq!(&object[..4], b"\x7fELF");
    assert_eq!(u16::from_le_bytes([object[18], object[19]]), 247);
}
