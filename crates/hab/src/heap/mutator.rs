//! The mutator: one thread's handle on the heap, holding its TLAB.
//!
//! Fast path (inline): load `top`, add the size, compare with `end`, store `top`. In the `cpu-lab`
//! mode the TLAB stays empty; a [`CpuLabPath`] borrowed from the mutator holds the inline path
//! that bumps the CPU's LAB in a restartable section, as a JIT emits a different allocation
//! sequence per mode. Everything else — taking a TLAB or a LAB, allocating outside one, the
//! `shared` mode, following the `flip` mode — is the cold slow path.
//!
//! A mutator is *running* (its thread may allocate) or *parked* (stopped at a safepoint or in a
//! safe region: a collection may retire its TLAB). Parking consumes the [`Mutator`] and gives a
//! [`ParkedMutator`], so a parked thread cannot allocate; unparking waits for any collection
//! that holds it to end.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::heap::cpu_lab_path::{CpuLabMutator, CpuLabPath, LabCursor};
use crate::heap::Heap;
use crate::labs::tlab::Waste;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::cell::{MutatorCell, PARKED};
use crate::mutator::slow_path::SlowPath;
use crate::mutator::stats::AllocationStats;

/// A thread's allocation handle, holding its TLAB. `Send` but not `Sync`: one thread at a
/// time allocates through it. Get one with [`Heap::attach`].
///
/// Dropping it retires its TLAB (the free tail counts as collection waste) and detaches it from
/// the heap.
pub struct Mutator {
    cell: Arc<MutatorCell>,
    /// `cell`'s address, so that the fast path and the slow path it calls share one register.
    cell_address: NonNull<MutatorCell>,
    heap: Arc<Heap>,
    alignment_bytes: usize,
    capacity_bytes: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl Mutator {
    pub(crate) fn new(cell: Arc<MutatorCell>, heap: Arc<Heap>) -> Self {
        let alignment_bytes = heap.config().alignment_bytes();
        let capacity_bytes = heap.config().capacity_bytes();
        Mutator {
            cell_address: NonNull::from(&*cell),
            cell,
            heap,
            alignment_bytes,
            capacity_bytes,
            _not_sync: PhantomData,
        }
    }

    /// Allocates an object of `bytes` bytes and returns its address, aligned to the heap's
    /// alignment. The memory is zero when [`ZeroMemory::AtRefill`](crate::ZeroMemory) is set
    /// (the default); the runtime must make the object parseable (write its header) before the
    /// thread next parks.
    ///
    /// Errors: a size of 0, not a multiple of the alignment, or larger than the heap; or the
    /// heap is full (collect and retry).
    #[inline]
    pub fn alloc(&mut self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let size = AllocSize::check(bytes, self.alignment_bytes, self.capacity_bytes)?;
        self.alloc_sized(size)
    }

    /// Checks an object size once, for use with [`alloc_sized`](Mutator::alloc_sized).
    pub fn checked_size(&self, bytes: usize) -> Result<AllocSize, AllocError> {
        AllocSize::check(bytes, self.alignment_bytes, self.capacity_bytes)
    }

    /// Allocates an object of a pre-checked size: the bare fast path (load, add, compare,
    /// branch, store) and, when the TLAB is full, the out-of-line slow path.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let size = mutator.checked_size(16)?;
    /// for _ in 0..1000 {
    ///     let object = mutator.alloc_sized(size)?;
    ///     // SAFETY: `object` is 16 fresh bytes owned by this thread.
    ///     unsafe { HeaderWordModel::write_header(object, 16) };
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn alloc_sized(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        // SAFETY: `cell_address` is `cell`, alive as long as `self`.
        let cell = unsafe { self.cell_address.as_ref() };
        // SAFETY: this mutator is running (a parked one is a `ParkedMutator`) and this is its
        // thread; `&mut self` keeps the borrow unique.
        let tlab = unsafe { cell.running_tlab() };
        let top = tlab.top;
        let new_top = top + size.bytes();
        if new_top <= tlab.end {
            tlab.top = new_top;
            // SAFETY: `top` is inside a TLAB carved from the reservation, so it is not null.
            return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(top)) });
        }
        self.slow_path().alloc(size.bytes())
    }

    /// [`alloc_sized`](Mutator::alloc_sized) followed by an allocation prefetch: one
    /// `prefetchw` of the line [`ALLOCATION_PREFETCH_BYTES`](crate::ALLOCATION_PREFETCH_BYTES)
    /// beyond the new object, which a later allocation will write. For loops that allocate
    /// faster than memory supplies fresh lines (objects kept in a heap larger than the caches);
    /// where the heap stays cached it only adds an instruction.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let size = mutator.checked_size(16)?;
    /// let object = mutator.alloc_sized_prefetching(size)?;
    /// // SAFETY: `object` is 16 fresh bytes owned by this thread.
    /// unsafe { HeaderWordModel::write_header(object, 16) };
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn alloc_sized_prefetching(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        let object = self.alloc_sized(size)?;
        crate::platform::prefetch::prefetch_ahead(object.as_ptr() as usize + size.bytes());
        Ok(object)
    }

    /// The heap's allocation side and the cell, for the slow path.
    #[inline]
    pub(crate) fn slow_path(&self) -> SlowPath<'_> {
        SlowPath {
            allocator: self.heap.allocator(),
            // SAFETY: `cell_address` is `cell`, alive as long as `self`.
            cell: unsafe { self.cell_address.as_ref() },
        }
    }

    /// The `cpu-lab` fast path, when this mutator allocates in per-CPU LABs (the `cpu-lab` mode, or
    /// the `flip` mode after it flipped) and restartable sequences work with glibc's
    /// registration; `None` otherwise, and then [`alloc_sized`](Mutator::alloc_sized) is the
    /// fast path. The mode cannot change while the path is borrowed: collections need the
    /// mutator parked. Take it again after parking.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig, Mode};
    /// let heap = Heap::new(HeapConfig::builder().mode(Mode::CpuLab).build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let size = mutator.checked_size(16)?;
    /// let mut allocate = |mutator: &mut hab::Mutator| match mutator.cpu_lab() {
    ///     Some(mut path) => path.alloc_sized(size),
    ///     None => mutator.alloc_sized(size), // e.g. without rseq: still per-CPU LABs
    /// };
    /// let object = allocate(&mut mutator)?;
    /// // SAFETY: `object` is 16 fresh bytes owned by this thread.
    /// unsafe { HeaderWordModel::write_header(object, 16) };
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn cpu_lab(&mut self) -> Option<CpuLabPath<'_>> {
        let cursor = self.lab_cursor()?;
        Some(CpuLabPath::new(cursor, self.slow_path()))
    }

    /// This mutator, owning its `cpu-lab` fast path: the same as [`cpu_lab`](Mutator::cpu_lab) for a
    /// runtime that keeps the mutator in a structure of its own between allocations. Gives the
    /// mutator back when it has no such path. [`CpuLabMutator::into_mutator`] returns it (e.g.
    /// to park it).
    pub fn into_cpu_lab(mut self) -> Result<CpuLabMutator, Mutator> {
        match self.lab_cursor() {
            Some(cursor) => Ok(CpuLabMutator::new(cursor, self)),
            None => Err(self),
        }
    }

    /// Where the `cpu-lab` fast path starts: the LAB of the CPU the thread runs on now. Inline,
    /// so that the mutator's address is never passed out of the caller's loop (which then
    /// keeps its fields in registers); what it calls takes the cell and the allocator.
    #[inline]
    fn lab_cursor(&mut self) -> Option<LabCursor> {
        if !self.slow_path().follow_mode() {
            return None;
        }
        LabCursor::new(self.heap.cpu_labs()?)
    }

    /// Retires this thread's TLAB now (its tail becomes a filler, counted as collection waste),
    /// e.g. when the thread reaches a safepoint. The next allocation takes a new TLAB.
    pub fn retire(&mut self) {
        // SAFETY: running mutator, see `alloc_sized`.
        let tlab = unsafe { self.cell.running_tlab() };
        // SAFETY: the thread's own TLAB, while running.
        let retired = unsafe { tlab.retire(&self.heap.allocator().space) };
        self.cell.counters.count_retired(retired, Waste::Collection);
    }

    /// This mutator's counters.
    pub fn stats(&self) -> AllocationStats {
        self.cell.counters.snapshot()
    }

    /// A number identifying this mutator among the heap's, in attach order.
    pub fn id(&self) -> u64 {
        self.cell.id
    }

    /// The heap this mutator allocates in.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.heap
    }

    /// The address of this mutator's TLAB `{top, end}` pair (see [`TLAB_TOP_OFFSET`] and
    /// [`TLAB_END_OFFSET`]), for a JIT that inlines the fast path. Valid while the mutator
    /// lives; it may be read and written only by the thread that owns this mutator, and only
    /// while it is running.
    ///
    /// [`TLAB_TOP_OFFSET`]: crate::TLAB_TOP_OFFSET
    /// [`TLAB_END_OFFSET`]: crate::TLAB_END_OFFSET
    pub fn tlab_address(&self) -> NonNull<u8> {
        // SAFETY: the address of a field of a live allocation is not null.
        unsafe { NonNull::new_unchecked(self.cell.tlab_address().cast()) }
    }

    /// Parks the mutator: its thread is at a safepoint or about to block, and a collection may
    /// retire its TLAB meanwhile. Call [`ParkedMutator::unpark`] to allocate again.
    pub fn park(self) -> ParkedMutator {
        let this = ManuallyDrop::new(self);
        this.cell.state.store(PARKED, Ordering::Release);
        // SAFETY: `this` is never used or dropped again; its fields move out exactly once.
        let (cell, heap) = unsafe { (std::ptr::read(&this.cell), std::ptr::read(&this.heap)) };
        ParkedMutator { cell, heap }
    }

    /// Runs `blocking` with this mutator parked (a *safe region*): collections need not wait
    /// for the thread while it blocks, e.g. on I/O or a lock. Unparks afterwards, waiting for a
    /// collection in progress to end.
    pub fn safe_region<R>(&mut self, blocking: impl FnOnce() -> R) -> R {
        struct Unpark<'a>(&'a MutatorCell, &'a Heap);
        impl Drop for Unpark<'_> {
            fn drop(&mut self) {
                self.1.wait_to_unpark(self.0);
            }
        }
        self.cell.state.store(PARKED, Ordering::Release);
        let _unpark = Unpark(&self.cell, &self.heap);
        blocking()
    }
}

