//! The mutator's full slow path: everything an allocation does when the fast path fails and
//! the short line (`short_line.rs`) did not serve it. Stop at a requested safepoint; after a
//! soft miss raise the soft end and bump in the same TLAB; keep the TLAB or refill it
//! (`refill.rs`, the refill the short line takes too); allocate outside any TLAB; carve
//! from the per-CPU LABs, or look the CPU up again after a per-CPU LAB miss; follow the
//! `flip` mode's phase. Cold and out of line; the fast paths that call it are
//! `heap::mutator_handle`'s.

use std::ptr::NonNull;

use crate::config::ZERO_AHEAD_BYTES;
use crate::labs::cpu_labs::{self, CpuLabs, Requester};
use crate::labs::tlab::{Tlab, Waste};
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::allocator::Allocator;
use crate::mutator::cell::{MutatorCell, MutatorLocal};
use crate::mutator::cpu_lab_cursor::CpuLabCursor;
use crate::mutator::sampling::AllocationSample;
use crate::platform::fence;

/// A running mutator as its slow path sees it: the heap's allocation side and the mutator's
/// cell, two plain references. Only built by the thread that runs the mutator.
#[derive(Clone, Copy)]
pub(crate) struct SlowPath<'a> {
    pub(crate) allocator: &'a Allocator,
    pub(crate) cell: &'a MutatorCell,
}

/// What the slow paths return: the allocation's result and the fast path the mutator takes
/// next (inactive: its TLAB's).
pub(crate) type SlowResult = (Result<NonNull<u8>, AllocError>, CpuLabCursor);

