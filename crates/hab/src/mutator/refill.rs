//! The TLAB refill: one routine ([`SlowPath::refill`]) that retires the old TLAB, asks its
//! place above for a chunk and installs it with the object at its start. It is generated for
//! each place a refill asks ([`Place`]) and each kind of request ([`TlabRequest`]):
//!
//! - the short line's refills (`short_line.rs`), a [`Steady`] request of the size the policy
//!   keeps, exactly, from the first place the heap's mode looks: the global heap below the
//!   thread's end of the cycle ([`GlobalTop`]) or the thread's own buffer at the lowest middle
//!   level ([`LevelsHome`]); anything unusual gives up, leaving the TLAB as it was;
//! - the full slow path's refill ([`refill_or_alloc_outside`](SlowPath::refill_or_alloc_outside),
//!   after HotSpot's keep-or-refill rule), a [`Policy`] request (the policy's desired
//!   size, at least the object), from [`WholeProtocol`]: the global heap with the thread's part
//!   of the end of the cycle, or every middle level in turn.
//!
//! Cost: the short refill from the global heap is about 60 instructions, through the `cpu`
//! level about 78 (`tests/instruction_budget.rs` keeps them).

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::config::ZeroMemory;
use crate::config::ZERO_AHEAD_BYTES;
use crate::labs::tlab::{Retired, Waste};
use crate::levels::chunk::Chunk;
use crate::levels::heap_levels::{Home, HomeKind};
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::AllocError;
use crate::mutator::allocator::TlabSource;
use crate::mutator::cell::MutatorLocal;
use crate::mutator::slow_path::SlowPath;

/// Where a refill takes its TLAB, as a type: the refill is generated once per place. What the
/// carve needs is found before the refill begins ([`find`](Place::find)), then held in
/// registers while the refill retires the old TLAB.
pub(crate) trait Place {
    /// Whether the refill reads the old TLAB's used bytes after the carve rather than holding
    /// them in a register across it: one load more, which pays where the carve (a restartable
    /// section, a compare-and-swap found by the CPU) needs the registers.
    const LATE_OLD: bool;

    /// What the carve needs.
    type Found<'a>: Copy;

    /// Finds what the carve needs.
    ///
    /// # Safety
    /// The heap's TLABs come from this place (its mode and levels chose it).
    unsafe fn find<'a>(path: SlowPath<'a>) -> Self::Found<'a>;

    /// A chunk of `desired` bytes, or at least `min`, for the thread's next TLAB, counted where
    /// the place counts; `None` when the place cannot serve it (nothing carved).
    ///
    /// # Safety
    /// `found` came from [`find`](Place::find) on the same path.
    unsafe fn carve(
        found: Self::Found<'_>,
        path: SlowPath<'_>,
        local: &mut MutatorLocal,
        min: usize,
        desired: usize,
    ) -> Option<Chunk>;
}

/// The global heap, for the short line: exactly the desired size with one compare-and-swap on
/// its top, below the thread's end of the cycle.
pub(crate) struct GlobalTop;

impl Place for GlobalTop {
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
        local: &mut MutatorLocal,
        _: usize,
        desired: usize,
    ) -> Option<Chunk> {
        let start = global.carve_tlab(desired, local.end_of_cycle.tlab_end())?;
        Some(Chunk {
            start,
            len: desired,
        })
    }
}

/// The thread's own buffer at the lowest middle level, found as the home `H` finds it
/// ([`HeapLevels::carve_at_home`](crate::levels::heap_levels::HeapLevels::carve_at_home)),
/// for the short line: exactly the desired size.
pub(crate) struct LevelsHome<H>(PhantomData<H>);

