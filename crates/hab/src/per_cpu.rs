//! The `cpu` middle level over restartable sequences: each CPU's buffer is one word that only
//! sections running on that CPU write, so carving a chunk takes no atomic instruction and is
//! never foreign. A refill takes a chunk from the level above outside any section, then
//! installs it with the per-CPU compare-and-store; when that fails (another thread on the CPU
//! installed one first, or the thread moved), the thread keeps its part of the chunk and
//! retires the rest as waste. A thread without an rseq registration, or whose section keeps
//! aborting, uses the level's compare-and-swap buffers instead (separate memory), counted as
//! a fallback.

use crate::middle::{self, portion, Chunk, MiddleLevel, Surroundings, WORD};
use crate::rseq::{self, Outcome, Packed, Slots};

/// What the rseq path made of a request.
pub(crate) enum Carved {
    Chunk(Chunk),
    /// The heap is exhausted: the levels above had nothing left.
    Exhausted,
    /// Take the compare-and-swap path.
    Fallback,
}

/// Carves a chunk of `desired` bytes (at least `min`) from the buffer of the CPU the thread
/// runs on, refilling it from `levels[index + 1..]` when it has less than `min` left.
pub(crate) fn carve(
    levels: &[MiddleLevel],
    index: usize,
    slots: &Slots,
    min: usize,
    desired: usize,
    env: &mut impl Surroundings,
) -> Carved {
    let Some(area) = rseq::current_area() else {
        return Carved::Fallback;
    };
    let level = &levels[index];
    let base = env.base();
    let (min_words, mut want_words) = ((min / WORD) as u64, (desired / WORD) as u64);
    // A few rounds: another thread on this CPU may take what a refusal showed was left.
    for _ in 0..4 {
        // SAFETY: `area` is the calling thread's registered area.
        let (outcome, aborts) = unsafe { slots.bump(area, want_words) };
        env.rseq_aborts(index, aborts);
        let (cpu, seen) = match outcome {
            Outcome::Done { cpu, before } => {
                env.served_without_moving(index, level.level(), cpu);
                let start = base + before.top_words() as usize * WORD;
                return Carved::Chunk(Chunk {
                    start,
                    len: want_words as usize * WORD,
                });
            }
            Outcome::Refused { cpu, seen } => (cpu, seen),
            Outcome::Moved | Outcome::GaveUp => return Carved::Fallback,
        };
        if seen.left_words() >= min_words {
            want_words = portion(seen.left_words(), want_words, level.min_tail_words());
            continue;
        }
        return refill(levels, index, slots, area, cpu, seen, min, desired, env);
    }
    Carved::Fallback
}

/// Takes a chunk from above and installs it as `cpu`'s buffer, if the buffer still is `seen`.
#[cold]
#[allow(clippy::too_many_arguments)]
fn refill(
    levels: &[MiddleLevel],
    index: usize,
    slots: &Slots,
    area: *mut u8,
    cpu: usize,
    seen: Packed,
    min: usize,
    desired: usize,
    env: &mut impl Surroundings,
) -> Carved {
    let level = &levels[index];
    let Some(chunk) = middle::carve(levels, index + 1, min, level.buffer_bytes().max(min), env)
    else {
        return Carved::Exhausted;
    };
    let base = env.base();
    let take = portion(
        chunk.len as u64,
        desired as u64,
        level.min_tail_words() * WORD as u64,
    ) as usize;
    let start_words = ((chunk.start - base) / WORD) as u64;
    let new = Packed::new(
        start_words + (take / WORD) as u64,
        ((chunk.len - take) / WORD) as u64,
    );
    // SAFETY: `area` is the calling thread's registered area; `cpu` came from a section, so it
    // is below the number of slots.
    let (installed, aborts) = unsafe { slots.install(area, cpu, seen, new) };
    env.rseq_aborts(index, aborts);
    let old_tail = base + seen.top_words() as usize * WORD;
    match installed {
        // The old buffer is unreachable now: its tail is this thread's to retire.
        Outcome::Done { .. } => env.retire_tail(
            index,
            old_tail,
            old_tail + seen.left_words() as usize * WORD,
        ),
        // Not installed: the rest of the chunk is this thread's, and retired as waste.
        _ => env.retire_tail(index, chunk.start + take, chunk.start + chunk.len),
    }
    env.served_without_moving(index, level.level(), cpu);
    Carved::Chunk(Chunk {
        start: chunk.start,
        len: take,
    })
}

/// Empties every CPU's buffer at a collection; calls `tail(start, end)` for each free tail.
pub(crate) fn retire_all(slots: &Slots, base: usize, mut tail: impl FnMut(usize, usize)) {
    for cpu in 0..slots.cpus() {
        let word = slots.load(cpu);
        if word.left_words() > 0 {
            let start = base + word.top_words() as usize * WORD;
            tail(start, start + word.left_words() as usize * WORD);
        }
        slots.store(cpu, Packed(0));
    }
}
