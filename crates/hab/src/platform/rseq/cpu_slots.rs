//! The per-CPU arrays the sections work on, and what a section made of a request: `CpuSlots`
//! (one packed `{top, left}` word per CPU, for the `cpu` middle level) and `CpuLabSlots` (one
//! `{top, end}` LAB per CPU, for the `cpu-lab` mode), each on a cache line of its own.

use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{
    BUFFER_WORD_OFFSET, HEADER_BOUND_BELOW, HEADER_INDEX_FIELD_BELOW, LAB_END_OFFSET,
    LAB_INDEX_FIELD_OFFSET, LAB_INLINE_ABORTS_OFFSET, LAB_LIMIT_OFFSET, LAB_TOP_OFFSET, SLOT_BYTES,
};
use super::outcome::{HomeBump, LabBump, LabInstall, Outcome};
use super::take::take_word;
use super::{fixed_area_offset, imp, SlotIndex};
use crate::memory::packed::PackedWord;
use crate::memory::packed::OFFSET_BITS;

/// What the bump section subtracts from a slot's word to take `words` (at least 1, fewer
/// than 2^22) from its upper field (what is left) and add them to its offset: one
/// subtraction, which borrows exactly when fewer than `words` are left (offsets stay below
/// 2^42 words, so adding `words` never carries into the upper field).
#[inline]
fn bump_delta(words: u64) -> u64 {
    debug_assert!((1..1 << (64 - OFFSET_BITS)).contains(&words));
    (words << OFFSET_BITS) - words
}

/// Per-CPU slots: one packed word per CPU (or concurrency id: [`SlotIndex`]), [`SLOT_BYTES`]
/// apart. The word just before the first slot holds the offset of the index field in the
/// rseq area, which the sections read (one load from a line of its own, never written after
/// creation), so that one set of sections serves both indexes without another register; the
/// word before it the number of slots, which the bump section compares the index with.
pub(crate) struct CpuSlots {
    base: *mut u64,
    cpus: usize,
    index: SlotIndex,
    layout: std::alloc::Layout,
    /// Held while a thread takes a buffer ([`take`](CpuSlots::take)): one `TAKEN` in the
    /// slots at a time, so that a thread that finds its marker still there knows it is its own.
    taking: std::sync::Mutex<()>,
}

// SAFETY: the slots are only read and written through restartable sequences (one writer per
// CPU at a time, guaranteed by the kernel) or by a collection while every mutator is stopped.
unsafe impl Send for CpuSlots {}
// SAFETY: as above.
unsafe impl Sync for CpuSlots {}

impl CpuSlots {
    /// Empty slots for `cpus` CPUs (or concurrency ids, which stay below the CPU count),
    /// indexed by `index`.
    pub(crate) fn new(cpus: usize, index: SlotIndex) -> CpuSlots {
        Self::bounded(cpus, cpus, index)
    }

    /// [`new`](CpuSlots::new), with `bound` (at most `cpus`) as the count the sections check
    /// an index against: the slots from `bound` on are never written by a section.
    fn bounded(cpus: usize, bound: usize, index: SlotIndex) -> CpuSlots {
        let cpus = cpus.max(1);
        debug_assert!(bound <= cpus);
        // One line before the slots holds the index field's offset.
        let layout = std::alloc::Layout::from_size_align((cpus + 1) * SLOT_BYTES, SLOT_BYTES)
            .expect("CPU counts are small");
        // SAFETY: the layout has a non-zero size.
        let start = unsafe { std::alloc::alloc_zeroed(layout) };
        if start.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        let base = start.wrapping_add(SLOT_BYTES).cast::<u64>();
        // SAFETY: the header's two words are inside the allocation (the line before `base`),
        // aligned, and not yet shared.
        unsafe {
            base.wrapping_byte_sub(HEADER_INDEX_FIELD_BELOW)
                .write(index.field_offset() as u64);
            base.wrapping_byte_sub(HEADER_BOUND_BELOW)
                .write(bound.max(1).min(cpus) as u64);
        }
        CpuSlots {
            base,
            cpus,
            index,
            layout,
            taking: std::sync::Mutex::new(()),
        }
    }

    pub(crate) fn cpus(&self) -> usize {
        self.cpus
    }

    /// The address of slot 0 (slot `c` is `c * SLOT_BYTES` further), for compiled code.
    pub(crate) fn address(&self) -> usize {
        self.base as usize
    }

