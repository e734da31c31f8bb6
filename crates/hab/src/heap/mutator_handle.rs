//! The mutator: one thread's handle on the heap, and the one allocation call of every mode.
//!
//! Fast path (inline): in TLAB modes, load `top`, add the size, compare with the soft end,
//! store `top`; in the `cpu-lab` mode (with restartable sequences), bump the LAB of the
//! thread's CPU in a restartable section. Which of the two is one test of a value the caller's
//! loop keeps in a register (the per-CPU cursor, `CpuLabCursor::INACTIVE` in TLAB modes); it changes only when
//! the mutator stops, so a JIT can emit one sequence per mode. Everything else — taking a TLAB
//! or a LAB, allocating outside one, the `shared` mode, following the `flip` mode, stopping at
//! a safepoint — is the cold slow path.
//!
//! A mutator is *running* (its thread may allocate) or *parked* (stopped at a safepoint or in a
//! safe region: a collection may retire its TLAB). Parking consumes the [`Mutator`] and gives a
//! [`ParkedMutator`], so a parked thread cannot allocate; unparking waits for any collection
//! that holds it to end.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::heap::Heap;
use crate::labs::tlab::Waste;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize, MAX_OBJECT_ALIGNMENT_BYTES};
use crate::mutator::cell::MutatorCell;
use crate::mutator::cpu_lab_cursor::{CpuLabCursor, CpuLabPath};
use crate::mutator::safepoint::Safepoints;
use crate::mutator::slow_path::SlowPath;
use crate::mutator::stats::AllocationStats;

/// A thread's allocation handle, holding its TLAB (or its place in the per-CPU LABs). `Send`
/// but not `Sync`: one thread at a time allocates through it. Get one with [`Heap::attach`].
///
/// Dropping it retires its TLAB (the free tail counts as collection waste) and detaches it from
/// the heap.
pub struct Mutator {
    /// `cell`'s address, so that the fast path and the slow path it calls share one register.
    cell_address: NonNull<MutatorCell>,
    /// The `cpu-lab` fast path's state when the mutator allocates in restartable per-CPU LABs;
    /// inactive when it allocates in its TLAB. Refreshed whenever the mutator stops.
    lab: CpuLabCursor,
    cell: Arc<MutatorCell>,
    heap: Arc<Heap>,
    alignment_bytes: usize,
    capacity_bytes: usize,
    _not_sync: PhantomData<Cell<()>>,
}

impl Mutator {
    /// A handle on a running mutator (the calling thread attached or unparked it).
    pub(crate) fn new(cell: Arc<MutatorCell>, heap: Arc<Heap>) -> Self {
        let alignment_bytes = heap.config().alignment_bytes();
        let capacity_bytes = heap.config().capacity_bytes();
        let mut mutator = Mutator {
            cell_address: NonNull::from(&*cell),
            lab: CpuLabCursor::INACTIVE,
            cell,
            heap,
            alignment_bytes,
            capacity_bytes,
            _not_sync: PhantomData,
        };
        let lab = mutator.slow_path().lab_cursor();
        mutator.lab.set(lab);
        mutator
    }

    /// Allocates an object of `bytes` bytes and returns its address, aligned to the heap's
    /// alignment, through the fast path of the heap's mode. The memory is zero, unless the
    /// heap was built with [`ZeroMemory::Never`](crate::ZeroMemory) and reuses it (memory
    /// never handed out before is always zero; the default, `Ahead`, zeroes reused memory);
    /// the runtime must make the object parseable (write its header) before the thread next
    /// allocates, polls or parks.
    ///
    /// An allocation is a safepoint: when a collection is requested, the slow path stops the
    /// thread until it has ended (see [`poll`](Mutator::poll)).
    ///
    /// Errors: a size of 0, not a multiple of the alignment, or larger than the heap; or the
    /// heap is full (collect and retry).
    #[inline]
    pub fn alloc(&mut self, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let size = AllocSize::check(bytes, self.alignment_bytes, self.capacity_bytes)?;
        self.alloc_sized(size)
    }

