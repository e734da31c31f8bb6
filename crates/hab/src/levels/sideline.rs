//! Sidelined chunks: pieces of memory a refill took from above but could not install (another
//! thread on the CPU installed a buffer first, or the thread moved), kept for later refills
//! instead of being wasted (Garthwaite et al., §5.1).
//!
//! A fixed number of slots, each an atomic [`PackedWord`] holding a chunk (its offset and
//! length in words) or 0. Putting a chunk CASes an empty slot to it; taking one CASes a slot
//! holding a large enough chunk back to 0. Lock-free, and without ABA trouble: a slot's value
//! names its chunk, and whoever wins the CAS owns it. When every slot is full the chunk is not
//! kept. Cost: a scan of the slots, only on refills.

use crate::levels::chunk::Chunk;
use crate::memory::packed::{PackedWord, MAX_UPPER};
use crate::memory::words;
use crate::platform::sync::{AtomicU64, Ordering};

/// CpuSlots of one level.
pub(crate) const SLOTS: usize = 64;

/// A level's sidelined chunks.
pub(crate) struct Sideline {
    slots: Box<[AtomicU64]>,
}

impl Sideline {
    pub(crate) fn new() -> Self {
        Sideline::with_slots(SLOTS)
    }

    fn with_slots(slots: usize) -> Self {
        Sideline {
            slots: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Keeps the chunk `[start, end)` (word-aligned addresses above `base`, `start < end`).
    /// `false` when it is not kept (every slot is taken, or it is longer than a slot can
    /// say): the caller still owns it.
    pub(crate) fn put(&self, base: usize, start: usize, end: usize) -> bool {
        debug_assert!(start < end);
        let len_words = words::words(end - start);
        if len_words > MAX_UPPER {
            return false;
        }
        let value = PackedWord::new(words::offset(base, start), len_words).raw();
        // A kept chunk is never the empty slot's 0: it has at least a word.
        debug_assert!(value != 0 && start >= base);
        self.slots.iter().any(|slot| {
            slot.load(Ordering::Relaxed) == 0
                && slot
                    .compare_exchange(0, value, Ordering::Release, Ordering::Relaxed)
                    .is_ok()
        })
    }

    /// Takes a chunk of at least `min_bytes` (at least one word), which the caller then owns.
    pub(crate) fn take(&self, base: usize, min_bytes: usize) -> Option<Chunk> {
        let min_words = words::words(min_bytes).max(1);
        for slot in self.slots.iter() {
            let value = slot.load(Ordering::Relaxed);
            if PackedWord::from_raw(value).upper() >= min_words
                && slot
                    .compare_exchange(value, 0, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
            {
                let chunk = chunk(base, value);
                debug_assert!(chunk.len >= min_bytes && chunk.start >= base);
                return Some(chunk);
            }
        }
        None
    }

    /// Empties every slot at a collection; calls `each` with every chunk it held.
    pub(crate) fn drain(&self, base: usize, mut each: impl FnMut(Chunk)) {
        for slot in self.slots.iter() {
            let value = slot.swap(0, Ordering::Acquire);
            if value != 0 {
                each(chunk(base, value));
            }
        }
    }
}

/// The chunk a non-empty slot's `value` names.
fn chunk(base: usize, value: u64) -> Chunk {
    let word = PackedWord::from_raw(value);
    Chunk {
        start: words::address(base, word.offset_words()),
        len: words::bytes(word.upper()),
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn keeps_and_gives_back_chunks() {
        let (sideline, base) = (Sideline::new(), 0x1000);
        let at = |offset: usize, len: usize| Chunk {
            start: base + offset,
            len,
        };
        assert!(sideline.put(base, base + 800, base + 864));
        assert!(sideline.put(base, base + 1600, base + 1856));
        assert_eq!(
            sideline.take(base, 128),
            Some(at(1600, 256)),
            "the first large enough"
        );
        assert_eq!(sideline.take(base, 128), None);
        assert_eq!(sideline.take(base, 0), Some(at(800, 64)));
        assert_eq!(sideline.take(base, 8), None);
        for i in 0..SLOTS {
            assert!(sideline.put(base, base + i * 80, base + i * 80 + 40));
        }
        assert!(
            !sideline.put(base, base + 99_999 * 8, base + 100_000 * 8),
            "full"
        );
        let mut drained = 0;
        sideline.drain(base, |chunk| drained += chunk.len);
        assert_eq!(drained, 40 * SLOTS);
        assert_eq!(sideline.take(base, 8), None);
        let too_long = words::bytes(MAX_UPPER + 1);
        assert!(
            !sideline.put(base, base, base + too_long),
            "longer than a slot can say"
        );
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
            let sideline = Arc::new(Sideline::with_slots(2));
            let threads: Vec<_> = (0..2usize)
                .map(|t| {
                    let sideline = sideline.clone();
                    ::loom::thread::spawn(move || {
                        let mut kept = Vec::new();
                        if !sideline.put(0, t * 80, t * 80 + 32) {
                            kept.push(t * 80);
                        }
                        if let Some(chunk) = sideline.take(0, 8) {
                            kept.push(chunk.start);
                        }
                        kept
                    })
                })
                .collect();
            let mut owned: Vec<usize> = threads
                .into_iter()
                .flat_map(|t| t.join().unwrap())
                .collect();
            sideline.drain(0, |chunk| owned.push(chunk.start));
            owned.sort_unstable();
            assert_eq!(owned, [0, 80]);
        });
    }
}