impl<H: Home> Place for LevelsHome<H> {
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
        local: &mut MutatorLocal,
        _: usize,
        desired: usize,
    ) -> Option<Chunk> {
        let allocator = path.allocator;
        // SAFETY: the caller's contract.
        let chunk = unsafe {
            allocator.levels.carve_at_home::<H>(
                found,
                allocator.refill_context(),
                || &path.cell.counters.levels,
                &local.simulated_cpu,
                desired,
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

/// Every place the heap's TLABs come from, for the full slow path: the global heap with the
/// thread's part of the end of the cycle, or the middle levels' whole protocol (which count
/// where the chunk came from).
pub(crate) struct WholeProtocol;

impl Place for WholeProtocol {
    const LATE_OLD: bool = true;

    type Found<'a> = ();

    #[inline(always)]
    unsafe fn find(_: SlowPath<'_>) {}

    #[inline]
    unsafe fn carve(
        _: (),
        path: SlowPath<'_>,
        local: &mut MutatorLocal,
        min: usize,
        desired: usize,
    ) -> Option<Chunk> {
        let (allocator, cell) = (path.allocator, path.cell);
        match allocator.tlab_source.as_ref()? {
            TlabSource::Global => {
                let (share, alignment) = (&local.end_of_cycle, allocator.config.alignment_bytes());
                let (start, len) = allocator.space.global().carve_part(
                    min,
                    desired,
                    share.tlab_end(),
                    // Only past the thread's bound: what it allocated so far, read then (the
                    // old TLAB's objects included, which the refill counts after the carve).
                    |left, used| {
                        // SAFETY: only the thread running the mutator builds a `SlowPath`;
                        // its other references into the cell: this TLAB, shared (cells), and
                        // the slow-path state, another field.
                        let old_used_bytes = unsafe { cell.running_tlab() }.used_bytes();
                        let allocated =
                            cell.counters.tlab_and_outside_bytes() + old_used_bytes as u64;
                        share.part_bytes((left, used), allocated, min, alignment)
                    },
                )?;
                if len < desired {
                    cell.counters.end_of_cycle_tlabs.add(1);
                }
                Some(Chunk { start, len })
            }
            TlabSource::Levels => allocator.levels.carve(
                allocator.refill_context(),
                (
                    &cell.counters.levels,
                    Some(&cell.counters.tlabs_past_levels),
                ),
                &mut local.simulated_cpu,
                min,
                desired,
            ),
        }
    }
}

/// What a refill asks for and what it records, as a type: the refill is generated once per
/// kind of request.
pub(crate) trait TlabRequest {
    /// Whether the refill asks the keep-or-refill rule itself (and gives up when the TLAB is
    /// kept), rather than its caller.
    const ASKS_KEEP: bool;
    /// Whether the object may be due for an allocation sample.
    const SAMPLES: bool;

    /// The TLAB's size for an object of `bytes`: `(min, desired)`; `None` to give up.
    fn sizes(path: SlowPath<'_>, local: &MutatorLocal, bytes: usize) -> Option<(usize, usize)>;

    /// Records the refill in the thread's sizer and counters (the refill and the TLAB's bytes
    /// are counted by the routine).
    fn record(path: SlowPath<'_>, local: &mut MutatorLocal);
}

/// The short line's request: a TLAB of the size the policy keeps (fixed or adaptive), for an
/// object a TLAB of that size holds, taken only while nothing unusual holds.
pub(crate) struct Steady;

impl TlabRequest for Steady {
    const ASKS_KEEP: bool = true;
    const SAMPLES: bool = false;

    #[inline(always)]
    fn sizes(_: SlowPath<'_>, local: &MutatorLocal, bytes: usize) -> Option<(usize, usize)> {
        if bytes > local.sizer.steady_object_bytes() {
            return None;
        }
        let tlab_bytes = local.sizer.steady_bytes();
        Some((tlab_bytes, tlab_bytes))
    }

    #[inline(always)]
    fn record(_: SlowPath<'_>, local: &mut MutatorLocal) {
        local.sizer.record_steady_refill();
    }
}

/// The full slow path's request: the policy's desired size, at least the object and the
/// reserve below the TLAB's end, and at least the smallest TLAB where the place has less.
pub(crate) struct Policy;

impl TlabRequest for Policy {
    const ASKS_KEEP: bool = false;
    const SAMPLES: bool = true;

    #[inline(always)]
    fn sizes(path: SlowPath<'_>, local: &MutatorLocal, bytes: usize) -> Option<(usize, usize)> {
        let allocator = path.allocator;
        let needed = bytes + allocator.space.lab_reserve_bytes();
        let desired = local.sizer.desired_bytes().max(needed);
        let min = allocator.config.min_tlab_bytes().max(needed).min(desired);
        Some((min, desired))
    }

    #[inline(always)]
    fn record(path: SlowPath<'_>, local: &mut MutatorLocal) {
        let counters = &path.cell.counters;
        let resized = local.sizer.resizes_at_refill();
        local.sizer.record_refill(&path.allocator.config);
        counters.full_path_refills.add(1);
        if resized {
            counters
                .desired_size_bytes
                .set(local.sizer.desired_bytes() as u64);
        }
    }
}

impl SlowPath<'_> {
    /// HotSpot's rule: keep a TLAB with much free space and allocate the object outside it;
    /// otherwise retire it and take a new one sized by the policy ([`SlowPath::refill`] of a
    /// [`Policy`] request, from every place the heap's TLABs come from), or allocate the
    /// object outside TLABs when none could be carved.
    pub(crate) fn refill_or_alloc_outside(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let allocator = self.allocator;
        let (config, space) = (&allocator.config, &allocator.space);
        let cell = self.cell;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { cell.running_parts() };
        if let Some(object) = self.bump_after_soft_miss(tlab, local, bytes) {
            // SAFETY: a TLAB address inside the reservation, not null.
            return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
        }
        if bytes + space.lab_reserve_bytes() > config.max_tlab_bytes() {
            return self.alloc_outside_tlab(bytes);
        }
        let free_bytes = tlab.free_bytes();
        if local.sizer.keeps(free_bytes) {
            local.sizer.record_slow_allocation(config);
            return self.alloc_outside_tlab(bytes);
        }
        // SAFETY: the heap has TLABs (the caller checked), and they come from the whole
        // protocol's places; `find` finds nothing.
        let object = unsafe {
            self.refill::<WholeProtocol, Policy, true>(bytes, free_bytes, (), |_, _, _| 0)
        };
        if object == 0 {
            return self.alloc_outside_tlab(bytes);
        }
        // SAFETY: `object` is the start of the fresh TLAB, a non-null heap address.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    /// The refill, one straight line: the object of `bytes` (aligned) does not fit the TLAB,
    /// whose free bytes were `free_bytes` (handed on in a register rather than read again).
    /// Sizes the new TLAB as `R` asks, covers the old one's tail with a filler, carves the
    /// chunk from `P` (with `found`, what [`Place::find`] found), counts the old TLAB as
    /// retired and the refill, installs the chunk, bumps the object and raises the soft end;
    /// returns the object. 0 when it gives up (`R`'s sizes, a TLAB kept where `R` asks the
    /// rule, no chunk at `P`): nothing was counted, and the TLAB is as it was, its tail
    /// perhaps covered by a filler already (a later retire writes the same filler again;
    /// [`keep_filled_tlab`](SlowPath::keep_filled_tlab) zeroes what the filler overwrote).
    ///
    /// What needs a call leaves the line, so that it saves no register when nothing does:
    /// without `FILL_FIRST`, an old TLAB with a free tail goes to `fill_first` (this routine
    /// with `FILL_FIRST`), which covers the tail before anything else (a filler that panics
    /// then leaves the TLAB whole); a new TLAB in reused memory ends in
    /// [`finish_refill`](SlowPath::finish_refill), which zeroes.
    ///
    /// # Safety
    /// The heap's TLABs come from `P`, and `found` came from its [`find`](Place::find) on
    /// this path.
    #[inline(always)]
    pub(crate) unsafe fn refill<P: Place, R: TlabRequest, const FILL_FIRST: bool>(
        self,
        bytes: usize,
        free_bytes: usize,
        found: P::Found<'_>,
        fill_first: fn(Self, usize, usize) -> usize,
    ) -> usize {
        let allocator = self.allocator;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { self.cell.running_parts() };
        let space = &allocator.space;
        let Some((min, desired)) = R::sizes(self, local, bytes) else {
            return 0;
        };
        // A TLAB without a tail has no free bytes either, so the keep-or-refill rule retires
        // it: the rule is asked only of one with a tail.
        let no_tail = tlab.has_no_tail();
        debug_assert!(!no_tail || free_bytes == 0);
        let used_before = (!P::LATE_OLD).then(|| tlab.used_bytes());
        let mut held = None;
        if !no_tail {
            if !FILL_FIRST {
                return fill_first(self, bytes, free_bytes);
            }
            if R::ASKS_KEEP && local.sizer.keeps(free_bytes) {
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
        // SAFETY: the caller's contract.
        let Some(Chunk { start, len }) = (unsafe { P::carve(found, self, local, min, desired) })
        else {
            if !no_tail {
                self.keep_filled_tlab();
            }
            return 0;
        };
        let retired = if no_tail {
            // Counted as its objects (0 for an empty TLAB): the tail, 0, is known here and
            // not added. Read after the carve where it is `LATE_OLD` (the thread's own
            // fields, as they were).
            let used_bytes = used_before.unwrap_or_else(|| tlab.used_bytes());
            Some(Retired::without_tail(used_bytes))
        } else {
            held
        };
        let counters = &self.cell.counters;
        counters.count_retired(retired, Waste::Refill);
        R::record(self, local);
        counters.refills.add(1);
        counters.tlab_bytes.add(len as u64);
        if space.global().needs_zeroing(start) {
            return self.finish_refill::<R>(start, len, bytes);
        }
        let limit = tlab.install(start, len, space.lab_reserve_bytes(), false);
        let object = tlab.bump_first(bytes);
        if R::SAMPLES {
            self.prepare_tlab_object(tlab, local, object, bytes);
        } else {
            self.raise_soft_end_to(tlab, limit);
        }
        object
    }

    /// A [`refill`](SlowPath::refill) that covered the TLAB's tail with a filler, then found
    /// no chunk: the TLAB stays in use, so in a heap that zeroes, the part of the tail already
    /// counted as zeroed is zeroed again (the filler wrote there). The filler itself may stay:
    /// the heap walk never reaches it before a later retire writes the tail's filler again.
    #[cold]
    #[inline(never)]
    fn keep_filled_tlab(self) {
        if self.allocator.config.zero() != ZeroMemory::Never {
            // SAFETY: only the thread running the mutator builds a `SlowPath`.
            let (tlab, _) = unsafe { self.cell.running_parts() };
            tlab.zero_ready_tail();
        }
    }

    /// The end of a [`refill`](SlowPath::refill) into reused memory: installs the chunk
    /// `[start, start + len)`, zeroes it (whole, or its first step when zeroing ahead), bumps
    /// the object of `bytes`, raises the soft end; returns the object.
    #[inline(never)]
    fn finish_refill<R: TlabRequest>(self, start: usize, len: usize, bytes: usize) -> usize {
        let space = &self.allocator.space;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { self.cell.running_parts() };
        let zero_ahead = self.allocator.config.zero() == ZeroMemory::Ahead;
        if !zero_ahead {
            space.global().zero_reused(start, len);
        }
        tlab.install(start, len, space.lab_reserve_bytes(), zero_ahead);
        let object = tlab.bump_first(bytes);
        if R::SAMPLES {
            self.prepare_tlab_object(tlab, local, object, bytes);
        } else {
            tlab.zero_through(object + bytes, ZERO_AHEAD_BYTES);
            self.raise_soft_end(tlab);
        }
        // Opaque to the optimizer (as `zero_object`'s).
        std::hint::black_box(object)
    }
}