    /// Allocates an object of `bytes` bytes at a multiple of `alignment_bytes`, a power of two
    /// up to [`MAX_OBJECT_ALIGNMENT_BYTES`](crate::MAX_OBJECT_ALIGNMENT_BYTES) (a page). Up to
    /// the heap's alignment this is [`alloc`](Mutator::alloc); beyond, always the slow path: in
    /// the TLAB when the object fits there, else outside LABs (a compare-and-swap on the global
    /// top; always so in the `cpu-lab` mode), with a filler over the gap before it (counted in
    /// [`AllocationStats::alignment_gap_bytes`]).
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let small = mutator.alloc(16)?;
    /// // SAFETY: `small` is 16 fresh bytes owned by this thread.
    /// unsafe { HeaderWordModel::write_header(small, 16) };
    /// let vector = mutator.alloc_aligned(256, 64)?;
    /// assert_eq!(vector.as_ptr() as usize % 64, 0);
    /// // SAFETY: `vector` is 256 fresh bytes owned by this thread.
    /// unsafe { HeaderWordModel::write_header(vector, 256) };
    /// assert!(mutator.alloc_aligned(16, 48).is_err()); // not a power of two
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn alloc_aligned(
        &mut self,
        bytes: usize,
        alignment_bytes: usize,
    ) -> Result<NonNull<u8>, AllocError> {
        if !alignment_bytes.is_power_of_two() || alignment_bytes > MAX_OBJECT_ALIGNMENT_BYTES {
            return Err(AllocError::BadAlignment {
                alignment: alignment_bytes,
            });
        }
        if alignment_bytes <= self.alignment_bytes {
            return self.alloc(bytes);
        }
        let size = AllocSize::check(bytes, self.alignment_bytes, self.capacity_bytes)?;
        let (result, lab) = self
            .slow_path()
            .alloc_aligned(size.bytes(), alignment_bytes);
        self.lab.set(lab);
        result
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
        if self.lab.is_active() {
            placed_apart();
            // SAFETY: the cursor is active, and refreshed whenever the mutator stops (the only
            // time its mode can change); `size` was checked against this heap (the slow path
            // checks it again).
            if let Some(object) = unsafe { self.lab.bump(size) } {
                return Ok(object);
            }
        } else {
            // SAFETY: `cell_address` is `cell`, alive as long as `self`.
            let cell = unsafe { self.cell_address.as_ref() };
            // SAFETY: this mutator is running (a parked one is a `ParkedMutator`) and this is
            // its thread; `&mut self` keeps it so.
            let tlab = unsafe { cell.running_tlab() };
            if let Some(object) = tlab.bump(size.bytes()) {
                // SAFETY: `object` is inside a TLAB carved from the reservation, not null.
                return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
            }
        }
        self.alloc_slow(size)
    }

    /// Calls the out-of-line slow path with plain values and keeps the fast path it returns.
    /// Inline, so that the mutator's address never leaves the caller's loop (which then keeps
    /// its fields in registers).
    #[inline(always)]
    fn alloc_slow(&mut self, size: AllocSize) -> Result<NonNull<u8>, AllocError> {
        let (result, lab) = if self.lab.is_active() {
            self.slow_path().cpu_lab_miss(self.lab.area_offset(), size)
        } else {
            // The common misses first: an address in a register, no cursor to change.
            let object = self.slow_path().common_miss(size.bytes());
            if object != 0 {
                // SAFETY: a heap address handed out by the slow path, not null.
                return Ok(unsafe { NonNull::new_unchecked(address_to_pointer(object)) });
            }
            self.slow_path().alloc(size.bytes())
        };
        self.lab.set(lab);
        result
    }

    /// A safepoint poll: one load and a branch when no collection is requested. When one is,
    /// stops the thread (parks, sleeps until the collection has ended, unparks) and returns
    /// how many collections ended meanwhile (0 when it did not stop). Objects allocated so far
    /// must be parseable. Compiled code tests the word at
    /// [`SAFEPOINT_POLL_OFFSET`](crate::SAFEPOINT_POLL_OFFSET) instead.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// assert_eq!(mutator.poll(), 0); // nothing requested: go on
    /// std::thread::scope(|scope| {
    ///     scope.spawn(|| heap.collection().reset()); // asks every mutator to stop
    ///     while mutator.poll() == 0 {} // stops here until it has ended
    /// });
    /// assert_eq!(mutator.epoch(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[inline]
    pub fn poll(&mut self) -> u64 {
        // SAFETY: `cell_address` is `cell`, alive as long as `self`.
        let cell = unsafe { self.cell_address.as_ref() };
        if !cell.safepoint_requested() {
            return 0;
        }
        let (slept, lab) = self.slow_path().stop_at_safepoint();
        self.lab.set(lab);
        slept
    }

