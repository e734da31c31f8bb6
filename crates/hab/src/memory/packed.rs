//! One 64-bit word holding an offset in words from a heap's base (the low [`OFFSET_BITS`] bits)
//! and a second count (the high bits), so that both change with one store or one
//! compare-and-swap. Two structures use it:
//!
//! | user                                  | offset            | upper                    |
//! |---------------------------------------|-------------------|--------------------------|
//! | a sidelined chunk                     | the chunk's start | its length in words      |
//! | a per-CPU buffer (restartable)        | the buffer's top  | the words left after it  |
//!
//! 42 offset bits cover 2^42 words (32 TiB), and the carry of a bump that fills a buffer up to
//! its end; the upper 22 bits count up to 4 Mi words (32 MiB) per buffer or chunk. Cost: a
//! shift and a mask to read either field. (A middle level's compare-and-swap buffer packs its
//! top and generation the other way round, the top above: see `levels/middle.rs`.)

/// Bits of the offset field.
pub(crate) const OFFSET_BITS: u32 = 42;
/// The largest offset, in words.
pub(crate) const MAX_OFFSET_WORDS: u64 = (1 << OFFSET_BITS) - 1;
/// The largest value of the upper field.
pub(crate) const MAX_UPPER: u64 = (1 << (64 - OFFSET_BITS)) - 1;

/// An offset in words and an upper count, in one word. `PackedWord::from_raw(0)` is an empty
/// buffer at the base (or an empty sideline slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub(crate) struct PackedWord(u64);

impl PackedWord {
    /// `offset_words` (at most [`MAX_OFFSET_WORDS`]) and `upper` (at most [`MAX_UPPER`]).
    #[inline]
    pub(crate) fn new(offset_words: u64, upper: u64) -> PackedWord {
        debug_assert!(offset_words <= MAX_OFFSET_WORDS && upper <= MAX_UPPER);
        PackedWord(upper << OFFSET_BITS | offset_words)
    }

    /// The word as stored.
    #[inline]
    pub(crate) const fn from_raw(raw: u64) -> PackedWord {
        PackedWord(raw)
    }

    /// The word to store.
    #[inline]
    pub(crate) fn raw(self) -> u64 {
        self.0
    }

    /// The offset field, in words from the base.
    #[inline]
    pub(crate) fn offset_words(self) -> u64 {
        self.0 & MAX_OFFSET_WORDS
    }

    /// The upper field.
    #[inline]
    pub(crate) fn upper(self) -> u64 {
        self.0 >> OFFSET_BITS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_at_their_limits() {
        let word = PackedWord::new(12345, 678);
        assert_eq!((word.offset_words(), word.upper()), (12345, 678));
        let max = PackedWord::new(MAX_OFFSET_WORDS, MAX_UPPER);
        assert_eq!(
            (max.offset_words(), max.upper()),
            (MAX_OFFSET_WORDS, MAX_UPPER)
        );
        assert_eq!(max.raw(), u64::MAX);
        assert_eq!(PackedWord::from_raw(word.raw()), word);
    }
}
