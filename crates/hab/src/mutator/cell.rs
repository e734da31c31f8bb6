//! A mutator's state that its thread and collections share, and the state machine that
//! decides who may touch it. This is the only place that reaches into a mutator's TLAB and
//! slow-path state without a lock; every access goes through an accessor that states, and in
//! debug builds checks, the state it relies on.
//!
//! ```text
//!            park (owner, Release)             claim (collection, Acquire)
//!  RUNNING ─────────────────────────▶ PARKED ─────────────────────────────▶ HELD
//!     ▲                                 │  ▲                                  │
//!     └───── unpark (owner, Acquire) ───┘  └──── release (collection) ────────┘
//! ```
//!
//! RUNNING: only the owning thread touches the TLAB. PARKED: nobody does (the owner is at a
//! safepoint or blocked). HELD: only the collection that claimed it does.

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::labs::end_of_cycle::ThreadShare;
use crate::labs::sizing::TlabSizer;
use crate::labs::tlab::Tlab;
use crate::memory::relaxed;
use crate::mutator::sampling::NextSample;
use crate::mutator::stats::Counters;
use crate::platform::cpu_id::SimulatedCpu;
use crate::platform::fence;
use crate::platform::process::{ForkGate, ThreadIdentity};

/// The owning thread may allocate; only it touches the TLAB.
pub(crate) const RUNNING: u32 = 0;
/// Stopped by its thread; a collection may claim it.
pub(crate) const PARKED: u32 = 1;
/// Claimed by a collection, which alone touches the TLAB until it ends.
pub(crate) const HELD: u32 = 2;

/// Offset of the mutator's safepoint poll word (a `usize`, non-zero while a collection is
/// requested) from the address [`Mutator::tlab_address`](crate::Mutator::tlab_address)
/// returns: compiled code polls with one load and a branch.
pub const SAFEPOINT_POLL_OFFSET: usize = std::mem::offset_of!(MutatorCell, poll);

/// State of one mutator that a collection can reach through the heap's registry.
///
/// `tlab` comes first so that its `{top, soft_end}` pair sits at the documented offsets, and
/// the poll word right after it.
#[repr(C)]
pub(crate) struct MutatorCell {
    tlab: Tlab,
    /// Non-zero while a collection is requested: the owner stops at its next safepoint.
    poll: AtomicUsize,
    /// The size bits that send the owner's misses past the slow path's short line: every bit
    /// while a safepoint is requested, else the heap's (the low bits of its alignment, every
    /// bit while sampling is on), so that one test of the size finds a request, a size
    /// checked against another heap and a sample due. Written with the heap's registry
    /// locked (a request, its withdrawal, a new sampler); read by the owner.
    full_path_bits: AtomicUsize,
    local: UnsafeCell<MutatorLocal>,
    pub(crate) state: AtomicU32,
    /// The number of collections finished when the thread last attached or unparked: a thread
    /// whose value is older than the last collection stayed parked for the whole cycle.
    pub(crate) running_since: AtomicU64,
    pub(crate) counters: Counters,
    /// The mutator's id: unique among every heap's mutators in the process, so that an id
    /// (`Collection::alloc_for`) never names another heap's mutator.
    pub(crate) id: u64,
    /// Its handle was dropped while a collection held it: that collection detaches it when it
    /// ends. Written and read with the registry locked.
    pub(crate) detach_when_released: AtomicBool,
    /// The thread that last attached or unparked the mutator: what a collection that cannot
    /// stop the world reports, and how a forked child tells its own mutators from its
    /// parent's.
    thread: Mutex<ThreadIdentity>,
}

// SAFETY: `tlab` (but its atomic soft end) and `local` are touched only through the accessors
// below: by the owning thread while `state` is RUNNING, and by the collection that moved
// `state` from PARKED to HELD (with Acquire, after the owner's Release store of PARKED) until
// it stores PARKED again (Release). Other threads touch only `poll` and the TLAB's soft end,
// both atomics (`trip`). `counters` are atomics; `id` is immutable; `thread` is behind a
// mutex.
unsafe impl Sync for MutatorCell {}

