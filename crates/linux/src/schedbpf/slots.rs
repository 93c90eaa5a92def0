//! The counters array of `bpf/sched.bpf.c`, mapped into this process (`BPF_F_MMAPABLE`):
//! a thread's counters are read with plain loads from shared memory, no system call, and a
//! slot is claimed or freed with one compare-and-exchange.
//!
//! ```text
//!  mmap(counters fd)  ─►  slot 0 | slot 1 | … | slot SLOTS−1 | header (births, deaths, spawns)
//!                          80 bytes each: tid, seq, run, wait, slices, cpu/state,
//!                          on_since, queued_since, voluntary, involuntary, seeded
//!  read(tid):  slot = tid & (SLOTS − 1); its tid field is tid?  seq even and unchanged
//!              across the copy? ──► the copy (else: retried, then left to /proc)
//!  claim(tid): tid field 0 (or an exited thread's) ─► tid | CLAIM ─► write ─► tid
//! ```
//!
//! The program marks a slot's `seq` odd while it writes it, so a copy taken while `seq`
//! was even and had not changed by the end is whole. A claimed slot holds `tid | CLAIM`
//! while user space writes the seeded values: the program only counts a slot whose tid
//! field is the thread's own, so it starts counting from the seeded values once the tid is
//! published, never from half of them.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// Slots in the array (as `SLOTS` in `sched.bpf.c`): a thread's is `tid & (SLOTS − 1)`.
pub const SLOTS: usize = 16384;
/// Bytes per slot (`struct counters`).
pub const SLOT_BYTES: usize = 80;
/// Set in a slot's tid field while user space seeds it (tids stay below 2^22).
const CLAIM: u32 = 1 << 31;
/// prev_state bits of an exited thread (X, Z).
const EXITED: u64 = 0x10 | 0x20;

/// One slot's counters, as `struct counters` lays them out (after its tid and seq).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Raw {
    /// ns on a CPU up to the last switch.
    pub run: u64,
    /// ns runnable on a run queue up to the last switch-in.
    pub wait: u64,
    /// Switch-ins.
    pub slices: u64,
    /// The CPU it last ran on.
    pub cpu: u32,
    /// `prev_state & 0xff` at the last switch-out (0: runnable).
    pub state: u32,
    /// On a CPU since (ktime ns), 0 when not.
    pub on_since: u64,
    /// Runnable and waiting since (ktime ns), 0 when not.
    pub queued_since: u64,
    /// Voluntary switches (blocked).
    pub voluntary: u64,
    /// Involuntary switches (preempted or yielded).
    pub involuntary: u64,
    /// 1 while the slot holds only what user space seeded.
    pub seeded: u64,
}

/// What [`Slots::claim`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The slot was free (or an exited thread's) and now holds the seeded values.
    Seeded,
    /// The thread already owns its slot (the program counted it from its birth).
    Owned,
    /// Another live thread owns the slot: this one is left to `/proc`.
    Taken,
}

/// The array, mapped shared and writable.
pub struct Slots {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value alone (unmapped on drop);
// every access goes through atomics, so moving it to another thread is sound.
unsafe impl Send for Slots {}
// SAFETY: every access to the mapping, from any thread, is an atomic load, store or
// compare-and-exchange through `&self` (the program on the other side writes it
// concurrently anyway), so sharing `&Slots` between threads (the daemon's shared probe,
// `super::shared`) is sound.
unsafe impl Sync for Slots {}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots").field("len", &self.len).finish()
    }
}

impl Drop for Slots {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned, and no reference into the
        // mapping outlives `self` (accessors borrow it).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

impl Slots {
    /// Maps the counters array of descriptor `fd` (`SLOTS + 1` entries of `SLOT_BYTES`).
    pub fn map(fd: i32) -> std::io::Result<Slots> {
        // SAFETY: sysconf has no memory effects.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let len = ((SLOTS + 1) * SLOT_BYTES).div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's whole value area (the kernel checks
        // the length and that the map is mmapable); nothing else aliases the address.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)?;
        Ok(Slots { base, len })
    }

