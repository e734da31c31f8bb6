//! The end of a cycle, when a collection ends: what the cycle that ends taught every policy,
//! and the next cycle set up, as named steps in the order they must run.
//!
//! 1. [`close_threads_cycles`]: each thread's TLAB sizer learns from its cycle, and its end of
//!    the next cycle is planned (`labs/end_of_cycle.rs`);
//! 2. [`choose_next_mode`]: the flip policy picks TLABs or per-CPU LABs for the next cycle
//!    from what each left unused (`labs/flip.rs`);
//! 3. [`resize_level_buffers`]: `auto` levels' buffers follow the cycle's refills
//!    (`levels/buffer_sizing.rs`);
//! 4. [`install_next_range`], then [`resize_cpu_labs`] for it;
//! 5. the mutators run again.
//!
//! Cost: a pass over the mutators, the levels and the CPUs, once per collection.

use std::sync::atomic::Ordering;

use crate::heap::Heap;
use crate::labs::flip::CycleWaste;
use crate::labs::sizing::CollectionFeedback;
use crate::levels::buffer_sizing;
use crate::levels::stats::LevelStats;
use crate::mutator::stats::AllocationStats;

/// The allocation ranges at the end of a collection.
pub(super) struct Ranges {
    /// The range of the cycle that ends, `(start, end)`.
    pub(super) old: (usize, usize),
    /// Its bytes handed out.
    pub(super) used_bytes: usize,
    /// The next cycle's range (the old one, if the collector kept it).
    pub(super) next: (usize, usize),
    /// Whether the next range is still to be installed (set and not yet allocated in).
    pub(super) install_next: bool,
}

impl Ranges {
    fn next_bytes(&self) -> usize {
        self.next.1 - self.next.0
    }
}

/// What the threads did in the cycle that ends, as the policies after step 1 need it.
struct ThreadsCycle {
    /// Threads that took a TLAB.
    allocating_threads: usize,
    /// Threads that ran in the cycle (the flip compares per-CPU LABs' tails with a LAB each).
    running_threads: u64,
    /// The lowest level's floor: the largest TLAB an allocating thread desires, four
    /// smallest at least.
    buffer_floor_bytes: usize,
}

/// Ends the cycle: every step above, in order. Every mutator is held by the collection.
pub(super) fn end_cycle(heap: &Heap, ranges: Ranges) {
    let threads = close_threads_cycles(heap, &ranges);
    let totals = heap.stats().totals;
    let before = heap.swap_totals_at_last_collection(totals);
    let cycle = totals.since(&before);
    // The first cycle is the first that allocated: a collection before any allocation (an
    // embedder's at start-up) leaves the threads' TLABs as unsized as they were.
    let first = before.allocated_bytes() + before.waste_bytes() == 0;
    let cycle_in_cpu_labs = heap.allocator().allocates_in_cpu_labs();
    choose_next_mode(heap, &cycle, threads.running_threads, first);
    if heap.config().buffers_follow_allocation() {
        resize_level_buffers(heap, &cycle.levels, &threads, ranges.next_bytes());
    }
    if ranges.install_next {
        install_next_range(heap, ranges.next);
    }
    resize_cpu_labs(heap, ranges.next_bytes());
    heap.count_cpu_lab_cycle(cycle_in_cpu_labs);
    heap.release_mutators(true);
}