impl SlowPath<'_> {
    /// After a miss: looks the CPU up again and retries once; then the mutator's slow path
    /// (which refills the LAB, or stops at a safepoint first). Takes and returns plain values
    /// so that the caller's copies can stay in registers.
    #[cold]
    #[inline(never)]
    pub(crate) fn cpu_lab_miss(self, area_offset: isize, size: AllocSize) -> SlowResult {
        let slow_path = self;
        if slow_path.cell.safepoint_requested() {
            return slow_path.alloc(size.bytes());
        }
        let Some(slots) = slow_path
            .allocator
            .cpu_labs
            .as_ref()
            .and_then(CpuLabs::lab_slots)
        else {
            return slow_path.alloc(size.bytes());
        };
        let Some(cursor) = CpuLabCursor::at(slots, area_offset) else {
            return slow_path.alloc(size.bytes());
        };
        // SAFETY: the mutator still allocates in these LABs (it has not parked since the
        // cursor it missed with was made); `slot` is the LAB of `cpu`.
        match unsafe { cursor.bump(size) } {
            Some(object) => (Ok(object), cursor),
            None => slow_path.alloc(size.bytes()),
        }
    }

    /// Allocates `bytes` after the fast path failed, first stopping at a requested safepoint.
    /// Takes the two references by value (not the mutator's address) so the caller's loop can
    /// keep the mutator's fields in registers; all state it changes lives in `cell`. Returns
    /// the fast path to take next, which a safepoint may have changed.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc(self, bytes: usize) -> SlowResult {
        if self.allocator.tlab_source.is_none() && self.allocator.cpu_labs.is_none() {
            return self.alloc_shared(bytes);
        }
        self.alloc_in_labs(bytes)
    }

    /// An object of `bytes` carved from the global heap outside any LAB, zeroed where the
    /// heap zeroes reused memory, counted; `None` when the heap is full. (Sampling is the
    /// caller's: [`alloc_outside_tlab`](SlowPath::alloc_outside_tlab).)
    ///
    /// Counts before it zeroes, so that with fresh memory it calls nothing and saves no
    /// register; reused memory is zeroed out of line ([`zero_object`](SlowPath::zero_object)).
    #[inline]
    pub(crate) fn carve_object(self, bytes: usize) -> Option<usize> {
        let global = self.allocator.space.global();
        let address = global.carve(bytes)?;
        let counters = &self.cell.counters;
        counters.slow_allocs.add(1);
        counters.slow_alloc_bytes.add(bytes as u64);
        if global.needs_zeroing(address) {
            return Some(self.zero_object(address, bytes));
        }
        Some(address)
    }

    /// Zeroes an object of `bytes` just carved at `address` in reused memory; returns
    /// `address`.
    #[cold]
    #[inline(never)]
    fn zero_object(self, address: usize, bytes: usize) -> usize {
        self.allocator.space.global().zero_reused(address, bytes);
        // Opaque to the optimizer: known to return its argument, the caller would keep
        // `address` in a register it must save instead of jumping here.
        std::hint::black_box(address)
    }

    /// `alloc` in the modes with LABs (TLABs or per-CPU LABs).
    #[inline(never)]
    fn alloc_in_labs(self, bytes: usize) -> SlowResult {
        if self.cell.safepoint_requested() {
            self.allocator.safepoints.stop(self.cell);
        }
        (self.alloc_here(bytes), self.lab_cursor())
    }

    /// The `shared` mode's whole allocation (every object takes it): a safepoint check, then
    /// an object carved from the global heap. Its own function, which `alloc` jumps to, so
    /// that it saves none of the registers the other modes' slow path needs.
    #[inline(never)]
    fn alloc_shared(self, bytes: usize) -> SlowResult {
        if self.cell.safepoint_requested() {
            self.allocator.safepoints.stop(self.cell);
        }
        let config = &self.allocator.config;
        let result = AllocSize::check(bytes, config.alignment_bytes(), config.capacity_bytes())
            .and_then(|_| self.alloc_outside_tlab(bytes));
        (result, CpuLabCursor::INACTIVE)
    }

    /// Allocates `bytes` at a multiple of `alignment_bytes` (a power of two larger than the
    /// heap's alignment, at most a page; checked by the caller), first stopping at a requested
    /// safepoint: in the TLAB when it fits there, after a filler; else outside LABs, after a
    /// filler. Always this slow path: aligned objects are rare.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_aligned(self, bytes: usize, alignment_bytes: usize) -> SlowResult {
        if self.cell.safepoint_requested() {
            self.allocator.safepoints.stop(self.cell);
        }
        (
            self.alloc_aligned_here(bytes, alignment_bytes),
            self.lab_cursor(),
        )
    }

    fn alloc_aligned_here(
        self,
        bytes: usize,
        alignment_bytes: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        let config = &self.allocator.config;
        AllocSize::check(bytes, config.alignment_bytes(), config.capacity_bytes())?;
        let space = &self.allocator.space;
        if !self.follow_mode() && self.allocator.tlab_source.is_some() {
            // SAFETY: only the thread running the mutator builds a `SlowPath`.
            let (tlab, local) = unsafe { self.cell.running_parts() };
            let gap = space.aligned_gap(tlab.top(), alignment_bytes);
            if let Some(start) = tlab.bump_to_limit(gap + bytes) {
                let object = start + gap;
                self.prepare_tlab_object(tlab, local, object, bytes);
                // After zeroing: the filler's header must survive it.
                // SAFETY: `[start, object)` was just bumped through this thread's TLAB.
                unsafe { space.write_filler(start, gap) };
                tlab.pass_gap(gap);
                self.cell.counters.alignment_gap_bytes.add(gap as u64);
                // SAFETY: a heap address is not null.
                return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
            }
        }
        let global = space.global();
        let (start, gap) = global
            .carve_after_gap(bytes, |top| space.aligned_gap(top, alignment_bytes))
            .ok_or(AllocError::OutOfMemory { bytes })?;
        let object = start + gap;
        global.zero_reused(object, bytes);
        // SAFETY: `[start, object)` was just carved by this thread.
        unsafe { space.write_filler(start, gap) };
        let counters = &self.cell.counters;
        counters.alignment_gap_bytes.add(gap as u64);
        counters.slow_allocs.add(1);
        counters.slow_alloc_bytes.add(bytes as u64);
        // SAFETY: a heap address is not null.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    /// Stops at a requested safepoint (the owner polled); returns how many collections
    /// ended meanwhile and the fast path to take next.
    #[cold]
    #[inline(never)]
    pub(crate) fn stop_at_safepoint(self) -> (u64, CpuLabCursor) {
        let slept = self.allocator.safepoints.stop(self.cell);
        (slept, self.lab_cursor())
    }

    /// The fast path the mutator takes now: the per-CPU LAB cursor when it allocates in
    /// restartable per-CPU LABs, inactive for its TLAB.
    pub(crate) fn lab_cursor(self) -> CpuLabCursor {
        let cursor = match &self.allocator.cpu_labs {
            Some(cpu_labs) if self.follow_mode() => CpuLabCursor::new(cpu_labs),
            _ => None,
        };
        cursor.unwrap_or(CpuLabCursor::INACTIVE)
    }

    fn alloc_here(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        // Re-check: the size may have been checked against another heap.
        let config = &self.allocator.config;
        AllocSize::check(bytes, config.alignment_bytes(), config.capacity_bytes())?;
        if self.follow_mode() {
            return self.alloc_in_cpu_lab(bytes);
        }
        match &self.allocator.tlab_source {
            Some(_) => self.refill_or_alloc_outside(bytes),
            None => self.alloc_outside_tlab(bytes),
        }
    }

    /// After a soft miss (the object fits below the TLAB's limit, not below its soft end):
    /// raises the soft end and bumps. `None` when the object does not fit the TLAB.
    pub(crate) fn bump_after_soft_miss(
        self,
        tlab: &Tlab,
        local: &mut MutatorLocal,
        bytes: usize,
    ) -> Option<usize> {
        let object = tlab.bump_to_limit(bytes)?;
        self.prepare_tlab_object(tlab, local, object, bytes);
        Some(object)
    }

    /// After bumping `object` through the TLAB in the slow path: zeroes ahead, samples it if
    /// it crossed the thread's next sample, and raises the soft end again.
    pub(crate) fn prepare_tlab_object(
        self,
        tlab: &Tlab,
        local: &mut MutatorLocal,
        object: usize,
        bytes: usize,
    ) {
        tlab.zero_through(object + bytes, ZERO_AHEAD_BYTES);
        let interval = self.allocator.sampling.interval_bytes();
        let clock = self.clock_bytes(tlab);
        if local.next_sample.reached(clock, interval) {
            self.report_sample(object, bytes, clock);
        }
        let next = match local.next_sample.bytes_ahead(clock, interval) {
            Some(ahead) => tlab.top().saturating_add(ahead as usize),
            None => usize::MAX,
        };
        tlab.set_sample_at(next);
        self.raise_soft_end(tlab);
    }

    /// The thread's allocation clock: its objects' bytes in TLABs (the current one included)
    /// and outside LABs.
    fn clock_bytes(self, tlab: &Tlab) -> u64 {
        let counters = &self.cell.counters;
        counters.tlab_allocated_bytes.get()
            + counters.slow_alloc_bytes.get()
            + tlab.used_bytes() as u64
    }

    #[cold]
    fn report_sample(self, object: usize, bytes: usize, clock: u64) {
        self.allocator.sampling.report(&AllocationSample {
            mutator_id: self.cell.id,
            // SAFETY: a heap address is not null.
            address: unsafe { NonNull::new_unchecked(address_to_pointer(object)) },
            bytes,
            thread_allocated_bytes: clock,
        });
    }

    /// Sets the soft end to what the owner wants (the limit, or the end of the zeroed part),
    /// then trips the TLAB again if a safepoint was requested meanwhile (the owner's half of
    /// [`Tlab::trip`]'s handshake).
    pub(crate) fn raise_soft_end(self, tlab: &Tlab) {
        self.raise_soft_end_to(tlab, tlab.wanted_soft_end());
    }

    /// [`raise_soft_end`](SlowPath::raise_soft_end) to `soft_end`, which the caller knows is
    /// [`Tlab::wanted_soft_end`].
    #[inline(always)]
    pub(crate) fn raise_soft_end_to(self, tlab: &Tlab, soft_end: usize) {
        debug_assert_eq!(soft_end, tlab.wanted_soft_end());
        tlab.set_soft_end(soft_end);
        fence::light();
        if self.cell.safepoint_requested_after_raise() {
            tlab.trip();
        }
    }

    /// Picks up the LABs the heap allocates in this cycle (they change only at collections,
    /// in the `flip` mode) and returns whether they are the per-CPU LABs.
    #[inline]
    pub(crate) fn follow_mode(self) -> bool {
        let in_cpu_labs = self.allocator.allocates_in_cpu_labs();
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (_, local) = unsafe { self.cell.running_parts() };
        if local.in_cpu_labs != in_cpu_labs {
            self.switch_labs(in_cpu_labs);
        }
        in_cpu_labs
    }

    /// The thread changes LABs: entering the per-CPU LABs retires its TLAB.
    #[cold]
    #[inline(never)]
    fn switch_labs(self, in_cpu_labs: bool) {
        let cell = self.cell;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { cell.running_parts() };
        local.in_cpu_labs = in_cpu_labs;
        if in_cpu_labs {
            // SAFETY: the thread's own TLAB, while running.
            let retired = unsafe { tlab.retire(&self.allocator.space) };
            cell.counters.count_retired(retired, Waste::Refill);
        }
    }

    /// An object in the per-CPU LAB of the thread's CPU, or outside LABs when it is larger
    /// than a LAB or the heap has no room for a new LAB.
    fn alloc_in_cpu_lab(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let allocator = self.allocator;
        let cpu_labs = allocator
            .cpu_labs
            .as_ref()
            .expect("only heaps with per-CPU LABs allocate in them");
        if bytes > cpu_labs.max_object_bytes() {
            return self.alloc_outside_tlab(bytes);
        }
        let cell = self.cell;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (_, local) = unsafe { cell.running_parts() };
        let thread = Requester {
            context: allocator.refill_context(),
            stats: &cell.counters.cpu_lab,
            level_counters: &cell.counters.levels,
            simulated: &mut local.simulated_cpu,
        };
        let object = cpu_labs::alloc(cpu_labs, thread, bytes);
        match object {
            // SAFETY: a LAB address inside the reservation, not null.
            Some(object) => Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) }),
            None => self.alloc_outside_tlab(bytes),
        }
    }

    /// An object carved from the global heap, outside any LAB.
    pub(crate) fn alloc_outside_tlab(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let address = self
            .carve_object(bytes)
            .ok_or(AllocError::OutOfMemory { bytes })?;
        let interval = self.allocator.sampling.interval_bytes();
        if interval != 0 {
            // SAFETY: only the thread running the mutator builds a `SlowPath`.
            let (tlab, local) = unsafe { self.cell.running_parts() };
            let clock = self.clock_bytes(tlab);
            let _ = local.next_sample.bytes_ahead(clock, interval);
            if local.next_sample.reached(clock, interval) {
                self.report_sample(address, bytes, clock);
            }
        }
        // SAFETY: a carved heap address is not null.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(address)) })
    }
}
