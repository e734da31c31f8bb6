//! Relaxed atomic loads folded into the compare that uses them.
//!
//! The TLAB fast path compares the new top with a soft end that other threads may lower at
//! any time, the safepoint poll tests a word other threads set, the slow path's short line
//! tests the size against a word a safepoint request sets (`MutatorCell::takes_full_path`)
//! and compares a chunk's start with where reused memory ends (`GlobalHeap::needs_zeroing`),
//! so each must load atomically; LLVM does not fold an atomic load into a compare (it costs
//! one more instruction and one more register). On x86_64 the compare is written out, with
//! the word read as its memory operand: an aligned 8-byte read, which is a relaxed atomic
//! load on this architecture. Elsewhere it is a relaxed load.

use std::sync::atomic::AtomicUsize;
#[cfg(not(target_arch = "x86_64"))]
use std::sync::atomic::Ordering;

/// Whether `value <= word`, reading `word` as a relaxed atomic load.
#[inline(always)]
pub(crate) fn at_most(value: usize, word: &AtomicUsize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `word` is a live, aligned `AtomicUsize`; the block only reads it (one aligned
        // 8-byte load: atomic on x86_64) and the flags, and jumps to the label when `value` is
        // above it.
        unsafe {
            core::arch::asm!(
                "cmp {value}, qword ptr [{word}]",
                "ja {above}",
                value = in(reg) value,
                word = in(reg) word.as_ptr(),
                above = label { return false },
                options(nostack, readonly)
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        value <= word.load(Ordering::Relaxed)
    }
}

/// Defines `unsafe fn $name<const OFFSET: usize, T>(value: usize, base: &T) -> bool`: an
/// instruction that reads the `AtomicUsize` at `OFFSET` bytes into `base` (a field's
/// `offset_of!`) as its memory operand, then a jump to `{hit}` (true). The field is named by
/// its offset so that the instruction addresses it from `base`, which the caller has in a
/// register anyway. Elsewhere than x86_64, `$fallback(value, word)` on a relaxed load.
macro_rules! field_test {
    ($(#[$attr:meta])* $name:ident, $instruction:literal, $jump:literal, $fallback:expr) => {
        $(#[$attr])*
        ///
        /// # Safety
        /// `OFFSET` is the offset of an `AtomicUsize` field of `T`.
        #[inline(always)]
        pub(crate) unsafe fn $name<const OFFSET: usize, T>(value: usize, base: &T) -> bool {
            #[cfg(target_arch = "x86_64")]
            {
                // SAFETY: `base + OFFSET` is a live, aligned `AtomicUsize` (the caller's
                // contract); the block only reads it (one aligned 8-byte load: atomic on
                // x86_64) and the flags, and jumps to the label when the test holds.
                unsafe {
                    core::arch::asm!(
                        $instruction,
                        $jump,
                        value = in(reg) value,
                        base = in(reg) base as *const T,
                        offset = const OFFSET,
                        hit = label { return true },
                        options(nostack, readonly)
                    );
                }
                false
            }
            #[cfg(not(target_arch = "x86_64"))]
            {
                // SAFETY: forwarded (the caller's contract).
                let word = unsafe { field::<OFFSET, T>(base) };
                let fallback: fn(usize, usize) -> bool = $fallback;
                fallback(value, word.load(Ordering::Relaxed))
            }
        }
    };
}

field_test!(
    /// Whether `value` is below the field.
    below_field,
    "cmp {value}, qword ptr [{base} + {offset}]",
    "jb {hit}",
    |value, word| value < word
);

field_test!(
    /// Whether `value` shares a set bit with the field.
    shares_bits_with_field,
    "test qword ptr [{base} + {offset}], {value}",
    "jnz {hit}",
    |value, word| value & word != 0
);

/// Whether the `AtomicUsize` at `OFFSET` bytes into `base` (a field's `offset_of!`) is not 0:
/// one compare of the field, as its memory operand, with 0 (a load, a test and a branch
/// otherwise). On x86_64 the load is an ordinary aligned load, as a sequentially consistent
/// one is there; elsewhere a sequentially consistent load.
///
/// # Safety
/// `OFFSET` is the offset of an `AtomicUsize` field of `T`.
#[inline(always)]
pub(crate) unsafe fn field_is_nonzero<const OFFSET: usize, T>(base: &T) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `base + OFFSET` is a live, aligned `AtomicUsize` (the caller's contract);
        // the block only reads it (one aligned 8-byte load: atomic on x86_64) and the flags,
        // and jumps to the label when it is not 0.
        unsafe {
            core::arch::asm!(
                "cmp qword ptr [{base} + {offset}], 0",
                "jne {set}",
                base = in(reg) base as *const T,
                offset = const OFFSET,
                set = label { return true },
                options(nostack, readonly)
            );
        }
        false
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: forwarded (the caller's contract).
        let word = unsafe { field::<OFFSET, T>(base) };
        word.load(Ordering::SeqCst) != 0
    }
}

/// The `AtomicUsize` at `OFFSET` bytes into `base`: the field tests' load, where they have no
/// instruction that reads it as a memory operand.
///
/// # Safety
/// `OFFSET` is the offset of an `AtomicUsize` field of `T`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn field<const OFFSET: usize, T>(base: &T) -> &AtomicUsize {
    // SAFETY: `base + OFFSET` is a live, aligned `AtomicUsize` (the caller's contract), borrowed
    // as long as `base`.
    unsafe {
        &*(base as *const T)
            .cast::<u8>()
            .add(OFFSET)
            .cast::<AtomicUsize>()
    }
}

/// Whether `word` is 0, reading it as a relaxed atomic load.
#[inline(always)]
pub(crate) fn is_zero(word: &AtomicUsize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `word` is a live, aligned `AtomicUsize`; the block only reads it (one aligned
        // 8-byte load: atomic on x86_64) and the flags, and jumps to the label when it is not
        // 0.
        unsafe {
            core::arch::asm!(
                "cmp qword ptr [{word}], 0",
                "jne {set}",
                word = in(reg) word.as_ptr(),
                set = label { return false },
                options(nostack, readonly)
            );
        }
        true
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        word.load(Ordering::Relaxed) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    fn below_field_compares_like_a_load() {
        struct Pair {
            _other: usize,
            word: AtomicUsize,
        }
        const WORD: usize = std::mem::offset_of!(Pair, word);
        let pair = Pair {
            _other: 7,
            word: AtomicUsize::new(100),
        };
        // SAFETY (each call): `WORD` is the offset of `Pair::word`, an `AtomicUsize`.
        let below = |value| unsafe { below_field::<WORD, _>(value, &pair) };
        assert!(below(99));
        assert!(!below(100));
        assert!(!below(usize::MAX));
        pair.word.store(0, Ordering::Relaxed);
        assert!(!below(0));
        pair.word.store(usize::MAX, Ordering::Relaxed);
        assert!(below(usize::MAX - 1));
        assert!(!below(usize::MAX));
    }

    #[test]
    fn shares_bits_with_field_tests_like_a_load() {
        struct Pair {
            _other: usize,
            word: AtomicUsize,
        }
        const WORD: usize = std::mem::offset_of!(Pair, word);
        let pair = Pair {
            _other: usize::MAX,
            word: AtomicUsize::new(0b0111),
        };
        // SAFETY (each call): `WORD` is the offset of `Pair::word`, an `AtomicUsize`.
        let shares = |value| unsafe { shares_bits_with_field::<WORD, _>(value, &pair) };
        assert!(shares(1));
        assert!(shares(0b1100));
        assert!(!shares(0b1000));
        assert!(!shares(0));
        pair.word.store(usize::MAX, Ordering::Relaxed);
        assert!(shares(1 << 63));
        assert!(!shares(0));
    }

    #[test]
    fn compares_like_a_load() {
        let word = AtomicUsize::new(100);
        assert!(at_most(99, &word));
        assert!(at_most(100, &word));
        assert!(!at_most(101, &word));
        word.store(0, Ordering::Relaxed);
        assert!(at_most(0, &word));
        assert!(!at_most(1, &word));
        assert!(!at_most(usize::MAX, &word));
        word.store(usize::MAX, Ordering::Relaxed);
        assert!(at_most(usize::MAX, &word));
    }

    #[test]
    fn a_field_tests_for_zero_like_a_load() {
        struct Pair {
            _other: usize,
            word: AtomicUsize,
        }
        const WORD: usize = std::mem::offset_of!(Pair, word);
        let pair = Pair {
            _other: usize::MAX,
            word: AtomicUsize::new(0),
        };
        // SAFETY (each call): `WORD` is the offset of `Pair::word`, an `AtomicUsize`.
        let nonzero = || unsafe { field_is_nonzero::<WORD, _>(&pair) };
        assert!(!nonzero());
        for value in [1, 2, usize::MAX] {
            pair.word.store(value, Ordering::Relaxed);
            assert!(nonzero());
        }
    }

    #[test]
    fn tests_for_zero_like_a_load() {
        let word = AtomicUsize::new(0);
        assert!(is_zero(&word));
        for value in [1, 2, usize::MAX] {
            word.store(value, Ordering::Relaxed);
            assert!(!is_zero(&word));
        }
    }
}
