//! The `cpu` middle level over restartable sequences: each CPU's buffer is one word that only
//! sections running on that CPU write, so carving a chunk takes no atomic instruction and is
//! never foreign. A refill takes a chunk from the level above outside any section, then
//! installs it with the per-CPU compare-and-store; when that fails (another thread on the CPU
//! installed one first, or the thread moved), the thread keeps its part of the chunk and
//! sidelines the rest, which later refills take before going up. A thread without an rseq
//! registration, or whose section keeps aborting, uses the level's compare-and-swap buffers instead (separate memory), counted as
//! a fallback.
//!
//! The bump takes exactly what is asked and cannot look at the tail it leaves. Where the
//! runtime's smallest filler is one word, any tail can hold one. Where it is larger (HotSpot's
//! is two words), each installed buffer keeps a **reserve** of that many words past the end
//! its slot shows: every tail is then at least the reserve. An installed slot never holds the
//! raw word 0 (its offset is past the chunk's first TLAB), so 0 marks an empty slot.

use crate::levels::chunk::{
    buffer_refill_bytes, check_buffer, portion, portion_bytes, retire_tail, Above, Chunk,
    LevelEvent, LevelShape, RefillThread,
};
use crate::levels::sideline::Sideline;
use crate::levels::stats::LevelCounters;
use crate::memory::space::Space;
use crate::memory::words;
use crate::platform::rseq::cpu_slots::CpuSlots;
use crate::platform::rseq::take::TAKEN;
use crate::platform::rseq::{self, HomeBump, Outcome, PackedWord};

/// A `cpu` level's restartable buffers: a slot per CPU, and the chunks refills could not
/// install.
pub(crate) struct CpuBuffers {
    pub(crate) slots: CpuSlots,
    sideline: Sideline,
    /// Words each installed buffer keeps past the end its slot shows (0 or the smallest tail).
    reserve_words: u64,
}

impl CpuBuffers {
    /// Buffers for `cpus` CPUs whose tails are never shorter than `min_tail_words`.
    pub(crate) fn new(cpus: usize, min_tail_words: u64) -> Self {
        CpuBuffers {
            slots: CpuSlots::new(cpus, rseq::slot_index()),
            sideline: Sideline::new(),
            reserve_words: if min_tail_words > 1 {
                min_tail_words
            } else {
                0
            },
        }
    }

    /// The free tail `[start, end)` of the buffer a slot held (`None` for an empty slot, or
    /// one another CPU is taking).
    fn tail_of(&self, base: usize, word: PackedWord) -> Option<(usize, usize)> {
        if word.raw() == 0 || word == TAKEN {
            return None;
        }
        let start = words::address(base, word.offset_words());
        Some((
            start,
            start + words::bytes(word.upper() + self.reserve_words),
        ))
    }
}

/// What the rseq path made of a request.
pub(crate) enum Carved {
    Chunk(Chunk),
    /// The heap is exhausted: the levels above had nothing left.
    Exhausted,
    /// Take the compare-and-swap path.
    Fallback,
}

/// Carves a chunk of `desired` bytes (at least `min`) from the buffer of the CPU the thread
/// runs on, in the `cpu` level of shape `level`; when it has less than `min` left, refills it
/// from `above`.
pub(crate) fn carve<T: RefillThread>(
    level: &LevelShape,
    buffers: &CpuBuffers,
    min: usize,
    desired: usize,
    thread: &T,
    above: &impl Above,
) -> Carved {
    let Some(area) = rseq::current_area() else {
        return Carved::Fallback;
    };
    let slots = &buffers.slots;
    let base = thread.base();
    let (min_words, mut want_words) = (words::words(min), words::words(desired));
    // A few rounds: another thread on this CPU may take what a refusal showed was left.
    for _ in 0..4 {
        // SAFETY: `area` is the calling thread's registered area.
        let (outcome, aborts) = unsafe { slots.bump(area, want_words) };
        if aborts > 0 {
            thread.count(level.level(), LevelEvent::RseqAborts(aborts));
        }
        let (cpu, seen) = match outcome {
            Outcome::Done { before, .. } => {
                check_bump(before, want_words);
                thread.count(level.level(), LevelEvent::Served { foreign: false });
                return Carved::Chunk(Chunk {
                    start: words::address(base, before.offset_words()),
                    len: words::bytes(want_words),
                });
            }
            Outcome::Refused { cpu, seen } => (cpu, seen),
            Outcome::OutOfRange => {
                thread.count(level.level(), LevelEvent::OutOfRangeCpu);
                return Carved::Fallback;
            }
            Outcome::Moved | Outcome::GaveUp => return Carved::Fallback,
        };
        let left_words = seen.upper();
        if left_words >= min_words {
            want_words = portion(left_words, want_words, level.min_tail_words());
            continue;
        }
        return refill(level, buffers, area, cpu, seen, min, desired, thread, above);
    }
    Carved::Fallback
}

