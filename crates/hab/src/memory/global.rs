//! The global heap: the top of the hierarchy. One contiguous allocation range inside the
//! reservation, carved by a compare-and-swap on its shared `top`.
//!
//! Cost: one CAS on a contended cache line per carve, the reason lower levels exist.
//! The range (`start`, `end`) changes only at a collection, while every mutator is stopped.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::memory::relaxed;
use crate::memory::reservation::{address_to_pointer, Reservation};

/// Keeps a value on a cache line (and its adjacent-line prefetch pair) of its own.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(pub(crate) T);

/// The shared bump-pointer heap.
pub(crate) struct GlobalHeap {
    /// Next free byte of the allocation range; only ever moves up between collections.
    top: CachePadded<AtomicUsize>,
    /// First byte of the current allocation range.
    start: AtomicUsize,
    /// One past the last byte of the current allocation range.
    end: AtomicUsize,
    /// Memory below this address is zeroed before it holds objects: in a heap that zeroes
    /// reused memory, every byte at or above it is still as the kernel mapped it (zero) and
    /// those below may hold old objects; 0 in a heap that does not (nothing is zeroed). One
    /// load and one compare tell a refill whether its chunk needs zeroing.
    zero_below: AtomicUsize,
    /// Whether reused memory is zeroed (`ZeroMemory::AtRefill` or `Ahead`).
    zero_reused: bool,
    reservation: Reservation,
}

impl GlobalHeap {
    /// The global heap over the first `capacity_bytes` of `reservation`; `pristine` when the
    /// reservation holds only zeroes (a fresh mapping), else everything counts as reused.
    pub(crate) fn new(
        reservation: Reservation,
        capacity_bytes: usize,
        zero_reused: bool,
        pristine: bool,
    ) -> Self {
        let start = reservation.start();
        let zero_below = match (zero_reused, pristine) {
            (false, _) => 0,
            (true, true) => start,
            (true, false) => reservation.end(),
        };
        GlobalHeap {
            top: CachePadded(AtomicUsize::new(start)),
            start: AtomicUsize::new(start),
            end: AtomicUsize::new(start + capacity_bytes),
            zero_below: AtomicUsize::new(zero_below),
            zero_reused,
            reservation,
        }
    }

    /// The reservation's bounds: every address Hab ever hands out is inside them.
    pub(crate) fn reserved(&self) -> (usize, usize) {
        (self.reservation.start(), self.reservation.end())
    }

    /// The current allocation range `(start, end)`.
    pub(crate) fn range(&self) -> (usize, usize) {
        (
            self.start.load(Ordering::Relaxed),
            self.end.load(Ordering::Relaxed),
        )
    }

    /// The current top: bytes below it (down to the range start) are handed out.
    pub(crate) fn top(&self) -> usize {
        self.top.0.load(Ordering::Acquire)
    }

    /// The bytes left between the top and the range's end (a relaxed estimate while threads
    /// carve).
    pub(crate) fn free_bytes(&self) -> usize {
        let end = self.end.load(Ordering::Relaxed);
        end.saturating_sub(self.top.0.load(Ordering::Relaxed))
    }

    /// The one carve from the global top: reads the top, asks `len_at(top, end)` how many
    /// bytes to take (`None`: not enough room; `top + len` stays at or below `end`), and moves
    /// the top with a compare-and-swap, again from the new top if another thread moved it
    /// first. Returns the chunk's start and length.
    #[inline(always)]
    fn carve_with(&self, len_at: impl Fn(usize, usize) -> Option<usize>) -> Option<(usize, usize)> {
        self.carve_below(self.end.load(Ordering::Relaxed), len_at)
    }

