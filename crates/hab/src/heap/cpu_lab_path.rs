//! The `cpu-lab` mode's fast path as a value: the CPU the thread last ran on and that CPU's LAB,
//! kept in registers by the caller's loop. A restartable section checks that the thread still
//! runs on that CPU, bumps and commits (nine instructions); a miss looks the CPU up again, then
//! takes the mutator's slow path.
//!
//! A mutator lends it as a [`CpuLabPath`] (borrowed, for a loop) or turns into a
//! [`CpuLabMutator`] (owned, for a runtime that keeps it between allocations). Either way the
//! mutator cannot park while the path exists, so the mode cannot change under it.

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::heap::mutator::Mutator;
use crate::labs::cpu_labs::CpuLabs;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::slow_path::SlowPath;
use crate::platform::rseq;

/// Where the next `cpu-lab` allocation goes: a CPU and its LAB, and the rseq area's offset from
/// the thread pointer. Plain values, so that a loop holds them in registers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LabCursor {
    /// The LAB slot of `cpu`.
    slot: *mut usize,
    cpu: u32,
    area_offset: isize,
}

impl LabCursor {
    /// A cursor at the CPU the thread runs on, if the LABs are restartable and glibc's rseq
    /// area is at a fixed offset from the thread pointer.
    pub(crate) fn new(cpu_labs: &CpuLabs) -> Option<LabCursor> {
        let area_offset = rseq::fixed_area_offset()?;
        let slots = cpu_labs.lab_slots()?;
        // SAFETY: `area_offset` is the fixed rseq area offset.
        let cpu = unsafe { rseq::cpu_hint(area_offset) };
        Some(LabCursor {
            slot: slots.slot_of(cpu),
            cpu,
            area_offset,
        })
    }

    /// The fast path; `slow_path` is the running mutator that owns this cursor.
    #[inline(always)]
    fn alloc(
        &mut self,
        slow_path: SlowPath<'_>,
        size: AllocSize,
    ) -> Result<NonNull<u8>, AllocError> {
        // Invariant: the cursor's mutator runs, so it still allocates in per-CPU LABs.
        // SAFETY: `slot` is CPU `cpu`'s LAB in the heap's live per-CPU LABs, `area_offset`
        // glibc's fixed rseq area offset; the size was checked against this heap.
        let object = unsafe { rseq::lab_bump(self.area_offset, self.slot, self.cpu, size.bytes()) };
        if object != 0 {
            // SAFETY: a LAB address inside the reservation, not null.
            return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
        }
        let (result, cursor) = Self::miss(slow_path, self.area_offset, size);
        *self = cursor;
        result
    }

    /// Looks the CPU up again and retries once; then the mutator's slow path (which refills
    /// the LAB). Returns the cursor to use next. Takes and returns plain values so that the
    /// caller's copies can stay in registers.
    #[cold]
    #[inline(never)]
    fn miss(
        slow_path: SlowPath<'_>,
        area_offset: isize,
        size: AllocSize,
    ) -> (Result<NonNull<u8>, AllocError>, LabCursor) {
        let slots = slow_path
            .allocator
            .cpu_labs
            .as_ref()
            .and_then(CpuLabs::lab_slots)
            .expect("a cursor exists only over restartable LABs");
        // SAFETY: `area_offset` is the fixed rseq area offset.
        let cpu = unsafe { rseq::cpu_hint(area_offset) };
        let cursor = LabCursor {
            slot: slots.slot_of(cpu),
            cpu,
            area_offset,
        };
        // SAFETY: `slot` is the LAB of `cpu`; see `alloc`.
        let object = unsafe { rseq::lab_bump(area_offset, cursor.slot, cpu, size.bytes()) };
        let result = if object != 0 {
            // SAFETY: a LAB address inside the reservation, not null.
            Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
        } else {
            slow_path.alloc(size.bytes())
        };
        (result, cursor)
    }
}

/// The `cpu-lab` fast path, borrowed from a [`Mutator`] with [`Mutator::cpu_lab`].
pub struct CpuLabPath<'m> {
    cursor: LabCursor,
    /// The mutator's heap and cell, not its address: the loop's stores cannot reach them.
    slow_path: SlowPath<'m>,
    /// Holds the mutator borrowed, so that it cannot park (and the mode cannot change).
    _running: PhantomData<&'m mut Mutator>,
}

impl<'m> CpuLabPath<'m> {
    pub(crate) fn new(cursor: LabCursor, slow_path: SlowPath<'m>) -> Self {
        CpuLabPath {
            cursor,
            slow_path,
            _running: PhantomData,
        }
    }

    /// Allocates an object of a pre-checked size in the LAB of the thread's CPU: nine
    /// instructions inline (arm the section: 2; check the CPU: 2; load, add, compare, branch,
    /// commit) and a test of the result. When the thread moved, the object does not fit or the
    /// section was interrupted, an out-of-line path looks the CPU up again and retries, then
    /// takes the mutator's slow path.
    #[inline]
    pub fn alloc_sized(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        self.cursor.alloc(self.slow_path, size)
    }

    /// [`alloc_sized`](CpuLabPath::alloc_sized) followed by an allocation prefetch, outside the
    /// restartable section (see [`Mutator::alloc_sized_prefetching`]).
    #[inline]
    pub fn alloc_sized_prefetching(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        let object = self.alloc_sized(size)?;
        crate::platform::prefetch::prefetch_ahead(object.as_ptr() as usize + size.bytes());
        Ok(object)
    }
}

impl std::fmt::Debug for CpuLabPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuLabPath")
            .field("mutator", &self.slow_path.cell.id)
            .finish_non_exhaustive()
    }
}

/// A [`Mutator`] that owns its `cpu-lab` fast path (see [`Mutator::into_cpu_lab`]).
///
/// ```
/// use hab::{HeaderWordModel, Heap, HeapConfig, Mode};
/// let heap = Heap::new(HeapConfig::builder().mode(Mode::CpuLab).build()?, HeaderWordModel)?;
/// let mutator = heap.attach();
/// let size = mutator.checked_size(16)?;
/// match mutator.into_cpu_lab() {
///     Ok(mut path) => {
///         let object = path.alloc_sized(size)?;
///         // SAFETY: `object` is 16 fresh bytes owned by this thread.
///         unsafe { HeaderWordModel::write_header(object, 16) };
///         let parked = path.into_mutator().park(); // at a safepoint
///         # drop(parked);
///     }
///     Err(_mutator) => { /* no rseq here: allocate through the mutator */ }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct CpuLabMutator {
    cursor: LabCursor,
    mutator: Mutator,
}

impl CpuLabMutator {
    pub(crate) fn new(cursor: LabCursor, mutator: Mutator) -> Self {
        CpuLabMutator { cursor, mutator }
    }

    /// As [`CpuLabPath::alloc_sized`].
    #[inline]
    pub fn alloc_sized(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        self.cursor.alloc(self.mutator.slow_path(), size)
    }

    /// The mutator, e.g. to park it.
    pub fn into_mutator(self) -> Mutator {
        self.mutator
    }

    /// The mutator, to read its statistics or check sizes.
    pub fn mutator(&self) -> &Mutator {
        &self.mutator
    }
}

impl std::fmt::Debug for CpuLabMutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuLabMutator")
            .field("mutator", &self.mutator)
            .finish_non_exhaustive()
    }
}