/// What a committed bump leaves, checked in builds with debug assertions: the section took
/// `want_words` from a slot that showed `before`, an installed buffer (never the empty word 0)
/// holding at least that much. The reserve past the count keeps the tail fillable.
#[inline(always)]
fn check_bump(before: PackedWord, want_words: u64) {
    debug_assert!(
        before.raw() != 0 && want_words <= before.upper(),
        "a restartable bump of {want_words} words from {before:?}"
    );
}

/// The first round of [`carve`] alone, for the lowest level: `bytes` bumped in the buffer of
/// the CPU the thread runs on; returns the chunk and how many times the section restarted.
/// No chunk for anything but a commit (no rseq area, a refusal, a move, a CPU beyond the
/// array): [`carve`] then starts over and counts what it meets.
#[inline(always)]
pub(crate) fn carve_at_home(
    buffers: &CpuBuffers,
    base: usize,
    bytes: usize,
) -> (Option<Chunk>, u64) {
    let Some(area) = rseq::current_area() else {
        return (None, 0);
    };
    debug_assert_eq!(
        words::bytes(words::words(bytes)),
        bytes,
        "a TLAB is whole words"
    );
    let want_words = words::words(bytes);
    // SAFETY: `area` is the calling thread's registered area.
    let (outcome, aborts) = unsafe { buffers.slots.bump(area, want_words) };
    let chunk = match outcome {
        Outcome::Done { before, .. } => {
            check_bump(before, want_words);
            Some(Chunk {
                start: words::address(base, before.offset_words()),
                len: bytes,
            })
        }
        _ => None,
    };
    (chunk, aborts)
}

/// The short refill's carve where every thread's rseq area sits at `area_offset` from its
/// thread pointer: `bytes` bumped in one try in the buffer of the thread's index
/// ([`CpuSlots::bump_at_home`]), counted in `counters` (the allocation, or the abort). `None`
/// for anything but a commit: the full path's [`carve`] then starts over and counts what it
/// meets. The space's base is read after the section, so that it is not held in a register
/// across it.
///
/// # Safety
/// `area_offset` is `rseq::fixed_area_offset()`.
#[inline(always)]
pub(crate) unsafe fn carve_at_fixed_home(
    buffers: &CpuBuffers,
    area_offset: isize,
    space: &Space,
    counters: &LevelCounters,
    bytes: usize,
) -> Option<Chunk> {
    let want_words = words::words(bytes);
    // SAFETY: forwarded.
    match unsafe { buffers.slots.bump_at_home(area_offset, want_words) } {
        HomeBump::Done { offset_bytes } => {
            counters.count(LevelEvent::Served { foreign: false });
            Some(Chunk {
                start: space.base() + offset_bytes,
                len: bytes,
            })
        }
        HomeBump::Refused => None,
        HomeBump::Aborted => {
            counters.count(LevelEvent::RseqAborts(1));
            None
        }
    }
}

