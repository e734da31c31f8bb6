//! The slow path's short line: the common misses, handled in one straight line that returns
//! the object's address in a register (0: take the full slow path, `slow_path.rs`). The heap
//! picks its line once, for its mode ([`line_for`]); no miss tests the mode.
//!
//! - `shared`: the object carved from the global heap;
//! - TLAB modes: the object fits the TLAB but ends past the memory zeroed so far (a zeroing
//!   step), or the TLAB is full and the thread takes a new one of the steady size from its
//!   first place ([`SlowPath::refill`]: the global heap, or its own buffer at the lowest
//!   level).

use std::marker::PhantomData;

use crate::config::{ZeroMemory, ZERO_AHEAD_BYTES};
use crate::labs::tlab::{Retired, Tlab, Waste};
use crate::levels::chunk::Chunk;
use crate::levels::heap_levels::{
    AnyHome, CpuBuffersAtFixedArea, Home, HomeKind, SharedBuffersByRseqCpu,
};
use crate::mutator::allocator::{Allocator, CommonMiss, ShortLine};
use crate::mutator::cell::{MutatorCell, MutatorLocal};
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
/// zeroing step, or a refill), the refill ([`SlowPath::refill`] from that place) and its
/// variant that first covers the old TLAB's tail with a filler. Each is the one routine
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
            unsafe { path.refill_from::<$place, false>(bytes, free_bytes, $fill_first) }
        }

        #[inline(never)]
        fn $fill_first(path: SlowPath<'_>, bytes: usize, free_bytes: usize) -> usize {
            // SAFETY: as for the refill.
            unsafe { path.refill_from::<$place, true>(bytes, free_bytes, $fill_first) }
        }
    )*};
}

refill_lines! {
    /// The `tlab` mode's short line: TLABs from the global heap.
    global_line, global_refill, global_fill_first: GlobalHeap;
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

/// Where a short refill takes its TLAB, as a type: one refill routine is generated per place.
/// What the carve needs is found before the refill begins ([`find`](FirstPlace::find)), then
/// held in registers while the refill retires the old TLAB.
trait FirstPlace {
    /// Whether the refill reads the old TLAB's used bytes after the carve rather than holding
    /// them in a register across it: one load more, which pays where the carve (a restartable
    /// section, a compare-and-swap found by the CPU) needs the registers.
    const LATE_OLD: bool;

    /// What the carve needs.
    type Found<'a>: Copy;

    /// Finds what the carve needs.
    ///
    /// # Safety
    /// The heap's short line is this place's ([`line_for`] picked it for the heap's mode and
    /// levels).
    unsafe fn find<'a>(path: SlowPath<'a>) -> Self::Found<'a>;

    /// Exactly `tlab_bytes` for the thread's next TLAB, counted where the place counts;
    /// `None` when the place cannot serve it (nothing carved).
    ///
    /// # Safety
    /// `found` came from [`find`](FirstPlace::find) on the same path.
    unsafe fn carve(
        found: Self::Found<'_>,
        path: SlowPath<'_>,
        local: &MutatorLocal,
        tlab_bytes: usize,
    ) -> Option<Chunk>;
}

/// The global heap: one compare-and-swap on its top, below the thread's end of the cycle.
struct GlobalHeap;

impl FirstPlace for GlobalHeap {
    const LATE_OLD: bool = false;

    type Found<'a> = &'a crate::memory::global::GlobalHeap;

    #[inline(always)]
    unsafe fn find<'a>(path: SlowPath<'a>) -> Self::Found<'a> {
        path.allocator.space.global()
    }

    #[inline(always)]
    unsafe fn carve(
        global: Self::Found<'_>,
        _: SlowPath<'_>,
        local: &MutatorLocal,
        tlab_bytes: usize,
    ) -> Option<Chunk> {
        let start = global.carve_tlab(tlab_bytes, local.end_of_cycle.tlab_end())?;
        Some(Chunk {
            start,
            len: tlab_bytes,
        })
    }
}

/// The thread's own buffer at the lowest middle level, found as the home `H` finds it
/// ([`HeapLevels::carve_at_home`](crate::levels::heap_levels::HeapLevels::carve_at_home)).
struct LevelsHome<H>(PhantomData<H>);

impl<H: Home> FirstPlace for LevelsHome<H> {
    const LATE_OLD: bool = !matches!(H::KIND, HomeKind::Any);

    type Found<'a> = H::Found<'a>;

