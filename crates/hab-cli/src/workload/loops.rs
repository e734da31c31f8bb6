//! The allocation loops the threads run, one per workload, written so that the fast path's
//! state stays in registers.

use std::ptr::NonNull;
use std::sync::Arc;

use hab::{AllocError, HeaderWordModel, Heap, Mutator};

/// What each workload loop does beside allocating: compile-time choices, so that each
/// combination is a loop of its own with nothing to test per object.
#[derive(Clone, Copy)]
pub(super) struct LoopOptions {
    /// Allocate through the `_prefetching` fast paths.
    pub(super) prefetch: bool,
    /// Zero each object's body after its header (memory is not zeroed at refill).
    pub(super) initialise_body: bool,
}

/// Calls `$loop::<PREFETCH, INITIALISE>(mutator, args…)` with the constants the options
/// select. (The mutator's one allocation call reaches the fast path of its mode.)
macro_rules! per_loop {
    ($mutator:expr, $options:expr, $size:expr, $loop:ident($($arg:expr),*)) => {
        match ($options.prefetch, Body::of($options.initialise_body, $size)) {
            (false, Body::HeaderOnly) => $loop::<false, HEADER_ONLY>($mutator, $($arg),*),
            (false, Body::OneWord) => $loop::<false, ONE_WORD_BODY>($mutator, $($arg),*),
            (false, Body::Zeroed) => $loop::<false, ZEROED_BODY>($mutator, $($arg),*),
            (true, Body::HeaderOnly) => $loop::<true, HEADER_ONLY>($mutator, $($arg),*),
            (true, Body::OneWord) => $loop::<true, ONE_WORD_BODY>($mutator, $($arg),*),
            (true, Body::Zeroed) => $loop::<true, ZEROED_BODY>($mutator, $($arg),*),
        }
    };
}

/// What a loop writes of an object past its header, decided once per loop (not per object, so
/// that no loop depends on the compiler hoisting the test): nothing (memory is zeroed), one
/// word (a 16-byte object), or a zeroed body (`write_bytes`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Body {
    HeaderOnly,
    OneWord,
    Zeroed,
}

pub(super) const HEADER_ONLY: u8 = 0;
pub(super) const ONE_WORD_BODY: u8 = 1;
pub(super) const ZEROED_BODY: u8 = 2;

impl Body {
    pub(super) fn of(initialise_body: bool, size: hab::AllocSize) -> Body {
        match (initialise_body, size.bytes() / hab::WORD_BYTES) {
            (false, _) => Body::HeaderOnly,
            (true, 2) => Body::OneWord,
            (true, _) => Body::Zeroed,
        }
    }
}

/// How `alloc-array` stores an address in 4 bytes: its offset from the reservation's start in
/// words, as HotSpot stores compressed references (heaps up to 32 GiB).
#[derive(Clone, Copy)]
pub(super) struct References {
    base: usize,
}

impl References {
    pub(super) fn of(heap: &Heap) -> Result<Self, String> {
        let range = heap.reserved_range();
        if (range.end - range.start) / hab::WORD_BYTES > u32::MAX as usize {
            return Err(
                "alloc-array keeps 4-byte compressed references: the heap can be at most 32GiB"
                    .into(),
            );
        }
        Ok(References { base: range.start })
    }

    #[inline(always)]
    fn compress(self, object: NonNull<u8>) -> u32 {
        ((object.as_ptr() as usize - self.base) / hab::WORD_BYTES) as u32
    }
}

/// Shipilëv's loop: allocate, write the header, keep the address. Out of line, as
/// `alloc_object`.
#[inline(never)]
pub(super) fn alloc_array(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    references: References,
    array: &mut [u32],
) -> Result<(), String> {
    let result = per_loop!(mutator, options, size, fill_array(size, references, array));
    result.map_err(|error| match error {
        AllocError::OutOfMemory { .. } => format!("{error}: give alloc-array a larger --heap"),
        _ => error.to_string(),
    })
}

/// One allocation, with or without the prefetch.
#[inline(always)]
pub(super) fn allocate<const PREFETCH: bool>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
) -> Result<NonNull<u8>, AllocError> {
    if PREFETCH {
        mutator.alloc_sized_prefetching(size)
    } else {
        mutator.alloc_sized(size)
    }
}

/// Makes a fresh object parseable: its header, and (`BODY`, see [`Body`]) zeroes over the rest
/// when memory is not zeroed at refill (the runtime initialises what it allocates): one store
/// for a one-word body, as a compiler emits for a known size; `write_bytes` (a `memset` call)
/// for larger ones.
#[inline(always)]
pub(super) fn initialise<const BODY: u8>(object: NonNull<u8>, size: hab::AllocSize) {
    // SAFETY: `object` is `size` fresh bytes owned by this thread, word-aligned.
    unsafe { HeaderWordModel::write_header(object, size.bytes()) };
    let body = object.as_ptr().wrapping_add(hab::WORD_BYTES).cast::<u64>();
    match BODY {
        // SAFETY: the loop chose this for 16-byte objects: the word after the header is theirs.
        ONE_WORD_BODY => unsafe { body.write(0) },
        ZEROED_BODY => {
            let body_words = size.bytes() / hab::WORD_BYTES - 1;
            // SAFETY: the `body_words` words after the header are the rest of the object.
            unsafe { body.write_bytes(0, body_words) };
        }
        _ => {}
    }
}

