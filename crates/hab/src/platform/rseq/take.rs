//! Taking a per-CPU buffer from another CPU, at the end of a cycle: what the `cpu` level's
//! buffers still hold when nothing is left above goes to a refill on another CPU instead of
//! being retired by the collection. A slot's own sections write it without an atomic
//! instruction, so the taker needs the kernel: it marks the slot, has every section in flight
//! restarted, and owns the buffer only if no section wrote the slot since
//! ([`CpuSlots::take`](super::cpu_slots::CpuSlots::take)). A loom model of the kernel's side
//! checks the protocol below, and finds the overlap it prevents when the restart is left out.
//!
//! Cost: nothing on any section; a compare-and-swap, a system call and another
//! compare-and-swap per buffer taken.

use crate::memory::packed::PackedWord;

/// The word a slot holds while a thread takes its buffer from another CPU
/// ([`CpuSlots::take`](super::cpu_slots::CpuSlots::take)): nothing left, so every bump is
/// refused (its delta exceeds the word), at an offset of one word, which no section leaves (a
/// bump only raises a top of at least one word) and no refill installs, so it is neither an
/// empty slot (0) nor a buffer. Never installed over, never seen by a collection.
pub(crate) const TAKEN: PackedWord = PackedWord::from_raw(1);

/// The protocol of [`CpuSlots::take`](super::cpu_slots::CpuSlots::take) on one slot's word,
/// which `swap(from, to)` compare-and-swaps, with `restart` as the kernel's restart of every
/// section in flight: `seen` to [`TAKEN`], every section restarted, then [`TAKEN`] to empty if
/// no section wrote the slot since. Apart, so that a model of the kernel's side checks it
/// (`model_check` below).
pub(super) fn take_word(
    swap: impl Fn(PackedWord, PackedWord) -> bool,
    seen: PackedWord,
    restart: impl FnOnce() -> bool,
) -> bool {
    debug_assert!(seen.raw() != 0 && seen != TAKEN);
    if !swap(seen, TAKEN) {
        return false;
    }
    if !restart() {
        // Unknown whether a section read `seen`: put it back (a section that committed
        // since leaves the slot as it made it).
        swap(TAKEN, seen);
        return false;
    }
    swap(TAKEN, PackedWord::from_raw(0))
}

/// `RUSTFLAGS="--cfg loom" cargo test -p hab --release --lib take::model_check`
#[cfg(all(test, loom))]
mod model_check {
    use super::*;
    use ::loom::sync::atomic::AtomicU64;
    use ::loom::sync::{Arc, Mutex};
    use std::sync::atomic::Ordering::SeqCst;

    /// One CPU as its sections see it. Its sections never overlap (the kernel restarts one
    /// that is preempted), so one thread runs them; an interrupt lands between two of a
    /// section's instructions, so before its commit store or after it (`commit`), and restarts
    /// it if it began before (`epoch`).
    struct Cpu {
        slot: AtomicU64,
        epoch: AtomicU64,
        commit: Mutex<()>,
    }

    impl Cpu {
        /// A section: reads the slot and commits `change(word)` unless it is refused
        /// (`None`) or interrupted (then it runs again from the start). Returns what it read
        /// and committed.
        fn section(&self, change: impl Fn(u64) -> Option<u64>) -> Option<(u64, u64)> {
            loop {
                let epoch = self.epoch.load(SeqCst);
                let word = self.slot.load(SeqCst);
                let new = change(word)?;
                let _interrupts_wait = self.commit.lock().unwrap();
                if self.epoch.load(SeqCst) == epoch {
                    // The commit is one plain store; a swap here, which loom orders with the
                    // taker's compare-and-swaps as x86_64 orders a store with a locked
                    // instruction (loom lets a plain store slip before a read-modify-write that
                    // read the value it replaced).
                    self.slot.swap(new, SeqCst);
                    return Some((word, new));
                }
            }
        }

        /// `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ)`: interrupts the CPU, which
        /// restarts a section in flight.
        fn restart(&self) -> bool {
            let _between_instructions = self.commit.lock().unwrap();
            self.epoch.fetch_add(1, SeqCst);
            true
        }
    }

    /// A bump of 2 words as the section makes it (refused when fewer are left, or on
    /// [`TAKEN`] and an empty slot, which have none).
    fn bump(word: u64) -> Option<u64> {
        let word = PackedWord::from_raw(word);
        (word.upper() >= 2)
            .then(|| PackedWord::new(word.offset_words() + 2, word.upper() - 2).raw())
    }

    /// A buffer of 6 words at offset 8; the slot's own thread bumps it twice while another
    /// takes it; every word is then bumped, taken or left in the slot, exactly once.
    fn check(restart_sections: bool) {
        let mut builder = ::loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        builder.check(move || {
            let buffer = PackedWord::new(8, 6);
            let cpu = Arc::new(Cpu {
                slot: AtomicU64::new(buffer.raw()),
                epoch: AtomicU64::new(0),
                commit: Mutex::new(()),
            });
            let owner = {
                let cpu = cpu.clone();
                ::loom::thread::spawn(move || {
                    (0..2)
                        .filter_map(|_| cpu.section(bump))
                        .map(|(before, _)| (PackedWord::from_raw(before).offset_words(), 2))
                        .collect::<Vec<_>>()
                })
            };
            let swap = |from: PackedWord, to: PackedWord| {
                cpu.slot
                    .compare_exchange(from.raw(), to.raw(), SeqCst, SeqCst)
                    .is_ok()
            };
            let seen = PackedWord::from_raw(cpu.slot.load(SeqCst));
            let taken =
                seen.upper() > 0 && take_word(swap, seen, || !restart_sections || cpu.restart());
            let mut pieces = owner.join().unwrap();
            if taken {
                pieces.push((seen.offset_words(), seen.upper()));
            }
            let left = PackedWord::from_raw(cpu.slot.load(SeqCst));
            assert_ne!(left, TAKEN);
            if left.upper() > 0 {
                pieces.push((left.offset_words(), left.upper()));
            }
            pieces.sort_unstable();
            let mut covered = 8;
            for &(offset, words) in &pieces {
                assert_eq!(offset, covered, "a word handed out twice or lost");
                covered += words;
            }
            assert_eq!(covered, 14);
        });
    }

    /// The buffer's words go to the owner's bumps or the taker, never both.
    #[test]
    fn a_taken_buffer_is_never_also_bumped() {
        check(true);
    }

    /// Without the restart of the sections in flight, a section that read the buffer before
    /// the swap commits after the taker took it: the model finds that interleaving.
    #[test]
    #[should_panic(expected = "a word handed out twice or lost")]
    fn without_the_restart_a_bump_can_land_in_a_taken_buffer() {
        check(false);
    }
}
