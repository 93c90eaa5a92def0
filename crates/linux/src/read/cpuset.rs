//! `read_cpuset`: the CPUs a process's cpuset (cgroup v2, cgroup v1, or the older cpuset
//! filesystem) allows, found as hwloc finds them (`hwloc_linux__get_allowed_resources` in
//! `hwloc/topology-linux.c`), so that `topo` shows what `lstopo` shows.
//!
//! ```text
//!  where the hierarchy is mounted         which cpuset the process is in      its CPUs
//!  sys/fs/cgroup/cpuset.cpus.effective ─┐                                   ┌ <mnt><name>/cpuset.cpus.effective (v2)
//!  sys/fs/cgroup/cpuset/cpuset.cpus ────┼─► mount ─► proc/<p>/cpuset, else ─┼ <mnt><name>/cpuset.cpus (v1)
//!  dev/cpuset/cpus ─────────────────────┤             proc/<p>/cgroup       └ <mnt><name>/cpus (cpuset fs)
//!  else the first fitting proc/mounts ──┘             (":cpuset:" or "::")
//! ```
//!
//! Every file is read as sysfs files are (regular files only, non-blocking, size-capped);
//! a cpuset that cannot be found or read restricts nothing, as in hwloc.

use super::Root;
use super::topology::read_sys_opt;
use crate::LinuxError;
use crate::parse::sysfs_value;
use threadbalance_model::CpuSet;

/// How a cpuset hierarchy is mounted: what its CPU file is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// cgroup v2 with the cpuset controller: `cpuset.cpus.effective` (the AND of the
    /// ancestors' masks).
    Cgroup2,
    /// cgroup v1's cpuset hierarchy: `cpuset.cpus`.
    Cgroup1,
    /// The cpuset filesystem, or cgroup v1 mounted with `noprefix`: `cpus`.
    Cpuset,
}

impl Kind {
    fn cpus_file(self) -> &'static str {
        match self {
            Kind::Cgroup2 => "cpuset.cpus.effective",
            Kind::Cgroup1 => "cpuset.cpus",
            Kind::Cpuset => "cpus",
        }
    }
}

/// The cpuset a process is in and the CPUs it allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cpuset {
    /// The cpuset's path in its hierarchy (`/`, `/user.slice/…`, `/dummy`).
    pub name: String,
    /// The CPUs it allows (offline ones included, as the file lists them).
    pub cpus: CpuSet,
}

/// The cpuset of `proc` (`"self"` or a pid) under `root`, or `None` where no cpuset
/// hierarchy is mounted, the process is in none, or its CPU file cannot be read or parsed
/// (hwloc then restricts nothing either). Only a file that is there but is not a regular
/// file, or is too long, is an error.
pub fn read_cpuset(root: &Root, proc: &str) -> Result<Option<Cpuset>, LinuxError> {
    let Some((kind, mount)) = mount_point(root)? else {
        return Ok(None);
    };
    let Some(name) = cpuset_name(root, proc)? else {
        return Ok(None);
    };
    let rel = format!(
        "{}{}/{}",
        mount.trim_start_matches('/'),
        name.trim_end_matches('/'),
        kind.cpus_file()
    );
    let path = root.join(rel.trim_start_matches('/'));
    let Some(text) = read_sys_opt(&path)? else {
        return Ok(None);
    };
    Ok(CpuSet::parse_list(sysfs_value(&text))
        .ok()
        .map(|cpus| Cpuset { name, cpus }))
}