    /// The same layout in anonymous memory, for tests: no program writes it.
    #[cfg(test)]
    pub(crate) fn anonymous() -> Slots {
        let len = (SLOTS + 1) * SLOT_BYTES;
        // SAFETY: a fresh private anonymous mapping, owned by the returned value.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(ptr, libc::MAP_FAILED);
        Slots {
            base: NonNull::new(ptr.cast::<u8>()).unwrap(),
            len,
        }
    }

    fn word(&self, slot: usize, i: usize) -> &AtomicU64 {
        debug_assert!(slot <= SLOTS && i < SLOT_BYTES / 8);
        // SAFETY: slot ≤ SLOTS and i < 10 keep the address inside the mapping; it is
        // 8-byte aligned (page-aligned base, 80-byte slots); the memory lives as long as
        // `self`, and is only ever accessed atomically from this process.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(slot * SLOT_BYTES + i * 8)
                .cast::<AtomicU64>()
        }
    }

    fn half(&self, slot: usize, high: bool) -> &AtomicU32 {
        debug_assert!(slot <= SLOTS);
        // SAFETY: as in `word`: the tid (low) and seq (high) halves of word 0, 4-byte
        // aligned, inside the mapping.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(slot * SLOT_BYTES + if high { 4 } else { 0 })
                .cast::<AtomicU32>()
        }
    }

    /// The slot of thread `tid`.
    pub fn slot_of(tid: i32) -> usize {
        (tid as u32 as usize) & (SLOTS - 1)
    }

    /// Births and deaths of the traced processes' threads, and the processes they
    /// started, so far (the header entry).
    pub fn events(&self) -> [u64; 3] {
        [1, 2, 3].map(|i| self.word(SLOTS, i).load(Ordering::Acquire))
    }

    /// Thread `tid`'s counters, when it owns its slot and a whole copy could be taken.
    pub fn read(&self, tid: i32) -> Option<Raw> {
        let slot = Slots::slot_of(tid);
        let (owner, seq) = (self.half(slot, false), self.half(slot, true));
        for _ in 0..4 {
            let before = seq.load(Ordering::Acquire);
            if owner.load(Ordering::Acquire) != tid as u32 {
                return None;
            }
            if before & 1 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let w = |i| self.word(slot, i).load(Ordering::Relaxed);
            let cpu_state = w(4);
            let raw = Raw {
                run: w(1),
                wait: w(2),
                slices: w(3),
                cpu: (cpu_state & 0xffff_ffff) as u32,
                state: (cpu_state >> 32) as u32,
                on_since: w(5),
                queued_since: w(6),
                voluntary: w(7),
                involuntary: w(8),
                seeded: w(9),
            };
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == before {
                return Some(raw);
            }
        }
        None
    }

    /// Gives thread `tid` its slot with the values `raw` (see [`Claim`]). A slot held by
    /// an exited thread is taken over.
    pub fn claim(&self, tid: i32, raw: &Raw) -> Claim {
        let slot = Slots::slot_of(tid);
        let owner = self.half(slot, false);
        let tid = tid as u32;
        // Free (0), or an exited thread's: a few tries, as the program may claim it too.
        let mut current = 0;
        let mut claimed = false;
        for _ in 0..4 {
            match owner.compare_exchange(current, tid | CLAIM, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    claimed = true;
                    break;
                }
                Err(t) if t == tid => return Claim::Owned,
                Err(0) => current = 0,
                Err(t) if t & CLAIM == 0 && self.exited(slot) => current = t,
                Err(_) => return Claim::Taken,
            }
        }
        if !claimed {
            return Claim::Taken;
        }
        let w = |i: usize, v: u64| self.word(slot, i).store(v, Ordering::Relaxed);
        w(1, raw.run);
        w(2, raw.wait);
        w(3, raw.slices);
        w(4, u64::from(raw.cpu) | (u64::from(raw.state) << 32));
        w(5, raw.on_since);
        w(6, raw.queued_since);
        w(7, raw.voluntary);
        w(8, raw.involuntary);
        w(9, raw.seeded);
        owner.store(tid, Ordering::Release);
        Claim::Seeded
    }

    /// Whether the thread in `slot` has exited (its last switch-out said X or Z).
    fn exited(&self, slot: usize) -> bool {
        (self.word(slot, 4).load(Ordering::Acquire) >> 32) & EXITED != 0
    }

    /// Frees thread `tid`'s slot, if it owns it; says whether it did.
    pub fn free(&self, tid: i32) -> bool {
        let owner = self.half(Slots::slot_of(tid), false);
        owner
            .compare_exchange(tid as u32, 0, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Frees every slot, whoever owns it: the program then finds no slot at any switch
    /// (one array lookup and a compare), while its tracepoints are taken away after a
    /// grace period ([`crate::bpf`]'s links).
    pub fn free_all(&self) {
        for slot in 0..SLOTS {
            self.half(slot, false).store(0, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(run: u64) -> Raw {
        Raw {
            run,
            wait: 2,
            slices: 3,
            cpu: 1,
            state: 0x01,
            voluntary: 4,
            involuntary: 5,
            seeded: 1,
            ..Raw::default()
        }
    }

    #[test]
    fn slots_claim_then_read_gives_the_seeded_values() {
        let s = Slots::anonymous();
        assert_eq!(s.read(42), None);
        assert_eq!(s.claim(42, &sleeper(7)), Claim::Seeded);
        assert_eq!(s.read(42), Some(sleeper(7)));
        // Seeding again never overwrites what is counted.
        assert_eq!(s.claim(42, &sleeper(99)), Claim::Owned);
        assert_eq!(s.read(42).map(|r| r.run), Some(7));
    }

    #[test]
    fn slots_tid_sharing_a_live_threads_slot_is_left_out() {
        let s = Slots::anonymous();
        s.claim(42, &sleeper(7));
        // 42 + 16384 maps onto slot 42, which a sleeping (live) thread holds.
        assert_eq!(s.claim(42 + SLOTS as i32, &sleeper(8)), Claim::Taken);
        assert_eq!(s.read(42 + SLOTS as i32), None);
        assert_eq!(s.read(42).map(|r| r.run), Some(7));
    }

    #[test]
    fn slots_exited_threads_slot_is_taken_over() {
        let s = Slots::anonymous();
        let mut gone = sleeper(7);
        gone.state = 0x10; // X at its last switch-out
        s.claim(42, &gone);
        let other = 42 + SLOTS as i32;
        assert_eq!(s.claim(other, &sleeper(8)), Claim::Seeded);
        assert_eq!(s.read(other).map(|r| r.run), Some(8));
        assert_eq!(s.read(42), None);
    }

    #[test]
    fn slots_free_releases_only_the_owners_slot() {
        let s = Slots::anonymous();
        s.claim(42, &sleeper(7));
        assert!(!s.free(42 + SLOTS as i32), "not the owner: nothing happens");
        assert!(s.read(42).is_some());
        assert!(s.free(42));
        assert_eq!(s.read(42), None);
        assert_eq!(s.claim(42 + SLOTS as i32, &sleeper(8)), Claim::Seeded);
    }

    #[test]
    fn slots_read_refuses_a_slot_being_written() {
        let s = Slots::anonymous();
        s.claim(42, &sleeper(7));
        // The program marks the slot odd while it writes: a copy then is not whole.
        s.half(42, true).store(1, Ordering::Relaxed);
        assert_eq!(s.read(42), None);
        s.half(42, true).store(2, Ordering::Relaxed);
        assert!(s.read(42).is_some());
    }

    #[test]
    fn slots_events_read_the_header() {
        let s = Slots::anonymous();
        for (i, v) in [(1, 10), (2, 4), (3, 1)] {
            s.word(SLOTS, i).store(v, Ordering::Relaxed);
        }
        assert_eq!(s.events(), [10, 4, 1]);
    }
}
