//! Middle levels: per-CPU, per-core (CLAB), per-LLC, per-package (PLAB) and per-node buffers
//! between the TLABs and the global heap, shared by the threads running in their domain and
//! refilled with the lock-free protocol of Kirsch, Payer and Röck (Listings 1 and 2):
//!
//! 1. carve the request from the buffer of the domain the thread runs in;
//! 2. if that buffer is exhausted, claim it by swapping its state for the REFILLING marker, retire
//!    its tail, take a chunk from the level above, install it and keep the request's part;
//! 3. if the buffer is being refilled by another thread (or the claim was lost), try the other
//!    domains of the level round-robin (a *foreign* allocation);
//! 4. then the level above, and finally the global heap.
//!
//! A buffer is three words on a cache line of its own. `state` holds the top (an offset in
//! words from the heap's base) above a generation that every refill increments, so a
//! compare-and-swap on a stale top can never succeed after the buffer was refilled in between
//! (no ABA). A carve adds its words shifted past the generation: the generation stays, and no
//! mask is needed to bump. `end_words` and `carve_limit` (the highest state a carve may leave:
//! the end less the smallest tail, over all-ones generation bits) are written only while
//! `state` holds the marker, and published by the release store that installs the new state.
//! The marker is above every limit, so the short refill's carve tests busy, exhausted and too
//! short a tail with one compare ([`CasBuffer::try_carve_exact`]). No lock anywhere; a thread
//! that stops while holding the marker only sends the others to foreign domains.
//!
//! Cost: one CAS on the domain's line per carve; a refill adds the level above's carve.

use crate::levels::chunk::{
    buffer_refill_bytes, check_buffer, portion, portion_bytes, retire_tail, Above, CarveFor, Chunk,
    LevelEvent, LevelShape, RefillThread,
};
use crate::levels::cpu_buffers::{self, CpuBuffers};
use crate::memory::global::CachePadded;
use crate::memory::space::Space;
use crate::memory::words;
use crate::platform::sync::{AtomicU64, Ordering};
use crate::platform::topology::{Level, Topology};

/// Low bits of a `state`: the generation. The top, in words, is the 42 bits above them.
const GENERATION_BITS: u32 = 22;
/// The generation's bits of a `state`.
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;

/// `state` while one thread refills the buffer: a top of 2^41 words, beyond any offset in a
/// heap of at most 16 TiB, so no real state equals it, and it plus any carve's step is above
/// every `carve_limit`.
const REFILLING: u64 = 1 << 63;

/// The state of a buffer whose top is `top_words`, in generation `generation` (wrapping).
fn state_of(top_words: u64, generation: u64) -> u64 {
    debug_assert!(top_words < REFILLING >> GENERATION_BITS);
    top_words << GENERATION_BITS | generation & GENERATION_MASK
}

/// The top of a buffer whose `state` is not the marker.
fn top_of(state: u64) -> u64 {
    state >> GENERATION_BITS
}

/// The generation of a `state`.
fn generation_of(state: u64) -> u64 {
    state & GENERATION_MASK
}

/// What a carve of `words` adds to a state.
fn step_of(words: u64) -> u64 {
    words << GENERATION_BITS
}

/// What one attempt on a buffer gave.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    Carved(Chunk),
    /// Another thread is refilling it.
    Busy,
    /// Less than the minimum left; the state seen, for a claim.
    Exhausted(u64),
}

/// One domain's buffer.
#[derive(Debug)]
pub(crate) struct CasBuffer {
    state: AtomicU64,
    end_words: AtomicU64,
    /// The highest `state` an exact carve may leave in this generation:
    /// `state_of(end - min_tail, all ones)` (0 when that is negative).
    carve_limit: AtomicU64,
}

impl CasBuffer {
    fn new() -> Self {
        CasBuffer {
            state: AtomicU64::new(0),
            end_words: AtomicU64::new(0),
            carve_limit: AtomicU64::new(0),
        }
    }