/// The parts of a mutator's state that only the slow path and collections use.
pub(crate) struct MutatorLocal {
    pub(crate) sizer: TlabSizer,
    /// `counters.allocated_bytes()` when the last collection ended.
    pub(crate) allocated_at_last_collection: u64,
    /// `counters.refills` when the last collection ended.
    pub(crate) refills_at_last_collection: u64,
    /// The thread's virtual CPU, when the CPU-id source is simulated.
    pub(crate) simulated_cpu: SimulatedCpu,
    /// Whether the thread allocates in per-CPU LABs (`cpu-lab` mode, or the `flip` mode's
    /// per-CPU phase as the thread last saw it).
    pub(crate) in_cpu_labs: bool,
    /// Where the thread's next allocation sample falls.
    pub(crate) next_sample: NextSample,
    /// The thread's part of the end of each cycle: where its TLABs stop being full-sized.
    pub(crate) end_of_cycle: ThreadShare,
}

/// The next mutator id (of any heap in the process).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

impl MutatorCell {
    /// A new mutator id, never handed out before in this process.
    pub(crate) fn next_id() -> u64 {
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    }

    /// A running mutator of the calling thread, numbered `id`, attached when `collections`
    /// collections had finished, in a heap whose full-path size bits are `heap_bits`
    /// (`Sampling::full_path_size_bits`).
    pub(crate) fn new(
        id: u64,
        local: MutatorLocal,
        counters: Counters,
        collections: u64,
        heap_bits: usize,
    ) -> Self {
        MutatorCell {
            tlab: Tlab::default(),
            poll: AtomicUsize::new(0),
            full_path_bits: AtomicUsize::new(heap_bits),
            local: local.into(),
            state: RUNNING.into(),
            running_since: collections.into(),
            counters,
            id,
            detach_when_released: AtomicBool::new(false),
            thread: Mutex::new(ThreadIdentity::current()),
        }
    }

    /// The address of the TLAB, for a JIT (no access is made).
    pub(crate) fn tlab_address(&self) -> *const Tlab {
        &self.tlab
    }

