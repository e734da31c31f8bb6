//! The levels' shared vocabulary, below every level kind (`middle.rs`, `cpu_buffers.rs`,
//! `sideline.rs` use it; none of them imports another's protocol): a chunk of the heap, how
//! much of a chunk a request takes, what a level is (its shape), what a carve is for, the
//! level above a level ([`Above`]), and the thread running the protocol ([`RefillThread`]:
//! where it runs, and the [`LevelEvent`]s it counts).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::levels::buffer_end_of_cycle;
use crate::memory::words::{self, WORD_BYTES};
use crate::platform::topology::Level;

/// A contiguous piece of the heap: `len` bytes from address `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) start: usize,
    pub(crate) len: usize,
}

/// The invariant every buffer of a level keeps after each change (checked in builds with
/// debug assertions): its top at or below its end, and a free tail of 0 or at least
/// `min_tail` (a filler must fit it). Any unit, as long as all three share it.
#[inline]
pub(crate) fn check_buffer(top: u64, end: u64, min_tail: u64) {
    debug_assert!(top <= end, "a buffer's top {top} is past its end {end}");
    debug_assert!(
        top == end || end - top >= min_tail,
        "a buffer's free tail of {} is shorter than a filler ({min_tail})",
        end - top
    );
}

/// How much of `available` to hand out for a request of `desired`: all of it when the rest
/// would be a tail too short for a filler (`0 < rest < min_tail`), which the heap walk could not
/// step over. Any unit, as long as all three share it.
pub(crate) fn portion(available: u64, desired: u64, min_tail: u64) -> u64 {
    let take = desired.min(available);
    if available - take < min_tail {
        available
    } else {
        take
    }
}

/// What a configured level is, apart from its buffers: its kind, how many buffers it has, the
/// size of the chunk a buffer takes from above (which a collection may change:
/// `buffer_sizing.rs`; a refill reads it once, with one plain load), and the shortest free
/// tail it may leave.
#[derive(Debug)]
pub(crate) struct LevelShape {
    level: Level,
    /// The level's domains: one buffer each.
    buffers: usize,
    buffer_bytes: AtomicUsize,
    /// No carve leaves a free tail shorter than this (and longer than 0).
    min_tail_words: u64,
}

impl LevelShape {
    /// A level of `buffers` buffers of `buffer_bytes` that never leaves a free tail shorter
    /// than `min_tail_bytes` (the object model's smallest filler, when it exceeds the
    /// alignment).
    pub(crate) fn new(
        level: Level,
        buffers: usize,
        buffer_bytes: usize,
        min_tail_bytes: usize,
    ) -> Self {
        LevelShape {
            level,
            buffers,
            buffer_bytes: AtomicUsize::new(buffer_bytes),
            min_tail_words: min_tail_bytes.div_ceil(WORD_BYTES) as u64,
        }
    }

    pub(crate) fn level(&self) -> Level {
        self.level
    }

    /// How many buffers the level has (its domains).
    pub(crate) fn buffers(&self) -> usize {
        self.buffers
    }

    pub(crate) fn buffer_bytes(&self) -> usize {
        self.buffer_bytes.load(Ordering::Relaxed)
    }

    /// Sets the size of the chunks the level's buffers take from now on (buffers installed
    /// before keep theirs). Only at a collection.
    pub(crate) fn set_buffer_bytes(&self, bytes: usize) {
        self.buffer_bytes.store(bytes, Ordering::Relaxed);
    }

    pub(crate) fn min_tail_words(&self) -> u64 {
        self.min_tail_words
    }
}

/// [`portion`] of a chunk of `chunk_bytes` for a request of `desired_bytes`, leaving no tail
/// shorter than the level's minimum.
pub(crate) fn portion_bytes(shape: &LevelShape, chunk_bytes: usize, desired_bytes: usize) -> usize {
    let min_tail_bytes = words::bytes(shape.min_tail_words) as u64;
    portion(chunk_bytes as u64, desired_bytes as u64, min_tail_bytes) as usize
}

