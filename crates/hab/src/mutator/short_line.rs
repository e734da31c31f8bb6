//! The slow path's short line: the common misses, handled in one straight line that returns
//! the object's address in a register (0: take the full slow path, `slow_path.rs`). The heap
//! picks its line once, for its mode ([`line_for`]); no miss tests the mode.
//!
//! - `shared`: the object carved from the global heap;
//! - TLAB modes: the object fits the TLAB but ends past the memory zeroed so far (a zeroing
//!   step), or the TLAB is full and the thread takes a new one of the steady size from its
//!   first place ([`SlowPath::refill`] with a [`Steady`] request: the global heap, or its own
//!   buffer at the lowest level).

use crate::config::ZERO_AHEAD_BYTES;
use crate::labs::tlab::Tlab;
use crate::levels::heap_levels::{
    AnyHome, CpuBuffersAtFixedArea, HomeKind, SharedBuffersByRseqCpu,
};
use crate::mutator::allocator::{Allocator, CommonMiss, ShortLine};
use crate::mutator::cell::MutatorCell;
use crate::mutator::refill::{GlobalTop, LevelsHome, Place, Steady};
use crate::mutator::slow_path::SlowPath;

/// The short line of a heap whose common misses are `common`.
pub(crate) fn line_for(common: CommonMiss) -> ShortLine {
    match common {
        CommonMiss::SharedObject => shared_line,
        CommonMiss::RefillFromGlobal => global_line,
        CommonMiss::RefillFromLevels(HomeKind::CpuBuffersAtFixedArea) => cpu_buffers_line,
        CommonMiss::RefillFromLevels(HomeKind::SharedBuffersByRseqCpu) => shared_buffers_line,
        CommonMiss::RefillFromLevels(HomeKind::Any) => any_home_line,
        CommonMiss::ZeroingStep => zeroing_step_line,
    }
}

/// The `shared` mode's short line: [`SlowPath::shared_object`], jumped to before any register
/// is saved.
#[cold]
#[inline(never)]
fn shared_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.shared_object(bytes)
}

/// The short lines of the TLAB modes, one per place TLABs come from: for each, the line (a
/// zeroing step, or a refill), the refill ([`SlowPath::refill`] of a [`Steady`] request from
/// that place) and its variant that first covers the old TLAB's tail with a filler. Each is the one routine
/// instantiated for a place, as a function of its own rather than a generic one: the jumps
/// between them then stay direct (generic instances were reached through the global offset
/// table here, an instruction more per refill).
macro_rules! refill_lines {
    ($($(#[$doc:meta])* $line:ident, $refill:ident, $fill_first:ident: $place:ty;)*) => {$(
        $(#[$doc])*
        #[cold]
        #[inline(never)]
        fn $line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
            SlowPath { allocator, cell }.tlab_miss(bytes, $refill)
        }

        #[inline(never)]
        fn $refill(path: SlowPath<'_>, bytes: usize, free_bytes: usize) -> usize {
            // SAFETY: reached only from its line, which `line_for` picks for this place.
            unsafe {
                let found = <$place>::find(path);
                path.refill::<$place, Steady, false>(bytes, free_bytes, found, $fill_first)
            }
        }

        #[inline(never)]
        fn $fill_first(path: SlowPath<'_>, bytes: usize, free_bytes: usize) -> usize {
            // SAFETY: as for the refill.
            unsafe {
                let found = <$place>::find(path);
                path.refill::<$place, Steady, true>(bytes, free_bytes, found, $fill_first)
            }
        }
    )*};
}

refill_lines! {
    /// The `tlab` mode's short line: TLABs from the global heap.
    global_line, global_refill, global_fill_first: GlobalTop;
    /// The `hab` mode's short line where the lowest level is the restartable `cpu` level and
    /// every thread's rseq area sits at one offset.
    cpu_buffers_line, cpu_buffers_refill, cpu_buffers_fill_first:
        LevelsHome<CpuBuffersAtFixedArea>;
    /// The `hab` mode's short line where the lowest level has compare-and-swap buffers and the
    /// CPU is read from the rseq area.
    shared_buffers_line, shared_buffers_refill, shared_buffers_fill_first:
        LevelsHome<SharedBuffersByRseqCpu>;
    /// The `hab` mode's short line elsewhere (on the CPUs the kernel numbers).
    any_home_line, any_home_refill, any_home_fill_first: LevelsHome<AnyHome>;
}

/// The short line where TLABs are not refilled on it (`flip`, or levels on simulated CPUs):
/// a zeroing step.
#[cold]
#[inline(never)]
fn zeroing_step_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, |_, _, _| 0)
}

