//! Which refills the slow path's short line serves: every refill of a policy that keeps its
//! size, none of one that resizes at refills, and the rest when something unusual is pending;
//! and what a refill that finds no chunk leaves in the TLAB it keeps.

use hab::{AllocationSampler, HeaderWordModel, Heap, HeapConfig, Mode, TlabPolicy, ZeroMemory};

fn count_refills(policy: TlabPolicy, sample: bool) -> (u64, u64) {
    let config = HeapConfig::builder()
        .capacity("16MiB")
        .tlab(policy)
        .build()
        .unwrap();
    let heap = Heap::new(config, HeaderWordModel).unwrap();
    if sample {
        heap.sample_allocations(Some(AllocationSampler::new(64 << 10, |_| {})));
    }
    let mut mutator = heap.attach();
    for _ in 0..100_000 {
        let object = mutator.alloc(16).unwrap();
        // SAFETY: 16 fresh bytes of this thread's.
        unsafe { HeaderWordModel::write_header(object, 16) };
    }
    let stats = mutator.stats();
    (stats.refills, stats.full_path_refills)
}

#[test]
fn a_policy_that_keeps_its_size_refills_on_the_short_line() {
    for policy in [TlabPolicy::Fixed(4096), TlabPolicy::Adaptive] {
        let (refills, full) = count_refills(policy, false);
        assert!(refills > 1, "{policy:?}: {refills} refills");
        assert_eq!(
            full, 0,
            "{policy:?}: {full} of {refills} took the full path"
        );
    }
}

#[test]
fn a_growing_policy_and_sampling_take_the_full_path() {
    let (refills, full) = count_refills(TlabPolicy::Growing, false);
    assert!(refills > 1);
    assert_eq!(full, refills, "the growing policy resizes at every refill");
    let (refills, full) = count_refills(TlabPolicy::Fixed(4096), true);
    assert!(refills > 1);
    assert_eq!(
        full, refills,
        "sampling sends every refill to the full path"
    );
}

/// An object allocated outside a kept TLAB raises the refill waste limit; the refill after it
/// is a full one (which resets the limit), and the short line serves the refills after that.
#[test]
fn the_refill_after_a_kept_tlab_takes_the_full_path() {
    let config = HeapConfig::builder()
        .capacity("16MiB")
        .tlab(TlabPolicy::Fixed(4096))
        .build()
        .unwrap();
    let heap = Heap::new(config, HeaderWordModel).unwrap();
    let mut mutator = heap.attach();
    let mut allocate = |bytes| {
        let object = mutator.alloc(bytes).unwrap();
        // SAFETY: `bytes` fresh bytes of this thread's.
        unsafe { HeaderWordModel::write_header(object, bytes) };
    };
    for _ in 0..128 {
        allocate(16);
    }
    // Past the TLAB's free bytes (about 2 KiB), which are above the limit (4096 / 64): the
    // TLAB is kept.
    allocate(3000);
    for _ in 0..10_000 {
        allocate(16);
    }
    let stats = mutator.stats();
    assert!(stats.refills > 2, "{} refills", stats.refills);
    assert_eq!(
        stats.full_path_refills, 1,
        "only the refill after the kept TLAB"
    );
}

/// Where the lowest level is the restartable `cpu` level (glibc's registration: every thread's
/// area at one offset) or a compare-and-swap `core` level (the CPU read from that area), a
/// fixed size refills on the short line from the thread's buffer: only the refills that find
/// that buffer empty (one in 64 here, with 4 KiB TLABs and 256 KiB buffers, and the first)
/// take the full path, and every TLAB is counted at the level.
#[test]
fn a_lowest_level_refills_on_the_short_line() {
    if !matches!(hab::rseq_mechanism(), hab::RseqMechanism::Glibc { .. }) {
        eprintln!(
            "skipped: no glibc rseq registration here ({})",
            hab::rseq_mechanism()
        );
        return;
    }
    for (middle, level) in [
        ("cpu:256KiB", hab::Level::Cpu),
        ("core:256KiB", hab::Level::Core),
    ] {
        let config = HeapConfig::builder()
            .capacity("64MiB")
            .mode(hab::Mode::Hab)
            .middle(middle)
            .tlab(TlabPolicy::Fixed(4096))
            .build()
            .unwrap();
        let heap = Heap::new(config, HeaderWordModel).unwrap();
        let mut mutator = heap.attach();
        for _ in 0..200_000 {
            let object = mutator.alloc(16).unwrap();
            // SAFETY: 16 fresh bytes of this thread's.
            unsafe { HeaderWordModel::write_header(object, 16) };
        }
        let stats = mutator.stats();
        assert!(stats.refills > 500, "{middle}: {} refills", stats.refills);
        assert!(
            stats.full_path_refills * 32 < stats.refills,
            "{middle}: {} of {} refills took the full path",
            stats.full_path_refills,
            stats.refills
        );
        assert_eq!(
            stats.levels[level.index()].allocs,
            stats.refills,
            "{middle}: every TLAB came from the level"
        );
    }
}

/// A refill covers the old TLAB's tail with a filler before it carves; when the range has no
/// TLAB left but room for the object outside one, the TLAB stays in use, and the objects
/// bumped afterwards into that tail still find zeroes (in a heap that zeroes: ahead, at the
/// refill, in fresh and in reused memory).
#[test]
fn a_refill_that_finds_no_chunk_leaves_the_kept_tail_zeroed() {
    for zero in [ZeroMemory::Ahead, ZeroMemory::AtRefill] {
        let config = HeapConfig::builder()
            .capacity("64KiB")
            .mode(Mode::Tlab)
            .tlab(TlabPolicy::Fixed(2048))
            .min_tlab(2048)
            .zero(zero)
            .build()
            .unwrap();
        let heap = Heap::new(config, HeaderWordModel).unwrap();
        let mut mutator = heap.attach();
        // A range of two TLABs and a 48-byte object past them, in fresh memory, then in memory
        // the first round wrote; the first TLAB retired after one object.
        for round in 0..2 {
            mutator.collect(|mut collection| {
                let start = heap.reserved_range().start;
                collection
                    .set_allocation_range(start..start + 2 * 2048 + 48)
                    .unwrap();
                collection.finish();
            });
            mutator.alloc(16).unwrap();
            mutator.retire();
            let mut not_zeroed = Vec::new();
            let mut objects = 0;
            for bytes in [48; 43].into_iter().chain([16]) {
                let Ok(object) = mutator.alloc(bytes) else {
                    continue;
                };
                objects += 1;
                // SAFETY: `bytes` fresh bytes of this thread's; mapped memory is initialised.
                let contents = unsafe { std::slice::from_raw_parts(object.as_ptr(), bytes) };
                if contents.iter().any(|&byte| byte != 0) {
                    not_zeroed.push((object.as_ptr() as usize, bytes));
                }
                // SAFETY: as above; the object is the thread's to write (a pattern, then the
                // header the heap walk reads).
                unsafe {
                    std::ptr::write_bytes(object.as_ptr(), 0xa5, bytes);
                    HeaderWordModel::write_header(object, bytes);
                }
            }
            assert!(objects > 40, "{zero:?}, round {round}: {objects} objects");
            assert!(
                not_zeroed.is_empty(),
                "{zero:?}, round {round}: not zeroed: {not_zeroed:x?}"
            );
            let stats = mutator.stats();
            assert!(stats.slow_allocs > 0, "{zero:?}: {stats:?}");
        }
    }
}