    #[inline(always)]
    unsafe fn find<'a>(path: SlowPath<'a>) -> Self::Found<'a> {
        let allocator = path.allocator;
        // SAFETY: the caller's contract: the heap's levels have home `H`.
        unsafe {
            allocator
                .levels
                .find_home::<H>(&allocator.space, &path.cell.counters.levels)
        }
    }

    #[inline(always)]
    unsafe fn carve(
        found: Self::Found<'_>,
        path: SlowPath<'_>,
        local: &MutatorLocal,
        tlab_bytes: usize,
    ) -> Option<Chunk> {
        let allocator = path.allocator;
        // SAFETY: the caller's contract.
        let chunk = unsafe {
            allocator.levels.carve_at_home::<H>(
                found,
                allocator.refill_context(),
                || &path.cell.counters.levels,
                &local.simulated_cpu,
                tlab_bytes,
            )
        }?;
        // The length read again (the sizer's, which the carve was asked for) rather than
        // held across the carve.
        Some(Chunk {
            len: local.sizer.steady_bytes(),
            ..chunk
        })
    }
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

    /// A TLAB mode's [`refill`](SlowPath::refill) from the place `P`, whose variant that
    /// writes the old TLAB's filler first is `fill_first`.
    ///
    /// # Safety
    /// The heap's short line is `P`'s.
    #[inline(always)]
    unsafe fn refill_from<P: FirstPlace, const FILL_FIRST: bool>(
        self,
        bytes: usize,
        free_bytes: usize,
        fill_first: fn(Self, usize, usize) -> usize,
    ) -> usize {
        // SAFETY: the caller's contract.
        let found = unsafe { P::find(self) };
        self.refill::<FILL_FIRST>(
            bytes,
            free_bytes,
            // SAFETY: as for `find`.
            |local, tlab_bytes| unsafe { P::carve(found, self, local, tlab_bytes) },
            fill_first,
            P::LATE_OLD,
        )
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

    /// The short refill, one straight line: the object (of an aligned size) does not fit the
    /// TLAB, the policy retires it (HotSpot's keep-or-refill rule) and keeps its size (fixed
    /// or adaptive), and the object fits a TLAB of that size. Carves exactly that size with
    /// `carve` (one CAS on the global top, or the thread's own buffer at the lowest level),
    /// counts the old TLAB as retired, installs the new one, counts the refill, bumps the
    /// object, raises the soft end. 0 for everything else (the growing policy, a TLAB kept,
    /// a large object, no room at the first place looked): nothing was counted and the TLAB
    /// is as it was, for [`refill_or_alloc_outside`](SlowPath::refill_or_alloc_outside) to do
    /// in full. `free_bytes` is the old TLAB's free bytes as the line found them (less than
    /// `bytes`), handed on in a register rather than read again. With `late_old` (a constant
    /// at each refill) the old TLAB's used bytes are read after the carve rather than kept in
    /// a register across it: one load more, which pays where the carve (a restartable
    /// section) needs the registers.
    ///
    /// What needs a call leaves the line, so that it saves no register when nothing does:
    /// an old TLAB with a free tail (or gaps before aligned objects, which count apart) goes
    /// to `fill_first` (this line with `FILL_FIRST`), which covers the tail with a filler
    /// before anything else (a filler that panics then leaves
    /// the TLAB whole; a failed carve leaves it filled, and the full path writes the same
    /// filler again); a new TLAB in reused memory ends in
    /// [`finish_refill`](SlowPath::finish_refill), which zeroes.
    #[inline(always)]
    fn refill<const FILL_FIRST: bool>(
        self,
        bytes: usize,
        free_bytes: usize,
        carve: impl FnOnce(&MutatorLocal, usize) -> Option<Chunk>,
        fill_first: fn(Self, usize, usize) -> usize,
        late_old: bool,
    ) -> usize {
        let allocator = self.allocator;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { self.cell.running_parts() };
        let space = &allocator.space;
        if bytes > local.sizer.steady_object_bytes() {
            return 0;
        }
        let tlab_bytes = local.sizer.steady_bytes();
        // A TLAB without a tail has no free bytes either, so the keep-or-refill rule retires
        // it: the rule is asked only of one with a tail.
        let no_tail = tlab.has_no_tail();
        debug_assert!(!no_tail || free_bytes == 0);
        let used_before = (!late_old).then(|| tlab.used_bytes());
        let mut held = None;
        if !no_tail {
            if !FILL_FIRST {
                return fill_first(self, bytes, free_bytes);
            }
            if local.sizer.keeps(free_bytes) {
                return 0;
            }
            held = tlab.held();
            let tail_bytes = held.map_or(0, |held| held.tail_bytes);
            if tail_bytes != 0 {
                // SAFETY: [top, chunk_end) is the unused tail of this thread's TLAB; the
                // reserve keeps it at least one filler long.
                unsafe { space.write_filler(tlab.top(), tail_bytes) };
            }
        }
        let Some(Chunk { start, len }) = carve(local, tlab_bytes) else {
            return 0;
        };
        let retired = if no_tail {
            // Counted as its objects (0 for an empty TLAB): the tail, 0, is known here and
            // not added. Read after the carve where it is `late_old` (the thread's own fields,
            // as they were).
            let used_bytes = used_before.unwrap_or_else(|| tlab.used_bytes());
            Some(Retired::without_tail(used_bytes))
        } else {
            held
        };
        let counters = &self.cell.counters;
        counters.count_retired(retired, Waste::Refill);
        local.sizer.record_steady_refill();
        counters.refills.add(1);
        counters.tlab_bytes.add(len as u64);
        if space.global().needs_zeroing(start) {
            return self.finish_refill(start, len, bytes);
        }
        let limit = tlab.install(start, len, space.lab_reserve_bytes(), false);
        let object = tlab.bump_first(bytes);
        self.raise_soft_end_to(tlab, limit);
        object
    }

    /// The end of a short [`refill`](SlowPath::refill) into reused memory: installs the chunk
    /// `[start, start + len)`, zeroes it (whole, or its first step when zeroing ahead), bumps
    /// the object of `bytes`, raises the soft end; returns the object.
    #[inline(never)]
    fn finish_refill(self, start: usize, len: usize, bytes: usize) -> usize {
        let space = &self.allocator.space;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, _) = unsafe { self.cell.running_parts() };
        let zero_ahead = self.allocator.config.zero() == ZeroMemory::Ahead;
        if !zero_ahead {
            space.global().zero_reused(start, len);
        }
        tlab.install(start, len, space.lab_reserve_bytes(), zero_ahead);
        let object = tlab.bump_first(bytes);
        tlab.zero_through(object + bytes, ZERO_AHEAD_BYTES);
        self.raise_soft_end(tlab);
        // Opaque to the optimizer (as `zero_object`'s).
        std::hint::black_box(object)
    }
}