/// Out of line, so that nothing in the function holds on to the mutator's address: the loop
/// then keeps the mutator's fields in registers, as a JIT's compiled loop would.
#[inline(never)]
pub(super) fn fill_array<const PREFETCH: bool, const BODY: u8>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    references: References,
    array: &mut [u32],
) -> Result<(), AllocError> {
    for slot in array.iter_mut() {
        let object = allocate::<PREFETCH>(mutator, size)?;
        initialise::<BODY>(object, size);
        *slot = references.compress(object);
    }
    Ok(())
}

/// Jaffer's loop: allocate, write the header, drop; collect when the heap is full.
// Out of line, so that the loop is compiled the same whatever the worker around it does.
#[inline(never)]
pub(super) fn alloc_object(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    options: LoopOptions,
    poll: bool,
    objects: usize,
) -> Result<(), String> {
    let mut done = 0;
    while done < objects {
        let left = objects - done;
        let (allocated, result) = if poll {
            drop_objects_polling(mutator, size, left)
        } else {
            per_loop!(mutator, options, size, drop_objects(size, left))
        };
        done += allocated;
        match result {
            Ok(()) => {}
            Err(AllocError::OutOfMemory { .. }) => collect_when_full(mutator),
            Err(error) => return Err(error.to_string()),
        }
    }
    Ok(())
}

/// Allocates up to `objects` objects, initialising each; returns how many and the error that
/// stopped it early. Out of line, for the reason `fill_array` is.
#[inline(never)]
pub(super) fn drop_objects<const PREFETCH: bool, const BODY: u8>(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    objects: usize,
) -> (usize, Result<(), AllocError>) {
    for done in 0..objects {
        match allocate::<PREFETCH>(mutator, size) {
            Ok(object) => initialise::<BODY>(object, size),
            Err(error) => return (done, Err(error)),
        }
    }
    (objects, Ok(()))
}

/// `drop_objects` with a safepoint poll after each object: what the poll costs.
#[inline(never)]
pub(super) fn drop_objects_polling(
    mutator: &mut Mutator,
    size: hab::AllocSize,
    objects: usize,
) -> (usize, Result<(), AllocError>) {
    for done in 0..objects {
        match mutator.alloc_sized(size) {
            Ok(object) => initialise::<HEADER_ONLY>(object, size),
            Err(error) => return (done, Err(error)),
        }
        mutator.poll();
    }
    (objects, Ok(()))
}

/// Parks, resets the heap unless another thread just did, and unparks.
#[cold]
pub(super) fn collect_when_full(mutator: &mut Mutator) {
    let heap: Arc<Heap> = mutator.heap().clone();
    let seen = heap.collections();
    mutator.safe_region(|| {
        if let Some(mut collection) = heap.collection_if_none_since(seen) {
            collection.reset();
        }
    });
}

#[cfg(test)]
mod tests {
    use std::ptr::NonNull;

    use hab::{HeaderWordModel, Heap, HeapConfig};

    use super::*;

    /// A compressed reference is the object's word offset from the reservation's start, and
    /// the last word of the heap still fits.
    #[test]
    fn compressed_references_are_word_offsets() {
        let config = HeapConfig::builder().capacity(1 << 20).build().unwrap();
        let heap = Heap::new(config, HeaderWordModel).unwrap();
        let references = References::of(&heap).unwrap();
        let range = heap.reserved_range();
        let mut mutator = heap.attach();
        let size = mutator.checked_size(16).unwrap();
        for _ in 0..100 {
            let object = mutator.alloc_sized(size).unwrap();
            initialise::<ONE_WORD_BODY>(object, size);
            let reference = references.compress(object) as usize;
            assert_eq!(
                range.start + reference * hab::WORD_BYTES,
                object.as_ptr() as usize
            );
        }
        let last = NonNull::new((range.end - hab::WORD_BYTES) as *mut u8).unwrap();
        assert_eq!(
            references.compress(last) as usize,
            (range.end - range.start) / hab::WORD_BYTES - 1
        );
    }

    /// With `--zero never`, a loop initialises the whole object: header, then zeroes over
    /// whatever the memory held.
    #[test]
    fn initialise_zeroes_the_body_after_the_header() {
        for bytes in [16usize, 48] {
            let mut memory = vec![u64::MAX; bytes / 8];
            let object = NonNull::new(memory.as_mut_ptr().cast::<u8>()).unwrap();
            let config = HeapConfig::builder().capacity(1 << 20).build().unwrap();
            let heap = Heap::new(config, HeaderWordModel).unwrap();
            let size = heap.checked_size(bytes).unwrap();
            match Body::of(true, size) {
                Body::OneWord => initialise::<ONE_WORD_BODY>(object, size),
                _ => initialise::<ZEROED_BODY>(object, size),
            }
            assert_eq!(memory[0], bytes as u64);
            assert!(
                memory[1..].iter().all(|&word| word == 0),
                "{bytes}: {memory:?}"
            );
        }
    }
}
