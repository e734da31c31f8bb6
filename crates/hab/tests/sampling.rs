//! Allocation sampling: every thread is sampled about every interval of its own allocation,
//! each sample is an object that thread was handed (with its size), in the modes that use
//! TLABs and in `shared`; turning the sampler off stops the samples; and memory stays zero
//! and walkable around samples (the soft end stops at samples and at the zeroed part).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use hab::{
    AllocationSample, AllocationSampler, HeaderWordModel, Heap, HeapConfig, Mode, TlabPolicy,
    ZeroMemory,
};

const INTERVAL_BYTES: usize = 100 << 10;
const OBJECTS_PER_THREAD: usize = 200_000;
const THREADS: usize = 4;

/// Each thread's samples: (mutator id, address, bytes, thread's clock).
type Samples = Arc<Mutex<Vec<(u64, usize, usize, u64)>>>;

fn sampler(samples: &Samples) -> AllocationSampler {
    let samples = samples.clone();
    AllocationSampler::new(INTERVAL_BYTES, move |sample: &AllocationSample| {
        samples.lock().unwrap().push((
            sample.mutator_id,
            sample.address.as_ptr() as usize,
            sample.bytes,
            sample.thread_allocated_bytes,
        ));
    })
}

/// What a thread did: its mutator's id, the objects it was handed (address, bytes) and their
/// total bytes.
type Handed = (u64, HashSet<(usize, usize)>, u64);

/// Object sizes cycling through 16..=256 bytes, so that objects end anywhere.
fn size_of(index: usize) -> usize {
    16 + (index * 8) % 248
}

#[test]
fn every_thread_is_sampled_about_every_interval() {
    for (mode, middle, zero) in [
        (Mode::Tlab, None, ZeroMemory::Ahead),
        (Mode::Tlab, None, ZeroMemory::AtRefill),
        (Mode::Hab, Some("core:1MiB"), ZeroMemory::Ahead),
        (Mode::Shared, None, ZeroMemory::Ahead),
    ] {
        let mut builder = HeapConfig::builder()
            .capacity("1GiB")
            .mode(mode)
            .tlab(TlabPolicy::Adaptive)
            .zero(zero);
        if let Some(levels) = middle {
            builder = builder.middle(levels);
        }
        let heap = Heap::new(builder.build().unwrap(), HeaderWordModel).unwrap();
        let samples: Samples = Arc::default();
        heap.sample_allocations(Some(sampler(&samples)));
        let handed_out: Vec<Handed> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..THREADS)
                .map(|_| {
                    scope.spawn(|| {
                        let mut mutator = heap.attach();
                        let mut objects = HashSet::new();
                        let mut total = 0u64;
                        for index in 0..OBJECTS_PER_THREAD {
                            let bytes = size_of(index);
                            let object = mutator.alloc(bytes).unwrap();
                            // SAFETY: `object` is `bytes` fresh bytes owned by this thread.
                            unsafe { HeaderWordModel::write_header(object, bytes) };
                            objects.insert((object.as_ptr() as usize, bytes));
                            total += bytes as u64;
                        }
                        (mutator.id(), objects, total)
                    })
                })
                .collect();
            threads.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let samples = samples.lock().unwrap().clone();
        for (id, objects, total) in &handed_out {
            let mine: Vec<_> = samples.iter().filter(|s| s.0 == *id).collect();
            let expected = *total / INTERVAL_BYTES as u64;
            assert!(
                (mine.len() as u64).abs_diff(expected) <= 1,
                "{mode} {zero:?}: thread {id} allocated {total} bytes, sampled {} times, \
                 expected about {expected}",
                mine.len()
            );
            let mut last_clock = 0;
            for &&(_, address, bytes, clock) in &mine {
                assert!(
                    objects.contains(&(address, bytes)),
                    "{mode}: sample {address:#x}+{bytes} is not an object thread {id} got"
                );
                assert!(
                    clock >= last_clock + INTERVAL_BYTES as u64,
                    "{mode}: samples closer than the interval ({last_clock} then {clock})"
                );
                assert!(clock <= *total);
                last_clock = clock;
            }
        }
        // The heap still walks: the soft end's stops left no gap and no overlap.
        let mut collection = heap.collection();
        let summary = collection.verify().unwrap();
        let objects: usize = handed_out.iter().map(|(_, o, _)| o.len()).sum();
        assert_eq!(summary.objects as usize, objects, "{mode}");
        collection.reset();
    }
}

#[test]
fn turning_the_sampler_off_stops_the_samples() {
    let heap = Heap::new(
        HeapConfig::builder().capacity("256MiB").build().unwrap(),
        HeaderWordModel,
    )
    .unwrap();
    let samples: Samples = Arc::default();
    heap.sample_allocations(Some(sampler(&samples)));
    let mut mutator = heap.attach();
    let mut allocate = |count: usize| {
        for _ in 0..count {
            let object = mutator.alloc(64).unwrap();
            // SAFETY: `object` is 64 fresh bytes owned by this thread.
            unsafe { HeaderWordModel::write_header(object, 64) };
        }
    };
    allocate(100_000);
    let sampled = samples.lock().unwrap().len();
    assert!(
        sampled >= 60,
        "6.4 MB at 100 KiB intervals: {sampled} samples"
    );
    heap.sample_allocations(None);
    // The sample armed before still sends the thread to its slow path once, which finds the
    // sampler gone.
    allocate(200_000);
    assert_eq!(samples.lock().unwrap().len(), sampled);
}
