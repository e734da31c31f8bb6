//! Stopping the world: the ways to start a collection, waiting for every mutator to park and
//! claiming it, and handing the mutators back when the collection ends or gives up.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::collection::error::{CollectionError, RunningMutator};
use crate::collection::Collection;
use crate::heap::collector_lock::CollectorGuard;
use crate::heap::Heap;
use crate::mutator::cell::{HELD, PARKED, RUNNING};

/// Releases the stopped world unless defused: a collection that unwinds before it is set up
/// (a panicking object model) lets the mutators run again instead of holding them forever.
struct ReleaseOnUnwind<'h>(Option<&'h Heap>);

impl Drop for ReleaseOnUnwind<'_> {
    fn drop(&mut self) {
        if let Some(heap) = self.0 {
            heap.release_mutators();
        }
    }
}

impl Heap {
    /// Stops the world: waits until every mutator is parked, then retires every TLAB and
    /// returns the collection. Mutators that unpark meanwhile wait until it ends.
    ///
    /// **This wait has no bound.** A mutator whose thread never parks keeps it waiting
    /// forever: a running [`Mutator`](crate::Mutator) held by the calling thread (park it first), one that was
    /// leaked (`mem::forget`), or one whose thread died without unwinding. Mutators of threads
    /// lost in a `fork` are forgotten, not waited for. Where that risk is not acceptable, use
    /// [`collection_within`](Heap::collection_within), which gives up and names the mutators
    /// still running.
    pub fn collection(&self) -> Collection<'_> {
        let guard = self.collector_lock().acquire(None).expect("no deadline");
        self.stop_the_world(guard, None)
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
    pub fn collection_within(&self, timeout: Duration) -> Result<Collection<'_>, CollectionError> {
        let deadline = Instant::now() + timeout;
        let guard = self
            .collector_lock()
            .acquire(Some(deadline))
            .ok_or(CollectionError::InProgress)?;
        self.stop_the_world(guard, Some(deadline))
    }
    /// Claims every mutator as it parks, until none runs or `deadline` passes; then retires
    /// the LABs. On timeout releases the claimed mutators and names the running ones.
    fn stop_the_world<'h>(
        &'h self,
        guard: CollectorGuard<'h>,
        deadline: Option<Instant>,
    ) -> Result<Collection<'h>, CollectionError> {
        let started = Instant::now();
        {
            let mut registry = self.registry();
            registry.stopping = true;
            self.forget_mutators_lost_in_fork(&mut registry);
        }
        let mut release = ReleaseOnUnwind(Some(self));
        let mut rounds = 0u32;
        while self.claim_parked_mutators() > 0 {
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
    pub fn collection_if_none_since(&self, seen: u64) -> Option<Collection<'_>> {
        let guard = self.collector_lock().acquire(None).expect("no deadline");
        if self.collections() != seen {
            return None;
        }
        Some(
            self.stop_the_world(guard, None)
                .expect("a collection without a deadline stops the world"),
        )
    }
    /// Like [`collection`](Heap::collection) but does not wait: fails if another collection
    /// is in progress or a mutator is running.
    pub fn try_collection(&self) -> Result<Collection<'_>, CollectionError> {
        let guard = self
            .collector_lock()
            .acquire(Some(Instant::now()))
            .ok_or(CollectionError::InProgress)?;
        self.stop_the_world(guard, Some(Instant::now()))
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
    /// Hands every claimed mutator back to its thread and lets waiting threads go on.
    pub(crate) fn release_mutators(&self) {
        let mut registry = self.registry();
        for cell in &registry.mutators {
            let _ = cell
                .state
                .compare_exchange(HELD, PARKED, Ordering::Release, Ordering::Relaxed);
        }
        registry.stopping = false;
        drop(registry);
        self.resumed().advance();
    }
}
