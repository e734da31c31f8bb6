//! Which refills the slow path's short line serves: every refill of a policy that keeps its
//! size, none of one that resizes at refills, and the rest when something unusual is pending.

use hab::{AllocationSampler, HeaderWordModel, Heap, HeapConfig, TlabPolicy};

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
