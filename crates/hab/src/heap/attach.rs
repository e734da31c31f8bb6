//! Mutators joining and leaving a heap: attaching one, detaching and unparking, releasing
//! them after a collection, and forgetting those of threads a `fork` left behind.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::heap::mutator_handle::Mutator;
use crate::heap::registry::{Registry, RegistryGuard};
use crate::heap::Heap;
use crate::labs::sizing::TlabSizer;
use crate::labs::tlab::Waste;
use crate::mutator::cell::{MutatorCell, MutatorLocal, HELD, PARKED, RUNNING};
use crate::mutator::sampling::NextSample;
use crate::mutator::stats::Counters;
use crate::platform::cpu_id::SimulatedCpu;
use crate::platform::process::ForkWatcher;

impl Heap {
    /// Registers a new mutator for the calling thread (or one it will be sent to). Waits while
    /// a collection is in progress.
    ///
    /// # Panics
    /// When the calling thread began a collection that has not ended
    /// ([`is_collecting_thread`](Heap::is_collecting_thread)): it would wait for itself.
    pub fn attach(self: &Arc<Self>) -> Mutator {
        self.refuse_wait_for_own_collection("Heap::attach");
        let mut registry = self.registry();
        while registry.stopping {
            registry = self.wait_for_resume(registry);
        }
        self.forget_mutators_lost_in_fork(&mut registry);
        let (start, end) = self.global().range();
        let sizer = TlabSizer::new(
            self.config(),
            end - start,
            registry.allocating_threads.average(),
            self.allocator.space.lab_reserve_bytes(),
        );
        let counters = Counters::default();
        counters
            .desired_size_bytes
            .set(sizer.desired_bytes() as u64);
        let id = MutatorCell::next_id();
        let local = MutatorLocal {
            sizer,
            allocated_at_last_collection: 0,
            refills_at_last_collection: 0,
            simulated_cpu: SimulatedCpu::new(self.cpu_id(), registry.attached),
            in_cpu_labs: false,
            next_sample: NextSample::default(),
            end_of_cycle: self.allocator.end_of_cycle.new_thread(end),
        };
        let cell = Arc::new(MutatorCell::new(
            id,
            local,
            counters,
            self.collections(),
            self.allocator.sampling.full_path_size_bits(),
        ));
        if self.allocator.safepoints.pending() {
            cell.request_safepoint_before_running();
        }
        registry.attached += 1;
        registry.mutators.push(cell.clone());
        drop(registry);
        Mutator::new(cell, self.clone())
    }

    /// After a `fork`, removes the mutators of the parent's threads that do not exist in
    /// this process (they will never park), retiring their TLABs and keeping their counters;
    /// the forking thread's mutators are kept as this process's.
    pub(crate) fn forget_mutators_lost_in_fork(&self, registry: &mut Registry) {
        let forked = |cell: &Arc<MutatorCell>| cell.thread().belongs_to_another_process();
        if !registry.mutators.iter().any(forked) {
            return;
        }
        let mut kept = Vec::with_capacity(registry.mutators.len());
        for cell in std::mem::take(&mut registry.mutators) {
            let thread = cell.thread();
            if !thread.belongs_to_another_process() {
                kept.push(cell);
            } else if thread.exists_here() {
                let mut adopted = thread;
                adopted.adopt_in_this_process();
                cell.set_thread(adopted);
                kept.push(cell);
            } else {
                // SAFETY: the mutator's thread does not exist in this process, so nothing
                // else touches its TLAB; the registry lock keeps collections out.
                let retired = unsafe {
                    cell.lost_thread_tlab()
                        .retire_after_fork(&self.allocator.space)
                };
                cell.counters.count_retired(retired, Waste::Collection);
                let mut stats = cell.counters.snapshot();
                stats.desired_size_bytes = 0;
                registry.detached += stats;
                registry.forgotten_after_fork += 1;
            }
        }
        registry.mutators = kept;
    }
    /// Waits for `resumed` (a collection ended) holding no lock, then locks the registry
    /// again: a fork from another thread never waits for a collection to end, nor copies the
    /// registry locked.
    pub(crate) fn wait_for_resume<'h>(&'h self, guard: RegistryGuard<'h>) -> RegistryGuard<'h> {
        let resumed = self.allocator().safepoints.resumed();
        let seen = resumed.current();
        drop(guard);
        resumed.wait_while(seen, Duration::from_millis(100));
        self.registry()
    }
    /// Detaches a parked mutator (its handle is dropped) without waiting for a collection
    /// that holds it: that collection removes it when it ends (its TLAB was retired when the
    /// collection began), so that a thread holding a collection can drop its own parked
    /// mutators. Returns `false` when no collection holds it: then it is running again, and
    /// the caller retires its TLAB and detaches it.
    pub(crate) fn detach_parked(&self, cell: &Arc<MutatorCell>) -> bool {
        let _registry = self.registry();
        // Collections claim (PARKED → HELD) and release only with the registry locked.
        if cell.state.load(Ordering::Acquire) == HELD {
            cell.detach_when_released.store(true, Ordering::Relaxed);
            return true;
        }
        let resumed =
            cell.state
                .compare_exchange(PARKED, RUNNING, Ordering::Acquire, Ordering::Relaxed);
        debug_assert!(resumed.is_ok(), "a parked mutator's handle detaches it");
        false
    }
    /// Removes a running mutator whose TLAB is already retired, keeping its counters.
    pub(crate) fn detach(&self, cell: &Arc<MutatorCell>) {
        let mut registry = self.registry();
        registry.mutators.retain(|other| !Arc::ptr_eq(other, cell));
        let mut stats = cell.counters.snapshot();
        stats.desired_size_bytes = 0;
        registry.detached += stats;
        drop(registry);
        self.allocator().safepoints.resumed().advance();
    }
    /// Ends a stop of the world: counts the collection if one ran, withdraws every request
    /// (a collection satisfies those made before it ended; one that gave up withdraws them),
    /// hands every claimed mutator back to its thread and lets waiting threads go on.
    pub(crate) fn release_mutators(&self, collected: bool) {
        let mut registry = self.registry();
        let safepoints = &self.allocator().safepoints;
        safepoints.end_stop(collected);
        let mut detached = Vec::new();
        let heap_bits = self.allocator().sampling.full_path_size_bits();
        for cell in &registry.mutators {
            cell.clear_safepoint(heap_bits);
            let released =
                cell.state
                    .compare_exchange(HELD, PARKED, Ordering::Release, Ordering::Relaxed);
            if released.is_ok() && cell.detach_when_released.load(Ordering::Relaxed) {
                detached.push(cell.clone());
            }
        }
        for cell in detached {
            // Its TLAB was retired when the collection began, and nothing carved it another.
            registry.mutators.retain(|other| !Arc::ptr_eq(other, &cell));
            let mut stats = cell.counters.snapshot();
            stats.desired_size_bytes = 0;
            registry.detached += stats;
        }
        registry.stopping = false;
        drop(registry);
        safepoints.resumed().advance();
    }
}

impl ForkWatcher for Heap {
    /// A collection another thread of the parent was running at the fork never ends here:
    /// drop its lock and release the mutators it stopped (withdrawing its requests), so that
    /// the child attaches, allocates and collects.
    fn after_fork_in_child(&self) {
        if self.collector_lock().forget_holder_lost_in_fork() {
            self.release_mutators(false);
        }
    }
}