    /// Carves `desired` bytes, or what is left if at least `min`.
    fn try_carve(&self, base: usize, min: usize, desired: usize, min_tail_words: u64) -> Attempt {
        let (min_words, desired_words) = (words::words(min), words::words(desired));
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state == REFILLING {
                return Attempt::Busy;
            }
            let top = top_of(state);
            let available = self.end_words.load(Ordering::Relaxed).saturating_sub(top);
            if available < min_words {
                return Attempt::Exhausted(state);
            }
            let take = portion(available, desired_words, min_tail_words);
            // The top grows above the generation (to at most the end): the generation stays.
            let next = state + step_of(take);
            debug_assert_eq!(next, state_of(top + take, generation_of(state)));
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    // The end read above belongs to this generation: a refill in between
                    // would have changed the state, and the exchange failed.
                    check_buffer(top + take, top + available, min_tail_words);
                    return Attempt::Carved(Chunk {
                        start: words::address(base, top),
                        len: words::bytes(take),
                    });
                }
                Err(now) => state = now,
            }
        }
    }

    /// The short refill's carve: exactly the words of `step` ([`step_of`]) with one
    /// compare-and-swap, leaving at least the level's smallest tail in the buffer. One compare
    /// with the carve limit refuses a buffer being refilled (the marker is above every limit)
    /// and one with too little left. `None` then: the whole protocol ([`carve`]) decides,
    /// with [`try_carve`]'s portions and claims. Returns the carve's first word (an offset
    /// from the heap's base).
    ///
    /// [`try_carve`]: CasBuffer::try_carve
    #[inline(always)]
    fn try_carve_exact(&self, step: u64) -> Option<u64> {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = state + step;
            // Read after the state: it belongs to the state's generation or a later one,
            // and in a later one the exchange fails.
            if next > self.carve_limit.load(Ordering::Relaxed) {
                return None;
            }
            match self
                .state
                .compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    debug_assert!(
                        top_of(next) <= self.end_words.load(Ordering::Relaxed),
                        "an exact carve past its buffer's end"
                    );
                    return Some(top_of(state));
                }
                Err(now) => state = now,
            }
        }
    }

    /// Claims a buffer seen exhausted in `seen` for refilling. Returns its free tail (in words),
    /// or `None` if another thread carved from or claimed it first.
    fn claim(&self, seen: u64) -> Option<(u64, u64)> {
        self.state
            .compare_exchange(seen, REFILLING, Ordering::Acquire, Ordering::Relaxed)
            .ok()?;
        Some((top_of(seen), self.end_words.load(Ordering::Relaxed)))
    }

    /// Ends a claim: the buffer now spans `[top, end)` (words), in a new generation, and
    /// exact carves leave at least `min_tail_words` before its end.
    fn install(&self, seen: u64, top_words: u64, end_words: u64, min_tail_words: u64) {
        debug_assert!(top_words <= end_words);
        self.end_words.store(end_words, Ordering::Relaxed);
        let limit = end_words
            .checked_sub(min_tail_words)
            .map_or(0, |limit_words| state_of(limit_words, GENERATION_MASK));
        self.carve_limit.store(limit, Ordering::Relaxed);
        let state = state_of(top_words, generation_of(seen) + 1);
        self.state.store(state, Ordering::Release);
    }

    /// Empties the buffer at a collection and returns its free tail `[top, end)` in words.
    /// Only called while no thread can be inside the protocol.
    fn take_tail(&self) -> (u64, u64) {
        let state = self.state.load(Ordering::Acquire);
        if state == REFILLING {
            // Only in a process forked while a thread of its parent was refilling this
            // buffer: that thread does not exist here, and its claimed tail is lost with it.
            self.install(state, 0, 0, 0);
            return (0, 0);
        }
        let tail = (top_of(state), self.end_words.load(Ordering::Relaxed));
        self.install(state, 0, 0, 0);
        tail
    }
}

/// One configured middle level: a buffer per domain.
pub(crate) struct MiddleLevel {
    shape: LevelShape,
    buffers: Box<[CachePadded<CasBuffer>]>,
    /// The `cpu` level's restartable per-CPU buffers, where rseq works (see `cpu_buffers.rs`);
    /// `buffers` then serve only threads that fall back.
    cpu_buffers: Option<CpuBuffers>,
    /// The buffer of each CPU's domain, by CPU number (the domain, or the domain modulo the
    /// buffers where the topology numbers more domains than the level has), as its byte
    /// offset in `buffers`: one load for the short refill ([`carve_exact_at_home`]), and no
    /// bound to check. Empty for a level made without a topology.
    homes: Box<[BufferOffset]>,
}

/// One buffer of a level, as the table of homes holds it: its byte offset in the level's
/// array of buffers. Made only by [`MiddleLevel::with_homes`], so always within the array.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BufferOffset(u32);

impl BufferOffset {
    /// The buffer's index in its level.
    #[cfg(test)]
    pub(crate) fn index(self) -> usize {
        self.0 as usize / std::mem::size_of::<CachePadded<CasBuffer>>()
    }
}

impl MiddleLevel {
    /// The `cpu` level's restartable per-CPU buffers, where it has them.
    #[inline]
    pub(crate) fn cpu_buffers(&self) -> Option<&CpuBuffers> {
        self.cpu_buffers.as_ref()
    }

    /// A level of `domains` buffers of `buffer_bytes`, never leaving a free tail shorter than
    /// `min_tail_bytes` (the object model's smallest filler, when it exceeds the alignment).
    pub(crate) fn new(
        level: Level,
        buffer_bytes: usize,
        domains: usize,
        min_tail_bytes: usize,
    ) -> Self {
        let buffers: Box<[_]> = (0..domains.max(1))
            .map(|_| CachePadded(CasBuffer::new()))
            .collect();
        MiddleLevel {
            shape: LevelShape::new(level, buffers.len(), buffer_bytes, min_tail_bytes),
            buffers,
            cpu_buffers: None,
            homes: Box::default(),
        }
    }

    /// Gives the level its table of each CPU's buffer in `topology` (for
    /// [`carve_exact_at_home`]).
    pub(crate) fn with_homes(mut self, topology: &Topology) -> Self {
        let (level, buffers) = (self.level(), self.buffers.len());
        let buffer_bytes = std::mem::size_of::<CachePadded<CasBuffer>>();
        self.homes = (0..topology.cpu_slots())
            .map(|cpu| {
                let offset = topology.domain_of(cpu, level) % buffers * buffer_bytes;
                BufferOffset(u32::try_from(offset).expect("fewer than 2^25 buffers in a level"))
            })
            .collect();
        self
    }

    /// The buffer the domain of `cpu` uses, where the level has a table and `cpu` is in it.
    #[inline(always)]
    pub(crate) fn home_of(&self, cpu: usize) -> Option<BufferOffset> {
        self.homes.get(cpu).copied()
    }

