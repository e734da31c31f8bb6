//! The mutator's slow path: everything an allocation does when the fast path fails. Stop at a
//! requested safepoint; after a soft miss raise the soft end and bump in the same TLAB; keep
//! the TLAB or retire it and take a new one (from the global heap or the middle levels);
//! allocate outside any TLAB; carve from the per-CPU LABs; follow the `flip` mode's phase.
//! Cold and out of line; the fast path that calls it is `heap::mutator`'s, the per-CPU one's
//! miss is in `lab_cursor`.

use std::ptr::NonNull;

use crate::config::{ZeroMemory, ZERO_AHEAD_BYTES};
use crate::labs::cpu_labs::{self, Requester};
use crate::labs::tlab::{Retired, Tlab, Waste};
use crate::levels::chunk::Chunk;
use crate::levels::cpu_buffers;
use crate::levels::middle::{self, Home, MiddleLevel};
use crate::levels::refill;
use crate::levels::stats::LevelCounters;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::allocator::{Allocator, CommonMiss, TlabSource};
use crate::mutator::cell::{MutatorCell, MutatorLocal};
use crate::mutator::cpu_lab_cursor::{CpuLabCursor, SlowResult};
use crate::mutator::sampling::AllocationSample;
use crate::platform::cpu_id::read_rseq_cpu;
use crate::platform::fence;
use crate::platform::topology::Level;

/// A heap's short line ([`SlowPath::common_miss`]), chosen for its mode.
pub(crate) type ShortLine = for<'a> fn(SlowPath<'a>, usize) -> usize;

/// The `shared` mode's short line: [`SlowPath::shared_object`], jumped to before any register
/// is saved.
#[cold]
#[inline(never)]
fn shared_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.shared_object(bytes)
}

/// The `tlab` mode's short line: a zeroing step or a refill from the global heap.
#[cold]
#[inline(never)]
fn global_refill_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.tlab_miss(bytes, SlowPath::refill_from_global::<false>)
}

/// The `hab` mode's short line (on the CPUs the kernel numbers): a zeroing step or a refill
/// through the levels.
#[cold]
#[inline(never)]
fn levels_refill_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.tlab_miss(bytes, SlowPath::refill_from_levels::<false>)
}

/// The `hab` mode's short line where the lowest level is the restartable `cpu` level (and
/// every thread's rseq area sits at one offset): a zeroing step or a refill from the buffer of
/// the thread's CPU.
#[cold]
#[inline(never)]
fn cpu_buffers_refill_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.tlab_miss(bytes, SlowPath::refill_from_cpu_buffers::<false>)
}

/// The `hab` mode's short line where the lowest level has compare-and-swap buffers and the
/// CPU is read from the rseq area: a zeroing step or a refill from the buffer of the thread's
/// domain.
#[cold]
#[inline(never)]
fn shared_home_refill_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.tlab_miss(bytes, SlowPath::refill_from_shared_home::<false>)
}

/// The short line where TLABs are not refilled on it (`flip`, or levels on simulated CPUs):
/// a zeroing step.
#[cold]
#[inline(never)]
fn zeroing_step_line(path: SlowPath<'_>, bytes: usize) -> usize {
    path.tlab_miss(bytes, |_, _, _| 0)
}

/// After a short refill from the buffer `home` of a compare-and-swap level, by a thread that
/// now runs on `cpu`, another CPU than the one it read: counts the carve foreign when `cpu`
/// belongs to another buffer's domain. Inline, and calling nothing: a call here, however
/// rare, made the refill save four registers on every run (10 instructions).
#[inline(always)]
fn count_if_foreign(level: &MiddleLevel, counters: &LevelCounters, cpu: usize, home: Home) {
    if level.home_of(cpu) != Some(home) {
        counters.foreign_allocs.add(1);
    }
}

/// A running mutator as its slow path sees it: the heap's allocation side and the mutator's
/// cell, two plain references. Only built by the thread that runs the mutator.
#[derive(Clone, Copy)]
pub(crate) struct SlowPath<'a> {
    pub(crate) allocator: &'a Allocator,
    pub(crate) cell: &'a MutatorCell,
}

