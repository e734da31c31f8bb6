//! The thread-local allocation buffer: a chunk up to `chunk_end` the thread bumps `top`
//! through without synchronisation.
//!
//! The fast path touches only `top` and `soft_end`, laid out `#[repr(C)]` at offsets
//! [`TLAB_TOP_OFFSET`] and [`TLAB_SOFT_END_OFFSET`] so that a JIT can inline it: an object of
//! `n` bytes fits when `top + n <= soft_end`.
//!
//! Three ends, lowest last:
//! - `chunk_end`: one past the chunk's last byte;
//! - `limit`: where objects must end. When the object model's smallest filler is larger than
//!   the alignment, it stays that far below `chunk_end`, so the tail left at retire can always
//!   be filled;
//! - `soft_end`: what the fast path compares with, at or below `limit`. The owner lowers it to
//!   stop at the next sample or at the end of the memory zeroed so far; any thread may lower
//!   it to 0 to send the owner to its slow path (a safepoint request). A fast path that fails
//!   on the soft end only is a *soft miss*: the slow path does what was asked, raises the soft
//!   end again and bumps in the same TLAB.
//!
//! Every field but `soft_end` is a `Cell`: only the thread that may touch the TLAB (its
//! running owner, or the collection holding it) reads or writes them, as `MutatorCell`'s state
//! machine says; `soft_end` is atomic because other threads lower it.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::memory::relaxed;
use crate::memory::reservation::address_to_pointer;
use crate::memory::space::Space;

/// Offset of the TLAB's `top` (a `usize` address) from the address
/// [`Mutator::tlab_address`](crate::Mutator::tlab_address) returns.
pub const TLAB_TOP_OFFSET: usize = std::mem::offset_of!(Tlab, top);
/// Offset of the TLAB's soft end (a `usize` address): an object of `n` bytes fits when
/// `top + n <= soft_end`; otherwise compiled code calls the slow path. Read it with a plain
/// (or relaxed atomic) load: other threads may lower it to 0 at any time.
pub const TLAB_SOFT_END_OFFSET: usize = std::mem::offset_of!(Tlab, soft_end);

/// A thread's TLAB. Empty (all zero) when the thread has none: every fast path then fails.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Tlab {
    /// Next free byte.
    top: Cell<usize>,
    /// The fast path's end (see the module documentation); 0 when tripped.
    soft_end: AtomicUsize,
    /// Objects must end at or below this address.
    limit: Cell<usize>,
    /// First byte of the chunk, moved up past each gap left before an aligned object (the
    /// gap is counted when it is left): `top - start_past_gaps` is what the objects hold.
    start_past_gaps: Cell<usize>,
    /// One past the last byte of the chunk.
    chunk_end: Cell<usize>,
    /// Memory below this address is ready for objects (zeroed, or the heap does not zero it);
    /// the soft end stays at or below it. Equal to the limit unless zeroing ahead.
    zeroed_end: Cell<usize>,
    /// Where the thread's next allocation sample falls (`usize::MAX`: none in this TLAB); the
    /// soft end stays at or below it.
    sample_at: Cell<usize>,
}

/// Where the free tail of a retired TLAB is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waste {
    /// Retired to take a new TLAB.
    Refill,
    /// Retired by a collection, at a safepoint, or when its thread detached.
    Collection,
}

// Every method but `trip` may be called only by the thread allowed to touch the TLAB (see the
// module documentation); `MutatorCell`'s accessors hand out `&Tlab` only to that thread.
impl Tlab {
    /// The fast path: bumps `top` by `bytes` and returns the object's address, or `None` when
    /// `top + bytes` passes the soft end.
    #[inline(always)]
    pub(crate) fn bump(&self, bytes: usize) -> Option<usize> {
        let top = self.top.get();
        let new_top = top + bytes;
        if relaxed::at_most(new_top, &self.soft_end) {
            self.top.set(new_top);
            return Some(top);
        }
        None
    }

    /// Bumps `top` by `bytes` up to the limit, whatever the soft end says (the slow path,
    /// after a soft miss); `None` when the object does not fit the TLAB.
    pub(crate) fn bump_to_limit(&self, bytes: usize) -> Option<usize> {
        let top = self.top.get();
        let new_top = top.checked_add(bytes)?;
        if self.start_past_gaps.get() != 0 && new_top <= self.limit.get() {
            self.top.set(new_top);
            self.check_invariants();
            return Some(top);
        }
        None
    }

    /// The soft end the owner wants: the limit, or the end of the memory zeroed so far or the
    /// next sample if lower.
    pub(crate) fn wanted_soft_end(&self) -> usize {
        self.limit
            .get()
            .min(self.zeroed_end.get())
            .min(self.sample_at.get())
    }

