//! The slow path's short line: the common misses, handled in one straight line that returns
//! the object's address in a register (0: take the full slow path, `slow_path.rs`). The heap
//! picks its line once, for its mode ([`line_for`]); no miss tests the mode.
//!
//! - `shared`: the object carved from the global heap;
//! - TLAB modes: the object fits the TLAB but ends past the memory zeroed so far (a zeroing
//!   step), or the TLAB is full and the thread takes a new one of the steady size from its
//!   first place ([`SlowPath::refill`]: the global heap, or its own buffer at the lowest
//!   level).

use crate::config::{ZeroMemory, ZERO_AHEAD_BYTES};
use crate::labs::tlab::{Retired, Tlab, Waste};
use crate::levels::chunk::Chunk;
use crate::levels::cpu_buffers;
use crate::levels::middle::{self, Home, MiddleLevel};
use crate::levels::refill;
use crate::levels::stats::LevelCounters;
use crate::mutator::allocator::{Allocator, CommonMiss, ShortLine};
use crate::mutator::cell::{MutatorCell, MutatorLocal};
use crate::mutator::slow_path::SlowPath;
use crate::platform::cpu_id::read_rseq_cpu;
use crate::platform::topology::Level;

/// The short line of a heap whose common misses are `common`.
pub(crate) fn line_for(common: CommonMiss) -> ShortLine {
    match common {
        CommonMiss::SharedObject => shared_line,
        CommonMiss::RefillFromGlobal => global_refill_line,
        CommonMiss::RefillFromLevels => levels_refill_line,
        CommonMiss::RefillFromCpuBuffers => cpu_buffers_refill_line,
        CommonMiss::RefillFromSharedHome => shared_home_refill_line,
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

/// The `tlab` mode's short line: a zeroing step or a refill from the global heap.
#[cold]
#[inline(never)]
fn global_refill_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, SlowPath::refill_from_global::<false>)
}

/// The `hab` mode's short line (on the CPUs the kernel numbers): a zeroing step or a refill
/// through the levels.
#[cold]
#[inline(never)]
fn levels_refill_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, SlowPath::refill_from_levels::<false>)
}

/// The `hab` mode's short line where the lowest level is the restartable `cpu` level (and
/// every thread's rseq area sits at one offset): a zeroing step or a refill from the buffer of
/// the thread's CPU.
#[cold]
#[inline(never)]
fn cpu_buffers_refill_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, SlowPath::refill_from_cpu_buffers::<false>)
}

/// The `hab` mode's short line where the lowest level has compare-and-swap buffers and the
/// CPU is read from the rseq area: a zeroing step or a refill from the buffer of the thread's
/// domain.
#[cold]
#[inline(never)]
fn shared_home_refill_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, SlowPath::refill_from_shared_home::<false>)
}

/// The short line where TLABs are not refilled on it (`flip`, or levels on simulated CPUs):
/// a zeroing step.
#[cold]
#[inline(never)]
fn zeroing_step_line(allocator: &Allocator, cell: &MutatorCell, bytes: usize) -> usize {
    SlowPath { allocator, cell }.tlab_miss(bytes, |_, _, _| 0)
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
}
