//! Stopping the world: the ways to start a collection, waiting for every mutator to park and
//! claiming it, and handing the mutators back when the collection ends or gives up.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::collection::error::{CollectionError, RunningMutator};
use crate::collection::Collection;
use crate::heap::collector_lock::CollectorGuard;
use crate::heap::mutator_handle::Mutator;
use crate::heap::Heap;
use crate::mutator::cell::{MutatorCell, HELD, PARKED, RUNNING};

/// Whether a collection asks the running mutators to stop, or only takes the parked ones.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StopRequest {
    /// Ask every mutator to stop at its next safepoint.
    Stop,
    /// Ask nothing (`try_collection`: it succeeds only if every mutator is already parked).
    None,
}

/// How long [`Heap::collection`] waits before it looks for a running mutator last run by
/// the calling thread itself, which would keep it waiting forever.
const SELF_STOP_CHECK: Duration = Duration::from_secs(10);

/// Releases the stopped world unless defused: a collection that unwinds before it is set up
/// (a panicking object model) lets the mutators run again instead of holding them forever.
struct ReleaseOnUnwind<'h>(Option<&'h Heap>);

impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        if let Some(heap) = self.0 {
            heap.release_mutators(false);
        }
    }
}

impl Heap {
    /// Stops the world: asks every mutator to stop at its next safepoint
    /// ([`request_collection`](Heap::request_collection)), waits until every mutator is
    /// parked, then retires every LAB and returns the collection. Mutators that unpark
    /// meanwhile wait until it ends. A thread that allocates should collect through
    /// [`Mutator::collect`], which parks its own mutator first.
    ///
    /// **This wait has no bound.** A mutator whose thread never parks keeps it waiting
    /// forever: one that neither allocates nor polls, one that was leaked (`mem::forget`), or
    /// one whose thread died without unwinding. Mutators of threads lost in a `fork` are
    /// forgotten, not waited for. Where that risk is not acceptable, use
    /// [`collection_within`](Heap::collection_within), which gives up and names the mutators
    /// still running.
    ///
    /// # Panics
    /// When the world has not stopped after 10 seconds and a running mutator was last
    /// attached or unparked by the calling thread: the caller holds it running, so the wait
    /// could never end. (A mutator sent to another thread after `attach` counts as the
    /// attaching thread's until it first stops.)
    ///
    /// Also when the calling thread began a collection that has not ended (even if it handed
    /// that collection to another thread): the wait would be for itself.
    /// [`collection_within`](Heap::collection_within) returns
    /// [`CollectionError::AlreadyCollecting`] instead.
    pub fn collection(&self) -> Collection<'_> {
        let guard = self.collector_lock_or_panic("Heap::collection");
        self.stop_the_world(guard, None, StopRequest::Stop)
            .expect("a collection without a deadline stops the world")
    }
    /// Stops the world as [`collection`](Heap::collection) does, giving up after `timeout`:
    /// then the mutators run again and the error
    /// ([`CollectionError::Timeout`]) lists the ones still running, with their threads, since
    /// when, and whether the thread still exists (a leaked mutator, or one whose thread died
    /// without unwinding, never parks).
    ///
    /// ```
    /// use std::time::Duration;
    /// use hab::{CollectionError, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("1MiB").build()?, HeaderWordModel)?;
    /// let forgotten = heap.attach();
    /// std::mem::forget(forgotten); // a running mutator nobody will ever park
    /// match heap.collection_within(Duration::from_millis(10)) {
    ///     Err(CollectionError::Timeout { running, .. }) => assert_eq!(running.len(), 1),
    ///     other => panic!("{other:?}"),
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// A timeout too long for [`Instant`] to hold is no bound. Errors: also
    /// [`CollectionError::InProgress`] (another collection did not end in time) and
    /// [`CollectionError::AlreadyCollecting`] (the calling thread runs one).
    pub fn collection_within(&self, timeout: Duration) -> Result<Collection<'_>, CollectionError> {
        let deadline = Instant::now().checked_add(timeout);
        let guard = self.collector_lock().acquire(deadline)?;
        self.stop_the_world(guard, deadline, StopRequest::Stop)
    }
    /// Becomes the collector without a deadline, or panics naming `call` when the calling
    /// thread began the collection in progress.
    fn collector_lock_or_panic(&self, call: &str) -> CollectorGuard<'_> {
        match self.collector_lock().acquire(None) {
            Ok(guard) => guard,
            Err(_) => panic!("{call}: {}", CollectionError::AlreadyCollecting),
        }
    }
    /// Claims every mutator as it parks, until none runs or `deadline` passes; then retires
    /// the LABs. On timeout releases the claimed mutators and names the running ones.
    fn stop_the_world<'h>(
        &'h self,
        guard: CollectorGuard<'h>,
        deadline: Option<Instant>,
        request: StopRequest,
    ) -> Result<Collection<'h>, CollectionError> {
        let started = Instant::now();
        {
            let mut registry = self.registry();
            registry.stopping = true;
            self.forget_mutators_lost_in_fork(&mut registry);
            if request == StopRequest::Stop {
                self.allocator().safepoints.request();
                MutatorCell::request_safepoints(registry.mutators.iter().map(|cell| &**cell));
            }
        }
        let mut release = ReleaseOnUnwind(Some(self));
        let mut rounds = 0u32;
        let mut looked_for_self_stop = false;
        while self.claim_parked_mutators() > 0 {
            if deadline.is_none() && !looked_for_self_stop && started.elapsed() >= SELF_STOP_CHECK {
                looked_for_self_stop = true;
                let running = self.running_mutators();
                if let Some(own) = running.iter().find(|mutator| mutator.is_calling_thread) {
                    panic!(
                        "Heap::collection waits for mutator {} ({own}), held running by the \
                         calling thread itself: park it first, or collect with Mutator::collect",
                        own.id
                    );
                }
            }
            if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
                let running = self.running_mutators();
                if running.is_empty() {
                    // They parked since the claim: claim them now.
                    continue;
                }
                drop(release);
                return Err(CollectionError::Timeout {
                    waited: started.elapsed(),
                    running,
                });
            }
            rounds += 1;
            if rounds < 64 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        let collection = Collection::begin(self, guard);
        release.0 = None;
        Ok(collection)
    }
    /// The mutators running now (not parked), with the thread each runs on: who a
    /// collection waits for.
    pub fn running_mutators(&self) -> Vec<RunningMutator> {
        let now = Instant::now();
        self.registry()
            .mutators
            .iter()
            .filter(|cell| cell.state.load(Ordering::Acquire) == RUNNING)
            .map(|cell| {
                let thread = cell.thread();
                RunningMutator {
                    id: cell.id,
                    thread_name: thread.name.clone(),
                    thread_id: thread.tid,
                    running_for: now.saturating_duration_since(thread.since),
                    thread_exists: thread.exists_here(),
                    is_calling_thread: thread.is_current(),
                }
            })
            .collect()
    }
    /// Stops the world as [`collection`](Heap::collection) does, unless a collection finished
    /// since the caller saw [`collections`](Heap::collections) return `seen`: then returns
    /// `None` at once. Lets threads that ran out of memory together collect only once.
    ///
    /// ```
    /// use hab::{AllocError, HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("64KiB").build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let seen = heap.collections();
    /// while let Ok(object) = mutator.alloc(64) {
    ///     // SAFETY: 64 fresh bytes owned by this thread.
    ///     unsafe { HeaderWordModel::write_header(object, 64) };
    /// }
    /// mutator.safe_region(|| {
    ///     if let Some(mut collection) = heap.collection_if_none_since(seen) {
    ///         collection.reset();
    ///     }
    /// });
    /// assert_eq!(heap.collections(), 1);
    /// mutator.alloc(64)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Panics
    /// As [`collection`](Heap::collection).
    pub fn collection_if_none_since(&self, seen: u64) -> Option<Collection<'_>> {
        let guard = self.collector_lock_or_panic("Heap::collection_if_none_since");
        if self.collections() != seen {
            return None;
        }
        Some(
            self.stop_the_world(guard, None, StopRequest::Stop)
                .expect("a collection without a deadline stops the world"),
        )
    }
    /// Like [`collection`](Heap::collection) but does not wait: fails if another collection
    /// is in progress or a mutator is running. It asks no mutator to stop.
    pub fn try_collection(&self) -> Result<Collection<'_>, CollectionError> {
        let guard = self.collector_lock().acquire(Some(Instant::now()))?;
        self.stop_the_world(guard, Some(Instant::now()), StopRequest::None)
            .map_err(|error| match error {
                CollectionError::Timeout { running, .. } => CollectionError::MutatorsRunning {
                    running: running.len(),
                },
                other => other,
            })
    }
    /// Claims every parked mutator for the collection; returns how many are still running.
    fn claim_parked_mutators(&self) -> usize {
        let registry = self.registry();
        registry
            .mutators
            .iter()
            .filter(|cell| {
                let claimed =
                    cell.state
                        .compare_exchange(PARKED, HELD, Ordering::Acquire, Ordering::Relaxed);
                matches!(claimed, Err(RUNNING))
            })
            .count()
    }
}

