//! Object sizes checked against a heap, and why an allocation failed.

use std::fmt;

use crate::memory::size::ByteSize;

/// The largest alignment [`Mutator::alloc_aligned`](crate::Mutator::alloc_aligned) gives an
/// object: a page.
pub const MAX_OBJECT_ALIGNMENT_BYTES: usize = 4096;

/// Why an allocation failed. Nothing was handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// A request for 0 bytes: every object has at least a header.
    ZeroSize,
    /// The size is not a multiple of the heap's object alignment.
    Misaligned {
        /// The size asked for.
        bytes: usize,
        /// The heap's alignment.
        alignment: usize,
    },
    /// The object is larger than the whole heap.
    TooLarge {
        /// The size asked for.
        bytes: usize,
        /// The heap's capacity.
        capacity: usize,
    },
    /// An alignment that is not a power of two or is larger than a page
    /// ([`MAX_OBJECT_ALIGNMENT_BYTES`](crate::MAX_OBJECT_ALIGNMENT_BYTES)).
    BadAlignment {
        /// The alignment asked for.
        alignment: usize,
    },
    /// The allocation range is full: the runtime should collect.
    OutOfMemory {
        /// The size asked for.
        bytes: usize,
    },
    /// [`Collection::alloc_for`](crate::Collection::alloc_for) named a mutator the collection
    /// does not hold (not one of the heap's, or already detached).
    NotHeld {
        /// The mutator id given.
        mutator_id: u64,
    },
}

impl fmt::Display for AllocError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AllocError::ZeroSize => f.write_str("cannot allocate an object of 0 bytes"),
            AllocError::Misaligned { bytes, alignment } => write!(
                f,
                "object size {bytes} is not a multiple of the heap's alignment {alignment}"
            ),
            AllocError::TooLarge { bytes, capacity } => write!(
                f,
                "object size {bytes} is larger than the heap ({})",
                ByteSize::new(capacity)
            ),
            AllocError::BadAlignment { alignment } => write!(
                f,
                "alignment {alignment} is not a power of two from 1 to {MAX_OBJECT_ALIGNMENT_BYTES}"
            ),
            AllocError::NotHeld { mutator_id } => write!(
                f,
                "mutator {mutator_id} is not held by this collection (not one of the heap's \
                 mutators, or detached)"
            ),
            AllocError::OutOfMemory { bytes } => {
                write!(
                    f,
                    "heap exhausted: no room for {bytes} bytes until a collection"
                )
            }
        }
    }
}

impl std::error::Error for AllocError {}

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