    /// The count a section compares the index with: slots from it on are never written by
    /// a section.
    pub(crate) fn bound(&self) -> usize {
        // SAFETY: the header word is inside the allocation, written once at creation.
        unsafe { self.base.wrapping_byte_sub(HEADER_BOUND_BELOW).read() as usize }
    }

    /// What the slots are indexed by.
    pub(crate) fn index(&self) -> SlotIndex {
        self.index
    }

    /// Reads a slot outside a critical section (a snapshot; only exact while no thread can
    /// run a section on that CPU, e.g. during a collection).
    pub(crate) fn load(&self, cpu: usize) -> PackedWord {
        assert!(cpu < self.cpus);
        // SAFETY: `cpu` is in bounds; a volatile read of an aligned word that threads write
        // with plain stores cannot tear on x86_64.
        PackedWord::from_raw(unsafe { self.word(cpu).read_volatile() })
    }

    /// Writes a slot outside a critical section. Only while no thread can run a section.
    pub(crate) fn store(&self, cpu: usize, word: PackedWord) {
        assert!(cpu < self.cpus);
        // SAFETY: `cpu` is in bounds; the caller guarantees no concurrent section.
        unsafe { self.word(cpu).write_volatile(word.raw()) };
    }

    /// Takes the buffer `seen` (neither empty nor `TAKEN`) out of slot `cpu` for a thread
    /// that may run on any CPU, which then owns the buffer's tail and leaves the slot empty;
    /// `false` when nothing was taken. For the end of a cycle only: it costs a system call.
    ///
    /// The slot's own sections store without an atomic instruction, so a compare-and-swap
    /// alone would race with a section that read `seen` before it and commits after it. So the
    /// slot is swapped to `TAKEN`, which every section refuses and nothing installs over;
    /// then [`restart_sections`](super::restart_sections) returns only once every section that
    /// may have read `seen` has either committed (replacing `TAKEN`: its bump or install
    /// stands, and nothing is taken) or been restarted (it reads `TAKEN` again and misses).
    /// A slot that still holds `TAKEN` afterwards was written by no section since the swap:
    /// `seen`'s tail is the caller's, and the slot becomes empty.
    pub(crate) fn take(&self, cpu: usize, seen: PackedWord) -> bool {
        assert!(cpu < self.cpus);
        let _one_at_a_time = self.taking.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: `cpu` is in bounds: an aligned word of the slots, alive as long as `self`;
        // sections write it with plain stores, which a locked instruction is ordered with.
        let word = unsafe { AtomicU64::from_ptr(self.word(cpu)) };
        let swap = |from: PackedWord, to: PackedWord| {
            word.compare_exchange(from.raw(), to.raw(), Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        };
        take_word(swap, seen, super::restart_sections)
    }

    fn slot(&self, cpu: usize) -> *mut u64 {
        self.base.wrapping_byte_add(cpu * SLOT_BYTES)
    }

    /// The packed word of a `cpu` level's slot ([`CpuBufferSlot`](super::CpuBufferSlot)).
    fn word(&self, cpu: usize) -> *mut u64 {
        self.slot(cpu).wrapping_byte_add(BUFFER_WORD_OFFSET)
    }

    /// Bumps the current CPU's slot by `words` (at least 1, fewer than 2^22) if it has that
    /// many left.
    ///
    /// # Safety
    /// `area` is the calling thread's registered rseq area ([`current_area`]).
    #[inline]
    /// Also returns how many times the section aborted and restarted.
    pub(crate) unsafe fn bump(&self, area: *mut u8, words: u64) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe { imp::bump(area, self.base, bump_delta(words)) }
    }