    /// [`carve_with`](GlobalHeap::carve_with) below `end` (at most the range's end).
    #[inline(always)]
    fn carve_below(
        &self,
        end: usize,
        len_at: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<(usize, usize)> {
        let mut top = self.top.0.load(Ordering::Relaxed);
        loop {
            let len = len_at(top, end)?;
            debug_assert!(top + len <= end);
            match self.top.0.compare_exchange_weak(
                top,
                top + len,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some((top, len)),
                Err(current) => top = current,
            }
        }
    }

    /// Carves exactly `bytes`, or `None` when the range is full: a load, an add, a compare
    /// and a compare-and-swap.
    #[inline]
    pub(crate) fn carve(&self, bytes: usize) -> Option<usize> {
        self.carve_with(|top, end| fits(top, bytes, end))
            .map(|(start, _)| start)
    }

    /// Carves exactly `bytes` for a TLAB at full size, or `None` when that would reach past
    /// `tlab_end`, where the thread's end of the cycle begins (at most the range's end; see
    /// `labs::end_of_cycle`): the same compare and compare-and-swap as
    /// [`carve`](GlobalHeap::carve), below the caller's bound.
    #[inline]
    pub(crate) fn carve_tlab(&self, bytes: usize, tlab_end: usize) -> Option<usize> {
        debug_assert!(tlab_end <= self.end.load(Ordering::Relaxed));
        self.carve_below(tlab_end, |top, end| fits(top, bytes, end))
            .map(|(start, _)| start)
    }

    /// Carves a TLAB of `desired` bytes, at least `min`: whole where it ends at or below
    /// `tlab_end`, else `part(available, used)` with `available` bytes left of the range and
    /// `used` handed out (`None`: none). Returns the chunk's start and length.
    pub(crate) fn carve_part(
        &self,
        min: usize,
        desired: usize,
        tlab_end: usize,
        part: impl Fn(usize, usize) -> Option<usize>,
    ) -> Option<(usize, usize)> {
        debug_assert!(min <= desired && min > 0);
        let start = self.start.load(Ordering::Relaxed);
        self.carve_with(|top, end| {
            let available = end.checked_sub(top)?;
            let len = if top + desired <= tlab_end {
                desired
            } else {
                part(available, top - start)?.min(desired)
            };
            (len >= min && len <= available).then_some(len)
        })
    }

    /// Carves a gap of `gap(top)` bytes followed by `bytes` bytes; returns the gap's start and
    /// length (the object starts after the gap). `None` when the range has no room.
    pub(crate) fn carve_after_gap(
        &self,
        bytes: usize,
        gap: impl Fn(usize) -> usize,
    ) -> Option<(usize, usize)> {
        self.carve_with(|top, end| {
            let len = gap(top).checked_add(bytes)?;
            (len <= end.checked_sub(top)?).then_some(len)
        })
        .map(|(start, len)| (start, len - bytes))
    }

    /// Carves `desired` bytes, or what is left of the range if that is at least `min`.
    /// Returns the chunk's start and length.
    pub(crate) fn carve_between(&self, min: usize, desired: usize) -> Option<(usize, usize)> {
        debug_assert!(min <= desired && min > 0);
        self.carve_with(|top, end| {
            let len = desired.min(end.checked_sub(top)?);
            (len >= min).then_some(len)
        })
    }

    /// Whether a chunk starting at `start` holds memory to be zeroed before use: reused
    /// memory, in a heap that zeroes it. (Only its start is looked at: a chunk that reaches
    /// into never-used memory is zeroed whole, once per collection cycle.)
    #[inline]
    pub(crate) fn needs_zeroing(&self, start: usize) -> bool {
        // SAFETY: the offset is `zero_below`'s, an `AtomicUsize` field of `GlobalHeap`.
        unsafe {
            relaxed::below_field::<{ std::mem::offset_of!(GlobalHeap, zero_below) }, _>(start, self)
        }
    }

    /// Zeroes the part of a chunk about to hold objects (a TLAB, or an object outside one)
    /// that was handed out before, if so configured. Middle-level buffers are not zeroed: the
    /// TLABs carved from them are, when they are installed, while they are hot in the cache.
    pub(crate) fn zero_reused(&self, start: usize, len: usize) {
        let dirty_end = (start + len).min(self.zero_below.load(Ordering::Relaxed));
        if dirty_end > start {
            // SAFETY: [start, dirty_end) lies in a chunk the calling thread just carved from the
            // reservation (directly or through a middle level), so no other thread touches it.
            unsafe { std::ptr::write_bytes(address_to_pointer(start), 0, dirty_end - start) };
        }
    }

    /// Installs a new allocation range. Only called by a collection, with every mutator
    /// stopped; the caller checked that the range lies inside the reservation.
    pub(crate) fn reset_range(&self, start: usize, end: usize) {
        if self.zero_reused {
            let zero_below = self.zero_below.load(Ordering::Relaxed);
            let zero_below = zero_below.max(self.top()).max(start);
            self.zero_below.store(zero_below, Ordering::Relaxed);
        }
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.top.0.store(start, Ordering::Release);
    }
}

/// `Some(bytes)` when `bytes` from `top` end at or below `end`. (`bytes` is at most some
/// heap's capacity and addresses lie far below `usize::MAX`: the add cannot wrap.)
#[inline(always)]
fn fits(top: usize, bytes: usize, end: usize) -> Option<usize> {
    (top + bytes <= end).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heap(capacity: usize, zero_reused: bool) -> GlobalHeap {
        GlobalHeap::new(
            Reservation::new(capacity).unwrap(),
            capacity,
            zero_reused,
            true,
        )
    }

    #[test]
    fn carves_until_full_then_refuses() {
        let global = heap(4096, false);
        let (start, _) = global.range();
        assert_eq!(global.carve(1000), Some(start));
        assert_eq!(global.carve(3000), Some(start + 1000));
        assert_eq!(global.carve(100), None);
        assert_eq!(global.carve_between(8, 1000), Some((start + 4000, 96)));
        assert_eq!(global.carve_between(8, 8), None);
    }

    #[test]
    fn tlabs_stop_at_the_threads_bound_and_then_take_parts() {
        let global = heap(4096, false);
        let (start, end) = global.range();
        // Full-sized TLABs while they end at or below the bound.
        assert_eq!(global.carve_tlab(1024, start + 2048), Some(start));
        assert_eq!(global.carve_tlab(1024, start + 2048), Some(start + 1024));
        assert_eq!(
            global.carve_tlab(1024, start + 2048),
            None,
            "past the bound"
        );
        // Past it, the part the policy gives of what is left (here a quarter), at least `min`.
        let quarter = |available: usize, used: usize| {
            assert_eq!((available, used), (end - start - 2048, 2048));
            Some(available / 4)
        };
        assert_eq!(
            global.carve_part(256, 1024, start + 2048, quarter),
            Some((start + 2048, 512))
        );
        assert_eq!(
            global.carve_part(256, 1024, start + 2048, |_, _| None),
            None
        );
        assert_eq!(
            global.carve_part(1024, 1024, start + 2048, |_, _| Some(512)),
            None
        );
        // With the bound at the end, whole TLABs until what is left is shorter.
        assert_eq!(
            global.carve_part(256, 1024, end, |a, _| Some(a)),
            Some((start + 2560, 1024))
        );
        assert_eq!(
            global.carve_part(256, 1024, end, |a, _| Some(a)),
            Some((start + 3584, 512))
        );
    }

    #[test]
    fn reused_memory_is_zeroed_only_when_asked() {
        for (zero, expected) in [(true, 0u8), (false, 0xab)] {
            let global = heap(4096, zero);
            let (start, end) = global.range();
            let chunk = global.carve(4096).unwrap();
            assert!(!global.needs_zeroing(chunk), "a fresh mapping is zero");
            global.zero_reused(chunk, 4096);
            // SAFETY: the chunk was just carved and spans the whole reservation.
            unsafe { std::ptr::write_bytes(address_to_pointer(chunk), 0xab, 4096) };
            global.reset_range(start, end);
            let again = global.carve(64).unwrap();
            assert_eq!(global.needs_zeroing(again), zero);
            global.zero_reused(again, 64);
            // SAFETY: `again` is a carved chunk of 64 bytes.
            let byte = unsafe { *address_to_pointer(again + 63) };
            assert_eq!(byte, expected, "zero reused: {zero}");
        }
    }
}
