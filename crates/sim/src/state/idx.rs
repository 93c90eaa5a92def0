//! Index newtypes: a CPU's place in `Userspace::cpus`, a thread's place in `World::th`, a lock's,
//! a barrier's and a queue's place in `Userspace::locks`, `Userspace::barriers` and `Userspace::queues`, and an
//! application's and a program's in `Userspace::apps` and `Userspace::progs`, so that one cannot be
//! passed where another is meant.
//!
//! They are positions in the simulator's own vectors, not the machine's ids: CPU index 3
//! is the fourth CPU the machine lists, whatever its `CpuId`. They index any `Vec`
//! directly (`sim.cpus[c]`, `sim.th[t]`), and convert from and to `usize` where an index
//! leaves those vectors (event payloads, slices, ranges).

use std::ops::{Index, IndexMut};

macro_rules! idx {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub(crate) struct $name(pub u32);

        impl $name {
            /// The position as a `usize`.
            pub fn ix(self) -> usize {
                self.0 as usize
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}", self.0)
            }
        }

        impl From<usize> for $name {
            fn from(i: usize) -> $name {
                debug_assert!(u32::try_from(i).is_ok(), "index {i} out of range");
                $name(i as u32)
            }
        }

        impl<T> Index<$name> for Vec<T> {
            type Output = T;
            fn index(&self, i: $name) -> &T {
                &self[i.ix()]
            }
        }

        impl<T> IndexMut<$name> for Vec<T> {
            fn index_mut(&mut self, i: $name) -> &mut T {
                &mut self[i.ix()]
            }
        }
    };
}

idx!(
    /// A CPU's index in `Userspace::cpus` (and `Kernel::cpus`, `Hw`'s per-CPU tables).
    CpuIdx
);
idx!(
    /// A thread's index in `World::th`.
    ThreadIdx
);
idx!(
    /// A lock's index in `Userspace::locks` (an application's lock `k` is
    /// `AppState::lock(k)`).
    LockIdx
);
idx!(
    /// An application's index in `Userspace::apps`.
    AppIdx
);
idx!(
    /// A program's index in `Userspace::progs` (the ops a group of an application's threads run).
    ProgIdx
);
idx!(
    /// A barrier's index in `Userspace::barriers` (an application's barrier `k` is
    /// `AppState::barrier(k)`).
    BarrierIdx
);
idx!(
    /// A queue's index in `Userspace::queues` (an application's queue `k` is
    /// `AppState::queue(k)`).
    QueueIdx
);

macro_rules! all {
    ($($name:ident),*) => {$(
        impl $name {
            /// The first `n` positions, in order (every CPU or thread of a `Sim`).
            pub fn all(n: usize) -> impl Iterator<Item = $name> + Clone {
                (0..n).map($name::from)
            }
        }
    )*};
}

all!(CpuIdx, ThreadIdx);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idx_indexes_a_vec_at_its_position() {
        let mut v = vec![10, 11, 12];
        let c = CpuIdx::from(2);
        assert_eq!(v[c], 12);
        v[ThreadIdx(0)] = 7;
        assert_eq!(v, [7, 11, 12]);
        assert_eq!(c.ix(), 2);
    }
}