    /// The number of collections that had ended when this mutator last started running
    /// (attached, unparked, or left a safepoint or safe region). It changes exactly when the
    /// thread slept through collections: a runtime compares it with a value it kept to learn
    /// that objects may have moved.
    pub fn epoch(&self) -> u64 {
        self.cell
            .running_since
            .load(std::sync::atomic::Ordering::Relaxed)
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

    /// A number identifying this mutator among every heap's mutators in this process (never
    /// handed out twice): what [`Collection::alloc_for`](crate::Collection::alloc_for) takes.
    pub fn id(&self) -> u64 {
        self.cell.id
    }

    /// The heap this mutator allocates in.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.heap
    }

    /// The address of this mutator's TLAB `{top, soft end}` pair (see [`TLAB_TOP_OFFSET`] and
    /// [`TLAB_SOFT_END_OFFSET`]) and safepoint poll word ([`SAFEPOINT_POLL_OFFSET`]), for a JIT
    /// that inlines the fast path and the poll. Valid while the mutator lives; `top` may be
    /// read and written only by the thread that owns this mutator, and only while it is
    /// running; the soft end and the poll word may change under it (read them with plain
    /// loads, never write them).
    ///
    /// [`TLAB_TOP_OFFSET`]: crate::TLAB_TOP_OFFSET
    /// [`TLAB_SOFT_END_OFFSET`]: crate::TLAB_SOFT_END_OFFSET
    /// [`SAFEPOINT_POLL_OFFSET`]: crate::SAFEPOINT_POLL_OFFSET
    pub fn tlab_address(&self) -> NonNull<u8> {
        // SAFETY: the address of a field of a live allocation is not null.
        unsafe { NonNull::new_unchecked(self.cell.tlab_address().cast_mut().cast()) }
    }

    /// The layout of the `cpu-lab` fast path for compiled code to inline, while this mutator
    /// allocates in restartable per-CPU LABs; `None` while it allocates in its TLAB (at
    /// [`tlab_address`](Mutator::tlab_address)) or restartable sequences do not work here.
    /// It changes only when the mutator stops (a poll that stopped, a slow path, a safe
    /// region, a park): read it again after each.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig, Mode};
    /// let heap = Heap::new(HeapConfig::builder().mode(Mode::Tlab).build()?, HeaderWordModel)?;
    /// let mutator = heap.attach();
    /// assert_eq!(mutator.cpu_lab_path(), None); // TLAB mode: inline the TLAB path instead
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn cpu_lab_path(&self) -> Option<CpuLabPath> {
        self.lab.path(self.heap.allocator().cpu_labs.as_ref())
    }

    /// Parks the mutator: its thread is at a safepoint or about to block, and a collection may
    /// retire its TLAB meanwhile. Call [`ParkedMutator::unpark`] to allocate again.
    pub fn park(self) -> ParkedMutator {
        let this = ManuallyDrop::new(self);
        Safepoints::park(&this.cell);
        // SAFETY: `this` is never used or dropped again; its fields move out exactly once.
        let (cell, heap) = unsafe { (std::ptr::read(&this.cell), std::ptr::read(&this.heap)) };
        ParkedMutator { cell, heap }
    }

