//! The `cpu-lab` fast path's state: the CPU the thread last ran on and that CPU's LAB, plain
//! values a mutator keeps beside its cell (so that a caller's loop holds them in registers).
//! A restartable section checks that the thread still runs on that CPU, bumps and commits;
//! a miss looks the CPU up again, then takes the mutator's slow path.

use std::ptr::NonNull;

use crate::labs::cpu_labs::CpuLabs;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::slow_path::SlowPath;
use crate::platform::rseq;

/// Where the next `cpu-lab` allocation goes: a CPU and its LAB, and the rseq area's offset from
/// the thread pointer. *Inactive* when the mutator allocates in its TLAB: then `cpu` has its
/// top bit set (no CPU has such a number). Testing one bit, not comparing with a constant,
/// leaves the compiler nothing to re-materialise on the TLAB path.
///
/// Three scalars, copied field by field ([`set`](LabCursor::set)): a caller's loop then keeps
/// each in a register across the restartable section and the slow path.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LabCursor {
    /// The LAB slot of `cpu`.
    slot: *mut usize,
    /// The CPU; [`INACTIVE_CPU`] when inactive.
    cpu: u32,
    area_offset: isize,
}

/// What the slow paths return: the allocation's result and the fast path the mutator takes
/// next (`None`: its TLAB's).
pub(crate) type SlowResult = (Result<NonNull<u8>, AllocError>, LabCursor);

/// The top bit of an inactive cursor's `cpu`.
const INACTIVE_CPU: u32 = 1 << 31;

impl LabCursor {
    /// The cursor of a mutator that allocates in its TLAB.
    pub(crate) const INACTIVE: LabCursor = LabCursor {
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
    pub(crate) fn set(&mut self, other: LabCursor) {
        self.slot = other.slot;
        self.cpu = other.cpu;
        self.area_offset = other.area_offset;
    }

    /// A cursor at the CPU the thread runs on, if the LABs are restartable and glibc's rseq
    /// area is at a fixed offset from the thread pointer.
    pub(crate) fn new(cpu_labs: &CpuLabs) -> Option<LabCursor> {
        let area_offset = rseq::fixed_area_offset()?;
        let slots = cpu_labs.lab_slots()?;
        // SAFETY: `area_offset` is the fixed rseq area offset.
        let cpu = unsafe { rseq::cpu_hint(area_offset) };
        let slot = slots.slot_of(cpu);
        (!slot.is_null() && cpu & INACTIVE_CPU == 0).then_some(LabCursor {
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
        let object = unsafe { rseq::lab_bump(self.area_offset, self.slot, self.cpu, size.bytes()) };
        // SAFETY: a LAB address is inside the reservation, so not null; 0 means a miss.
        (object != 0).then(|| unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    /// After a miss: looks the CPU up again and retries once; then the mutator's slow path
    /// (which refills the LAB, or stops at a safepoint first). Takes and returns plain values
    /// so that the caller's copies can stay in registers.
    #[cold]
    #[inline(never)]
    pub(crate) fn miss(slow_path: SlowPath<'_>, area_offset: isize, size: AllocSize) -> SlowResult {
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
        // SAFETY: `area_offset` is the fixed rseq area offset.
        let cpu = unsafe { rseq::cpu_hint(area_offset) };
        let slot = slots.slot_of(cpu);
        if slot.is_null() || cpu & INACTIVE_CPU != 0 {
            return slow_path.alloc(size.bytes());
        }
        let cursor = LabCursor {
            slot,
            cpu,
            area_offset,
        };
        // SAFETY: the mutator still allocates in these LABs (it has not parked since the
        // cursor it missed with was made); `slot` is the LAB of `cpu`.
        match unsafe { cursor.bump(size) } {
            Some(object) => (Ok(object), cursor),
            None => slow_path.alloc(size.bytes()),
        }
    }

    /// The rseq area's offset from the thread pointer.
    pub(crate) fn area_offset(&self) -> isize {
        self.area_offset
    }
}
