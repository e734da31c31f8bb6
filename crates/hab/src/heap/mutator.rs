//! The mutator: one thread's handle on the heap, holding its TLAB.
//!
//! Fast path (inline): load `top`, add the size, compare with `end`, store `top`. In the `plab`
//! mode the TLAB stays empty; a [`PlabPath`] borrowed from the mutator holds the inline path
//! that bumps the CPU's LAB in a restartable section, as a JIT emits a different allocation
//! sequence per mode. Everything else — taking a TLAB or a LAB, allocating outside one, the
//! `shared` mode, following the `flip` mode — is the cold slow path.
//!
//! A mutator is *running* (its thread may allocate) or *parked* (stopped at a safepoint or in a
//! safe region: a collection may retire its TLAB). Parking consumes the [`Mutator`] and gives a
//! [`ParkedMutator`], so a parked thread cannot allocate; unparking waits for any collection
//! that holds it to end.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::config::Mode;
use crate::heap::cpu_lab_path::{LabCursor, PlabMutator, PlabPath};
use crate::heap::error::AllocError;
use crate::heap::Heap;
use crate::labs::cpu_labs;
use crate::labs::sizing::TlabSizer;
use crate::labs::tlab::{Tlab, Waste};
use crate::levels::middle::Chunk;
use crate::levels::refill;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::stats::{Counters, TlabStats};
use crate::platform::cpu_id::SimulatedCpu;
use crate::platform::process::{ForkGate, ThreadIdentity};

/// The owning thread may allocate; only it touches the TLAB.
pub(crate) const RUNNING: u32 = 0;
/// Stopped by its thread; a collection may claim it.
pub(crate) const PARKED: u32 = 1;
/// Claimed by a collection, which alone touches the TLAB until it ends.
pub(crate) const HELD: u32 = 2;

/// An object size checked against a heap: non-zero, a multiple of the heap's alignment, no
/// larger than the heap. Lets the fast path skip the checks, as a JIT does with sizes it
/// computed when a class was loaded.
///
/// A size checked for one heap and used with another is a logic error of the runtime: it is
/// checked again on the next slow path, but in between it can misalign objects with respect to
/// a larger alignment of the other heap. Hab then writes no filler it cannot place correctly
/// and the heap walk reports the heap as unparseable; memory outside the heap is never
/// written, and addresses stay multiples of 8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AllocSize(usize);

impl AllocSize {
    /// The size in bytes.
    #[inline]
    pub const fn bytes(self) -> usize {
        self.0
    }

    /// Checks `bytes` against a heap's alignment and capacity.
    #[inline]
    pub(crate) fn check(
        bytes: usize,
        alignment: usize,
        capacity: usize,
    ) -> Result<Self, AllocError> {
        if bytes.wrapping_sub(1) < capacity && bytes & (alignment - 1) == 0 {
            Ok(AllocSize(bytes))
        } else {
            Err(size_error(bytes, alignment, capacity))
        }
    }
}

#[cold]
fn size_error(bytes: usize, alignment: usize, capacity: usize) -> AllocError {
    if bytes == 0 {
        AllocError::ZeroSize
    } else if bytes > capacity {
        AllocError::TooLarge { bytes, capacity }
    } else {
        AllocError::Misaligned { bytes, alignment }
    }
}

/// State of one mutator that a collection can reach through the heap's registry.
///
/// `tlab` comes first so that its `{top, end}` pair sits at the documented offsets.
#[repr(C)]
pub(crate) struct MutatorCell {
    pub(crate) tlab: UnsafeCell<Tlab>,
    pub(crate) local: UnsafeCell<MutatorLocal>,
    pub(crate) state: AtomicU32,
    /// The number of collections finished when the thread last attached or unparked: a thread
    /// whose value is older than the last collection stayed parked for the whole cycle.
    pub(crate) running_since: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) id: u64,
    /// The thread that last attached or unparked the mutator: what a collection that cannot
    /// stop the world reports, and how a forked child tells its own mutators from its
    /// parent's.
    pub(crate) thread: Mutex<ThreadIdentity>,
}

impl MutatorCell {
    /// Records that the calling thread runs the mutator from now on. (Takes the fork gate:
    /// no `fork` copies `thread` locked.)
    pub(crate) fn mark_running(&self) {
        let identity = ThreadIdentity::current();
        let _fork = ForkGate::enter();
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = identity;
    }

