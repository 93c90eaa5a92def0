//! Newtype ids, so a core id cannot be passed where a CPU id is meant, and time as `Nanos`.

use serde::Serialize;
use std::fmt;

macro_rules! id {
    ($(#[$doc:meta])* $name:ident($inner:ty)) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
        #[serde(transparent)]
        pub struct $name(pub $inner);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id!(
    /// A logical CPU (hardware thread, "PU" in hwloc) as the kernel numbers it.
    CpuId(u32)
);
id!(
    /// A physical core, unique across the machine (the kernel's `core_id` is only unique
    /// within a package, so readers renumber cores densely).
    CoreId(u32)
);
id!(
    /// A last-level cache, unique across the machine.
    LlcId(u32)
);
id!(
    /// A package (socket), as `physical_package_id` gives it.
    PackageId(u32)
);
id!(
    /// A NUMA node, as `/sys/devices/system/node/nodeN` gives it.
    NodeId(u16)
);
id!(
    /// A process id (thread-group id).
    Pid(i32)
);
id!(
    /// A thread id (the kernel's task id).
    Tid(i32)
);

/// A duration or a point in time in nanoseconds. Points are measured from an origin the host
/// chooses (boot for Linux, zero for the simulator); the model never reads a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// Zero nanoseconds.
    pub const ZERO: Nanos = Nanos(0);

    /// `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Nanos {
        Nanos(ms * 1_000_000)
    }

    /// `us` microseconds.
    pub const fn from_micros(us: u64) -> Nanos {
        Nanos(us * 1_000)
    }

    /// `s` seconds.
    pub const fn from_secs(s: u64) -> Nanos {
        Nanos(s * 1_000_000_000)
    }

    /// This duration in seconds.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// This duration in milliseconds.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self - earlier`, or zero if `earlier` is later (counters never run backwards, but a
    /// reused slot might).
    pub fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl std::ops::Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0.saturating_add(rhs.0))
    }
}

impl std::ops::AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 = self.0.saturating_add(rhs.0);
    }
}

/// `self - rhs`: a duration or an earlier instant. `rhs` must not be later than `self`
/// (checked in debug builds, as `u64`'s `-` is); where it may be, say so with
/// [`Nanos::saturating_sub`].
impl std::ops::Sub for Nanos {
    type Output = Nanos;
    fn sub(self, rhs: Nanos) -> Nanos {
        debug_assert!(rhs <= self, "{} ns minus a later {} ns", self.0, rhs.0);
        Nanos(self.0.wrapping_sub(rhs.0))
    }
}

impl std::ops::SubAssign for Nanos {
    fn sub_assign(&mut self, rhs: Nanos) {
        *self = *self - rhs;
    }
}

/// `k` times a duration, saturating like `+`.
impl std::ops::Mul<u64> for Nanos {
    type Output = Nanos;
    fn mul(self, k: u64) -> Nanos {
        Nanos(self.0.saturating_mul(k))
    }
}

/// `k` times a duration, saturating like `+`.
impl std::ops::Mul<Nanos> for u64 {
    type Output = Nanos;
    fn mul(self, d: Nanos) -> Nanos {
        d * self
    }
}

/// A `k`-th of a duration, rounded down.
impl std::ops::Div<u64> for Nanos {
    type Output = Nanos;
    fn div(self, k: u64) -> Nanos {
        Nanos(self.0 / k)
    }
}

/// How many whole `period`s fit in `self` (`period` must not be zero).
impl std::ops::Div<Nanos> for Nanos {
    type Output = u64;
    fn div(self, period: Nanos) -> u64 {
        self.0 / period.0
    }
}

impl std::iter::Sum for Nanos {
    fn sum<I: Iterator<Item = Nanos>>(iter: I) -> Nanos {
        iter.fold(Nanos::ZERO, |a, b| a + b)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns >= 1_000_000_000 {
            write!(f, "{:.3}s", ns as f64 / 1e9)
        } else if ns >= 1_000_000 {
            write!(f, "{:.3}ms", ns as f64 / 1e6)
        } else if ns >= 1_000 {
            write!(f, "{:.3}us", ns as f64 / 1e3)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Nanos;

    #[test]
    fn nanos_arithmetic_is_u64_arithmetic_with_saturating_add_and_mul() {
        let (a, b) = (Nanos(7_000), Nanos(2_500));
        assert_eq!(a - b, Nanos(4_500));
        assert_eq!(a * 3, Nanos(21_000));
        assert_eq!(3 * a, Nanos(21_000));
        assert_eq!(a / 2, Nanos(3_500));
        // (7000 / 2500) whole periods = 2; the next period boundary is (2 + 1) × 2500.
        assert_eq!(a / b, 2);
        assert_eq!((a / b + 1) * b, Nanos(7_500));
        assert_eq!(Nanos(u64::MAX) + a, Nanos(u64::MAX));
        assert_eq!(Nanos(u64::MAX) * 2, Nanos(u64::MAX));
        assert_eq!([a, b].into_iter().sum::<Nanos>(), Nanos(9_500));
        let mut c = a;
        c -= b;
        assert_eq!(c, Nanos(4_500));
        assert_eq!(b.saturating_sub(a), Nanos::ZERO);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "minus a later")]
    fn nanos_sub_of_a_later_time_panics_in_debug_builds() {
        let _ = Nanos(1) - Nanos(2);
    }
}