    /// The buffer `home` stands for.
    #[inline(always)]
    fn home_buffer(&self, home: BufferOffset) -> &CasBuffer {
        // SAFETY: a `BufferOffset` is the byte offset of one of this level's buffers (the table, the
        // only maker of homes, is built from this level's array, which never changes).
        unsafe { &(*self.buffers.as_ptr().byte_add(home.0 as usize)).0 }
    }

    /// Gives the level restartable per-CPU buffers for `cpus` CPUs.
    pub(crate) fn with_cpu_buffers(mut self, cpus: usize) -> Self {
        self.cpu_buffers = Some(CpuBuffers::new(cpus, self.shape.min_tail_words()));
        self
    }

    /// Whether the level's buffers are restartable per-CPU buffers.
    pub(crate) fn is_restartable(&self) -> bool {
        self.cpu_buffers.is_some()
    }

    pub(crate) fn min_tail_words(&self) -> u64 {
        self.shape.min_tail_words()
    }

    pub(crate) fn level(&self) -> Level {
        self.shape.level()
    }

    /// The size of the chunk each buffer takes from above now.
    pub(crate) fn buffer_bytes(&self) -> usize {
        self.shape.buffer_bytes()
    }

    /// Sets the size of the chunks the buffers take from now on (see `buffer_sizing.rs`).
    /// Only at a collection.
    pub(crate) fn set_buffer_bytes(&self, bytes: usize) {
        self.shape.set_buffer_bytes(bytes);
    }

    /// The level's domains: the length of its buffer array, which the compare-and-swap
    /// carve reads anyway (the shape's copy serves the per-CPU refill, which has only the
    /// shape; read here it costs the compare-and-swap refill a load and more).
    pub(crate) fn domains(&self) -> usize {
        self.buffers.len()
    }

    /// The buffer of the threads in `domain`: the domain, or the domain modulo the buffers
    /// where the topology numbers more domains than the level has (a branch the predictor
    /// always gets right, rather than a division).
    #[inline(always)]
    pub(crate) fn buffer_of_domain(&self, domain: usize) -> usize {
        if domain < self.domains() {
            domain
        } else {
            domain % self.domains()
        }
    }

    /// The rule for a foreign carve, the one every carve of the level is counted by: a carve
    /// that committed in buffer `served` is foreign when the thread, its CPU read again after
    /// the commit, is in a domain (`domain_now`) whose buffer is another.
    /// [`is_foreign_home`](MiddleLevel::is_foreign_home) is the same rule read from the
    /// table of homes.
    #[inline(always)]
    pub(crate) fn is_foreign(&self, served: usize, domain_now: usize) -> bool {
        self.buffer_of_domain(domain_now) != served
    }

    /// [`is_foreign`](MiddleLevel::is_foreign) for a carve from the buffer `served` found in
    /// the table of homes, with the thread now on `cpu_now`: one load, no division.
    #[inline(always)]
    pub(crate) fn is_foreign_home(&self, served: BufferOffset, cpu_now: usize) -> bool {
        self.home_of(cpu_now) != Some(served)
    }

    /// Counts a carve from the buffer `served` that committed, foreign or not by
    /// [`is_foreign`](MiddleLevel::is_foreign).
    #[inline]
    fn count_served(&self, thread: &impl RefillThread, served: usize) {
        let foreign = self.is_foreign(served, thread.domain_now(self.level()));
        thread.count(self.level(), LevelEvent::Served { foreign });
    }

    /// Empties every buffer; calls `tail(start, end)` (addresses) for each non-empty free tail.
    /// Only at a collection, with every mutator stopped.
    pub(crate) fn retire_all(&self, base: usize, mut tail: impl FnMut(usize, usize)) {
        if let Some(buffers) = &self.cpu_buffers {
            cpu_buffers::retire_all(buffers, base, &mut tail);
        }
        for buffer in self.buffers.iter() {
            let (top, end) = buffer.0.take_tail();
            if end > top {
                tail(words::address(base, top), words::address(base, end));
            }
        }
    }
}

/// The middle levels from one level up, over the space above them all, as the level below
/// sees them: its one place [`Above`]. Carving from it runs the protocol above at its lowest
/// level (`levels[0]`), whose own place above is the rest of the levels; with no level left
/// it carves from `space`. Plain references, copied at each level.
pub(crate) struct LevelsAbove<'a, S: Above + ?Sized, T: RefillThread> {
    /// The levels, lowest first (none: the space itself).
    pub(crate) levels: &'a [MiddleLevel],
    /// The space above every level.
    pub(crate) space: &'a S,
    /// The thread running the protocol.
    pub(crate) thread: &'a T,
    /// What the chunk is for.
    pub(crate) request: CarveFor,
}

impl<S: Above + ?Sized, T: RefillThread> Clone for LevelsAbove<'_, S, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: Above + ?Sized, T: RefillThread> Copy for LevelsAbove<'_, S, T> {}

impl<S: Above + ?Sized, T: RefillThread> LevelsAbove<'_, S, T> {
    /// The levels above the lowest one, asked for a buffer of it.
    fn above_lowest(self) -> Self {
        LevelsAbove {
            levels: self.levels.get(1..).unwrap_or_default(),
            request: CarveFor::Buffer,
            ..self
        }
    }
}