/// Step 1: each thread's sizer records the cycle (its refills and allocation), its end of
/// the next cycle is planned from its part of the cycle's allocation, and its counters are
/// marked for the next one.
fn close_threads_cycles(heap: &Heap, ranges: &Ranges) -> ThreadsCycle {
    let config = heap.config();
    let (start, end) = ranges.next;
    let mut registry = heap.registry();
    let cycle = heap.collections();
    let end_of_cycle = &heap.allocator().end_of_cycle;
    let mut threads = ThreadsCycle {
        allocating_threads: 0,
        running_threads: 0,
        buffer_floor_bytes: config.min_tlab_bytes().saturating_mul(4),
    };
    // Each thread's allocation in the cycle, in TLABs and outside them, and the full TLABs
    // of the threads that allocated.
    let mut full_tlabs_bytes = 0usize;
    let cycle_bytes: Vec<u64> = registry
        .mutators
        .iter()
        .map(|cell| {
            // SAFETY: the mutator is HELD by this collection (see `Collection::begin`).
            let (_, local) = unsafe { cell.held_parts() };
            let bytes = local
                .end_of_cycle
                .allocated_since_plan(cell.counters.tlab_and_outside_bytes());
            if bytes > 0 {
                full_tlabs_bytes = full_tlabs_bytes.saturating_add(local.sizer.desired_bytes());
            }
            bytes
        })
        .collect();
    let all_cycle_bytes = cycle_bytes.iter().sum();
    let end_matters = end_of_cycle.matters(full_tlabs_bytes, end - start);
    for (cell, &thread_cycle_bytes) in registry.mutators.iter().zip(&cycle_bytes) {
        threads.running_threads += u64::from(cell.running_since.load(Ordering::Relaxed) == cycle);
        // SAFETY: the mutator is HELD by this collection (see `Collection::begin`).
        let (_, local) = unsafe { cell.held_parts() };
        let stats = cell.counters.snapshot();
        let refills = stats.refills - local.refills_at_last_collection;
        threads.allocating_threads += usize::from(refills > 0);
        local.sizer.record_collection(
            config,
            CollectionFeedback {
                refills,
                allocated_bytes: stats.tlab_and_outside_bytes()
                    - local.allocated_at_last_collection,
                used_bytes: ranges.used_bytes,
                old_capacity_bytes: ranges.old.1 - ranges.old.0,
                new_capacity_bytes: end - start,
            },
        );
        end_of_cycle.plan(
            &mut local.end_of_cycle,
            (start, end),
            (thread_cycle_bytes, all_cycle_bytes),
            stats.tlab_and_outside_bytes(),
            (local.sizer.desired_bytes(), end_matters),
        );
        if refills > 0 {
            threads.buffer_floor_bytes =
                threads.buffer_floor_bytes.max(local.sizer.desired_bytes());
        }
        local.refills_at_last_collection = stats.refills;
        local.allocated_at_last_collection = stats.tlab_and_outside_bytes();
        cell.counters
            .desired_size_bytes
            .set(local.sizer.desired_bytes() as u64);
    }
    registry
        .allocating_threads
        .sample(threads.allocating_threads as f64);
    threads
}

/// Step 2: the flip policy, from what TLABs and per-CPU LABs (with, for threads without
/// rseq, the per-CPU compare-and-swap buffers) left unused over the cycle.
fn choose_next_mode(heap: &Heap, cycle: &AllocationStats, running_threads: u64, first: bool) {
    heap.allocator().end_cycle(CycleWaste {
        unused_tlab_bytes: cycle.tlab_waste_bytes(),
        unused_lab_bytes: cycle.cpu_lab.unused_bytes() + cycle.middle_waste_bytes(),
        running_threads,
        cycle_bytes: cycle.allocated_bytes() + cycle.waste_bytes(),
        first,
    });
}

/// Step 3: resizes the middle levels' buffers for the next cycle from what each level did in
/// the cycle that ended (`cycle`, indexed by [`Level::index`](crate::Level::index)), the
/// threads that allocated in it and the largest TLAB they desire (the lowest level's floor),
/// and the bytes of the next range; records the sizes in the collector's figures.
fn resize_level_buffers(
    heap: &Heap,
    cycle: &[LevelStats],
    threads: &ThreadsCycle,
    range_bytes: usize,
) {
    let levels = heap.allocator().levels();
    let sizes = buffer_sizing::resize(
        levels,
        // Refills cut short at the end of the cycle measure the end, not the allocation.
        |level| {
            cycle[level.index()]
                .refills
                .saturating_sub(cycle[level.index()].short_refills)
        },
        threads.allocating_threads,
        range_bytes,
        None,
        threads.buffer_floor_bytes,
    );
    for (level, bytes) in levels.iter().zip(sizes) {
        heap.collector().levels[level.level().index()]
            .buffer_bytes
            .set(bytes as u64);
    }
}

/// Step 4: the next range, where the collector set one that is not installed yet.
fn install_next_range(heap: &Heap, (start, end): (usize, usize)) {
    heap.global().reset_range(start, end);
}

/// Step 4, continued: the per-CPU LABs' size for the next range and the CPUs online now.
fn resize_cpu_labs(heap: &Heap, range_bytes: usize) {
    if let Some(cpu_labs) = heap.cpu_labs() {
        cpu_labs.resize(
            heap.config(),
            range_bytes,
            heap.topology().online_cpus().len(),
        );
    }
}