    /// Asks the owners of `cells` to stop at their next safepoint: sets each poll word, makes
    /// every thread execute a barrier (one for all the cells), then trips each TLAB so that
    /// its next allocation takes the slow path (see [`Tlab::trip`]). Any thread, with the
    /// heap's registry locked.
    pub(crate) fn request_safepoints<'a>(cells: impl Iterator<Item = &'a MutatorCell> + Clone) {
        for cell in cells.clone() {
            cell.poll.store(1, Ordering::SeqCst);
            cell.full_path_bits.store(usize::MAX, Ordering::Relaxed);
        }
        fence::heavy();
        for cell in cells {
            cell.tlab.trip();
        }
    }

    /// [`request_safepoints`](MutatorCell::request_safepoints) for a cell no thread runs yet
    /// (its owner is the caller, attaching): no barrier is needed.
    pub(crate) fn request_safepoint_before_running(&self) {
        self.poll.store(1, Ordering::SeqCst);
        self.full_path_bits.store(usize::MAX, Ordering::Relaxed);
        self.tlab.trip();
    }

    /// Sends the owner's next TLAB allocation to the slow path (see [`Tlab::trip`]): the
    /// owner, as it parks.
    pub(crate) fn trip_tlab(&self) {
        self.tlab.trip();
    }

    /// Withdraws the request: a collection that satisfies it ended; the full path's size bits
    /// are the heap's, `heap_bits`, again. The soft end stays as it is; the owner's slow path
    /// raises it. With the heap's registry locked.
    pub(crate) fn clear_safepoint(&self, heap_bits: usize) {
        self.poll.store(0, Ordering::SeqCst);
        self.full_path_bits.store(heap_bits, Ordering::Relaxed);
    }

    /// The heap's full-path size bits changed to `heap_bits` (a sampler came or went): the
    /// mutator's follow, unless a safepoint is requested (then all stay set until it is
    /// withdrawn). With the heap's registry locked.
    pub(crate) fn follow_heap_bits(&self, heap_bits: usize) {
        if self.poll.load(Ordering::SeqCst) == 0 {
            self.full_path_bits.store(heap_bits, Ordering::Relaxed);
        }
    }

    /// The full path's size bits as they are now (for tests).
    #[cfg(test)]
    pub(crate) fn full_path_bits(&self) -> usize {
        self.full_path_bits.load(Ordering::Relaxed)
    }

    /// Whether a miss of `bytes` must take the full slow path: a safepoint is requested, the
    /// size is misaligned for this heap, or sampling is on. One load and one test, the short
    /// line's only check before its work.
    #[inline(always)]
    pub(crate) fn takes_full_path(&self, bytes: usize) -> bool {
        const BITS: usize = std::mem::offset_of!(MutatorCell, full_path_bits);
        // SAFETY: `BITS` is the offset of `full_path_bits`, an `AtomicUsize`.
        unsafe { relaxed::shares_bits_with_field::<BITS, _>(bytes, self) }
    }

    /// [`takes_full_path`](MutatorCell::takes_full_path) with the word loaded apart, for the
    /// `shared` mode's line: there the folded test made the compiler merge the line's two
    /// ways out of it through one more register (two instructions more per object).
    #[inline(always)]
    pub(crate) fn takes_full_path_loaded(&self, bytes: usize) -> bool {
        bytes & self.full_path_bits.load(Ordering::Relaxed) != 0
    }

    /// Whether a safepoint is requested: the inline poll (a relaxed load, folded into the
    /// compare on x86_64).
    #[inline(always)]
    pub(crate) fn safepoint_requested(&self) -> bool {
        !relaxed::is_zero(&self.poll)
    }

    /// Whether a safepoint is requested, read after the owner raised its soft end (the other
    /// half of [`Tlab::trip`]'s handshake): one compare of the poll in memory with 0.
    #[inline(always)]
    pub(crate) fn safepoint_requested_after_raise(&self) -> bool {
        const POLL: usize = std::mem::offset_of!(MutatorCell, poll);
        // SAFETY: `POLL` is the offset of `poll`, an `AtomicUsize`.
        unsafe { relaxed::field_is_nonzero::<POLL, _>(self) }
    }

    /// The TLAB, for the thread running this mutator (the fast path).
    ///
    /// # Safety
    /// The caller is the thread that runs this mutator (it set RUNNING and has not parked
    /// since) and holds no other reference obtained from this cell.
    #[inline(always)]
    pub(crate) unsafe fn running_tlab(&self) -> &Tlab {
        debug_assert_eq!(self.state.load(Ordering::Relaxed), RUNNING);
        &self.tlab
    }

    /// The TLAB and the slow-path state, for the thread running this mutator.
    ///
    /// # Safety
    /// As [`running_tlab`](MutatorCell::running_tlab).
    #[inline]
    #[allow(clippy::mut_from_ref)] // the state machine, not a borrow, makes them unique
    pub(crate) unsafe fn running_parts(&self) -> (&Tlab, &mut MutatorLocal) {
        debug_assert_eq!(self.state.load(Ordering::Relaxed), RUNNING);
        // SAFETY: only the running owner touches `local` (see the caller's contract).
        (&self.tlab, unsafe { &mut *self.local.get() })
    }

    /// The TLAB and the slow-path state, for the collection holding this mutator.
    ///
    /// # Safety
    /// The caller is the collection that moved this mutator from PARKED to HELD and has not
    /// released it, and holds no other reference obtained from this cell.
    #[allow(clippy::mut_from_ref)] // the state machine, not a borrow, makes them unique
    pub(crate) unsafe fn held_parts(&self) -> (&Tlab, &mut MutatorLocal) {
        debug_assert_eq!(self.state.load(Ordering::Relaxed), HELD);
        // SAFETY: only the holding collection touches `local` (see the caller's contract).
        (&self.tlab, unsafe { &mut *self.local.get() })
    }

    /// The TLAB of a mutator whose thread does not exist in this process (lost in a `fork`).
    ///
    /// # Safety
    /// The mutator's thread does not exist in this process, and the caller holds the heap's
    /// registry locked (so no collection touches the TLAB meanwhile).
    pub(crate) unsafe fn lost_thread_tlab(&self) -> &Tlab {
        &self.tlab
    }

    /// Records that the calling thread runs the mutator from now on. (Takes the fork gate:
    /// no `fork` copies `thread` locked.)
    pub(crate) fn mark_running(&self) {
        let identity = ThreadIdentity::current();
        let _fork = ForkGate::enter();
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = identity;
    }

    /// Replaces the recorded thread (a forked child adopting its forking thread's mutators).
    /// Only called with the registry locked, which holds the fork gate.
    pub(crate) fn set_thread(&self, identity: ThreadIdentity) {
        *self.thread.lock().unwrap_or_else(|e| e.into_inner()) = identity;
    }

    /// The thread that runs (or last ran) the mutator. Only called with the registry
    /// locked, which holds the fork gate.
    pub(crate) fn thread(&self) -> ThreadIdentity {
        self.thread
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}