    /// Sets where the next allocation sample falls (`usize::MAX`: none); the caller raises
    /// the soft end afterwards.
    pub(crate) fn set_sample_at(&self, address: usize) {
        self.sample_at.set(address);
    }

    /// The next free byte.
    pub(crate) fn top(&self) -> usize {
        self.top.get()
    }

    /// Bytes of the objects bumped so far, past the gaps (0 for an empty TLAB).
    #[inline]
    pub(crate) fn used_bytes(&self) -> usize {
        self.top.get() - self.start_past_gaps.get()
    }

    /// Whether the TLAB has no free tail (true for an empty TLAB): retiring it writes no
    /// filler, and it has no free bytes. One compare.
    #[inline]
    pub(crate) fn has_no_tail(&self) -> bool {
        self.top.get() == self.chunk_end.get()
    }

    /// Passes `bytes` of a filler just left below `top`, before an aligned object: the caller
    /// counts them as a gap now, and they are not counted again as objects at retire.
    pub(crate) fn pass_gap(&self, bytes: usize) {
        self.start_past_gaps.set(self.start_past_gaps.get() + bytes);
        self.check_invariants();
    }

    /// The soft miss of zeroing ahead, for an object the caller found fits below the limit
    /// (`bytes <= free_bytes()`; the slow path's short line looks at the limit first, to tell
    /// a zeroing step from a refill): when the object ends past the zeroed part and before
    /// the next sample, zeroes the next step (see [`zero_through`](Tlab::zero_through)),
    /// bumps, and returns the object. `None` otherwise. The caller raises the soft end.
    #[inline]
    pub(crate) fn zeroing_step(&self, bytes: usize, step_bytes: usize) -> Option<usize> {
        debug_assert!(bytes <= self.free_bytes());
        let top = self.top.get();
        let new_top = top + bytes;
        if new_top <= self.zeroed_end.get() || new_top >= self.sample_at.get() {
            return None;
        }
        self.zero_through(new_top, step_bytes);
        self.top.set(new_top);
        self.check_invariants();
        Some(top)
    }

    /// Makes the memory up to `end` (an object's end, at most the limit) ready: when the TLAB
    /// is zeroed ahead and `end` passes what is zeroed, zeroes from there to `end` or
    /// `step_bytes` further, whichever is further, within the limit. Cost: a `memset` of
    /// about `step_bytes` once per step.
    #[inline]
    pub(crate) fn zero_through(&self, end: usize, step_bytes: usize) {
        let zeroed = self.zeroed_end.get();
        if end <= zeroed {
            return;
        }
        debug_assert!(end <= self.limit.get() && zeroed >= self.start_past_gaps.get());
        let new_end = end
            .max(zeroed.saturating_add(step_bytes))
            .min(self.limit.get());
        // Every earlier object lies below `zeroed` (the soft end stays at or below it).
        // SAFETY: `[zeroed, new_end)` holds only the object ending at `end`, not yet handed
        // out, and free TLAB memory: all the calling owner's.
        unsafe { std::ptr::write_bytes(address_to_pointer(zeroed), 0, new_end - zeroed) };
        self.zeroed_end.set(new_end);
        self.check_invariants();
    }

    /// Zeroes again the free bytes counted as zeroed, `[top, zeroed_end)`, after a filler
    /// covered the tail of a TLAB that stays in use (a refill that found no chunk): the next
    /// objects bumped there must find zeroes, not the filler. Cost: a `memset` of at most the
    /// tail, only on that path.
    pub(crate) fn zero_ready_tail(&self) {
        let (top, zeroed) = (self.top.get(), self.zeroed_end.get());
        if zeroed > top {
            // SAFETY: `[top, zeroed)` is free memory of this TLAB (below its limit), owned by
            // the calling owner; no object lies there yet.
            unsafe { std::ptr::write_bytes(address_to_pointer(top), 0, zeroed - top) };
        }
    }

    /// Sets the soft end to `end` (at most the limit). The caller re-checks for a trip
    /// afterwards (see [`trip`](Tlab::trip)).
    pub(crate) fn set_soft_end(&self, end: usize) {
        debug_assert!(end <= self.limit.get());
        self.soft_end.store(end, Ordering::Relaxed);
    }

    /// Sends the owner to its slow path at its next allocation: the soft end becomes 0. May
    /// be called by any thread. A caller that asks the owner for something (a safepoint)
    /// publishes the request first, then makes every thread execute a barrier
    /// ([`fence::heavy`]), then trips; the owner, after each
    /// [`set_soft_end`](Tlab::set_soft_end), orders its store before its next load for the
    /// compiler ([`fence::light`]) and reads the request again. One of the two sees the
    /// other (see `platform::fence`), so no request is lost to a refill that raised the soft
    /// end meanwhile, and the refill pays no locked instruction for it.
    ///
    /// [`fence::heavy`]: crate::platform::fence::heavy
    /// [`fence::light`]: crate::platform::fence::light
    pub(crate) fn trip(&self) {
        self.soft_end.store(0, Ordering::Relaxed);
    }