    /// The thread that runs (or last ran) the mutator. Only called with the registry
    /// locked, which holds the fork gate.
    pub(crate) fn thread(&self) -> ThreadIdentity {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

// SAFETY: `tlab` and `local` are touched only by the owning thread while `state` is RUNNING or
// PARKED, and only by the collection that moved `state` from PARKED to HELD (with Acquire, after
// the owner's Release store of PARKED) until it stores PARKED again (Release). `counters` are
// atomics; `id` is immutable; `thread` is behind a mutex.
unsafe impl Sync for MutatorCell {}

/// The parts of a mutator's state that only the slow path and collections use.
pub(crate) struct MutatorLocal {
    pub(crate) sizer: TlabSizer,
    /// `counters.allocated_bytes()` when the last collection ended.
    pub(crate) allocated_at_last_collection: u64,
    /// `counters.refills` when the last collection ended.
    pub(crate) refills_at_last_collection: u64,
    /// The thread's virtual CPU, when the CPU-id source is simulated.
    pub(crate) simulated_cpu: SimulatedCpu,
    /// Whether the thread allocates in per-CPU LABs (`plab` mode, or the `flip` mode's
    /// per-CPU phase as the thread last saw it).
    pub(crate) in_plab: bool,
}

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
        // SAFETY: this mutator is running (a parked one is a `ParkedMutator`), so only this
        // thread touches the TLAB; `&mut self` keeps the borrow unique.
        let tlab = unsafe { &mut *cell.tlab.get() };
        let top = tlab.top;
        let new_top = top + size.bytes();
        if new_top <= tlab.end {
            tlab.top = new_top;
            // SAFETY: `top` is inside a TLAB carved from the reservation, so it is not null.
            return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(top)) });
        }
        self.handle().alloc_slow(size.bytes())
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

    /// The heap and cell, for the slow path.
    #[inline]
    pub(crate) fn handle(&self) -> Handle<'_> {
        Handle {
            heap: &self.heap,
            // SAFETY: `cell_address` is `cell`, alive as long as `self`.
            cell: unsafe { self.cell_address.as_ref() },
        }
    }

    /// The `plab` fast path, when this mutator allocates in per-CPU LABs (the `plab` mode, or
    /// the `flip` mode after it flipped) and restartable sequences work with glibc's
    /// registration; `None` otherwise, and then [`alloc_sized`](Mutator::alloc_sized) is the
    /// fast path. The mode cannot change while the path is borrowed: collections need the
    /// mutator parked. Take it again after parking.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig, Mode};
    /// let heap = Heap::new(HeapConfig::builder().mode(Mode::Plab).build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let size = mutator.checked_size(16)?;
    /// let mut allocate = |mutator: &mut hab::Mutator| match mutator.plab() {
    ///     Some(mut plab) => plab.alloc_sized(size),
    ///     None => mutator.alloc_sized(size), // e.g. without rseq: still per-CPU LABs
    /// };
    /// let object = allocate(&mut mutator)?;
    /// // SAFETY: `object` is 16 fresh bytes owned by this thread.
    /// unsafe { HeaderWordModel::write_header(object, 16) };
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn plab(&mut self) -> Option<PlabPath<'_>> {
        let cursor = self.lab_cursor()?;
        Some(PlabPath::new(cursor, self.handle()))
    }

    /// This mutator, owning its `plab` fast path: the same as [`plab`](Mutator::plab) for a
    /// runtime that keeps the mutator in a structure of its own between allocations. Gives the
    /// mutator back when it has no such path. [`PlabMutator::into_mutator`] returns it (e.g.
    /// to park it).
    pub fn into_plab(mut self) -> Result<PlabMutator, Mutator> {
        match self.lab_cursor() {
            Some(cursor) => Ok(PlabMutator::new(cursor, self)),
            None => Err(self),
        }
    }

    /// Where the `plab` fast path starts: the LAB of the CPU the thread runs on now.
    fn lab_cursor(&mut self) -> Option<LabCursor> {
        if !self.handle().follow_mode() {
            return None;
        }
        LabCursor::new(self.heap.plabs()?)
    }

    /// Retires this thread's TLAB now (its tail becomes a filler, counted as collection waste),
    /// e.g. when the thread reaches a safepoint. The next allocation takes a new TLAB.
    pub fn retire(&mut self) {
        // SAFETY: running mutator, see `alloc_sized`.
        let tlab = unsafe { &mut *self.cell.tlab.get() };
        // SAFETY: the thread's own TLAB, while running.
        unsafe { tlab.retire(&self.heap, &self.cell.counters, Waste::Collection) };
    }

    /// This mutator's counters.
    pub fn stats(&self) -> TlabStats {
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
        unsafe { NonNull::new_unchecked(self.cell.tlab.get().cast()) }
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

/// What the slow path works on: a running mutator's heap and cell.
#[derive(Clone, Copy)]
pub(crate) struct Handle<'a> {
    pub(crate) heap: &'a Heap,
    pub(crate) cell: &'a MutatorCell,
}

