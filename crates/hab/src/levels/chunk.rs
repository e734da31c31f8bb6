//! The levels' shared vocabulary, below every level kind (`middle.rs`, `cpu_buffers.rs`,
//! `sideline.rs` use it; none of them imports another's protocol): a chunk of the heap, how
//! much of a chunk a request takes, what a level is (its shape), what a carve is for, and what
//! the protocol needs from the thread running it.

use std::sync::atomic::{AtomicUsize, Ordering};

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

/// What the protocol needs from the thread running it and from the heap around it.
pub(crate) trait RefillThread {
    /// Address that offsets are counted from (the reservation's start).
    fn base(&self) -> usize;
    /// The domain at `level` of the CPU the thread runs on now.
    fn current_domain(&mut self, level: Level) -> usize;
    /// Carves from the global heap.
    fn carve_global(&mut self, min: usize, desired: usize) -> Option<Chunk>;
    /// The bytes a buffer of shape `shape` asks of the level above at a refill for a request
    /// of at least `min` bytes that desires `desired`: the level's buffer size (or `min`, if
    /// larger), or less near the end of a cycle, never below the request's `desired`
    /// (`buffer_end_of_cycle.rs`).
    fn buffer_refill_bytes(&mut self, shape: &LevelShape, min: usize, desired: usize) -> usize {
        let _ = desired;
        shape.buffer_bytes().max(min)
    }
    /// A refill of the level at `index` asked for less than a whole buffer and installed
    /// what it got.
    fn short_refill(&mut self, index: usize) {
        let _ = index;
    }
    /// This thread claimed a buffer of the level at `index` for a refill; `[start, end)` (maybe
    /// empty) is the free tail of its previous chunk, to be covered by a filler and counted as
    /// waste. The thread owns the tail: no other thread carves from a claimed buffer.
    fn retire_tail(&mut self, index: usize, start: usize, end: usize);
    /// The level at `index` served a request from `domain`.
    fn served(&mut self, index: usize, level: Level, domain: usize);
    /// The level at `index` served a request from the buffer of `cpu`, the CPU the thread ran
    /// on at the commit: never foreign.
    fn served_without_moving(&mut self, index: usize, level: Level, cpu: usize) {
        let _ = (index, level, cpu);
    }
    /// Restartable sections at the level at `index` aborted `aborts` times.
    fn rseq_aborts(&mut self, index: usize, aborts: u64) {
        let _ = (index, aborts);
    }
    /// A thread took the compare-and-swap path of a restartable level.
    fn rseq_fallback(&mut self, index: usize) {
        let _ = index;
    }
    /// A restartable section of the level at `index` ran on a CPU beyond its per-CPU array;
    /// the request takes the compare-and-swap path.
    fn out_of_range_cpu(&mut self, index: usize) {
        let _ = index;
    }
    /// This thread found a buffer of the level at `index` exhausted, but another thread
    /// claimed or carved from it first.
    fn claim_lost(&mut self, index: usize) {
        let _ = index;
    }
    /// A refill of the level at `index` kept a chunk it could not install for later.
    fn sidelined(&mut self, index: usize) {
        let _ = index;
    }
    /// A refill of the level at `index` took a sidelined chunk.
    fn sideline_reused(&mut self, index: usize) {
        let _ = index;
    }
    /// A TLAB came straight from the global heap: every level's buffers were busy or too
    /// small for it.
    fn tlab_past_every_level(&mut self) {}
}

/// What a carve is for: where a chunk that passes every level is counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// A TLAB (the request started at the lowest level).
    Tlab,
    /// A buffer of a level (its refill, counted there).
    Buffer,
}