/// Where the cpuset hierarchy is mounted: the standard places first, then `proc/mounts`.
fn mount_point(root: &Root) -> Result<Option<(Kind, String)>, LinuxError> {
    let standard = [
        (
            "sys/fs/cgroup/cpuset.cpus.effective",
            Kind::Cgroup2,
            "/sys/fs/cgroup",
        ),
        (
            "sys/fs/cgroup/cpuset/cpuset.cpus",
            Kind::Cgroup1,
            "/sys/fs/cgroup/cpuset",
        ),
        ("dev/cpuset/cpus", Kind::Cpuset, "/dev/cpuset"),
    ];
    for (file, kind, mount) in standard {
        if read_sys_opt(&root.join(file))?.is_some() {
            return Ok(Some((kind, mount.to_string())));
        }
    }
    let Some(mounts) = read_sys_opt(&root.join("proc/mounts"))? else {
        return Ok(None);
    };
    for line in mounts.lines() {
        let mut fields = line.split_ascii_whitespace();
        let (Some(_), Some(dir), Some(fstype), Some(opts)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let dir = unescape_mount(dir);
        let opts: Vec<&str> = opts.split(',').collect();
        match fstype {
            "cgroup2" => {
                let controllers = format!("{}/cgroup.controllers", dir.trim_start_matches('/'));
                let has_cpuset = read_sys_opt(&root.join(controllers))?
                    .is_some_and(|c| c.split_ascii_whitespace().any(|w| w == "cpuset"));
                if has_cpuset {
                    return Ok(Some((Kind::Cgroup2, dir)));
                }
            }
            "cpuset" => return Ok(Some((Kind::Cpuset, dir))),
            "cgroup" if opts.contains(&"cpuset") => {
                let kind = if opts.contains(&"noprefix") {
                    Kind::Cpuset
                } else {
                    Kind::Cgroup1
                };
                return Ok(Some((kind, dir)));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// `proc/mounts` writes a blank in a path as `\040` (and a tab, newline and backslash as
/// `\011`, `\012`, `\134`).
fn unescape_mount(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |v, b| v.wrapping_mul(8) + (b - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cpuset `proc` is in: the first line of `proc/<p>/cpuset`, else the path of the
/// `:cpuset:` (v1) or `::` (v2) line of `proc/<p>/cgroup`.
fn cpuset_name(root: &Root, proc: &str) -> Result<Option<String>, LinuxError> {
    if let Some(text) = read_sys_opt(&root.join(format!("proc/{proc}/cpuset")))?
        && let Some(name) = text.lines().next().filter(|l| !l.is_empty())
    {
        return Ok(Some(name.to_string()));
    }
    let Some(text) = read_sys_opt(&root.join(format!("proc/{proc}/cgroup")))? else {
        return Ok(None);
    };
    Ok(text.lines().find_map(|line| {
        let (_, rest) = line.split_once(':')?;
        rest.strip_prefix("cpuset:")
            .or_else(|| rest.strip_prefix(':'))
            .map(str::to_string)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn write(root: &std::path::Path, rel: &str, text: &str) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn read_cpuset_cgroup2_reads_the_effective_cpus_of_the_process_cgroup() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, "sys/fs/cgroup/cpuset.cpus.effective", "0-7\n");
        write(r, "sys/fs/cgroup/job/step/cpuset.cpus.effective", "2-3,6\n");
        write(r, "proc/self/cgroup", "0::/job/step\n");
        let c = read_cpuset(&Root::new(r), "self").unwrap().unwrap();
        assert_eq!(c.name, "/job/step");
        assert_eq!(c.cpus.to_string(), "2-3,6");
    }

    #[test]
    fn read_cpuset_v1_found_in_proc_mounts_with_an_escaped_blank() {
        // Not at a standard place: /proc/mounts names "/my cg" as "/my\040cg".
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(
            r,
            "proc/mounts",
            "proc /proc proc rw 0 0\ncg /my\\040cg cgroup rw,relatime,cpuset 0 0\n",
        );
        write(r, "my cg/a/cpuset.cpus", "1\n");
        write(r, "proc/self/cgroup", "5:cpuset:/a\n1:memory:/b\n");
        let c = read_cpuset(&Root::new(r), "self").unwrap().unwrap();
        assert_eq!(c.cpus.to_string(), "1");
    }

    #[test]
    fn read_cpuset_noprefix_cgroup_and_proc_cpuset_name_read_the_cpus_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(
            r,
            "proc/mounts",
            "none /dev/cs cgroup rw,cpuset,noprefix 0 0\n",
        );
        write(r, "dev/cs/p/cpus", "0,4\n");
        write(r, "proc/self/cpuset", "/p\n");
        let c = read_cpuset(&Root::new(r), "self").unwrap().unwrap();
        assert_eq!(
            (c.name.as_str(), c.cpus.to_string().as_str()),
            ("/p", "0,4")
        );
    }

    #[test]
    fn read_cpuset_nothing_mounted_or_unreadable_restricts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        assert_eq!(read_cpuset(&Root::new(r), "self").unwrap(), None);
        // Mounted, but the process's file is missing: nothing either.
        write(r, "sys/fs/cgroup/cpuset.cpus.effective", "0-7\n");
        write(r, "proc/self/cgroup", "0::/gone\n");
        assert_eq!(read_cpuset(&Root::new(r), "self").unwrap(), None);
        // A cgroup2 mount without the cpuset controller is no cpuset hierarchy.
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        write(r, "proc/mounts", "none /cg cgroup2 rw 0 0\n");
        write(r, "cg/cgroup.controllers", "memory pids\n");
        write(r, "proc/self/cgroup", "0::/\n");
        assert_eq!(read_cpuset(&Root::new(r), "self").unwrap(), None);
    }

    #[test]
    fn unescape_mount_turns_octal_escapes_back_into_bytes() {
        assert_eq!(unescape_mount("/a\\040b\\134c"), "/a b\\c");
        assert_eq!(unescape_mount("/plain\\09"), "/plain\\09");
    }
}
