//! The small files of `/sys/devices/system/{cpu,node}`: one value each, a number, a CPU
//! list (`0-3,8`) or a CPU mask (`00000000,0000ff00`).
//!
//! Two rules hold for every one of them, as they do in hwloc's Linux discovery, which reads
//! them as C strings:
//!
//! - **The value ends at the first NUL byte.** Some kernels and firmware-backed attributes
//!   write `"0-3\n\0"`; whatever follows the NUL is not part of the value.
//! - **Blanks around the value do not count** (the kernel ends every value with `\n`).
//!
//! A mask is the kernel's `%*pb` form: comma-separated groups of at most 8 hex digits, the
//! most significant group first, each group 32 CPUs. `00000000,00000003` is CPUs 0 and 1;
//! `1,00000000` is CPU 32.
//!
//! ```
//! use threadbalance_linux::parse::{parse_cpumask, sysfs_value};
//! assert_eq!(sysfs_value("0-3\n\0garbage"), "0-3");
//! assert_eq!(parse_cpumask("00000000,00000300\n").unwrap().to_string(), "8-9");
//! assert_eq!(parse_cpumask("1,00000000").unwrap().to_string(), "32");
//! assert!(parse_cpumask("0x3").is_err());
//! ```

use super::ParseError;
use threadbalance_model::{CpuId, CpuSet};

/// Highest CPU number accepted in a mask, as in a list: the kernel's `NR_CPUS` limit is 8192.
const MAX_CPU: u32 = 8191;

/// The value of a sysfs file: the text up to its first NUL byte, without surrounding
/// whitespace.
pub fn sysfs_value(text: &str) -> &str {
    let end = text.find('\0').unwrap_or(text.len());
    text[..end].trim()
}

/// Parses a CPU mask (`ffffffff,00000003`); see the module docs. An empty mask, a group of
/// more than 8 digits, a character that is not a hex digit, or a CPU above 8191 is an error.
pub fn parse_cpumask(text: &str) -> Result<CpuSet, ParseError> {
    let bad = |why: String| ParseError::new("cpumask", why);
    let body = sysfs_value(text);
    if body.is_empty() {
        return Err(bad("empty mask".into()));
    }
    let mut set = CpuSet::new();
    // The last group holds CPUs 0-31, the one before it 32-63, and so on.
    for (k, group) in body.rsplit(',').enumerate() {
        if group.is_empty() || group.len() > 8 || !group.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(format!(
                "{group:?} is not a group of 1 to 8 hex digits"
            )));
        }
        let bits = u32::from_str_radix(group, 16)
            .map_err(|_| bad(format!("{group:?} is not a group of 1 to 8 hex digits")))?;
        for bit in 0..32u32 {
            if bits & (1 << bit) == 0 {
                continue;
            }
            let cpu = u32::try_from(k)
                .ok()
                .and_then(|k| k.checked_mul(32))
                .and_then(|base| base.checked_add(bit))
                .filter(|&c| c <= MAX_CPU)
                .ok_or_else(|| bad(format!("a CPU above {MAX_CPU} is set")))?;
            set.insert(CpuId(cpu));
        }
    }
    Ok(set)
}

/// Parses a signed decimal number file (`physical_package_id` may be `-1`).
pub fn parse_sysfs_int(text: &str) -> Result<i64, ParseError> {
    let v = sysfs_value(text);
    super::parse_i64(v.as_bytes())
        .ok_or_else(|| ParseError::new("number", format!("{v:?} is not a number")))
}

/// Parses a node's `distance` row, which must hold one number per node of the node list
/// (`nodes` of them): the kernel writes the row for the online nodes, in node order, so a
/// row of another length was not written for the list that was read.
pub fn parse_distance_row(text: &str, nodes: usize) -> Result<Vec<u32>, ParseError> {
    let bad = |why: String| ParseError::new("distance", why);
    let row = sysfs_value(text)
        .split_ascii_whitespace()
        .map(|d| {
            super::parse_u64(d.as_bytes())
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| bad(format!("{d:?} is not a distance")))
        })
        .collect::<Result<Vec<u32>, ParseError>>()?;
    if row.len() != nodes {
        return Err(bad(format!(
            "{} distances for {nodes} nodes (one per online node is expected)",
            row.len()
        )));
    }
    Ok(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_value_ends_at_nul_and_trims() {
        assert_eq!(sysfs_value("-1\n\0"), "-1");
        assert_eq!(sysfs_value("\0"), "");
        assert_eq!(sysfs_value("  10 20\n"), "10 20");
    }

    #[test]
    fn parse_cpumask_reads_groups_most_significant_first() {
        // 0x0000ff00 in the last group: bits 8-15.
        assert_eq!(
            parse_cpumask("00000000,0000ff00").unwrap().to_string(),
            "8-15"
        );
        // The first of two groups holds CPUs 32-63: 0xff << 32 is CPUs 32-39.
        assert_eq!(
            parse_cpumask("000000ff,00000000").unwrap().to_string(),
            "32-39"
        );
        // A short first group, as %*pb prints for fewer than 32 possible CPUs.
        assert_eq!(parse_cpumask("f\n\0").unwrap().to_string(), "0-3");
        // 256 CPUs of a POWER7: 8 groups, bits 0-3 set.
        let mut long = "00000000,".repeat(7);
        long.push_str("0000000f");
        assert_eq!(parse_cpumask(&long).unwrap().to_string(), "0-3");
        assert!(parse_cpumask("00000000,00000000").unwrap().is_empty());
    }

    #[test]
    fn parse_cpumask_rejects_malformed_masks() {
        for bad in ["", "\0", "0x3", "3,", ",3", "123456789", "g", "1 2"] {
            assert!(parse_cpumask(bad).is_err(), "{bad:?}");
        }
        // 257 groups: the highest group holds CPUs 8192-8223, above the limit.
        let mut huge = String::from("1");
        huge.push_str(&",00000000".repeat(256));
        assert!(parse_cpumask(&huge).is_err());
    }

    #[test]
    fn parse_distance_row_needs_one_number_per_node() {
        assert_eq!(parse_distance_row("10 21\n\0", 2).unwrap(), [10, 21]);
        let short = parse_distance_row("10\n", 2).unwrap_err();
        assert!(short.why.contains("1 distances for 2 nodes"), "{short}");
        assert!(parse_distance_row("10 21 21\n", 2).is_err());
        assert!(parse_distance_row("10 far\n", 2).is_err());
        assert!(parse_distance_row("10 -1\n", 2).is_err());
    }

    #[test]
    fn parse_sysfs_int_accepts_minus_one_and_nul() {
        assert_eq!(parse_sysfs_int("-1\n\0").unwrap(), -1);
        assert_eq!(parse_sysfs_int("7\n").unwrap(), 7);
        assert!(parse_sysfs_int("zero\n").is_err());
        assert!(parse_sysfs_int("").is_err());
    }
}
