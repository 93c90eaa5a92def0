//! A set of logical CPUs of any size (the kernel supports up to 8192; affinity masks of 4096
//! CPUs are common on large machines).
//!
//! Stored as a bit vector with no trailing zero words, so equal sets compare equal whatever
//! their history. The text form is the kernel's CPU list (`0-3,8,10-11`), as in
//! `/sys/devices/system/cpu/online` and `Cpus_allowed_list` of `/proc/<pid>/status`.

use crate::{CpuId, ModelError};
use serde::{Serialize, Serializer};
use std::fmt;

/// A set of logical CPUs.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct CpuSet {
    words: Vec<u64>,
}

impl CpuSet {
    /// The empty set.
    pub fn new() -> CpuSet {
        CpuSet { words: Vec::new() }
    }

    /// The set holding exactly `cpu`.
    pub fn single(cpu: CpuId) -> CpuSet {
        let mut s = CpuSet::new();
        s.insert(cpu);
        s
    }

    /// Adds `cpu`; returns whether it was absent.
    pub fn insert(&mut self, cpu: CpuId) -> bool {
        let (w, b) = Self::pos(cpu);
        if self.words.len() <= w {
            self.words.resize(w + 1, 0);
        }
        let was = self.words[w] & b != 0;
        self.words[w] |= b;
        !was
    }

    /// Removes `cpu`; returns whether it was present.
    pub fn remove(&mut self, cpu: CpuId) -> bool {
        let (w, b) = Self::pos(cpu);
        let Some(word) = self.words.get_mut(w) else {
            return false;
        };
        let was = *word & b != 0;
        *word &= !b;
        self.trim();
        was
    }

    /// Whether `cpu` is in the set.
    pub fn contains(&self, cpu: CpuId) -> bool {
        let (w, b) = Self::pos(cpu);
        self.words.get(w).is_some_and(|word| word & b != 0)
    }

    /// Number of CPUs in the set.
    pub fn len(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// The lowest CPU in the set.
    pub fn first(&self) -> Option<CpuId> {
        self.iter().next()
    }

    /// One more than the highest CPU id in the set (0 when empty): the size of a kernel mask
    /// that can hold it.
    pub fn bound(&self) -> u32 {
        match self.words.last() {
            None => 0,
            Some(w) => (self.words.len() as u32 - 1) * 64 + (64 - w.leading_zeros()),
        }
    }

    /// The CPUs in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = CpuId> + '_ {
        self.words.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                if w == 0 {
                    return None;
                }
                let bit = w.trailing_zeros();
                w &= w - 1;
                Some(CpuId(i as u32 * 64 + bit))
            })
        })
    }

    /// CPUs in both sets.
    pub fn intersection(&self, other: &CpuSet) -> CpuSet {
        let mut words: Vec<u64> = self
            .words
            .iter()
            .zip(&other.words)
            .map(|(a, b)| a & b)
            .collect();
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet { words }
    }

    /// CPUs in either set.
    pub fn union(&self, other: &CpuSet) -> CpuSet {
        let n = self.words.len().max(other.words.len());
        let words = (0..n)
            .map(|i| {
                self.words.get(i).copied().unwrap_or(0) | other.words.get(i).copied().unwrap_or(0)
            })
            .collect();
        CpuSet { words }
    }

    /// CPUs in `self` but not in `other`.
    pub fn difference(&self, other: &CpuSet) -> CpuSet {
        let mut words: Vec<u64> = self
            .words
            .iter()
            .enumerate()
            .map(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0))
            .collect();
        while words.last() == Some(&0) {
            words.pop();
        }
        CpuSet { words }
    }

    /// Whether every CPU of `self` is in `other`.
    pub fn is_subset(&self, other: &CpuSet) -> bool {
        self.words
            .iter()
            .enumerate()
            .all(|(i, a)| a & !other.words.get(i).copied().unwrap_or(0) == 0)
    }

    /// Whether the two sets share a CPU.
    pub fn intersects(&self, other: &CpuSet) -> bool {
        self.words.iter().zip(&other.words).any(|(a, b)| a & b != 0)
    }

    /// The bit words, lowest CPUs first (the layout of a kernel `cpu_set_t`).
    pub fn as_words(&self) -> &[u64] {
        &self.words
    }

    /// Builds a set from bit words, lowest CPUs first.
    pub fn from_words(words: &[u64]) -> CpuSet {
        let mut s = CpuSet {
            words: words.to_vec(),
        };
        s.trim();
        s
    }

    /// Parses the kernel's CPU list format: `0-3,8,10-11`, possibly empty, possibly with
    /// a trailing newline, and with the `a-b:stride/group` form of the kernel's `cpulist_parse`.
    ///
    /// ```
    /// use threadbalance_model::{CpuId, CpuSet};
    /// let s = CpuSet::parse_list("0-2,8\n").unwrap();
    /// assert_eq!(s.iter().collect::<Vec<_>>(), [CpuId(0), CpuId(1), CpuId(2), CpuId(8)]);
    /// assert_eq!(s.to_string(), "0-2,8");
    /// assert!(CpuSet::parse_list("3-1").is_err());
    /// ```
    pub fn parse_list(text: &str) -> Result<CpuSet, ModelError> {
        /// Highest CPU number accepted: the kernel's NR_CPUS limit is 8192.
        const MAX_CPU: u32 = 8191;
        let bad = |why: &str| ModelError::CpuList {
            text: text.to_string(),
            why: why.to_string(),
        };
        let num = |s: &str| -> Result<u32, ModelError> {
            let n: u32 = s
                .trim()
                .parse()
                .map_err(|_| bad(&format!("{s:?} is not a CPU number")))?;
            if n > MAX_CPU {
                return Err(bad(&format!("CPU {n} is above {MAX_CPU}")));
            }
            Ok(n)
        };
        let mut set = CpuSet::new();
        let body = text.trim();
        if body.is_empty() {
            return Ok(set);
        }
        for part in body.split(',') {
            let part = part.trim();
            if part.is_empty() {
                return Err(bad("empty element"));
            }
            let (range, stride) = match part.split_once(':') {
                None => (part, None),
                Some((r, s)) => {
                    let (used, group) = s.split_once('/').ok_or_else(|| bad("stride needs a/b"))?;
                    (r, Some((num(used)?, num(group)?)))
                }
            };
            let (lo, hi) = match range.split_once('-') {
                None => {
                    let n = num(range)?;
                    (n, n)
                }
                Some((a, b)) => (num(a)?, num(b)?),
            };
            if lo > hi {
                return Err(bad(&format!("range {lo}-{hi} runs backwards")));
            }
            match stride {
                None => {
                    for c in lo..=hi {
                        set.insert(CpuId(c));
                    }
                }
                Some((used, group)) => {
                    if used == 0 || group == 0 || used > group {
                        return Err(bad("stride a/b needs 0 < a <= b"));
                    }
                    let mut start = lo;
                    while start <= hi {
                        for c in start..(start + used).min(hi + 1) {
                            set.insert(CpuId(c));
                        }
                        start += group;
                    }
                }
            }
        }
        Ok(set)
    }

    fn pos(cpu: CpuId) -> (usize, u64) {
        ((cpu.0 / 64) as usize, 1u64 << (cpu.0 % 64))
    }

    fn trim(&mut self) {
        while self.words.last() == Some(&0) {
            self.words.pop();
        }
    }
}