/// Takes a sidelined chunk, or one from above, and installs it as `cpu`'s buffer if the buffer
/// still is `seen`.
#[cold]
#[allow(clippy::too_many_arguments)]
fn refill<T: RefillThread>(
    level: &LevelShape,
    buffers: &CpuBuffers,
    area: *mut u8,
    cpu: usize,
    seen: PackedWord,
    min: usize,
    desired: usize,
    thread: &T,
    above: &impl Above,
) -> Carved {
    let kind = level.level();
    let base = thread.base();
    let sidelined = buffers.sideline.take(base, min);
    let from_sideline = sidelined.is_some();
    if from_sideline {
        thread.count(kind, LevelEvent::SidelineReused);
    }
    // A refill that asks for less than a whole buffer (the end of a cycle) is counted once
    // its chunk is installed.
    let (chunk, short) = match sidelined {
        Some(chunk) => (Some(chunk), false),
        None => {
            let bytes = buffer_refill_bytes(level, above, min, desired);
            (
                above.carve(min, bytes),
                bytes < level.buffer_bytes().max(min),
            )
        }
    };
    // Nothing left above at the end of a cycle: another CPU's buffer tail, a foreign carve.
    let (chunk, foreign) = match chunk {
        Some(chunk) => (chunk, false),
        None => match take_foreign_tail(buffers, base, cpu, min, above) {
            Some(chunk) => (chunk, true),
            None => return Carved::Exhausted,
        },
    };
    if !from_sideline && !foreign {
        thread.count(kind, LevelEvent::Took { bytes: chunk.len });
    }
    let take = portion_bytes(level, chunk.len, desired);
    let (rest, end) = (chunk.start + take, chunk.start + chunk.len);
    // `portion_bytes` left no rest, or one of at least the smallest tail (the reserve).
    check_buffer(
        rest as u64,
        end as u64,
        words::bytes(level.min_tail_words()) as u64,
    );
    let new = if rest == end {
        PackedWord::from_raw(0)
    } else {
        let rest_words = words::words(end - rest);
        debug_assert!(rest_words >= buffers.reserve_words && rest > base);
        PackedWord::new(
            words::offset(base, rest),
            rest_words - buffers.reserve_words,
        )
    };
    // Never over a buffer another CPU is taking, nor a buffer that reads as that marker (a
    // rest of only the reserve, one word above the base): such a rest is kept or retired.
    let (installed, aborts) = if seen == TAKEN || new == TAKEN {
        (Outcome::GaveUp, 0)
    } else {
        // SAFETY: `area` is the calling thread's registered area; `cpu` came from a section,
        // so it is below the number of slots.
        unsafe { buffers.slots.install(area, cpu, seen, new) }
    };
    if aborts > 0 {
        thread.count(kind, LevelEvent::RseqAborts(aborts));
    }
    match installed {
        // The old buffer is unreachable now: its tail is this thread's to retire (an empty
        // slot, as after a collection, has none: the refill is counted all the same).
        Outcome::Done { .. } => {
            let (start, end) = buffers.tail_of(base, seen).unwrap_or((rest, rest));
            // SAFETY: the old buffer is unreachable: its tail is this thread's.
            unsafe { retire_tail(kind, start, end, thread, above) };
            if short {
                thread.count(kind, LevelEvent::ShortRefill);
            }
        }
        // Not installed: the rest of the chunk is this thread's; keep it for a later refill.
        _ if rest == end => {}
        _ if buffers.sideline.put(base, rest, end) => thread.count(kind, LevelEvent::Sidelined),
        // SAFETY: the rest of the chunk was carved by this thread and installed nowhere.
        _ => unsafe { retire_tail(kind, rest, end, thread, above) },
    }
    thread.count(kind, LevelEvent::Served { foreign });
    Carved::Chunk(Chunk {
        start: chunk.start,
        len: take,
    })
}

/// At the end of a cycle (the space above has less than `min` bytes left, and says so), the
/// tail of another CPU's buffer with at least `min` bytes, taken from its slot
/// ([`CpuSlots::take`](crate::platform::rseq::cpu_slots::CpuSlots::take)): what the buffers
/// still hold is used before the collection, not retired as waste by it. The CPUs after `cpu`
/// in turn; `None` when none has such a tail (or the kernel cannot restart sections). Cost:
/// nothing on any other path; a system call per buffer taken, a few per CPU and cycle.
#[cold]
fn take_foreign_tail(
    buffers: &CpuBuffers,
    base: usize,
    cpu: usize,
    min: usize,
    above: &impl Above,
) -> Option<Chunk> {
    if above.free_bytes().is_none_or(|free| free >= min) {
        return None;
    }
    let slots = &buffers.slots;
    (1..slots.cpus()).find_map(|step| {
        let other = (cpu + step) % slots.cpus();
        let seen = slots.load(other);
        let (start, end) = buffers.tail_of(base, seen)?;
        (end - start >= min && slots.take(other, seen)).then_some(Chunk {
            start,
            len: end - start,
        })
    })
}

