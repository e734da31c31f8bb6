//! Safepoints: how a collection asks the mutators to stop, and how a mutator stops and
//! resumes.
//!
//! A request sets each mutator's poll word and trips its TLAB (its soft end becomes 0), so
//! the owner stops at its next poll or TLAB allocation. Stopping is parking: the owner
//! publishes PARKED, sleeps until the collection that satisfies the request has ended (its
//! poll word is cleared), then unparks. A request is satisfied by the next collection to end,
//! or withdrawn by a collection that gives up; both clear every poll word with the registry
//! locked, which is also where requests are made, so a request is never cleared unseen.
//!
//! Cost: nothing on the allocation fast path (the trip reuses its compare); one load and a
//! branch per poll.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::mutator::cell::{MutatorCell, PARKED, RUNNING};
use crate::platform::process::Epoch;

/// How long a sleeper waits on an epoch before looking again (a backstop: every change
/// advances the epoch it sleeps on).
const RECHECK: Duration = Duration::from_millis(100);

/// A heap's collection count, its pending request and the epochs sleepers wait on.
#[derive(Default)]
pub(crate) struct Safepoints {
    /// Collections finished.
    collections: AtomicU64,
    /// The collection count that satisfies every request made so far: a request is pending
    /// while it is above `collections`. Written with the registry locked.
    wanted: AtomicU64,
    /// Advances when a collection ends, gives up, or a stopped attach may proceed.
    resumed: Epoch,
    /// Advances when a collection is requested.
    requested: Epoch,
}

impl Safepoints {
    /// Collections finished so far.
    pub(crate) fn collections(&self) -> u64 {
        self.collections.load(Ordering::Acquire)
    }

    /// Whether a collection is requested and has not ended yet.
    pub(crate) fn pending(&self) -> bool {
        self.wanted.load(Ordering::Acquire) > self.collections()
    }

    /// Records a request, satisfied by the next collection to end. The caller holds the
    /// registry locked and then asks every mutator to stop
    /// ([`MutatorCell::request_safepoints`]).
    pub(crate) fn request(&self) {
        self.wanted.store(self.collections() + 1, Ordering::Release);
        self.requested.advance();
    }

    /// Ends a stop of the world: counts the collection if one ran, and withdraws every
    /// request (the caller, holding the registry locked, clears every poll word).
    pub(crate) fn end_stop(&self, collected: bool) {
        if collected {
            self.collections.fetch_add(1, Ordering::AcqRel);
        }
        self.wanted.store(self.collections(), Ordering::Release);
    }

    /// Advances when a collection ends or gives up.
    pub(crate) fn resumed(&self) -> &Epoch {
        &self.resumed
    }

    /// Sleeps until a collection is requested or `timeout` passes; returns whether one is.
    pub(crate) fn wait_for_request(&self, timeout: Duration) -> bool {
        // A deadline past what `Instant` holds is no deadline.
        let deadline = std::time::Instant::now().checked_add(timeout);
        loop {
            let seen = self.requested.current();
            if self.pending() {
                return true;
            }
            let left = match deadline {
                Some(deadline) => {
                    match deadline.checked_duration_since(std::time::Instant::now()) {
                        Some(left) => left,
                        None => return false,
                    }
                }
                None => RECHECK,
            };
            self.requested.wait_while(seen, left.min(RECHECK));
        }
    }

    /// The owner parks its mutator: a collection may claim it from now on. Its TLAB is
    /// tripped first, so that code inlining the fast path (a JIT, `hab.h`'s `hab_alloc`) on a
    /// parked mutator misses and reaches the slow path, which refuses; the first allocation
    /// after unparking raises the soft end again.
    pub(crate) fn park(cell: &MutatorCell) {
        cell.trip_tlab();
        cell.state.store(PARKED, Ordering::Release);
    }

    /// The owner resumes a parked mutator, first waiting for a collection holding it to end.
    pub(crate) fn unpark(&self, cell: &MutatorCell) {
        loop {
            let seen = self.resumed.current();
            let resumed =
                cell.state
                    .compare_exchange(PARKED, RUNNING, Ordering::Acquire, Ordering::Relaxed);
            if resumed.is_ok() {
                break;
            }
            // HELD: the collection hands it back (PARKED) before it advances `resumed`.
            self.resumed.wait_while(seen, RECHECK);
        }
        cell.running_since
            .store(self.collections(), Ordering::Relaxed);
        cell.mark_running();
    }

    /// The owner stops at a safepoint: parks, sleeps until the request is satisfied or
    /// withdrawn, and unparks. Returns how many collections ended meanwhile.
    #[cold]
    #[inline(never)]
    pub(crate) fn stop(&self, cell: &MutatorCell) -> u64 {
        let before = cell.running_since.load(Ordering::Relaxed);
        Self::park(cell);
        loop {
            let seen = self.resumed.current();
            if !cell.safepoint_requested_after_raise() {
                break;
            }
            self.resumed.wait_while(seen, RECHECK);
        }
        self.unpark(cell);
        cell.running_since.load(Ordering::Relaxed) - before
    }
}