impl Mutator {
    /// Collects from this mutator's thread, as when an allocation finds the heap full: parks
    /// the mutator, stops the world (unless another thread's collection ended since this
    /// mutator last started running, which then served the need: `None`), runs `collect`
    /// on the collection, ends it, and unparks. The mutator keeps running in the same mode
    /// afterwards; its [`epoch`](Mutator::epoch) tells that collections happened.
    ///
    /// ```
    /// use hab::{HeaderWordModel, Heap, HeapConfig};
    /// let heap = Heap::new(HeapConfig::builder().capacity("64KiB").build()?, HeaderWordModel)?;
    /// let mut mutator = heap.attach();
    /// let mut allocated = 0;
    /// while let Ok(object) = mutator.alloc(64) {
    ///     // SAFETY: 64 fresh bytes owned by this thread.
    ///     unsafe { HeaderWordModel::write_header(object, 64) };
    ///     allocated += 1;
    /// }
    /// let walked = mutator.collect(|mut collection| {
    ///     let summary = collection.verify().expect("walkable");
    ///     collection.reset(); // everything died
    ///     summary.objects
    /// });
    /// assert_eq!(walked, Some(allocated));
    /// assert_eq!(mutator.epoch(), 1);
    /// mutator.alloc(64)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn collect<R>(&mut self, collect: impl FnOnce(Collection<'_>) -> R) -> Option<R> {
        let seen = self.epoch();
        let heap = Arc::clone(self.heap());
        self.safe_region(|| heap.collection_if_none_since(seen).map(collect))
    }
}
