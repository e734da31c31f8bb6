//! Words: the unit the middle levels, the sideline and the restartable sections count in.
//! Their packed states hold offsets in words from the heap's base, so that a 64-bit word can
//! carry a top and a generation (or an end) for heaps of up to 2^42 words (32 TiB).

/// The size of a heap word: the smallest alignment, the unit of HotSpot's TLAB arithmetic and
/// of the offsets in packed words.
pub const WORD_BYTES: usize = 8;

/// The whole words in `bytes`.
#[inline]
pub(crate) fn words(bytes: usize) -> u64 {
    (bytes / WORD_BYTES) as u64
}

/// The bytes of `words` words.
#[inline]
pub(crate) fn bytes(words: u64) -> usize {
    words as usize * WORD_BYTES
}

/// The address `offset_words` words above `base`.
#[inline]
pub(crate) fn address(base: usize, offset_words: u64) -> usize {
    base + bytes(offset_words)
}

/// The offset of `address` from `base`, in words.
#[inline]
pub(crate) fn offset(base: usize, address: usize) -> u64 {
    words(address - base)
}