/// Empties every CPU's buffer and the sidelined chunks at a collection; calls
/// `tail(start, end)` for each free piece.
pub(crate) fn retire_all(buffers: &CpuBuffers, base: usize, mut tail: impl FnMut(usize, usize)) {
    let slots = &buffers.slots;
    for cpu in 0..slots.cpus() {
        // A thread taking a buffer runs (it is not at a safepoint): no marker is left.
        debug_assert_ne!(slots.load(cpu), TAKEN, "a buffer taken across a collection");
        match buffers.tail_of(base, slots.load(cpu)) {
            Some((start, end)) if end > start => tail(start, end),
            _ => {}
        }
        slots.store(cpu, PackedWord::from_raw(0));
    }
    buffers
        .sideline
        .drain(base, |chunk| tail(chunk.start, chunk.start + chunk.len));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::topology::Level;

    use std::cell::{Cell, RefCell};

    /// A thread whose global heap hands out chunks from offset 0 up, and which can make
    /// another thread's install happen while a refill is between its refusal and its install.
    struct Interfering<'a> {
        buffers: &'a CpuBuffers,
        next_words: Cell<u64>,
        interfere: Cell<bool>,
        sidelined: Cell<u32>,
        reused: Cell<u32>,
        tails: RefCell<Vec<(usize, usize)>>,
    }

    impl RefillThread for Interfering<'_> {
        fn base(&self) -> usize {
            0
        }
        fn current_domain(&self, _: Level) -> usize {
            0
        }
        fn domain_now(&self, _: Level) -> usize {
            0
        }
        fn count(&self, _: Level, event: LevelEvent) {
            match event {
                LevelEvent::Sidelined => self.sidelined.set(self.sidelined.get() + 1),
                LevelEvent::SidelineReused => self.reused.set(self.reused.get() + 1),
                _ => {}
            }
        }
    }

    impl Above for Interfering<'_> {
        fn carve(&self, _: usize, desired: usize) -> Option<Chunk> {
            if self.interfere.get() {
                // Another thread on every CPU installs a buffer first.
                for cpu in 0..self.buffers.slots.cpus() {
                    self.buffers.slots.store(cpu, PackedWord::new(1 << 30, 1));
                }
            }
            let start = words::bytes(self.next_words.get());
            self.next_words
                .set(self.next_words.get() + words::words(desired));
            Some(Chunk {
                start,
                len: desired,
            })
        }
        fn free_bytes(&self) -> Option<usize> {
            None
        }
        unsafe fn write_filler(&self, start: usize, bytes: usize) {
            self.tails.borrow_mut().push((start, start + bytes));
        }
    }

    /// A chunk that could not be installed is sidelined, and the next refill takes it before
    /// going up.
    #[test]
    fn an_uninstallable_chunk_is_sidelined_then_reused() {
        if rseq::current_area().is_none() {
            eprintln!("rseq unavailable here: {}", rseq::mechanism());
            return;
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let level = LevelShape::new(Level::Cpu, 1, 4096, 0);
        let buffers = &CpuBuffers::new(cpus, 0);
        let env = Interfering {
            buffers,
            next_words: Cell::new(0),
            interfere: Cell::new(true),
            sidelined: Cell::new(0),
            reused: Cell::new(0),
            tails: RefCell::new(vec![]),
        };
        // The refill takes [0, 4096) from above, keeps 1024 for itself, cannot install the
        // rest: 3072 bytes are sidelined.
        let Carved::Chunk(first) = carve(&level, buffers, 1024, 1024, &env, &env) else {
            panic!("carved nothing")
        };
        assert_eq!(
            first,
            Chunk {
                start: 0,
                len: 1024
            }
        );
        assert_eq!((env.sidelined.get(), env.reused.get()), (1, 0));
        assert!(env.tails.borrow().is_empty(), "nothing wasted");
        // Every CPU's buffer now holds one word: the next request refills from the sideline.
        env.interfere.set(false);
        let Carved::Chunk(second) = carve(&level, buffers, 1024, 1024, &env, &env) else {
            panic!("carved nothing")
        };
        assert_eq!(
            second,
            Chunk {
                start: 1024,
                len: 1024
            }
        );
        assert_eq!(env.reused.get(), 1);
        assert_eq!(
            env.next_words.get(),
            4096 / 8,
            "nothing more taken from above"
        );
    }

    /// Nothing left above, whether the space says so or not: every request is exhausted
    /// there, and `foreign` counts the chunks the level served from another CPU's buffer.
    struct NothingAbove {
        free_bytes: Option<usize>,
        foreign: Cell<u32>,
    }

    impl RefillThread for NothingAbove {
        fn base(&self) -> usize {
            0
        }
        fn current_domain(&self, _: Level) -> usize {
            0
        }
        fn domain_now(&self, _: Level) -> usize {
            0
        }
        fn count(&self, _: Level, event: LevelEvent) {
            if let LevelEvent::Served { foreign: true } = event {
                self.foreign.set(self.foreign.get() + 1);
            }
        }
    }

    impl Above for NothingAbove {
        fn carve(&self, _: usize, _: usize) -> Option<Chunk> {
            None
        }
        fn free_bytes(&self) -> Option<usize> {
            self.free_bytes
        }
        unsafe fn write_filler(&self, _: usize, _: usize) {}
    }

    /// At the end of a cycle (the space above has less than the request left, and says so),
    /// a refill takes the tail of another CPU's buffer, a foreign carve, and installs the rest
    /// in its own slot; where the space does not say, the request is exhausted and the other
    /// buffer stays.
    #[test]
    fn at_the_end_of_a_cycle_a_refill_takes_another_cpus_tail() {
        let Some(area) = rseq::current_area() else {
            eprintln!("rseq unavailable here: {}", rseq::mechanism());
            return;
        };
        let level = LevelShape::new(Level::Cpu, 2, 64 << 10, 0);
        let buffers = &CpuBuffers::new(2, 0);
        let other_buffer = |own: usize| ((own + 1) % 2, PackedWord::new(1 << 20, 4096));
        // A thread whose index changes meanwhile (another CPU, another concurrency id) tries
        // again: the test needs its own slot empty and the other one full, and the install of
        // the rest at home needs the thread still there.
        let mut last = String::new();
        for _ in 0..1000 {
            for slot in 0..2 {
                buffers.slots.store(slot, PackedWord::from_raw(0));
            }
            // SAFETY: `area` is this thread's registered area.
            let (Outcome::Refused { cpu: own, .. }, _) = (unsafe { buffers.slots.bump(area, 1) })
            else {
                continue;
            };
            let (other, buffer) = other_buffer(own);
            buffers.slots.store(other, buffer);
            let nothing = NothingAbove {
                free_bytes: None,
                foreign: Cell::new(0),
            };
            // Without the end of a cycle: exhausted, nothing taken.
            if !matches!(
                carve(&level, buffers, 1024, 1024, &nothing, &nothing),
                Carved::Exhausted
            ) || buffers.slots.load(other) != buffer
            {
                continue;
            }
            let end = NothingAbove {
                free_bytes: Some(512),
                foreign: Cell::new(0),
            };
            match carve(&level, buffers, 1024, 1024, &end, &end) {
                Carved::Chunk(chunk) if rseq::restart_sections() => {
                    let taken = Chunk {
                        start: words::bytes(buffer.offset_words()),
                        len: 1024,
                    };
                    let rest_at_home = PackedWord::new(buffer.offset_words() + 128, 4096 - 128);
                    let (other_now, own_now) = (buffers.slots.load(other), buffers.slots.load(own));
                    if chunk == taken
                        && end.foreign.get() == 1
                        && other_now == PackedWord::from_raw(0)
                        && own_now == rest_at_home
                    {
                        return;
                    }
                    last = format!(
                        "{chunk:?} ({} foreign), other slot {other_now:?}, own {own_now:?}",
                        end.foreign.get()
                    );
                }
                Carved::Exhausted if !rseq::restart_sections() => {
                    eprintln!("the kernel cannot restart sections here: nothing is taken");
                    assert_eq!(buffers.slots.load(other), buffer);
                    return;
                }
                _ => {}
            }
        }
        panic!(
            "in 1000 tries no refill took the other CPU's tail whole and installed its rest at \
             home (the last: {last})"
        );
    }
}
