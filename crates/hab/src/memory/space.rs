//! A heap's memory as the layers above see it: the global heap they carve from, and the
//! object model's fillers that cover every gap they leave, so that the heap stays walkable.
//! The layers below the heap take a `&Space`, never the heap.

use std::ptr::NonNull;

use crate::memory::global::GlobalHeap;
use crate::memory::object_model::ObjectModel;
use crate::memory::reservation::address_to_pointer;

/// The global heap and the filler rules of one heap.
pub(crate) struct Space {
    global: GlobalHeap,
    model: Box<dyn ObjectModel>,
    alignment_bytes: usize,
    /// The object model's smallest filler (at least 1).
    min_filler_bytes: usize,
    /// Bytes every LAB keeps below its hard end so its tail can hold a filler: 0 when the
    /// smallest filler is no larger than the alignment.
    lab_reserve_bytes: usize,
}

impl Space {
    /// The space over `global`, filled with `model`'s fillers; `lab_reserve_bytes` as computed
    /// by [`lab_reserve_bytes`].
    pub(crate) fn new(
        global: GlobalHeap,
        model: Box<dyn ObjectModel>,
        alignment_bytes: usize,
        lab_reserve_bytes: usize,
    ) -> Self {
        let min_filler_bytes = model.min_filler_bytes().max(1);
        Space {
            global,
            model,
            alignment_bytes,
            min_filler_bytes,
            lab_reserve_bytes,
        }
    }

    /// The global heap.
    #[inline]
    pub(crate) fn global(&self) -> &GlobalHeap {
        &self.global
    }

    /// The runtime's object model.
    pub(crate) fn object_model(&self) -> &dyn ObjectModel {
        &*self.model
    }

    /// The reservation's first address: what word offsets of the middle levels count from.
    #[inline]
    pub(crate) fn base(&self) -> usize {
        self.global.reserved().0
    }

    /// Bytes every LAB keeps below its hard end for a filler (see [`Space::new`]).
    #[inline]
    pub(crate) fn lab_reserve_bytes(&self) -> usize {
        self.lab_reserve_bytes
    }

    /// The gap to leave at `address` so that an object after it starts at a multiple of
    /// `alignment_bytes` (a power of two, at least the heap's alignment): 0, or long enough for
    /// a filler.
    pub(crate) fn aligned_gap(&self, address: usize, alignment_bytes: usize) -> usize {
        let mut gap = address.next_multiple_of(alignment_bytes) - address;
        while gap != 0 && gap < self.min_filler_bytes {
            gap += alignment_bytes;
        }
        gap
    }

    /// Covers the gap `[start, start + bytes)` with a filler. A gap that breaks the object
    /// model's contract (misaligned, or shorter than its smallest filler) can only come from a
    /// size checked against another heap; it is left unwritten rather than risk a write beyond
    /// the gap, and the heap walk then reports the heap as unparseable there.
    ///
    /// # Safety
    /// The caller owns the gap exclusively.
    #[inline(always)]
    pub(crate) unsafe fn write_filler(&self, start: usize, bytes: usize) {
        if bytes == 0
            || bytes < self.min_filler_bytes
            // The alignment is a power of two: a mask, not a division.
            || (start | bytes) & (self.alignment_bytes - 1) != 0
        {
            return;
        }
        // SAFETY: the gap is aligned, long enough for a filler, inside the reservation (a LAB
        // carved from it) and owned by the caller; a non-null heap address.
        unsafe {
            self.model
                .write_filler(NonNull::new_unchecked(address_to_pointer(start)), bytes)
        };
    }
}

/// The reserve every LAB keeps for its tail's filler, given the object model's smallest
/// filler and the alignment: 0 when a filler fits any aligned gap, else the filler rounded up
/// to the alignment (`usize::MAX` where that overflows, which no heap can satisfy).
pub(crate) fn lab_reserve_bytes(min_filler_bytes: usize, alignment_bytes: usize) -> usize {
    let min_filler_bytes = min_filler_bytes.max(1);
    if min_filler_bytes <= alignment_bytes {
        0
    } else {
        min_filler_bytes
            .checked_next_multiple_of(alignment_bytes)
            .unwrap_or(usize::MAX)
    }
}