impl<S: Above + ?Sized, T: RefillThread> Above for LevelsAbove<'_, S, T> {
    fn carve(&self, min: usize, desired: usize) -> Option<Chunk> {
        carve(*self, min, desired)
    }

    fn free_bytes(&self) -> Option<usize> {
        self.space.free_bytes()
    }

    unsafe fn write_filler(&self, start: usize, bytes: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.space.write_filler(start, bytes) }
    }
}

/// Carves a chunk of `desired` bytes (or at least `min`) from the lowest of `from`'s levels,
/// following the protocol above, or from the levels above it, and finally the space above
/// them all. `min` and `desired` are multiples of 8. `None` when every level and the space
/// are exhausted.
pub(crate) fn carve<S: Above + ?Sized, T: RefillThread>(
    from: LevelsAbove<'_, S, T>,
    min: usize,
    desired: usize,
) -> Option<Chunk> {
    let thread = from.thread;
    let Some(level) = from.levels.first() else {
        let chunk = from.space.carve(min, desired)?;
        if from.request == CarveFor::Tlab {
            thread.tlab_past_every_level();
        }
        return Some(chunk);
    };
    let above = from.above_lowest();
    if let Some(buffers) = &level.cpu_buffers {
        match cpu_buffers::carve(&level.shape, buffers, min, desired, thread, &above) {
            cpu_buffers::Carved::Chunk(chunk) => return Some(chunk),
            cpu_buffers::Carved::Exhausted => return None,
            cpu_buffers::Carved::Fallback => thread.count(level.level(), LevelEvent::RseqFallback),
        }
    }
    let base = thread.base();
    let home = level.buffer_of_domain(thread.current_domain(level.level()));
    match level.buffers[home]
        .0
        .try_carve(base, min, desired, level.min_tail_words())
    {
        Attempt::Carved(chunk) => {
            level.count_served(thread, home);
            return Some(chunk);
        }
        Attempt::Exhausted(seen) => {
            if let Some(chunk) = refill(level, home, seen, min, desired, thread, &above) {
                level.count_served(thread, home);
                return Some(chunk);
            }
        }
        Attempt::Busy => {}
    }
    for step in 1..level.domains() {
        let domain = (home + step) % level.domains();
        if let Attempt::Carved(chunk) =
            level.buffers[domain]
                .0
                .try_carve(base, min, desired, level.min_tail_words())
        {
            level.count_served(thread, domain);
            return Some(chunk);
        }
    }
    // Up, for the same request.
    carve(
        LevelsAbove {
            request: from.request,
            ..above
        },
        min,
        desired,
    )
}

/// What the thread's own compare-and-swap buffer at the lowest level gave
/// ([`carve_at_shared_home`]): the chunk, from buffer `home`, the buffer of the domain of the
/// CPU the thread ran on, `cpu`; foreign if the thread has moved out of it since
/// ([`MiddleLevel::is_foreign`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SharedHome {
    pub(crate) chunk: Chunk,
    pub(crate) home: usize,
    pub(crate) cpu: usize,
}

/// The common case of [`carve`] at a compare-and-swap level, in a straight line: `bytes` for
/// a TLAB from `level`'s buffer of the thread's own domain (one CAS, with `cpu` read first).
/// Counts nothing: it returns what happened. `None` when the buffer has too little or is
/// busy: nothing was carved, and [`carve`] then runs the whole protocol (and tries the same
/// buffer again first). (A restartable level's common case is
/// [`cpu_buffers::carve_at_home`].)
#[inline(always)]
pub(crate) fn carve_at_shared_home(
    level: &MiddleLevel,
    base: usize,
    topology: &Topology,
    cpu: impl FnOnce() -> usize,
    bytes: usize,
) -> Option<SharedHome> {
    debug_assert!(level.cpu_buffers.is_none());
    let cpu = cpu();
    let home = level.buffer_of_domain(topology.domain_of(cpu, level.level()));
    match level.buffers[home]
        .0
        .try_carve(base, bytes, bytes, level.min_tail_words())
    {
        Attempt::Carved(chunk) => Some(SharedHome { chunk, home, cpu }),
        Attempt::Busy | Attempt::Exhausted(_) => None,
    }
}

/// The short refill's carve at a compare-and-swap level for a thread that read `cpu`:
/// exactly `bytes` from the buffer of the CPU's domain ([`MiddleLevel::home_of`]) with one
/// compare-and-swap. Returns the chunk and that buffer; counts nothing. `None` when
/// `cpu` is beyond the table (a negative reading too), or the buffer is being refilled, has
/// too little left or would keep too short a tail: [`carve`] then runs the whole protocol.
/// The space's base is read after the compare-and-swap, so that it is not held in a register
/// across it.
#[inline(always)]
pub(crate) fn carve_exact_at_home(
    level: &MiddleLevel,
    space: &Space,
    cpu: usize,
    bytes: usize,
) -> Option<(Chunk, BufferOffset)> {
    debug_assert!(level.cpu_buffers.is_none());
    let home = level.home_of(cpu)?;
    let want_words = words::words(bytes);
    let top = level
        .home_buffer(home)
        .try_carve_exact(step_of(want_words))?;
    // The length from the words, which the loop held anyway (a TLAB is whole words).
    let chunk = Chunk {
        start: words::address(space.base(), top),
        len: words::bytes(want_words),
    };
    Some((chunk, home))
}