    /// Runs `blocking` with this mutator parked (a *safe region*): collections need not wait
    /// for the thread while it blocks, e.g. on I/O or a lock. Unparks afterwards, waiting for a
    /// collection in progress to end (also when `blocking` unwinds).
    pub fn safe_region<R>(&mut self, blocking: impl FnOnce() -> R) -> R {
        /// Resumes the mutator when dropped.
        struct Resume<'a>(&'a mut Mutator);
        impl Drop for Resume<'_> {
            fn drop(&mut self) {
                self.0.resume();
            }
        }
        Safepoints::park(&self.cell);
        let _resume = Resume(self);
        blocking()
    }

    /// Unparks the mutator parked in place, and takes the fast path of the mode it allocates
    /// in now.
    fn resume(&mut self) {
        self.heap.allocator().safepoints.unpark(&self.cell);
        let lab = self.slow_path().lab_cursor();
        self.lab.set(lab);
    }
}

/// The slow path compiled code calls when its inlined fast path misses (the TLAB's soft end,
/// or a per-CPU LAB's miss): allocates `bytes` for `mutator` through
/// [`Mutator::alloc`], stopping at a requested safepoint first, and returns the object, or
/// null when the allocation failed (the heap is full: collect, e.g. with
/// [`Mutator::collect`]; or a bad size). The C calling convention; afterwards read the
/// mutator's fast-path layout again ([`Mutator::cpu_lab_path`]): the thread may have stopped.
///
/// ```
/// use hab::{alloc_slow_from_compiled_code, HeaderWordModel, Heap, HeapConfig};
/// let heap = Heap::new(HeapConfig::builder().build()?, HeaderWordModel)?;
/// let mut mutator = heap.attach();
/// // SAFETY: `mutator` is this thread's running mutator, not otherwise borrowed.
/// let object = unsafe { alloc_slow_from_compiled_code(&mut mutator, 32) };
/// assert!(!object.is_null());
/// // SAFETY: `object` is 32 fresh bytes owned by this thread.
/// unsafe { HeaderWordModel::write_header(std::ptr::NonNull::new(object).unwrap(), 32) };
/// // SAFETY: as above.
/// assert!(unsafe { alloc_slow_from_compiled_code(&mut mutator, 12) }.is_null()); // misaligned
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Safety
/// `mutator` points to a live [`Mutator`] run by the calling thread, not borrowed elsewhere
/// for the call's duration.
pub unsafe extern "C" fn alloc_slow_from_compiled_code(
    mutator: *mut Mutator,
    bytes: usize,
) -> *mut u8 {
    // SAFETY: the caller's contract.
    let mutator = unsafe { &mut *mutator };
    mutator
        .alloc(bytes)
        .map_or(std::ptr::null_mut(), NonNull::as_ptr)
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
    ///
    /// # Panics
    /// When the calling thread began a collection that has not ended
    /// ([`Heap::is_collecting_thread`]): that collection holds this mutator, so the wait would
    /// be for the caller itself.
    pub fn unpark(self) -> Mutator {
        self.heap
            .refuse_wait_for_own_collection("ParkedMutator::unpark");
        let this = ManuallyDrop::new(self);
        this.heap.allocator().safepoints.unpark(&this.cell);
        // SAFETY: `this` is never used or dropped again; its fields move out exactly once.
        let (cell, heap) = unsafe { (std::ptr::read(&this.cell), std::ptr::read(&this.heap)) };
        Mutator::new(cell, heap)
    }

    /// The mutator's counters.
    pub fn stats(&self) -> AllocationStats {
        self.cell.counters.snapshot()
    }

    /// The mutator's id (see [`Mutator::id`]).
    pub fn id(&self) -> u64 {
        self.cell.id
    }

    /// The heap this mutator allocates in.
    pub fn heap(&self) -> &Arc<Heap> {
        &self.heap
    }
}

impl Drop for ParkedMutator {
    /// Detaches the mutator. Never waits: a collection that holds it (even one the dropping
    /// thread runs) detaches it when it ends.
    fn drop(&mut self) {
        if self.heap.detach_parked(&self.cell) {
            return;
        }
        self.cell.mark_running();
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

/// A block-layout hint, not a claim that the per-CPU path is rare: the compiler then lets the
/// TLAB bump fall through into the caller's code and gives the per-CPU path the branch back
/// (its hit test already ends in one), so that each mode pays two instructions for sharing
/// the call (the cursor test and its branch) instead of one mode paying three. Empty; inlined.
#[cold]
fn placed_apart() {}
