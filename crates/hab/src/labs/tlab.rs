//! The thread-local allocation buffer: a `[start, hard_end)` chunk the thread bumps `top`
//! through without synchronisation.
//!
//! The fast path touches only `top` and `end`, laid out `#[repr(C)]` at offsets
//! [`TLAB_TOP_OFFSET`] and [`TLAB_END_OFFSET`] so that a JIT can inline it. `end` is a *soft*
//! end: when the object model's smallest filler is larger than the alignment, `end` stays that
//! far below `hard_end` so the tail left at retire can always be filled.

use crate::memory::space::Space;

/// Offset of the TLAB's `top` (a `usize` address) from the address
/// [`Mutator::tlab_address`](crate::Mutator::tlab_address) returns.
pub const TLAB_TOP_OFFSET: usize = 0;
/// Offset of the TLAB's soft `end` (a `usize` address): an object of `n` bytes fits when
/// `top + n <= end`.
pub const TLAB_END_OFFSET: usize = 8;

/// A thread's TLAB. Empty (all zero) when the thread has none: every fast path then fails.
#[repr(C)]
#[derive(Debug, Default)]
pub(crate) struct Tlab {
    /// Next free byte.
    pub(crate) top: usize,
    /// Objects must end at or below this address.
    pub(crate) end: usize,
    /// First byte of the chunk.
    pub(crate) start: usize,
    /// One past the last byte of the chunk.
    pub(crate) hard_end: usize,
}

/// Where the free tail of a retired TLAB is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Waste {
    /// Retired to take a new TLAB.
    Refill,
    /// Retired by a collection, at a safepoint, or when its thread detached.
    Collection,
}

impl Tlab {
    /// Bytes an object may still take before the soft end.
    #[inline]
    pub(crate) fn free_bytes(&self) -> usize {
        self.end - self.top
    }

    /// Starts bumping through the chunk `[start, start + len)`, keeping `reserve` bytes.
    pub(crate) fn install(&mut self, start: usize, len: usize, reserve: usize) {
        debug_assert!(self.start == 0, "retire before installing");
        *self = Tlab {
            top: start,
            end: start + len - reserve,
            start,
            hard_end: start + len,
        };
    }

    /// Fills the free tail with a filler and leaves the TLAB empty; returns what it held, for
    /// the caller to count. `None` for an empty TLAB, which it leaves as it is.
    ///
    /// # Safety
    /// The caller has exclusive access to this TLAB's memory (its own, or a stopped thread's).
    pub(crate) unsafe fn retire(&mut self, space: &Space) -> Option<Retired> {
        if self.start == 0 {
            return None;
        }
        let retired = Retired {
            used_bytes: self.top - self.start,
            tail_bytes: self.hard_end - self.top,
        };
        // SAFETY: [top, hard_end) is the unused tail of this TLAB, owned by the caller; the
        // reserve keeps it at least one filler long (see the module documentation).
        unsafe { space.write_filler(self.top, retired.tail_bytes) };
        *self = Tlab::default();
        Some(retired)
    }
}

/// What a retired TLAB held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Retired {
    /// Bytes of the objects allocated in it.
    pub(crate) used_bytes: usize,
    /// Bytes of its free tail, now a filler: waste.
    pub(crate) tail_bytes: usize,
}