// SAFETY: `cell_address` points into `cell`, which the mutator owns a share of; the other
// fields are `Send`, and `MutatorCell` is `Send + Sync`.
unsafe impl Send for Mutator {}

impl Drop for Mutator {
    fn drop(&mut self) {
        self.retire();
        self.heap.detach(&self.cell);
    }
}

impl std::fmt::Debug for Mutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutator")
            .field("id", &self.cell.id)
            .finish_non_exhaustive()
    }
}

/// A mutator whose thread is stopped or blocked: it cannot allocate, and collections may
/// retire its TLAB. Dropping it detaches the mutator (after any collection that holds it).
pub struct ParkedMutator {
    cell: Arc<MutatorCell>,
    heap: Arc<Heap>,
}

impl ParkedMutator {
    /// Resumes allocation, first waiting for a collection that holds this mutator to end.
    pub fn unpark(self) -> Mutator {
        let this = ManuallyDrop::new(self);
        this.heap.wait_to_unpark(&this.cell);
        // SAFETY: `this` is never used or dropped again; its fields move out exactly once.
        let (cell, heap) = unsafe { (std::ptr::read(&this.cell), std::ptr::read(&this.heap)) };
        Mutator::new(cell, heap)
    }

    /// The mutator's counters.
    pub fn stats(&self) -> AllocationStats {
        self.cell.counters.snapshot()
    }

    /// The mutator's id.
    pub fn id(&self) -> u64 {
        self.cell.id
    }
}

impl Drop for ParkedMutator {
    fn drop(&mut self) {
        self.heap.wait_to_unpark(&self.cell);
        drop(Mutator::new(self.cell.clone(), self.heap.clone()));
    }
}

impl std::fmt::Debug for ParkedMutator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParkedMutator")
            .field("id", &self.cell.id)
            .finish_non_exhaustive()
    }
}