    /// [`bump`](CpuSlots::bump) with an abort injected at instruction boundary `inject_at`.
    ///
    /// # Safety
    /// As for [`bump`](CpuSlots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn bump_injected(
        &self,
        area: *mut u8,
        words: u64,
        inject_at: u64,
    ) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe { imp::bump_injected(area, self.base, bump_delta(words), inject_at) }
    }

    /// [`bump`](CpuSlots::bump) with a widened window, for tests of the abort path.
    ///
    /// # Safety
    /// As for [`bump`](CpuSlots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn bump_widened(&self, area: *mut u8, words: u64) -> (Outcome, u64) {
        // SAFETY: forwarded.
        unsafe { imp::bump_widened(area, self.base, bump_delta(words)) }
    }

    /// The short refill's bump: takes `words` (at least 1, fewer than 2^22) from the slot of
    /// the thread's index if it has that many left, in one try (no retry, no status
    /// register: [`HomeBump`] is read off the section's two outputs). The section adds the
    /// negated [`bump_delta`], whose carry says that the words were there, and gives the
    /// offset of the words taken in bytes.
    ///
    /// # Safety
    /// `area_offset` is [`fixed_area_offset`]: every thread's area at that offset from its
    /// thread pointer, registered (or, with [`RseqMechanism::Unregistered`], one thread
    /// allocating).
    ///
    /// [`RseqMechanism::Unregistered`]: super::RseqMechanism::Unregistered
    #[inline(always)]
    pub(crate) unsafe fn bump_at_home(&self, area_offset: isize, words: u64) -> HomeBump {
        // SAFETY: forwarded; `base` points to these live slots.
        let (before, slot) =
            unsafe { imp::home_bump(area_offset, self.base, bump_delta(words).wrapping_neg()) };
        HomeBump::read(before, slot)
    }

    /// [`bump_at_home`](CpuSlots::bump_at_home) with an abort injected at instruction
    /// boundary `inject_at`.
    ///
    /// # Safety
    /// As for [`bump_at_home`](CpuSlots::bump_at_home).
    #[cfg(test)]
    pub(crate) unsafe fn bump_at_home_injected(
        &self,
        area_offset: isize,
        words: u64,
        inject_at: u64,
    ) -> HomeBump {
        let negated = bump_delta(words).wrapping_neg();
        // SAFETY: forwarded.
        let (before, slot) =
            unsafe { imp::home_bump_injected(area_offset, self.base, negated, inject_at) };
        HomeBump::read(before, slot)
    }

    /// Replaces the slot of `cpu` (< `cpus()`) by `new` if the thread still runs on `cpu` and
    /// the slot still holds `expected`.
    ///
    /// # Safety
    /// As for [`bump`](CpuSlots::bump).
    #[inline]
    /// Also returns how many times the section aborted and restarted.
    pub(crate) unsafe fn install(
        &self,
        area: *mut u8,
        cpu: usize,
        expected: PackedWord,
        new: PackedWord,
    ) -> (Outcome, u64) {
        assert!(cpu < self.cpus);
        // SAFETY: forwarded; `cpu` is in bounds.
        unsafe { imp::install(area, self.base, cpu, expected, new) }
    }

    /// [`install`](CpuSlots::install) with an abort injected at instruction boundary
    /// `inject_at`.
    ///
    /// # Safety
    /// As for [`bump`](CpuSlots::bump).
    #[cfg(test)]
    pub(crate) unsafe fn install_injected(
        &self,
        area: *mut u8,
        cpu: usize,
        expected: PackedWord,
        new: PackedWord,
        inject_at: u64,
    ) -> (Outcome, u64) {
        assert!(cpu < self.cpus);
        // SAFETY: forwarded; `cpu` is in bounds.
        unsafe { imp::install_injected(area, self.base, cpu, expected, new, inject_at) }
    }
}

impl Drop for CpuSlots {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, `SLOT_BYTES` before `base`.
        unsafe {
            std::alloc::dealloc(self.base.cast::<u8>().wrapping_sub(SLOT_BYTES), self.layout)
        };
    }
}

/// The LAB of an empty slot: `top > end`, so nothing fits and nothing is free. The slot's
/// third word counts the aborts of the inline path on that CPU; its fourth holds the offset of
/// the index field from the thread pointer, for the inline path.
pub(crate) const EMPTY_LAB: (usize, usize) = (1, 0);

/// Per-CPU LABs of the `cpu-lab` mode: a `{top, end}` pair of addresses per CPU, [`SLOT_BYTES`]
/// apart, and the LAB's `limit` in the slot's fifth word. `end` is soft: an object of `n` bytes
/// fits when `top + n <= end`, and a LAB with `top <= end` owns `[top, limit + reserve)` (the
/// reserve keeps every tail fillable), ready for objects up to `end` and not yet zeroed
/// beyond it (`end == limit` but while the heap zeroes ahead). A slot with `top > end` owns
/// nothing.
///
/// The array covers the CPU ids of the topology; the sections check the CPU they run on
/// against that count and report [`LabBump::OutOfRange`] beyond it. One more slot, past the
/// last CPU's, stays empty forever: [`slot_of`](CpuLabSlots::slot_of) hands it out for a CPU
/// beyond the array, so the inline path, which trusts its slot, finds nothing fits there and
/// takes the slow path.
pub(crate) struct CpuLabSlots {
    slots: CpuSlots,
    cpus: usize,
}