impl FromIterator<CpuId> for CpuSet {
    fn from_iter<I: IntoIterator<Item = CpuId>>(iter: I) -> CpuSet {
        let mut s = CpuSet::new();
        for c in iter {
            s.insert(c);
        }
        s
    }
}

impl fmt::Display for CpuSet {
    /// The kernel's CPU list form, `0-3,8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.iter().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while let Some(&next) = it.peek() {
                if next.0 == hi.0 + 1 {
                    hi = next;
                    it.next();
                } else {
                    break;
                }
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuSet({self})")
    }
}

impl Serialize for CpuSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpuset_4096_cpus_round_trips_through_list() {
        let s = CpuSet::parse_list("0-4095").unwrap();
        assert_eq!(s.len(), 4096);
        assert_eq!(s.bound(), 4096);
        assert_eq!(s.to_string(), "0-4095");
        let odd: CpuSet = (0..4096).filter(|c| c % 2 == 1).map(CpuId).collect();
        assert_eq!(CpuSet::parse_list(&odd.to_string()).unwrap(), odd);
        assert_eq!(CpuSet::parse_list("1-4095:1/2").unwrap(), odd);
    }

    #[test]
    fn cpuset_equality_ignores_history() {
        let mut a = CpuSet::single(CpuId(300));
        a.remove(CpuId(300));
        assert_eq!(a, CpuSet::new());
        assert!(a.is_empty());
        assert_eq!(a.bound(), 0);
    }

    #[test]
    fn cpuset_set_algebra() {
        let a = CpuSet::parse_list("0-7").unwrap();
        let b = CpuSet::parse_list("4-11,100").unwrap();
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.union(&b).to_string(), "0-11,100");
        assert_eq!(b.difference(&a).to_string(), "8-11,100");
        assert!(a.intersection(&b).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert!(a.intersects(&b));
        assert!(!a.intersects(&CpuSet::single(CpuId(100))));
    }

    #[test]
    fn cpuset_parse_rejects_malformed_lists() {
        for bad in ["a", "1-", "-1", "1,,2", "5-2", "9000", "0-3:0/2", "0-3:3/2"] {
            assert!(
                CpuSet::parse_list(bad).is_err(),
                "{bad:?} should be rejected"
            );
        }
        assert!(CpuSet::parse_list("\n").unwrap().is_empty());
    }
}