impl SlowPath<'_> {
    /// The common misses, one short line that returns the object's address in a register
    /// (0: take [`alloc`](SlowPath::alloc), the full slow path). Taken only when nothing
    /// unusual is pending (no safepoint requested, sampling off) and the size is good: in the
    /// `shared` mode, an object carved from the global heap ([`shared_object`]); in TLAB
    /// modes, the object fits the TLAB but ends past the memory zeroed so far (zero the next
    /// step, bump, raise the soft end), or, where there are no per-CPU LABs, the TLAB is full
    /// and the thread takes a new one ([`refill`]). (A non-empty TLAB means the thread
    /// allocates in TLABs this cycle: a collection that moves it to per-CPU LABs retires it.)
    ///
    /// One indirect call, to the line the heap chose for its mode when it was made
    /// ([`line_for`]): no miss tests the mode. Every call in a line is its last step (a
    /// jump): the checks save no register, and the refill from the global heap keeps none of
    /// the levels' carve.
    ///
    /// [`shared_object`]: SlowPath::shared_object
    /// [`refill`]: SlowPath::refill
    #[inline(always)]
    pub(crate) fn common_miss(self, bytes: usize) -> usize {
        (self.allocator.short_line)(self.allocator, self.cell, bytes)
    }

    /// A TLAB mode's short line: the checks, then the zeroing step where the object fits the
    /// TLAB, else `refill`.
    #[inline(always)]
    fn tlab_miss(self, bytes: usize, refill: impl FnOnce(Self, usize, usize) -> usize) -> usize {
        // A safepoint may be requested, a size checked against another heap may be
        // misaligned for this one, a sample may be due: one test of the size finds any. (It
        // is never 0, and a size past the TLAB's free bytes takes the refill, which bounds
        // it.)
        if self.cell.takes_full_path(bytes) {
            return 0;
        }
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, _) = unsafe { self.cell.running_parts() };
        let free_bytes = tlab.free_bytes();
        if bytes <= free_bytes {
            return self.zeroing_step(tlab, bytes);
        }
        refill(self, bytes, free_bytes)
    }

    /// The object fits the TLAB but ends past the memory zeroed so far: zeroes the next step,
    /// bumps, raises the soft end. 0 when the soft end stopped it for another reason.
    #[inline(never)]
    fn zeroing_step(self, tlab: &Tlab, bytes: usize) -> usize {
        match tlab.zeroing_step(bytes, ZERO_AHEAD_BYTES) {
            Some(object) => {
                self.raise_soft_end(tlab);
                object
            }
            None => 0,
        }
    }

    /// The `shared` mode's short line, jumped to before any register is saved: when no
    /// safepoint is requested, sampling is off and the size is aligned (one test,
    /// [`MutatorCell::takes_full_path_loaded`]), an object carved from the global heap with
    /// one compare-and-swap ([`carve_object`](SlowPath::carve_object), which bounds the
    /// size). 0: take [`alloc`](SlowPath::alloc), the full slow path.
    #[inline(always)]
    fn shared_object(self, bytes: usize) -> usize {
        if self.cell.takes_full_path_loaded(bytes) {
            return 0;
        }
        self.carve_object(bytes).unwrap_or(0)
    }
}
