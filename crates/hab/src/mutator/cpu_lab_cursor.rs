//! The `cpu-lab` fast path's state: the CPU the thread last ran on and that CPU's LAB, plain
//! values a mutator keeps beside its cell (so that a caller's loop holds them in registers).
//! A restartable section checks that the thread still runs on that CPU, bumps and commits;
//! a miss looks the CPU up again, then takes the mutator's slow path (`slow_path.rs`).

use std::ptr::NonNull;

use crate::labs::cpu_labs::CpuLabs;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::AllocSize;
use crate::platform::rseq;
use crate::platform::rseq::cpu_slots::{self, CpuLabSlots};

/// Where the next `cpu-lab` allocation goes: a CPU (or concurrency id: the LABs'
/// [`SlotIndex`](rseq::SlotIndex)) and its LAB, and the rseq area's offset from the thread
/// pointer (the slot holds its index field's). *Inactive* when the mutator allocates in its
/// TLAB: then `cpu` has its top bit set (no CPU has such a number). Testing one bit, not
/// comparing with a constant, leaves the compiler nothing to re-materialise on the TLAB path.
///
/// Three scalars, copied field by field ([`set`](CpuLabCursor::set)): a caller's loop then keeps
/// each in a register across the restartable section and the slow path (a fourth, the index
/// field's offset, made the loop spill all three: 3 instructions per object).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CpuLabCursor {
    /// The LAB slot of `cpu`.
    slot: *mut usize,
    /// The CPU or concurrency id; [`INACTIVE_CPU`] when inactive.
    cpu: u32,
    area_offset: isize,
}

/// The bytes between two CPUs' LAB slots in [`CpuLabPath::slots_address`]'s array.
pub const CPU_LAB_SLOT_BYTES: usize = rseq::SLOT_BYTES;
/// Offset of a LAB's `top` (a `usize` address) in its slot.
pub const CPU_LAB_TOP_OFFSET: usize = rseq::LAB_TOP_OFFSET;
/// Offset of a LAB's end (a `usize` address) in its slot: an object of `n` bytes fits when
/// `top + n <= end`.
pub const CPU_LAB_END_OFFSET: usize = rseq::LAB_END_OFFSET;
/// Offset of the `rseq_cs` field in the rseq area, where a section stores its descriptor's
/// address before it starts.
pub const RSEQ_CS_OFFSET: usize = rseq::RSEQ_CS_OFFSET;
/// The signature the process's rseq registration carries: the four bytes before the abort
/// handler of every restartable section.
pub const RSEQ_SIGNATURE: u32 = rseq::SIGNATURE;

/// What compiled code needs to inline the `cpu-lab` fast path, on x86_64 Linux with
/// restartable sequences (see `docs/embedding.md`, "For a JIT"). In a restartable section
/// whose descriptor sits in `__rseq_cs` and whose abort handler follows [`RSEQ_SIGNATURE`]:
/// store the descriptor's address at `fs:[rseq_area_offset + RSEQ_CS_OFFSET]` (`rseq_cs`); check that the
/// `u32` at `fs:[rseq_index_offset]` (the LABs' index: `cpu_id_start`, or `mm_cid` where the
/// kernel has concurrency ids, see [`rseq_slot_index`](crate::rseq_slot_index)) is still the
/// index whose slot is used; load `top`, add the size, compare with `end`; commit by storing
/// `top`. A miss (moved, aborted, no room) calls
/// [`alloc_slow_from_compiled_code`](crate::alloc_slow_from_compiled_code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuLabPath {
    /// Offset of the thread's rseq area from the thread pointer (`fs` base).
    pub rseq_area_offset: isize,
    /// Offset from the thread pointer of the `u32` the LABs are indexed by (the CPU number or
    /// the concurrency id, in the rseq area).
    pub rseq_index_offset: isize,
    /// Address of index 0's LAB slot; index `c`'s is `c * CPU_LAB_SLOT_BYTES` further, for
    /// `c` below `cpus`, and an index at or beyond `cpus` uses the slot at `cpus`, which is
    /// always empty (every bump misses).
    pub slots_address: usize,
    /// CPUs with a slot of their own.
    pub cpus: u32,
}

