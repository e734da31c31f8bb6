//! The collection layer: what runs only at a collection, apart from the allocation paths.
//! Stopping the world (`stop`), retiring every LAB, walking and verifying the heap,
//! and installing the next allocation range (here); the end of the cycle, which feeds the
//! sizing, end-of-cycle, flip and buffer-sizing policies, as named steps (`cycle_end.rs`).

mod cycle_end;
pub(crate) mod error;
pub(crate) mod stop;

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use crate::collection::error::{CollectionError, VerifyError};
use crate::heap::collector_lock::CollectorGuard;
use crate::heap::Heap;
use crate::labs::tlab::Waste;
use crate::memory::reservation::address_to_pointer;
use crate::mutator::alloc_size::{AllocError, AllocSize};
use crate::mutator::cell::HELD;
use crate::platform::topology::Level;

/// A stop-the-world collection in progress: every mutator is parked and claimed, and every
/// TLAB has been retired, so the allocation range is a walkable sequence of objects and
/// fillers. Dropping it (or calling [`finish`](Collection::finish)) installs the new
/// allocation range, resizes TLABs and lets the mutators run again.
///
/// ```
/// use hab::{HeaderWordModel, Heap, HeapConfig};
/// let heap = Heap::new(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel)?;
/// let mut mutator = heap.attach();
/// let object = mutator.alloc(32)?;
/// // SAFETY: `object` is 32 fresh bytes owned by this thread.
/// unsafe { HeaderWordModel::write_header(object, 32) };
///
/// let parked = mutator.park(); // at a safepoint
/// let mut collection = heap.collection();
/// let summary = collection.verify()?; // the object, and a filler over the TLAB's rest
/// assert_eq!(summary.objects, 1);
/// assert_eq!(summary.total_bytes(), collection.used_bytes());
/// collection.reset(); // everything died: allocate from the bottom again
/// collection.finish();
/// let mut mutator = parked.unpark();
/// assert_eq!(mutator.alloc(32)?, object);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Collection<'h> {
    heap: &'h Heap,
    used_bytes: usize,
    range: (usize, usize),
    next_range: Option<(usize, usize)>,
    /// Whether [`alloc_for`](Collection::alloc_for) installed the next range already (and
    /// allocated in it): the range can no longer change.
    range_installed: bool,
    _one_at_a_time: CollectorGuard<'h>,
}

/// One object or filler met by a heap walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapObject {
    /// Where it starts.
    pub address: NonNull<u8>,
    /// Its size in bytes.
    pub bytes: usize,
    /// Whether it is a filler over unused LAB space.
    pub is_filler: bool,
}

/// What a heap walk counted. `object_bytes + filler_bytes` is every byte in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkSummary {
    /// Objects met.
    pub objects: u64,
    /// Their bytes.
    pub object_bytes: usize,
    /// Fillers met.
    pub fillers: u64,
    /// Their bytes.
    pub filler_bytes: usize,
}

impl WalkSummary {
    /// Bytes walked: objects plus fillers.
    pub fn total_bytes(&self) -> usize {
        self.object_bytes + self.filler_bytes
    }
}

impl<'h> Collection<'h> {
    /// Retires every registered mutator's TLAB. All of them are claimed by the caller.
    pub(crate) fn begin(heap: &'h Heap, guard: CollectorGuard<'h>) -> Self {
        let allocator = heap.allocator();
        let space = &allocator.space;
        for cell in &heap.registry().mutators {
            // SAFETY: every registered mutator is HELD by this collection, so no other thread
            // touches its TLAB until the collection ends.
            let (tlab, _) = unsafe { cell.held_parts() };
            // SAFETY: as above.
            let retired = unsafe { tlab.retire(space) };
            cell.counters.count_retired(retired, Waste::Collection);
        }
        let base = space.base();
        for level in allocator.levels() {
            let waste = &heap.collector().levels[level.level().index()].waste_bytes;
            level.retire_all(base, |start, end| {
                // SAFETY: every mutator is stopped, so no thread carves from the buffer whose
                // tail this is; the collection owns it.
                unsafe { space.write_filler(start, end - start) };
                waste.add((end - start) as u64);
            });
        }
        if let Some(cpu_labs) = heap.cpu_labs() {
            let collector = heap.collector();
            cpu_labs.retire_all(
                space,
                &collector.cpu_lab,
                &collector.levels[Level::Cpu.index()],
            );
        }
        let range = heap.global().range();
        Collection {
            heap,
            used_bytes: heap.global().top() - range.0,
            range,
            next_range: None,
            range_installed: false,
            _one_at_a_time: guard,
        }
    }