impl SlowPath<'_> {
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
    /// ([`short_line`](SlowPath::short_line)): no miss tests the mode. Every call in a line is
    /// its last step (a jump): the checks save no register, and the refill from the global
    /// heap keeps none of the levels' carve. (Through an out-of-line `common_miss` that jumps
    /// through the pointer, two instructions more per miss, the benchmark loops' times moved
    /// both ways, 20 % each, as their code moved: with the loops aligned to 64 bytes, the two
    /// forms took the same time.)
    ///
    /// [`shared_object`]: SlowPath::shared_object
    /// [`refill`]: SlowPath::refill
    #[inline(always)]
    pub(crate) fn common_miss(self, bytes: usize) -> usize {
        (self.allocator.short_line)(self, bytes)
    }

    /// The short line of a heap whose common misses are `common`.
    pub(crate) fn short_line(common: CommonMiss) -> ShortLine {
        match common {
            CommonMiss::SharedObject => shared_line,
            CommonMiss::RefillFromGlobal => global_refill_line,
            CommonMiss::RefillFromLevels => levels_refill_line,
            CommonMiss::RefillFromCpuBuffers => cpu_buffers_refill_line,
            CommonMiss::RefillFromSharedHome => shared_home_refill_line,
            CommonMiss::ZeroingStep => zeroing_step_line,
        }
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

    /// The `tlab` mode's [`refill`](SlowPath::refill): one CAS on the global top.
    #[inline(never)]
    fn refill_from_global<const FILL_FIRST: bool>(self, bytes: usize, free_bytes: usize) -> usize {
        let global = self.allocator.space.global();
        self.refill::<FILL_FIRST>(
            bytes,
            free_bytes,
            |local, tlab_bytes| {
                let start = global.carve_tlab(tlab_bytes, local.end_of_cycle.tlab_end())?;
                Some(Chunk {
                    start,
                    len: tlab_bytes,
                })
            },
            Self::refill_from_global::<true>,
            false,
        )
    }

    /// The `hab` mode's [`refill`](SlowPath::refill): through the middle levels, their home
    /// carve inlined (the section or the compare-and-swap keeps enough values that this line
    /// saves registers all the same: 6).
    #[inline(never)]
    fn refill_from_levels<const FILL_FIRST: bool>(self, bytes: usize, free_bytes: usize) -> usize {
        let levels = self.allocator.levels();
        self.refill::<FILL_FIRST>(
            bytes,
            free_bytes,
            |local, tlab_bytes| self.carve_at_home(levels, local, tlab_bytes),
            Self::refill_from_levels::<true>,
            false,
        )
    }

    /// The `hab` mode's [`refill`](SlowPath::refill) where the lowest level is the restartable
    /// `cpu` level: one try of a restartable bump addressed through `fs`
    /// ([`cpu_buffers::carve_at_fixed_home`]), its counters at a fixed place.
    #[inline(never)]
    fn refill_from_cpu_buffers<const FILL_FIRST: bool>(
        self,
        bytes: usize,
        free_bytes: usize,
    ) -> usize {
        // SAFETY: this refill is reached only from `cpu_buffers_refill_line`, the short line
        // of a heap whose common misses are `RefillFromCpuBuffers`.
        let (buffers, area_offset) = unsafe { self.allocator.home_cpu_buffers() };
        let space = &self.allocator.space;
        let counters = &self.cell.counters.levels[Level::Cpu.index()];
        self.refill::<FILL_FIRST>(
            bytes,
            free_bytes,
            // SAFETY: `area_offset` is the fixed offset the heap found.
            |_, tlab_bytes| unsafe {
                cpu_buffers::carve_at_fixed_home(buffers, area_offset, space, counters, tlab_bytes)
            },
            Self::refill_from_cpu_buffers::<true>,
            true,
        )
    }

    /// The `hab` mode's [`refill`](SlowPath::refill) where the lowest level has
    /// compare-and-swap buffers: the CPU read once, its buffer from the level's table, one
    /// compare-and-swap for exactly the TLAB ([`middle::carve_exact_at_home`]); the carve is
    /// counted foreign when the thread ran on a CPU of another domain by the time it
    /// committed (the CPU read again: one load and a compare).
    #[inline(never)]
    fn refill_from_shared_home<const FILL_FIRST: bool>(
        self,
        bytes: usize,
        free_bytes: usize,
    ) -> usize {
        // SAFETY: this refill is reached only from `shared_home_refill_line`, the short line
        // of a heap whose common misses are `RefillFromSharedHome`.
        let (level, cpu_id_offset) = unsafe { self.allocator.shared_home() };
        let space = &self.allocator.space;
        self.refill::<FILL_FIRST>(
            bytes,
            free_bytes,
            |local, tlab_bytes| {
                // SAFETY: the offset is the heap's CPU-id reader's.
                let cpu = unsafe { read_rseq_cpu(cpu_id_offset) };
                let (chunk, home) = middle::carve_exact_at_home(level, space, cpu, tlab_bytes)?;
                // Found again after the compare-and-swap, rather than held across it.
                // SAFETY: as for the first `shared_home` above.
                let (level, cpu_id_offset) = unsafe { self.allocator.shared_home() };
                let counters = &self.cell.counters.levels[level.level().index()];
                counters.allocs.add(1);
                // SAFETY: as for the first reading.
                let now = unsafe { read_rseq_cpu(cpu_id_offset) };
                if now != cpu {
                    count_if_foreign(level, counters, now, home);
                }
                // The length read again too (the sizer's, which the carve was asked for).
                Some(Chunk {
                    len: local.sizer.steady_bytes(),
                    ..chunk
                })
            },
            Self::refill_from_shared_home::<true>,
            true,
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

    /// An object of `bytes` carved from the global heap outside any LAB, zeroed where the
    /// heap zeroes reused memory, counted; `None` when the heap is full. (Sampling is the
    /// caller's: [`alloc_outside_tlab`](SlowPath::alloc_outside_tlab).)
    ///
    /// Counts before it zeroes, so that with fresh memory it calls nothing and saves no
    /// register; reused memory is zeroed out of line ([`zero_object`](SlowPath::zero_object)).
    #[inline]
    fn carve_object(self, bytes: usize) -> Option<usize> {
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

    /// The short refill's carve through the levels ([`refill::carve_at_home`]), inlined in
    /// [`refill_from_levels`](SlowPath::refill_from_levels) alone; `None` when it carved
    /// nothing.
    #[inline(always)]
    fn carve_at_home(
        self,
        levels: &[MiddleLevel],
        local: &MutatorLocal,
        bytes: usize,
    ) -> Option<Chunk> {
        refill::carve_at_home(
            self.allocator.refill_context(),
            levels,
            &self.cell.counters.levels,
            &local.simulated_cpu,
            bytes,
        )
    }

    /// Retires the TLAB (a filler over its tail, counted as refill waste) and installs a new
    /// one of the policy's desired size, at least `needed` bytes, counted. Retires first: a
    /// filler the object model fails to write (a panic) then loses no chunk, and the TLAB
    /// stays whole for its drop to retire. `None` when no TLAB could be carved: the old one is
    /// retired, the thread has none. Inlined in both refills: out of line it cost the short
    /// one 30 instructions (callgrind).
    #[inline(always)]
    fn replace_tlab(self, tlab: &Tlab, local: &mut MutatorLocal, needed: usize) -> Option<()> {
        let allocator = self.allocator;
        let (config, space) = (&allocator.config, &allocator.space);
        let counters = &self.cell.counters;
        // SAFETY: the thread's own TLAB, while running.
        let retired = unsafe { tlab.retire(space) };
        counters.count_retired(retired, Waste::Refill);
        let desired = local.sizer.desired_bytes().max(needed);
        let min = config.min_tlab_bytes().max(needed).min(desired);
        let Chunk { start, len } = self.carve_tlab(local, min, desired)?;
        self.install(tlab, start, len);
        let resized = local.sizer.resizes_at_refill();
        local.sizer.record_refill(config);
        counters.refills.add(1);
        counters.full_path_refills.add(1);
        counters.tlab_bytes.add(len as u64);
        if resized {
            counters
                .desired_size_bytes
                .set(local.sizer.desired_bytes() as u64);
        }
        Some(())
    }

    /// A chunk for a TLAB of `desired` bytes, at least `min`: from the global heap, or through
    /// the middle levels (which count where it came from).
    #[inline]
    fn carve_tlab(self, local: &mut MutatorLocal, min: usize, desired: usize) -> Option<Chunk> {
        let allocator = self.allocator;
        let cell = self.cell;
        match allocator.tlab_source.as_ref()? {
            TlabSource::GlobalHeap => {
                let (share, alignment) = (&local.end_of_cycle, allocator.config.alignment_bytes());
                let (start, len) = allocator.space.global().carve_part(
                    min,
                    desired,
                    share.tlab_end(),
                    // Only past the thread's bound: what it allocated so far, read then.
                    |left, used| {
                        let allocated = cell.counters.tlab_and_outside_bytes();
                        share.part_bytes((left, used), allocated, min, alignment)
                    },
                )?;
                if len < desired {
                    cell.counters.end_of_cycle_tlabs.add(1);
                }
                Some(Chunk { start, len })
            }
            TlabSource::Levels => refill::carve_chunk(
                allocator.refill_context(),
                allocator.levels(),
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

    /// Installs the chunk `[start, start + len)` as the (empty) TLAB, zeroing it now or
    /// ahead of `top` as configured.
    #[inline(always)]
    fn install(self, tlab: &Tlab, start: usize, len: usize) {
        let space = &self.allocator.space;
        let reserve = space.lab_reserve_bytes();
        if self.allocator.config.zero() == ZeroMemory::Ahead {
            let reused = space.global().needs_zeroing(start);
            tlab.install(start, len, reserve, reused);
        } else {
            space.global().zero_reused(start, len);
            tlab.install(start, len, reserve, false);
        }
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
    fn bump_after_soft_miss(
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
    fn prepare_tlab_object(
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
    fn raise_soft_end(self, tlab: &Tlab) {
        self.raise_soft_end_to(tlab, tlab.wanted_soft_end());
    }

    /// [`raise_soft_end`](SlowPath::raise_soft_end) to `soft_end`, which the caller knows is
    /// [`Tlab::wanted_soft_end`].
    #[inline(always)]
    fn raise_soft_end_to(self, tlab: &Tlab, soft_end: usize) {
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

    /// HotSpot's rule: keep a TLAB with much free space and allocate the object outside it;
    /// otherwise retire it and take a new one sized by the policy.
    fn refill_or_alloc_outside(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let allocator = self.allocator;
        let (config, space) = (&allocator.config, &allocator.space);
        let cell = self.cell;
        // SAFETY: only the thread running the mutator builds a `SlowPath`.
        let (tlab, local) = unsafe { cell.running_parts() };
        if let Some(object) = self.bump_after_soft_miss(tlab, local, bytes) {
            // SAFETY: a TLAB address inside the reservation, not null.
            return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
        }
        let reserve = space.lab_reserve_bytes();
        let needed = bytes + reserve;
        if needed > config.max_tlab_bytes() {
            return self.alloc_outside_tlab(bytes);
        }
        if local.sizer.keeps(tlab.free_bytes()) {
            local.sizer.record_slow_allocation(config);
            return self.alloc_outside_tlab(bytes);
        }
        if self.replace_tlab(tlab, local, needed).is_none() {
            return self.alloc_outside_tlab(bytes);
        }
        let object = tlab
            .bump_to_limit(bytes)
            .expect("a fresh TLAB holds the object it was carved for");
        self.prepare_tlab_object(tlab, local, object, bytes);
        // SAFETY: `object` is the start of the fresh TLAB, a non-null heap address.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    /// An object carved from the global heap, outside any LAB.
    fn alloc_outside_tlab(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
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
