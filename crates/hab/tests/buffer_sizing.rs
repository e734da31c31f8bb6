//! The middle levels' buffers follow the allocation where `auto` picked them: each collection
//! resizes them from what the level took in the cycle that ended (`levels/buffer_sizing.rs`),
//! the statistics say the size, and the heap walks cleanly after every collection. Given
//! levels keep their size.

mod common;

use std::sync::Arc;

use common::write_header;
use hab::{Heap, HeapConfig, Level, Mode, Mutator, TlabPolicy};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

/// A 64 MiB `hab` heap with 2 KiB TLABs on a simulated machine of four cores, `middle` its
/// levels (`auto`: a `core` level of 64 MiB / (4 × 16) = 1 MiB buffers).
fn heap(middle: &str) -> Arc<Heap> {
    common::heap(
        HeapConfig::builder()
            .capacity(64 * MIB)
            .mode(Mode::Hab)
            .tlab(TlabPolicy::Fixed(2 * KIB))
            .middle(middle)
            .simulated_topology("1x4x1"),
    )
}

/// Allocates `bytes` of 64-byte objects, then collects (verifying the walk, freeing the whole
/// range for the next cycle); returns the
/// lowest level's buffer size after the collection, by both ways of asking.
fn cycle(mutator: &mut Option<Mutator>, bytes: usize) -> usize {
    let mut running = mutator.take().expect("a mutator");
    for _ in 0..bytes / 64 {
        let object = running
            .alloc(64)
            .expect("room: the cycle stays in the range");
        write_header(object, 64);
    }
    let heap = Arc::clone(running.heap());
    let parked = running.park();
    {
        let mut collection = heap.collection();
        let walk = collection.verify().expect("the heap walks cleanly");
        assert_eq!(walk.objects as usize, bytes / 64);
        collection.reset();
    }
    *mutator = Some(parked.unpark());
    let from_levels = heap.middle_levels()[0].buffer_bytes;
    let from_stats = heap.stats().totals.levels[Level::Core.index()].buffer_bytes;
    assert_eq!(
        from_levels as u64, from_stats,
        "the statistics say the size"
    );
    from_levels
}

#[test]
fn auto_buffers_grow_with_the_allocation_and_shrink_by_half_at_most() {
    let heap = heap("auto");
    assert!(heap.config().buffers_follow_allocation());
    assert_eq!(heap.middle_levels()[0].level, Level::Core);
    assert_eq!(heap.middle_levels()[0].buffer_bytes, MIB);
    assert_eq!(
        heap.stats().totals.levels[Level::Core.index()].buffer_bytes,
        MIB as u64
    );
    let mut mutator = Some(heap.attach());
    // 32 MiB through one domain (one thread): about 32 refills of 1 MiB, 2 MiB per refill at
    // 16 refills per cycle.
    assert_eq!(cycle(&mut mutator, 32 * MIB), 2 * MIB);
    // 4 MiB: 2 refills of 2 MiB would want 512 KiB; a buffer halves at most per cycle.
    assert_eq!(cycle(&mut mutator, 4 * MIB), MIB);
    assert_eq!(cycle(&mut mutator, 4 * MIB), 512 * KIB);
    // Nothing: halves again, not below four TLABs.
    for _ in 0..8 {
        cycle(&mut mutator, 0);
    }
    assert_eq!(cycle(&mut mutator, 0), 8 * KIB);
}

#[test]
fn given_levels_keep_their_size() {
    let heap = heap("core:1MiB");
    assert!(!heap.config().buffers_follow_allocation());
    let mut mutator = Some(heap.attach());
    assert_eq!(cycle(&mut mutator, 32 * MIB), MIB);
    assert_eq!(cycle(&mut mutator, 0), MIB);
}