    /// The heap being collected.
    pub fn heap(&self) -> &'h Heap {
        self.heap
    }

    /// Bytes of the allocation range in use (objects and fillers).
    pub fn used_bytes(&self) -> usize {
        self.used_bytes
    }

    /// The allocation range of the cycle that ends with this collection.
    pub fn allocation_range(&self) -> Range<usize> {
        self.range.0..self.range.1
    }

    /// Visits every object and filler of the allocation range in address order, each byte
    /// exactly once. Stops at the first header that does not describe a well-formed object.
    pub fn walk(&self, mut visit: impl FnMut(HeapObject)) -> Result<WalkSummary, VerifyError> {
        let model = self.heap.allocator().space.object_model();
        let alignment = self.heap.config().alignment_bytes();
        let (start, _) = self.range;
        let top = start + self.used_bytes;
        let mut summary = WalkSummary::default();
        let mut address = start;
        while address < top {
            // SAFETY: `address` is non-null, inside the used part of the allocation range, and
            // at the start of an object or filler (the walk steps by object sizes, each checked
            // below); the mutators are stopped, so headers are stable.
            let object = unsafe { NonNull::new_unchecked(address_to_pointer(address)) };
            // SAFETY: as above.
            let bytes = unsafe { model.object_size(object) };
            let problem = if bytes == 0 {
                Some(
                    "the header gives size 0: no header was written there (a thread must \
                     make its objects parseable before it next allocates, polls or parks)",
                )
            } else if bytes % alignment != 0 {
                Some("size not a multiple of the alignment")
            } else if bytes > top - address {
                Some("object runs past the top of the allocation range")
            } else {
                None
            };
            if let Some(problem) = problem {
                return Err(VerifyError {
                    address,
                    offset_bytes: address - start,
                    size_bytes: bytes,
                    problem,
                });
            }
            // SAFETY: as above.
            let is_filler = unsafe { model.is_filler(object) };
            if is_filler {
                summary.fillers += 1;
                summary.filler_bytes += bytes;
            } else {
                summary.objects += 1;
                summary.object_bytes += bytes;
            }
            visit(HeapObject {
                address: object,
                bytes,
                is_filler,
            });
            address += bytes;
        }
        Ok(summary)
    }

    /// Checks that the allocation range parses as objects and fillers up to its top.
    pub fn verify(&self) -> Result<WalkSummary, VerifyError> {
        self.walk(|_| {})
    }

    /// Sets the range the mutators allocate from after this collection, e.g. the free space
    /// above the survivors. It must lie inside [`Heap::reserved_range`] and be aligned.
    /// Errors: as above, and after [`alloc_for`](Collection::alloc_for), which allocated in
    /// the range already installed.
    pub fn set_allocation_range(&mut self, range: Range<usize>) -> Result<(), CollectionError> {
        let reserved = self.heap.reserved_range();
        let alignment = self.heap.config().alignment_bytes();
        let problem = if self.range_installed {
            Some("the next range is fixed: alloc_for allocated in it already")
        } else if range.start > range.end {
            Some("start above end")
        } else if range.start < reserved.start || range.end > reserved.end {
            Some("not inside the heap's reservation")
        } else if !range.start.is_multiple_of(alignment) || !range.end.is_multiple_of(alignment) {
            Some("not aligned to the heap's alignment")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(CollectionError::BadRange {
                start: range.start,
                end: range.end,
                problem,
            });
        }
        self.next_range = Some((range.start, range.end));
        Ok(())
    }

    /// Everything allocated is dead: allocate from the bottom of the reservation again.
    ///
    /// # Panics
    /// After [`alloc_for`](Collection::alloc_for), which allocated in the next range already:
    /// resetting would hand that memory out again.
    pub fn reset(&mut self) {
        assert!(
            !self.range_installed,
            "Collection::reset after Collection::alloc_for: the objects allocated for mutators \
             would be handed out again (set the range first, then allocate)"
        );
        let reserved = self.heap.reserved_range();
        self.next_range = Some((reserved.start, reserved.end));
    }

    /// Allocates `bytes` for the mutator numbered `mutator_id` ([`Mutator::id`]), which this
    /// collection holds: the thread whose allocation failed and asked for the collection. The
    /// object is carved from the next allocation range before any mutator resumes, so no
    /// other thread can take the room the collection made first, and the thread is not
    /// starved. An [`AllocError::OutOfMemory`] here means the collection left no room for the
    /// object: the runtime is out of memory. The object is zero (unless
    /// [`ZeroMemory::Never`](crate::ZeroMemory)), counted as the mutator's allocation outside
    /// LABs. Whatever the runtime must do with it before a collection could see it (write
    /// its header, root it) it does before this collection ends: another thread's collection
    /// may claim the requester's mutator as soon as this one ends, before its thread runs.
    ///
    /// Call it last, after setting the next range ([`set_allocation_range`] or [`reset`]),
    /// which it installs: the range is fixed from then on. [`walk`](Collection::walk) still
    /// covers the old range, which the object may now overlap.
    ///
    /// ```
    /// use hab::{AllocError, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("64KiB").build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let failed = loop {
    ///     match mutator.alloc(1024) {
    ///         // SAFETY: 1 KiB of fresh memory owned by this thread.
    ///         Ok(object) => unsafe { HeaderWordModel::write_header(object, 1024) },
    ///         Err(AllocError::OutOfMemory { bytes }) => break bytes,
    ///         Err(other) => return Err(other.into()),
    ///     }
    /// };
    /// let id = mutator.id();
    /// let object = mutator.collect(|mut collection| {
    ///     collection.reset(); // everything died
    ///     let object = collection.alloc_for(id, failed)?;
    ///     // SAFETY: 1 KiB of fresh memory allocated for this thread, parseable before the
    ///     // collection ends.
    ///     unsafe { HeaderWordModel::write_header(object, failed) };
    ///     Ok::<_, AllocError>(object)
    /// });
    /// let object = object.expect("no other thread collected")?;
    /// assert_eq!(object.as_ptr() as usize, heap.reserved_range().start);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// Errors: a bad size (as [`Mutator::alloc`]), [`AllocError::NotHeld`] when no mutator of
    /// that id is held by this collection, or no room.
    ///
    /// [`Mutator::id`]: crate::Mutator::id
    /// [`Mutator::alloc`]: crate::Mutator::alloc
    /// [`set_allocation_range`]: Collection::set_allocation_range
    /// [`reset`]: Collection::reset
    pub fn alloc_for(&mut self, mutator_id: u64, bytes: usize) -> Result<NonNull<u8>, AllocError> {
        let config = self.heap.config();
        AllocSize::check(bytes, config.alignment_bytes(), config.capacity_bytes())?;
        let registry = self.heap.registry();
        let cell = registry
            .mutators
            .iter()
            .find(|cell| cell.id == mutator_id && cell.state.load(Ordering::Acquire) == HELD)
            .ok_or(AllocError::NotHeld { mutator_id })?;
        let global = self.heap.global();
        if let (Some((start, end)), false) = (self.next_range, self.range_installed) {
            global.reset_range(start, end);
        }
        self.range_installed = true;
        let address = global
            .carve(bytes)
            .ok_or(AllocError::OutOfMemory { bytes })?;
        global.zero_reused(address, bytes);
        cell.counters.slow_allocs.add(1);
        cell.counters.slow_alloc_bytes.add(bytes as u64);
        // SAFETY: a carved heap address is not null.
        Ok(unsafe { NonNull::new_unchecked(address_to_pointer(address)) })
    }

    /// Ends the collection (as dropping it does).
    pub fn finish(self) {}
}

impl std::fmt::Debug for Collection<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("allocation_range", &self.allocation_range())
            .field("used_bytes", &self.used_bytes)
            .field("next_range", &self.next_range)
            .finish_non_exhaustive()
    }
}

impl Drop for Collection<'_> {
    /// The end of the cycle (`cycle_end.rs`), whether the collector called
    /// [`finish`](Collection::finish) or the collection unwound.
    fn drop(&mut self) {
        let next_range = self.next_range.unwrap_or(self.range);
        cycle_end::end_cycle(
            self.heap,
            cycle_end::Ranges {
                old: self.range,
                used_bytes: self.used_bytes,
                next: next_range,
                install_next: self.next_range.is_some() && !self.range_installed,
            },
        );
    }
}