impl Handle<'_> {
    /// Takes the heap and cell by value (not the mutator's address) so the caller's loop can
    /// keep the mutator's fields in registers; all state it changes lives in `cell`.
    #[cold]
    #[inline(never)]
    pub(crate) fn alloc_slow(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        // Re-check: the size may have been checked against another heap.
        let config = self.heap.config();
        AllocSize::check(bytes, config.alignment_bytes(), config.capacity_bytes())?;
        match config.mode() {
            Mode::Shared => self.alloc_outside_tlab(bytes),
            Mode::Tlab | Mode::Hab => self.refill_or_alloc_outside(bytes),
            Mode::Plab | Mode::Flip => {
                if self.follow_mode() {
                    self.alloc_in_plab(bytes)
                } else {
                    self.refill_or_alloc_outside(bytes)
                }
            }
        }
    }

    /// Picks up the mode the heap is in (it changes only at collections, in the `flip` mode)
    /// and returns whether it is the per-CPU LABs.
    fn follow_mode(self) -> bool {
        let heap = self.heap;
        let in_plab = heap.allocates_in_plabs();
        let cell = self.cell;
        // SAFETY: running mutator, see `alloc_sized`; `tlab` and `local` are distinct.
        let (tlab, local) = unsafe { (&mut *cell.tlab.get(), &mut *cell.local.get()) };
        if local.in_plab != in_plab {
            local.in_plab = in_plab;
            if in_plab {
                // SAFETY: the thread's own TLAB, while running.
                unsafe { tlab.retire(heap, &cell.counters, Waste::Refill) };
            }
        }
        in_plab
    }

    /// An object in the per-CPU LAB of the thread's CPU, or outside LABs when it is larger
    /// than a LAB or the heap has no room for a new LAB.
    fn alloc_in_plab(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let heap = self.heap;
        let plabs = heap.plabs().expect("plab and flip heaps have per-CPU LABs");
        if bytes > plabs.max_object_bytes() {
            return self.alloc_outside_tlab(bytes);
        }
        let cell = self.cell;
        // SAFETY: running mutator, see `alloc_sized`.
        let local = unsafe { &mut *cell.local.get() };
        match cpu_labs::alloc(heap, plabs, &cell.counters, &mut local.simulated_cpu, bytes) {
            // SAFETY: a LAB address inside the reservation, not null.
            Some(object) => Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) }),
            None => self.alloc_outside_tlab(bytes),
        }
    }

    /// HotSpot's rule: keep a TLAB with much free space and allocate the object outside it;
    /// otherwise retire it and take a new one sized by the policy.
    fn refill_or_alloc_outside(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let heap = self.heap;
        let config = heap.config();
        let cell = self.cell;
        // SAFETY: running mutator, see `alloc_sized`; `tlab` and `local` are distinct cells.
        let (tlab, local) = unsafe { (&mut *cell.tlab.get(), &mut *cell.local.get()) };
        let reserve = heap.tlab_reserve_bytes();
        let needed = bytes + reserve;
        if needed > config.max_tlab_bytes() {
            return self.alloc_outside_tlab(bytes);
        }
        if tlab.free_bytes() > local.sizer.refill_waste_limit_bytes() {
            local.sizer.record_slow_allocation(config);
            return self.alloc_outside_tlab(bytes);
        }
        // SAFETY: the thread's own TLAB, while running.
        unsafe { tlab.retire(heap, &cell.counters, Waste::Refill) };
        let desired = local.sizer.desired_bytes().max(needed);
        let min = config.min_tlab_bytes().max(needed).min(desired);
        let chunk = match config.mode() {
            Mode::Hab => {
                refill::carve_tlab(heap, &cell.counters, &mut local.simulated_cpu, min, desired)
            }
            _ => heap
                .global()
                .carve_between(min, desired)
                .map(|(start, len)| Chunk { start, len }),
        };
        let Some(Chunk { start, len }) = chunk else {
            return self.alloc_outside_tlab(bytes);
        };
        heap.global().zero_reused(start, len);
        tlab.install(start, len, reserve);
        local.sizer.record_refill(config);
        cell.counters.refills.add(1);
        cell.counters.tlab_bytes.add(len as u64);
        cell.counters
            .desired_size_bytes
            .set(local.sizer.desired_bytes() as u64);
        let object = tlab.top;
        tlab.top += bytes;
        debug_assert!(tlab.top <= tlab.end);
        // SAFETY: `object` is the start of the fresh TLAB, a non-null heap address.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) })
    }

    fn alloc_outside_tlab(self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let address = self
            .heap
            .global()
            .carve(bytes)
            .ok_or(AllocError::OutOfMemory { bytes })?;
        self.heap.global().zero_reused(address, bytes);
        self.cell.counters.slow_allocs.add(1);
        self.cell.counters.slow_alloc_bytes.add(bytes as u64);
        // SAFETY: a carved heap address is not null.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(address)) })
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
    pub fn stats(&self) -> TlabStats {
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