/// The level above a level: where a level's buffers get their chunks, and what covers the
/// tails they retire. One trait for every kind of place above: the middle levels further up,
/// each with the same protocol and its own place above (`middle::LevelsAbove`), or, above
/// every level, the space the levels carve from (a heap's global heap, `refill.rs`; a
/// runtime's upstream, `component.rs`).
pub(crate) trait Above {
    /// Carves `desired` bytes, or at least `min`.
    fn carve(&self, min: usize, desired: usize) -> Option<Chunk>;
    /// The bytes the space above every level has left to carve this cycle, if it says (and
    /// the end of a cycle is on: buffers refilled near the end take a share of it,
    /// `buffer_end_of_cycle.rs`).
    fn free_bytes(&self) -> Option<usize>;
    /// Covers the unused gap `[start, start + bytes)` with a filler.
    ///
    /// # Safety
    /// The caller owns the gap exclusively.
    unsafe fn write_filler(&self, start: usize, bytes: usize);
}

/// What a level's protocol meets, counted where the refilling thread counts
/// ([`RefillThread::count`]): one event per kind, beside the protocol rather than a hook each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LevelEvent {
    /// The level handed out a chunk; `foreign` when the buffer was not the one of the domain
    /// the thread ran in when the carve committed.
    Served { foreign: bool },
    /// The thread claimed one of the level's buffers for a refill; the tail it retired (covered
    /// by a filler) held `waste_bytes`.
    Refilled { waste_bytes: usize },
    /// A refill took a chunk of `bytes` from the level above (installed, kept for this
    /// request, or sidelined).
    Took { bytes: usize },
    /// A refill asked the level above for less than a whole buffer (the end of a cycle) and
    /// installed what it got.
    ShortRefill,
    /// The thread found a buffer exhausted, but another thread claimed or carved from it
    /// first.
    ClaimLost,
    /// Restartable sections aborted this many times (at least once).
    RseqAborts(u64),
    /// A request took the compare-and-swap path of a restartable level.
    RseqFallback,
    /// A restartable section ran on a CPU beyond the per-CPU array (the request then takes
    /// the compare-and-swap path).
    OutOfRangeCpu,
    /// A refill kept a chunk it could not install, for later refills.
    Sidelined,
    /// A refill took a sidelined chunk.
    SidelineReused,
}

/// The thread running the protocol: where offsets start, where it runs, where it counts.
pub(crate) trait RefillThread {
    /// Address that offsets are counted from (the reservation's start).
    fn base(&self) -> usize;
    /// The domain at `level` of the CPU the thread ran on when the request began.
    fn current_domain(&self, level: Level) -> usize;
    /// The domain at `level` of the CPU the thread runs on now (read again after a commit:
    /// the thread may have moved since it chose the buffer).
    fn domain_now(&self, level: Level) -> usize;
    /// Counts `event` at `level`.
    fn count(&self, level: Level, event: LevelEvent);
    /// A TLAB came straight from the space above every level: each level's buffers were busy
    /// or too small for it.
    fn tlab_past_every_level(&self) {}
}

/// The bytes a buffer of shape `shape` asks of the level above at a refill for a request of
/// at least `min` bytes that desires `desired`: the level's buffer size (or `min`, if larger),
/// or less near the end of a cycle where the space above says what it has left, never below
/// the request's `desired` (`buffer_end_of_cycle.rs`).
pub(crate) fn buffer_refill_bytes(
    shape: &LevelShape,
    above: &impl Above,
    min: usize,
    desired: usize,
) -> usize {
    let request = buffer_end_of_cycle::ChunkBounds { min, desired };
    buffer_end_of_cycle::refill_bytes(
        shape.buffer_bytes(),
        shape.buffers(),
        above.free_bytes(),
        request,
    )
}

/// Retires the free tail `[start, end)` (maybe empty) of a buffer of `level` that `thread`
/// claimed for a refill: a filler from `above` covers it, and the refill is counted with the
/// tail as its waste.
///
/// # Safety
/// The thread owns the tail: no other thread carves from a claimed buffer.
pub(crate) unsafe fn retire_tail(
    level: Level,
    start: usize,
    end: usize,
    thread: &impl RefillThread,
    above: &impl Above,
) {
    let waste_bytes = end.saturating_sub(start);
    if waste_bytes > 0 {
        // SAFETY: the caller's contract.
        unsafe { above.write_filler(start, waste_bytes) };
    }
    thread.count(level, LevelEvent::Refilled { waste_bytes });
}

/// What a carve is for: where a chunk that passes every level is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CarveFor {
    /// A TLAB (the request started at the lowest level).
    Tlab,
    /// A buffer of a level (its refill, counted there).
    Buffer,
}