impl CpuLabSlots {
    /// Empty LABs for CPU ids (or concurrency ids) below `cpus` (at least 1), indexed by
    /// `index`, and the empty slot past them.
    pub(crate) fn new(cpus: usize, index: SlotIndex) -> CpuLabSlots {
        let cpus = cpus.max(1);
        let slots = CpuLabSlots {
            slots: CpuSlots::bounded(cpus + 1, cpus, index),
            cpus,
        };
        // The inline bump reads its index field's offset from the slot it bumps (one load
        // instead of a register held across the caller's loop).
        let index_offset =
            fixed_area_offset().map_or(0, |area| area + index.field_offset() as isize);
        for cpu in 0..=cpus {
            slots.write(cpu, EMPTY_LAB);
            let field = slots
                .slots
                .slot(cpu)
                .wrapping_byte_add(LAB_INDEX_FIELD_OFFSET);
            // SAFETY: inside the slot `cpu` (in bounds), aligned; not yet shared.
            unsafe { field.write(index_offset as u64) };
        }
        slots
    }

    /// How many CPUs have a LAB.
    pub(crate) fn cpus(&self) -> usize {
        self.cpus
    }

    /// What the LABs are indexed by.
    pub(crate) fn index(&self) -> SlotIndex {
        self.slots.index
    }

    /// The first slot's address.
    pub(crate) fn base(&self) -> *mut usize {
        self.slots.base.cast()
    }

    /// Reads a LAB outside a section (exact only while no thread can run a section).
    pub(crate) fn load(&self, cpu: usize) -> (usize, usize) {
        assert!(cpu < self.cpus);
        let slot = self.slots.slot(cpu).cast::<u8>();
        let word = |offset| slot.wrapping_add(offset).cast::<usize>();
        // SAFETY: `cpu` is in bounds; the two words are aligned and inside the slot.
        unsafe {
            (
                word(LAB_TOP_OFFSET).read_volatile(),
                word(LAB_END_OFFSET).read_volatile(),
            )
        }
    }

    /// The slot of `cpu`, for the inline fast path ([`lab_bump`]): the empty slot past the
    /// array for a CPU beyond it.
    pub(crate) fn slot_of(&self, cpu: u32) -> *mut usize {
        let index = (cpu as usize).min(self.cpus);
        self.slots.slot(index).cast()
    }

    /// Aborts of the inline path counted in the slot at `index` (`0..=cpus()`, the last
    /// being the empty slot of CPUs beyond the array).
    fn inline_aborts_at(&self, index: usize) -> u64 {
        assert!(index <= self.cpus);
        let counter = self
            .slots
            .slot(index)
            .wrapping_byte_add(LAB_INLINE_ABORTS_OFFSET);
        // SAFETY: `index` is in bounds, so the counter is an aligned word inside a live slot;
        // the abort handler updates it only with locked adds, so an atomic load is race-free.
        unsafe { std::sync::atomic::AtomicU64::from_ptr(counter) }.load(Ordering::Relaxed)
    }

    /// Aborts of the inline path, all CPUs.
    pub(crate) fn inline_aborts(&self) -> u64 {
        (0..=self.cpus)
            .map(|index| self.inline_aborts_at(index))
            .sum()
    }

    /// The limit of a LAB (see the type), read outside a section (exact only while no thread
    /// can run a section).
    pub(crate) fn limit(&self, cpu: usize) -> usize {
        assert!(cpu < self.cpus);
        let limit = self.slots.slot(cpu).wrapping_byte_add(LAB_LIMIT_OFFSET);
        // SAFETY: `cpu` is in bounds; the word is aligned and inside the slot.
        unsafe { limit.cast::<usize>().read_volatile() }
    }

    /// Writes a LAB ready up to its limit (`limit == end`) outside a section: only while no
    /// thread can run a section.
    pub(crate) fn store(&self, cpu: usize, lab: (usize, usize)) {
        assert!(cpu < self.cpus);
        self.write(cpu, lab);
    }

    fn write(&self, index: usize, (top, end): (usize, usize)) {
        assert!(index <= self.cpus);
        let slot = self.slots.slot(index).cast::<u8>();
        let word = |offset| slot.wrapping_add(offset).cast::<usize>();
        // SAFETY: `index` is in bounds; as in `load`; the caller guarantees no concurrent
        // section.
        unsafe {
            word(LAB_TOP_OFFSET).write_volatile(top);
            word(LAB_END_OFFSET).write_volatile(end);
            word(LAB_LIMIT_OFFSET).write_volatile(end);
        }
    }

