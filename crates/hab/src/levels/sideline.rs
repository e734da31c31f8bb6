//! Sidelined chunks: pieces of memory a refill took from above but could not install (another
//! thread on the CPU installed a buffer first, or the thread moved), kept for later refills
//! instead of being wasted (Garthwaite et al., §5.1).
//!
//! A fixed number of slots, each an atomic word holding a chunk (offset and length in words) or
//! 0. Putting a chunk CASes an empty slot to it; taking one CASes a slot holding a large enough
//! chunk back to 0. Lock-free, and without ABA trouble: a slot's value names its chunk, and
//! whoever wins the CAS owns it. When every slot is full the chunk is not kept. Cost: a scan of
//! the slots, only on refills.

use crate::platform::sync::{AtomicU64, Ordering};

/// Slots of one level.
pub(crate) const SLOTS: usize = 64;
const OFFSET_BITS: u32 = 42;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;
/// The longest chunk a slot holds, in words.
pub(crate) const MAX_CHUNK_WORDS: u64 = (1 << (64 - OFFSET_BITS)) - 1;

/// A level's sidelined chunks.
pub(crate) struct Sideline {
    slots: Box<[AtomicU64]>,
}

impl Sideline {
    pub(crate) fn new() -> Self {
        Sideline {
            slots: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Keeps the chunk `[offset, offset + len)` (in words, `0 < len <= MAX_CHUNK_WORDS`).
    /// `false` if every slot is taken: the caller keeps the chunk.
    pub(crate) fn put(&self, offset_words: u64, len_words: u64) -> bool {
        debug_assert!(len_words > 0 && len_words <= MAX_CHUNK_WORDS && offset_words <= OFFSET_MASK);
        let value = len_words << OFFSET_BITS | offset_words;
        self.slots.iter().any(|slot| {
            slot.load(Ordering::Relaxed) == 0
                && slot
                    .compare_exchange(0, value, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
        })
    }

    /// Takes a chunk of at least `min_words` words: `(offset, len)` in words.
    pub(crate) fn take(&self, min_words: u64) -> Option<(u64, u64)> {
        for slot in self.slots.iter() {
            let value = slot.load(Ordering::Relaxed);
            if value >> OFFSET_BITS >= min_words.max(1)
                && slot
                    .compare_exchange(value, 0, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                return Some((value & OFFSET_MASK, value >> OFFSET_BITS));
            }
        }
        None
    }

    /// Empties every slot at a collection; calls `chunk(offset, len)` (words) for each.
    pub(crate) fn drain(&self, mut chunk: impl FnMut(u64, u64)) {
        for slot in self.slots.iter() {
            let value = slot.swap(0, Ordering::Acquire);
            if value != 0 {
                chunk(value & OFFSET_MASK, value >> OFFSET_BITS);
            }
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn keeps_and_gives_back_chunks() {
        let sideline = Sideline::new();
        assert!(sideline.put(100, 8));
        assert!(sideline.put(200, 32));
        assert_eq!(sideline.take(16), Some((200, 32)), "the first large enough");
        assert_eq!(sideline.take(16), None);
        assert_eq!(sideline.take(1), Some((100, 8)));
        assert_eq!(sideline.take(1), None);
        for i in 0..SLOTS as u64 {
            assert!(sideline.put(i * 10, 5));
        }
        assert!(!sideline.put(9999, 5), "full");
        let mut drained = 0;
        sideline.drain(|_, len| drained += len);
        assert_eq!(drained, 5 * SLOTS as u64);
        assert_eq!(sideline.take(1), None);
    }
}

/// `RUSTFLAGS="--cfg loom" cargo test -p hab --release --lib sideline::model_check`
#[cfg(all(test, loom))]
mod model_check {
    use super::*;
    use ::loom::sync::Arc;

    /// Chunks put and taken concurrently are never lost and never taken twice.
    #[test]
    fn no_chunk_lost_or_taken_twice() {
        let mut builder = ::loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(|| {
            let sideline = Arc::new(Sideline {
                slots: (0..2).map(|_| AtomicU64::new(0)).collect(),
            });
            let threads: Vec<_> = (0..2u64)
                .map(|t| {
                    let sideline = sideline.clone();
                    ::loom::thread::spawn(move || {
                        let mut kept = Vec::new();
                        if !sideline.put(t * 10, 4) {
                            kept.push(t * 10);
                        }
                        if let Some((offset, _)) = sideline.take(1) {
                            kept.push(offset);
                        }
                        kept
                    })
                })
                .collect();
            let mut owned: Vec<u64> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            sideline.drain(|offset, _| owned.push(offset));
            owned.sort_unstable();
            assert_eq!(owned, [0, 10]);
        });
    }
}
