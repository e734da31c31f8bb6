//! Helpers shared by the integration tests: building heaps, writing headers, checking that
//! allocations are disjoint and inside a range, a contract-checking object model and a tiny
//! deterministic random number generator.

#![allow(dead_code)]

use std::ops::Range;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hab::{HeaderWordModel, Heap, HeapConfigBuilder, ObjectModel};

/// Builds a heap with [`HeaderWordModel`], panicking with the configuration on failure.
pub fn heap(builder: HeapConfigBuilder) -> Arc<Heap> {
    let config = builder
        .clone()
        .build()
        .unwrap_or_else(|e| panic!("{builder:?}: {e}"));
    Heap::new(config, HeaderWordModel).expect("heap")
}

/// Writes the [`HeaderWordModel`] header of a freshly allocated object. Only for addresses
/// `Mutator::alloc` or `alloc_sized` just returned to the calling thread for `bytes >= 8`.
pub fn write_header(object: NonNull<u8>, bytes: usize) {
    // SAFETY: every caller passes an address `Mutator::alloc` just returned for `bytes >= 8`
    // bytes, so it is 8-byte aligned, writable and owned by the calling thread.
    unsafe { HeaderWordModel::write_header(object, bytes) };
}

/// Sorts `objects` (address, size) by address and asserts that none overlaps the next one
/// and that all lie inside `range`.
pub fn assert_disjoint_inside(objects: &mut [(usize, usize)], range: Range<usize>) {
    objects.sort_unstable();
    for pair in objects.windows(2) {
        let ((a, a_len), (b, b_len)) = (pair[0], pair[1]);
        assert!(
            a + a_len <= b,
            "objects overlap: {a:#x}+{a_len} and {b:#x}+{b_len}"
        );
    }
    for &(address, bytes) in objects.iter() {
        assert!(
            range.start <= address && address + bytes <= range.end,
            "object {address:#x}+{bytes} outside {:#x}..{:#x}",
            range.start,
            range.end
        );
    }
}

/// An object model with the header layout of [`HeaderWordModel`] and a configurable smallest
/// filler, which counts every call of `write_filler` that breaks the trait's contract (a gap
/// smaller than the smallest filler, or not aligned to `alignment`) instead of trusting it.
#[derive(Clone, Debug)]
pub struct CheckedFillerModel {
    pub min_filler: usize,
    pub alignment: usize,
    pub violations: Arc<AtomicUsize>,
    pub smallest_filler: Arc<AtomicUsize>,
    /// The highest end of a filler as big as the model's smallest one: where a model that
    /// always writes at least `min_filler` bytes would have written up to.
    pub furthest_write: Arc<AtomicUsize>,
}

impl CheckedFillerModel {
    pub fn new(min_filler: usize, alignment: usize) -> Self {
        CheckedFillerModel {
            min_filler,
            alignment,
            violations: Arc::new(AtomicUsize::new(0)),
            smallest_filler: Arc::new(AtomicUsize::new(usize::MAX)),
            furthest_write: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn violations(&self) -> usize {
        self.violations.load(Ordering::SeqCst)
    }
}

// SAFETY: fillers are written exactly as `HeaderWordModel` writes them (size with the filler
// bit), and `object_size` / `is_filler` read them the same way, so a filler over `bytes` reads
// back as `bytes` and as a filler. Gaps too small for a header word are counted and not written.
unsafe impl ObjectModel for CheckedFillerModel {
    fn min_filler_bytes(&self) -> usize {
        self.min_filler
    }

    unsafe fn write_filler(&self, address: NonNull<u8>, bytes: usize) {
        if bytes < self.min_filler || address.as_ptr() as usize % self.alignment != 0 {
            self.violations.fetch_add(1, Ordering::SeqCst);
        }
        self.smallest_filler.fetch_min(bytes, Ordering::SeqCst);
        let end = address.as_ptr() as usize + bytes.max(self.min_filler);
        self.furthest_write.fetch_max(end, Ordering::SeqCst);
        if bytes >= 8 {
            // SAFETY: the caller owns `bytes >= 8` bytes at the 8-byte aligned `address`.
            unsafe { HeaderWordModel.write_filler(address, bytes) };
        }
    }

    unsafe fn object_size(&self, address: NonNull<u8>) -> usize {
        // SAFETY: forwarded contract: `address` starts an object or filler with a header.
        unsafe { HeaderWordModel.object_size(address) }
    }

    unsafe fn is_filler(&self, address: NonNull<u8>) -> bool {
        // SAFETY: as for `object_size`.
        unsafe { HeaderWordModel.is_filler(address) }
    }
}

/// xorshift64*: deterministic, dependency-free randomness for the stress tests.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}