    /// Carves `bytes` from the current CPU's LAB, or, when they do not fit, empties the LAB
    /// and hands its free memory to the caller. Also returns the aborts.
    ///
    /// # Safety
    /// `area` is the calling thread's registered area ([`current_area`]); `bytes` is below
    /// 2^40.
    pub(crate) unsafe fn bump_or_claim(
        &self,
        area: *mut u8,
        bytes: usize,
        reserve: usize,
    ) -> (LabBump, u64) {
        // SAFETY: forwarded; the section checks the index against the count before the slots
        // (`cpus`: `CpuSlots::bounded`).
        unsafe { imp::lab_bump_or_claim(area, self.base(), bytes, reserve) }
    }

    /// [`bump_or_claim`](CpuLabSlots::bump_or_claim) with an abort injected at instruction
    /// boundary `inject_at` (1 for the first; 0 injects none).
    ///
    /// # Safety
    /// As for [`bump_or_claim`](CpuLabSlots::bump_or_claim).
    #[cfg(test)]
    pub(crate) unsafe fn bump_or_claim_injected(
        &self,
        area: *mut u8,
        bytes: usize,
        reserve: usize,
        inject_at: u64,
    ) -> (LabBump, u64) {
        // SAFETY: forwarded.
        unsafe { imp::lab_bump_or_claim_injected(area, self.base(), bytes, reserve, inject_at) }
    }

    /// Installs the LAB `{top, end, limit}` (`top < end <= limit`, or `top == end == limit`)
    /// as the current CPU's if that CPU's LAB owns no free memory. Also returns the aborts.
    ///
    /// # Safety
    /// As for [`bump_or_claim`](CpuLabSlots::bump_or_claim).
    pub(crate) unsafe fn install(
        &self,
        area: *mut u8,
        reserve: usize,
        top: usize,
        end: usize,
        limit: usize,
    ) -> (LabInstall, u64) {
        debug_assert!(top < end && end <= limit || top == end && end == limit);
        // SAFETY: forwarded; the section checks the index against the count before the slots.
        unsafe { imp::lab_install(area, self.base(), reserve, top, end, limit) }
    }

    /// [`install`](CpuLabSlots::install) with an abort injected at instruction boundary
    /// `inject_at`.
    ///
    /// # Safety
    /// As for [`bump_or_claim`](CpuLabSlots::bump_or_claim).
    #[cfg(test)]
    pub(crate) unsafe fn install_injected(
        &self,
        area: *mut u8,
        reserve: usize,
        top: usize,
        end: usize,
        limit: usize,
        inject_at: u64,
    ) -> (LabInstall, u64) {
        // SAFETY: forwarded.
        unsafe { imp::lab_install_injected(area, self.base(), reserve, top, end, limit, inject_at) }
    }
}

/// The `cpu-lab` fast path: carves `bytes` from the LAB `slot` of CPU (or concurrency id) `cpu`,
/// in one restartable section addressed through `fs` (ten instructions), if the thread's
/// index field ([`SlotIndex`]: the slot holds its offset from the thread pointer) still reads
/// `cpu`; 0 when it reads another, the object does not fit, or the section was interrupted
/// (the caller then looks up its index again, or takes its slow path). Keeping the index and
/// its slot in registers across allocations, instead of indexing the array each time, keeps
/// the slot's address constant, so the processor forwards each stored `top` to the next load
/// at once.
///
/// # Safety
/// `area_offset` is [`fixed_area_offset`]; `slot` is the slot of `cpu` in live
/// [`CpuLabSlots`] made while it was known.
#[inline(always)]
pub(crate) unsafe fn lab_bump(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
) -> usize {
    // SAFETY: forwarded.
    unsafe { imp::lab_bump(area_offset, slot, cpu, bytes) }
}

/// [`lab_bump`] with an abort injected at instruction boundary `inject_at`.
///
/// # Safety
/// As for [`lab_bump`].
#[cfg(test)]
pub(crate) unsafe fn lab_bump_injected(
    area_offset: isize,
    slot: *mut usize,
    cpu: u32,
    bytes: usize,
    inject_at: u64,
) -> usize {
    // SAFETY: forwarded.
    unsafe { imp::lab_bump_injected(area_offset, slot, cpu, bytes, inject_at) }
}

/// The index field as the kernel last wrote it (the CPU, or the concurrency id, when it last
/// returned to the thread): a hint for [`lab_bump`]'s `cpu`, checked again inside the section.
///
/// # Safety
/// `index_offset` is [`fixed_area_offset`] plus a [`SlotIndex`]'s field offset.
#[inline]
pub(crate) unsafe fn cpu_hint(index_offset: isize) -> u32 {
    // SAFETY: forwarded.
    unsafe { imp::cpu_hint(index_offset) }
}