    /// Bytes an object may still take before the limit.
    #[inline]
    pub(crate) fn free_bytes(&self) -> usize {
        self.limit.get() - self.top.get()
    }

    /// Starts bumping through the chunk `[start, start + len)`, keeping `reserve` bytes; with
    /// `zero_ahead`, none of it counts as zeroed yet (see
    /// [`zero_through`](Tlab::zero_through)). The soft end is left as it is (0 after a
    /// retire): the caller sets it before the next fast path, to the returned
    /// [`wanted_soft_end`](Tlab::wanted_soft_end) (the end of the memory counted as zeroed;
    /// no sample is due yet). The chunk replaces whatever the TLAB held: the caller retired
    /// it, or covered its tail with a filler and counted it.
    #[inline(always)]
    pub(crate) fn install(
        &self,
        start: usize,
        len: usize,
        reserve: usize,
        zero_ahead: bool,
    ) -> usize {
        let limit = start + len - reserve;
        let zeroed_end = if zero_ahead { start } else { limit };
        self.top.set(start);
        self.limit.set(limit);
        self.start_past_gaps.set(start);
        self.chunk_end.set(start + len);
        self.zeroed_end.set(zeroed_end);
        self.sample_at.set(usize::MAX);
        self.check_invariants();
        zeroed_end
    }

    /// Bumps the first object of `bytes` (at most the limit's distance from `top`: the caller
    /// installed a chunk large enough) and returns its address.
    #[inline]
    pub(crate) fn bump_first(&self, bytes: usize) -> usize {
        let top = self.top.get();
        debug_assert!(self.start_past_gaps.get() != 0 && bytes <= self.limit.get() - top);
        self.top.set(top + bytes);
        self.check_invariants();
        top
    }

    /// [`retire`](Tlab::retire) for the TLAB of a thread lost in a `fork`: that thread may have
    /// been anywhere in an update of the fields (a refill sets them one by one), so they are
    /// checked first. A TLAB caught mid-update is emptied without a filler and counts nothing
    /// (the child collects from its roots or resets, as for objects caught without headers).
    ///
    /// # Safety
    /// As [`retire`](Tlab::retire).
    pub(crate) unsafe fn retire_after_fork(&self, space: &Space) -> Option<Retired> {
        let (start, top) = (self.start_past_gaps.get(), self.top.get());
        let (limit, chunk_end) = (self.limit.get(), self.chunk_end.get());
        let consistent = start != 0 && start <= top && top <= limit && limit <= chunk_end;
        if consistent {
            // SAFETY: forwarded.
            return unsafe { self.retire(space) };
        }
        self.soft_end.store(0, Ordering::Relaxed);
        self.empty();
        None
    }

    /// Fills the free tail with a filler and leaves the TLAB empty (its soft end 0); returns
    /// what it held, for the caller to count. `None` for an empty TLAB.
    ///
    /// # Safety
    /// The caller has exclusive access to this TLAB's memory (its own, or a stopped thread's).
    pub(crate) unsafe fn retire(&self, space: &Space) -> Option<Retired> {
        self.soft_end.store(0, Ordering::Relaxed);
        // SAFETY: forwarded.
        let retired = unsafe { self.fill_tail(space) };
        self.empty();
        retired
    }

    /// What retiring the TLAB would count, its fields left as they are: the free tail is
    /// `[top, top + tail_bytes)`. `None` for an empty TLAB.
    #[inline(always)]
    pub(crate) fn held(&self) -> Option<Retired> {
        let start = self.start_past_gaps.get();
        if start == 0 {
            return None;
        }
        let top = self.top.get();
        Some(Retired {
            used_bytes: top - start,
            tail_bytes: self.chunk_end.get() - top,
        })
    }

    /// The first half of [`retire`](Tlab::retire): fills the free tail with a filler and
    /// returns what the TLAB held, leaving every field as it is (the TLAB is still whole if
    /// the object model's filler panics). `None` for an empty TLAB.
    ///
    /// # Safety
    /// As [`retire`](Tlab::retire).
    unsafe fn fill_tail(&self, space: &Space) -> Option<Retired> {
        let retired = self.held()?;
        // SAFETY: [top, chunk_end) is the unused tail of this TLAB, owned by the caller; the
        // reserve keeps it at least one filler long (see the module documentation).
        unsafe { space.write_filler(self.top.get(), retired.tail_bytes) };
        Some(retired)
    }

    /// Sets every field but the soft end and the next sample to 0: an empty TLAB.
    fn empty(&self) {
        for field in [
            &self.top,
            &self.limit,
            &self.start_past_gaps,
            &self.chunk_end,
            &self.zeroed_end,
        ] {
            field.set(0);
        }
        self.check_invariants();
    }