/// Claims the exhausted buffer of `domain`, retires its tail, refills it from `above` and
/// keeps this request's part. `None` if the claim was lost or the levels above are empty.
#[cold]
fn refill<T: RefillThread>(
    level: &MiddleLevel,
    domain: usize,
    seen: u64,
    min: usize,
    desired: usize,
    thread: &T,
    above: &impl Above,
) -> Option<Chunk> {
    let buffer = &level.buffers[domain].0;
    let Some((tail_top, tail_end)) = buffer.claim(seen) else {
        thread.count(level.level(), LevelEvent::ClaimLost);
        return None;
    };
    let base = thread.base();
    let (tail_start, tail_end_address) = (
        words::address(base, tail_top),
        words::address(base, tail_end),
    );
    // SAFETY: this thread claimed the buffer; no other thread carves from a claimed buffer,
    // so the tail is this thread's.
    unsafe { retire_tail(level.level(), tail_start, tail_end_address, thread, above) };
    let buffer_bytes = buffer_refill_bytes(&level.shape, above, min, desired);
    let Some(chunk) = above.carve(min, buffer_bytes) else {
        buffer.install(seen, tail_end, tail_end, level.min_tail_words());
        return None;
    };
    thread.count(level.level(), LevelEvent::Took { bytes: chunk.len });
    if buffer_bytes < level.buffer_bytes().max(min) {
        thread.count(level.level(), LevelEvent::ShortRefill);
    }
    let take = portion_bytes(&level.shape, chunk.len, desired);
    let (top_words, end_words) = (
        words::offset(base, chunk.start + take),
        words::offset(base, chunk.start + chunk.len),
    );
    check_buffer(top_words, end_words, level.min_tail_words());
    buffer.install(seen, top_words, end_words, level.min_tail_words());
    Some(Chunk {
        start: chunk.start,
        len: take,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::cell::{Cell, RefCell};

    /// A thread in a fixed domain, over a bump "global heap" of offsets from 0.
    struct Fixed {
        domain: Cell<usize>,
        global_top: Cell<usize>,
        global_end: usize,
        tails: RefCell<Vec<(usize, usize)>>,
        /// The level of every chunk served, and whether it was foreign.
        served: RefCell<Vec<(Level, bool)>>,
        tlabs_past_levels: Cell<usize>,
        claims_lost: Cell<usize>,
    }

    impl RefillThread for Fixed {
        fn base(&self) -> usize {
            0
        }
        fn current_domain(&self, _: Level) -> usize {
            self.domain.get()
        }
        fn domain_now(&self, _: Level) -> usize {
            self.domain.get()
        }
        fn count(&self, level: Level, event: LevelEvent) {
            match event {
                LevelEvent::Served { foreign } => self.served.borrow_mut().push((level, foreign)),
                LevelEvent::ClaimLost => self.claims_lost.set(self.claims_lost.get() + 1),
                _ => {}
            }
        }
        fn tlab_past_every_level(&self) {
            self.tlabs_past_levels.set(self.tlabs_past_levels.get() + 1);
        }
    }

    impl Above for Fixed {
        fn carve(&self, min: usize, desired: usize) -> Option<Chunk> {
            let top = self.global_top.get();
            let len = desired.min(self.global_end - top);
            if len < min {
                return None;
            }
            self.global_top.set(top + len);
            Some(Chunk { start: top, len })
        }
        fn free_bytes(&self) -> Option<usize> {
            None
        }
        unsafe fn write_filler(&self, start: usize, bytes: usize) {
            self.tails.borrow_mut().push((start, start + bytes));
        }
    }

    fn env(domain: usize, global_bytes: usize) -> Fixed {
        Fixed {
            domain: Cell::new(domain),
            global_top: Cell::new(0),
            global_end: global_bytes,
            tails: RefCell::new(vec![]),
            served: RefCell::new(vec![]),
            tlabs_past_levels: Cell::new(0),
            claims_lost: Cell::new(0),
        }
    }

    /// The protocol from the lowest of `levels`, over `env` as the thread and the space.
    fn carve_in(
        levels: &[MiddleLevel],
        min: usize,
        desired: usize,
        request: CarveFor,
        env: &Fixed,
    ) -> Option<Chunk> {
        let from = LevelsAbove {
            levels,
            space: env,
            thread: env,
            request,
        };
        carve(from, min, desired)
    }

    /// Marks the (empty or exhausted) buffer as being refilled by another thread.
    fn make_busy(buffer: &CasBuffer) {
        let Attempt::Exhausted(seen) = buffer.try_carve(0, usize::MAX / 2, usize::MAX / 2, 0)
        else {
            panic!("the buffer serves any request");
        };
        buffer.claim(seen).expect("no other thread claims it");
    }

    #[test]
    fn a_claim_another_thread_won_is_counted_as_lost() {
        let levels = [MiddleLevel::new(Level::Core, 1024, 1, 0)];
        let env = env(0, 1 << 20);
        let buffer = &levels[0].buffers[0].0;
        let Attempt::Exhausted(seen) = buffer.try_carve(0, 64, 64, 0) else {
            panic!("a new buffer is empty");
        };
        make_busy(buffer); // another thread claims it between our look and our claim
        assert_eq!(refill(&levels[0], 0, seen, 64, 64, &env, &env), None);
        assert_eq!((env.claims_lost.get(), env.global_top.get()), (1, 0));
    }

    #[test]
    fn a_tlab_that_passes_every_level_is_counted_there_and_only_there() {
        let levels = [
            MiddleLevel::new(Level::Core, 1024, 1, 0),
            MiddleLevel::new(Level::Package, 4096, 1, 0),
        ];
        let env = env(0, 1 << 20);
        make_busy(&levels[0].buffers[0].0);
        // The core buffer is busy: the package level serves the TLAB.
        assert!(carve_in(&levels, 64, 256, CarveFor::Tlab, &env).is_some());
        assert_eq!(*env.served.borrow(), [(Level::Package, false)]);
        make_busy(&levels[1].buffers[0].0);
        let past = carve_in(&levels, 64, 256, CarveFor::Tlab, &env).unwrap();
        assert_eq!(past.len, 256);
        assert_eq!(env.served.borrow().len(), 1, "served by no level");
        assert_eq!(env.tlabs_past_levels.get(), 1);
        // A buffer that passes the busy levels above is its level's refill, not a TLAB.
        assert!(carve_in(&levels, 64, 1024, CarveFor::Buffer, &env).is_some());
        assert_eq!(env.tlabs_past_levels.get(), 1);
    }

    #[test]
    fn carves_from_the_home_buffer_and_refills_it() {
        let levels = [MiddleLevel::new(Level::Core, 1024, 2, 0)];
        let env = env(1, 1 << 20);
        let first = carve_in(&levels, 64, 256, CarveFor::Tlab, &env).unwrap();
        assert_eq!(first, Chunk { start: 0, len: 256 });
        assert_eq!(
            carve_in(&levels, 64, 256, CarveFor::Tlab, &env).unwrap(),
            Chunk {
                start: 256,
                len: 256
            }
        );
        assert_eq!(env.global_top.get(), 1024, "one refill of the level's size");
        // 512 left: a 600-byte request takes what is left.
        assert_eq!(
            carve_in(&levels, 64, 600, CarveFor::Tlab, &env).unwrap(),
            Chunk {
                start: 512,
                len: 512
            }
        );
        // Exhausted: refilled, no tail to retire.
        assert_eq!(
            carve_in(&levels, 64, 256, CarveFor::Tlab, &env).unwrap(),
            Chunk {
                start: 1024,
                len: 256
            }
        );
        assert!(env.tails.borrow().is_empty());
        // 768 left but the minimum is 800: the tail is retired, the buffer refilled.
        assert_eq!(
            carve_in(&levels, 800, 800, CarveFor::Tlab, &env).unwrap(),
            Chunk {
                start: 2048,
                len: 800
            }
        );
        assert_eq!(*env.tails.borrow(), [(1280, 2048)]);
        assert!(env
            .served
            .borrow()
            .iter()
            .all(|&served| served == (Level::Core, false)));
    }

    #[test]
    fn a_busy_home_sends_the_request_to_other_domains_then_up() {
        let levels = [
            MiddleLevel::new(Level::Core, 1024, 3, 0),
            MiddleLevel::new(Level::Package, 4096, 1, 0),
        ];
        let env = env(0, 1 << 20);
        // Domain 2 gets a chunk; then domain 0 is marked busy.
        env.domain.set(2);
        carve_in(&levels, 64, 64, CarveFor::Tlab, &env).unwrap();
        levels[0].buffers[0]
            .0
            .state
            .store(REFILLING, Ordering::Relaxed);
        env.domain.set(0);
        env.served.borrow_mut().clear();
        let chunk = carve_in(&levels, 64, 64, CarveFor::Tlab, &env).unwrap();
        assert_eq!(
            chunk,
            Chunk { start: 64, len: 64 },
            "from domain 2's buffer"
        );
        assert_eq!(*env.served.borrow(), [(Level::Core, true)]);
        // Domain 2 exhausted (a minimum larger than what is left): up to the package level.
        env.served.borrow_mut().clear();
        let chunk = carve_in(&levels, 1000, 1000, CarveFor::Tlab, &env).unwrap();
        assert_eq!(
            *env.served.borrow(),
            [(Level::Package, false)],
            "served by the package level"
        );
        assert_eq!(chunk.len, 1000);
    }

    #[test]
    fn an_exhausted_heap_leaves_the_buffer_empty_and_usable() {
        let levels = [MiddleLevel::new(Level::Cpu, 1024, 1, 0)];
        let env = env(0, 1536);
        assert!(carve_in(&levels, 512, 512, CarveFor::Tlab, &env).is_some());
        assert!(carve_in(&levels, 512, 512, CarveFor::Tlab, &env).is_some());
        // 512 left in the global heap: the refill takes it (at least the minimum).
        assert_eq!(
            carve_in(&levels, 512, 512, CarveFor::Tlab, &env),
            Some(Chunk {
                start: 1024,
                len: 512
            })
        );
        assert_eq!(carve_in(&levels, 8, 8, CarveFor::Tlab, &env), None);
        assert_eq!(
            top_of(levels[0].buffers[0].0.state.load(Ordering::Relaxed)),
            1536 / 8
        );
        let mut tails = vec![];
        levels[0].retire_all(0, |start, end| tails.push((start, end)));
        assert!(tails.is_empty());
    }

    #[test]
    fn no_carve_leaves_a_tail_too_short_for_a_filler() {
        let levels = [MiddleLevel::new(Level::Cpu, 1024, 1, 16)];
        let env = env(0, 1 << 20);
        // 1024 - 1016 would leave 8 bytes: the whole buffer goes.
        assert_eq!(
            carve_in(&levels, 8, 1016, CarveFor::Tlab, &env),
            Some(Chunk {
                start: 0,
                len: 1024
            })
        );
        // From a partly used buffer too: 1024 - 512 - 504 = 8.
        assert_eq!(
            carve_in(&levels, 8, 512, CarveFor::Tlab, &env),
            Some(Chunk {
                start: 1024,
                len: 512
            })
        );
        assert_eq!(
            carve_in(&levels, 8, 504, CarveFor::Tlab, &env),
            Some(Chunk {
                start: 1536,
                len: 512
            })
        );
        // A 16-byte rest is fine.
        assert_eq!(
            carve_in(&levels, 8, 1008, CarveFor::Tlab, &env),
            Some(Chunk {
                start: 2048,
                len: 1008
            })
        );
        assert!(env.tails.borrow().is_empty());
        assert_eq!(portion(100, 40, 0), 40);
        assert_eq!(portion(100, 200, 16), 100);
    }

    /// The short refill's carve takes exactly what it is asked, and only while the buffer is
    /// not being refilled and keeps at least the smallest tail after it: everything else is
    /// left to the whole protocol, with the buffer as it was.
    #[test]
    fn the_exact_carve_takes_exactly_or_leaves_the_buffer_alone() {
        let buffer = CasBuffer::new();
        let carve = |words| buffer.try_carve_exact(step_of(words));
        assert_eq!(carve(4), None, "an empty buffer");
        buffer.install(state_of(0, 1), 100, 120, 2);
        let state = |buffer: &CasBuffer| buffer.state.load(Ordering::Relaxed);
        let installed = state(&buffer);
        assert_eq!(generation_of(installed), 2);
        assert_eq!(carve(4), Some(100));
        assert_eq!(state(&buffer), state_of(104, 2), "the generation stays");
        assert_eq!(carve(10), Some(104));
        // 6 words left: 5 would leave 1, shorter than the tail of 2; 4 leave 2; 6 leave 0
        // but the rule asks for the tail (the whole protocol takes such a rest).
        assert_eq!(carve(5), None);
        assert_eq!(carve(6), None);
        assert_eq!(carve(4), Some(114));
        assert_eq!(state(&buffer), state_of(118, 2));
        buffer.install(state(&buffer), 118, 120, 0);
        assert_eq!(carve(2), Some(118), "to the end, with no tail");
        assert_eq!(carve(1), None, "nothing left");
        let full = state(&buffer);
        assert_eq!(buffer.claim(full), Some((120, 120)));
        assert_eq!(carve(1), None, "being refilled");
        assert_eq!(state(&buffer), REFILLING);
        // A tail longer than the buffer: no carve fits.
        buffer.install(full, 0, 3, 4);
        assert_eq!(carve(1), None);
    }

    /// A level's table gives each CPU its domain's buffer, the domain modulo the buffers
    /// where the level has fewer; a CPU beyond the table has none.
    #[test]
    fn each_cpu_finds_its_domains_buffer_in_the_table() {
        let topology = Topology::simulated("2x2x2").unwrap();
        let level = MiddleLevel::new(Level::Core, 1024, topology.domains(Level::Core), 0)
            .with_homes(&topology);
        let homes: Vec<_> = (0..9)
            .map(|cpu| level.home_of(cpu).map(BufferOffset::index))
            .collect();
        let cores = |cpu| Some(topology.domain_of(cpu, Level::Core));
        assert_eq!(homes, (0..8).map(cores).chain([None]).collect::<Vec<_>>());
        assert_eq!(homes[..4], [Some(0), Some(0), Some(1), Some(1)]);
        let narrow = MiddleLevel::new(Level::Core, 1024, 3, 0).with_homes(&topology);
        assert_eq!(
            narrow.home_of(7).map(BufferOffset::index),
            Some(3 % 3),
            "core 3 of a level with 3 buffers"
        );
        assert_eq!(MiddleLevel::new(Level::Core, 1024, 4, 0).home_of(0), None);
    }

    /// The foreign rule read from domains and read from the table agree for every carve and
    /// every CPU the thread may have moved to, on a level with as many buffers as domains and
    /// on a narrower one; a thread that stayed in its domain is never foreign.
    #[test]
    fn the_foreign_rule_reads_the_same_from_domains_and_from_the_table() {
        let topology = Topology::simulated("2x2x2").unwrap();
        for buffers in [topology.domains(Level::Core), 3] {
            let level = MiddleLevel::new(Level::Core, 1024, buffers, 0).with_homes(&topology);
            for cpu in 0..8 {
                let served = level.buffer_of_domain(topology.domain_of(cpu, Level::Core));
                let home = level.home_of(cpu).unwrap();
                assert_eq!(home.index(), served);
                for now in 0..8 {
                    let domain_now = topology.domain_of(now, Level::Core);
                    let foreign = level.is_foreign(served, domain_now);
                    assert_eq!(foreign, level.is_foreign_home(home, now), "{cpu} -> {now}");
                }
                assert!(!level.is_foreign(served, topology.domain_of(cpu, Level::Core)));
            }
        }
    }

    #[test]
    fn installs_advance_the_generation_and_the_marker_is_not_a_state() {
        let buffer = CasBuffer::new();
        buffer.install(state_of(0, 7), 12345, 20000, 0);
        let state = buffer.state.load(Ordering::Relaxed);
        assert_eq!((top_of(state), generation_of(state)), (12345, 8));
        // The highest real top (a heap of 16 TiB) in the last generation is not the marker,
        // and the marker plus one word is above the highest limit.
        let highest = state_of((REFILLING >> GENERATION_BITS) - 1, GENERATION_MASK);
        assert!(highest < REFILLING);
        assert!(REFILLING + step_of(1) > highest);
        buffer.install(state_of(0, GENERATION_MASK), 5, 20000, 0);
        let state = buffer.state.load(Ordering::Relaxed);
        assert_eq!(
            (top_of(state), generation_of(state)),
            (5, 0),
            "generations wrap"
        );
        buffer.install(REFILLING, 5, 20000, 0);
        let state = buffer.state.load(Ordering::Relaxed);
        assert_eq!(
            (top_of(state), generation_of(state)),
            (5, 1),
            "after the marker"
        );
    }
}

/// Model checks of the refill protocol: `RUSTFLAGS="--cfg loom" cargo test -p hab --release
/// --lib middle::model_check`.
#[cfg(all(test, loom))]
mod model_check {
    use super::*;
    use ::loom::sync::Arc;

    /// A global heap whose top is a loom atomic, so its carves interleave too.
    struct Global {
        top: AtomicU64,
        end: u64,
    }

    struct Thread<'a> {
        global: &'a Global,
        domain: usize,
        tails: std::cell::RefCell<Vec<(usize, usize)>>,
    }

    impl RefillThread for Thread<'_> {
        fn base(&self) -> usize {
            0
        }
        fn current_domain(&self, _: Level) -> usize {
            self.domain
        }
        fn domain_now(&self, _: Level) -> usize {
            self.domain
        }
        fn count(&self, _: Level, _: LevelEvent) {}
    }

    impl Above for Thread<'_> {
        fn carve(&self, min: usize, desired: usize) -> Option<Chunk> {
            let mut top = self.global.top.load(Ordering::Relaxed);
            loop {
                let len = (desired as u64).min(self.global.end.saturating_sub(top));
                if len < min as u64 {
                    return None;
                }
                match self.global.top.compare_exchange(
                    top,
                    top + len,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        return Some(Chunk {
                            start: top as usize,
                            len: len as usize,
                        })
                    }
                    Err(now) => top = now,
                }
            }
        }
        fn free_bytes(&self) -> Option<usize> {
            None
        }
        unsafe fn write_filler(&self, start: usize, bytes: usize) {
            self.tails.borrow_mut().push((start, start + bytes));
        }
    }

    /// Context switches explored per execution: enough for a refill to be interrupted between
    /// its claim and its install, and a carve between its load and its CAS, at once.
    const PREEMPTIONS: usize = 3;

    /// Every byte of the global heap handed out ends up exactly once in a chunk, a retired tail or
    /// a buffer's final free tail: no overlap, nothing lost, and no marker left behind. With
    /// `exact_first`, each request first tries the short refill's exact carve of 16 bytes
    /// from its domain's buffer, and runs the protocol only when that finds nothing.
    fn check(
        threads: usize,
        requests: usize,
        domains: usize,
        buffer_bytes: usize,
        global_bytes: u64,
        exact_first: bool,
    ) {
        let mut builder = ::loom::model::Builder::new();
        builder.preemption_bound = Some(PREEMPTIONS);
        builder.check(move || {
            let levels = Arc::new([MiddleLevel::new(Level::Core, buffer_bytes, domains, 0)]);
            let global = Arc::new(Global {
                top: AtomicU64::new(0),
                end: global_bytes,
            });
            let handles: Vec<_> = (0..threads)
                .map(|t| {
                    let (levels, global) = (levels.clone(), global.clone());
                    ::loom::thread::spawn(move || {
                        let env = Thread {
                            global: &global,
                            domain: t % domains,
                            tails: std::cell::RefCell::new(vec![]),
                        };
                        let mut pieces = vec![];
                        for _ in 0..requests {
                            let exact = exact_first
                                .then(|| {
                                    levels[0].buffers[env.domain].0.try_carve_exact(step_of(2))
                                })
                                .flatten()
                                .map(|top| Chunk {
                                    start: words::address(0, top),
                                    len: 16,
                                });
                            let from = LevelsAbove {
                                levels: &levels[..],
                                space: &env,
                                thread: &env,
                                request: CarveFor::Tlab,
                            };
                            if let Some(chunk) = exact.or_else(|| carve(from, 8, 16)) {
                                pieces.push((chunk.start, chunk.start + chunk.len));
                            }
                        }
                        pieces.extend(env.tails.into_inner());
                        pieces
                    })
                })
                .collect();
            let mut pieces: Vec<(usize, usize)> = handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect();
            levels[0].retire_all(0, |start, end| pieces.push((start, end)));
            for buffer in levels[0].buffers.iter() {
                assert_ne!(buffer.0.state.load(Ordering::Relaxed), REFILLING);
            }
            pieces.sort();
            let mut covered = 0;
            for (start, end) in pieces {
                assert_eq!(start, covered, "gap or overlap at {start}");
                covered = end;
            }
            assert_eq!(covered as u64, global.top.load(Ordering::Relaxed));
        });
    }

    #[test]
    fn two_threads_one_domain() {
        check(2, 3, 1, 32, 96, false);
    }

    #[test]
    fn two_threads_two_domains() {
        check(2, 2, 2, 32, 64, false);
    }

    #[test]
    fn three_threads_two_domains() {
        check(3, 1, 2, 24, 48, false);
    }

    /// The short refill's exact carve beside the whole protocol's carves, claims and refills.
    #[test]
    fn two_threads_one_domain_exact_carve_first() {
        check(2, 3, 1, 32, 96, true);
    }
}
