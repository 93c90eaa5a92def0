//! `/proc/<pid>/numa_maps`: one line per mapping, with the pages it has on each node
//! (numa(7)).
//!
//! ```text
//!  7f3a2c000000 default anon=512 dirty=512 N0=256 N1=256 kernelpagesize_kB=4
//!  7f3a40000000 default file=/dev/hugepages/x huge dirty=2 N1=2 kernelpagesize_kB=2048
//!  ^address     ^policy  …                           ^pages on node 1 ^size of each page
//! ```
//!
//! Bytes on node *n* = Σ over lines of `Nn` × page size, where the page size is the line's
//! `kernelpagesize_kB` (so huge pages count at their size) or, when a line does not give
//! it, the base page size passed in. Reading this file walks every page table of the
//! process, so it is sampled rarely.

use super::{ParseError, parse_u64, words};
use threadbalance_model::{NodeId, Pid, ProcessMemory};

/// Parses a `numa_maps` file of process `pid` into bytes per node. `base_page_size` is the
/// host's page size in bytes (`sysconf(_SC_PAGESIZE)`), used for lines without
/// `kernelpagesize_kB`.
///
/// ```
/// use threadbalance_linux::parse::parse_numa_maps;
/// use threadbalance_model::{NodeId, Pid};
/// let text = "1000 default anon=3 N0=1 N1=2 kernelpagesize_kB=4\n\
///             2000 default huge N1=1 kernelpagesize_kB=2048\n";
/// let m = parse_numa_maps(text, Pid(7), 4096).unwrap();
/// assert_eq!(m.on_node(NodeId(0)), 4096);              // 1 page of 4 KiB
/// assert_eq!(m.on_node(NodeId(1)), 2 * 4096 + (2 << 20)); // 2 small pages + 1 huge page
/// ```
pub fn parse_numa_maps(
    text: &str,
    pid: Pid,
    base_page_size: u64,
) -> Result<ProcessMemory, ParseError> {
    let mut per_node: Vec<(NodeId, u64)> = Vec::new();
    let mut line_pages: Vec<(NodeId, u64)> = Vec::new();
    for (i, line) in text.as_bytes().split(|&b| b == b'\n').enumerate() {
        let err = |why: &str| ParseError::new("numa_maps", format!("line {}: {why}", i + 1));
        let mut w = words(line);
        let Some(addr) = w.next() else {
            continue; // blank line
        };
        if !addr.iter().all(u8::is_ascii_hexdigit) {
            return Err(err("does not start with a hexadecimal address"));
        }
        line_pages.clear();
        let mut page_size = base_page_size;
        for token in w {
            if let Some(kb) = token.strip_prefix(b"kernelpagesize_kB=") {
                let kb = parse_u64(kb).ok_or_else(|| err("kernelpagesize_kB is not a number"))?;
                page_size = kb.saturating_mul(1024);
            } else if let [b'N', rest @ ..] = token {
                let Some(eq) = rest.iter().position(|&b| b == b'=') else {
                    continue; // not a node count (no such token today)
                };
                let node = parse_u64(&rest[..eq])
                    .and_then(|n| u16::try_from(n).ok())
                    .ok_or_else(|| err("node number is malformed"))?;
                let pages =
                    parse_u64(&rest[eq + 1..]).ok_or_else(|| err("page count is malformed"))?;
                line_pages.push((NodeId(node), pages));
            }
        }
        for &(node, pages) in &line_pages {
            let bytes = pages.saturating_mul(page_size);
            match per_node.iter_mut().find(|(n, _)| *n == node) {
                Some((_, b)) => *b = b.saturating_add(bytes),
                None => per_node.push((node, bytes)),
            }
        }
    }
    per_node.retain(|&(_, b)| b > 0);
    per_node.sort_unstable_by_key(|&(n, _)| n);
    Ok(ProcessMemory {
        pid,
        bytes_per_node: per_node,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_numa_maps_sums_pages_per_node_with_each_lines_page_size() {
        let text = "\
55b65f41d000 default file=/usr/bin/cat mapped=2 N0=2 kernelpagesize_kB=4
7f0000000000 interleave:0-3 anon=8 dirty=8 N0=2 N1=2 N2=2 N3=2 kernelpagesize_kB=4
7f1000000000 bind:1 anon=1 dirty=1 N1=1 kernelpagesize_kB=2048
7f2000000000 default huge anon=1 N3=1 kernelpagesize_kB=1048576
7f3000000000 default file=/x\\040y mapped=3 N2=3
7fff00000000 default stack anon=1 dirty=1 N0=1 kernelpagesize_kB=4
";
        let m = parse_numa_maps(text, Pid(9), 4096).unwrap();
        // node 0: 2 + 2 + 1 pages of 4 KiB = 20480
        // node 1: 2 pages of 4 KiB + 1 page of 2 MiB = 8192 + 2097152 = 2105344
        // node 2: 2 pages of 4 KiB + 3 pages of the base size (4096) = 20480
        // node 3: 2 pages of 4 KiB + 1 page of 1 GiB = 8192 + 1073741824 = 1073750016
        assert_eq!(
            m.bytes_per_node,
            vec![
                (NodeId(0), 20_480),
                (NodeId(1), 2_105_344),
                (NodeId(2), 20_480),
                (NodeId(3), 1_073_750_016),
            ]
        );
        assert_eq!(m.pid, Pid(9));
    }

    #[test]
    fn parse_numa_maps_empty_and_unmapped_lines() {
        assert!(
            parse_numa_maps("", Pid(1), 4096)
                .unwrap()
                .bytes_per_node
                .is_empty()
        );
        // A mapping with no page present lists no node; a truncated line counts what it has.
        let m = parse_numa_maps("1000 default\n2000 default anon=1 N1=1", Pid(1), 4096).unwrap();
        assert_eq!(m.bytes_per_node, vec![(NodeId(1), 4096)]);
    }

    #[test]
    fn parse_numa_maps_garbage_is_error() {
        for bad in [
            "zzz default N0=1",
            "1000 default N0=x",
            "1000 default Nx=1",
            "1000 default N99999=1",
            "1000 default N0=1 kernelpagesize_kB=big",
        ] {
            assert!(parse_numa_maps(bad, Pid(1), 4096).is_err(), "{bad:?}");
        }
        // Huge counts saturate instead of overflowing.
        let m = parse_numa_maps(
            "1 d N0=18446744073709551615 kernelpagesize_kB=4\n2 d N0=5",
            Pid(1),
            4096,
        )
        .unwrap();
        assert_eq!(m.on_node(NodeId(0)), u64::MAX);
    }
}