/// The top bit of an inactive cursor's `cpu`.
const INACTIVE_CPU: u32 = 1 << 31;

impl CpuLabCursor {
    /// The cursor of a mutator that allocates in its TLAB.
    pub(crate) const INACTIVE: CpuLabCursor = CpuLabCursor {
        slot: std::ptr::null_mut(),
        cpu: INACTIVE_CPU,
        area_offset: 0,
    };

    /// Whether the mutator allocates in restartable per-CPU LABs.
    #[inline(always)]
    pub(crate) fn is_active(&self) -> bool {
        self.cpu & INACTIVE_CPU == 0
    }

    /// Copies `other` in, one field at a time (see the type's documentation).
    #[inline(always)]
    pub(crate) fn set(&mut self, other: CpuLabCursor) {
        self.slot = other.slot;
        self.cpu = other.cpu;
        self.area_offset = other.area_offset;
    }

    /// A cursor at the CPU (or concurrency id) the thread runs with, if the LABs are
    /// restartable and glibc's rseq area is at a fixed offset from the thread pointer.
    pub(crate) fn new(cpu_labs: &CpuLabs) -> Option<CpuLabCursor> {
        let area_offset = rseq::fixed_area_offset()?;
        Self::at(cpu_labs.lab_slots()?, area_offset)
    }

    /// A cursor at the index the thread runs with now, in `slots`.
    #[inline]
    pub(crate) fn at(slots: &CpuLabSlots, area_offset: isize) -> Option<CpuLabCursor> {
        let index_offset = area_offset + slots.index().field_offset() as isize;
        // SAFETY: `index_offset` is the fixed rseq area offset plus the slots' index field.
        let cpu = unsafe { cpu_slots::cpu_hint(index_offset) };
        let slot = slots.slot_of(cpu);
        (!slot.is_null() && cpu & INACTIVE_CPU == 0).then_some(CpuLabCursor {
            slot,
            cpu,
            area_offset,
        })
    }

    /// The fast path: bumps the LAB of the cursor's CPU in a restartable section; `None` when
    /// the thread moved, the object does not fit or the section was interrupted.
    ///
    /// # Safety
    /// The cursor is active; its mutator runs and allocates in these restartable per-CPU
    /// LABs (its mode changes only while it is parked, which refreshes the cursor); `size`
    /// was checked against its heap.
    #[inline(always)]
    pub(crate) unsafe fn bump(&self, size: AllocSize) -> Option<NonNull<u8>> {
        // SAFETY: `slot` is CPU `cpu`'s LAB in the heap's live per-CPU LABs, `area_offset`
        // glibc's fixed rseq area offset (the caller's contract).
        let object =
            unsafe { cpu_slots::lab_bump(self.area_offset, self.slot, self.cpu, size.bytes()) };
        // SAFETY: a LAB address is inside the reservation, so not null; 0 means a miss.
        (object != 0).then(|| unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    /// The rseq area's offset from the thread pointer.
    pub(crate) fn area_offset(&self) -> isize {
        self.area_offset
    }

    /// The layout compiled code reads to inline this fast path; `None` when inactive.
    pub(crate) fn path(&self, cpu_labs: Option<&CpuLabs>) -> Option<CpuLabPath> {
        let slots = cpu_labs?.lab_slots()?;
        self.is_active().then(|| CpuLabPath {
            rseq_area_offset: self.area_offset,
            rseq_index_offset: self.area_offset + slots.index().field_offset() as isize,
            slots_address: slots.base() as usize,
            cpus: u32::try_from(slots.cpus()).unwrap_or(u32::MAX),
        })
    }
}
