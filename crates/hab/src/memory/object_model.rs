//! What Hab needs to know of the runtime's objects: how to write a filler (dead) object over a
//! gap, and how big the object at an address is, so that the heap stays walkable after LABs
//! are retired.

use std::ptr::NonNull;

/// The embedding runtime's object layout, as far as Hab needs it.
///
/// Hab calls these only at retire time and during heap walks, never on the allocation fast
/// path. Every address passed in is aligned to the heap's alignment (at least 8 bytes) and lies
/// inside the heap's reservation.
///
/// # Safety
///
/// Implementations promise that [`object_size`](ObjectModel::object_size) of a filler written
/// by [`write_filler`](ObjectModel::write_filler) over `bytes` returns `bytes`, and that
/// [`is_filler`](ObjectModel::is_filler) then returns `true`: the heap walk relies on this to
/// step over retired LAB tails.
pub unsafe trait ObjectModel: Send + Sync + 'static {
    /// The smallest gap a filler can cover (a bare header). Gaps are always a multiple of
    /// the heap's alignment; when this is larger than the alignment, every TLAB keeps this much
    /// in reserve below its hard end so its tail can always be filled.
    fn min_filler_bytes(&self) -> usize {
        8
    }

    /// Writes a filler object covering exactly `bytes` bytes at `address`.
    ///
    /// # Safety
    /// `address` is aligned, `bytes >= min_filler_bytes()`, and the caller owns the
    /// `bytes` bytes at `address` exclusively.
    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize);

    /// The size in bytes of the object (or filler) starting at `address`. A value that is not
    /// a positive multiple of the alignment is reported by the heap walk as corruption.
    ///
    /// # Safety
    /// `address` is the start of an allocation (or filler) in a heap whose LABs are retired
    /// and whose mutators are stopped, so its header can be read.
    unsafe fn object_size(&self, address: NonNull<u8>) -> usize;

    /// Whether the object at `address` is a filler written by `write_filler`.
    ///
    /// # Safety
    /// As for [`object_size`](ObjectModel::object_size).
    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool;
}

/// A minimal object model: every object starts with one header word holding its size in
/// bytes; bit 0 marks fillers (sizes are multiples of 8, so the low bits are free).
///
/// Used by the `hab` command and the tests; a runtime with its own layout implements
/// [`ObjectModel`] instead.
///
/// ```
/// use hab::{HeaderWordModel, ObjectModel};
/// let mut words = [0u64; 4];
/// let object = std::ptr::NonNull::from(&mut words).cast::<u8>();
/// // SAFETY: `object` points at 32 writable, 8-byte-aligned bytes.
/// unsafe {
///     HeaderWordModel::write_header(object, 32);
///     assert_eq!(HeaderWordModel.object_size(object), 32);
///     assert!(!HeaderWordModel.is_filler(object));
///     HeaderWordModel.write_filler(object, 16);
///     assert!(HeaderWordModel.is_filler(object));
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct HeaderWordModel;

const FILLER_BIT: u64 = 1;

impl HeaderWordModel {
    /// Writes an object header of `bytes` at `address`.
    ///
    /// # Safety
    /// `address` is 8-byte aligned and valid for writing 8 bytes.
    #[inline(always)]
    pub unsafe fn write_header(address: NonNull<u8>, bytes: usize) {
        // SAFETY: the caller guarantees an aligned, writable word.
        unsafe { address.cast::<u64>().write(bytes as u64) };
    }
}

// SAFETY: a filler's header holds its size with the filler bit set; `object_size` masks the
// bit off and `is_filler` tests it.
unsafe impl ObjectModel for HeaderWordModel {
    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        // SAFETY: the caller owns at least one aligned word at `address`.
        unsafe { address.cast::<u64>().write(bytes as u64 | FILLER_BIT) };
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: the caller guarantees a readable header at `address`.
        let header = unsafe { address.cast::<u64>().read() };
        (header & !FILLER_BIT) as usize
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: the caller guarantees a readable header at `address`.
        unsafe { address.cast::<u64>().read() & FILLER_BIT != 0 }
    }
}