    /// Checks, in builds with debug assertions, what the module documentation states after
    /// every change the owner makes: an empty TLAB is all zero; otherwise `start_past_gaps <=
    /// top <= limit <= chunk_end` and `start_past_gaps <= zeroed_end <= limit`.
    /// (The soft end is not checked here: between a refill's install and the raise that
    /// follows it, it still holds the old TLAB's value, which no fast path reads meanwhile.)
    #[inline]
    fn check_invariants(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        let (start, top, limit) = (self.start_past_gaps.get(), self.top.get(), self.limit.get());
        let (chunk_end, zeroed_end) = (self.chunk_end.get(), self.zeroed_end.get());
        if start == 0 {
            assert_eq!(
                (top, limit, chunk_end, zeroed_end),
                (0, 0, 0, 0),
                "an empty TLAB has every field 0"
            );
            return;
        }
        assert!(
            start <= top && top <= limit && limit <= chunk_end,
            "TLAB out of order: start {start:#x} top {top:#x} limit {limit:#x} chunk end {chunk_end:#x}"
        );
        assert!(
            start <= zeroed_end && zeroed_end <= limit,
            "TLAB zeroed end {zeroed_end:#x} outside [{start:#x}, {limit:#x}]"
        );
    }
}

/// What a retired TLAB held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retired {
    /// Bytes of the objects allocated in it (its gaps were counted when they were left).
    pub(crate) used_bytes: usize,
    /// Bytes of its free tail, now a filler: waste.
    pub(crate) tail_bytes: usize,
}

impl Retired {
    /// A TLAB with no tail, `used_bytes` of objects.
    #[inline]
    pub(crate) fn without_tail(used_bytes: usize) -> Self {
        Retired {
            used_bytes,
            tail_bytes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The short line's zeroing step, with its limit test.
    fn bump_zeroing_ahead(tlab: &Tlab, bytes: usize, step: usize) -> Option<usize> {
        (bytes <= tlab.free_bytes())
            .then(|| tlab.zeroing_step(bytes, step))
            .flatten()
    }

    /// A TLAB zeroed ahead over `memory` (dirty: every byte 0xab), without a reserve.
    fn dirty_tlab(memory: &mut [u64]) -> (Tlab, usize) {
        memory.fill(u64::MAX / 0xff * 0xab);
        let start = memory.as_mut_ptr().expose_provenance();
        let tlab = Tlab::default();
        tlab.install(start, memory.len() * 8, 0, true);
        tlab.set_soft_end(tlab.wanted_soft_end());
        (tlab, start)
    }

    #[test]
    fn zeroing_ahead_zeroes_one_step_past_each_object_that_leaves_the_zeroed_part() {
        let mut memory = vec![0u64; 512];
        let (tlab, start) = dirty_tlab(&mut memory);
        let step = 256;
        assert_eq!(tlab.bump(16), None, "nothing is zeroed yet");
        assert_eq!(bump_zeroing_ahead(&tlab, 16, step), Some(start));
        assert_eq!(tlab.wanted_soft_end(), start + step);
        assert_eq!(
            bump_zeroing_ahead(&tlab, 16, step),
            None,
            "inside the zeroed part: not a zeroing soft miss"
        );
        tlab.set_soft_end(tlab.wanted_soft_end());
        while tlab.bump(16).is_some() {}
        assert_eq!(tlab.top(), start + step);
        // An object larger than a step is zeroed whole.
        assert_eq!(bump_zeroing_ahead(&tlab, 400, step), Some(start + step));
        assert_eq!(tlab.wanted_soft_end(), start + step + 400);
        let zeroed_words = (step + 400) / 8;
        assert!(memory[..zeroed_words].iter().all(|&word| word == 0));
        assert!(memory[zeroed_words..].iter().all(|&word| word != 0));
    }

    #[test]
    fn zeroing_ahead_stops_at_the_limit_and_before_a_sample() {
        let mut memory = vec![0u64; 64];
        let (tlab, start) = dirty_tlab(&mut memory);
        assert_eq!(
            bump_zeroing_ahead(&tlab, 64 * 8 + 8, 1024),
            None,
            "past the limit"
        );
        tlab.set_sample_at(start + 64);
        assert_eq!(
            bump_zeroing_ahead(&tlab, 64, 1024),
            None,
            "reaches the sample"
        );
        assert_eq!(bump_zeroing_ahead(&tlab, 56, 1024), Some(start));
        assert_eq!(tlab.wanted_soft_end(), start + 64, "the sample is lower");
        tlab.set_sample_at(usize::MAX);
        assert_eq!(
            tlab.wanted_soft_end(),
            start + 64 * 8,
            "one step reaches the limit"
        );
        assert!(memory.iter().all(|&word| word == 0));
    }
}
